#!/usr/bin/env bash
# Peer benchmarks (BENCHMARKS.md), group 3: time from SIGTERM to process exit, measured by the
# parent that reaps the server (crates/lameduck-bench/src/bin/bench_term.rs), for the lameduck
# example servers (delay 0, the default) and the peers: axum's with_graceful_shutdown,
# hyper-util's GracefulShutdown, actix-web's defaults.
#
#   scripts/bench-termination.sh [--runs 20] [--no-build]
#
# 1. idle: SIGTERM to an idle server (one GET / served and its connection closed first);
# 2. in flight: SIGTERM while GET /sleep?duration=300ms is in the handler; the interval
#    from the client's complete response to the exit.
# Prints Markdown tables and writes them to crates/lameduck-bench/results/termination.md.
set -euo pipefail
source "$(dirname "$0")/bench-common.sh"
runs=20
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $build == 1 ]] && bench_build
L="--listen 127.0.0.1:0"
servers=(
  --server "lameduck tokio (hyper)=$EX/tokio_server $L"
  --server "lameduck axum=$EX/axum_server $L"
  --server "lameduck smol (hyper)=$EX/smol_server $L"
  --server "lameduck actix-web=$EX/actix_server $L"
  --server "axum with_graceful_shutdown=$REL/bare_axum --graceful-shutdown $L"
  --server "hyper-util GracefulShutdown=$REL/bare_hyper --graceful-shutdown $L"
  --server "actix-web defaults=$REL/bare_actix $L"
)
mkdir -p "$RESULTS"
{
  echo "machine: $(bench_machine)"
  echo
  echo "#### Idle server: SIGTERM → exit ($runs runs each, round-robin)"
  "$REL/bench_term" --runs "$runs" "${servers[@]}"
  echo
  echo "#### In-flight request: GET /sleep?duration=300ms, SIGTERM 100 ms into it ($runs runs each)"
  "$REL/bench_term" --runs "$runs" --in-flight 300ms "${servers[@]}"
} | tee "$RESULTS/termination.md"
