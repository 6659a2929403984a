//! Completion queues: `ibv_create_cq`, `ibv_create_cq_ex` (the `ibv_cq_ex` poll API),
//! `ops.poll_cq`, `ops.req_notify_cq` and `ibv_ack_cq_events`, `ibv_destroy_cq`.
//!
//! A CQ is the software NIC's CQ: the device model writes real CQEs (mlx5 64-byte CQEs with
//! the owner bit, bnxt 32-byte CQEs with the phase bit) into its ring and `poll_cq` reads them
//! with the provider's own device functions — the same ring `mlx5dv_init_obj` hands out.
//!
//! The software NIC writes CQEs without interrupts, so one event thread per process watches
//! the CQs `ibv_req_notify_cq` armed and raises their channel's event ([`Channel::raise`]) when
//! a CQE waits at the consumer index.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use gda_hal::{CqHandle, WcStatus, WorkCompletion};
use gda_sim::CqMode;
use ibverbs_sys as sys;

use crate::abi::{Errno, Handle, guard, handle, ret_code, ret_ptr};
use crate::channel::Channel;
use crate::config::Kind;
use crate::device::{Context, QueuedEvent};
use crate::pd::Pd;
use crate::vendor::{ForVendor, Gone, VendorQueue};

const CQ_MAGIC: u64 = 0x6764_6176_5f63_7100; // "gdav_cq"

/// `struct ibv_wc` (ibverbs-sys keeps its first fields private, so it is laid out here; the
/// size is pinned below).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Wc {
    /// `wr_id`.
    wr_id: u64,
    /// `enum ibv_wc_status`.
    status: u32,
    /// `enum ibv_wc_opcode`.
    opcode: u32,
    /// Vendor syndrome.
    vendor_err: u32,
    /// Bytes transferred.
    byte_len: u32,
    /// Immediate data, network byte order.
    imm_data: u32,
    /// Local QP number.
    qp_num: u32,
    /// Remote QP number.
    src_qp: u32,
    /// `IBV_WC_*` flags.
    wc_flags: u32,
    /// P_Key index.
    pkey_index: u16,
    /// Source LID.
    slid: u16,
    /// Service level.
    sl: u8,
    /// DLID path bits.
    dlid_path_bits: u8,
}
const _: () = assert!(size_of::<Wc>() == size_of::<sys::ibv_wc>());

/// `IBV_WC_WITH_IMM`.
const WC_WITH_IMM: u32 = 1 << 1;

/// Poll state: the consumer index, and the completion the `ibv_cq_ex` API is looking at.
#[derive(Default)]
struct PollState {
    ci: u32,
    cur: Wc,
    in_poll: bool,
}

/// A completion queue: `ibv_cq_ex` first (`ibv_cq` is its prefix).
#[repr(C)]
pub(crate) struct Cq {
    /// What programs see.
    ex: sys::ibv_cq_ex,
    magic: u64,
    /// Its context.
    pub(crate) ctx: &'static Context,
    /// The software NIC's CQ.
    pub(crate) sim: gda_sim::Cq,
    /// The ring, as the device functions see it.
    pub(crate) handle: CqHandle,
    /// The device family (which device functions read the ring).
    pub(crate) kind: Kind,
    /// Consumer index and the `_ex` API's current completion.
    poll: Mutex<PollState>,
    /// QPs using it.
    pub(crate) users: AtomicU32,
    /// Its completion channel (or null).
    channel: *const Channel,
    /// The parent domain whose allocator holds the ring (busy while the CQ lives).
    pd: Option<&'static Pd>,
    /// Whether its overrun may still raise `IBV_EVENT_CQ_ERR` (cleared, under the event
    /// queue's lock, when it is destroyed).
    raises: Arc<AtomicBool>,
}

// SAFETY: the raw pointers are to objects that outlive the CQ (the channel refuses destruction
// while a CQ uses it); all mutable state is behind atomics or the mutex.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

// SAFETY: repr(C) with `ibv_cq_ex` first; `magic` follows it.
unsafe impl Handle for Cq {
    const TAG: u64 = CQ_MAGIC;
    const WHAT: &'static str = "CQ";
    fn tag(&self) -> u64 {
        self.magic
    }
}

