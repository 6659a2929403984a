//! Named shared-memory segments (POSIX `shm_open`, Linux) for memory several processes map.
//!
//! Used by the software NIC's cross-process fabric and by gda-shmem's P2P transport (a job's
//! processes also check each other's liveness: [`crate::process`]). The rules
//! that make a job's shared memory safe to leave lying around are here, once:
//!
//! - names are `/gda-<job>-<what>`, with `job` and `what` restricted to `[A-Za-z0-9_.]`, so a
//!   name can never leave `/dev/shm` or collide with another program's;
//! - a job's names cannot be guessed ([`JobNames`]): each `what` carries a tag keyed with a
//!   secret only the job's processes hold, different for every object, so another user who
//!   watches `/dev/shm` and sees one name still cannot create the next one first (squatting a
//!   name makes `O_EXCL` fail: it would stop the job);
//! - creation sets mode `0600` explicitly (whatever the umask) and reserves the object's
//!   memory (`fallocate`), so a full `/dev/shm` is an error at creation naming its size, not a
//!   `SIGBUS` at the first touch of a page;
//! - segments are created with `O_EXCL` and mode `0600` (private to the user; a stale segment of
//!   the same name is an error, not silently reused);
//! - [`Segment::unlink`] removes the name while the mappings stay valid, so once every process has
//!   mapped a segment its name can go and a killed process leaves nothing behind;
//! - [`sweep`] removes every name of a job (launchers call it when a job ends, however it ends).

use core::ptr::NonNull;
use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{Mode, ftruncate};
use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};
use rustix::shm;

/// Where Linux exposes POSIX shared-memory names (read by [`sweep`] and [`list`]).
pub const SHM_DIR: &str = "/dev/shm";

/// A mapped shared-memory segment. Unmapped on drop; the name stays until [`Segment::unlink`] or
/// [`sweep`].
#[derive(Debug)]
pub struct Segment {
    name: String,
    ptr: NonNull<u8>,
    len: usize,
    owner: bool,
    _fd: OwnedFd,
}

// SAFETY: the segment is plain shared memory; all access goes through raw pointers whose users
// synchronise (the mapping itself is immutable after creation).
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

/// Checks one component of a segment name.
fn check_part(what: &str, part: &str) -> io::Result<()> {
    let ok = !part.is_empty()
        && part.len() <= 64
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("shared-memory {what} {part:?} must be 1-64 characters of [A-Za-z0-9_.]"),
        ))
    }
}

/// Refuses a segment this user did not create for itself: it must belong to our effective uid
/// and have mode `0600` exactly (what [`Segment::create`] makes). Another user's segment of the
/// same name, or one opened up to the group or the world, may hold planted contents (or be
/// shrunk under a mapping).
///
/// # Errors
/// `PermissionDenied`, naming `name`, the owner or the mode.
pub fn check_private(name: &str, uid: u32, mode: u32) -> io::Result<()> {
    let me = rustix::process::geteuid().as_raw();
    let why = if uid != me {
        format!("belongs to uid {uid}, not to this user (uid {me})")
    } else if mode & 0o7777 != 0o600 {
        format!("has mode {:o}, not 600", mode & 0o7777)
    } else {
        return Ok(());
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "shared-memory segment {name} {why}: refusing to map it (remove it if it is stale)"
        ),
    ))
}

/// The names of a job's objects: `what` plus a 16-hex-digit tag, HMAC-SHA256 of the job id
/// and the object's base name under a key all the job's processes share and no one else holds
/// (gda-shmem derives it from the job secret its rendezvous authenticated; thread jobs draw
/// it at random). Each object's tag is independent: seeing `heap0.<tag>` tells nothing about
/// `heap1`'s.
#[derive(Clone)]
pub struct JobNames {
    job: String,
    key: [u8; 32],
}

impl std::fmt::Debug for JobNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("JobNames")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl JobNames {
    /// Names for `job` under `key` (checked as a name part).
    pub fn new(job: &str, key: [u8; 32]) -> io::Result<Self> {
        check_part("job id", job)?;
        Ok(Self {
            job: job.to_owned(),
            key,
        })
    }

