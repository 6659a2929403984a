//! Broadcom's bnxt_re direct verbs for the software NIC's Thor2 device (`gda_bnxt_<n>`), with
//! the signatures of the published `bnxt_re_dv.h` (defined once in [`gda_bnxt::host::dv`]):
//! `bnxt_re_dv_umem_reg`/`_dereg`, `_create_cq`/`_destroy_cq` and `_create_qp`/`_destroy_qp`
//! with rings in the program's memory, `_modify_qp`, `_init_obj`, and doorbell regions
//! (`_alloc_db_region`, `_free_db_region`, `_get_default_db_region`).
//!
//! As the kernel does, a create checks what the program laid out: the ring fits its umem at a
//! page-aligned offset, the SQ has 8 slots per WQE (static mode) followed by one 8-byte MSN
//! entry per WQE, receive WQEs are 128 bytes, the CQ ring holds `ncqe` 32-byte CQEs — a
//! mismatch is `EINVAL` naming the field and the value expected.
//!
//! Doorbell regions and the routing of their doorbells to the software NIC's queues are
//! `vendor::bnxt`'s, which forgets a queue's route when the queue is destroyed.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use gda_bnxt::Bnxt;
use gda_bnxt::host::dv;
use gda_bnxt::wire::doorbell::DbType;
use gda_hal::QueueHandle;
use gda_hal::control::{QueueAllocator, QueueBuffer, QueueMemory};
use gda_sim::QpInit;
use ibverbs_sys as sys;

use crate::abi::{Errno, guard, ret_code, ret_ptr};
use crate::config::Kind;
use crate::cq::Cq;
use crate::device::Context;
use crate::qp::{Direct, Qp};
use crate::vendor::VendorQueue;
use crate::vendor::bnxt::{self, PAGE, Route};

const UMEM_MAGIC: u64 = 0x6764_6176_5f75_6d00; // "gdav_um"

/// A registered umem.
struct Umem {
    magic: u64,
    ctx: usize,
    addr: u64,
    size: usize,
    /// Queues whose rings it holds (their doorbell routes count them).
    users: AtomicU32,
}

/// The context behind `ctx`, if it is a Thor2's.
fn bnxt_ctx<'a>(ctx: *mut sys::ibv_context) -> Result<&'a Context, Errno> {
    // SAFETY: the caller's context (checked).
    let c: &Context = unsafe { Context::from_ibv(ctx) }?;
    if c.dev.kind() != Kind::bnxt {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!("{} is not a bnxt device", c.dev.name()),
        ));
    }
    Ok(c)
}

/// The default doorbell region of `c` (made on first use).
fn default_region(c: &Context) -> Arc<bnxt::Region> {
    bnxt::default_region(c.key(), c.dev.fabric())
}

fn umem_of<'a>(ctx: &Context, h: *mut c_void, what: &str) -> Result<&'a Umem, Errno> {
    if h.is_null() {
        return Err(Errno::inval(format!("{what} is null")));
    }
    // SAFETY: a handle this library returned is a live Umem; anything else is caught by the
    // magic (best effort, as verbs' own handle checks).
    let u = unsafe { &*h.cast::<Umem>() };
    if u.magic != UMEM_MAGIC || u.ctx != std::ptr::from_ref(ctx) as usize {
        return Err(Errno::inval(format!(
            "{what} is not a umem of this context"
        )));
    }
    Ok(u)
}

/// A ring at `offset` of `u`, `len` bytes, checked.
fn ring_in(u: &Umem, offset: u64, len: usize, what: &str) -> Result<(usize, usize), Errno> {
    if offset % PAGE != 0 {
        return Err(Errno::inval(format!(
            "{what} offset {offset:#x} is not page-aligned"
        )));
    }
    let end = offset
        .checked_add(len as u64)
        .filter(|&e| e <= u.size as u64);
    if end.is_none() {
        return Err(Errno::inval(format!(
            "{what}: {len} bytes at offset {offset:#x} leave the {}-byte umem",
            u.size
        )));
    }
    Ok(((u.addr + offset) as usize, len))
}

/// Hands the sim the program's rings; doorbell words come from this library.
#[derive(Debug)]
struct Preset {
    sq: Option<(usize, usize)>,
    rq: Option<(usize, usize)>,
    cq: Option<(usize, usize)>,
    own: Mutex<Vec<(usize, std::alloc::Layout)>>,
}

