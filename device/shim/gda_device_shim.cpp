// The device API's mlx5 header compiled for the host, behind a C ABI for the Rust tests
// (tests/device_mlx5.rs): one post + ring per call, as testing/rdma-ref/src/case.rs's
// `run_gda` does with gda's Rust device functions. Also the posting protocol (gda/sq.hpp) on
// CPU threads for every provider (mlx5, native, bnxt) and the provider dispatch (gda/any.hpp).
#include <gda/mlx5.hpp>
#include <gda/mlx5_sq.hpp>
#include <gda/native.hpp>
#include <gda/native_sq.hpp>
#include <gda/bnxt_sq.hpp>
#include <gda/any.hpp>

#include "dev_wr.hpp"

#include <thread>
#include <vector>

extern "C" {


// Posts `wr` at `cur_post` on `sq` and rings (BlueFlame when `blueflame`); the Posted and the
// next BlueFlame offset come back.
uint32_t gdadev_mlx5_post_ring(const gda::mlx5::Sq* sq, uint32_t cur_post, const DevWr* wr,
                               uint32_t flags, uint32_t blueflame, gda::Posted* out) {
    using namespace gda::mlx5;
    gda::SqPos pos{cur_post, 0, 0};
    gda::Posted p{};
    switch (wr->kind) {
        case 0:
            p = wr->inline_data ? post_write_inline(*sq, pos, wr->remote, wr->inline_ptr,
                                                    wr->inline_len, flags, wr->has_imm != 0,
                                                    wr->imm)
                                : post_write(*sq, pos, wr->remote, wr->sges, wr->n_sges, flags,
                                             wr->has_imm != 0, wr->imm);
            break;
        case 1:
            p = wr->inline_data ? post_send_inline(*sq, pos, wr->inline_ptr, wr->inline_len,
                                                   flags, wr->has_imm != 0, wr->imm)
                                : post_send(*sq, pos, wr->sges, wr->n_sges, flags,
                                            wr->has_imm != 0, wr->imm);
            break;
        case 2:
            p = post_read(*sq, pos, wr->remote, wr->sges, wr->n_sges, flags);
            break;
        case 3:
            p = post_atomic(*sq, pos, wr->remote, local_of(wr), atomic_of(wr), wr->atomic_bytes,
                            flags);
            break;
        default:
            p = post_nop(*sq, pos, flags);
    }
    *out = p;
    return ring_sq_bf(*sq, p, 0, blueflame != 0);
}

// sizeof and offsets of the ABI structs, for the layout test.
void gdadev_layout(uint64_t* out) {
    const uint64_t v[] = {
        sizeof(gda::WqHandle), offsetof(gda::WqHandle, dbrec), offsetof(gda::WqHandle, db),
        offsetof(gda::WqHandle, entries), offsetof(gda::WqHandle, stride),
        offsetof(gda::WqHandle, qpn), offsetof(gda::WqHandle, max_inline),
        offsetof(gda::WqHandle, max_sge), sizeof(gda::CqHandle),
        offsetof(gda::CqHandle, entries), offsetof(gda::CqHandle, cqe_bytes),
        offsetof(gda::CqHandle, cqn), offsetof(gda::CqHandle, collapsed), sizeof(gda::SqPos),
        offsetof(gda::SqPos, msg), offsetof(gda::SqPos, psn), sizeof(gda::Posted),
        offsetof(gda::Posted, next), offsetof(gda::Posted, doorbell), sizeof(gda::mlx5::Sq),
        offsetof(gda::mlx5::Sq, bf_size), sizeof(gda::Sge), offsetof(gda::Sge, length),
        offsetof(gda::Sge, lkey), sizeof(gda::Remote), offsetof(gda::Remote, rkey),
        gda::ABI_VERSION};
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; ++i) out[i] = v[i];
}

// `threads` CPU threads (standing in for GPU lanes) share one queue through the header's
// posting protocol: thread t writes the 8-byte value (t << 32 | i) to remote slot
// first + t * per + i as an inline RDMA WRITE, every `quiet_every` posts it quiets, and at the
// end each quiets. Returns the first non-Ok status (0: all Ok).
}  // extern "C"

template <class Q>
static int32_t threads_write(const Q* q, uint32_t threads, uint32_t per, uint32_t quiet_every,
                      gda::Remote remote) {
    std::vector<std::thread> ts;
    std::vector<int32_t> status(threads, 0);
    for (uint32_t t = 0; t < threads; ++t) {
        ts.emplace_back([=, &status] {
            for (uint32_t i = 0; i < per; ++i) {
                const uint64_t v = uint64_t(t) << 32 | i;
                const gda::Remote r{remote.addr + (uint64_t(t) * per + i) * 8, remote.rkey};
                gda::SqStatus s = gda::sq::write_value(*q, r, v, 0);
                if (s == gda::SqStatus::Ok && quiet_every && (i + 1) % quiet_every == 0) {
                    s = gda::sq::quiet(*q);
                }
                if (s != gda::SqStatus::Ok) {
                    status[t] = int32_t(s);
                    return;
                }
            }
            const gda::SqStatus s = gda::sq::quiet(*q);
            if (s != gda::SqStatus::Ok) status[t] = int32_t(s);
        });
    }
    for (auto& t : ts) t.join();
    for (int32_t s : status) {
        if (s) return s;
    }
    return 0;
}

