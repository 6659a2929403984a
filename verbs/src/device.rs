//! Devices and contexts: `ibv_get_device_list`, `ibv_open_device` (exported by `crate::ops`,
//! which fills in every module's operations), `ibv_close_device`, the queries
//! (`ibv_query_device`, `ibv_query_port`, `ibv_query_gid` and their `_ex` forms) and the name
//! helpers.
//!
//! One software-NIC fabric per process (made on first use) holds one NIC per configured device
//! ([`crate::config`]). A device looks like a ConnectX-6 Dx (or a Thor2) with one RoCE v2 port:
//! active MTU 4096, the GID table the sim NIC publishes (link-local and IPv4-mapped entries, each
//! as RoCE v1 and v2), the limits the software NIC enforces.

use std::collections::VecDeque;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use gda_hal::control::{Device as _, DeviceInfo, GidType, PortInfo};
use gda_sim::{Fabric, FabricConfig, Nic, SimDevice};
use ibverbs_sys as sys;

use crate::abi::{self, Errno, VerbsContext, guard, ret_code, ret_ptr, set_errno};
use crate::config::{self, DeviceSpec, Kind};
use crate::dp::ContextQps;
use crate::vendor::{ContextKey, ForVendor, Gone, VendorQueue};

/// Entries in a port's GID table (as a ConnectX reports; the unpopulated ones read as zero).
pub(crate) const GID_TABLE_LEN: c_int = 256;

/// One simulated device of this process.
pub(crate) struct Device {
    /// What it was made from.
    spec: DeviceSpec,
    /// Its NIC on the process fabric.
    pub(crate) nic: Nic,
    /// Ports, GIDs and limits (from the sim NIC's control path).
    pub(crate) info: DeviceInfo,
    /// PCI vendor and part ids of the device it looks like.
    ids: (u32, u32),
    /// The `struct ibv_device` handed to programs (lives as long as the process).
    ibv: *mut sys::ibv_device,
    /// Node GUID (host order).
    guid: u64,
    /// The async events of its open contexts, for port events.
    contexts: Arc<Mutex<Vec<std::sync::Weak<AsyncEvents>>>>,
    /// Its port's host-wide state, watched from the first `ibv_open_device` on
    /// (`gda_sim::port`); `Err` says why it could not be (the port then stays up).
    port_watch: OnceLock<Result<gda_sim::port::PortWatch, String>>,
}

impl Device {
    /// Its family.
    pub(crate) fn kind(&self) -> Kind {
        self.spec.kind
    }

    /// `gda_<kind>_<index>`.
    pub(crate) fn name(&self) -> String {
        self.spec.name()
    }

    /// Starts following its port's host-wide state (once): taken down with `gda port <name>
    /// down`, its NIC stops sending and answering and every open context gets
    /// `IBV_EVENT_PORT_ERR`; brought up, `IBV_EVENT_PORT_ACTIVE`.
    fn watch_port(&self) {
        self.port_watch.get_or_init(|| {
            let (nic, contexts) = (self.nic.clone(), self.contexts.clone());
            let r = gda_sim::port::watch(
                &self.name(),
                // Under the port thread's lock: a change seen later is applied after this.
                |up| self.nic.set_port_up(up),
                move |up| {
                    nic.set_port_up(up);
                    for e in lock(&contexts).iter().filter_map(std::sync::Weak::upgrade) {
                        e.raise(QueuedEvent::Port { up }, None);
                    }
                },
            );
            match r {
                Ok((_, w)) => Ok(w),
                Err(e) => {
                    abi::trace(format_args!(
                        "{}: port state not followed ({e}); the port stays up",
                        self.name()
                    ));
                    Err(e.to_string())
                }
            }
        });
    }

    /// The process fabric its NIC is on.
    pub(crate) fn fabric(&self) -> &Fabric {
        self.nic.fabric()
    }
}

// SAFETY: `ibv` points to a leaked, never-freed `ibv_device` that is only read after creation.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// The process's software NICs.
struct Runtime {
    /// The fabric every device of this process is a NIC of (held for the process's life).
    _fabric: Fabric,
    /// The devices, in `GDA_VERBS_DEVICES` order.
    devices: Vec<Device>,
}

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The runtime, made on first use; `Err` explains a bad configuration (also printed once).
fn runtime() -> Result<&'static Runtime, Errno> {
    RUNTIME
        .get_or_init(|| {
            let r = build_runtime();
            if let Err(e) = &r {
                eprintln!("gda-verbs: {e}");
            }
            r
        })
        .as_ref()
        .map_err(|e| Errno::inval(e.clone()))
}

fn build_runtime() -> Result<Runtime, String> {
    let specs = config::parse(std::env::var("GDA_VERBS_DEVICES").ok().as_deref())
        .map_err(|e| e.to_string())?;
    let chaos = FabricConfig::from_chaos_var(std::env::var("GDA_SIM_CHAOS").ok().as_deref())
        .map_err(|e| e.to_string())?;
    let fabric = crate::fabric::process_fabric(chaos)?;
    let mut devices = Vec::new();
    for spec in specs {
        let (nic, info, ids) = spec.kind.with(SimNic(&fabric));
        let name = spec.name();
        // SAFETY: `ibv_device` is plain C data: all zeros is a valid value.
        let mut dev: Box<sys::ibv_device> = Box::new(unsafe { std::mem::zeroed() });
        dev.node_type = sys::IBV_NODE_CA;
        dev.transport_type = sys::IBV_TRANSPORT_IB;
        abi::put_cstr(&mut dev.name, &name);
        abi::put_cstr(&mut dev.dev_name, &format!("uverbs{}", devices.len()));
        abi::put_cstr(
            &mut dev.dev_path,
            &format!("/sys/class/infiniband_verbs/uverbs{}", devices.len()),
        );
        abi::put_cstr(
            &mut dev.ibdev_path,
            &format!("/sys/class/infiniband/{name}"),
        );
        let guid = node_guid(&name);
        devices.push(Device {
            spec,
            nic,
            info,
            ids,
            ibv: Box::into_raw(dev),
            guid,
            contexts: Arc::default(),
            port_watch: OnceLock::new(),
        });
    }
    Ok(Runtime {
        _fabric: fabric,
        devices,
    })
}

