#!/usr/bin/env bash
# Runs the device examples (examples/device: put_signal_ring, moe_dispatch) as kernels on this
# machine's GPU against the software NIC: built with nvcc (NVIDIA) or hipcc (AMD) against gda's
# C ABI, started by gdarun, each PE's kernel posting, ringing and polling the software NIC's
# queues in host memory that gda maps for the GPU (`Ctx::memory` Mapped), over RDMA on every
# provider format and over P2P. A GPU without an RDMA NIC is enough.
#
#   scripts/gpu-examples.sh [--lib DIR] [--deadline SECONDS] [--pes "2 4"] [--cpu] [--sanitize]
#
# On an NVIDIA GPU without host-native atomics (cudaDevAttrHostNativeAtomicSupported 0: an x86
# host over PCIe) the examples are built with -DGDA_CUDA_DEVICE_SCOPE_ATOMICS (arch/cuda.hpp
# says why). --sanitize runs every PE under compute-sanitizer's memcheck (NVIDIA), and a
# reported error fails the run.
#
# --cpu builds the same sources as host C++ with gdacc and runs them on CPU threads (the
# script's own check on machines without a GPU).
#
# DIR holds gdarun, libgdashmem.so and gda-include/ (default target/release, built with
# `cargo build --release --features capi,hip`); only a C++ compiler for the GPU is needed here,
# not Rust. Runs are ordered 2 PEs first; once SECONDS (default 420) have passed the rest are
# reported as not run. Prints one line per run and a summary; exits 1 if a run failed, 2 if
# there is no GPU or compiler, 3 if runs were left out.
#
# tests/shmem_device.rs's ignored `gpu_examples_drive_the_software_nic_from_a_real_gpu` runs
# this script.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib="$here/target/release"
deadline=420
pes="2 4"
cpu=0
sanitize=0
while [ $# -gt 0 ]; do
  case "$1" in
    --lib) lib=$(cd "$2" && pwd); shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --pes) pes=$2; shift 2 ;;
    --cpu) cpu=1; shift ;;
    --sanitize) sanitize=1; shift ;;
    *) echo "gpu-examples: unknown argument $1" >&2; exit 2 ;;
  esac
done
for f in gdarun libgdashmem.so gda-include/shmem.h gda-include/gda/shmem.hpp; do
  [ -e "$lib/$f" ] || { echo "gpu-examples: $lib/$f is missing (cargo build --release --features capi,hip)" >&2; exit 2; }
done
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Which GPU, and its compiler.
if [ $cpu -eq 1 ]; then
  vendor=cpu
  build() { "$lib/gdacc" -O2 -I "$here/examples/device" "$1" -o "$2"; }
  ext=hip
elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  vendor=nvidia
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu-examples: GPU: /'
  command -v nvcc >/dev/null || { echo "gpu-examples: an NVIDIA GPU but no nvcc" >&2; exit 2; }
  nvcc --version | tail -1 | sed 's/^/gpu-examples: nvcc: /'
  # gda opens CUDA's runtime with dlopen (gda-hip; GDA_CUDA_LIB names it): find one beside nvcc.
  if [ -z "${GDA_CUDA_LIB:-}" ]; then
    for d in "$(dirname "$(command -v nvcc)")/../lib64" "$(dirname "$(command -v nvcc)")/../lib" \
             /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
      c=$(ls "$d"/libcudart.so.[0-9]* 2>/dev/null | sort -V | tail -1)
      if [ -n "$c" ]; then export GDA_CUDA_LIB=$c; break; fi
    done
  fi
  [ -n "${GDA_CUDA_LIB:-}" ] || { echo "gpu-examples: no libcudart.so found (set GDA_CUDA_LIB)" >&2; exit 2; }
  echo "gpu-examples: CUDA runtime for gda: $GDA_CUDA_LIB"
  export LD_LIBRARY_PATH="$(dirname "$GDA_CUDA_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # What the GPU offers host memory: system-scoped atomics or not.
  cat > "$tmp/attrs.cu" <<'EOF2'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
    int a = -1, p = -1, h = -1;
    cudaDeviceGetAttribute(&a, cudaDevAttrHostNativeAtomicSupported, 0);
    cudaDeviceGetAttribute(&p, cudaDevAttrPageableMemoryAccess, 0);
    cudaDeviceGetAttribute(&h, cudaDevAttrCanUseHostPointerForRegisteredMem, 0);
    std::printf("%d %d %d\n", a, p, h);
}
EOF2
  nvcc -O2 "$tmp/attrs.cu" -o "$tmp/attrs" > "$tmp/attrs.log" 2>&1 || { cat "$tmp/attrs.log"; exit 2; }
  read -r native_atomics pageable same_addr < <("$tmp/attrs")
  echo "gpu-examples: host-native atomics $native_atomics, pageable memory access $pageable, registered memory at host addresses $same_addr"
  cuda_flags=()
  if [ "$native_atomics" != 1 ]; then
    cuda_flags+=(-DGDA_CUDA_DEVICE_SCOPE_ATOMICS)
    echo "gpu-examples: no system-scoped atomics on host memory: building with -DGDA_CUDA_DEVICE_SCOPE_ATOMICS"
  fi
  build() {  # source exe
    nvcc -x cu -std=c++17 -O3 -arch=native -cudart shared "${cuda_flags[@]}" -I "$lib/gda-include" \
      -I "$here/examples/device" "$1" -o "$2" -L "$lib" -Xlinker -rpath -Xlinker "$lib" -lgdashmem
  }
  ext=cu
