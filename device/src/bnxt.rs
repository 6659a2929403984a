//! The device API's bnxt header (`include/gda/bnxt.hpp`) through its C ABI
//! (`shim/bnxt_shim.cpp`): posts and doorbells, CQE polling and decoding, receive WQEs, with
//! gda's own types (`gda_bnxt::BnxtSq` is the header's `gda::bnxt::Sq`, byte for byte).

use gda_bnxt::BnxtSq;
use gda_hal::{
    AtomicOp, CqHandle, Posted, Remote, Sge, SqPos, WcOpcode, WcStatus, WorkCompletion,
    WorkRequest, WqHandle,
};

unsafe extern "C" {
    fn gdadev_bnxt_post_ring(
        sq: *const BnxtSq,
        at: SqPos,
        wr: *const crate::DevWr,
        flags: u32,
        out: *mut Posted,
    );
    fn gdadev_bnxt_write_value_ring(
        sq: *const BnxtSq,
        at: SqPos,
        remote: Remote,
        value: u64,
        bytes: u32,
        flags: u32,
        out: *mut Posted,
    );
    fn gdadev_bnxt_sq_fields(sq: *const BnxtSq, out: *mut u64);
    fn gdadev_bnxt_poll_cq(cq: *const CqHandle, ci: u32, out: *mut u32) -> u32;
    fn gdadev_bnxt_decode(cqe: *const u8, out: *mut u32);
    fn gdadev_bnxt_completion_bits(sq: *const BnxtSq) -> u32;
    fn gdadev_bnxt_completed_unit(sq: *const BnxtSq, wqe_counter: u32) -> u32;
    fn gdadev_bnxt_post_recv_ring(rq: *const WqHandle, at: u32, sges: *const Sge, n: u32);
    fn gdadev_bnxt_update_cq_ci(cq: *const CqHandle, ci: u32);
}

/// Posts `wr` at `at` on `sq` with the header's functions and rings its doorbell (`sq`'s
/// `wq.db`): the Posted, or `None` (nothing written) for a request bnxt has no WQE for (a
/// masked atomic).
///
/// # Safety
/// `sq`'s ring, PSN table and doorbell word are valid and writable, and `Bnxt::check`
/// accepted the request.
#[must_use]
pub unsafe fn post_ring(
    sq: &BnxtSq,
    at: SqPos,
    wr: &WorkRequest<'_>,
    flags: u32,
) -> Option<Posted> {
    // bnxt has no masked atomics: nothing to post.
    if let WorkRequest::Atomic {
        op: AtomicOp::MaskedCompareSwap { .. } | AtomicOp::MaskedFetchAdd { .. },
        ..
    } = wr
    {
        return None;
    }
    let mut local = Sge::default();
    let d = crate::dev_wr(wr, &mut local);
    let mut out = Posted::default();
    // SAFETY: `d` and what it points at live across the call; the queue is valid (caller).
    unsafe { gdadev_bnxt_post_ring(sq, at, &d, flags, &mut out) };
    Some(out)
}

/// The header's `post_write_value` of a 4- or 8-byte register value (`bytes`), rung.
///
/// # Safety
/// As [`post_ring`].
#[must_use]
pub unsafe fn write_value_ring(
    sq: &BnxtSq,
    at: SqPos,
    remote: Remote,
    value: u64,
    bytes: u32,
    flags: u32,
) -> Posted {
    let mut out = Posted::default();
    // SAFETY: forwarded from the caller.
    unsafe { gdadev_bnxt_write_value_ring(sq, at, remote, value, bytes, flags, &mut out) };
    out
}

/// What the header reads from `sq`: the `WqHandle` fields (buf, dbrec, db, entries, stride,
/// qpn, max_inline, max_sge), psn_table, psn_entries, path_mtu, start_psn, the mode's WQE mode
/// and PSN form, then `sizeof(gda::bnxt::Sq)` and the offset of its mode.
#[must_use]
pub fn sq_fields(sq: &BnxtSq) -> [u64; 16] {
    let mut v = [0u64; 16];
    // SAFETY: reads `sq` and writes exactly 16 values.
    unsafe { gdadev_bnxt_sq_fields(sq, v.as_mut_ptr()) };
    v
}

fn wc_of(v: &[u32; 9]) -> WorkCompletion {
    WorkCompletion {
        status: WcStatus::from_raw(v[0]).unwrap_or(WcStatus::GeneralErr),
        opcode: match v[1] {
            0 => WcOpcode::Send,
            1 => WcOpcode::RdmaWrite,
            2 => WcOpcode::RdmaRead,
            3 => WcOpcode::CompSwap,
            4 => WcOpcode::FetchAdd,
            128 => WcOpcode::Recv,
            129 => WcOpcode::RecvRdmaWithImm,
            _ => WcOpcode::Other,
        },
        wqe_counter: v[2],
        byte_len: v[3],
        imm: (v[7] != 0).then_some(v[4]),
        qpn: v[5],
        vendor_err: v[6] as u8,
        is_recv: v[8] != 0,
    }
}

/// The header's `poll_cq` of CQE `ci`, as a `WorkCompletion` (`None`: not valid yet), with the
/// raw status number and opcode number it produced (so a value with no Rust counterpart is
/// seen, not mapped away).
///
/// # Safety
/// `cq`'s buffer holds `cq.entries` CQEs of `max(cq.cqe_bytes, 32)` bytes.
#[must_use]
pub unsafe fn poll_cq(cq: &CqHandle, ci: u32) -> Option<(WorkCompletion, u32, u32)> {
    let mut v = [0u32; 9];
    // SAFETY: forwarded from the caller; `v` has the 9 values the shim writes.
    let ok = unsafe { gdadev_bnxt_poll_cq(cq, ci, v.as_mut_ptr()) };
    (ok != 0).then(|| (wc_of(&v), v[0], v[1]))
}

/// The header's `decode` of a CQE, with the raw status and opcode numbers.
#[must_use]
pub fn decode(cqe: &[u8; 32]) -> (WorkCompletion, u32, u32) {
    let mut v = [0u32; 9];
    // SAFETY: reads 32 bytes, writes 9 values.
    unsafe { gdadev_bnxt_decode(cqe.as_ptr(), v.as_mut_ptr()) };
    (wc_of(&v), v[0], v[1])
}

/// The header's `completion_bits`.
#[must_use]
pub fn completion_bits(sq: &BnxtSq) -> u32 {
    // SAFETY: reads `sq` only.
    unsafe { gdadev_bnxt_completion_bits(sq) }
}

/// The header's `completed_unit`.
#[must_use]
pub fn completed_unit(sq: &BnxtSq, wqe_counter: u32) -> u32 {
    // SAFETY: reads `sq` only.
    unsafe { gdadev_bnxt_completed_unit(sq, wqe_counter) }
}

/// The header's `post_recv` at `at`, then `ring_rq` for `at + 1`.
///
/// # Safety
/// `rq`'s ring and doorbell word are valid and writable.
pub unsafe fn post_recv_ring(rq: &WqHandle, at: u32, sges: &[Sge]) {
    // SAFETY: forwarded from the caller; `sges` has `sges.len()` entries.
    unsafe { gdadev_bnxt_post_recv_ring(rq, at, sges.as_ptr(), sges.len() as u32) }
}

/// The header's `update_cq_ci`.
///
/// # Safety
/// `cq.db` is 0 or a valid, writable 8-byte word.
pub unsafe fn update_cq_ci(cq: &CqHandle, ci: u32) {
    // SAFETY: forwarded from the caller.
    unsafe { gdadev_bnxt_update_cq_ci(cq, ci) }
}
