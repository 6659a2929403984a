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

pub use gda_hal::ParseError;

/// The error syndrome hardware reports for a WQE rejected with `e` (a malformed WQE is a
/// local QP operation error; an inline length past the WQE a local length error).
#[must_use]
pub fn syndrome_of(e: &ParseError) -> Syndrome {
    match e {
        ParseError::Range {
            field: "inline.byte_count",
            ..
        } => Syndrome::LocalLengthErr,
        _ => Syndrome::LocalQpOpErr,
    }
}
