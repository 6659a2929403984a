#!/usr/bin/env python3
"""Fails if the modules of any crate of the workspace import each other in a cycle.

Which crates: every member of the root Cargo.toml's `[workspace] members`, each with its
library root and every binary root (`[lib]`/`[[bin]]` paths, else Cargo's defaults
`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs`). A member with no such
root is an error: this script must never silently check less than the workspace.

What is checked, for each root:
1. The module tree, read as rustc reads it: `mod x;` loads `x.rs` or `x/mod.rs` (or the file
   a `#[path]` names), `mod x { ... }` is a module inline. Test code is left out: any item
   under `#[cfg(test)]` (a `mod tests` file or block, a test-only `use` or `impl`), and files
   that begin with `#![cfg(test)]`.
2. The imports of each module: every path that starts with `crate::`, `super::`, `self::`, a
   child module or a name a `use` bound to a module, in `use` trees (groups expanded) and in
   code alike. Comments, strings and `$crate` (macro expansion sites) are not imports. Each
   path is resolved to the deepest module it names (`crate::a::b::X` -> module `a::b`).
3. Cycles at every level of the tree: an import a::b::c -> a::d::e is an edge b -> d between
   the children of their common parent `a`; an import of one's own ancestor or descendant is
   no edge. Each strongly connected component of more than one sibling is reported with its
   edges and, for each edge, the file:line of an import that makes it.

Exit status: 0 without cycles, 1 with any, 2 when the workspace cannot be read (a member
without a root, a `mod x;` whose file is missing). Run: `python3 .ci/import-cycles.py`
(optional argument: the workspace directory; default: the one this script is in).
"""
import glob
import os
import re
import sys
import tomllib


class SetupError(Exception):
    """The workspace is not what this script can check (reported, exit 2)."""


# ---------------------------------------------------------------------------------------
# Tokens: identifiers, `::`, punctuation and whole literals; comments dropped.

TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<lcomment>//[^\n]*)
    | (?P<bcomment>/\*)
    | (?P<rawstr>b?r(?P<hashes>\#*)")
    | (?P<str>b?")
    | (?P<char>b?'(?:\\.[^'\n]*|[^'\\\n])')
    | (?P<lifetime>'[A-Za-z_]\w*)
    | (?P<ident>r\#[A-Za-z_]\w*|[A-Za-z_]\w*)
    | (?P<path>::)
    | (?P<punct>.)
    """,
    re.X | re.S,
)


IDENT = re.compile(r"[A-Za-z_]\w*$")


def tokens(text):
    """(text, line) of each identifier, literal, lifetime, `::` and punctuation character."""
    out, pos, line = [], 0, 1
    while pos < len(text):
        m = TOKEN.match(text, pos)
        kind, end = m.lastgroup, m.end()
        if kind == "bcomment":  # nested block comments
            depth = 1
            while depth and end < len(text):
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
        elif kind == "rawstr":
            close = text.find('"' + m.group("hashes"), end)
            end = len(text) if close < 0 else close + 1 + len(m.group("hashes"))
        elif kind == "str":
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            end += 1
        if kind in ("rawstr", "str", "char", "ident", "path", "punct", "lifetime"):
            out.append((text[pos:end], line))
        line += text.count("\n", pos, end)
        pos = end
    return out


def skip_item(toks, i):
    """The index after the item starting at `i`: its `;`, or the `}` closing its body."""
    depth = 0
    while i < len(toks):
        t = toks[i][0]
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
            if depth < 0:  # the end of the enclosing block: the item had no terminator
                return i
            if depth == 0 and t == "}":
                return i + 1
        elif t == ";" and depth == 0:
            return i + 1
        i += 1
    return i


def attribute(toks, i):
    """The text of the attribute starting at `i` (`#` `[` ... `]`) and the index after it."""
    j = i + 2 if toks[i + 1][0] == "[" else i + 3  # `#[` or `#![`
    depth, words = 1, []
    while j < len(toks) and depth:
        t = toks[j][0]
        depth += (t == "[") - (t == "]")
        if depth:
            words.append(t)
        j += 1
    return " ".join(words), j


def is_test_only(attr):
    return re.match(r"cfg \( (test|all \( .*\btest\b.*\)) \)$", attr) is not None


# ---------------------------------------------------------------------------------------
# The module tree.


class Module:
    def __init__(self, path, file, dir, inline=False):
        self.path = path  # tuple of names; () is the crate root
        self.file = file
        self.dir = dir  # where `mod x;` inside it looks for x.rs / x/mod.rs
        self.inline = inline  # `mod x { ... }`
        self.children = {}
        self.uses = []  # (segments, bound name or None, line)
        self.paths = []  # (segments, line) of paths in code


def parse_file(mod, modules, file, root_dir):
    with open(file, encoding="utf-8") as f:
        toks = tokens(f.read())
    i = 0
    while i + 2 < len(toks) and toks[i][0] == "#" and toks[i + 1][0] == "!":
        attr, i = attribute(toks, i)
        if is_test_only(attr):  # `#![cfg(test)]`: the whole file is test code
            return
    parse_block(toks, 0, len(toks), mod, modules, file, root_dir)


def parse_block(toks, i, end, mod, modules, file, root_dir):
    """Reads the items of `mod` in toks[i:end] (a whole file, or an inline module's body)."""
    attrs = []
    while i < end:
        t = toks[i][0]
        if t == "#" and i + 1 < end and toks[i + 1][0] in ("[", "!"):
            a, i = attribute(toks, i)
            attrs.append(a)
            continue
        if any(is_test_only(a) for a in attrs):
            attrs, i = [], skip_item(toks, i)
            continue
        if t == "mod" and i + 2 < end and IDENT.match(toks[i + 1][0]):
            name, after = toks[i + 1][0], toks[i + 2][0]
            child = Module(mod.path + (name,), file, os.path.join(mod.dir, name), after == "{")
            mod.children[name] = child
            modules.append(child)
            if after == ";":
                load(mod, child, attrs, modules, root_dir)
                i += 3
            elif after == "{":
                close = skip_item(toks, i) - 1
                parse_block(toks, i + 3, close, child, modules, file, root_dir)
                i = close + 1
            else:
                i += 1
            attrs = []
            continue
        if t == "use":
            close = i + 1
            while close < end and toks[close][0] != ";":
                close += 1
            for segs, bound in use_tree(toks[i + 1 : close], []):
                mod.uses.append((segs, bound, toks[i][1]))
            i, attrs = close + 1, []
            continue
        if IDENT.match(t) and (i == 0 or toks[i - 1][0] not in ("$", "::", ".")):
            segs, j = [t], i + 1
            while j + 1 < end and toks[j][0] == "::" and IDENT.match(toks[j + 1][0]):
                segs.append(toks[j + 1][0])
                j += 2
            if len(segs) > 1:
                mod.paths.append((segs, toks[i][1]))
            i = j
            continue
        if t in ";{}":
            attrs = []
        i += 1


def use_tree(toks, prefix):
    """The (path, bound name) pairs of a `use` tree: groups expanded, `self` and `as` kept."""
    out, segs, i = [], list(prefix), 0
    while i < len(toks):
        t = toks[i][0]
        if t == "{":
            depth, start = 0, i + 1
            for j in range(i, len(toks)):
                c = toks[j][0]
                depth += (c == "{") - (c == "}")
                if (c == "," and depth == 1) or depth == 0:
                    out += use_tree(toks[start:j], segs)
                    start = j + 1
                if depth == 0:
                    break
            return out
        if t == "*":
            return [(segs, None)]
        if t == "as":
            alias = toks[i + 1][0] if i + 1 < len(toks) else "_"
            return [(own(segs), None if alias == "_" else alias)]
        if t != "::":
            segs.append(t)
        i += 1
    if len(segs) == len(prefix):
        return []  # an empty group member (`a::{b, }`)
    segs = own(segs)
    return [(segs, segs[-1])]


def own(segs):
    """`a::b::self` is `a::b`."""
    return segs[:-1] if segs[-1] == "self" and len(segs) > 1 else segs


def load(parent, child, attrs, modules, root_dir):
    """Finds and reads the file of `mod x;` in `parent`."""
    name = child.path[-1]
    given = [m.group(1) for a in attrs for m in [re.match(r'path = "(.*)"$', a)] if m]
    if given:
        # Relative to the declaring file's directory (to the inline module's, inside one).
        base = parent.dir if parent.inline else os.path.dirname(parent.file)
        candidates = [os.path.normpath(os.path.join(base, given[-1]))]
    else:
        candidates = [child.dir + ".rs", os.path.join(child.dir, "mod.rs")]
    for cand in candidates:
        if os.path.isfile(cand):
            child.file = cand
            if given:  # a #[path] file's own `mod`s are beside it, as a mod.rs's
                child.dir = os.path.dirname(cand)
            parse_file(child, modules, cand, root_dir)
            return
    raise SetupError(
        f"{os.path.relpath(parent.file, root_dir)}: `mod {name};` but none of "
        + ", ".join(os.path.relpath(c, root_dir) for c in candidates)
        + " exists"
    )


def module_tree(root_file, root_dir):
    root = Module((), root_file, os.path.dirname(root_file))
    modules = [root]
    parse_file(root, modules, root_file, root_dir)
    return root, modules


# ---------------------------------------------------------------------------------------
# Imports as edges, and cycles.


def resolve(mod, segs, root, parents, aliases):
    """The deepest module of the tree `segs` names from `mod`, or None (another crate)."""
    at, rest = None, list(segs)
    if rest[0] == "crate":
        at, rest = root, rest[1:]
    elif rest[0] in ("super", "self"):
        at = mod
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                at = parents.get(at, at)
            rest = rest[1:]
    elif rest[0] in mod.children:
        at, rest = mod.children[rest[0]], rest[1:]
    elif rest[0] in aliases.get(mod, {}):
        at, rest = aliases[mod][rest[0]], rest[1:]
    else:
        return None
    while rest and rest[0] in at.children:
        at, rest = at.children[rest[0]], rest[1:]
    return at


def edges_of(root, modules):
    """{(module, module): (file, line, path)} of every import, the first seen of each."""
    parents = {c: m for m in modules for c in m.children.values()}
    # Names a `use` binds to a module (`use crate::a::{self, b}` binds a and b).
    aliases = {}
    for m in modules:
        for segs, bound, _ in m.uses:
            if bound:
                target = resolve(m, segs, root, parents, aliases)
                if target is not None and target.path[-1:] == (segs[-1],) and target is not root:
                    aliases.setdefault(m, {})[bound] = target
    out = {}
    for m in modules:
        for segs, line in [(s, l) for s, _, l in m.uses] + m.paths:
            target = resolve(m, segs, root, parents, aliases)
            if target is not None and target is not m:
                out.setdefault((m, target), (m.file, line, "::".join(segs)))
    return out


def sibling_edges(edges):
    """{parent path: {(child, child): (file, line, path)}}: each import lifted to the level of
    the tree where it goes from one sibling to another."""
    levels = {}
    for (a, b), where in edges.items():
        n = 0
        while n < min(len(a.path), len(b.path)) and a.path[n] == b.path[n]:
            n += 1
        if n == len(a.path) or n == len(b.path):
            continue  # an ancestor or a descendant
        key = (a.path[n], b.path[n])
        levels.setdefault(a.path[:n], {}).setdefault(key, where)
    return levels


def strongly_connected(nodes, succ):
    """Tarjan's strongly connected components of more than one node, each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ.get(v, ())):
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


def cycles(levels):
    """[(parent path, [modules], [(a, b, (file, line, path))])] for every cycle."""
    found = []
    for parent, es in sorted(levels.items()):
        succ = {}
        for a, b in es:
            succ.setdefault(a, set()).add(b)
        nodes = {a for a, _ in es} | {b for _, b in es}
        for comp in strongly_connected(nodes, succ):
            inside = sorted((a, b, w) for (a, b), w in es.items() if a in comp and b in comp)
            found.append((parent, comp, inside))
    return found


# ---------------------------------------------------------------------------------------
# The workspace.


def crate_roots(ws):
    """[(member, target, root file)] of every member of the workspace at `ws`."""
    with open(os.path.join(ws, "Cargo.toml"), "rb") as f:
        members = tomllib.load(f).get("workspace", {}).get("members", [])
    if not members:
        raise SetupError(f"{ws}/Cargo.toml lists no [workspace] members")
    out = []
    for pattern in members:
        dirs = sorted(glob.glob(os.path.join(ws, pattern))) or [os.path.join(ws, pattern)]
        for d in dirs:
            member = os.path.relpath(d, ws)
            manifest = os.path.join(d, "Cargo.toml")
            if not os.path.isfile(manifest):
                raise SetupError(f"workspace member {member} has no Cargo.toml")
            with open(manifest, "rb") as f:
                cargo = tomllib.load(f)
            name = cargo.get("package", {}).get("name", member)
            roots = {}
            lib = cargo.get("lib", {}).get("path", "src/lib.rs")
            if os.path.isfile(os.path.join(d, lib)):
                roots[os.path.normpath(lib)] = "lib"
            for b in cargo.get("bin", []):
                if "path" in b:
                    roots[os.path.normpath(b["path"])] = f"bin {b.get('name', '?')}"
            if cargo.get("package", {}).get("autobins", True):
                found = glob.glob(os.path.join(d, "src/main.rs"))
                found += glob.glob(os.path.join(d, "src/bin/*.rs"))
                found += glob.glob(os.path.join(d, "src/bin/*/main.rs"))
                for p in sorted(found):
                    rel = os.path.relpath(p, d)
                    stem = os.path.basename(os.path.dirname(p) if p.endswith("/main.rs") else p)
                    stem = name if rel == "src/main.rs" else stem.removesuffix(".rs")
                    roots.setdefault(rel, f"bin {stem}")
            if not roots:
                raise SetupError(
                    f"workspace member {member} ({name}) has no src/lib.rs, src/main.rs or "
                    "[lib]/[[bin]] path: nothing of it would be checked"
                )
            for rel, target in sorted(roots.items()):
                out.append((name, target, os.path.join(d, rel)))
    return out


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    ws = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else here)
    bad = 0
    try:
        roots = crate_roots(ws)
        for name, target, file in roots:
            root, modules = module_tree(file, ws)
            found = cycles(sibling_edges(edges_of(root, modules)))
            rel = os.path.relpath(file, ws)
            print(f"{name} ({target}, {rel}): {len(modules)} modules, cycles: "
                  f"{len(found) if found else 'none'}")
            for parent, comp, inside in found:
                where = "::".join(parent) or "crate root"
                print(f"  cycle among the children of {where}: {', '.join(comp)}")
                for a, b, (f, line, path) in inside:
                    print(f"    {a} -> {b}   {os.path.relpath(f, ws)}:{line} ({path})")
            bad += len(found)
    except SetupError as e:
        print(f"import-cycles: {e}", file=sys.stderr)
        sys.exit(2)
    if bad:
        print(f"{bad} import cycle(s): move what both sides need into a module both may import")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
