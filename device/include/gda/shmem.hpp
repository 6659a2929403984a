// gda device API: OpenSHMEM for kernels (and CPU threads standing in for them).
//
// The host builds a `gda::shmem::Ctx` (gda-shmem's `Pe::device_context`; from C,
// `shmemx_device_context()` in shmemx.h) and hands the kernel a pointer to it. Every routine
// takes it first; symmetric addresses are this PE's addresses of objects in the symmetric heap
// (`shmem_malloc`), exactly as on the host. Per target PE the route is the one gda-shmem chose
// at init: **P2P** (the peer's heap is mapped here: loads, stores, CPU/GPU atomics) or **RDMA**
// (the provider's WQEs on the queue the host PE uses too — `gda/sq.hpp` shares its state).
//
// | routine | thread | group (Warp, Block) |
// |---|---|---|
// | putmem, putmem_nbi, getmem, getmem_nbi (bytes); put, put_nbi, get, get_nbi (typed: nelems of T) | yes | yes: lanes split a P2P copy; rank 0 posts one RDMA WQE |
// | p, g, atomics (fetch and non-fetch, 32/64-bit), wait_until, test, signal_wait_until, signal_fetch, ptr | yes (every lane may call) | — |
// | putmem_signal[_nbi] (bytes), put_signal[_nbi] (typed) | yes | yes |
// | fence, quiet, barrier_all, sync_all, sync(team) | yes | yes (rank 0 acts, the group meets) |
// | p_lanes: every lane of a group writes one value to one PE's queue | — | yes: one reservation, one doorbell |
//
// Every routine returns a `Status` (device code cannot throw); every wait is bounded by the
// context's timeout. Semantics as OpenSHMEM 1.5 with these device-side choices:
// - blocking put returns when the source may be reused (inline data, or the WQE completed);
// - put_nbi from memory outside the symmetric heap is staged through the context's staging
//   slots and completes before returning (only heap sources are read by the NIC in place);
// - fence over RDMA is a quiet of the routes that carry RDMA (stronger than required);
// - atomics over RDMA use the NIC's atomics where it has them (fetch-add, compare-swap, masked
//   compare-swap for set/swap/and/or); xor, and any 4-byte atomic on a NIC without masked
//   atomics (bnxt), is a compare-swap loop on the aligned 8-byte word.
#pragma once

#include "group.hpp"
#include "sq.hpp"
#if !defined(GDA_NO_MLX5)
#include "mlx5_sq.hpp"
#endif
#if !defined(GDA_NO_NATIVE)
#include "native_sq.hpp"
#endif
#if !defined(GDA_NO_BNXT) && __has_include("bnxt_sq.hpp")
#include "bnxt_sq.hpp"
#define GDA_HAS_BNXT 1
#endif

