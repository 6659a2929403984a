//! # gda-hal — the hardware-abstraction core of gda
//!
//! gda lets accelerator code, and CPU threads standing in for it, drive RDMA NICs directly:
//! build a work-queue entry (WQE) in ring memory, publish the doorbell record, ring the doorbell
//! and parse completion-queue entries (CQEs), with no CPU proxy and no `ibv_post_send`.
//!
//! This crate is the part every NIC shares. It is `#![no_std]` (std only behind the `std`
//! feature) so the same code builds for a GPU target.
//!
//! | module | what it holds |
//! |---|---|
//! | [`provider`] | the [`Provider`] trait: geometry consts + device functions, static dispatch only |
//! | [`handle`] | `#[repr(C)]` queue handles ([`WqHandle`], [`CqHandle`]) and [`WorkCompletion`] |
//! | [`op`] | request descriptors in `ibv_send_wr` terms; marker types for compile-time choices |
//! | [`mmio`] | **the only** volatile/atomic access to device-visible memory, with ordering notes (the software NIC's side in its `soft` part) |
//! | [`sym`] | accesses of symmetric memory (the SHMEM layer's heaps): copies, fills, CPU atomics |
//! | [`endian`] | `Be32`/`Le32`/… field types that keep native alignment |
//! | [`bits`] | named sub-word bit fields |
//! | [`index`] | wrapping ring indices (16-, 24-, 32-bit) and power-of-two rings |
//! | [`sq`] | the multi-producer posting protocol (reserve, ring in order, two quiets), loom-checked |
//! | [`progress`] | window-checked completion progress for collapsed CQs (docs/lessons.md §1) |
//! | [`status`] | [`WcStatus`]/[`WcOpcode`], numbered as rdma-core's `ibv_wc_*` |
//! | [`error`] | [`ErrorKind`] and the [`Error`] trait every gda error implements |
//! | `control` (std) | the host control path every NIC implements: device, PD, MR, CQ, typed RC QP transitions, paths, endpoints |
//!
//! Design choices: providers are zero-sized marker types (as wgpu-hal's backends); sizes known
//! at compile time are const generics or marker types so each (provider, operation) pair is
//! straight-line stores; posting returns no `Result` (preconditions are documented, and
//! [`Provider::check`] validates them off the hot path); completions carry a status enum.
//!
//! Who validates what: [`Provider::check`] once per request, returning its cost; a [`Checked`]
//! request carries that cost to [`Provider::post_checked`], which does not derive it again.
//! [`SendQueue`] checks a [`WorkRequest`] once per `post`, not at all for a [`Checked`] one
//! (`post_checked`), and for its typed methods (`post_write_inline::<LEN>` …) only compares the
//! const size with the bound it probed when the queue was built.
//!
//! Validation: layouts are asserted at compile time in each provider; the mlx5 provider is
//! compared byte for byte with rdma-core's own `mlx5_post_send` (crate `gda-rdma-ref`).
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "std")]
extern crate std;

/// Declares a hardware code enum (opcode, status, syndrome) over a `u8` with a lossless
/// `Unknown(u8)` arm: `from_raw` never fails and `from_raw(x).raw() == x` for every byte.
#[macro_export]
macro_rules! raw_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v,)*
            /// A value gda does not name (kept as is).
            Unknown(u8),
        }

        impl $name {
            /// Every named value.
            pub const NAMED: &'static [Self] = &[$(Self::$v),*];

            /// Decodes a raw byte (never fails).
            #[inline(always)]
            #[must_use]
            pub const fn from_raw(raw: u8) -> Self {
                match raw {
                    $($n => Self::$v,)*
                    other => Self::Unknown(other),
                }
            }

            /// The raw byte.
            #[inline(always)]
            #[must_use]
            pub const fn raw(self) -> u8 {
                match self {
                    $(Self::$v => $n,)*
                    Self::Unknown(other) => other,
                }
            }
        }
    };
}

pub mod bits;
#[cfg(feature = "std")]
pub mod control;
pub mod endian;
pub mod error;
pub mod handle;
pub mod index;
pub mod mmio;
#[cfg(feature = "model")]
pub mod model;
pub mod op;
pub mod progress;
pub mod provider;
pub mod sq;
pub mod status;
pub mod sym;
mod sync;

pub use endian::{Be16, Be32, Be64, Le16, Le32, Le64};
pub use error::{Error, ErrorKind, ParseError};
pub use handle::{Cost, CqHandle, Posted, QueueHandle, SqPos, WorkCompletion, WqHandle};
pub use index::{ProdIdx, Ring, WrapIdx16, WrapIdx24};
pub use op::{
    AtomicOp, AtomicWidth, Completion, Payload, Remote, SendFlags, Sge, Signaled, Unsignaled, W32,
    W64, WorkRequest,
};
pub use progress::{CollapsedProgress, OutOfWindow};
pub use provider::{Checked, PostError, Provider};
#[cfg(feature = "std")]
pub use sq::HostProgress;
pub use sq::{Counters, SendQueue, SqDevice, SqError, SqProto, SqShared};
pub use status::{WcOpcode, WcStatus};

#[cfg(feature = "std")]
impl std::error::Error for PostError {}
#[cfg(feature = "std")]
impl std::error::Error for ParseError {}
#[cfg(feature = "std")]
impl std::error::Error for OutOfWindow {}
