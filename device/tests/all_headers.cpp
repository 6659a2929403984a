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
#include <gda/native_sq.hpp>
#include <gda/sq.hpp>
#include <gda/group.hpp>
#include <gda/shmem.hpp>
#include <gda/any.hpp>
#include <gda/bnxt.hpp>
#include <gda/bnxt_sq.hpp>


// One thread posts `value` to `remote` and rings; `pos` is the queue's producer position.
extern "C" GDA_KERNEL void gda_check_post_inline(gda::mlx5::Sq sq, uint32_t* pos,
                                                 gda::Remote remote, uint64_t value) {
    const uint32_t at = gda::arch::fetch_add_u32(pos, 1);
    const gda::Posted p = gda::mlx5::post_write_value(sq, gda::SqPos{at, 0, 0}, remote, value,
                                                      gda::send::SIGNALED);
    gda::mlx5::ring_sq(sq, p);
}

// Every lane posts one 8-byte inline WRITE through the many-producer protocol, then quiets.
extern "C" GDA_KERNEL void gda_check_protocol(gda::mlx5::Queue q, gda::Remote remote,
                                              int32_t* status) {
#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
    const uint64_t lane = blockIdx.x * blockDim.x + threadIdx.x;
#else
    const uint64_t lane = 0;
#endif
    const gda::Remote r{remote.addr + lane * 8, remote.rkey};
    gda::SqStatus s = gda::sq::write_inline(q, r, &lane, 8, 0);
    if (s == gda::SqStatus::Ok) s = gda::sq::quiet(q);
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

// bnxt's hot path: an 8-byte register-value WRITE (WQE, PSN-table entry) and its doorbell.
extern "C" GDA_KERNEL void gda_check_bnxt(gda::bnxt::Sq sq, uint32_t* pos, gda::Remote remote,
                                          uint64_t value) {
    const uint32_t at = gda::arch::fetch_add_u32(pos, 1);
    const gda::Posted p = gda::bnxt::post_write_value(sq, gda::SqPos{at, at, 0}, remote, value,
                                                      gda::send::SIGNALED);
    gda::bnxt::ring_sq(sq, p);
}

// One poll of a bnxt CQ, the completed unit, and the CQ doorbell.
extern "C" GDA_KERNEL void gda_check_bnxt_poll(gda::bnxt::Sq sq, gda::CqHandle cq, uint32_t ci,
                                               uint32_t* done) {
    gda::bnxt::Wc wc{};
    if (gda::bnxt::poll_cq(cq, ci, &wc)) {
        *done = gda::bnxt::completed_unit(sq, wc.wqe_counter);
        gda::bnxt::update_cq_ci(cq, ci + 1);
    }
}

// Every other bnxt post, in every mode the handle says, so the device pass compiles them all.
extern "C" GDA_KERNEL void gda_check_bnxt_all(gda::bnxt::Sq sq, gda::WqHandle rq, uint32_t kind,
                                              gda::SqPos pos, gda::Remote remote, gda::Sge sge,
                                              const uint8_t* data, uint32_t len) {
    using namespace gda::bnxt;
    gda::Posted p{};
    switch (kind) {
        case 0: p = post_write(sq, pos, remote, &sge, 1, 0, true, 7); break;
        case 1: p = post_write_inline(sq, pos, remote, data, len, 0); break;
        case 2: p = post_send(sq, pos, &sge, 1, gda::send::FENCE); break;
        case 3: p = post_send_inline(sq, pos, data, len, 0, true, 9); break;
        case 4: p = post_read(sq, pos, remote, &sge, 1, 0); break;
        case 5: p = post_atomic(sq, pos, remote, sge, gda::compare_swap(1, 2), 0); break;
        case 6: p = post_atomic(sq, pos, remote, sge, gda::fetch_add(3), 0); break;
        case 7: p = post_write_value(sq, pos, remote, uint32_t(len), 0); break;
        default: p = post_nop(sq, pos, gda::send::SIGNALED);
    }
    ring_sq(sq, p);
    post_recv(rq, pos.unit, &sge, 1);
    ring_rq(rq, pos.unit + 1);
}

// Every lane posts through the many-producer protocol on a bnxt queue (units, message numbers
// and PSNs reserved together): a register value, a gather WRITE, a READ and an atomic, then
// quiets (normal or collapsed CQ polling, the signalled NOP).
extern "C" GDA_KERNEL void gda_check_bnxt_protocol(gda::bnxt::Queue q, gda::Remote remote,
                                                   gda::Sge sge, int32_t* status) {
#if defined(GDA_TARGET_HIP) || defined(GDA_TARGET_CUDA)
    const uint64_t lane = blockIdx.x * blockDim.x + threadIdx.x;
#else
    const uint64_t lane = 0;
#endif
    const gda::Remote r{remote.addr + lane * 8, remote.rkey};
    gda::SqStatus s = gda::sq::write_value(q, r, lane, 0);
    if (s == gda::SqStatus::Ok) s = gda::sq::write_value(q, r, uint32_t(lane), 0);
    if (s == gda::SqStatus::Ok) s = gda::sq::write(q, r, &sge, 1, 0);
    if (s == gda::SqStatus::Ok) s = gda::sq::read(q, r, &sge, 1, 0);
    if (s == gda::SqStatus::Ok) s = gda::sq::atomic(q, r, sge, gda::fetch_add(1), 8, 0);
    if (s == gda::SqStatus::Ok) s = gda::sq::quiet(q);
    if (s != gda::SqStatus::Ok) *status = int32_t(s);
}

// The SHMEM device API at every granularity, so the device pass instantiates all of it (in a few
// kernels: ptxas time grows faster than a kernel's size).
extern "C" GDA_KERNEL void gda_check_shmem_rma(const gda::shmem::Ctx* ctx, uint64_t* sym, int pe,
                                               int32_t* status) {
    using namespace gda::shmem;
    const Ctx& c = *ctx;
    const uint32_t me = uint32_t(gda::global_id());
    uint64_t v = 0;
    Status s = check(c);
    if (s == Status::Ok) s = putmem(c, sym, sym + 64, 512, pe);
    if (s == Status::Ok) s = putmem_nbi(c, sym, sym + 64, 512, pe, gda::this_warp());
    if (s == Status::Ok) s = getmem(c, sym + 64, sym, 512, pe, gda::this_block());
    if (s == Status::Ok) s = get_nbi(c, sym + 64, sym, 8, pe);
    if (s == Status::Ok) s = put(c, sym, sym + 64, uint64_t(8), pe);
    if (s == Status::Ok) s = p(c, sym + me % 64, uint64_t(me), pe);
    if (s == Status::Ok) s = g(c, sym + 1, pe, &v);
    if (s == Status::Ok) s = p_lanes(gda::this_warp(), c, sym + gda::lane(), v, pe);
    if (s != Status::Ok) *status = int32_t(s);
}

extern "C" GDA_KERNEL void gda_check_shmem_amo(const gda::shmem::Ctx* ctx, uint64_t* sym, int pe,
                                               int32_t* status) {
    using namespace gda::shmem;
    const Ctx& c = *ctx;
    uint64_t v = 0;
    uint32_t w = 0;
    int32_t i = 0;
    Status s = atomic_fetch_add(c, sym, uint64_t(1), pe, &v);
    if (s == Status::Ok) s = atomic_add(c, reinterpret_cast<uint32_t*>(sym), 1u, pe);
    if (s == Status::Ok) s = atomic_compare_swap(c, reinterpret_cast<int32_t*>(sym), 0, 1, pe, &i);
    if (s == Status::Ok) s = atomic_fetch_xor(c, reinterpret_cast<uint32_t*>(sym), 3u, pe, &w);
    if (s == Status::Ok) s = atomic_or(c, sym, uint64_t(4), pe);
    if (s == Status::Ok) s = atomic_swap(c, sym, uint64_t(5), pe, &v);
    if (s == Status::Ok) s = atomic_fetch(c, sym, pe, &v);
    if (s != Status::Ok) *status = int32_t(s);
}

extern "C" GDA_KERNEL void gda_check_shmem_sync(const gda::shmem::Ctx* ctx, uint64_t* sym, int pe,
                                                int32_t* status) {
    using namespace gda::shmem;
    const Ctx& c = *ctx;
    uint64_t v = 0;
    Status s = putmem_signal(c, sym, sym + 64, 64, sym + 200, 1, SignalOp::Add, pe,
                             gda::this_block());
    if (s == Status::Ok) s = signal_wait_until(c, sym + 200, Cmp::Ge, uint64_t(1), &v);
    if (s == Status::Ok) s = wait_until(c, reinterpret_cast<uint32_t*>(sym), Cmp::Ne, 0u);
    if (s == Status::Ok && !test(sym, Cmp::Eq, uint64_t(0))) s = fence(c);
    if (s == Status::Ok) s = quiet(c, gda::this_warp());
    if (s == Status::Ok) s = barrier_all(c, gda::this_block());
    if (s == Status::Ok) s = sync(c, Team{0, 2, 2, 1}, gda::this_warp());
    if (s == Status::Ok && ptr(c, sym, pe) == nullptr) s = sync_all(c);
    if (s != Status::Ok) *status = int32_t(s);
}