namespace gda {
namespace shmem {

// The provider type of a queue (for `decltype` in generic code).
template <class P>
GDA_FN P provider_of(const Queue<P>&) {
    return P{};
}

// Bumped whenever Ctx, Peer or the work area change (gda_shmem::device::ABI_VERSION).
constexpr uint32_t ABI_VERSION = 2;

// How this PE reaches another.
enum class Route : uint32_t { None = 0, P2p = 1, Rdma = 2 };

struct Peer {
    uint32_t route;  // Route
    uint32_t rkey;   // RDMA: the peer segment's key
    uint64_t base;   // P2P: the peer's segment mapped here; RDMA: its address there
};
static_assert(sizeof(Peer) == 16 && offsetof(Peer, base) == 8, "Peer layout");

// The device context (gda_shmem::device::DeviceCtx). Read-only for kernels.
struct Ctx {
    uint32_t abi;          // ABI_VERSION
    uint32_t size;         // sizeof(Ctx)
    uint32_t my_pe;
    uint32_t n_pes;
    uint32_t provider;     // ProviderTag of the RDMA queues (0: none)
    uint32_t queue_bytes;  // stride of `queues`
    uint32_t lkey;         // this PE's segment (RDMA sources, destinations, results)
    uint32_t staging_slots;
    uint64_t local_base;   // this PE's segment here
    uint64_t heap_bytes;   // the symmetric heap: [local_base, local_base + heap_bytes)
    uint64_t seg_bytes;    // the whole registered segment
    uint64_t peers;        // Peer[n_pes]
    uint64_t queues;       // PE j's queue (RDMA routes) at queues + j * queue_bytes
    uint64_t work;         // segment offset of the device work area (same on every PE)
    uint64_t staging_slot_bytes;
    uint64_t timeout_ns;
    uint64_t kick_fn;   // host only: void(uint64_t arg), wakes the software NIC after a post
    uint64_t kick_arg;
    uint32_t memory;    // Memory: where this context and what it points at live
    uint32_t reserved;  // 0
};
static_assert(sizeof(Ctx) == 120 && offsetof(Ctx, local_base) == 32 &&
                  offsetof(Ctx, peers) == 56 && offsetof(Ctx, work) == 72 &&
                  offsetof(Ctx, timeout_ns) == 88 && offsetof(Ctx, kick_fn) == 96 &&
                  offsetof(Ctx, memory) == 112,
              "Ctx layout (gda_shmem::device::DeviceCtx)");

// Where a context, its arrays and its queues' state, rings and doorbell records live
// (gda_shmem::device::ContextMemory).
enum class Memory : uint32_t {
    Host = 0,    // host memory of the process: map it for a GPU (hipHostRegister/cudaHostRegister)
    Device = 1,  // GPU memory (a GPU heap, `hip` feature), doorbells mapped: use it as it is
    Mapped = 2,  // host memory also mapped for this process's GPU at the same addresses (`hip`
                 // feature, a host heap, a GPU present): use it as it is
};

// The device work area, at segment offset `Ctx::work` on every PE (zeroed at init).
namespace work {
constexpr uint64_t SYNC = 0;        // uint64_t[16]: team sync counters (peers add here)
constexpr uint64_t EPOCH = 128;     // uint64_t[16]: this PE's sync rounds per team slot
constexpr uint64_t SINK = 256;      // uint64_t[32]: results nobody reads (non-fetch atomics)
constexpr uint64_t LOCKS = 1024;    // uint32_t[staging_slots]
constexpr uint64_t STAGING = 4096;  // staging_slots x staging_slot_bytes
constexpr uint32_t TEAM_SLOTS = 16;
}  // namespace work

enum class Status : int32_t {
    Ok = 0,
    Timeout = 1,
    Completion = 2,
    Window = 3,
    Poisoned = 4,
    TooLarge = 5,
    BadQueue = 6,
    BadPe = 7,          // no such PE, or no route to it
    NotSymmetric = 8,   // an address outside the symmetric heap
    BadContext = 9,       // a context of another ABI version
    NotCompiledIn = 10,   // the context's provider is not part of this build
    BadContextSize = 11,  // a context of another size (or with fields this header does not know)
    BadProvider = 12,     // an unknown provider tag, or an RDMA route without a provider
    BadQueueStride = 13,  // queue_bytes is not the provider's queue size, or no queue array
    BadWorkArea = 14,     // the segment, heap, work area and staging slots do not fit together
    BadPeers = 15,        // no PEs, this PE not among them, or no peer array
    BadTimeout = 16,      // a timeout of 0 or beyond 2^62 ns
};

// What a status says, in words (for a host that prints it; device code compares the value).
GDA_FN const char* describe(Status s) {
    switch (s) {
        case Status::Ok: return "ok";
        case Status::Timeout: return "a wait ran out of time";
        case Status::Completion: return "a completion reported an error";
        case Status::Window: return "a completion counter outside the window";
        case Status::Poisoned: return "the queue is poisoned by an earlier timeout";
        case Status::TooLarge: return "the request is larger than the queue accepts";
        case Status::BadQueue: return "a queue of another provider than the context's";
        case Status::BadPe: return "no such PE, or no route to it";
        case Status::NotSymmetric: return "an address outside the symmetric segment";
        case Status::BadContext: return "a context of another ABI version";
        case Status::NotCompiledIn: return "the context's provider is not compiled in";
        case Status::BadContextSize: return "a context of another size, or a nonzero reserved field";
        case Status::BadProvider: return "an unknown provider tag, or RDMA routes without one";
        case Status::BadQueueStride: return "queue_bytes is not the provider's queue size";
        case Status::BadWorkArea: return "the segment, heap, work area and staging slots do not fit";
        case Status::BadPeers: return "no PEs, this PE not among them, or no peer array";
        case Status::BadTimeout: return "a timeout of 0 or beyond 2^62 ns";
    }
    return "an unknown status";
}

GDA_FN Status from(SqStatus s) { return Status(int32_t(s)); }

enum class Cmp : int32_t { Eq = 0, Ne = 1, Gt = 2, Ge = 3, Lt = 4, Le = 5 };  // SHMEM_CMP_*
enum class SignalOp : int32_t { Set = 0, Add = 1 };                            // SHMEM_SIGNAL_*

// A team the device syncs: members start + i * stride (i < size), sync words of `slot` (0 is
// the world's; give each team used at the same time its own slot, 1..15).
struct Team {
    uint32_t start, stride, size, slot;
};
GDA_FN Team team_world(const Ctx& c) { return Team{0, 1, c.n_pes, 0}; }

namespace detail {
// sizeof(Queue) of provider `tag` when it is compiled in, else 0.
GDA_FN uint32_t queue_size(uint32_t tag) {
    switch (ProviderTag(tag)) {
        case ProviderTag::Mlx5:
#if !defined(GDA_NO_MLX5)
            return uint32_t(sizeof(mlx5::Queue));
#else
            return 0;
#endif
        case ProviderTag::Native:
#if !defined(GDA_NO_NATIVE)
            return uint32_t(sizeof(native::Queue));
#else
            return 0;
#endif
        case ProviderTag::Bnxt:
#if defined(GDA_HAS_BNXT)
            return uint32_t(sizeof(bnxt::Queue));
#else
            return 0;
#endif
    }
    return 0;
}
}  // namespace detail

// Whether a kernel may use the context: every field a routine trusts, checked in O(1) — this
// header's ABI version and size, the PEs and peer array, the provider and its queue stride,
// the segment, heap, work area and staging slots fitting together, the timeout. Every routine
// calls it first and returns what it returns (each refusal a status of its own; `describe`
// says it in words); a peer's route is checked where it is used.
GDA_FN Status check(const Ctx& c) {
    if (c.abi != ABI_VERSION) return Status::BadContext;
    if (c.size != sizeof(Ctx) || c.reserved != 0 || c.memory > 2) return Status::BadContextSize;
    if (c.n_pes == 0 || c.my_pe >= c.n_pes || c.peers == 0 || c.peers % 8 != 0) {
        return Status::BadPeers;
    }
    if (c.provider != 0) {
        if (c.provider < uint32_t(ProviderTag::Native) || c.provider > uint32_t(ProviderTag::Bnxt)) {
            return Status::BadProvider;
        }
        const uint32_t qs = detail::queue_size(c.provider);
        if (qs == 0) return Status::NotCompiledIn;
        if (c.queue_bytes != qs || c.queues == 0 || c.queues % 8 != 0) return Status::BadQueueStride;
    }
    // [local_base, +seg_bytes) holds the heap below the work area, whose staging slots (after
    // STAGING bytes of counters and slot locks) fit in the segment.
    const uint64_t room = c.seg_bytes >= c.work ? c.seg_bytes - c.work : 0;
    if (c.local_base == 0 || c.local_base + c.seg_bytes < c.local_base || c.work % 8 != 0 ||
        c.heap_bytes > c.work || room < work::STAGING ||
        c.staging_slots > (work::STAGING - work::LOCKS) / 4 ||
        (c.staging_slots != 0 &&
         (c.staging_slot_bytes == 0 ||
          c.staging_slot_bytes > (room - work::STAGING) / c.staging_slots))) {
        return Status::BadWorkArea;
    }
    if (c.timeout_ns == 0 || c.timeout_ns > (uint64_t(1) << 62)) return Status::BadTimeout;
    return Status::Ok;
}

GDA_FN int my_pe(const Ctx& c) { return int(c.my_pe); }
GDA_FN int n_pes(const Ctx& c) { return int(c.n_pes); }

namespace detail {

GDA_FN const Peer* peer(const Ctx& c, int pe) {
    if (pe < 0 || uint32_t(pe) >= c.n_pes) return nullptr;
    const Peer* p = reinterpret_cast<const Peer*>(c.peers) + pe;
    // Only the routes this header knows (None is no route).
    return (p->route == uint32_t(Route::P2p) || p->route == uint32_t(Route::Rdma)) ? p : nullptr;
}

// The segment offset of [a, a + bytes) if it lies in the symmetric segment (the heap, or the
// device work area the collectives use).
GDA_FN bool offset(const Ctx& c, const void* a, uint64_t bytes, uint64_t* off) {
    const uint64_t x = reinterpret_cast<uint64_t>(a);
    if (x < c.local_base || x - c.local_base > c.seg_bytes ||
        bytes > c.seg_bytes - (x - c.local_base)) {
        return false;
    }
    *off = x - c.local_base;
    return true;
}

// Whether [a, a + bytes) is in this PE's registered segment (the NIC may read/write it).
GDA_FN bool registered(const Ctx& c, const void* a, uint64_t bytes) {
    const uint64_t x = reinterpret_cast<uint64_t>(a);
    return x >= c.local_base && x - c.local_base <= c.seg_bytes &&
           bytes <= c.seg_bytes - (x - c.local_base);
}

GDA_FN uint8_t* work_at(const Ctx& c, uint64_t what) {
    return reinterpret_cast<uint8_t*>(c.local_base + c.work + what);
}

// Calls f(queue) with PE `pe`'s queue as the context's provider's type, once the queue says it
// is of that provider (the context was checked: the stride is that provider's queue size).
template <class Q, class F>
GDA_FN Status with_queue_of(uint64_t at, uint32_t tag, F f) {
    const Q& q = *reinterpret_cast<const Q*>(at);
    if (q.proto.provider != tag) return Status::BadQueue;
    return f(q);
}
template <class F>
GDA_FN Status with_queue_raw(const Ctx& c, int pe, F f) {
    const uint64_t at = c.queues + uint64_t(pe) * c.queue_bytes;
    switch (ProviderTag(c.provider)) {
        case ProviderTag::Mlx5:
#if !defined(GDA_NO_MLX5)
            return with_queue_of<mlx5::Queue>(at, c.provider, f);
#else
            return Status::NotCompiledIn;
#endif
        case ProviderTag::Native:
#if !defined(GDA_NO_NATIVE)
            return with_queue_of<native::Queue>(at, c.provider, f);
#else
            return Status::NotCompiledIn;
#endif
        case ProviderTag::Bnxt:
#if defined(GDA_HAS_BNXT)
            return with_queue_of<bnxt::Queue>(at, c.provider, f);
#else
            return Status::NotCompiledIn;
#endif
    }
    // An RDMA route in a context without a provider.
    return Status::BadProvider;
}

// After a post from a CPU thread: wakes the software NIC's engine if it naps (one atomic load
// when it is awake). Device code never calls into the host; the engine serves its doorbells.
GDA_FN void kick(const Ctx& c) {
#if !defined(GDA_DEVICE_PASS)
    if (c.kick_fn) reinterpret_cast<void (*)(uint64_t)>(c.kick_fn)(c.kick_arg);
#else
    (void)c;
#endif
}

// Calls f(queue) with PE `pe`'s queue as its provider's type: one switch over the providers
// compiled in (one kernel binary serves every NIC).
template <class F>
GDA_FN Status with_queue(const Ctx& c, int pe, F f) {
    const Status st = with_queue_raw(c, pe, f);
    kick(c);
    return st;
}

// Copies bytes [from, to) of a transfer (the part a group member does).
GDA_FN void copy(void* dst, const void* src, uint64_t bytes) {
#if defined(GDA_DEVICE_PASS)
    uint8_t* d = static_cast<uint8_t*>(dst);
    const uint8_t* s = static_cast<const uint8_t*>(src);
    if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | bytes) & 7) == 0) {
        for (uint64_t i = 0; i < bytes; i += 8) {
            *reinterpret_cast<uint64_t*>(d + i) = *reinterpret_cast<const uint64_t*>(s + i);
        }
    } else {
        for (uint64_t i = 0; i < bytes; ++i) d[i] = s[i];
    }
#else
    __builtin_memcpy(dst, src, bytes);
#endif
}

