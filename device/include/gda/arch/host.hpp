// gda device API, host target (CPU threads standing in for GPU lanes; the software NIC's
// engine is the device). The same orderings as gda_hal::mmio on the Rust side.
//
// These are host functions only (namespace gda::arch_host); gda::arch (arch/dispatch.hpp)
// calls them on the host and the target's device versions in a device pass.
#pragma once

#include "../config.hpp"

#if !defined(GDA_DEVICE_PASS)
#include <atomic>
#include <sched.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define GDA_HOST_FN inline __attribute__((always_inline))

namespace gda {
namespace arch_host {

// WQE stores -> doorbell record. x86 keeps stores in order (TSO): the release store of the
// record is enough, and this only stops the compiler from sinking WQE stores past it. Weaker
// CPUs get a store barrier.
GDA_HOST_FN void wqe_to_dbrec_fence() {
#if defined(__x86_64__)
    std::atomic_signal_fence(std::memory_order_release);
#elif defined(__aarch64__)
    __asm__ volatile("dmb oshst" ::: "memory");
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// The big-endian doorbell-record word. Release pairs with the device's acquire read of it.
GDA_HOST_FN void store_be32_release(uint32_t* p, uint32_t value_be) {
#if defined(GDA_MUTANT_RELAXED_DBREC)
    // Test-only mutant (device/check.sh expects ThreadSanitizer to report it): the record
    // store without its release, so the device may read WQE bytes not yet written.
    __atomic_store_n(p, value_be, __ATOMIC_RELAXED);
#else
    __atomic_store_n(p, value_be, __ATOMIC_RELEASE);
#endif
}

// Drains write-combining buffers: record before doorbell, doorbell before what follows.
GDA_HOST_FN void wc_flush() {
#if defined(__x86_64__)
    _mm_sfence();
#elif defined(__aarch64__)
    __asm__ volatile("dsb st" ::: "memory");
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// One 64-bit store to the doorbell (a torn doorbell rings a wrong producer index). The bytes
// are stored as they are in memory order (the doorbell value is the control segment's first
// 8 bytes).
GDA_HOST_FN void store_doorbell64(uint64_t* p, uint64_t bytes) {
    *reinterpret_cast<volatile uint64_t*>(p) = bytes;
}

// The doorbell of a posted WQE: ordered after everything before it (the doorbell record), one
// 64-bit store, drained from write-combining buffers at once.
GDA_HOST_FN void ring_doorbell64(uint64_t* p, uint64_t bytes) {
    wc_flush();
    store_doorbell64(p, bytes);
    wc_flush();
}

// One 16-byte WQE unit, plain stores (published by the doorbell record's release).
GDA_HOST_FN void store_unit16(uint8_t* p, uint64_t lo, uint64_t hi) {
    struct alignas(16) U {
        uint64_t lo, hi;
    };
    *reinterpret_cast<U*>(p) = U{lo, hi};
}

// The owner/phase byte of a CQE the device writes. Acquire: the CQE's other bytes read after it
// are those the device wrote before it flipped the byte.


GDA_HOST_FN uint32_t fetch_add_u32(uint32_t* p, uint32_t v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
GDA_HOST_FN uint64_t fetch_add_u64(uint64_t* p, uint64_t v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
// Compare-and-swap; returns the value seen (== expected: it was stored).
GDA_HOST_FN uint64_t cas_u64(uint64_t* p, uint64_t expected, uint64_t desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    return expected;
}
GDA_HOST_FN uint32_t cas_u32(uint32_t* p, uint32_t expected, uint32_t desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    return expected;
}
GDA_HOST_FN uint64_t fetch_max_u64(uint64_t* p, uint64_t v) {
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELEASE,
                                                   __ATOMIC_RELAXED)) {
    }
    return cur;
}
GDA_HOST_FN uint32_t load_u32_acquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
GDA_HOST_FN uint64_t load_u64_acquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
GDA_HOST_FN void store_u32_release(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
GDA_HOST_FN void store_u64_release(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// The SHMEM device API's atomics on symmetric memory (relaxed: OpenSHMEM orders them only
// through fence and quiet), and its system-wide fence.
GDA_HOST_FN uint32_t exchange_u32(uint32_t* p, uint32_t v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint64_t exchange_u64(uint64_t* p, uint64_t v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint32_t fetch_and_u32(uint32_t* p, uint32_t v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint64_t fetch_and_u64(uint64_t* p, uint64_t v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint32_t fetch_or_u32(uint32_t* p, uint32_t v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint64_t fetch_or_u64(uint64_t* p, uint64_t v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint32_t fetch_xor_u32(uint32_t* p, uint32_t v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }
GDA_HOST_FN uint64_t fetch_xor_u64(uint64_t* p, uint64_t v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }
// Orders every earlier access of this thread before every later one, for every observer (other
// processes, the NIC): OpenSHMEM fence/quiet over load/store routes.
GDA_HOST_FN void fence_system() {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer does not model stand-alone fences (GCC refuses them with -Werror=tsan);
    // it checks the release/acquire pairs, which carry the synchronisation gda relies on.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

// Gives the CPU away (host only): CPU threads standing in for lanes share cores with the
// software NIC's engine, which must run for a wait to end.
GDA_HOST_FN void yield() { sched_yield(); }

GDA_HOST_FN void pause() {
#if defined(__x86_64__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

}  // namespace arch_host
}  // namespace gda

#undef GDA_HOST_FN
#endif  // !GDA_DEVICE_PASS