/// A NIC of the family's device model on `fabric`: the NIC, what its control path reports,
/// and the PCI ids of the device it models.
struct SimNic<'a>(&'a Fabric);

impl ForVendor for SimNic<'_> {
    type Out = (Nic, DeviceInfo, (u32, u32));
    fn run<V: VendorQueue>(self) -> Self::Out {
        let d = SimDevice::<V>::new(self.0);
        (d.nic().clone(), d.info().clone(), V::DEVICE_IDS)
    }
}

/// The device behind a `struct ibv_device` this library handed out.
pub(crate) fn device_of(dev: *const sys::ibv_device) -> Result<&'static Device, Errno> {
    let rt = runtime()?;
    rt.devices
        .iter()
        .find(|d| std::ptr::eq(d.ibv, dev))
        .ok_or_else(|| Errno::new(libc::ENODEV, "not a device of this library"))
}

/// A context's asynchronous events: a queue, and an eventfd (semaphore mode) counting what
/// it holds, which is the context's `async_fd` — blocking, as rdma-core's is, so
/// `ibv_get_async_event` waits unless the program set `O_NONBLOCK` on it, and `poll` on it
/// wakes when an event is queued.
///
/// The software NIC raises `IBV_EVENT_CQ_ERR` when a CQ overruns (it found the CQ full and
/// dropped a completion, as hardware does) — on the engine thread ([`AsyncEvents::raise`]
/// neither blocks nor allocates beyond the queue's push); a CQ's events not yet taken are
/// withdrawn when it is destroyed ([`AsyncEvents::forget_cq`]), so no event names a CQ that
/// no longer exists. `IBV_EVENT_PORT_ERR`/`_ACTIVE` come from the device's port watch
/// (`Device::watch_port`) when its port is taken down or brought up host-wide. The fd closes when the context and every CQ that
/// could still raise an event are gone.
pub(crate) struct AsyncEvents {
    fd: std::os::fd::OwnedFd,
    queue: Mutex<VecDeque<QueuedEvent>>,
}

/// An event waiting to be taken: its type and the object it is about (a pointer the program
/// holds, as `ibv_async_event.element` carries it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueuedEvent {
    /// `IBV_EVENT_CQ_ERR` on this `ibv_cq`.
    CqErr(usize),
    /// `IBV_EVENT_PORT_ACTIVE` (`up`) or `IBV_EVENT_PORT_ERR` on port 1.
    Port { up: bool },
}

