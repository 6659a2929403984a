//! The ConnectX host control path: rdma-core's verbs (through `gda-rdma`, loaded at run time)
//! plus `mlx5dv_init_obj` from `libmlx5.so.1`, which hands the device functions the very send
//! queue, receive queue, doorbell record, BlueFlame register and CQ buffer the NIC uses.
//!
//! [`Mlx5Device`] implements [`gda_hal::control::Device`]: PD, memory registration, CQs and RC
//! QPs whose RESET→INIT→RTR→RTS transitions carry every attribute (GRH on RoCE with the chosen
//! GID, hop limit 64, path MTU from both ends, `static_rate`), with an `EINVAL` naming the
//! transition. Objects are reference-counted so they are destroyed in the order verbs needs.
//!
//! Rings the caller places ([`QueueMemory::Caller`], e.g. GPU or host-pinned memory) come
//! through `ibv_alloc_parent_domain` with the caller's allocator; dma-buf memory is registered
//! with `ibv_reg_dmabuf_mr`.
//!
//! `GDA_MLX5_LIB` overrides `libmlx5.so.1` (by default the one beside the libibverbs in use).
//! DEVX (`mlx5dv_devx_*` with umem) is not used: it would create the QP and CQ objects
//! from PRM commands, which is what a collapsed CQ (every CQE in slot 0) and rings in memory
//! libmlx5 never sees need; this control path refuses a collapsed CQ with a clear error.

use std::ffi::c_int;
use std::format;
use std::sync::Arc;

use gda_hal::control::{
    self, Access, CqAttr, DeviceInfo, InitAttr, MemoryDesc, QpCaps, QueueMemory, RawRcQp, RcQp,
    Reset, RtrAttr, RtsAttr,
};
use gda_hal::{CqHandle, WqHandle};
use gda_rdma::{Context, Cq, LoadError, Mr, Pd, Qp, Verbs};
use ibverbs_sys as sys;

use crate::device::{Mlx5, Mlx5Sq};

/// Errors of the ConnectX control path (shared with the Thor2 one).
pub type Mlx5HostError = gda_rdma::HostError;

/// `struct mlx5dv_qp` (rdma-core v55; the same in v44).
#[repr(C)]
#[derive(Default)]
struct DvQp {
    dbrec: usize,
    sq_buf: usize,
    sq_wqe_cnt: u32,
    sq_stride: u32,
    rq_buf: usize,
    rq_wqe_cnt: u32,
    rq_stride: u32,
    bf_reg: usize,
    bf_size: u32,
    comp_mask: u64,
    uar_mmap_offset: i64,
    tirn: u32,
    tisn: u32,
    rqn: u32,
    sqn: u32,
    tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Default)]
struct DvCq {
    buf: usize,
    dbrec: usize,
    cqe_cnt: u32,
    cqe_size: u32,
    cq_uar: usize,
    cqn: u32,
    comp_mask: u64,
}

/// `struct mlx5dv_obj` through `pd` (what every rdma-core since v18 reads).
#[repr(C)]
struct DvObj {
    pairs: [[usize; 2]; 7],
}

const OBJ_QP: u64 = 1;
const OBJ_CQ: u64 = 2;

type InitObj = unsafe extern "C" fn(*mut DvObj, u64) -> c_int;

/// `libmlx5.so.1`'s entry points.
struct Dv {
    init_obj: InitObj,
    _lib: libloading::Library,
}

impl Dv {
    /// `GDA_MLX5_LIB`, else the `libmlx5.so.1` beside the libibverbs in use (rdma-core installs
    /// them together; a libibverbs chosen by path must not be paired with another libmlx5),
    /// else the loader's search path.
    fn load(ibverbs: &str) -> Result<Self, LoadError> {
        let sibling = std::path::Path::new(ibverbs)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join("libmlx5.so.1"))
            .filter(|p| p.exists());
        let (lib, handle, path) = match (std::env::var_os("GDA_MLX5_LIB"), sibling) {
            (None, Some(p)) => gda_rdma::open_path(&p)?,
            _ => gda_rdma::open_lib("GDA_MLX5_LIB", "libmlx5.so.1")?,
        };
        // SAFETY: rdma-core's prototype of `mlx5dv_init_obj`.
        let init_obj =
            unsafe { gda_rdma::resolve::<InitObj>(handle, &path, "mlx5dv_init_obj", "MLX5_1.2")? };
        Ok(Self {
            init_obj,
            _lib: lib,
        })
    }
}

