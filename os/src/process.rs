//! Process liveness (Linux `/proc`): how processes sharing memory notice a dead peer.

/// The inode of this process's PID namespace (0 if `/proc` cannot tell). PIDs are comparable
/// only between processes whose namespaces agree: in containers every process can be PID 1.
#[must_use]
pub fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// Whether process `pid` still runs on this host (Linux `/proc`; a zombie — exited, not yet
/// reaped by its parent — does not). Jobs sharing memory use it to notice a dead peer.
#[must_use]
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(s) => s
            .rfind(')')
            .and_then(|i| s[i + 1..].trim_start().chars().next())
            .is_some_and(|st| st != 'Z' && st != 'X'),
        Err(_) => false,
    }
}

/// The credentials of the process at the other end of a Unix socket (`SO_PEERCRED`), as this
/// process sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Its user id.
    pub uid: u32,
    /// Its process id, `None` when that process lives in a PID namespace this one cannot see
    /// (a sibling container: the kernel then reports 0).
    pub pid: Option<u32>,
}

/// [`PeerCred`] of the socket `fd`.
pub fn peer_cred(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<PeerCred> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the kernel writes at
    // most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(std::io::Error::other(format!(
            "SO_PEERCRED gave {len} bytes, not a struct ucred"
        )));
    }
    Ok(PeerCred {
        uid: cred.uid,
        pid: u32::try_from(cred.pid).ok().filter(|&p| p != 0),
    })
}

/// Which way [`copy_with`] moves bytes between this process and another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyDir {
    /// From the other process's memory into this one's (`process_vm_readv`).
    FromPeer,
    /// From this process's memory into the other's (`process_vm_writev`).
    ToPeer,
}

/// Copies between ranges of this process (`local`: address, length) and ranges of process
/// `pid` (`remote`), in order, as one stream of bytes (cross-memory attach: the kernel copies
/// once, with no shared mapping). Returns the bytes moved, which may be fewer than asked when
/// a remote range is not mapped part-way. The kernel allows it only where `ptrace` would be
/// (the same user, and Yama's `ptrace_scope` permitting, or `CAP_SYS_PTRACE`); an address the
/// other process does not map is `EFAULT`, never a fault in this process.
///
/// # Safety
/// Every `local` range is valid for writes (`FromPeer`) or reads (`ToPeer`) until this returns
/// and is not accessed by Rust references meanwhile.
pub unsafe fn copy_with(
    pid: u32,
    dir: CopyDir,
    local: &[(*mut u8, usize)],
    remote: &[(u64, usize)],
) -> std::io::Result<usize> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    // The kernel takes at most IOV_MAX (1024) ranges a side.
    if local.len() > 1024 || remote.len() > 1024 {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    let l: Vec<libc::iovec> = local
        .iter()
        .map(|&(p, n)| libc::iovec {
            iov_base: p.cast(),
            iov_len: n,
        })
        .collect();
    let r: Vec<libc::iovec> = remote
        .iter()
        .map(|&(a, n)| libc::iovec {
            iov_base: a as usize as *mut libc::c_void,
            iov_len: n,
        })
        .collect();
    // SAFETY: the local ranges are valid for the access (the caller's contract); the remote
    // ones are only addresses in the other process, which the kernel checks there.
    let n = unsafe {
        match dir {
            CopyDir::FromPeer => libc::process_vm_readv(
                pid,
                l.as_ptr(),
                l.len() as libc::c_ulong,
                r.as_ptr(),
                r.len() as libc::c_ulong,
                0,
            ),
            CopyDir::ToPeer => libc::process_vm_writev(
                pid,
                l.as_ptr(),
                l.len() as libc::c_ulong,
                r.as_ptr(),
                r.len() as libc::c_ulong,
                0,
            ),
        }
    };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_peer_is_this_process() {
        use std::os::fd::AsFd;
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let c = peer_cred(a.as_fd()).unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(c.uid, unsafe { libc::getuid() });
        assert_eq!(c.pid, Some(std::process::id()));
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(peer_cred(f.as_fd()).is_err(), "not a socket");
    }

    #[test]
    fn cross_memory_copies_to_and_from_this_process() {
        // This process is its own peer (always permitted): both directions, several ranges a
        // side, and an unmapped remote address as an error, not a fault.
        let src = *b"0123456789abcdef";
        let mut dst = [0u8; 16];
        let pid = std::process::id();
        let (a, b) = dst.split_at_mut(5);
        // SAFETY: `a` and `b` are this frame's buffers, untouched by references meanwhile.
        let n = unsafe {
            copy_with(
                pid,
                CopyDir::FromPeer,
                &[(a.as_mut_ptr(), a.len()), (b.as_mut_ptr(), b.len())],
                &[(src.as_ptr() as u64, 10), (src.as_ptr() as u64 + 10, 6)],
            )
        };
        assert_eq!(n.unwrap(), 16);
        assert_eq!(&dst, &src);
        let mut back = [0u8; 4];
        // SAFETY: as above (`src` is only read).
        let n = unsafe {
            copy_with(
                pid,
                CopyDir::ToPeer,
                &[(src.as_ptr().cast_mut(), 4)],
                &[(back.as_mut_ptr() as u64, 4)],
            )
        };
        assert_eq!(n.unwrap(), 4);
        assert_eq!(&back, b"0123");
        // SAFETY: as above.
        let bad = unsafe { copy_with(pid, CopyDir::FromPeer, &[(dst.as_mut_ptr(), 8)], &[(8, 8)]) };
        assert_eq!(bad.unwrap_err().raw_os_error(), Some(libc::EFAULT));
        // SAFETY: as above.
        let nobody = unsafe { copy_with(0, CopyDir::FromPeer, &[(dst.as_mut_ptr(), 8)], &[]) };
        assert!(nobody.is_err());
    }

    #[test]
    fn liveness() {
        assert!(process_alive(std::process::id()));
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        // Exited but not reaped: a zombie counts as dead.
        let t = std::time::Instant::now();
        while process_alive(pid) && t.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!process_alive(pid));
        c.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
