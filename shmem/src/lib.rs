//! # gda-shmem — OpenSHMEM-style communication over gda
//!
//! Symmetric memory, one-sided puts and gets, atomics, signals, quiet and fence, barriers,
//! teams and collectives, written once against gda's [`Provider`](gda_hal::Provider) trait and
//! a transport choice made per target PE at init:
//!
//! - **P2P**: peers on the same host have their heaps mapped into this address space; puts
//!   are stores, atomics are CPU atomics, fence is a release fence.
//! - **RDMA**: every other peer is reached through one RC QP driven by the provider's device
//!   functions (mlx5, bnxt, or the software NIC's native format), posting WQEs and ringing
//!   doorbells from the calling thread: no proxy. Fence sets the FENCE flag on the next WQE.
//!
//! Both are implementations of one internal transport trait (put, get, atomics, signal, fence,
//! quiet, wait progress); every routine of [`Pe`] is written once against it and dispatched
//! through a per-PE enum, statically, so a P2P `shmem_p` still inlines to one store. All
//! load/store and CPU-atomic access of symmetric memory goes through `gda_hal::mmio`.
//!
//! Each PE's symmetric segment lives in host shared memory, or — `GDA_SHMEM_HEAP=gpu` with the
//! `hip` feature — in fine-grained GPU memory that same-host peers open by IPC handle and the
//! NIC registers as GPU memory ([`memory`]).
//!
//! PEs are threads of one process ([`launch::threads`]) or processes started by `gdarun`,
//! `mpirun`, `srun` or `torchrun` ([`launch::init_from_env`]). See `docs/shmem.md`.
//!
//! ```
//! use gda_shmem::{Config, launch};
//! let sums = launch::threads::<gda_native::Native, _, _>(4, &Config::default(), |pe| {
//!     let x = pe.calloc::<u64>(1)?;
//!     // Everyone adds its rank + 1 into PE 0's x.
//!     pe.atomic_add(x, 0, u64::from(pe.my_pe()) + 1, 0)?;
//!     pe.barrier_all()?;
//!     pe.read(x, 0)
//! })
//! .unwrap();
//! assert_eq!(sums[0], 1 + 2 + 3 + 4);
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

pub mod boot;
pub mod device;
pub mod diag;
pub mod domain;
pub mod erased;
pub mod error;
pub mod heap;
pub mod launch;
pub mod memory;
pub mod pe;
pub mod selftest;
pub mod statics;
mod transport;
pub use pe::{active, team};
pub mod types;

pub use active::ActiveSet;
pub use domain::{Defer, Nudge, PostNudge, Progress, RdmaNic};
pub use error::{Result, ShmemError};
pub use heap::Sym;
pub use memory::HeapPlacement;
/// The former name of [`TransportKind`] (which transport reaches a PE), kept so existing
/// callers compile. The transports themselves are an internal trait.
pub use pe::Transport;
pub use pe::{Config, Pe, TransportKind, TransportPolicy};
pub use statics::StaticRange;
pub use team::{Axis, Team, TeamConfig};
pub use types::{AtomicInt, Cmp, Elem, ReduceOp, Reducible, ShortInt, SignalOp, Width};
