//! Direct placement: RDMA WRITEs, READs and atomics between processes that do not wait for
//! the responder's engine.
//!
//! A request travels to the responder's engine, which must be running to execute it. A verbs
//! program that waits for a peer's WRITE by spinning on its own memory (as `ib_write_lat`
//! does) never enters the library, so its engine must be woken — tens of microseconds on a
//! busy machine — and a WRITE's payload is copied twice (into the ring, out of it).
//!
//! So the responder may *grant* a connected requester QP direct access to a region, and the
//! requester then places that QP's WRITEs into it, takes its READs from it and performs its
//! atomics on it itself, under rules the responder set and can withdraw:
//!
//! - **What can be granted.** A region registered on a process fabric with a remote right whose
//!   memory another process can map: page-aligned whole pages of private anonymous memory
//!   (what `ibv_reg_mr` of a buffer from `memalign`/`mmap` gives), moved onto a memfd at
//!   registration ([`gda_os::pages::SharedPages`]), or memory the program mapped from a memfd
//!   or POSIX shared-memory object and registered as such (`Pd::register_file`: gda-shmem's
//!   heap). `GDA_SIM_DIRECT=0` turns it off.
//! - **When.** After the responder's engine has executed a WRITE, READ or atomic from that QP
//!   on that region itself, with every check a request passes (the QP's state and connected
//!   peer, its PSN, the PD, the rkey, the bounds, the rights): the grant names the requester
//!   QP, the responder QP and the rkey, the region's bounds and its remote rights, and comes
//!   with the memory's descriptor, over the connection's socket (frame 7, below). A grant
//!   without a right to write (READ only) comes with a descriptor opened read-only, so the
//!   kernel refuses the requester any writable mapping of the region (`mmap` or `mprotect`
//!   with `PROT_WRITE`), whether its code cooperates or not.
//! - **Under what rules.** The requester uses a grant only for a WRITE without immediate, a
//!   READ or an aligned atomic, wholly inside the bounds, with the right it needs, from the QP
//!   it names to the QP it names, and only when nothing of that QP is in flight on the wire
//!   (RC's order: a placed operation never overtakes a request before it). Each grant has a
//!   *gate* in the connection's segment ([`super::ring::Gate`]): the requester counts itself in
//!   (`inflight`), checks the gate still holds the grant's value, places, and counts itself
//!   out; placed, the WQE completes at once. An atomic is a hardware atomic on the shared
//!   memory, as the responder's engine performs it, so the two never tear each other. A
//!   placed operation takes no PSN, so the responder's expectations for the wire are unchanged.
//! - **Withdrawal.** The responder closes a grant's gate when its QP moves to error or is
//!   destroyed, and when the region is deregistered; the requester finds it closed, drops its
//!   mapping and sends the operation on the wire, where the responder answers as it would any
//!   request (a retry-exceeded error from a QP in error, a remote access error from a key that
//!   is gone). Deregistration waits for placements in progress (at most the wire timeout, and
//!   not for a peer whose connection is dead) and then moves moved memory back onto private
//!   pages: whatever a peer still holds maps the memfd, no longer the program's memory.
//!
//! **Grant** frame (kind 7, 56-byte body, the region's memory descriptor attached; acceptor →
//! connector on the socket, the only thing written there after the handshake): 0 the
//! requester's NIC, 4 its QP, 8 the responder's NIC, 12 its QP, 16 rkey, 20 rights (bit 0 READ,
//! bit 1 WRITE, bit 2 atomic; no other), 24 the region's address in the responder (u64), 32
//! its length (u64), 40 gate (u16, below [`super::ring::GATES`]), 42 reserved, 44 the gate's
//! value while the grant holds (u32, never 0), 48 the region's offset in the descriptor's
//! object (u64). A connector checks the frame and the object — a memfd sealed against
//! shrinking, or a POSIX shared-memory object of this user (which cannot be sealed; its owner
//! could as well signal this process), at least offset + length bytes long — before it maps
//! it; a frame that fails a check closes the connection.

use std::os::fd::{AsFd, OwnedFd};

use rustc_hash::FxHashMap;

