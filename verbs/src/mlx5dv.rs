//! `libmlx5`'s direct-verbs entry points GPUDirect-Async-style code uses: `mlx5dv_init_obj`
//! hands out a QP's and CQ's **real rings** — the memory the software NIC's ConnectX model
//! executes — so a program (or an accelerator kernel) can build WQEs, write the doorbell record
//! and the BlueFlame register, and poll CQEs itself; `mlx5dv_is_supported` and
//! `mlx5dv_query_device`.
//!
//! The CQ ring is initialised as rdma-core initialises it (every CQE opcode INVALID, owner 0).
//! Mixing: a program that posts directly moves the doorbell record's send counter, and
//! `ibv_post_send` continues after its WQEs; a program that polls the CQ directly and also calls
//! `ibv_poll_cq` must keep the two consumers apart itself, as on hardware.

use std::ffi::{c_int, c_void};

use ibverbs_sys as sys;

use gda_mlx5::Mlx5;

use crate::abi::{Errno, guard, ret_code};
use crate::config::Kind;
use crate::cq::Cq;
use crate::device::{Context, device_of};
use crate::pd::Pd;
use crate::qp::Qp;
use crate::vendor::VendorQueue;

/// `struct mlx5dv_qp` (rdma-core v55; the same in v44).
#[repr(C)]
#[allow(missing_docs)]
pub struct Mlx5dvQp {
    pub dbrec: *mut u32,
    pub sq_buf: *mut c_void,
    pub sq_wqe_cnt: u32,
    pub sq_stride: u32,
    pub rq_buf: *mut c_void,
    pub rq_wqe_cnt: u32,
    pub rq_stride: u32,
    pub bf_reg: *mut c_void,
    pub bf_size: u32,
    pub comp_mask: u64,
    pub uar_mmap_offset: i64,
    pub tirn: u32,
    pub tisn: u32,
    pub rqn: u32,
    pub sqn: u32,
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[allow(missing_docs)]
pub struct Mlx5dvCq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub cqe_cnt: u32,
    pub cqe_size: u32,
    pub cq_uar: *mut c_void,
    pub cqn: u32,
    pub comp_mask: u64,
}

/// `struct mlx5dv_pd`.
#[repr(C)]
#[allow(missing_docs)]
pub struct Mlx5dvPd {
    pub pdn: u32,
    pub comp_mask: u64,
}

/// One `{ in, out }` pair of `struct mlx5dv_obj`.
#[repr(C)]
#[allow(missing_docs)]
pub struct InOut {
    pub input: *mut c_void,
    pub out: *mut c_void,
}

/// `struct mlx5dv_obj` through `pd`: qp, cq, srq, rwq, dm, ah, pd. rdma-core v55 appends
/// `devx`, which this library never reads, so a program built against an older header (whose
/// struct ends at `pd`, as Debian 12's v44) is never read past its end.
#[repr(C)]
#[allow(missing_docs)]
pub struct Mlx5dvObj {
    pub qp: InOut,
    pub cq: InOut,
    pub srq: InOut,
    pub rwq: InOut,
    pub dm: InOut,
    pub ah: InOut,
    pub pd: InOut,
}

const OBJ_QP: u64 = 1 << 0;
const OBJ_CQ: u64 = 1 << 1;
const OBJ_PD: u64 = 1 << 6;

