//! Whether a peer's process is still alive, to report a dead peer rather than the errors its
//! death caused.

use crate::error::ShmemError;

/// Which PEs' processes this PE can check for liveness, and their PIDs.
pub(crate) struct Liveness {
    pids: Vec<u32>,
    /// Whether `pids[j]` can be checked here (another process, same host, same PID namespace).
    watch: Vec<bool>,
}

impl Liveness {
    /// `pids[j]` is PE `j`'s process id; `watch[j]` whether it may be checked.
    pub(crate) fn new(pids: Vec<u32>, watch: Vec<bool>) -> Self {
        Self { pids, watch }
    }

    /// The PE (if any) whose process is gone; `only`: check just that one.
    pub(crate) fn gone(&self, only: Option<u32>) -> Option<ShmemError> {
        (0..self.pids.len() as u32)
            .filter(|&j| only.is_none_or(|o| o == j))
            .filter(|&j| self.watch[j as usize])
            .find(|&j| !gda_os::process::process_alive(self.pids[j as usize]))
            .map(|j| ShmemError::PeGone {
                pe: j,
                pid: self.pids[j as usize],
                what: "the job".into(),
            })
    }
}
