//! FFI to the bnxt_re reference harness (`csrc/bnxt/harness.h`): rdma-core v55's own
//! `bnxt_re_post_send`, `bnxt_re_post_recv`, `bnxt_re_poll_cq` and `db.c` over ordinary memory.
//! Layouts mirror the C structs field for field.
#![allow(missing_docs)] // field-for-field mirrors of harness.h, documented there

use std::os::raw::c_int;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BrefSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BrefWr {
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    pub rkey: u32,
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub num_sge: u32,
    pub sg_list: [BrefSge; 8],
    pub wr_id: u64,
    pub ud_remote_qpn: u32,
    pub ud_remote_qkey: u32,
    pub ud_avid: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BrefQpCfg {
    pub qp_id: u32,
    pub wqe_mode: u32,
    pub sq_slots: u32,
    pub sq_tail: u32,
    pub sq_epoch: u32,
    pub sq_psn: u32,
    pub mtu_enum: u32,
    pub msn_table: u32,
    pub psn_ext: u32,
    pub msn: u32,
    pub max_inline: u32,
    pub max_sge: u32,
    pub sig_all: u32,
    pub sq_head: u32,
    pub qp_type: u32,
    pub atomics_disabled: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BrefOut {
    pub ret: c_int,
    pub sq_tail_after: u32,
    pub sq_epoch_after: u32,
    pub sq_psn_after: u32,
    pub msn_after: u32,
    pub doorbell: u64,
    pub n_doorbells: u32,
    pub bad_index: i32,
    pub sw_idx_after: u32,
    pub psn_table_offset: u32,
    pub psn_entry_size: u32,
    pub psn_table_entries: u32,
    pub msn_tbl_sz: u32,
    pub sq_diff: u32,
    pub last_slots: u32,
    pub last_bytes: u32,
    pub last_wc_opcode: u32,
    pub last_sig: u32,
    pub last_st_slot_idx: u32,
}

unsafe extern "C" {
    fn bref_post_send(
        cfg: *const BrefQpCfg,
        wr: *const BrefWr,
        sq_buf: *mut u8,
        sq_buf_len: usize,
        out: *mut BrefOut,
    ) -> c_int;
    fn bref_post_send_n(
        cfg: *const BrefQpCfg,
        wrs: *const BrefWr,
        n: u32,
        sq_buf: *mut u8,
        sq_buf_len: usize,
        out: *mut BrefOut,
    ) -> c_int;
    fn bref_db(db_type: u32, xid: u32, index: u32, epoch: u32, toggle: u32) -> u64;
}

/// rdma-core's doorbell value (`db.c`) for a doorbell type, id, index, epoch and toggle.
#[must_use]
pub fn doorbell(db_type: u32, xid: u32, index: u32, epoch: u32, toggle: u32) -> u64 {
    // SAFETY: a pure function of its arguments over the harness's own fake objects.
    unsafe { bref_db(db_type, xid, index, epoch, toggle) }
}

/// Runs rdma-core's `bnxt_re_post_send` for one WR on a fresh QP over `sq` (ring + PSN table).
pub fn post_send(cfg: &BrefQpCfg, wr: &BrefWr, sq: &mut [u8]) -> BrefOut {
    let mut out = BrefOut::default();
    // SAFETY: pointers valid for the given lengths; `out` is a valid struct; inline SGE addresses
    // are the caller's readable buffers.
    unsafe { bref_post_send(cfg, wr, sq.as_mut_ptr(), sq.len(), &mut out) };
    out
}

/// Runs rdma-core's `bnxt_re_post_send` for a chain of WRs (one doorbell at the end).
pub fn post_send_n(cfg: &BrefQpCfg, wrs: &[BrefWr], sq: &mut [u8]) -> BrefOut {
    let mut out = BrefOut::default();
    // SAFETY: as `post_send`; `wrs` has `wrs.len()` valid entries.
    unsafe {
        bref_post_send_n(
            cfg,
            wrs.as_ptr(),
            wrs.len() as u32,
            sq.as_mut_ptr(),
            sq.len(),
            &mut out,
        )
    };
    out
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BrefSwqe {
    pub wr_id: u64,
    pub wr_opcode: u32,
    pub signaled: u32,
    pub bytes: u32,
    pub slots: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BrefCqCfg {
    pub cq_id: u32,
    pub cq_depth: u32,
    pub cq_head: u32,
    pub cq_phase: u32,
    pub cq_head_epoch: u32,
    pub deferred_db: u32,
    pub hw_cqes: u32,
    pub nwc: u32,
    pub qp_id: u32,
    pub qp_type: u32,
    pub max_swr: u32,
    pub sq_slots: u32,
    pub sq_head: u32,
    pub sq_cons_idx: u32,
    pub n_swqe: u32,
    pub swqe: *const BrefSwqe,
    pub rq_nwr: u32,
    pub rq_slots: u32,
    pub rq_max_slots: u32,
    pub rq_head: u32,
    pub rq_cons_idx: u32,
    pub n_rwqe: u32,
    pub rq_wr_id: *const u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrefWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub wc_flags: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub sl: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BrefCqOut {
    pub n_wc: c_int,
    pub cq_head_after: u32,
    pub cq_phase_after: u32,
    pub cq_head_epoch_after: u32,
    pub hw_cqes_after: u32,
    pub doorbell: u64,
    pub n_doorbells: u32,
    pub sq_head_after: u32,
    pub sq_cons_idx_after: u32,
    pub rq_head_after: u32,
    pub rq_cons_idx_after: u32,
    pub qp_state_after: u32,
}

unsafe extern "C" {
    fn bref_poll_cq(
        cfg: *const BrefCqCfg,
        cqe_ring: *mut u8,
        wc_out: *mut BrefWc,
        out: *mut BrefCqOut,
    ) -> c_int;
}

/// Runs rdma-core's `bnxt_re_poll_cq` once over `ring` (32-byte CQEs) with the SQ/RQ
/// bookkeeping described by `cfg`, `swqe` and `rq_wr_id`. Returns the WCs and the state after.
pub fn poll_cq(
    cfg: &BrefCqCfg,
    swqe: &[BrefSwqe],
    rq_wr_id: &[u64],
    ring: &mut [u8],
) -> (Vec<BrefWc>, BrefCqOut) {
    let mut cfg = *cfg;
    cfg.swqe = swqe.as_ptr();
    cfg.n_swqe = swqe.len() as u32;
    cfg.rq_wr_id = rq_wr_id.as_ptr();
    cfg.n_rwqe = rq_wr_id.len() as u32;
    let mut wcs = vec![BrefWc::default(); 64];
    let mut out = BrefCqOut::default();
    assert!(ring.len() >= cfg.cq_depth as usize * 32);
    // SAFETY: `cfg` points at live arrays of the stated lengths, `ring` holds `cq_depth` CQEs,
    // `wcs` has room for the harness's maximum of 64.
    unsafe { bref_poll_cq(&cfg, ring.as_mut_ptr(), wcs.as_mut_ptr(), &mut out) };
    wcs.truncate(out.n_wc.max(0) as usize);
    (wcs, out)
}
