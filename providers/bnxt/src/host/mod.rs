//! The Thor2 host control path: rdma-core's verbs (through `gda-rdma`, loaded at run time) for
//! the device, PD, memory registration and QP transitions, and Broadcom's bnxt_re direct
//! verbs ([`dv`], loaded at run time from `libbnxt_re`) for what the device functions need:
//! CQ and QP rings in memory this path lays out itself (so it knows every address the device
//! functions write), and the doorbell page.
//!
//! [`BnxtDevice`] implements [`gda_hal::control::Device`]:
//! - rings are allocated here (page-aligned host memory) or by the caller's
//!   [`QueueAllocator`] ([`QueueMemory::Caller`]: GPU or
//!   host-pinned memory), registered with `bnxt_re_dv_umem_reg`, and laid out in the device's
//!   mode — static 128-byte WQEs and the MSN table (Thor2's default): `sq_slots` = 8 per WQE,
//!   `sq_npsn` = one 8-byte MSN entry per WQE after the slots, receive WQEs of 128 bytes;
//! - CQs come from `bnxt_re_dv_create_cq` (32-byte CQEs) and their id from
//!   `bnxt_re_dv_init_obj`; their consumer doorbells go to the context's default doorbell
//!   region;
//! - each QP gets a doorbell region of its own (`bnxt_re_dv_alloc_db_region`, else the
//!   default one) for its SQ and RQ doorbells;
//! - the send PSN is the one the device reports for the new QP (`ibv_query_qp`), and RTS sets
//!   it, so the PSN table the device functions fill starts where the wire does;
//! - RESET→INIT→RTR→RTS through `bnxt_re_dv_modify_qp` with the attributes the mlx5 path
//!   gives (GRH on RoCE, hop limit 64, path MTU of both ends, `static_rate`), an `EINVAL`
//!   naming the transition and every attribute.
//!
//! `GDA_BNXT_LIB` overrides the library; by default `libbnxt_re.so` beside the libibverbs in
//! use, then `libbnxt_re.so`, `libbnxt_re-rdmav34.so` and
//! `/usr/lib/<triple>/libibverbs/libbnxt_re-rdmav34.so` (where rdma-core installs providers).

pub mod dv;

use std::ffi::c_void;
use std::format;
use std::ptr::NonNull;
use std::sync::Arc;
use std::vec::Vec;

use gda_hal::control::{
    self, Access, ControlError, CqAttr, DeviceInfo, InitAttr, MemoryDesc, QpCaps, QueueAllocator,
    QueueBuffer, QueueMemory, RawRcQp, RcQp, Reset, RtrAttr, RtsAttr,
};
use gda_hal::{CqHandle, WqHandle};
use gda_rdma::{Context, Cq, LoadError, Mr, Pd, Qp, Verbs};
use ibverbs_sys as sys;

use crate::device::{Bnxt, BnxtSq};
use crate::mode::Mode;

/// Errors of the Thor2 control path (shared with the ConnectX one).
pub type BnxtHostError = gda_rdma::HostError;

/// `libbnxt_re`'s direct-verbs entry points.
struct Dv {
    get_default_db_region: dv::GetDefaultDbRegion,
    alloc_db_region: Option<dv::AllocDbRegion>,
    free_db_region: Option<dv::FreeDbRegion>,
    umem_reg: dv::UmemReg,
    umem_dereg: dv::UmemDereg,
    create_cq: dv::CreateCq,
    destroy_cq: dv::DestroyCq,
    create_qp: dv::CreateQp,
    destroy_qp: dv::DestroyQp,
    modify_qp: dv::ModifyQp,
    init_obj: dv::InitObj,
    _lib: libloading::Library,
}

const INSTALL: &str = "Broadcom's libbnxt_re with direct verbs (bnxt_re_dv.h: Broadcom's \
                       rdma-core dv-upstream branch, or the bnxt_re user library of Broadcom's \
                       NetXtreme-E driver bundle); GDA_BNXT_LIB=/path/to/libbnxt_re.so chooses it";

