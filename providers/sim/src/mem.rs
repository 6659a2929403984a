//! Memory regions: keys, access flags and the checks every DMA passes.
//!
//! Keys are 32-bit values drawn from the operating system's CSPRNG, so a key cannot be guessed
//! from another; a forged key, a key of another protection domain, or a key
//! whose region was deregistered fails the lookup. Every byte the engine touches is inside a
//! region that granted the access.

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
}

impl MrInner {
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
/// key fails at once; the cached `Arc` keeps the region's memory alive meanwhile.
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

struct Bump<'a>(&'a AtomicU64);

impl Drop for Bump<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl MrTable {
    /// [`MrTable::check_local`] through `cache`.
    pub fn check_local_cached(
        &self,
        cache: &mut KeyCache,
        pd: u32,
        lkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(), Fault> {
        self.cached(
            cache,
            lkey,
            |k| self.check_local(pd, k, addr, len, need),
            |mr| check(mr, pd, addr, len, need),
        )
    }

    /// [`MrTable::check_remote`] through `cache`.
    pub fn check_remote_cached(
        &self,
        cache: &mut KeyCache,
        pd: u32,
        rkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(), Fault> {
        self.cached(
            cache,
            rkey,
            |k| self.check_remote(pd, k, addr, len, need),
            |mr| check(mr, pd, addr, len, need),
        )
    }

    fn cached(
        &self,
        cache: &mut KeyCache,
        key: u32,
        slow: impl FnOnce(u32) -> Result<Arc<MrInner>, Fault>,
        fast: impl FnOnce(&MrInner) -> Result<(), Fault>,
    ) -> Result<(), Fault> {
        // ORDERING: Acquire pairs with `remove`'s Release bump.
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((k, g, mr)) = &cache.entry {
            if *k == key && *g == generation {
                return fast(mr);
            }
        }
        let mr = slow(key)?;
        cache.entry = Some((key, generation, mr));
        Ok(())
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
