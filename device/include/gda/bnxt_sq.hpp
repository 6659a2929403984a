// gda device API: Broadcom NetXtreme-E / Thor2 (bnxt) as a provider of the posting protocol
// (gda/sq.hpp), as gda_bnxt's `impl Provider for Bnxt` (providers/bnxt/src/device/mod.rs)
// behaves inside gda_hal::SendQueue: the WQE costs of `Bnxt::cost` (units of the queue's WQE
// mode and packets — PSNs — at the path MTU: bnxt tracks PSNs, so the protocol reserves unit,
// message number and PSN together), CQE polling (normal and collapsed CQs) and the completed
// unit of `Bnxt::completed_unit`. A `gda::bnxt::Queue` is posted to with
// `gda::sq::write_value(q, ...)`, `gda::sq::quiet(q)`, ...
//
// | member         | bnxt                                                                     |
// |----------------|--------------------------------------------------------------------------|
// | cost           | static, fixed-3: 1 unit; variable: 2 header slots + payload slots (SGEs, |
// |                | inline bytes / 16 rounded up, 1 for an atomic); packets: ceil(len / MTU) |
// | completed_unit | con_indx (doorbell units: slots in fixed-3) points after the retired     |
// |                | WQEs: the unit before it lies in the newest; log2(entries) bits valid    |
// | read_collapsed | slot 0 read twice (phase 1 both times, the same 32 bytes), requester only |
// | atomics        | 8-byte compare-swap and fetch-add only (no masked atomics: gda/shmem.hpp |
// |                | builds the others from compare-swap loops); others are refused          |
#pragma once

#include "bnxt.hpp"
#include "sq.hpp"

namespace gda {
namespace bnxt {

// Units a WQE of `payload_slots` slots after the header takes (Bnxt::cost's units).
GDA_FN uint32_t cost_units(const Sq& s, uint32_t payload_slots) {
    return units_for(s.mode.wqe, payload_slots);
}

// The 32 bytes of CQE slot 0 as four words in memory order, each loaded with acquire (so the
// loads after one are ordered after it: a later read of the slot follows this one).
GDA_FN void load_cqe(uint64_t addr, uint64_t c[4]) {
    for (uint32_t i = 0; i < 4; ++i) {
        c[i] = arch::load_u64_acquire(reinterpret_cast<const uint64_t*>(addr + 8 * i));
    }
}

// The provider of the protocol.
struct Provider {
    using Handle = Sq;
    static constexpr ProviderTag TAG = ProviderTag::Bnxt;
    static constexpr bool ATOMIC_RESULT_BE = false;  // Bnxt::ATOMIC_RESULT_BIG_ENDIAN
    static constexpr bool HAS_MASKED_ATOMICS = false;

    static GDA_FN const WqHandle& wq(const Sq& s) { return s.wq; }
    static GDA_FN void ring(const Sq& s, const Posted& p) { ring_sq(s, p); }

    // Slot `ci`, if the device has written it (phase bit of this pass).
    static GDA_FN bool poll_cqe(const CqHandle& cq, uint32_t ci, gda::Wc* out) {
        Wc wc{};
        if (!poll_cq(cq, ci, &wc)) return false;
        *out = gda::Wc{wc.wqe_counter, wc.status};
        return true;
    }
    // The CQ doorbell (type CQ, consumer index and its epoch).
    static GDA_FN void update_cq_ci(const CqHandle& cq, uint32_t ci) { bnxt::update_cq_ci(cq, ci); }
    // A collapsed CQ: the device rewrites slot 0, phase 1, every time. As Bnxt::poll_collapsed:
    // the CQE is read twice and taken only when both reads carry the phase and agree (a CQE
    // being rewritten is not taken half old, half new); only a requester CQE is progress.
    static GDA_FN bool read_collapsed(const CqHandle& cq, gda::Wc* out) {
        uint64_t c1[4], c2[4];
        load_cqe(cq.buf, c1);
        if ((uint32_t(c1[3]) & 1) != uint32_t(INITIAL_PHASE)) return false;
        load_cqe(cq.buf, c2);
        for (uint32_t i = 0; i < 4; ++i) {
            if (c1[i] != c2[i]) return false;
        }
        if (uint8_t((uint32_t(c1[3]) >> 1) & 0xf) != cqe_type::REQ) return false;
        const Wc wc = decode(c1);
        *out = gda::Wc{wc.wqe_counter, wc.status};
        return true;
    }
    // Bnxt::completed_unit: con_indx (slots in fixed-3) points after the retired WQEs.
    static GDA_FN uint32_t completed_unit(const Sq& s, const gda::Wc& wc) {
        return bnxt::completed_unit(s, wc.counter);
    }

