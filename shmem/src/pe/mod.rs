//! The PE handle: its state, and the routines built on the transports (`transport::Transport`).
//!
//! | file | what |
//! |---|---|
//! | `config.rs` | [`Config`], [`TransportPolicy`], the `GDA_SHMEM_*` variables |
//! | `init.rs` | collective init: heap segment, exchange of PE information, building the routes |
//! | `heap.rs` | the symmetric heap API (`malloc`, `free`, local access) |
//! | `rma.rs` | put/get (blocking, nbi, single-element, strided), put-with-signal |
//! | `amo.rs` | atomics |
//! | `wait.rs` | quiet, fence, waits and tests, liveness of peers |
//! | `teardown.rs` | abort, finalize, drop |
//!
//! Teams are in [`team`], active sets in [`active`]; the collectives of both are one
//! implementation, the collective engine in `group.rs`. The transports are in
//! `crate::transport`.

pub mod active;
mod amo;
mod config;
mod device_ctx;
mod group;
mod heap;
mod init;
mod lock;
mod rma;
pub mod team;
mod teardown;
mod wait;

use std::cell::{Cell, RefCell};
use std::time::Duration;

use gda_hal::Provider;

use crate::boot::Bootstrap;
use crate::error::{Result, ShmemError};
use crate::heap::Allocator;
use crate::memory::{LocalSeg, PeerSeg};
use crate::statics::StaticSeg;
use team::Teams;
// The trait only for its methods: `pe::Transport` is the old name of `TransportKind`.
use crate::transport::Transport as _;
use crate::transport::{Net, Route};

pub(crate) use crate::transport::Liveness;
pub use crate::transport::TransportKind;
/// The former name of [`TransportKind`], kept so existing callers compile.
pub use TransportKind as Transport;
pub use config::{Config, TransportPolicy, parse_size};

/// Team slots (world, shared, and up to 14 split teams at once).
pub(crate) const TEAM_SLOTS: usize = 16;
/// Synchronisation words per team slot.
pub(crate) const PSYNC_WORDS: usize = 64;
/// Reduction/collect scratch per team slot.
pub(crate) const SCRATCH: usize = 64 << 10;
pub(crate) const TEAM_BYTES: usize = PSYNC_WORDS * 8 + SCRATCH;
/// Private staging memory for RDMA sources, destinations and atomic results.
const BOUNCE: usize = 4 << 20;

/// A processing element: its symmetric heap, its routes to every PE and its teams.
///
/// Created collectively ([`Pe::init`], or the helpers in [`crate::launch`]); one thread uses
/// it (`!Sync`). Dropping it is collective too (a final barrier over the bootstrap channel, so
/// no peer still writes into this heap).
pub struct Pe<P: Provider> {
    me: u32,
    n: u32,
    timeout: Duration,
    /// Routes to every PE, staging, the RDMA domain. Dropped before the mappings below (the
    /// queues, then the QPs and regions that point into them).
    net: Net<P>,
    /// This PE's segment in this address space.
    base: *mut u8,
    heap_size: usize,
    /// Bytes of the static data (0 without; its address is `net.data`).
    data_len: usize,
    /// Segment offset of the team area (after the user heap).
    internal: usize,
    /// Segment offset of staging: the end of the symmetric part.
    bounce: usize,
    heap: RefCell<Allocator>,
    /// The job heap's id (rank 0's pick at init): every `Sym` of this heap carries it.
    pub(crate) heap_id: u64,
    same_host: Vec<bool>,
    pub(crate) teams: RefCell<Teams>,
    boot: RefCell<Box<dyn Bootstrap>>,
    finalized: Cell<bool>,
    /// Where the next `_any` test of each array starts (the index after the one it last
    /// returned), so a series of calls returns every element that keeps satisfying the
    /// condition, as OpenSHMEM 1.5 asks; keyed by the array (heap, offset, length), bounded.
    pub(crate) any_next: RefCell<std::collections::HashMap<(u64, usize, usize), usize>>,
    // Kept alive, and dropped (in `Drop`) after `net`: the mapped peer heaps, this PE's heap.
    peer_segs: std::mem::ManuallyDrop<Vec<PeerSeg>>,
    seg: std::mem::ManuallyDrop<LocalSeg>,
    /// Same-host peers' static data mapped here, and this PE's (whose mapping over the
    /// program's data stays when it drops).
    statics: std::mem::ManuallyDrop<(Vec<gda_os::shm::Segment>, Option<StaticSeg>)>,
    /// The final barrier failed (a peer gave up): peers may still be storing into this heap,
    /// so its mapping is never unmapped (see `Drop`).
    unsafe_to_unmap: Cell<bool>,
    /// Segment offset of the device work area (`crate::device`).
    pub(crate) device_work: usize,
    /// Where state shared with device code lives (the RDMA queues' memory).
    pub(crate) device_memory: gda_hal::control::QueueMemory,
    /// The device context, once built ([`Pe::device_context`]).
    pub(crate) device: crate::device::Cell,
}

// SAFETY: the raw pointers are into mappings the PE owns (or keeps alive); moving the PE to
// another thread moves that ownership. Not `Sync`: the routines use `Cell` state.
unsafe impl<P: Provider> Send for Pe<P> {}

impl<P: Provider> Pe<P> {
    /// This PE's number.
    #[must_use]
    pub fn my_pe(&self) -> u32 {
        self.me
    }

    /// Number of PEs.
    #[must_use]
    pub fn n_pes(&self) -> u32 {
        self.n
    }

    /// The transport that reaches `pe`.
    pub fn transport_to(&self, pe: u32) -> Result<TransportKind> {
        Ok(self.route(pe)?.kind())
    }

    /// Whether `pe` runs on this host (what `TEAM_SHARED` holds).
    pub fn same_host(&self, pe: u32) -> bool {
        self.same_host.get(pe as usize).copied().unwrap_or(false)
    }

    /// The configured wait bound.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The route to `pe`: the one place a routine learns how `pe` is reached.
    #[inline]
    fn route(&self, pe: u32) -> Result<&Route<P>> {
        // The error only when there is none: `ok_or` built it on every call and then dropped
        // it, through drop glue that was not inlined — 11 % of the samples of `gda shmem rates
        // --transport p2p`'s atomic loop.
        match self.net.routes.get(pe as usize) {
            Some(r) => Ok(r),
            None => Err(ShmemError::BadPe { pe, n_pes: self.n }),
        }
    }
}
