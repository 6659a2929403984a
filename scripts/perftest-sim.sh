#!/usr/bin/env bash
# Runs Debian's perftest binaries, unmodified, between two processes on the software NIC's
# verbs-compatible library (gda_mlx5_0), and prints one line of figures per test.
#
#   scripts/perftest-sim.sh [--debug] [extra perftest args...]
#
# Builds gda-verbs (release unless --debug), points LD_LIBRARY_PATH at target/<profile>/verbs-sim,
# starts each server, then its client on 127.0.0.1, each pair under a 120 s limit. The last line
# lines are the yardsticks the bandwidth figures are compared with, measured in the same run:
# memcpy of 64 KiB messages on one CPU (`gda perf --sizes 64k`, the release `gda` binary), and
# the most two copies across CPUs move here (scripts/cross-core-copy.sh: what bounds any
# two-copy path between processes, the software NIC's included). The 64-KiB WRITE and READ
# bandwidths, the 8-byte SEND rate and the atomic rate are measured twice: a fixed count of
# messages (start-up included, as a short job sees them) and for 2 s (`-D 2`, the steady state).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
if [ "${1:-}" = "--debug" ]; then profile=debug; shift; fi
flags=(); [ "$profile" = release ] && flags=(--release)
cargo build -q "${flags[@]}" -p gda-verbs
cargo build -q "${flags[@]}" -p gda --bin gda
export LD_LIBRARY_PATH="$PWD/target/$profile/verbs-sim"
for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat; do
  command -v "$t" >/dev/null || { echo "$t missing: apt-get install perftest" >&2; exit 1; }
done

port=$((20000 + RANDOM % 20000))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

run() { # name args...
  local name=$1; shift
  port=$((port + 1))
  local log; log=$(mktemp)
  timeout 120 "$name" -d gda_mlx5_0 -p "$port" -F "$@" >"$log.srv" 2>&1 &
  pids+=($!)
  local srv=$!
  sleep 0.5
  local ok=0
  for _ in $(seq 1 20); do
    if timeout 120 "$name" -d gda_mlx5_0 -p "$port" -F "$@" 127.0.0.1 >"$log" 2>&1; then ok=1; break; fi
    grep -q "Couldn't connect" "$log" || break
    sleep 0.3
  done
  wait "$srv" || ok=0
  if [ $ok = 1 ]; then
    printf '%-14s %s\n' "$name" "$(grep -E '^ +[0-9]+ +[0-9]+' "$log" | tail -1 | tr -s ' ')"
  else
    echo "$name FAILED:"; cat "$log" "$log.srv"; return 1
  fi
  rm -f "$log" "$log.srv"
}

echo "# test           bytes iterations  figures (bw: peak avg MB/s  msg rate Mpps | lat: min max typical avg stdev 99% 99.9% usec)"
run ib_write_bw  -s 65536 -n 2000 "$@"
run ib_read_bw   -s 65536 -n 2000 "$@"
run ib_write_bw  -s 65536 -D 2 "$@"
run ib_read_bw   -s 65536 -D 2 "$@"
run ib_send_bw   -s 65536 -n 2000 "$@"
run ib_send_bw   -s 8 -n 20000 "$@"
run ib_send_bw   -s 8 -D 2 "$@"
run ib_atomic_bw -n 2000 "$@"
run ib_atomic_bw -D 2 "$@"
run ib_write_lat -s 8 -n 2000 "$@"
run ib_read_lat  -s 8 -n 2000 "$@"
run ib_send_lat  -s 8 -n 2000 "$@"
# The yardstick: memcpy of 64 KiB (GB/s), from the same machine a moment later.
memcpy=$("target/$profile/gda" perf write --sizes 64k --json 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin); r=d[0] if isinstance(d,list) else d; print(r.get("memcpy_gbps", r.get("rows",[{}])[0].get("memcpy_gbps","?")))' 2>/dev/null || echo "?")
printf '%-14s %s\n' memcpy "65536 GB/s $memcpy"
cross=$(scripts/cross-core-copy.sh | awk '/across/ {print $(NF-3)}')
printf '%-14s %s\n' two-copies "65536 GB/s $cross (median; scripts/cross-core-copy.sh)"