extern "C" {

int32_t gdadev_mlx5_threads_write(const gda::mlx5::Queue* q, uint32_t threads, uint32_t per,
                                  uint32_t quiet_every, gda::Remote remote) {
    return threads_write(q, threads, per, quiet_every, remote);
}
int32_t gdadev_native_threads_write(const gda::native::Queue* q, uint32_t threads, uint32_t per,
                                    uint32_t quiet_every, gda::Remote remote) {
    return threads_write(q, threads, per, quiet_every, remote);
}
int32_t gdadev_bnxt_threads_write(const gda::bnxt::Queue* q, uint32_t threads, uint32_t per,
                                  uint32_t quiet_every, gda::Remote remote) {
    return threads_write(q, threads, per, quiet_every, remote);
}

// sizeof and offsets of the protocol's structs (SqState, SqProto, the Queues), for the layout
// test against gda_hal's SqShared, SqProto and SqDevice.
void gdadev_protocol_layout(uint64_t* out) {
    const uint64_t v[] = {
        sizeof(gda::SqState), offsetof(gda::SqState, rung), offsetof(gda::SqState, ring_bound),
        offsetof(gda::SqState, complete_below), offsetof(gda::SqState, signaled_marker),
        offsetof(gda::SqState, last_rung_marker), offsetof(gda::SqState, newest_plus_one),
        offsetof(gda::SqState, error), offsetof(gda::SqState, cq_busy),
        offsetof(gda::SqState, cq_ci), offsetof(gda::SqState, poisoned), sizeof(gda::SqProto),
        offsetof(gda::SqProto, state), offsetof(gda::SqProto, capacity),
        offsetof(gda::SqProto, signal_every), offsetof(gda::SqProto, timeout_ns),
        offsetof(gda::SqProto, max_units), offsetof(gda::SqProto, bits),
        offsetof(gda::SqProto, tracks_psn), offsetof(gda::SqProto, provider),
        sizeof(gda::mlx5::Queue), offsetof(gda::mlx5::Queue, sq), sizeof(gda::native::Queue),
        offsetof(gda::native::Queue, sq), sizeof(gda::bnxt::Queue), offsetof(gda::bnxt::Queue, sq)};
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; ++i) out[i] = v[i];
}

// The hot path of a GDA kernel, for the encoding benchmark: an 8-byte inline RDMA WRITE
// (signalled), doorbell record and doorbell, at `at`; returns the next position.
gda::SqPos gdadev_mlx5_write_inline8_ring(const gda::mlx5::Sq* sq, gda::SqPos at,
                                          gda::Remote remote, uint64_t value) {
    const gda::Posted p = gda::mlx5::post_write_value(*sq, at, remote, value, gda::send::SIGNALED);
    gda::mlx5::ring_sq(*sq, p);
    return p.next;
}

// As gdadev_mlx5_post_ring, in the software NIC's native format (kind 4: NOP); the doorbell
// is stored to `wq->db`.
void gdadev_native_post_ring(const gda::WqHandle* wq, uint32_t cur_post, const DevWr* wr,
                             uint32_t flags, gda::Posted* out) {
    using namespace gda::native;
    gda::SqPos pos{cur_post, 0, 0};
    gda::Posted p{};
    switch (wr->kind) {
        case 0:
            p = wr->inline_data ? post_write_inline(*wq, pos, wr->remote, wr->inline_ptr,
                                                    wr->inline_len, flags, wr->has_imm != 0,
                                                    wr->imm)
                                : post_write(*wq, pos, wr->remote, wr->sges, wr->n_sges, flags,
                                             wr->has_imm != 0, wr->imm);
            break;
        case 1:
            p = wr->inline_data ? post_send_inline(*wq, pos, wr->inline_ptr, wr->inline_len,
                                                   flags, wr->has_imm != 0, wr->imm)
                                : post_send(*wq, pos, wr->sges, wr->n_sges, flags,
                                            wr->has_imm != 0, wr->imm);
            break;
        case 2:
            p = post_read(*wq, pos, wr->remote, wr->sges, wr->n_sges, flags);
            break;
        case 3:
            p = post_atomic(*wq, pos, wr->remote, local_of(wr), atomic_of(wr), wr->atomic_bytes,
                            flags);
            break;
        default:
            p = post_nop(*wq, pos, flags);
    }
    ring_sq(*wq, p);
    *out = p;
}

// A register value (8 bytes, or the low 4 when `bytes` is 4) written at `pos` through the
// provider dispatch (gda/any.hpp): PostStatus.
int32_t gdadev_any_write_value(const gda::AnySq* s, gda::SqPos pos, gda::Remote remote,
                               uint64_t value, uint32_t bytes, uint32_t flags, gda::Posted* out) {
    if (bytes == 4) {
        return int32_t(gda::write_value_and_ring(*s, pos, remote, uint32_t(value), flags, out));
    }
    return int32_t(gda::write_value_and_ring(*s, pos, remote, value, flags, out));
}

// The status an mlx5 error syndrome means (gda/mlx5_sq.hpp).
uint32_t gdadev_mlx5_wc_status(uint8_t syndrome) {
    return uint32_t(gda::mlx5::wc_status(syndrome));
}
}