use crate::mem::Access;

use super::{HEADER_BYTES, MAGIC, VERSION};

/// Frame kind of a grant.
pub(crate) const KIND_GRANT: u16 = 7;
const GRANT_BODY_BYTES: usize = 56;
/// A grant frame, header and body.
pub(crate) const GRANT_FRAME_BYTES: usize = HEADER_BYTES + GRANT_BODY_BYTES;
/// The largest region a grant may name (a bound on what a peer can make this process map).
const MAX_REGION_BYTES: u64 = 1 << 40;
/// The most memory the grants of one connection may map together.
pub(crate) const GRANTED_BYTES_MAX: u64 = 4 << 40;
const RIGHT_READ: u32 = 1;
const RIGHT_WRITE: u32 = 2;
const RIGHT_ATOMIC: u32 = 4;
const RIGHTS: u32 = RIGHT_READ | RIGHT_WRITE | RIGHT_ATOMIC;
/// The rights that need a writable mapping.
pub(crate) const WRITING_RIGHTS: u32 = RIGHT_WRITE | RIGHT_ATOMIC;

/// A new descriptor of the object `fd` refers to, opened read-only (through `/proc/self/fd`:
/// a new open file description, so the kernel refuses every writable shared mapping of it) —
/// what a grant without a right to write hands over.
pub(crate) fn reopen_read_only(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    let ro = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    // The same object, not whatever the path leads to now.
    let (a, b) = (rustix::fs::fstat(fd)?, rustix::fs::fstat(&ro)?);
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(std::io::Error::other(
            "the object changed under /proc/self/fd",
        ));
    }
    Ok(ro)
}

/// What a placement does with the granted memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Right {
    Read,
    Write,
    Atomic,
}

impl Right {
    fn bit(self) -> u32 {
        match self {
            Self::Read => RIGHT_READ,
            Self::Write => RIGHT_WRITE,
            Self::Atomic => RIGHT_ATOMIC,
        }
    }
}

/// Whether `fd` is a file on a tmpfs not made by `memfd_create` (a POSIX shared-memory
/// object: `/dev/shm`).
fn shm_object(fd: &OwnedFd) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    // `f_type`'s width differs between architectures (i64 here).
    #[allow(clippy::unnecessary_cast)]
    let on_tmpfs = rustix::fs::fstatfs(fd).is_ok_and(|s| s.f_type as i64 == TMPFS_MAGIC);
    // A memfd's path is "/memfd:<name> (deleted)".
    let fd_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    on_tmpfs
        && std::fs::read_link(fd_path).is_ok_and(|p| !p.to_string_lossy().starts_with("/memfd:"))
}

/// (requester NIC, requester QP, responder NIC, responder QP, rkey).
pub(crate) type GrantKey = (u32, u32, u32, u32, u32);

/// A connection's gates as the responder hands them out, and what it offered.
#[derive(Default)]
pub(crate) struct Gates {
    /// The value the next grant's gate holds.
    next_value: u32,
    /// Gates never used yet start here.
    fresh: u16,
    free: Vec<u16>,
    /// Gates closed with placements still in progress ([`super::ring::ABANDONED`]): free
    /// again once their requester counted every one out.
    abandoned: Vec<u16>,
    /// What was granted or found not grantable (`None`).
    granted: FxHashMap<GrantKey, Option<u16>>,
    /// The gate of each grant in `granted` (so `granted`'s other entries, `None`, are the
    /// refusals: nothing removes them when their QP or region goes, so they are forgotten all
    /// at once past [`REFUSALS_KEPT`]).
    by_gate: FxHashMap<u16, GrantKey>,
}

/// Refusals a connection remembers before it forgets them all. A program that registers and
/// deregisters memory that cannot be shared, or makes and destroys QPs, over one long-lived
/// connection would otherwise grow the table for as long as the connection lives; forgotten,
/// a refusal costs one more look at its region on the next request.
const REFUSALS_KEPT: usize = 4096;

