#!/usr/bin/env bash
# Fails when a source file is over the line limit: a file that long usually holds two ideas,
# and a module (or a test file) should be one a reader can name.
#
# Usage: scripts/check-file-sizes.sh [dir ...]   (default: every place listed below)
#        MAX_LINES=600 (default) sets the limit.
#
# Checked: every `*.rs` under crates/, tests/, examples/, src/ and fuzz/fuzz_targets/ (test
# code included: integration tests, `tests.rs` unit-test modules, test support); every `*.py`
# under tests/ and scripts/; every `*.go` under tests/. `target/` directories are skipped.
# Exits 1 when any checked file is over the limit, listing them.
set -euo pipefail

cd "$(dirname "$0")/.."
max="${MAX_LINES:-600}"

# Files allowed over the limit for now, one path a line (none at the moment).
allowed=()

# The places checked, and which files in each.
sources() {
    if [ "$#" -gt 0 ]; then
        for dir in "$@"; do
            find "${dir%/}" -name target -prune -o -type f \
                \( -name '*.rs' -o -name '*.py' -o -name '*.go' \) -print0
        done
        return
    fi
    local dir
    for dir in crates tests examples src fuzz/fuzz_targets; do
        [ -d "$dir" ] && find "$dir" -name target -prune -o -type f -name '*.rs' -print0
    done
    for dir in tests scripts; do
        [ -d "$dir" ] && find "$dir" -name target -prune -o -type f -name '*.py' -print0
    done
    [ -d tests ] && find tests -name target -prune -o -type f -name '*.go' -print0
    return 0
}

over=0
checked=0
while IFS= read -r -d '' file; do
    file="${file#./}"
    checked=$((checked + 1))
    lines=$(wc -l <"$file")
    if [ "$lines" -gt "$max" ]; then
        for ok in "${allowed[@]}"; do
            [ "$file" = "$ok" ] && continue 2
        done
        echo "FAIL $file: $lines lines (limit $max)"
        over=$((over + 1))
    fi
done < <(sources "$@" | sort -z)

if [ "$over" -gt 0 ]; then
    echo "$over of $checked files over $max lines"
    exit 1
fi
echo "ok: $checked files, none over $max lines"
