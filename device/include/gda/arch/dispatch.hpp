// gda device API: gda::arch, the functions device code calls. Each picks the target's device
// version in a device pass (d_* in arch/hip.hpp, arch/cuda.hpp) and the host version
// (arch_host, arch/host.hpp) otherwise; GDA_PICK is set by the target's header. What each
// access pairs with is documented in arch.hpp and at the implementations.
#pragma once

#include "../config.hpp"

namespace gda {
namespace arch {

GDA_FN void wqe_to_dbrec_fence() { GDA_PICK(d_wqe_to_dbrec_fence(), arch_host::wqe_to_dbrec_fence()); }
GDA_FN void store_be32_release(uint32_t* p, uint32_t v) {
    GDA_PICK(d_store_be32_release(p, v), arch_host::store_be32_release(p, v));
}
GDA_FN void wc_flush() { GDA_PICK(d_wc_flush(), arch_host::wc_flush()); }
GDA_FN void store_doorbell64(uint64_t* p, uint64_t v) {
    GDA_PICK(d_store_doorbell64(p, v), arch_host::store_doorbell64(p, v));
}
GDA_FN void ring_doorbell64(uint64_t* p, uint64_t v) {
    GDA_PICK(d_ring_doorbell64(p, v), arch_host::ring_doorbell64(p, v));
}
GDA_FN void store_unit16(uint8_t* p, uint64_t lo, uint64_t hi) {
    GDA_PICK(d_store_unit16(p, lo, hi), arch_host::store_unit16(p, lo, hi));
}
GDA_FN uint32_t load_u32_acquire(const uint32_t* p) {
    return GDA_PICK(d_load_u32_acquire(p), arch_host::load_u32_acquire(p));
}
GDA_FN uint64_t load_u64_acquire(const uint64_t* p) {
    return GDA_PICK(d_load_u64_acquire(p), arch_host::load_u64_acquire(p));
}
GDA_FN void store_u32_release(uint32_t* p, uint32_t v) {
    GDA_PICK(d_store_u32_release(p, v), arch_host::store_u32_release(p, v));
}
GDA_FN void store_u64_release(uint64_t* p, uint64_t v) {
    GDA_PICK(d_store_u64_release(p, v), arch_host::store_u64_release(p, v));
}
GDA_FN uint32_t fetch_add_u32(uint32_t* p, uint32_t v) {
    return GDA_PICK(d_fetch_add_u32(p, v), arch_host::fetch_add_u32(p, v));
}
GDA_FN uint64_t fetch_add_u64(uint64_t* p, uint64_t v) {
    return GDA_PICK(d_fetch_add_u64(p, v), arch_host::fetch_add_u64(p, v));
}
GDA_FN uint64_t cas_u64(uint64_t* p, uint64_t expected, uint64_t desired) {
    return GDA_PICK(d_cas_u64(p, expected, desired), arch_host::cas_u64(p, expected, desired));
}
GDA_FN uint32_t cas_u32(uint32_t* p, uint32_t expected, uint32_t desired) {
    return GDA_PICK(d_cas_u32(p, expected, desired), arch_host::cas_u32(p, expected, desired));
}
// Raises *p to at least v (release); returns the value before.
GDA_FN uint64_t fetch_max_u64(uint64_t* p, uint64_t v) {
    return GDA_PICK(d_fetch_max_u64(p, v), arch_host::fetch_max_u64(p, v));
}
GDA_FN void fence_system() { GDA_PICK(d_fence_system(), arch_host::fence_system()); }
#define GDA_RMW(name, T)                                                     \
    GDA_FN T name(T* p, T v) { return GDA_PICK(d_##name(p, v), arch_host::name(p, v)); }
GDA_RMW(exchange_u32, uint32_t)
GDA_RMW(exchange_u64, uint64_t)
GDA_RMW(fetch_and_u32, uint32_t)
GDA_RMW(fetch_and_u64, uint64_t)
GDA_RMW(fetch_or_u32, uint32_t)
GDA_RMW(fetch_or_u64, uint64_t)
GDA_RMW(fetch_xor_u32, uint32_t)
GDA_RMW(fetch_xor_u64, uint64_t)
#undef GDA_RMW
GDA_FN void pause() { GDA_PICK(d_pause(), arch_host::pause()); }
// A host thread gives its core away (the software NIC's engine may need it); a GPU lane pauses.
GDA_FN void yield() { GDA_PICK(d_pause(), arch_host::yield()); }

// One step of a bounded wait, as gda_hal::sync::Waiter: 63 of 64 steps spin; every 64th
// gives the core away and checks the deadline. False once the deadline has passed.
template <class Clock>
GDA_FN bool wait_step(uint32_t& spins, uint64_t deadline, Clock now) {
    if (++spins % 64 != 0) {
        pause();
        return true;
    }
    yield();
    return now() <= deadline;
}

// The owner byte of a CQE: read as the aligned 32-bit word that holds it (GPUs have no
// system-scope atomic byte load), acquire.
GDA_FN uint8_t load_byte_acquire(const uint8_t* p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uint32_t w = load_u32_acquire(reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3)));
    return uint8_t(w >> (8 * (a & 3)));  // little-endian hosts and GPUs
}

}  // namespace arch
}  // namespace gda

#undef GDA_PICK