/// A grant as the requester holds it: the region mapped.
pub(crate) struct Grant {
    responder: (u32, u32),
    addr: u64,
    len: u64,
    /// `RIGHT_*` bits.
    rights: u32,
    /// Where the region starts in this process.
    base: *mut u8,
    /// The mapping: its start and length.
    map: (*mut u8, usize),
    pub(crate) gate: u16,
    pub(crate) value: u32,
}

// SAFETY: the mapping is shared memory reached only by copies that tolerate concurrent writers.
unsafe impl Send for Grant {}
// SAFETY: as above.
unsafe impl Sync for Grant {}

impl Drop for Grant {
    fn drop(&mut self) {
        // SAFETY: our mapping.
        let _ = unsafe { rustix::mm::munmap(self.map.0.cast(), self.map.1) };
    }
}

impl Grant {
    /// Bytes of this process's address space its mapping takes.
    pub(crate) fn mapped_bytes(&self) -> u64 {
        self.map.1 as u64
    }

    /// Where `[raddr, raddr + len)` of the responder is in this process, if the grant covers it
    /// with the right `need`.
    pub(crate) fn at(
        &self,
        responder: (u32, u32),
        raddr: u64,
        len: u64,
        need: Right,
    ) -> Option<*mut u8> {
        let inside = raddr >= self.addr
            && raddr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len);
        (inside && responder == self.responder && self.rights & need.bit() != 0)
            // SAFETY: inside the mapping (checked).
            .then(|| unsafe { self.base.add((raddr - self.addr) as usize) })
    }
}

impl Gates {
    /// Whether `key` was offered a grant (or found not grantable) already.
    pub(crate) fn offered(&self, key: &GrantKey) -> bool {
        self.granted.contains_key(key)
    }

    /// Remembers that `key` cannot be granted (its region cannot be shared).
    pub(crate) fn refuse(&mut self, key: GrantKey) {
        if self.granted.len() - self.by_gate.len() >= REFUSALS_KEPT {
            self.granted.retain(|_, gate| gate.is_some());
        }
        self.granted.insert(key, None);
    }

    /// A free gate and the value it will hold for a new grant; `None` when every gate is in use.
    /// `idle` says whether an abandoned gate has no placement in progress any more (it is free
    /// again then).
    pub(crate) fn take(&mut self, idle: impl Fn(u16) -> bool) -> Option<(u16, u32)> {
        if self.free.is_empty() && !self.abandoned.is_empty() {
            let (done, left) = std::mem::take(&mut self.abandoned)
                .into_iter()
                .partition(|g| idle(*g));
            self.abandoned = left;
            self.free = done;
        }
        let gate = match self.free.pop() {
            Some(g) => g,
            None if self.fresh < super::ring::GATES => {
                self.fresh += 1;
                self.fresh - 1
            }
            None => return None,
        };
        // Never 0 (closed) nor `ABANDONED`.
        self.next_value = self.next_value.wrapping_add(1).max(1);
        if self.next_value == super::ring::ABANDONED {
            self.next_value = 1;
        }
        Some((gate, self.next_value))
    }

    /// Records the grant of `key` through `gate`.
    pub(crate) fn record(&mut self, key: GrantKey, gate: u16) {
        self.granted.insert(key, Some(gate));
        self.by_gate.insert(gate, key);
    }

    /// Gives `gate` back (its grant closed, or never sent).
    pub(crate) fn release(&mut self, gate: u16) {
        self.forget(gate);
        self.free.push(gate);
    }

    /// Sets `gate` aside until no placement through it is in progress (its grant closed,
    /// placements abandoned).
    pub(crate) fn quarantine(&mut self, gate: u16) {
        self.forget(gate);
        self.abandoned.push(gate);
    }

    fn forget(&mut self, gate: u16) {
        if let Some(key) = self.by_gate.remove(&gate) {
            self.granted.remove(&key);
        }
    }
}

/// The rights a grant of a region with `access` gives (`RIGHT_*` bits).
pub(crate) fn rights_of(access: Access) -> u32 {
    let mut rights = 0;
    if access.contains(Access::REMOTE_READ) {
        rights |= RIGHT_READ;
    }
    if access.contains(Access::REMOTE_WRITE) {
        rights |= RIGHT_WRITE;
    }
    if access.contains(Access::REMOTE_ATOMIC) {
        rights |= RIGHT_ATOMIC;
    }
    rights
}

