//! # gda-bnxt — Broadcom NetXtreme-E / Thor2 (bnxt_re) for gda
//!
//! The bnxt_re queue formats as device code builds them: 16-byte slots, the send-WQE header and
//! its RDMA/atomic extended headers, SGEs (address, lkey, length), inline payload, receive WQEs,
//! the PSN/MSN table entries software fills at post time for RC, the 64-bit doorbell with its
//! epoch bit, and the 32-byte CQE with its phase bit. All fields little-endian
//! (nic-formats.md §E–F).
//!
//! Status: the [`wire`] layer (this crate so far). Device functions, the sim device model and
//! the rdma-core differential tests follow.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "std")]
extern crate std;

pub mod wire;

#[cfg(feature = "std")]
impl std::error::Error for wire::ParseError {}
