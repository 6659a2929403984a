//! The one place where gda touches memory that a NIC reads or writes.
//!
//! Every raw-pointer, volatile and atomic access of device-visible memory in gda funnels through
//! this module, so the ordering rules can be reviewed in one screen. Three kinds of memory are
//! involved, and each has its own operations:
//!
//! | memory | who writes | operations |
//! |---|---|---|
//! | work-queue rings (host or device memory the NIC fetches by DMA) | producer | [`write_seg`], [`copy_bytes`], then [`wqe_to_dbrec_fence`] |
//! | doorbell records (host memory the NIC polls / reads on doorbell) | producer | [`store_be32_release`] |
//! | doorbell / BlueFlame registers (MMIO, write-combining) | producer | [`store_doorbell64`], [`copy_blueflame_chunk`], [`wc_flush`] |
//! | completion-queue rings (the NIC writes by DMA) | NIC | [`load_u8_acquire`], [`read_seg`], [`dma_read_barrier`] |
//!
//! The required order for a post (rdma-core's `post_send_db`, nic-formats.md §B.3) is:
//! WQE stores → device-visible release fence → doorbell-record store → write-combining flush →
//! 64-bit doorbell store → write-combining flush. Each function below names the step it is.
//!
//! On a GPU the same steps are system-scope fences (`__threadfence_system`, `fence.sc.sys`) and
//! release stores; the CPU mapping here is what a CPU thread standing in for a kernel needs.
//!
//! The other side — a software NIC executing requests (DMA copies, the CQE owner byte stored
//! last, remote atomics) — is in `mmio/soft.rs`, re-exported here. Symmetric-memory accesses of
//! the SHMEM layer are not NIC ordering rules and live in [`crate::sym`].

use core::sync::atomic::{AtomicU8, AtomicU32, Ordering, compiler_fence, fence};

use bytemuck::Pod;

mod soft;
pub use soft::{dma_atomic_rmw, dma_copy, dma_publish, store_u8_release, take_u64};

/// Stores one hardware segment (a `#[repr(C)]` Pod struct) into queue memory.
///
/// # Safety
/// `dst` must be valid for writes of `size_of::<T>()` bytes and aligned for `T`, and no other
/// thread may be accessing those bytes (the caller owns the reserved queue slots).
#[inline(always)]
pub unsafe fn write_seg<T: Pod>(dst: *mut T, value: T) {
    // SAFETY: the caller guarantees `dst` is valid, aligned and exclusively owned.
    // ORDERING: a plain (volatile) store; it is published to the NIC by `wqe_to_dbrec_fence`.
    unsafe { core::ptr::write_volatile(dst, value) }
}

/// Loads one hardware segment from queue memory (CQEs, or WQEs when a software NIC executes).
///
/// # Safety
/// `src` must be valid for reads of `size_of::<T>()` bytes and aligned for `T`.
#[inline(always)]
pub unsafe fn read_seg<T: Pod>(src: *const T) -> T {
    // SAFETY: the caller guarantees `src` is valid and aligned; any bit pattern is a valid `T`
    // because `T: Pod`.
    // ORDERING: plain load; callers order it after an ownership check with `dma_read_barrier`.
    unsafe { core::ptr::read_volatile(src) }
}

/// Copies raw payload bytes (inline data) into queue memory.
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes and owned by the caller; the ranges
/// must not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(dst: *mut u8, src: &[u8]) {
    // SAFETY: the caller guarantees `dst` is valid for `src.len()` bytes and does not overlap.
    // ORDERING: plain stores; published by `wqe_to_dbrec_fence` like every other WQE byte.
    unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) }
}

/// Orders every earlier WQE store before the doorbell-record store that follows (step 2 of a
/// post; rdma-core's `udma_to_device_barrier`).
///
/// ORDERING: pairs with the NIC's fetch of WQEs after it sees the new doorbell record or
/// doorbell. On x86-64 stores to write-back memory are not reordered with each other (TSO), so
/// a compiler fence suffices; on AArch64 the barrier must cover the outer-shareable domain where
/// DMA masters live (`dmb oshst`), which `fence(Release)` (`dmb ish`) does not.
#[inline(always)]
pub fn wqe_to_dbrec_fence() {
    #[cfg(target_arch = "x86_64")]
    compiler_fence(Ordering::Release);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction; no memory operands.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}

/// Stores a big-endian 32-bit doorbell-record word with release ordering (step 3 of a post), or
/// a CQ consumer index.
///
/// # Safety
/// `dst` must be valid for a 4-byte write and 4-byte aligned; concurrent accessors must use
/// atomic operations only.
#[inline(always)]
pub unsafe fn store_be32_release(dst: *mut u32, value_be: u32) {
    // SAFETY: the caller guarantees a valid, aligned 4-byte location accessed only atomically.
    let cell = unsafe { AtomicU32::from_ptr(dst) };
    // ORDERING: Release pairs with `wqe_to_dbrec_fence` above (WQE bytes are visible before the
    // record) and with the NIC's (or the software NIC's Acquire) read of the record.
    cell.store(value_be, Ordering::Release);
}

/// Loads a 32-bit doorbell-record word with acquire ordering (the software NIC's side of
/// [`store_be32_release`]).
///
/// # Safety
/// `src` must be valid for a 4-byte read and 4-byte aligned; concurrent accessors must use
/// atomic operations only.
#[inline(always)]
pub unsafe fn load_u32_acquire(src: *const u32) -> u32 {
    // SAFETY: the caller guarantees a valid, aligned location accessed only atomically.
    let cell = unsafe { AtomicU32::from_ptr(src.cast_mut()) };
    // ORDERING: Acquire pairs with the producer's Release store of the record: WQE bytes written
    // before it are visible after this load.
    cell.load(Ordering::Acquire)
}

