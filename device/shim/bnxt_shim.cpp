// The device API's bnxt header compiled for the host, behind a C ABI for the Rust tests
// (testing/rdma-ref tests/device_bnxt.rs) and `gda wire encode --impl device`: one post + ring
// per call, as gda_bnxt's Bnxt::post + Bnxt::ring_sq do; CQE polling and decoding; receive
// WQEs and the RQ/CQ doorbells. Bound in src/bnxt.rs.
#include <gda/bnxt.hpp>

#include "dev_wr.hpp"

extern "C" {


// Posts `wr` at `at` on `sq` and rings its doorbell (`sq->wq.db`); the Posted comes back.
void gdadev_bnxt_post_ring(const gda::bnxt::Sq* sq, gda::SqPos at, const DevWr* wr,
                           uint32_t flags, gda::Posted* out) {
    using namespace gda::bnxt;
    gda::Posted p{};
    const bool imm = wr->has_imm != 0;
    switch (wr->kind) {
        case 0:
            p = wr->inline_data ? post_write_inline(*sq, at, wr->remote, wr->inline_ptr,
                                                    wr->inline_len, flags, imm, wr->imm)
                                : post_write(*sq, at, wr->remote, wr->sges, wr->n_sges, flags,
                                             imm, wr->imm);
            break;
        case 1:
            p = wr->inline_data
                    ? post_send_inline(*sq, at, wr->inline_ptr, wr->inline_len, flags, imm, wr->imm)
                    : post_send(*sq, at, wr->sges, wr->n_sges, flags, imm, wr->imm);
            break;
        case 2:
            p = post_read(*sq, at, wr->remote, wr->sges, wr->n_sges, flags);
            break;
        case 3:
            p = post_atomic(*sq, at, wr->remote, local_of(wr), atomic_of(wr), flags);
            break;
        default:
            p = post_nop(*sq, at, flags);
    }
    ring_sq(*sq, p);
    *out = p;
}

// The 8-byte register-value WRITE (`post_write_value`), rung.
void gdadev_bnxt_write_value_ring(const gda::bnxt::Sq* sq, gda::SqPos at, gda::Remote remote,
                                  uint64_t value, uint32_t bytes, uint32_t flags,
                                  gda::Posted* out) {
    const gda::Posted p =
        bytes == 4 ? gda::bnxt::post_write_value(*sq, at, remote, uint32_t(value), flags)
                   : gda::bnxt::post_write_value(*sq, at, remote, value, flags);
    gda::bnxt::ring_sq(*sq, p);
    *out = p;
}

// What the header reads from a queue handle, field by field (the layout test), then sizeof.
void gdadev_bnxt_sq_fields(const gda::bnxt::Sq* sq, uint64_t* out) {
    const uint64_t v[] = {sq->wq.buf,         sq->wq.dbrec,      sq->wq.db,
                          sq->wq.entries,     sq->wq.stride,     sq->wq.qpn,
                          sq->wq.max_inline,  sq->wq.max_sge,    sq->psn_table,
                          sq->psn_entries,    sq->path_mtu,      sq->start_psn,
                          uint64_t(sq->mode.wqe), uint64_t(sq->mode.psn), sizeof(gda::bnxt::Sq),
                          offsetof(gda::bnxt::Sq, mode)};
    for (unsigned i = 0; i < sizeof v / sizeof v[0]; ++i) out[i] = v[i];
}

// gda::bnxt::Wc flattened: status, opcode, wqe_counter, byte_len, imm, qpn, vendor_err,
// has_imm, is_recv.
static void wc_out(const gda::bnxt::Wc& wc, uint32_t* out) {
    out[0] = uint32_t(wc.status);
    out[1] = wc.opcode;
    out[2] = wc.wqe_counter;
    out[3] = wc.byte_len;
    out[4] = wc.imm;
    out[5] = wc.qpn;
    out[6] = wc.vendor_err;
    out[7] = wc.has_imm;
    out[8] = wc.is_recv;
}

// Polls CQE `ci`; 1 and the completion when valid, 0 otherwise.
uint32_t gdadev_bnxt_poll_cq(const gda::CqHandle* cq, uint32_t ci, uint32_t* out) {
    gda::bnxt::Wc wc{};
    if (!gda::bnxt::poll_cq(*cq, ci, &wc)) return 0;
    wc_out(wc, out);
    return 1;
}

// Decodes 32 CQE bytes.
void gdadev_bnxt_decode(const uint8_t* cqe, uint32_t* out) { wc_out(gda::bnxt::decode(cqe), out); }

// completion_bits and completed_unit of a queue.
uint32_t gdadev_bnxt_completion_bits(const gda::bnxt::Sq* sq) {
    return gda::bnxt::completion_bits(*sq);
}
uint32_t gdadev_bnxt_completed_unit(const gda::bnxt::Sq* sq, uint32_t wqe_counter) {
    return gda::bnxt::completed_unit(*sq, wqe_counter);
}

// A receive WQE at `at`, then the RQ doorbell for `at + 1`.
void gdadev_bnxt_post_recv_ring(const gda::WqHandle* rq, uint32_t at, const gda::Sge* sges,
                                uint32_t n) {
    gda::bnxt::post_recv(*rq, at, sges, n);
    gda::bnxt::ring_rq(*rq, at + 1);
}

// The CQ doorbell for consumer index `ci`.
void gdadev_bnxt_update_cq_ci(const gda::CqHandle* cq, uint32_t ci) {
    gda::bnxt::update_cq_ci(*cq, ci);
}
}
