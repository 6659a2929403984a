//! The data path: `ops.post_send` and `ops.post_recv` (what `verbs.h`'s inline `ibv_post_send`
//! and `ibv_post_recv` call), written once over [`gda_hal::Provider`]: each work request becomes
//! a [`WorkRequest`] that the provider's own device functions encode into the QP's real ring,
//! then one doorbell for the chain.
//!
//! Verbs posting and direct posting mix on one QP as on hardware: before posting, the producer
//! position is taken from the doorbell record when a program that holds the rings (through
//! `mlx5dv_init_obj`) moved it past ours; the WQEs it posted complete in order with `wr_id` 0.

use std::ffi::c_int;

use gda_hal::handle::SqPos;
use gda_hal::index::ProdIdx;
use gda_hal::op::AtomicOp;
use gda_hal::{Payload, Remote, SendFlags, Sge, WcOpcode, WorkRequest, WqHandle};
use ibverbs_sys as sys;

use crate::abi::{Errno, guard, trace};
use crate::qp::{Qp, Rec, SendState};
use crate::qp_state;
use crate::vendor::{ForSq, VendorQueue};

/// `enum ibv_wr_opcode`.
mod op {
    pub const RDMA_WRITE: u32 = 0;
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const SEND: u32 = 2;
    pub const SEND_WITH_IMM: u32 = 3;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
}

/// `IBV_SEND_*` bits this device honours (FENCE, SIGNALED, SOLICITED, INLINE).
const SEND_FLAGS_KNOWN: u32 = 0xf;

/// One send work request in the provider-neutral form, with what its completion reports.
pub(crate) struct Request<'a> {
    /// The request.
    wr: WorkRequest<'a>,
    /// Flags (numbered as `ibv_send_flags`).
    flags: SendFlags,
    /// The completion's opcode.
    opcode: WcOpcode,
    /// The completion's byte count (READ, atomics).
    len: u32,
}

/// Send work requests as `(wr_id, request)`, translated lazily so that a bad one stops the
/// chain where it is.
pub(crate) type Requests<'r, 'a> = dyn Iterator<Item = Result<(u64, Request<'a>), Errno>> + 'r;

/// Translates `w` (its gather list already in `sges`; inline bytes gathered into `inline`).
pub(crate) fn translate<'a>(
    w: &sys::ibv_send_wr,
    sges: &'a [Sge],
    inline: &'a mut Vec<u8>,
    sig_all: bool,
) -> Result<Request<'a>, Errno> {
    if w.send_flags & !SEND_FLAGS_KNOWN != 0 {
        return Err(Errno::inval(format!("send_flags {:#x}", w.send_flags)));
    }
    let mut flags = SendFlags::from_bits_truncate(w.send_flags);
    if sig_all {
        flags |= SendFlags::SIGNALED;
    }
    let len: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    // SAFETY: reading the union member the opcode selects (plain integers).
    let imm = unsafe { u32::from_be(w.__bindgen_anon_1.imm_data) };
    let payload = |inline: &'a mut Vec<u8>| -> Payload<'a> {
        if flags.contains(SendFlags::INLINE) {
            inline.clear();
            for s in sges {
                // SAFETY: inline data is read by the CPU at post time from the program's
                // buffers (no key needed, as on hardware); verbs makes the caller keep them valid.
                inline.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(s.addr as *const u8, s.length as usize)
                });
            }
            Payload::Inline(inline.as_slice())
        } else {
            Payload::Sges(sges)
        }
    };
    // SAFETY: reading the `rdma`/`atomic` union members (plain integers) for their opcodes.
    let (rdma, atomic) = unsafe { (w.wr.rdma, w.wr.atomic) };
    let (wr, opcode, len) = match w.opcode {
        op::RDMA_WRITE | op::RDMA_WRITE_WITH_IMM => (
            WorkRequest::Write {
                remote: Remote {
                    addr: rdma.remote_addr,
                    rkey: rdma.rkey,
                },
                payload: payload(inline),
                imm: (w.opcode == op::RDMA_WRITE_WITH_IMM).then_some(imm),
            },
            WcOpcode::RdmaWrite,
            len,
        ),
        op::SEND | op::SEND_WITH_IMM => (
            WorkRequest::Send {
                payload: payload(inline),
                imm: (w.opcode == op::SEND_WITH_IMM).then_some(imm),
            },
            WcOpcode::Send,
            len,
        ),
        op::RDMA_READ => {
            if flags.contains(SendFlags::INLINE) {
                return Err(Errno::inval("RDMA_READ cannot be inline"));
            }
            (
                WorkRequest::Read {
                    remote: Remote {
                        addr: rdma.remote_addr,
                        rkey: rdma.rkey,
                    },
                    sges,
                },
                WcOpcode::RdmaRead,
                len,
            )
        }
        op::ATOMIC_CMP_AND_SWP | op::ATOMIC_FETCH_AND_ADD => {
            let Some(local) = sges.first().copied().filter(|s| s.length >= 8) else {
                return Err(Errno::inval("an atomic needs one 8-byte local SGE"));
            };
            if sges.len() != 1 {
                return Err(Errno::inval("an atomic takes exactly one SGE"));
            }
            if atomic.remote_addr % 8 != 0 {
                return Err(Errno::inval(format!(
                    "atomic remote_addr {:#x} is not 8-byte aligned",
                    atomic.remote_addr
                )));
            }
            let (op, opcode) = if w.opcode == op::ATOMIC_CMP_AND_SWP {
                (
                    AtomicOp::CompareSwap {
                        compare: atomic.compare_add,
                        swap: atomic.swap,
                    },
                    WcOpcode::CompSwap,
                )
            } else {
                (
                    AtomicOp::FetchAdd {
                        add: atomic.compare_add,
                    },
                    WcOpcode::FetchAdd,
                )
            };
            (
                WorkRequest::Atomic {
                    remote: Remote {
                        addr: atomic.remote_addr,
                        rkey: atomic.rkey,
                    },
                    local,
                    op,
                    bytes: 8,
                },
                opcode,
                8,
            )
        }
        other => {
            return Err(Errno::inval(format!(
                "opcode {other} is not supported on an RC QP of this device"
            )));
        }
    };
    Ok(Request {
        wr,
        flags,
        opcode,
        len: len.min(u64::from(u32::MAX)) as u32,
    })
}

