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
