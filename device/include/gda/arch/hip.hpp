// gda device API, HIP target (AMD GPUs). Device pass: system-scope atomics and
// __threadfence_system (rings, doorbell records and CQs may be host memory mapped for the GPU,
// the doorbell an MMIO page mapped with hipHostRegister). Host pass: the host implementation.
#pragma once

#include <hip/hip_runtime.h>

#include "../config.hpp"
#include "host.hpp"

namespace gda {
namespace arch {

#if defined(GDA_DEVICE_PASS)
// Every function below is the device side of the host one of the same name (arch/host.hpp).
#define GDA_ARCH_FN __device__ inline __attribute__((always_inline))

// WQE stores -> doorbell record: the record's system-scope release store (below) already writes
// back every earlier store before it (on gfx90a/gfx94x it lowers to buffer_wbl2 + s_waitcnt
// ahead of the store), so only the compiler must keep the WQE stores before it.
GDA_ARCH_FN void d_wqe_to_dbrec_fence() { __atomic_signal_fence(__ATOMIC_RELEASE); }
// Release at system scope pairs with the NIC's (or the software NIC's acquire) read.
// Doorbell records, doorbells and rings are global memory (device memory, or host memory
// mapped for the GPU), never LDS or scratch: stores through the global address space let the
// compiler address them from scalar registers.
template <class T>
GDA_ARCH_FN __attribute__((address_space(1))) T* d_global(T* p) {
    typedef __attribute__((address_space(1))) T G;
    return (G*)(p);  // a C-style cast: the only way to change address space
}
GDA_ARCH_FN void d_store_be32_release(uint32_t* p, uint32_t v) {
    __hip_atomic_store(d_global(p), v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN void d_wc_flush() { __threadfence_system(); }
// One 64-bit store, atomic so that it is never split; the caller makes sure only one lane
// stores a given QP's doorbell per instruction (lanes' doorbell stores in one instruction
// coalesce and all but one are lost).
GDA_ARCH_FN void d_store_doorbell64(uint64_t* p, uint64_t v) {
    __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
// The doorbell: a system-scope release store (the release makes the doorbell record's store
// complete first: buffer_wbl2 + s_waitcnt before it). Nothing after it needs ordering: the NIC
// reads only WQEs below a record it has seen, and the next doorbell is a release again.
GDA_ARCH_FN void d_ring_doorbell64(uint64_t* p, uint64_t v) {
    __hip_atomic_store(d_global(p), v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
// One 16-byte WQE unit through the global address space (rings are device or host-mapped
// memory, never LDS or scratch): the compiler can then use a scalar base register.
GDA_ARCH_FN void d_store_unit16(uint8_t* p, uint64_t lo, uint64_t hi) {
    typedef uint64_t __attribute__((ext_vector_type(2))) V;
    *d_global(reinterpret_cast<V*>(p)) = V{lo, hi};
}
GDA_ARCH_FN uint32_t d_load_u32_acquire(const uint32_t* p) {
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN uint64_t d_load_u64_acquire(const uint64_t* p) {
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN void d_store_u32_release(uint32_t* p, uint32_t v) {
    __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN void d_store_u64_release(uint64_t* p, uint64_t v) {
    __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN uint32_t d_fetch_add_u32(uint32_t* p, uint32_t v) {
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN uint64_t d_fetch_add_u64(uint64_t* p, uint64_t v) {
    return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
GDA_ARCH_FN uint64_t d_cas_u64(uint64_t* p, uint64_t expected, uint64_t desired) {
    __hip_atomic_compare_exchange_strong(p, &expected, desired, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
    return expected;
}
GDA_ARCH_FN uint32_t d_cas_u32(uint32_t* p, uint32_t expected, uint32_t desired) {
    __hip_atomic_compare_exchange_strong(p, &expected, desired, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
    return expected;
}
GDA_ARCH_FN uint64_t d_fetch_max_u64(uint64_t* p, uint64_t v) {
    return __hip_atomic_fetch_max(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
#define GDA_HIP_RMW(name, builtin, T)                                              \
    GDA_ARCH_FN T d_##name(T* p, T v) {                                            \
        return builtin(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);        \
    }
GDA_HIP_RMW(exchange_u32, __hip_atomic_exchange, uint32_t)
GDA_HIP_RMW(exchange_u64, __hip_atomic_exchange, uint64_t)
GDA_HIP_RMW(fetch_and_u32, __hip_atomic_fetch_and, uint32_t)
GDA_HIP_RMW(fetch_and_u64, __hip_atomic_fetch_and, uint64_t)
GDA_HIP_RMW(fetch_or_u32, __hip_atomic_fetch_or, uint32_t)
GDA_HIP_RMW(fetch_or_u64, __hip_atomic_fetch_or, uint64_t)
GDA_HIP_RMW(fetch_xor_u32, __hip_atomic_fetch_xor, uint32_t)
GDA_HIP_RMW(fetch_xor_u64, __hip_atomic_fetch_xor, uint64_t)
#undef GDA_HIP_RMW
GDA_ARCH_FN void d_fence_system() { __threadfence_system(); }
GDA_ARCH_FN void d_pause() { __builtin_amdgcn_s_sleep(1); }
#undef GDA_ARCH_FN
#define GDA_PICK(dev, host) dev
#else
#define GDA_PICK(dev, host) host
#endif

}  // namespace arch
}  // namespace gda

#include "dispatch.hpp"
