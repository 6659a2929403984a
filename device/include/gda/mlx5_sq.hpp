// gda device API: ConnectX (mlx5) as a provider of the posting protocol (gda/sq.hpp): CQE
// polling (normal and collapsed CQs, 64- and 128-byte CQEs), error-CQE status decoding, and the
// WQE costs gda_mlx5 computes. `gda::mlx5::Queue` is a queue a kernel posts to with
// `gda::sq::write_inline(q, ...)`, `gda::sq::quiet(q)`, ...
#pragma once

#include "mlx5.hpp"
#include "sq.hpp"

namespace gda {
namespace mlx5 {

// The status an error CQE's syndrome means (what rdma-core reports; nic-formats.md §F.1).
GDA_FN WcStatus wc_status(uint8_t syndrome) {
    switch (syndrome) {
        case 0x01: return WcStatus::LocLenErr;
        case 0x02: return WcStatus::LocQpOpErr;
        case 0x04: return WcStatus::LocProtErr;
        case 0x05: return WcStatus::WrFlushErr;
        case 0x06: return WcStatus::MwBindErr;
        case 0x10: return WcStatus::BadRespErr;
        case 0x11: return WcStatus::LocAccessErr;
        case 0x12: return WcStatus::RemInvReqErr;
        case 0x13: return WcStatus::RemAccessErr;
        case 0x14: return WcStatus::RemOpErr;
        case 0x15: return WcStatus::RetryExcErr;
        case 0x16: return WcStatus::RnrRetryExcErr;
        case 0x22: return WcStatus::RemAbortErr;
        default: return WcStatus::GeneralErr;
    }
}

// The 64-byte CQE of `slot` (the second half of a 128-byte CQE).
GDA_FN const uint8_t* cqe_addr(const CqHandle& cq, uint32_t slot) {
    const uint64_t stride = cq.cqe_bytes > 64 ? cq.cqe_bytes : 64;
    return reinterpret_cast<const uint8_t*>(cq.buf + uint64_t(slot) * stride + (stride - 64));
}

// A CQE's counter and status: requester (0) and responder CQEs succeed; error CQEs (13
// requester, 14 responder) carry a syndrome (byte 55).
GDA_FN Wc decode(const uint8_t* cqe, uint8_t opcode) {
    Wc wc;
    wc.counter = uint32_t(uint16_t((uint16_t(cqe[60]) << 8) | cqe[61]));
    wc.status = (opcode == 13 || opcode == 14) ? wc_status(cqe[55]) : WcStatus::Success;
    return wc;
}

// A NOP (one WQEBB): makes the newest WQE's completion observable when signalled.
GDA_FN Posted post_nop(const Sq& s, SqPos pos, uint32_t flags) {
    return put_ctrl(s.wq, pos, 0x00, 0, 1, ctrl_flags(flags), 0);
}

// The provider of the protocol.
struct Provider {
    using Handle = Sq;
    static constexpr ProviderTag TAG = ProviderTag::Mlx5;
    static constexpr bool ATOMIC_RESULT_BE = true;  // ConnectX writes the old value big-endian
    static constexpr bool HAS_MASKED_ATOMICS = true;

    static GDA_FN const WqHandle& wq(const Sq& s) { return s.wq; }
    static GDA_FN void ring(const Sq& s, const Posted& p) { ring_sq(s, p); }

