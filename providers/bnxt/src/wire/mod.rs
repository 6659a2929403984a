//! bnxt_re hardware formats, one file per structure (nic-formats.md §E–F). All little-endian.

pub mod cqe;
pub mod doorbell;
pub mod opcode;
pub mod psn;
pub mod rqe;
pub mod sqe;
pub mod wqe;

pub use cqe::{Cqe32, CqeBody, CqeRepr};
pub use doorbell::{DbType, DoorbellRepr};
pub use opcode::{CqeType, ReqStatus, RespStatus, WqeType};
pub use psn::{MsnEntry, PsnEntry, PsnExtEntry, PsnRepr};
pub use rqe::RqeHdr;
pub use sqe::{AtomicExt, BnxtSge, RdmaExt, SqeHdr, SqeHdrRepr};
pub use wqe::{SendWqe, SgeSlots, WqePayload};

/// Why bytes are not a valid bnxt structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer bytes than needed.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field out of range.
    Range {
        /// Field.
        field: &'static str,
        /// Value.
        value: u64,
    },
    /// Reserved bits set.
    Reserved {
        /// Field.
        field: &'static str,
    },
    /// Segments do not match the WQE type.
    Layout {
        /// What is wrong.
        what: &'static str,
    },
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated { what, need, have } => {
                write!(f, "{what}: need {need} bytes, have {have}")
            }
            Self::Range { field, value } => write!(f, "{field}: value {value:#x} out of range"),
            Self::Reserved { field } => write!(f, "{field}: reserved bits set"),
            Self::Layout { what } => write!(f, "segment layout: {what}"),
        }
    }
}

impl gda_hal::Error for ParseError {
    fn kind(&self) -> gda_hal::ErrorKind {
        gda_hal::ErrorKind::Malformed
    }
}
