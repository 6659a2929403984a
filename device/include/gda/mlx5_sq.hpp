// gda device API: many producers on one mlx5 send queue — gda_hal::SendQueue's protocol
// (hal/src/sq.rs; DESIGN.md §2), for HIP, CUDA and host C++ threads.
//
// | step          | here                                                                     |
// |---------------|--------------------------------------------------------------------------|
// | reserve       | one atomic add on `reserved` claims the WQE's WQEBBs                     |
// | wait for room | until end <= complete_below + entries, polling the CQ                    |
// | write         | the mlx5 encoder at the reserved position                                |
// | ring in order | wait until `rung` reaches our start (a wrapped-distance compare, so a    |
// |               | counter already past it never deadlocks), publish ring_bound, ring, then |
// |               | rung = end: one producer rings at a time, in reservation order           |
// | complete      | one poller at a time (cq_busy) reads CQEs, widens each 16-bit WQE counter|
// |               | window-checked against ring_bound into complete_below                    |
// | quiet         | wait until everything reserved is rung and complete (a signalled NOP if  |
// |               | the newest WQE was unsignalled)                                          |
//
// Every wait is bounded (`Sq2::timeout_ns`); a producer that times out holding a reservation
// poisons the queue. The state is plain memory the host allocates where the producers run
// (GPU memory for a kernel), zeroed; handles are read-only and kept apart from it.
#pragma once

#include "mlx5.hpp"

#if !defined(GDA_DEVICE_PASS)
#include <chrono>
#endif

