// gda device API: the only place for fences, atomics, doorbell (MMIO) stores and loads of
// memory the NIC writes. Each target has one implementation (arch/host.hpp, arch/hip.hpp,
// arch/cuda.hpp) of the same functions:
//
//   wqe_to_dbrec_fence()        WQE stores -> doorbell record      (pairs with the NIC's read of
//                                                                  the record, then the WQE)
//   store_be32_release(p, v)    the doorbell record word           (pairs with the NIC's read)
//   wc_flush()                  record -> doorbell, doorbell -> later stores
//   store_doorbell64(p, v)      one 64-bit store to the doorbell   (never torn, never merged
//                                                                  with another lane's)
//   ring_doorbell64(p, v)       the doorbell of a posted WQE: after the record, one 64-bit
//                               store, one lane (host: flushed from write combining)
//   store_unit16(p, lo, hi)     one 16-byte WQE unit (plain; published by the record's release)
//   load_byte_acquire(p)        CQE owner/phase byte               (pairs with the NIC's CQE
//                                                                  write; later loads of the CQE
//                                                                  see its contents)
//   fetch_add_u32/u64, cas_u64, load_u64_acquire, store_u64_release
//                               the posting protocol's counters    (shared by the producers of
//                                                                  one QP)
//   exchange/fetch_and/fetch_or/fetch_xor_u32/u64, fence_system()
//                               the SHMEM device API on load/store routes (relaxed atomics on
//                               symmetric memory; the fence orders them for every observer)
//   pause()                     a polite spin
//
// Byte order helpers are plain shifts (every compiler turns them into one byte-swap).
#pragma once

#include "config.hpp"

namespace gda {
namespace be {
GDA_FN uint32_t u32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}
GDA_FN uint64_t u64(uint64_t x) {
    return (uint64_t(u32(uint32_t(x))) << 32) | u32(uint32_t(x >> 32));
}
GDA_FN uint16_t u16(uint16_t x) { return uint16_t((x >> 8) | (x << 8)); }
}  // namespace be
}  // namespace gda

#if defined(GDA_TARGET_HIP)
#include "arch/hip.hpp"
#elif defined(GDA_TARGET_CUDA)
#include "arch/cuda.hpp"
#else
#include "arch/host.hpp"
#define GDA_PICK(dev, host) host
#include "arch/dispatch.hpp"
#endif
