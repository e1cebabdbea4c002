#!/usr/bin/env bash
# Sourced by the peer-benchmark scripts/bench-*.sh (BENCHMARKS.md): target directory, builds,
# machine line.
# Not run directly.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
export CARGO_TARGET_DIR=$TARGET_DIR
REL=$TARGET_DIR/release
EX=$REL/examples
RESULTS=$ROOT/crates/lameduck-bench/results

# Release builds of the bench binaries and of the example servers.
bench_build() {
  echo "==> cargo build --release -p lameduck-bench --bins; cargo build --release --examples" >&2
  cargo build --release -p lameduck-bench --bins >&2
  cargo build --release --examples >&2
}

# One line describing the machine and the code measured.
bench_machine() {
  local model dirty=""
  model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  if [[ -n "$(git -C "$ROOT" status --porcelain -- crates examples 2>/dev/null)" ]]; then
    dirty=" + uncommitted changes under crates/ or examples/"
  fi
  echo "$(date -u +%Y-%m-%dT%H:%MZ); commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$dirty;" \
    "nproc $(nproc), $model, kernel $(uname -r), $(rustc --version | cut -d' ' -f1-2);" \
    "1-min load average $(cut -d' ' -f1 /proc/loadavg)"
}
