//! Arbitrary 32 bytes as a bnxt CQE: parsing never panics, re-encoding round-trips, and the
//! provider's poll (phase check + decode) never panics either.
#![no_main]

use gda_bnxt::Bnxt;
use gda_bnxt::wire::{Cqe32, CqeRepr};
use gda_hal::{CqHandle, Provider};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 32 {
        return;
    }
    let cqe: Cqe32 = bytemuck::pod_read_unaligned(&data[..32]);
    let r = CqeRepr::parse(&cqe);
    assert_eq!(CqeRepr::parse(&r.emit()), r);
    let _ = r.completion(1);
    let mut ring = [cqe];
    let cq = CqHandle {
        buf: ring.as_mut_ptr() as u64,
        entries: 1,
        cqe_bytes: 32,
        ..CqHandle::default()
    };
    // SAFETY: a one-CQE ring owned here.
    let _ = unsafe { Bnxt::poll_cq(&cq, u32::from(data.get(32).copied().unwrap_or(0))) };
});
