#!/usr/bin/env bash
# Compares gda's OpenSHMEM C library with Open MPI's oshmem on one host (2 PEs, P2P), using the
# same benchmark source, shmem/capi/bench/shmem_bench.c, built once with each compiler wrapper.
#
#   scripts/shmem-vs-openmpi.sh [--build DIR] [--rounds R] [--out FILE] [--check]
#                               [--tolerance PCT] [--plot FILE] [--bench-args "ARGS"] [--keep]
#
#   --build DIR        gda build directory holding gdacc, gdarun and libgdashmem.so
#                      (default target/release of this repository; `cargo build --release
#                      --features capi` makes them). This script never runs cargo.
#   --rounds R         rounds, default 5; each round runs gda then Open MPI (interleaved, so
#                      drift in machine load hits both alike). Each figure is the median of R;
#                      the table's "gda won" column counts the rounds in which gda's figure was
#                      at least as good as that of the Open MPI run right after it.
#   --out FILE         combined results, a JSON array of {impl, metric, bytes, value, unit,
#                      rounds, values, iters[, gbps]} (default shmem-vs-openmpi.json)
#   --check            exit 1 if gda is worse than Open MPI on any metric (listed on stderr);
#                      latencies (us): lower is better, rates: higher is better
#   --tolerance PCT    with --check, only count gda as worse when by more than PCT % (default 0)
#   --plot FILE        afterwards run `"$BUILD/gda" plot --compare "$OUT" --out FILE` (the
#                      `gda plot` subcommand; skipped with a warning when $BUILD/gda is absent)
#   --bench-args ARGS  extra benchmark arguments for both, e.g. "-s 8:4096 -t 50" (see -h of
#                      the benchmark: -i ITERS, -s MIN:MAX, -w WINDOW, -t MS, -a OFFSET)
#   --keep             keep the temporary directory (binaries and raw output of every run)
#
# Environment: OSHCC (default oshcc), OSHRUN (default oshrun), BENCH_CFLAGS (default -O2, used
# for both builds), RUN_TIMEOUT (seconds per run, default 300).
# gda runs as `gdarun -n 2 ./bench` (gdarun sets everything up); Open MPI as
# `oshrun --allow-run-as-root --oversubscribe --mca osc ^rdma -n 2 ./bench` (without
# `--mca osc ^rdma`, Open MPI 4.1's PEs crash at exit on machines without RDMA hardware).
#
# Exit status: 0 success; 1 a build or run failed (message says which) or --check found gda
# worse, or the plot command failed; 2 bad arguments.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$repo/shmem/capi/bench/shmem_bench.c"

