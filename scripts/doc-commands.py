#!/usr/bin/env python3
"""Runs every shell command block of README.md and the docs as written, from the repository
root, and fails if one fails: what a new user copies must work. Blocks that need what CI has
not are skipped, each with its reason (printed): RDMA hardware or a GPU (`GDA_HW_DEVICE`),
nightly Rust with cargo-fuzz (`cargo +nightly fuzz`); the line `.ci/run` is left out (it is
the caller).

    scripts/doc-commands.py [--list]     # --list: classify only, run nothing

Each block runs as one `bash -e` script in a session of its own, under a 20-minute limit;
whatever it left running (a server started with `&`) is killed after it. Run by .ci/run.
"""
import os
import re
import signal
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGES = ["README.md", "device/README.md", "providers/README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
LIMIT_S = 1200


def blocks():
    for page in PAGES:
        path = os.path.join(ROOT, page)
        if not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"^```(?:sh|bash)\n(.*?)^```", text, flags=re.S | re.M):
            line = text.count("\n", 0, m.start()) + 1
            yield page, line, m.group(1)


def classify(body):
    if "GDA_HW_DEVICE" in body:
        return "needs an RDMA NIC (and for GDA_HW_GPU an AMD GPU): docs/hardware.md"
    if "cargo +nightly fuzz" in body:
        return "needs nightly Rust and cargo-fuzz (.ci/run builds the fuzz targets)"
    return None


def main():
    listing = "--list" in sys.argv[1:]
    ran, skipped, failed = 0, 0, []
    for page, line, body in blocks():
        body = "\n".join(l for l in body.splitlines() if l.strip() != ".ci/run")
        why = classify(body)
        where = f"{page}:{line}"
        if why:
            skipped += 1
            print(f"SKIPPED {where}: {why}")
            continue
        if not body.strip() or all(l.strip().startswith("#") or not l.strip() for l in body.splitlines()):
            continue
        if listing:
            print(f"run     {where}")
            continue
        print(f"==> {where}", flush=True)
        p = subprocess.Popen(["bash", "-e", "-c", body], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=LIMIT_S)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            rc = "timeout"
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what the block left running
        except ProcessLookupError:
            pass
        ran += 1
        if rc != 0:
            failed.append(where)
            print(f"FAILED  {where} ({rc}):\n" + out.decode(errors="replace")[-4000:])
        else:
            print(f"ok      {where}")
    print(f"doc-commands: {ran} blocks run, {skipped} skipped, {len(failed)} failed"
          + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
