// MoE-style dispatch: every PE holds TOKENS tokens of DIM floats and sends each to the K PEs
// ("experts") its router picks, with put-with-signal: one warp per token, the token's vector
// and then one increment of the receiver's signal word for this sender. Receivers know how many
// tokens each sender routes to them (the router is a pure function), wait on each sender's
// signal, and check every token that arrived.
//
// Builds unchanged with hipcc (moe_dispatch.hip), nvcc (moe_dispatch.cu) and as host C++ (gdacc,
// CPU threads): gdarun -n 4 ./moe_dispatch
#include "gda_example.hpp"

constexpr uint32_t TOKENS = 64, DIM = 128, K = 2, MAX_PES = 16;

// The k-th expert of token t of PE `src` among n PEs (K distinct PEs when n >= K).
GDA_FN int expert(int src, uint32_t t, uint32_t k, int n) {
    const uint32_t h = (uint32_t(src) * 2654435761u) ^ (t * 40503u);
    return int((h + k * (1 + h % (uint32_t(n) - 1 > 0 ? uint32_t(n) - 1 : 1))) % uint32_t(n));
}
// Where token t of PE `src` lands on its k-th expert: a slot per (sender, token, k).
GDA_FN uint64_t slot(int src, uint32_t t, uint32_t k) {
    return (uint64_t(src) * TOKENS + t) * K + k;
}
GDA_FN float value(int src, uint32_t t, uint32_t i) { return float(src * 100000 + t * 256 + i); }

// One warp per token: the lanes fill nothing (the token is already in the send buffer); lane 0
// posts the vector and the signal as one group call.
GDA_KERNEL void dispatch(const gda::shmem::Ctx* ctx, const float* send, float* recv,
                         uint64_t* signals, int32_t* bad) {
    using namespace gda::shmem;
    const Ctx& c = *ctx;
    const gda::Warp warp = gda::this_warp();
    const uint32_t warps = gda::grid_dim() * gda::block_dim() / gda::warp_size();
    const int me = my_pe(c), n = n_pes(c);
    for (uint32_t t = uint32_t(gda::global_id() / gda::warp_size()); t < TOKENS; t += warps) {
        for (uint32_t k = 0; k < K; ++k) {
            const int pe = expert(me, t, k, n);
            float* dst = recv + slot(me, t, k) * DIM;
            if (putmem_signal_nbi(c, dst, send + uint64_t(t) * DIM, DIM * sizeof(float),
                                  signals + me, 1, SignalOp::Add, pe, warp) != Status::Ok) {
                *bad = 1;
            }
        }
    }
    if (quiet(c, warp) != Status::Ok) *bad = 1;
}

// Block 0 waits for every sender's tokens, then checks them.
GDA_KERNEL void combine(const gda::shmem::Ctx* ctx, const float* recv, uint64_t* signals,
                        int32_t* bad, uint64_t* received) {
    using namespace gda::shmem;
    const Ctx& c = *ctx;
    const int me = my_pe(c), n = n_pes(c);
    if (gda::block_idx() != 0) return;
    const gda::Block block = gda::this_block();
    for (int src = int(block.rank()); src < n; src += int(block.size())) {
        uint64_t expect = 0;
        for (uint32_t t = 0; t < TOKENS; ++t) {
            for (uint32_t k = 0; k < K; ++k) expect += expert(src, t, k, n) == me;
        }
        uint64_t got = 0;
        if (signal_wait_until(c, signals + src, Cmp::Ge, expect, &got) != Status::Ok || got != expect) {
            *bad = 1;
        }
        for (uint32_t t = 0; t < TOKENS; ++t) {
            for (uint32_t k = 0; k < K; ++k) {
                if (expert(src, t, k, n) != me) continue;
                const float* tok = recv + slot(src, t, k) * DIM;
                for (uint32_t i = 0; i < DIM; ++i) {
                    if (tok[i] != value(src, t, i)) *bad = 1;
                }
                gda::arch::fetch_add_u64(received, 1);
            }
        }
    }
    block.sync();
}

int main() {
    shmem_init();
    const int me = shmem_my_pe(), n = shmem_n_pes();
    if (n > int(MAX_PES)) example::die("moe_dispatch: at most 16 PEs");
    const gda::shmem::Ctx* ctx = example::context();
    std::printf("moe_dispatch: PE %d: context in %s\n", shmem_my_pe(), example::memory_name(ctx));
    auto* send = static_cast<float*>(shmem_malloc(sizeof(float) * TOKENS * DIM));
    auto* recv = static_cast<float*>(shmem_calloc(size_t(MAX_PES) * TOKENS * K * DIM, sizeof(float)));
    auto* signals = static_cast<uint64_t*>(shmem_calloc(MAX_PES, 8));
    auto* bad = static_cast<int32_t*>(shmem_calloc(1, 4));
    auto* received = static_cast<uint64_t*>(shmem_calloc(1, 8));
    if (!send || !recv || !signals || !bad || !received) example::die("shmem_malloc failed");
    for (uint32_t t = 0; t < TOKENS; ++t) {
        for (uint32_t i = 0; i < DIM; ++i) send[t * DIM + i] = value(me, t, i);
    }
    shmem_barrier_all();
    GDA_LAUNCH(dispatch, 2, 64, ctx, send, recv, signals, bad);
    GDA_LAUNCH(combine, 1, 64, ctx, recv, signals, bad, received);
    example::wait();
    uint64_t expect = 0;
    for (int src = 0; src < n; ++src) {
        for (uint32_t t = 0; t < TOKENS; ++t) {
            for (uint32_t k = 0; k < K; ++k) expect += expert(src, t, k, n) == me;
        }
    }
    shmem_barrier_all();
    if (*bad || *received != expect) {
        std::fprintf(stderr, "moe_dispatch: PE %d: %llu of %llu tokens right\n", me,
                     (unsigned long long)*received, (unsigned long long)expect);
        return 1;
    }
    std::printf("moe_dispatch: PE %d: %llu tokens received ok\n", me, (unsigned long long)expect);
    shmem_free(send);
    shmem_free(recv);
    shmem_free(signals);
    shmem_free(bad);
    shmem_free(received);
    shmem_finalize();
    return 0;
}