// A staging slot of this PE (registered memory for sources and results the caller's memory
// cannot be): locked by one thread at a time, found from a hash of the caller's id.
struct Slot {
    uint32_t index;
    uint8_t* bytes;
};
// Runs f(slot) holding a staging slot of this PE (registered memory for sources and results the
// caller's memory cannot be), found from a hash of the caller's id. The work happens inside the
// loop that takes the slot, and the slot is given back before the loop ends: a lane never waits
// for a slot held by a lane of its own warp that lockstep execution keeps from running.
template <class F>
GDA_FN_OUTLINE Status with_slot(const Ctx& c, F f) {
    if (c.staging_slots == 0) return Status::TooLarge;
    uint32_t* locks = reinterpret_cast<uint32_t*>(work_at(c, work::LOCKS));
    const uint64_t deadline = arch::now_ns() + c.timeout_ns;
    uint32_t spins = 0;
    for (uint32_t i = uint32_t(global_id() * 0x9e3779b9u);; ++i) {
        const uint32_t k = i % c.staging_slots;
        if (arch::cas_u32(&locks[k], 0, 1) == 0) {
            const Slot slot{k, work_at(c, work::STAGING + uint64_t(k) * c.staging_slot_bytes)};
            const Status st = f(slot);
            arch::store_u32_release(&locks[k], 0);
            return st;
        }
        if (!arch::wait_step(spins, deadline, [] { return arch::now_ns(); })) return Status::Timeout;
    }
}

