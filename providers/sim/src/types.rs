//! Plain types of the software NIC's control path: QP states, CQ modes, errors and the
//! fabric address of a QP.

use std::sync::Arc;

use gda_hal::model::{DeviceModel, QpGeometry};

/// A device model, shared by a NIC and its CQs and QPs (see [`gda_hal::model`]).
pub type Model = Arc<dyn DeviceModel>;

/// QP states (`enum ibv_qp_state` order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum QpState {
    /// Fresh or reset.
    Reset = 0,
    /// Initialised.
    Init = 1,
    /// Ready to receive (connected).
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Error: every WQE completes with `WR_FLUSH_ERR`.
    Error = 6,
}

impl QpState {
    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Init,
            2 => Self::Rtr,
            3 => Self::Rts,
            6 => Self::Error,
            _ => Self::Reset,
        }
    }
}

/// Completion-queue modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqMode {
    /// A ring of CQEs with owner bits.
    Normal,
    /// Every CQE overwrites slot 0 (progress is reconstructed from its counter).
    Collapsed,
}

/// Errors of the software NIC's control path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A QP state transition the verbs state machine does not allow.
    #[error(
        "QP {qpn}: cannot move from {from:?} to {to:?} (allowed: Reset→Init→Rtr→Rts, any→Error, any→Reset)"
    )]
    InvalidTransition {
        /// QP number.
        qpn: u32,
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// An argument is out of range.
    #[error("{0}")]
    InvalidArgument(String),
    /// The endpoint names no QP on this fabric.
    #[error("endpoint {0:?} names no QP on this fabric")]
    UnknownEndpoint(Endpoint),
    /// The endpoint bytes are malformed.
    #[error("malformed endpoint: {0}")]
    BadEndpoint(&'static str),
    /// The software NIC does not do this.
    #[error("not supported: {0}")]
    Unsupported(&'static str),
    /// A control-path attribute or endpoint was refused (see [`gda_hal::control`]).
    #[error(transparent)]
    Control(#[from] gda_hal::control::ControlError),
}

impl gda_hal::Error for SimError {
    fn kind(&self) -> gda_hal::ErrorKind {
        match self {
            Self::InvalidTransition { .. } => gda_hal::ErrorKind::InvalidState,
            Self::InvalidArgument(_) | Self::BadEndpoint(_) => gda_hal::ErrorKind::InvalidArgument,
            Self::UnknownEndpoint(_) => gda_hal::ErrorKind::NoDevice,
            Self::Unsupported(_) => gda_hal::ErrorKind::Unsupported,
            Self::Control(e) => gda_hal::Error::kind(e),
        }
    }
}

/// What two QPs exchange to connect (like a LID/GID + QPN pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Fabric identity (endpoints from other fabrics are refused).
    pub fabric: u64,
    /// NIC index within the fabric.
    pub nic: u32,
    /// QP number.
    pub qpn: u32,
}

impl Endpoint {
    /// Serialised size.
    pub const BYTES: usize = 16;

    /// Serialises (little-endian).
    #[must_use]
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.fabric.to_le_bytes());
        b[8..12].copy_from_slice(&self.nic.to_le_bytes());
        b[12..].copy_from_slice(&self.qpn.to_le_bytes());
        b
    }

    /// Parses what [`Endpoint::to_bytes`] wrote.
    pub fn from_bytes(b: &[u8]) -> Result<Self, SimError> {
        let b: &[u8; 16] = b
            .try_into()
            .map_err(|_| SimError::BadEndpoint("expected 16 bytes"))?;
        let w =
            |r: std::ops::Range<usize>| b[r].iter().rev().fold(0u64, |a, &x| a << 8 | u64::from(x));
        Ok(Self {
            fabric: w(0..8),
            nic: w(8..12) as u32,
            qpn: w(12..16) as u32,
        })
    }
}

/// Sizes of a new QP.
#[derive(Clone, Copy, Debug)]
pub struct QpInit {
    /// Send-queue units (64-byte units; a power of two).
    pub sq_units: u32,
    /// Receive-queue WQEs (a power of two).
    pub rq_wqes: u32,
    /// Largest inline payload.
    pub max_inline: u32,
    /// Most gather entries per WQE (send and receive).
    pub max_sge: u32,
    /// RNR retries before `RNR_RETRY_EXC_ERR`; 7 means retry forever (as in verbs).
    pub rnr_retry: u8,
    /// Path MTU in bytes (256..=4096, a power of two): what PSNs count on the bnxt model.
    pub path_mtu: u32,
}

impl QpInit {
    /// Most units in a send queue and WQEs in a receive queue.
    pub const MAX_WQES: u32 = 1 << 16;
    /// Most gather entries per WQE.
    pub const MAX_SGE: u32 = 30;

    /// The sizes a device model checks and lays out.
    #[must_use]
    pub fn geometry(&self) -> QpGeometry {
        QpGeometry {
            sq_units: self.sq_units,
            rq_wqes: self.rq_wqes,
            max_sge: self.max_sge,
            max_inline: self.max_inline,
            path_mtu: self.path_mtu,
        }
    }
}

impl Default for QpInit {
    fn default() -> Self {
        Self {
            sq_units: 256,
            rq_wqes: 256,
            max_inline: 256,
            max_sge: 4,
            rnr_retry: 7,
            path_mtu: 1024,
        }
    }
}
