//! # gda-sim — the software NIC
//!
//! A real device model, not a mock: protection domains, memory regions with unguessable keys,
//! completion queues (normal and collapsed), RC queue pairs with the verbs state machine, and an
//! engine that notices doorbells exactly as device functions leave them in memory, fetches WQEs
//! from ring memory, executes them with RC semantics and writes CQEs.
//!
//! **Device models** decide the byte formats. Each lives in its provider's crate and implements
//! [`gda_hal::model::DeviceModel`]; the engine is written once against that trait and never
//! names a vendor. `gda_native::model::NativeModel` runs gda's own simple format;
//! `gda_mlx5::model::Mlx5Model` executes ConnectX WQEs, doorbell records, doorbells and CQEs, so
//! a kernel written against `gda_mlx5::Mlx5` runs unchanged here; `gda_bnxt::model::BnxtModel`
//! executes Broadcom bnxt_re queues from the doorbell alone and checks the PSN-table entries
//! software fills. The vendor table (`gda-providers`) lists them; this crate depends on no vendor
//! (they are dev-dependencies of its tests and examples). The engine never trusts queue bytes: a malformed WQE
//! becomes the error CQE hardware would write.
//!
//! **Across processes** a [`Fabric::process`] fabric is reachable from the other processes of
//! the same user on the host: a QP connects to a QP of another process by [`Endpoint`] (or by
//! GID + QP number through [`endpoint_of`]), and every RC operation executes at the responder,
//! where the memory is — the requester's engine sends a request, the responder's engine checks
//! and executes it against its own keys, queues and memory and answers (see the `wire` module).
//! The verbs-compatible library (`gda-verbs`) and gda-shmem's launched PEs run on it.
//!
//! **Chaos mode** (`GDA_SIM_CHAOS=<seed>` or [`FabricConfig::chaos`]) varies QP service order,
//! batch sizes and delays without breaking any guarantee hardware gives; a seed reproduces the
//! engine's choices.
//!
//! ```
//! use gda_native::Native;
//! use gda_sim::{Access, CqMode, Fabric, FabricConfig, QpInit};
//! use gda_hal::{Payload, Remote, SendFlags, SendQueue, WorkRequest};
//!
//! let fabric = Fabric::new(FabricConfig::default());
//! let nic = fabric.add_nic_for::<Native>();
//! let pd = nic.alloc_pd();
//! let cq = nic.create_cq(256, CqMode::Normal).unwrap();
//! let qp = pd.create_qp(QpInit::default(), &cq, &cq).unwrap();
//! qp.bring_up(&qp.endpoint()).unwrap(); // loopback
//! let dst = pd.alloc_mr(64, Access::ALL);
//! // SAFETY: the QP and CQ outlive the queue, which is the only poster and poller.
//! let sq = unsafe { SendQueue::<Native>::new(qp.sq_handle::<Native>().unwrap(), cq.handle(), 5_000) }.unwrap();
//! let wr = WorkRequest::Write { remote: Remote { addr: dst.addr(), rkey: dst.rkey() },
//!     payload: Payload::Inline(b"hello, NIC"), imm: None };
//! sq.post(&wr, SendFlags::empty()).unwrap();
//! sq.quiet().unwrap();
//! let mut out = [0u8; 10];
//! dst.read(0, &mut out).unwrap();
//! assert_eq!(&out, b"hello, NIC");
//!
//! // The same put when its size is known at compile time: the typed path, same WQE bytes.
//! sq.post_write_inline::<10>(Remote { addr: dst.addr() + 16, rkey: dst.rkey() },
//!     b"typed, NIC", SendFlags::empty()).unwrap();
//! sq.quiet().unwrap();
//! dst.read(16, &mut out).unwrap();
//! assert_eq!(&out, b"typed, NIC");
//! ```
//!
//! A typed size no queue of the provider can hold does not compile (here above bnxt's 96
//! inline bytes; a size above one queue's own limit is an `SqError` at run time):
//!
//! ```compile_fail,E0080
//! use gda_bnxt::Bnxt;
//! use gda_hal::{Remote, SendFlags, SendQueue};
//! fn put(sq: &SendQueue<Bnxt>) {
//!     let _ = sq.post_write_inline::<97>(Remote::default(), &[0; 97], SendFlags::empty());
//! }
//! let _instantiate: fn(&SendQueue<Bnxt>) = put;
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod buf;
mod cq;
mod device;
mod engine;
mod fabric;
mod mem;
mod nic;
mod pd;
pub mod port;
mod qp;
mod shared;
mod state;
mod types;
mod wire;

pub use buf::DmaBuf;
pub use cq::Cq;
pub use device::{SimDevice, SimQp, endpoint_of};
pub use fabric::{Fabric, FabricConfig, ScanHook};
pub use gda_hal::model::{DeviceModel, Modeled};
pub use mem::{Access, Fault};
pub use nic::Nic;
pub use pd::{Mr, Pd};
pub use qp::Qp;
pub use state::StatsSnapshot;
pub use types::{CqMode, Endpoint, Model, QpInit, QpState, SimError};
