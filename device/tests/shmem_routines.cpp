// Every routine of the SHMEM device API (<gda/shmem.hpp>) at thread, warp and block
// granularity, run by CPU threads standing in for GPU lanes (GDA_LAUNCH: 2 blocks of 8
// threads, warps of 4) on every PE of a job started by gdarun, over whatever routes the job has
// (P2P, RDMA on any provider). Built with `gdacc` (tests/shmem_device.rs), which runs it on 2
// and 4 PEs over P2P and RDMA. Each PE prints "device_shmem: PE i: N checks ok" and exits 0,
// or names the first failed check and exits 1.
//
// Every kernel targets the next PE (me + 1) and checks what the previous PE sent it, after a
// host barrier (shmem_barrier_all) between the kernel and the check.
#include <gda/shmem.hpp>
#include <shmemx.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace gda::shmem;

namespace {

constexpr uint32_t BLOCKS = 2, THREADS = 8, LANES = BLOCKS * THREADS;
constexpr uint32_t WARPS = LANES / GDA_HOST_WARP;
int failures = 0, checks = 0;
int me = 0, npes = 0;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        ++checks;                                                          \
        if (!(cond)) {                                                     \
            if (failures++ < 10) {                                         \
                std::fprintf(stderr, "device_shmem: PE %d: ", me);         \
                std::fprintf(stderr, __VA_ARGS__);                         \
                std::fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);    \
            }                                                              \
        }                                                                  \
    } while (0)

