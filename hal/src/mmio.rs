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

use core::sync::atomic::{AtomicU8, AtomicU32, Ordering, compiler_fence, fence};

use bytemuck::Pod;

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

/// Orders a software device's read of a doorbell/record before its reads of the WQEs it covers.
///
/// ORDERING: pairs with the producer's `wqe_to_dbrec_fence` + Release doorbell-record store.
#[inline(always)]
pub fn dma_acquire() {
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

// ---------------------------------------------------------------------------------------------
// Symmetric memory (the SHMEM layer's P2P transport and its own heap).
//
// A PE's symmetric heap is shared memory: peers on the same host store into it through their own
// mapping of it (P2P), the NIC writes it by DMA (RDMA), and the owner reads it while both happen.
// No Rust reference to it is ever formed; every access is one of the functions below, each with
// the ordering it carries. Visibility of plain copies is published separately: by a release fence
// (SHMEM `fence`), a SeqCst fence (SHMEM `quiet`), or a release store/RMW of a signal word.
//
// They live in a submodule only so that they can follow the unit tests above without moving them
// (this section was appended); they are re-exported here and used as `mmio::sym_copy` etc.

pub use symmetric::{
    atomic_update_u32, atomic_update_u64, fetch_add_u32, fetch_add_u64, fetch_add_u64_release,
    sym_copy, sym_fill, sym_read, sym_write,
};

/// Accesses of symmetric memory (see the section comment above).
mod symmetric {
    use super::{AtomicU32, Ordering, Pod};

    /// Copies `len` bytes of symmetric memory (a P2P put or get, a staging copy). The ranges may
    /// overlap (a put from a PE's heap into the same heap through the self route).
    ///
    /// # Safety
    /// `src` must be valid for `len` bytes of reads and `dst` for `len` bytes of writes. Other
    /// agents may access the bytes concurrently only in ways the SHMEM memory model allows (the
    /// result of racing plain accesses is the bytes, not undefined behaviour, because neither side
    /// holds a Rust reference and both ranges are plain shared memory).
    #[inline(always)]
    pub unsafe fn sym_copy(dst: *mut u8, src: *const u8, len: usize) {
        // ORDERING: plain stores; published by the caller's fence, quiet or signal.
        if len == 8 {
            // The hot size (`shmem_p` of a 64-bit word) without a libc call, even when `len` is only
            // known at run time.
            // SAFETY: both ranges are valid for 8 bytes (caller); unaligned access is allowed.
            unsafe {
                dst.cast::<u64>()
                    .write_unaligned(src.cast::<u64>().read_unaligned());
            }
            return;
        }
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if len >= wide::MIN && wide::disjoint(dst, src, len) && wide::available() {
            // SAFETY: both ranges are valid for `len` bytes (caller) and do not overlap
            // (checked); the CPU has AVX2 (checked).
            unsafe { wide::copy(dst, src, len) };
            return;
        }
        // SAFETY: the caller guarantees both ranges are valid; `copy` tolerates overlap.
        unsafe { core::ptr::copy(src, dst, len) }
    }

    /// The copy for large symmetric transfers on x86-64 with AVX2.
    ///
    /// Why not `memmove`: glibc moves 4 KiB–L2-sized blocks with `rep movsb` on CPUs that
    /// advertise ERMS/FSRM, and on AMD Zen that is 10–30 % slower than a plain 32-byte vector
    /// loop for cache-resident data (measured on this project's EPYC CI machine with
    /// `cargo bench --bench sym_copy`; the README lists the figures). Above
    /// [`PREFETCH_FROM`] the data streams from L3, and software prefetch of both the source and
    /// the destination a fixed distance ahead keeps the loads and the stores' ownership requests
    /// in flight (another 3–7 % over `memmove` at 512 KiB–1 MiB). Non-temporal stores were
    /// measured too and lose at every size here (they bypass the L3 the reader would hit), so
    /// they are not used.
    ///
    /// Only for disjoint ranges (a forward copy of overlapping ranges would read bytes it has
    /// already overwritten); `sym_copy` sends everything else to `memmove`.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    mod wide {
        use core::arch::x86_64::{
            __m256i, _MM_HINT_T0, _mm_prefetch, _mm256_loadu_si256, _mm256_store_si256,
            _mm256_storeu_si256,
        };

        /// Below this `memmove`'s own vector code is as fast (it uses `rep movsb` only above).
        pub const MIN: usize = 4096;
        /// From here on the loop prefetches (below it the data is L1/L2 resident and the
        /// prefetches only cost issue slots).
        const PREFETCH_FROM: usize = 128 * 1024;
        /// Prefetch distance in bytes.
        const AHEAD: usize = 1024;
        /// Bytes per loop iteration: four 32-byte vectors.
        const STEP: usize = 128;

        /// Whether the CPU has AVX2 (`std` caches the answer after the first query).
        #[inline]
        pub fn available() -> bool {
            std::is_x86_feature_detected!("avx2")
        }

        /// Whether `[dst, dst+len)` and `[src, src+len)` do not overlap.
        #[inline]
        pub fn disjoint(dst: *mut u8, src: *const u8, len: usize) -> bool {
            let (d, s) = (dst as usize, src as usize);
            d.abs_diff(s) >= len
        }

        /// Copies `len >= MIN` bytes.
        ///
        /// # Safety
        /// Both ranges are valid for `len` bytes, do not overlap, and the CPU has AVX2.
        #[target_feature(enable = "avx2")]
        pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
            debug_assert!(len >= MIN);
            if len >= PREFETCH_FROM {
                // SAFETY: as this function's contract.
                unsafe { body::<true>(dst, src, len) }
            } else {
                // SAFETY: as this function's contract.
                unsafe { body::<false>(dst, src, len) }
            }
        }

        /// The loop, with or without prefetch.
        ///
        /// # Safety
        /// As [`copy`].
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn body<const PREFETCH: bool>(dst: *mut u8, src: *const u8, len: usize) {
            // The first vector with unaligned forms; then on from the destination's next
            // 32-byte boundary, so that every store of the loop is aligned (a store that
            // crosses a cache line costs two, a load that does is cheaper: loads are what is
            // left unaligned, as in glibc's own vector loop).
            // SAFETY: `len >= MIN > 32`: the first 32 bytes lie inside both ranges.
            unsafe { _mm256_storeu_si256(dst.cast(), _mm256_loadu_si256(src.cast())) };
            let mut i = 32 - (dst as usize & 31);
            while i + STEP <= len {
                // SAFETY: `i + STEP <= len`, so every access below stays inside both ranges;
                // `dst + i` is 32-byte aligned (`i` starts at the boundary and moves by
                // multiples of 32), the loads are unaligned forms. Prefetch addresses are formed
                // with `wrapping_add` (they may lie past the end) and prefetches never fault.
                unsafe {
                    if PREFETCH {
                        _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(i + AHEAD).cast());
                        _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(i + AHEAD + 64).cast());
                        _mm_prefetch::<_MM_HINT_T0>(
                            dst.wrapping_add(i + AHEAD).cast_const().cast(),
                        );
                        _mm_prefetch::<_MM_HINT_T0>(
                            dst.wrapping_add(i + AHEAD + 64).cast_const().cast(),
                        );
                    }
                    let s = src.add(i).cast::<__m256i>();
                    let d = dst.add(i).cast::<__m256i>();
                    let a = _mm256_loadu_si256(s);
                    let b = _mm256_loadu_si256(s.add(1));
                    let c = _mm256_loadu_si256(s.add(2));
                    let e = _mm256_loadu_si256(s.add(3));
                    _mm256_store_si256(d, a);
                    _mm256_store_si256(d.add(1), b);
                    _mm256_store_si256(d.add(2), c);
                    _mm256_store_si256(d.add(3), e);
                }
                i += STEP;
            }
            while i + 32 <= len {
                // SAFETY: `i + 32 <= len`: one vector inside both ranges.
                unsafe {
                    let v = _mm256_loadu_si256(src.add(i).cast());
                    _mm256_storeu_si256(dst.add(i).cast(), v);
                }
                i += 32;
            }
            if i < len {
                // The last 1..31 bytes: one vector ending at `len` (it rewrites some bytes
                // already copied with the same values; `len >= MIN > 32` keeps it in range, and
                // the ranges are disjoint, so the rewritten bytes are unchanged source bytes).
                // SAFETY: `len - 32 .. len` lies inside both ranges.
                unsafe {
                    let v = _mm256_loadu_si256(src.add(len - 32).cast());
                    _mm256_storeu_si256(dst.add(len - 32).cast(), v);
                }
            }
        }
    }

    /// Fills `len` bytes of symmetric memory with `byte` (zeroing a fresh allocation).
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of writes.
    #[inline]
    pub unsafe fn sym_fill(dst: *mut u8, byte: u8, len: usize) {
        // SAFETY: the caller guarantees `dst` is valid for `len` bytes.
        // ORDERING: plain stores; published by the barrier that ends the collective allocation.
        unsafe { core::ptr::write_bytes(dst, byte, len) }
    }

    /// Loads one element of symmetric memory with a volatile load (peers and the NIC store into it
    /// behind the compiler's back, so the load must not be hoisted out of a polling loop).
    ///
    /// # Safety
    /// `src` must be valid for reads of `size_of::<T>()` bytes and aligned for `T`.
    #[inline(always)]
    pub unsafe fn sym_read<T: Pod>(src: *const T) -> T {
        // SAFETY: the caller guarantees `src` is valid and aligned; any bit pattern is a `T` (Pod).
        // ORDERING: none beyond program order; callers needing acquire use `load_*_acquire`.
        unsafe { core::ptr::read_volatile(src) }
    }

    /// Stores one element of symmetric memory with a volatile store.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `size_of::<T>()` bytes and aligned for `T`.
    #[inline(always)]
    pub unsafe fn sym_write<T: Pod>(dst: *mut T, value: T) {
        // SAFETY: the caller guarantees `dst` is valid and aligned.
        // ORDERING: none beyond program order; published by the caller's fence, quiet or signal.
        unsafe { core::ptr::write_volatile(dst, value) }
    }

    /// Atomically replaces the 32-bit word at `addr` by `f(old)` when `f` returns `Some` (a CPU
    /// atomic on a peer's symmetric memory: SHMEM AMOs over P2P); returns the old value. When `f`
    /// returns `None` nothing is stored (a failed compare-and-swap, a fetch).
    ///
    /// # Safety
    /// `addr` must be valid for 4 bytes, 4-byte aligned, and accessed only atomically by others
    /// (CPU atomics of other PEs, NIC atomics).
    #[inline(always)]
    pub unsafe fn atomic_update_u32(addr: *mut u32, f: impl FnMut(u32) -> Option<u32>) -> u32 {
        // SAFETY: valid, aligned and atomically accessed (caller).
        let cell = unsafe { AtomicU32::from_ptr(addr) };
        // ORDERING: AcqRel on success — a SHMEM atomic both publishes this PE's earlier stores and
        // observes those published by the PE that stored the old value; Acquire on the no-store
        // path (a fetch) for the latter half.
        match cell.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
            Ok(v) | Err(v) => v,
        }
    }

    /// As [`atomic_update_u32`], for a 64-bit word.
    ///
    /// # Safety
    /// `addr` must be valid for 8 bytes, 8-byte aligned, and accessed only atomically by others.
    #[inline(always)]
    pub unsafe fn atomic_update_u64(addr: *mut u64, f: impl FnMut(u64) -> Option<u64>) -> u64 {
        // SAFETY: valid, aligned and atomically accessed (caller).
        let cell = unsafe { core::sync::atomic::AtomicU64::from_ptr(addr) };
        // ORDERING: as `atomic_update_u32`.
        match cell.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
            Ok(v) | Err(v) => v,
        }
    }

    /// Adds `value` to the 64-bit word at `addr` (one `lock xadd` on x86, where a
    /// compare-and-swap loop would retry under contention); returns the old value (a SHMEM
    /// atomic add over P2P).
    ///
    /// # Safety
    /// `addr` must be valid for 8 bytes, 8-byte aligned, and accessed only atomically by others.
    #[inline(always)]
    pub unsafe fn fetch_add_u64(addr: *mut u64, value: u64) -> u64 {
        // SAFETY: valid, aligned and atomically accessed (caller).
        let cell = unsafe { core::sync::atomic::AtomicU64::from_ptr(addr) };
        // ORDERING: AcqRel, as `atomic_update_u64`.
        cell.fetch_add(value, Ordering::AcqRel)
    }

    /// As [`fetch_add_u64`], for a 32-bit word.
    ///
    /// # Safety
    /// `addr` must be valid for 4 bytes, 4-byte aligned, and accessed only atomically by others.
    #[inline(always)]
    pub unsafe fn fetch_add_u32(addr: *mut u32, value: u32) -> u32 {
        // SAFETY: valid, aligned and atomically accessed (caller).
        let cell = unsafe { AtomicU32::from_ptr(addr) };
        // ORDERING: AcqRel, as `atomic_update_u32`.
        cell.fetch_add(value, Ordering::AcqRel)
    }

    /// Adds `value` to the 64-bit word at `addr` with release ordering; returns the old value (a
    /// SHMEM signal "add" over P2P).
    ///
    /// # Safety
    /// `addr` must be valid for 8 bytes, 8-byte aligned, and accessed only atomically by others.
    #[inline(always)]
    pub unsafe fn fetch_add_u64_release(addr: *mut u64, value: u64) -> u64 {
        // SAFETY: valid, aligned and atomically accessed (caller).
        let cell = unsafe { core::sync::atomic::AtomicU64::from_ptr(addr) };
        // ORDERING: Release — the data stores of a put-with-signal happen-before the signal, and
        // pair with the waiter's Acquire load of it.
        cell.fetch_add(value, Ordering::Release)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn symmetric_accesses_move_the_bytes() {
            let mut a = [0u8; 32];
            let src: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
            // SAFETY: both arrays are valid for the lengths used; they are distinct.
            unsafe { sym_copy(a.as_mut_ptr(), src.as_ptr(), 8) };
            assert_eq!(a[..8], src[..8]);
            // Overlapping copy inside one buffer (the self route).
            // SAFETY: `a` holds 32 bytes; both ranges lie in it.
            unsafe { sym_copy(a.as_mut_ptr().add(4), a.as_ptr(), 12) };
            assert_eq!(a[4..16], [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0]);
            // SAFETY: as above.
            unsafe { sym_fill(a.as_mut_ptr(), 0, 32) };
            assert_eq!(a, [0; 32]);
            let mut w = [0u64; 2];
            // SAFETY: `w` is two aligned u64s owned by this test.
            unsafe {
                sym_write(&raw mut w[1], 5);
                assert_eq!(sym_read(&raw const w[1]), 5);
                assert_eq!(fetch_add_u64_release(&raw mut w[1], 3), 5);
                assert_eq!(atomic_update_u64(&raw mut w[1], |v| Some(v * 2)), 8);
                // `None` stores nothing and still returns the current value.
                assert_eq!(atomic_update_u64(&raw mut w[1], |_| None), 16);
            }
            assert_eq!(w[1], 16);
            let mut h = [7u32; 2];
            // SAFETY: an aligned u32 owned by this test.
            let old = unsafe { atomic_update_u32(&raw mut h[0], |v| v.checked_sub(8)) };
            assert_eq!((old, h[0]), (7, 7));
        }

        /// Deterministic filler that differs between positions and between calls.
        fn pattern(buf: &mut [u8], seed: u8) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8;
            }
        }

        #[test]
        fn large_copies_match_memmove_at_every_edge() {
            // Around both thresholds of the wide path (4 KiB, 128 KiB), with every source and
            // destination misalignment in 0..4 and tails of 0..31 bytes, guard bytes on both
            // sides of the destination untouched.
            const GUARD: usize = 64;
            let lens = [
                4095, 4096, 4097, 4127, 4128, 4159, 5000, 65_536, 131_071, 131_072, 131_105,
                300_001,
            ];
            let mut src = std::vec![0u8; 300_001 + 8];
            let mut dst = std::vec![0u8; 300_001 + 8 + 2 * GUARD];
            let mut compared = 0;
            for len in lens {
                for so in 0..4 {
                    for d_off in 0..4 {
                        pattern(&mut src, len as u8 ^ so as u8);
                        pattern(&mut dst, 0xa5);
                        let before = dst.clone();
                        let d0 = GUARD + d_off;
                        // SAFETY: `src[so..so + len]` and `dst[d0..d0 + len]` lie inside two
                        // distinct vectors.
                        unsafe { sym_copy(dst.as_mut_ptr().add(d0), src.as_ptr().add(so), len) };
                        assert_eq!(
                            dst[d0..d0 + len],
                            src[so..so + len],
                            "len {len} {so}/{d_off}"
                        );
                        assert_eq!(dst[..d0], before[..d0], "bytes before, len {len}");
                        assert_eq!(
                            dst[d0 + len..],
                            before[d0 + len..],
                            "bytes after, len {len}"
                        );
                        compared += 1;
                    }
                }
            }
            assert_eq!(compared, 12 * 16);
        }

        #[test]
        fn large_overlapping_copies_move_like_memmove() {
            // Overlap in both directions goes to memmove, which the forward vector loop could
            // not do; compared against `<[u8]>::copy_within`.
            let len = 200_000;
            let mut compared = 0;
            for shift in [1usize, 31, 32, 4096, 100_000] {
                for forward in [true, false] {
                    let mut buf = std::vec![0u8; len + shift];
                    pattern(&mut buf, shift as u8);
                    let mut want = buf.clone();
                    let (from, to) = if forward { (0, shift) } else { (shift, 0) };
                    want.copy_within(from..from + len, to);
                    let p = buf.as_mut_ptr();
                    // SAFETY: both ranges lie inside `buf`.
                    unsafe { sym_copy(p.add(to), p.add(from), len) };
                    assert!(buf == want, "shift {shift}, forward {forward}");
                    compared += 1;
                }
            }
            assert_eq!(compared, 10);
        }
    }
}
