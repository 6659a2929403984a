//! Device models: how the engine reads a queue's bytes and writes completions, per format.
//!
//! The engine never trusts queue memory: every WQE is decoded from a copy with bounds checks,
//! and a malformed one becomes the error completion the hardware would report
//! (`LOC_QP_OP_ERR`, or `LOC_LEN_ERR` for an inline length past the WQE).

use gda_hal::{AtomicOp, Remote, Sge, WcOpcode, WcStatus, mmio};
use gda_mlx5::wire::{self as m, CqeOpcode, CqeRepr, Opcode, PayloadRepr, Syndrome, WqeRepr};

use crate::fabric::{CqInner, CqMode, Model, QpInner};
use crate::native::{self, NativeCqe, NativeOp, NativeSge, NativeWqe, flags};

/// What a WQE asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    Nop,
    Write,
    Send,
    Read,
    Atomic,
}

/// A decoded send WQE (reused between WQEs to avoid allocation).
#[derive(Debug, Default)]
pub(crate) struct WqeOp {
    pub kind: Option<OpKind>,
    pub signaled: bool,
    pub fence: bool,
    pub solicited: bool,
    /// Units the WQE occupies.
    pub units: u32,
    /// The counter its CQE reports (mlx5: 16-bit wqe_index; native: producer position).
    pub counter: u32,
    /// Raw hardware opcode (mlx5 CQEs carry it).
    pub hw_opcode: u8,
    pub remote: Remote,
    pub imm: Option<u32>,
    pub sges: Vec<Sge>,
    pub inline: Option<Vec<u8>>,
    pub atomic: Option<(AtomicOp, u32)>,
    /// Packets on the wire (bnxt PSN accounting).
    pub packets: u32,
}

impl WqeOp {
    fn reset(&mut self) {
        self.kind = None;
        self.signaled = false;
        self.fence = false;
        self.solicited = false;
        self.imm = None;
        self.sges.clear();
        if let Some(v) = self.inline.as_mut() {
            v.clear();
        }
        self.atomic = None;
        self.packets = 0;
    }

    /// Payload length in bytes.
    pub fn length(&self) -> u64 {
        match &self.inline {
            Some(v)
                if self.kind != Some(OpKind::Read)
                    && self.kind != Some(OpKind::Atomic)
                    && !v.is_empty() =>
            {
                v.len() as u64
            }
            _ => self.sges.iter().map(|s| u64::from(s.length)).sum(),
        }
    }
}

/// A malformed WQE: the status to report and how many units to skip.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Malformed {
    pub status: WcStatus,
    pub units: u32,
    pub counter: u32,
}

/// A completion the engine writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cpl {
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub counter: u32,
    pub byte_len: u32,
    pub imm: Option<u32>,
    pub qpn: u32,
    pub is_recv: bool,
    pub hw_opcode: u8,
}

/// Copies `units` 64-byte units of the SQ ring starting at unit `pos` into `out`, unwrapping at
/// the end. Queue memory is read with raw copies only (producers write other slots while the
/// engine reads), and the WQE is decoded from this private copy, so its bytes cannot change
/// between a check and a use.
fn copy_ring(qp: &QpInner, pos: u64, units: u32, out: &mut Vec<u8>) {
    let entries = u64::from(qp.init.sq_units);
    out.clear();
    out.resize(units as usize * 64, 0);
    for (i, chunk) in out.chunks_exact_mut(64).enumerate() {
        let slot = (pos + i as u64) & (entries - 1);
        qp.sq.read_into(slot as usize * 64, chunk);
    }
}

/// Decodes the WQE at unit `pos`.
pub(crate) fn fetch(
    qp: &QpInner,
    pos: u64,
    op: &mut WqeOp,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    op.reset();
    match qp.nic.model {
        Model::Native => fetch_native(qp, pos, op, scratch),
        Model::Mlx5 => fetch_mlx5(qp, pos, op, scratch),
        Model::Bnxt(m) => crate::bnxt_model::fetch(qp, m, pos, op, scratch),
    }
}