impl Cq {
    /// The CQ behind `cq` (an `ibv_cq` or `ibv_cq_ex` pointer).
    ///
    /// # Safety
    /// `cq` is null or points to a live `ibv_cq`.
    pub(crate) unsafe fn from_ibv<'a>(cq: *mut sys::ibv_cq) -> Result<&'a Cq, Errno> {
        // SAFETY: the caller's contract (`ibv_cq` is the prefix of `ibv_cq_ex`).
        unsafe { handle(cq.cast()) }
    }

    /// The `ibv_cq` pointer programs hold.
    fn ibv(&self) -> *mut sys::ibv_cq {
        std::ptr::from_ref(&self.ex).cast_mut().cast()
    }

    /// Whether a completion is waiting at the consumer index (for the event thread).
    fn has_completion(&self) -> bool {
        let mut ci = self.poll.lock().unwrap_or_else(|e| e.into_inner()).ci;
        self.kind
            .with(Take {
                cq: self,
                ci: &mut ci,
                consume: false,
            })
            .is_some()
    }

    /// Takes the next completion, if any, as an `ibv_wc`.
    fn next(&self, st: &mut PollState) -> Option<Wc> {
        let wc = self.kind.with(Take {
            cq: self,
            ci: &mut st.ci,
            consume: true,
        })?;
        Some(self.to_ibv(&wc))
    }

    fn to_ibv(&self, wc: &WorkCompletion) -> Wc {
        let retired = self.ctx.dp.retire(wc);
        let (wr_id, opcode, byte_len, src_qp) = match &retired {
            Some(r) => (
                r.wr_id,
                r.opcode.filter(|_| !wc.is_recv).unwrap_or(wc.opcode),
                r.byte_len.filter(|_| !wc.is_recv).unwrap_or(wc.byte_len),
                r.src_qp,
            ),
            None => (0, wc.opcode, wc.byte_len, 0),
        };
        let mut out = Wc {
            wr_id,
            status: wc.status as u32,
            opcode: opcode as u32,
            vendor_err: u32::from(wc.vendor_err),
            byte_len,
            qp_num: wc.qpn,
            src_qp,
            ..Wc::default()
        };
        if let Some(imm) = wc.imm.filter(|_| wc.is_recv) {
            out.imm_data = imm.to_be();
            out.wc_flags |= WC_WITH_IMM;
        }
        if wc.status != WcStatus::Success {
            // Verbs leaves the other fields undefined on error; keep them quiet.
            out.byte_len = 0;
        }
        out
    }
}

/// Reads the CQE at `*ci` of `cq`'s ring with its family's device functions; `consume`: and
/// consumes it (advancing `*ci`).
struct Take<'a> {
    cq: &'a Cq,
    ci: &'a mut u32,
    consume: bool,
}

impl ForVendor for Take<'_> {
    type Out = Option<WorkCompletion>;
    fn run<V: VendorQueue>(self) -> Option<WorkCompletion> {
        let h = &self.cq.handle;
        // SAFETY: the handle addresses the sim CQ's ring (of the CQ's family, `V`), alive as
        // long as the CQ.
        let wc = unsafe { V::poll_cq(h, *self.ci) }?;
        if self.consume {
            *self.ci = self.ci.wrapping_add(1);
            // SAFETY: as above.
            unsafe { V::update_cq_ci(h, *self.ci) };
        }
        Some(wc)
    }
}

/// Most CQEs a CQ may ask for (the device's `max_cqe`).
pub(crate) const MAX_CQE: u32 = 1 << 22;