namespace gda {

// Results of the posting protocol (gda_hal::SqError).
enum class SqStatus : int32_t {
    Ok = 0,
    Timeout = 1,     // a wait ran out of time
    Completion = 2,  // a completion reported an error (SqState::error has it)
    Window = 3,      // a CQE counter outside the rung window (never progress)
    Poisoned = 4,    // an earlier producer timed out holding a reservation
};

// The mutable state one queue's producers share (64-bit counters never wrap).
struct SqState {
    uint64_t reserved;         // WQEBBs claimed
    uint64_t rung;             // WQEBBs whose doorbell was rung (the ticket)
    uint64_t ring_bound;       // end of the newest rung WQE, published before its doorbell
    uint64_t complete_below;   // every WQE starting below is complete
    uint64_t signaled_marker;  // start + 1 of the newest signalled WQE
    uint64_t last_rung_marker; // start + 1 of the newest rung WQE
    uint64_t newest_done;      // widened start of the newest completed WQE (+1; 0: none yet)
    uint64_t error;            // (syndrome + 1) << 32 | wqe counter of the first error CQE
    uint32_t cq_busy;          // the poller's lock
    uint32_t cq_ci;            // CQ consumer index
    uint32_t poisoned;
    uint32_t reserved0;
};
static_assert(sizeof(SqState) == 80, "SqState layout");

namespace arch {
// Nanoseconds of a steady clock (device: the GPU's constant-rate timer).
GDA_FN uint64_t now_ns() {
#if defined(GDA_DEVICE_PASS) && defined(GDA_TARGET_CUDA)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#elif defined(GDA_DEVICE_PASS) && defined(GDA_TARGET_HIP)
    return wall_clock64() * 10;  // gfx9's constant 100 MHz wall clock
#else
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
#endif
}
}  // namespace arch

namespace mlx5 {

// A send queue with its CQ (normal or collapsed, 64-byte CQEs) and its shared state.
struct Sq2 {
    Sq sq;
    CqHandle cq;
    SqState* state;
    uint64_t timeout_ns;
};

// A CQE in slot `ci`, if the device has written it (owner bit of this pass, valid opcode).
struct Cqe {
    uint16_t wqe_counter;
    uint8_t opcode;    // 0: requester, 13: requester error, 14: responder error, ...
    uint8_t syndrome;  // error CQEs
};

GDA_FN bool poll_cqe(const CqHandle& cq, uint32_t ci, Cqe* out) {
    const uint32_t slot = ci & (cq.entries - 1);
    const uint8_t* cqe = reinterpret_cast<const uint8_t*>(cq.buf + uint64_t(slot) * 64);
    // Acquire: the CQE's other bytes, read below, are those written before its owner byte.
    const uint8_t op_own = arch::load_byte_acquire(cqe + 63);
    const uint8_t opcode = op_own >> 4;
    // The owner bit of this pass over the ring: bit log2(entries) of ci (entries is a power of 2).
    if (opcode == 0xf || uint32_t(op_own & 1) != uint32_t((ci & cq.entries) != 0)) return false;
    out->opcode = opcode;
    out->wqe_counter = uint16_t((uint16_t(cqe[60]) << 8) | cqe[61]);
    out->syndrome = cqe[55];
    return true;
}

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

// The status of a polled CQE: success, or its error syndrome's meaning.
GDA_FN WcStatus wc_status(const Cqe& c) {
    return (c.opcode == 13 || c.opcode == 14) ? wc_status(c.syndrome) : WcStatus::Success;
}

// The first error the queue's CQEs reported (SqState::error), as a status; Success if none.
GDA_FN WcStatus first_error(const SqState& st) {
    const uint64_t e = st.error;
    return e ? wc_status(uint8_t((e >> 32) - 1)) : WcStatus::Success;
}

// Tells the device the CQEs below `ci` are consumed (CQ doorbell record word 0).
GDA_FN void update_cq_ci(const CqHandle& cq, uint32_t ci) {
    arch::store_be32_release(reinterpret_cast<uint32_t*>(cq.dbrec), be::u32(ci & 0xffffffu));
}

// One pass over new CQEs, if no other producer is polling: each CQE's 16-bit WQE counter is
// widened above the newest completed start, and must fall below ring_bound (a CQE for a WQE
// that was never rung is a device bug, never progress).
GDA_FN SqStatus poll(const Sq2& q) {
    SqState* st = q.state;
    if (arch::cas_u32(&st->cq_busy, 0, 1) != 0) return SqStatus::Ok;  // someone else polls
    SqStatus r = SqStatus::Ok;
    uint64_t newest = st->newest_done;  // widened start + 1 (0: none)
    bool progressed = false;
    // Widens a CQE's 16-bit WQE counter above the newest completed start, window-checked
    // against ring_bound (read after the CQE: its doorbell was published after the bound).
    auto observe = [&](uint16_t counter, uint8_t opcode, uint8_t syndrome) {
        const uint64_t from = newest ? newest - 1 : 0;
        const uint64_t widened = from + uint64_t(uint16_t(counter - uint16_t(from)));
        if (widened >= arch::load_u64_acquire(&st->ring_bound)) return false;
        if (opcode == 13 || opcode == 14) {
            arch::cas_u64(&st->error, 0, (uint64_t(syndrome) + 1) << 32 | counter);
        }
        if (widened + 1 > newest) {
            newest = widened + 1;
            progressed = true;
        }
        return true;
    };
    if (q.cq.collapsed) {
        // One slot the device overwrites: its last word (WQE counter, opcode, owner) read
        // twice around the rest, so a CQE being rewritten is not taken half old, half new.
        const uint64_t* tail = reinterpret_cast<const uint64_t*>(q.cq.buf + 56);
        const uint64_t t1 = arch::load_u64_acquire(tail);
        const uint8_t op_own = uint8_t(t1 >> 56);
        if ((op_own >> 4) != 0xf) {
            const uint8_t syndrome = reinterpret_cast<const uint8_t*>(q.cq.buf)[55];
            if (arch::load_u64_acquire(tail) == t1) {
                const uint16_t counter = uint16_t(((t1 >> 32) & 0xff) << 8 | ((t1 >> 40) & 0xff));
                if (!observe(counter, op_own >> 4, syndrome)) r = SqStatus::Window;
            }
        }
    } else {
        uint32_t ci = st->cq_ci;
        const uint32_t ci0 = ci;
        Cqe c;
        while (poll_cqe(q.cq, ci, &c)) {
            if (!observe(c.wqe_counter, c.opcode, c.syndrome)) {
                r = SqStatus::Window;
                break;
            }
            ++ci;
        }
        if (ci != ci0) {
            st->cq_ci = ci;
            update_cq_ci(q.cq, ci);
        }
    }
    if (progressed) {
        st->newest_done = newest;
        // Release pairs with the producers' acquire loads of complete_below (wait for room).
        arch::fetch_max_u64(&st->complete_below, newest);
    }
    arch::store_u32_release(&st->cq_busy, 0);
    if (r == SqStatus::Ok && arch::load_u64_acquire(&st->error) != 0) r = SqStatus::Completion;
    return r;
}

namespace detail {
// Waits until `done()` holds, polling the CQ; bounded by the queue's timeout.
template <class Done>
GDA_FN SqStatus wait(const Sq2& q, bool poll_cq, Done done) {
    const uint64_t deadline = arch::now_ns() + q.timeout_ns;
    while (!done()) {
        if (arch::load_u32_acquire(&q.state->poisoned)) return SqStatus::Poisoned;
        if (poll_cq) {
            const SqStatus s = poll(q);
            if (s != SqStatus::Ok) return s;
        }
        if (arch::now_ns() > deadline) return SqStatus::Timeout;
        arch::pause();
    }
    return SqStatus::Ok;
}
}  // namespace detail

// The protocol around one WQE of `units` WQEBBs: reserve, wait for room, `write(pos)` (returns
// the Posted), ring in reservation order. The WQE is signalled when asked, or when it crosses
// a quarter of the ring (so slots are recycled without the caller asking).
template <class Write>
GDA_FN SqStatus post_with(const Sq2& q, uint32_t units, uint32_t flags, Write write) {
    SqState* st = q.state;
    const uint64_t start = arch::fetch_add_u64(&st->reserved, units);
    const uint64_t end = start + units;
    const uint64_t entries = q.sq.wq.entries;
    SqStatus s = detail::wait(q, true, [&] {
        return end <= arch::load_u64_acquire(&st->complete_below) + entries;
    });
    if (s != SqStatus::Ok) {
        // Our reservation will never be rung: later producers must not wait for it forever.
        arch::store_u32_release(&st->poisoned, 1);
        return s;
    }
    const uint64_t quarter = entries / 4 ? entries / 4 : 1;
    if (start / quarter != end / quarter) flags |= send::SIGNALED;
    const Posted p = write(SqPos{uint32_t(start), 0, 0}, flags);
    // The ticket: wait while our start is still ahead of `rung` (wrapped distance).
    s = detail::wait(q, false, [&] {
        return int64_t(arch::load_u64_acquire(&st->rung) - start) >= 0;
    });
    if (s != SqStatus::Ok) {
        arch::store_u32_release(&st->poisoned, 1);
        return s;
    }
    if (flags & send::SIGNALED) arch::fetch_max_u64(&st->signaled_marker, start + 1);
    // Published before the doorbell: a poller that sees this WQE's CQE sees the bound.
    arch::store_u64_release(&st->ring_bound, end);
    ring_sq(q.sq, p);
    arch::store_u64_release(&st->last_rung_marker, start + 1);
    // Hands the ticket (and our doorbell's effects) to the next producer.
    arch::store_u64_release(&st->rung, end);
    return SqStatus::Ok;
}

// RDMA WRITE of `len` inline bytes through the protocol.
GDA_FN SqStatus write_inline(const Sq2& q, Remote remote, const void* data, uint32_t len,
                             uint32_t flags) {
    return post_with(q, wqebbs_for_ds(2 + inline_ds(len)), flags, [&](SqPos pos, uint32_t f) {
        return post_write_inline(q.sq, pos, remote, data, len, f);
    });
}

// RDMA WRITE of `n` gather entries (non-empty ones count) through the protocol.
GDA_FN SqStatus write(const Sq2& q, Remote remote, const Sge* sges, uint32_t n, uint32_t flags) {
    uint32_t ds = 2;
    for (uint32_t i = 0; i < n; ++i) ds += sges[i].length != 0;
    return post_with(q, wqebbs_for_ds(ds), flags, [&](SqPos pos, uint32_t f) {
        return post_write(q.sq, pos, remote, sges, n, f);
    });
}

// A fetch-add (or compare-swap) of 8 bytes through the protocol; the old value lands in
// `local` (big-endian, as ConnectX writes it).
GDA_FN SqStatus atomic(const Sq2& q, Remote remote, Sge local, const Atomic& a, uint32_t flags) {
    const uint32_t ds = 4 + (a.kind == Atomic::MaskedCompareSwap ? 1 : 0);
    return post_with(q, wqebbs_for_ds(ds), flags, [&](SqPos pos, uint32_t f) {
        return post_atomic(q.sq, pos, remote, local, a, 8, f);
    });
}

// A signalled NOP (one WQEBB): makes the newest WQE's completion observable.
GDA_FN Posted post_nop(const Sq& sq, SqPos pos, uint32_t flags) {
    return put_ctrl(sq.wq, pos, 0x00, 0, 1, ctrl_flags(flags), 0);
}

// OpenSHMEM quiet: everything reserved so far (by any producer) is rung and complete.
GDA_FN SqStatus quiet(const Sq2& q) {
    SqState* st = q.state;
    const uint64_t target = arch::load_u64_acquire(&st->reserved);
    SqStatus s = detail::wait(q, true, [&] { return arch::load_u64_acquire(&st->rung) >= target; });
    if (s != SqStatus::Ok) return s;
    if (arch::load_u64_acquire(&st->signaled_marker) <
        arch::load_u64_acquire(&st->last_rung_marker)) {
        s = post_with(q, 1, send::SIGNALED, [&](SqPos pos, uint32_t f) {
            return post_nop(q.sq, pos, f);
        });
        if (s != SqStatus::Ok) return s;
    }
    const uint64_t marker = arch::load_u64_acquire(&st->signaled_marker);
    s = detail::wait(q, true, [&] {
        return arch::load_u64_acquire(&st->complete_below) >= marker;
    });
    if (s != SqStatus::Ok) return s;
    return arch::load_u64_acquire(&st->error) ? SqStatus::Completion : SqStatus::Ok;
}

}  // namespace mlx5
}  // namespace gda