/// Reads a program's gather list.
///
/// # Safety
/// `list` has `n` entries when `n > 0`.
unsafe fn gather(
    list: *const sys::ibv_sge,
    n: c_int,
    max: u32,
    out: &mut Vec<Sge>,
) -> Result<(), Errno> {
    out.clear();
    if n < 0 || n as u32 > max {
        return Err(Errno::inval(format!("num_sge {n} outside 0..={max}")));
    }
    if n > 0 && list.is_null() {
        return Err(Errno::inval("null sg_list"));
    }
    for i in 0..n as usize {
        // SAFETY: the caller's contract.
        let s = unsafe { *list.add(i) };
        out.push(Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        });
    }
    Ok(())
}

/// Posts whose messages are all this small serve only their QP's queue in the posting thread
/// (`Qp::after_post`); larger ones run the engine's whole pass. Measured with Debian's perftest
/// on the 2-core VM, interleaved with the whole pass for every post (2026-11-26, steady state):
/// 8-byte `ib_send_bw` 1.66–2.59 M msg/s against 1.16–1.61 and `ib_atomic_bw` 2.34–2.46 M ops/s
/// against 1.61–1.70, `ibv_rc_pingpong` 9.5–11.1 µs per round trip against 11.0–17.2 (160–250
/// against 162–202 with `-e`, completion events); but 64-KiB `ib_write_bw` held 9–32 GB/s
/// against 18–44 when large WRITEs were served the same way.
const SMALL_POST_BYTES: u64 = 4096;

impl Qp {
    /// Posts `reqs` and rings once. Stops at the first request that does not fit or does not
    /// translate: `Err((index, errno))`.
    pub(crate) fn post_requests(&self, reqs: &mut Requests<'_, '_>) -> Result<(), (usize, Errno)> {
        self.sq.with(Post { qp: self, reqs })
    }

