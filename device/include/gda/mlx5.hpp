// gda device API: mlx5 (ConnectX) work-queue entries, doorbell record and doorbell — what
// gda_mlx5's device functions do (providers/mlx5/src/device.rs), for HIP, CUDA and host C++.
// Byte-for-byte equal to them and to rdma-core v55's mlx5_post_send on random requests
// (testing/rdma-ref tests/device_mlx5.rs). Formats: providers/mlx5/src/wire.
//
// A post writes one WQE at the reserved WQEBBs (the caller reserved them: the posting protocol)
// and returns a Posted; ring_sq then publishes it: release fence -> doorbell record word 1 =
// next & 0xffff (release) -> flush -> 8-byte doorbell = the control segment's first 8 bytes ->
// flush. Nothing here allocates, loops without a bound, or checks a request: the caller posts
// only requests the queue can hold (gda's host side checks them, as Provider::check does).
#pragma once

#include "abi.hpp"
#include "arch.hpp"

namespace gda {
namespace mlx5 {

// Opcodes (PRM; nic-formats.md §B.2).
namespace opcode {
constexpr uint8_t RDMA_WRITE = 0x08;
constexpr uint8_t RDMA_WRITE_IMM = 0x09;
constexpr uint8_t SEND = 0x0a;
constexpr uint8_t SEND_IMM = 0x0b;
constexpr uint8_t RDMA_READ = 0x10;
constexpr uint8_t ATOMIC_CS = 0x11;
constexpr uint8_t ATOMIC_FA = 0x12;
constexpr uint8_t ATOMIC_MASKED_CS = 0x14;
constexpr uint8_t ATOMIC_MASKED_FA = 0x15;
}  // namespace opcode

constexpr uint32_t WQEBB_BYTES = 64;
constexpr uint32_t DS_PER_WQEBB = 4;
constexpr uint32_t INLINE_FLAG = 0x80000000u;
// Extended-atomic opmod: operand size 4 or 8 bytes.
constexpr uint8_t OPMOD_EXT_4B = 0x08;
constexpr uint8_t OPMOD_EXT_8B = 0x09;

// The fm_ce_se byte for send flags: fence 0x80, signalled 0x08, solicited 0x02.
GDA_FN uint8_t ctrl_flags(uint32_t flags) {
    return uint8_t(((flags & send::FENCE) ? 0x80 : 0) | ((flags & send::SIGNALED) ? 0x08 : 0) |
                   ((flags & send::SOLICITED) ? 0x02 : 0));
}

GDA_FN uint32_t wqebbs_for_ds(uint32_t ds) { return (ds + DS_PER_WQEBB - 1) / DS_PER_WQEBB; }

// DS units of an inline payload of `len` bytes (a 4-byte header, then the bytes, padded).
GDA_FN uint32_t inline_ds(uint32_t len) { return len == 0 ? 0 : (4 + len + 15) / 16; }

// Address of 16-byte unit `k` of the WQE at ring unit `at`, wrapping at the ring end.
GDA_FN uint8_t* unit_addr(const WqHandle& wq, uint32_t at, uint32_t k) {
    const uint32_t mask = wq.entries * DS_PER_WQEBB - 1;
    const uint32_t idx = (at * DS_PER_WQEBB + k) & mask;
    return reinterpret_cast<uint8_t*>(wq.buf + uint64_t(idx) * 16);
}

// One 16-byte segment, given as its two 8-byte halves in memory order. Plain stores: the WQE
// is published by ring_sq's fence.
// One 16-byte store where the target has one (units are 16-byte aligned in the ring).
struct alignas(16) Unit {
    uint64_t lo, hi;
};
GDA_FN void put_unit(const WqHandle& wq, uint32_t at, uint32_t k, uint64_t lo, uint64_t hi) {
    // The first WQEBB's four units never wrap: one address computation serves them all (k is
    // a constant wherever this is inlined).
    // The byte offset in 32 bits (a ConnectX ring is at most 32K WQEBBs, 2 MiB): a GPU then
    // addresses the store from the ring's base in scalar registers plus one 32-bit offset.
    uint8_t* p = k < DS_PER_WQEBB
                     ? reinterpret_cast<uint8_t*>(
                           wq.buf + uint64_t(uint32_t((at & (wq.entries - 1)) * WQEBB_BYTES))) +
                           16 * k
                     : unit_addr(wq, at, k);
    arch::store_unit16(p, lo, hi);
}

// 8 bytes in memory order from big-endian fields.
GDA_FN uint64_t be_pair(uint32_t first, uint32_t second) {
    return uint64_t(be::u32(first)) | (uint64_t(be::u32(second)) << 32);
}

// The control segment; returns the Posted (doorbell = its first 8 bytes).
GDA_FN Posted put_ctrl(const WqHandle& wq, SqPos pos, uint8_t op, uint8_t opmod, uint32_t ds,
                       uint8_t fm, uint32_t imm) {
    const uint32_t w0 = (uint32_t(opmod) << 24) | ((pos.unit & 0xffffu) << 8) | op;
    const uint32_t w1 = ((wq.qpn & 0xffffffu) << 8) | (ds & 0x3fu);
    const uint64_t lo = be_pair(w0, w1);
    // signature 0, dci_stream 0, fm_ce_se, imm (big-endian).
    const uint64_t hi = (uint64_t(fm) << 24) | (uint64_t(be::u32(imm)) << 32);
    put_unit(wq, pos.unit, 0, lo, hi);
    Posted p;
    p.start = pos;
    p.next.unit = pos.unit + wqebbs_for_ds(ds);
    p.next.msg = pos.msg + 1;
    p.next.psn = pos.psn & 0xffffffu;
    __builtin_memcpy(p.doorbell, &lo, 8);
    return p;
}

GDA_FN void put_raddr(const WqHandle& wq, uint32_t at, uint32_t k, Remote r) {
    put_unit(wq, at, k, be::u64(r.addr), uint64_t(be::u32(r.rkey)));
}

GDA_FN void put_data(const WqHandle& wq, uint32_t at, uint32_t k, Sge s) {
    put_unit(wq, at, k, be_pair(s.length, s.lkey), be::u64(s.addr));
}

// Gather entries of non-zero length from unit `k` on; returns the units used.
GDA_FN uint32_t put_sges(const WqHandle& wq, uint32_t at, uint32_t k, const Sge* sges,
                         uint32_t n) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < n; ++i) {
        if (sges[i].length != 0) {
            put_data(wq, at, k + used, sges[i]);
            ++used;
        }
    }
    return used;
}

