//! Moving a program's private memory onto pages another process can map (Linux).
//!
//! A verbs program registers memory it allocated itself — private anonymous pages no other
//! process can map. The software NIC places a peer's RDMA WRITE or READ directly into such a
//! region, without waking the process that owns it, once the region lives on a memfd it can
//! hand to the peer. [`SharedPages::share`] moves a page-aligned range there in place: the
//! bytes are copied to a new memfd, whose mapping then replaces the range atomically
//! (`mremap` with `MREMAP_FIXED`: the range is never unmapped in between), at the same
//! address, with the same contents. Dropping it moves the range back onto private anonymous
//! pages the same way, so a peer that kept its mapping of the memfd can no longer reach the
//! program's memory.
//!
//! Only ranges that are wholly private, anonymous, readable and writable are moved (a file's
//! pages, a shared mapping, the stack, a GPU's host-mapped memory stay where they are), and
//! only whole pages, so nothing beside the range changes. The range is marked
//! `MADV_DONTFORK`, as rdma-core marks registered memory when it is asked to be fork-safe: a
//! child does not share these pages with its parent behind its back (it does not get them).
//! What a program must not do — and has no reason to — is write the range from another thread
//! *while* it is moved (during the registration or deregistration call): such a write can be
//! lost.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{Advice, MapFlags, MremapFlags, ProtFlags};

/// The page size (4 KiB on the machines gda runs on; read from the kernel).
#[must_use]
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// A range of the program's memory moved onto a memfd ([`SharedPages::share`]); moved back
/// onto private pages when dropped.
#[derive(Debug)]
pub struct SharedPages {
    addr: usize,
    len: usize,
    fd: OwnedFd,
}

impl SharedPages {
    /// Moves `[addr, addr + len)` onto a new memfd, keeping its address and contents.
    /// `Ok(None)` when the range is not page-aligned whole pages, or not wholly private
    /// anonymous read-write memory of this process.
    ///
    /// # Safety
    /// The range is memory of this process; no other thread writes it during the call.
    pub unsafe fn share(addr: usize, len: usize) -> io::Result<Option<Self>> {
        let page = page_size();
        if len == 0 || addr % page != 0 || len % page != 0 || addr.checked_add(len).is_none() {
            return Ok(None);
        }
        if !private_anonymous(addr, len)? {
            return Ok(None);
        }
        let fd = sealed_memfd("gda-sim-region", len as u64)?;
        // Chunk by chunk, so the copy never holds more than a chunk twice (a large region
        // would otherwise need its size again in free memory for a moment).
        let moved = move_chunks(addr, len, |off, n| {
            // SAFETY: a new mapping of a piece of the new memfd, anywhere.
            unsafe {
                rustix::mm::mmap(
                    std::ptr::null_mut(),
                    n,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED,
                    &fd,
                    off as u64,
                )
            }
        });
        if let Err((done, e)) = moved {
            // The chunks moved so far go back onto private pages (dropped: `unshare`), so a
            // failed registration leaves the program's memory as it found it.
            if done > 0 {
                drop(Self {
                    addr,
                    len: done,
                    fd,
                });
            }
            return Err(e);
        }
        // SAFETY: the range is ours now; failing leaves it shared with a child, as before.
        let _ = unsafe { rustix::mm::madvise(addr as *mut _, len, Advice::LinuxDontFork) };
        Ok(Some(Self { addr, len, fd }))
    }

    /// The memfd holding the range (offset 0 is `addr`).
    #[must_use]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn unshare(&self) -> io::Result<()> {
        // The program may have unmapped the range (or mapped something else there) while it was
        // registered, against the rules of registration: then there is nothing to move back.
        if !mapped_from(self.addr, self.len, self.fd.as_fd(), 0)? {
            return Ok(());
        }
        move_chunks(self.addr, self.len, |off, n| {
            // SAFETY: a new private mapping, anywhere.
            let staged = unsafe {
                rustix::mm::mmap_anonymous(
                    std::ptr::null_mut(),
                    n,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::PRIVATE,
                )
            };
            if off > 0 {
                // The chunk before is back on private pages: its memfd pages can go.
                let before = (off - CHUNK_BYTES.min(off)) as u64;
                let _ = rustix::fs::fallocate(
                    &self.fd,
                    rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
                    before,
                    CHUNK_BYTES.min(off) as u64,
                );
            }
            staged
        })
        .map_err(|(_, e)| e)
    }
}

