//! The C ABI of Broadcom's bnxt_re direct verbs (`infiniband/bnxt_re_dv.h`), as published in
//! Broadcom's rdma-core `dv-upstream` branch (the header dated 2025, with the man pages of
//! 2025-06-17 and 2026-06-05) — the API the GPU-direct libraries that drive Thor2 load at run
//! time — plus `bnxt_re_dv_init_obj` with the `struct bnxt_re_dv_obj`/`_cq`/`_qp` layouts
//! those loaders declare.
//!
//! rdma-core upstream has no bnxt direct verbs yet and Broadcom's API has changed between
//! drops (an older one passed `pdid` and ring addresses instead of umem handles; one
//! `bnxt_re_dv_modify_qp` took two more arguments): this is the one the control path is
//! written against, and gda's verbs-compatible library exports exactly these calls.
//!
//! The structs are shared by the control path (caller) and the software NIC's library
//! (callee), so both read one definition.

use core::ffi::{c_int, c_void};

use ibverbs_sys as sys;

/// `struct bnxt_re_dv_db_region_attr`: a doorbell region (a doorbell page, DPI).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DbRegionAttr {
    /// Kernel handle.
    pub handle: u32,
    /// Doorbell page index.
    pub dpi: u32,
    /// Unmapped doorbell BAR offset.
    pub umdbr: u64,
    /// The mapped doorbell page: every SQ, RQ and CQ doorbell of the queues using this region
    /// is one 64-bit store to its first word.
    pub dbr: *mut u64,
}

/// `BNXT_RE_DV_UMEM_FLAGS_DMABUF`: the umem is a dma-buf (`dmabuf_fd`).
pub const UMEM_FLAGS_DMABUF: u64 = 1 << 0;

/// `struct bnxt_re_dv_umem_reg_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UmemRegAttr {
    /// First byte.
    pub addr: *mut c_void,
    /// Length.
    pub size: usize,
    /// `IBV_ACCESS_*`.
    pub access_flags: u32,
    /// Page sizes the memory may be mapped with (0: the library chooses).
    pub pgsz_bitmap: u64,
    /// [`UMEM_FLAGS_DMABUF`].
    pub comp_mask: u64,
    /// The dma-buf, with [`UMEM_FLAGS_DMABUF`].
    pub dmabuf_fd: c_int,
}

/// `struct bnxt_re_dv_cq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CqInitAttr {
    /// Opaque value for CQ events.
    pub cq_handle: u64,
    /// From `bnxt_re_dv_umem_reg`.
    pub umem_handle: *mut c_void,
    /// Page-aligned offset of the ring in the umem.
    pub cq_umem_offset: u64,
    /// CQEs in the ring (32 bytes each).
    pub ncqe: u32,
}

/// `struct bnxt_re_dv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr {
    /// `enum ibv_qp_type` (RC).
    pub qp_type: u32,
    /// Send WRs.
    pub max_send_wr: u32,
    /// Receive WRs.
    pub max_recv_wr: u32,
    /// Gather entries per send.
    pub max_send_sge: u32,
    /// Scatter entries per receive.
    pub max_recv_sge: u32,
    /// Largest inline payload.
    pub max_inline_data: u32,
    /// Send CQ.
    pub send_cq: *mut sys::ibv_cq,
    /// Receive CQ.
    pub recv_cq: *mut sys::ibv_cq,
    /// SRQ (null: none).
    pub srq: *mut sys::ibv_srq,
    /// Set by the library: the value CQEs carry for this QP.
    pub qp_handle: u64,
    /// From `bnxt_re_dv_alloc_db_region` (null: the context's default region).
    pub dbr_handle: *mut c_void,
    /// The SQ ring's umem.
    pub sq_umem_handle: *mut c_void,
    /// Page-aligned offset of the SQ ring in it.
    pub sq_umem_offset: u64,
    /// SQ bytes: the slots, then the PSN/MSN table.
    pub sq_len: u32,
    /// SQ slots (16 bytes each).
    pub sq_slots: u32,
    /// The RQ ring's umem.
    pub rq_umem_handle: *mut c_void,
    /// Page-aligned offset of the RQ ring in it.
    pub rq_umem_offset: u64,
    /// Bytes of one send WQE (static mode: the fixed WQE size).
    pub sq_wqe_sz: u32,
    /// Bytes of one PSN/MSN table entry.
    pub sq_psn_sz: u32,
    /// PSN/MSN table entries.
    pub sq_npsn: u32,
    /// RQ bytes.
    pub rq_len: u32,
    /// RQ slots (16 bytes each).
    pub rq_slots: u32,
    /// Bytes of one receive WQE.
    pub rq_wqe_sz: u32,
    /// Reserved (0).
    pub comp_mask: u64,
}

