//! # gda-native — the native queue format
//!
//! The [`Native`] provider: the software NIC's own queue format, designed for a software
//! device — little-endian, naturally aligned, fixed offsets, no bit packing to undo. It is a
//! provider like mlx5 and bnxt: device functions here, its device model in [`model`] (feature
//! `model`), one struct per structure ([`NativeWqe`], [`NativeCqe`]) used by both, and one
//! typed send WQE, [`wire::WqeRepr`], that the device functions emit and the model parses.
//!
//! | structure | size | layout |
//! |---|---|---|
//! | send WQE header unit | 64 B | [`NativeWqe`]: opcode, flags, atomic width, units, imm, first SGE, remote, counter, operands |
//! | extension unit | 64 B | 4 more SGEs ([`NativeSge`]), or masked-atomic masks, or inline bytes |
//! | doorbell | 8 B | the producer position after the last WQE (`u64`, little-endian), stored with release |
//! | receive WQE | 16 B × (1 + max_sge) | count, then [`NativeSge`]s |
//! | CQE | 32 B | [`NativeCqe`]: counter, byte count, imm, QPN, status, opcode, flags, owner |
//!
//! A WQE is 1 header unit plus extension units; `units` in the header says how many, so the
//! device never parses to find the next WQE.

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "model")]
pub mod model;
pub mod wire;

use gda_hal::{
    Checked, CollapsedProgress, Cost, CqHandle, OutOfWindow, PostError, Posted, ProdIdx, Provider,
    SendFlags, Sge, SqPos, WcOpcode, WcStatus, WorkCompletion, WorkRequest, WqHandle, mmio,
};
pub use wire::{NativeCqe, NativeOp, NativeSge, NativeWqe, flags};

/// The native format's provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Native;

/// Bytes per queue unit.
pub const UNIT_BYTES: u32 = 64;
/// Most units one WQE spans.
pub const MAX_UNITS: u32 = 16;

#[inline(always)]
fn nonempty(sges: &[Sge]) -> impl Iterator<Item = &Sge> {
    sges.iter().filter(|s| s.length != 0)
}

/// Units a request occupies.
#[inline(always)]
#[must_use]
pub fn units_for(wr: &WorkRequest<'_>) -> u32 {
    wire::WqeRepr::from_request(wr, SendFlags::empty(), 0).needed_units()
}

#[inline(always)]
fn unit_ptr(wq: &WqHandle, at: ProdIdx, k: u32) -> u64 {
    let slot = at.0.wrapping_add(k) & wq.entries.wrapping_sub(1);
    wq.buf.wrapping_add(u64::from(slot) * u64::from(UNIT_BYTES))
}

/// Writes a WQE of any kind: its [`WqeRepr`](wire::WqeRepr), extension units first, the header
/// last.
///
/// # Safety
/// As [`Provider::post_checked`].
#[inline(always)]
unsafe fn write(wq: &WqHandle, pos: SqPos, wr: &WorkRequest<'_>, fl: SendFlags) -> Posted {
    let at = pos.unit;
    let repr = wire::WqeRepr::from_request(wr, fl, at.0);
    let units = u32::from(repr.units);
    let mut out = [0u8; UNIT_BYTES as usize];
    for k in 1..units {
        let dst = unit_ptr(wq, at, k);
        let unit = repr.unit(k, &mut out);
        if let Ok(full) = <[u8; 64]>::try_from(unit) {
            // SAFETY: unit `k` is inside the WQE's reserved units (caller).
            unsafe { mmio::write_seg(dst as *mut [u8; 64], full) };
        } else if !unit.is_empty() {
            // SAFETY: as above; a partial unit (the inline tail) is shorter than a unit.
            unsafe { mmio::copy_bytes(dst as *mut u8, unit) };
        }
    }
    // SAFETY: unit 0 is the first reserved unit; written last so a reader that sees the header
    // sees the extension units too (ordering is provided by the doorbell anyway).
    unsafe { mmio::write_seg(unit_ptr(wq, at, 0) as *mut NativeWqe, repr.header()) };
    let next = at.add(units);
    let cost = Cost { units, packets: 0 };
    Posted::new(pos, cost, u64::from(next.0).to_le_bytes())
}

impl Provider for Native {
    type Sq = WqHandle;
    type Rq = WqHandle;

    const NAME: &'static str = "native";
    const SQ_UNIT_BYTES: u32 = UNIT_BYTES;
    const MAX_INLINE_BYTES: u32 = (MAX_UNITS - 1) * UNIT_BYTES;
    const MAX_WQE_UNITS: u32 = MAX_UNITS;
    const HAS_DOORBELL_RECORD: bool = false;
    const WQE_COUNTER_BITS: u32 = 32;
    const CQ_INDEX_BITS: u32 = 32;
    const DEVICE_TAG: u32 = 1;
    const ATOMIC_RESULT_BIG_ENDIAN: bool = false;

    #[inline(always)]
    fn cost(_wq: &WqHandle, wr: &WorkRequest<'_>) -> Cost {
        Cost {
            units: units_for(wr),
            packets: 0,
        }
    }

    fn check(wq: &WqHandle, wr: &WorkRequest<'_>) -> Result<Cost, PostError> {
        let nsge =
            gda_hal::provider::check_common(wq, wr, wq.max_inline.min(Self::MAX_INLINE_BYTES))?;
        if nsge > 1 + 4 * (MAX_UNITS as usize - 1) {
            return Err(PostError::TooManySges {
                n: nsge,
                max: wq.max_sge,
            });
        }
        let units = units_for(wr);
        if units > MAX_UNITS || units > wq.entries {
            return Err(PostError::WqeTooLarge {
                units,
                max: wq.entries.min(MAX_UNITS),
            });
        }
        Ok(Cost { units, packets: 0 })
    }

