#!/usr/bin/env bash
# Peer benchmarks (BENCHMARKS.md), group 4: drain pacing. For N = 400 and 4,000 open /watch
# streams and a watch grace period G = 5 s, each lameduck example server (delay 0) is sent
# SIGTERM and the completion of every stream is timed
# (crates/lameduck-bench/src/bin/bench_drain.rs); the rate is compared with lameduck's target
# max(N/G, 200).
#
#   scripts/bench-drain.sh [--streams 400,4000] [--no-build]
#
# Writes crates/lameduck-bench/results/drain-N.svg (completions over time),
# drain-N-residual.svg (completions minus the target line), drain-N.csv and drain.md.
set -euo pipefail
source "$(dirname "$0")/bench-common.sh"
streams=400,4000
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --streams) streams=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $build == 1 ]] && bench_build
F="--listen 127.0.0.1:0 --shutdown-watch-termination-grace-period 5s"
mkdir -p "$RESULTS"
{
  echo "machine: $(bench_machine)"
  "$REL/bench_drain" --streams "$streams" --grace 5s --min-qps 200 --out "$RESULTS" \
    --server "tokio (hyper)=$EX/tokio_server $F" \
    --server "axum=$EX/axum_server $F" \
    --server "smol (hyper)=$EX/smol_server $F" \
    --server "actix-web=$EX/actix_server $F"
} | tee "$RESULTS/drain.md"