/// One `{ in, out }` pair of `struct bnxt_re_dv_obj`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InOut {
    /// The verbs object.
    pub input: *mut c_void,
    /// Where its description goes.
    pub out: *mut c_void,
}

/// `struct bnxt_re_dv_obj`: qp, cq, srq, ah, pd.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Obj {
    /// QP.
    pub qp: InOut,
    /// CQ.
    pub cq: InOut,
    /// SRQ.
    pub srq: InOut,
    /// AH.
    pub ah: InOut,
    /// PD.
    pub pd: InOut,
}

/// `BNXT_RE_DV_OBJ_QP`.
pub const OBJ_QP: u64 = 1 << 0;
/// `BNXT_RE_DV_OBJ_CQ`.
pub const OBJ_CQ: u64 = 1 << 1;

/// `struct bnxt_re_dv_qp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DvQp {
    /// Send WQEs the ring holds.
    pub wqe_cnt: u64,
    /// Reserved.
    pub comp_mask: u64,
}

/// `struct bnxt_re_dv_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DvCq {
    /// The CQ id its doorbells carry.
    pub cqn: u32,
    /// Bytes of one CQE.
    pub cqe_size: u32,
    /// Reserved.
    pub comp_mask: u64,
}

/// `bnxt_re_dv_alloc_db_region`.
pub type AllocDbRegion = unsafe extern "C" fn(*mut sys::ibv_context) -> *mut DbRegionAttr;
/// `bnxt_re_dv_free_db_region`.
pub type FreeDbRegion = unsafe extern "C" fn(*mut sys::ibv_context, *mut DbRegionAttr) -> c_int;
/// `bnxt_re_dv_get_default_db_region`.
pub type GetDefaultDbRegion =
    unsafe extern "C" fn(*mut sys::ibv_context, *mut DbRegionAttr) -> c_int;
/// `bnxt_re_dv_umem_reg`.
pub type UmemReg = unsafe extern "C" fn(*mut sys::ibv_context, *mut UmemRegAttr) -> *mut c_void;
/// `bnxt_re_dv_umem_dereg`.
pub type UmemDereg = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `bnxt_re_dv_create_cq`.
pub type CreateCq =
    unsafe extern "C" fn(*mut sys::ibv_context, *mut CqInitAttr) -> *mut sys::ibv_cq;
/// `bnxt_re_dv_destroy_cq`.
pub type DestroyCq = unsafe extern "C" fn(*mut sys::ibv_cq) -> c_int;
/// `bnxt_re_dv_create_qp`.
pub type CreateQp = unsafe extern "C" fn(*mut sys::ibv_pd, *mut QpInitAttr) -> *mut sys::ibv_qp;
/// `bnxt_re_dv_destroy_qp`.
pub type DestroyQp = unsafe extern "C" fn(*mut sys::ibv_qp) -> c_int;
/// `bnxt_re_dv_modify_qp` (the three-argument form of the published header).
pub type ModifyQp = unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_qp_attr, c_int) -> c_int;
/// `bnxt_re_dv_init_obj`.
pub type InitObj = unsafe extern "C" fn(*mut Obj, u64) -> c_int;

/// Every entry point the control path needs, with the one it can do without.
pub const REQUIRED: &[&str] = &[
    "bnxt_re_dv_get_default_db_region",
    "bnxt_re_dv_umem_reg",
    "bnxt_re_dv_umem_dereg",
    "bnxt_re_dv_create_cq",
    "bnxt_re_dv_destroy_cq",
    "bnxt_re_dv_create_qp",
    "bnxt_re_dv_destroy_qp",
    "bnxt_re_dv_modify_qp",
    "bnxt_re_dv_init_obj",
];