template <class Q>
GDA_FN Sge sge(const Ctx& c, const void* a, uint64_t bytes) {
    return Sge{reinterpret_cast<uint64_t>(a), uint32_t(bytes), c.lkey};
}

// Which way a transfer goes: this PE's bytes to the target (put) or the target's here (get).
enum class Dir { Put, Get };

// One RDMA WRITE (put) or READ (get) of `part` bytes between `local` and `r`.
template <class Q>
GDA_FN SqStatus rdma_post(const Q& q, Dir d, Remote r, uint8_t* local, uint64_t part,
                          const Ctx& c) {
    const Sge s = sge<Q>(c, local, part);
    return d == Dir::Put ? sq::write(q, r, &s, 1, 0) : sq::read(q, r, &s, 1, 0);
}

// RDMA transfer of `bytes` between this PE's `local` and `r`; `wait`: return only when the
// source may be reused (put) or the data is there (get). Memory the NIC cannot reach in place
// (outside the registered segment) goes through a staging slot, a chunk at a time, each chunk
// complete before the slot is reused; a small put is inline.
template <class Q>
GDA_FN_OUTLINE Status rdma_move(const Ctx& c, const Q& q, Dir d, Remote r, void* local,
                                uint64_t bytes, bool wait) {
    using P = decltype(provider_of(q));
    uint8_t* mem = static_cast<uint8_t*>(local);
    if (bytes == 0) return Status::Ok;
    if (d == Dir::Put && bytes <= P::wq(q.sq).max_inline) {
        return from(sq::write_inline(q, r, mem, uint32_t(bytes), 0));
    }
    constexpr uint64_t MAX_MSG = uint64_t(1) << 30;
    if (registered(c, mem, bytes)) {
        for (uint64_t done = 0; done < bytes; done += MAX_MSG) {
            const uint64_t part = bytes - done < MAX_MSG ? bytes - done : MAX_MSG;
            const SqStatus st = rdma_post(q, d, Remote{r.addr + done, r.rkey}, mem + done, part, c);
            if (st != SqStatus::Ok) return from(st);
        }
        return wait ? from(sq::quiet(q)) : Status::Ok;
    }
    return with_slot(c, [&](const Slot& slot) {
        Status st = Status::Ok;
        for (uint64_t done = 0; done < bytes && st == Status::Ok; done += c.staging_slot_bytes) {
            const uint64_t rest = bytes - done;
            const uint64_t part = rest < c.staging_slot_bytes ? rest : c.staging_slot_bytes;
            if (d == Dir::Put) copy(slot.bytes, mem + done, part);
            st = from(rdma_post(q, d, Remote{r.addr + done, r.rkey}, slot.bytes, part, c));
            if (st == Status::Ok) st = from(sq::quiet(q));
            if (st == Status::Ok && d == Dir::Get) copy(mem + done, slot.bytes, part);
        }
        return st;
    });
}
}  // namespace detail

namespace detail {
// The route to `pe` for [dest, dest + bytes): a P2P pointer (`*mapped`) or an RDMA remote.
struct Target {
    Route route;
    uint8_t* mapped;
    Remote remote;
};
GDA_FN Status target(const Ctx& c, const void* dest, uint64_t bytes, int pe, Target* t) {
    const Status ok = check(c);
    if (ok != Status::Ok) return ok;
    const Peer* p = peer(c, pe);
    if (!p) return Status::BadPe;
    uint64_t off;
    if (!offset(c, dest, bytes, &off)) return Status::NotSymmetric;
    t->route = Route(p->route);
    t->mapped = reinterpret_cast<uint8_t*>(p->base + off);
    t->remote = Remote{p->base + off, p->rkey};
    return Status::Ok;
}
}  // namespace detail

// The address of `dest` on `pe` if this PE can load and store it (P2P); null otherwise.
GDA_FN void* ptr(const Ctx& c, const void* dest, int pe) {
    detail::Target t;
    if (detail::target(c, dest, 1, pe, &t) != Status::Ok || t.route != Route::P2p) return nullptr;
    return t.mapped;
}

// ---- RMA ----

