// The SHMEM device API (gda/shmem.hpp) compiled for the host behind a C ABI, for
// `gda shmem perf` (facade feature `device`): the same 8-byte put rate and put + quiet latency
// the Rust API is measured with, posted by the header's code from a CPU thread.
#include <gda/shmem.hpp>

#include <chrono>

extern "C" {

// `n` 8-byte puts (gda::shmem::p, an inline WRITE over RDMA) to dst[i % 1024] on `pe`, then one
// quiet: Status (0: Ok); the seconds taken in `*secs`.
int32_t gdadev_shmem_put8_rate(const gda::shmem::Ctx* c, uint64_t* dst, int32_t pe, uint64_t n,
                               double* secs) {
    using namespace gda::shmem;
    const auto t = std::chrono::steady_clock::now();
    Status s = Status::Ok;
    for (uint64_t i = 0; i < n && s == Status::Ok; ++i) s = p(*c, dst + (i % 1024), i, pe);
    if (s == Status::Ok) s = quiet(*c);
    *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    return int32_t(s);
}

// `n` times an 8-byte put and a quiet; each round trip in microseconds in `us[i]`: Status.
int32_t gdadev_shmem_put8_quiet(const gda::shmem::Ctx* c, uint64_t* dst, int32_t pe, uint64_t n,
                                double* us) {
    using namespace gda::shmem;
    for (uint64_t i = 0; i < n; ++i) {
        const auto t = std::chrono::steady_clock::now();
        Status s = p(*c, dst + (i % 1024), i, pe);
        if (s == Status::Ok) s = quiet(*c);
        us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
        if (s != Status::Ok) return int32_t(s);
    }
    return 0;
}

// gda::shmem::check of a context: Status.
int32_t gdadev_shmem_check(const gda::shmem::Ctx* c) { return int32_t(gda::shmem::check(*c)); }

// gda::shmem::describe: what a Status says, in words (a static string).
const char* gdadev_shmem_describe(int32_t s) {
    return gda::shmem::describe(gda::shmem::Status(s));
}

// sizeof(Ctx) and its field offsets, then sizeof(Peer) (gda_shmem::device::DeviceCtx::LAYOUT).
void gdadev_shmem_layout(uint64_t* out) {
    using gda::shmem::Ctx;
    const uint64_t v[] = {sizeof(Ctx), offsetof(Ctx, size), offsetof(Ctx, my_pe),
                          offsetof(Ctx, n_pes), offsetof(Ctx, provider),
                          offsetof(Ctx, queue_bytes), offsetof(Ctx, lkey),
                          offsetof(Ctx, staging_slots), offsetof(Ctx, local_base),
                          offsetof(Ctx, heap_bytes), offsetof(Ctx, seg_bytes),
                          offsetof(Ctx, peers), offsetof(Ctx, queues), offsetof(Ctx, work),
                          offsetof(Ctx, staging_slot_bytes), offsetof(Ctx, timeout_ns),
                          offsetof(Ctx, kick_fn), offsetof(Ctx, kick_arg),
                          offsetof(Ctx, memory), offsetof(Ctx, reserved),
                          sizeof(gda::shmem::Peer), gda::shmem::ABI_VERSION};
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; ++i) out[i] = v[i];
}
}