impl QueueAllocator for Preset {
    fn alloc(&self, what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>> {
        let given = match what {
            QueueBuffer::SendQueue => self.sq,
            QueueBuffer::RecvQueue => self.rq,
            QueueBuffer::CompletionQueue => self.cq,
            // Doorbell words and protocol state come from this library.
            QueueBuffer::DoorbellRecord | QueueBuffer::SendState | QueueBuffer::DeviceContext => {
                let layout = std::alloc::Layout::from_size_align(len.max(8), align.max(64)).ok()?;
                // SAFETY: a non-zero layout.
                let p = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
                self.own
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((p.as_ptr() as usize, layout));
                return Some(p);
            }
        };
        let (addr, have) = given?;
        (len <= have && addr % align.max(1) == 0).then(|| NonNull::new(addr as *mut u8))?
    }

    unsafe fn free(&self, _what: QueueBuffer, ptr: NonNull<u8>, _len: usize) {
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = own.iter().position(|&(p, _)| p == ptr.as_ptr() as usize) {
            let (p, layout) = own.swap_remove(i);
            // SAFETY: allocated in `alloc` with this layout.
            unsafe { std::alloc::dealloc(p as *mut u8, layout) };
        }
        // The program's rings stay the program's.
    }
}

fn preset(
    sq: Option<(usize, usize)>,
    rq: Option<(usize, usize)>,
    cq: Option<(usize, usize)>,
) -> QueueMemory {
    QueueMemory::Caller(Arc::new(Preset {
        sq,
        rq,
        cq,
        own: Mutex::new(Vec::new()),
    }))
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_umem_reg`.
pub unsafe extern "C" fn gdav_bnxt_re_dv_umem_reg(
    ctx: *mut sys::ibv_context,
    attr: *mut dv::UmemRegAttr,
) -> *mut c_void {
    guard("bnxt_re_dv_umem_reg", std::ptr::null_mut(), || {
        let r = (|| {
            let c = bnxt_ctx(ctx)?;
            if attr.is_null() {
                return Err(Errno::inval("null attr"));
            }
            // SAFETY: checked non-null; the caller's struct.
            let a = unsafe { &*attr };
            if a.comp_mask & dv::UMEM_FLAGS_DMABUF != 0 {
                if a.dmabuf_fd < 0 {
                    return Err(Errno::new(
                        libc::EBADF,
                        "BNXT_RE_DV_UMEM_FLAGS_DMABUF with no dmabuf_fd",
                    ));
                }
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    "dma-buf umems: the software NIC keeps rings in host memory",
                ));
            }
            if a.comp_mask & !dv::UMEM_FLAGS_DMABUF != 0 {
                return Err(Errno::inval(format!("comp_mask {:#x}", a.comp_mask)));
            }
            if a.addr.is_null() || a.size == 0 {
                return Err(Errno::inval("null addr or zero size"));
            }
            if !crate::pd::mapped(a.addr as u64, a.size) {
                return Err(Errno::new(
                    libc::EFAULT,
                    format!(
                        "[{:#x}, +{}) is not mapped in this process",
                        a.addr as u64, a.size
                    ),
                ));
            }
            let u = Box::new(Umem {
                magic: UMEM_MAGIC,
                ctx: std::ptr::from_ref(c) as usize,
                addr: a.addr as u64,
                size: a.size,
                users: AtomicU32::new(0),
            });
            c.retain();
            Ok(Box::into_raw(u).cast::<c_void>())
        })();
        ret_ptr("bnxt_re_dv_umem_reg", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_umem_dereg`: `EBUSY` while a CQ or QP uses it.
pub unsafe extern "C" fn gdav_bnxt_re_dv_umem_dereg(umem: *mut c_void) -> c_int {
    guard("bnxt_re_dv_umem_dereg", libc::EIO, || {
        let r = (|| {
            if umem.is_null() {
                return Err(Errno::inval("null umem"));
            }
            // SAFETY: checked by magic below (best effort).
            let u = unsafe { &*umem.cast::<Umem>() };
            if u.magic != UMEM_MAGIC {
                return Err(Errno::inval("not a umem of this library"));
            }
            let users = u.users.load(Ordering::Acquire);
            if users > 0 {
                return Err(Errno::new(
                    libc::EBUSY,
                    format!("umem used by {users} queues"),
                ));
            }
            // SAFETY: the context outlives its objects (the program's contract).
            let ctx = unsafe { &*(u.ctx as *const Context) };
            // SAFETY: made by Box::into_raw in umem_reg; magic cleared against a double free.
            unsafe {
                (*umem.cast::<Umem>()).magic = 0;
                drop(Box::from_raw(umem.cast::<Umem>()));
            }
            ctx.release();
            Ok(())
        })();
        ret_code("bnxt_re_dv_umem_dereg", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_alloc_db_region`.
pub unsafe extern "C" fn gdav_bnxt_re_dv_alloc_db_region(
    ctx: *mut sys::ibv_context,
) -> *mut dv::DbRegionAttr {
    guard("bnxt_re_dv_alloc_db_region", std::ptr::null_mut(), || {
        let r = bnxt_ctx(ctx).map(|c| {
            Arc::as_ptr(&bnxt::new_region(c.key(), c.dev.fabric()))
                .cast_mut()
                .cast()
        });
        ret_ptr("bnxt_re_dv_alloc_db_region", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_free_db_region`: `EBUSY` while a QP uses it.
pub unsafe extern "C" fn gdav_bnxt_re_dv_free_db_region(
    ctx: *mut sys::ibv_context,
    attr: *mut dv::DbRegionAttr,
) -> c_int {
    guard("bnxt_re_dv_free_db_region", libc::EIO, || {
        let r = (|| {
            let c = bnxt_ctx(ctx)?;
            bnxt::free_region(&bnxt::region_of(c.key(), attr.cast())?)
        })();
        ret_code("bnxt_re_dv_free_db_region", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_get_default_db_region`.
pub unsafe extern "C" fn gdav_bnxt_re_dv_get_default_db_region(
    ctx: *mut sys::ibv_context,
    out: *mut dv::DbRegionAttr,
) -> c_int {
    guard("bnxt_re_dv_get_default_db_region", libc::EIO, || {
        let r = (|| {
            let c = bnxt_ctx(ctx)?;
            if out.is_null() {
                return Err(Errno::inval("null out"));
            }
            // SAFETY: checked non-null; the caller's struct.
            unsafe { out.write(default_region(c).attr()) };
            Ok(())
        })();
        ret_code("bnxt_re_dv_get_default_db_region", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_create_cq`: a CQ of exactly `ncqe` 32-byte CQEs in the umem; its consumer
/// doorbells go to the context's default doorbell region.
pub unsafe extern "C" fn gdav_bnxt_re_dv_create_cq(
    ctx: *mut sys::ibv_context,
    attr: *mut dv::CqInitAttr,
) -> *mut sys::ibv_cq {
    guard("bnxt_re_dv_create_cq", std::ptr::null_mut(), || {
        let r = (|| {
            let c = bnxt_ctx(ctx)?;
            if attr.is_null() {
                return Err(Errno::inval("null attr"));
            }
            // SAFETY: checked non-null; the caller's struct.
            let a = unsafe { &*attr };
            let u = umem_of(c, a.umem_handle, "umem_handle")?;
            let n = a.ncqe;
            if n < 2 || !n.is_power_of_two() || n > crate::cq::MAX_CQE {
                return Err(Errno::inval(format!(
                    "ncqe {n}: a power of two in 2..={}",
                    crate::cq::MAX_CQE
                )));
            }
            let ring = ring_in(u, a.cq_umem_offset, n as usize * 32, "CQ ring")?;
            let cq = crate::cq::create(
                ctx,
                n as c_int,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
                None,
                Some(preset(None, None, Some(ring))),
            )?;
            // SAFETY: the CQ's doorbell word and the umem outlive the route: destroying the CQ
            // forgets it, and the umem is not deregistered while the route counts it.
            let route = unsafe { Route::new(DbType::Cq, cq.handle.cqn, cq.handle.db, &u.users) };
            default_region(c).add([route]);
            Ok(std::ptr::from_ref(cq).cast_mut().cast::<sys::ibv_cq>())
        })();
        ret_ptr("bnxt_re_dv_create_cq", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_destroy_cq`.
pub unsafe extern "C" fn gdav_bnxt_re_dv_destroy_cq(cq: *mut sys::ibv_cq) -> c_int {
    // SAFETY: the caller's CQ; `ibv_destroy_cq` checks it and removes its doorbell route.
    unsafe { crate::cq::gdav_ibv_destroy_cq(cq) }
}

/// Checks a direct-verbs QP's layout against the software NIC's Thor2 mode (static WQEs, MSN
/// table) and returns its sizes.
fn layout_of(a: &dv::QpInitAttr) -> Result<QpInit, Errno> {
    let mode = gda_bnxt::Mode::default();
    let per = mode.wqe.slots_per_unit();
    let wqe_sz = 16 * per;
    let field = |name: &str, got: u32, want: u32| {
        if got == want {
            Ok(())
        } else {
            Err(Errno::inval(format!(
                "{name} {got}: the device's static mode needs {want}"
            )))
        }
    };
    field("sq_wqe_sz", a.sq_wqe_sz, wqe_sz)?;
    field("rq_wqe_sz", a.rq_wqe_sz, wqe_sz)?;
    field("sq_psn_sz", a.sq_psn_sz, mode.psn.entry_bytes())?;
    let units = |name: &str, slots: u32| {
        let n = slots / per;
        if slots % per != 0 || !n.is_power_of_two() || n > QpInit::MAX_WQES {
            return Err(Errno::inval(format!(
                "{name} {slots}: {per} slots per WQE, a power of two of WQEs up to 65536"
            )));
        }
        Ok(n)
    };
    let sq_units = units("sq_slots", a.sq_slots)?;
    let rq_wqes = units("rq_slots", a.rq_slots)?;
    field("sq_npsn", a.sq_npsn, mode.psn_entries(sq_units))?;
    let sq_bytes = a.sq_slots as u64 * 16 + u64::from(a.sq_npsn) * u64::from(a.sq_psn_sz);
    if u64::from(a.sq_len) < sq_bytes {
        return Err(Errno::inval(format!(
            "sq_len {}: {} slots and {} MSN entries take {sq_bytes}",
            a.sq_len, a.sq_slots, a.sq_npsn
        )));
    }
    let rq_bytes = u64::from(rq_wqes) * u64::from(wqe_sz);
    if u64::from(a.rq_len) < rq_bytes {
        return Err(Errno::inval(format!(
            "rq_len {}: {rq_wqes} WQEs take {rq_bytes}",
            a.rq_len
        )));
    }
    if a.max_send_wr > sq_units || a.max_recv_wr > rq_wqes {
        return Err(Errno::inval(format!(
            "max_send_wr {} / max_recv_wr {} exceed the rings' {sq_units} / {rq_wqes} WQEs",
            a.max_send_wr, a.max_recv_wr
        )));
    }
    Ok(QpInit {
        sq_units,
        rq_wqes,
        max_inline: a.max_inline_data,
        max_sge: a.max_send_sge.max(a.max_recv_sge).max(1),
        rnr_retry: 7,
        path_mtu: 4096,
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_create_qp`: an RC QP whose rings are the program's; its SQ and RQ doorbells go
/// to `dbr_handle`'s region (null: the default one). Sets `qp_handle`.
pub unsafe extern "C" fn gdav_bnxt_re_dv_create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut dv::QpInitAttr,
) -> *mut sys::ibv_qp {
    guard("bnxt_re_dv_create_qp", std::ptr::null_mut(), || {
        let r = (|| {
            // SAFETY: the caller's PD (checked).
            let p = unsafe { crate::pd::Pd::from_ibv(pd) }?;
            let c = bnxt_ctx(p.ctx.ibv())?;
            if attr.is_null() {
                return Err(Errno::inval("null attr"));
            }
            // SAFETY: checked non-null; the caller's struct.
            let a = unsafe { &mut *attr };
            if a.comp_mask != 0 {
                return Err(Errno::inval(format!(
                    "comp_mask {:#x} (reserved: 0)",
                    a.comp_mask
                )));
            }
            let init = layout_of(a)?;
            let sq_u = umem_of(c, a.sq_umem_handle, "sq_umem_handle")?;
            let rq_u = umem_of(c, a.rq_umem_handle, "rq_umem_handle")?;
            let sq = ring_in(sq_u, a.sq_umem_offset, a.sq_len as usize, "SQ ring")?;
            let rq = ring_in(rq_u, a.rq_umem_offset, a.rq_len as usize, "RQ ring")?;
            let region = if a.dbr_handle.is_null() {
                default_region(c)
            } else {
                bnxt::region_of(c.key(), a.dbr_handle)?
            };
            // SAFETY: C data; zero is "unset".
            let mut ex: sys::ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
            ex.qp_type = a.qp_type;
            ex.send_cq = a.send_cq;
            ex.recv_cq = a.recv_cq;
            ex.srq = a.srq;
            ex.cap = sys::ibv_qp_cap {
                max_send_wr: a.max_send_wr,
                max_recv_wr: a.max_recv_wr,
                max_send_sge: a.max_send_sge,
                max_recv_sge: a.max_recv_sge,
                max_inline_data: a.max_inline_data,
            };
            let raw = crate::qp::create_with(
                pd,
                &ex,
                Some(Direct {
                    init,
                    memory: preset(Some(sq), Some(rq), None),
                }),
                |_| {},
            )?;
            // SAFETY: just made by this library.
            let q: &Qp = unsafe { Qp::from_ibv(raw) }?;
            let Some(bsq) = Bnxt::sq_of(&q.sq) else {
                return Err(Errno::new(libc::EIO, "a bnxt QP without a bnxt send queue"));
            };
            let qpn = q.qp_num();
            // SAFETY: the QP's doorbell words and the umems outlive the routes: destroying the
            // QP forgets them, and a umem is not deregistered while a route counts it.
            let routes = unsafe {
                [
                    Route::new(DbType::Sq, qpn, bsq.wq().db, &sq_u.users),
                    Route::new(DbType::Rq, qpn, q.rq.db, &rq_u.users),
                ]
            };
            region.add(routes);
            a.qp_handle = raw as u64;
            Ok(raw)
        })();
        ret_ptr("bnxt_re_dv_create_qp", r)
    })
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_destroy_qp`.
pub unsafe extern "C" fn gdav_bnxt_re_dv_destroy_qp(qp: *mut sys::ibv_qp) -> c_int {
    // SAFETY: the caller's QP; `ibv_destroy_qp` checks it and removes its doorbell routes.
    unsafe { crate::qp::gdav_ibv_destroy_qp(qp) }
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_modify_qp`: `ibv_modify_qp`'s rules.
pub unsafe extern "C" fn gdav_bnxt_re_dv_modify_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: the caller's QP and attributes.
    unsafe { crate::qp::gdav_ibv_modify_qp(qp, attr, mask) }
}

#[unsafe(no_mangle)]
/// `bnxt_re_dv_init_obj`: a QP's send-ring depth, a CQ's id and CQE size.
pub unsafe extern "C" fn gdav_bnxt_re_dv_init_obj(obj: *mut dv::Obj, ty: u64) -> c_int {
    guard("bnxt_re_dv_init_obj", libc::EIO, || {
        let r = (|| {
            if obj.is_null() {
                return Err(Errno::inval("null obj"));
            }
            if ty & !(dv::OBJ_QP | dv::OBJ_CQ) != 0 {
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    "object types other than QP and CQ",
                ));
            }
            // SAFETY: checked non-null; the caller's struct.
            let o = unsafe { &mut *obj };
            if ty & dv::OBJ_QP != 0 {
                // SAFETY: the caller's QP (checked).
                let q = unsafe { Qp::from_ibv(o.qp.input.cast()) }?;
                if o.qp.out.is_null() || Bnxt::sq_of(&q.sq).is_none() {
                    return Err(Errno::inval("qp.out is null or the QP is not a bnxt QP"));
                }
                // SAFETY: the caller's output struct.
                unsafe {
                    o.qp.out.cast::<dv::DvQp>().write(dv::DvQp {
                        wqe_cnt: u64::from(q.sq_units),
                        comp_mask: 0,
                    });
                }
            }
            if ty & dv::OBJ_CQ != 0 {
                // SAFETY: the caller's CQ (checked).
                let cq = unsafe { Cq::from_ibv(o.cq.input.cast()) }?;
                if o.cq.out.is_null() || cq.kind != Kind::bnxt {
                    return Err(Errno::inval("cq.out is null or the CQ is not a bnxt CQ"));
                }
                // SAFETY: the caller's output struct.
                unsafe {
                    o.cq.out.cast::<dv::DvCq>().write(dv::DvCq {
                        cqn: cq.handle.cqn,
                        cqe_size: cq.handle.cqe_bytes,
                        comp_mask: 0,
                    });
                }
            }
            Ok(())
        })();
        ret_code("bnxt_re_dv_init_obj", r)
    })
}