namespace detail {
// A transfer between this PE's `local` and the symmetric `sym` on `pe`, by group `g`: over P2P
// the lanes split the copy (8-byte aligned parts); over RDMA rank 0 posts it.
template <class G>
GDA_FN Status move_g(G g, const Ctx& c, Dir d, void* sym, void* local, uint64_t bytes, int pe,
                     bool wait) {
    Target t;
    Status st = target(c, sym, bytes, pe, &t);
    if (st == Status::Ok && t.route == Route::P2p) {
        const uint64_t per = ((bytes + g.size() - 1) / g.size() + 7) & ~uint64_t(7);
        const uint64_t from = per * g.rank();
        if (from < bytes) {
            const uint64_t n = bytes - from < per ? bytes - from : per;
            uint8_t* mine = static_cast<uint8_t*>(local) + from;
            if (d == Dir::Put) {
                copy(t.mapped + from, mine, n);
            } else {
                copy(mine, t.mapped + from, n);
            }
        }
        g.sync();
        return st;
    }
    if (st == Status::Ok && g.rank() == 0) {
        st = with_queue(c, pe, [&](const auto& q) {
            return rdma_move(c, q, d, t.remote, local, bytes, wait);
        });
    }
    return Status(int32_t(g.broadcast(uint64_t(int64_t(st)))));
}
template <class G>
GDA_FN Status put_g(G g, const Ctx& c, void* dest, const void* src, uint64_t bytes, int pe,
                    bool wait) {
    // The source is only read (rdma_move writes `local` for gets alone).
    return move_g(g, c, Dir::Put, dest, const_cast<void*>(src), bytes, pe, wait);
}
template <class G>
GDA_FN Status get_g(G g, const Ctx& c, void* dest, const void* source, uint64_t bytes, int pe,
                    bool wait) {
    return move_g(g, c, Dir::Get, const_cast<void*>(source), dest, bytes, pe, wait);
}
}  // namespace detail

// Bytes to `dest` on `pe`; the source may be reused on return.
template <class G = Thread>
GDA_FN Status putmem(const Ctx& c, void* dest, const void* src, uint64_t bytes, int pe,
                     G g = G{}) {
    return detail::put_g(g, c, dest, src, bytes, pe, true);
}
// As putmem; completes at the next quiet (sources outside the heap: on return).
template <class G = Thread>
GDA_FN Status putmem_nbi(const Ctx& c, void* dest, const void* src, uint64_t bytes, int pe,
                         G g = G{}) {
    return detail::put_g(g, c, dest, src, bytes, pe, false);
}
// Bytes from `source` on `pe` into `dest`, there on return.
template <class G = Thread>
GDA_FN Status getmem(const Ctx& c, void* dest, const void* source, uint64_t bytes, int pe,
                     G g = G{}) {
    return detail::get_g(g, c, dest, source, bytes, pe, true);
}
// As getmem; the data is there after the next quiet (destinations outside the heap: on
// return).
template <class G = Thread>
GDA_FN Status getmem_nbi(const Ctx& c, void* dest, const void* source, uint64_t bytes, int pe,
                         G g = G{}) {
    return detail::get_g(g, c, dest, source, bytes, pe, false);
}
// Typed forms: `nelems` elements of T.
template <class T, class G = Thread>
GDA_FN Status put(const Ctx& c, T* dest, const T* src, uint64_t nelems, int pe, G g = G{}) {
    return detail::put_g(g, c, dest, src, nelems * sizeof(T), pe, true);
}
template <class T, class G = Thread>
GDA_FN Status put_nbi(const Ctx& c, T* dest, const T* src, uint64_t nelems, int pe, G g = G{}) {
    return detail::put_g(g, c, dest, src, nelems * sizeof(T), pe, false);
}
template <class T, class G = Thread>
GDA_FN Status get(const Ctx& c, T* dest, const T* src, uint64_t nelems, int pe, G g = G{}) {
    return detail::get_g(g, c, dest, src, nelems * sizeof(T), pe, true);
}
template <class T, class G = Thread>
GDA_FN Status get_nbi(const Ctx& c, T* dest, const T* src, uint64_t nelems, int pe, G g = G{}) {
    return detail::get_g(g, c, dest, src, nelems * sizeof(T), pe, false);
}

// One value to `dest` on `pe` (an inline WRITE of a register value over RDMA).
template <class T>
GDA_FN Status p(const Ctx& c, T* dest, T value, int pe) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "a scalar");
    detail::Target t;
    const Status st = detail::target(c, dest, sizeof(T), pe, &t);
    if (st != Status::Ok) return st;
    if (t.route == Route::P2p) {
        *reinterpret_cast<volatile T*>(t.mapped) = value;
        return st;
    }
    return detail::with_queue(c, pe, [&](const auto& q) {
        if constexpr (sizeof(T) == 8 || sizeof(T) == 4) {
            return from(sq::write_value(q, t.remote, value, 0));
        } else {
            return from(sq::write_inline(q, t.remote, &value, sizeof(T), 0));
        }
    });
}

// One value from `source` on `pe`.
template <class T>
GDA_FN Status g(const Ctx& c, const T* source, int pe, T* out) {
    detail::Target t;
    const Status st = detail::target(c, source, sizeof(T), pe, &t);
    if (st != Status::Ok) return st;
    if (t.route == Route::P2p) {
        *out = *reinterpret_cast<const volatile T*>(t.mapped);
        return st;
    }
    return getmem(c, out, source, sizeof(T), pe);
}

// Every lane of group `gr` writes its own value to its own `dest` on the same `pe`: over RDMA
// the group reserves once, each lane writes its WQE, and rank 0 rings one doorbell for all.
template <class T, class G>
GDA_FN Status p_lanes(G gr, const Ctx& c, T* dest, T value, int pe) {
    detail::Target t;
    Status st = detail::target(c, dest, sizeof(T), pe, &t);
    // Every lane must be able to post before the group posts as one.
    uint64_t failed = 0;
    gr.exclusive_sum(st == Status::Ok ? 0 : 1, &failed);
    if (failed) return st == Status::Ok ? Status::BadPe : st;
    if (t.route == Route::P2p) {
        *reinterpret_cast<volatile T*>(t.mapped) = value;
        gr.sync();
        return st;
    }
    return detail::with_queue(c, pe, [&](const auto& q) {
        return from(sq::write_value_group(q, gr, t.remote, value, 0));
    });
}