elif [ -e /dev/kfd ] && command -v hipcc >/dev/null; then
  vendor=amd
  build() {
    hipcc -std=c++17 -O3 -I "$lib/gda-include" -I "$here/examples/device" "$1" -o "$2" \
      -L "$lib" -Wl,-rpath,"$lib" -lgdashmem
  }
  ext=hip
else
  echo "gpu-examples: no GPU with its compiler here (nvidia-smi + nvcc, or /dev/kfd + hipcc)" >&2
  exit 2
fi

configs=("rdma native host" "rdma mlx5 host" "rdma bnxt host" "p2p - host")
# AMD's fine-grained device memory can also hold the heap and rings (CUDA's cannot: the host and
# the software NIC do not address it).
[ "$vendor" = amd ] && configs+=("p2p - gpu")
fail=0 ran=0 ok=0 left=0
for name in put_signal_ring moe_dispatch; do
  t0=$SECONDS
  if ! build "$here/examples/device/$name.$ext" "$tmp/$name" > "$tmp/$name.build" 2>&1; then
    echo "FAILED  build $name"; cat "$tmp/$name.build"; fail=1; continue
  fi
  echo "ok      build $name.$ext ($((SECONDS - t0)) s)"
done
# Every configuration at 2 PEs, then at 4.
for n in $pes; do
  for name in put_signal_ring moe_dispatch; do
    [ -x "$tmp/$name" ] || continue
    for cfg in "${configs[@]}"; do
      set -- $cfg
      label="$name -n $n transport=$1 provider=$2 heap=$3"
      if [ $((SECONDS - start)) -ge "$deadline" ]; then
        echo "NOT RUN $label (deadline)"; left=$((left + 1)); continue
      fi
      env=(GDA_SHMEM_TRANSPORT=$1 GDA_SHMEM_HEAP=$3 GDA_SHMEM_TIMEOUT_MS=30000)
      [ "$2" != - ] && env+=(GDA_SHMEM_PROVIDER=$2)
      t0=$SECONDS
      wrap=()
      [ $sanitize -eq 1 ] && [ "$vendor" = nvidia ] &&
        wrap=(compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 5)
      env "${env[@]}" timeout -k 5 90 "$lib/gdarun" -n "$n" "${wrap[@]}" "$tmp/$name" > "$tmp/out" 2>&1
      rc=$?
      got=$(grep -c "^$name: .* ok$" "$tmp/out")
      where=$(grep -m1 "^$name: PE 0: context in " "$tmp/out" | sed 's/.*context in //')
      ran=$((ran + 1))
      # On a GPU, gda itself must have made the context reachable (mapped or GPU memory):
      # plain host memory would leave the heap and queues to the driver's HMM, if it has one.
      if [ "$vendor" != cpu ] && [ "$where" = "host memory" ]; then
        rc=97; echo "        gda did not map the context's memory for the GPU"
      fi
      if [ $rc -eq 0 ] && [ "$got" -eq "$n" ]; then
        ok=$((ok + 1)); echo "ok      $label ($((SECONDS - t0)) s; context in $where${wrap:+; memcheck: $(grep -c 'ERROR SUMMARY: 0 errors' "$tmp/out") PEs with 0 errors})"
      else
        fail=1; echo "FAILED  $label (exit $rc, $got of $n PEs ok, $((SECONDS - t0)) s)"
        tail -20 "$tmp/out" | sed 's/^/        /'
      fi
    done
  done
done
echo "gpu-examples: $vendor: $ok of $ran runs ok, $left not run, $((SECONDS - start)) s"
[ $fail -eq 0 ] || exit 1
[ $left -eq 0 ] || exit 3
