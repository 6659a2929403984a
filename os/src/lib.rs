//! # gda-os — the operating-system services gda's host side shares
//!
//! What several gda crates need from the OS and the `no_std` core (`gda-hal`) must not hold:
//!
//! | module | what |
//! |---|---|
//! | [`cpu`] | CPU affinity of threads and the kernel's CPU-list form |
//! | [`dirs`] | this user's private runtime directory, and the checks that refuse one another user prepared |
//! | [`shm`] | named POSIX shared-memory segments (`/dev/shm/gda-<job>-<what>`, mode 0600, `O_EXCL`), listing and sweeping a job's names |
//! | [`process`] | process liveness and PID namespaces, for jobs whose processes share memory |
//!
//! Users: the software NIC's cross-process fabric (`gda-sim`), gda-shmem's P2P transport and
//! launchers, and the `gda`/`gdarun` tools. Linux only (`/dev/shm`, `/proc`). This crate depends
//! on no other gda crate.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cpu;
pub mod dirs;
pub mod pages;
pub mod process;
pub mod shm;