fn fetch_native(
    qp: &QpInner,
    pos: u64,
    op: &mut WqeOp,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    let entries = u64::from(qp.init.sq_units);
    let off = (pos & (entries - 1)) as usize * 64;
    let mut head = [0u8; 64];
    qp.sq.read_into(off, &mut head);
    let h: NativeWqe = bytemuck::pod_read_unaligned(&head);
    let bad = |units: u32| Malformed {
        status: WcStatus::LocQpOpErr,
        units: units.clamp(1, qp.init.sq_units),
        counter: pos as u32,
    };
    let units = u32::from(h.units);
    if units == 0 || units > native::MAX_UNITS || units > qp.init.sq_units {
        return Err(bad(1));
    }
    if units > 1 {
        copy_ring(qp, pos, units, scratch);
    } else {
        scratch.clear();
        scratch.extend_from_slice(&head);
    }
    let bytes: &[u8] = scratch;
    op.units = units;
    // The device reports its own position (the header's `counter` must equal it).
    op.counter = pos as u32;
    op.hw_opcode = h.opcode;
    op.signaled = h.flags & flags::SIGNALED != 0;
    op.fence = h.flags & flags::FENCE != 0;
    op.solicited = h.flags & flags::SOLICITED != 0;
    op.remote = Remote {
        addr: h.remote_addr,
        rkey: h.rkey,
    };
    let kind = NativeOp::from_raw(h.opcode).ok_or(bad(units))?;
    let ext = &bytes[64..];
    let read_sges = |op: &mut WqeOp| -> Result<(), Malformed> {
        let n = u32::from(h.nsge);
        if n > qp.init.max_sge || (n > 1 && (n - 1).div_ceil(4) + 1 > units) {
            return Err(bad(units));
        }
        if n >= 1 {
            op.sges.push(Sge {
                addr: h.local.addr,
                length: h.local.length,
                lkey: h.local.lkey,
            });
        }
        for i in 1..n as usize {
            let e: NativeSge = bytemuck::pod_read_unaligned(&ext[(i - 1) * 16..i * 16]);
            op.sges.push(Sge {
                addr: e.addr,
                length: e.length,
                lkey: e.lkey,
            });
        }
        Ok(())
    };
    let payload = |op: &mut WqeOp| -> Result<(), Malformed> {
        if h.flags & flags::INLINE != 0 {
            let len = h.length as usize;
            if len.div_ceil(64) as u32 + 1 != units.max(1) && !(len == 0 && units == 1) {
                return Err(Malformed {
                    status: WcStatus::LocLenErr,
                    ..bad(units)
                });
            }
            op.inline
                .get_or_insert_with(Vec::new)
                .extend_from_slice(&ext[..len]);
            Ok(())
        } else {
            read_sges(op)
        }
    };
    match kind {
        NativeOp::Nop => op.kind = Some(OpKind::Nop),
        NativeOp::Write | NativeOp::WriteImm => {
            op.kind = Some(OpKind::Write);
            op.imm = (kind == NativeOp::WriteImm).then_some(h.imm);
            payload(op)?;
        }
        NativeOp::Send | NativeOp::SendImm => {
            op.kind = Some(OpKind::Send);
            op.imm = (kind == NativeOp::SendImm).then_some(h.imm);
            payload(op)?;
        }
        NativeOp::Read => {
            op.kind = Some(OpKind::Read);
            read_sges(op)?;
        }
        NativeOp::CompSwap
        | NativeOp::FetchAdd
        | NativeOp::MaskedCompSwap
        | NativeOp::MaskedFetchAdd => {
            let width = u32::from(h.width);
            let masked = matches!(kind, NativeOp::MaskedCompSwap | NativeOp::MaskedFetchAdd);
            if !(width == 8 || (masked && width == 4)) || h.nsge != 1 {
                return Err(bad(units));
            }
            let a = match kind {
                NativeOp::CompSwap => AtomicOp::CompareSwap {
                    compare: h.op0,
                    swap: h.op1,
                },
                NativeOp::FetchAdd => AtomicOp::FetchAdd { add: h.op0 },
                NativeOp::MaskedCompSwap => {
                    if units < 2 {
                        return Err(bad(units));
                    }
                    let cm = u64::from_le_bytes(ext[..8].try_into().unwrap_or([0; 8]));
                    let sm = u64::from_le_bytes(ext[8..16].try_into().unwrap_or([0; 8]));
                    AtomicOp::MaskedCompareSwap {
                        compare: h.op0,
                        compare_mask: cm,
                        swap: h.op1,
                        swap_mask: sm,
                    }
                }
                _ => AtomicOp::MaskedFetchAdd {
                    add: h.op0,
                    field_boundary: h.op1,
                },
            };
            op.kind = Some(OpKind::Atomic);
            op.atomic = Some((a, width));
            op.sges.push(Sge {
                addr: h.local.addr,
                length: width,
                lkey: h.local.lkey,
            });
        }
    }
    Ok(())
}

