#!/usr/bin/env python3
"""Reports import cycles between the modules of every crate under crates/*/src.

Usage: scripts/check-import-cycles.py [-v] [crate-dir ...]   (default: crates/*)
       -v also lists every edge found.

Exits 1 when any crate has a cycle, 0 otherwise; CI runs it.

The nodes are module *files* (`src/gate.rs` is `gate`, `src/gate/owned.rs` is
`gate::owned`); an inline module (`mod owned { .. }`) belongs to its file. An edge
`a -> b` means a's code names something of b: a `use` of `crate::`, `super::`, `self::`
or a child module, or an inline path such as `crate::gate::Gate::new(..)`. Declaring a
submodule (`mod child;`) is containment, not an edge, so a child may use its parent as
long as the parent does not use the child back. Paths through the crate root's
re-exports (`crate::Machine`) are followed to the module that defines the name; the root
file itself (lib.rs, main.rs) is a facade and never a node. Comments, doc comments, string
literals and inline `mod tests { .. }` blocks are ignored, and so are `tests.rs` files and
`tests/` directories under `src` (test code may use anything).
"""

import glob
import os
import re
import sys
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    """Blanks comments and string/char literals, keeping line breaks (for line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 40]) and not re.match(r"\w", text[i - 1:i] or " "):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j + 1))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_use_tree(tree):
    """`a::{b, c::{d as e}}` -> [a::b, a::c::d] (aliases dropped, globs cut at the `*`)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", "@as@", tree))
    depth, brace = 0, None
    for k, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                brace = k
            depth += 1
        elif ch == "}":
            depth -= 1
    if brace is None:
        return [tree.split("@as@")[0].rstrip("*").rstrip(":")]
    prefix, inner = tree[:brace], tree[brace + 1:-1]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    result = []
    for p in parts:
        if not p:
            continue
        if p == "self":
            result.append(prefix.rstrip(":"))
            continue
        result.extend(split_use_tree(prefix + p))
    return result


class Crate:
    def __init__(self, root_file, src_dir):
        self.root_file = root_file
        self.src_dir = src_dir
        self.files = {}  # module path (tuple) -> file
        self.reexports = {}  # root-level name -> module path (tuple)
        self.discover(root_file, ())

    def child_file(self, parent_file, parent_path, name, attr_path):
        base = os.path.dirname(parent_file)
        if attr_path:
            return os.path.join(base, attr_path)
        stem = os.path.splitext(os.path.basename(parent_file))[0]
        if parent_path and stem not in ("mod",):
            base = os.path.join(base, stem)
        for cand in (os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")):
            if os.path.exists(cand):
                return cand
        return None

    def discover(self, file, path):
        self.files[path] = file
        text = strip_comments_and_strings(open(file, encoding="utf-8").read())
        for m in re.finditer(
            r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text
        ):
            attrs, name = m.group(1), m.group(2)
            if name == "tests" or "cfg(test)" in attrs:
                continue
            attr_path = re.search(r'path\s*=\s*"([^"]*)"', attrs)
            child = self.child_file(file, path, name, attr_path.group(1) if attr_path else None)
            if child and os.path.basename(child) != "tests.rs":
                self.discover(child, path + (name,))

    def module_of(self, path):
        """The longest prefix of `path` (a tuple) that is a file module."""
        for k in range(len(path), -1, -1):
            if path[:k] in self.files:
                return path[:k]
        return ()

    def resolve(self, segments, depth=0):
        """Module (tuple) named by an absolute path (tuple of segments from the crate root)."""
        mod = self.module_of(segments)
        if mod == () and segments and depth < 8 and segments[0] in self.reexports:
            target = self.reexports[segments[0]]
            return self.resolve(target + segments[1:], depth + 1)
        return mod


def scan(crate):
    """Edges (from, to) -> [(file, line, text)]."""
    edges = defaultdict(list)
    root_text = strip_comments_and_strings(open(crate.root_file, encoding="utf-8").read())
    for m in re.finditer(r"\bpub\s+use\s+([^;]+);", root_text):
        for p in split_use_tree(m.group(1)):
            segs = tuple(s for s in p.split("::") if s)
            if segs and segs[0] in ("crate", "self"):
                segs = segs[1:]
            if len(segs) >= 2 and segs[:1] in [k[:1] for k in crate.files if k]:
                crate.reexports[segs[-1]] = segs[:-1]

    for path, file in crate.files.items():
        if path == ():
            continue
        raw = open(file, encoding="utf-8").read()
        text = strip_comments_and_strings(raw)
        text = blank_test_modules(text)
        children = {k[len(path)] for k in crate.files if len(k) == len(path) + 1 and k[:len(path)] == path}
        inline = inline_module_spans(text)

        def current_module(offset):
            mods = path
            for start, end, name in inline:
                if start <= offset < end:
                    mods = mods + (name,)
            return mods

        def add(segs, offset, kind):
            here = current_module(offset)
            if not segs:
                return
            if segs[0] == "crate":
                absolute = segs[1:]
            elif segs[0] in ("super", "self"):
                base = list(here)
                rest = list(segs)
                while rest and rest[0] in ("super", "self"):
                    if rest.pop(0) == "super" and base:
                        base.pop()
                absolute = tuple(base) + tuple(rest)
            elif kind == "use" and (segs[0] in children and here == path):
                absolute = path + segs
            else:
                return  # an external crate, a prelude name, a local item
            target = crate.resolve(tuple(absolute))
            if target in ((), path):
                return
            line = text.count("\n", 0, offset) + 1
            edges[(path, target)].append((file, line, raw.splitlines()[line - 1].strip()))

        uses = list(re.finditer(r"\buse\s+([^;{}]*(?:\{[^;]*\})?[^;]*);", text))
        spans = []
        for m in uses:
            spans.append((m.start(), m.end()))
            for p in split_use_tree(m.group(1)):
                add(tuple(s for s in p.split("::") if s), m.start(), "use")
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::" + IDENT + r")+)", text):
            if any(a <= m.start() < b for a, b in spans):
                continue
            segs = tuple(m.group(1).split("::"))
            if segs[0] == "self" and len(segs) == 2:
                continue  # `self::field`-like noise never names a module alone
            add(segs, m.start(), "path")
    return edges


