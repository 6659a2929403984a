//! # gda-rdma — rdma-core, loaded at run time
//!
//! gda talks to real NICs through rdma-core's `libibverbs.so.1` (and, for ConnectX,
//! `libmlx5.so.1`), opened with `dlopen` when first needed, never linked: one binary starts on a
//! machine without rdma-core and says so clearly, and runs on any rdma-core from v34 on.
//!
//! - [`Verbs::load`] opens the library (`GDA_IBVERBS_LIB` overrides the path) and resolves
//!   every entry point it uses **under the version node rdma-core exports it with**
//!   (`ibv_get_device_list@IBVERBS_1.1`, `_ibv_query_gid_ex@IBVERBS_1.11`, …) with `dlvsym`,
//!   falling back to the default version. A missing library or symbol is a [`LoadError`]
//!   naming the path, the symbol and what to install. Optional entry points
//!   (`_ibv_query_gid_ex`, `ibv_reg_dmabuf_mr`) are `None` on an older rdma-core, and callers
//!   degrade (GID types from sysfs, no dma-buf registration).
//! - [`Verbs::devices`] lists the NICs as [`gda_hal::control::DeviceInfo`]: PCI vendor id,
//!   ports, link layer, MTUs, the populated GID table with types, limits; `GDA_RDMA_DEVICES` (a
//!   comma list of names) keeps a subset. Which gda provider drives a device is not known here:
//!   providers implement [`Host`] (their PCI vendor ids and control path) and the vendor table
//!   (`gda-providers`) claims devices by vendor id.
//!
//! C types come from `ibverbs-sys` (rdma-core v55's `verbs.h`). In CI the library under test
//! is gda's own verbs-compatible library (`gda-verbs`), which runs the software NIC behind the
//! same ABI.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
mod discover;
mod host;
mod load;
mod objects;
pub mod qp_attr;
pub mod qp_mask;

pub use discover::DiscoverError;
pub use host::Host;
pub use load::{Fns, LoadError, Verbs, open_lib, open_path, resolve};
pub use objects::{
    Context, Cq, Destroy, HostError, Modify, Mr, Pd, Qp, VerbsError, describe_qp_attr,
    destroy_failures, note_destroy_failure, res_type,
};
