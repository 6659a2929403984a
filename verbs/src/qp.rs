//! RC queue pairs: `ibv_create_qp` (and `create_qp_ex`), `ibv_modify_qp` (the kernel's state
//! table, [`crate::qp_state`]), `ibv_query_qp`, `ibv_destroy_qp`.
//!
//! A QP is the software NIC's QP: its send and receive rings, doorbell record and doorbell
//! page are the ones the device model executes and `mlx5dv_init_obj` hands out. Posting
//! ([`crate::post`]) writes them with the provider's own device functions.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use gda_hal::handle::SqPos;
use gda_hal::{Sge, WcOpcode, WorkCompletion, WqHandle};
use gda_rdma::qp_attr;
use gda_sim::{QpInit, QpState};
use ibverbs_sys as sys;

use crate::abi::{Errno, Handle, guard, handle, ret_code, ret_ptr};
use crate::cq::Cq;
use crate::device::Context;
use crate::dp::{Retire, Retired};
use crate::pd::Pd;
use crate::qp_state::{self, PortView};
use crate::vendor::{ForSq, ForVendor, Gone, SqH, VendorQueue};

const QP_MAGIC: u64 = 0x6764_6176_5f71_7000; // "gdav_qp"

/// One posted send WQE.
pub(crate) struct Rec {
    /// First unit.
    pub(crate) start: u64,
    /// Units.
    pub(crate) units: u32,
    /// `wr_id`.
    pub(crate) wr_id: u64,
    /// Requester opcode for the completion (`None`: a WQE posted directly, not by verbs).
    pub(crate) opcode: Option<WcOpcode>,
    /// Bytes for READ/atomic completions.
    pub(crate) len: u32,
}

/// Send-queue bookkeeping (under the QP's send lock).
pub(crate) struct SendState {
    /// The next position (unit, message, PSN).
    pub(crate) pos: SqPos,
    /// The next unit, unwrapped.
    pub(crate) head: u64,
    /// Posted and not yet completed, oldest first.
    pub(crate) recs: VecDeque<Rec>,
    /// Posts in a row whose doorbell was left to the engine (`crate::post`).
    pub(crate) deferred: u32,
}

/// Receive-queue bookkeeping.
#[derive(Default)]
pub(crate) struct RecvState {
    /// The next receive WQE, unwrapped.
    pub(crate) head: u64,
    /// `wr_id`s of posted receives, oldest first.
    pub(crate) recs: VecDeque<u64>,
}

/// One request of an `ibv_wr_*` batch being built (`crate::wr`).
pub(crate) struct Pending {
    /// The request as `ibv_post_send` would get it.
    pub(crate) wr: sys::ibv_send_wr,
    /// Its gather list.
    pub(crate) sges: Vec<Sge>,
    /// Inline bytes as given (copied at `wr_set_inline_data*`, as the API lets the program
    /// reuse its buffer at once).
    pub(crate) inline: Vec<u8>,
    /// Where the translation gathers them.
    pub(crate) buf: Vec<u8>,
}

/// The `ibv_wr_*` batch between `wr_start` and `wr_complete` (`crate::wr`).
#[derive(Default)]
pub(crate) struct Batch {
    /// `wr_start` was called.
    pub(crate) open: bool,
    /// The requests, in order.
    pub(crate) reqs: Vec<Pending>,
    /// A call out of order (data before an opcode, an unsupported opcode): `wr_complete` fails.
    pub(crate) error: Option<Errno>,
}

