//! # gda-mlx5 — NVIDIA/Mellanox ConnectX for gda
//!
//! The mlx5 data path as device code drives it: WQEs built in the send queue, the doorbell
//! record and 8-byte doorbell (or a BlueFlame copy), CQEs parsed by owner bit, and progress
//! reconstructed from a collapsed CQ with window checks.
//!
//! - [`wire`]: every structure byte-exact (nic-formats.md §A–D), `#![no_std]`, Pod + Repr.
//! - [`device`]: the device functions and the [`Mlx5`] [`Provider`](gda_hal::Provider).
//!
//! Who validates what: layouts are asserted at compile time; `gda-rdma-ref` compiles rdma-core's
//! own `mlx5_post_send` (from the source vendored in `ibverbs-sys`) and requires identical WQE
//! bytes, doorbell records and doorbell words for thousands of random work requests; masked
//! atomics, which rdma-core does not post, are checked against `wqe.h`'s struct and the fact
//! sheet; parsers are fuzzed (`fuzz/`) and property-tested.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "std")]
extern crate std;

pub mod device;
#[cfg(feature = "verbs")]
pub mod host;
#[cfg(feature = "model")]
pub mod model;
pub mod wire;

pub use device::{Mlx5, Mlx5Sq};
