//! Symmetric memory: the SHMEM layer's P2P transport and its own heap.
//!
//! A PE's symmetric heap is shared memory: peers on the same host store into it through their own
//! mapping of it (P2P), the NIC writes it by DMA (RDMA), and the owner reads it while both happen.
//! No Rust reference to it is ever formed; every access is one of the functions below, each with
//! the ordering it carries. Visibility of plain copies is published separately: by a release fence
//! (SHMEM `fence`), a SeqCst fence (SHMEM `quiet`), or a release store/RMW of a signal word.
//!
//! Apart from [`crate::mmio`] (the NIC's ordering rules): these accesses pair with other CPU
//! threads and with a NIC's DMA only through the fences and signal words the SHMEM layer uses.

use core::sync::atomic::{AtomicU32, Ordering};

use bytemuck::Pod;

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
    if len >= wide::MIN && len < wide::max() && wide::disjoint(dst, src, len) && wide::available() {
        // SAFETY: both ranges are valid for `len` bytes (caller) and do not overlap
        // (checked); the CPU has AVX2 (checked).
        unsafe { wide::copy(dst, src, len) };
        return;
    }
    // SAFETY: the caller guarantees both ranges are valid; `copy` tolerates overlap.
    unsafe { core::ptr::copy(src, dst, len) }
}

#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod wide;

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
            4095, 4096, 4097, 4127, 4128, 4159, 5000, 65_536, 131_071, 131_072, 131_105, 300_001,
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
