#!/usr/bin/env bash
# Fails when a library source file is over the line limit: a file that long usually holds
# two ideas, and a module should be one a reader can name.
#
# Usage: scripts/check-file-sizes.sh [crate-dir ...]   (default: every crates/*)
#        MAX_LINES=600 (default) sets the limit.
#
# Checked: every crates/<crate>/src/**/*.rs except test code: files named `tests.rs` and
# files under a `tests/` directory inside `src` (unit-test bodies moved out of a module with
# `#[cfg(test)] mod tests;`). Exits 1 when any checked file is over the limit, listing them.
set -euo pipefail

cd "$(dirname "$0")/.."
max="${MAX_LINES:-600}"
if [ "$#" -eq 0 ]; then
    set -- crates/*/
fi

over=0
checked=0
while IFS= read -r -d '' file; do
    case "$file" in
    */tests.rs | */tests/*) continue ;;
    esac
    checked=$((checked + 1))
    lines=$(wc -l <"$file")
    if [ "$lines" -gt "$max" ]; then
        echo "FAIL $file: $lines lines (limit $max)"
        over=$((over + 1))
    fi
done < <(for crate in "$@"; do find "${crate%/}/src" -name '*.rs' -print0; done | sort -z)

if [ "$over" -gt 0 ]; then
    echo "$over of $checked files over $max lines"
    exit 1
fi
echo "ok: $checked files, none over $max lines"