def blank_test_modules(text):
    """Blanks `mod tests { .. }` blocks (with their attributes), keeping line breaks."""
    out = text
    for m in reversed(list(re.finditer(r"(?:#\[[^\]]*\]\s*)*mod\s+tests\s*\{", text))):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        out = out[: m.start()] + re.sub(r"[^\n]", " ", out[m.start():j]) + out[j:]
    return out


def inline_module_spans(text):
    spans = []
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        spans.append((m.start(), j, m.group(1)))
    return spans


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def roots(crate_dir):
    src = os.path.join(crate_dir, "src")
    found = [os.path.join(src, f) for f in ("lib.rs", "main.rs") if os.path.exists(os.path.join(src, f))]
    found += sorted(glob.glob(os.path.join(src, "bin", "*.rs")))
    found += sorted(glob.glob(os.path.join(src, "bin", "*", "main.rs")))
    return src, found


def name(path):
    return "::".join(path) or "crate"


def main(argv):
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    verbose = "-v" in argv[1:]
    crate_dirs = [a for a in argv[1:] if a != "-v"] or sorted(d for d in glob.glob("crates/*") if os.path.isdir(d))
    failed = False
    for crate_dir in crate_dirs:
        src, root_files = roots(crate_dir)
        for root in root_files:
            crate = Crate(root, src)
            edges = scan(crate)
            found = cycles([p for p in crate.files if p], edges.keys())
            label = os.path.relpath(root)
            if verbose:
                for (a, b), where in sorted(edges.items()):
                    print(f"     {label}: {name(a)} -> {name(b)} ({len(where)}x)")
            if not found:
                print(f"ok   {label}: {len(crate.files) - 1} modules, {len(edges)} edges, no cycle")
                continue
            failed = True
            for comp in found:
                members = set(comp)
                print(f"FAIL {label}: import cycle among {', '.join(name(c) for c in comp)}")
                for (a, b), where in sorted(edges.items()):
                    if a in members and b in members:
                        file, line, code = where[0]
                        print(f"       {name(a)} -> {name(b)}  ({os.path.relpath(file)}:{line}: {code})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
