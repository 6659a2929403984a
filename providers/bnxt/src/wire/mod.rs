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

pub use gda_hal::ParseError;
