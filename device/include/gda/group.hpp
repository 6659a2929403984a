// gda device API: threads, warps (wavefronts) and blocks, the same way on every target — so one
// kernel source runs on AMD and NVIDIA GPUs and, in CI, on CPU threads against the software NIC.
//
//   GDA_KERNEL                    __global__ on GPUs; nothing on the host
//   GDA_LAUNCH(k, blocks, threads, args...)
//                                 k<<<blocks, threads>>>(args...) on GPUs; on the host, blocks x
//                                 threads CPU threads run k(args...) and are joined
//   thread_idx(), block_idx(), block_dim(), grid_dim(), warp_size(), lane(), global_id()
//   this_thread(), this_warp(), this_block()
//                                 groups: rank(), size(), sync(), broadcast(v) from rank 0,
//                                 exclusive_sum(v, &total) (what a group needs to post as one)
//
// On the host a warp is `GDA_HOST_WARP` lanes (default 4; a block's thread count must be a
// multiple of it) and lanes run as independent threads that meet at sync(): code that is
// correct on the host under ThreadSanitizer is correct under independent thread scheduling
// (NVIDIA Volta and later). On GPUs, warp-level calls expect every lane of the warp to call
// them (as __syncwarp / wavefront code does).
#pragma once

#include "arch.hpp"

#if !defined(GDA_DEVICE_PASS)
#include <atomic>
#include <thread>
#include <vector>
#endif

#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
#define GDA_KERNEL __global__
#define GDA_LAUNCH(k, blocks, threads, ...) k<<<(blocks), (threads)>>>(__VA_ARGS__)
#else
#define GDA_KERNEL
#define GDA_LAUNCH(k, blocks, threads, ...) \
    ::gda::host::launch((blocks), (threads), [&] { k(__VA_ARGS__); })
#endif

#ifndef GDA_HOST_WARP
#define GDA_HOST_WARP 4
#endif

namespace gda {

#if !defined(GDA_DEVICE_PASS)
namespace host {

// Where CPU threads standing in for a group meet: a reusable barrier and a scratch row.
struct Meeting {
    std::atomic<uint32_t> arrived{0};
    std::atomic<uint32_t> generation{0};
    uint32_t size = 1;
    std::vector<uint64_t> scratch;

    // Every member arrives; the last one releases the others (sense by generation).
    void sync() {
        const uint32_t gen = generation.load(std::memory_order_acquire);
        if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == size) {
            arrived.store(0, std::memory_order_relaxed);
            generation.store(gen + 1, std::memory_order_release);
            return;
        }
        while (generation.load(std::memory_order_acquire) == gen) std::this_thread::yield();
    }

    // The value member `from` brings, on every member (`rank`: the caller's).
    uint64_t broadcast(uint64_t v, uint32_t rank, uint32_t from) {
        if (rank == from) scratch[0] = v;
        sync();
        const uint64_t r = scratch[0];
        sync();  // nobody overwrites scratch[0] before every member has read it
        return r;
    }
};

// One CPU thread's place in a launch.
struct Place {
    uint32_t thread, block, threads, blocks, warp;
    Meeting* block_meeting;
    Meeting* warp_meeting;
};

inline thread_local Place place{0, 0, 1, 1, 1, nullptr, nullptr};

// Runs `f` on blocks x threads CPU threads (each with its Place) and joins them.
template <class F>
void launch(uint32_t blocks, uint32_t threads, F f) {
    const uint32_t warp = threads % GDA_HOST_WARP == 0 ? GDA_HOST_WARP : 1;
    std::vector<Meeting> bm(blocks), wm(size_t(blocks) * (threads / warp));
    for (auto& m : bm) {
        m.size = threads;
        m.scratch.assign(threads + 1, 0);
    }
    for (auto& m : wm) {
        m.size = warp;
        m.scratch.assign(warp + 1, 0);
    }
    std::vector<std::thread> ts;
    ts.reserve(size_t(blocks) * threads);
    for (uint32_t b = 0; b < blocks; ++b) {
        for (uint32_t t = 0; t < threads; ++t) {
            ts.emplace_back([&, b, t] {
                place = Place{t, b, threads, blocks, warp, &bm[b],
                              &wm[size_t(b) * (threads / warp) + t / warp]};
                f();
            });
        }
    }
    for (auto& t : ts) t.join();
}

}  // namespace host
#endif

