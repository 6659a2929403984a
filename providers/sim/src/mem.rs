//! Memory regions: keys, access flags and the checks every DMA passes.
//!
//! Keys are 32-bit values drawn from the operating system's CSPRNG, so a key cannot be guessed
//! from another; a forged key, a key of another protection domain, or a key
//! whose region was deregistered fails the lookup. Every byte the engine touches is inside a
//! region that granted the access.
//!
//! **Deregistration during a transfer.** A key check hands out an `Arc<MrInner>`, but memory
//! registered with [`Pd::register`](crate::Pd::register) belongs to the caller, who may free it
//! as soon as the region is deregistered — so holding the `Arc` does not keep it mapped. Every
//! DMA access therefore *pins* its regions ([`Pins`]): it counts itself in `inflight`, re-checks
//! `live`, copies at most [`DMA_CHUNK_BYTES`], and unpins; deregistration clears `live` and
//! then waits until `inflight` is zero ([`MrInner::retire`]). A transfer that spans the
//! deregistration stops at the next chunk and fails as with a stale key (`REM_ACCESS_ERR` /
//! `LOC_PROT_ERR`, as on hardware), and the deregistering thread waits for one chunk at most.
//! A counter, not a lock: a loopback READ within one region pins it twice.

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::buf::DmaBuf;

pub use gda_hal::control::Access;

/// A registered region.
#[derive(Debug)]
pub struct MrInner {
    /// Protection domain.
    pub pd: u32,
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights.
    pub access: Access,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// Memory owned by the region (for `alloc_mr`), kept alive while the NIC uses it.
    pub(crate) _owned: Option<DmaBuf>,
    /// Still registered: cleared by [`MrInner::retire`] before the memory may go away.
    pub(crate) live: AtomicBool,
    /// DMA accesses in progress ([`Pins`]); [`MrInner::retire`] waits for none.
    pub(crate) inflight: AtomicU32,
    /// The memory as peers in other processes can map it, for direct placement
    /// (`wire::direct`), and their grants.
    pub(crate) shared: Option<crate::shared::SharedRegion>,
}

/// Most bytes one DMA copy moves while its regions are pinned: deregistration waits for one
/// chunk at most (about a millisecond), and a longer transfer re-checks between chunks.
pub(crate) const DMA_CHUNK_BYTES: usize = 4 << 20;

impl MrInner {
    /// A region of `len` bytes at `addr`, registered (live) and unpinned.
    pub(crate) fn new(
        pd: u32,
        addr: u64,
        len: u64,
        access: Access,
        (lkey, rkey): (u32, u32),
        owned: Option<DmaBuf>,
        shared: Option<crate::shared::SharedRegion>,
    ) -> Self {
        Self {
            pd,
            addr,
            len,
            access,
            lkey,
            rkey,
            _owned: owned,
            live: AtomicBool::new(true),
            inflight: AtomicU32::new(0),
            shared,
        }
    }

    /// Deregisters: no DMA access starts after this returns, and none is still running — except
    /// when called on an engine thread, which never holds a pin while it could deregister (and
    /// must not wait on itself). The keys must already be gone from the table.
    pub(crate) fn retire(&self) {
        // ORDERING: SeqCst pairs with `Pins::take`'s SeqCst increment and load: either a pinner's
        // load sees `false`, or this thread's load below sees its increment and waits for it.
        self.live.store(false, Ordering::SeqCst);
        // Peers placing directly: their grants close, and (not on an engine thread) the
        // placements in progress end, or are abandoned after `PLACEMENT_WAIT` for all of them
        // together. The memory goes back onto private pages (dropping `_backing`) only after
        // this process's own accesses have ended too (below).
        let until = crate::shared::withdrawal_deadline();
        let _backing = self.shared.as_ref().and_then(|s| s.retire(until));
        if until.is_none() {
            return;
        }
        let mut spins = 0u32;
        // ORDERING: SeqCst (above); it also acquires the unpinning Release decrements, so
        // every byte a copy moved happens-before the caller frees the memory.
        while self.inflight.load(Ordering::SeqCst) != 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Whether `[addr, addr + len)` is inside the region.
    #[must_use]
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .zip(self.addr.checked_add(self.len))
                .is_some_and(|(end, last)| end <= last)
    }
}