// ---- ordering ----

// Everything this PE posted (any thread, any route) is complete and visible.
template <class G = Thread>
GDA_FN_OUTLINE Status quiet(const Ctx& c, G g = G{}) {
    Status st = check(c);
    if (g.rank() == 0 && st == Status::Ok) {
        for (uint32_t pe = 0; pe < c.n_pes && st == Status::Ok; ++pe) {
            const Peer* p = detail::peer(c, int(pe));
            if (p && p->route == uint32_t(Route::Rdma)) {
                st = detail::with_queue(c, int(pe), [&](const auto& q) { return from(sq::quiet(q)); });
            }
        }
    }
    arch::fence_system();
    return Status(int32_t(g.broadcast(uint64_t(int64_t(st)))));
}

// Puts and AMOs to each PE before the fence are delivered before those after it. Over RDMA
// this quiets (stronger than required); over P2P it is a system-wide fence.
template <class G = Thread>
GDA_FN Status fence(const Ctx& c, G g = G{}) {
    return quiet(c, g);
}

// ---- atomics ----

namespace detail {

enum class Amo { Fetch, Set, Add, And, Or, Xor, Cas };

GDA_FN uint64_t apply(Amo op, uint64_t old, uint64_t v, uint64_t cmp, uint64_t mask) {
    switch (op) {
        case Amo::Fetch: return old;
        case Amo::Set: return v & mask;
        case Amo::Add: return (old + v) & mask;
        case Amo::And: return old & v;
        case Amo::Or: return (old | v) & mask;
        case Amo::Xor: return (old ^ v) & mask;
        case Amo::Cas: return old == cmp ? v & mask : old;
    }
    return old;
}

template <class T>
GDA_FN T p2p_amo(T* a, Amo op, T v, T cmp) {
    if constexpr (sizeof(T) == 8) {
        uint64_t* p = reinterpret_cast<uint64_t*>(a);
        const uint64_t x = uint64_t(v);
        switch (op) {
            case Amo::Fetch: return T(arch::load_u64_acquire(p));
            case Amo::Set: return T(arch::exchange_u64(p, x));
            case Amo::Add: return T(arch::fetch_add_u64(p, x));
            case Amo::And: return T(arch::fetch_and_u64(p, x));
            case Amo::Or: return T(arch::fetch_or_u64(p, x));
            case Amo::Xor: return T(arch::fetch_xor_u64(p, x));
            case Amo::Cas: return T(arch::cas_u64(p, uint64_t(cmp), x));
        }
    } else {
        uint32_t* p = reinterpret_cast<uint32_t*>(a);
        const uint32_t x = uint32_t(v);
        switch (op) {
            case Amo::Fetch: return T(arch::load_u32_acquire(p));
            case Amo::Set: return T(arch::exchange_u32(p, x));
            case Amo::Add: return T(arch::fetch_add_u32(p, x));
            case Amo::And: return T(arch::fetch_and_u32(p, x));
            case Amo::Or: return T(arch::fetch_or_u32(p, x));
            case Amo::Xor: return T(arch::fetch_xor_u32(p, x));
            case Amo::Cas: return T(arch::cas_u32(p, uint32_t(cmp), x));
        }
    }
    return T(0);
}

// One NIC atomic on `r` (`bytes` wide), its old value to `*old` when `fetch` (else to the sink,
// completing at the next quiet).
template <class Q>
GDA_FN Status nic_atomic(const Ctx& c, const Q& q, Remote r, const Atomic& a, uint32_t bytes,
                         bool fetch, uint64_t* old) {
    using P = decltype(provider_of(q));
    if (!fetch) {
        uint8_t* sink = work_at(c, work::SINK + 8 * (global_id() % 32));
        return from(sq::atomic(q, r, sge<Q>(c, sink, 8), a, bytes, 0));
    }
    return with_slot(c, [&](const Slot& slot) {
        Status st = from(sq::atomic(q, r, sge<Q>(c, slot.bytes, 8), a, bytes, 0));
        if (st == Status::Ok) st = from(sq::quiet(q));
        if (st == Status::Ok) *old = sq::atomic_result<P>(slot.bytes, bytes);
        return st;
    });
}

// An OpenSHMEM atomic over RDMA: the NIC's own operation where it has one, else a
// compare-swap loop on the aligned 8-byte word.
template <class Q>
GDA_FN_OUTLINE Status rdma_amo(const Ctx& c, const Q& q, Remote r, uint32_t bytes, Amo op, uint64_t v,
                       uint64_t cmp, bool fetch, uint64_t* old) {
    using P = decltype(provider_of(q));
    const uint64_t all = bytes == 8 ? ~uint64_t(0) : 0xffffffffu;
    if (bytes == 8 && op == Amo::Add) return nic_atomic(c, q, r, fetch_add(v), 8, fetch, old);
    if (bytes == 8 && op == Amo::Fetch) return nic_atomic(c, q, r, fetch_add(0), 8, true, old);
    if (bytes == 8 && op == Amo::Cas) return nic_atomic(c, q, r, compare_swap(cmp, v), 8, true, old);
    if (P::HAS_MASKED_ATOMICS) {
        switch (op) {
            case Amo::Add: return nic_atomic(c, q, r, masked_fetch_add(v, 0), bytes, fetch, old);
            case Amo::Fetch: return nic_atomic(c, q, r, masked_fetch_add(0, 0), bytes, true, old);
            case Amo::Set:
                return nic_atomic(c, q, r, masked_compare_swap(0, 0, v, all), bytes, fetch, old);
            case Amo::And:
                return nic_atomic(c, q, r, masked_compare_swap(0, 0, 0, ~v & all), bytes, fetch, old);
            case Amo::Or:
                return nic_atomic(c, q, r, masked_compare_swap(0, 0, all, v & all), bytes, fetch, old);
            case Amo::Cas:
                return nic_atomic(c, q, r, masked_compare_swap(cmp, all, v, all), bytes, true, old);
            case Amo::Xor: break;
        }
    }
    // The aligned 8-byte word that holds the operand, updated by compare-swap.
    const uint64_t word = r.addr & ~uint64_t(7);
    const uint32_t shift = uint32_t(r.addr - word) * 8;
    const uint64_t lane = all << shift;
    const Remote w{word, r.rkey};
    uint64_t cur = 0;
    Status st = nic_atomic(c, q, w, fetch_add(0), 8, true, &cur);
    const uint64_t deadline = arch::now_ns() + c.timeout_ns;
    while (st == Status::Ok) {
        const uint64_t mine = (cur & lane) >> shift;
        const uint64_t next = apply(op, mine, v & all, cmp & all, all);
        if (next == mine && op != Amo::Set) {
            *old = mine;
            return st;
        }
        const uint64_t desired = (cur & ~lane) | (next << shift);
        uint64_t seen = 0;
        st = nic_atomic(c, q, w, compare_swap(cur, desired), 8, true, &seen);
        if (st == Status::Ok && seen == cur) {
            *old = mine;
            return st;
        }
        cur = seen;
        if (arch::now_ns() > deadline) return Status::Timeout;
    }
    return st;
}

template <class T>
GDA_FN Status amo(const Ctx& c, T* dest, Amo op, T v, T cmp, int pe, bool fetch, T* out) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32- and 64-bit atomics");
    Target t;
    Status st = target(c, dest, sizeof(T), pe, &t);
    if (st != Status::Ok) return st;
    if (t.route == Route::P2p) {
        const T old = p2p_amo(reinterpret_cast<T*>(t.mapped), op, v, cmp);
        if (out) *out = old;
        return st;
    }
    uint64_t old = 0;
    const uint64_t mask = sizeof(T) == 8 ? ~uint64_t(0) : 0xffffffffu;
    st = with_queue(c, pe, [&](const auto& q) {
        return rdma_amo(c, q, t.remote, sizeof(T), op, uint64_t(v) & mask, uint64_t(cmp) & mask,
                        fetch, &old);
    });
    if (out) *out = T(old);
    return st;
}
}  // namespace detail

