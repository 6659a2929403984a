//! The operations of a context (`struct verbs_context` and its `ibv_context_ops`, what
//! `verbs.h`'s inline calls dispatch through), and the calls that join modules: opening a
//! device installs every module's operations, and `create_qp_ex` makes a QP with the
//! `ibv_wr_*` API.
//!
//! The top of the module order: it names every module that has an operation and none names it,
//! so the modules below stay free of each other's callbacks.

use ibverbs_sys as sys;

use crate::abi::{Errno, VerbsContext, guard, ret_ptr};
use crate::pd::Pd;
use crate::qp::Qp;
use crate::{cq, device, pd, post, qp, wr};

/// Fills the operations of a new context.
fn install(v: &mut VerbsContext) {
    v.query_port = Some(device::verbs_query_port);
    v.query_device_ex = Some(device::verbs_query_device_ex);
    v.alloc_parent_domain = Some(pd::alloc_parent_domain);
    v.create_cq_ex = Some(cq::create_cq_ex);
    v.context.ops.poll_cq = Some(cq::poll_cq);
    v.context.ops.req_notify_cq = Some(cq::req_notify_cq);
    v.create_qp_ex = Some(create_qp_ex);
    v.context.ops.post_send = Some(post::post_send);
    v.context.ops.post_recv = Some(post::post_recv);
}

#[unsafe(no_mangle)]
/// `ibv_open_device`.
///
/// # Safety
/// `dev` is null or a device of this library.
pub unsafe extern "C" fn gdav_ibv_open_device(dev: *mut sys::ibv_device) -> *mut sys::ibv_context {
    guard("ibv_open_device", std::ptr::null_mut(), || {
        ret_ptr("ibv_open_device", device::open(dev, install))
    })
}

/// `verbs_context.create_qp_ex`: `ibv_create_qp` with a PD in the attributes and, with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, the `ibv_wr_*` API ([`wr`]); fills `attr.cap` with the
/// QP's real limits.
unsafe extern "C" fn create_qp_ex(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_qp_init_attr_ex,
) -> *mut sys::ibv_qp {
    guard("ibv_create_qp_ex", std::ptr::null_mut(), || {
        let r = (|| {
            if attr.is_null() {
                return Err(Errno::inval("null init_attr"));
            }
            // SAFETY: checked non-null.
            let a = unsafe { &mut *attr };
            // IBV_QP_INIT_ATTR_PD (1) is required; SEND_OPS_FLAGS (1 << 6) understood.
            let known = sys::IBV_QP_INIT_ATTR_PD | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
            if a.comp_mask & sys::IBV_QP_INIT_ATTR_PD == 0 {
                return Err(Errno::inval("create_qp_ex needs IBV_QP_INIT_ATTR_PD"));
            }
            if a.comp_mask & !known != 0 {
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    format!("comp_mask {:#x}", a.comp_mask & !known),
                ));
            }
            // SAFETY: the caller's PD (checked).
            let pd_ctx = unsafe { Pd::from_ibv(a.pd) }?.ctx;
            if !std::ptr::eq(pd_ctx.ibv(), ctx) {
                return Err(Errno::inval("PD of another context"));
            }
            let wr_api = a.comp_mask & sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
            if wr_api {
                wr::check(a.send_ops_flags)?;
            }
            let qp = qp::create_with(a.pd, a, None, |ex| {
                if wr_api {
                    wr::install(ex);
                }
            })?;
            // SAFETY: just made.
            a.cap = unsafe { Qp::from_ibv(qp) }?.cap;
            Ok(qp)
        })();
        ret_ptr("ibv_create_qp_ex", r)
    })
}
