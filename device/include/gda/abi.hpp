// gda device API: the handles the host hands a kernel. Each is the C layout of a #[repr(C)]
// struct of the Rust side (gda_hal::WqHandle, CqHandle, SqPos, Posted; gda_mlx5::Mlx5Sq);
// sizes and offsets are asserted here and compared with Rust's in CI
// (testing/rdma-ref tests/device_mlx5.rs `layouts_match_rust`).
#pragma once

#include "config.hpp"

namespace gda {

// Bumped whenever a handle's layout changes.
constexpr uint32_t ABI_VERSION = 1;

// A send or receive queue: ring, doorbell record, doorbell register and limits (addresses as
// integers, valid where the kernel runs).
struct WqHandle {
    uint64_t buf;
    uint64_t dbrec;
    uint64_t db;
    uint32_t entries;  // ring size in the provider's units (mlx5: 64-byte WQEBBs); a power of 2
    uint32_t stride;
    uint32_t qpn;
    uint32_t max_inline;
    uint32_t max_sge;
};

// A completion queue.
struct CqHandle {
    uint64_t buf;
    uint64_t dbrec;
    uint64_t db;
    uint32_t entries;
    uint32_t cqe_bytes;
    uint32_t cqn;
    uint32_t collapsed;
};

// A position in a send queue: ring unit (wrapping 32-bit counter), message number, PSN.
struct SqPos {
    uint32_t unit;
    uint32_t msg;
    uint32_t psn;
};

// What one post wrote: where it started, where the next one starts, and its doorbell value
// (the bytes stored to the doorbell register).
struct Posted {
    SqPos start;
    SqPos next;
    uint8_t doorbell[8];
};

namespace mlx5 {
// A ConnectX send queue: the common handle and the BlueFlame half-register size (0: doorbell
// only).
struct Sq {
    WqHandle wq;
    uint32_t bf_size;
};
}  // namespace mlx5

static_assert(sizeof(WqHandle) == 48 && offsetof(WqHandle, dbrec) == 8 &&
                  offsetof(WqHandle, db) == 16 && offsetof(WqHandle, entries) == 24 &&
                  offsetof(WqHandle, stride) == 28 && offsetof(WqHandle, qpn) == 32 &&
                  offsetof(WqHandle, max_inline) == 36 && offsetof(WqHandle, max_sge) == 40,
              "WqHandle layout");
static_assert(sizeof(CqHandle) == 40 && offsetof(CqHandle, entries) == 24 &&
                  offsetof(CqHandle, cqe_bytes) == 28 && offsetof(CqHandle, cqn) == 32 &&
                  offsetof(CqHandle, collapsed) == 36,
              "CqHandle layout");
static_assert(sizeof(SqPos) == 12 && offsetof(SqPos, msg) == 4 && offsetof(SqPos, psn) == 8,
              "SqPos layout");
static_assert(sizeof(Posted) == 32 && offsetof(Posted, next) == 12 &&
                  offsetof(Posted, doorbell) == 24,
              "Posted layout");
static_assert(sizeof(mlx5::Sq) == 56 && offsetof(mlx5::Sq, bf_size) == 48, "mlx5::Sq layout");

// Send flags (gda_hal::SendFlags bits).
namespace send {
constexpr uint32_t FENCE = 1;
constexpr uint32_t SIGNALED = 2;
constexpr uint32_t SOLICITED = 4;
}  // namespace send

// Work-completion status (gda_hal::WcStatus, ibv_wc_status numbering).
enum class WcStatus : uint32_t {
    Success = 0, LocLenErr = 1, LocQpOpErr = 2, LocEecOpErr = 3, LocProtErr = 4, WrFlushErr = 5,
    MwBindErr = 6, BadRespErr = 7, LocAccessErr = 8, RemInvReqErr = 9, RemAccessErr = 10,
    RemOpErr = 11, RetryExcErr = 12, RnrRetryExcErr = 13, LocRddViolErr = 14,
    RemInvRdReqErr = 15, RemAbortErr = 16, InvEecnErr = 17, InvEecStateErr = 18, FatalErr = 19,
    RespTimeoutErr = 20, GeneralErr = 21, TmErr = 22, TmRndvIncomplete = 23,
};

struct Sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};
struct Remote {
    uint64_t addr;
    uint32_t rkey;
};

// An atomic: what it does and its operands (gda_hal::AtomicOp), for every provider.
struct Atomic {
    enum Kind : uint8_t { CompareSwap, FetchAdd, MaskedCompareSwap, MaskedFetchAdd } kind;
    uint64_t compare;         // CompareSwap, MaskedCompareSwap
    uint64_t swap;            // CompareSwap, MaskedCompareSwap
    uint64_t add;             // FetchAdd, MaskedFetchAdd
    uint64_t compare_mask;    // MaskedCompareSwap
    uint64_t swap_mask;       // MaskedCompareSwap
    uint64_t field_boundary;  // MaskedFetchAdd
};

GDA_FN Atomic compare_swap(uint64_t compare, uint64_t swap) {
    return Atomic{Atomic::CompareSwap, compare, swap, 0, 0, 0, 0};
}
GDA_FN Atomic fetch_add(uint64_t add) { return Atomic{Atomic::FetchAdd, 0, 0, add, 0, 0, 0}; }
GDA_FN Atomic masked_compare_swap(uint64_t compare, uint64_t compare_mask, uint64_t swap,
                                  uint64_t swap_mask) {
    return Atomic{Atomic::MaskedCompareSwap, compare, swap, 0, compare_mask, swap_mask, 0};
}
GDA_FN Atomic masked_fetch_add(uint64_t add, uint64_t field_boundary) {
    return Atomic{Atomic::MaskedFetchAdd, 0, 0, add, 0, 0, field_boundary};
}

}  // namespace gda
