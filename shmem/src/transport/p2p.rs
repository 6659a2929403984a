//! P2P: the target's heap is mapped into this address space; puts are stores, atomics are CPU
//! atomics. Every access goes through `gda_hal::sym` (signal words through `gda_hal::mmio`'s
//! acquire loads and release stores).

use std::sync::atomic::{Ordering, fence};

use gda_hal::{Provider, mmio, sym};

use super::TransportKind;
use super::{Amo, Net, Transport};
use crate::error::Result;
use crate::statics::DATA_TAG;
use crate::types::{SignalOp, Width};

/// A PE reached by load/store: a peer's heap mapped here, or this PE's own heap.
pub(crate) struct P2p {
    /// The first byte of the target's segment in this address space.
    base: *mut u8,
    /// The first byte of the target's static data here (null when the job has none; no
    /// offset reaches it then, see `Pe::at`).
    data: *mut u8,
    /// The target is this PE.
    local: bool,
}

impl P2p {
    /// The route to the segment mapped at `base` and the static data at `data` (both kept
    /// mapped while the route is used).
    pub(crate) fn new(base: *mut u8, data: *mut u8, local: bool) -> Self {
        Self { base, data, local }
    }

    /// The target's byte at `off` in this address space (`shmem_ptr`).
    pub(crate) fn mapped(&self, off: usize) -> *mut u8 {
        self.at(off)
    }

    /// The target's byte at `off` (its segment, or its static data at [`DATA_TAG`] and above).
    #[inline(always)]
    fn at(&self, off: usize) -> *mut u8 {
        // `wrapping_add`: no `unsafe` needed to form the address; every caller's offset is
        // range-checked inside the segment or the static data, so it is the same as `add`.
        if off >= DATA_TAG {
            self.data.wrapping_add(off - DATA_TAG)
        } else {
            self.base.wrapping_add(off)
        }
    }
}

/// Atomic load (acquire) of the `w`-wide operand at `addr`.
///
/// # Safety
/// `addr` must be valid, aligned to the width, and accessed only atomically by others.
#[inline(always)]
pub(crate) unsafe fn load(addr: *const u8, w: Width) -> u64 {
    match w {
        // SAFETY: valid, aligned, atomically accessed (caller).
        Width::W32 => u64::from(unsafe { mmio::load_u32_acquire(addr.cast()) }),
        // SAFETY: as above.
        Width::W64 => unsafe { mmio::load_u64_acquire(addr.cast()) },
    }
}

impl<P: Provider> Transport<P> for P2p {
    #[inline]
    fn kind(&self) -> TransportKind {
        if self.local {
            TransportKind::Local
        } else {
            TransportKind::P2p
        }
    }

    #[inline]
    fn put(&self, _: &Net<P>, off: usize, src: &[u8]) -> Result<()> {
        // SAFETY: `off..off + len` is range-checked inside the target's segment, mapped at
        // `base`; `src` is a Rust slice (it may be this PE's own heap through `local_ptr`, so
        // overlap is allowed).
        unsafe { sym::sym_copy(self.at(off), src.as_ptr(), src.len()) };
        Ok(())
    }

    #[inline]
    unsafe fn get(&self, _: &Net<P>, off: usize, dst: *mut u8, len: usize) -> Result<()> {
        // Stores the target made before it published them (a release fence, store or RMW
        // that this PE has observed) are visible to the copy.
        fence(Ordering::Acquire);
        // SAFETY: the source is range-checked in the mapping; `dst` is valid (caller); may
        // overlap (the self route).
        unsafe { sym::sym_copy(dst, self.at(off), len) };
        Ok(())
    }

    #[inline]
    fn get_nbi(&self, net: &Net<P>, dst_off: usize, src_off: usize, len: usize) -> Result<()> {
        // A copy completes at once. The destination is this PE's own segment (route `me`).
        let dst = net.local(dst_off);
        // SAFETY: `dst_off..+len` is range-checked in this PE's segment, valid for writes.
        unsafe { Transport::<P>::get(self, net, src_off, dst, len) }
    }

    #[inline]
    fn signal(&self, _: &Net<P>, off: usize, value: u64, op: SignalOp) -> Result<()> {
        let p = self.at(off).cast::<u64>();
        // Release (both arms): the data stores of the put before happen-before the signal.
        match op {
            // SAFETY: an aligned u64 inside the target's heap, accessed atomically by all.
            SignalOp::Set => unsafe { mmio::store_u64_release(p, value) },
            SignalOp::Add => {
                // SAFETY: as above.
                unsafe { sym::fetch_add_u64_release(p, value) };
            }
        }
        Ok(())
    }

    #[inline]
    fn amo(&self, _: &Net<P>, off: usize, w: Width, op: Amo, _fetch: bool) -> Result<u64> {
        // SAFETY: an aligned operand of width `w` inside the target's heap (checked by the
        // caller), accessed atomically by every PE.
        Ok(unsafe { amo_at(self.at(off), w, op) })
    }

    #[inline]
    fn fence(&self) {
        // Later stores cannot pass earlier ones (x86: compiler fence only).
        fence(Ordering::Release);
    }

    #[inline]
    fn quiet(&self, _: &Net<P>) -> Result<()> {
        // Every earlier store and atomic is globally visible before anything after the quiet.
        fence(Ordering::SeqCst);
        Ok(())
    }

    #[inline]
    fn progress(&self) {}
}

/// `op` as a CPU atomic on the operand of width `w` at `p`; the old value. What every atomic
/// to a PE reached by load/store is: the P2P transport's, and the C ABI's fast path
/// (`crate::erased::P2pView`).
///
/// # Safety
/// `p` is an operand of width `w`, aligned to it, in memory every accessor updates atomically.
#[inline(always)]
pub(crate) unsafe fn amo_at(p: *mut u8, w: Width, op: Amo) -> u64 {
    if let Amo::Add(v) = op {
        // One locked add instead of a compare-and-swap loop.
        return match w {
            // SAFETY: an aligned operand, accessed atomically by all (caller).
            Width::W32 => u64::from(unsafe { sym::fetch_add_u32(p.cast(), v as u32) }),
            // SAFETY: as above.
            Width::W64 => unsafe { sym::fetch_add_u64(p.cast(), v) },
        };
    }
    match w {
        // SAFETY: an aligned operand, accessed atomically by all (caller).
        Width::W32 => u64::from(unsafe {
            sym::atomic_update_u32(p.cast(), |v| op.apply(u64::from(v), w).map(|n| n as u32))
        }),
        // SAFETY: as above.
        Width::W64 => unsafe { sym::atomic_update_u64(p.cast(), |v| op.apply(v, w)) },
    }
}