/// Creates a CQ: of at least `cqe` entries in this library's memory or `pd`'s parent-domain
/// allocator, or (`direct`) of exactly that many entries in the memory given (bnxt direct
/// verbs: the program sized the ring).
pub(crate) fn create(
    ctx: *mut sys::ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
    pd: Option<&'static Pd>,
    direct: Option<gda_hal::control::QueueMemory>,
) -> Result<&'static Cq, Errno> {
    // SAFETY: the caller's context (checked).
    let c: &'static Context = unsafe { Context::from_ibv(ctx) }?;
    if cqe < 1 || cqe as u32 > MAX_CQE {
        return Err(Errno::inval(format!("cqe {cqe} outside 1..={MAX_CQE}")));
    }
    if comp_vector < 0 || comp_vector >= c.comp_vectors() {
        return Err(Errno::inval(format!(
            "comp_vector {comp_vector} does not exist"
        )));
    }
    let ch = if channel.is_null() {
        std::ptr::null()
    } else {
        // SAFETY: the caller's channel (checked).
        let ch = unsafe { Channel::from_ibv(channel) }?;
        if !std::ptr::eq(ch.context(), c.ibv()) {
            return Err(Errno::inval("completion channel of another context"));
        }
        ch.users.fetch_add(1, Ordering::AcqRel);
        std::ptr::from_ref(ch)
    };
    let (entries, memory) = match direct {
        // The program sized the ring (its caller checked `cqe` is a power of two).
        Some(m) => (cqe as u32, m),
        // As mlx5: a power of two above the request (one entry stays empty).
        None => (
            (cqe as u32 + 1).next_power_of_two().max(2),
            pd.map_or(gda_hal::control::QueueMemory::Provider, |p| {
                p.queue_memory()
            }),
        ),
    };
    let sim = match c.dev.nic.create_cq_in(entries, CqMode::Normal, &memory) {
        Ok(s) => s,
        Err(e) => {
            if !ch.is_null() {
                // SAFETY: taken above.
                unsafe { &*ch }.users.fetch_sub(1, Ordering::AcqRel);
            }
            return Err(Errno::new(libc::ENOMEM, format!("CQ of {entries}: {e}")));
        }
    };
    let handle = sim.handle();
    // SAFETY: ibv_cq_ex is C data; zero is its "nothing set" value.
    let mut ex: sys::ibv_cq_ex = unsafe { std::mem::zeroed() };
    ex.context = c.ibv();
    ex.channel = channel;
    ex.cq_context = cq_context;
    ex.handle = handle.cqn;
    ex.cqe = (entries - 1) as c_int;
    let cq = Box::leak(Box::new(Cq {
        ex,
        magic: CQ_MAGIC,
        ctx: c,
        sim,
        handle,
        kind: c.dev.kind(),
        poll: Mutex::new(PollState::default()),
        users: AtomicU32::new(0),
        channel: ch,
        pd,
        raises: Arc::new(AtomicBool::new(true)),
    }));
    // An overrun raises IBV_EVENT_CQ_ERR on the context's async fd (on the engine thread).
    let (events, raises, me) = (c.events.clone(), cq.raises.clone(), cq.ibv() as usize);
    cq.sim
        .on_overrun(move || events.raise(QueuedEvent::CqErr(me), Some(&raises)));
    if let Some(p) = pd {
        p.users.fetch_add(1, Ordering::AcqRel);
    }
    // SAFETY: the mutex and condition variable are zeroed memory at their final address.
    unsafe {
        libc::pthread_mutex_init(std::ptr::addr_of_mut!(cq.ex.mutex).cast(), std::ptr::null());
        libc::pthread_cond_init(std::ptr::addr_of_mut!(cq.ex.cond).cast(), std::ptr::null());
    }
    c.retain();
    Ok(cq)
}

