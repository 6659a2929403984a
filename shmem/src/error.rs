//! Errors of the SHMEM layer: every one names what failed and, where peers are involved, which.

use std::time::Duration;

/// Why a SHMEM call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShmemError {
    /// The launcher environment or configuration is wrong (bad variable, missing rank…).
    #[error("configuration: {0}")]
    Config(String),
    /// Bootstrap (rendezvous) failed: connection, authentication or a peer that never came.
    #[error("bootstrap: {0}")]
    Boot(String),
    /// A wait ran out of time; `missing` lists the PEs that had not done their part.
    #[error("timed out after {after:?} waiting for {what}{}", missing_list(.missing))]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
        /// PEs (world numbering) that had not arrived, when known.
        missing: Vec<u32>,
    },
    /// A PE's process is gone (killed or exited) while others still needed it.
    #[error("PE {pe} (pid {pid}) is gone: {what} cannot complete")]
    PeGone {
        /// The PE.
        pe: u32,
        /// Its process id.
        pid: u32,
        /// What was waiting for it.
        what: String,
    },
    /// A PE number outside the job or team.
    #[error("PE {pe} is not in 0..{n_pes}")]
    BadPe {
        /// The PE given.
        pe: u32,
        /// Size of the job or team.
        n_pes: u32,
    },
    /// A symmetric-memory range outside its allocation, or a misaligned atomic target.
    #[error("symmetric access out of range: {0}")]
    Range(String),
    /// The symmetric heap cannot satisfy an allocation.
    #[error(
        "symmetric heap exhausted: {requested} bytes requested, {free} free in the largest block (heap {heap} bytes; raise GDA_SHMEM_HEAP_SIZE)"
    )]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Largest free block.
        free: usize,
        /// Heap size.
        heap: usize,
    },
    /// Misuse of the API (freeing twice, a team routine on a PE outside the team, …).
    #[error("invalid use: {0}")]
    Invalid(String),
    /// The RDMA transport failed (a post was refused or a completion carried an error).
    #[error("RDMA to PE {pe}: {what}")]
    Rdma {
        /// Target PE.
        pe: u32,
        /// What happened.
        what: String,
    },
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn missing_list(m: &[u32]) -> String {
    if m.is_empty() {
        String::new()
    } else {
        let v: Vec<String> = m.iter().map(u32::to_string).collect();
        format!(" (missing PEs: {})", v.join(", "))
    }
}

impl ShmemError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// Result alias.
pub type Result<T, E = ShmemError> = std::result::Result<T, E>;