BUILD="$repo/target/release"
ROUNDS=5
OUT=shmem-vs-openmpi.json
CHECK=0
TOLERANCE=0
PLOT=
BENCH_ARGS=
KEEP=0
OSHCC=${OSHCC:-oshcc}
OSHRUN=${OSHRUN:-oshrun}
BENCH_CFLAGS=${BENCH_CFLAGS:--O2}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die() { echo "shmem-vs-openmpi: $*" >&2; exit 1; }
bad_arg() { echo "shmem-vs-openmpi: $*" >&2; usage >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --build) [ $# -ge 2 ] || bad_arg "--build needs a directory"; BUILD=$2; shift 2 ;;
    --rounds) [ $# -ge 2 ] || bad_arg "--rounds needs a number"; ROUNDS=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || bad_arg "--out needs a file"; OUT=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    --tolerance) [ $# -ge 2 ] || bad_arg "--tolerance needs a percentage"; TOLERANCE=$2; shift 2 ;;
    --plot) [ $# -ge 2 ] || bad_arg "--plot needs a file"; PLOT=$2; shift 2 ;;
    --bench-args) [ $# -ge 2 ] || bad_arg "--bench-args needs a string"; BENCH_ARGS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) bad_arg "unknown argument '$1'" ;;
  esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || bad_arg "--rounds wants a positive integer"
[[ "$TOLERANCE" =~ ^[0-9]+([.][0-9]+)?$ ]] || bad_arg "--tolerance wants a number >= 0"
[[ "$RUN_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || bad_arg "RUN_TIMEOUT wants a positive integer"

abs=$(cd "$BUILD" 2>/dev/null && pwd) || die "gda build directory '$BUILD' does not exist (cargo build --release --features capi makes target/release)"
BUILD=$abs
for f in gdacc gdarun libgdashmem.so; do
  [ -e "$BUILD/$f" ] || die "$BUILD/$f is missing (or a dangling link): the build directory must hold gdacc, gdarun and libgdashmem.so (cargo build --release --features capi)"
done
[ -f "$src" ] || die "benchmark source $src is missing"
command -v "$OSHCC" >/dev/null || die "$OSHCC not found (Open MPI's oshmem compiler wrapper)"
command -v "$OSHRUN" >/dev/null || die "$OSHRUN not found (Open MPI's oshmem launcher)"
command -v python3 >/dev/null || die "python3 not found (used to aggregate the results)"
command -v timeout >/dev/null || die "timeout (coreutils) not found"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
if [ -n "$PLOT" ]; then case "$PLOT" in /*) ;; *) PLOT="$PWD/$PLOT" ;; esac; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmem-vs-openmpi.XXXXXX")
cleanup() { if [ "$KEEP" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi; }
trap cleanup EXIT

# ---- Build -------------------------------------------------------------------------------
read -r -a cflags <<<"$BENCH_CFLAGS"
read -r -a bargs <<<"$BENCH_ARGS"
echo "building $src" >&2
"$BUILD/gdacc" ${cflags[@]+"${cflags[@]}"} "$src" -o "$tmp/bench_gda" >"$tmp/build_gda.log" 2>&1 \
  || { cat "$tmp/build_gda.log" >&2; die "building with $BUILD/gdacc failed"; }
"$OSHCC" ${cflags[@]+"${cflags[@]}"} "$src" -o "$tmp/bench_ompi" >"$tmp/build_ompi.log" 2>&1 \
  || { cat "$tmp/build_ompi.log" >&2; die "building with $OSHCC failed"; }

# ---- Run, interleaved --------------------------------------------------------------------
command_of() { # impl: sets cmd to the launch command
  case "$1" in
    gda) cmd=("$BUILD/gdarun" -n 2 "$tmp/bench_gda" ${bargs[@]+"${bargs[@]}"}) ;;
    ompi) cmd=("$OSHRUN" --allow-run-as-root --oversubscribe --mca osc ^rdma -n 2
               "$tmp/bench_ompi" ${bargs[@]+"${bargs[@]}"}) ;;
  esac
}
name_of() { case "$1" in gda) echo "gda" ;; ompi) echo "Open MPI" ;; esac; }

for r in $(seq 1 "$ROUNDS"); do
  for impl in gda ompi; do
    o="$tmp/$impl.$r.out" e="$tmp/$impl.$r.err"
    printf 'round %d/%d: %-8s ... ' "$r" "$ROUNDS" "$(name_of $impl)" >&2
    t0=$SECONDS
    command_of "$impl"
    set +e
    (cd "$tmp" && timeout -k 10 "$RUN_TIMEOUT" "${cmd[@]}") >"$o" 2>"$e"
    rc=$?
    set -e
    if [ $rc -ne 0 ] || ! grep -q '"metric":"barrier_lat"' "$o"; then
      echo "FAILED" >&2
      echo "---- stdout (last 20 lines) ----" >&2; tail -n 20 "$o" >&2 || true
      echo "---- stderr (last 20 lines) ----" >&2; tail -n 20 "$e" >&2 || true
      if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        die "$(name_of $impl) run $r timed out after ${RUN_TIMEOUT}s"
      elif [ $rc -ne 0 ]; then
        die "$(name_of $impl) run $r failed with exit status $rc"
      else
        die "$(name_of $impl) run $r exited 0 but did not print all results"
      fi
    fi
    echo "ok ($((SECONDS - t0)) s)" >&2
  done
done
for impl in gda ompi; do
  for e in "$tmp/$impl".*.err; do
    if [ -s "$e" ]; then
      echo "note: $(name_of $impl) wrote to stderr (first lines of $(basename "$e")):" >&2
      head -n 5 "$e" | sed 's/^/  | /' >&2
      break
    fi
  done
done

# ---- Aggregate, table, check ------------------------------------------------------------
set +e
python3 - "$tmp" "$ROUNDS" "$OUT" "$CHECK" "$TOLERANCE" <<'PY'
import json, os, statistics, sys

tmp, rounds, out, check, tol = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", float(sys.argv[5])
impls = [("gda", "gda"), ("ompi", "Open MPI")]
order = ["put_lat", "put_rate", "get_lat", "amo_add_rate", "amo_fadd_lat", "barrier_lat"]
data = {}  # (impl, metric, bytes) -> {"unit", "values", "iters", "gbps"}
for impl, _ in impls:
    for r in range(1, rounds + 1):
        path = os.path.join(tmp, f"{impl}.{r}.out")
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if "value" not in d:
                    continue
                k = (impl, d["metric"], int(d["bytes"]))
                e = data.setdefault(k, {"unit": d["unit"], "values": [], "iters": [], "gbps": []})
                e["values"].append(float(d["value"]))
                e["iters"].append(int(d["iters"]))
                if "gbps" in d:
                    e["gbps"].append(float(d["gbps"]))

results = []
for (impl, metric, nbytes), e in data.items():
    o = {"impl": impl, "metric": metric, "bytes": nbytes, "value": statistics.median(e["values"]),
         "unit": e["unit"], "rounds": len(e["values"]), "values": e["values"], "iters": e["iters"]}
    if e["gbps"]:
        o["gbps"] = statistics.median(e["gbps"])
    results.append(o)
key = lambda o: (order.index(o["metric"]) if o["metric"] in order else len(order), o["metric"], o["bytes"], o["impl"])
results.sort(key=key)
with open(out, "w") as f:
    f.write("[\n" + ",\n".join(" " + json.dumps(o) for o in results) + "\n]\n")

def lower_better(unit):
    return unit == "us"

rows, worse, missing = [], [], []
keys = sorted({(m, b) for (_, m, b) in data}, key=lambda mb: (order.index(mb[0]) if mb[0] in order else len(order), mb[0], mb[1]))
for metric, nbytes in keys:
    g, m = data.get(("gda", metric, nbytes)), data.get(("ompi", metric, nbytes))
    if g is None or m is None:
        missing.append(f"{metric} {nbytes} B ({'gda' if g is None else 'Open MPI'} has none)")
        continue
    gv, mv, unit = statistics.median(g["values"]), statistics.median(m["values"]), g["unit"]
    ratio = gv / mv if mv else float("inf")
    if lower_better(unit):
        gda_wins, factor = gv <= mv, (mv / gv if gv <= mv else gv / mv) if gv and mv else float("inf")
    else:
        gda_wins, factor = gv >= mv, (gv / mv if gv >= mv else mv / gv) if gv and mv else float("inf")
    better = ("gda" if gda_wins else "Open MPI") + f" {factor:.2f}x"
    if factor == 1.0:
        better = "equal"
    # Round r of gda ran right before round r of Open MPI: compare them pair by pair too.
    pairs = list(zip(g["values"], m["values"]))
    won = sum((a <= b) if lower_better(unit) else (a >= b) for a, b in pairs)
    rows.append((metric, str(nbytes), f"{gv:.4g}", f"{mv:.4g}", unit, f"{ratio:.3g}", better,
                 f"{won}/{len(pairs)}"))
    if not gda_wins and (factor - 1.0) * 100.0 > tol:
        worse.append(f"{metric} {nbytes} B: gda {gv:.4g} {unit} vs Open MPI {mv:.4g} {unit} ({factor:.2f}x worse)")

hdr = ("metric", "bytes", "gda", "Open MPI", "unit", "gda/ompi", "better", "gda won")
w = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
right = {1, 2, 3, 5, 7}
fmt = lambda r: "  ".join(c.rjust(w[i]) if i in right else c.ljust(w[i]) for i, c in enumerate(r)).rstrip()
print(f"median of {rounds} rounds, 2 PEs on one host; us: lower is better, rates: higher is better;")
print("gda won: in how many interleaved rounds gda's figure was at least as good as the Open MPI run right after it")
print(fmt(hdr))
print("  ".join("-" * x for x in w))
for r in rows:
    print(fmt(r))
print(f"results: {out}")
status = 0
if missing:
    print("shmem-vs-openmpi: results present for only one implementation: " + "; ".join(missing), file=sys.stderr)
    status = 1
if check:
    if worse:
        print(f"shmem-vs-openmpi: --check: gda is worse than Open MPI on {len(worse)} of {len(rows)} metrics"
              + (f" (beyond {tol:g} %)" if tol else "") + ":", file=sys.stderr)
        for x in worse:
            print("  " + x, file=sys.stderr)
        status = 1
    else:
        print(f"--check: gda is at least as good as Open MPI on all {len(rows)} metrics"
              + (f" (within {tol:g} %)" if tol else ""))
sys.exit(status)
PY
status=$?
set -e

# ---- Plot (the `gda plot` subcommand) -----------------------------------------------------
if [ -n "$PLOT" ]; then
  if [ -x "$BUILD/gda" ]; then
    if "$BUILD/gda" plot --compare "$OUT" --out "$PLOT"; then
      echo "plot: $PLOT" >&2
    else
      echo "shmem-vs-openmpi: \"$BUILD/gda\" plot --compare $OUT --out $PLOT failed" >&2
      status=1
    fi
  else
    echo "shmem-vs-openmpi: warning: $BUILD/gda not found, --plot $PLOT skipped" >&2
  fi
fi
exit $status
