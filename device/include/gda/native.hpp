// gda device API: the software NIC's own queue format (gda_native; providers/native), for
// kernels and CPU threads that drive the software NIC directly. Byte-for-byte what gda_native's
// device functions write (testing/rdma-ref tests/device_native.rs).
//
// A WQE is 1–16 units of 64 bytes: unit 0 the header (NativeWqe), then the inline payload, or
// gather entries 2.. (four 16-byte entries a unit), or a masked compare-swap's masks. The
// header is written last. The doorbell is the next unit position, one 64-bit release store
// (there is no doorbell record).
#pragma once

#include "abi.hpp"
#include "arch.hpp"

namespace gda {
namespace native {

constexpr uint32_t UNIT_BYTES = 64;
constexpr uint32_t SGES_PER_UNIT = 4;

namespace op {
constexpr uint8_t NOP = 0, WRITE = 1, WRITE_IMM = 2, SEND = 3, SEND_IMM = 4, READ = 5,
                  COMP_SWAP = 6, FETCH_ADD = 7, MASKED_COMP_SWAP = 8, MASKED_FETCH_ADD = 9;
}
namespace flag {
constexpr uint8_t SIGNALED = 1, FENCE = 2, SOLICITED = 4, INLINE = 8;
}

// Unit 0 (gda_native::wire::NativeWqe).
struct Wqe {
    uint8_t opcode, flags, width, units;
    uint32_t imm;
    uint32_t length;
    uint8_t nsge, reserved_13[3];
    Sge local;
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t counter;
    uint64_t op0, op1;
};
static_assert(sizeof(Wqe) == 64 && offsetof(Wqe, local) == 16 && offsetof(Wqe, remote_addr) == 32 &&
                  offsetof(Wqe, counter) == 44 && offsetof(Wqe, op0) == 48,
              "native WQE layout");

GDA_FN uint8_t wqe_flags(uint32_t f) {
    return uint8_t(((f & send::SIGNALED) ? flag::SIGNALED : 0) |
                   ((f & send::FENCE) ? flag::FENCE : 0) |
                   ((f & send::SOLICITED) ? flag::SOLICITED : 0));
}

GDA_FN uint8_t* unit_addr(const WqHandle& wq, uint32_t at, uint32_t k) {
    return reinterpret_cast<uint8_t*>(wq.buf +
                                      uint64_t((at + k) & (wq.entries - 1)) * UNIT_BYTES);
}

// Non-empty gather entries, and the units after the header they need.
GDA_FN uint32_t count_sges(const Sge* s, uint32_t n) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; ++i) c += s[i].length != 0;
    return c;
}
GDA_FN uint32_t sge_units(uint32_t nonempty) {
    return nonempty > 1 ? (nonempty - 1 + SGES_PER_UNIT - 1) / SGES_PER_UNIT : 0;
}

// The header's gather fields, and entries 2.. in extension units (a unit with entries is
// written whole, zero-padded).
GDA_FN void put_gather(const WqHandle& wq, uint32_t at, Wqe& h, const Sge* s, uint32_t n) {
    Sge unit[SGES_PER_UNIT] = {};
    uint32_t j = 0, k = 1;
    for (uint32_t i = 0; i < n; ++i) {
        if (s[i].length == 0) continue;
        if (h.nsge == 0) h.local = s[i];
        else {
            unit[j++] = s[i];
            if (j == SGES_PER_UNIT) {
                __builtin_memcpy(unit_addr(wq, at, k++), unit, UNIT_BYTES);
                for (auto& e : unit) e = Sge{0, 0, 0};
                j = 0;
            }
        }
        h.nsge = uint8_t(h.nsge + 1);
        h.length += s[i].length;
    }
    if (j) __builtin_memcpy(unit_addr(wq, at, k), unit, UNIT_BYTES);
}

// Inline payload in the units after the header (the last one only as far as the payload goes).
GDA_FN void put_inline(const WqHandle& wq, uint32_t at, Wqe& h, const void* data, uint32_t len) {
    h.flags |= flag::INLINE;
    h.length = len;
    const uint8_t* d = static_cast<const uint8_t*>(data);
    for (uint32_t k = 1, off = 0; off < len; ++k, off += UNIT_BYTES) {
        const uint32_t n = len - off < UNIT_BYTES ? len - off : UNIT_BYTES;
        __builtin_memcpy(unit_addr(wq, at, k), d + off, n);
    }
}

// Writes the header last; the Posted's doorbell is the next unit position.
GDA_FN Posted finish(const WqHandle& wq, SqPos pos, Wqe& h, uint32_t units) {
    h.units = uint8_t(units);
    h.counter = pos.unit;
    __builtin_memcpy(unit_addr(wq, pos.unit, 0), &h, sizeof h);
    Posted p;
    p.start = pos;
    p.next = SqPos{pos.unit + units, pos.msg + 1, pos.psn & 0xffffffu};
    const uint64_t next = uint64_t(p.next.unit);
    __builtin_memcpy(p.doorbell, &next, 8);
    return p;
}