/// Why an access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No region has this key (forged or stale).
    BadKey,
    /// The region belongs to another protection domain.
    WrongPd,
    /// The range leaves the region.
    OutOfBounds,
    /// The region does not grant the access.
    NoAccess,
    /// An atomic target is not naturally aligned.
    Misaligned,
}

/// The region tables of one NIC.
#[derive(Debug, Default)]
pub struct MrTable {
    lkeys: RwLock<HashMap<u32, Arc<MrInner>>>,
    rkeys: RwLock<HashMap<u32, Arc<MrInner>>>,
    /// Bumped on every deregistration, so [`KeyCache`] entries go stale with the key.
    generation: AtomicU64,
}

/// A one-entry key cache for one QP's hot path (the engine checks the same few keys over and
/// over). An entry is used only while the table's generation is unchanged, so a deregistered
/// key fails at once; the copies themselves pin the region ([`Pins`]).
#[derive(Debug, Default)]
pub struct KeyCache {
    entry: Option<(u32, u64, Arc<MrInner>)>,
}

impl MrTable {
    /// Inserts a region under its keys; `false` if a key is already taken.
    pub fn insert(&self, mr: Arc<MrInner>) -> bool {
        let mut l = self.lkeys.write().unwrap_or_else(|e| e.into_inner());
        let mut r = self.rkeys.write().unwrap_or_else(|e| e.into_inner());
        if l.contains_key(&mr.lkey) || r.contains_key(&mr.rkey) {
            return false;
        }
        l.insert(mr.lkey, mr.clone());
        r.insert(mr.rkey, mr);
        true
    }

    /// Removes a region (its keys become stale at once).
    pub fn remove(&self, lkey: u32, rkey: u32) {
        // ORDERING: bumped after the keys are gone (below, via the write locks' release); a
        // reader that sees the new generation misses its cache and finds no key.
        let _bump = Bump(&self.generation);
        self.lkeys
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&lkey);
        self.rkeys
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&rkey);
    }

    /// Whether either key is in use.
    #[must_use]
    pub fn key_in_use(&self, k: u32) -> bool {
        self.lkeys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&k)
            || self
                .rkeys
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&k)
    }

    /// Checks a local access (by lkey).
    pub fn check_local(
        &self,
        pd: u32,
        lkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<Arc<MrInner>, Fault> {
        let mr = self
            .lkeys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&lkey)
            .cloned()
            .ok_or(Fault::BadKey)?;
        check(&mr, pd, addr, len, need)?;
        Ok(mr)
    }

    /// Checks a remote access (by rkey).
    pub fn check_remote(
        &self,
        pd: u32,
        rkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<Arc<MrInner>, Fault> {
        let mr = self
            .rkeys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&rkey)
            .cloned()
            .ok_or(Fault::BadKey)?;
        check(&mr, pd, addr, len, need)?;
        Ok(mr)
    }
}

/// Regions pinned for one DMA access (at most [`DMA_CHUNK_BYTES`]): while it lives, none of
/// them finishes deregistering, so their memory stays valid.
pub(crate) struct Pins<'a>(&'a [&'a MrInner]);

impl<'a> Pins<'a> {
    /// Pins every region, or none if one is deregistered (or being deregistered).
    pub(crate) fn take(regions: &'a [&'a MrInner]) -> Option<Self> {
        for (i, r) in regions.iter().enumerate() {
            // ORDERING: SeqCst pairs with `MrInner::retire` (see there).
            r.inflight.fetch_add(1, Ordering::SeqCst);
            if !r.live.load(Ordering::SeqCst) {
                for r in &regions[..=i] {
                    // ORDERING: Release pairs with `retire`'s SeqCst load (nothing was copied).
                    r.inflight.fetch_sub(1, Ordering::Release);
                }
                return None;
            }
        }
        Some(Self(regions))
    }
}

