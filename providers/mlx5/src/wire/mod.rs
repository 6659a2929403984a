//! mlx5 hardware formats, one file per structure (nic-formats.md §A–D).
//!
//! Layer 1 is `#[repr(C)]` Pod structs of big-endian fields, with size and every offset asserted
//! at compile time. Layer 2 is a `*Repr` with `parse`/`emit` (and a byte-range view for the
//! control segment), checked against layer 1 by property tests.

pub mod atomic_seg;
pub mod cqe64;
pub mod ctrl_seg;
pub mod data_seg;
pub mod dbrec;
pub mod inline_seg;
pub mod opcode;
pub mod raddr_seg;
pub mod wqe;

pub use atomic_seg::{AtomicSeg, MaskedCs32Seg, MaskedCs64Seg, MaskedFa32Seg, MaskedFa64Seg};
pub use cqe64::{Cqe64, CqeRepr};
pub use ctrl_seg::{CtrlRepr, CtrlSeg, CtrlView};
pub use data_seg::DataSeg;
pub use dbrec::DoorbellRecord;
pub use opcode::{CqeOpcode, Opcode, Syndrome};
pub use raddr_seg::RaddrSeg;
pub use wqe::{AtomicRepr, PayloadRepr, SgeSegs, WqeRepr};

/// Bytes in a send WQE basic block (`MLX5_SEND_WQE_BB`).
pub const WQEBB_BYTES: u32 = 64;
/// Bytes in one DS unit.
pub const DS_BYTES: u32 = 16;

/// Why bytes are not a valid mlx5 structure. Every variant names the field or check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field holds a value out of its valid range.
    Range {
        /// Field name.
        field: &'static str,
        /// Offending value.
        value: u64,
    },
    /// Reserved bits are set.
    Reserved {
        /// Field name.
        field: &'static str,
    },
    /// An opcode gda (and the RC data path) does not know.
    UnknownOpcode(u8),
    /// The segments do not match the opcode's layout.
    Layout {
        /// What is wrong.
        what: &'static str,
    },
    /// A valid format gda does not decode.
    Unsupported {
        /// What it is.
        what: &'static str,
    },
}

impl ParseError {
    /// The error syndrome hardware reports for a WQE rejected this way (a malformed WQE is a
    /// local QP operation error; an inline length past the WQE a local length error).
    #[must_use]
    pub fn syndrome(&self) -> Syndrome {
        match self {
            Self::Range {
                field: "inline.byte_count",
                ..
            } => Syndrome::LocalLengthErr,
            _ => Syndrome::LocalQpOpErr,
        }
    }
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Truncated { what, need, have } => {
                write!(f, "{what}: need {need} bytes, have {have}")
            }
            Self::Range { field, value } => write!(f, "{field}: value {value:#x} out of range"),
            Self::Reserved { field } => write!(f, "{field}: reserved bits set"),
            Self::UnknownOpcode(op) => write!(f, "unknown or unsupported WQE opcode {op:#04x}"),
            Self::Layout { what } => write!(f, "segment layout: {what}"),
            Self::Unsupported { what } => write!(f, "unsupported: {what}"),
        }
    }
}

impl gda_hal::Error for ParseError {
    fn kind(&self) -> gda_hal::ErrorKind {
        gda_hal::ErrorKind::Malformed
    }
}
