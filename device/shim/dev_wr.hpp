// One request in the terms of gda_hal::WorkRequest, as the Rust bindings pass it to every shim
// (src/lib.rs `DevWr`, built by `dev_wr`).
#pragma once

#include <gda/abi.hpp>

extern "C" {
// One request, in the terms of gda_hal::WorkRequest.
struct DevWr {
    uint32_t kind;  // 0 WRITE, 1 SEND, 2 READ, 3 ATOMIC, 4 NOP
    uint32_t has_imm;
    uint32_t imm;
    uint32_t inline_data;  // payload is `inline_ptr[..inline_len]` instead of the gather list
    gda::Remote remote;
    const gda::Sge* sges;
    uint32_t n_sges;
    const uint8_t* inline_ptr;
    uint32_t inline_len;
    uint32_t atomic_kind;  // gda::Atomic::Kind
    uint32_t atomic_bytes;
    uint64_t a_compare, a_swap, a_add, a_compare_mask, a_swap_mask, a_field_boundary;
};

// The request's atomic and its local result entry.
inline gda::Atomic atomic_of(const DevWr* wr) {
    return gda::Atomic{static_cast<gda::Atomic::Kind>(wr->atomic_kind), wr->a_compare,
                       wr->a_swap, wr->a_add, wr->a_compare_mask, wr->a_swap_mask,
                       wr->a_field_boundary};
}
inline gda::Sge local_of(const DevWr* wr) { return wr->n_sges ? wr->sges[0] : gda::Sge{0, 0, 0}; }
}