// Inline data from unit `k` on (header, bytes, zero padding); returns the units used. Written
// as whole 16-byte units (the segment starts on a unit, so a wrap at the ring end falls between
// units): with a length known at compile time this folds to a few stores.
GDA_FN uint32_t put_inline(const WqHandle& wq, uint32_t at, uint32_t k, const void* data,
                           uint32_t len) {
    const uint32_t units = inline_ds(len);
    const uint8_t* d = static_cast<const uint8_t*>(data);
    const uint32_t header = be::u32(len | INLINE_FLAG);
    for (uint32_t u = 0; u < units; ++u) {
        // Unit 0: the header and the first 12 bytes; then 16 bytes a unit; zero padding.
        uint8_t b[16] = {};
        uint32_t from, at_byte;
        if (u == 0) {
            __builtin_memcpy(b, &header, 4);
            from = 0;
            at_byte = 4;
        } else {
            from = 12 + 16 * (u - 1);
            at_byte = 0;
        }
        const uint32_t room = 16 - at_byte;
        const uint32_t n = len - from < room ? len - from : room;
        __builtin_memcpy(b + at_byte, d + from, n);
        uint64_t lo, hi;
        __builtin_memcpy(&lo, b, 8);
        __builtin_memcpy(&hi, b + 8, 8);
        put_unit(wq, at, k + u, lo, hi);
    }
    return units;
}

// RDMA WRITE (WITH_IMM when `has_imm`) gathering `sges`.
GDA_FN Posted post_write(const Sq& sq, SqPos pos, Remote remote, const Sge* sges, uint32_t n,
                         uint32_t flags, bool has_imm = false, uint32_t imm = 0) {
    put_raddr(sq.wq, pos.unit, 1, remote);
    const uint32_t ds = 2 + put_sges(sq.wq, pos.unit, 2, sges, n);
    return put_ctrl(sq.wq, pos, has_imm ? opcode::RDMA_WRITE_IMM : opcode::RDMA_WRITE, 0, ds,
                    ctrl_flags(flags), has_imm ? imm : 0);
}

