//! # gda-rdma-ref — rdma-core as the reference
//!
//! Test-only crate. Its build script compiles rdma-core v55's own `mlx5_post_send` (from the
//! source that the `ibverbs-sys` crate vendors) over ordinary memory: the send queue, doorbell
//! record and "UAR" are plain buffers. [`mlx5_post_send`] calls it; the tests in `tests/` feed
//! the same random work requests to it and to gda's device functions and require identical
//! bytes; `benches/wqe_encode.rs` times both.
//!
//! Requirements (installed by `.ci/run`): cmake, libclang, libnl-3/libnl-route-3, libudev, python3
//! (ibverbs-sys configures rdma-core), and libibverbs-dev (ibverbs-sys's bindgen step needs
//! `infiniband/verbs_api.h` on the include path, and its link line names `-libverbs`).

use std::os::raw::c_int;

/// `struct ref_sge` (csrc/harness.h): `ibv_sge` order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RefSge {
    /// Address (for inline requests, a pointer to the bytes).
    pub addr: u64,
    /// Length.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// `struct ref_wr`: the fields of `ibv_send_wr` the harness copies.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RefWr {
    /// `enum ibv_wr_opcode`.
    pub opcode: u32,
    /// `IBV_SEND_*`.
    pub send_flags: u32,
    /// `imm_data` exactly as `ibv_send_wr` holds it (network order).
    pub imm_data: u32,
    /// Remote key.
    pub rkey: u32,
    /// Remote address.
    pub remote_addr: u64,
    /// Atomic compare (CS) or addend (FA).
    pub compare_add: u64,
    /// Atomic swap value.
    pub swap: u64,
    /// Entries used in `sg_list`.
    pub num_sge: u32,
    /// Gather list.
    pub sg_list: [RefSge; 16],
}

/// `struct ref_qp_cfg`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RefQpCfg {
    /// QP number.
    pub qp_num: u32,
    /// Send-queue WQEBBs (power of two).
    pub sq_wqe_cnt: u32,
    /// Producer counter before the post.
    pub cur_post: u32,
    /// `max_inline_data`.
    pub max_inline: u32,
    /// Send-queue `max_gs`.
    pub max_sge: u32,
    /// BlueFlame half size, 0 for doorbell only.
    pub bf_size: u32,
    /// Signal every WQE.
    pub sig_all: u32,
}

/// `struct ref_out`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RefOut {
    /// Doorbell record words as stored (big-endian values in memory).
    pub dbrec: [u32; 2],
    /// The BlueFlame/doorbell register memory after the post.
    pub uar: [u8; 1024],
    /// `bf->offset` before the post.
    pub bf_offset_before: u32,
    /// `bf->offset` after the post.
    pub bf_offset_after: u32,
    /// `sq.cur_post` after the post.
    pub cur_post_after: u32,
    /// `mlx5_post_send`'s return value.
    pub ret: c_int,
}

impl Default for RefOut {
    fn default() -> Self {
        Self {
            dbrec: [0; 2],
            uar: [0; 1024],
            bf_offset_before: 0,
            bf_offset_after: 0,
            cur_post_after: 0,
            ret: 0,
        }
    }
}

unsafe extern "C" {
    fn ref_mlx5_post_send(
        cfg: *const RefQpCfg,
        wr: *const RefWr,
        sq_buf: *mut u8,
        out: *mut RefOut,
    ) -> c_int;
    fn ref_mlx5dv_set_ctrl_seg(
        seg: *mut u8,
        pi: u16,
        opcode: u8,
        opmod: u8,
        qp_num: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
    );
    fn ref_mlx5dv_set_data_seg(seg: *mut u8, length: u32, lkey: u32, address: u64);
    fn ref_mlx5dv_cqe_fields(cqe: *mut u8, out: *mut u8);
    fn ref_mlx5_layout(out: *mut u32, cap: u32) -> u32;
    fn ref_mlx5_post_loop(
        cfg: *const RefQpCfg,
        wr: *const RefWr,
        sq_buf: *mut u8,
        dbrec: *mut u32,
        iters: u64,
    ) -> u64;
}

/// `mlx5dv_set_ctrl_seg` (mlx5dv.h) into `seg`; bytes 9–10 are left as they were.
#[allow(clippy::too_many_arguments)]
pub fn mlx5dv_set_ctrl_seg(
    seg: &mut [u8; 16],
    pi: u16,
    opcode: u8,
    opmod: u8,
    qp_num: u32,
    fm_ce_se: u8,
    ds: u8,
    signature: u8,
    imm: u32,
) {
    // SAFETY: `seg` is 16 writable bytes; the helper writes only within them.
    unsafe {
        ref_mlx5dv_set_ctrl_seg(
            seg.as_mut_ptr(),
            pi,
            opcode,
            opmod,
            qp_num,
            fm_ce_se,
            ds,
            signature,
            imm,
        )
    }
}

