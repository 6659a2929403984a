//! # gda-shmem-c — the OpenSHMEM C ABI on gda-shmem
//!
//! `libgdashmem.so` exports OpenSHMEM routines with C linkage, declared in `include/shmem.h`
//! (also reachable as `mpp/shmem.h`, where 1.3-era programs look). `gdacc prog.c -o prog`
//! builds a program against the header and library of the same build; `gdarun -n 4 ./prog`
//! runs it. Each routine is a thin shim: it finds this process's PE, turns C addresses into
//! symmetric objects ([`gda_shmem::Pe::sym_at`]), and calls the one Rust implementation of the
//! routine, so C programs get the same transports (P2P, RDMA through any provider's queues)
//! and the same checks as Rust ones.
//!
//! Design choices:
//!
//! - **One PE per process**, created by `shmem_init` from the launcher's environment (`gdarun`,
//!   `mpirun`, `srun`, `torchrun`), its RDMA routes on the software NIC with the queue format
//!   `GDA_SHMEM_PROVIDER` names (`native` default, `mlx5`, `bnxt`). The PE is held behind a
//!   trait object ([`state::CPe`]), so the provider is chosen once at init and every call is
//!   one indirect call into code monomorphised for it.
//! - **Threads**: the library provides up to `SHMEM_THREAD_SERIALIZED` (the program keeps its
//!   calls from overlapping, as those levels require); `shmem_init_thread` reports that.
//! - **Errors are fatal, and say why**: a routine called before `shmem_init`, an address outside
//!   the symmetric heap, an unknown `SHMEM_CMP_*`, a failed transfer — each prints
//!   `gda shmem: <routine>: <what>` on stderr, tells the other PEs (where the bootstrap can),
//!   and exits with status 1, which `gdarun` reports as the job's status. Nothing is silently
//!   dropped or written elsewhere.
//! - Programs that never call `shmem_finalize` (common in 1.3-era code) are finalized at exit.
#![deny(unsafe_op_in_unsafe_fn)]

mod amo;
mod coll;
mod ctx;
pub mod reduce;
mod rma;
mod setup;
pub mod state;
mod sync;
