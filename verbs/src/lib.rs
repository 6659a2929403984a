//! # gda-verbs — rdma-core's verbs API on gda's software NIC
//!
//! A C shared library with the ABI of rdma-core v55's `libibverbs.so.1` and `libmlx5.so.1`
//! (and the `libefa.so.1` names Debian's perftest links), backed by the software NIC
//! (`gda-sim`). With `LD_LIBRARY_PATH=target/<profile>/verbs-sim`, programs built against
//! rdma-core — perftest, `ibv_devinfo`, `ibv_rc_pingpong`, gda's own rdma-core control path —
//! run unmodified on a machine without RDMA hardware.
//!
//! ## Design
//! - **Exports come from rdma-core's own symbol maps.** The build script reads
//!   `libibverbs.map.in`, `libmlx5.map` and `libefa.map` from the rdma-core source that
//!   `ibverbs-sys` vendors and exports every symbol under the version node the real library
//!   gives it (`IBVERBS_1.1`, `IBVERBS_PRIVATE_34`, `MLX5_1.21`, …), so versioned imports and
//!   `dlvsym` resolve and a program linked with `-z now` loads. A symbol implemented here is an
//!   `extern "C" fn gdav_<name>`; every other one is a generated stub that sets
//!   `errno = EOPNOTSUPP` and returns `NULL`/`EOPNOTSUPP` — a failure at run time, never at
//!   load time. [`EXPORTS`] lists them.
//! - **One file, four names.** `verbs-sim/libibverbs.so.1`, `libmlx5.so.1`, `libefa.so.1` and
//!   `libbnxt_re.so` (Broadcom's direct verbs) are links to this one library; the
//!   dynamic loader maps a file once, so all share one state (the devices, the objects
//!   `mlx5dv_init_obj` and `bnxt_re_dv_init_obj` are asked about).
//! - **An extended context.** Every context is a `struct verbs_context`
//!   (`abi::VerbsContext`), so `verbs.h`'s static-inline helpers (`ibv_post_send`,
//!   `ibv_poll_cq`, `ibv_query_port`, the `_ex` calls) dispatch into this library.
//! - **One data path, written once.** Posting, polling and QP bookkeeping are generic over a
//!   device family (`vendor::VendorQueue`: the family's `gda_hal::Provider` device functions
//!   plus its ids, WQE sizing and hooks); the one `match` on a family is in `vendor`, and a
//!   unit test keeps every other file free of family names. The direct-verbs C APIs
//!   (`mlx5dv_*`, `bnxt_re_dv_*`) sit on top: nothing generic calls them.
//! - **Validated as a kernel driver validates.** Wrong attributes, states, keys and lifetimes
//!   get the errno an mlx5 kernel driver returns; `GDA_VERBS_TRACE=1` prints which check
//!   refused a call.
//!
//! ## Environment
//! | variable | meaning |
//! |---|---|
//! | `GDA_VERBS_DEVICES` | devices to show: `mlx5[:n],bnxt[:n]` (default `mlx5,bnxt`; empty: none) |
//! | `GDA_VERBS_TRACE` | `1`: a line on stderr for each refused or unsupported call |
//! | `GDA_SIM_CHAOS` | a seed: the software NIC's chaos mode |
#![deny(unsafe_op_in_unsafe_fn)]
// The exported functions are the C API; their documentation is rdma-core's man pages.
#![allow(clippy::missing_safety_doc)]

// The C API is the library's interface (its functions are exported by symbol from every
// module); the modules are private. Their order, each importing only modules before it:
// abi, config, qp_state, fabric → dp, vendor → device → pd → channel → cq → qp → post → wr
// → bnxtdv, mlx5dv → ops (.ci/import-cycles.py checks there is no cycle).
mod abi;
mod bnxtdv;
mod channel;
mod config;
mod cq;
mod device;
mod dp;
mod fabric;
mod mlx5dv;
mod ops;
mod pd;
mod post;
mod qp;
mod qp_state;
mod vendor;
mod wr;

mod exports {
    include!(concat!(env!("OUT_DIR"), "/exports.rs"));
}

pub use exports::EXPORTS;
