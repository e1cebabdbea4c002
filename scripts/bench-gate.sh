#!/usr/bin/env bash
# Runs the admission-gate benchmarks (crates/lameduck/benches/gate.rs) and prints each
# lameduck variant's median as a ratio of the bare fetch_add/fetch_sub pair measured in the
# same run, for the same thread setting.
#
# Exits 1 when the single-thread borrowed admit + release is slower than
# BENCH_GATE_MAX_RATIO (default 1.5) times the bare pair: the gate's target (BENCHMARKS.md).
# Exits 2 when results are missing. Only ratios within one run mean anything on a shared machine;
# absolute numbers are printed for the record.
#
# Usage:
#   scripts/bench-gate.sh [criterion options...]   e.g. --save-baseline main
#   scripts/bench-gate.sh --report-only            parse the last run's results only
#
# Results are read from $CRITERION_HOME, else $CARGO_TARGET_DIR/criterion, else
# target/criterion (criterion's own order), from each benchmark's new/estimates.json
# (criterion writes the latest run there, also with --save-baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

target_dir=${CARGO_TARGET_DIR:-target}
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
export CRITERION_HOME=${CRITERION_HOME:-$target_dir/criterion}
max_ratio=${BENCH_GATE_MAX_RATIO:-1.5}

marker=""
if [[ "${1:-}" == "--report-only" ]]; then
  shift
else
  mkdir -p "$CRITERION_HOME"
  marker=$(mktemp "$CRITERION_HOME/.bench-gate-start.XXXXXX")
  trap 'rm -f "$marker"' EXIT
  echo "==> cargo bench -p lameduck --bench gate -- --noplot $*" >&2
  cargo bench -p lameduck --bench gate -- --noplot "$@"
fi

python3 - "$CRITERION_HOME" "$max_ratio" "$marker" <<'EOF'
import json, os, sys

crit_home, max_ratio, marker = sys.argv[1], float(sys.argv[2]), sys.argv[3]
since = os.path.getmtime(marker) if marker else None

THREADED = ["admit_release/single_thread", "admit_release/two_threads_contending"]
VARIANTS = ["bare_pair", "borrowed_normal", "owned_normal", "borrowed_long_running"]
SHUTDOWN = ("shutdown_sequence", ["from_serving", "including_setup"])

# (group, function) -> (median, lower, upper) in ns, from every */new/benchmark.json.
results = {}
for dirpath, _, files in os.walk(crit_home):
    if os.path.basename(dirpath) != "new" or "benchmark.json" not in files:
        continue
    est_path = os.path.join(dirpath, "estimates.json")
    if not os.path.exists(est_path):
        continue
    if since is not None and os.path.getmtime(est_path) < since:
        continue  # left over from an earlier run
    with open(os.path.join(dirpath, "benchmark.json")) as f:
        bench = json.load(f)
    with open(est_path) as f:
        median = json.load(f)["median"]
    ci = median["confidence_interval"]
    results[(bench["group_id"], bench["function_id"])] = (
        median["point_estimate"], ci["lower_bound"], ci["upper_bound"])

expected = [(g, v) for g in THREADED for v in VARIANTS] + [(SHUTDOWN[0], f) for f in SHUTDOWN[1]]
missing = [f"{g}/{v}" for g, v in expected if (g, v) not in results]
if missing:
    print(f"missing (or stale) results under {crit_home}: {', '.join(missing)}", file=sys.stderr)
    sys.exit(2)

print(f"{'group':<40} {'benchmark':<22} {'median ns':>11} {'95% CI of median':>19} {'x bare':>7}")
for g in THREADED:
    bare = results[(g, "bare_pair")][0]
    for v in VARIANTS:
        m, lo, hi = results[(g, v)]
        print(f"{g:<40} {v:<22} {m:>11.2f} {f'[{lo:.2f}, {hi:.2f}]':>19} {m / bare:>7.2f}")
g, fs = SHUTDOWN
for v in fs:
    m, lo, hi = results[(g, v)]
    print(f"{g:<40} {v:<22} {m:>11.0f} {f'[{lo:.0f}, {hi:.0f}]':>19} {'':>7}  ({m / 1000:.1f} us)")

ratio = results[(THREADED[0], "borrowed_normal")][0] / results[(THREADED[0], "bare_pair")][0]
verdict = "MET" if ratio <= max_ratio else "NOT MET"
print(f"\ntarget: single-thread borrowed admit+release <= {max_ratio}x bare pair: "
      f"{ratio:.2f}x -> {verdict}")
sys.exit(0 if ratio <= max_ratio else 1)
EOF
