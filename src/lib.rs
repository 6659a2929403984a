//! # gda — device-initiated RDMA
//!
//! Accelerator code, and CPU threads standing in for it, builds NIC work-queue entries itself,
//! rings the NIC doorbell itself and polls completions itself, with no CPU proxy. This facade
//! re-exports the hardware-abstraction core ([`hal`]) and the providers compiled in by features,
//! and hosts the `gda` command-line tool's library parts ([`wire`], and with `sim` the
//! provider-generic `perf`, `shmem_cli` and `chaos`, which take any provider registered with the
//! software NIC by its `ProviderName`).
//!
//! | feature | default | what |
//! |---|---|---|
//! | `sim` | yes | the software NIC ([`sim`]): native, mlx5 and bnxt device models, fabrics, chaos mode |
//! | `mlx5` | yes | NVIDIA/Mellanox ConnectX formats and device functions ([`mlx5`]) |
//! | `bnxt` | yes | Broadcom bnxt_re (Thor2) formats and device functions ([`bnxt`]) |
//!
//! ```
//! use gda::hal::{Provider, WorkRequest, Payload, Remote, WqHandle, SqPos, SendFlags};
//! # #[cfg(feature = "mlx5")] {
//! use gda::mlx5::{Mlx5, Mlx5Sq};
//! let mut ring = vec![[0u64; 8]; 8];                  // 8 WQEBBs of ordinary memory
//! let (mut dbrec, mut db) = ([0u32; 2], [0u64; 1]);
//! let wq = Mlx5Sq { wq: WqHandle { buf: ring.as_mut_ptr() as u64,
//!     dbrec: dbrec.as_mut_ptr() as u64, db: db.as_mut_ptr() as u64, entries: 8, qpn: 0x1234,
//!     max_inline: 64, max_sge: 4, ..Default::default() }, bf_size: 0 };
//! let wr = WorkRequest::Write { remote: Remote { addr: 0x1000, rkey: 7 },
//!     payload: Payload::Inline(b"hello"), imm: None };
//! assert_eq!(Mlx5::check(&wq, &wr).map(|c| c.units), Ok(1));
//! // SAFETY: the ring, record and doorbell are ordinary memory owned here.
//! let posted = unsafe { Mlx5::post(&wq, SqPos::ZERO, &wr, SendFlags::SIGNALED) };
//! unsafe { Mlx5::ring_sq(&wq, &posted) };
//! assert_eq!(u32::from_be(dbrec[1]), 1);              // one WQEBB posted
//! assert_eq!(db[0].to_ne_bytes(), posted.doorbell);   // first 8 bytes of the ctrl segment
//! # }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "bnxt")]
pub use gda_bnxt as bnxt;
pub use gda_hal as hal;
#[cfg(feature = "mlx5")]
pub use gda_mlx5 as mlx5;
pub use gda_native as native;
/// Host-side OS services: shared-memory segments and process liveness.
pub use gda_os as os;
/// The table of NIC vendors (`gda-providers`).
#[cfg(any(feature = "sim", feature = "verbs"))]
pub use gda_providers as providers;
#[cfg(feature = "sim")]
pub use gda_sim as sim;

#[cfg(feature = "sim")]
pub mod chaos;
pub mod cli;
pub mod devices;
pub mod gpus;
pub mod grid;
#[cfg(feature = "sim")]
pub mod perf;
pub mod plot;
#[cfg(feature = "sim")]
pub mod provider;
#[cfg(feature = "sim")]
pub mod shmem_cli;
pub mod topo;
pub mod wire;

#[cfg(feature = "sim")]
pub use provider::ProviderName;

/// The SHMEM layer (always built; its RDMA routes run on any `gda_hal::control::Device`, the software NIC's with `sim`).
pub use gda_shmem as shmem;
