//! RC operations with a responder in another process, over the message transport
//! ([`crate::wire`]): the requester side (send requests, complete the WQEs in order as their
//! responses come) and the responder side (execute a peer's request against this process's
//! memory and queues, on this engine's thread like every other responder action).
//!
//! Several requests of a QP are in flight at once, as on a real RC link: a WQE is fetched, sent
//! and left outstanding (`QpExec::wire_out`), and the next one follows. The responder executes
//! them in order and answers each; the requester completes them in order. When the responder
//! cannot execute one — no receive posted (RNR), its QP not ready — it discards every later
//! request of that QP (they arrive with a PSN it does not expect yet) and the requester goes
//! back to that WQE (go-back-N): it forgets the outstanding requests and fetches them again
//! from its send queue, with the same PSNs, after the RNR timer or retry gap.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gda_hal::model::{Cpl, OpKind, WqeOp};
use gda_hal::{WcOpcode, WcStatus, mmio};

use super::complete::*;
use super::data::*;
use super::recv::*;
use crate::mem::{Access, MrInner, dma_atomic_pinned, dma_copy_pinned};
use crate::state::{
    FabricInner, OpenRun, PSN_UNKNOWN, QpExec, QpInner, Responder, ResponderQp, Turn, WireBatch,
    WireWait,
};
use crate::types::{Endpoint, QpState};
use crate::wire::{
    Conn, DISCARDED, PSN_MASK, REFUSED, REQUEST_HEAD_BYTES, RNR, ReqOp, Request, Response, Wire,
    now_ns, pass_now, warn,
};
use crate::wire::{Landing, RingSpan, Vet};

/// How long a requester keeps retransmitting to a responder that does not answer — no QP of
/// that number, a QP not yet in RTR, no process listening — before `RETRY_EXC_ERR`: a NIC's
/// transport retries (`retry_cnt` × `timeout`, about half a second with the usual 7 × 67 ms)
/// cover a peer still bringing its QP up after the QP numbers were exchanged.
const RETRY_WINDOW: Duration = Duration::from_millis(1000);
/// Between two retransmissions.
const RETRY_GAP: Duration = Duration::from_millis(1);

/// Schedules a retransmission of the WQE at `ex.sq_pos`, or gives up once the retry window
/// has passed.
fn retry_or_fail(qp: &QpInner, ex: &mut QpExec, units: u32, c: Cpl) -> Step {
    let now = Instant::now();
    let first = *ex.wire_retry_since.get_or_insert(now);
    if now.duration_since(first) < RETRY_WINDOW {
        ex.hold_until = Some(now + RETRY_GAP);
        return Step::Wait;
    }
    ex.wire_retry_since = None;
    qp.set_error();
    Step::Complete(
        Cpl {
            status: WcStatus::RetryExcErr,
            ..c
        },
        units,
        true,
    )
}

/// Forgets every request in flight after `w` (which was the oldest): they are fetched again,
/// from `w`'s WQE on, with the sequence and PSN `w` had.
fn rewind(ex: &mut QpExec, w: &WireWait) {
    debug_assert_eq!(
        w.pos, ex.sq_pos,
        "the oldest request in flight is the next to complete"
    );
    if let Some(slots) = &ex.wire_slots {
        slots.clear();
    }
    ex.wire_out.clear();
    ex.wire_tx.clear();
    ex.wire_ready.clear();
    ex.ahead = 0;
    ex.seq = w.seq_before;
    ex.wire_psn = Some(w.psn);
}

/// Sends the WQE at the fetch position (`ex.sq_pos + ex.ahead`) to QP `ep` of another process:
/// `Step::Sent` once it is on its way. A result that would complete at once (a local fault,
/// no listener) waits while earlier requests are in flight, so completions stay in order.
pub(super) fn execute_wire(
    wire: &Arc<Wire>,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    kind: OpKind,
    c: Cpl,
    ep: Endpoint,
) -> Step {
    // The connection of the previous request while it lives (one lookup per connection),
    // lent to the request out of `ex` rather than cloned: an `Arc` clone and drop per request
    // were two locked operations on a line every thread of the process touches (a third of
    // this function's time in a profile of 8-byte `ib_send_bw`).
    let conn = match ex
        .wire_conn
        .take()
        .filter(|c| c.peer == ep.fabric && !c.is_dead())
    {
        Some(c) => Some(c),
        None => wire.conn_to(ep.fabric),
    };
    let step = execute_wire_on(wire, qp, ex, op, kind, c, ep, conn.as_ref());
    ex.wire_conn = conn;
    step
}

