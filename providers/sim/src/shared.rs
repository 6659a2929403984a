//! A registered region's memory as other processes can map it, and the grants of direct
//! placement that reach it (`wire::direct` has the protocol; this is what a region and a QP
//! keep of it, so neither needs to know about connections).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gda_os::pages::SharedPages;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether registrations on process fabrics make their memory shareable for direct placement
/// (`GDA_SIM_DIRECT`, on unless `0`).
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("GDA_SIM_DIRECT").map_or(true, |v| v.trim() != "0"))
}

/// How long deregistration, or a QP leaving service, waits for the placements in progress
/// through all its grants together (the wire's default timeout: a peer that places for longer
/// is as good as stalled). Placements still running then are *abandoned*: they complete with
/// an error at their requester, never with success (`wire::direct`).
pub(crate) const PLACEMENT_WAIT: Duration = Duration::from_secs(1);

/// Until when a withdrawal on this thread waits for placements in progress: `None` (not at
/// all) on an engine thread, which must not stall its fabric (the placements it does not wait
/// for are abandoned), else [`PLACEMENT_WAIT`] from now.
pub(crate) fn withdrawal_deadline() -> Option<Instant> {
    (!on_engine_thread()).then(|| Instant::now() + PLACEMENT_WAIT)
}

/// Whether this thread is a fabric's engine thread (named `gda-sim-…`), which must never wait
/// on itself or stall its fabric.
pub(crate) fn on_engine_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("gda-sim-"))
}

/// A grant handed out, as its responder keeps it: something to close once.
pub(crate) trait Withdraw: Send + Sync + fmt::Debug {
    /// Closes the grant; with `until`, then waits (at most until then) for placements through
    /// it that are in progress. Placements still in progress when it stops waiting are
    /// abandoned: their requester reports an error for them.
    fn withdraw(&self, until: Option<Instant>);
    /// Whether it can still be used (its connection lives).
    fn alive(&self) -> bool;
}

/// Grants handed out (a region's, or a responder QP's), each closed once. Once closed (the
/// region deregistered, the QP in error or destroyed) the list stays closed: a grant opened
/// later is refused, whatever the interleaving of the offer and the closing.
#[derive(Debug, Default)]
pub(crate) struct Grants(Mutex<GrantList>);

#[derive(Debug, Default)]
struct GrantList {
    open: Vec<Box<dyn Withdraw>>,
    closed: bool,
}

impl Grants {
    /// Keeps `g` to close later, running `open` (which opens its gate) under the list's lock —
    /// unless the list is closed already or `port_up` (the responder NIC's port) is false:
    /// then neither runs and `false` comes back. So a grant is either opened before
    /// [`Grants::close_all`] or [`Grants::withdraw_open`] takes the list (which then closes
    /// it) or never opened at all.
    pub(crate) fn open_with(
        &self,
        g: Box<dyn Withdraw>,
        port_up: &std::sync::atomic::AtomicBool,
        open: impl FnOnce(),
    ) -> bool {
        let mut l = lock(&self.0);
        if l.closed || !port_up.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        l.open.retain(|g| g.alive());
        open();
        l.open.push(g);
        true
    }

    /// Keeps `g` to close later (and lets go of grants whose connection is gone); closes it at
    /// once when the list is closed.
    pub(crate) fn push(&self, g: Box<dyn Withdraw>) {
        let mut l = lock(&self.0);
        if l.closed {
            drop(l);
            g.withdraw(None);
            return;
        }
        l.open.retain(|g| g.alive());
        l.open.push(g);
    }

    /// Closes every grant in the list, leaving it open to new ones (the responder NIC's port
    /// went down: a grant offered after its port comes back up is fine); with `until`, as
    /// [`Grants::close_all`].
    pub(crate) fn withdraw_open(&self, until: Option<Instant>) {
        let v = std::mem::take(&mut lock(&self.0).open);
        for g in v {
            g.withdraw(until);
        }
    }

    /// Closes the list and every grant in it; with `until`, waits until no placement through
    /// them is in progress, at most until then for all of them together (and not at all for a
    /// dead connection).
    pub(crate) fn close_all(&self, until: Option<Instant>) {
        let v = {
            let mut l = lock(&self.0);
            l.closed = true;
            std::mem::take(&mut l.open)
        };
        for g in v {
            g.withdraw(until);
        }
    }
}

/// A registered region whose memory peers can map, and the grants they hold of it.
#[derive(Debug)]
pub(crate) struct SharedRegion {
    /// `None` once deregistered.
    backing: Mutex<Option<Backing>>,
    grants: Grants,
}

/// Where a shareable region's memory lives.
#[derive(Debug)]
pub(crate) enum Backing {
    /// Moved onto a memfd at registration (moved back at deregistration).
    Moved(SharedPages),
    /// A file the program mapped itself (a POSIX shared-memory object), at an offset.
    File { fd: OwnedFd, offset: u64 },
}

impl Backing {
    /// The object a peer maps.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Moved(p) => p.fd(),
            Self::File { fd, .. } => fd.as_fd(),
        }
    }

    /// Where the region starts in it.
    pub(crate) fn offset(&self) -> u64 {
        match self {
            Self::Moved(_) => 0,
            Self::File { offset, .. } => *offset,
        }
    }
}

impl SharedRegion {
    /// Moves `[addr, addr + len)` onto a memfd when it qualifies (page-aligned whole pages of
    /// private anonymous memory).
    ///
    /// # Safety
    /// As [`SharedPages::share`].
    pub(crate) unsafe fn moved(addr: u64, len: u64) -> Option<Self> {
        let (addr, len) = (usize::try_from(addr).ok()?, usize::try_from(len).ok()?);
        // SAFETY: the caller's.
        let pages = unsafe { SharedPages::share(addr, len) }.ok()??;
        Some(Self::with(Backing::Moved(pages)))
    }

    /// A region that is `fd` from `offset` on, as mapped at `[addr, addr + len)` (checked).
    pub(crate) fn file(addr: u64, len: u64, fd: OwnedFd, offset: u64) -> Option<Self> {
        let (a, l) = (usize::try_from(addr).ok()?, usize::try_from(len).ok()?);
        gda_os::pages::mapped_from(a, l, fd.as_fd(), offset)
            .ok()
            .filter(|m| *m)?;
        Some(Self::with(Backing::File { fd, offset }))
    }

    fn with(b: Backing) -> Self {
        Self {
            backing: Mutex::new(Some(b)),
            grants: Grants::default(),
        }
    }

    /// The memory, `None` once deregistered. An offer holds this while it records its grant
    /// (in [`SharedRegion::grants`]), so deregistration, which takes the memory first, closes
    /// every grant ever recorded.
    pub(crate) fn backing(&self) -> MutexGuard<'_, Option<Backing>> {
        lock(&self.backing)
    }

    /// The grants peers hold of it.
    pub(crate) fn grants(&self) -> &Grants {
        &self.grants
    }

    /// Closes every grant and waits for placements in progress (deregistration), at most
    /// until `until` for all of them together (`None`: not at all). Returns the memory, for the
    /// caller to drop once its own accesses have ended too: dropping memory it moved moves it
    /// back onto private pages, and a copy still running would land in the memfd and be lost.
    #[must_use]
    pub(crate) fn retire(&self, until: Option<Instant>) -> Option<Backing> {
        let backing = self.backing().take();
        self.grants.close_all(until);
        backing
    }
}
