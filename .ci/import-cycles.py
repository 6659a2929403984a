#!/usr/bin/env python3
"""Fails if a crate's top-level modules import each other in a cycle.

For every crate source directory given (default: every crate of the workspace), reads
`use crate::…` / `crate::…` paths and `super::…` paths outside comments and `#[cfg(test)]`
modules, maps them to the top-level module they name, and reports every strongly connected
component of more than one module (Tarjan). Run: `python3 .ci/import-cycles.py`.
"""
import os
import re
import sys

CRATES = ["hal/src", "os/src", "providers/native/src", "providers/mlx5/src",
          "providers/bnxt/src", "providers/sim/src", "shmem/src", "src"]


def modname(root, path):
    parts = os.path.relpath(path, root)[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def graph(src):
    mods = {}
    for dp, _, fns in os.walk(src):
        if os.path.relpath(dp, src).startswith("bin"):
            continue
        for f in fns:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dp, f)
            m = modname(src, p)
            s = open(p).read().split("#[cfg(test)]")[0]
            s = "\n".join(l for l in s.split("\n") if not l.strip().startswith("//"))
            deps = set(re.findall(r"crate::([a-z_0-9]+)", s))
            base = m.split("::")[:-1]
            deps |= {(base[0] if base else x) for x in re.findall(r"\bsuper::([a-z_0-9]+)", s)}
            mods[m] = deps
    top = lambda m: m.split("::")[0]
    names = {top(m) for m in mods if m}
    g = {}
    for m, ds in mods.items():
        if not m:
            continue
        for d in ds:
            if d in names and d != top(m):
                g.setdefault(top(m), set()).add(d)
    return g


def cycles(g):
    idx, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        idx[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in idx:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(g):
        if v not in idx:
            visit(v)
    return out


def main():
    bad = 0
    for src in sys.argv[1:] or CRATES:
        c = cycles(graph(src))
        print(f"{src}: {len(graph(src))} importing modules, cycles: {c or 'none'}")
        bad += len(c)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
