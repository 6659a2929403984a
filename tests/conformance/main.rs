//! The provider-generic conformance suite: each provider's device functions (the same code that
//! drives its hardware) on QPs of every kind of device.
//!
//! - The data-path cases (`device:` below: every data movement, atomics, NOPs, fence and
//!   completion order, ring wrap, many threads on one QP) are generic over a [`common::Rig`]
//!   and make their QPs through the control-path seam (`gda_hal::control::Device`): on two
//!   software NICs of each provider of the vendor table (and bnxt's other WQE modes); with the
//!   `verbs` feature on each hardware vendor's device of the verbs-compatible library through
//!   rdma-core's ABI and that vendor's control path (`verbs::<name>`); and, ignored, on a real
//!   NIC (`hardware::<name>`, `GDA_HW_DEVICE`).
//! - The cases only the software NIC can show (`sim:`: QP states after errors, injected
//!   errors, malformed WQEs, CQ overruns, chaos mutation checks, fabrics of many NICs) use its
//!   own API ([`common::SimPair`]).
//!
//! The cases are generic functions in [`data`], [`errors`] and [`ordering`]; this file turns each
//! into one `#[test]` per provider and device.

#[path = "../common/mod.rs"]
mod common;
mod data;
mod errors;
mod ordering;

use std::time::Duration;

use common::*;
use gda::grid::launch;
use gda::hal::control::{CompletionQueue, QpCaps};
use gda::hal::{AtomicOp, Payload, SendFlags, SendQueue, WcOpcode, WcStatus, WorkRequest};
use gda::hal::{Provider, QueueHandle};
use gda::sim::{Access, CqMode, Modeled, QpInit, QpState};

use data::*;
use errors::*;
use ordering::*;

/// One module of tests per provider of the vendor table (`gda::providers::for_each_provider!`),
/// in its default configuration (bnxt: static WQEs, MSN table): the `sim` tests of `$tests` run
/// on the software NIC's own API with provider `P`, the `device` tests through the control path
/// on two of its `SimDevice`s ([`SimRig`]).
macro_rules! per_provider {
    ([$($prov:ident => $p:ty),* $(,)?] $tests:tt) => {
        $( mod $prov { per_provider!(@tests $p; $tests); } )*
    };
    (@tests $p:ty; (sim: ($($sim:ident),*), device: ($($dev:ident),*))) => {
        $( #[test] fn $sim() { super::$sim::<$p>(); } )*
        $( #[test] fn $dev() { super::$dev::<crate::common::SimRig<$p>>(); } )*
    };
}

/// The `device` tests again on each hardware vendor's device of the verbs-compatible library
/// (`verbs::<name>`, through rdma-core's ABI and that vendor's control path), and on a real NIC
/// (`hardware::<name>`, ignored: `GDA_HW_DEVICE=mlx5_0 cargo test --release --features verbs
/// --test conformance hardware::mlx5 -- --ignored`).
#[cfg(feature = "verbs")]
macro_rules! per_host {
    ([$($prov:ident => $p:ty),* $(,)?] $tests:tt) => {
        mod verbs {
            $( mod $prov { per_host!(@tests $p; VerbsRig; $tests); } )*
        }
        mod hardware {
            $( mod $prov {
                per_host!(@ignored $p; HwRig; $tests);
            } )*
        }
    };
    (@tests $p:ty; $rig:ident; (sim: ($($sim:ident),*), device: ($($dev:ident),*))) => {
        $( #[test] fn $dev() { crate::$dev::<crate::common::$rig<$p>>(); } )*
    };
    (@ignored $p:ty; $rig:ident; (sim: ($($sim:ident),*), device: ($($dev:ident),*))) => {
        $(
            #[test]
            #[ignore = "needs a real NIC of this vendor: set GDA_HW_DEVICE"]
            fn $dev() { crate::$dev::<crate::common::$rig<$p>>(); }
        )*
    };
}

macro_rules! conformance {
    (sim: ($($sim:ident),* $(,)?), device: ($($dev:ident),* $(,)?) $(,)?) => {
        gda::providers::for_each_provider!(per_provider (sim: ($($sim),*), device: ($($dev),*)));
        #[cfg(feature = "verbs")]
        gda::providers::for_each_host_provider!(per_host (sim: ($($sim),*), device: ($($dev),*)));
        /// Variable WQEs (wrapping slot by slot) with P5/P7 16-byte PSN entries.
        mod bnxt_variable {
            $( #[test] fn $sim() {
                crate::common::with_model(variable(), super::$sim::<gda::bnxt::Bnxt>);
            } )*
            $( #[test] fn $dev() {
                crate::common::with_model(
                    variable(),
                    super::$dev::<crate::common::SimRig<gda::bnxt::Bnxt>>,
                );
            } )*
            fn variable() -> gda::bnxt::model::BnxtModel {
                gda::bnxt::model::BnxtModel::from(gda::bnxt::Mode {
                    wqe: gda::bnxt::WqeMode::Variable,
                    psn: gda::bnxt::PsnForm::Ext,
                })
            }
        }
    };
}

/// The fixed three-slot form holds one SGE or 16 inline bytes: the tests whose requests fit.
macro_rules! conformance_fixed3 {
    (sim: ($($sim:ident),* $(,)?), device: ($($dev:ident),* $(,)?) $(,)?) => {
        mod bnxt_fixed3 {
            $( #[test] fn $sim() {
                crate::common::with_model(fixed3(), super::$sim::<gda::bnxt::Bnxt>);
            } )*
            $( #[test] fn $dev() {
                crate::common::with_model(
                    fixed3(),
                    super::$dev::<crate::common::SimRig<gda::bnxt::Bnxt>>,
                );
            } )*
            fn fixed3() -> gda::bnxt::model::BnxtModel {
                gda::bnxt::model::BnxtModel::from(gda::bnxt::Mode {
                    wqe: gda::bnxt::WqeMode::Fixed3,
                    psn: gda::bnxt::PsnForm::Legacy,
                })
            }
        }
    };
}

conformance_fixed3!(
    sim: (chaos_seeds_keep_guarantees, receives_flush_in_error),
    device: (
        write_every_size,
        read_every_size,
        atomics_every_op_and_width,
        nop_and_unsignaled_retirement,
        ordering_fence_and_completion_order,
        ring_wrap_far_past_65536,
        many_threads_one_qp,
    ),
);

conformance!(
    sim: (
        errors_have_hardware_status_and_flush,
        qp_not_ready_and_rnr,
        malformed_wqes_give_error_cqes,
        chaos_seeds_keep_guarantees,
        cq_overrun_is_reported,
        chaos_seed_reproduces_a_missing_fence,
        early_quiet_is_caught_by_chaos,
        fabric_of_many_nics_and_loopback,
        deregistered_key_fails_after_use,
        receives_flush_in_error,
        misuse_is_contained,
    ),
    device: (
        write_every_size,
        inline_write_every_size,
        read_every_size,
        send_recv_and_immediates,
        atomics_every_op_and_width,
        nop_and_unsignaled_retirement,
        ordering_fence_and_completion_order,
        ring_wrap_far_past_65536,
        many_threads_one_qp,
    ),
);