impl Drop for Pins<'_> {
    fn drop(&mut self) {
        for r in self.0 {
            // ORDERING: Release publishes the copy's accesses to `retire`'s load.
            r.inflight.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Copies `n` bytes from `src` to `dst` in chunks of at most [`DMA_CHUNK_BYTES`], each while
/// every region of `regions` is pinned; `Err(Fault::BadKey)` once one is deregistered (the
/// chunks before were copied, none after).
///
/// # Safety
/// Each range lies in memory that stays valid while the regions of `regions` are registered:
/// inside one of them (checked against it for the access) or owned by the caller.
pub(crate) unsafe fn dma_copy_pinned(
    regions: &[&MrInner],
    dst: *mut u8,
    src: *const u8,
    n: usize,
) -> Result<(), Fault> {
    let mut off = 0;
    while off < n {
        let k = (n - off).min(DMA_CHUNK_BYTES);
        let _pins = Pins::take(regions).ok_or(Fault::BadKey)?;
        // SAFETY: the caller's ranges, valid while the regions are registered, which the pins
        // guarantee until they drop after the copy.
        unsafe { gda_hal::mmio::dma_copy(dst.add(off), src.add(off), k) };
        off += k;
    }
    Ok(())
}

/// [`gda_hal::mmio::dma_atomic_rmw`] while `regions` are pinned; `Err(Fault::BadKey)` when one
/// is deregistered, `Ok(None)` for a width other than 4 or 8.
///
/// # Safety
/// As `dma_atomic_rmw`, with `addr` valid while the regions are registered.
pub(crate) unsafe fn dma_atomic_pinned(
    regions: &[&MrInner],
    addr: u64,
    width: u32,
    f: impl Fn(u64) -> u64,
) -> Result<Option<u64>, Fault> {
    let _pins = Pins::take(regions).ok_or(Fault::BadKey)?;
    // SAFETY: the caller's contract; the pins keep the memory registered meanwhile.
    Ok(unsafe { gda_hal::mmio::dma_atomic_rmw(addr, width, f) })
}

struct Bump<'a>(&'a AtomicU64);

impl Drop for Bump<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl MrTable {
    /// [`MrTable::check_local`] through `cache`; the region is borrowed from the cache.
    pub fn check_local_cached<'c>(
        &self,
        cache: &'c mut KeyCache,
        pd: u32,
        lkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<&'c MrInner, Fault> {
        self.cached(
            cache,
            lkey,
            |k| self.check_local(pd, k, addr, len, need),
            |mr| check(mr, pd, addr, len, need),
        )
    }

    /// [`MrTable::check_remote`] through `cache`; the region is borrowed from the cache.
    pub fn check_remote_cached<'c>(
        &self,
        cache: &'c mut KeyCache,
        pd: u32,
        rkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<&'c MrInner, Fault> {
        self.cached(
            cache,
            rkey,
            |k| self.check_remote(pd, k, addr, len, need),
            |mr| check(mr, pd, addr, len, need),
        )
    }

    fn cached<'c>(
        &self,
        cache: &'c mut KeyCache,
        key: u32,
        slow: impl FnOnce(u32) -> Result<Arc<MrInner>, Fault>,
        fast: impl FnOnce(&MrInner) -> Result<(), Fault>,
    ) -> Result<&'c MrInner, Fault> {
        // ORDERING: Acquire pairs with `remove`'s Release bump.
        let generation = self.generation.load(Ordering::Acquire);
        let hit = matches!(&cache.entry, Some((k, g, _)) if *k == key && *g == generation);
        if !hit {
            cache.entry = Some((key, generation, slow(key)?));
        }
        let mr = cache.entry.as_ref().map(|e| &*e.2).ok_or(Fault::BadKey)?;
        if hit {
            fast(mr)?;
        }
        Ok(mr)
    }
}

fn check(mr: &MrInner, pd: u32, addr: u64, len: u64, need: Access) -> Result<(), Fault> {
    if mr.pd != pd {
        return Err(Fault::WrongPd);
    }
    if !mr.contains(addr, len) {
        return Err(Fault::OutOfBounds);
    }
    if !mr.access.contains(need) {
        return Err(Fault::NoAccess);
    }
    Ok(())
}