/// A ConnectX NIC driven through rdma-core.
pub struct Mlx5Device {
    ctx: Arc<Context>,
    /// The context's description, claimed for this provider (`provider: "mlx5"`).
    info: DeviceInfo,
    dv: Arc<Dv>,
    /// The PD under the parent domains of CQs whose memory the caller places (a CQ has no
    /// PD of its own in verbs; a parent domain needs one).
    cq_pd: std::sync::Mutex<Option<Arc<Pd>>>,
}

impl gda_rdma::Host for Mlx5 {
    const FAMILY: &'static str = "ConnectX";
    const LABEL: &'static str = "mlx5 (rdma-core)";
    type Device = Mlx5Device;
    type OpenError = Mlx5HostError;

    fn on(ctx: Arc<Context>) -> Result<Mlx5Device, Mlx5HostError> {
        Mlx5Device::on(ctx)
    }
}

impl std::fmt::Debug for Mlx5Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Device")
            .field("ctx", &self.ctx)
            .finish()
    }
}

impl Mlx5Device {
    /// Opens the ConnectX device `name` (`gda devices` lists them).
    pub fn open(verbs: Arc<Verbs>, name: &str) -> Result<Self, Mlx5HostError> {
        Self::on(Context::open(verbs, name)?)
    }

    /// The ConnectX control path on an opened device.
    pub fn on(ctx: Arc<Context>) -> Result<Self, Mlx5HostError> {
        use gda_hal::Provider;
        if !Mlx5::PCI_VENDOR_IDS.contains(&ctx.info().vendor_id) {
            return Err(Mlx5HostError::Provider(format!(
                "{} is a device of PCI vendor {:#06x}, not a ConnectX",
                ctx.info().name,
                ctx.info().vendor_id
            )));
        }
        let dv = Dv::load(ctx.verbs().path())?;
        let info = DeviceInfo {
            provider: <Mlx5 as gda_hal::Provider>::NAME,
            ..ctx.info().clone()
        };
        Ok(Self {
            ctx,
            info,
            dv: Arc::new(dv),
            cq_pd: std::sync::Mutex::new(None),
        })
    }
}

/// A PD of an [`Mlx5Device`].
pub struct Mlx5Pd(Arc<Pd>);

/// A CQ of an [`Mlx5Device`], with its ring.
pub struct Mlx5Cq {
    cq: Arc<Cq>,
    handle: CqHandle,
}

impl control::CompletionQueue for Mlx5Cq {
    fn handle(&self) -> CqHandle {
        self.handle
    }
}

/// An RC QP of an [`Mlx5Device`] (wrapped in [`RcQp`]).
pub struct Mlx5Qp {
    qp: Qp,
    sq: Mlx5Sq,
    rq: WqHandle,
    port: u8,
}

impl control::Device for Mlx5Device {
    type Provider = Mlx5;
    type Error = Mlx5HostError;
    type Pd = Mlx5Pd;
    type Mr = Mr;
    type Cq = Mlx5Cq;
    type Qp = Mlx5Qp;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc_pd(&self) -> Result<Mlx5Pd, Mlx5HostError> {
        Ok(Mlx5Pd(Pd::alloc(&self.ctx)?))
    }

    unsafe fn register(
        &self,
        pd: &Mlx5Pd,
        mem: &MemoryDesc<'_>,
        access: Access,
    ) -> Result<Mr, Mlx5HostError> {
        // SAFETY: the caller keeps the memory valid (this function's contract).
        unsafe { Mr::register_desc(&pd.0, mem, access) }
    }