fn fetch_mlx5(
    qp: &QpInner,
    pos: u64,
    op: &mut WqeOp,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    let entries = u64::from(qp.init.sq_units);
    let off = (pos & (entries - 1)) as usize * 64;
    let mut head = [0u8; 16];
    qp.sq.read_into(off, &mut head);
    let ctrl: m::CtrlSeg = bytemuck::pod_read_unaligned(&head);
    let ds = ctrl.qpn_ds.get() & 0x3f;
    let units = ds.div_ceil(4).clamp(1, 16).min(qp.init.sq_units);
    // A malformed WQE is reported with the engine's own position, not its (garbage) index.
    let counter = (pos & 0xffff) as u32;
    copy_ring(qp, pos, units, scratch);
    let w = WqeRepr::parse(scratch).map_err(|e| Malformed {
        status: m::syndrome_of(&e).wc_status(),
        units,
        counter,
    })?;
    op.units = units;
    op.counter = counter;
    op.hw_opcode = w.ctrl.opcode.raw();
    op.signaled = w.ctrl.signaled();
    op.fence = w.ctrl.fenced();
    op.solicited = w.ctrl.solicited();
    if w.ctrl.qpn != qp.qpn {
        return Err(Malformed {
            status: WcStatus::LocQpOpErr,
            units,
            counter,
        });
    }
    if let Some(r) = w.raddr {
        op.remote = r;
    }
    match w.payload {
        PayloadRepr::None => {}
        PayloadRepr::Inline(d) => op.inline.get_or_insert_with(Vec::new).extend_from_slice(d),
        PayloadRepr::Sges(l) => {
            if l.len() > qp.init.max_sge as usize {
                return Err(Malformed {
                    status: WcStatus::LocQpOpErr,
                    units,
                    counter,
                });
            }
            op.sges.extend(l.iter());
        }
    }
    op.kind = Some(match w.ctrl.opcode {
        Opcode::Nop => OpKind::Nop,
        Opcode::RdmaWrite => OpKind::Write,
        Opcode::RdmaWriteImm => {
            op.imm = Some(w.ctrl.imm);
            OpKind::Write
        }
        Opcode::Send => OpKind::Send,
        Opcode::SendImm => {
            op.imm = Some(w.ctrl.imm);
            OpKind::Send
        }
        Opcode::RdmaRead => OpKind::Read,
        Opcode::AtomicCs | Opcode::AtomicFa | Opcode::AtomicMaskedCs | Opcode::AtomicMaskedFa => {
            let a = w.atomic.ok_or(Malformed {
                status: WcStatus::LocQpOpErr,
                units,
                counter,
            })?;
            op.atomic = Some((a.op, a.bytes));
            if let Some(s) = op.sges.first_mut() {
                if s.length != a.bytes {
                    return Err(Malformed {
                        status: WcStatus::LocLenErr,
                        units,
                        counter,
                    });
                }
            }
            OpKind::Atomic
        }
        _ => {
            return Err(Malformed {
                status: WcStatus::LocQpOpErr,
                units,
                counter,
            });
        }
    });
    Ok(())
}