    /// The job id.
    #[must_use]
    pub fn job(&self) -> &str {
        &self.job
    }

    /// The `what` of object `base` (e.g. `heap3`): `base.<tag>`.
    #[must_use]
    pub fn what(&self, base: &str) -> String {
        use hmac::Mac;
        let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        m.update(b"gda-shm-name\0");
        m.update(self.job.as_bytes());
        m.update(b"\0");
        m.update(base.as_bytes());
        let tag = m.finalize().into_bytes();
        let mut out = String::with_capacity(base.len() + 17);
        out.push_str(base);
        out.push('.');
        for b in &tag[..8] {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }
}

/// The POSIX name of a job's segment (`/gda-<job>-<what>`).
pub fn segment_name(job: &str, what: &str) -> io::Result<String> {
    check_part("job id", job)?;
    check_part("segment name", what)?;
    Ok(format!("/gda-{job}-{what}"))
}

impl Segment {
    /// Creates a new segment of `len` bytes (zero-filled), private to the user. Fails if the
    /// name exists.
    pub fn create(job: &str, what: &str, len: usize) -> io::Result<Self> {
        Self::create_aligned(job, what, len, 1)
    }

    /// [`Segment::create`], mapped at an address that is a multiple of `align` (a power of
    /// two): a symmetric heap whose start is so aligned turns aligned offsets into aligned
    /// addresses. The address space is reserved with `align` to spare and the spare given
    /// back, so nothing else is ever mapped over.
    pub fn create_aligned(job: &str, what: &str, len: usize, align: usize) -> io::Result<Self> {
        if !align.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("segment alignment {align} is not a power of two"),
            ));
        }
        let name = segment_name(job, what)?;
        let fd = shm::open(
            name.as_str(),
            shm::OFlags::CREATE | shm::OFlags::EXCL | shm::OFlags::RDWR,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| match e {
            rustix::io::Errno::EXIST => exists(&name),
            e => with_name(e.into(), &name, "create"),
        })?;
        // The umask may have taken bits of 0600 away (`umask 0277` leaves 0400, which every
        // peer would refuse): set the mode itself.
        let seg = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))
            .map_err(io::Error::from)
            .and_then(|()| reserve(&fd, &name, len))
            .and_then(|()| Self::map(name.clone(), fd, len, true, align));
        if seg.is_err() {
            let _ = shm::unlink(name.as_str());
        }
        // A full /dev/shm already names the object; other errors get the name here.
        seg.map_err(|e| match e.kind() {
            io::ErrorKind::StorageFull => e,
            _ => with_name(e, &name, "size/map"),
        })
    }

    /// Maps an existing segment of a job; its size must be at least `len`.
    pub fn open(job: &str, what: &str, len: usize) -> io::Result<Self> {
        let name = segment_name(job, what)?;
        let fd = shm::open(name.as_str(), shm::OFlags::RDWR, Mode::empty())
            .map_err(|e| with_name(e.into(), &name, "open"))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| with_name(e.into(), &name, "stat"))?;
        check_private(&name, st.st_uid, st.st_mode)?;
        if (st.st_size as u64) < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "shared-memory segment {name} has {} bytes, expected at least {len}",
                    st.st_size
                ),
            ));
        }
        Self::map(name, fd, len, false, 1)
    }

    fn map(name: String, fd: OwnedFd, len: usize, owner: bool, align: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a shared-memory segment cannot be empty",
            ));
        }
        let page = rustix::param::page_size();
        let p = if align <= page {
            // SAFETY: a fresh shared mapping of a file we hold; no existing memory is replaced.
            unsafe {
                mmap(
                    core::ptr::null_mut(),
                    len,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    &fd,
                    0,
                )
            }?
        } else {
            let span = len
                .checked_add(align)
                .ok_or_else(|| io::Error::other("segment length plus alignment overflows"))?;
            // SAFETY: reserves fresh address space (no access, no memory); nothing is replaced.
            let r = unsafe {
                rustix::mm::mmap_anonymous(
                    core::ptr::null_mut(),
                    span,
                    ProtFlags::empty(),
                    MapFlags::PRIVATE | MapFlags::NORESERVE,
                )
            }? as usize;
            let at = r.next_multiple_of(align);
            // SAFETY: `at..at + len` lies inside the reservation just made (at - r < align),
            // which nothing else uses: replacing it replaces nothing of anyone's.
            let mapped = unsafe {
                mmap(
                    at as *mut core::ffi::c_void,
                    len,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED | MapFlags::FIXED,
                    &fd,
                    0,
                )
            };
            // SAFETY: the parts of the reservation outside `at..at + len` (or all of it, when
            // the mapping failed) are ours and unused.
            unsafe {
                match mapped {
                    Ok(_) => {
                        if at > r {
                            let _ = munmap(r as *mut _, at - r);
                        }
                        let tail = at + len;
                        if r + span > tail {
                            let _ = munmap(tail as *mut _, r + span - tail);
                        }
                    }
                    Err(_) => {
                        let _ = munmap(r as *mut _, span);
                    }
                }
            }
            mapped?
        };
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Self {
            name,
            ptr,
            len,
            owner,
            _fd: fd,
        })
    }

    /// The POSIX name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// First byte of the mapping.
    #[must_use]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Mapped length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false` (segments are never empty).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether this process created the segment.
    #[must_use]
    pub fn is_owner(&self) -> bool {
        self.owner
    }

    /// Maps the segment a second time, over the `len()` bytes at `addr` (page-aligned), which it
    /// replaces (`MAP_FIXED`). That mapping is never unmapped by the segment: it lasts until
    /// the process exits (it stands in for memory the program owns, such as its data segment).
    ///
    /// # Safety
    /// `addr..addr + len()` must be memory of this process that may be replaced: nothing may
    /// access it during the call, and what it held before is gone (copy it in first).
    pub unsafe fn map_at(&self, addr: *mut u8) -> io::Result<()> {
        if (addr as usize) % rustix::param::page_size() != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr:p} is not page-aligned"),
            ));
        }
        // SAFETY: the range may be replaced (caller); the object is at least `len` bytes.
        let p = unsafe {
            mmap(
                addr.cast(),
                self.len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                &self._fd,
                0,
            )
        }
        .map_err(|e| with_name(e.into(), &self.name, "map at a fixed address"))?;
        if p.cast::<u8>() == addr {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "shared memory {}: mapped at {p:p}, not {addr:p}",
                self.name
            )))
        }
    }

    /// Removes the name; the mapping (and every other process's) stays valid. Idempotent.
    pub fn unlink(&self) -> io::Result<()> {
        match shm::unlink(self.name.as_str()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(with_name(e.into(), &self.name, "unlink")),
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `map` with this length and is no longer used
        // (`Segment` owns it; borrowers hold `&Segment`).
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Sizes the new object and reserves its memory: tmpfs allocates pages at first touch, and a
/// touch beyond what `/dev/shm` can hold is a `SIGBUS` that kills the process with no message.
fn reserve(fd: &OwnedFd, name: &str, len: usize) -> io::Result<()> {
    ftruncate(fd, len as u64)?;
    match rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), 0, len as u64) {
        Ok(()) => Ok(()),
        // A file system without fallocate: sized only, as before.
        Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
        Err(rustix::io::Errno::NOSPC) => {
            let free = rustix::fs::statvfs(SHM_DIR)
                .map(|v| format!("{} MiB", v.f_bavail * v.f_frsize / (1 << 20)))
                .unwrap_or_else(|_| "unknown".into());
            Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "shared memory {name}: {len} bytes ({} MiB) do not fit in {SHM_DIR} ({free} \
                     free): make it larger (docker run --shm-size=…) or ask for less \
                     (GDA_SHMEM_HEAP_SIZE for a symmetric heap)",
                    len.div_ceil(1 << 20)
                ),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// The error for a name that exists: a leftover of ours, or one another user planted.
fn exists(name: &str) -> io::Error {
    use std::os::unix::fs::MetadataExt;
    let path = format!("{SHM_DIR}{name}");
    let me = rustix::process::geteuid().as_raw();
    let why = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.uid() != me => format!(
            "it exists and belongs to uid {} (another user created it first; the job's names \
             are keyed with its secret, so this is no accident)",
            m.uid()
        ),
        _ => "it exists already (a leftover of an earlier job with this id? remove it)".into(),
    };
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("shared memory {name}: create failed: {why}"),
    )
}

