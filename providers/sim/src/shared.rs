//! A registered region's memory as other processes can map it, and the grants of direct
//! placement that reach it (`wire::direct` has the protocol; this is what a region and a QP
//! keep of it, so neither needs to know about connections).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

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

/// How long deregistration waits for placements in progress through a connection (the wire's
/// default timeout: a peer that places for longer is as good as stalled).
pub(crate) const PLACEMENT_WAIT: Duration = Duration::from_secs(1);

/// A grant handed out, as its responder keeps it: something to close once.
pub(crate) trait Withdraw: Send + Sync + fmt::Debug {
    /// Closes the grant; with `wait`, then waits (at most that long) for placements through it
    /// that are in progress.
    fn withdraw(&self, wait: Option<Duration>);
    /// Whether it can still be used (its connection lives).
    fn alive(&self) -> bool;
}

/// Grants handed out (a region's, or a responder QP's), each closed once.
#[derive(Debug, Default)]
pub(crate) struct Grants(Mutex<Vec<Box<dyn Withdraw>>>);

impl Grants {
    /// Keeps `g` to close later (and lets go of grants whose connection is gone).
    pub(crate) fn push(&self, g: Box<dyn Withdraw>) {
        let mut v = lock(&self.0);
        v.retain(|g| g.alive());
        v.push(g);
    }

    /// Closes every grant; with `wait`, waits until no placement through them is in progress
    /// (at most `wait` per connection, and not at all for a dead one).
    pub(crate) fn close_all(&self, wait: Option<Duration>) {
        let v = std::mem::take(&mut *lock(&self.0));
        for g in v {
            g.withdraw(wait);
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

    /// Closes every grant and waits for placements in progress (deregistration). Returns the
    /// memory, for the caller to drop once its own accesses have ended too: dropping memory it
    /// moved moves it back onto private pages, and a copy still running would land in the
    /// memfd and be lost.
    #[must_use]
    pub(crate) fn retire(&self, wait: Duration) -> Option<Backing> {
        let backing = self.backing().take();
        self.grants.close_all(Some(wait));
        backing
    }
}