// RDMA WRITE (WITH_IMM when `has_imm`) of `len` inline bytes.
GDA_FN Posted post_write_inline(const Sq& sq, SqPos pos, Remote remote, const void* data,
                                uint32_t len, uint32_t flags, bool has_imm = false,
                                uint32_t imm = 0) {
    put_raddr(sq.wq, pos.unit, 1, remote);
    const uint32_t ds = 2 + put_inline(sq.wq, pos.unit, 2, data, len);
    return put_ctrl(sq.wq, pos, has_imm ? opcode::RDMA_WRITE_IMM : opcode::RDMA_WRITE, 0, ds,
                    ctrl_flags(flags), has_imm ? imm : 0);
}

// RDMA WRITE of a 4- or 8-byte value held in a register, inline: the inline unit is built in
// registers (header, value, zero padding) and stored at once — what a kernel posting a flag or a
// counter wants, with no load of the payload. The same bytes as post_write_inline of its bytes.
template <class T>
GDA_FN Posted post_write_value(const Sq& sq, SqPos pos, Remote remote, T value, uint32_t flags) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "a 4- or 8-byte value");
    uint64_t bits = 0;
    __builtin_memcpy(&bits, &value, sizeof(T));
    const uint64_t lo = uint64_t(be::u32(uint32_t(sizeof(T)) | INLINE_FLAG)) | (bits << 32);
    const uint64_t hi = sizeof(T) == 8 ? bits >> 32 : 0;
    put_raddr(sq.wq, pos.unit, 1, remote);
    put_unit(sq.wq, pos.unit, 2, lo, hi);
    return put_ctrl(sq.wq, pos, opcode::RDMA_WRITE, 0, 3, ctrl_flags(flags), 0);
}

// SEND (WITH_IMM when `has_imm`) gathering `sges`.
GDA_FN Posted post_send(const Sq& sq, SqPos pos, const Sge* sges, uint32_t n, uint32_t flags,
                        bool has_imm = false, uint32_t imm = 0) {
    const uint32_t ds = 1 + put_sges(sq.wq, pos.unit, 1, sges, n);
    return put_ctrl(sq.wq, pos, has_imm ? opcode::SEND_IMM : opcode::SEND, 0, ds,
                    ctrl_flags(flags), has_imm ? imm : 0);
}

// SEND (WITH_IMM when `has_imm`) of `len` inline bytes.
GDA_FN Posted post_send_inline(const Sq& sq, SqPos pos, const void* data, uint32_t len,
                               uint32_t flags, bool has_imm = false, uint32_t imm = 0) {
    const uint32_t ds = 1 + put_inline(sq.wq, pos.unit, 1, data, len);
    return put_ctrl(sq.wq, pos, has_imm ? opcode::SEND_IMM : opcode::SEND, 0, ds,
                    ctrl_flags(flags), has_imm ? imm : 0);
}

// RDMA READ into `sges`.
GDA_FN Posted post_read(const Sq& sq, SqPos pos, Remote remote, const Sge* sges, uint32_t n,
                        uint32_t flags) {
    put_raddr(sq.wq, pos.unit, 1, remote);
    const uint32_t ds = 2 + put_sges(sq.wq, pos.unit, 2, sges, n);
    return put_ctrl(sq.wq, pos, opcode::RDMA_READ, 0, ds, ctrl_flags(flags), 0);
}

// The provider-neutral atomic (abi.hpp), under the names mlx5 code has used.
using gda::Atomic;
using gda::compare_swap;
using gda::fetch_add;
using gda::masked_compare_swap;
using gda::masked_fetch_add;

