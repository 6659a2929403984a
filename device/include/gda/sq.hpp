// gda device API: many producers on one send queue, for every provider — gda_hal::SendQueue's
// protocol (hal/src/sq.rs; docs/architecture.md), for HIP, CUDA and host C++ threads.
//
// A queue is `Queue<P>`: the read-only `SqProto` (CQ, where the shared state is, the limits the
// Rust side computed) and the provider's handle. The mutable state is `SqState`, the C layout of
// gda_hal::SqShared: **one** block that Rust producers (`SendQueue`) and header producers use at
// the same time, under the same rules (the Rust side exports a queue with
// `SendQueue::device_queue`).
//
// | step          | here                                                                     |
// |---------------|--------------------------------------------------------------------------|
// | reserve       | one atomic add on `reserved` claims the WQE's units; with PSN tracking   |
// |               | (bnxt) one 64-bit CAS advances unit, message count and PSN together      |
// | wait for room | until end <= complete_below + capacity, polling the CQ                   |
// | write         | the provider's encoder at the reserved position                          |
// | ring in order | wait until `rung` reaches our start (a wrapped-distance compare, so a    |
// |               | counter already past it never deadlocks), publish ring_bound, ring, then |
// |               | rung = end: one producer rings at a time, in reservation order           |
// | complete      | one poller at a time (cq_busy) widens each CQE's counter, window-checked |
// |               | against ring_bound, into complete_below                                  |
// | quiet         | quiet_rung: what was rung is complete; quiet: everything reserved so far |
// |               | is rung and complete (a signalled NOP if the newest WQE was unsignalled) |
//
// A WQE is signalled when asked, or when it crosses or ends on a multiple of `signal_every`
// (gda_hal::sq::must_signal), so slots are recycled without the caller asking. Every wait is
// bounded (`SqProto::timeout_ns`); a producer that times out holding a reservation poisons the
// queue. A provider is a type with the members listed at `Provider requirements` below
// (mlx5_sq.hpp, native_sq.hpp, bnxt_sq.hpp).
#pragma once

#include "abi.hpp"
#include "arch.hpp"

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
    TooLarge = 5,    // the WQE is larger than the queue accepts (nothing was reserved)
    BadQueue = 6,    // a handle of another provider or ABI version (nothing was reserved)
};

// The mutable state one queue's producers share: gda_hal::SqShared (64-bit counters never wrap).
struct SqState {
    uint64_t reserved;          // units claimed (or the packed unit/msg/psn word)
    uint64_t rung;              // units whose doorbell was rung (the ticket)
    uint64_t ring_bound;        // end of the newest rung WQE, published before its doorbell
    uint64_t complete_below;    // every WQE starting below is complete
    uint64_t signaled_marker;   // start + 1 of the newest signalled WQE rung
    uint64_t last_rung_marker;  // start + 1 of the newest rung WQE
    uint64_t newest_plus_one;   // the poller's newest completed start + 1 (0: none yet)
    uint64_t error;             // (WcStatus + 1) << 32 | counter of the first error CQE
    uint32_t cq_busy;           // the poller's lock
    uint32_t cq_ci;             // normal CQ consumer index
    uint32_t poisoned;
    uint32_t reserved0;
};
static_assert(sizeof(SqState) == 80 && offsetof(SqState, complete_below) == 24 &&
                  offsetof(SqState, error) == 56 && offsetof(SqState, cq_busy) == 64 &&
                  offsetof(SqState, poisoned) == 72,
              "SqState layout (gda_hal::SqShared)");

// The read-only half of a queue: gda_hal::SqProto.
struct SqProto {
    CqHandle cq;
    uint64_t state;         // address of the SqState
    uint64_t capacity;      // units that may be outstanding
    uint64_t signal_every;  // signalling interval
    uint64_t timeout_ns;    // bound of every wait
    uint32_t max_units;     // largest WQE accepted
    uint32_t bits;          // width of the device's completion counter
    uint32_t tracks_psn;    // 1: `reserved` is packed (bnxt)
    uint32_t provider;      // ProviderTag
};
static_assert(sizeof(SqProto) == 88 && offsetof(SqProto, state) == 40 &&
                  offsetof(SqProto, capacity) == 48 && offsetof(SqProto, signal_every) == 56 &&
                  offsetof(SqProto, timeout_ns) == 64 && offsetof(SqProto, max_units) == 72 &&
                  offsetof(SqProto, bits) == 76 && offsetof(SqProto, tracks_psn) == 80 &&
                  offsetof(SqProto, provider) == 84,
              "SqProto layout (gda_hal::SqProto)");

