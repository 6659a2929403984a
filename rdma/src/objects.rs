//! Verbs objects with their lifetimes tied together: a context outlives its PDs and CQs, a PD
//! its MRs and QPs, a CQ its QPs — each holds an `Arc` of what it depends on, so they are
//! destroyed in the order verbs needs (a kernel refuses the other order with `EBUSY`) whatever
//! order the caller drops them in.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use gda_hal::control::{Access, DeviceInfo};
use ibverbs_sys as sys;

use crate::load::Verbs;

/// A verbs call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// A call returned an error.
    #[error("{device}: {call} failed: {source}{detail}")]
    Call {
        /// The device.
        device: String,
        /// The call.
        call: &'static str,
        /// Extra context (e.g. the attributes a modify was given).
        detail: String,
        /// The errno.
        source: std::io::Error,
    },
    /// No device of that name.
    #[error("no RDMA device {0:?} (gda devices lists them)")]
    NoDevice(String),
    /// Discovery failed.
    #[error(transparent)]
    Discover(#[from] crate::DiscoverError),
}

impl gda_hal::Error for VerbsError {
    fn kind(&self) -> gda_hal::ErrorKind {
        match self {
            Self::Call { source, .. } if source.raw_os_error() == Some(libc::EINVAL) => {
                gda_hal::ErrorKind::InvalidArgument
            }
            Self::Call { .. } => gda_hal::ErrorKind::Other,
            Self::NoDevice(_) | Self::Discover(_) => gda_hal::ErrorKind::NoDevice,
        }
    }
}

fn err(device: &str, call: &'static str, r: c_int, detail: String) -> VerbsError {
    VerbsError::Call {
        device: device.to_owned(),
        call,
        detail,
        source: if r > 0 {
            std::io::Error::from_raw_os_error(r)
        } else {
            std::io::Error::last_os_error()
        },
    }
}

/// An open device.
pub struct Context {
    verbs: Arc<Verbs>,
    ctx: *mut sys::ibv_context,
    info: DeviceInfo,
}

// SAFETY: an ibv_context is usable from any thread (libibverbs locks what it shares).
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.info.name)
            .finish()
    }
}

impl Context {
    /// Opens the device `name`.
    pub fn open(verbs: Arc<Verbs>, name: &str) -> Result<Arc<Self>, VerbsError> {
        let info = verbs
            .devices()?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| VerbsError::NoDevice(name.to_owned()))?;
        let f = verbs.fns();
        let mut n: c_int = 0;
        // SAFETY: rdma-core's device list.
        let list = unsafe { (f.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(err(name, "ibv_get_device_list", -1, String::new()));
        }
        let mut ctx = std::ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: `n` entries; a C string owned by rdma-core.
            let dev = unsafe { *list.add(i) };
            // SAFETY: as above.
            let dn = unsafe { std::ffi::CStr::from_ptr((f.get_device_name)(dev)) };
            if dn.to_bytes() == name.as_bytes() {
                // SAFETY: a device of the list.
                ctx = unsafe { (f.open_device)(dev) };
                break;
            }
        }
        // SAFETY: the list, freed once (opened contexts stay valid).
        unsafe { (f.free_device_list)(list) };
        if ctx.is_null() {
            return Err(err(name, "ibv_open_device", -1, String::new()));
        }
        Ok(Arc::new(Self { verbs, ctx, info }))
    }

    /// The device's description.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The raw context (for provider calls such as `mlx5dv_*`).
    pub fn raw(&self) -> *mut sys::ibv_context {
        self.ctx
    }

    fn fail(&self, call: &'static str, r: c_int, detail: String) -> VerbsError {
        err(&self.info.name, call, r, detail)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: our context; every object on it holds an Arc of it, so none is left.
        let r = unsafe { (self.verbs.fns().close_device)(self.ctx) };
        if r != 0 {
            eprintln!("gda-rdma: ibv_close_device({}) failed: {r}", self.info.name);
        }
    }
}

/// A protection domain.
pub struct Pd {
    ctx: Arc<Context>,
    pd: *mut sys::ibv_pd,
}

// SAFETY: verbs objects are usable from any thread.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `ctx`.
    pub fn alloc(ctx: &Arc<Context>) -> Result<Arc<Self>, VerbsError> {
        // SAFETY: an open context.
        let pd = unsafe { (ctx.verbs.fns().alloc_pd)(ctx.ctx) };
        if pd.is_null() {
            return Err(ctx.fail("ibv_alloc_pd", -1, String::new()));
        }
        Ok(Arc::new(Self {
            ctx: ctx.clone(),
            pd,
        }))
    }

    /// The raw PD.
    pub fn raw(&self) -> *mut sys::ibv_pd {
        self.pd
    }

    /// Its context.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: our PD; MRs and QPs on it hold an Arc of it.
        let r = unsafe { (self.ctx.verbs.fns().dealloc_pd)(self.pd) };
        if r != 0 {
            eprintln!(
                "gda-rdma: ibv_dealloc_pd on {} failed: {r}",
                self.ctx.info.name
            );
        }
    }
}

/// A memory region.
pub struct Mr {
    pd: Arc<Pd>,
    mr: *mut sys::ibv_mr,
}