// An atomic of `bytes` (8; masked ones also 4) on `remote`, its result to `local`.
GDA_FN Posted post_atomic(const Sq& sq, SqPos pos, Remote remote, Sge local, const Atomic& a,
                          uint32_t bytes, uint32_t flags) {
    const WqHandle& wq = sq.wq;
    put_raddr(wq, pos.unit, 1, remote);
    uint32_t k = 2;
    uint8_t op = opcode::ATOMIC_CS, opmod = 0;
    const bool masked = a.kind == Atomic::MaskedCompareSwap || a.kind == Atomic::MaskedFetchAdd;
    const uint8_t ext = bytes == 4 ? OPMOD_EXT_4B : OPMOD_EXT_8B;
    switch (a.kind) {
        case Atomic::CompareSwap:
            put_unit(wq, pos.unit, k++, be::u64(a.swap), be::u64(a.compare));
            break;
        case Atomic::FetchAdd:
            op = opcode::ATOMIC_FA;
            put_unit(wq, pos.unit, k++, be::u64(a.add), 0);
            break;
        case Atomic::MaskedCompareSwap:
            op = opcode::ATOMIC_MASKED_CS;
            opmod = ext;
            if (bytes == 4) {
                put_unit(wq, pos.unit, k++, be_pair(uint32_t(a.swap), uint32_t(a.compare)),
                         be_pair(uint32_t(a.swap_mask), uint32_t(a.compare_mask)));
            } else {
                put_unit(wq, pos.unit, k++, be::u64(a.swap), be::u64(a.compare));
                put_unit(wq, pos.unit, k++, be::u64(a.swap_mask), be::u64(a.compare_mask));
            }
            break;
        case Atomic::MaskedFetchAdd:
            op = opcode::ATOMIC_MASKED_FA;
            opmod = ext;
            if (bytes == 4) {
                put_unit(wq, pos.unit, k++, be_pair(uint32_t(a.add), uint32_t(a.field_boundary)),
                         0);
            } else {
                put_unit(wq, pos.unit, k++, be::u64(a.add), be::u64(a.field_boundary));
            }
            break;
    }
    Sge data = local;
    data.length = masked ? bytes : 8;
    put_data(wq, pos.unit, k, data);
    return put_ctrl(wq, pos, op, opmod, k + 1, ctrl_flags(flags), 0);
}

// Publishes a posted WQE: release fence -> doorbell record (send counter, word 1) -> the
// 8-byte doorbell after it (arch::ring_doorbell64). One lane per QP per call.
GDA_FN void ring_sq(const Sq& sq, const Posted& p) {
    arch::wqe_to_dbrec_fence();
    uint32_t* rec = reinterpret_cast<uint32_t*>(sq.wq.dbrec) + 1;
    arch::store_be32_release(rec, be::u32(p.next.unit & 0xffffu));
    uint64_t v;
    __builtin_memcpy(&v, p.doorbell, 8);
    arch::ring_doorbell64(reinterpret_cast<uint64_t*>(sq.wq.db), v);
}

// rdma-core's variant: the doorbell at `db + bf_offset`, or with `blueflame` the whole WQE
// copied there in 64-byte chunks; returns the next offset (bf_offset ^ bf_size).
GDA_FN uint32_t ring_sq_bf(const Sq& sq, const Posted& p, uint32_t bf_offset, bool blueflame) {
    const WqHandle& wq = sq.wq;
    arch::wqe_to_dbrec_fence();
    uint32_t* rec = reinterpret_cast<uint32_t*>(wq.dbrec) + 1;
    arch::store_be32_release(rec, be::u32(p.next.unit & 0xffffu));
    arch::wc_flush();
    uint64_t* reg = reinterpret_cast<uint64_t*>(wq.db + bf_offset);
    if (blueflame) {
        const uint32_t n = p.next.unit - p.start.unit;
        for (uint32_t i = 0; i < n; ++i) {
            const uint64_t* src =
                reinterpret_cast<const uint64_t*>(unit_addr(wq, p.start.unit + i, 0));
            for (int j = 0; j < 8; ++j) {
                *reinterpret_cast<volatile uint64_t*>(reg + i * 8 + j) = src[j];
            }
        }
    } else {
        uint64_t v;
        __builtin_memcpy(&v, p.doorbell, 8);
        arch::store_doorbell64(reg, v);
    }
    arch::wc_flush();
    return bf_offset ^ sq.bf_size;
}

}  // namespace mlx5
}  // namespace gda