    /// Writes the checked request's [`WqeRepr`](wire::WqeRepr) (its unit count is the one
    /// `check` derived from the same `Repr`).
    #[inline(always)]
    unsafe fn post_checked(req: &Checked<'_, Self>, at: SqPos, flags: SendFlags) -> Posted {
        // SAFETY: forwarded: `check` accepted the request and the caller reserved its units.
        unsafe { write(req.queue(), at, req.request(), flags) }
    }

    unsafe fn ring_sq(wq: &WqHandle, posted: &Posted) {
        mmio::wqe_to_dbrec_fence();
        // SAFETY: `wq.db` is the queue's 8-byte doorbell word (caller).
        unsafe { mmio::store_u64_release(wq.db as *mut u64, u64::from_le_bytes(posted.doorbell)) };
    }

    unsafe fn post_recv<const N: usize>(rq: &WqHandle, at: ProdIdx, sges: &[Sge; N]) {
        let slot = at.0 & rq.entries.wrapping_sub(1);
        let base = rq.buf.wrapping_add(u64::from(slot) * u64::from(rq.stride));
        let cap = (rq.stride / 16).saturating_sub(1);
        let mut n = 0u32;
        for s in nonempty(sges) {
            if n >= cap {
                break;
            }
            let e = NativeSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
            // SAFETY: entry `1 + n` is inside the caller's slot (`n < stride / 16 - 1`).
            unsafe {
                mmio::write_seg(
                    base.wrapping_add(16 + u64::from(n) * 16) as *mut NativeSge,
                    e,
                )
            };
            n += 1;
        }
        // SAFETY: the header is the slot's first 16 bytes.
        unsafe { mmio::write_seg(base as *mut [u32; 4], [n, 0, 0, 0]) };
    }

    unsafe fn ring_rq(rq: &WqHandle, next: ProdIdx) {
        mmio::wqe_to_dbrec_fence();
        // SAFETY: `rq.dbrec` is the receive queue's 8-byte producer word (caller).
        unsafe { mmio::store_u64_release(rq.dbrec as *mut u64, u64::from(next.0)) };
    }

    unsafe fn poll_cq(cq: &CqHandle, ci: u32) -> Option<WorkCompletion> {
        let ring = gda_hal::Ring::new(cq.entries)?;
        let addr = cq.buf.wrapping_add(u64::from(ring.slot(ci)) * 32);
        // SAFETY: `addr` is a CQE of the caller's CQ.
        let owner = unsafe { mmio::load_u8_acquire(addr.wrapping_add(31) as *const u8) };
        if owner != wire::owner_for(ci, ring.log2()) {
            return None;
        }
        mmio::dma_read_barrier();
        // SAFETY: as above; CQEs are 32-byte aligned.
        let c = unsafe { mmio::read_seg(addr as *const NativeCqe) };
        Some(c.completion())
    }

    unsafe fn update_cq_ci(cq: &CqHandle, ci: u32) {
        if cq.dbrec != 0 {
            // SAFETY: the CQ's consumer word (caller).
            unsafe { mmio::store_u64_release(cq.dbrec as *mut u64, u64::from(ci)) };
        }
    }

    unsafe fn poll_collapsed(
        _wq: &WqHandle,
        cq: &CqHandle,
        progress: &mut CollapsedProgress,
        rung: u64,
    ) -> Result<Option<WorkCompletion>, OutOfWindow> {
        let own = cq.buf.wrapping_add(31) as *const u8;
        let gen_at = cq.buf.wrapping_add(wire::GENERATION_OFFSET as u64) as *const u8;
        // Seqlock order: the generation before the owner byte. The writer invalidates the owner
        // before it writes a new body (and generation), so a valid owner read after the
        // generation proves no rewrite had begun when the generation was read.
        // SAFETY: slot 0 of the caller's CQ.
        let g1 = unsafe { mmio::load_u8_acquire(gen_at) };
        // SAFETY: as above.
        let o1 = unsafe { mmio::load_u8_acquire(own) };
        if o1 == 0 {
            return Ok(None);
        }
        mmio::dma_read_barrier();
        // SAFETY: as above.
        let c = unsafe { mmio::read_seg(cq.buf as *const NativeCqe) };
        // Rewritten in place: accept only a CQE that did not change while it was read.
        mmio::dma_read_barrier();
        // SAFETY: as above.
        let (o2, g2) = unsafe { (mmio::load_u8_acquire(own), mmio::load_u8_acquire(gen_at)) };
        if o1 != o2 || g1 != g2 {
            return Ok(None);
        }
        let before = progress.complete_below();
        progress.observe(c.counter, rung)?;
        Ok((progress.complete_below() != before).then(|| c.completion()))
    }
}

impl NativeCqe {
    /// The work completion this CQE reports.
    #[must_use]
    pub fn completion(&self) -> WorkCompletion {
        let opcode = match self.opcode {
            0 => WcOpcode::Send,
            1 => WcOpcode::RdmaWrite,
            2 => WcOpcode::RdmaRead,
            3 => WcOpcode::CompSwap,
            4 => WcOpcode::FetchAdd,
            128 => WcOpcode::Recv,
            129 => WcOpcode::RecvRdmaWithImm,
            _ => WcOpcode::Other,
        };
        WorkCompletion {
            status: WcStatus::from_raw(u32::from(self.status)).unwrap_or(WcStatus::GeneralErr),
            opcode,
            wqe_counter: self.counter,
            byte_len: self.byte_len,
            imm: (self.flags & wire::cqe_flags::HAS_IMM != 0).then_some(self.imm),
            qpn: self.qpn,
            vendor_err: self.vendor_err,
            is_recv: self.flags & wire::cqe_flags::RECV != 0,
        }
    }
}