/// [`execute_wire`] on `conn`, the connection to `ep`'s fabric (`None`: nobody listens).
#[allow(clippy::too_many_arguments)]
fn execute_wire_on(
    wire: &Arc<Wire>,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: &WqeOp,
    kind: OpKind,
    mut c: Cpl,
    ep: Endpoint,
    conn: Option<&Arc<Conn>>,
) -> Step {
    let behind = ex.ahead > 0;
    let fail = |qp: &QpInner, ex: &mut QpExec, c: Cpl, status: WcStatus| {
        if behind {
            return Step::Wait;
        }
        ex.wire_retry_since = None;
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, op.units, true)
    };
    c.opcode = match kind {
        OpKind::Write => WcOpcode::RdmaWrite,
        OpKind::Send => WcOpcode::Send,
        OpKind::Read => WcOpcode::RdmaRead,
        _ => c.opcode,
    };
    // Nothing of this QP in flight: a WRITE, READ or atomic on a region its responder granted
    // is placed here and now (`crate::wire::direct`).
    if let Some(cn) = conn.filter(|_| op.imm.is_none()) {
        if !behind && ex.wire_out.is_empty() {
            if let Some(step) = place(cn, qp, ex, op, kind, c, ep) {
                return step;
            }
        } else if placeable(cn, qp, op, kind, ep) {
            // Granted, but requests sent before the grant came are in flight: this one waits
            // for them (RC's order) and is then placed. Sent on the wire instead, it would keep
            // a stream that never drains (a program keeping its send queue full) on the wire
            // for good.
            return Step::Wait;
        }
    }
    let carried = match kind {
        OpKind::Write | OpKind::Send => op
            .inline
            .as_ref()
            .filter(|d| !d.is_empty())
            .map_or(op.length(), |d| d.len() as u64),
        _ => 0,
    };
    // Frames this step has batched for the same connection count against its room too.
    let batched = ex.wire_tx.bytes.len();
    if conn
        .as_ref()
        .is_some_and(|c| !c.has_room(batched + REQUEST_HEAD_BYTES + carried as usize))
    {
        // Its send queue is full (a slow peer): try again when it drains.
        return Step::Wait;
    }
    // The local checks come first, whether the peer can be reached or not. A large gathered
    // payload goes straight from memory into the ring when it fits there now (`send_direct`);
    // otherwise, and for small ones, it is staged.
    // An inline payload is copied from the WQE straight into the ring.
    let inline = match kind {
        OpKind::Write | OpKind::Send => op.inline.as_deref().filter(|d| !d.is_empty()),
        _ => None,
    };
    let direct = matches!(kind, OpKind::Write | OpKind::Send)
        && inline.is_none()
        && op.length() >= crate::wire::DIRECT_MIN as u64;
    let mut gather = None;
    // A small gathered payload goes through a buffer on the stack (zeroed only when used: an
    // inline WRITE, the common case, needs none).
    let mut small_buf: Option<[u8; SMALL_MAX]> = None;
    let mut small_len = None;
    let payload = match kind {
        _ if inline.is_some() => Vec::new(),
        OpKind::Write | OpKind::Send if !direct && op.length() <= SMALL_MAX as u64 => {
            match stage_small(qp, op, small_buf.insert([0u8; SMALL_MAX])) {
                Ok(n) => {
                    small_len = Some(n);
                    Vec::new()
                }
                Err(s) => return fail(qp, ex, c, s),
            }
        }
        OpKind::Write | OpKind::Send if direct => match Gather::check(qp, op) {
            Ok(g) => {
                gather = Some(g);
                Vec::new()
            }
            Err(s) => return fail(qp, ex, c, s),
        },
        OpKind::Write | OpKind::Send => match stage_source(qp, op) {
            Ok(v) => v,
            Err(s) => return fail(qp, ex, c, s),
        },
        _ => Vec::new(),
    };
    // The payload that is copied from memory the engine keeps (the WQE's inline bytes, or the
    // small buffer above).
    let copied: Option<&[u8]> = inline.or(small_buf.as_ref().zip(small_len).map(|(b, n)| &b[..n]));
    let carried = match (&gather, copied) {
        (Some(_), _) => op.length(),
        (None, Some(d)) => d.len() as u64,
        (None, None) => payload.len() as u64,
    };
    let Some(conn) = conn else {
        if behind {
            return Step::Wait;
        }
        // Nobody listens for that fabric (yet, or any more): retransmit until the retries run out.
        return retry_or_fail(qp, ex, op.units, c);
    };
    let (reqop, len) = match kind {
        OpKind::Write => (ReqOp::Write, carried),
        OpKind::Send => (ReqOp::Send, carried),
        OpKind::Read => (ReqOp::Read, op.length()),
        OpKind::Atomic => (ReqOp::Atomic, 0),
        OpKind::Nop => return Step::Complete(c, op.units, false),
    };
    // ORDERING: Acquire pairs with `Qp::ready_with_psn`'s Release (it precedes RTS).
    let psn = *ex
        .wire_psn
        .get_or_insert_with(|| qp.sq_psn.load(Ordering::Acquire));
    ex.wire_seq += 1;
    let mut req = Request {
        dst_nic: ep.nic,
        dst_qpn: ep.qpn,
        src_nic: qp.nic.id,
        src_qpn: qp.qpn,
        seq: ex.wire_seq,
        op: reqop,
        imm: op.imm,
        rkey: op.remote.rkey,
        psn,
        raddr: op.remote.addr,
        len,
        atomic: if kind == OpKind::Atomic {
            op.atomic
        } else {
            None
        },
        payload,
    };
    let payload = std::mem::take(&mut req.payload);
    let max_response = req.response_payload();
    // A frame whose payload is copied anyway (inline, small, none) joins this step's batch for
    // its connection: one lock, one copy into the ring and one look at the peer's nap for
    // all of them (`flush_batch`, at the end of the step). Others go now, after the batch.
    let small = REQUEST_HEAD_BYTES + copied.map_or(payload.len(), <[u8]>::len) <= BATCH_FRAME_MAX;
    if gather.is_none() && small {
        if ex
            .wire_tx
            .conn
            .as_ref()
            .is_some_and(|b| !Arc::ptr_eq(b, conn))
        {
            flush_batch(wire, qp, ex);
        }
        let tx = &mut ex.wire_tx;
        tx.conn.get_or_insert_with(|| conn.clone());
        let seq = req.seq;
        // A READ of at least `DIRECT_MIN` bytes: its data goes from the ring to its buffers.
        let land = (kind == OpKind::Read && len >= crate::wire::DIRECT_MIN as u64)
            .then(|| landing(qp, op));
        tx.slots.push((seq, max_response, land));
        // A small WRITE without immediate that follows the batch's last WRITE joins it in a
        // WRITE run (an entry, not a frame); another starts a frame that the next may join.
        let small_write = copied.filter(|d| {
            kind == OpKind::Write && req.imm.is_none() && d.len() <= crate::wire::RUN_DATA_MAX
        });
        let follows = tx.run.as_ref().is_some_and(|r| {
            r.next == (req.seq, req.psn)
                && r.next.0.wrapping_sub(r.head.seq) < crate::wire::RUN_ENTRIES_MAX
        });
        match small_write {
            Some(d) if follows && open_run(tx) => {
                crate::wire::push_run_entry(&mut tx.bytes, req.raddr, req.rkey, d);
                if let Some(r) = tx.run.as_mut() {
                    r.next = (req.seq + 1, req.psn.wrapping_add(1) & PSN_MASK);
                }
            }
            Some(d) => {
                close_run(tx);
                let at = tx.bytes.len();
                tx.bytes.extend_from_slice(&req.encode_head_for(d.len()));
                tx.bytes.extend_from_slice(d);
                tx.run = Some(OpenRun {
                    at,
                    next: (req.seq + 1, req.psn.wrapping_add(1) & PSN_MASK),
                    head: req,
                    single: true,
                });
            }
            None => {
                close_run(tx);
                tx.bytes
                    .extend_from_slice(&req.encode_head_for(carried as usize));
                tx.bytes.extend_from_slice(copied.unwrap_or(&payload));
            }
        }
        crate::wire::pool::recycle(payload);
        if tx.bytes.len() >= BATCH_BYTES {
            flush_batch(wire, qp, ex);
        }
        push_waiting(ex, seq, conn, op, c, psn);
        not_placing(qp);
        return Step::Sent;
    }
    flush_batch(wire, qp, ex);
    let head = req.encode_head_for(carried as usize);
    // The slot first: a response can arrive before `send` returns.
    ex.wire_slots
        .get_or_insert_with(|| wire.slots((qp.nic.id, qp.qpn)))
        .expect(req.seq, conn.id, max_response);
    let unexpect = |ex: &QpExec| {
        if let Some(s) = &ex.wire_slots {
            s.unexpect(req.seq);
        }
    };
    let sent = match gather.as_mut() {
        None => match copied {
            Some(d) => conn.send_copy(&head, d),
            None => conn.send(&head, payload),
        },
        Some(g) => {
            let fill = |dst, n| {
                // SAFETY: `send_direct` hands the fill a ring piece of `n` writable bytes.
                unsafe { g.copy(dst, n) }
            };
            match conn.send_direct(&head, carried as usize, fill) {
                Ok(true) => true,
                // No room in the ring now: staged after all (the checks run again).
                Ok(false) => match stage_source(qp, op) {
                    Ok(v) => conn.send(&head, v),
                    Err(s) => {
                        unexpect(ex);
                        return fail(qp, ex, c, s);
                    }
                },
                // A region deregistered while it was read: nothing was sent.
                Err(e) => {
                    unexpect(ex);
                    return fail(qp, ex, c, local_fault(e));
                }
            }
        }
    };
    if !sent {
        // The connection died: what is in flight on it fails the same way (see `reap`).
        if behind {
            // Not in flight: its slot goes (a slot left at the table's front would keep the
            // retransmission's response from being taken).
            unexpect(ex);
            return Step::Wait;
        }
        if let Some(s) = &ex.wire_slots {
            s.clear();
        }
        return retry_or_fail(qp, ex, op.units, c);
    }
    push_waiting(ex, req.seq, conn, op, c, psn);
    not_placing(qp);
    Step::Sent
}

/// The length and right `op` needs to be placed (`None`: not an operation a grant serves).
fn placement(op: &WqeOp, kind: OpKind) -> Option<(u64, crate::wire::direct::Right)> {
    use crate::wire::direct::Right;
    let inline = op.inline.as_deref().filter(|d| !d.is_empty());
    let (len, need) = match kind {
        OpKind::Write => (inline.map_or(op.length(), |d| d.len() as u64), Right::Write),
        OpKind::Read => (op.length(), Right::Read),
        // Aligned, as the responder requires (a misaligned one gets its error there).
        OpKind::Atomic => match op.atomic {
            Some((_, w)) if op.remote.addr % u64::from(w) == 0 => (u64::from(w), Right::Atomic),
            _ => return None,
        },
        _ => return None,
    };
    (len > 0).then_some((len, need))
}