    fn post_as<V: VendorQueue>(
        &self,
        sq: &V::Sq,
        reqs: &mut Requests<'_, '_>,
    ) -> Result<(), (usize, Errno)> {
        let state = self.state();
        if matches!(state, qp_state::RESET | qp_state::INIT | qp_state::RTR) {
            return Err((
                0,
                Errno::inval(format!(
                    "posting a send in state {}",
                    qp_state::state_name(state)
                )),
            ));
        }
        let mut st = self.send.lock().unwrap_or_else(|e| e.into_inner());
        self.resync::<V>(sq, &mut st);
        // Whether earlier requests are still outstanding (a stream, not a ping-pong).
        let streaming = !st.recs.is_empty();
        let mut last = None;
        let mut result = Ok(());
        // The largest message of this post (how its doorbell is served, below).
        let mut largest = 0u64;
        for (i, r) in reqs.enumerate() {
            let (wr_id, req) = match r {
                Ok(x) => x,
                Err(e) => {
                    result = Err((i, e));
                    break;
                }
            };
            let cost = match V::check(sq, &req.wr) {
                Ok(c) => c,
                Err(e) => {
                    result = Err((i, Errno::inval(format!("{e}"))));
                    break;
                }
            };
            let outstanding = st.head - st.recs.front().map_or(st.head, |r| r.start);
            if outstanding + u64::from(cost.units) > u64::from(self.sq_units) {
                result = Err((
                    i,
                    Errno::new(
                        libc::ENOMEM,
                        format!(
                            "send queue full ({outstanding} of {} units outstanding: poll completions, or signal more often)",
                            self.sq_units
                        ),
                    ),
                ));
                break;
            }
            // SAFETY: the ring is the sim QP's (alive with `self`); the units
            // [head, head + cost.units) are free (checked above) and ours under the send lock;
            // `check` accepted the request; gather/inline sources are the caller's.
            let posted = unsafe { V::post(sq, st.pos, &req.wr, req.flags) };
            let start = st.head;
            st.recs.push_back(Rec {
                start,
                units: cost.units,
                wr_id,
                opcode: Some(req.opcode),
                len: req.len,
            });
            st.head += u64::from(cost.units);
            st.pos = posted.next;
            largest = largest.max(u64::from(req.len));
            last = Some(posted);
        }
        if let Some(p) = last {
            // SAFETY: the handle's doorbell record and register are the sim QP's.
            unsafe { V::ring_sq(sq, &p) };
            // Behind requests still outstanding (a stream: the program will poll for their
            // completions), while the engine thread will look at the queues within a bounded
            // time anyway, a small post's doorbell is left to it or to the program's next
            // poll: a burst is served in one step (one frame batch, one look at the peer) —
            // as many in a row as the fabric takes (`Fabric::DEFERRED_IN_ROW_MAX`; the next one
            // serves them all here).
            // A large post may be left to the engine thread too when the QP's operations are
            // placed directly (`gda_sim::Qp::after_large_post`). A post with nothing
            // outstanding (a ping-pong) is served at once.
            let defer = streaming
                && largest <= SMALL_POST_BYTES
                && self.ctx.dev.nic.fabric().defer_doorbell(st.deferred);
            st.deferred = if defer { st.deferred + 1 } else { 0 };
            drop(st);
            if defer {
                // Left to the engine thread or the program's next poll (above).
            } else if largest <= SMALL_POST_BYTES {
                // Small messages: only this QP's queue is served here; the program's polls
                // take the responses (a whole pass per post cost a message-rate loop a
                // quarter of its time).
                self.after_post();
            } else {
                // Large ones: this QP's step, and the whole pass too unless they were placed
                // directly (the pass writes what waits for room in the rings and takes the
                // acknowledgements that free it).
                self.after_large_post(streaming);
            }
        }
        result
    }

    /// Catches up with WQEs a program posted directly on the rings (as far as the family can
    /// tell: mlx5's doorbell record has a send counter ahead of ours).
    fn resync<V: VendorQueue>(&self, sq: &V::Sq, st: &mut SendState) {
        // SAFETY: the handle addresses the sim QP's send queue, alive as long as `self`.
        let ahead = unsafe { V::posted_directly(sq, st.head) };
        if ahead == 0 || ahead > u64::from(self.sq_units) {
            return;
        }
        trace(format_args!(
            "QP {:#x}: {ahead} units posted directly; continuing after them",
            self.qp_num()
        ));
        let start = st.head;
        st.recs.push_back(Rec {
            start,
            units: ahead as u32,
            wr_id: 0,
            opcode: None,
            len: 0,
        });
        st.head += ahead;
        st.pos = SqPos::at_unit(st.head as u32);
    }
}

/// Posts on a QP's send queue with its family's device functions.
struct Post<'q, 'r, 'a> {
    qp: &'q Qp,
    reqs: &'q mut Requests<'r, 'a>,
}

impl ForSq for Post<'_, '_, '_> {
    type Out = Result<(), (usize, Errno)>;
    fn run<V: VendorQueue>(self, sq: &V::Sq) -> Self::Out {
        self.qp.post_as::<V>(sq, self.reqs)
    }
}

