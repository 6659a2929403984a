// Every header of the device API in one translation unit, with a kernel that posts an 8-byte
// inline RDMA WRITE and rings (one thread), so the device pass instantiates the hot path.
// Built by device/check.sh as host C++ (g++, clang++), HIP (hipcc: gfx90a, gfx940) and CUDA
// (nvcc: sm_80, sm_90), all with -Werror.
#include <gda/abi.hpp>
#include <gda/arch.hpp>
#include <gda/config.hpp>
#include <gda/mlx5.hpp>
#include <gda/mlx5_sq.hpp>
#include <gda/native.hpp>
#include <gda/any.hpp>

#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
#define GDA_KERNEL __global__
#else
#define GDA_KERNEL
#endif

// One thread posts `value` to `remote` and rings; `pos` is the queue's producer position.
extern "C" GDA_KERNEL void gda_check_post_inline(gda::mlx5::Sq sq, uint32_t* pos,
                                                 gda::Remote remote, uint64_t value) {
    const uint32_t at = gda::arch::fetch_add_u32(pos, 1);
    const gda::Posted p = gda::mlx5::post_write_value(sq, gda::SqPos{at, 0, 0}, remote, value,
                                                      gda::send::SIGNALED);
    gda::mlx5::ring_sq(sq, p);
}

// Every lane posts one 8-byte inline WRITE through the many-producer protocol, then quiets.
extern "C" GDA_KERNEL void gda_check_protocol(gda::mlx5::Sq2 q, gda::Remote remote,
                                              int32_t* status) {
#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
    const uint64_t lane = blockIdx.x * blockDim.x + threadIdx.x;
#else
    const uint64_t lane = 0;
#endif
    const gda::Remote r{remote.addr + lane * 8, remote.rkey};
    gda::SqStatus s = gda::mlx5::write_inline(q, r, &lane, 8, 0);
    if (s == gda::SqStatus::Ok) s = gda::mlx5::quiet(q);
    if (s != gda::SqStatus::Ok) *status = int32_t(s);
}

// The native format's hot path: an 8-byte inline WRITE and its doorbell.
extern "C" GDA_KERNEL void gda_check_native(gda::WqHandle wq, uint32_t* pos, gda::Remote remote,
                                            uint64_t value) {
    const uint32_t at = gda::arch::fetch_add_u32(pos, 1);
    const gda::Posted p = gda::native::post_write_inline(wq, gda::SqPos{at, 0, 0}, remote, &value,
                                                         8, gda::send::SIGNALED);
    gda::native::ring_sq(wq, p);
}

// One binary, every NIC compiled in: the provider is a tag in the handle.
extern "C" GDA_KERNEL void gda_check_any(gda::AnySq q, uint32_t* pos, gda::Remote remote,
                                         uint64_t value, int32_t* status) {
    const uint32_t at = gda::arch::fetch_add_u32(pos, 1);
    gda::Posted p;
    const gda::PostStatus s =
        gda::write_value_and_ring(q, gda::SqPos{at, 0, 0}, remote, value, 0u, &p);
    if (s != gda::PostStatus::Ok) *status = int32_t(s);
}