/// The grant `qp` holds that covers `op` (`crate::wire::direct`), with where `op` lands in
/// it, its gate, and the length and right `op` needs.
fn covering<'c>(
    conn: &'c Conn,
    qp: &QpInner,
    op: &WqeOp,
    kind: OpKind,
    ep: Endpoint,
) -> Option<(
    Arc<crate::wire::direct::Grant>,
    *mut u8,
    &'c crate::wire::Gate,
    u64,
    crate::wire::direct::Right,
)> {
    let (len, need) = placement(op, kind)?;
    let grant = conn.grant((qp.nic.id, qp.qpn, op.remote.rkey))?;
    let at = grant.at((ep.nic, ep.qpn), op.remote.addr, len, need)?;
    let gate = conn.gate(grant.gate)?;
    Some((grant, at, gate, len, need))
}

/// Whether `place` would take `op` now: its QP holds an open grant that covers it.
fn placeable(conn: &Conn, qp: &QpInner, op: &WqeOp, kind: OpKind, ep: Endpoint) -> bool {
    covering(conn, qp, op, kind, ep)
        .is_some_and(|(g, _, gate, ..)| gate.state.load(Ordering::Acquire) == g.value)
}

/// Places the WRITE or READ `op` through the grant its QP holds for the region (see
/// `crate::wire::direct`): `None` when there is none, it does not cover `op`, or it was
/// withdrawn, or a local check fails — the request then goes on the wire, which answers
/// each case as it should.
fn place(
    conn: &Conn,
    qp: &QpInner,
    ex: &mut QpExec,
    op: &WqeOp,
    kind: OpKind,
    c: Cpl,
    ep: Endpoint,
) -> Option<Step> {
    use crate::wire::direct::Right;
    let (grant, at, gate, len, need) = covering(conn, qp, op, kind, ep)?;
    // ORDERING: SeqCst pairs with `Conn::close_gate`: either it sees this placement counted
    // and waits for it, or this load sees the gate closed.
    gate.inflight.fetch_add(1, Ordering::SeqCst);
    struct Out<'a>(&'a std::sync::atomic::AtomicU32);
    impl Drop for Out<'_> {
        fn drop(&mut self) {
            // ORDERING: Release: the bytes placed happen-before the responder's deregistration
            // that waits for this count.
            self.0.fetch_sub(1, Ordering::Release);
        }
    }
    let out = Out(&gate.inflight);
    if gate.state.load(Ordering::SeqCst) != grant.value {
        conn.forget_grant((qp.nic.id, qp.qpn, op.remote.rkey), &grant);
        return None;
    }
    let n = len as usize;
    // The copy; an atomic's original value.
    let old = match need {
        Right::Write => {
            match op.inline.as_deref().filter(|d| !d.is_empty()) {
                // SAFETY: `at` has `n` bytes of the granted region (checked by `Grant::at`), a
                // mapping the grant keeps; the inline bytes are the engine's.
                Some(d) => unsafe { mmio::dma_copy(at, d.as_ptr(), n) },
                None => {
                    let mut g = Gather::check(qp, op).ok()?;
                    // SAFETY: as above; the gather's local regions are pinned while read.
                    unsafe { g.copy(at, n) }.ok()?;
                }
            }
            mmio::dma_publish();
            None
        }
        Right::Read => {
            // SAFETY: `at` has `n` readable bytes of the granted region (checked).
            unsafe { land_read(&qp.nic, qp.pd, &op.sges, &[(at.cast_const(), n)]) }.ok()?;
            mmio::dma_publish();
            None
        }
        Right::Atomic => {
            let (aop, width) = op.atomic?;
            // SAFETY: `at` is an aligned operand of `width` bytes of the granted region
            // (checked), updated only atomically, by every process that reaches it.
            Some(unsafe { mmio::dma_atomic_rmw(at as u64, width, |v| aop.apply(v, width)) }?)
        }
    };
    // Decided after the copy too: a gate its responder closed without waiting for this
    // placement to end (`ABANDONED`: it gave up waiting, the QP left service on its engine
    // thread, the memory went back to the program) means the bytes may not have reached the
    // responder's memory, or reached it after its QP left service — an error, as from a peer
    // that went away, never success. (Closed while it waits for this one, 0, is fine: the
    // responder goes on only once this placement is counted out.)
    // ORDERING: SeqCst pairs with `Conn::close_gate`'s store of `ABANDONED`.
    let after = gate.state.load(Ordering::SeqCst);
    drop(out);
    if after != grant.value && after != 0 {
        conn.forget_grant((qp.nic.id, qp.qpn, op.remote.rkey), &grant);
        qp.set_error();
        let c = Cpl {
            status: WcStatus::RetryExcErr,
            ..c
        };
        return Some(Step::Complete(c, op.units, true));
    }
    let step = match old {
        // (`land_atomic` publishes the result before its completion.)
        Some(old) => land_atomic(qp, ex, op, op.units, c, old),
        None if need == Right::Read => Step::Complete(
            Cpl {
                byte_len: n as u32,
                ..c
            },
            op.units,
            false,
        ),
        None => Step::Complete(c, op.units, false),
    };
    conn.placed.fetch_add(1, Ordering::Relaxed);
    if !qp.placing.load(Ordering::Relaxed) {
        qp.placing.store(true, Ordering::Relaxed);
    }
    Some(step)
}

/// The largest frame a step batches (`flush_batch`).
const BATCH_FRAME_MAX: usize = 2048;
/// A step's batch is written once it holds this much.
const BATCH_BYTES: usize = 16 << 10;

/// Notes that `qp`'s last operation went on the wire (`QpInner::placing`).
fn not_placing(qp: &QpInner) {
    if qp.placing.load(Ordering::Relaxed) {
        qp.placing.store(false, Ordering::Relaxed);
    }
}

/// Keeps request `seq` (sent, or in this step's batch) in flight: what completing its WQE
/// needs, its completion, where to go back to.
fn push_waiting(ex: &mut QpExec, seq: u64, conn: &Conn, op: &WqeOp, c: Cpl, psn: u32) {
    ex.wire_out.push_back(WireWait {
        seq,
        pos: ex.sq_pos + ex.ahead,
        // Outside a pass (a posting thread's hook) no clock is read: the first pass that finds
        // the request unanswered starts its stall timer (`reap`).
        since_ns: pass_now().unwrap_or(0),
        conn: conn.id,
        units: op.units,
        signaled: op.signaled,
        packets: op.packets,
        op: matches!(op.kind, Some(OpKind::Read | OpKind::Atomic))
            .then(|| waiting_op(&mut ex.spare_ops, op)),
        cpl: c,
        seq_before: ex.seq,
        psn,
    });
    ex.wire_psn = Some(psn.wrapping_add(1) & PSN_MASK);
}

/// Writes the frames batched on `qp` (`ExecWire::wire_tx`) into their connection: the slots
/// of their requests first (a response can come as soon as a frame is out), then the frames
/// in one piece. A connection that died meanwhile takes them with it: their requests are in
/// flight, and `reap` sends them again or fails them as it does any request it carried.
pub(super) fn flush_batch(wire: &Wire, qp: &QpInner, ex: &mut QpExec) {
    let Some(conn) = ex.wire_tx.conn.take() else {
        return;
    };
    let tx = &mut ex.wire_tx;
    close_run(tx);
    if !tx.bytes.is_empty() {
        ex.wire_slots
            .get_or_insert_with(|| wire.slots((qp.nic.id, qp.qpn)))
            .expect_all(conn.id, tx.slots.drain(..));
        conn.send_copy(&[], &tx.bytes);
    }
    tx.bytes.clear();
    tx.slots.clear();
}

/// Makes the batch's open WRITE (`WireBatch::run`) a WRITE run that more WRITEs can join: a
/// WRITE frame of its own (`single`) becomes a run of one entry, its data moved up by an
/// entry's head (the run's own head is written when it closes, `close_run`). `false`, and the
/// run forgotten, if the batch does not end with that frame (`execute_wire` never leaves it so).
fn open_run(tx: &mut WireBatch) -> bool {
    let Some(r) = tx.run.as_mut() else {
        return false;
    };
    if !r.single {
        return true;
    }
    let start = r.at + REQUEST_HEAD_BYTES;
    let n = tx.bytes.len().wrapping_sub(start);
    if tx.bytes.len() < start || n > crate::wire::RUN_DATA_MAX {
        tx.run = None;
        return false;
    }
    let entry = start + crate::wire::RUN_ENTRY_HEAD;
    // The zeros past the old end are the padding after the data once it has moved (by the
    // entry's head: the data's new place is past its old end, its old place the head's).
    tx.bytes.resize(entry + n.next_multiple_of(8), 0);
    tx.bytes.copy_within(start..start + n, entry);
    tx.bytes[start..entry].copy_from_slice(&crate::wire::run_entry_head(
        r.head.raddr,
        r.head.rkey,
        n,
    ));
    r.single = false;
    true
}

