//! The multi-producer posting protocol (docs/architecture.md, "The seams"): many threads share one send queue.
//!
//! | step | mechanism |
//! |---|---|
//! | reserve | one atomic add on the producer position (`reserved`) claims `units`; with PSN tracking (bnxt) one CAS advances units, message count and PSN together |
//! | wait for room | until `position + units - complete_below <= capacity` (the ring, or less), polling the CQ |
//! | write | the provider's device function at the reserved position |
//! | ring in order | wait until `rung == position` (a ticket), ring, then `rung = position + units` |
//! | complete | one poller at a time widens CQE counters (window-checked) into `complete_below` |
//! | quiet (rung) | wait until every WQE **rung so far** is complete — recycles slots |
//! | quiet (all) | wait until every WQE **reserved so far** is rung, then complete — the user's quiet |
//!
//! Doorbells are rung by one producer at a time, in reservation order (lost doorbells on real
//! hardware came from concurrent doorbell stores, docs/lessons.md §3). A producer never waits on its
//! own unrung reservation: `post` writes and rings before returning, and the quiets only wait for
//! positions other producers have already reserved (docs/lessons.md §2).
//!
//! [`Counters`] is the provider-independent core (model-checked with loom in `tests/loom.rs`);
//! [`SendQueue`] binds it to a [`Provider`]'s device functions and a CQ.
//!
//! Every post takes the same path (`SendQueue::post_with`); only what writes the WQE differs:
//! [`SendQueue::post`] checks a [`WorkRequest`] once and hands the [`Checked`] request to
//! [`Provider::post_checked`]; [`SendQueue::post_checked`] posts a request checked earlier;
//! the typed methods ([`SendQueue::post_write_inline`], [`SendQueue::post_write`],
//! [`SendQueue::post_read`], [`SendQueue::post_send`], [`SendQueue::post_atomic`]) call the
//! provider's const-generic device functions after one compare against limits probed at
//! construction.

use core::marker::PhantomData;
use core::sync::atomic::Ordering;

use crate::handle::{Cost, CqHandle, PSN_MASK, Posted, QueueHandle, SqPos};
use crate::index::ProdIdx;
use crate::op::{SendFlags, WorkRequest};
use crate::progress::{CollapsedProgress, OutOfWindow};
use crate::provider::{Checked, PostError, Provider};
use crate::status::WcStatus;
use crate::sync::{AtomicU32, AtomicU64};
pub use crate::sync::{TimedOut, Waiter};

mod fast;
pub use fast::{FAST_MAX_INLINE_BYTES, FAST_MAX_SGES};

/// Why a posting-protocol call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SqError {
    /// The request does not fit the queue.
    Post(PostError),
    /// A wait ran out of time (`what` names it). The queue is poisoned if a reservation was
    /// left unwritten.
    Timeout {
        /// What was being waited for.
        what: &'static str,
    },
    /// A completion reported an error (the first one seen; later work is flushed).
    Completion {
        /// Its status.
        status: WcStatus,
        /// The hardware WQE counter it carried.
        wqe_counter: u32,
    },
    /// A CQE counter outside the rung window (a device or software bug, never progress).
    Window(OutOfWindow),
    /// An earlier producer timed out holding a reservation; the queue cannot make progress.
    Poisoned,
}

impl core::fmt::Display for SqError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Post(e) => write!(f, "cannot post: {e}"),
            Self::Timeout { what } => write!(f, "timed out waiting for {what}"),
            Self::Completion {
                status,
                wqe_counter,
            } => {
                write!(
                    f,
                    "work request {wqe_counter:#x} completed with error: {status}"
                )
            }
            Self::Window(e) => write!(f, "{e}"),
            Self::Poisoned => {
                f.write_str("send queue poisoned: a producer timed out holding a reservation")
            }
        }
    }
}

impl crate::error::Error for SqError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            Self::Post(e) => crate::error::Error::kind(e),
            Self::Timeout { .. } => ErrorKind::Timeout,
            Self::Completion { .. } => ErrorKind::Io,
            Self::Window(_) => ErrorKind::Device,
            Self::Poisoned => ErrorKind::InvalidState,
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SqError {}

impl From<PostError> for SqError {
    fn from(e: PostError) -> Self {
        Self::Post(e)
    }
}

/// How [`Counters::reserve`] packs the reservation word when PSNs are tracked: the unit
/// position (widened on read), the message count and the PSN advance in one compare-and-swap,
/// so every producer gets a consistent `(unit, msg, psn)` triple (bnxt's PSN-table entries are
/// then in order under any interleaving).
mod packed {
    pub const UNIT_BITS: u32 = 24;
    pub const MSG_BITS: u32 = 16;
    pub const UNIT_MASK: u64 = (1 << UNIT_BITS) - 1;
    pub const MSG_MASK: u64 = (1 << MSG_BITS) - 1;
    pub const PSN_SHIFT: u32 = UNIT_BITS + MSG_BITS;