/// `ibv_context_ops.post_send`.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_send_wr,
    bad: *mut *mut sys::ibv_send_wr,
) -> c_int {
    guard("ibv_post_send", libc::EIO, || {
        // SAFETY: verbs.h passes the program's QP.
        let q = match unsafe { Qp::from_ibv(qp) } {
            Ok(q) => q,
            Err(e) => return crate::abi::ret_code("ibv_post_send", Err(e)),
        };
        // Walk the chain, translating lazily so a bad request stops the chain where it is.
        let mut ptrs = Vec::new();
        let mut cur = wr;
        while !cur.is_null() {
            ptrs.push(cur);
            // SAFETY: a chain of the program's work requests.
            cur = unsafe { (*cur).next };
        }
        let max_sge = q.cap.max_send_sge;
        let mut sges: Vec<Vec<Sge>> = Vec::with_capacity(ptrs.len());
        let mut gather_err = None;
        for (i, &p) in ptrs.iter().enumerate() {
            let mut v = Vec::new();
            // SAFETY: the program's request and its gather list.
            if let Err(e) = unsafe { gather((*p).sg_list, (*p).num_sge, max_sge, &mut v) } {
                gather_err = Some((i, e));
                break;
            }
            sges.push(v);
        }
        let mut inlines: Vec<Vec<u8>> = (0..sges.len()).map(|_| Vec::new()).collect();
        let mut it = ptrs
            .iter()
            .zip(sges.iter())
            .zip(inlines.iter_mut())
            .map(|((&p, s), buf)| {
                // SAFETY: the program's request.
                let w = unsafe { &*p };
                translate(w, s, buf, q.sig_all).map(|r| (w.wr_id, r))
            });
        let mut res = q.post_requests(&mut it);
        if res.is_ok() {
            if let Some(e) = gather_err {
                res = Err(e);
            }
        }
        match res {
            Ok(()) => 0,
            Err((i, e)) => {
                if !bad.is_null() {
                    // SAFETY: the program's out pointer.
                    unsafe { *bad = ptrs.get(i).copied().unwrap_or(wr) };
                }
                crate::abi::ret_code("ibv_post_send", Err(e))
            }
        }
    })
}

macro_rules! post_recv_n {
    ($P:ty, $rq:expr, $at:expr, $s:expr, [$($n:literal),*]) => {
        match $s.len() {
            $( $n => {
                if let Ok(a) = <&[Sge; $n]>::try_from($s) {
                    // SAFETY: the caller of `recv_one` owns slot `at` of the sim QP's ring.
                    unsafe { <$P>::post_recv::<$n>($rq, $at, a) };
                }
            } )*
            _ => {}
        }
    };
}

fn recv_one<V: VendorQueue>(rq: &WqHandle, at: ProdIdx, s: &[Sge]) {
    post_recv_n!(
        V,
        rq,
        at,
        s,
        [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
            24, 25, 26, 27, 28, 29, 30
        ]
    );
}

/// Posts receives and rings their doorbell with the QP's family's device functions.
struct Recv<'q> {
    qp: &'q Qp,
    wr: *mut sys::ibv_recv_wr,
}

impl ForSq for Recv<'_> {
    /// `Err`: the request that was refused, and why.
    type Out = Result<(), (*mut sys::ibv_recv_wr, Errno)>;
    fn run<V: VendorQueue>(self, _sq: &V::Sq) -> Self::Out {
        let q = self.qp;
        let mut st = q.recv.lock().unwrap_or_else(|e| e.into_inner());
        let entries = u64::from(q.rq.entries);
        let mut sges = Vec::new();
        let mut cur = self.wr;
        let mut posted = false;
        let mut err = None;
        while !cur.is_null() {
            // SAFETY: the program's chain.
            let w = unsafe { &*cur };
            // SAFETY: the program's gather list.
            if let Err(e) = unsafe { gather(w.sg_list, w.num_sge, q.cap.max_recv_sge, &mut sges) } {
                err = Some(e);
                break;
            }
            if st.recs.len() as u64 >= entries {
                err = Some(Errno::new(
                    libc::ENOMEM,
                    format!("receive queue full ({entries} posted)"),
                ));
                break;
            }
            recv_one::<V>(&q.rq, ProdIdx(st.head as u32), &sges);
            st.head += 1;
            st.recs.push_back(w.wr_id);
            posted = true;
            cur = w.next;
        }
        if posted {
            let next = ProdIdx(st.head as u32);
            // SAFETY: the sim QP's receive doorbell.
            unsafe { V::ring_rq(&q.rq, next) };
            drop(st);
            // A pass only when a peer's SEND waits for this receive.
            q.ctx.dev.nic.fabric().after_recv_doorbell();
        }
        err.map_or(Ok(()), |e| Err((cur, e)))
    }
}

/// `ibv_context_ops.post_recv`.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut sys::ibv_qp,
    wr: *mut sys::ibv_recv_wr,
    bad: *mut *mut sys::ibv_recv_wr,
) -> c_int {
    guard("ibv_post_recv", libc::EIO, || {
        // SAFETY: verbs.h passes the program's QP.
        let q = match unsafe { Qp::from_ibv(qp) } {
            Ok(q) => q,
            Err(e) => return crate::abi::ret_code("ibv_post_recv", Err(e)),
        };
        match q.sq.with(Recv { qp: q, wr }) {
            Ok(()) => 0,
            Err((cur, e)) => {
                if !bad.is_null() {
                    // SAFETY: the program's out pointer.
                    unsafe { *bad = cur };
                }
                crate::abi::ret_code("ibv_post_recv", Err(e))
            }
        }
    })
}
