#!/usr/bin/env bash
# Builds and runs scripts/cross-core-copy.c: the most a stream of 64-KiB messages copied into a
# 4 MiB shared ring on one CPU and out of it on the other can move on this machine, next to
# memcpy on one CPU — the bound on the software NIC's 64-KiB WRITE and READ bandwidth between
# processes (docs/verbs.md, "Bandwidth between processes").
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -O2 -pthread scripts/cross-core-copy.c -o "$out/cross-core-copy"
"$out/cross-core-copy"