// Provider tags (gda_hal::Provider::DEVICE_TAG).
enum class ProviderTag : uint32_t { Native = 1, Mlx5 = 2, Bnxt = 3 };

// A queue of provider P: gda_hal::SqDevice<P::Sq>.
template <class P>
struct Queue {
    SqProto proto;
    typename P::Handle sq;
};

// What a WQE costs: units of the ring, and packets (PSNs) when the provider tracks them.
struct Cost {
    uint32_t units;
    uint32_t packets;
};

// One completion as the protocol needs it: the counter it reports (the provider's completed
// unit, before widening) and its status.
struct Wc {
    uint32_t counter;
    WcStatus status;
};

// Provider requirements (each a static GDA_FN member of P):
//   using Handle;  static constexpr ProviderTag TAG;  static constexpr bool ATOMIC_RESULT_BE;
//   const WqHandle& wq(const Handle&)
//   void ring(const Handle&, const Posted&)                      the doorbell (record + register)
//   bool poll_cqe(const CqHandle&, uint32_t ci, Wc*)             a normal CQ's slot ci, if written
//   void update_cq_ci(const CqHandle&, uint32_t ci)
//   bool read_collapsed(const CqHandle&, Wc*)                    a collapsed CQ's slot, consistent
//   uint32_t completed_unit(const Handle&, const Wc&)            the unit counter a CQE completes
//   Cost nop_cost(const Handle&);  Posted post_nop(const Handle&, SqPos, uint32_t flags)
//   and, per request kind, X_cost(...) and post_X(...) (see the wrappers at the end).

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

