//! Verbs objects with their lifetimes tied together: a context outlives its PDs and CQs, a PD
//! its MRs and QPs, a CQ its QPs — each holds an `Arc` of what it depends on, so they are
//! destroyed in the order verbs needs (a kernel refuses the other order with `EBUSY`) whatever
//! order the caller drops them in.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use gda_hal::control::{Access, DeviceInfo, QueueAllocator, QueueBuffer};
use ibverbs_sys as sys;

use crate::abi::VerbsContext;
use crate::load::Verbs;

/// `IBV_CQ_INIT_ATTR_MASK_PD`.
const CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;

static DESTROY_FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Destroy calls (`ibv_destroy_qp`, `ibv_dealloc_pd`, a provider's own, …) that failed in this
/// process so far: a drop cannot return an error, so it says so on stderr and counts it here.
/// The objects destroy in the order verbs needs whatever order they are dropped in, so this
/// stays 0 unless the library below misbehaves.
pub fn destroy_failures() -> u64 {
    DESTROY_FAILURES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts a failed destroy (for providers' own objects) and says so on stderr.
pub fn note_destroy_failure(what: std::fmt::Arguments<'_>) {
    DESTROY_FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    eprintln!("gda-rdma: {what}");
}

/// The error of an rdma-core control path (`gda_mlx5::host`, `gda_bnxt::host`, and the calls
/// of this crate they share).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// rdma-core or a provider library could not be loaded.
    #[error(transparent)]
    Load(#[from] crate::LoadError),
    /// A verbs call failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// A control-path rule (access rights, attribute ranges, paths).
    #[error(transparent)]
    Control(#[from] gda_hal::control::ControlError),
    /// A provider's own call (`mlx5dv_*`, `bnxt_re_dv_*`) failed, or the device is not of that
    /// provider.
    #[error("{0}")]
    Provider(String),
    /// Something the control path does not do.
    #[error("not supported: {0}")]
    Unsupported(&'static str),
}

impl gda_hal::Error for HostError {
    fn kind(&self) -> gda_hal::ErrorKind {
        match self {
            Self::Load(e) => gda_hal::Error::kind(e),
            Self::Verbs(e) => gda_hal::Error::kind(e),
            Self::Control(e) => gda_hal::Error::kind(e),
            Self::Provider(_) | Self::Unsupported(_) => gda_hal::ErrorKind::Unsupported,
        }
    }
}

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
        Self::open_info(verbs, info)
    }

    /// Opens the device `info` describes (from [`Verbs::devices`], so a caller that listed the
    /// devices to choose one does not list them again).
    pub fn open_info(verbs: Arc<Verbs>, info: DeviceInfo) -> Result<Arc<Self>, VerbsError> {
        let name = info.name.as_str();
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

    /// The rdma-core it was opened through.
    pub fn verbs(&self) -> &Arc<Verbs> {
        &self.verbs
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

    fn unsupported(&self, call: &'static str) -> VerbsError {
        err(
            &self.info.name,
            call,
            libc::EOPNOTSUPP,
            format!(
                " (the rdma-core at {} does not provide it)",
                self.verbs.path()
            ),
        )
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: our context; every object on it holds an Arc of it, so none is left.
        let r = unsafe { (self.verbs.fns().close_device)(self.ctx) };
        if r != 0 {
            note_destroy_failure(format_args!(
                "ibv_close_device({}) failed: {r}",
                self.info.name
            ));
        }
    }
}

/// A protection domain, or a parent domain ([`Pd::parent_domain`]) over one.
pub struct Pd {
    ctx: Arc<Context>,
    pd: *mut sys::ibv_pd,
    /// For a parent domain: the PD it extends (destroyed after it) and its allocator, which
    /// rdma-core calls back until the parent domain is deallocated.
    _parent: Option<(Arc<Pd>, Box<QueueAlloc>)>,
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
            _parent: None,
        }))
    }

    /// A parent domain over `pd` (`ibv_alloc_parent_domain`) whose CQs and QPs take their
    /// rings and doorbell records from `alloc`: rdma-core's provider asks for each buffer with
    /// its size, alignment and resource type, and this maps the type to a [`QueueBuffer`]
    /// (mlx5: `MLX5DV_RES_TYPE_QP` → the send queue buffer, which holds the RQ then the SQ;
    /// `_RWQ`/`_SRQ` → the receive queue; `_DBR` → a doorbell record; `_CQ` → a CQ ring). A
    /// type it does not know is left to the provider (`IBV_ALLOCATOR_USE_DEFAULT`).
    pub fn parent_domain(
        pd: &Arc<Pd>,
        alloc: Arc<dyn QueueAllocator>,
    ) -> Result<Arc<Self>, VerbsError> {
        let ctx = &pd.ctx;
        // SAFETY: an open context.
        let Some(vctx) = (unsafe {
            crate::abi::ctx_op(
                ctx.ctx,
                std::mem::offset_of!(VerbsContext, alloc_parent_domain),
            )
        }) else {
            return Err(ctx.unsupported("ibv_alloc_parent_domain"));
        };
        // SAFETY: checked by `ctx_op` to be inside the library's verbs_context.
        let Some(op) = (unsafe { (*vctx).alloc_parent_domain }) else {
            return Err(ctx.unsupported("ibv_alloc_parent_domain"));
        };
        let state = Box::new(QueueAlloc {
            alloc,
            live: std::sync::Mutex::new(std::collections::HashMap::new()),
        });
        // SAFETY: C data; zero is "unset".
        let mut attr: sys::ibv_parent_domain_init_attr = unsafe { std::mem::zeroed() };
        attr.pd = pd.pd;
        attr.comp_mask = PARENT_DOMAIN_ALLOCATORS | PARENT_DOMAIN_PD_CONTEXT;
        attr.alloc = Some(queue_alloc);
        attr.free = Some(queue_free);
        attr.pd_context = std::ptr::from_ref::<QueueAlloc>(&state).cast_mut().cast();
        // SAFETY: the library's own operation on its context, a filled attr; `state` is boxed
        // and lives in the returned object until after `ibv_dealloc_pd`.
        let raw = unsafe { op(ctx.ctx, &mut attr) };
        if raw.is_null() {
            return Err(ctx.fail("ibv_alloc_parent_domain", -1, String::new()));
        }
        Ok(Arc::new(Self {
            ctx: ctx.clone(),
            pd: raw,
            _parent: Some((pd.clone(), state)),
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
            note_destroy_failure(format_args!(
                "ibv_dealloc_pd on {} failed: {r}",
                self.ctx.info.name
            ));
        }
    }
}

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | _PD_CONTEXT`.
const PARENT_DOMAIN_ALLOCATORS: u32 = 1 << 0;
const PARENT_DOMAIN_PD_CONTEXT: u32 = 1 << 1;
/// `IBV_ALLOCATOR_USE_DEFAULT`: "allocate this one yourself".
const ALLOCATOR_USE_DEFAULT: *mut c_void = usize::MAX as *mut c_void;

/// The resource types libmlx5 passes a parent domain's allocator (`MLX5DV_RES_TYPE_*`,
/// `RDMA_DRIVER_MLX5` = 1 in the high word).
pub mod res_type {
    /// A QP's buffer (RQ then SQ).
    pub const MLX5_QP: u64 = 1 << 32 | 1;
    /// A work queue's buffer.
    pub const MLX5_RWQ: u64 = 1 << 32 | 2;
    /// A doorbell record.
    pub const MLX5_DBR: u64 = 1 << 32 | 3;
    /// An SRQ's buffer.
    pub const MLX5_SRQ: u64 = 1 << 32 | 4;
    /// A CQ ring.
    pub const MLX5_CQ: u64 = 1 << 32 | 5;
}

/// The queue buffer a provider's resource type stands for.
fn queue_buffer_of(resource_type: u64) -> Option<QueueBuffer> {
    Some(match resource_type {
        res_type::MLX5_QP => QueueBuffer::SendQueue,
        res_type::MLX5_RWQ | res_type::MLX5_SRQ => QueueBuffer::RecvQueue,
        res_type::MLX5_DBR => QueueBuffer::DoorbellRecord,
        res_type::MLX5_CQ => QueueBuffer::CompletionQueue,
        _ => return None,
    })
}

/// A parent domain's allocator and what it handed out (rdma-core's free callback does not
/// say the length, which [`QueueAllocator::free`] needs).
struct QueueAlloc {
    alloc: Arc<dyn QueueAllocator>,
    live: std::sync::Mutex<std::collections::HashMap<usize, (QueueBuffer, usize)>>,
}

/// The parent domain's `alloc` callback.
unsafe extern "C" fn queue_alloc(
    _pd: *mut sys::ibv_pd,
    ctx: *mut c_void,
    size: usize,
    align: usize,
    resource_type: u64,
) -> *mut c_void {
    let body = || {
        // SAFETY: `ctx` is the boxed QueueAlloc given as pd_context, alive with the domain.
        let st = unsafe { &*ctx.cast::<QueueAlloc>() };
        let Some(what) = queue_buffer_of(resource_type) else {
            return ALLOCATOR_USE_DEFAULT;
        };
        let align = align.max(1).next_power_of_two();
        match st.alloc.alloc(what, size, align) {
            Some(p) => {
                st.live
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(p.as_ptr() as usize, (what, size));
                p.as_ptr().cast()
            }
            None => std::ptr::null_mut(),
        }
    };
    // A panic must not unwind into rdma-core: the allocation fails instead.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(std::ptr::null_mut())
}

/// The parent domain's `free` callback.
unsafe extern "C" fn queue_free(
    _pd: *mut sys::ibv_pd,
    ctx: *mut c_void,
    ptr: *mut c_void,
    _resource_type: u64,
) {
    let body = || {
        // SAFETY: as in `queue_alloc`.
        let st = unsafe { &*ctx.cast::<QueueAlloc>() };
        let taken = st
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(ptr as usize));
        if let (Some((what, len)), Some(p)) = (taken, std::ptr::NonNull::new(ptr.cast::<u8>())) {
            // SAFETY: handed out by `queue_alloc` for `what` with `len` bytes; the provider is
            // done with it.
            unsafe { st.alloc.free(what, p, len) };
        }
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
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

    /// Registers `len` bytes at `offset` of the dma-buf `fd` (GPU memory exported by its
    /// driver), reachable by peers at `iova` (`ibv_reg_dmabuf_mr`, rdma-core v34+; an older
    /// rdma-core is a clear error, not a crash).
    ///
    /// # Safety
    /// The dma-buf stays valid until the region is dropped.
    pub unsafe fn register_dmabuf(
        pd: &Arc<Pd>,
        fd: i32,
        offset: u64,
        len: usize,
        iova: u64,
        access: Access,
    ) -> Result<Self, VerbsError> {
        let Some(reg) = pd.ctx.verbs.fns().reg_dmabuf_mr else {
            return Err(pd.ctx.unsupported("ibv_reg_dmabuf_mr"));
        };
        // SAFETY: the caller's dma-buf; an open PD.
        let mr = unsafe { reg(pd.pd, offset, len, iova, fd, access.bits() as c_int) };
        if mr.is_null() {
            return Err(pd.ctx.fail(
                "ibv_reg_dmabuf_mr",
                -1,
                format!(
                    " (fd {fd}, {len} bytes at offset {offset:#x}, iova {iova:#x}, access {access:?}; \
                     EOPNOTSUPP or EINVAL on a GPU usually means the kernel or GPU driver has no \
                     dma-buf export: use host-pinned memory, or load the peer-memory module)"
                ),
            ));
        }
        Ok(Self { pd: pd.clone(), mr })
    }

    /// Registers `mem` (host memory, or a dma-buf) in `pd` after checking `access`.
    ///
    /// # Safety
    /// The memory stays valid until the region is dropped and no operation uses its keys.
    pub unsafe fn register_desc(
        pd: &Arc<Pd>,
        mem: &gda_hal::control::MemoryDesc<'_>,
        access: Access,
    ) -> Result<Self, HostError> {
        use gda_hal::control::MemoryDesc;
        let access = access.check_registration()?;
        Ok(match *mem {
            MemoryDesc::Host { addr, len } | MemoryDesc::SharedHost { addr, len, .. } => {
                // SAFETY: the caller's contract.
                unsafe { Self::register(pd, addr, len, access) }?
            }
            MemoryDesc::DmaBuf {
                fd,
                offset,
                len,
                iova,
            } => {
                // SAFETY: the caller's contract.
                unsafe { Self::register_dmabuf(pd, fd, offset, len, iova, access) }?
            }
        })
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
            note_destroy_failure(format_args!("ibv_dereg_mr failed: {r}"));
        }
    }
}

/// How an object made by a provider's own call (`bnxt_re_dv_create_qp`, …) is destroyed:
/// by that provider's matching call rather than verbs'.
pub type Destroy<T> = Box<dyn Fn(*mut T) -> c_int + Send + Sync>;

/// A completion queue.
pub struct Cq {
    ctx: Arc<Context>,
    cq: *mut sys::ibv_cq,
    /// The parent domain whose allocator holds the ring, released after the CQ.
    _pd: Option<Arc<Pd>>,
    /// The provider's destroy call, for a CQ it made (else `ibv_destroy_cq`).
    destroy: Option<Destroy<sys::ibv_cq>>,
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
            _pd: None,
            destroy: None,
        }))
    }

    /// A CQ whose ring and doorbell record come from the parent domain `pd`'s allocator
    /// (`ibv_create_cq_ex` with `IBV_CQ_INIT_ATTR_MASK_PD`).
    pub fn create_in(pd: &Arc<Pd>, entries: u32) -> Result<Arc<Self>, VerbsError> {
        let ctx = &pd.ctx;
        // SAFETY: an open context.
        let Some(vctx) = (unsafe {
            crate::abi::ctx_op(ctx.ctx, std::mem::offset_of!(VerbsContext, create_cq_ex))
        }) else {
            return Err(ctx.unsupported("ibv_create_cq_ex"));
        };
        // SAFETY: inside the library's verbs_context (`ctx_op`).
        let Some(op) = (unsafe { (*vctx).create_cq_ex }) else {
            return Err(ctx.unsupported("ibv_create_cq_ex"));
        };
        // SAFETY: C data; zero is "unset".
        let mut a: sys::ibv_cq_init_attr_ex = unsafe { std::mem::zeroed() };
        a.cqe = entries;
        a.comp_mask = CQ_INIT_ATTR_MASK_PD;
        a.parent_domain = pd.pd;
        // SAFETY: the library's operation, a filled attr.
        let ex = unsafe { op(ctx.ctx, &mut a) };
        if ex.is_null() {
            return Err(ctx.fail(
                "ibv_create_cq_ex",
                -1,
                format!(" ({entries} entries on a parent domain)"),
            ));
        }
        Ok(Arc::new(Self {
            ctx: ctx.clone(),
            // `ibv_cq_ex_to_cq`: an ibv_cq_ex begins with the members of an ibv_cq.
            cq: ex.cast(),
            _pd: Some(pd.clone()),
            destroy: None,
        }))
    }

    /// Takes ownership of `cq`, made on `ctx` by a provider call, destroyed by `destroy`.
    ///
    /// # Safety
    /// `cq` is a live CQ of `ctx` that nothing else destroys.
    pub unsafe fn adopt(
        ctx: &Arc<Context>,
        cq: *mut sys::ibv_cq,
        destroy: Destroy<sys::ibv_cq>,
    ) -> Arc<Self> {
        Arc::new(Self {
            ctx: ctx.clone(),
            cq,
            _pd: None,
            destroy: Some(destroy),
        })
    }

    /// The raw CQ.
    pub fn raw(&self) -> *mut sys::ibv_cq {
        self.cq
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        let r = match &self.destroy {
            Some(d) => d(self.cq),
            // SAFETY: our CQ; QPs using it hold an Arc of it.
            None => unsafe { (self.ctx.verbs.fns().destroy_cq)(self.cq) },
        };
        if r != 0 {
            note_destroy_failure(format_args!("destroying a CQ failed: {r}"));
        }
    }
}

/// An RC QP.
pub struct Qp {
    pd: Arc<Pd>,
    _cqs: [Arc<Cq>; 2],
    qp: *mut sys::ibv_qp,
    /// The provider's destroy call, for a QP it made (else `ibv_destroy_qp`).
    destroy: Option<Destroy<sys::ibv_qp>>,
    /// The provider's modify call, for a QP it made (else `ibv_modify_qp`).
    modify: Option<Modify>,
}

/// A provider's `modify_qp` (`bnxt_re_dv_modify_qp` has `ibv_modify_qp`'s signature).
pub type Modify = unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_qp_attr, c_int) -> c_int;

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
            destroy: None,
            modify: None,
        })
    }

    /// Takes ownership of `qp`, made on `pd` with these CQs by a provider call, modified with
    /// `modify` and destroyed with `destroy`.
    ///
    /// # Safety
    /// `qp` is a live QP of `pd` using `send_cq` and `recv_cq`, that nothing else destroys.
    pub unsafe fn adopt(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        qp: *mut sys::ibv_qp,
        modify: Modify,
        destroy: Destroy<sys::ibv_qp>,
    ) -> Self {
        Self {
            pd: pd.clone(),
            _cqs: [send_cq.clone(), recv_cq.clone()],
            qp,
            destroy: Some(destroy),
            modify: Some(modify),
        }
    }

    /// The send PSN the device reports (`ibv_query_qp` with `IBV_QP_SQ_PSN`): what a
    /// freshly created QP starts from unless RTS sets another.
    pub fn reported_sq_psn(&self) -> Result<u32, VerbsError> {
        // SAFETY: C data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut i: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: our QP, output structs.
        let r = unsafe {
            (self.pd.ctx.verbs.fns().query_qp)(
                self.qp,
                &mut a,
                crate::qp_mask::SQ_PSN as c_int,
                &mut i,
            )
        };
        if r != 0 {
            return Err(self
                .pd
                .ctx
                .fail("ibv_query_qp", r, " (IBV_QP_SQ_PSN)".into()));
        }
        Ok(a.sq_psn & 0x00ff_ffff)
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
        let call = self.modify.unwrap_or(self.pd.ctx.verbs.fns().modify_qp);
        // SAFETY: our QP, a filled attr.
        let r = unsafe { call(self.qp, attr, mask) };
        if r != 0 {
            return Err(self.pd.ctx.fail(
                "ibv_modify_qp",
                r,
                format!(
                    " ({what} with {}; GDA_VERBS_TRACE=1 on the software NIC, or dmesg on hardware, names the refused attribute)",
                    describe_qp_attr(attr, mask)
                ),
            ));
        }
        Ok(())
    }

    /// RESET→INIT: port, partition and the responder's rights.
    pub fn to_init(&mut self, attr: &gda_hal::control::InitAttr) -> Result<(), VerbsError> {
        let (mut a, mask) = crate::qp_attr::to_ibv_init(attr);
        self.modify("RESET→INIT", &mut a, mask as c_int)
    }

    /// INIT→RTR on `port`: the peer, the path MTU, GRH (source GID, hop limit, traffic class)
    /// and `static_rate`, after checking the attributes' ranges.
    pub fn to_rtr(&mut self, attr: &gda_hal::control::RtrAttr, port: u8) -> Result<(), HostError> {
        let (mut a, mask) = crate::qp_attr::to_ibv_rtr(attr, port)?;
        Ok(self.modify("INIT→RTR", &mut a, mask as c_int)?)
    }

    /// RTR→RTS: the send PSN and retry behaviour.
    pub fn to_rts(&mut self, attr: &gda_hal::control::RtsAttr) -> Result<(), VerbsError> {
        let (mut a, mask) = crate::qp_attr::to_ibv_rts(attr);
        self.modify("RTR→RTS", &mut a, mask as c_int)
    }

    /// →ERR.
    pub fn to_error(&mut self) -> Result<(), VerbsError> {
        let (mut a, mask) = crate::qp_attr::to_ibv_error();
        self.modify("→ERR", &mut a, mask as c_int)
    }

    /// Its PD.
    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        let r = match &self.destroy {
            Some(d) => d(self.qp),
            // SAFETY: our QP.
            None => unsafe { (self.pd.ctx.verbs.fns().destroy_qp)(self.qp) },
        };
        if r != 0 {
            note_destroy_failure(format_args!("destroying a QP failed: {r}"));
        }
    }
}

/// The attributes `mask` selects from `a`, by name (`path_mtu=3 (1024), dest_qp_num=0x12, …`),
/// for an error message that says what a refused `ibv_modify_qp` was given.
pub fn describe_qp_attr(a: &sys::ibv_qp_attr, mask: c_int) -> String {
    use crate::qp_mask::*;
    let m = mask as u32;
    let mut out: Vec<String> = Vec::new();
    let mut put = |bit: u32, text: &dyn Fn() -> String| {
        if m & bit != 0 {
            out.push(text());
        }
    };
    put(STATE, &|| format!("qp_state={}", a.qp_state));
    put(CUR_STATE, &|| format!("cur_qp_state={}", a.cur_qp_state));
    put(EN_SQD_ASYNC_NOTIFY, &|| {
        format!("en_sqd_async_notify={}", a.en_sqd_async_notify)
    });
    put(ACCESS_FLAGS, &|| {
        format!("qp_access_flags={:#x}", a.qp_access_flags)
    });
    put(PKEY_INDEX, &|| format!("pkey_index={}", a.pkey_index));
    put(PORT, &|| format!("port_num={}", a.port_num));
    put(QKEY, &|| format!("qkey={:#x}", a.qkey));
    put(AV, &|| {
        let ah = &a.ah_attr;
        // SAFETY: `ibv_gid` is a union of plain bytes; every bit pattern is a valid `raw`.
        let gid = unsafe { ah.grh.dgid.raw };
        let g = gid
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect::<Vec<_>>()
            .join(":");
        format!(
            "ah_attr={{is_global={}, dlid={:#x}, sl={}, port_num={}, static_rate={}, sgid_index={}, hop_limit={}, traffic_class={}, flow_label={:#x}, dgid={g}}}",
            ah.is_global,
            ah.dlid,
            ah.sl,
            ah.port_num,
            ah.static_rate,
            ah.grh.sgid_index,
            ah.grh.hop_limit,
            ah.grh.traffic_class,
            ah.grh.flow_label
        )
    });
    put(PATH_MTU, &|| {
        let bytes = if (1..=5).contains(&a.path_mtu) {
            format!("{}", 128u32 << a.path_mtu)
        } else {
            "not an MTU".into()
        };
        format!("path_mtu={} ({bytes})", a.path_mtu)
    });
    put(TIMEOUT, &|| format!("timeout={}", a.timeout));
    put(RETRY_CNT, &|| format!("retry_cnt={}", a.retry_cnt));
    put(RNR_RETRY, &|| format!("rnr_retry={}", a.rnr_retry));
    put(RQ_PSN, &|| format!("rq_psn={:#x}", a.rq_psn));
    put(MAX_QP_RD_ATOMIC, &|| {
        format!("max_rd_atomic={}", a.max_rd_atomic)
    });
    put(MIN_RNR_TIMER, &|| {
        format!("min_rnr_timer={}", a.min_rnr_timer)
    });
    put(SQ_PSN, &|| format!("sq_psn={:#x}", a.sq_psn));
    put(MAX_DEST_RD_ATOMIC, &|| {
        format!("max_dest_rd_atomic={}", a.max_dest_rd_atomic)
    });
    put(DEST_QPN, &|| format!("dest_qp_num={:#x}", a.dest_qp_num));
    // The bits named above.
    let known: u32 = STATE
        | CUR_STATE
        | EN_SQD_ASYNC_NOTIFY
        | ACCESS_FLAGS
        | PKEY_INDEX
        | PORT
        | QKEY
        | AV
        | PATH_MTU
        | TIMEOUT
        | RETRY_CNT
        | RNR_RETRY
        | RQ_PSN
        | MAX_QP_RD_ATOMIC
        | MIN_RNR_TIMER
        | SQ_PSN
        | MAX_DEST_RD_ATOMIC
        | DEST_QPN;
    if m & !known != 0 {
        out.push(format!("other mask bits {:#x}", m & !known));
    }
    format!("attribute mask {mask:#x}: {}", out.join(", "))
}