fn init_obj(obj: *mut Mlx5dvObj, ty: u64) -> Result<(), Errno> {
    if obj.is_null() {
        return Err(Errno::inval("null obj"));
    }
    if ty & !(OBJ_QP | OBJ_CQ | OBJ_PD) != 0 {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!(
                "object types {:#x}: only QP, CQ and PD",
                ty & !(OBJ_QP | OBJ_CQ | OBJ_PD)
            ),
        ));
    }
    // SAFETY: checked non-null; the caller's struct.
    let o = unsafe { &mut *obj };
    if ty & OBJ_QP != 0 {
        // SAFETY: the caller's QP (checked).
        let q = unsafe { Qp::from_ibv(o.qp.input.cast()) }?;
        let Some(sq) = Mlx5::sq_of(&q.sq) else {
            return Err(Errno::new(libc::EOPNOTSUPP, "not a ConnectX (mlx5) QP"));
        };
        if o.qp.out.is_null() {
            return Err(Errno::inval("null qp.out"));
        }
        // SAFETY: the caller's output struct.
        let out = unsafe { &mut *o.qp.out.cast::<Mlx5dvQp>() };
        *out = Mlx5dvQp {
            dbrec: sq.wq.dbrec as *mut u32,
            sq_buf: sq.wq.buf as *mut c_void,
            sq_wqe_cnt: sq.wq.entries,
            sq_stride: 64,
            rq_buf: q.rq.buf as *mut c_void,
            rq_wqe_cnt: q.rq.entries,
            rq_stride: q.rq.stride,
            bf_reg: sq.wq.db as *mut c_void,
            bf_size: sq.bf_size,
            // No UAR mmap offset, raw handles or TIR address exist on the software NIC: none of
            // the optional members the caller may have asked for is filled.
            comp_mask: 0,
            uar_mmap_offset: 0,
            tirn: 0,
            tisn: 0,
            rqn: 0,
            sqn: 0,
            tir_icm_addr: 0,
        };
    }
    if ty & OBJ_CQ != 0 {
        // SAFETY: the caller's CQ (checked).
        let c = unsafe { Cq::from_ibv(o.cq.input.cast()) }?;
        if c.kind != Kind::mlx5 {
            return Err(Errno::new(libc::EOPNOTSUPP, "not a ConnectX (mlx5) CQ"));
        }
        if o.cq.out.is_null() {
            return Err(Errno::inval("null cq.out"));
        }
        // SAFETY: the caller's output struct.
        let out = unsafe { &mut *o.cq.out.cast::<Mlx5dvCq>() };
        *out = Mlx5dvCq {
            buf: c.handle.buf as *mut c_void,
            dbrec: c.handle.dbrec as *mut u32,
            cqe_cnt: c.handle.entries,
            cqe_size: c.handle.cqe_bytes,
            cq_uar: std::ptr::null_mut(),
            cqn: c.handle.cqn,
            comp_mask: 0,
        };
    }
    if ty & OBJ_PD != 0 {
        // SAFETY: the caller's PD (checked).
        let p = unsafe { Pd::from_ibv(o.pd.input.cast()) }?;
        if p.ctx.dev.kind() != Kind::mlx5 {
            return Err(Errno::new(libc::EOPNOTSUPP, "not a ConnectX (mlx5) PD"));
        }
        if o.pd.out.is_null() {
            return Err(Errno::inval("null pd.out"));
        }
        // SAFETY: the caller's output struct.
        unsafe {
            o.pd.out.cast::<Mlx5dvPd>().write(Mlx5dvPd {
                pdn: p.number(),
                comp_mask: 0,
            })
        };
    }
    Ok(())
}

#[unsafe(no_mangle)]
/// `mlx5dv_init_obj`: the rings, doorbell record, BlueFlame register and CQ buffer.
pub unsafe extern "C" fn gdav_mlx5dv_init_obj(obj: *mut Mlx5dvObj, ty: u64) -> c_int {
    guard("mlx5dv_init_obj", libc::EIO, || {
        ret_code("mlx5dv_init_obj", init_obj(obj, ty))
    })
}

#[unsafe(no_mangle)]
/// `mlx5dv_is_supported`: true for the ConnectX devices.
pub unsafe extern "C" fn gdav_mlx5dv_is_supported(dev: *mut sys::ibv_device) -> bool {
    device_of(dev).is_ok_and(|d| d.kind() == Kind::mlx5)
}

