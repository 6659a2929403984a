//! Per-context data-path state: which QP a completion belongs to.
//!
//! A CQ is polled through its context, and a completion names its QP only by number, so each
//! context keeps its QPs by number ([`ContextQps`]). What a QP's bookkeeping says about a
//! completion ([`Retired`]) comes through the [`Retire`] hook the QP module implements: the CQ
//! code never sees a QP's type, and this module sees neither.

use std::collections::HashMap;
use std::sync::RwLock;

use gda_hal::{WcOpcode, WorkCompletion};

/// What one QP's bookkeeping says about a completion it owns.
pub(crate) struct Retired {
    /// The work request's id.
    pub(crate) wr_id: u64,
    /// The requester opcode (send completions; bnxt CQEs do not carry it).
    pub(crate) opcode: Option<WcOpcode>,
    /// Bytes, for READ and atomics (bnxt CQEs do not carry it).
    pub(crate) byte_len: Option<u32>,
    /// The remote QP number.
    pub(crate) src_qp: u32,
}

/// A QP as completions see it: retires the work request a completion names.
pub(crate) trait Retire: Sync {
    /// The bookkeeping of the work request `wc` completes (and of every unsignalled one
    /// before it).
    fn retire(&self, wc: &WorkCompletion) -> Retired;
}

/// A QP of the map: a pointer, valid from `insert` until `remove` returns.
struct Entry(*const dyn Retire);

// SAFETY: the pointee is `Sync` (a `Retire`) and outlives the entry (the contract of `insert`).
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

/// The QPs of one context, by number (completions name a QP by number).
#[derive(Default)]
pub(crate) struct ContextQps {
    map: RwLock<HashMap<u32, Entry>>,
}

impl ContextQps {
    /// Adds QP `qpn`.
    ///
    /// # Safety
    /// `qp` stays alive until [`ContextQps::remove`] of `qpn` has returned.
    pub(crate) unsafe fn insert(&self, qpn: u32, qp: &(dyn Retire + 'static)) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(qpn, Entry(qp));
    }

    /// Removes QP `qpn` (before it is freed: no completion reaches it after this returns).
    pub(crate) fn remove(&self, qpn: u32) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&qpn);
    }

    /// The bookkeeping of the work request `wc` completes, if its QP is one of this context's.
    pub(crate) fn retire(&self, wc: &WorkCompletion) -> Option<Retired> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let e = map.get(&wc.qpn)?;
        // SAFETY: an entry's QP is alive until `remove` returns (the contract of `insert`), and
        // `remove` takes the write lock, so not while this read lock is held.
        Some(unsafe { &*e.0 }.retire(wc))
    }
}