/// An RC QP: `ibv_qp_ex` first (`ibv_qp` is its prefix).
#[repr(C)]
pub(crate) struct Qp {
    /// What programs see.
    pub(crate) ex: sys::ibv_qp_ex,
    magic: u64,
    /// Its context.
    pub(crate) ctx: &'static Context,
    /// Its PD.
    pd: &'static Pd,
    /// Its CQs.
    send_cq: &'static Cq,
    /// Its CQs.
    recv_cq: &'static Cq,
    /// The software NIC's QP.
    sim: gda_sim::Qp,
    /// Send ring handle.
    pub(crate) sq: SqH,
    /// Receive ring handle.
    pub(crate) rq: WqHandle,
    /// Units in the send ring.
    pub(crate) sq_units: u32,
    /// Every send WQE signals a completion.
    pub(crate) sig_all: bool,
    /// Limits reported back to the program.
    pub(crate) cap: sys::ibv_qp_cap,
    /// Send bookkeeping.
    pub(crate) send: Mutex<SendState>,
    /// Receive bookkeeping.
    pub(crate) recv: Mutex<RecvState>,
    /// Attributes as last set (what `ibv_query_qp` reports), and the state.
    attr: Mutex<sys::ibv_qp_attr>,
    /// The `ibv_wr_*` batch being built.
    pub(crate) wr: Mutex<Batch>,
    /// Made by direct verbs: the program posts into the rings itself, so RTS must keep the
    /// send PSN its PSN table was written for.
    direct: bool,
}

// SAFETY: the raw pointers inside the C structs point to objects that outlive the QP; all
// mutable state is behind mutexes.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

// SAFETY: repr(C) with `ibv_qp_ex` first; `magic` follows it.
unsafe impl Handle for Qp {
    const TAG: u64 = QP_MAGIC;
    const WHAT: &'static str = "QP";
    fn tag(&self) -> u64 {
        self.magic
    }
}

impl Qp {
    /// After a send doorbell: this QP's send queue is served in the posting thread (see
    /// `gda_sim::Qp::after_post`); the program's polls take the responses.
    pub(crate) fn after_post(&self) {
        self.sim.after_post();
    }

    /// [`Qp::after_post`] for large messages (see `gda_sim::Qp::after_large_post`).
    pub(crate) fn after_large_post(&self, streaming: bool) {
        self.sim.after_large_post(streaming);
    }

    /// The QP behind `qp`.
    ///
    /// # Safety
    /// `qp` is null or points to a live `ibv_qp`.
    pub(crate) unsafe fn from_ibv<'a>(qp: *mut sys::ibv_qp) -> Result<&'a Qp, Errno> {
        // SAFETY: the caller's contract (`ibv_qp` is the prefix of `ibv_qp_ex`).
        unsafe { handle(qp.cast()) }
    }

    /// Its number.
    pub(crate) fn qp_num(&self) -> u32 {
        self.ex.qp_base.qp_num
    }

    /// The state now (the software NIC moves a QP to ERR on an error completion).
    pub(crate) fn state(&self) -> u32 {
        if self.sim.state() == QpState::Error {
            return qp_state::ERR;
        }
        self.attr.lock().unwrap_or_else(|e| e.into_inner()).qp_state
    }
}

/// Where a send completion falls on the ring: the unit it reports and the bits of that
/// counter (the family's device functions say).
struct CompletedUnit<'a>(&'a WorkCompletion);

impl ForSq for CompletedUnit<'_> {
    type Out = (u32, u32);
    fn run<V: VendorQueue>(self, sq: &V::Sq) -> (u32, u32) {
        (V::completed_unit(sq, self.0), V::completion_bits(sq))
    }
}

impl Retire for Qp {
    /// Bookkeeping for a completion of this QP.
    fn retire(&self, wc: &WorkCompletion) -> Retired {
        let src_qp = self
            .attr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dest_qp_num;
        if wc.is_recv {
            let wr_id = self
                .recv
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .recs
                .pop_front()
                .unwrap_or(0);
            return Retired {
                wr_id,
                opcode: None,
                byte_len: None,
                src_qp,
            };
        }
        let (unit, bits) = self.sq.with(CompletedUnit(wc));
        let modulus = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut st = self.send.lock().unwrap_or_else(|e| e.into_inner());
        // The WQE the completion names (a signalled completion retires every WQE before it).
        let hit = st
            .recs
            .iter()
            .position(|r| (u64::from(unit).wrapping_sub(r.start) & modulus) < u64::from(r.units));
        match hit {
            Some(i) => {
                let r = st.recs.drain(..=i).next_back();
                let r = r.unwrap_or(Rec {
                    start: 0,
                    units: 0,
                    wr_id: 0,
                    opcode: None,
                    len: 0,
                });
                Retired {
                    wr_id: r.wr_id,
                    opcode: r.opcode,
                    byte_len: r
                        .opcode
                        .filter(|o| {
                            matches!(
                                o,
                                WcOpcode::RdmaRead | WcOpcode::CompSwap | WcOpcode::FetchAdd
                            )
                        })
                        .map(|_| r.len),
                    src_qp,
                }
            }
            None => Retired {
                wr_id: 0,
                opcode: None,
                byte_len: None,
                src_qp,
            },
        }
    }
}