fn with_name(e: io::Error, name: &str, what: &str) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("shared memory {name}: {what} failed: {e}"),
    )
}

/// Removes the name of `job`'s segment `what` (as [`Segment::unlink`], by name: for a creator
/// that no longer holds the [`Segment`], or cleans up on an error path). Idempotent.
pub fn unlink(job: &str, what: &str) -> io::Result<()> {
    let name = segment_name(job, what)?;
    match shm::unlink(name.as_str()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(with_name(e.into(), &name, "unlink")),
    }
}

/// Names (without the leading `/`) of every segment of `job` that exists now.
pub fn list(job: &str) -> io::Result<Vec<String>> {
    check_part("job id", job)?;
    let prefix = format!("gda-{job}-");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(SHM_DIR)? {
        let name = entry?.file_name();
        if let Some(s) = name.to_str() {
            if s.starts_with(&prefix) {
                out.push(s.to_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Removes every segment name of `job`; returns how many were removed.
pub fn sweep(job: &str) -> io::Result<usize> {
    let mut n = 0;
    for s in list(job)? {
        let c = CString::new(format!("/{s}")).map_err(io::Error::other)?;
        match shm::unlink(c.as_c_str()) {
            Ok(()) => n += 1,
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> String {
        format!("t{}x{}", std::process::id(), line!())
    }

    #[test]
    fn create_open_unlink_sweep() {
        let job = job();
        let a = Segment::create(&job, "heap0", 4096).unwrap();
        // SAFETY: the mapping is 4096 bytes.
        unsafe { a.as_ptr().add(100).write(42) };
        let b = Segment::open(&job, "heap0", 4096).unwrap();
        // SAFETY: as above; both map the same pages.
        assert_eq!(unsafe { b.as_ptr().add(100).read() }, 42);
        assert!(Segment::create(&job, "heap0", 4096).is_err(), "O_EXCL");
        assert!(Segment::open(&job, "heap0", 8192).is_err(), "too small");
        let _c = Segment::create(&job, "other", 64).unwrap();
        assert_eq!(list(&job).unwrap().len(), 2);
        a.unlink().unwrap();
        a.unlink().unwrap();
        // SAFETY: mappings survive the unlink.
        assert_eq!(unsafe { b.as_ptr().add(100).read() }, 42);
        assert_eq!(sweep(&job).unwrap(), 1);
        assert!(list(&job).unwrap().is_empty());
        assert!(Segment::open(&job, "heap0", 1).is_err());
    }

    #[test]
    fn segments_of_other_users_or_modes_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let job = job();
        let s = Segment::create(&job, "planted", 4096).unwrap();
        let path = format!("{SHM_DIR}{}", s.name());
        // Opened up to the group and the world: another user could have written it.
        for mode in [0o644, 0o660, 0o606, 0o700] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = Segment::open(&job, "planted", 4096).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            assert!(e.to_string().contains(&format!("mode {mode:o}")), "{e}");
            assert!(e.to_string().contains(s.name()), "{e}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        Segment::open(&job, "planted", 4096).unwrap();
        // Owned by another user (only root can plant that here; otherwise say so).
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
            let e = Segment::open(&job, "planted", 4096).unwrap_err();
            assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
        } else {
            eprintln!("SKIPPED: segment owned by another user (needs root to chown)");
        }
        s.unlink().unwrap();
    }

    #[test]
    fn names_are_checked_and_private() {
        assert!(segment_name("../x", "a").is_err());
        assert!(segment_name("job", "a/b").is_err());
        assert!(segment_name("", "a").is_err());
        let job = job();
        let s = Segment::create(&job, "m", 64).unwrap();
        let meta = std::fs::metadata(format!("{SHM_DIR}{}", s.name())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        s.unlink().unwrap();
    }
}