// T: int32_t, uint32_t, int64_t, uint64_t (and other 4- and 8-byte integers).
template <class T>
GDA_FN Status atomic_fetch(const Ctx& c, const T* src, int pe, T* out) {
    return detail::amo(c, const_cast<T*>(src), detail::Amo::Fetch, T(0), T(0), pe, true, out);
}
template <class T>
GDA_FN Status atomic_set(const Ctx& c, T* dest, T v, int pe) {
    return detail::amo(c, dest, detail::Amo::Set, v, T(0), pe, false, static_cast<T*>(nullptr));
}
template <class T>
GDA_FN Status atomic_swap(const Ctx& c, T* dest, T v, int pe, T* out) {
    return detail::amo(c, dest, detail::Amo::Set, v, T(0), pe, true, out);
}
template <class T>
GDA_FN Status atomic_compare_swap(const Ctx& c, T* dest, T cond, T v, int pe, T* out) {
    return detail::amo(c, dest, detail::Amo::Cas, v, cond, pe, true, out);
}
template <class T>
GDA_FN Status atomic_fetch_add(const Ctx& c, T* dest, T v, int pe, T* out) {
    return detail::amo(c, dest, detail::Amo::Add, v, T(0), pe, true, out);
}
template <class T>
GDA_FN Status atomic_add(const Ctx& c, T* dest, T v, int pe) {
    return detail::amo(c, dest, detail::Amo::Add, v, T(0), pe, false, static_cast<T*>(nullptr));
}
template <class T>
GDA_FN Status atomic_fetch_inc(const Ctx& c, T* dest, int pe, T* out) {
    return atomic_fetch_add(c, dest, T(1), pe, out);
}
template <class T>
GDA_FN Status atomic_inc(const Ctx& c, T* dest, int pe) {
    return atomic_add(c, dest, T(1), pe);
}
#define GDA_SHMEM_BITWISE(name, op)                                                    \
    template <class T>                                                                 \
    GDA_FN Status atomic_fetch_##name(const Ctx& c, T* dest, T v, int pe, T* out) {    \
        return detail::amo(c, dest, detail::Amo::op, v, T(0), pe, true, out);          \
    }                                                                                  \
    template <class T>                                                                 \
    GDA_FN Status atomic_##name(const Ctx& c, T* dest, T v, int pe) {                  \
        return detail::amo(c, dest, detail::Amo::op, v, T(0), pe, false,               \
                           static_cast<T*>(nullptr));                                  \
    }
GDA_SHMEM_BITWISE(and, And)
GDA_SHMEM_BITWISE(or, Or)
GDA_SHMEM_BITWISE(xor, Xor)
#undef GDA_SHMEM_BITWISE

// ---- signals and waits ----

