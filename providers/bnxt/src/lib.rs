//! # gda-bnxt — Broadcom NetXtreme-E / Thor2 (bnxt_re) for gda
//!
//! The bnxt_re queue formats as device code builds them: 16-byte slots, the send-WQE header and
//! its RDMA/atomic extended headers, SGEs (address, lkey, length), inline payload, receive WQEs,
//! the PSN/MSN table entries software fills at post time for RC, the 64-bit doorbell with its
//! epoch bit, and the 32-byte CQE with its phase bit. All fields little-endian
//! (nic-formats.md §E–F).
//!
//! | module | what |
//! |---|---|
//! | [`wire`] | one file per hardware structure, Pod layout + Repr layer |
//! | [`mode`] | static / variable / fixed three-slot WQE modes and the PSN-table forms |
//! | [`device`] | the [`Bnxt`] provider: device functions for every operation, doorbells, CQ polling |
//! | `host` (feature `verbs`) | the Thor2 control path: libibverbs + Broadcom's `bnxt_re_dv_*` loaded at run time |
//!
//! Byte-exactness is checked against rdma-core v55's own `bnxt_re_post_send`, `bnxt_re_poll_cq`
//! and `db.c` (crate `gda-rdma-ref`, tests `bnxt_*`); the software NIC (`gda-sim`) executes these
//! formats from the doorbell alone so the provider-generic conformance suite runs on them.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "std")]
extern crate std;

pub mod device;
#[cfg(feature = "verbs")]
pub mod host;
pub mod mode;
#[cfg(feature = "model")]
pub mod model;
pub mod wire;

pub use device::{Bnxt, BnxtSq};
pub use mode::{Mode, PsnForm, WqeMode};
