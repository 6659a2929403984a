// What the device examples share: getting this PE's SHMEM device context to the kernel, and
// waiting for a launch, the same way for HIP, CUDA and CPU threads.
//
// On a GPU the context and everything it points at must be reachable by the kernel. gda built
// with the `hip` feature sees to it: with a GPU heap (GDA_SHMEM_HEAP=gpu) the heap, rings,
// doorbell records, protocol state and the context are in GPU memory and the doorbells mapped
// (`Ctx::memory` is `Memory::Device`); with a host heap on a machine with a GPU all of that host
// memory is mapped for the GPU at the same addresses (`Memory::Mapped`). See device/README.md,
// "On a GPU".
#pragma once

#include <gda/shmem.hpp>
#include <shmemx.h>

#include <cstdio>
#include <cstdlib>

namespace example {

inline void die(const char* what) {
    std::fprintf(stderr, "%s\n", what);
    std::exit(1);
}

#if defined(GDA_TARGET_HIP)
#define GDA_EX_RT(x) hip##x
#elif defined(GDA_TARGET_CUDA)
#define GDA_EX_RT(x) cuda##x
#endif

// The context for kernels of this build, checked (version, size, provider compiled in, queue
// stride, work area, peers, timeout: gda::shmem::check; every routine checks it again).
inline const gda::shmem::Ctx* context() {
    const auto* c = static_cast<const gda::shmem::Ctx*>(shmemx_device_context());
    if (!c) die("shmemx_device_context failed");
    if (const gda::shmem::Status st = gda::shmem::check(*c); st != gda::shmem::Status::Ok) {
        die(gda::shmem::describe(st));
    }
#if defined(GDA_EX_RT)
    // gda built with the `hip` feature hands a context a kernel uses as it is: in GPU memory
    // (a GPU heap, GDA_SHMEM_HEAP=gpu, AMD) or host memory it mapped for the GPU (HIP or CUDA's
    // runtime). A context of a build without it is plain host memory: the context and its
    // arrays are mapped here, but the heap and queues it points at are reachable only by a GPU
    // with HMM (pageable memory access); build gda with `hip` instead.
    if (c->memory != uint32_t(gda::shmem::Memory::Host)) return c;
    void* regions[] = {const_cast<gda::shmem::Ctx*>(c), reinterpret_cast<void*>(c->peers),
                       reinterpret_cast<void*>(c->queues)};
    const size_t bytes[] = {sizeof *c, sizeof(gda::shmem::Peer) * c->n_pes,
                            size_t(c->queue_bytes) * c->n_pes};
    for (int i = 0; i < 3; ++i) {
        if (GDA_EX_RT(HostRegister)(regions[i], bytes[i], GDA_EX_RT(HostRegisterMapped)) != 0) {
            die("cannot map the SHMEM device context for the GPU");
        }
    }
#endif
    return c;
}

// Where the context and what it points at live, for the example's report.
inline const char* memory_name(const gda::shmem::Ctx* c) {
    switch (gda::shmem::Memory(c->memory)) {
        case gda::shmem::Memory::Host: return "host memory";
        case gda::shmem::Memory::Device: return "GPU memory";
        case gda::shmem::Memory::Mapped: return "host memory mapped for the GPU";
    }
    return "unknown memory";
}

// Waits for the kernels launched so far.
inline void wait() {
#if defined(GDA_EX_RT)
    const auto e = GDA_EX_RT(DeviceSynchronize)();
    if (e != 0) {
        std::fprintf(stderr, "kernel failed: %s\n", GDA_EX_RT(GetErrorString)(e));
        std::exit(1);
    }
#endif
}

}  // namespace example