/// Closes the batch's open WRITE run, if any: its head gets the length of its entries. (A
/// WRITE that no other joined is a frame of its own already.)
fn close_run(tx: &mut WireBatch) {
    if let Some(r) = tx.run.take().filter(|r| !r.single) {
        let len = tx.bytes.len().saturating_sub(r.at + REQUEST_HEAD_BYTES);
        let head = Request {
            op: ReqOp::WriteRun,
            rkey: 0,
            raddr: 0,
            len: len as u64,
            ..r.head
        }
        .encode_head_for(len);
        if let Some(at) = tx.bytes.get_mut(r.at..r.at + REQUEST_HEAD_BYTES) {
            at.copy_from_slice(&head);
        }
    }
}

/// What a READ or an atomic in flight keeps of its WQE (where its response's data lands):
/// everything but an inline payload, in a box the QP used before (`spare`), so keeping it
/// allocates nothing in the steady state.
// The boxes themselves are what is kept: each moves into a request's `WireWait` as a pointer.
#[allow(clippy::vec_box)]
fn waiting_op(spare: &mut Vec<Box<WqeOp>>, op: &WqeOp) -> Box<WqeOp> {
    let mut b = spare.pop().unwrap_or_default();
    let w = &mut *b;
    w.kind = op.kind;
    w.signaled = op.signaled;
    w.fence = op.fence;
    w.solicited = op.solicited;
    w.units = op.units;
    w.counter = op.counter;
    w.hw_opcode = op.hw_opcode;
    w.remote = op.remote;
    w.imm = op.imm;
    w.sges.clear();
    w.sges.extend_from_slice(&op.sges);
    w.inline = None;
    w.atomic = op.atomic;
    w.packets = op.packets;
    b
}

/// Keeps the box of a request's WQE for a later request: as many as the send queue can have
/// in flight (what a stream of requests that fills the queue needs, and no more than it held).
fn recycle_op(qp: &QpInner, ex: &mut QpExec, op: Box<WqeOp>) {
    if ex.spare_ops.len() < qp.init.sq_units as usize {
        ex.spare_ops.push(op);
    }
}

/// Completes the requests of `qp` whose responses have come, oldest first; whether anything
/// happened. Each completion goes to `retire` (the engine's common bookkeeping).
pub(super) fn reap(
    wire: &Wire,
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    mut retire: impl FnMut(&mut QpExec, Cpl, u32, bool, bool, Option<u32>),
) -> bool {
    let mut work = false;
    while let Some(front) = ex.wire_out.front_mut() {
        // The responses that have come, taken from the slot table a run at a time (one lock
        // for all of them), from the oldest request in flight on.
        if ex.wire_ready.front().is_none_or(|r| r.seq != front.seq) {
            ex.wire_ready.clear();
            if let Some(s) = &ex.wire_slots {
                s.take_answered(front.seq, &mut ex.wire_ready);
            }
        }
        let resp = match ex.wire_ready.front() {
            Some(r) if r.seq == front.seq => ex.wire_ready.pop_front(),
            _ => None,
        };
        let Some(resp) = resp else {
            let conn = ex
                .wire_conn
                .as_ref()
                .filter(|c| c.id == front.conn && !c.is_dead());
            let dead = conn.is_none();
            // Stalls are timed by passes only (their clock): a request sent by a posting
            // thread's hook starts its timer at the first pass that finds it unanswered.
            let stalled = conn.is_some_and(|c| {
                pass_now().is_some_and(|now| {
                    if front.since_ns == 0 {
                        front.since_ns = now;
                    }
                    c.idle(front.since_ns) > wire.timeout()
                })
            });
            if !(dead || stalled) {
                break;
            }
            let Some(w) = ex.wire_out.pop_front() else {
                break;
            };
            rewind(ex, &w);
            work = true;
            if dead {
                // Not kept for the next request (it holds the segment and descriptors).
                ex.wire_conn = None;
                // Gone: retransmit (to a new connection) until the retries run out.
                if let Step::Complete(c, u, a) = retry_or_fail(qp, ex, w.units, w.cpl) {
                    retire(ex, c, u, a, w.signaled, Some(w.packets));
                }
            } else {
                // Bytes stopped moving for the wire timeout: a stopped peer.
                ex.wire_retry_since = None;
                qp.set_error();
                let c = Cpl {
                    status: WcStatus::RetryExcErr,
                    ..w.cpl
                };
                retire(ex, c, w.units, true, w.signaled, Some(w.packets));
            }
            break;
        };
        let Some(w) = ex.wire_out.pop_front() else {
            break;
        };
        ex.ahead -= u64::from(w.units);
        work = true;
        let again = |ex: &mut QpExec| rewind(ex, &w);
        let step = match resp.status {
            // The responder has no such QP, or not in RTR/RTS yet: no ACK, so retransmit.
            s if s == WcStatus::RetryExcErr as u32 => {
                again(ex);
                retry_or_fail(qp, ex, w.units, w.cpl)
            }
            // Not from its connected QP, or out of sequence: retransmitting cannot help.
            REFUSED | DISCARDED => {
                again(ex);
                ex.wire_retry_since = None;
                qp.set_error();
                Step::Complete(
                    Cpl {
                        status: WcStatus::RetryExcErr,
                        ..w.cpl
                    },
                    w.units,
                    true,
                )
            }
            // Not executed; neither is anything sent after it: send it again after the timer.
            RNR => {
                again(ex);
                let s = rnr(qp, ex, w.cpl, w.units);
                if matches!(s, Step::Wait) {
                    ex.hold_until = ex.rnr_next;
                }
                s
            }
            _ => {
                ex.wire_retry_since = None;
                match finish(qp, ex, w.op.as_deref(), w.units, w.cpl, resp) {
                    Step::Complete(c, u, a) => {
                        let failed = !c.status.is_ok();
                        // Sequence and PSN moved on when it was sent.
                        retire(ex, c, u, a, w.signaled, None);
                        if failed {
                            // The QP is in error: what was sent behind it (discarded by the
                            // responder) is fetched again and flushed.
                            if let Some(next) = ex.wire_out.pop_front() {
                                rewind(ex, &next);
                            }
                            break;
                        }
                        if let Some(op) = w.op {
                            recycle_op(qp, ex, op);
                        }
                        continue;
                    }
                    s => s,
                }
            }
        };
        match step {
            Step::Complete(c, u, a) => {
                retire(ex, c, u, a, w.signaled, Some(w.packets));
            }
            Step::Wait | Step::Sent => {}
        }
        // After a rewind nothing is outstanding any more.
        break;
    }
    work
}

