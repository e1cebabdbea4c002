#!/usr/bin/env python3
"""Builds every quick start the way a new user would: outside this repository.

The quick starts are in README.md and docs/quickstarts.md. For each
`<!-- file: examples/quickstart_NAME.rs -->` block of those documents that has a
`[dependencies]` block before it (in the same `## ` section), this script makes a new cargo
project in a temporary directory, next to a `lameduck` link to this repository (the
dependencies name the crates by path, `../lameduck/crates/NAME`), writes the document's
`[dependencies]` block into its Cargo.toml and the document's code into `src/main.rs`, and runs
`cargo check` there. Nothing of the repository's own workspace, lockfile or examples is used.

Usage: scripts/check-quickstarts.py [--only NAME,...] [--build]
Exit status: 0 when every quick start compiles, 1 otherwise.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"^<!-- file: examples/(quickstart_\w+)\.rs -->$")
# The documents that show quick starts, relative to the repository root.
DOCUMENTS = ["README.md", "docs/quickstarts.md"]


def fenced_blocks(lines, start):
    """The fenced block that opens at or after line `start`: (info, text, next line)."""
    i = start
    while not lines[i].startswith("```"):
        i += 1
    info, body, i = lines[i][3:].strip(), [], i + 1
    while not lines[i].startswith("```"):
        body.append(lines[i])
        i += 1
    return info, "".join(body), i + 1


def quick_starts(text):
    """(name, dependencies block, code) for each marked quick start with a dependencies block."""
    lines = text.splitlines(keepends=True)
    found, section_start = [], 0
    for n, line in enumerate(lines):
        if line.startswith("## "):
            section_start = n
        m = MARKER.match(line.strip())
        if not m:
            continue
        deps = None
        i = section_start
        while i < n:
            if lines[i].startswith("```toml"):
                _, text, i = fenced_blocks(lines, i)
                if text.startswith("[dependencies]"):
                    deps = text
            else:
                i += 1
        if deps is None:
            continue
        _, code, _ = fenced_blocks(lines, n + 1)
        found.append((m.group(1), deps, code))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated quick start names (quickstart_tokio, ...)")
    ap.add_argument("--build", action="store_true", help="cargo build instead of cargo check")
    a = ap.parse_args()
    starts = []
    for doc in DOCUMENTS:
        with open(os.path.join(ROOT, doc)) as f:
            starts.extend(quick_starts(f.read()))
    only = {n.strip() for n in a.only.split(",") if n.strip()}
    if only:
        starts = [s for s in starts if s[0] in only]
    if not starts:
        sys.exit(f"no quick start found in {' or '.join(DOCUMENTS)}")
    work = tempfile.mkdtemp(prefix="lameduck-quickstarts-")
    failed = []
    try:
        os.symlink(ROOT, os.path.join(work, "lameduck"))
        # One target directory for all: the projects share most of their dependencies.
        env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(work, "target"))
        for name, deps, code in starts:
            project = os.path.join(work, name)
            os.makedirs(os.path.join(project, "src"))
            with open(os.path.join(project, "Cargo.toml"), "w") as f:
                f.write(f'[package]\nname = "{name.replace("_", "-")}"\nversion = "0.1.0"\n'
                        f'edition = "2021"\npublish = false\n\n{deps}')
            with open(os.path.join(project, "src", "main.rs"), "w") as f:
                f.write(code)
            cmd = ["cargo", "build" if a.build else "check", "--quiet"]
            print(f"==> {name}: {' '.join(cmd)} in a new project outside the repository", flush=True)
            r = subprocess.run(cmd, cwd=project, env=env, timeout=1800)
            if r.returncode != 0:
                failed.append(name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        print(f"quick starts that do not compile outside the repository: {', '.join(failed)}")
        return 1
    print(f"every quick start compiles outside the repository ({len(starts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