/// Sizes and ring memory a direct-verbs create fixes (bnxt `bnxt_re_dv_create_qp`): the
/// program laid out the rings, so the QP takes exactly these.
pub(crate) struct Direct {
    /// Send units and receive WQEs as the program sized them.
    pub(crate) init: QpInit,
    /// The program's ring memory.
    pub(crate) memory: gda_hal::control::QueueMemory,
}

/// Creates an RC QP on `pd`: sized from `a.cap`, or (`direct`) with the sizes and memory of a
/// direct-verbs create. `fill` completes the program's `ibv_qp_ex` (the `ibv_wr_*` callbacks)
/// before the QP is published.
pub(crate) fn create_with(
    pd: *mut sys::ibv_pd,
    a: &sys::ibv_qp_init_attr_ex,
    direct: Option<Direct>,
    fill: impl FnOnce(&mut sys::ibv_qp_ex),
) -> Result<*mut sys::ibv_qp, Errno> {
    // SAFETY: the caller's PD (checked).
    let p: &'static Pd = unsafe { Pd::from_ibv(pd) }?;
    p.ctx.dev.kind().with(Create {
        pd,
        p,
        a,
        direct,
        fill,
    })
}

/// [`create_with`] for the device's family.
struct Create<'a, F> {
    pd: *mut sys::ibv_pd,
    p: &'static Pd,
    a: &'a sys::ibv_qp_init_attr_ex,
    direct: Option<Direct>,
    fill: F,
}

impl<F: FnOnce(&mut sys::ibv_qp_ex)> ForVendor for Create<'_, F> {
    type Out = Result<*mut sys::ibv_qp, Errno>;
    fn run<V: VendorQueue>(self) -> Self::Out {
        let Create {
            pd,
            p,
            a,
            direct,
            fill,
        } = self;
        create_as::<V>(pd, p, a, direct, fill)
    }
}