/// `mlx5dv_set_data_seg` (mlx5dv.h) into `seg`.
pub fn mlx5dv_set_data_seg(seg: &mut [u8; 16], length: u32, lkey: u32, address: u64) {
    // SAFETY: `seg` is 16 writable bytes.
    unsafe { ref_mlx5dv_set_data_seg(seg.as_mut_ptr(), length, lkey, address) }
}

/// `[owner, opcode, se, format]` as `mlx5dv_get_cqe_{owner,opcode,se,format}` decode `cqe`.
#[must_use]
pub fn mlx5dv_cqe_fields(cqe: &[u8; 64]) -> [u8; 4] {
    let mut copy = *cqe;
    let mut out = [0u8; 4];
    // SAFETY: 64 readable bytes in, 4 writable bytes out.
    unsafe { ref_mlx5dv_cqe_fields(copy.as_mut_ptr(), out.as_mut_ptr()) };
    out
}

/// Sizes, offsets and constants of rdma-core's mlx5 structures, in the order of
/// `ref_mlx5_layout` in `csrc/harness.c`.
#[must_use]
pub fn mlx5_layout() -> Vec<u32> {
    let mut v = vec![0u32; 128];
    // SAFETY: `v` has room for `cap` values.
    let n = unsafe { ref_mlx5_layout(v.as_mut_ptr(), v.len() as u32) };
    v.truncate(n as usize);
    v
}

fn check_sq(cfg: &RefQpCfg, sq: &[u8]) {
    assert!(
        sq.len() >= cfg.sq_wqe_cnt as usize * 64,
        "send queue buffer too small"
    );
    assert_eq!(
        sq.as_ptr() as usize % 8,
        0,
        "send queue buffer must be 8-byte aligned"
    );
}

/// Posts `wr` `iters` times on one rdma-core QP (completions simulated), for benchmarks.
/// Returns how many posts rdma-core accepted.
///
/// # Panics
/// If `sq` is shorter than the configured ring or not 8-byte aligned.
pub fn mlx5_post_loop(cfg: &RefQpCfg, wr: &RefWr, sq: &mut [u8], iters: u64) -> u64 {
    check_sq(cfg, sq);
    let mut dbrec = [0u32; 2];
    // SAFETY: as in `mlx5_post_send`; `dbrec` outlives the call.
    unsafe { ref_mlx5_post_loop(cfg, wr, sq.as_mut_ptr(), dbrec.as_mut_ptr(), iters) }
}

/// Runs rdma-core's `mlx5_post_send` for one work request on a fresh QP whose send queue is
/// `sq` (`cfg.sq_wqe_cnt * 64` bytes, 64-byte aligned is not required but 8 is).
///
/// # Panics
/// If `sq` is shorter than the configured ring or not 8-byte aligned.
pub fn mlx5_post_send(cfg: &RefQpCfg, wr: &RefWr, sq: &mut [u8]) -> RefOut {
    check_sq(cfg, sq);
    let mut out = RefOut::default();
    // SAFETY: all pointers are valid for the sizes the harness uses (checked above; `RefOut` and
    // `RefWr` are the C structs' layouts), and inline `sg_list` addresses are the caller's
    // readable buffers.
    unsafe { ref_mlx5_post_send(cfg, wr, sq.as_mut_ptr(), &mut out) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_vector_from_the_fact_sheet() {
        let cfg = RefQpCfg {
            qp_num: 0x1234,
            sq_wqe_cnt: 4,
            cur_post: 0xfffe,
            max_inline: 64,
            max_sge: 4,
            bf_size: 0,
            sig_all: 0,
        };
        let mut wr = RefWr {
            opcode: 0,
            send_flags: 2,
            rkey: 0xabcd,
            remote_addr: 0x7f00_0000_1000,
            num_sge: 1,
            ..Default::default()
        };
        wr.sg_list[0] = RefSge {
            addr: 0x7f00_0000_2000,
            length: 4096,
            lkey: 0x5678,
        };
        let mut sq = vec![0u64; 4 * 8];
        let out = mlx5_post_send(&cfg, &wr, bytemuck_bytes(&mut sq));
        assert_eq!(out.ret, 0);
        let b = bytemuck_bytes(&mut sq);
        let slot = (0xfffe & 3) * 64;
        assert_eq!(
            &b[slot..slot + 8],
            &[0x00, 0xff, 0xfe, 0x08, 0x00, 0x12, 0x34, 0x03]
        );
        assert_eq!(out.dbrec[1].to_ne_bytes(), [0, 0, 0xff, 0xff]);
        assert_eq!(&out.uar[..8], &b[slot..slot + 8]);
    }

    fn bytemuck_bytes(v: &mut [u64]) -> &mut [u8] {
        // SAFETY: u64 has no padding; any byte pattern is valid; the length is exact.
        unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8) }
    }
}

pub mod bnxt;
pub mod case;
/// The device API's headers compiled for the host (crate `gda-device`).
pub use gda_device as device;