namespace sq {

GDA_FN SqState* state(const SqProto& p) { return reinterpret_cast<SqState*>(p.state); }

// The packed reservation word of a PSN-tracking queue (gda_hal::sq::packed).
namespace packed {
constexpr uint32_t UNIT_BITS = 24, MSG_BITS = 16, PSN_SHIFT = UNIT_BITS + MSG_BITS;
constexpr uint64_t UNIT_MASK = (uint64_t(1) << UNIT_BITS) - 1;
constexpr uint64_t MSG_MASK = (uint64_t(1) << MSG_BITS) - 1;
constexpr uint32_t PSN_MASK = 0xffffffu;
GDA_FN uint64_t unit(uint64_t v) { return v & UNIT_MASK; }
GDA_FN uint32_t msg(uint64_t v) { return uint32_t((v >> UNIT_BITS) & MSG_MASK); }
GDA_FN uint32_t psn(uint64_t v) { return uint32_t(v >> PSN_SHIFT); }
GDA_FN uint64_t pack(uint64_t u, uint32_t m, uint32_t p) {
    return (u & UNIT_MASK) | ((uint64_t(m) & MSG_MASK) << UNIT_BITS) |
           (uint64_t(p & PSN_MASK) << PSN_SHIFT);
}
// The free-running position whose low bits are `low`, at or above `floor`.
GDA_FN uint64_t widen(uint64_t low, uint64_t floor) {
    return floor + ((low - floor) & UNIT_MASK);
}
}  // namespace packed

// Next unreserved position (gda_hal::Counters::reserved).
GDA_FN uint64_t reserved(const SqProto& p) {
    SqState* st = state(p);
    if (!p.tracks_psn) return arch::load_u64_acquire(&st->reserved);
    // The floor first (as gda_hal does): read after the packed word, a floor that another
    // producer's completion moved past it would wrap the widening 2^24 units ahead.
    const uint64_t floor = arch::load_u64_acquire(&st->complete_below);
    const uint64_t v = arch::load_u64_acquire(&st->reserved);
    return packed::widen(packed::unit(v), floor);
}

// Claims `c` (for `msgs` WQEs): the start position and its SqPos (gda_hal::Counters::reserve).
GDA_FN uint64_t reserve(const SqProto& p, Cost c, SqPos* pos, uint32_t msgs = 1) {
    SqState* st = state(p);
    if (!p.tracks_psn) {
        const uint64_t start = arch::fetch_add_u64(&st->reserved, c.units);
        *pos = SqPos{uint32_t(start), 0, 0};
        return start;
    }
    uint64_t cur = arch::load_u64_acquire(&st->reserved);
    for (;;) {
        const uint64_t next = packed::pack(packed::unit(cur) + c.units, packed::msg(cur) + msgs,
                                           packed::psn(cur) + c.packets);
        const uint64_t seen = arch::cas_u64(&st->reserved, cur, next);
        if (seen == cur) break;
        cur = seen;
    }
    // Our reservation is not rung, so complete_below <= start: widen above it.
    const uint64_t start =
        packed::widen(packed::unit(cur), arch::load_u64_acquire(&st->complete_below));
    *pos = SqPos{uint32_t(start), packed::msg(cur), packed::psn(cur)};
    return start;
}

// Whether the WQE [start, end) must ask for a CQE (gda_hal::sq::must_signal).
GDA_FN bool must_signal(uint64_t start, uint64_t end, uint64_t every) {
    return start / every != end / every || end % every == 0;
}

// The first error the queue's CQEs reported, as a status; Success if none.
GDA_FN WcStatus first_error(const SqProto& p) {
    const uint64_t e = arch::load_u64_acquire(&state(p)->error);
    return e ? WcStatus(uint32_t(e >> 32) - 1) : WcStatus::Success;
}

namespace detail {
// gda_hal::CollapsedProgress: the newest completed start, widened from `bits`-wide counters.
struct Progress {
    uint64_t newest;
    bool seen;
    uint64_t mask;
    // Widens `raw` above the newest start; refused (false) outside [newest, rung) or when the
    // window exceeds the counter's range.
    GDA_FN bool observe(uint32_t raw, uint64_t rung) {
        const uint64_t base = newest;
        const uint64_t widened = base + ((uint64_t(raw) - base) & mask);
        if (widened < base || widened >= rung || rung - base > mask + 1) return false;
        newest = widened;
        seen = true;
        return true;
    }
    GDA_FN uint64_t complete_below() const { return seen ? newest + 1 : newest; }
};

GDA_FN void note(SqState* st, const Wc& wc) {
    if (wc.status != WcStatus::Success) {
        arch::cas_u64(&st->error, 0, (uint64_t(uint32_t(wc.status)) + 1) << 32 | wc.counter);
    }
}
}  // namespace detail

// Reaps completions (one poller at a time; others return at once), as SendQueue::poll.
template <class P>
GDA_FN_OUTLINE SqStatus poll(const Queue<P>& q) {
    SqState* st = state(q.proto);
    if (arch::cas_u32(&st->cq_busy, 0, 1) != 0) {
        return arch::load_u64_acquire(&st->error) ? SqStatus::Completion : SqStatus::Ok;
    }
    const uint32_t bits = q.proto.bits < 1 ? 1 : (q.proto.bits > 32 ? 32 : q.proto.bits);
    const uint64_t np1 = arch::load_u64_acquire(&st->newest_plus_one);
    detail::Progress prog{np1 ? np1 - 1 : 0, np1 != 0, (uint64_t(1) << bits) - 1};
    SqStatus r = SqStatus::Ok;
    Wc wc;
    if (q.proto.cq.collapsed) {
        if (P::read_collapsed(q.proto.cq, &wc)) {
            const uint64_t before = prog.complete_below();
            const uint32_t unit = P::completed_unit(q.sq, wc);
            // The CQE may belong to a WQE rung after the bound was read: read the bound
            // (published before that doorbell) again; a second refusal is real.
            if (!prog.observe(unit, arch::load_u64_acquire(&st->ring_bound)) &&
                !prog.observe(unit, arch::load_u64_acquire(&st->ring_bound))) {
                r = SqStatus::Window;
            } else if (prog.complete_below() != before) {
                detail::note(st, wc);
            }
        }
    } else {
        uint32_t ci = arch::load_u32_acquire(&st->cq_ci);
        const uint32_t ci0 = ci;
        while (P::poll_cqe(q.proto.cq, ci, &wc)) {
            // The bound is read after the CQE (its doorbell was published after the bound).
            if (!prog.observe(P::completed_unit(q.sq, wc), arch::load_u64_acquire(&st->ring_bound))) {
                r = SqStatus::Window;
                break;
            }
            detail::note(st, wc);
            ++ci;
        }
        if (ci != ci0) {
            arch::store_u32_release(&st->cq_ci, ci);
            P::update_cq_ci(q.proto.cq, ci);
        }
    }
    if (prog.complete_below() > 0) {
        arch::store_u64_release(&st->newest_plus_one, prog.complete_below());
        // Release pairs with the producers' acquire loads of complete_below (wait for room).
        arch::fetch_max_u64(&st->complete_below, prog.complete_below());
    }
    arch::store_u32_release(&st->cq_busy, 0);
    if (r == SqStatus::Ok && arch::load_u64_acquire(&st->error) != 0) r = SqStatus::Completion;
    return r;
}

namespace detail {
// Waits until `done()` holds, polling the CQ when asked; bounded by the queue's timeout.
// Callers test `done()` once inline first: this is the slow path.
template <class P, class Done>
GDA_FN_OUTLINE SqStatus wait_slow(const Queue<P>& q, bool poll_cq, Done done) {
    const uint64_t deadline = arch::now_ns() + q.proto.timeout_ns;
    SqState* st = state(q.proto);
    uint32_t spins = 0;
    while (!done()) {
        if (arch::load_u32_acquire(&st->poisoned)) return SqStatus::Poisoned;
        if (poll_cq) {
            const SqStatus s = poll(q);
            if (s != SqStatus::Ok) return s;
        }
        if (!arch::wait_step(spins, deadline, [] { return arch::now_ns(); })) return SqStatus::Timeout;
    }
    return SqStatus::Ok;
}
template <class P, class Done>
GDA_FN SqStatus wait(const Queue<P>& q, bool poll_cq, Done done) {
    return done() ? SqStatus::Ok : wait_slow(q, poll_cq, done);
}
}  // namespace detail

// The protocol around one WQE of cost `c`: reserve, wait for room, `write(pos, flags)` (returns
// the Posted), ring in reservation order (SendQueue::post_with).
template <class P, class Write>
GDA_FN SqStatus post_with(const Queue<P>& q, Cost c, uint32_t flags, Write write) {
    if (c.units > q.proto.max_units || c.units == 0) return SqStatus::TooLarge;
    SqState* st = state(q.proto);
    SqPos pos;
    const uint64_t start = reserve(q.proto, c, &pos);
    const uint64_t end = start + c.units;
    if (must_signal(start, end, q.proto.signal_every ? q.proto.signal_every : 1)) {
        flags |= send::SIGNALED;
    }
    // One loop advances this producer's own steps — room, write, ticket, ring — and ends once
    // it has rung. No lane waits at a point where another lane of its warp must move first, so
    // lanes of one warp posting to one queue at once cannot deadlock under lockstep execution
    // (AMD wavefronts; NVIDIA before Volta): the lane whose ticket has come rings inside the
    // loop while the others keep looping.
    bool written = false;
    Posted p{};
    uint32_t spins = 0;
    uint64_t deadline = 0;  // read the clock only once a wait is needed
    for (;;) {
        if (!written && end <= arch::load_u64_acquire(&st->complete_below) + q.proto.capacity) {
            p = write(pos, flags);
            written = true;
        }
        // The ticket: our start is not ahead of `rung` (wrapped distance).
        if (written && int64_t(arch::load_u64_acquire(&st->rung) - start) >= 0) break;
        // Our reservation can only be given up by poisoning: later producers must not wait
        // for it forever.
        SqStatus s = arch::load_u32_acquire(&st->poisoned) ? SqStatus::Poisoned : SqStatus::Ok;
        if (s == SqStatus::Ok && !written) s = poll(q);
        if (s == SqStatus::Ok) {
            if (deadline == 0) deadline = arch::now_ns() + q.proto.timeout_ns;
            if (!arch::wait_step(spins, deadline, [] { return arch::now_ns(); })) s = SqStatus::Timeout;
        }
        if (s != SqStatus::Ok) {
            arch::store_u32_release(&st->poisoned, 1);
            return s;
        }
    }
    // Published before the doorbell: a poller that sees this WQE's CQE sees the bound.
    arch::store_u64_release(&st->ring_bound, end);
    P::ring(q.sq, p);
    if (flags & send::SIGNALED) arch::fetch_max_u64(&st->signaled_marker, start + 1);
    arch::store_u64_release(&st->last_rung_marker, start + 1);
    // Hands the ticket (and our doorbell's effects) to the next producer.
    arch::store_u64_release(&st->rung, end);
    return SqStatus::Ok;
}

// Every WQE rung so far whose completion is observable is complete (slot recycling; never
// posts): SendQueue::quiet_rung.
template <class P>
GDA_FN_OUTLINE SqStatus quiet_rung(const Queue<P>& q) {
    SqState* st = state(q.proto);
    const uint64_t marker = arch::load_u64_acquire(&st->signaled_marker);
    SqStatus s = detail::wait(q, true, [&] {
        return arch::load_u64_acquire(&st->complete_below) >= marker;
    });
    if (s != SqStatus::Ok) return s;
    return arch::load_u64_acquire(&st->error) ? SqStatus::Completion : SqStatus::Ok;
}

// OpenSHMEM quiet: everything reserved so far (by any producer) is rung and complete.
template <class P>
GDA_FN_OUTLINE SqStatus quiet(const Queue<P>& q) {
    SqState* st = state(q.proto);
    const uint64_t target = reserved(q.proto);
    SqStatus s = detail::wait(q, true, [&] { return arch::load_u64_acquire(&st->rung) >= target; });
    if (s != SqStatus::Ok) return s;
#if defined(GDA_MUTANT_QUIET_EARLY)
    // Test-only mutant (tests/shmem_device.rs builds it and expects failures): a quiet that
    // returns once everything is rung, before it is complete.
    return SqStatus::Ok;
#endif
    // The newest WQE may have been unsignalled: its completion is only observable through a
    // later CQE, so ask for one.
    if (arch::load_u64_acquire(&st->signaled_marker) <
        arch::load_u64_acquire(&st->last_rung_marker)) {
        s = post_with(q, P::nop_cost(q.sq), send::SIGNALED,
                      [&](SqPos pos, uint32_t f) { return P::post_nop(q.sq, pos, f); });
        if (s != SqStatus::Ok) return s;
    }
    return quiet_rung(q);
}

// ---- requests through the protocol (each provider's encoders) ----

// RDMA WRITE of `len` inline bytes (at most the queue's max_inline).
template <class P>
GDA_FN SqStatus write_inline(const Queue<P>& q, Remote r, const void* data, uint32_t len,
                             uint32_t flags) {
    if (len > P::wq(q.sq).max_inline) return SqStatus::TooLarge;
    return post_with(q, P::write_inline_cost(q.sq, len), flags, [&](SqPos pos, uint32_t f) {
        return P::post_write_inline(q.sq, pos, r, data, len, f);
    });
}

// RDMA WRITE of an 8- or 4-byte register value, inline (no load of the value from memory).
template <class P, class T>
GDA_FN SqStatus write_value(const Queue<P>& q, Remote r, T value, uint32_t flags) {
    static_assert(sizeof(T) == 8 || sizeof(T) == 4, "a 4- or 8-byte value");
    if (sizeof(T) > P::wq(q.sq).max_inline) return SqStatus::TooLarge;
    return post_with(q, P::write_inline_cost(q.sq, sizeof(T)), flags, [&](SqPos pos, uint32_t f) {
        return P::post_write_value(q.sq, pos, r, value, f);
    });
}

// RDMA WRITE from `n` gather entries.
template <class P>
GDA_FN SqStatus write(const Queue<P>& q, Remote r, const Sge* s, uint32_t n, uint32_t flags) {
    if (n > P::wq(q.sq).max_sge) return SqStatus::TooLarge;
    return post_with(q, P::write_cost(q.sq, s, n), flags, [&](SqPos pos, uint32_t f) {
        return P::post_write(q.sq, pos, r, s, n, f);
    });
}

// RDMA READ into `n` scatter entries.
template <class P>
GDA_FN SqStatus read(const Queue<P>& q, Remote r, const Sge* s, uint32_t n, uint32_t flags) {
    if (n > P::wq(q.sq).max_sge) return SqStatus::TooLarge;
    return post_with(q, P::read_cost(q.sq, s, n), flags, [&](SqPos pos, uint32_t f) {
        return P::post_read(q.sq, pos, r, s, n, f);
    });
}

// An atomic of `bytes` (8; the masked ones also 4) on `r`; the old value lands in `local` in
// the NIC's byte order (P::ATOMIC_RESULT_BE).
template <class P>
GDA_FN SqStatus atomic(const Queue<P>& q, Remote r, Sge local, const Atomic& a, uint32_t bytes,
                       uint32_t flags) {
    return post_with(q, P::atomic_cost(q.sq, a, bytes), flags, [&](SqPos pos, uint32_t f) {
        return P::post_atomic(q.sq, pos, r, local, a, bytes, f);
    });
}

// Every lane of group `g` writes its own register value inline to its own `r`, on one queue:
// rank 0 reserves the group's WQEs with one atomic, each lane writes its WQE at its place, and
// rank 0 rings one doorbell (the last WQE's) for all of them once the group has met — never
// two lanes storing a doorbell. A group whose WQEs would not fit at once posts lane by lane.
template <class P, class G, class T>
GDA_FN SqStatus write_value_group(const Queue<P>& q, G g, Remote r, T value, uint32_t flags) {
    // The same answer in every lane (one queue): the group returns together.
    if (sizeof(T) > P::wq(q.sq).max_inline) return SqStatus::TooLarge;
    const Cost one = P::write_inline_cost(q.sq, sizeof(T));
    uint64_t units = 0, packets = 0;
    const uint64_t before = g.exclusive_sum(one.units, &units);
    const uint64_t before_p = g.exclusive_sum(one.packets, &packets);
    if (units > q.proto.max_units) {
        // Too many for one reservation: one at a time, in rank order (no lane waits on a
        // reservation of a lane behind it).
        SqStatus s = SqStatus::Ok;
        for (uint32_t k = 0; k < g.size(); ++k) {
            if (g.rank() == k) s = write_value(q, r, value, flags);
            g.sync();
        }
        return s;
    }
    SqState* st = state(q.proto);
    uint64_t start = 0, msg_psn = 0;
    SqStatus s = SqStatus::Ok;
    if (g.rank() == 0) {
        SqPos pos0;
        start = reserve(q.proto, Cost{uint32_t(units), uint32_t(packets)}, &pos0, g.size());
        msg_psn = uint64_t(pos0.msg) << 32 | pos0.psn;
        s = detail::wait(q, true, [&] {
            return start + units <= arch::load_u64_acquire(&st->complete_below) + q.proto.capacity;
        });
        if (s != SqStatus::Ok) arch::store_u32_release(&st->poisoned, 1);
    }
    s = SqStatus(int32_t(g.broadcast(uint64_t(int64_t(s)))));
    if (s != SqStatus::Ok) return s;
    start = g.broadcast(start);
    msg_psn = g.broadcast(msg_psn);
    const uint64_t mine = start + before;
    const SqPos pos{uint32_t(mine), uint32_t(msg_psn >> 32) + g.rank(),
                    (uint32_t(msg_psn) + uint32_t(before_p)) & packed::PSN_MASK};
    const uint32_t f = must_signal(mine, mine + one.units,
                                   q.proto.signal_every ? q.proto.signal_every : 1)
                           ? flags | send::SIGNALED
                           : flags;
    const Posted p = P::post_write_value(q.sq, pos, r, value, f);
    if (f & send::SIGNALED) arch::fetch_max_u64(&st->signaled_marker, mine + 1);
    // The last lane's Posted carries the doorbell for all of them.
    uint64_t w[4];
    __builtin_memcpy(w, &p, sizeof p);
    const uint32_t last = g.size() - 1;
    for (uint64_t& x : w) x = g.broadcast(x, last);  // the broadcasts also make the group meet
    if (g.rank() == 0) {
        Posted lp;
        __builtin_memcpy(&lp, w, sizeof lp);
        s = detail::wait(q, false, [&] {
            return int64_t(arch::load_u64_acquire(&st->rung) - start) >= 0;
        });
        if (s == SqStatus::Ok) {
            arch::store_u64_release(&st->ring_bound, start + units);
            P::ring(q.sq, lp);
            arch::store_u64_release(&st->last_rung_marker, start + units - one.units + 1);
            arch::store_u64_release(&st->rung, start + units);
        } else {
            arch::store_u32_release(&st->poisoned, 1);
        }
    }
    return SqStatus(int32_t(g.broadcast(uint64_t(int64_t(s)))));
}

// The value an atomic left in its local 8 bytes, in host order.
template <class P>
GDA_FN uint64_t atomic_result(const void* local, uint32_t bytes) {
    uint64_t v = 0;
    if (bytes == 4) {
        uint32_t w;
        __builtin_memcpy(&w, local, 4);
        v = P::ATOMIC_RESULT_BE ? be::u32(w) : w;
    } else {
        __builtin_memcpy(&v, local, 8);
        if (P::ATOMIC_RESULT_BE) v = be::u64(v);
    }
    return v;
}

}  // namespace sq
}  // namespace gda