GDA_FN uint32_t thread_idx() {
#if defined(GDA_DEVICE_PASS)
    return threadIdx.x;
#else
    return host::place.thread;
#endif
}
GDA_FN uint32_t block_idx() {
#if defined(GDA_DEVICE_PASS)
    return blockIdx.x;
#else
    return host::place.block;
#endif
}
GDA_FN uint32_t block_dim() {
#if defined(GDA_DEVICE_PASS)
    return blockDim.x;
#else
    return host::place.threads;
#endif
}
GDA_FN uint32_t grid_dim() {
#if defined(GDA_DEVICE_PASS)
    return gridDim.x;
#else
    return host::place.blocks;
#endif
}
GDA_FN uint32_t warp_size() {
#if defined(GDA_DEVICE_PASS)
    return warpSize;
#else
    return host::place.warp;
#endif
}
GDA_FN uint32_t lane() { return thread_idx() % warp_size(); }
GDA_FN uint64_t global_id() { return uint64_t(block_idx()) * block_dim() + thread_idx(); }

// A group of one.
struct Thread {
    GDA_FN uint32_t rank() const { return 0; }
    GDA_FN uint32_t size() const { return 1; }
    GDA_FN void sync() const {}
    GDA_FN uint64_t broadcast(uint64_t v, uint32_t = 0) const { return v; }
    GDA_FN uint64_t exclusive_sum(uint64_t v, uint64_t* total) const {
        *total = v;
        return 0;
    }
};

// The lanes of this thread's warp (wavefront).
struct Warp {
    GDA_FN uint32_t rank() const { return lane(); }
    GDA_FN uint32_t size() const { return warp_size(); }
    GDA_FN void sync() const {
#if defined(GDA_DEVICE_PASS) && defined(GDA_TARGET_CUDA)
        __syncwarp();
#elif defined(GDA_DEVICE_PASS)
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
        __builtin_amdgcn_wave_barrier();
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
        if (host::place.warp_meeting) host::place.warp_meeting->sync();
#endif
    }
    // Lane `from`'s `v`, on every lane.
    GDA_FN uint64_t broadcast(uint64_t v, uint32_t from = 0) const {
#if defined(GDA_DEVICE_PASS) && defined(GDA_TARGET_CUDA)
        return __shfl_sync(0xffffffffu, (unsigned long long)v, int(from));
#elif defined(GDA_DEVICE_PASS)
        return __shfl((unsigned long long)v, int(from));
#else
        host::Meeting* m = host::place.warp_meeting;
        return m ? m->broadcast(v, rank(), from) : v;
#endif
    }
    // The sum of `v` over lanes below this one; the whole sum in `total`.
    GDA_FN uint64_t exclusive_sum(uint64_t v, uint64_t* total) const {
#if defined(GDA_DEVICE_PASS)
        uint64_t incl = v;
        for (uint32_t d = 1; d < size(); d <<= 1) {
#if defined(GDA_TARGET_CUDA)
            const uint64_t o = __shfl_up_sync(0xffffffffu, (unsigned long long)incl, d);
#else
            const uint64_t o = __shfl_up((unsigned long long)incl, d);
#endif
            if (rank() >= d) incl += o;
        }
#if defined(GDA_TARGET_CUDA)
        *total = __shfl_sync(0xffffffffu, (unsigned long long)incl, size() - 1);
#else
        *total = __shfl((unsigned long long)incl, size() - 1);
#endif
        return incl - v;
#else
        host::Meeting* m = host::place.warp_meeting;
        if (!m) {
            *total = v;
            return 0;
        }
        m->scratch[rank()] = v;
        m->sync();
        uint64_t before = 0, all = 0;
        for (uint32_t i = 0; i < size(); ++i) {
            if (i < rank()) before += m->scratch[i];
            all += m->scratch[i];
        }
        m->sync();
        *total = all;
        return before;
#endif
    }
};

// The threads of this thread's block.
struct Block {
    GDA_FN uint32_t rank() const { return thread_idx(); }
    GDA_FN uint32_t size() const { return block_dim(); }
    GDA_FN void sync() const {
#if defined(GDA_DEVICE_PASS)
        __syncthreads();
#else
        if (host::place.block_meeting) host::place.block_meeting->sync();
#endif
    }
    // Thread `from`'s `v`, on every thread of the block.
    GDA_FN uint64_t broadcast(uint64_t v, uint32_t from = 0) const {
#if defined(GDA_DEVICE_PASS)
        __shared__ uint64_t slot;
        if (rank() == from) slot = v;
        __syncthreads();
        const uint64_t r = slot;
        __syncthreads();
        return r;
#else
        host::Meeting* m = host::place.block_meeting;
        return m ? m->broadcast(v, rank(), from) : v;
#endif
    }
};

GDA_FN Thread this_thread() { return Thread{}; }
GDA_FN Warp this_warp() { return Warp{}; }
GDA_FN Block this_block() { return Block{}; }

}  // namespace gda
