//! Errors of the SHMEM layer: every one names what failed and, where peers are involved, which.

use std::time::Duration;

use gda_hal::{ErrorKind, SqError};

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
        "symmetric heap exhausted: {requested} bytes aligned to {align} requested, {free} free in the largest block (heap {heap} bytes, its start aligned to {}; raise GDA_SHMEM_HEAP_SIZE)",
        crate::types::MAX_ALIGN
    )]
    OutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Alignment asked for (an alignment above [`crate::types::MAX_ALIGN`] can never be
        /// met).
        align: usize,
        /// Largest free block.
        free: usize,
        /// Heap size.
        heap: usize,
    },
    /// Misuse of the API (freeing twice, a team routine on a PE outside the team, …).
    #[error("invalid use: {0}")]
    Invalid(String),
    /// The RDMA data path to a PE failed: a post was refused, a completion carried an error
    /// status, or a wait for completions ran out. The queue's own error is kept as the source
    /// (with the work-completion status, for a completion error).
    #[error("RDMA {op} to PE {pe}: {source}")]
    Rdma {
        /// Target PE.
        pe: u32,
        /// What was being done (`put`, `get`, `atomic`, `quiet`, …).
        op: &'static str,
        /// The send queue's error.
        #[source]
        source: SqError,
    },
    /// The RDMA control path failed (registering the heap, creating or connecting a QP): the
    /// domain reports only text and an [`ErrorKind`].
    #[error("RDMA setup{}: {what}", with_pe(*.pe))]
    RdmaSetup {
        /// The peer whose connection was being made, when one was.
        pe: Option<u32>,
        /// The domain error's kind.
        kind: ErrorKind,
        /// What happened.
        what: String,
    },
    /// GPU memory (the `gpu` heap placement) is unavailable or a HIP call failed.
    #[error("GPU memory: {what}")]
    Gpu {
        /// The HIP error's kind (no GPU, no runtime, a refused call).
        kind: ErrorKind,
        /// What happened, and what to check.
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

fn with_pe(pe: Option<u32>) -> String {
    pe.map(|p| format!(" with PE {p}")).unwrap_or_default()
}

impl ShmemError {
    /// A control-path failure from a domain error (its text and kind).
    pub fn rdma_setup(pe: Option<u32>, e: &dyn gda_hal::Error) -> Self {
        Self::RdmaSetup {
            pe,
            kind: e.kind(),
            what: e.to_string(),
        }
    }

    /// The same error, naming `pe` as the peer of a control-path failure that named none.
    #[must_use]
    pub(crate) fn for_peer(self, peer: u32) -> Self {
        match self {
            Self::RdmaSetup {
                pe: None,
                kind,
                what,
            } => Self::RdmaSetup {
                pe: Some(peer),
                kind,
                what,
            },
            e => e,
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

impl gda_hal::Error for ShmemError {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Config(_) | Self::BadPe { .. } | Self::Range(_) | Self::Invalid(_) => {
                ErrorKind::InvalidArgument
            }
            // The rendezvous is sockets and files; a dead peer process is a broken connection.
            Self::Boot(_) | Self::PeGone { .. } | Self::Io { .. } => ErrorKind::Io,
            Self::Timeout { .. } => ErrorKind::Timeout,
            Self::OutOfMemory { .. } => ErrorKind::Exhausted,
            Self::Rdma { source, .. } => gda_hal::Error::kind(source),
            Self::RdmaSetup { kind, .. } | Self::Gpu { kind, .. } => *kind,
        }
    }
}

/// Result alias.
pub type Result<T, E = ShmemError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use gda_hal::{Error as _, WcStatus};
    use std::error::Error as _;

    #[test]
    fn rdma_errors_keep_the_completion_status_as_source() {
        let sq = SqError::Completion {
            status: WcStatus::RemAccessErr,
            wqe_counter: 5,
        };
        let e = ShmemError::Rdma {
            pe: 3,
            op: "put",
            source: sq,
        };
        let msg = e.to_string();
        assert!(msg.starts_with("RDMA put to PE 3: "), "{msg}");
        assert!(msg.contains("completed with error"), "{msg}");
        let src = e.source().and_then(|s| s.downcast_ref::<SqError>());
        assert!(
            matches!(
                src,
                Some(SqError::Completion {
                    status: WcStatus::RemAccessErr,
                    ..
                })
            ),
            "{src:?}"
        );
        assert_eq!(e.kind(), sq.kind());
        let t = ShmemError::Rdma {
            pe: 1,
            op: "quiet",
            source: SqError::Timeout {
                what: "completions",
            },
        };
        assert_eq!(t.kind(), ErrorKind::Timeout);
    }

    #[test]
    fn kinds_and_setup_errors() {
        let s = ShmemError::RdmaSetup {
            pe: None,
            kind: ErrorKind::InvalidState,
            what: "QP 7: cannot move".into(),
        };
        assert_eq!(s.to_string(), "RDMA setup: QP 7: cannot move");
        let s = s.for_peer(2);
        assert_eq!(s.to_string(), "RDMA setup with PE 2: QP 7: cannot move");
        assert_eq!(s.kind(), ErrorKind::InvalidState);
        assert_eq!(
            ShmemError::BadPe { pe: 9, n_pes: 2 }.kind(),
            ErrorKind::InvalidArgument
        );
        let oom = ShmemError::OutOfMemory {
            requested: 1,
            align: 1,
            free: 0,
            heap: 0,
        };
        assert_eq!(oom.kind(), ErrorKind::Exhausted);
        let t = ShmemError::Timeout {
            what: "x".into(),
            after: Duration::from_secs(1),
            missing: vec![0],
        };
        assert_eq!(t.kind(), ErrorKind::Timeout);
    }
}