GDA_FN Wqe header(uint8_t opcode, uint32_t flags) {
    Wqe h{};
    h.opcode = opcode;
    h.flags = wqe_flags(flags);
    return h;
}

GDA_FN Posted post_write(const WqHandle& wq, SqPos pos, Remote r, const Sge* s, uint32_t n,
                         uint32_t flags, bool has_imm = false, uint32_t imm = 0) {
    Wqe h = header(has_imm ? op::WRITE_IMM : op::WRITE, flags);
    h.remote_addr = r.addr;
    h.rkey = r.rkey;
    h.imm = has_imm ? imm : 0;
    put_gather(wq, pos.unit, h, s, n);
    return finish(wq, pos, h, 1 + sge_units(count_sges(s, n)));
}

GDA_FN Posted post_write_inline(const WqHandle& wq, SqPos pos, Remote r, const void* data,
                                uint32_t len, uint32_t flags, bool has_imm = false,
                                uint32_t imm = 0) {
    Wqe h = header(has_imm ? op::WRITE_IMM : op::WRITE, flags);
    h.remote_addr = r.addr;
    h.rkey = r.rkey;
    h.imm = has_imm ? imm : 0;
    put_inline(wq, pos.unit, h, data, len);
    return finish(wq, pos, h, 1 + (len + UNIT_BYTES - 1) / UNIT_BYTES);
}

GDA_FN Posted post_send(const WqHandle& wq, SqPos pos, const Sge* s, uint32_t n, uint32_t flags,
                        bool has_imm = false, uint32_t imm = 0) {
    Wqe h = header(has_imm ? op::SEND_IMM : op::SEND, flags);
    h.imm = has_imm ? imm : 0;
    put_gather(wq, pos.unit, h, s, n);
    return finish(wq, pos, h, 1 + sge_units(count_sges(s, n)));
}

GDA_FN Posted post_send_inline(const WqHandle& wq, SqPos pos, const void* data, uint32_t len,
                               uint32_t flags, bool has_imm = false, uint32_t imm = 0) {
    Wqe h = header(has_imm ? op::SEND_IMM : op::SEND, flags);
    h.imm = has_imm ? imm : 0;
    put_inline(wq, pos.unit, h, data, len);
    return finish(wq, pos, h, 1 + (len + UNIT_BYTES - 1) / UNIT_BYTES);
}

GDA_FN Posted post_read(const WqHandle& wq, SqPos pos, Remote r, const Sge* s, uint32_t n,
                        uint32_t flags) {
    Wqe h = header(op::READ, flags);
    h.remote_addr = r.addr;
    h.rkey = r.rkey;
    put_gather(wq, pos.unit, h, s, n);
    return finish(wq, pos, h, 1 + sge_units(count_sges(s, n)));
}

// An atomic of `bytes` (8; masked ones also 4) on `r`, its result to `local`.
GDA_FN Posted post_atomic(const WqHandle& wq, SqPos pos, Remote r, Sge local, const Atomic& a,
                          uint32_t bytes, uint32_t flags) {
    static constexpr uint8_t ops[4] = {op::COMP_SWAP, op::FETCH_ADD, op::MASKED_COMP_SWAP,
                                       op::MASKED_FETCH_ADD};
    Wqe h = header(ops[a.kind & 3], flags);
    h.remote_addr = r.addr;
    h.rkey = r.rkey;
    h.width = uint8_t(bytes);
    h.local = Sge{local.addr, bytes, local.lkey};
    h.nsge = 1;
    uint32_t units = 1;
    switch (a.kind) {
        case Atomic::CompareSwap: h.op0 = a.compare; h.op1 = a.swap; break;
        case Atomic::FetchAdd: h.op0 = a.add; break;
        case Atomic::MaskedCompareSwap: {
            h.op0 = a.compare;
            h.op1 = a.swap;
            const uint64_t masks[8] = {a.compare_mask, a.swap_mask, 0, 0, 0, 0, 0, 0};
            __builtin_memcpy(unit_addr(wq, pos.unit, 1), masks, UNIT_BYTES);
            units = 2;
            break;
        }
        case Atomic::MaskedFetchAdd: h.op0 = a.add; h.op1 = a.field_boundary; break;
    }
    return finish(wq, pos, h, units);
}

GDA_FN Posted post_nop(const WqHandle& wq, SqPos pos, uint32_t flags) {
    Wqe h = header(op::NOP, flags);
    return finish(wq, pos, h, 1);
}

// The doorbell: the WQE stores before a release store of the next position (pairs with the
// engine's acquire read of the doorbell word).
GDA_FN void ring_sq(const WqHandle& wq, const Posted& p) {
    arch::wqe_to_dbrec_fence();
    uint64_t v;
    __builtin_memcpy(&v, p.doorbell, 8);
    arch::store_u64_release(reinterpret_cast<uint64_t*>(wq.db), v);
}

}  // namespace native
}  // namespace gda