/// Flushes write-combining buffers (steps 4 and 6 of a post; rdma-core's `mmio_flush_writes`).
///
/// ORDERING: on x86-64 `sfence` orders the doorbell-record store before the (write-combining)
/// doorbell store, and drains the doorbell before a lock protecting it is released. AArch64 uses
/// `dsb st`.
#[inline(always)]
pub fn wc_flush() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no memory operands and is available on every x86-64 CPU.
    unsafe {
        core::arch::x86_64::_mm_sfence();
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction; no memory operands.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}

/// Stores the 8-byte doorbell value to a doorbell (UAR) register as one 64-bit transaction
/// (step 5 of a post).
///
/// `bytes` are stored exactly as given (the value is already in the device's byte order).
///
/// # Safety
/// `dst` must be a valid, 8-byte aligned doorbell register (or memory standing in for one).
#[inline(always)]
pub unsafe fn store_doorbell64(dst: *mut u64, bytes: [u8; 8]) {
    // SAFETY: the caller guarantees `dst` is valid and 8-byte aligned. A volatile u64 store is one
    // 64-bit transaction on 64-bit targets, which the doorbell requires (a torn doorbell rings
    // with a wrong producer index).
    // ORDERING: preceded by `wc_flush` (record before doorbell) and followed by `wc_flush`.
    unsafe { core::ptr::write_volatile(dst, u64::from_ne_bytes(bytes)) }
}

/// Copies one 64-byte chunk of a WQE to a BlueFlame register as eight 64-bit stores (the
/// write-combining-friendly pattern the hardware expects).
///
/// The source is read through a raw pointer (queue memory the device reads concurrently is
/// never borrowed as a Rust reference).
///
/// # Safety
/// `dst` must be valid for 64 bytes of writes and 8-byte aligned; `src` valid for 64 bytes of
/// reads.
#[inline(always)]
pub unsafe fn copy_blueflame_chunk(dst: *mut u64, src: *const u8) {
    let mut i = 0;
    while i < 8 {
        // SAFETY: `i < 8`, so both offsets stay inside the 64 bytes the caller vouched for.
        // ORDERING: write-combined; flushed by the caller's `wc_flush`.
        unsafe {
            let q = src.add(i * 8).cast::<u64>().read_unaligned();
            core::ptr::write_volatile(dst.add(i), q);
        }
        i += 1;
    }
}

/// Loads a byte the NIC writes (a CQE's ownership byte) with acquire ordering.
///
/// # Safety
/// `src` must be valid for a 1-byte read; concurrent writers must be the device or atomic stores.
#[inline(always)]
pub unsafe fn load_u8_acquire(src: *const u8) -> u8 {
    // SAFETY: the caller guarantees a valid byte accessed only atomically or by DMA.
    let cell = unsafe { AtomicU8::from_ptr(src.cast_mut()) };
    // ORDERING: Acquire, then `dma_read_barrier` before reading the rest of the CQE.
    cell.load(Ordering::Acquire)
}

/// Orders the ownership check of a CQE before the reads of its other fields (rdma-core's
/// `udma_from_device_barrier`).
///
/// ORDERING: pairs with the device writing the CQE body before its ownership byte.
#[inline(always)]
pub fn dma_read_barrier() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction; no memory operands.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "aarch64"))]
    fence(Ordering::Acquire);
}

/// Loads a 64-bit word that another agent stores atomically (a software NIC's doorbell
/// register stand-in).
///
/// # Safety
/// `src` must be valid and 8-byte aligned; concurrent writers must store whole words.
#[inline(always)]
pub unsafe fn load_u64_acquire(src: *const u64) -> u64 {
    // SAFETY: the caller guarantees a valid, aligned location accessed by whole-word stores.
    let cell = unsafe { core::sync::atomic::AtomicU64::from_ptr(src.cast_mut()) };
    // ORDERING: Acquire pairs with the producer's doorbell store after its Release fence.
    cell.load(Ordering::Acquire)
}

/// Stores a 64-bit word with release ordering (the native doorbell).
///
/// # Safety
/// `dst` must be valid and 8-byte aligned; concurrent accessors must use atomic operations.
#[inline(always)]
pub unsafe fn store_u64_release(dst: *mut u64, value: u64) {
    // SAFETY: the caller guarantees a valid, aligned location.
    let cell = unsafe { core::sync::atomic::AtomicU64::from_ptr(dst) };
    // ORDERING: Release publishes the WQE stores before it to the device's Acquire load.
    cell.store(value, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_land_in_memory_as_given() {
        let mut rec = [0u32; 2];
        // SAFETY: `rec[1]` is a valid aligned u32 owned by this test.
        unsafe { store_be32_release(&raw mut rec[1], 0x1234u32.to_be()) };
        assert_eq!(rec[1].to_ne_bytes(), [0, 0, 0x12, 0x34]);
        let mut db = 0u64;
        // SAFETY: `db` is a valid aligned u64.
        unsafe { store_doorbell64(&raw mut db, [1, 2, 3, 4, 5, 6, 7, 8]) };
        assert_eq!(db.to_ne_bytes(), [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut bf = [0u64; 8];
        let chunk: [u8; 64] = core::array::from_fn(|i| i as u8);
        // SAFETY: `bf` is 64 valid aligned bytes.
        unsafe { copy_blueflame_chunk(bf.as_mut_ptr(), chunk.as_ptr()) };
        assert_eq!(bytemuck::cast_slice::<u64, u8>(&bf), &chunk[..]);
    }
}
