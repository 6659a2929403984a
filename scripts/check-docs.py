#!/usr/bin/env python3
"""Checks that every relative link in README.md and the Markdown pages under docs/ (and the
other READMEs of the tree) resolves: the file exists, and a `#anchor` names a heading of that
page (GitHub's slug: lower case, punctuation dropped, spaces to hyphens) or an `<a id=...>`.
Also refuses a page that names a section in quotes ("See "X"") that no page has, where the
quote is written as `see "Title"` (the habit that left references to removed sections).

    scripts/check-docs.py          # exit 0: all resolve; 1: each broken one printed

Run by .ci/run.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def pages():
    out = [os.path.join(ROOT, "README.md")]
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in ("target", ".git", "fuzz") and not x.startswith(".")]
        for f in files:
            p = os.path.join(d, f)
            if f.endswith(".md") and p not in out:
                out.append(p)
    return sorted(out)


def slug(title):
    t = re.sub(r"`", "", title.strip().lower())
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def anchors(path):
    text = open(path, encoding="utf-8").read()
    text_no_code = re.sub(r"```.*?```", "", text, flags=re.S)
    found = set()
    seen = {}
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text_no_code, flags=re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        found.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    found.update(re.findall(r'<a\s+id="([^"]+)"', text))
    return found, text


def main():
    bad = []
    checked = 0
    all_pages = pages()
    titles = set()
    cache = {}
    for p in all_pages:
        a, text = anchors(p)
        cache[p] = (a, text)
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M):
            titles.add(m.group(1).strip().strip("`").lower())
    for p in all_pages:
        _, text = cache[p]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", prose):
            target = m.group(1)
            if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
                continue
            checked += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(p), path)) if path else p
            rel = os.path.relpath(p, ROOT)
            if not os.path.exists(dest):
                bad.append(f"{rel}: link to {target}: no such file")
                continue
            if frag and dest.endswith(".md"):
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if frag not in cache[dest][0]:
                    bad.append(f"{rel}: link to {target}: no heading or anchor '{frag}' there")
        # A section named in quotes after "see": it must be a heading somewhere.
        for m in re.finditer(r"\b[Ss]ee (?:the section )?\"([^\"]{3,80})\"", prose):
            checked += 1
            if m.group(1).strip().lower() not in titles:
                bad.append(f"{os.path.relpath(p, ROOT)}: names a section \"{m.group(1)}\" no page has")
    for b in bad:
        print(b)
    print(f"check-docs: {checked} links and section references in {len(all_pages)} pages, "
          f"{len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