/// Notices doorbells and returns the widened producer position they publish (or `None`).
pub(crate) fn sq_doorbell(qp: &QpInner, pos: u64) -> Option<u64> {
    match qp.nic.model {
        Model::Native => {
            // SAFETY: the doorbell page is owned by the QP, 8-byte aligned.
            let v = unsafe { mmio::load_u64_acquire(qp.db.addr() as *const u64) } as u32;
            let target = pos + u64::from(v.wrapping_sub(pos as u32));
            (target != pos).then_some(target)
        }
        Model::Mlx5 => {
            // A doorbell is any store to either BlueFlame half; take them so equal values are
            // still noticed. Then the doorbell record says how far to go.
            // SAFETY: the doorbell page is owned by the QP; both offsets are 8-byte aligned.
            let rung = unsafe {
                let a = mmio::take_u64(qp.db.addr() as *mut u64);
                let b = mmio::take_u64((qp.db.addr() + 256) as *mut u64);
                a != 0 || b != 0
            };
            if !rung {
                return None;
            }
            // SAFETY: word 1 of the QP's doorbell record.
            let rec = unsafe { mmio::load_u32_acquire((qp.dbrec.addr() + 4) as *const u32) };
            let v = u32::from_be(rec) & 0xffff;
            let target = pos + u64::from((v.wrapping_sub(pos as u32)) & 0xffff);
            Some(target)
        }
        Model::Bnxt(m) => crate::bnxt_model::sq_doorbell(qp, m, pos),
    }
}

/// The counter a completion for the WQE at `start` of `units` reports (mlx5: its 16-bit
/// index; native: its position; bnxt: the consumer index after it).
pub(crate) fn counter_for(qp: &QpInner, start: u64, units: u32) -> u32 {
    match qp.nic.model {
        Model::Native => start as u32,
        Model::Mlx5 => (start & 0xffff) as u32,
        Model::Bnxt(m) => crate::bnxt_model::con_index(qp, m, start + u64::from(units)),
    }
}

/// The widened receive producer position.
pub(crate) fn rq_producer(qp: &QpInner, pos: u64) -> u64 {
    match qp.nic.model {
        Model::Native => {
            // SAFETY: offset 0 of the QP's record page, 8-byte aligned.
            let v = unsafe { mmio::load_u64_acquire(qp.dbrec.addr() as *const u64) } as u32;
            pos + u64::from(v.wrapping_sub(pos as u32))
        }
        Model::Mlx5 => {
            // SAFETY: word 0 of the QP's doorbell record.
            let rec = unsafe { mmio::load_u32_acquire(qp.dbrec.addr() as *const u32) };
            let v = u32::from_be(rec) & 0xffff;
            pos + u64::from((v.wrapping_sub(pos as u32)) & 0xffff)
        }
        Model::Bnxt(_) => crate::bnxt_model::rq_producer(qp, pos),
    }
}

/// Reads the receive WQE at `pos` into `out`. A malformed one yields `Err`.
pub(crate) fn fetch_recv(qp: &QpInner, pos: u64, out: &mut Vec<Sge>) -> Result<(), ()> {
    out.clear();
    if let Model::Bnxt(_) = qp.nic.model {
        return crate::bnxt_model::fetch_recv(qp, pos, out);
    }
    let slot = (pos & (u64::from(qp.init.rq_wqes) - 1)) as usize;
    let stride = qp.rq_stride as usize;
    let mut wqe_buf = [0u8; 16 * 32];
    let wqe = wqe_buf.get_mut(..stride).ok_or(())?;
    qp.rq.read_into(slot * stride, wqe);
    let wqe: &[u8] = wqe;
    match qp.nic.model {
        Model::Native => {
            let n = u32::from_le_bytes(wqe[..4].try_into().map_err(|_| ())?) as usize;
            if n > qp.init.max_sge as usize || 16 * (n + 1) > stride {
                return Err(());
            }
            for i in 0..n {
                let e: NativeSge = bytemuck::pod_read_unaligned(&wqe[16 * (i + 1)..16 * (i + 2)]);
                out.push(Sge {
                    addr: e.addr,
                    length: e.length,
                    lkey: e.lkey,
                });
            }
        }
        Model::Mlx5 => {
            for chunk in wqe.chunks_exact(16).take(qp.init.max_sge as usize) {
                let d: m::DataSeg = bytemuck::pod_read_unaligned(chunk);
                if d.is_terminator() {
                    break;
                }
                out.push(d.parse().map_err(|_| ())?);
            }
        }
        Model::Bnxt(_) => return Err(()),
    }
    Ok(())
}

