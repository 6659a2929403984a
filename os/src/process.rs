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

#[cfg(test)]
mod tests {
    use super::*;

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
