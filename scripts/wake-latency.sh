#!/usr/bin/env bash
# Builds and runs scripts/wake-latency.c: how long a thread sleeping on a pipe takes to run after
# another thread writes to it, on the waker's CPU, on the other CPU, and on any CPU, with and
# without spinning threads (what the software NIC's engine pays when a peer's request must wake
# it; docs/verbs.md, "Latency between processes").
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -O2 -pthread scripts/wake-latency.c -o "$out/wake-latency"
"$out/wake-latency"
