//! The host control path, as one seam every NIC implements (std only).
//!
//! Device code (the rest of this crate) writes rings; somebody must first open a device,
//! register memory, and create and connect the queues it writes. That somebody is a
//! [`Device`]: the software NIC (`gda_sim::SimDevice`) is the first implementation, rdma-core's
//! verbs with `mlx5dv`/bnxt direct verbs the next. SHMEM and tools are written once against
//! these traits.
//!
//! The objects are those of verbs, shaped for what a GDA control path needs:
//!
//! ```text
//! Device ─┬─ info(): DeviceInfo ─ ports ─ GID table      select_path() → LocalPath
//!         ├─ alloc_pd() → Pd ─┬─ register(MemoryDesc) → Mr (lkey, rkey)
//!         │                   └─ create_rc_qp(QpCaps) → RcQp<Reset> ─init→ Init ─rtr→ Rtr ─rts→ Rts
//!         └─ create_cq(CqAttr) → Cq ─ handle(): CqHandle          │
//!                                                    sq_handle(): P::Sq, rq_handle(): P::Rq
//! ```
//!
//! - **Typed transitions.** [`RcQp`] carries its state in its type: `init` exists only on a
//!   `RcQp<_, Reset>` and takes exactly [`InitAttr`], `rtr` only on `Init` with [`RtrAttr`],
//!   `rts` only on `Rtr` with [`RtsAttr`]. A refused transition hands the QP back
//!   ([`Refused`]), so nothing is lost.
//! - **Paths.** [`select_path`] picks port and source GID the same way for every provider
//!   (RoCE v2 first, link-local and zero GIDs avoided); [`RtrAttr::new`] takes the path MTU
//!   from both ends and puts a GRH on RoCE.
//! - **Queue memory** can come from the caller ([`QueueMemory::Caller`]), so rings can live in
//!   GPU memory.
//! - **Endpoints** are plain data with a versioned byte form ([`Endpoint::to_bytes`]).
//! - Wake-ups of a software engine are not part of the seam: hardware needs none.

mod attr;
mod endpoint;
mod placed;
mod port;
mod qp;

pub use attr::{
    Access, CqAttr, InitAttr, MemoryDesc, QpCaps, QpField, QueueAllocator, QueueBuffer,
    QueueMemory, RtrAttr, RtsAttr,
};
pub use endpoint::Endpoint;
pub use placed::{DeviceDoorbell, PlacedBuffer};
pub use port::{
    DeviceInfo, Gid, GidEntry, GidType, LinkLayer, LocalPath, Mtu, PathRequest, PortInfo,
    PortState, select_path,
};
pub use qp::{Init, QpStage, RawRcQp, RcQp, Refused, Reset, Rtr, Rts};

use std::string::String;

use crate::{CqHandle, Provider};

/// Errors the generic part of the control path finds (attributes out of range, malformed
/// endpoints, no usable path). Providers' errors convert from it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlError {
    /// An attribute is out of range or inconsistent.
    Invalid(String),
    /// Endpoint bytes are not a valid endpoint.
    BadEndpoint(String),
    /// No port or GID can carry the connection.
    NoPath(String),
    /// Memory the caller's queue allocator was asked for could not be had.
    NoMemory(String),
}

impl core::fmt::Display for ControlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Invalid(s) => write!(f, "invalid attribute: {s}"),
            Self::BadEndpoint(s) => write!(f, "malformed endpoint: {s}"),
            Self::NoPath(s) => write!(f, "no usable path: {s}"),
            Self::NoMemory(s) => write!(f, "out of queue memory: {s}"),
        }
    }
}

impl std::error::Error for ControlError {}

impl crate::Error for ControlError {
    fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Invalid(_) => crate::ErrorKind::InvalidArgument,
            Self::BadEndpoint(_) => crate::ErrorKind::Malformed,
            Self::NoPath(_) => crate::ErrorKind::NoDevice,
            Self::NoMemory(_) => crate::ErrorKind::Exhausted,
        }
    }
}

/// A registered memory region.
pub trait MemoryRegion: Send + Sync {
    /// The address peers use for its first byte.
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The key local work requests name it by.
    fn lkey(&self) -> u32;
    /// The key remote peers name it by.
    fn rkey(&self) -> u32;
}

/// A completion queue.
pub trait CompletionQueue: Send + Sync {
    /// The handle device code polls with (valid while the CQ lives).
    fn handle(&self) -> CqHandle;
}

/// An RDMA device: the factory of every other control-path object.
///
/// Objects are destroyed by dropping them; a provider keeps what an object depends on alive
/// (or refuses the drop order the way verbs does with `EBUSY`).
pub trait Device: Send + Sync {
    /// The provider whose device functions write this device's queues.
    type Provider: Provider;
    /// The device's errors.
    type Error: crate::Error + std::error::Error + From<ControlError> + Send + Sync + 'static;
    /// A protection domain.
    type Pd: Send + Sync;
    /// A memory region.
    type Mr: MemoryRegion;
    /// A completion queue.
    type Cq: CompletionQueue;
    /// An RC QP without its state (wrapped in [`RcQp`]).
    type Qp: RawRcQp<Provider = Self::Provider, Error = Self::Error>;

    /// Identity, limits and ports.
    fn info(&self) -> &DeviceInfo;

    /// The local path for `want` ([`select_path`] over [`Device::info`]).
    fn path(&self, want: PathRequest) -> Result<LocalPath, Self::Error> {
        Ok(select_path(self.info(), want)?)
    }

    /// A protection domain.
    fn alloc_pd(&self) -> Result<Self::Pd, Self::Error>;

    /// Registers `mem` in `pd` with `access` (remote rights need `LOCAL_WRITE` as in verbs).
    ///
    /// # Safety
    /// The memory must stay valid until the region and every operation using its keys are
    /// finished: the NIC reads and writes it at any time.
    unsafe fn register(
        &self,
        pd: &Self::Pd,
        mem: &MemoryDesc<'_>,
        access: Access,
    ) -> Result<Self::Mr, Self::Error>;

    /// A completion queue.
    fn create_cq(&self, attr: &CqAttr) -> Result<Self::Cq, Self::Error>;

    /// An RC QP in RESET whose completions go to `send_cq` and `recv_cq`.
    fn create_rc_qp(
        &self,
        pd: &Self::Pd,
        send_cq: &Self::Cq,
        recv_cq: &Self::Cq,
        caps: &QpCaps,
    ) -> Result<RcQp<Self::Qp, Reset>, Self::Error>;
}