impl Dv {
    /// `GDA_BNXT_LIB`, else beside libibverbs, else the usual names and rdma-core's provider
    /// directory.
    fn load(ibverbs: &str) -> Result<Self, LoadError> {
        let (lib, handle, path) = if std::env::var_os("GDA_BNXT_LIB").is_some_and(|v| !v.is_empty())
        {
            gda_rdma::open_lib("GDA_BNXT_LIB", "libbnxt_re.so").map_err(|e| e.with_hint(INSTALL))?
        } else {
            let mut tried: Vec<std::path::PathBuf> = Vec::new();
            if let Some(dir) = std::path::Path::new(ibverbs).parent() {
                if !dir.as_os_str().is_empty() {
                    tried.push(dir.join("libbnxt_re.so"));
                }
            }
            tried.push("libbnxt_re.so".into());
            tried.push("libbnxt_re-rdmav34.so".into());
            for triple in ["x86_64-linux-gnu", "aarch64-linux-gnu"] {
                tried.push(format!("/usr/lib/{triple}/libibverbs/libbnxt_re-rdmav34.so").into());
            }
            let mut last = LoadError::Library {
                path: "libbnxt_re.so".into(),
                reason: "not found".into(),
                hint: INSTALL,
            };
            let mut found = None;
            for p in tried.iter().filter(|p| !p.is_absolute() || p.exists()) {
                match gda_rdma::open_path(p) {
                    Ok(x) => {
                        found = Some(x);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            found.ok_or_else(|| last.with_hint(INSTALL))?
        };
        macro_rules! need {
            ($name:literal, $t:ty) => {
                // SAFETY: the published prototype of this entry point (`dv`).
                unsafe { gda_rdma::resolve::<$t>(handle, &path, $name, "") }
                    .map_err(|e| e.with_hint(INSTALL))?
            };
        }
        macro_rules! want {
            ($name:literal, $t:ty) => {
                // SAFETY: as above.
                unsafe { gda_rdma::resolve::<$t>(handle, &path, $name, "") }.ok()
            };
        }
        Ok(Self {
            get_default_db_region: need!(
                "bnxt_re_dv_get_default_db_region",
                dv::GetDefaultDbRegion
            ),
            alloc_db_region: want!("bnxt_re_dv_alloc_db_region", dv::AllocDbRegion),
            free_db_region: want!("bnxt_re_dv_free_db_region", dv::FreeDbRegion),
            umem_reg: need!("bnxt_re_dv_umem_reg", dv::UmemReg),
            umem_dereg: need!("bnxt_re_dv_umem_dereg", dv::UmemDereg),
            create_cq: need!("bnxt_re_dv_create_cq", dv::CreateCq),
            destroy_cq: need!("bnxt_re_dv_destroy_cq", dv::DestroyCq),
            create_qp: need!("bnxt_re_dv_create_qp", dv::CreateQp),
            destroy_qp: need!("bnxt_re_dv_destroy_qp", dv::DestroyQp),
            modify_qp: need!("bnxt_re_dv_modify_qp", dv::ModifyQp),
            init_obj: need!("bnxt_re_dv_init_obj", dv::InitObj),
            _lib: lib,
        })
    }
}

/// A Thor2 NIC driven through rdma-core and bnxt_re direct verbs.
pub struct BnxtDevice {
    ctx: Arc<Context>,
    /// The context's description, claimed for this provider (`provider: "bnxt"`).
    info: DeviceInfo,
    dv: Arc<Dv>,
    /// The default doorbell page (CQ consumer doorbells; QPs when no region of their own).
    default_db: u64,
    mode: Mode,
}

impl gda_rdma::Host for Bnxt {
    const FAMILY: &'static str = "Thor2";
    const LABEL: &'static str = "bnxt (rdma-core + bnxt_re_dv)";
    type Device = BnxtDevice;
    type OpenError = BnxtHostError;

    fn on(ctx: Arc<Context>) -> Result<BnxtDevice, BnxtHostError> {
        BnxtDevice::on(ctx)
    }
}

impl std::fmt::Debug for BnxtDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BnxtDevice")
            .field("ctx", &self.ctx)
            .finish()
    }
}

fn dv_err(ctx: &Context, call: &str, r: i32, detail: &str) -> BnxtHostError {
    let e = if r > 0 {
        std::io::Error::from_raw_os_error(r)
    } else {
        std::io::Error::last_os_error()
    };
    BnxtHostError::Provider(format!("{}: {call} failed: {e}{detail}", ctx.info().name))
}

impl BnxtDevice {
    /// Opens the Thor2 device `name` (`gda devices` lists them).
    pub fn open(verbs: Arc<Verbs>, name: &str) -> Result<Self, BnxtHostError> {
        Self::on(Context::open(verbs, name)?)
    }

