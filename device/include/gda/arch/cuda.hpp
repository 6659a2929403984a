// gda device API, CUDA target (NVIDIA GPUs). Device pass: release fences and stores at system
// scope in PTX (the compiler has no intrinsic for st.mmio, the doorbell store NVIDIA documents
// for MMIO), __threadfence_system between steps. Host pass: the host implementation.
#pragma once

#include <cuda_runtime.h>

#include "../config.hpp"
#include "host.hpp"

namespace gda {
namespace arch {

#if defined(GDA_DEVICE_PASS)
#define GDA_ARCH_FN __device__ inline __attribute__((always_inline))

// Read-modify-write atomics (the posting protocol's reservations and tickets, the SHMEM atomics
// on a mapped peer heap) are system-scoped: atomic against host threads and other devices too.
// A GPU whose cudaDevAttrHostNativeAtomicSupported is 0 (an x86 host over PCIe) has no such
// atomics on host memory: CUDA keeps them atomic only among its own threads, and
// compute-sanitizer reports each one on mapped host memory as invalid. Define
// GDA_CUDA_DEVICE_SCOPE_ATOMICS there: the atomics are then device-scoped, which is exactly
// what such a GPU gives, and correct while only this GPU's kernels update a word at the same
// time (host threads may use the same queues and words between kernels, not during one).
// Ordering towards the NIC does not change: fences, record and doorbell stay system-scoped.
#if defined(GDA_CUDA_DEVICE_SCOPE_ATOMICS)
#define GDA_CUDA_ATOMIC(op) op
#else
#define GDA_CUDA_ATOMIC(op) op##_system
#endif

// WQE stores -> doorbell record: st.release.sys (below) orders every earlier store of the
// thread before it at system scope; only the compiler must keep them there.
GDA_ARCH_FN void d_wqe_to_dbrec_fence() { asm volatile("" ::: "memory"); }
// Release at system scope pairs with the NIC's read of the record.
GDA_ARCH_FN void d_store_be32_release(uint32_t* p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
GDA_ARCH_FN void d_wc_flush() { __threadfence_system(); }
// The doorbell: one 64-bit MMIO store (st.mmio is never merged or split); one lane per QP.
GDA_ARCH_FN void d_store_doorbell64(uint64_t* p, uint64_t v) {
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// The doorbell: a system-scope release fence (the record's store first), then one st.mmio.
GDA_ARCH_FN void d_ring_doorbell64(uint64_t* p, uint64_t v) {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
GDA_ARCH_FN void d_store_unit16(uint8_t* p, uint64_t lo, uint64_t hi) {
    *reinterpret_cast<ulonglong2*>(p) = make_ulonglong2(lo, hi);
}
GDA_ARCH_FN uint32_t d_load_u32_acquire(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
GDA_ARCH_FN uint64_t d_load_u64_acquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
GDA_ARCH_FN void d_store_u32_release(uint32_t* p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
GDA_ARCH_FN void d_store_u64_release(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
GDA_ARCH_FN uint32_t d_fetch_add_u32(uint32_t* p, uint32_t v) { return GDA_CUDA_ATOMIC(atomicAdd)(p, v); }
GDA_ARCH_FN uint64_t d_fetch_add_u64(uint64_t* p, uint64_t v) {
    return GDA_CUDA_ATOMIC(atomicAdd)(reinterpret_cast<unsigned long long*>(p),
                            static_cast<unsigned long long>(v));
}
GDA_ARCH_FN uint64_t d_cas_u64(uint64_t* p, uint64_t expected, uint64_t desired) {
    return GDA_CUDA_ATOMIC(atomicCAS)(reinterpret_cast<unsigned long long*>(p),
                            static_cast<unsigned long long>(expected),
                            static_cast<unsigned long long>(desired));
}
GDA_ARCH_FN uint32_t d_cas_u32(uint32_t* p, uint32_t expected, uint32_t desired) {
    return GDA_CUDA_ATOMIC(atomicCAS)(p, expected, desired);
}
GDA_ARCH_FN uint64_t d_fetch_max_u64(uint64_t* p, uint64_t v) {
    __threadfence_system();  // release: what this thread wrote before is visible first
    return GDA_CUDA_ATOMIC(atomicMax)(reinterpret_cast<unsigned long long*>(p),
                            static_cast<unsigned long long>(v));
}
// The SHMEM device API's atomics on symmetric memory (relaxed, system scope).
GDA_ARCH_FN uint32_t d_exchange_u32(uint32_t* p, uint32_t v) { return GDA_CUDA_ATOMIC(atomicExch)(p, v); }
GDA_ARCH_FN uint64_t d_exchange_u64(uint64_t* p, uint64_t v) {
    return GDA_CUDA_ATOMIC(atomicExch)(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
GDA_ARCH_FN uint32_t d_fetch_and_u32(uint32_t* p, uint32_t v) { return GDA_CUDA_ATOMIC(atomicAnd)(p, v); }
GDA_ARCH_FN uint64_t d_fetch_and_u64(uint64_t* p, uint64_t v) {
    return GDA_CUDA_ATOMIC(atomicAnd)(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
GDA_ARCH_FN uint32_t d_fetch_or_u32(uint32_t* p, uint32_t v) { return GDA_CUDA_ATOMIC(atomicOr)(p, v); }
GDA_ARCH_FN uint64_t d_fetch_or_u64(uint64_t* p, uint64_t v) {
    return GDA_CUDA_ATOMIC(atomicOr)(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
GDA_ARCH_FN uint32_t d_fetch_xor_u32(uint32_t* p, uint32_t v) { return GDA_CUDA_ATOMIC(atomicXor)(p, v); }
GDA_ARCH_FN uint64_t d_fetch_xor_u64(uint64_t* p, uint64_t v) {
    return GDA_CUDA_ATOMIC(atomicXor)(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
GDA_ARCH_FN void d_fence_system() { __threadfence_system(); }
GDA_ARCH_FN void d_pause() { __nanosleep(32); }
#undef GDA_ARCH_FN
#undef GDA_CUDA_ATOMIC
#define GDA_PICK(dev, host) dev
#else
#define GDA_PICK(dev, host) host
#endif

}  // namespace arch
}  // namespace gda

#include "dispatch.hpp"