/// Completes a WQE from its response.
fn finish(
    qp: &Arc<QpInner>,
    ex: &mut QpExec,
    op: Option<&WqeOp>,
    units: u32,
    mut c: Cpl,
    mut resp: Response,
) -> Step {
    let fail = |qp: &QpInner, c: Cpl, status: WcStatus| {
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, units, true)
    };
    ex.rnr_attempts = 0;
    if resp.status != WcStatus::Success as u32 {
        let s = WcStatus::ALL
            .into_iter()
            .find(|s| *s as u32 == resp.status)
            .unwrap_or(WcStatus::RemOpErr);
        return fail(qp, c, s);
    }
    match op.map(|o| (o.kind, o)) {
        // Its data is in place already (`landing`).
        Some((Some(OpKind::Read), op)) if resp.landed => c.byte_len = op.length() as u32,
        Some((Some(OpKind::Read), op)) => {
            c.byte_len = resp.payload.len() as u32;
            let data = [(resp.payload.as_ptr(), resp.payload.len())];
            // SAFETY: the response's payload is this thread's buffer.
            if let Err(s) = unsafe { land_read(&qp.nic, qp.pd, &op.sges, &data) } {
                return fail(qp, c, s);
            }
            crate::wire::pool::recycle(std::mem::take(&mut resp.payload));
        }
        Some((Some(OpKind::Atomic), op)) => {
            let mut old = [0u8; 8];
            let n = resp.payload.len().min(8);
            old[..n].copy_from_slice(&resp.payload[..n]);
            return land_atomic(qp, ex, op, units, c, u64::from_le_bytes(old));
        }
        _ => {}
    }
    Step::Complete(c, units, false)
}

/// Completes the atomic `op` whose original value at the responder was `old`: the value (as
/// the model returns it) goes to its local buffer, checked for LOCAL_WRITE and pinned while
/// written; a local fault is its completion's status.
fn land_atomic(
    qp: &QpInner,
    ex: &mut QpExec,
    op: &WqeOp,
    units: u32,
    mut c: Cpl,
    old: u64,
) -> Step {
    let fail = |qp: &QpInner, c: Cpl, status: WcStatus| {
        qp.set_error();
        Step::Complete(Cpl { status, ..c }, units, true)
    };
    let Some((aop, width)) = op.atomic else {
        return fail(qp, c, WcStatus::LocQpOpErr);
    };
    c.opcode = super::atomic::wc_opcode(&aop);
    c.byte_len = width;
    let Some(local) = op.sges.first() else {
        return fail(qp, c, WcStatus::LocQpOpErr);
    };
    // The same result buffer over and over: its key check is cached.
    let m = match qp.nic.mrs.check_local_cached(
        &mut ex.lcache,
        qp.pd,
        local.lkey,
        local.addr,
        u64::from(width),
        Access::LOCAL_WRITE,
    ) {
        Ok(m) => m,
        Err(e) => return fail(qp, c, local_fault(e)),
    };
    let (bytes, n) = qp.model().atomic_result(old, width);
    // SAFETY: checked above (LOCAL_WRITE, `width` bytes), pinned while written.
    let landed = unsafe { dma_copy_pinned(&[m], local.addr as *mut u8, bytes.as_ptr(), n) };
    mmio::dma_publish();
    if let Err(e) = landed {
        return fail(qp, c, local_fault(e));
    }
    Step::Complete(c, units, false)
}

/// Where the data of the READ `op` of `qp` goes when its response comes ([`Landing`]): its
/// scatter entries, checked for LOCAL_WRITE and written while pinned, straight from the ring.
/// The checks run when the response comes, as `finish` runs them for a buffered payload, so a
/// region deregistered after the READ was sent is a local protection error either way.
fn landing(qp: &QpInner, op: &WqeOp) -> Landing {
    let (nic, pd) = (qp.nic.clone(), qp.pd);
    let sges: Vec<_> = op.sges.iter().filter(|s| s.length > 0).copied().collect();
    // SAFETY: the span is the response's payload in the ring, valid until it is consumed
    // (after this returns).
    Box::new(move |span: &RingSpan| unsafe { land_read(&nic, pd, &sges, &span.pieces) })
}