#[unsafe(no_mangle)]
/// `ibv_create_cq`.
pub unsafe extern "C" fn gdav_ibv_create_cq(
    ctx: *mut sys::ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut sys::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut sys::ibv_cq {
    guard("ibv_create_cq", std::ptr::null_mut(), || {
        let r = create(ctx, cqe, cq_context, channel, comp_vector, None, None)
            .map(|c| std::ptr::from_ref(c).cast_mut().cast());
        ret_ptr("ibv_create_cq", r)
    })
}

/// `IBV_WC_EX_WITH_*` bits the `_ex` API can read here: byte_len, imm, qp_num, src_qp,
/// slid, sl, dlid_path_bits.
const WC_EX_SUPPORTED: u64 =
    (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6);

/// `verbs_context.create_cq_ex`.
pub(crate) unsafe extern "C" fn create_cq_ex(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_cq_init_attr_ex,
) -> *mut sys::ibv_cq_ex {
    guard("ibv_create_cq_ex", std::ptr::null_mut(), || {
        let r = (|| {
            if attr.is_null() {
                return Err(Errno::inval("null attr"));
            }
            // SAFETY: checked non-null; the caller's struct.
            let a = unsafe { &*attr };
            if a.wc_flags & !WC_EX_SUPPORTED != 0 {
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    format!(
                        "wc_flags {:#x} not supported",
                        a.wc_flags & !WC_EX_SUPPORTED
                    ),
                ));
            }
            // IBV_CQ_INIT_ATTR_MASK_FLAGS (1) and _PD (2) are understood; other masks refused.
            if a.comp_mask & !0x3 != 0 {
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    format!("comp_mask {:#x}", a.comp_mask),
                ));
            }
            let pd = if a.comp_mask & 0x2 != 0 {
                // SAFETY: the caller's parent domain (checked).
                let p: &'static Pd = unsafe { Pd::from_ibv(a.parent_domain) }?;
                if !p.is_parent_domain() {
                    return Err(Errno::inval("parent_domain is a PD, not a parent domain"));
                }
                if !std::ptr::eq(p.ctx.ibv(), ctx) {
                    return Err(Errno::inval("parent_domain belongs to another context"));
                }
                Some(p)
            } else {
                None
            };
            let cq = create(
                ctx,
                a.cqe as c_int,
                a.cq_context,
                a.channel,
                a.comp_vector as c_int,
                pd,
                None,
            )?;
            // SAFETY: the CQ was just made and is not shared yet.
            let ex = unsafe { &mut *std::ptr::addr_of!(cq.ex).cast_mut() };
            ex.start_poll = Some(ex_start_poll);
            ex.next_poll = Some(ex_next_poll);
            ex.end_poll = Some(ex_end_poll);
            ex.read_opcode = Some(ex_read_opcode);
            ex.read_vendor_err = Some(ex_read_vendor_err);
            ex.read_byte_len = Some(ex_read_byte_len);
            ex.read_imm_data = Some(ex_read_imm_data);
            ex.read_qp_num = Some(ex_read_qp_num);
            ex.read_src_qp = Some(ex_read_src_qp);
            ex.read_wc_flags = Some(ex_read_wc_flags);
            ex.read_slid = Some(ex_read_slid);
            ex.read_sl = Some(ex_read_sl);
            ex.read_dlid_path_bits = Some(ex_read_dlid_path_bits);
            Ok(std::ptr::addr_of!(cq.ex).cast_mut())
        })();
        ret_ptr("ibv_create_cq_ex", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_destroy_cq`: `EBUSY` while a QP uses it.
pub unsafe extern "C" fn gdav_ibv_destroy_cq(cq: *mut sys::ibv_cq) -> c_int {
    guard("ibv_destroy_cq", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's CQ (checked).
            let c = unsafe { Cq::from_ibv(cq) }?;
            let users = c.users.load(Ordering::Acquire);
            if users > 0 {
                return Err(Errno::new(
                    libc::EBUSY,
                    format!("CQ {} is used by {users} QPs", c.handle.cqn),
                ));
            }
            disarm(c);
            c.ctx.events.forget_cq(c.ibv() as usize, &c.raises);
            if let Some(ch) = c.channel_ref() {
                ch.forget(c.ibv());
                ch.users.fetch_sub(1, Ordering::AcqRel);
            }
            if let Some(p) = c.pd {
                p.users.fetch_sub(1, Ordering::AcqRel);
            }
            let ctx = c.ctx;
            crate::vendor::forget(ctx.key(), Gone::Cq(c.handle.cqn));
            // SAFETY: made by Box::leak in `create`; the magic is cleared first so a stale
            // pointer is refused rather than freed twice (best effort).
            unsafe {
                (*cq.cast::<Cq>()).magic = 0;
                drop(Box::from_raw(cq.cast::<Cq>()));
            }
            ctx.release();
            Ok(())
        })();
        ret_code("ibv_destroy_cq", r)
    })
}

impl Cq {
    /// The completion channel, if any.
    fn channel_ref(&self) -> Option<&Channel> {
        // SAFETY: the channel outlives the CQ (its destruction is refused while in use).
        (!self.channel.is_null()).then(|| unsafe { &*self.channel })
    }
}

#[unsafe(no_mangle)]
/// `ibv_resize_cq`: not supported by the software NIC.
pub unsafe extern "C" fn gdav_ibv_resize_cq(cq: *mut sys::ibv_cq, _cqe: c_int) -> c_int {
    // SAFETY: the caller's CQ (checked).
    let r = unsafe { Cq::from_ibv(cq) }
        .and_then(|_| Err(Errno::new(libc::EOPNOTSUPP, "resizing a CQ")));
    ret_code("ibv_resize_cq", r)
}

/// `ibv_context_ops.poll_cq`.
pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut sys::ibv_cq,
    n: c_int,
    wc: *mut sys::ibv_wc,
) -> c_int {
    guard("ibv_poll_cq", -1, || {
        // SAFETY: verbs.h passes the program's CQ.
        let Ok(c) = (unsafe { Cq::from_ibv(cq) }) else {
            return -1;
        };
        if n < 0 || (n > 0 && wc.is_null()) {
            return -1;
        }
        let mut st = c.poll.lock().unwrap_or_else(|e| e.into_inner());
        let mut got = 0;
        while got < n {
            let Some(w) = c.next(&mut st) else { break };
            // SAFETY: the caller's array has `n` entries; `got < n`.
            unsafe { wc.cast::<Wc>().add(got as usize).write(w) };
            got += 1;
        }
        drop(st);
        if got == 0 {
            idle_poll(c.ctx.dev.nic.fabric());
        }
        got
    })
}

/// `ibv_context_ops.req_notify_cq`.
pub(crate) unsafe extern "C" fn req_notify_cq(
    cq: *mut sys::ibv_cq,
    _solicited_only: c_int,
) -> c_int {
    guard("ibv_req_notify_cq", libc::EIO, || {
        // SAFETY: verbs.h passes the program's CQ.
        let r = unsafe { Cq::from_ibv(cq) }.and_then(|c| {
            if c.channel.is_null() {
                return Err(Errno::inval("CQ has no completion channel"));
            }
            arm(c);
            Ok(())
        });
        ret_code("ibv_req_notify_cq", r)
    })
}

/// An empty poll runs the software NIC's engine in the polling thread (its completions may be
/// waiting for a response another process wrote, or for a request to execute), and, when that
/// found nothing, offers the CPU to the engine thread: a program that spins on `ibv_poll_cq` on
/// a machine with fewer cores than spinning threads would otherwise hold the core its own
/// completions are waiting for, for a whole scheduler time slice.
fn idle_poll(fabric: &gda_sim::Fabric) {
    if !fabric.progress() {
        std::thread::yield_now();
    }
}

/// The CQ behind an `ibv_cq_ex` (the `_ex` callbacks get only that).
fn ex_cq<'a>(cq: *mut sys::ibv_cq_ex) -> Option<&'a Cq> {
    // SAFETY: the callbacks are only installed on our CQs.
    unsafe { Cq::from_ibv(cq.cast()) }.ok()
}

unsafe extern "C" fn ex_start_poll(
    cq: *mut sys::ibv_cq_ex,
    _attr: *mut sys::ibv_poll_cq_attr,
) -> c_int {
    guard("ibv_start_poll", libc::EIO, || {
        let Some(c) = ex_cq(cq) else {
            return libc::EINVAL;
        };
        let mut st = c.poll.lock().unwrap_or_else(|e| e.into_inner());
        if st.in_poll {
            return libc::EINVAL;
        }
        match c.next(&mut st) {
            Some(w) => {
                st.cur = w;
                st.in_poll = true;
                // SAFETY: our CQ; the program reads these fields after start_poll.
                unsafe {
                    (*cq).wr_id = w.wr_id;
                    (*cq).status = w.status;
                }
                0
            }
            None => {
                drop(st);
                idle_poll(c.ctx.dev.nic.fabric());
                libc::ENOENT
            }
        }
    })
}

unsafe extern "C" fn ex_next_poll(cq: *mut sys::ibv_cq_ex) -> c_int {
    guard("ibv_next_poll", libc::EIO, || {
        let Some(c) = ex_cq(cq) else {
            return libc::EINVAL;
        };
        let mut st = c.poll.lock().unwrap_or_else(|e| e.into_inner());
        match c.next(&mut st) {
            Some(w) => {
                st.cur = w;
                // SAFETY: as in start_poll.
                unsafe {
                    (*cq).wr_id = w.wr_id;
                    (*cq).status = w.status;
                }
                0
            }
            None => libc::ENOENT,
        }
    })
}

unsafe extern "C" fn ex_end_poll(cq: *mut sys::ibv_cq_ex) {
    if let Some(c) = ex_cq(cq) {
        c.poll.lock().unwrap_or_else(|e| e.into_inner()).in_poll = false;
    }
}

fn cur(cq: *mut sys::ibv_cq_ex) -> Wc {
    ex_cq(cq).map_or_else(Wc::default, |c| {
        c.poll.lock().unwrap_or_else(|e| e.into_inner()).cur
    })
}

unsafe extern "C" fn ex_read_opcode(cq: *mut sys::ibv_cq_ex) -> sys::ibv_wc_opcode::Type {
    cur(cq).opcode as sys::ibv_wc_opcode::Type
}
unsafe extern "C" fn ex_read_vendor_err(cq: *mut sys::ibv_cq_ex) -> u32 {
    cur(cq).vendor_err
}
unsafe extern "C" fn ex_read_byte_len(cq: *mut sys::ibv_cq_ex) -> u32 {
    cur(cq).byte_len
}
unsafe extern "C" fn ex_read_imm_data(cq: *mut sys::ibv_cq_ex) -> u32 {
    cur(cq).imm_data
}
unsafe extern "C" fn ex_read_qp_num(cq: *mut sys::ibv_cq_ex) -> u32 {
    cur(cq).qp_num
}
unsafe extern "C" fn ex_read_src_qp(cq: *mut sys::ibv_cq_ex) -> u32 {
    cur(cq).src_qp
}
unsafe extern "C" fn ex_read_wc_flags(cq: *mut sys::ibv_cq_ex) -> std::ffi::c_uint {
    cur(cq).wc_flags
}
unsafe extern "C" fn ex_read_slid(cq: *mut sys::ibv_cq_ex) -> u32 {
    u32::from(cur(cq).slid)
}
unsafe extern "C" fn ex_read_sl(cq: *mut sys::ibv_cq_ex) -> u8 {
    cur(cq).sl
}
unsafe extern "C" fn ex_read_dlid_path_bits(cq: *mut sys::ibv_cq_ex) -> u8 {
    cur(cq).dlid_path_bits
}

#[unsafe(no_mangle)]
/// `ibv_ack_cq_events`.
pub unsafe extern "C" fn gdav_ibv_ack_cq_events(cq: *mut sys::ibv_cq, n: c_uint) {
    // SAFETY: the caller's CQ (checked).
    if let Ok(c) = unsafe { Cq::from_ibv(cq) } {
        let p = std::ptr::addr_of!(c.ex.comp_events_completed).cast_mut();
        let _g = c.poll.lock();
        // SAFETY: a counter the program only reads; updated under the CQ's poll lock.
        unsafe { *p = (*p).wrapping_add(n) };
    }
}

/// The armed CQs (`ibv_req_notify_cq` was called and no event has been raised since), which
/// one event thread per process watches: the software NIC writes CQEs without interrupts.
/// When a CQE waits at an armed CQ's consumer index, the CQ is disarmed and its channel gets
/// the event. The thread sleeps while nothing is armed and polls with a short back-off (50 µs
/// to 1 ms) while something is.
struct Watch {
    armed: Mutex<Vec<usize>>,
    wake: Condvar,
}

fn watch() -> &'static Watch {
    static W: OnceLock<Watch> = OnceLock::new();
    W.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("gda-verbs-events".into())
            .spawn(event_thread);
        Watch {
            armed: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }
    })
}

/// Arms `cq`: its channel gets an event for the next completion.
fn arm(cq: &Cq) {
    let w = watch();
    let mut a = w.armed.lock().unwrap_or_else(|e| e.into_inner());
    let p = std::ptr::from_ref(cq) as usize;
    if !a.contains(&p) {
        a.push(p);
    }
    w.wake.notify_one();
}

/// Disarms `cq` (it is being destroyed).
fn disarm(cq: &Cq) {
    let p = std::ptr::from_ref(cq) as usize;
    watch()
        .armed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&x| x != p);
}

fn event_thread() {
    let w = watch();
    let mut nap = Duration::from_micros(50);
    loop {
        let mut a = w.armed.lock().unwrap_or_else(|e| e.into_inner());
        while a.is_empty() {
            a = w.wake.wait(a).unwrap_or_else(|e| e.into_inner());
            nap = Duration::from_micros(50);
        }
        let mut fired = false;
        a.retain(|&p| {
            // SAFETY: armed CQs are alive (destroy disarms under this lock first).
            let cq = unsafe { &*(p as *const Cq) };
            if cq.has_completion() {
                if let Some(ch) = cq.channel_ref() {
                    ch.raise(cq.ibv());
                }
                fired = true;
                false
            } else {
                true
            }
        });
        drop(a);
        nap = if fired {
            Duration::from_micros(50)
        } else {
            (nap * 2).min(Duration::from_millis(1))
        };
        std::thread::sleep(nap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wc_matches_ibverbs_sys() {
        assert_eq!(size_of::<Wc>(), 48);
        assert_eq!(std::mem::offset_of!(Wc, imm_data), 24);
        assert_eq!(std::mem::offset_of!(Wc, wc_flags), 36);
        assert_eq!(std::mem::offset_of!(Wc, sl), 44);
    }
}