    /// The Thor2 control path on an opened device.
    pub fn on(ctx: Arc<Context>) -> Result<Self, BnxtHostError> {
        use gda_hal::Provider;
        if !Bnxt::PCI_VENDOR_IDS.contains(&ctx.info().vendor_id) {
            return Err(BnxtHostError::Provider(format!(
                "{} is a device of PCI vendor {:#06x}, not a Broadcom NetXtreme-E/Thor2",
                ctx.info().name,
                ctx.info().vendor_id
            )));
        }
        let dv = Dv::load(ctx.verbs().path())?;
        let mut region = dv::DbRegionAttr {
            handle: 0,
            dpi: 0,
            umdbr: 0,
            dbr: std::ptr::null_mut(),
        };
        // SAFETY: the published prototype; an open context and an output struct.
        let r = unsafe { (dv.get_default_db_region)(ctx.raw(), &mut region) };
        if r != 0 || region.dbr.is_null() {
            return Err(dv_err(&ctx, "bnxt_re_dv_get_default_db_region", r, ""));
        }
        let info = DeviceInfo {
            provider: <Bnxt as gda_hal::Provider>::NAME,
            ..ctx.info().clone()
        };
        Ok(Self {
            ctx,
            info,
            dv: Arc::new(dv),
            default_db: region.dbr as u64,
            mode: Mode::default(),
        })
    }

    /// The WQE and PSN-table mode the rings are laid out in (Thor2: static WQEs, MSN table).
    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// Page-aligned zeroed host memory: the rings when the caller does not place them.
#[derive(Debug)]
struct HostPages;

impl QueueAllocator for HostPages {
    fn alloc(&self, _what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(4096)).ok()?;
        // SAFETY: a non-zero layout.
        NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
    }

    unsafe fn free(&self, _what: QueueBuffer, ptr: NonNull<u8>, len: usize) {
        if let Ok(layout) = std::alloc::Layout::from_size_align(len.max(1), 4096) {
            // SAFETY: allocated above with this layout (every request here is 4096-aligned).
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
        }
    }
}

/// Ring memory registered as a umem; returned to its allocator after the umem is released.
struct Ring {
    dv: Arc<Dv>,
    umem: *mut c_void,
    ptr: NonNull<u8>,
    len: usize,
    what: QueueBuffer,
    alloc: Arc<dyn QueueAllocator>,
}

// SAFETY: plain memory and an opaque handle; the library's calls are thread-safe.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    fn new(
        dev: &BnxtDevice,
        memory: &QueueMemory,
        what: QueueBuffer,
        len: usize,
    ) -> Result<Self, BnxtHostError> {
        let alloc: Arc<dyn QueueAllocator> = match memory {
            QueueMemory::Provider => Arc::new(HostPages),
            QueueMemory::Caller(a) => a.clone(),
        };
        let len = len.next_multiple_of(4096);
        let ptr = alloc.alloc(what, len, 4096).ok_or_else(|| {
            BnxtHostError::Provider(format!(
                "the queue allocator refused {len} bytes for the {what:?}"
            ))
        })?;
        if ptr.as_ptr() as usize % 4096 != 0 {
            // SAFETY: just allocated for `what` with `len` bytes.
            unsafe { alloc.free(what, ptr, len) };
            return Err(BnxtHostError::Provider(format!(
                "the queue allocator returned {ptr:p} for the {what:?}: bnxt rings must be page-aligned"
            )));
        }
        let mut attr = dv::UmemRegAttr {
            addr: ptr.as_ptr().cast(),
            size: len,
            access_flags: Access::LOCAL_WRITE.bits(),
            pgsz_bitmap: 0,
            comp_mask: 0,
            dmabuf_fd: -1,
        };
        // SAFETY: the published prototype; memory that lives as long as the umem.
        let umem = unsafe { (dev.dv.umem_reg)(dev.ctx.raw(), &mut attr) };
        if umem.is_null() {
            let e = dv_err(
                &dev.ctx,
                "bnxt_re_dv_umem_reg",
                -1,
                &format!(" ({what:?}, {len} bytes)"),
            );
            // SAFETY: as above.
            unsafe { alloc.free(what, ptr, len) };
            return Err(e);
        }
        Ok(Self {
            dv: dev.dv.clone(),
            umem,
            ptr,
            len,
            what,
            alloc,
        })
    }

    fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: our umem; the CQ/QP using it was destroyed first (field order of the owner).
        let r = unsafe { (self.dv.umem_dereg)(self.umem) };
        if r != 0 {
            gda_rdma::note_destroy_failure(format_args!(
                "bnxt_re_dv_umem_dereg failed: {r}; the ring is leaked"
            ));
            return;
        }
        // SAFETY: allocated for `what` with `len` bytes; nothing uses it now.
        unsafe { self.alloc.free(self.what, self.ptr, self.len) };
    }
}

