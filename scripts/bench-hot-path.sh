#!/usr/bin/env bash
# Peer benchmarks (BENCHMARKS.md), group 1: the admission hot path against its peers, in one
# criterion run (crates/lameduck-bench/benches/hot_path.rs), then heap allocations per admit +
# release (crates/lameduck-bench/src/bin/bench_alloc.rs).
#
#   scripts/bench-hot-path.sh [criterion options...]
#   scripts/bench-hot-path.sh --report-only     re-print the table of the last run
#
# Prints each variant's median as a multiple of the bare fetch_add/fetch_sub pair of the
# same thread setting, and the verdicts of the goals (lameduck's borrowed admit + release
# within 1.25x the bare pair; lameduck no slower than any peer). Criterion's results are
# read from $CRITERION_HOME, else $CARGO_TARGET_DIR/criterion (as scripts/bench-gate.sh).
# Writes the output to crates/lameduck-bench/results/hot-path.md. Exits 2 when results are
# missing; goals are reported, not enforced (scripts/bench-gate.sh is the CI gate).
set -euo pipefail
source "$(dirname "$0")/bench-common.sh"
export CRITERION_HOME=${CRITERION_HOME:-$TARGET_DIR/criterion}

marker=""
if [[ "${1:-}" == "--report-only" ]]; then
  shift
else
  mkdir -p "$CRITERION_HOME"
  marker=$(mktemp "$CRITERION_HOME/.bench-hot-path-start.XXXXXX")
  trap 'rm -f "$marker"' EXIT
  machine=$(bench_machine)
  echo "==> cargo bench -p lameduck-bench --bench hot_path -- --noplot $*" >&2
  cargo bench -p lameduck-bench --bench hot_path -- --noplot "$@"
  cargo build --release -p lameduck-bench --bin bench_alloc >&2
  alloc=$("$REL/bench_alloc")
  # Instructions per admit + release: callgrind totals of N = 0 and N = 200,000 runs of one
  # variant, differenced (start-up cancels), divided by N. Exact and repeatable, unlike times.
  instr=""
  if command -v valgrind >/dev/null; then
    tmp=$(mktemp -d)
    for v in bare_pair lameduck_borrowed lameduck_owned tokio_util_token tokio_util_track_ready \
             hyper_util_watcher hyper_util_watch_ready; do
      for n in 0 200000; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/$v.$n" \
          "$REL/bench_alloc" --only "$v" --ops "$n" >/dev/null 2>&1
      done
      a=$(awk '/^totals:/ {print $2}' "$tmp/$v.0")
      b=$(awk '/^totals:/ {print $2}' "$tmp/$v.200000")
      instr+="$v $a $b"$'\n'
    done
    rm -rf "$tmp"
  fi
fi

mkdir -p "$RESULTS"
{
if [[ -n "$marker" ]]; then
  echo "machine (at start): $machine"
  echo
fi
python3 - "$CRITERION_HOME" "$marker" <<'PY'
import json, os, sys

crit_home, marker = sys.argv[1], sys.argv[2]
since = os.path.getmtime(marker) if marker else None
GROUPS = ["hot_path/single_thread", "hot_path/two_threads"]
VARIANTS = ["bare_pair", "lameduck_borrowed", "lameduck_owned", "tokio_util_token",
            "tokio_util_track_ready", "hyper_util_watcher", "hyper_util_watch_ready"]
PEERS = [v for v in VARIANTS if v.startswith(("tokio_util", "hyper_util"))]

results = {}
for dirpath, _, files in os.walk(crit_home):
    if os.path.basename(dirpath) != "new" or "benchmark.json" not in files:
        continue
    est = os.path.join(dirpath, "estimates.json")
    if not os.path.exists(est) or (since is not None and os.path.getmtime(est) < since):
        continue
    with open(os.path.join(dirpath, "benchmark.json")) as f:
        bench = json.load(f)
    with open(est) as f:
        median = json.load(f)["median"]
    ci = median["confidence_interval"]
    results[(bench["group_id"], bench["function_id"])] = (
        median["point_estimate"], ci["lower_bound"], ci["upper_bound"])

missing = [f"{g}/{v}" for g in GROUPS for v in VARIANTS if (g, v) not in results]
if missing:
    print(f"missing (or stale) results under {crit_home}: {', '.join(missing)}", file=sys.stderr)
    sys.exit(2)

print("| group | variant | median ns | 95% CI of median | x bare pair |")
print("|---|---|---:|---:|---:|")
for g in GROUPS:
    bare = results[(g, "bare_pair")][0]
    for v in VARIANTS:
        m, lo, hi = results[(g, v)]
        print(f"| {g.split('/')[1]} | {v} | {m:.2f} | [{lo:.2f}, {hi:.2f}] | {m / bare:.2f} |")

print()
for g in GROUPS:
    r = lambda v: results[(g, v)][0]
    b = r("lameduck_borrowed") / r("bare_pair")
    fastest_peer = min(PEERS, key=r)
    print(f"- {g.split('/')[1]}: lameduck borrowed = {b:.2f}x the bare pair (goal <= 1.25x: "
          f"{'met' if b <= 1.25 else 'NOT MET'}); owned = {r('lameduck_owned') / r('bare_pair'):.2f}x; "
          f"fastest peer {fastest_peer} = {r(fastest_peer) / r('bare_pair'):.2f}x; "
          f"borrowed no slower than every peer: {'yes' if r('lameduck_borrowed') <= r(fastest_peer) else 'NO'}; "
          f"owned no slower than every peer: {'yes' if r('lameduck_owned') <= r(fastest_peer) else 'NO'} "
          f"(owned / fastest peer = {r('lameduck_owned') / r(fastest_peer):.2f})")
PY
if [[ -n "$marker" ]]; then
  echo
  echo "Heap allocations (bench_alloc):"
  echo
  echo '```'
  echo "$alloc"
  echo '```'
  if [[ -n "$instr" ]]; then
    echo
    echo "Instructions per admit + release (callgrind, single thread; includes the loop and the"
    echo "indirect call of the harness, the same for every variant):"
    echo
    echo "| variant | instructions | x bare pair |"
    echo "|---|---:|---:|"
    awk 'NF==3 {d=($3-$2)/200000; if ($1=="bare_pair") base=d; printf "| %s | %.1f | %.2f |\n", $1, d, d/base}' <<<"$instr"
  fi
fi
} | tee "$RESULTS/hot-path.md"
