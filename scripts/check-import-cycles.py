#!/usr/bin/env python3
"""Checks that no crate's modules import each other in a cycle.

For every crate source directory (default: crates/*/src, relative to the repository root),
each module file (`lib.rs`/`main.rs` is the crate root, `a.rs` or `a/mod.rs` is module `a`,
`a/b.rs` is `a::b`) is read with its comments and string literals removed, and every
`crate::` path in it is taken as an edge to the module it names:

* `use crate::a::b::Item;`, `use crate::{a::Item, b};` and `crate::a::Item` in code all
  name the longest module prefix that is a module file (`a::b` if `a/b.rs` exists, else `a`);
* `crate::Item`, where the crate root re-exports `Item` with `pub use a::...`, names `a`
  (the module that defines it, not the root that merely re-exports it);
* anything else under `crate::` names the crate root.

A module's own inline modules (`mod tests { ... }`) belong to its file. Binaries under
`src/bin/` are crates of their own without module files, and are skipped.

Prints each cycle as `crate: a -> b -> a` and exits 1 if there is any; prints the number of
modules and edges checked and exits 0 otherwise.

Usage: scripts/check-import-cycles.py [SRC_DIR ...]
"""

from __future__ import annotations

import glob
import os
import re
import sys

ROOT = ""  # the crate root's module path


def strip_comments_and_strings(text: str) -> str:
    """Removes `//` and `/* */` comments and string/char literals (kept as empty quotes)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and not (
            i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), or a lifetime ('a) left as is.
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
            if m:
                out.append("''")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_files(src: str) -> dict[str, str]:
    """Module path -> file, for the crate whose sources are in `src`."""
    mods = {}
    for path in glob.glob(os.path.join(src, "**", "*.rs"), recursive=True):
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        if rel.startswith("bin/"):
            continue
        parts = rel[: -len(".rs")].split("/")
        if parts == ["lib"] or parts == ["main"]:
            if parts == ["main"] and os.path.exists(os.path.join(src, "lib.rs")):
                continue  # the binary beside a library is a crate of its own
            mods[ROOT] = path
            continue
        if parts[-1] == "mod":
            parts = parts[:-1]
        mods["::".join(parts)] = path
    return mods


def use_trees(code: str):
    """Yields the full paths of every `crate::` path in `code`, expanding `use` groups."""
    # `use crate::{...};` and `use crate::a::{...};`, with nested groups.
    for m in re.finditer(r"\buse\s+crate\s*::", code):
        end = code.find(";", m.end())
        if end < 0:
            continue
        yield from expand("crate::" + squeeze(code[m.end():end]))
    # Every other `crate::a::b` path in code (expressions, types, `pub(crate)` excluded).
    for m in re.finditer(r"(?<![\w:])crate\s*::\s*((?:\w+\s*::\s*)*\w+)", code):
        before = code[max(0, m.start() - 40):m.start()]
        if re.search(r"\buse\s*$", before):
            continue  # handled above
        yield "crate::" + re.sub(r"\s+", "", m.group(1))


def squeeze(tree: str) -> str:
    """A use tree with its whitespace removed, but for the spaces around `as`."""
    tree = re.sub(r"\s+", " ", tree)
    return re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree).strip()


def expand(tree: str):
    """Expands a use tree such as `crate::{a::{B, C}, d}` into `crate::a::B`, ... paths."""
    if "{" not in tree:
        yield tree.split(" as ")[0].strip()
        return
    start = tree.index("{")
    prefix = tree[:start]
    depth, items, cur = 0, [], ""
    for ch in tree[start + 1:]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item == "self":
            yield prefix.rstrip(":")
        else:
            yield from expand(prefix + item)


def root_reexports(code: str, mods: dict[str, str]) -> dict[str, str]:
    """Item name -> module, for the crate root's `pub use a::...` re-exports."""
    names = {}
    for m in re.finditer(r"\bpub\s+use\s+(?:(?:self|crate)\s*::\s*)?([^;]+);", code):
        for path in expand(squeeze(m.group(1))):
            parts = path.split("::")
            target = longest_module(parts[:-1], mods)
            if target is not None and target != ROOT:
                names[parts[-1]] = target
    return names


def longest_module(parts: list[str], mods: dict[str, str]) -> str | None:
    for k in range(len(parts), 0, -1):
        name = "::".join(parts[:k])
        if name in mods:
            return name
    return None


def graph(src: str) -> tuple[dict[str, set[str]], int]:
    mods = module_files(src)
    code = {m: strip_comments_and_strings(open(f, encoding="utf-8").read()) for m, f in mods.items()}
    reexports = root_reexports(code.get(ROOT, ""), mods)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for module, text in code.items():
        for path in use_trees(text):
            parts = path.split("::")[1:]  # drop `crate`
            if not parts or parts[0] in ("self", "super"):
                continue
            target = longest_module(parts, mods)
            if target is None:
                target = reexports.get(parts[0], ROOT)
            if target != module:
                edges[module].add(target)
    return edges, len(mods)


def cycles(edges: dict[str, set[str]]) -> list[tuple[list[str], set[str]]]:
    """For every strongly connected component of more than one module: a shortest cycle
    through its first module, and the component."""
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(set(scc))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            connect(v)

    found = []
    for scc in sccs:
        start = min(scc)
        found.append((shortest_cycle(start, edges, scc), scc))
    return found


def shortest_cycle(start: str, edges: dict[str, set[str]], scc: set[str]) -> list[str]:
    """The shortest path from `start` back to itself inside its component (breadth first)."""
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v] & scc):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]  # unreachable: `start` is in a cycle


def name(module: str) -> str:
    return module or "crate"


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    dirs = sys.argv[1:] or sorted(glob.glob(os.path.join(repo, "crates", "*", "src")))
    status, total_mods, total_edges = 0, 0, 0
    for src in dirs:
        crate = os.path.basename(os.path.dirname(os.path.abspath(src)))
        edges, count = graph(src)
        total_mods += count
        total_edges += sum(len(e) for e in edges.values())
        for cycle, component in cycles(edges):
            status = 1
            print(f"{crate}: import cycle: " + " -> ".join(name(m) for m in cycle))
            if len(component) > len(cycle) - 1:
                print(f"  (modules in this cycle or others through them: {', '.join(name(m) for m in sorted(component))})")
    if status == 0:
        print(
            f"no import cycles: {len(dirs)} crate(s), {total_mods} modules, "
            f"{total_edges} `crate::` edges"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