/// A grant frame (layout in the module's documentation): `key` names the requester, responder
/// and rkey; the region is `len` bytes at `addr` in the responder, `offset` bytes into its
/// object; `gate` holds `value` while the grant does.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode(
    key: GrantKey,
    rights: u32,
    addr: u64,
    len: u64,
    gate: u16,
    value: u32,
    offset: u64,
) -> [u8; GRANT_FRAME_BYTES] {
    let mut f = [0u8; GRANT_FRAME_BYTES];
    f[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    f[4..6].copy_from_slice(&VERSION.to_le_bytes());
    f[6..8].copy_from_slice(&KIND_GRANT.to_le_bytes());
    let b = &mut f[HEADER_BYTES..];
    for (i, v) in [key.0, key.1, key.2, key.3, key.4, rights]
        .into_iter()
        .enumerate()
    {
        b[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    b[24..32].copy_from_slice(&addr.to_le_bytes());
    b[32..40].copy_from_slice(&len.to_le_bytes());
    b[40..42].copy_from_slice(&gate.to_le_bytes());
    b[44..48].copy_from_slice(&value.to_le_bytes());
    b[48..56].copy_from_slice(&offset.to_le_bytes());
    f
}

impl Grant {
    /// Checks a grant frame and the object attached to it, and maps the region: the grant and
    /// the key it is held under (requester NIC, requester QP, rkey). `Err` says why the frame
    /// is refused (the connection then closes).
    pub(crate) fn accept(
        f: &[u8; GRANT_FRAME_BYTES],
        fd: Option<OwnedFd>,
    ) -> Result<((u32, u32, u32), Self), String> {
        let u32_at = |i: usize| u32::from_le_bytes(f[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(f[i..i + 8].try_into().unwrap_or_default());
        let kind = u16::from_le_bytes([f[6], f[7]]);
        if u32_at(0) != MAGIC || u16::from_le_bytes([f[4], f[5]]) != VERSION || kind != KIND_GRANT {
            return Err(format!("a frame of kind {kind} on the socket, not a grant"));
        }
        let b = HEADER_BYTES;
        let key = (u32_at(b), u32_at(b + 4), u32_at(b + 16));
        let responder = (u32_at(b + 8), u32_at(b + 12));
        let rights = u32_at(b + 20);
        let (addr, len) = (u64_at(b + 24), u64_at(b + 32));
        let gate = u16::from_le_bytes([f[b + 40], f[b + 41]]);
        let value = u32_at(b + 44);
        let offset = u64_at(b + 48);
        let fd = fd.ok_or("a grant without its region")?;
        if rights & RIGHTS == 0 || rights & !RIGHTS != 0 {
            return Err(format!("a grant with rights {rights:#x}"));
        }
        if value == 0 || gate >= super::ring::GATES {
            return Err("a grant naming no gate".into());
        }
        if len == 0 || len > MAX_REGION_BYTES || addr.checked_add(len).is_none() {
            return Err(format!("a grant of {len} bytes at {addr:#x}"));
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| format!("a grant's region: {e}"))?;
        let size = u64::try_from(st.st_size).unwrap_or(0);
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(format!(
                "a grant of {len} bytes at offset {offset} of a {size}-byte object"
            ));
        }
        // A memfd must be sealed against shrinking, so the peer cannot turn the mapping into a
        // SIGBUS here. A POSIX shared-memory object cannot be sealed: it must be this user's
        // and private to it (mode 0600, as gda-shmem makes its heaps), so only a process of
        // this user — which could as well signal this one — can shrink it.
        let sealed = rustix::fs::fcntl_get_seals(&fd)
            .is_ok_and(|s| s.contains(rustix::fs::SealFlags::SHRINK));
        if !sealed {
            if !shm_object(&fd) {
                return Err("a grant's region can shrink".into());
            }
            gda_os::shm::check_private("a grant's region", st.st_uid, st.st_mode)
                .map_err(|e| e.to_string())?;
        }
        let mut prot = rustix::mm::ProtFlags::READ;
        if rights & (RIGHT_WRITE | RIGHT_ATOMIC) != 0 {
            prot |= rustix::mm::ProtFlags::WRITE;
        }
        let page = gda_os::pages::page_size() as u64;
        let skip = offset % page;
        let map_len = usize::try_from(len + skip).map_err(|_| "a grant too large to map")?;
        // SAFETY: a new shared mapping of an object at least `offset + len` bytes long that
        // cannot shrink (or whose owner is trusted not to shrink it, above).
        let map = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                map_len,
                prot,
                rustix::mm::MapFlags::SHARED,
                fd.as_fd(),
                offset - skip,
            )
        }
        .map_err(|e| format!("mapping a grant's region: {e}"))?;
        let grant = Grant {
            responder,
            addr,
            len,
            rights,
            // SAFETY: `skip` < a page, inside the mapping.
            base: unsafe { map.cast::<u8>().add(skip as usize) },
            map: (map.cast(), map_len),
            gate,
            value,
        };
        Ok((key, grant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grant of 0x100 bytes at 0x1000 through responder QP (1, 2), mapped nowhere.
    fn unmapped(rights: u32) -> std::mem::ManuallyDrop<Grant> {
        std::mem::ManuallyDrop::new(Grant {
            responder: (1, 2),
            addr: 0x1000,
            len: 0x100,
            rights,
            base: std::ptr::NonNull::<u64>::dangling().as_ptr().cast(),
            map: (std::ptr::null_mut(), 0),
            gate: 0,
            value: 1,
        })
    }

    #[test]
    fn refusals_are_forgotten_past_their_bound_and_grants_are_kept() {
        let mut g = Gates::default();
        let (gate, _) = g.take(|_| true).unwrap();
        g.record((9, 9, 9, 9, 9), gate);
        for i in 0..3 * REFUSALS_KEPT as u32 {
            g.refuse((1, i, 2, 3, 4));
            assert!(g.granted.len() <= REFUSALS_KEPT + 1, "at refusal {i}");
        }
        assert!(
            g.offered(&(1, 3 * REFUSALS_KEPT as u32 - 1, 2, 3, 4)),
            "the latest is kept"
        );
        assert!(!g.offered(&(1, 0, 2, 3, 4)), "the oldest are forgotten");
        assert_eq!(
            g.granted.get(&(9, 9, 9, 9, 9)),
            Some(&Some(gate)),
            "a grant stays"
        );
        g.release(gate);
        assert!(!g.offered(&(9, 9, 9, 9, 9)));
    }

    #[test]
    fn a_grant_covers_only_its_bounds_responder_and_rights() {
        let g = unmapped(RIGHT_READ);
        assert!(g.at((1, 2), 0x1000, 0x100, Right::Read).is_some());
        assert!(g.at((1, 2), 0x10ff, 1, Right::Read).is_some());
        assert!(
            g.at((1, 2), 0x10ff, 2, Right::Read).is_none(),
            "past the end"
        );
        assert!(
            g.at((1, 2), 0xfff, 1, Right::Read).is_none(),
            "before the start"
        );
        assert!(g.at((1, 2), u64::MAX, 2, Right::Read).is_none(), "wraps");
        assert!(
            g.at((1, 3), 0x1000, 1, Right::Read).is_none(),
            "another responder QP"
        );
        assert!(
            g.at((1, 2), 0x1000, 1, Right::Write).is_none(),
            "no WRITE right"
        );
        assert!(
            g.at((1, 2), 0x1000, 8, Right::Atomic).is_none(),
            "no atomic right"
        );
        let w = unmapped(RIGHT_WRITE | RIGHT_ATOMIC);
        assert!(w.at((1, 2), 0x1000, 1, Right::Write).is_some());
        assert!(w.at((1, 2), 0x1008, 8, Right::Atomic).is_some());
        assert!(
            w.at((1, 2), 0x1000, 1, Right::Read).is_none(),
            "no READ right"
        );
    }
}