/// [`create_with`] with family `V`'s WQE sizes, inline limit and queue handles.
fn create_as<V: VendorQueue>(
    pd: *mut sys::ibv_pd,
    p: &'static Pd,
    a: &sys::ibv_qp_init_attr_ex,
    direct: Option<Direct>,
    fill: impl FnOnce(&mut sys::ibv_qp_ex),
) -> Result<*mut sys::ibv_qp, Errno> {
    let ctx = p.ctx;
    if a.qp_type != sys::ibv_qp_type::IBV_QPT_RC {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!("QP type {}: the software NIC has RC QPs only", a.qp_type),
        ));
    }
    if !a.srq.is_null() {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            "SRQs are not supported (max_srq is 0)",
        ));
    }
    // SAFETY: the caller's CQs (checked).
    let (scq, rcq) = unsafe { (Cq::from_ibv(a.send_cq)?, Cq::from_ibv(a.recv_cq)?) };
    for c in [scq, rcq] {
        if !std::ptr::eq(c.ctx, ctx) {
            return Err(Errno::inval("CQ of another context"));
        }
    }
    let cap = a.cap;
    let max_sge = ctx.dev.info.max_sge;
    let max_inline = V::MAX_INLINE_BYTES.min(512);
    if cap.max_send_wr == 0 && cap.max_recv_wr == 0 {
        return Err(Errno::inval("max_send_wr and max_recv_wr are both 0"));
    }
    if cap.max_send_wr > 32768 || cap.max_recv_wr > 32768 {
        return Err(Errno::inval(format!(
            "max_send_wr {} / max_recv_wr {} above the device's 32768",
            cap.max_send_wr, cap.max_recv_wr
        )));
    }
    if cap.max_send_sge > max_sge || cap.max_recv_sge > max_sge {
        return Err(Errno::inval(format!(
            "max_send_sge {} / max_recv_sge {} above the device's {max_sge}",
            cap.max_send_sge, cap.max_recv_sge
        )));
    }
    if cap.max_inline_data > max_inline {
        return Err(Errno::inval(format!(
            "max_inline_data {} above the device's {max_inline}",
            cap.max_inline_data
        )));
    }
    let send_sge = cap.max_send_sge.max(1);
    let units = V::wqe_units(send_sge, cap.max_inline_data);
    let sq_units = (cap.max_send_wr.max(1) * units).next_power_of_two().max(4);
    let rq_wqes = cap.max_recv_wr.max(1).next_power_of_two();
    let is_direct = direct.is_some();
    let (init, memory) = match direct {
        Some(d) => (d.init, d.memory),
        None => (
            QpInit {
                sq_units,
                rq_wqes,
                max_inline: cap
                    .max_inline_data
                    .max(
                        // Enough for an 8-byte inline put, as rdma-core's default.
                        64,
                    )
                    .min(max_inline),
                max_sge: send_sge.max(cap.max_recv_sge).max(1),
                rnr_retry: 7,
                path_mtu: 4096,
            },
            p.queue_memory(),
        ),
    };
    let (sq_units, rq_wqes) = (init.sq_units, init.rq_wqes);
    let sim = p
        .sim
        .create_qp_in(init, &scq.sim, &rcq.sim, &memory)
        .map_err(|e| Errno::new(libc::ENOMEM, format!("QP: {e}")))?;
    let to_errno = |e: gda_sim::SimError| Errno::new(libc::EINVAL, e.to_string());
    let sq = V::wrap(sim.sq_handle::<V>().map_err(to_errno)?);
    let rq = sim.rq_handle::<V>().map_err(to_errno)?;
    let out_cap = sys::ibv_qp_cap {
        max_send_wr: (sq_units / units).max(cap.max_send_wr),
        max_recv_wr: rq_wqes,
        max_send_sge: send_sge,
        max_recv_sge: cap.max_recv_sge.max(1),
        max_inline_data: init.max_inline,
    };
    // SAFETY: C data; zero is "unset".
    let mut ex: sys::ibv_qp_ex = unsafe { std::mem::zeroed() };
    ex.qp_base.context = ctx.ibv();
    ex.qp_base.qp_context = a.qp_context;
    ex.qp_base.pd = pd;
    ex.qp_base.send_cq = a.send_cq;
    ex.qp_base.recv_cq = a.recv_cq;
    ex.qp_base.handle = sim.qpn();
    ex.qp_base.qp_num = sim.qpn();
    ex.qp_base.state = qp_state::RESET;
    ex.qp_base.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
    // SAFETY: C data.
    let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = qp_state::RESET;
    attr.cap = out_cap;
    // The send PSN the software NIC starts from (what `ibv_query_qp` reports before RTS).
    attr.sq_psn = sim.start_psn();
    let qpn = sim.qpn();
    let qp = Box::leak(Box::new(Qp {
        ex,
        magic: QP_MAGIC,
        ctx,
        pd: p,
        send_cq: scq,
        recv_cq: rcq,
        sim,
        sq,
        rq,
        sq_units,
        sig_all: a.sq_sig_all != 0,
        cap: out_cap,
        send: Mutex::new(SendState {
            pos: SqPos::at_unit(0),
            head: 0,
            recs: VecDeque::new(),
            deferred: 0,
        }),
        recv: Mutex::new(RecvState::default()),
        attr: Mutex::new(attr),
        wr: Mutex::new(Batch::default()),
        direct: is_direct,
    }));
    // SAFETY: zeroed mutex/cond at their final address.
    unsafe {
        libc::pthread_mutex_init(
            std::ptr::addr_of_mut!(qp.ex.qp_base.mutex).cast(),
            std::ptr::null(),
        );
        libc::pthread_cond_init(
            std::ptr::addr_of_mut!(qp.ex.qp_base.cond).cast(),
            std::ptr::null(),
        );
    }
    fill(&mut qp.ex);
    p.users.fetch_add(1, Ordering::AcqRel);
    scq.users.fetch_add(1, Ordering::AcqRel);
    rcq.users.fetch_add(1, Ordering::AcqRel);
    ctx.retain();
    // SAFETY: `ibv_destroy_qp` removes the QP from the map before freeing it.
    unsafe { ctx.dp.insert(qpn, qp) };
    Ok(std::ptr::addr_of_mut!(qp.ex.qp_base))
}