impl AsyncEvents {
    /// A new, empty queue on a blocking semaphore eventfd.
    fn new() -> Result<Self, Errno> {
        // SAFETY: eventfd with valid flags. Blocking, as rdma-core's async fd is: a program
        // that wants `ibv_get_async_event` not to block sets O_NONBLOCK on it with fcntl.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            return Err(Errno::new(
                libc::EMFILE,
                "no file descriptor for the async events",
            ));
        }
        Ok(Self {
            // SAFETY: a new fd owned by nothing else.
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            queue: Mutex::new(VecDeque::new()),
        })
    }

    fn raw(&self) -> c_int {
        self.fd.as_raw_fd()
    }

    /// Queues `ev` and counts it on the fd (waking a waiter). `alive` (the object's, for an
    /// affiliated event) is checked under the queue's lock, which
    /// [`forget_cq`](Self::forget_cq) also takes: an object destroyed before the event was
    /// queued raises nothing.
    pub(crate) fn raise(&self, ev: QueuedEvent, alive: Option<&AtomicBool>) {
        let mut q = lock(&self.queue);
        if alive.is_some_and(|a| !a.load(Ordering::Acquire)) {
            return;
        }
        q.push_back(ev);
        let one = 1u64;
        // Counted under the queue's lock, so the fd's count is the queue's length and `poll`
        // on it is readable exactly while an event waits.
        // SAFETY: writing 8 bytes to our eventfd. It can fail only at a count of 2^64-2,
        // which a queue in memory cannot reach.
        unsafe { libc::write(self.raw(), std::ptr::from_ref(&one).cast(), 8) };
    }

    /// Takes one count off the fd if it has one, never waiting (the fd may be blocking, and
    /// a program could have read our fd itself).
    fn uncount(&self) {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; no waiting.
        if unsafe { libc::poll(&raw mut p, 1, 0) } == 1 {
            let mut v = 0u64;
            // SAFETY: reading 8 bytes from our eventfd (semaphore mode: takes one).
            unsafe { libc::read(self.raw(), std::ptr::from_mut(&mut v).cast(), 8) };
        }
    }

    /// Withdraws the events about CQ `cq` not taken yet, with their counts, and marks it gone
    /// (`alive`), so none is queued for it later.
    pub(crate) fn forget_cq(&self, cq: usize, alive: &AtomicBool) {
        let mut q = lock(&self.queue);
        alive.store(false, Ordering::Release);
        let before = q.len();
        q.retain(|e| *e != QueuedEvent::CqErr(cq));
        for _ in q.len()..before {
            self.uncount();
        }
    }

    /// Takes the next event, waiting for one unless the program made the fd non-blocking
    /// (then `EAGAIN`).
    fn take(&self) -> Result<QueuedEvent, c_int> {
        loop {
            {
                let mut q = lock(&self.queue);
                if let Some(ev) = q.pop_front() {
                    self.uncount();
                    return Ok(ev);
                }
            }
            // SAFETY: F_GETFL on our own fd.
            let flags = unsafe { libc::fcntl(self.raw(), libc::F_GETFL) };
            if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
                return Err(libc::EAGAIN);
            }
            let mut p = libc::pollfd {
                fd: self.raw(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; waits until an event is counted.
            if unsafe { libc::poll(&raw mut p, 1, -1) } < 0 {
                let e = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                if e != libc::EINTR {
                    return Err(e);
                }
                continue;
            }
            // Readable with nothing queued: a count someone else wrote to our fd. Take it
            // (under the lock, so it is not a count `raise` just wrote) rather than spin.
            let q = lock(&self.queue);
            if q.is_empty() {
                self.uncount();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An open device: rdma-core's extended context followed by this library's state.
#[repr(C)]
pub(crate) struct Context {
    /// What programs see (`&vctx.context`).
    vctx: VerbsContext,
    magic: u64,
    /// The device.
    pub(crate) dev: &'static Device,
    /// Its asynchronous events and their fd (`context.async_fd`).
    pub(crate) events: Arc<AsyncEvents>,
    /// Per-context data-path state (QPs by number, for completions).
    pub(crate) dp: ContextQps,
    /// Objects created on this context and not yet destroyed (`ibv_close_device` with
    /// objects alive is the caller's bug; counted for the trace).
    live: AtomicU64,
}

const CONTEXT_MAGIC: u64 = 0x6764_615f_7663_7478; // "gda_vctx"

impl Context {
    /// The context behind `ctx`, or `EINVAL` for a null or foreign pointer.
    ///
    /// # Safety
    /// `ctx` is null or points to an `ibv_context` (of this library or not) that is alive.
    pub(crate) unsafe fn from_ibv<'a>(ctx: *mut sys::ibv_context) -> Result<&'a Context, Errno> {
        if ctx.is_null() {
            return Err(Errno::inval("null context"));
        }
        let off = std::mem::offset_of!(Context, vctx) + std::mem::offset_of!(VerbsContext, context);
        let base = ctx.cast::<u8>().wrapping_sub(off).cast::<Context>();
        // SAFETY: a context of this library is the `context` member of a live `Context`; for
        // another library's the read of `magic` is within its (larger) extended context —
        // checked before anything else is touched.
        let c = unsafe { &*base };
        if c.vctx.context.abi_compat != abi::VERBS_ABI_IS_EXTENDED || c.magic != CONTEXT_MAGIC {
            return Err(Errno::inval("not a context of this library"));
        }
        Ok(c)
    }

    /// The `ibv_context` pointer programs hold.
    pub(crate) fn ibv(&self) -> *mut sys::ibv_context {
        std::ptr::from_ref(&self.vctx.context).cast_mut()
    }

    /// The key of state kept about this context below this module.
    pub(crate) fn key(&self) -> ContextKey {
        ContextKey(std::ptr::from_ref(self) as usize)
    }

    /// Its completion vectors (`ibv_create_cq`'s `comp_vector` is below this).
    pub(crate) fn comp_vectors(&self) -> c_int {
        self.vctx.context.num_comp_vectors
    }

    /// Counts an object created on this context.
    pub(crate) fn retain(&self) {
        self.live.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an object of this context destroyed.
    pub(crate) fn release(&self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }

    /// The device's one port.
    pub(crate) fn port(&self) -> &PortInfo {
        &self.dev.info.ports[0]
    }
}

#[unsafe(no_mangle)]
/// `ibv_get_device_list`: a NULL-terminated array (freed with `ibv_free_device_list`).
///
/// # Safety
/// `num` is null or writable.
pub unsafe extern "C" fn gdav_ibv_get_device_list(num: *mut c_int) -> *mut *mut sys::ibv_device {
    guard("ibv_get_device_list", std::ptr::null_mut(), || {
        let rt = match runtime() {
            Ok(r) => r,
            Err(e) => return ret_ptr("ibv_get_device_list", Err(e)),
        };
        let n = rt.devices.len();
        // SAFETY: calloc of n+1 pointers; checked for NULL below.
        let list = unsafe { libc::calloc(n + 1, size_of::<*mut sys::ibv_device>()) }
            .cast::<*mut sys::ibv_device>();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return std::ptr::null_mut();
        }
        for (i, d) in rt.devices.iter().enumerate() {
            // SAFETY: `list` has n+1 slots.
            unsafe { *list.add(i) = d.ibv };
        }
        if !num.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *num = n as c_int };
        }
        list
    })
}

#[unsafe(no_mangle)]
/// `ibv_free_device_list`.
///
/// # Safety
/// `list` came from `ibv_get_device_list` (or is null).
pub unsafe extern "C" fn gdav_ibv_free_device_list(list: *mut *mut sys::ibv_device) {
    // SAFETY: allocated by calloc in `ibv_get_device_list`; free(NULL) is a no-op.
    unsafe { libc::free(list.cast()) };
}

#[unsafe(no_mangle)]
/// `ibv_get_device_name`.
///
/// # Safety
/// `dev` is null or a device of this library.
pub unsafe extern "C" fn gdav_ibv_get_device_name(dev: *mut sys::ibv_device) -> *const c_char {
    match device_of(dev) {
        // SAFETY: the device lives for the process.
        Ok(d) => unsafe { (*d.ibv).name.as_ptr() },
        Err(e) => ret_ptr("ibv_get_device_name", Err::<*mut c_char, _>(e)),
    }
}

/// The node GUID of device `name` on this host: the same in every process (what `ibv_devices`
/// and `ibv_devinfo`, two processes, print must agree, as one NIC has one GUID), and different
/// between hosts — an EUI-64 of the vendor's OUI (Mellanox's for mlx5 devices, Broadcom's for
/// bnxt, else a locally administered one) and 40 bits of a hash of the host's machine id (the
/// boot id without one) and the name. The fabric (per process) still names the port's GIDs.
fn node_guid(name: &str) -> u64 {
    let host = std::fs::read_to_string("/etc/machine-id")
        .or_else(|_| std::fs::read_to_string("/proc/sys/kernel/random/boot_id"))
        .unwrap_or_default();
    // FNV-1a: stable across builds and Rust versions (std's hashers are not).
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in host.trim().bytes().chain([0]).chain(name.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let oui: u64 = if name.contains("mlx5") {
        0x00_02c9
    } else if name.contains("bnxt") {
        0x00_0af7
    } else {
        0x02_0000
    };
    (oui << 40) | (h & 0xff_ffff_ffff)
}

/// `ibv_get_device_guid` (network byte order).
///
/// # Safety
/// `dev` is null or a device of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdav_ibv_get_device_guid(dev: *mut sys::ibv_device) -> u64 {
    device_of(dev).map_or(0, |d| d.guid.to_be())
}

#[unsafe(no_mangle)]
/// `ibv_get_device_index`: the position in the device list, or -1.
///
/// # Safety
/// `dev` is null or a device of this library.
pub unsafe extern "C" fn gdav_ibv_get_device_index(dev: *mut sys::ibv_device) -> c_int {
    let Ok(rt) = runtime() else { return -1 };
    rt.devices
        .iter()
        .position(|d| std::ptr::eq(d.ibv, dev))
        .map_or(-1, |i| i as c_int)
}

/// `ibv_open_device`'s work: a new context of `dev`, with the operations `install` fills
/// (`crate::ops`, which exports the call).
pub(crate) fn open(
    dev: *mut sys::ibv_device,
    install: impl FnOnce(&mut VerbsContext),
) -> Result<*mut sys::ibv_context, Errno> {
    let d = device_of(dev)?;
    let events = Arc::new(AsyncEvents::new()?);
    {
        let mut cs = lock(&d.contexts);
        cs.retain(|w| w.strong_count() > 0);
        cs.push(Arc::downgrade(&events));
    }
    d.watch_port();
    // SAFETY: VerbsContext is C data (pointers, integers, a pthread mutex): all zeros is valid
    // and means "operation not provided".
    let mut vctx: VerbsContext = unsafe { std::mem::zeroed() };
    vctx.sz = size_of::<VerbsContext>();
    vctx.context.device = dev;
    vctx.context.cmd_fd = -1;
    vctx.context.async_fd = events.raw();
    vctx.context.num_comp_vectors = 1;
    vctx.context.abi_compat = abi::VERBS_ABI_IS_EXTENDED;
    install(&mut vctx);
    let ctx = Box::new(Context {
        vctx,
        magic: CONTEXT_MAGIC,
        dev: d,
        events,
        dp: ContextQps::default(),
        live: AtomicU64::new(0),
    });
    let ctx = Box::leak(ctx);
    // SAFETY: the mutex is zeroed memory at its final address; init with default attributes.
    unsafe {
        libc::pthread_mutex_init(
            std::ptr::addr_of_mut!(ctx.vctx.context.mutex).cast(),
            std::ptr::null(),
        )
    };
    Ok(ctx.ibv())
}

#[unsafe(no_mangle)]
/// `ibv_close_device`.
///
/// # Safety
/// `ctx` is null or a context of this library not used after this call.
pub unsafe extern "C" fn gdav_ibv_close_device(ctx: *mut sys::ibv_context) -> c_int {
    guard("ibv_close_device", libc::EIO, || {
        // SAFETY: the caller's contract.
        let r = unsafe { Context::from_ibv(ctx) }.map(|c| {
            let live = c.live.load(Ordering::Relaxed);
            if live > 0 {
                abi::trace(format_args!(
                    "ibv_close_device: {live} objects still alive on {}",
                    c.dev.name()
                ));
            }
            crate::vendor::forget(c.key(), Gone::Context);
            let p = std::ptr::from_ref(c).cast_mut();
            // SAFETY: made by Box::leak in `open`; the caller does not use it again.
            drop(unsafe { Box::from_raw(p) });
        });
        ret_code("ibv_close_device", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_query_device`.
///
/// # Safety
/// `ctx` is a context of this library; `attr` is writable.
pub unsafe extern "C" fn gdav_ibv_query_device(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_device_attr,
) -> c_int {
    guard("ibv_query_device", libc::EIO, || {
        // SAFETY: the caller's contract.
        let r = unsafe { Context::from_ibv(ctx) }.and_then(|c| {
            if attr.is_null() {
                return Err(Errno::inval("null attr"));
            }
            // SAFETY: checked non-null; the caller passes a writable struct.
            unsafe { attr.write(device_attr(c.dev)) };
            Ok(())
        });
        ret_code("ibv_query_device", r)
    })
}

/// A ConnectX-6 Dx's (or Thor2's) attributes, with the software NIC's limits.
fn device_attr(d: &Device) -> sys::ibv_device_attr {
    // SAFETY: plain C data.
    let mut a: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
    abi::put_cstr(&mut a.fw_ver, &d.info.fw_ver);
    a.node_guid = d.guid.to_be();
    a.sys_image_guid = d.guid.to_be();
    a.max_mr_size = u64::MAX;
    a.page_size_cap = 0xffff_f000;
    (a.vendor_id, a.vendor_part_id) = d.ids;
    a.max_qp = 1 << 17;
    a.max_qp_wr = (d.info.max_qp_wr as c_int).min(32768);
    a.device_cap_flags = sys::IBV_DEVICE_RC_RNR_NAK_GEN
        | sys::IBV_DEVICE_PORT_ACTIVE_EVENT
        | sys::IBV_DEVICE_SYS_IMAGE_GUID
        | sys::IBV_DEVICE_CHANGE_PHY_PORT;
    a.max_sge = d.info.max_sge as c_int;
    a.max_sge_rd = d.info.max_sge as c_int;
    a.max_cq = 1 << 24;
    a.max_cqe = d.info.max_cqe as c_int;
    a.max_mr = 1 << 24;
    a.max_pd = 1 << 24;
    a.max_qp_rd_atom = d.info.max_rd_atomic as c_int;
    a.max_qp_init_rd_atom = d.info.max_rd_atomic as c_int;
    a.max_res_rd_atom = (d.info.max_rd_atomic as c_int) << 16;
    a.atomic_cap = sys::IBV_ATOMIC_HCA;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 16;
    a.phys_port_cnt = d.info.ports.len() as u8;
    a
}

/// `verbs_context.query_device_ex`.
pub(crate) unsafe extern "C" fn verbs_query_device_ex(
    ctx: *mut sys::ibv_context,
    _input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    guard("ibv_query_device_ex", libc::EIO, || {
        // SAFETY: verbs.h calls this with the program's context.
        let r = unsafe { Context::from_ibv(ctx) }.and_then(|c| {
            let base = size_of::<sys::ibv_device_attr>();
            if attr.is_null() || attr_size < base {
                return Err(Errno::inval("attr smaller than struct ibv_device_attr"));
            }
            // SAFETY: plain C data.
            let mut ex: sys::ibv_device_attr_ex = unsafe { std::mem::zeroed() };
            ex.orig_attr = device_attr(c.dev);
            ex.phys_port_cnt_ex = u32::from(ex.orig_attr.phys_port_cnt);
            let n = attr_size.min(size_of::<sys::ibv_device_attr_ex>());
            // SAFETY: the caller's struct has `attr_size` writable bytes; we copy at most that.
            unsafe {
                std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
                std::ptr::copy_nonoverlapping(
                    std::ptr::from_ref(&ex).cast::<u8>(),
                    attr.cast::<u8>(),
                    n,
                );
            }
            Ok(())
        });
        ret_code("ibv_query_device_ex", r)
    })
}

/// The port attributes of `c`'s port 1.
fn port_attr(c: &Context) -> sys::ibv_port_attr {
    let p = c.port();
    // SAFETY: plain C data.
    let mut a: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
    let up = c.dev.nic.port_up();
    a.state = if up {
        sys::ibv_port_state::IBV_PORT_ACTIVE
    } else {
        sys::ibv_port_state::IBV_PORT_DOWN
    };
    a.max_mtu = p.max_mtu as sys::ibv_mtu;
    a.active_mtu = p.active_mtu as sys::ibv_mtu;
    a.gid_tbl_len = GID_TABLE_LEN;
    // IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS (bits 16 and 26), as a RoCE port reports.
    a.port_cap_flags = (1 << 16) | (1 << 26);
    a.max_msg_sz = 1 << 30;
    a.pkey_tbl_len = 1;
    a.lid = p.lid;
    a.max_vl_num = 4;
    a.active_width = 2; // 4x
    a.active_speed = 32; // 25 Gb/s per lane: 100 Gb/s
    a.phys_state = if up { 5 } else { 3 }; // LinkUp, Disabled
    a.link_layer = sys::IBV_LINK_LAYER_ETHERNET as u8;
    a
}

/// Size of rdma-core's `struct _compat_ibv_port_attr` (through `flags`), what the exported
/// `ibv_query_port` writes.
const COMPAT_PORT_ATTR_BYTES: usize = std::mem::offset_of!(sys::ibv_port_attr, flags) + 1;

fn query_port(ctx: *mut sys::ibv_context, port: u8, out: *mut u8, len: usize) -> Result<(), Errno> {
    // SAFETY: the caller (the exported function's contract) passes a context of this library.
    let c = unsafe { Context::from_ibv(ctx) }?;
    if out.is_null() {
        return Err(Errno::inval("null port_attr"));
    }
    if port == 0 || usize::from(port) > c.dev.info.ports.len() {
        return Err(Errno::inval(format!(
            "port {port} does not exist (the device has 1)"
        )));
    }
    let a = port_attr(c);
    let n = len.min(size_of::<sys::ibv_port_attr>());
    // SAFETY: the caller's struct has `len` writable bytes; at most that many are written.
    unsafe {
        std::ptr::write_bytes(out, 0, len);
        std::ptr::copy_nonoverlapping(std::ptr::from_ref(&a).cast::<u8>(), out, n);
    }
    Ok(())
}

#[unsafe(no_mangle)]
/// `ibv_query_port` (the exported compat form: writes `struct _compat_ibv_port_attr`).
///
/// # Safety
/// `ctx` is a context of this library; `attr` has room for the compat struct.
pub unsafe extern "C" fn gdav_ibv_query_port(
    ctx: *mut sys::ibv_context,
    port: u8,
    attr: *mut c_void,
) -> c_int {
    guard("ibv_query_port", libc::EIO, || {
        ret_code(
            "ibv_query_port",
            query_port(ctx, port, attr.cast(), COMPAT_PORT_ATTR_BYTES),
        )
    })
}

/// `verbs_context.query_port`.
pub(crate) unsafe extern "C" fn verbs_query_port(
    ctx: *mut sys::ibv_context,
    port: u8,
    attr: *mut sys::ibv_port_attr,
    len: usize,
) -> c_int {
    guard("ibv_query_port", libc::EIO, || {
        ret_code("ibv_query_port", query_port(ctx, port, attr.cast(), len))
    })
}

/// The GID entry at `index` of port `port`, or `None` when that index is unpopulated.
fn gid_entry(c: &Context, port: u32, index: u32) -> Result<Option<sys::ibv_gid_entry>, Errno> {
    if port == 0 || port as usize > c.dev.info.ports.len() {
        return Err(Errno::inval(format!(
            "port {port} does not exist (the device has 1)"
        )));
    }
    if index >= GID_TABLE_LEN as u32 {
        return Err(Errno::inval(format!(
            "GID index {index} is outside the table ({GID_TABLE_LEN} entries)"
        )));
    }
    Ok(c.port().gids.iter().find(|g| g.index == index).map(|g| {
        // SAFETY: plain C data.
        let mut e: sys::ibv_gid_entry = unsafe { std::mem::zeroed() };
        e.gid.raw = g.gid.0;
        e.gid_index = index;
        e.port_num = port;
        e.gid_type = match g.kind {
            GidType::Ib => sys::IBV_GID_TYPE_IB,
            GidType::RoceV1 => sys::IBV_GID_TYPE_ROCE_V1,
            GidType::RoceV2 => sys::IBV_GID_TYPE_ROCE_V2,
        };
        e
    }))
}

#[unsafe(no_mangle)]
/// `ibv_query_gid`: an unpopulated index reads as the zero GID.
///
/// # Safety
/// `ctx` is a context of this library; `gid` is writable.
pub unsafe extern "C" fn gdav_ibv_query_gid(
    ctx: *mut sys::ibv_context,
    port: u8,
    index: c_int,
    gid: *mut sys::ibv_gid,
) -> c_int {
    guard("ibv_query_gid", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's contract.
            let c = unsafe { Context::from_ibv(ctx) }?;
            if gid.is_null() || index < 0 {
                return Err(Errno::inval("null gid or negative index"));
            }
            let e = gid_entry(c, u32::from(port), index as u32)?;
            // SAFETY: checked non-null; the caller's union is writable.
            unsafe { (*gid).raw = e.map_or([0; 16], |e| e.gid.raw) };
            Ok(())
        })();
        ret_code("ibv_query_gid", r)
    })
}

#[unsafe(no_mangle)]
/// `_ibv_query_gid_ex` (behind `ibv_query_gid_ex`): `ENODATA` for an unpopulated index.
///
/// # Safety
/// `ctx` is a context of this library; `entry` has `entry_size` writable bytes.
pub unsafe extern "C" fn gdav__ibv_query_gid_ex(
    ctx: *mut sys::ibv_context,
    port: u32,
    index: u32,
    entry: *mut sys::ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard("ibv_query_gid_ex", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's contract.
            let c = unsafe { Context::from_ibv(ctx) }?;
            if entry.is_null() || flags != 0 || entry_size < size_of::<sys::ibv_gid_entry>() {
                return Err(Errno::inval(
                    "null entry, unknown flags or entry_size too small",
                ));
            }
            match gid_entry(c, port, index)? {
                // SAFETY: checked non-null and large enough.
                Some(e) => unsafe { entry.write(e) },
                None => return Err(Errno::new(libc::ENODATA, format!("GID {index} is empty"))),
            }
            Ok(())
        })();
        ret_code("ibv_query_gid_ex", r)
    })
}

#[unsafe(no_mangle)]
/// `_ibv_query_gid_table` (behind `ibv_query_gid_table`): the populated entries.
///
/// # Safety
/// `ctx` is a context of this library; `entries` has `max` entries of `entry_size` bytes.
pub unsafe extern "C" fn gdav__ibv_query_gid_table(
    ctx: *mut sys::ibv_context,
    entries: *mut sys::ibv_gid_entry,
    max: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard("ibv_query_gid_table", -(libc::EIO as isize), || {
        // SAFETY: the caller's contract.
        let c = match unsafe { Context::from_ibv(ctx) } {
            Ok(c) => c,
            Err(_) => return -(libc::EINVAL as isize),
        };
        if flags != 0
            || entry_size < size_of::<sys::ibv_gid_entry>()
            || (entries.is_null() && max > 0)
        {
            return -(libc::EINVAL as isize);
        }
        let mut n = 0usize;
        for g in &c.port().gids {
            if n == max {
                return -(libc::EINVAL as isize);
            }
            if let Ok(Some(e)) = gid_entry(c, 1, g.index) {
                // SAFETY: `n < max` entries of `entry_size` bytes each.
                unsafe {
                    entries
                        .cast::<u8>()
                        .add(n * entry_size)
                        .cast::<sys::ibv_gid_entry>()
                        .write_unaligned(e)
                };
                n += 1;
            }
        }
        n as isize
    })
}

#[unsafe(no_mangle)]
/// `ibv_query_gid_type` (rdma-core private ABI, used by `ibv_devinfo`): 0 = IB/RoCE v1,
/// 1 = RoCE v2, as sysfs spells it.
///
/// # Safety
/// `ctx` is a context of this library; `kind` is writable.
pub unsafe extern "C" fn gdav_ibv_query_gid_type(
    ctx: *mut sys::ibv_context,
    port: u8,
    index: u32,
    kind: *mut c_int,
) -> c_int {
    guard("ibv_query_gid_type", -1, || {
        let r = (|| {
            // SAFETY: the caller's contract.
            let c = unsafe { Context::from_ibv(ctx) }?;
            if kind.is_null() {
                return Err(Errno::inval("null type"));
            }
            let e = gid_entry(c, u32::from(port), index)?
                .ok_or_else(|| Errno::new(libc::ENODATA, format!("GID {index} is empty")))?;
            // SAFETY: checked non-null.
            unsafe { *kind = c_int::from(e.gid_type == sys::IBV_GID_TYPE_ROCE_V2) };
            Ok(())
        })();
        if ret_code("ibv_query_gid_type", r) == 0 {
            0
        } else {
            -1
        }
    })
}

#[unsafe(no_mangle)]
/// `ibv_query_pkey`: the one default P_Key 0xffff.
///
/// # Safety
/// `ctx` is a context of this library; `pkey` is writable.
pub unsafe extern "C" fn gdav_ibv_query_pkey(
    ctx: *mut sys::ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard("ibv_query_pkey", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's contract.
            let c = unsafe { Context::from_ibv(ctx) }?;
            if pkey.is_null()
                || port == 0
                || usize::from(port) > c.dev.info.ports.len()
                || index != 0
            {
                return Err(Errno::inval(format!("port {port}, pkey index {index}")));
            }
            // SAFETY: checked non-null.
            unsafe { *pkey = 0xffff_u16.to_be() };
            Ok(())
        })();
        ret_code("ibv_query_pkey", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_get_pkey_index`: index 0 for the default P_Key.
///
/// # Safety
/// `ctx` is a context of this library.
pub unsafe extern "C" fn gdav_ibv_get_pkey_index(
    ctx: *mut sys::ibv_context,
    port: u8,
    pkey: u16,
) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { Context::from_ibv(ctx) } {
        Ok(_) if port == 1 && u16::from_be(pkey) & 0x7fff == 0x7fff => 0,
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

#[unsafe(no_mangle)]
/// `ibv_read_sysfs_file`: the software devices have no sysfs directory; `board_id` is answered
/// (`ibv_devinfo` prints it), anything else is `ENOENT`.
///
/// # Safety
/// `dir` and `file` are C strings; `buf` has `size` writable bytes.
pub unsafe extern "C" fn gdav_ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: C strings from the caller.
    let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let ours = dir
        .to_str()
        .ok()
        .and_then(|d| d.strip_prefix("/sys/class/infiniband/"))
        .is_some_and(|n| n.starts_with("gda_"));
    if ours && file.to_bytes() == b"board_id" {
        let v = b"GDA-SIM-0001";
        let n = v.len().min(size - 1);
        // SAFETY: `n + 1 <= size` bytes written.
        unsafe {
            std::ptr::copy_nonoverlapping(v.as_ptr().cast::<c_char>(), buf, n);
            *buf.add(n) = 0;
        }
        return n as c_int;
    }
    set_errno(libc::ENOENT);
    -1
}

#[unsafe(no_mangle)]
/// `ibv_fork_init`: nothing to do (no pinned pages to protect).
pub extern "C" fn gdav_ibv_fork_init() -> c_int {
    0
}

#[unsafe(no_mangle)]
/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED`.
pub extern "C" fn gdav_ibv_is_fork_initialized() -> c_int {
    2
}

#[unsafe(no_mangle)]
/// `ibv_get_async_event`: waits for the next event on the context's async fd — blocking, as
/// rdma-core documents, unless the program set O_NONBLOCK on it (then `EAGAIN`). The software
/// NIC raises `IBV_EVENT_CQ_ERR` when a CQ overruns, and port events ([`AsyncEvents`]).
///
/// # Safety
/// `ctx` is a context of this library; `ev` is writable.
pub unsafe extern "C" fn gdav_ibv_get_async_event(
    ctx: *mut sys::ibv_context,
    ev: *mut sys::ibv_async_event,
) -> c_int {
    // SAFETY: the caller's contract.
    let c = match unsafe { Context::from_ibv(ctx) } {
        Ok(c) if !ev.is_null() => c,
        Ok(_) => {
            ret_code("ibv_get_async_event", Err(Errno::inval("null event")));
            return -1;
        }
        Err(e) => {
            ret_code("ibv_get_async_event", Err(e));
            return -1;
        }
    };
    match c.events.take() {
        Ok(QueuedEvent::CqErr(cq)) => {
            // SAFETY: `ev` is writable (the caller's contract, null refused above).
            unsafe {
                (*ev).element.cq = cq as *mut sys::ibv_cq;
                (*ev).event_type = sys::IBV_EVENT_CQ_ERR;
            }
            0
        }
        Ok(QueuedEvent::Port { up }) => {
            // SAFETY: as above.
            unsafe {
                (*ev).element.port_num = 1;
                (*ev).event_type = if up {
                    sys::IBV_EVENT_PORT_ACTIVE
                } else {
                    sys::IBV_EVENT_PORT_ERR
                };
            }
            0
        }
        Err(e) => {
            // EAGAIN (the program made the fd non-blocking) is not a refusal to trace.
            set_errno(e);
            -1
        }
    }
}

#[unsafe(no_mangle)]
/// `ibv_ack_async_event`: nothing to release (an event's CQ is withdrawn from the queue when
/// it is destroyed; one already taken is the program's to ack before it destroys the CQ, as
/// rdma-core requires).
pub extern "C" fn gdav_ibv_ack_async_event(_ev: *mut sys::ibv_async_event) {}

macro_rules! names {
    ($fn:ident, $ty:ty, [$($v:expr => $s:expr),* $(,)?]) => {
        #[unsafe(no_mangle)]
        #[allow(missing_docs)]
        pub extern "C" fn $fn(v: $ty) -> *const c_char {
            let s: &'static CStr = match v as i64 { $(x if x == $v as i64 => $s,)* _ => c"unknown" };
            s.as_ptr()
        }
    };
}

names!(gdav_ibv_node_type_str, c_int, [1 => c"InfiniBand channel adapter", 2 => c"InfiniBand switch", 3 => c"InfiniBand router", 4 => c"iWARP NIC", 5 => c"usNIC", 6 => c"usNIC UDP", 7 => c"unspecified"]);
names!(gdav_ibv_port_state_str, c_int, [0 => c"PORT_NOP", 1 => c"PORT_DOWN", 2 => c"PORT_INIT", 3 => c"PORT_ARMED", 4 => c"PORT_ACTIVE", 5 => c"PORT_ACTIVE_DEFER"]);
names!(gdav_ibv_event_type_str, c_int, [0 => c"CQ error", 1 => c"local work queue catastrophic error", 2 => c"invalid request local work queue error", 3 => c"local access violation work queue error", 4 => c"communication established", 5 => c"send queue drained", 6 => c"path migrated", 7 => c"path migration request error", 8 => c"local catastrophic error", 9 => c"port active", 10 => c"port error", 11 => c"LID change", 12 => c"P_Key change", 13 => c"SM change", 14 => c"SRQ catastrophic error", 15 => c"SRQ limit reached", 16 => c"last WQE reached", 17 => c"client reregistration", 18 => c"GID table change", 19 => c"WQ fatal"]);
names!(gdav_ibv_wc_status_str, c_int, [0 => c"success", 1 => c"local length error", 2 => c"local QP operation error", 3 => c"local EE context operation error", 4 => c"local protection error", 5 => c"Work Request Flushed Error", 6 => c"memory management operation error", 7 => c"bad response error", 8 => c"local access error", 9 => c"remote invalid request error", 10 => c"remote access error", 11 => c"remote operation error", 12 => c"transport retry counter exceeded", 13 => c"RNR retry counter exceeded", 14 => c"local RDD violation error", 15 => c"remote invalid RD request", 16 => c"aborted error", 17 => c"invalid EE context number", 18 => c"invalid EE context state", 19 => c"fatal error", 20 => c"response timeout error", 21 => c"general error", 22 => c"TM error", 23 => c"TM rendezvous error"]);
names!(gdav_ibv_wr_opcode_str, c_int, [0 => c"RDMA_WRITE", 1 => c"RDMA_WRITE_WITH_IMM", 2 => c"SEND", 3 => c"SEND_WITH_IMM", 4 => c"RDMA_READ", 5 => c"ATOMIC_CMP_AND_SWP", 6 => c"ATOMIC_FETCH_AND_ADD", 7 => c"LOCAL_INV", 8 => c"BIND_MW", 9 => c"SEND_WITH_INV", 10 => c"TSO", 11 => c"DRIVER1", 14 => c"FLUSH", 15 => c"ATOMIC_WRITE"]);

#[unsafe(no_mangle)]
/// `ibv_rate_to_mult` (2.5 Gb/s multiples).
pub extern "C" fn gdav_ibv_rate_to_mult(rate: c_int) -> c_int {
    match rate {
        2 => 1,
        5 => 2,
        3 => 4,
        6 => 8,
        7 => 12,
        8 => 16,
        9 => 24,
        4 => 32,
        10 => 48,
        _ => -1,
    }
}

#[unsafe(no_mangle)]
/// `mult_to_ibv_rate`.
pub extern "C" fn gdav_mult_to_ibv_rate(mult: c_int) -> c_int {
    match mult {
        1 => 2,
        2 => 5,
        4 => 3,
        8 => 6,
        12 => 7,
        16 => 8,
        24 => 9,
        32 => 4,
        48 => 10,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compat_port_attr_is_48_bytes() {
        assert_eq!(COMPAT_PORT_ATTR_BYTES, 48);
    }

    #[test]
    fn wc_status_names() {
        let s = |v| {
            // SAFETY: the names are static C strings.
            unsafe { CStr::from_ptr(gdav_ibv_wc_status_str(v)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(s(0), "success");
        assert_eq!(s(5), "Work Request Flushed Error");
        assert_eq!(s(99), "unknown");
    }
}
