#!/usr/bin/env bash
# Peer benchmarks (BENCHMARKS.md), group 5: memory and time to terminate with 10,000 idle
# keep-alive connections (crates/lameduck-bench/src/bin/bench_scale.rs), for the lameduck
# example servers (delay 0, close-listener mode: idle keep-alive connections are closed at
# NotAcceptingNewRequest) and the peers. The client (this harness) and each server are separate
# processes, each under the 20,000 file-descriptor limit.
#
#   scripts/bench-scale.sh [--connections 10000] [--runs 1] [--no-build]
#
# Prints a Markdown table and writes it to crates/lameduck-bench/results/scale.md.
set -euo pipefail
source "$(dirname "$0")/bench-common.sh"
connections=10000
runs=1
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --connections) connections=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $build == 1 ]] && bench_build
if (( $(ulimit -n) < connections + 100 )); then
  ulimit -n "$(ulimit -Hn)" || true
fi
L="--listen 127.0.0.1:0"
mkdir -p "$RESULTS"
{
  echo "machine: $(bench_machine); ulimit -n $(ulimit -n)"
  "$REL/bench_scale" --connections "$connections" --runs "$runs" \
    --server "lameduck tokio (hyper)=$EX/tokio_server $L" \
    --server "lameduck axum=$EX/axum_server $L" \
    --server "lameduck smol (hyper)=$EX/smol_server $L" \
    --server "lameduck actix-web=$EX/actix_server $L" \
    --server "axum with_graceful_shutdown=$REL/bare_axum --graceful-shutdown $L" \
    --server "hyper-util GracefulShutdown=$REL/bare_hyper --graceful-shutdown $L" \
    --server "actix-web defaults=$REL/bare_actix $L"
} | tee "$RESULTS/scale.md"
