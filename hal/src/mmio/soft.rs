//! The software NIC's side of device-visible memory: what a device model does when it executes
//! work requests — "DMA" copies, publishing data before the completion, taking doorbell words,
//! remote atomics, and the CQE ownership byte stored last. Producers (the device functions)
//! never call these; they are apart from the producer's ordering rules in [`super`] so that
//! screen stays short. Re-exported there (`mmio::dma_copy`, …).

use core::sync::atomic::{AtomicU8, Ordering, fence};

/// Stores a byte with release ordering (a software NIC publishing a CQE's ownership byte last).
///
/// # Safety
/// `dst` must be valid for a 1-byte write; concurrent accessors must use atomic operations.
#[inline(always)]
pub unsafe fn store_u8_release(dst: *mut u8, value: u8) {
    // SAFETY: the caller guarantees a valid byte accessed only atomically.
    let cell = unsafe { AtomicU8::from_ptr(dst) };
    // ORDERING: Release pairs with the consumer's `load_u8_acquire`: the CQE body written before
    // is visible once the owner byte is.
    cell.store(value, Ordering::Release);
}

/// A software device reading or writing host memory by "DMA": copies `len` bytes from `src` to
/// `dst` (the ranges may overlap, as a loopback transfer within one region can).
///
/// # Safety
/// Both ranges must be valid for `len` bytes (the device model has checked them against a
/// registered memory region).
#[inline(always)]
pub unsafe fn dma_copy(dst: *mut u8, src: *const u8, len: usize) {
    // ORDERING: plain stores; the device publishes them with `dma_publish` before the
    // completion that reports them.
    if len == 8 {
        // The most common size (a 64-bit put, an atomic result) without a libc call.
        // SAFETY: both ranges are valid for 8 bytes (caller); unaligned access is allowed.
        unsafe {
            dst.cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned())
        };
        return;
    }
    // SAFETY: the caller guarantees both ranges are valid; `copy` tolerates overlap.
    unsafe { core::ptr::copy(src, dst, len) }
}

/// Orders a software device's data stores before the completion (or doorbell-record) store
/// that announces them ("remote writes visible before the completion").
///
/// ORDERING: pairs with the consumer's Acquire load of the CQE ownership byte.
#[inline(always)]
pub fn dma_publish() {
    fence(Ordering::Release);
}

/// Takes (reads and clears) a 64-bit doorbell word, so a software NIC notices every doorbell
/// store even when two carry the same value.
///
/// # Safety
/// `addr` must be valid and 8-byte aligned; writers must store whole words.
#[inline(always)]
pub unsafe fn take_u64(addr: *mut u64) -> u64 {
    // SAFETY: the caller guarantees a valid, aligned location.
    let cell = unsafe { core::sync::atomic::AtomicU64::from_ptr(addr) };
    // ORDERING: AcqRel — Acquire pairs with the producer's fenced doorbell store.
    cell.swap(0, Ordering::AcqRel)
}

/// Atomically applies `f` to the naturally aligned 4- or 8-byte integer at `addr` (a NIC
/// executing a remote atomic) and returns the old value; other width → `None`.
///
/// # Safety
/// `addr` must be valid for `bytes` bytes and aligned to `bytes`; every concurrent access to it
/// must be atomic.
#[inline]
pub unsafe fn dma_atomic_rmw(addr: u64, bytes: u32, f: impl Fn(u64) -> u64) -> Option<u64> {
    use core::sync::atomic::{AtomicU32, AtomicU64};
    match bytes {
        8 => {
            // SAFETY: valid, 8-byte aligned, atomically accessed (caller).
            let cell = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
            // ORDERING: AcqRel — the RMW is a synchronisation point between initiators.
            cell.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(f(v)))
                .ok()
        }
        4 => {
            // SAFETY: valid, 4-byte aligned, atomically accessed (caller).
            let cell = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
            // ORDERING: as above.
            cell.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(f(u64::from(v)) as u32)
            })
            .ok()
            .map(u64::from)
        }
        _ => None,
    }
}