// `bytes` to `dest` on `pe`, then the signal word `sig` there updated (set or add) — the
// signal is delivered after the data (same QP, executed in order; P2P: a release fence).
template <class G = Thread>
GDA_FN Status putmem_signal(const Ctx& c, void* dest, const void* src, uint64_t bytes,
                            uint64_t* sig, uint64_t value, SignalOp op, int pe, G g = G{},
                            bool wait = true) {
    Status st = detail::put_g(g, c, dest, src, bytes, pe, wait);
    if (g.rank() == 0 && st == Status::Ok) {
        detail::Target t;
        st = detail::target(c, sig, 8, pe, &t);
        if (st == Status::Ok && t.route == Route::P2p) {
            arch::fence_system();
            if (op == SignalOp::Set) {
                arch::store_u64_release(reinterpret_cast<uint64_t*>(t.mapped), value);
            } else {
                arch::fetch_add_u64(reinterpret_cast<uint64_t*>(t.mapped), value);
            }
        } else if (st == Status::Ok) {
            st = detail::with_queue(c, pe, [&](const auto& q) {
                if (op == SignalOp::Set) return from(sq::write_value(q, t.remote, value, 0));
                uint64_t unused;
                return detail::nic_atomic(c, q, t.remote, fetch_add(value), 8, false, &unused);
            });
        }
    }
    return Status(int32_t(g.broadcast(uint64_t(int64_t(st)))));
}
template <class G = Thread>
GDA_FN Status putmem_signal_nbi(const Ctx& c, void* dest, const void* src, uint64_t bytes,
                                uint64_t* sig, uint64_t value, SignalOp op, int pe, G g = G{}) {
    return putmem_signal(c, dest, src, bytes, sig, value, op, pe, g, false);
}
// Typed forms: `nelems` elements of T.
template <class T, class G = Thread>
GDA_FN Status put_signal(const Ctx& c, T* dest, const T* src, uint64_t nelems, uint64_t* sig,
                         uint64_t value, SignalOp op, int pe, G g = G{}) {
    return putmem_signal(c, dest, src, nelems * sizeof(T), sig, value, op, pe, g, true);
}
template <class T, class G = Thread>
GDA_FN Status put_signal_nbi(const Ctx& c, T* dest, const T* src, uint64_t nelems,
                             uint64_t* sig, uint64_t value, SignalOp op, int pe, G g = G{}) {
    return putmem_signal(c, dest, src, nelems * sizeof(T), sig, value, op, pe, g, false);
}

namespace detail {
template <class T>
GDA_FN bool holds(T v, Cmp cmp, T x) {
    switch (cmp) {
        case Cmp::Eq: return v == x;
        case Cmp::Ne: return v != x;
        case Cmp::Gt: return v > x;
        case Cmp::Ge: return v >= x;
        case Cmp::Lt: return v < x;
        case Cmp::Le: return v <= x;
    }
    return false;
}
template <class T>
GDA_FN T load(const T* a) {
    if constexpr (sizeof(T) == 8) {
        return T(arch::load_u64_acquire(reinterpret_cast<const uint64_t*>(a)));
    } else {
        return T(arch::load_u32_acquire(reinterpret_cast<const uint32_t*>(a)));
    }
}
}  // namespace detail

// Waits (bounded by the context's timeout) until this PE's `*ivar cmp value`.
template <class T>
GDA_FN_OUTLINE Status wait_until(const Ctx& c, const T* ivar, Cmp cmp, T value) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32- and 64-bit waits");
    const Status ok = check(c);
    if (ok != Status::Ok) return ok;
    const uint64_t deadline = arch::now_ns() + c.timeout_ns;
    uint32_t spins = 0;
    while (!detail::holds(detail::load(ivar), cmp, value)) {
        if (!arch::wait_step(spins, deadline, [] { return arch::now_ns(); })) return Status::Timeout;
    }
    return Status::Ok;
}
// Whether `*ivar cmp value` holds now.
template <class T>
GDA_FN bool test(const T* ivar, Cmp cmp, T value) {
    return detail::holds(detail::load(ivar), cmp, value);
}
// Waits until the signal word satisfies the comparison; its value in `*out`.
GDA_FN Status signal_wait_until(const Ctx& c, const uint64_t* sig, Cmp cmp, uint64_t value,
                                uint64_t* out) {
    const Status st = wait_until(c, sig, cmp, value);
    *out = detail::load(sig);
    return st;
}
GDA_FN uint64_t signal_fetch(const uint64_t* sig) { return detail::load(sig); }

// ---- collectives ----

// Every member of `team` has arrived (no quiet: sync, not barrier). Rank 0 of the group adds
// one to each other member's sync word of the team's slot and waits until its own has counted
// every member for this round; the group meets after.
template <class G = Thread>
GDA_FN_OUTLINE Status sync(const Ctx& c, Team team, G g = G{}) {
    Status st = check(c);
    if (g.rank() == 0 && st == Status::Ok) {
        if (team.slot >= work::TEAM_SLOTS || team.size == 0) {
            st = Status::BadPe;
        } else {
            uint64_t* epoch = reinterpret_cast<uint64_t*>(detail::work_at(c, work::EPOCH)) + team.slot;
            uint64_t* mine = reinterpret_cast<uint64_t*>(detail::work_at(c, work::SYNC)) + team.slot;
            const uint64_t round = *epoch + 1;
            *epoch = round;
            for (uint32_t i = 0; i < team.size && st == Status::Ok; ++i) {
                const int pe = int(team.start + i * team.stride);
                if (uint32_t(pe) == c.my_pe) continue;
                st = atomic_add(c, mine, uint64_t(1), pe);
            }
            if (st == Status::Ok) st = wait_until(c, mine, Cmp::Ge, round * (team.size - 1));
        }
    }
    return Status(int32_t(g.broadcast(uint64_t(int64_t(st)))));
}
template <class G = Thread>
GDA_FN Status sync_all(const Ctx& c, G g = G{}) {
    return sync(c, team_world(c), g);
}
// quiet, then sync_all.
template <class G = Thread>
GDA_FN Status barrier_all(const Ctx& c, G g = G{}) {
    const Status st = quiet(c, g);
    return st != Status::Ok ? st : sync_all(c, g);
}

}  // namespace shmem
}  // namespace gda