#[unsafe(no_mangle)]
/// `ibv_create_qp`: fills `attr.cap` with the QP's real limits.
pub unsafe extern "C" fn gdav_ibv_create_qp(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_qp_init_attr,
) -> *mut sys::ibv_qp {
    guard("ibv_create_qp", std::ptr::null_mut(), || {
        let r = (|| {
            if attr.is_null() {
                return Err(Errno::inval("null init_attr"));
            }
            // SAFETY: checked non-null; the caller's struct.
            let a = unsafe { &mut *attr };
            // SAFETY: C data.
            let mut ex: sys::ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
            ex.qp_context = a.qp_context;
            ex.send_cq = a.send_cq;
            ex.recv_cq = a.recv_cq;
            ex.srq = a.srq;
            ex.cap = a.cap;
            ex.qp_type = a.qp_type;
            ex.sq_sig_all = a.sq_sig_all;
            let qp = create_with(pd, &ex, None, |_| {})?;
            // SAFETY: just made.
            a.cap = unsafe { Qp::from_ibv(qp) }?.cap;
            Ok(qp)
        })();
        ret_ptr("ibv_create_qp", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_qp_to_qp_ex`: the `ibv_qp_ex` of a QP made with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
pub unsafe extern "C" fn gdav_ibv_qp_to_qp_ex(qp: *mut sys::ibv_qp) -> *mut sys::ibv_qp_ex {
    // SAFETY: the caller's QP (checked).
    match unsafe { Qp::from_ibv(qp) } {
        Ok(q) if q.ex.wr_start.is_some() => qp.cast(),
        _ => std::ptr::null_mut(),
    }
}

/// What the state checks need of `ctx`'s port.
fn port_view(ctx: &Context) -> PortView {
    let p = ctx.port();
    PortView {
        port_count: ctx.dev.info.ports.len() as u8,
        active_mtu: p.active_mtu as u32,
        ethernet: p.link_layer == gda_hal::control::LinkLayer::Ethernet,
        gids: p
            .gids
            .iter()
            .map(|g| (g.index, g.kind == gda_hal::control::GidType::RoceV2))
            .collect(),
        gid_table_len: crate::device::GID_TABLE_LEN as u32,
        pkeys: p.pkeys.max(1),
        max_rd_atomic: ctx.dev.info.max_rd_atomic,
        max_dest_rd_atomic: ctx.dev.info.max_rd_atomic,
        qp_port: 0,
    }
}

fn modify(qp: *mut sys::ibv_qp, attr: *mut sys::ibv_qp_attr, mask: c_int) -> Result<(), Errno> {
    // SAFETY: the caller's QP (checked).
    let q = unsafe { Qp::from_ibv(qp) }?;
    if attr.is_null() {
        return Err(Errno::inval("null attr"));
    }
    // SAFETY: checked non-null.
    let a = unsafe { &*attr };
    let cur = q.state();
    let mut view = port_view(q.ctx);
    // The port RESET→INIT bound the QP to (0 until then), as the kernel's `qp->port`.
    view.qp_port = q.attr.lock().unwrap_or_else(|e| e.into_inner()).port_num;
    let next = qp_state::check_modify(cur, a, mask, &view)?;
    let m = mask as u32;
    use qp_state::mask as b;
    if q.direct && m & b::SQ_PSN != 0 && a.sq_psn & 0x00ff_ffff != q.sim.start_psn() {
        // The program's PSN table was (or will be) written from this PSN; another one would
        // make every request it builds disagree with the wire.
        return Err(Errno::inval(format!(
            "sq_psn {:#x}: the software NIC's bnxt model starts this direct-verbs QP at {:#x} \
             (ibv_query_qp reports it before RTS)",
            a.sq_psn,
            q.sim.start_psn()
        )));
    }
    // The attributes become gda-hal's and the software NIC takes them through the same
    // transitions as every other control path (`gda_sim::Qp::modify_*`, which `SimQp`'s
    // `RawRcQp` calls); the checks above only chose the errno the real stack would return.
    let arrow = format!(
        "{}→{}",
        qp_state::state_name(cur),
        qp_state::state_name(next)
    );
    let refused = |e: &dyn std::fmt::Display| Errno::inval(format!("{arrow}: {e}"));
    match (cur, next) {
        (_, qp_state::ERR) => q.sim.modify_error(),
        (qp_state::RESET, qp_state::RESET) => {}
        (_, qp_state::RESET) => {
            return Err(Errno::new(
                libc::EOPNOTSUPP,
                format!(
                    "{}→RESET: the software NIC cannot reset a QP's rings yet; destroy and create it",
                    qp_state::state_name(cur)
                ),
            ));
        }
        (qp_state::RESET, qp_state::INIT) => {
            let attr = qp_attr::init_from_ibv(a, m).map_err(|e| refused(&e))?;
            q.sim.modify_init(&attr).map_err(|e| refused(&e))?;
        }
        (qp_state::INIT, qp_state::RTR) => {
            let link = q.ctx.port().link_layer;
            let attr = qp_attr::rtr_from_ibv(a, m, link).map_err(|e| refused(&e))?;
            // `rq_psn`: the PSN the peer's first request carries (its `sq_psn`); a request
            // from another process at any other PSN is refused.
            q.sim.modify_rtr(&attr).map_err(|e| {
                Errno::inval(format!(
                    "INIT→RTR: dest_qp_num {:#x} at {}: {e}",
                    a.dest_qp_num,
                    fmt_gid(&attr.remote.gid.0)
                ))
            })?;
        }
        (qp_state::RTR, qp_state::RTS) => {
            // `sq_psn`: what this QP's requests to another process start at (the peer's
            // `rq_psn`).
            let attr = qp_attr::rts_from_ibv(a, m).map_err(|e| refused(&e))?;
            q.sim.modify_rts(&attr).map_err(|e| refused(&e))?;
        }
        // INIT→INIT, RTR→RTR, RTS→RTS: the attributes these take (access flags, timers,
        // alternate paths) change nothing the software NIC models; they are kept below for
        // `ibv_query_qp`.
        _ => {}
    }
    let mut st = q.attr.lock().unwrap_or_else(|e| e.into_inner());
    let keep = |st: &mut sys::ibv_qp_attr| {
        if m & b::ACCESS_FLAGS != 0 {
            st.qp_access_flags = a.qp_access_flags;
        }
        if m & b::PKEY_INDEX != 0 {
            st.pkey_index = a.pkey_index;
        }
        if m & b::PORT != 0 {
            st.port_num = a.port_num;
        }
        if m & b::AV != 0 {
            st.ah_attr = a.ah_attr;
        }
        if m & b::PATH_MTU != 0 {
            st.path_mtu = a.path_mtu;
        }
        if m & b::DEST_QPN != 0 {
            st.dest_qp_num = a.dest_qp_num;
        }
        if m & b::RQ_PSN != 0 {
            st.rq_psn = a.rq_psn;
        }
        if m & b::SQ_PSN != 0 {
            st.sq_psn = a.sq_psn;
        }
        if m & b::MAX_DEST_RD_ATOMIC != 0 {
            st.max_dest_rd_atomic = a.max_dest_rd_atomic;
        }
        if m & b::MAX_QP_RD_ATOMIC != 0 {
            st.max_rd_atomic = a.max_rd_atomic;
        }
        if m & b::MIN_RNR_TIMER != 0 {
            st.min_rnr_timer = a.min_rnr_timer;
        }
        if m & b::TIMEOUT != 0 {
            st.timeout = a.timeout;
        }
        if m & b::RETRY_CNT != 0 {
            st.retry_cnt = a.retry_cnt;
        }
        if m & b::RNR_RETRY != 0 {
            st.rnr_retry = a.rnr_retry;
        }
        if m & b::PATH_MIG_STATE != 0 {
            st.path_mig_state = a.path_mig_state;
        }
        if m & b::ALT_PATH != 0 {
            st.alt_ah_attr = a.alt_ah_attr;
        }
    };
    keep(&mut st);
    st.qp_state = next;
    st.cur_qp_state = next;
    drop(st);
    // SAFETY: `state` is a field of our own QP the program reads.
    unsafe { (*qp).state = next };
    Ok(())
}

fn fmt_gid(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

#[unsafe(no_mangle)]
/// `ibv_modify_qp`: the kernel's state table and attribute checks, then the software NIC.
pub unsafe extern "C" fn gdav_ibv_modify_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    guard("ibv_modify_qp", libc::EIO, || {
        ret_code("ibv_modify_qp", modify(qp, attr, mask))
    })
}

#[unsafe(no_mangle)]
/// `ibv_query_qp`.
pub unsafe extern "C" fn gdav_ibv_query_qp(
    qp: *mut sys::ibv_qp,
    attr: *mut sys::ibv_qp_attr,
    _mask: c_int,
    init: *mut sys::ibv_qp_init_attr,
) -> c_int {
    guard("ibv_query_qp", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's QP (checked).
            let q = unsafe { Qp::from_ibv(qp) }?;
            if attr.is_null() || init.is_null() {
                return Err(Errno::inval("null attr or init_attr"));
            }
            let mut a = *q.attr.lock().unwrap_or_else(|e| e.into_inner());
            a.qp_state = q.state();
            a.cur_qp_state = a.qp_state;
            a.cap = q.cap;
            // SAFETY: checked non-null; the caller's structs.
            unsafe {
                attr.write(a);
                let i = &mut *init;
                i.qp_context = q.ex.qp_base.qp_context;
                i.send_cq = q.ex.qp_base.send_cq;
                i.recv_cq = q.ex.qp_base.recv_cq;
                i.srq = std::ptr::null_mut();
                i.cap = q.cap;
                i.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
                i.sq_sig_all = c_int::from(q.sig_all);
            }
            Ok(())
        })();
        ret_code("ibv_query_qp", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_destroy_qp`.
pub unsafe extern "C" fn gdav_ibv_destroy_qp(qp: *mut sys::ibv_qp) -> c_int {
    guard("ibv_destroy_qp", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's QP (checked).
            let q = unsafe { Qp::from_ibv(qp) }?;
            let ctx = q.ctx;
            ctx.dp.remove(q.qp_num());
            crate::vendor::forget(ctx.key(), Gone::Qp(q.qp_num()));
            q.pd.users.fetch_sub(1, Ordering::AcqRel);
            q.send_cq.users.fetch_sub(1, Ordering::AcqRel);
            q.recv_cq.users.fetch_sub(1, Ordering::AcqRel);
            // SAFETY: made by Box::leak in `create`; no longer reachable from the context.
            unsafe {
                (*qp.cast::<Qp>()).magic = 0;
                drop(Box::from_raw(qp.cast::<Qp>()));
            }
            ctx.release();
            Ok(())
        })();
        ret_code("ibv_destroy_qp", r)
    })
}