/// Writes a READ's data, given in pieces (its response's buffer, or the ring's span), into its
/// scatter entries `sges` on `nic`: each checked for LOCAL_WRITE now (a region deregistered
/// since the READ was sent is a local protection error) and pinned while written. `Err` is the
/// completion status of a local fault.
///
/// # Safety
/// Each piece is readable for its length until this returns.
unsafe fn land_read(
    nic: &crate::state::NicInner,
    pd: u32,
    sges: &[gda_hal::Sge],
    data: &[(*const u8, usize)],
) -> Result<(), WcStatus> {
    let sges = || sges.iter().filter(|s| s.length > 0);
    let keep = sges()
        .map(|s| {
            nic.mrs
                .check_local(pd, s.lkey, s.addr, u64::from(s.length), Access::LOCAL_WRITE)
                .map_err(local_fault)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let targets = sges()
        .zip(&keep)
        .map(|(s, mr)| (s.addr as *mut u8, s.length as usize, &**mr));
    // SAFETY: each scatter entry was checked against a local region granting LOCAL_WRITE; the
    // pieces are readable (the contract).
    unsafe { copy_pieces(data, targets) }.map_err(local_fault)
}

/// How long a pass serves the requests of its connections, at most. A pass reads the clock
/// once (`PassClock`): a pass that served a peer streaming requests for as long as they kept
/// coming (64-KiB READs, each answered as the peer consumed the last) ran for seconds with its
/// clock stopped, so the connection's progress stamps fell behind and the next pass found it
/// "idle" for the wire timeout and closed it — `ib_read_bw -D 2` failed with `RETRY_EXC_ERR` in
/// about one run of twenty. Bounded, a pass also leaves the other connections their turn.
const SERVE_PASS_MAX_NS: u64 = 10_000_000;
/// Requests served between two reads of the clock against `SERVE_PASS_MAX_NS`.
const SERVE_CLOCK_EVERY: u32 = 64;

/// The data a coalesced acknowledgement covers at most before it is sent.
const ACK_EVERY_BYTES: u64 = 64 << 10;

/// Serves this process's connections: writes what waits in their send queues, executes the
/// requests peers sent (in order, each answered) and hands responses to their requesters;
/// whether anything moved. The turn makes it one thread at a time (the requests of a
/// connection execute in order) and lends its scratch list.
pub(super) fn serve(f: &FabricInner, turn: &mut Turn<'_>) -> bool {
    let (Some(wire), Some(conns)) = (&f.wire, turn.conns()) else {
        return false;
    };
    wire.conns(conns);
    // When the pass began (its clock), against which serving is bounded.
    let started = now_ns();
    let mut did = false;
    // The responder QP of the previous request and its key check (a run of requests mostly
    // names one QP and one region).
    let mut responder = f.responder.lock().unwrap_or_else(|e| e.into_inner());
    let responder = &mut *responder;
    // A QP destroyed since the last pass is let go now (its handle waits for every reference
    // to go), whether or not a request names it.
    responder.forget_stale(f);
    for c in conns.list.iter() {
        did |= c.flush();
        // Successes without payload of consecutive requests of one QP go back as one
        // acknowledgement (as RC coalesces ACKs), sent before any other response on the
        // connection, at the end of the scan, and once it covers `ACK_EVERY_BYTES` of data
        // (so a requester streaming large messages is not left waiting for a whole scan).
        let mut acks = Acks::default();
        // A request that found no receive is tried again first.
        let mut next = c.take_held().map(|(r, since)| (r, None, None, since));
        // Once the pass has served for `SERVE_PASS_MAX_NS` (the clock read every
        // `SERVE_CLOCK_EVERY` requests), the rest waits in the ring for the next pass.
        let mut taken = 0u32;
        while let Some((mut req, in_ring, pre, since)) = next.or_else(|| {
            taken = taken.wrapping_add(1);
            if taken % SERVE_CLOCK_EVERY == 0
                && crate::wire::read_now_ns().saturating_sub(started) > SERVE_PASS_MAX_NS
            {
                return None;
            }
            wire.take(c, &mut did, |r| vet(f, c.peer, r, responder))
                .map(|(r, span, pre)| (r, span, pre, now_ns()))
        }) {
            if req.op == ReqOp::WriteRun {
                did = true;
                next = None;
                if let Some(span) = in_ring {
                    // (Runs come out of the ring whole; a span would be given back unread.)
                    c.release(span);
                }
                serve_run(f, c, &req, responder, &mut acks);
                crate::wire::pool::recycle(std::mem::take(&mut req.payload));
                continue;
            }
            let mut read_src = None;
            let (status, payload) = match pre {
                // Vetted before its payload and refused: answered, never executed.
                Some(s) if s != WcStatus::Success as u32 => (s, Vec::new()),
                // A WRITE streamed into its region as it came (`Some(Success)`): checked
                // again, executed without its payload.
                _ => respond(
                    f,
                    c.peer,
                    &req,
                    in_ring,
                    pre.is_some(),
                    &mut read_src,
                    responder,
                ),
            };
            if status == WcStatus::Success as u32 {
                offer_grant(f, c, responder, &req);
            }
            // No receive posted yet: held (below), with its payload (not one streamed: its
            // requester sends it again).
            let hold = status == RNR
                && pre.is_none()
                && now_ns().saturating_sub(since) < RNR_TIMER.as_nanos() as u64;
            if let Some(span) = in_ring {
                if hold {
                    req.payload = span.copy_out();
                }
                // Copied to its destination (or refused, or kept): the ring's bytes are free
                // again.
                c.release(span);
            }
            if hold {
                // No receive posted yet: hold it (and what follows on this connection) for
                // as long as the requester's RNR timer would make it wait anyway. A program
                // that posts its receive meanwhile gets the message at once, not after a
                // NAK, the timer and a retransmission.
                c.hold(req, since);
                break;
            }
            did = true;
            next = None;
            let resp = req.answer(status);
            let req_bytes = req.len;
            let is_atomic = req.op == ReqOp::Atomic;
            crate::wire::pool::recycle(std::mem::take(&mut req.payload));
            drop(req);
            if let Some((mr, addr, len)) = read_src {
                acks.flush(c);
                send_read(c, resp, &mr, addr, len);
                continue;
            }
            if status == WcStatus::Success as u32 && payload.is_empty() {
                acks.push(c, resp, None, req_bytes);
                continue;
            }
            if status == WcStatus::Success as u32 && payload.len() == 8 && is_atomic {
                acks.push(c, resp, Some(payload), 0);
                continue;
            }
            acks.flush(c);
            c.send(&resp.encode_head_for(payload.len()), payload);
        }
        acks.flush(c);
    }
    did
}

/// The response a responder is coalescing on a connection (see `serve`): an acknowledgement
/// of successes without payload, or the original values of successful atomics (8 bytes each),
/// of consecutive requests of one QP.
#[derive(Default)]
struct Acks {
    ack: Option<Response>,
    /// The data of the requests it covers.
    bytes: u64,
}

impl Acks {
    /// Sends the coalesced response, if any.
    fn flush(&mut self, c: &Conn) {
        if let Some(mut a) = self.ack.take() {
            let payload = std::mem::take(&mut a.payload);
            c.send(&a.encode_head_for(payload.len()), payload);
        }
        self.bytes = 0;
    }

    /// Whether `resp` follows the last request the coalesced response covers, which has room
    /// for it and is an acknowledgement (`values` false) or a run of atomics' values.
    fn extends(&self, resp: &Response, values: bool) -> bool {
        self.ack.as_ref().is_some_and(|a| {
            (a.dst_nic, a.dst_qpn) == (resp.dst_nic, resp.dst_qpn)
                && a.seq.wrapping_add(1) == resp.seq
                && a.count < crate::wire::MAX_COALESCED
                && a.payload.len() == if values { 8 * a.count as usize } else { 0 }
        })
    }

    /// A success of a request of `bytes` bytes without payload (`value` none), or an
    /// atomic's with its original value (8 bytes): joins the coalesced response when it
    /// follows the last request that covers, of the same kind, else starts the next one.
    fn push(&mut self, c: &Conn, resp: Response, value: Option<Vec<u8>>, bytes: u64) {
        if self.extends(&resp, value.is_some()) {
            if let Some(a) = self.ack.as_mut() {
                a.seq = resp.seq;
                a.count += 1;
                if let Some(v) = &value {
                    a.payload.extend_from_slice(v);
                }
            }
        } else {
            self.flush(c);
            self.ack = Some(Response {
                payload: value.unwrap_or_default(),
                ..resp
            });
        }
        self.bytes += bytes;
        if self.bytes >= ACK_EVERY_BYTES {
            self.flush(c);
        }
    }
}

/// Executes a WRITE run (checked whole when it was decoded): each entry as the WRITE it stands
/// for, answered as that WRITE would be, until one does not succeed — that one is answered and
/// the rest dropped (the requester goes back to it; behind it they would be discarded).
fn serve_run(
    f: &FabricInner,
    c: &Arc<Conn>,
    run: &Request,
    responder: &mut Responder,
    acks: &mut Acks,
) {
    for (i, e) in crate::wire::run_entries(&run.payload).enumerate() {
        let Ok(e) = e else {
            // Not reached: `Request::decode` refused the frame.
            break;
        };
        let w = Request {
            dst_nic: run.dst_nic,
            dst_qpn: run.dst_qpn,
            src_nic: run.src_nic,
            src_qpn: run.src_qpn,
            seq: run.seq.wrapping_add(i as u64),
            op: ReqOp::Write,
            imm: None,
            rkey: e.rkey,
            psn: run.psn.wrapping_add(i as u32) & PSN_MASK,
            raddr: e.raddr,
            len: e.data.len() as u64,
            atomic: None,
            payload: Vec::new(),
        };
        // The entry's data, where the run's payload holds it (a piece of this process's
        // memory, read as a ring's would be).
        let data = RingSpan {
            pieces: [(e.data.as_ptr(), e.data.len()), (std::ptr::null(), 0)],
        };
        let (status, _) = respond(f, c.peer, &w, Some(data), false, &mut None, responder);
        let resp = w.answer(status);
        if status == WcStatus::Success as u32 {
            offer_grant(f, c, responder, &w);
            acks.push(c, resp, None, w.len);
        } else {
            acks.flush(c);
            c.send_copy(&resp.encode_head_for(0), &[]);
            break;
        }
    }
}

/// After a WRITE or READ from a peer's QP succeeded: offers that QP direct placement into
/// the region it reached, if the region can be granted and was not offered to it before
/// (`crate::wire::direct`).
fn offer_grant(f: &FabricInner, c: &Arc<Conn>, responder: &mut Responder, req: &Request) {
    let (need, len) = match (req.op, req.atomic) {
        (ReqOp::Write, _) => (Access::REMOTE_WRITE, req.len),
        (ReqOp::Read, _) => (Access::REMOTE_READ, req.len),
        (ReqOp::Atomic, Some((_, w))) => (Access::REMOTE_ATOMIC, u64::from(w)),
        _ => return,
    };
    if len == 0 {
        return;
    }
    let key = (req.src_nic, req.src_qpn, req.dst_nic, req.dst_qpn, req.rkey);
    let Some((rqp, _, _, keys)) = responder.lookup(f, (req.dst_nic, req.dst_qpn)) else {
        return;
    };
    if rqp.nic.shared_regions.load(Ordering::Relaxed) == 0 || c.offered(key) {
        return;
    }
    if let Ok(mr) = rqp
        .nic
        .mrs
        .check_remote_cached(keys, rqp.pd, req.rkey, req.raddr, len, need)
    {
        c.offer(key, mr, &rqp.grants, &rqp.nic.port_up);
    }
}

/// What a responder does with a request before looking at it.
enum Admission {
    /// From its connected QP at the PSN it expects: execute it.
    Take,
    /// From its connected QP, but past the PSN it expects (sent behind one that was not
    /// executed): drop it; the requester sends it again.
    Discard,
    /// From anyone else, or an old PSN: refuse it (and say why).
    Refuse(String),
}

/// What a responder says of a request from fabric `from` whose payload has not arrived whole,
/// before taking any of it (`Conn::take`): the checks `respond` makes first — a QP in
/// service, connected to the request's QP, at the PSN it expects — and for a WRITE the key,
/// range and right, so a peer cannot make this process hold a payload it may not send (a
/// gigabyte announced to a QP that is not its own). Changes nothing: the request is checked
/// again when it executes.
fn vet(f: &FabricInner, from: u64, req: &Request, cache: &mut Responder) -> Vet {
    let Some((rqp, _, remote, _)) =
        cache
            .lookup(f, (req.dst_nic, req.dst_qpn))
            .filter(|(q, state, ..)| {
                matches!(state, QpState::Rtr | QpState::Rts) && q.nic.port_is_up()
            })
    else {
        return Vet::Refuse(WcStatus::RetryExcErr as u32);
    };
    match admission(rqp, remote, from, req) {
        Admission::Take => {}
        Admission::Discard => return Vet::Refuse(DISCARDED),
        Admission::Refuse(why) => {
            warn(format_args!("refused a request before its payload: {why}"));
            return Vet::Refuse(REFUSED);
        }
    }
    if req.op != ReqOp::Write {
        return Vet::Buffer;
    }
    match rqp
        .nic
        .mrs
        .check_remote(rqp.pd, req.rkey, req.raddr, req.len, Access::REMOTE_WRITE)
    {
        Ok(mr) => {
            let qp = Arc::clone(rqp);
            Vet::Stream(
                mr,
                Box::new(move || matches!(qp.state(), QpState::Rtr | QpState::Rts)),
            )
        }
        Err(e) => Vet::Refuse(remote_fault(e) as u32),
    }
}

/// Whether `req`, from fabric `from`, comes from the QP `rqp` is connected to (`remote`) and
/// at the PSN it expects (taking the PSN when nobody said which to expect).
fn admit(rqp: &QpInner, remote: Option<Endpoint>, from: u64, req: &Request) -> Admission {
    let a = admission(rqp, remote, from, req);
    // ORDERING: Acquire pairs with `Qp::connect`'s Release (before RTR); only this engine
    // changes it afterwards.
    if matches!(a, Admission::Take) && rqp.rq_psn.load(Ordering::Acquire) == PSN_UNKNOWN {
        // Nobody said which PSN to expect: this request's is, from now on — so what was sent
        // behind it is discarded if it fails, as it is when the PSN was given.
        rqp.rq_psn.store(u64::from(req.psn), Ordering::Release);
    }
    a
}

/// [`admit`] without taking the PSN.
fn admission(rqp: &QpInner, remote: Option<Endpoint>, from: u64, req: &Request) -> Admission {
    let source = Endpoint {
        fabric: from,
        nic: req.src_nic,
        qpn: req.src_qpn,
    };
    if remote != Some(source) {
        return Admission::Refuse(format!(
            "QP {:#x} is connected to {remote:?}, not to {source:?}",
            rqp.qpn
        ));
    }
    // ORDERING: Acquire pairs with `Qp::connect`'s Release (before RTR); only this engine
    // changes it afterwards.
    let expected = rqp.rq_psn.load(Ordering::Acquire);
    if expected == PSN_UNKNOWN || expected == u64::from(req.psn) {
        return Admission::Take;
    }
    // Ahead by less than half the PSN space: a request sent behind one that was not executed.
    let ahead = u64::from(req.psn).wrapping_sub(expected) & u64::from(PSN_MASK);
    if ahead < 1 << 23 {
        return Admission::Discard;
    }
    Admission::Refuse(format!(
        "QP {:#x} expects PSN {expected:#x}; the request from {source:?} carries {:#x}",
        rqp.qpn, req.psn
    ))
}

/// A READ's data, left in its region (checked for REMOTE_READ): `len` bytes at an address.
type ReadSource = (Arc<MrInner>, u64, usize);

/// Sends the response `resp` with the READ data at `addr` of `mr` (`len` bytes): straight from
/// the region into the ring when the frame fits now, else through a buffer; a region
/// deregistered meanwhile turns it into a remote access error.
fn send_read(c: &Conn, resp: Response, mr: &MrInner, addr: u64, len: usize) {
    let head = resp.encode_head_for(len);
    let mut off = 0usize;
    let direct = c.send_direct(&head, len, |dst, n| {
        // SAFETY: `[addr, addr + len)` was checked against `mr` for REMOTE_READ, pinned while
        // read; `dst` is a ring piece of `n` bytes and `off + n ≤ len`.
        let r = unsafe { dma_copy_pinned(&[mr], dst, (addr as *const u8).add(off), n) };
        off += n;
        r
    });
    let sent = match direct {
        Ok(true) => true,
        Ok(false) => read_buffer(mr, addr, len)
            .map(|data| c.send(&head, data))
            .is_ok(),
        Err(_) => false,
    };
    if !sent {
        let failed = Response {
            status: WcStatus::RemAccessErr as u32,
            ..resp
        };
        c.send_copy(&failed.encode_head_for(0), &[]);
    }
}

/// `len` bytes at `addr` of `mr` (checked for REMOTE_READ by the caller), read into a (pooled)
/// buffer with the region pinned — chunk by chunk: a deregistration stops it at the next chunk.
fn read_buffer(mr: &MrInner, addr: u64, len: usize) -> Result<Vec<u8>, crate::mem::Fault> {
    let mut out = crate::wire::pool::take(len);
    // SAFETY: the source lies in `mr`, pinned while read; the destination is `out`'s spare
    // capacity of `len` bytes, all written before the length covers them.
    unsafe {
        dma_copy_pinned(&[mr], out.as_mut_ptr(), addr as *const u8, len)?;
        out.set_len(len);
    }
    Ok(out)
}

impl Responder {
    /// Forgets what the fabric's epoch made stale (a QP that came, was connected or went
    /// since it was read), so a destroyed QP is not kept alive by it.
    fn forget_stale(&mut self, f: &FabricInner) {
        // ORDERING: Acquire, as in `lookup`.
        let epoch = f.epoch.load(Ordering::Acquire);
        if self.qp.as_ref().is_some_and(|c| c.epoch != epoch) {
            *self = Responder::default();
        }
    }

    /// The QP `key` names, its state, what it is connected to, and the key cache of its NIC's
    /// regions. The QP and its connection are read again whenever the fabric's epoch moves
    /// (creating, connecting and destroying QPs move it; connecting moves it before the QP
    /// reaches RTR): the state is read between two reads of the epoch, so a QP seen in its
    /// new RTR is never paired with the connection it had before.
    fn lookup(
        &mut self,
        f: &FabricInner,
        key: (u32, u32),
    ) -> Option<(
        &Arc<QpInner>,
        QpState,
        Option<Endpoint>,
        &mut crate::mem::KeyCache,
    )> {
        let state = loop {
            // ORDERING: Acquire pairs with the Release bumps of `Qp::connect_at` and of QP
            // creation and destruction: the QP map and `remote` read after it are as new.
            let epoch = f.epoch.load(Ordering::Acquire);
            let fresh = self
                .qp
                .as_ref()
                .is_some_and(|c| c.epoch == epoch && (c.qp.nic.id, c.qp.qpn) == key);
            if !fresh {
                let qp = f
                    .qps
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&key)
                    .cloned()?;
                if self
                    .qp
                    .as_ref()
                    .is_none_or(|c| !Arc::ptr_eq(&c.qp.nic, &qp.nic))
                {
                    // Another NIC, another key space.
                    self.keys = crate::mem::KeyCache::default();
                }
                let remote = *qp.remote.lock().unwrap_or_else(|e| e.into_inner());
                self.qp = Some(ResponderQp { qp, epoch, remote });
            }
            let c = self.qp.as_ref()?;
            let state = c.qp.state();
            // ORDERING: Acquire, after the state's Acquire load: a connect whose RTR we saw
            // bumped the epoch before it, so we see that bump here.
            if f.epoch.load(Ordering::Acquire) == c.epoch {
                break state;
            }
        };
        let c = self.qp.as_ref()?;
        Some((&c.qp, state, c.remote, &mut self.keys))
    }
}

/// The responder's side of one request from fabric `from`: (status — a `WcStatus` code,
/// RNR, REFUSED or DISCARDED — and the response payload). A WRITE's or SEND's payload is
/// `req.payload`, or still in the ring (`in_ring`).
fn respond(
    f: &FabricInner,
    from: u64,
    req: &Request,
    in_ring: Option<RingSpan>,
    streamed: bool,
    read_src: &mut Option<ReadSource>,
    cache: &mut Responder,
) -> (u32, Vec<u8>) {
    // Looked up once per run of requests to one QP within a pass (a QP destroyed meanwhile is
    // seen by its state below, as a request that came just before the destroy would be).
    let key = (req.dst_nic, req.dst_qpn);
    // No responder (one not ready, or on a NIC whose port is down): the requester's retries
    // run out, as in one process.
    let Some((rqp, _, remote, keys)) = cache.lookup(f, key).filter(|(q, state, ..)| {
        matches!(state, QpState::Rtr | QpState::Rts) && q.nic.port_is_up()
    }) else {
        return (WcStatus::RetryExcErr as u32, Vec::new());
    };
    // Nothing of the QP is touched for a request it does not take.
    match admit(rqp, remote, from, req) {
        Admission::Take => {}
        Admission::Discard => return (DISCARDED, Vec::new()),
        Admission::Refuse(why) => {
            warn(format_args!("refused a request: {why}"));
            return (REFUSED, Vec::new());
        }
    }
    let (status, payload) = execute_request(rqp, keys, req, in_ring, streamed, read_src);
    if status == WcStatus::Success as u32 {
        // Executed: the next request carries the next PSN. After an RNR this one comes again;
        // after an error NAK nothing more should come (the requester's QP is in error), and
        // what was sent behind it is discarded, never executed.
        let next = (req.psn.wrapping_add(1) & PSN_MASK).into();
        rqp.rq_psn.store(next, Ordering::Release);
    }
    (status, payload)
}

/// A WRITE's or SEND's payload in pieces `(address, length)`: its buffer, or the ring (up to
/// two pieces, across the wrap); `None` unless they hold the `len` bytes the request says.
fn payload_pieces(req: &Request, in_ring: Option<RingSpan>) -> Option<[(*const u8, usize); 2]> {
    let have = in_ring.map_or(req.payload.len(), |s| s.len());
    (have as u64 == req.len).then_some(match in_ring {
        Some(span) => span.pieces,
        None => [
            (req.payload.as_ptr(), req.payload.len()),
            (std::ptr::null(), 0),
        ],
    })
}

/// Executes an admitted request on `rqp` against this process's memory (a WRITE's or SEND's
/// payload from `in_ring` when it is still in the ring).
fn execute_request(
    rqp: &QpInner,
    keys: &mut crate::mem::KeyCache,
    req: &Request,
    in_ring: Option<RingSpan>,
    streamed: bool,
    read_src: &mut Option<ReadSource>,
) -> (u32, Vec<u8>) {
    let st = |s: WcStatus| (s as u32, Vec::new());
    let rmrs = &rqp.nic.mrs;
    match req.op {
        ReqOp::Write => {
            if req.len > 0 {
                let mr = match rmrs.check_remote_cached(
                    keys,
                    rqp.pd,
                    req.rkey,
                    req.raddr,
                    req.len,
                    Access::REMOTE_WRITE,
                ) {
                    Ok(m) => m,
                    Err(e) => return st(remote_fault(e)),
                };
                // Streamed into the region as it came (`vet`): nothing left to copy.
                let pieces = match payload_pieces(req, in_ring) {
                    _ if streamed => [(std::ptr::null(), 0); 2],
                    Some(p) => p,
                    None => return st(WcStatus::RemInvReqErr),
                };
                let to = [(req.raddr as *mut u8, req.len as usize, mr)];
                // SAFETY: `[raddr, raddr + len)` was checked against a region of this process
                // granting REMOTE_WRITE; the pieces hold `len` bytes in all, valid while this
                // request is served (a ring's until `release`).
                if let Err(e) = unsafe { copy_pieces(&pieces, to) } {
                    return st(remote_fault(e));
                }
            }
            if let Some(imm) = req.imm {
                match take_recv(rqp) {
                    Recv::Got(pos) => {
                        let rc = Cpl {
                            opcode: WcOpcode::RecvRdmaWithImm,
                            is_recv: true,
                            byte_len: req.len as u32,
                            imm: Some(imm),
                            ..base_cpl(rqp, pos as u32, 0)
                        };
                        rqp.recv_cq.write_cqe(&rc);
                    }
                    Recv::Empty => return (RNR, Vec::new()),
                }
            }
            st(WcStatus::Success)
        }
        ReqOp::Send => {
            let Some(pieces) = payload_pieces(req, in_ring) else {
                return st(WcStatus::RemInvReqErr);
            };
            let pos = match take_recv(rqp) {
                Recv::Got(pos) => pos,
                Recv::Empty => return (RNR, Vec::new()),
            };
            // The receive WQE's scatter list, in a buffer this thread keeps (no allocation
            // per message).
            thread_local! {
                static SGES: std::cell::RefCell<Vec<gda_hal::Sge>> =
                    const { std::cell::RefCell::new(Vec::new()) };
            }
            let rc = base_cpl(rqp, pos as u32, 0);
            let scattered = SGES.with(|s| {
                let mut sges = s.take();
                sges.clear();
                // SAFETY: the pieces are the request's buffer or the ring's span of its payload,
                // valid until it is released (after this request is served).
                let r = unsafe { scatter_send(rqp, &pieces, pos, &mut sges) };
                s.replace(sges);
                r
            });
            match scattered {
                Ok(()) => {
                    rqp.recv_cq.write_cqe(&Cpl {
                        opcode: WcOpcode::Recv,
                        is_recv: true,
                        byte_len: req.len as u32,
                        imm: req.imm,
                        ..rc
                    });
                    st(WcStatus::Success)
                }
                Err((local, remote)) => {
                    if let Some(rs) = remote {
                        rqp.set_error();
                        rqp.recv_cq.write_cqe(&Cpl {
                            opcode: WcOpcode::Recv,
                            is_recv: true,
                            status: rs,
                            ..rc
                        });
                    }
                    st(local)
                }
            }
        }
        ReqOp::Read => {
            if req.len == 0 {
                return st(WcStatus::Success);
            }
            // The check comes before the buffer: a request naming a gigabyte with a bad key
            // allocates nothing.
            let mr = match rmrs.check_remote(
                rqp.pd,
                req.rkey,
                req.raddr,
                req.len,
                Access::REMOTE_READ,
            ) {
                Ok(m) => m,
                Err(e) => return st(remote_fault(e)),
            };
            let len = req.len as usize;
            if req.len >= crate::wire::DIRECT_MIN as u64 {
                // Copied from the region straight into the ring as the response is sent
                // (`send_read`).
                *read_src = Some((mr, req.raddr, len));
                return st(WcStatus::Success);
            }
            match read_buffer(&mr, req.raddr, len) {
                Ok(out) => (WcStatus::Success as u32, out),
                Err(e) => st(remote_fault(e)),
            }
        }
        // Executed entry by entry (`serve_run`), never whole.
        ReqOp::WriteRun => st(WcStatus::RemInvReqErr),
        ReqOp::Atomic => {
            let Some((aop, width)) = req.atomic else {
                return st(WcStatus::RemInvReqErr);
            };
            let w = u64::from(width);
            if req.raddr % w != 0 {
                return st(WcStatus::RemInvReqErr);
            }
            let mr = match rmrs.check_remote_cached(
                keys,
                rqp.pd,
                req.rkey,
                req.raddr,
                w,
                Access::REMOTE_ATOMIC,
            ) {
                Ok(m) => m,
                Err(e) => return st(remote_fault(e)),
            };
            // SAFETY: the aligned operand was checked against a region granting REMOTE_ATOMIC,
            // pinned while used.
            match unsafe { dma_atomic_pinned(&[mr], req.raddr, width, |v| aop.apply(v, width)) } {
                Ok(Some(old)) => (WcStatus::Success as u32, old.to_le_bytes().to_vec()),
                Ok(None) => st(WcStatus::RemOpErr),
                Err(e) => st(remote_fault(e)),
            }
        }
    }
}