    // A NOP is a zero-length RDMA WRITE: no payload slot, one packet.
    static GDA_FN Cost nop_cost(const Sq& s) { return Cost{cost_units(s, 0), packets(0, s.path_mtu)}; }
    static GDA_FN Posted post_nop(const Sq& s, SqPos pos, uint32_t flags) {
        return bnxt::post_nop(s, pos, flags);
    }
    static GDA_FN Cost write_inline_cost(const Sq& s, uint32_t len) {
        return Cost{cost_units(s, (len + SLOT_BYTES - 1) / SLOT_BYTES), packets(len, s.path_mtu)};
    }
    static GDA_FN Posted post_write_inline(const Sq& s, SqPos pos, Remote r, const void* d,
                                           uint32_t len, uint32_t flags) {
        return bnxt::post_write_inline(s, pos, r, d, len, flags);
    }
    template <class T>
    static GDA_FN Posted post_write_value(const Sq& s, SqPos pos, Remote r, T v, uint32_t flags) {
        return bnxt::post_write_value(s, pos, r, v, flags);
    }
    // Every gather entry is a slot (zero-length ones too); packets count the total length.
    static GDA_FN Cost sge_cost(const Sq& s, const Sge* sg, uint32_t n) {
        uint64_t len = 0;
        for (uint32_t i = 0; i < n; ++i) len += sg[i].length;
        return Cost{cost_units(s, n), packets(len, s.path_mtu)};
    }
    static GDA_FN Cost write_cost(const Sq& s, const Sge* sg, uint32_t n) {
        return sge_cost(s, sg, n);
    }
    static GDA_FN Posted post_write(const Sq& s, SqPos pos, Remote r, const Sge* sg, uint32_t n,
                                    uint32_t flags) {
        return bnxt::post_write(s, pos, r, sg, n, flags);
    }
    static GDA_FN Cost read_cost(const Sq& s, const Sge* sg, uint32_t n) {
        return sge_cost(s, sg, n);
    }
    static GDA_FN Posted post_read(const Sq& s, SqPos pos, Remote r, const Sge* sg, uint32_t n,
                                   uint32_t flags) {
        return bnxt::post_read(s, pos, r, sg, n, flags);
    }
    // One local-entry slot, 8 bytes (one packet). What Bnxt::check refuses (masked atomics, a
    // width other than 8) costs nothing, which the protocol refuses as TooLarge before it
    // reserves anything.
    static GDA_FN Cost atomic_cost(const Sq& s, const Atomic& a, uint32_t bytes) {
        const bool ok = bytes == 8 && (a.kind == Atomic::CompareSwap || a.kind == Atomic::FetchAdd);
        return ok ? Cost{cost_units(s, 1), packets(8, s.path_mtu)} : Cost{0, 0};
    }
    static GDA_FN Posted post_atomic(const Sq& s, SqPos pos, Remote r, Sge local, const Atomic& a,
                                     uint32_t, uint32_t flags) {
        return bnxt::post_atomic(s, pos, r, local, a, flags);
    }
};

using Queue = gda::Queue<Provider>;
static_assert(sizeof(Queue) == 160 && offsetof(Queue, sq) == 88, "bnxt Queue layout");

// The first error the queue's CQEs reported; Success if none.
GDA_FN WcStatus first_error(const Queue& q) { return sq::first_error(q.proto); }

}  // namespace bnxt
}  // namespace gda