    fn create_cq(&self, attr: &CqAttr) -> Result<Mlx5Cq, Mlx5HostError> {
        if attr.collapsed {
            return Err(Mlx5HostError::Unsupported(
                "collapsed CQs need DEVX; this control path makes normal CQs",
            ));
        }
        let cq = match &attr.memory {
            QueueMemory::Provider => Cq::create(&self.ctx, attr.entries)?,
            QueueMemory::Caller(alloc) => {
                let base = {
                    let mut g = self.cq_pd.lock().unwrap_or_else(|e| e.into_inner());
                    match &*g {
                        Some(pd) => pd.clone(),
                        None => g.insert(Pd::alloc(&self.ctx)?).clone(),
                    }
                };
                let parent = Pd::parent_domain(&base, alloc.clone())?;
                Cq::create_in(&parent, attr.entries)?
            }
        };
        let mut out = DvCq::default();
        let mut obj = DvObj { pairs: [[0; 2]; 7] };
        obj.pairs[1] = [cq.raw() as usize, std::ptr::from_mut(&mut out) as usize];
        // SAFETY: rdma-core's mlx5dv_init_obj with a live CQ and an output struct.
        let r = unsafe { (self.dv.init_obj)(&mut obj, OBJ_CQ) };
        if r != 0 {
            return Err(Mlx5HostError::Provider(format!(
                "mlx5dv_init_obj(CQ) failed: {r}"
            )));
        }
        let handle = CqHandle {
            buf: out.buf as u64,
            dbrec: out.dbrec as u64,
            db: 0,
            entries: out.cqe_cnt,
            cqe_bytes: out.cqe_size,
            cqn: out.cqn,
            collapsed: 0,
        };
        Ok(Mlx5Cq { cq, handle })
    }

    fn create_rc_qp(
        &self,
        pd: &Mlx5Pd,
        send_cq: &Mlx5Cq,
        recv_cq: &Mlx5Cq,
        caps: &QpCaps,
    ) -> Result<RcQp<Mlx5Qp, Reset>, Mlx5HostError> {
        // Caller-placed rings: a parent domain over the PD whose allocator libmlx5 asks for the
        // QP buffer and doorbell record.
        let on = match &caps.memory {
            QueueMemory::Provider => pd.0.clone(),
            QueueMemory::Caller(alloc) => Pd::parent_domain(&pd.0, alloc.clone())?,
        };
        let mut cap = sys::ibv_qp_cap {
            max_send_wr: caps.send_wr,
            max_recv_wr: caps.recv_wr,
            max_send_sge: caps.max_sge,
            max_recv_sge: caps.max_sge,
            max_inline_data: caps.max_inline,
        };
        let qp = Qp::create(&on, &send_cq.cq, &recv_cq.cq, &mut cap)?;
        let mut out = DvQp::default();
        let mut obj = DvObj { pairs: [[0; 2]; 7] };
        obj.pairs[0] = [qp.raw() as usize, std::ptr::from_mut(&mut out) as usize];
        // SAFETY: rdma-core's mlx5dv_init_obj with a live QP and an output struct.
        let r = unsafe { (self.dv.init_obj)(&mut obj, OBJ_QP) };
        if r != 0 {
            return Err(Mlx5HostError::Provider(format!(
                "mlx5dv_init_obj(QP) failed: {r}"
            )));
        }
        let qpn = qp.qpn();
        let sq = Mlx5Sq {
            wq: WqHandle {
                buf: out.sq_buf as u64,
                dbrec: out.dbrec as u64,
                db: out.bf_reg as u64,
                entries: out.sq_wqe_cnt,
                stride: out.sq_stride,
                qpn,
                max_inline: cap.max_inline_data,
                max_sge: cap.max_send_sge,
            },
            bf_size: out.bf_size,
        };
        let rq = WqHandle {
            buf: out.rq_buf as u64,
            dbrec: out.dbrec as u64,
            db: 0,
            entries: out.rq_wqe_cnt,
            stride: out.rq_stride,
            qpn,
            max_inline: 0,
            max_sge: cap.max_recv_sge,
        };
        Ok(RcQp::from_raw(Mlx5Qp {
            qp,
            sq,
            rq,
            port: 1,
        }))
    }
}

impl RawRcQp for Mlx5Qp {
    type Provider = Mlx5;
    type Error = Mlx5HostError;

    fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    fn send_psn(&self) -> u32 {
        0
    }

    fn sq_handle(&self) -> Result<Mlx5Sq, Mlx5HostError> {
        Ok(self.sq)
    }

    fn rq_handle(&self) -> Result<WqHandle, Mlx5HostError> {
        Ok(self.rq)
    }

    fn modify_init(&mut self, attr: &InitAttr) -> Result<(), Mlx5HostError> {
        self.port = attr.port;
        Ok(self.qp.to_init(attr)?)
    }

    fn modify_rtr(&mut self, attr: &RtrAttr) -> Result<(), Mlx5HostError> {
        self.qp.to_rtr(attr, self.port)
    }

    fn modify_rts(&mut self, attr: &RtsAttr) -> Result<(), Mlx5HostError> {
        Ok(self.qp.to_rts(attr)?)
    }

    fn modify_error(&mut self) -> Result<(), Mlx5HostError> {
        Ok(self.qp.to_error()?)
    }
}
