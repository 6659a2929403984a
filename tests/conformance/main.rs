//! The provider-generic conformance suite, run on every sim device model: each registered
//! provider's device functions (the same code that drives its hardware) on its model, plus
//! bnxt's other WQE modes.
//!
//! The cases are generic functions in [`data`], [`errors`] and [`ordering`]; this file turns each
//! into one `#[test]` per provider.

#[path = "../common/mod.rs"]
mod common;
mod data;
mod errors;
mod ordering;

use std::time::Duration;

use common::*;
use gda::grid::launch;
use gda::hal::QueueHandle;
use gda::hal::{AtomicOp, Payload, SendFlags, SendQueue, WcOpcode, WcStatus, WorkRequest};
use gda::sim::{Access, CqMode, Modeled, QpInit, QpState};

use data::*;
use errors::*;
use ordering::*;

/// One module of tests per provider of the vendor table (`gda::providers::for_each_provider!`),
/// in its default configuration — bnxt: static WQEs, MSN table),
/// each running every test of `$tests` on it.
macro_rules! per_provider {
    ([$($prov:ident => $p:ty),* $(,)?] $tests:tt) => {
        $( mod $prov { per_provider!(@tests $p; $tests); } )*
    };
    (@tests $p:ty; ($($name:ident),*)) => {
        $( #[test] fn $name() { super::$name::<$p>(); } )*
    };
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        gda::providers::for_each_provider!(per_provider ($($name),*));
        /// Variable WQEs (wrapping slot by slot) with P5/P7 16-byte PSN entries.
        mod bnxt_variable {
            $( #[test] fn $name() {
                crate::common::with_model(
                    gda::bnxt::model::BnxtModel::from(gda::bnxt::Mode {
                        wqe: gda::bnxt::WqeMode::Variable,
                        psn: gda::bnxt::PsnForm::Ext,
                    }),
                    super::$name::<gda::bnxt::Bnxt>,
                );
            } )*
        }
    };
}

/// The fixed three-slot form holds one SGE or 16 inline bytes: the tests whose requests fit.
macro_rules! conformance_fixed3 {
    ($($name:ident),* $(,)?) => {
        mod bnxt_fixed3 {
            $( #[test] fn $name() {
                crate::common::with_model(
                    gda::bnxt::model::BnxtModel::from(gda::bnxt::Mode {
                        wqe: gda::bnxt::WqeMode::Fixed3,
                        psn: gda::bnxt::PsnForm::Legacy,
                    }),
                    super::$name::<gda::bnxt::Bnxt>,
                );
            } )*
        }
    };
}

conformance_fixed3!(
    write_every_size,
    read_every_size,
    atomics_every_op_and_width,
    nop_and_unsignaled_retirement,
    ordering_fence_and_completion_order,
    ring_wrap_far_past_65536,
    many_threads_one_qp,
    chaos_seeds_keep_guarantees,
    receives_flush_in_error,
);

conformance!(
    write_every_size,
    inline_write_every_size,
    read_every_size,
    send_recv_and_immediates,
    atomics_every_op_and_width,
    nop_and_unsignaled_retirement,
    errors_have_hardware_status_and_flush,
    qp_not_ready_and_rnr,
    malformed_wqes_give_error_cqes,
    ordering_fence_and_completion_order,
    ring_wrap_far_past_65536,
    many_threads_one_qp,
    chaos_seeds_keep_guarantees,
    cq_overrun_is_reported,
    chaos_seed_reproduces_a_missing_fence,
    early_quiet_is_caught_by_chaos,
    fabric_of_many_nics_and_loopback,
    deregistered_key_fails_after_use,
    receives_flush_in_error,
    misuse_is_contained,
);