#[unsafe(no_mangle)]
/// `mlx5dv_query_device`: the base fields (`version`, `flags`); no optional capability
/// (`comp_mask` comes back 0).
pub unsafe extern "C" fn gdav_mlx5dv_query_device(
    ctx: *mut sys::ibv_context,
    attrs: *mut c_void,
) -> c_int {
    guard("mlx5dv_query_device", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's context (checked).
            let c = unsafe { Context::from_ibv(ctx) }?;
            if c.dev.kind() != Kind::mlx5 {
                return Err(Errno::new(libc::EOPNOTSUPP, "not a ConnectX device"));
            }
            if attrs.is_null() {
                return Err(Errno::inval("null attrs"));
            }
            // struct mlx5dv_context starts { uint8_t version; uint64_t flags; uint64_t
            // comp_mask; … }: version 0 (no multi-packet WQE support), MLX5DV_CONTEXT_FLAGS_CQE_V1.
            let p = attrs.cast::<u8>();
            // SAFETY: the caller's struct has at least these three members.
            unsafe {
                *p = 0;
                p.add(8).cast::<u64>().write_unaligned(1 << 0);
                p.add(16).cast::<u64>().write_unaligned(0);
            }
            Ok(())
        })();
        ret_code("mlx5dv_query_device", r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, c_char, c_long};
    use std::mem::offset_of;

    #[repr(C)]
    struct Field {
        name: *const c_char,
        value: c_long,
    }
    unsafe extern "C" {
        static gdav_c_mlx5dv_layout: [Field; 30];
    }

    /// Every size and offset of `struct mlx5dv_qp`/`_cq`/`_pd`/`_obj` as the C compiler lays
    /// them out from the system's `<infiniband/mlx5dv.h>` (csrc/layout.c).
    #[test]
    fn layouts_match_c() {
        let ours: [(&str, usize); 29] = [
            ("qp.sizeof", size_of::<Mlx5dvQp>()),
            ("qp.dbrec", offset_of!(Mlx5dvQp, dbrec)),
            ("qp.sq.buf", offset_of!(Mlx5dvQp, sq_buf)),
            ("qp.sq.wqe_cnt", offset_of!(Mlx5dvQp, sq_wqe_cnt)),
            ("qp.sq.stride", offset_of!(Mlx5dvQp, sq_stride)),
            ("qp.rq.buf", offset_of!(Mlx5dvQp, rq_buf)),
            ("qp.rq.wqe_cnt", offset_of!(Mlx5dvQp, rq_wqe_cnt)),
            ("qp.rq.stride", offset_of!(Mlx5dvQp, rq_stride)),
            ("qp.bf.reg", offset_of!(Mlx5dvQp, bf_reg)),
            ("qp.bf.size", offset_of!(Mlx5dvQp, bf_size)),
            ("qp.comp_mask", offset_of!(Mlx5dvQp, comp_mask)),
            ("qp.uar_mmap_offset", offset_of!(Mlx5dvQp, uar_mmap_offset)),
            ("qp.tirn", offset_of!(Mlx5dvQp, tirn)),
            ("qp.tisn", offset_of!(Mlx5dvQp, tisn)),
            ("qp.rqn", offset_of!(Mlx5dvQp, rqn)),
            ("qp.sqn", offset_of!(Mlx5dvQp, sqn)),
            ("qp.tir_icm_addr", offset_of!(Mlx5dvQp, tir_icm_addr)),
            ("cq.sizeof", size_of::<Mlx5dvCq>()),
            ("cq.buf", offset_of!(Mlx5dvCq, buf)),
            ("cq.dbrec", offset_of!(Mlx5dvCq, dbrec)),
            ("cq.cqe_cnt", offset_of!(Mlx5dvCq, cqe_cnt)),
            ("cq.cqe_size", offset_of!(Mlx5dvCq, cqe_size)),
            ("cq.cq_uar", offset_of!(Mlx5dvCq, cq_uar)),
            ("cq.cqn", offset_of!(Mlx5dvCq, cqn)),
            ("cq.comp_mask", offset_of!(Mlx5dvCq, comp_mask)),
            ("pd.sizeof", size_of::<Mlx5dvPd>()),
            ("obj.sizeof", size_of::<Mlx5dvObj>()),
            ("obj.qp", offset_of!(Mlx5dvObj, qp)),
            ("obj.cq", offset_of!(Mlx5dvObj, cq)),
        ];
        // SAFETY: a static C table of 30 entries, the last { 0, 0 }.
        let c = unsafe { &gdav_c_mlx5dv_layout };
        let mut compared = 0;
        for (i, (name, v)) in ours.iter().enumerate() {
            // SAFETY: entries before the terminator have static C string names.
            let cname = unsafe { CStr::from_ptr(c[i].name) }.to_str().unwrap();
            assert_eq!(cname, *name);
            assert_eq!(c[i].value as usize, *v, "{name}");
            compared += 1;
        }
        assert_eq!(c[29].value as usize, offset_of!(Mlx5dvObj, pd), "obj.pd");
        assert_eq!(compared, 29);
    }
}