/// A PD of a [`BnxtDevice`].
pub struct BnxtPd(Arc<Pd>);

/// A CQ of a [`BnxtDevice`], with its ring.
pub struct BnxtCq {
    cq: Arc<Cq>,
    handle: CqHandle,
    _ring: Arc<Ring>,
}

impl control::CompletionQueue for BnxtCq {
    fn handle(&self) -> CqHandle {
        self.handle
    }
}

/// A doorbell region of the QP's own.
struct Region {
    dv: Arc<Dv>,
    ctx: Arc<Context>,
    attr: *mut dv::DbRegionAttr,
}

// SAFETY: an opaque handle the library's thread-safe calls take.
unsafe impl Send for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(free) = self.dv.free_db_region {
            // SAFETY: ours, no QP uses it any more (dropped after the QP).
            let r = unsafe { free(self.ctx.raw(), self.attr) };
            if r != 0 {
                gda_rdma::note_destroy_failure(format_args!(
                    "bnxt_re_dv_free_db_region failed: {r}"
                ));
            }
        }
    }
}

/// An RC QP of a [`BnxtDevice`] (wrapped in [`RcQp`]).
pub struct BnxtQp {
    // Field order is drop order: the QP before the region and rings it uses.
    qp: Qp,
    _region: Option<Region>,
    sq_ring: Ring,
    _rq_ring: Ring,
    mode: Mode,
    wq: WqHandle,
    rq: WqHandle,
    psn_entries: u32,
    start_psn: u32,
    path_mtu: u32,
    port: u8,
}

impl control::Device for BnxtDevice {
    type Provider = Bnxt;
    type Error = BnxtHostError;
    type Pd = BnxtPd;
    type Mr = Mr;
    type Cq = BnxtCq;
    type Qp = BnxtQp;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc_pd(&self) -> Result<BnxtPd, BnxtHostError> {
        Ok(BnxtPd(Pd::alloc(&self.ctx)?))
    }

    unsafe fn register(
        &self,
        pd: &BnxtPd,
        mem: &MemoryDesc<'_>,
        access: Access,
    ) -> Result<Mr, BnxtHostError> {
        // SAFETY: the caller keeps the memory valid (this function's contract).
        unsafe { Mr::register_desc(&pd.0, mem, access) }
    }