fn syndrome_for(status: WcStatus) -> Syndrome {
    match status {
        WcStatus::LocLenErr => Syndrome::LocalLengthErr,
        WcStatus::LocQpOpErr => Syndrome::LocalQpOpErr,
        WcStatus::LocProtErr => Syndrome::LocalProtErr,
        WcStatus::WrFlushErr => Syndrome::WrFlushErr,
        WcStatus::MwBindErr => Syndrome::MwBindErr,
        WcStatus::BadRespErr => Syndrome::BadRespErr,
        WcStatus::LocAccessErr => Syndrome::LocalAccessErr,
        WcStatus::RemInvReqErr => Syndrome::RemoteInvalReqErr,
        WcStatus::RemAccessErr => Syndrome::RemoteAccessErr,
        WcStatus::RemOpErr => Syndrome::RemoteOpErr,
        WcStatus::RetryExcErr => Syndrome::TransportRetryExcErr,
        WcStatus::RnrRetryExcErr => Syndrome::RnrRetryExcErr,
        WcStatus::RemAbortErr => Syndrome::RemoteAbortedErr,
        _ => Syndrome::Unknown(0xff),
    }
}

/// Writes a completion; `false` if the CQ overran (the CQE is dropped and the CQ flagged).
pub(crate) fn write_cqe(cq: &CqInner, c: &Cpl) -> bool {
    use std::sync::atomic::Ordering;
    let prod = cq.prod.load(Ordering::Relaxed);
    let collapsed = cq.mode == CqMode::Collapsed;
    if !collapsed {
        // CQEs the consumer has not released yet, from its (untrusted) consumer index. Any value
        // is handled without arithmetic that can fail; an index "ahead" of the producer is as
        // wrong as a full ring, and both are an overrun.
        let outstanding = match cq.model {
            Model::Native => {
                // SAFETY: the CQ's consumer word (8-byte aligned, owned by the CQ).
                let ci = unsafe { mmio::load_u64_acquire(cq.dbrec.addr() as *const u64) };
                (prod as u32).wrapping_sub(ci as u32)
            }
            Model::Mlx5 => {
                // SAFETY: word 0 of the CQ doorbell record.
                let w =
                    u32::from_be(unsafe { mmio::load_u32_acquire(cq.dbrec.addr() as *const u32) });
                (prod as u32).wrapping_sub(w) & 0x00ff_ffff
            }
            Model::Bnxt(_) => crate::bnxt_model::outstanding(cq, prod),
        };
        if outstanding >= cq.entries {
            cq.overrun.store(true, Ordering::Release);
            return false;
        }
    }
    let log2 = cq.entries.trailing_zeros();
    let slot = if collapsed {
        0
    } else {
        prod & (u64::from(cq.entries) - 1)
    };
    match cq.model {
        Model::Native => {
            let addr = cq.buf.addr() + slot * 32;
            let mut n = NativeCqe {
                counter: c.counter,
                byte_len: c.byte_len,
                imm: c.imm.unwrap_or(0),
                qpn: c.qpn,
                status: c.status.as_raw() as u8,
                opcode: c.opcode as u32 as u8,
                flags: (if c.is_recv {
                    native::wire::cqe_flags::RECV
                } else {
                    0
                }) | (if c.imm.is_some() {
                    native::wire::cqe_flags::HAS_IMM
                } else {
                    0
                }),
                vendor_err: if c.status.is_ok() {
                    0
                } else {
                    c.status.as_raw() as u8
                },
                ..NativeCqe::default()
            };
            let owner = if collapsed {
                1
            } else {
                native::wire::owner_for(prod as u32, log2)
            };
            n.owner = 0;
            n.reserved_20[0] = (prod as u8).wrapping_add(1); // generation (collapsed CQs)
            // SAFETY: the slot is inside the CQ buffer.
            unsafe {
                publish_cqe(
                    addr,
                    bytemuck::bytes_of(&n),
                    31,
                    owner,
                    collapsed.then_some(0),
                )
            };
        }
        Model::Mlx5 => {
            let addr = cq.buf.addr() + slot * 64;
            let opcode = match (c.is_recv, c.status.is_ok(), c.opcode) {
                (false, true, _) => CqeOpcode::Req,
                (false, false, _) => CqeOpcode::ReqErr,
                (true, false, _) => CqeOpcode::RespErr,
                (true, true, WcOpcode::RecvRdmaWithImm) => CqeOpcode::RespWrImm,
                (true, true, _) if c.imm.is_some() => CqeOpcode::RespSendImm,
                (true, true, _) => CqeOpcode::RespSend,
            };
            let owner = if collapsed {
                0
            } else {
                ((prod >> log2) & 1) as u8
            };
            let r = CqeRepr {
                opcode,
                owner,
                format: 0,
                se: false,
                wqe_opcode: Opcode::from_raw(c.hw_opcode),
                qpn: c.qpn,
                wqe_counter: c.counter as u16,
                byte_cnt: c.byte_len,
                imm: c.imm.unwrap_or(0),
                srqn: 0,
                error: (!c.status.is_ok())
                    .then(|| (syndrome_for(c.status), c.status.as_raw() as u8)),
            };
            let mut e = r.emit();
            e.signature = (prod as u8).wrapping_add(1); // generation (collapsed CQs)
            let bytes = bytemuck::bytes_of(&e);
            // SAFETY: as above; `op_own` is byte 63.
            unsafe {
                publish_cqe(
                    addr,
                    bytes,
                    63,
                    bytes[63],
                    collapsed.then_some(m::cqe64::OP_OWN_INVALID),
                )
            };
        }
        Model::Bnxt(_) => crate::bnxt_model::write_cqe(cq, c, prod, collapsed),
    }
    cq.prod.store(prod + 1, Ordering::Release);
    true
}

