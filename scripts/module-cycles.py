#!/usr/bin/env python3
"""Import circles between the modules of one Rust crate.

Reads every `.rs` file under a crate's `src/` (default `crates/vow-server/src`), resolves the
paths each file names (`use` trees and inline paths starting with `crate::`, `super::`, `self::`,
or a child module declared with `mod name;`) to the module file they land in, and prints each
strongly connected component of more than one module file: a set of modules that import each
other, directly or through others. Exits 1 when there is any, 0 when the layers run downhill.

Comments and string literals are ignored (an intra-doc link is not an import), and so is the
path of a `pub(in path)` visibility; an inline
`mod tests { ... }` belongs to its file, with `super::` resolved from inside it. `main.rs` is
another crate (the binary) and is skipped.

    python3 scripts/module-cycles.py [SRC_DIR] [--edges]

`--edges` also prints, for each circle, the imports that hold it together.
"""

import os
import re
import sys

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>b?r(?P<hashes>\#*)")
  | (?P<string>b?"(?:\\.|[^"\\])*")
  | (?P<char>b?'(?:\\.|[^'\\\n])')
  | (?P<lifetime>'[A-Za-z_]\w*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<path_sep>::)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)

PREFIXES = {"crate", "super", "self"}


def tokens(text):
    """The identifiers and punctuation of `text`, without comments and literals."""
    out = []
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        kind = m.lastgroup
        if kind == "block_comment":
            depth, pos = 1, m.end()
            while depth and pos < len(text):
                if text.startswith("/*", pos):
                    depth, pos = depth + 1, pos + 2
                elif text.startswith("*/", pos):
                    depth, pos = depth - 1, pos + 2
                else:
                    pos += 1
            continue
        if m.group("raw_string") is not None:
            end = text.find('"' + m.group("hashes"), m.end())
            pos = len(text) if end < 0 else end + 1 + len(m.group("hashes"))
            out.append(("lit", '""'))
            continue
        pos = m.end()
        if kind in ("ws", "line_comment"):
            continue
        if kind in ("string", "char", "lifetime"):
            out.append(("lit", m.group()))
        elif kind == "ident":
            out.append(("ident", m.group()))
        else:
            out.append(("punct", m.group()))
    return out


def module_files(src):
    """Module path (tuple of names) -> file path, for every module file under `src`."""
    modules = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
            if rel == ["main"]:
                continue
            if rel == ["lib"]:
                rel = []
            elif rel[-1] == "mod":
                rel = rel[:-1]
            modules[tuple(rel)] = path
    return modules


def parse_use_tree(toks, i):
    """Parses a use tree at `toks[i]`; returns (list of segment lists, next index)."""
    prefix = []
    while i < len(toks):
        kind, value = toks[i]
        if value == "{":
            paths, i = [], i + 1
            while toks[i][1] != "}":
                sub, i = parse_use_tree(toks, i)
                paths.extend(prefix + s for s in sub)
                if toks[i][1] == ",":
                    i += 1
            return paths or [prefix], i + 1
        if value == "*" or kind != "ident":
            return [prefix], i + (value == "*")
        prefix.append(value)
        i += 1
        if toks[i][1] == "::":
            i += 1
            continue
        if toks[i][1] == "as":
            i += 2
        return [prefix], i
    return [prefix], i


def references(toks, here, children):
    """(module path of the scope, path segments) for every path the tokens name."""
    found = []
    scope = [list(here)]  # module path of each open inline `mod` (and braces in it)
    depth = 0
    mod_depths = []  # brace depth at which each inline module opened
    i = 0
    while i < len(toks):
        kind, value = toks[i]
        current = scope[-1]
        if value == "mod" and i + 2 < len(toks) and toks[i + 2][1] == "{":
            scope.append(current + [toks[i + 1][1]])
            depth += 1
            mod_depths.append(depth)
            i += 3
            continue
        if value == "{":
            depth += 1
        elif value == "}":
            if mod_depths and mod_depths[-1] == depth:
                mod_depths.pop()
                scope.pop()
            depth -= 1
        elif value == "use":
            paths, i = parse_use_tree(toks, i + 1)
            for p in paths:
                found.append((tuple(current), p))
            continue
        elif value == "in" and i >= 2 and toks[i - 1][1] == "(" and toks[i - 2][1] == "pub":
            # `pub(in crate::a::b)` names where an item is visible, not something it uses.
            while toks[i][1] != ")":
                i += 1
            continue
        elif kind == "ident" and (i == 0 or toks[i - 1][1] != "::"):
            if i + 1 < len(toks) and toks[i + 1][1] == "::":
                if value in PREFIXES or (
                    tuple(current) == tuple(here) and value in children
                ):
                    segs, j = [value], i + 1
                    while j + 1 < len(toks) and toks[j][1] == "::" and toks[j + 1][0] == "ident":
                        segs.append(toks[j + 1][1])
                        j += 2
                    found.append((tuple(current), segs))
                    i = j
                    continue
        i += 1
    return found


def absolute(scope, segs, modules):
    """The absolute module path `segs` names from `scope`, or None if it leaves the crate."""
    path = list(scope)
    segs = list(segs)
    if not segs:
        return None
    if segs[0] == "crate":
        path, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        while segs and segs[0] in ("super", "self"):
            if segs.pop(0) == "super":
                if not path:
                    return None
                path.pop()
    elif tuple(path + [segs[0]]) not in modules:
        return None  # an external crate, a local item or an imported name
    return path + segs


def target(path, modules):
    """The module file that holds `path`: its longest prefix that is a module file."""
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in modules:
            return tuple(path[:n])
    return ()


def graph(src):
    modules = module_files(src)
    edges = {m: {} for m in modules}
    for here, file in modules.items():
        with open(file, encoding="utf-8") as f:
            toks = tokens(f.read())
        children = {m[-1] for m in modules if len(m) == len(here) + 1 and m[:-1] == here}
        for scope, segs in references(toks, here, children):
            path = absolute(scope, segs, modules)
            if path is None:
                continue
            to = target(path, modules)
            if to != here:
                edges[here].setdefault(to, "::".join(segs))
    return modules, edges


def components(nodes, edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(argv):
    show_edges = "--edges" in argv
    args = [a for a in argv if a != "--edges"]
    src = args[0] if args else "crates/vow-server/src"
    modules, edges = graph(src)
    circles = [sorted(c) for c in components(modules, edges) if len(c) > 1]
    circles.sort(key=lambda c: (-len(c), c))
    name = lambda m: os.path.relpath(modules[m], src)
    for c in circles:
        print(f"circle of {len(c)} modules:")
        for m in c:
            print(f"  {name(m)}")
            if show_edges:
                for to, via in sorted(edges[m].items()):
                    if to in c:
                        print(f"      -> {name(to)}  ({via})")
    print(f"{len(circles)} import circle(s) among {len(modules)} modules of {src}")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
