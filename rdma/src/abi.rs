//! rdma-core's extended context, `struct verbs_context`, which `verbs.h` defines but
//! ibverbs-sys's bindings leave out: the static-inline helpers of `verbs.h`
//! (`ibv_alloc_parent_domain`, `ibv_create_cq_ex`, …) are calls through it, so a program that
//! loads rdma-core at run time makes them the same way ([`ctx_op`]), and gda's own
//! verbs-compatible library fills it.

use std::ffi::{c_int, c_void};

use ibverbs_sys as sys;

/// `struct verbs_context` of rdma-core v55 (identical in v44): the operations `verbs.h`'s
/// static-inline helpers (`ibv_query_port`, `ibv_create_cq_ex`, `ibv_create_qp_ex`,
/// `ibv_query_device_ex`, …) find through `verbs_get_ctx_op`, then the `ibv_context` programs
/// hold a pointer to. New members grow at the front, so a program built against an older
/// header finds every member it knows at the same distance from `context`. Members this
/// library does not implement stay null: the helpers then fail with `EOPNOTSUPP`, as they do
/// on a provider without the operation.
#[repr(C)]
#[allow(missing_docs)]
pub struct VerbsContext {
    pub query_port: Option<
        unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr, usize) -> c_int,
    >,
    pub advise_mr: *mut c_void,
    pub alloc_null_mr: *mut c_void,
    pub read_counters: *mut c_void,
    pub attach_counters_point_flow: *mut c_void,
    pub create_counters: *mut c_void,
    pub destroy_counters: *mut c_void,
    pub reg_dm_mr: *mut c_void,
    pub alloc_dm: *mut c_void,
    pub free_dm: *mut c_void,
    pub modify_flow_action_esp: *mut c_void,
    pub destroy_flow_action: *mut c_void,
    pub create_flow_action_esp: *mut c_void,
    pub modify_qp_rate_limit: *mut c_void,
    pub alloc_parent_domain: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_parent_domain_init_attr,
        ) -> *mut sys::ibv_pd,
    >,
    pub dealloc_td: *mut c_void,
    pub alloc_td: *mut c_void,
    pub modify_cq: *mut c_void,
    pub post_srq_ops: *mut c_void,
    pub destroy_rwq_ind_table: *mut c_void,
    pub create_rwq_ind_table: *mut c_void,
    pub destroy_wq: *mut c_void,
    pub modify_wq: *mut c_void,
    pub create_wq: *mut c_void,
    pub query_rt_values: *mut c_void,
    pub create_cq_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_cq_init_attr_ex,
        ) -> *mut sys::ibv_cq_ex,
    >,
    pub priv_: *mut c_void,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *const sys::ibv_query_device_ex_input,
            *mut sys::ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    pub ibv_destroy_flow: *mut c_void,
    pub abi_placeholder2: *mut c_void,
    pub ibv_create_flow: *mut c_void,
    pub abi_placeholder1: *mut c_void,
    pub open_qp: *mut c_void,
    pub create_qp_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_qp_init_attr_ex,
        ) -> *mut sys::ibv_qp,
    >,
    pub get_srq_num: *mut c_void,
    pub create_srq_ex: *mut c_void,
    pub open_xrcd: *mut c_void,
    pub close_xrcd: *mut c_void,
    pub abi_placeholder3: u64,
    /// Bytes from the first member this library knows to the end of `context`.
    pub sz: usize,
    pub context: sys::ibv_context,
}

/// `__VERBS_ABI_IS_EXTENDED`: `ibv_context::abi_compat` of a context with a `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `verbs_get_ctx_op`: the extended context of `ctx` when it is one and is new enough to have
/// the member at `offset` (from `offset_of!(VerbsContext, member)`), else `None`.
///
/// # Safety
/// `ctx` is a live context of rdma-core (or of a library with its ABI).
pub unsafe fn ctx_op(ctx: *mut sys::ibv_context, offset: usize) -> Option<*const VerbsContext> {
    // SAFETY: the caller's live context.
    if ctx.is_null() || unsafe { (*ctx).abi_compat } != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    let vctx = ctx
        .cast::<u8>()
        .wrapping_sub(std::mem::offset_of!(VerbsContext, context))
        .cast::<VerbsContext>();
    // SAFETY: an extended context sits at the end of its `verbs_context`; `sz` counts the bytes
    // from the oldest member its library knows to the end, so members before that are only
    // read once `sz` shows they exist.
    let sz = unsafe { std::ptr::addr_of!((*vctx).sz).read() };
    (sz >= std::mem::size_of::<VerbsContext>() - offset).then_some(vctx.cast_const())
}