/// A new memfd of `len` bytes, sealed against resizing (and further sealing): a process it is
/// passed to can map it without fearing a `SIGBUS` from a shrink.
///
/// # Errors
/// `memfd_create`, `ftruncate` or sealing failed.
pub fn sealed_memfd(name: &str, len: u64) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::ftruncate(&fd, len)?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok(fd)
}

/// How much of a range is moved at a time ([`move_chunks`]).
const CHUNK_BYTES: usize = 64 << 20;

/// Moves `[addr, addr + len)` onto new pages, `CHUNK_BYTES` at a time: `map(offset, n)` maps
/// the new pages for the `n` bytes at `offset`; the bytes are copied there and the mapping
/// replaces the old pages in one step (`mremap` with `MREMAP_FIXED`: the range is never
/// unmapped in between). On an error the chunks before stay moved, their contents intact, and
/// the error comes with how many bytes that is.
fn move_chunks(
    addr: usize,
    len: usize,
    map: impl Fn(usize, usize) -> rustix::io::Result<*mut core::ffi::c_void>,
) -> Result<(), (usize, io::Error)> {
    let mut off = 0;
    while off < len {
        let n = CHUNK_BYTES.min(len - off);
        let staged = map(off, n).map_err(|e| (off, e.into()))?;
        // SAFETY: the caller's range is mapped and readable (its contract), `staged` is ours,
        // `n` bytes each.
        unsafe {
            std::ptr::copy_nonoverlapping((addr + off) as *const u8, staged.cast::<u8>(), n);
        }
        // SAFETY: `staged` (ours) replaces that piece of the caller's range in one step.
        let moved = unsafe {
            rustix::mm::mremap_fixed(staged, n, n, MremapFlags::MAYMOVE, (addr + off) as *mut _)
        };
        if let Err(e) = moved {
            // SAFETY: ours, still where it was.
            let _ = unsafe { rustix::mm::munmap(staged, n) };
            return Err((off, e.into()));
        }
        off += n;
    }
    Ok(())
}

impl Drop for SharedPages {
    /// Moves the range back onto private anonymous pages. If that fails (no memory for the
    /// copy), the range stays on the memfd: the program's memory is intact either way.
    fn drop(&mut self) {
        let _ = self.unshare();
    }
}

/// Whether every page of `[addr, addr + len)` is in a private anonymous read-write mapping of
/// this process (`/proc/self/maps`: no file, or the heap).
fn private_anonymous(addr: usize, len: usize) -> io::Result<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(covered(&maps, addr, addr + len))
}

/// Whether the private anonymous read-write mappings listed in `maps` (the `/proc/<pid>/maps`
/// format) cover `[start, end)` without a gap.
fn covered(maps: &str, start: usize, end: usize) -> bool {
    covered_by(maps, start, end, |l| {
        l.perms.starts_with("rw")
            && l.perms.ends_with('p')
            && l.inode == "0"
            && (l.path.is_empty() || l.path == "[heap]")
    })
}

/// Whether `[addr, addr + len)` is mapped in this process readable (and, with `write`,
/// writable), from `/proc/self/maps`: how a routine that takes a caller's pointer checks the
/// whole range before touching any of it, instead of faulting part-way. An empty range is.
pub fn accessible(addr: usize, len: usize, write: bool) -> io::Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    let Some(end) = addr.checked_add(len) else {
        return Ok(false);
    };
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(covered_by(&maps, addr, end, |l| {
        let p = l.perms.as_bytes();
        p.first() == Some(&b'r') && (!write || p.get(1) == Some(&b'w'))
    }))
}

/// Whether `[addr, addr + len)` is mapped shared and writable from `fd` at `offset`: the
/// object behind a name is the one this process mapped there, not one put in its place.
pub fn mapped_from(addr: usize, len: usize, fd: BorrowedFd<'_>, offset: u64) -> io::Result<bool> {
    let st = rustix::fs::fstat(fd)?;
    let inode = st.st_ino.to_string();
    let dev = format!(
        "{:02x}:{:02x}",
        rustix::fs::major(st.st_dev),
        rustix::fs::minor(st.st_dev)
    );
    let Some(end) = addr.checked_add(len) else {
        return Ok(false);
    };
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    Ok(covered_by(&maps, addr, end, |l| {
        // The file offset this line maps at `addr` (or at its own start, past `addr`) must be
        // `offset` plus as far past `addr`.
        let at = addr.max(l.lo);
        let theirs = l.offset.checked_add((at - l.lo) as u64);
        let ours = offset.checked_add((at - addr) as u64);
        l.perms.starts_with("rw")
            && l.perms.ends_with('s')
            && l.inode == inode
            && l.dev == dev
            && theirs.is_some()
            && theirs == ours
    }))
}