// SAFETY: verbs objects are usable from any thread; the fields read are immutable.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers `[addr, addr + len)` in `pd`.
    ///
    /// # Safety
    /// The memory stays valid until the region is dropped and no operation uses its keys.
    pub unsafe fn register(
        pd: &Arc<Pd>,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Self, VerbsError> {
        // SAFETY: the caller's memory; an open PD.
        let mr = unsafe {
            (pd.ctx.verbs.fns().reg_mr)(pd.pd, addr.cast::<c_void>(), len, access.bits() as c_int)
        };
        if mr.is_null() {
            return Err(pd.ctx.fail(
                "ibv_reg_mr",
                -1,
                format!(" ({len} bytes at {:#x}, access {access:?})", addr as u64),
            ));
        }
        Ok(Self { pd: pd.clone(), mr })
    }

    fn get(&self) -> &sys::ibv_mr {
        // SAFETY: a live MR of rdma-core's.
        unsafe { &*self.mr }
    }
}

impl gda_hal::control::MemoryRegion for Mr {
    fn addr(&self) -> u64 {
        self.get().addr as u64
    }
    fn len(&self) -> usize {
        self.get().length
    }
    fn lkey(&self) -> u32 {
        self.get().lkey
    }
    fn rkey(&self) -> u32 {
        self.get().rkey
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: our MR.
        let r = unsafe { (self.pd.ctx.verbs.fns().dereg_mr)(self.mr) };
        if r != 0 {
            eprintln!("gda-rdma: ibv_dereg_mr failed: {r}");
        }
    }
}

/// A completion queue.
pub struct Cq {
    ctx: Arc<Context>,
    cq: *mut sys::ibv_cq,
}

// SAFETY: verbs objects are usable from any thread.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl Cq {
    /// A CQ of at least `entries` entries.
    pub fn create(ctx: &Arc<Context>, entries: u32) -> Result<Arc<Self>, VerbsError> {
        let n = c_int::try_from(entries).unwrap_or(c_int::MAX);
        // SAFETY: an open context; no channel.
        let cq = unsafe {
            (ctx.verbs.fns().create_cq)(ctx.ctx, n, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        if cq.is_null() {
            return Err(ctx.fail("ibv_create_cq", -1, format!(" ({entries} entries)")));
        }
        Ok(Arc::new(Self {
            ctx: ctx.clone(),
            cq,
        }))
    }

    /// The raw CQ.
    pub fn raw(&self) -> *mut sys::ibv_cq {
        self.cq
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: our CQ; QPs using it hold an Arc of it.
        let r = unsafe { (self.ctx.verbs.fns().destroy_cq)(self.cq) };
        if r != 0 {
            eprintln!("gda-rdma: ibv_destroy_cq failed: {r}");
        }
    }
}

/// An RC QP.
pub struct Qp {
    pd: Arc<Pd>,
    _cqs: [Arc<Cq>; 2],
    qp: *mut sys::ibv_qp,
}

// SAFETY: verbs objects are usable from any thread; modify is serialised by `&mut`.
unsafe impl Send for Qp {}

impl Qp {
    /// An RC QP in RESET; `cap` is updated with what the device gave.
    pub fn create(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        cap: &mut sys::ibv_qp_cap,
    ) -> Result<Self, VerbsError> {
        // SAFETY: C data.
        let mut ia: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        ia.send_cq = send_cq.cq;
        ia.recv_cq = recv_cq.cq;
        ia.cap = *cap;
        ia.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        // SAFETY: an open PD, CQs of its context, a filled attr.
        let qp = unsafe { (pd.ctx.verbs.fns().create_qp)(pd.pd, &mut ia) };
        if qp.is_null() {
            return Err(pd.ctx.fail("ibv_create_qp", -1, format!(" (caps {cap:?})")));
        }
        *cap = ia.cap;
        Ok(Self {
            pd: pd.clone(),
            _cqs: [send_cq.clone(), recv_cq.clone()],
            qp,
        })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: a live QP.
        unsafe { (*self.qp).qp_num }
    }

    /// The raw QP.
    pub fn raw(&self) -> *mut sys::ibv_qp {
        self.qp
    }

    /// `ibv_modify_qp`; an error names the transition and the attribute mask.
    pub fn modify(
        &mut self,
        what: &'static str,
        attr: &mut sys::ibv_qp_attr,
        mask: c_int,
    ) -> Result<(), VerbsError> {
        // SAFETY: our QP, a filled attr.
        let r = unsafe { (self.pd.ctx.verbs.fns().modify_qp)(self.qp, attr, mask) };
        if r != 0 {
            return Err(self.pd.ctx.fail(
                "ibv_modify_qp",
                r,
                format!(" ({what}, attribute mask {mask:#x}; GDA_VERBS_TRACE=1 on the software NIC, or dmesg on hardware, names the refused attribute)"),
            ));
        }
        Ok(())
    }

    /// Its PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: our QP.
        let r = unsafe { (self.pd.ctx.verbs.fns().destroy_qp)(self.qp) };
        if r != 0 {
            eprintln!("gda-rdma: ibv_destroy_qp failed: {r}");
        }
    }
}