// Kernels record the first failing status here (host memory; CPU threads).
int32_t first_bad = 0;
void record(Status s) {
    int32_t zero = 0;
    if (s != Status::Ok) __atomic_compare_exchange_n(&first_bad, &zero, int32_t(s), false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
void expect_ok(const char* what) {
    CHECK(first_bad == 0, "%s: status %d", what, first_bad);
    first_bad = 0;
}

uint64_t pattern(uint32_t pe, uint64_t i, uint32_t round) {
    return (uint64_t(pe) << 48) ^ (uint64_t(round) << 40) ^ (i * 0x9e3779b97f4a7c15ull >> 24);
}

// ---- kernels ----

// Bulk data, at three granularities: 64 bytes per thread, 256 per warp, 1 KiB per block.
enum class Gran { Thread, Warp, Block };

GDA_KERNEL void k_put(const Ctx* c, uint64_t* dst, const uint64_t* src, Gran g, bool nbi,
                      int pe) {
    const uint64_t t = gda::global_id();
    Status s;
    if (g == Gran::Thread) {
        s = nbi ? putmem_nbi(*c, dst + t * 8, src + t * 8, 64, pe) : putmem(*c, dst + t * 8, src + t * 8, 64, pe);
    } else if (g == Gran::Warp) {
        const uint64_t w = t / gda::warp_size();
        s = nbi ? putmem_nbi(*c, dst + w * 32, src + w * 32, 256, pe, gda::this_warp())
                : putmem(*c, dst + w * 32, src + w * 32, 256, pe, gda::this_warp());
    } else {
        const uint64_t b = gda::block_idx();
        s = nbi ? putmem_nbi(*c, dst + b * 128, src + b * 128, 1024, pe, gda::this_block())
                : putmem(*c, dst + b * 128, src + b * 128, 1024, pe, gda::this_block());
    }
    if (nbi && s == Status::Ok) s = quiet(*c);
    record(s);
}

GDA_KERNEL void k_get(const Ctx* c, uint64_t* dst, const uint64_t* src, Gran g, bool nbi,
                      int pe) {
    const uint64_t t = gda::global_id();
    Status s;
    if (g == Gran::Thread) {
        s = nbi ? getmem_nbi(*c, dst + t * 8, src + t * 8, 64, pe) : getmem(*c, dst + t * 8, src + t * 8, 64, pe);
    } else if (g == Gran::Warp) {
        const uint64_t w = t / gda::warp_size();
        s = nbi ? getmem_nbi(*c, dst + w * 32, src + w * 32, 256, pe, gda::this_warp())
                : getmem(*c, dst + w * 32, src + w * 32, 256, pe, gda::this_warp());
    } else {
        const uint64_t b = gda::block_idx();
        s = nbi ? getmem_nbi(*c, dst + b * 128, src + b * 128, 1024, pe, gda::this_block())
                : getmem(*c, dst + b * 128, src + b * 128, 1024, pe, gda::this_block());
    }
    if (nbi && s == Status::Ok) s = quiet(*c);
    record(s);
}

GDA_KERNEL void k_p(const Ctx* c, uint64_t* d64, uint32_t* d32, uint8_t* d8, int pe) {
    const uint64_t t = gda::global_id();
    record(p(*c, d64 + t, uint64_t(0xabc0000 + t + me), pe));
    record(p(*c, d32 + t, uint32_t(0x5000 + t), pe));
    record(p(*c, d8 + t, uint8_t(t + 1), pe));
}

GDA_KERNEL void k_g(const Ctx* c, const uint64_t* s64, const uint32_t* s32, uint64_t* out64,
                    uint32_t* out32, int pe) {
    const uint64_t t = gda::global_id();
    record(g(*c, s64 + t, pe, out64 + t));
    record(g(*c, s32 + t, pe, out32 + t));
}

GDA_KERNEL void k_p_lanes(const Ctx* c, uint64_t* dst, int pe) {
    const uint64_t t = gda::global_id();
    record(p_lanes(gda::this_warp(), *c, dst + t, uint64_t(0x1a000 + t), pe));
    record(quiet(*c));
}

GDA_KERNEL void k_atomics(const Ctx* c, uint64_t* w, int pe) {
    const uint64_t t = gda::global_id();
    uint32_t* w32 = reinterpret_cast<uint32_t*>(w + 8);
    uint64_t old64 = 0;
    uint32_t old32 = 0;
    int32_t oldi = 0;
    record(atomic_fetch_add(*c, w + 0, uint64_t(3), pe, &old64));   // w[0] += 3 per thread
    record(atomic_add(*c, w + 1, uint64_t(1), pe));                  // w[1] += 1
    record(atomic_inc(*c, w32 + 0, pe));                             // w32[0] += 1
    record(atomic_fetch_inc(*c, w32 + 1, pe, &old32));               // w32[1] += 1
    record(atomic_fetch_or(*c, w + 2, uint64_t(1) << t, pe, &old64));  // bit per thread
    record(atomic_or(*c, w32 + 2, 1u << t, pe));
    record(atomic_fetch_and(*c, w + 3, ~(uint64_t(1) << t), pe, &old64));  // clear bit t
    record(atomic_and(*c, w32 + 3, ~(1u << t), pe));
    record(atomic_fetch_xor(*c, w + 4, uint64_t(1) << (t + 16), pe, &old64));
    record(atomic_xor(*c, w32 + 4, 1u << (t + 8), pe));
    // One thread wins each compare-swap (w[5] 0 -> id + 1; w32[5] likewise).
    record(atomic_compare_swap(*c, w + 5, uint64_t(0), t + 1, pe, &old64));
    record(atomic_compare_swap(*c, reinterpret_cast<int32_t*>(w32 + 5), 0, int32_t(t + 1), pe,
                               &oldi));
    record(quiet(*c));
}

GDA_KERNEL void k_swap(const Ctx* c, uint64_t* w, int pe, uint64_t* seen) {
    const uint64_t t = gda::global_id();
    uint32_t* w32 = reinterpret_cast<uint32_t*>(w + 8);
    // A chain of swaps: every value swapped in comes out exactly once (plus the initial one).
    record(atomic_swap(*c, w + 6, t + 100, pe, seen + t));
    uint32_t o = 0;
    record(atomic_swap(*c, w32 + 6, uint32_t(t + 200), pe, &o));
    seen[LANES + t] = o;
    record(quiet(*c));
}

GDA_KERNEL void k_set_fetch(const Ctx* c, uint64_t* w, int pe, uint64_t* out) {
    const uint64_t t = gda::global_id();
    if (t == 0) {
        record(atomic_set(*c, w + 7, uint64_t(0x77), pe));
        record(atomic_set(*c, reinterpret_cast<int32_t*>(w + 8) + 7, int32_t(-5), pe));
        record(quiet(*c));
        record(atomic_fetch(*c, w + 7, pe, out));
        int32_t v = 0;
        record(atomic_fetch(*c, reinterpret_cast<const int32_t*>(w + 8) + 7, pe, &v));
        out[1] = uint64_t(int64_t(v));
    }
}

// put_signal: each thread/warp/block sends data then adds 1 (or sets) the receiver's signal.
GDA_KERNEL void k_put_signal(const Ctx* c, uint64_t* dst, const uint64_t* src, uint64_t* sig,
                             Gran g, bool nbi, int pe) {
    const uint64_t t = gda::global_id();
    Status s;
    if (g == Gran::Thread) {
        s = nbi ? putmem_signal_nbi(*c, dst + t * 8, src + t * 8, 64, sig, 1, SignalOp::Add, pe)
                : putmem_signal(*c, dst + t * 8, src + t * 8, 64, sig, 1, SignalOp::Add, pe);
    } else if (g == Gran::Warp) {
        const uint64_t w = t / gda::warp_size();
        s = nbi ? putmem_signal_nbi(*c, dst + w * 32, src + w * 32, 256, sig, 1, SignalOp::Add, pe,
                                 gda::this_warp())
                : putmem_signal(*c, dst + w * 32, src + w * 32, 256, sig, 1, SignalOp::Add, pe,
                             gda::this_warp());
    } else {
        const uint64_t b = gda::block_idx();
        s = putmem_signal(*c, dst + b * 128, src + b * 128, 1024, sig + 1, 0x5e7 + b, SignalOp::Set,
                       pe, gda::this_block());
    }
    record(s);
}

// The receiver's side: wait for `expect` signals, then the data must be there.
GDA_KERNEL void k_wait_signal(const Ctx* c, uint64_t* sig, uint64_t expect, uint64_t* got) {
    if (gda::global_id() == 0) {
        record(signal_wait_until(*c, sig, Cmp::Ge, expect, got));
    }
}

// fence: data, fence, flag — the receiver that sees the flag sees the data.
GDA_KERNEL void k_fence(const Ctx* c, uint64_t* data, uint64_t* flag, int pe) {
    if (gda::global_id() == 0) {
        for (uint64_t i = 0; i < 16; ++i) record(p(*c, data + i, 0xfe00 + i, pe));
        record(fence(*c));
        record(p(*c, flag, uint64_t(1), pe));
        record(quiet(*c));
    }
}
GDA_KERNEL void k_wait_flag(const Ctx* c, uint64_t* flag, uint64_t* data, int* ok) {
    if (gda::global_id() == 0) {
        record(wait_until(*c, flag, Cmp::Eq, uint64_t(1)));
        *ok = test(flag, Cmp::Ne, uint64_t(0)) ? 1 : 0;
        for (uint64_t i = 0; i < 16; ++i) *ok &= (data[i] == 0xfe00 + i);
    }
}

// Device collectives, one group per PE: every PE stamps its number into slot `me` of every
// PE's array, syncs, and then every slot must be stamped.
GDA_KERNEL void k_sync(const Ctx* c, uint64_t* slots, uint32_t round, Gran g, int kind) {
    const Team world = team_world(*c);
    auto stamp = [&] {
        for (int pe = 0; pe < npes; ++pe) record(p(*c, slots + me, uint64_t(round) << 32 | uint64_t(me + 1), pe));
    };
    Status s;
    if (g == Gran::Thread) {
        if (gda::global_id() != 0) return;
        stamp();
        s = kind == 0 ? barrier_all(*c) : kind == 1 ? (quiet(*c) == Status::Ok ? sync_all(*c) : Status::Timeout)
                                                    : (quiet(*c) == Status::Ok ? sync(*c, world) : Status::Timeout);
    } else if (g == Gran::Warp) {
        if (gda::global_id() >= gda::warp_size()) return;
        if (gda::lane() == 0) stamp();
        s = kind == 0 ? barrier_all(*c, gda::this_warp())
                      : (quiet(*c, gda::this_warp()) == Status::Ok ? sync(*c, world, gda::this_warp())
                                                                  : Status::Timeout);
    } else {
        if (gda::block_idx() != 0) return;
        if (gda::thread_idx() == 0) stamp();
        s = kind == 0 ? barrier_all(*c, gda::this_block())
                      : (quiet(*c, gda::this_block()) == Status::Ok ? sync_all(*c, gda::this_block())
                                                                   : Status::Timeout);
    }
    record(s);
    // After the sync every PE's stamp for this round is here.
    for (int pe = 0; pe < npes; ++pe) {
        if (slots[pe] != (uint64_t(round) << 32 | uint64_t(pe + 1))) record(Status::Window);
    }
}

}  // namespace

int main() {
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    const Ctx* c = static_cast<const Ctx*>(shmemx_device_context());
    CHECK(c != nullptr, "shmemx_device_context returned NULL");
    if (!c) return 1;
    CHECK(check(*c) == Status::Ok, "context refused: %d", int(check(*c)));
    {
        // A context of another ABI version or size is refused before anything uses it.
        Ctx other = *c;
        other.abi = ABI_VERSION + 1;
        CHECK(check(other) == Status::BadContext, "a context of ABI %u accepted", other.abi);
        other = *c;
        other.size = c->size - 8;
        CHECK(check(other) == Status::BadContextSize, "a context of %u bytes accepted", other.size);
        // And every routine refuses it too, with the same status, before touching anything.
        static long word;
        CHECK(p(other, &word, 1L, me) == Status::BadContextSize, "p through a bad context");
        CHECK(putmem(other, &word, &word, sizeof word, me) == Status::BadContextSize,
              "putmem through a bad context");
        CHECK(quiet(other) == Status::BadContextSize, "quiet through a bad context");
        CHECK(sync_all(other) == Status::BadContextSize, "sync_all through a bad context");
        CHECK(wait_until(other, &word, Cmp::Eq, 0L) == Status::BadContextSize,
              "wait_until through a bad context");
        other = *c;
        other.queue_bytes = 8;
        const Status stride = c->provider != 0 ? Status::BadQueueStride : Status::Ok;
        CHECK(check(other) == stride, "queue stride 8: %d", int(check(other)));
    }
    CHECK(c->my_pe == uint32_t(me) && c->n_pes == uint32_t(npes), "context names PE %u of %u",
          c->my_pe, c->n_pes);
    // Where the context lives, when the test says what to expect (the `hip` feature's runs).
    if (const char* m = std::getenv("GDA_TEST_CONTEXT_MEMORY")) {
        CHECK(c->memory == uint32_t(std::atoi(m)), "context memory %u, expected %s", c->memory, m);
    }
    const int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    // The routes are the ones the job asked for: RDMA on the named provider, or P2P.
    const char* transport = std::getenv("GDA_SHMEM_TRANSPORT");
    const char* provider = std::getenv("GDA_SHMEM_PROVIDER");
    const bool rdma = transport && std::strcmp(transport, "rdma") == 0;
    const Peer* peers = reinterpret_cast<const Peer*>(c->peers);
    CHECK(peers[right].route == uint32_t(rdma ? Route::Rdma : Route::P2p), "route to PE %d: %u",
          right, peers[right].route);
    if (rdma && provider) {
        const uint32_t tag = std::strcmp(provider, "mlx5") == 0   ? 2
                             : std::strcmp(provider, "bnxt") == 0 ? 3
                                                                  : 1;
        CHECK(c->provider == tag, "context provider %u, asked for %s", c->provider, provider);
    }
    const size_t N = LANES * 8 * 4;  // u64s per buffer
    auto* src = static_cast<uint64_t*>(shmem_malloc(N * 8));
    auto* dst = static_cast<uint64_t*>(shmem_malloc(N * 8));
    auto* sig = static_cast<uint64_t*>(shmem_calloc(8, 8));
    auto* w = static_cast<uint64_t*>(shmem_calloc(16, 8));
    auto* slots = static_cast<uint64_t*>(shmem_calloc(64, 8));
    std::vector<uint64_t> local(N), seen(2 * LANES);

    // ---- put / put_nbi / get / get_nbi at every granularity ----
    uint32_t round = 0;
    const char* gname[] = {"thread", "warp", "block"};
    for (Gran g : {Gran::Thread, Gran::Warp, Gran::Block}) {
        for (bool nbi : {false, true}) {
            ++round;
            shmem_barrier_all();  // nobody still reads the previous round's data
            for (size_t i = 0; i < N; ++i) src[i] = pattern(me, i, round);
            std::memset(dst, 0, N * 8);
            shmem_barrier_all();
            GDA_LAUNCH(k_put, BLOCKS, THREADS, c, dst, src, g, nbi, right);
            expect_ok(nbi ? "put_nbi" : "put");
            shmem_barrier_all();
            const size_t span = g == Gran::Thread ? LANES * 8 : g == Gran::Warp ? WARPS * 32 : BLOCKS * 128;
            for (size_t i = 0; i < span; ++i) {
                CHECK(dst[i] == pattern(left, i, round), "%s %s: word %zu", nbi ? "put_nbi" : "put",
                      gname[int(g)], i);
            }
            // get from the right neighbour: into the heap (the NIC writes it in place) and into
            // private memory (staged).
            for (uint64_t* into : {dst, local.data()}) {
                std::memset(into, 0, N * 8);
                shmem_barrier_all();
                GDA_LAUNCH(k_get, BLOCKS, THREADS, c, into, src, g, nbi, right);
                expect_ok(nbi ? "get_nbi" : "get");
                for (size_t i = 0; i < span; ++i) {
                    CHECK(into[i] == pattern(right, i, round), "%s %s into %s: word %zu",
                          nbi ? "get_nbi" : "get", gname[int(g)], into == dst ? "heap" : "private", i);
                }
            }
        }
    }

    // ---- a put from private memory larger than a staging slot, and a typed put ----
    {
        ++round;
        shmem_barrier_all();
        std::vector<uint64_t> big(N);
        for (size_t i = 0; i < N; ++i) big[i] = pattern(me, i, round);
        std::memset(dst, 0, N * 8);
        shmem_barrier_all();
        record(put(*c, dst, big.data(), uint64_t(N), right));  // typed: N u64s
        expect_ok("put<uint64_t> staged");
        shmem_barrier_all();
        bool ok = true;
        for (size_t i = 0; i < N; ++i) ok &= dst[i] == pattern(left, i, round);
        CHECK(ok, "staged typed put of %zu bytes", N * 8);
    }

    // ---- p / g ----
    shmem_barrier_all();
    std::memset(dst, 0, N * 8);
    shmem_barrier_all();
    auto* d32 = reinterpret_cast<uint32_t*>(dst + 64);
    auto* d8 = reinterpret_cast<uint8_t*>(dst + 128);
    GDA_LAUNCH(k_p, BLOCKS, THREADS, c, dst, d32, d8, right);
    record(quiet(*c));
    expect_ok("p");
    shmem_barrier_all();
    for (uint64_t t = 0; t < LANES; ++t) {
        CHECK(dst[t] == 0xabc0000 + t + uint64_t(left), "p<u64> %llu", (unsigned long long)t);
        CHECK(d32[t] == 0x5000 + t, "p<u32> %llu", (unsigned long long)t);
        CHECK(d8[t] == uint8_t(t + 1), "p<u8> %llu", (unsigned long long)t);
    }
    {
        std::vector<uint64_t> o64(LANES);
        std::vector<uint32_t> o32(LANES);
        GDA_LAUNCH(k_g, BLOCKS, THREADS, c, dst, d32, o64.data(), o32.data(), right);
        expect_ok("g");
        for (uint64_t t = 0; t < LANES; ++t) {
            CHECK(o64[t] == 0xabc0000 + t + uint64_t(me), "g<u64> %llu", (unsigned long long)t);
            CHECK(o32[t] == 0x5000 + t, "g<u32> %llu", (unsigned long long)t);
        }
    }

    // ---- p_lanes: a warp posts as one ----
    shmem_barrier_all();  // the left PE's g of our data is done
    std::memset(dst, 0, N * 8);
    shmem_barrier_all();
    GDA_LAUNCH(k_p_lanes, BLOCKS, THREADS, c, dst, right);
    expect_ok("p_lanes");
    shmem_barrier_all();
    for (uint64_t t = 0; t < LANES; ++t) CHECK(dst[t] == 0x1a000 + t, "p_lanes %llu", (unsigned long long)t);

    // ---- atomics ----
    shmem_barrier_all();
    std::memset(w, 0, 16 * 8);
    w[3] = ~uint64_t(0);
    reinterpret_cast<uint32_t*>(w + 8)[3] = ~0u;
    shmem_barrier_all();
    GDA_LAUNCH(k_atomics, BLOCKS, THREADS, c, w, right);
    expect_ok("atomics");
    shmem_barrier_all();
    {
        const uint32_t* w32 = reinterpret_cast<const uint32_t*>(w + 8);
        const uint64_t bits = (uint64_t(1) << LANES) - 1;
        CHECK(w[0] == 3 * LANES, "fetch_add<u64>: %llu", (unsigned long long)w[0]);
        CHECK(w[1] == LANES, "add<u64>: %llu", (unsigned long long)w[1]);
        CHECK(w32[0] == LANES, "inc<u32>: %u", w32[0]);
        CHECK(w32[1] == LANES, "fetch_inc<u32>: %u", w32[1]);
        CHECK(w[2] == bits, "fetch_or<u64>: %llx", (unsigned long long)w[2]);
        CHECK(w32[2] == uint32_t(bits), "or<u32>: %x", w32[2]);
        CHECK(w[3] == ~bits, "fetch_and<u64>: %llx", (unsigned long long)w[3]);
        CHECK(w32[3] == ~uint32_t(bits), "and<u32>: %x", w32[3]);
        CHECK(w[4] == bits << 16, "fetch_xor<u64>: %llx", (unsigned long long)w[4]);
        CHECK(w32[4] == uint32_t(bits) << 8, "xor<u32>: %x", w32[4]);
        CHECK(w[5] >= 1 && w[5] <= LANES, "compare_swap<u64> winner %llu", (unsigned long long)w[5]);
        CHECK(w32[5] >= 1 && w32[5] <= LANES, "compare_swap<i32> winner %u", w32[5]);
    }
    shmem_barrier_all();
    std::memset(w, 0, 16 * 8);
    shmem_barrier_all();
    GDA_LAUNCH(k_swap, BLOCKS, THREADS, c, w, right, seen.data());
    expect_ok("swap");
    shmem_barrier_all();
    {
        // Every value swapped in was seen once by a later swap or is the final value.
        const uint32_t* w32 = reinterpret_cast<const uint32_t*>(w + 8);
        std::vector<int> n64(LANES + 1, 0), n32(LANES + 1, 0);
        for (uint64_t t = 0; t < LANES; ++t) {
            const uint64_t a = seen[t], b = seen[LANES + t];
            if (a == 0) n64[LANES]++; else if (a >= 100 && a < 100 + LANES) n64[a - 100]++;
            if (b == 0) n32[LANES]++; else if (b >= 200 && b < 200 + LANES) n32[b - 200]++;
        }
        uint64_t right_w6 = 0;
        uint32_t right_w32 = 0;
        shmem_getmem(&right_w6, w + 6, 8, right);
        shmem_getmem(&right_w32, reinterpret_cast<uint32_t*>(w + 8) + 6, 4, right);
        (void)w32;
        n64[right_w6 - 100]++;
        n32[right_w32 - 200]++;
        bool ok = true;
        for (int v : n64) ok &= v == 1;
        CHECK(ok, "swap<u64>: every value out exactly once");
        ok = true;
        for (int v : n32) ok &= v == 1;
        CHECK(ok, "swap<u32>: every value out exactly once");
    }
    shmem_barrier_all();  // the left PE read our swap words
    {
        uint64_t out[2] = {0, 0};
        GDA_LAUNCH(k_set_fetch, 1, 1, c, w, right, out);
        expect_ok("set/fetch");
        CHECK(out[0] == 0x77, "set/fetch<u64>: %llx", (unsigned long long)out[0]);
        CHECK(int64_t(out[1]) == -5, "set/fetch<i32>: %lld", (long long)out[1]);
    }

    // ---- put_signal ----
    for (Gran g : {Gran::Thread, Gran::Warp, Gran::Block}) {
        for (bool nbi : {false, true}) {
            if (g == Gran::Block && nbi) continue;
            ++round;
            shmem_barrier_all();
            for (size_t i = 0; i < N; ++i) src[i] = pattern(me, i, round);
            std::memset(dst, 0, N * 8);
            sig[0] = sig[1] = 0;
            shmem_barrier_all();
            GDA_LAUNCH(k_put_signal, BLOCKS, THREADS, c, dst, src, sig, g, nbi, right);
            uint64_t got = 0;
            const uint64_t expect = g == Gran::Thread ? LANES : g == Gran::Warp ? WARPS : 0;
            if (g != Gran::Block) {
                GDA_LAUNCH(k_wait_signal, 1, 1, c, sig, expect, &got);
            } else {
                GDA_LAUNCH(k_wait_signal, 1, 1, c, sig + 1, uint64_t(0x5e7), &got);
            }
            record(quiet(*c));
            expect_ok("put_signal");
            // The signal arrived: the data before it must be there (before any host barrier).
            // Block granularity: the block whose signal was seen (0x5e7 + block) sent its 1 KiB.
            const size_t first = g == Gran::Block && got >= 0x5e7 && got < 0x5e7 + BLOCKS ? (got - 0x5e7) * 128 : 0;
            const size_t span = g == Gran::Thread ? LANES * 8 : g == Gran::Warp ? WARPS * 32 : first + 128;
            bool ok = true;
            for (size_t i = first; i < span; ++i) ok &= dst[i] == pattern(left, i, round);
            CHECK(ok && got >= (g == Gran::Block ? 0x5e7 : expect), "put_signal%s %s: data %d signal %llu",
                  nbi ? "_nbi" : "", gname[int(g)], ok, (unsigned long long)got);
            shmem_barrier_all();
        }
    }

    // ---- fence, wait_until, test ----
    shmem_barrier_all();
    std::memset(dst, 0, N * 8);
    sig[2] = 0;
    shmem_barrier_all();
    GDA_LAUNCH(k_fence, 1, 1, c, dst, sig + 2, right);
    {
        int ok = 0;
        GDA_LAUNCH(k_wait_flag, 1, 1, c, sig + 2, dst, &ok);
        expect_ok("fence/wait_until");
        CHECK(ok == 1, "data ordered before the flag by fence");
    }
    shmem_barrier_all();

    // ---- barrier_all, sync_all, sync(team) at every granularity ----
    for (Gran g : {Gran::Thread, Gran::Warp, Gran::Block}) {
        for (int kind : {0, 1, 2}) {
            ++round;
            GDA_LAUNCH(k_sync, BLOCKS, THREADS, c, slots, round, g, kind);
            expect_ok(kind == 0 ? "barrier_all" : kind == 1 ? "sync_all" : "sync(team)");
            shmem_barrier_all();
        }
    }

    // ---- ptr ----
    for (int pe = 0; pe < npes; ++pe) {
        void* a = ptr(*c, dst, pe);
        CHECK(a == shmem_ptr(dst, pe), "ptr(%d) agrees with shmem_ptr", pe);
    }
    CHECK(ptr(*c, local.data(), right) == nullptr, "ptr of private memory is null");
    uint64_t dummy = 0;
    CHECK(putmem(*c, local.data(), &dummy, 8, right) == Status::NotSymmetric,
          "put to private memory is refused");
    CHECK(putmem(*c, dst, &dummy, 8, npes) == Status::BadPe, "put to PE n is refused");
    CHECK(putmem(*c, dst, &dummy, 8, -1) == Status::BadPe, "put to PE -1 is refused");

    shmem_barrier_all();
    shmem_free(src);
    shmem_free(dst);
    shmem_free(sig);
    shmem_free(w);
    shmem_free(slots);
    if (failures) {
        std::fprintf(stderr, "device_shmem: PE %d: %d of %d checks failed\n", me, failures, checks);
    } else {
        std::printf("device_shmem: PE %d: %d checks ok\n", me, checks);
    }
    shmem_finalize();
    return failures ? 1 : 0;
}