/// Writes a CQE body and publishes its ownership byte (at `owner_at`) last, with release.
///
/// A collapsed CQ rewrites a slot the consumer may be reading: the ownership byte is first set
/// to `invalidate` and the body carries a new generation byte, so a reader that re-checks both
/// after reading (see the providers' `poll_collapsed`) never accepts a torn CQE.
///
/// # Safety
/// `addr` must be a CQE slot of `bytes.len()` bytes inside a live CQ buffer.
unsafe fn publish_cqe(addr: u64, bytes: &[u8], owner_at: usize, owner: u8, invalidate: Option<u8>) {
    // SAFETY: `addr + owner_at` is inside the slot (caller).
    unsafe {
        if let Some(inv) = invalidate {
            mmio::store_u8_release((addr + owner_at as u64) as *mut u8, inv);
            mmio::dma_publish();
        }
        mmio::dma_copy(addr as *mut u8, bytes.as_ptr(), owner_at);
        mmio::store_u8_release((addr + owner_at as u64) as *mut u8, owner);
    }
}

/// The bytes an atomic's old value is returned in.
pub(crate) fn atomic_result(model: Model, old: u64, width: u32) -> ([u8; 8], usize) {
    let w = width as usize;
    let mut b = [0u8; 8];
    match (model, w) {
        (Model::Mlx5, 4) => b[..4].copy_from_slice(&(old as u32).to_be_bytes()),
        (Model::Mlx5, _) => b.copy_from_slice(&old.to_be_bytes()),
        (Model::Native | Model::Bnxt(_), 4) => {
            b[..4].copy_from_slice(&(old as u32).to_le_bytes());
        }
        (Model::Native | Model::Bnxt(_), _) => b.copy_from_slice(&old.to_le_bytes()),
    }
    (b, w.min(8))
}