/// One line of `/proc/<pid>/maps`.
struct MapsLine<'a> {
    lo: usize,
    perms: &'a str,
    offset: u64,
    dev: &'a str,
    inode: &'a str,
    path: &'a str,
}

/// Whether mappings listed in `maps` whose lines `qualifies` cover `[start, end)` without a
/// gap.
fn covered_by(
    maps: &str,
    start: usize,
    end: usize,
    qualifies: impl Fn(&MapsLine<'_>) -> bool,
) -> bool {
    let mut at = start;
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(off), Some(dev), Some(inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.next().unwrap_or("");
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi), Ok(offset)) = (
            usize::from_str_radix(lo, 16),
            usize::from_str_radix(hi, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        if hi <= at || lo > at {
            continue;
        }
        let l = MapsLine {
            lo,
            perms,
            offset,
            dev,
            inode,
            path,
        };
        if !qualifies(&l) {
            return false;
        }
        at = hi;
        if at >= end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new private anonymous read-write mapping of `len` bytes (unmapped by the test).
    fn private(len: usize) -> *mut core::ffi::c_void {
        // SAFETY: a new mapping, anywhere.
        unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .unwrap()
    }

    #[test]
    fn only_private_anonymous_mappings_cover_a_range() {
        let maps = "\
1000-3000 rw-p 00000000 00:00 0 \n\
3000-4000 rw-p 00000000 00:00 0 [heap]\n\
4000-5000 rw-s 00000000 00:01 77 /memfd:x (deleted)\n\
5000-6000 r--p 00000000 00:00 0 \n\
7000-8000 rw-p 00000000 00:00 0 [stack]\n";
        assert!(covered(maps, 0x1000, 0x4000));
        assert!(covered(maps, 0x2000, 0x3000));
        assert!(!covered(maps, 0x2000, 0x5000), "a shared mapping");
        assert!(!covered(maps, 0x5000, 0x6000), "read-only");
        assert!(!covered(maps, 0x6000, 0x7000), "a hole");
        assert!(!covered(maps, 0x7000, 0x8000), "the stack");
        assert!(!covered(maps, 0x3000, 0x9000), "runs past the end");
    }

    #[test]
    fn accessible_ranges_are_mapped_with_the_rights_asked_whole() {
        let page = page_size();
        let p = private(3 * page) as usize;
        // SAFETY: the last page of our mapping.
        unsafe {
            rustix::mm::mprotect(
                (p + 2 * page) as *mut _,
                page,
                rustix::mm::MprotectFlags::READ,
            )
        }
        .unwrap();
        assert!(accessible(p, 3 * page, false).unwrap());
        assert!(accessible(p, 2 * page, true).unwrap());
        assert!(
            !accessible(p, 3 * page, true).unwrap(),
            "the last page is read-only"
        );
        assert!(accessible(p + 2 * page, 8, false).unwrap());
        assert!(
            !accessible(p + page, 3 * page, false).unwrap(),
            "past the mapping"
        );
        assert!(!accessible(usize::MAX - 8, 16, false).unwrap(), "wraps");
        assert!(accessible(0, 0, true).unwrap(), "nothing to reach");
        // SAFETY: ours.
        unsafe { rustix::mm::munmap(p as *mut _, 3 * page) }.unwrap();
        assert!(!accessible(p, 8, false).unwrap(), "unmapped");
    }

    #[test]
    fn a_shared_range_keeps_its_address_and_bytes_both_ways() {
        let page = page_size();
        let len = 3 * page;
        let p = private(len).cast::<u8>();
        // SAFETY: ours.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, len) };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // SAFETY: ours, no other thread.
        let s = unsafe { SharedPages::share(p as usize, len) }
            .unwrap()
            .unwrap();
        assert_eq!(s.addr, p as usize);
        assert!(bytes.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
        // Another mapping of the memfd sees the range and writes into it.
        // SAFETY: a new shared mapping of the memfd.
        let q = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                s.fd(),
                0,
            )
        }
        .unwrap()
        .cast::<u8>();
        // SAFETY: the other mapping, `len` bytes.
        unsafe { q.add(page + 5).write_volatile(0xee) };
        // SAFETY: reading our own range.
        assert_eq!(unsafe { p.add(page + 5).read_volatile() }, 0xee);
        assert!(
            !private_anonymous(p as usize, len).unwrap(),
            "now a shared mapping"
        );
        drop(s);
        assert!(private_anonymous(p as usize, len).unwrap(), "moved back");
        // SAFETY: the other mapping still points at the memfd, no longer at our range.
        unsafe { q.add(7).write_volatile(0xdd) };
        // SAFETY: reading our own range.
        assert_eq!(unsafe { p.add(7).read_volatile() }, 7);
        // SAFETY: as above.
        assert_eq!(unsafe { p.add(page + 5).read_volatile() }, 0xee);
        // SAFETY: both ours.
        unsafe {
            rustix::mm::munmap(q.cast(), len).unwrap();
            rustix::mm::munmap(p.cast(), len).unwrap();
        }
    }

    #[test]
    fn a_range_of_several_chunks_keeps_every_page() {
        let page = page_size();
        let len = 2 * CHUNK_BYTES + 3 * page;
        let p = private(len).cast::<u64>();
        let words = len / 8;
        let step = page / 8;
        for i in (0..words).step_by(step) {
            // SAFETY: inside the mapping.
            unsafe { p.add(i).write(i as u64 ^ 0x5a5a) };
        }
        let check = |what: &str| {
            for i in (0..words).step_by(step) {
                // SAFETY: inside the mapping.
                let v = unsafe { p.add(i).read() };
                assert_eq!(v, i as u64 ^ 0x5a5a, "{what}: word {i}");
            }
        };
        // SAFETY: ours, no other thread.
        let s = unsafe { SharedPages::share(p as usize, len) }
            .unwrap()
            .unwrap();
        check("shared");
        drop(s);
        check("moved back");
        assert!(private_anonymous(p as usize, len).unwrap());
        // SAFETY: ours.
        unsafe { rustix::mm::munmap(p.cast(), len).unwrap() };
    }

    #[test]
    fn a_range_unmapped_while_shared_is_left_alone_when_dropped() {
        let len = 2 * page_size();
        let p = private(len);
        // SAFETY: ours, no other thread.
        let s = unsafe { SharedPages::share(p as usize, len) }
            .unwrap()
            .unwrap();
        // SAFETY: ours (the program frees its buffer before deregistering it).
        unsafe { rustix::mm::munmap(p, len).unwrap() };
        // Nothing is copied from the hole (that would fault) and nothing is mapped there.
        drop(s);
        assert!(!covered(
            &std::fs::read_to_string("/proc/self/maps").unwrap(),
            p as usize,
            p as usize + len
        ));
    }

    #[test]
    fn a_mapping_is_recognised_from_its_file_and_offset_only() {
        let page = page_size();
        let fd = rustix::fs::memfd_create("t", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 3 * page as u64).unwrap();
        // SAFETY: a new shared mapping of pages 1 and 2 of the memfd.
        let m = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                2 * page,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                page as u64,
            )
        }
        .unwrap() as usize;
        let other = rustix::fs::memfd_create("u", MemfdFlags::CLOEXEC).unwrap();
        assert!(mapped_from(m, 2 * page, fd.as_fd(), page as u64).unwrap());
        assert!(mapped_from(m + page, page, fd.as_fd(), 2 * page as u64).unwrap());
        assert!(
            !mapped_from(m, 2 * page, fd.as_fd(), 0).unwrap(),
            "another offset"
        );
        assert!(
            !mapped_from(m, 2 * page, other.as_fd(), page as u64).unwrap(),
            "another file"
        );
        assert!(
            !mapped_from(m, 3 * page, fd.as_fd(), page as u64).unwrap(),
            "past the mapping"
        );
        // SAFETY: ours.
        unsafe { rustix::mm::munmap(m as *mut _, 2 * page).unwrap() };
    }

    #[test]
    fn unaligned_or_file_backed_ranges_are_left_alone() {
        let page = page_size();
        let v = vec![0u8; 4 * page];
        let a = v.as_ptr() as usize;
        // SAFETY: our own vector; nothing moves for a misaligned start.
        let misaligned = unsafe { SharedPages::share(a | 1, page) };
        assert!(misaligned.unwrap().is_none());
        // SAFETY: as above; not whole pages.
        let partial = unsafe { SharedPages::share(a & !(page - 1), page + 1) };
        assert!(partial.unwrap().is_none());
        let fd = rustix::fs::memfd_create("t", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, page as u64).unwrap();
        // SAFETY: a new shared mapping.
        let m = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                page,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .unwrap();
        // SAFETY: ours; a shared mapping is not moved.
        let shared = unsafe { SharedPages::share(m as usize, page) };
        assert!(shared.unwrap().is_none());
        // SAFETY: ours.
        unsafe { rustix::mm::munmap(m, page).unwrap() };
    }
}
