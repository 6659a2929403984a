#!/usr/bin/env bash
# Compiles every device API header (device/tests/all_headers.cpp) with -Werror for each target
# whose compiler is installed: host C++ (g++, clang++), HIP (hipcc: gfx90a, gfx940), CUDA (nvcc:
# sm_80, sm_90), and the GPU examples (examples/device/*.hip with hipcc, *.cu with nvcc). Then runs
# the posting protocol under ThreadSanitizer (tests/protocol_tsan.cpp:
# host threads and a device stand-in; g++ -fsanitize=thread, any report fails). Prints one line
# per step; a missing compiler is SKIPPED with its name (and an error with --require), a failed
# step exits 1.
#
#   device/check.sh [--require host,hip,cuda] [--isa DIR]
#
# --isa DIR keeps the HIP ISA (`*-hip-amdgcn-amd-amdhsa-gfx90a.s`) and CUDA SASS there.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/tests/all_headers.cpp"
inc="$here/include"
examples="$here/../examples/device"
capi_inc="$here/../shmem/capi/include"
require=""
isa=""
while [ $# -gt 0 ]; do
  case "$1" in
    --require) require=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    *) echo "device/check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
want() { case ",$require," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
skip() {
  if want "$1"; then echo "device/check.sh: $2 is required but not installed" >&2; fail=1;
  else echo "SKIPPED $2 (not installed)"; fi
}
run() {
  local name=$1; shift
  if "$@" > "$tmp/log" 2>&1; then echo "ok      $name"; else echo "FAILED  $name"; cat "$tmp/log"; fail=1; fi
}
flags=(-std=c++17 -Wall -Wextra -Werror -O3 -I "$inc")
for cxx in g++ clang++; do
  if command -v "$cxx" >/dev/null; then run "host $cxx" "$cxx" "${flags[@]}" -c "$src" -o "$tmp/host.o";
  else skip host "$cxx"; fi
done
hipcc=${HIPCC:-hipcc}
if command -v "$hipcc" >/dev/null; then
  for arch in gfx90a gfx940; do
    if [ -n "$isa" ]; then
      mkdir -p "$isa"
      run "hip $arch" sh -c "cd '$isa' && '$hipcc' -x hip --offload-arch=$arch --save-temps ${flags[*]} -c '$src' -o '$tmp/hip-$arch.o'"
    else
      run "hip $arch" "$hipcc" -x hip --offload-arch=$arch "${flags[@]}" -c "$src" -o "$tmp/hip-$arch.o"
    fi
  done
  for ex in "$examples"/*.hip; do
    run "hip example $(basename "$ex")" "$hipcc" -x hip --offload-arch=gfx90a --offload-arch=gfx940 \
      "${flags[@]}" -I "$capi_inc" -I "$examples" -c "$ex" -o "$tmp/ex-hip.o"
  done
else
  skip hip hipcc
fi
nvcc=${NVCC:-nvcc}
if command -v "$nvcc" >/dev/null; then
  for sm in 80 90; do
    run "cuda sm_$sm" "$nvcc" -x cu -std=c++17 -O3 -Werror all-warnings -I "$inc" \
      -arch=sm_$sm -c "$src" -o "$tmp/cuda-$sm.o"
  done
  # The variant for GPUs without host-native atomics (device-scoped atomics; arch/cuda.hpp).
  run "cuda sm_90 device-scope atomics" "$nvcc" -x cu -std=c++17 -O3 -Werror all-warnings -I "$inc" \
    -DGDA_CUDA_DEVICE_SCOPE_ATOMICS -arch=sm_90 -c "$src" -o "$tmp/cuda-90d.o"
  for ex in "$examples"/*.cu; do
    run "cuda example $(basename "$ex")" "$nvcc" -x cu -std=c++17 -O3 -Werror all-warnings \
      -I "$inc" -I "$capi_inc" -I "$examples" -gencode arch=compute_80,code=sm_80 \
      -gencode arch=compute_90,code=sm_90 -c "$ex" -o "$tmp/ex-cuda.o"
  done
else
  skip cuda nvcc
fi
# Code size of the hot path (kernel gda_check_post_inline: reserve, 8-byte inline WRITE, record,
# doorbell) against the count of MORI's equivalent path (gfx90a:
# 57 instructions, 14 VGPRs, 18 SGPRs, no scratch); more is a regression. The sm_90 SASS count
# (cuobjdump + nvdisasm, when installed) must show no local memory (spills).
if command -v "$hipcc" >/dev/null; then
  mkdir -p "$tmp/isa"
  if (cd "$tmp/isa" && "$hipcc" -x hip --offload-arch=gfx90a --save-temps "${flags[@]}" -c "$src" -o x.o) > "$tmp/log" 2>&1; then
    s_file=$(ls "$tmp"/isa/*gfx90a*.s | head -1)
    n=$(awk '/^gda_check_post_inline:/,/s_endpgm/' "$s_file" | grep -v '^\s*;' | grep -v '^\s*\.' | grep -vc '^gda_check')
    meta=$(grep -A40 '^\s*.name:\s*gda_check_post_inline' "$s_file")
    v=$(echo "$meta" | awk '/\.vgpr_count:/{print $2; exit}')
    sg=$(echo "$meta" | awk '/\.sgpr_count:/{print $2; exit}')
    sc=$(echo "$meta" | awk '/\.private_segment_fixed_size:/{print $2; exit}')
    line="gfx90a post: $n instructions, $v VGPRs, $sg SGPRs, ${sc:-0} bytes scratch (MORI: 57, 14, 18, 0)"
    if [ "$n" -le 57 ] && [ "$v" -le 14 ] && [ "$sg" -le 18 ] && [ "${sc:-0}" -eq 0 ]; then
      echo "ok      $line"
    else
      echo "FAILED  $line"; fail=1
    fi
    [ -n "$isa" ] && cp "$s_file" "$isa/"
  else
    echo "FAILED  gfx90a ISA"; cat "$tmp/log"; fail=1
  fi
fi
cuobjdump=${CUOBJDUMP:-$(dirname "$(command -v "$nvcc" 2>/dev/null || echo /nonexistent)")/cuobjdump}
if command -v "$nvcc" >/dev/null && [ -x "$cuobjdump" ]; then
  if "$nvcc" -x cu -std=c++17 -O3 -I "$inc" -arch=sm_90 -cubin "$src" -o "$tmp/k90.cubin" > "$tmp/log" 2>&1 &&
     PATH="$(dirname "$cuobjdump"):$PATH" "$cuobjdump" -sass "$tmp/k90.cubin" > "$tmp/sass" 2>&1; then
    n=$(awk '/Function : gda_check_post_inline/{f=1;next} f&&/Function : /{f=0} f' "$tmp/sass" | grep -E '/\*[0-9a-f]{4}\*/' | grep -vc 'NOP')
    res=$("$cuobjdump" -res-usage "$tmp/k90.cubin" 2>&1 | grep -A1 'Function gda_check_post_inline:' | tail -1)
    regs=$(echo "$res" | sed -n 's/.*REG:\([0-9]*\).*/\1/p')
    local_b=$(echo "$res" | sed -n 's/.*LOCAL:\([0-9]*\).*/\1/p')
    line="sm_90 post: $n SASS instructions (NOPs left out), $regs registers, ${local_b} bytes local"
    if [ "${local_b:-1}" -eq 0 ]; then echo "ok      $line"; else echo "FAILED  $line (spills)"; fail=1; fi
    [ -n "$isa" ] && cp "$tmp/sass" "$isa/sm_90.sass"
  else
    echo "FAILED  sm_90 SASS"; tail -n 20 "$tmp/log" "$tmp/sass"; fail=1
  fi
else
  echo "SKIPPED sm_90 SASS count (cuobjdump/nvdisasm not installed)"
fi
if command -v g++ >/dev/null; then
  if g++ -std=c++17 -O1 -g -fsanitize=thread -Wall -Wextra -Werror -I "$inc" \
       "$here/tests/protocol_tsan.cpp" -o "$tmp/protocol_tsan" -pthread > "$tmp/log" 2>&1 &&
     TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$tmp/protocol_tsan" > "$tmp/run" 2>&1; then
    echo "ok      tsan protocol ($(tail -1 "$tmp/run"))"
  else
    echo "FAILED  tsan protocol"; cat "$tmp/log" "$tmp/run" 2>/dev/null | tail -40; fail=1
  fi
  # Mutants the checks must catch: the doorbell record stored without release (a missing
  # fence): the build must FAIL under ThreadSanitizer with a data race.
  for mutant in RELAXED_DBREC; do
    if g++ -std=c++17 -O1 -g -fsanitize=thread -DGDA_MUTANT_$mutant -I "$inc" \
         "$here/tests/protocol_tsan.cpp" -o "$tmp/mutant" -pthread > "$tmp/log" 2>&1 &&
       ! TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$tmp/mutant" > "$tmp/run" 2>&1 &&
       grep -q "data race" "$tmp/run"; then
      echo "ok      tsan catches mutant $mutant"
    else
      echo "FAILED  tsan missed mutant $mutant"; tail -n 20 "$tmp/log" "$tmp/run"; fail=1
    fi
  done
else
  skip host "g++ (for ThreadSanitizer)"
fi
exit $fail