    fn create_cq(&self, attr: &CqAttr) -> Result<BnxtCq, BnxtHostError> {
        if attr.collapsed {
            return Err(BnxtHostError::Unsupported(
                "collapsed CQs are a ConnectX feature; bnxt CQs are always rings",
            ));
        }
        let entries = attr.entries.max(2).next_power_of_two();
        let ring = Arc::new(Ring::new(
            self,
            &attr.memory,
            QueueBuffer::CompletionQueue,
            entries as usize * 32,
        )?);
        let mut ci = dv::CqInitAttr {
            cq_handle: 0,
            umem_handle: ring.umem,
            cq_umem_offset: 0,
            ncqe: entries,
        };
        // SAFETY: the published prototype; a registered umem that outlives the CQ.
        let raw = unsafe { (self.dv.create_cq)(self.ctx.raw(), &mut ci) };
        if raw.is_null() {
            return Err(dv_err(
                &self.ctx,
                "bnxt_re_dv_create_cq",
                -1,
                &format!(" ({entries} CQEs)"),
            ));
        }
        let destroy = self.dv.destroy_cq;
        // The ring's umem is released after the CQ itself (which QPs keep alive), so the
        // destroy call owns a reference to it.
        let keep = ring.clone();
        let destroy: gda_rdma::Destroy<sys::ibv_cq> = std::boxed::Box::new(move |c| {
            let _ = &keep;
            // SAFETY: the adopted CQ, destroyed once (by its Drop).
            unsafe { destroy(c) }
        });
        // SAFETY: a CQ the library just made on this context; destroyed only by `destroy`.
        let cq = unsafe { Cq::adopt(&self.ctx, raw, destroy) };
        let mut out = dv::DvCq::default();
        let mut obj = dv::Obj {
            qp: dv::InOut {
                input: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            cq: dv::InOut {
                input: raw.cast(),
                out: std::ptr::from_mut(&mut out).cast(),
            },
            srq: dv::InOut {
                input: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            ah: dv::InOut {
                input: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
            pd: dv::InOut {
                input: std::ptr::null_mut(),
                out: std::ptr::null_mut(),
            },
        };
        // SAFETY: the published prototype; a live CQ and an output struct.
        let r = unsafe { (self.dv.init_obj)(&mut obj, dv::OBJ_CQ) };
        if r != 0 {
            return Err(dv_err(&self.ctx, "bnxt_re_dv_init_obj(CQ)", r, ""));
        }
        if out.cqe_size != 32 {
            return Err(BnxtHostError::Provider(format!(
                "bnxt_re_dv_init_obj reports {}-byte CQEs; gda reads 32-byte bnxt CQEs",
                out.cqe_size
            )));
        }
        let handle = CqHandle {
            buf: ring.addr(),
            dbrec: 0,
            db: self.default_db,
            entries,
            cqe_bytes: 32,
            cqn: out.cqn,
            collapsed: 0,
        };
        Ok(BnxtCq {
            cq,
            handle,
            _ring: ring,
        })
    }

    fn create_rc_qp(
        &self,
        pd: &BnxtPd,
        send_cq: &BnxtCq,
        recv_cq: &BnxtCq,
        caps: &QpCaps,
    ) -> Result<RcQp<BnxtQp, Reset>, BnxtHostError> {
        let mode = self.mode;
        let max_sge = caps.max_sge.clamp(1, crate::wire::sqe::MAX_SGE);
        let max_inline = caps.max_inline.min(crate::wire::sqe::MAX_INLINE);
        // Static mode: every WQE is 8 slots of 16 bytes, whatever it carries.
        let wqes = caps.send_wr.max(1).next_power_of_two();
        let rq_wqes = caps.recv_wr.max(1).next_power_of_two();
        if wqes > 1 << 16 || rq_wqes > 1 << 16 {
            return Err(ControlError::Invalid(format!(
                "send_wr {} / recv_wr {}: bnxt rings hold at most 65536 WQEs",
                caps.send_wr, caps.recv_wr
            ))
            .into());
        }
        let slots = mode.ring_slots(wqes);
        let npsn = mode.psn_entries(wqes);
        let psn_sz = mode.psn.entry_bytes();
        let sq_len = slots as usize * 16 + npsn as usize * psn_sz as usize;
        let wqe_sz = 16 * mode.wqe.slots_per_unit();
        let rq_len = rq_wqes as usize * wqe_sz as usize;
        let sq_ring = Ring::new(self, &caps.memory, QueueBuffer::SendQueue, sq_len)?;
        let rq_ring = Ring::new(self, &caps.memory, QueueBuffer::RecvQueue, rq_len)?;
        let region = match self.dv.alloc_db_region {
            // SAFETY: the published prototype; an open context.
            Some(alloc) => match unsafe { alloc(self.ctx.raw()) } {
                p if p.is_null() => None,
                p => Some(Region {
                    dv: self.dv.clone(),
                    ctx: self.ctx.clone(),
                    attr: p,
                }),
            },
            None => None,
        };
        let (dbr_handle, db) = match &region {
            // SAFETY: a region the library filled in.
            Some(r) => (r.attr.cast::<c_void>(), unsafe { (*r.attr).dbr } as u64),
            None => (std::ptr::null_mut(), self.default_db),
        };
        let mut a = dv::QpInitAttr {
            qp_type: sys::ibv_qp_type::IBV_QPT_RC,
            max_send_wr: wqes,
            max_recv_wr: rq_wqes,
            max_send_sge: max_sge,
            max_recv_sge: max_sge,
            max_inline_data: max_inline,
            send_cq: send_cq.cq.raw(),
            recv_cq: recv_cq.cq.raw(),
            srq: std::ptr::null_mut(),
            qp_handle: 0,
            dbr_handle,
            sq_umem_handle: sq_ring.umem,
            sq_umem_offset: 0,
            sq_len: sq_len as u32,
            sq_slots: slots,
            rq_umem_handle: rq_ring.umem,
            rq_umem_offset: 0,
            sq_wqe_sz: wqe_sz,
            sq_psn_sz: psn_sz,
            sq_npsn: npsn,
            rq_len: rq_len as u32,
            rq_slots: mode.ring_slots(rq_wqes),
            rq_wqe_sz: wqe_sz,
            comp_mask: 0,
        };
        // SAFETY: the published prototype; an open PD, CQs of this context, registered rings.
        let raw = unsafe { (self.dv.create_qp)(pd.0.raw(), &mut a) };
        if raw.is_null() {
            return Err(dv_err(
                &self.ctx,
                "bnxt_re_dv_create_qp",
                -1,
                &format!(
                    " ({wqes} send WQEs = {slots} slots + {npsn} MSN entries, {rq_wqes} receive WQEs, max_sge {max_sge}, max_inline {max_inline})"
                ),
            ));
        }
        let destroy = self.dv.destroy_qp;
        let destroy: gda_rdma::Destroy<sys::ibv_qp> = std::boxed::Box::new(move |q| {
            // SAFETY: the adopted QP, destroyed once (by its Drop).
            unsafe { destroy(q) }
        });
        // SAFETY: a QP the library just made on this PD with these CQs; destroyed only here.
        let qp = unsafe {
            Qp::adopt(
                &pd.0,
                &send_cq.cq,
                &recv_cq.cq,
                raw,
                self.dv.modify_qp,
                destroy,
            )
        };
        let start_psn = qp.reported_sq_psn()?;
        let qpn = qp.qpn();
        let wq = WqHandle {
            buf: sq_ring.addr(),
            dbrec: 0,
            db,
            entries: wqes,
            stride: 0,
            qpn,
            max_inline,
            max_sge,
        };
        let rq = WqHandle {
            buf: rq_ring.addr(),
            dbrec: 0,
            db,
            entries: rq_wqes,
            stride: wqe_sz,
            qpn,
            max_inline: 0,
            max_sge,
        };
        Ok(RcQp::from_raw(BnxtQp {
            qp,
            _region: region,
            sq_ring,
            _rq_ring: rq_ring,
            mode,
            wq,
            rq,
            psn_entries: npsn,
            start_psn,
            path_mtu: 0,
            port: 1,
        }))
    }
}

impl RawRcQp for BnxtQp {
    type Provider = Bnxt;
    type Error = BnxtHostError;

    fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    fn send_psn(&self) -> u32 {
        self.start_psn
    }

    fn sq_handle(&self) -> Result<BnxtSq, BnxtHostError> {
        if self.path_mtu == 0 {
            return Err(ControlError::Invalid(
                "the bnxt send queue counts PSNs by the path MTU: connect the QP (RTR) first"
                    .into(),
            )
            .into());
        }
        let table = self.sq_ring.addr() + u64::from(self.mode.ring_slots(self.wq.entries)) * 16;
        BnxtSq::new(
            self.wq,
            self.mode,
            table,
            self.psn_entries,
            self.path_mtu,
            self.start_psn,
        )
        .map_err(|e| BnxtHostError::Provider(format!("bnxt send queue: {e}")))
    }

    fn rq_handle(&self) -> Result<WqHandle, BnxtHostError> {
        Ok(self.rq)
    }

    fn modify_init(&mut self, attr: &InitAttr) -> Result<(), BnxtHostError> {
        self.port = attr.port;
        Ok(self.qp.to_init(attr)?)
    }

    fn modify_rtr(&mut self, attr: &RtrAttr) -> Result<(), BnxtHostError> {
        self.qp.to_rtr(attr, self.port)?;
        self.path_mtu = attr.path_mtu.bytes();
        Ok(())
    }

    fn modify_rts(&mut self, attr: &RtsAttr) -> Result<(), BnxtHostError> {
        self.qp.to_rts(attr)?;
        self.start_psn = attr.sq_psn & 0x00ff_ffff;
        Ok(())
    }

    fn modify_error(&mut self) -> Result<(), BnxtHostError> {
        Ok(self.qp.to_error()?)
    }
}