    pub const fn unit(v: u64) -> u64 {
        v & UNIT_MASK
    }
    pub const fn msg(v: u64) -> u32 {
        ((v >> UNIT_BITS) & MSG_MASK) as u32
    }
    pub const fn psn(v: u64) -> u32 {
        (v >> PSN_SHIFT) as u32
    }
    pub const fn pack(unit: u64, msg: u32, psn: u32) -> u64 {
        (unit & UNIT_MASK)
            | ((msg as u64 & MSG_MASK) << UNIT_BITS)
            | (((psn & super::PSN_MASK) as u64) << PSN_SHIFT)
    }
    /// The free-running position whose low bits are `low`, at or above `floor` (the reserved
    /// position never runs more than 2^23 units ahead of completions; `SendQueue::new` and
    /// `Counters::new` bound the ring accordingly).
    pub const fn widen(low: u64, floor: u64) -> u64 {
        floor + (low.wrapping_sub(floor) & UNIT_MASK)
    }
}

/// Declares a posting-protocol mutator: crate-private, so nothing outside gda-hal can reserve
/// slots and never ring them, or claim completions the device never reported. The model checker
/// (`tests/loom.rs`) reaches them through the test-only `loom-internals` feature.
macro_rules! protocol_fn {
    ($(#[$m:meta])* fn $name:ident $($rest:tt)*) => {
        #[cfg(feature = "loom-internals")]
        $(#[$m])*
        #[doc = "\n\n*Exposed by the test-only `loom-internals` feature.*"]
        pub fn $name $($rest)*
        #[cfg(not(feature = "loom-internals"))]
        $(#[$m])*
        pub(crate) fn $name $($rest)*
    };
}

/// Largest ring (in units) whose positions the packed PSN-tracking reservation can widen.
pub const MAX_TRACKED_ENTRIES: u32 = 1 << 20;

/// The posting protocol's mutable state: everything the producers of one send queue share.
///
/// This is the one definition of that state for Rust producers ([`SendQueue`]) and for the
/// device API's C++ ones (`gda::SqState` in `device/include/gda/sq.hpp`): a `#[repr(C)]` block
/// whose size and offsets both sides assert, so a kernel and a host thread can post to one
/// queue at once. Positions are free-running 64-bit queue units.
///
/// It lives where the producers run (host memory, or GPU memory for a kernel); read-only
/// limits are kept apart from it ([`SqProto`]). Start it zeroed ([`SqShared::new`]).
#[repr(C)]
#[derive(Debug)]
pub struct SqShared {
    /// Next unreserved position (or the packed word, see [`packed`]).
    reserved: AtomicU64,
    /// Every position below is written and rung.
    rung: AtomicU64,
    /// End of the WQE whose doorbell is being (or was last) rung — stored *before* the doorbell,
    /// so a completion can never refer to a position above it.
    ring_bound: AtomicU64,
    /// Every WQE starting below is complete.
    complete_below: AtomicU64,
    /// Start + 1 of the newest signalled WQE rung (0: none).
    signaled_marker: AtomicU64,
    /// Start of the last rung WQE, plus one (0: none).
    last_rung_end_marker: AtomicU64,
    /// The poller's progress: newest completed start + 1 (0: none).
    newest_plus_one: AtomicU64,
    /// First error seen: `(status + 1) << 32 | wqe counter` (0: none).
    error: AtomicU64,
    /// The poller's lock (1: someone polls).
    cq_busy: AtomicU32,
    /// Normal CQ consumer index (owned by the poller holding `cq_busy`).
    cq_ci: AtomicU32,
    /// Non-zero: a producer gave up holding a reservation.
    poisoned: AtomicU32,
    _reserved: u32,
}

// The layout `gda::SqState` (device/include/gda/sq.hpp) asserts too; testing/rdma-ref compares
// every offset with the C++ compiler's.
#[cfg(not(loom))]
mod shared_layout {
    use super::SqShared;
    use core::mem::offset_of;
    static_assertions::assert_eq_size!(SqShared, [u8; 80]);
    static_assertions::const_assert_eq!(offset_of!(SqShared, complete_below), 24);
    static_assertions::const_assert_eq!(offset_of!(SqShared, error), 56);
    static_assertions::const_assert_eq!(offset_of!(SqShared, cq_busy), 64);
    static_assertions::const_assert_eq!(offset_of!(SqShared, poisoned), 72);
}

impl SqShared {
    /// The size, then the offsets of `rung`, `ring_bound`, `complete_below`, `signaled_marker`,
    /// `last_rung_end_marker`, `newest_plus_one`, `error`, `cq_busy`, `cq_ci`, `poisoned` (the
    /// fields are private; the device API's layout test compares these with C++'s).
    #[cfg(not(loom))]
    pub const LAYOUT: [usize; 11] = {
        use core::mem::offset_of;
        [
            core::mem::size_of::<Self>(),
            offset_of!(Self, rung),
            offset_of!(Self, ring_bound),
            offset_of!(Self, complete_below),
            offset_of!(Self, signaled_marker),
            offset_of!(Self, last_rung_end_marker),
            offset_of!(Self, newest_plus_one),
            offset_of!(Self, error),
            offset_of!(Self, cq_busy),
            offset_of!(Self, cq_ci),
            offset_of!(Self, poisoned),
        ]
    };

    /// Zeroed state: an empty queue at position 0.
    #[must_use]
    pub fn new() -> Self {
        Self {
            reserved: AtomicU64::new(0),
            rung: AtomicU64::new(0),
            ring_bound: AtomicU64::new(0),
            complete_below: AtomicU64::new(0),
            signaled_marker: AtomicU64::new(0),
            last_rung_end_marker: AtomicU64::new(0),
            newest_plus_one: AtomicU64::new(0),
            error: AtomicU64::new(0),
            cq_busy: AtomicU32::new(0),
            cq_ci: AtomicU32::new(0),
            poisoned: AtomicU32::new(0),
            _reserved: 0,
        }
    }
}

impl Default for SqShared {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a queue's [`SqShared`] lives: owned here (boxed, so its address never changes), or
/// memory the caller placed it in (GPU memory a kernel posts from).
enum Shared {
    #[cfg(feature = "std")]
    Owned(std::boxed::Box<SqShared>),
    External(core::ptr::NonNull<SqShared>),
}

impl Shared {
    #[inline(always)]
    fn get(&self) -> &SqShared {
        match self {
            #[cfg(feature = "std")]
            Self::Owned(b) => b,
            // SAFETY: `Counters::with_state`'s contract: valid, zero-initialised at first and
            // alive for as long as the counters.
            Self::External(p) => unsafe { p.as_ref() },
        }
    }
}

impl core::fmt::Debug for Shared {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.get().fmt(f)
    }
}

/// The shared counters of one send queue: the protocol over a [`SqShared`] and the queue's
/// window.
#[derive(Debug)]
pub struct Counters {
    /// Units that may be outstanding (reserved but not complete) at once: the ring, or less when
    /// the device's completion counter is too narrow to tell a full ring from an empty one.
    capacity: u64,
    /// Whether `reserved` is the packed `(unit, msg, psn)` word.
    tracks_psn: bool,
    s: Shared,
}

// SAFETY: `Counters` only reaches its state through atomics; the external state's owner
// guarantees it outlives the counters (`with_state` contract).
unsafe impl Send for Counters {}
// SAFETY: as above: every access to the shared state is atomic.
unsafe impl Sync for Counters {}

impl core::ops::Deref for Counters {
    type Target = SqShared;
    #[inline(always)]
    fn deref(&self) -> &SqShared {
        self.s.get()
    }
}

impl Counters {
    /// Counters for a ring of `entries` units, starting at position 0, all of which may be
    /// outstanding; no PSN tracking.
    #[cfg(feature = "std")]
    #[must_use]
    pub fn new(entries: u32) -> Self {
        Self::with_capacity(entries, false)
    }

    /// Counters of which at most `capacity` units may be outstanding (the ring, or less), also
    /// tracking message counts and PSNs if `tracks_psn` (then `capacity` is clamped to
    /// [`MAX_TRACKED_ENTRIES`] so positions can be widened). The state is owned (boxed).
    #[cfg(feature = "std")]
    #[must_use]
    pub fn with_capacity(capacity: u32, tracks_psn: bool) -> Self {
        Self::build(
            capacity,
            tracks_psn,
            Shared::Owned(std::boxed::Box::default()),
        )
    }

    /// As [`Counters::with_capacity`], over state the caller placed.
    ///
    /// # Safety
    /// `state` must be valid for reads and writes, aligned, zeroed (or [`SqShared::new`]) before
    /// the first post, used by no other queue, and outlive the counters. Other producers may
    /// use it at the same time only through this protocol (the device API's `sq.hpp`).
    #[must_use]
    pub unsafe fn with_state(
        capacity: u32,
        tracks_psn: bool,
        state: core::ptr::NonNull<SqShared>,
    ) -> Self {
        Self::build(capacity, tracks_psn, Shared::External(state))
    }

    fn build(capacity: u32, tracks_psn: bool, s: Shared) -> Self {
        let capacity = if tracks_psn {
            capacity.min(MAX_TRACKED_ENTRIES)
        } else {
            capacity
        };
        Self {
            capacity: u64::from(capacity.max(1)),
            tracks_psn,
            s,
        }
    }

    /// The shared state's address (for the device handle, [`SqProto`]).
    #[must_use]
    pub fn state_ptr(&self) -> *const SqShared {
        self.s.get()
    }

    protocol_fn! {
        /// Claims `cost.units` (and, when tracking PSNs, one message and `cost.packets` PSNs) and
        /// returns the start position with its [`SqPos`]. Never fails: the caller must then
        /// [`Counters::wait_room`], write, and [`Counters::ring_in_order`] — or [`Counters::poison`].
        fn reserve(&self, cost: Cost) -> (u64, SqPos) {
            if !self.tracks_psn {
                // ORDERING: Relaxed — the reservation only has to be unique; publication of the WQE
                // happens through `rung` (Release) below.
                let start = self
                    .reserved
                    .fetch_add(u64::from(cost.units), Ordering::Relaxed);
                return (start, SqPos::at_unit(start as u32));
            }
            // ORDERING: Relaxed, as above: the triple only has to be unique and consistent, which
            // the single compare-and-swap on one word gives.
            let mut cur = self.reserved.load(Ordering::Relaxed);
            loop {
                let next = packed::pack(
                    packed::unit(cur) + u64::from(cost.units),
                    packed::msg(cur).wrapping_add(1),
                    packed::psn(cur).wrapping_add(cost.packets),
                );
                match self.reserved.compare_exchange_weak(
                    cur,
                    next,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(v) => cur = v,
                }
            }
            // Our reservation is not rung, so `complete_below <= start`: widen above it.
            let start = packed::widen(packed::unit(cur), self.complete_below());
            let pos = SqPos {
                unit: ProdIdx(start as u32),
                msg: packed::msg(cur),
                psn: packed::psn(cur),
            };
            (start, pos)
        }
    }

    protocol_fn! {
        /// Waits until `[start, start + units)` is free, calling `progress` (a CQ poll) between
        /// checks.
        fn wait_room(
            &self,
            start: u64,
            units: u32,
            waiter: &mut Waiter,
            mut progress: impl FnMut() -> Result<(), SqError>,
        ) -> Result<(), SqError> {
            let end = start + u64::from(units);
            loop {
                // ORDERING: Acquire pairs with the poller's Release store: the NIC is done reading
                // the slots below `complete_below`.
                if end <= self.complete_below.load(Ordering::Acquire) + self.capacity {
                    return Ok(());
                }
                self.check_poison()?;
                progress()?;
                waiter.step().map_err(|_| SqError::Timeout {
                    what: "free send-queue slots",
                })?;
            }
        }
    }

    protocol_fn! {
        /// Waits for the ticket (`rung == start`), runs `ring` (doorbell record + doorbell), and
        /// passes the ticket on.
        fn ring_in_order(
            &self,
            start: u64,
            units: u32,
            waiter: &mut Waiter,
            ring: impl FnOnce(),
        ) -> Result<(), SqError> {
            // ORDERING: Acquire pairs with the previous producer's Release store of `rung`, so its
            // doorbell stores happen-before ours (doorbells reach the device in order).
            while self.rung.load(Ordering::Acquire) != start {
                self.check_poison()?;
                waiter.step().map_err(|_| SqError::Timeout {
                    what: "earlier producers to ring their doorbells",
                })?;
            }
            // ORDERING: Release before the doorbell: a poller that sees this WQE's CQE (which the
            // device writes after our doorbell) also sees the bound, so the window check accepts it.
            self.ring_bound
                .store(start + u64::from(units), Ordering::Release);
            ring();
            self.last_rung_end_marker
                .store(start + 1, Ordering::Relaxed);
            // ORDERING: Release hands the ticket (and our doorbell's effects) to the next producer
            // and to quiets reading `rung`.
            self.rung.store(start + u64::from(units), Ordering::Release);
            Ok(())
        }
    }

    protocol_fn! {
        /// Marks the queue unusable (a producer gave up holding a reservation).
        fn poison(&self) {
            self.poisoned.store(1, Ordering::Release);
        }
    }

    fn check_poison(&self) -> Result<(), SqError> {
        if self.poisoned.load(Ordering::Acquire) != 0 {
            Err(SqError::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Upper bound (exclusive) of positions a completion may refer to. Read it *after* reading a
    /// CQE: the bound is published before the doorbell that leads to the CQE.
    #[must_use]
    pub fn ring_bound(&self) -> u64 {
        self.ring_bound.load(Ordering::Acquire)
    }

    /// Position up to which doorbells are rung and handed on (the ticket).
    #[must_use]
    pub fn rung(&self) -> u64 {
        self.rung.load(Ordering::Acquire)
    }

    /// Every WQE starting below this is complete.
    #[must_use]
    pub fn complete_below(&self) -> u64 {
        self.complete_below.load(Ordering::Acquire)
    }

    protocol_fn! {
        /// Records completion progress (callers serialise: one poller at a time). Monotone.
        fn set_complete_below(&self, v: u64) {
            // ORDERING: Release pairs with `wait_room`/quiet Acquire loads.
            self.complete_below.fetch_max(v, Ordering::Release);
        }
    }

    /// Start + 1 of the newest rung WQE (0: none).
    #[must_use]
    pub fn last_rung_marker(&self) -> u64 {
        // ORDERING: Acquire on `rung` makes the marker stored before it visible.
        let _ = self.rung.load(Ordering::Acquire);
        self.last_rung_end_marker.load(Ordering::Relaxed)
    }

    /// Next unreserved position.
    #[must_use]
    pub fn reserved(&self) -> u64 {
        if !self.tracks_psn {
            return self.reserved.load(Ordering::Relaxed);
        }
        // The floor first: a floor read after the word could have passed it (another producer
        // reserving, ringing and completing in between), and the widening would wrap to 2^24
        // units ahead — a quiet then waits for work that never comes. Read before, it is at
        // most the position the word holds (the reservations it counts happened before the
        // completion that raised it, which its Acquire load sees).
        let floor = self.complete_below();
        // ORDERING: after the Acquire load above, so at least as new as what it covered.
        let v = self.reserved.load(Ordering::Relaxed);
        packed::widen(packed::unit(v), floor)
    }

    /// Units that may be outstanding at once.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Waits until every position below `target` has been rung.
    pub fn wait_rung(
        &self,
        target: u64,
        waiter: &mut Waiter,
        mut progress: impl FnMut() -> Result<(), SqError>,
    ) -> Result<(), SqError> {
        while self.rung() < target {
            self.check_poison()?;
            progress()?;
            waiter.step().map_err(|_| SqError::Timeout {
                what: "reserved work requests to be rung",
            })?;
        }
        Ok(())
    }

    /// Waits until the WQE whose start + 1 is `marker` (and everything before it) is complete.
    pub fn wait_complete(
        &self,
        marker: u64,
        waiter: &mut Waiter,
        mut progress: impl FnMut() -> Result<(), SqError>,
    ) -> Result<(), SqError> {
        while self.complete_below() < marker {
            self.check_poison()?;
            progress()?;
            waiter.step().map_err(|_| SqError::Timeout {
                what: "work requests to complete",
            })?;
        }
        Ok(())
    }

    /// Waits until every WQE rung before the call is complete ("quiet what I have rung"), for
    /// a device that reports every WQE.
    pub fn quiet_rung(
        &self,
        waiter: &mut Waiter,
        progress: impl FnMut() -> Result<(), SqError>,
    ) -> Result<(), SqError> {
        self.wait_complete(self.last_rung_marker(), waiter, progress)
    }

    /// Waits until every WQE reserved before the call is rung and complete (the user's quiet),
    /// for a device that reports every WQE.
    pub fn quiet_all(
        &self,
        waiter: &mut Waiter,
        mut progress: impl FnMut() -> Result<(), SqError>,
    ) -> Result<(), SqError> {
        self.wait_rung(self.reserved(), waiter, &mut progress)?;
        self.quiet_rung(waiter, progress)
    }
}

/// The read-only half of a queue's device handle: its CQ, where its [`SqShared`] is, and the
/// protocol's limits, computed once by [`SendQueue`] so both languages post under the same rules
/// (`gda::SqProto` in `device/include/gda/sq.hpp`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqProto {
    /// The CQ the queue reports to.
    pub cq: CqHandle,
    /// Address of the queue's [`SqShared`].
    pub state: u64,
    /// Units that may be outstanding at once.
    pub capacity: u64,
    /// Signalling interval ([`signal_interval`]).
    pub signal_every: u64,
    /// Bound of every wait, in nanoseconds.
    pub timeout_ns: u64,
    /// Largest WQE accepted, in units ([`max_wqe_units`]).
    pub max_units: u32,
    /// Width of the device's completion counter.
    pub bits: u32,
    /// 1: `reserved` is the packed `(unit, msg, psn)` word (bnxt).
    pub tracks_psn: u32,
    /// The provider ([`Provider::DEVICE_TAG`]).
    pub provider: u32,
}

/// A queue as the device API takes it: [`SqProto`] and the provider's own handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqDevice<S> {
    /// The protocol's half.
    pub proto: SqProto,
    /// The provider's send-queue handle.
    pub sq: S,
}

// The layout `gda::SqProto` asserts too (compared field by field in testing/rdma-ref).
#[cfg(not(loom))]
mod proto_layout {
    use super::SqProto;
    use core::mem::offset_of;
    static_assertions::assert_eq_size!(SqProto, [u8; 88]);
    static_assertions::const_assert_eq!(offset_of!(SqProto, state), 40);
    static_assertions::const_assert_eq!(offset_of!(SqProto, max_units), 72);
    static_assertions::const_assert_eq!(offset_of!(SqProto, provider), 84);
}

/// A send queue shared by many producers, bound to provider `P` and a CQ that only this queue
/// reports to.
#[derive(Debug)]
pub struct SendQueue<P: Provider> {
    sq: P::Sq,
    cq: CqHandle,
    counters: Counters,
    /// Width of the device's completion counter on this queue.
    bits: u32,
    /// Largest WQE this queue accepts ([`max_wqe_units`]).
    max_units: u32,
    /// A WQE that crosses (or ends on) a multiple of this many units asks for a CQE
    /// ([`signal_interval`]).
    signal_every: u64,
    timeout_ms: u64,
    /// What the typed fast path accepts on this queue (probed once, at construction).
    fast: fast::Limits,
    /// Host work run by every [`SendQueue::poll`] (see [`SendQueue::set_host_progress`]).
    #[cfg(feature = "std")]
    host_progress: Option<Hook>,
    _p: PhantomData<P>,
}

/// A [`HostProgress`] in a queue (shown by `Debug` as present or not).
#[cfg(feature = "std")]
struct Hook(HostProgress);

#[cfg(feature = "std")]
impl core::fmt::Debug for Hook {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HostProgress")
    }
}

/// Host code a queue runs each time it polls — while it waits for room or in a quiet, and
/// whenever its user polls: the software NIC between processes runs its engine's pass there
/// (`gda_sim::Fabric::progress`), so the waiting thread moves the work it waits for instead of
/// leaving it to another thread that must first be scheduled. Hardware needs none.
/// It says whether it did anything (a caller that polls in a loop may care; `poll` does not).
#[cfg(feature = "std")]
pub type HostProgress = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

impl<P: Provider> SendQueue<P> {
    /// Binds the protocol to a send queue and the CQ its completions go to.
    ///
    /// # Safety
    /// The handles must describe live queues for as long as this value is used, the queue must
    /// be empty (producer position 0), and nothing else may post to it or poll the CQ.
    #[cfg(feature = "std")]
    pub unsafe fn new(sq: P::Sq, cq: CqHandle, timeout_ms: u64) -> Result<Self, SqError> {
        let (capacity, bits) = Self::window(&sq, &cq)?;
        let counters = Counters::with_capacity(capacity, P::TRACKS_PSN);
        Ok(Self::build(sq, cq, counters, bits, timeout_ms))
    }

    /// As [`SendQueue::new`], with the shared state in memory the caller placed (GPU memory,
    /// for a kernel posting to the same queue through the device API).
    ///
    /// # Safety
    /// As [`SendQueue::new`], and as [`Counters::with_state`] for `state`.
    pub unsafe fn with_state(
        sq: P::Sq,
        cq: CqHandle,
        timeout_ms: u64,
        state: core::ptr::NonNull<SqShared>,
    ) -> Result<Self, SqError> {
        let (capacity, bits) = Self::window(&sq, &cq)?;
        // SAFETY: forwarded from the caller.
        let counters = unsafe { Counters::with_state(capacity, P::TRACKS_PSN, state) };
        Ok(Self::build(sq, cq, counters, bits, timeout_ms))
    }

    /// The queue's window (units that may be outstanding) and completion-counter width, or why
    /// the handles cannot carry the protocol.
    fn window(sq: &P::Sq, cq: &CqHandle) -> Result<(u32, u32), SqError> {
        let wq = *sq.wq();
        if wq.ring().is_none() || cq.entries == 0 || !cq.entries.is_power_of_two() {
            return Err(SqError::Post(PostError::BadRing));
        }
        // The device reports `completion_bits`-wide counters; the window of outstanding units
        // must stay below their range to be widened without ambiguity (CollapsedProgress).
        let bits = P::completion_bits(sq).clamp(1, 32);
        let capacity = if bits >= 32 {
            wq.entries
        } else {
            wq.entries.min((1u32 << bits) - 1)
        };
        if P::TRACKS_PSN && wq.entries > MAX_TRACKED_ENTRIES {
            return Err(SqError::Post(PostError::WqeTooLarge {
                units: wq.entries,
                max: MAX_TRACKED_ENTRIES,
            }));
        }
        // A normal CQ must hold a CQE for every WQE that can be outstanding, or the device
        // overruns it and completions (even errors) are lost.
        if cq.collapsed == 0 && cq.entries < capacity {
            return Err(SqError::Post(PostError::WqeTooLarge {
                units: capacity,
                max: cq.entries,
            }));
        }
        Ok((capacity, bits))
    }

    fn build(sq: P::Sq, cq: CqHandle, counters: Counters, bits: u32, timeout_ms: u64) -> Self {
        let max_units = max_wqe_units(counters.capacity(), P::MAX_WQE_UNITS);
        let signal_every = signal_interval(counters.capacity(), max_units);
        let fast = fast::Limits::probe::<P>(&sq, max_units);
        Self {
            sq,
            cq,
            counters,
            max_units,
            signal_every,
            bits,
            timeout_ms,
            fast,
            #[cfg(feature = "std")]
            host_progress: None,
            _p: PhantomData,
        }
    }

    /// What a device-API producer needs to post to this queue alongside Rust producers: the
    /// provider's handle, the CQ, the shared state's address and the protocol's limits, as
    /// the header's `gda::Queue<Provider>` lays them out.
    #[must_use]
    pub fn device_queue(&self) -> SqDevice<P::Sq> {
        SqDevice {
            proto: SqProto {
                cq: self.cq,
                state: self.counters.state_ptr() as u64,
                capacity: self.counters.capacity(),
                signal_every: self.signal_every,
                timeout_ns: self.timeout_ms.saturating_mul(1_000_000),
                max_units: self.max_units,
                bits: self.bits,
                tracks_psn: u32::from(P::TRACKS_PSN),
                provider: P::DEVICE_TAG,
            },
            sq: self.sq,
        }
    }

    /// The queue's device handle.
    #[must_use]
    pub fn handle(&self) -> &P::Sq {
        &self.sq
    }

    /// The common part of the queue's handle (ring geometry and limits).
    #[must_use]
    pub fn wq(&self) -> &crate::handle::WqHandle {
        self.sq.wq()
    }

    /// The shared counters (read-only: the mutators are crate-private).
    #[must_use]
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Checks `wr` once against this queue: the provider's limits ([`Provider::check`]) and the
    /// largest WQE the queue accepts. The result can be posted any number of times with
    /// [`SendQueue::post_checked`], which does not check or classify it again.
    ///
    /// # Errors
    /// [`SqError::Post`] with what does not fit.
    pub fn check<'a>(&'a self, wr: &WorkRequest<'a>) -> Result<Checked<'a, P>, SqError> {
        let req = Checked::new(&self.sq, wr)?;
        self.fits(req.cost().units)?;
        Ok(req)
    }

    /// Refuses a WQE larger than the queue accepts ([`max_wqe_units`]).
    #[inline(always)]
    fn fits(&self, units: u32) -> Result<(), SqError> {
        if units > self.max_units {
            return Err(SqError::Post(PostError::WqeTooLarge {
                units,
                max: self.max_units,
            }));
        }
        Ok(())
    }

    /// Posts one work request and rings its doorbell in reservation order. Returns the WQE's
    /// start position.
    ///
    /// The request is checked once ([`SendQueue::check`]) and then posted as
    /// [`SendQueue::post_checked`] would. A CQE is requested when `flags` asks for one and, so
    /// that slots keep being recycled, whenever the WQE crosses a quarter of the ring;
    /// [`SendQueue::quiet`] adds a signalled NOP when the newest WQE was not signalled. Fewer
    /// CQEs is less device traffic per message.
    ///
    /// # Errors
    /// [`SqError::Post`] if the request does not fit; a timeout, a poisoned queue or a
    /// completion error met while waiting for ring room or for the doorbell ticket.
    pub fn post(&self, wr: &WorkRequest<'_>, flags: SendFlags) -> Result<u64, SqError> {
        let req = self.check(wr)?;
        self.post_valid(&req, flags)
    }

    /// Posts a request checked by [`SendQueue::check`] (or [`Checked::new`] on this queue's
    /// [`SendQueue::handle`]) without checking or classifying it again: the per-post cost is the
    /// ring protocol and the WQE stores.
    ///
    /// # Errors
    /// [`PostError::OtherQueue`] if `req` was checked against another queue; as
    /// [`SendQueue::post`] otherwise.
    pub fn post_checked(&self, req: &Checked<'_, P>, flags: SendFlags) -> Result<u64, SqError> {
        if !core::ptr::eq(req.queue(), &self.sq) {
            return Err(SqError::Post(PostError::OtherQueue));
        }
        // `Checked::new` knows the provider's limits, not this queue's window.
        self.fits(req.cost().units)?;
        self.post_valid(req, flags)
    }

    /// [`SendQueue::post_checked`] for a request known to be checked against this queue.
    #[inline(always)]
    fn post_valid(&self, req: &Checked<'_, P>, flags: SendFlags) -> Result<u64, SqError> {
        self.post_with(req.cost(), flags, |pos, flags| {
            // SAFETY: `req` was checked against this queue's handle, which is live (constructor
            // contract); `post_with` reserved `req.cost().units` at `pos` and waited until they
            // were free.
            unsafe { P::post_checked(req, pos, flags) }
        })
    }

    /// The ring protocol every post follows, whatever writes the WQE: reserve `cost`, decide
    /// whether the WQE must be signalled, wait for room, `write` the WQE at the reserved
    /// position with the final flags, ring in reservation order — and poison the queue if any
    /// wait fails while the reservation is held.
    ///
    /// `write` must write a WQE of exactly `cost` at the position it is given; `cost.units`
    /// must not exceed `self.max_units` (callers check it, or it holds by construction).
    #[inline(always)]
    fn post_with(
        &self,
        cost: Cost,
        flags: SendFlags,
        write: impl FnOnce(SqPos, SendFlags) -> Posted,
    ) -> Result<u64, SqError> {
        let units = cost.units;
        let mut waiter = Waiter::new(self.timeout_ms);
        let (start, pos) = self.counters.reserve(cost);
        let end = start + u64::from(units);
        let flags = if must_signal(start, end, self.signal_every) {
            flags | SendFlags::SIGNALED
        } else {
            flags
        };
        let result = self
            .counters
            .wait_room(start, units, &mut waiter, || self.poll())
            .and_then(|()| {
                let posted = write(pos, flags);
                self.counters.ring_in_order(start, units, &mut waiter, || {
                    // SAFETY: the doorbell record and register are live (constructor contract);
                    // we hold the ticket, so this is the only doorbell store in flight.
                    unsafe { P::ring_sq(&self.sq, &posted) };
                    if flags.contains(SendFlags::SIGNALED) {
                        self.counters
                            .signaled_marker
                            .fetch_max(start + 1, Ordering::Relaxed);
                    }
                })
            });
        if let Err(e) = result {
            self.counters.poison();
            return Err(e);
        }
        Ok(start)
    }

    /// Sets the host work every [`SendQueue::poll`] runs first ([`HostProgress`]).
    #[cfg(feature = "std")]
    pub fn set_host_progress(&mut self, hook: Option<HostProgress>) {
        self.host_progress = hook.map(Hook);
    }

    /// Reaps completions (one poller at a time; others return at once), after running the
    /// queue's [`HostProgress`], if it has one.
    pub fn poll(&self) -> Result<(), SqError> {
        #[cfg(feature = "std")]
        if let Some(Hook(h)) = &self.host_progress {
            let _ = h();
        }
        if self.counters.cq_busy.swap(1, Ordering::Acquire) != 0 {
            return self.first_error();
        }
        let r = self.poll_locked();
        self.counters.cq_busy.store(0, Ordering::Release);
        r?;
        self.first_error()
    }

    fn poll_locked(&self) -> Result<(), SqError> {
        let bits = self.bits;
        let np1 = self.counters.newest_plus_one.load(Ordering::Relaxed);
        let mut prog = if np1 == 0 {
            CollapsedProgress::new(bits)
        } else {
            resume(bits, np1 - 1)
        };
        if self.cq.collapsed != 0 {
            let bound = self.counters.ring_bound();
            // SAFETY: the CQ handle is live and only this poller reads it (constructor contract).
            let mut r = unsafe { P::poll_collapsed(&self.sq, &self.cq, &mut prog, bound) };
            if r.is_err() {
                // The CQE may belong to a WQE rung after `bound` was read: re-read the bound
                // (published before that doorbell) and look again; a second refusal is real.
                // SAFETY: as above.
                r = unsafe {
                    P::poll_collapsed(&self.sq, &self.cq, &mut prog, self.counters.ring_bound())
                };
            }
            if let Some(wc) = r.map_err(SqError::Window)? {
                self.note(wc.status, wc.wqe_counter);
            }
        } else {
            let mut ci = self.counters.cq_ci.load(Ordering::Relaxed);
            let mut seen = false;
            // SAFETY: as above.
            while let Some(wc) = unsafe { P::poll_cq(&self.cq, ci) } {
                // The bound is read after the CQE (see `Counters::ring_bound`).
                prog.observe(P::completed_unit(&self.sq, &wc), self.counters.ring_bound())
                    .map_err(SqError::Window)?;
                self.note(wc.status, wc.wqe_counter);
                ci = ci.wrapping_add(1);
                seen = true;
            }
            if seen {
                self.counters.cq_ci.store(ci, Ordering::Relaxed);
                // SAFETY: as above; tells the device the CQEs below `ci` are consumed.
                unsafe { P::update_cq_ci(&self.cq, ci) };
            }
        }
        if prog.complete_below() > 0 {
            self.counters
                .newest_plus_one
                .store(prog.complete_below(), Ordering::Relaxed);
            self.counters.set_complete_below(prog.complete_below());
        }
        Ok(())
    }

    fn note(&self, status: WcStatus, counter: u32) {
        if !status.is_ok() {
            let v = (u64::from(status.as_raw()) + 1) << 32 | u64::from(counter);
            let _ = self
                .counters
                .error
                .compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// The first completion error seen, if any.
    pub fn first_error(&self) -> Result<(), SqError> {
        let v = self.counters.error.load(Ordering::Acquire);
        if v == 0 {
            return Ok(());
        }
        let status =
            WcStatus::from_raw(((v >> 32) as u32).wrapping_sub(1)).unwrap_or(WcStatus::GeneralErr);
        Err(SqError::Completion {
            status,
            wqe_counter: v as u32,
        })
    }

    /// Waits until everything rung so far whose completion is observable (up to the newest
    /// signalled WQE) has completed — slot recycling; never posts.
    pub fn quiet_rung(&self) -> Result<(), SqError> {
        let marker = self.counters.signaled_marker.load(Ordering::Relaxed);
        self.counters
            .wait_complete(marker, &mut Waiter::new(self.timeout_ms), || self.poll())?;
        self.first_error()
    }

    /// Waits until everything posted so far (by any producer) has completed — OpenSHMEM quiet.
    pub fn quiet(&self) -> Result<(), SqError> {
        let mut w = Waiter::new(self.timeout_ms);
        self.counters
            .wait_rung(self.counters.reserved(), &mut w, || self.poll())?;
        // The newest WQE may have been unsignalled: its completion is only observable through a
        // later CQE, so ask for one.
        if self.counters.signaled_marker.load(Ordering::Relaxed) < self.counters.last_rung_marker()
        {
            self.post(&WorkRequest::Nop, SendFlags::SIGNALED)?;
        }
        let marker = self.counters.signaled_marker.load(Ordering::Relaxed);
        self.counters
            .wait_complete(marker, &mut w, || self.poll())?;
        self.first_error()
    }
}

/// The largest WQE (in units) a queue of which `capacity` units may be outstanding accepts,
/// for a provider whose WQEs span at most `format_max` units: at most half the window (plus
/// one), so that a producer waiting for room can always be unblocked by the completion of the
/// WQE before it (see [`signal_interval`]).
#[must_use]
pub const fn max_wqe_units(capacity: u64, format_max: u32) -> u32 {
    let half = capacity.div_ceil(2);
    let m = if (format_max as u64) < half {
        format_max as u64
    } else {
        half
    };
    if m == 0 { 1 } else { m as u32 }
}

/// The signalling interval of a queue of which `capacity` units may be outstanding and whose
/// WQEs span at most `max_units` ([`max_wqe_units`]).
///
/// Slots are recycled only through CQEs, and the device writes CQEs only for signalled WQEs. A
/// CQE proves its WQE complete from its first unit on (`complete_below = start + 1`), so a
/// producer waiting for room needs a signalled WQE close enough behind it. With the rule "a WQE
/// that crosses or ends on a multiple of `q` is signalled", the WQE covering unit `b - 1`
/// (`b` = the last multiple of `q` at or below a new WQE's start `s`) is signalled and starts
/// at `s_sig >= b - max_units >= s - q + 1 - max_units`. The new WQE of `u <= max_units` units
/// fits once `s + u <= s_sig + 1 + capacity`, which holds whenever
/// `q <= capacity + 2 - 2 * max_units`. So `q` is a quarter of the window (fewer CQEs), but
/// never more than that bound: with small rings or large WQEs it shrinks to 1 and every WQE is
/// signalled. `tests::signalling_never_starves_a_producer` checks every ring size.
#[must_use]
pub const fn signal_interval(capacity: u64, max_units: u32) -> u64 {
    let quarter = capacity / 4;
    let bound = (capacity + 2).saturating_sub(2 * max_units as u64);
    let q = if quarter < bound { quarter } else { bound };
    if q == 0 { 1 } else { q }
}

/// Whether the WQE `[start, end)` must ask for a CQE under [`signal_interval`] `every`.
#[inline(always)]
#[must_use]
pub const fn must_signal(start: u64, end: u64, every: u64) -> bool {
    start / every != end / every || end % every == 0
}

/// Rebuilds a `CollapsedProgress` whose newest completed start is `newest`.
fn resume(bits: u32, newest: u64) -> CollapsedProgress {
    let mut p = CollapsedProgress::starting_at(bits, newest);
    // Observing `newest` itself inside a window of one marks it complete.
    let _ = p.observe(newest as u32, newest + 1);
    p
}

#[cfg(all(test, not(loom)))]
mod tests;
