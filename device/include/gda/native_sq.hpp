// gda device API: the software NIC's native format as a provider of the posting protocol
// (gda/sq.hpp): its 32-byte CQEs (normal and collapsed) and the WQE costs gda_native computes.
// A `gda::native::Queue` is posted to with `gda::sq::write_inline(q, ...)`, `gda::sq::quiet(q)`...
#pragma once

#include "native.hpp"
#include "sq.hpp"

namespace gda {
namespace native {

constexpr uint32_t CQE_BYTES = 32;
constexpr uint32_t CQE_STATUS = 16, CQE_GENERATION = 20, CQE_OWNER = 31;

// The owner byte a CQE carries at index `ci` of a 2^log2-entry ring: 1 on even passes, 2 on odd
// ones (a zeroed ring is never owned by software) — gda_native::wire::owner_for.
GDA_FN uint8_t owner_for(uint32_t ci, uint32_t entries) {
    return uint8_t(1 + ((ci & entries) != 0));
}

GDA_FN Wc decode(const uint8_t* cqe) {
    Wc wc;
    __builtin_memcpy(&wc.counter, cqe, 4);
    const uint8_t s = cqe[CQE_STATUS];
    wc.status = s <= uint8_t(WcStatus::TmRndvIncomplete) ? WcStatus(s) : WcStatus::GeneralErr;
    return wc;
}

struct Provider {
    using Handle = WqHandle;
    static constexpr ProviderTag TAG = ProviderTag::Native;
    static constexpr bool ATOMIC_RESULT_BE = false;
    static constexpr bool HAS_MASKED_ATOMICS = true;

    static GDA_FN const WqHandle& wq(const WqHandle& w) { return w; }
    static GDA_FN void ring(const WqHandle& w, const Posted& p) { ring_sq(w, p); }

    static GDA_FN bool poll_cqe(const CqHandle& cq, uint32_t ci, Wc* out) {
        const uint8_t* cqe =
            reinterpret_cast<const uint8_t*>(cq.buf + uint64_t(ci & (cq.entries - 1)) * CQE_BYTES);
        // Acquire: the CQE's body, read below, is what the engine wrote before the owner byte.
        if (arch::load_byte_acquire(cqe + CQE_OWNER) != owner_for(ci, cq.entries)) return false;
        *out = decode(cqe);
        return true;
    }
    // The consumer word (8 bytes; a CQ without one has dbrec 0).
    static GDA_FN void update_cq_ci(const CqHandle& cq, uint32_t ci) {
        if (cq.dbrec) arch::store_u64_release(reinterpret_cast<uint64_t*>(cq.dbrec), ci);
    }
    // The native seqlock: generation, then owner; the body; owner and generation again — a CQE
    // that changed while it was read is not taken.
    static GDA_FN bool read_collapsed(const CqHandle& cq, Wc* out) {
        const uint8_t* cqe = reinterpret_cast<const uint8_t*>(cq.buf);
        const uint8_t g1 = arch::load_byte_acquire(cqe + CQE_GENERATION);
        const uint8_t o1 = arch::load_byte_acquire(cqe + CQE_OWNER);
        if (o1 == 0) return false;
        const Wc wc = decode(cqe);
        if (arch::load_byte_acquire(cqe + CQE_OWNER) != o1 ||
            arch::load_byte_acquire(cqe + CQE_GENERATION) != g1) {
            return false;
        }
        *out = wc;
        return true;
    }
    // The CQE reports the WQE's producer position.
    static GDA_FN uint32_t completed_unit(const WqHandle&, const Wc& wc) { return wc.counter; }

    static GDA_FN Cost nop_cost(const WqHandle&) { return Cost{1, 0}; }
    static GDA_FN Posted post_nop(const WqHandle& w, SqPos pos, uint32_t flags) {
        return native::post_nop(w, pos, flags);
    }
    static GDA_FN Cost write_inline_cost(const WqHandle&, uint32_t len) {
        return Cost{1 + (len + UNIT_BYTES - 1) / UNIT_BYTES, 0};
    }
    static GDA_FN Posted post_write_inline(const WqHandle& w, SqPos pos, Remote r, const void* d,
                                           uint32_t len, uint32_t flags) {
        return native::post_write_inline(w, pos, r, d, len, flags);
    }
    template <class T>
    static GDA_FN Posted post_write_value(const WqHandle& w, SqPos pos, Remote r, T v,
                                          uint32_t flags) {
        return native::post_write_inline(w, pos, r, &v, sizeof(T), flags);
    }
    static GDA_FN Cost write_cost(const WqHandle&, const Sge* sg, uint32_t n) {
        return Cost{1 + sge_units(count_sges(sg, n)), 0};
    }
    static GDA_FN Posted post_write(const WqHandle& w, SqPos pos, Remote r, const Sge* sg,
                                    uint32_t n, uint32_t flags) {
        return native::post_write(w, pos, r, sg, n, flags);
    }
    static GDA_FN Cost read_cost(const WqHandle& w, const Sge* sg, uint32_t n) {
        return write_cost(w, sg, n);
    }
    static GDA_FN Posted post_read(const WqHandle& w, SqPos pos, Remote r, const Sge* sg,
                                   uint32_t n, uint32_t flags) {
        return native::post_read(w, pos, r, sg, n, flags);
    }
    static GDA_FN Cost atomic_cost(const WqHandle&, const Atomic& a, uint32_t) {
        return Cost{a.kind == Atomic::MaskedCompareSwap ? 2u : 1u, 0};
    }
    static GDA_FN Posted post_atomic(const WqHandle& w, SqPos pos, Remote r, Sge local,
                                     const Atomic& a, uint32_t bytes, uint32_t flags) {
        return native::post_atomic(w, pos, r, local, a, bytes, flags);
    }
};

using Queue = gda::Queue<Provider>;
static_assert(sizeof(Queue) == 136 && offsetof(Queue, sq) == 88, "native Queue layout");

}  // namespace native
}  // namespace gda