    // Slot `ci`, if the device has written it (owner bit of this pass, valid opcode).
    static GDA_FN bool poll_cqe(const CqHandle& cq, uint32_t ci, Wc* out) {
        const uint8_t* cqe = cqe_addr(cq, ci & (cq.entries - 1));
        // Acquire: the CQE's other bytes, read below, are those written before its owner byte.
        const uint8_t op_own = arch::load_byte_acquire(cqe + 63);
        const uint8_t opcode = op_own >> 4;
        // The owner bit of this pass: bit log2(entries) of ci (entries is a power of 2).
        if (opcode == 0xf || uint32_t(op_own & 1) != uint32_t((ci & cq.entries) != 0)) return false;
        *out = decode(cqe, opcode);
        return true;
    }
    // Tells the device the CQEs below `ci` are consumed (CQ doorbell record word 0).
    static GDA_FN void update_cq_ci(const CqHandle& cq, uint32_t ci) {
        arch::store_be32_release(reinterpret_cast<uint32_t*>(cq.dbrec), be::u32(ci & 0xffffffu));
    }
    // One slot the device overwrites: its tail word (WQE counter, opcode, owner; bytes 56..64,
    // written as one 8-byte unit) read twice around the rest, so a CQE being rewritten is not
    // taken half old, half new.
    static GDA_FN bool read_collapsed(const CqHandle& cq, Wc* out) {
        const uint8_t* cqe = cqe_addr(cq, 0);
        const uint64_t* tail = reinterpret_cast<const uint64_t*>(cqe + 56);
        const uint64_t t1 = arch::load_u64_acquire(tail);
        const uint8_t opcode = uint8_t(t1 >> 60);
        if (opcode == 0xf) return false;
        const uint8_t syndrome = cqe[55];
        if (arch::load_u64_acquire(tail) != t1) return false;
        out->counter = uint32_t(uint16_t(((t1 >> 32) & 0xff) << 8 | ((t1 >> 40) & 0xff)));
        out->status = (opcode == 13 || opcode == 14) ? wc_status(syndrome) : WcStatus::Success;
        return true;
    }
    // mlx5 reports the WQE's first WQEBB as is.
    static GDA_FN uint32_t completed_unit(const Sq&, const Wc& wc) { return wc.counter; }

    static GDA_FN Cost nop_cost(const Sq&) { return Cost{1, 0}; }
    static GDA_FN Posted post_nop(const Sq& s, SqPos pos, uint32_t flags) {
        return mlx5::post_nop(s, pos, flags);
    }
    static GDA_FN Cost write_inline_cost(const Sq&, uint32_t len) {
        return Cost{wqebbs_for_ds(2 + inline_ds(len)), 0};
    }
    static GDA_FN Posted post_write_inline(const Sq& s, SqPos pos, Remote r, const void* d,
                                           uint32_t len, uint32_t flags) {
        return mlx5::post_write_inline(s, pos, r, d, len, flags);
    }
    template <class T>
    static GDA_FN Posted post_write_value(const Sq& s, SqPos pos, Remote r, T v, uint32_t flags) {
        return mlx5::post_write_value(s, pos, r, v, flags);
    }
    static GDA_FN uint32_t nonempty(const Sge* sg, uint32_t n) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; ++i) k += sg[i].length != 0;
        return k;
    }
    static GDA_FN Cost write_cost(const Sq&, const Sge* sg, uint32_t n) {
        return Cost{wqebbs_for_ds(2 + nonempty(sg, n)), 0};
    }
    static GDA_FN Posted post_write(const Sq& s, SqPos pos, Remote r, const Sge* sg, uint32_t n,
                                    uint32_t flags) {
        return mlx5::post_write(s, pos, r, sg, n, flags);
    }
    static GDA_FN Cost read_cost(const Sq&, const Sge* sg, uint32_t n) {
        return Cost{wqebbs_for_ds(2 + nonempty(sg, n)), 0};
    }
    static GDA_FN Posted post_read(const Sq& s, SqPos pos, Remote r, const Sge* sg, uint32_t n,
                                   uint32_t flags) {
        return mlx5::post_read(s, pos, r, sg, n, flags);
    }
    static GDA_FN Cost atomic_cost(const Sq&, const Atomic& a, uint32_t bytes) {
        const uint32_t ext = (a.kind == Atomic::MaskedCompareSwap && bytes == 8) ? 2 : 1;
        return Cost{wqebbs_for_ds(3 + ext), 0};
    }
    static GDA_FN Posted post_atomic(const Sq& s, SqPos pos, Remote r, Sge local, const Atomic& a,
                                     uint32_t bytes, uint32_t flags) {
        return mlx5::post_atomic(s, pos, r, local, a, bytes, flags);
    }
};

using Queue = gda::Queue<Provider>;
static_assert(sizeof(Queue) == 144 && offsetof(Queue, sq) == 88, "mlx5 Queue layout");

// The first error the queue's CQEs reported; Success if none.
GDA_FN WcStatus first_error(const Queue& q) { return sq::first_error(q.proto); }

}  // namespace mlx5
}  // namespace gda
