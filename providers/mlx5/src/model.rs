//! The ConnectX device model for the software NIC (feature `model`): the engine reads the WQEs
//! [`Mlx5`]'s device functions write, with the same [`WqeRepr`] decoder the tests use, learns the
//! producer position from the doorbell record once a doorbell is rung, and writes CQEs with
//! [`CqeRepr::emit`] — the structures that are compared byte for byte with rdma-core.

use gda_hal::model::{
    BadRecv, Cpl, CqView, DeviceModel, Malformed, ModelError, ModelFor, Modeled, OpKind,
    QpGeometry, QpLayout, QpView, WqeOp,
};
use gda_hal::{CqHandle, Sge, WcOpcode, WcStatus, WqHandle};
use std::format;
use std::vec::Vec;

use crate::wire::{self as m, CqeOpcode, CqeRepr, Opcode, PayloadRepr, Syndrome, WqeRepr};
use crate::{Mlx5, Mlx5Sq};

/// BlueFlame half-register size of the simulated UAR (the second half is at this offset).
const BF_SIZE: u32 = 256;

/// The ConnectX model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mlx5Model;

/// The syndrome hardware reports for a status.
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

/// Widens a 16-bit counter to the position at or after `pos`.
fn widen16(pos: u64, v: u32) -> u64 {
    pos + u64::from(v.wrapping_sub(pos as u32) & 0xffff)
}

impl DeviceModel for Mlx5Model {
    fn name(&self) -> &'static str {
        "mlx5"
    }

    fn cqe_bytes(&self) -> u32 {
        64
    }

    fn layout(&self, g: &QpGeometry) -> Result<QpLayout, ModelError> {
        if g.sq_units > 1 << 15 {
            return Err(format!(
                "sq_units = {} exceeds 32768 WQEBBs: the mlx5 16-bit counters could not tell a full ring from an empty one",
                g.sq_units
            ));
        }
        Ok(QpLayout {
            sq_bytes: g.sq_units as usize * 64,
            rq_stride: (16 * g.max_sge).next_power_of_two().max(16),
        })
    }

    /// rdma-core initialises every CQE to opcode INVALID, owner 0.
    fn init_cq(&self, cq: &CqView) {
        for at in (63..cq.buf.len()).step_by(64) {
            cq.buf.write(at, &[m::cqe64::OP_OWN_INVALID]);
        }
    }

    fn cq_handle(&self, cq: &CqView) -> CqHandle {
        CqHandle {
            buf: cq.buf.addr(),
            dbrec: cq.dbrec.addr(),
            db: 0,
            entries: cq.entries,
            cqe_bytes: 64,
            cqn: cq.cqn,
            collapsed: u32::from(cq.collapsed),
        }
    }

    /// A doorbell is any store to either BlueFlame half; they are taken so equal values are
    /// still noticed. Then the doorbell record says how far to go.
    fn sq_doorbell(&self, qp: &QpView, pos: u64) -> Option<u64> {
        let a = qp.db.take_u64(0).unwrap_or(0);
        let b = qp.db.take_u64(BF_SIZE as usize).unwrap_or(0);
        if a == 0 && b == 0 {
            return None;
        }
        let rec = qp.dbrec.load_u32(4 * m::dbrec::SND_DBR)?;
        Some(widen16(pos, u32::from_be(rec)))
    }

    fn fetch(
        &self,
        qp: &QpView,
        pos: u64,
        op: &mut WqeOp,
        scratch: &mut Vec<u8>,
    ) -> Result<(), Malformed> {
        op.reset();
        let entries = u64::from(qp.geometry.sq_units);
        let off = (pos & (entries - 1)) as usize * 64;
        let mut head = [0u8; 16];
        qp.sq.read(off, &mut head);
        let ctrl: m::CtrlSeg = bytemuck::pod_read_unaligned(&head);
        let ds = ctrl.qpn_ds.get() & 0x3f;
        let units = ds.div_ceil(4).clamp(1, 16).min(qp.geometry.sq_units);
        // A malformed WQE is reported with the engine's own position, not its (garbage) index.
        let counter = (pos & 0xffff) as u32;
        let bad = |status| Malformed {
            status,
            units,
            counter,
        };
        qp.copy_sq_units(pos, units, 64, scratch);
        let w = WqeRepr::parse(scratch).map_err(|e| bad(m::syndrome_of(&e).wc_status()))?;
        op.units = units;
        op.counter = counter;
        op.hw_opcode = w.ctrl.opcode.raw();
        op.signaled = w.ctrl.signaled();
        op.fence = w.ctrl.fenced();
        op.solicited = w.ctrl.solicited();
        if w.ctrl.qpn != qp.qpn {
            return Err(bad(WcStatus::LocQpOpErr));
        }
        if let Some(r) = w.raddr {
            op.remote = r;
        }
        match w.payload {
            PayloadRepr::None => {}
            PayloadRepr::Inline(d) => op.set_inline(d),
            PayloadRepr::Sges(l) => {
                if l.len() > qp.geometry.max_sge as usize {
                    return Err(bad(WcStatus::LocQpOpErr));
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
            Opcode::AtomicCs
            | Opcode::AtomicFa
            | Opcode::AtomicMaskedCs
            | Opcode::AtomicMaskedFa => {
                let a = w.atomic.ok_or(bad(WcStatus::LocQpOpErr))?;
                op.atomic = Some((a.op, a.bytes));
                if op.sges.first().is_some_and(|s| s.length != a.bytes) {
                    return Err(bad(WcStatus::LocLenErr));
                }
                OpKind::Atomic
            }
            _ => return Err(bad(WcStatus::LocQpOpErr)),
        });
        Ok(())
    }

    fn counter_for(&self, _qp: &QpView, start: u64, _units: u32) -> u32 {
        (start & 0xffff) as u32
    }

    fn rq_producer(&self, qp: &QpView, pos: u64) -> u64 {
        match qp.dbrec.load_u32(4 * m::dbrec::RCV_DBR) {
            Some(rec) => widen16(pos, u32::from_be(rec)),
            None => pos,
        }
    }

    fn fetch_recv(&self, qp: &QpView, pos: u64, out: &mut Vec<Sge>) -> Result<(), BadRecv> {
        out.clear();
        let slot = (pos & (u64::from(qp.geometry.rq_wqes) - 1)) as usize;
        let stride = qp.rq_stride as usize;
        let mut wqe_buf = [0u8; 16 * 32];
        let wqe = wqe_buf.get_mut(..stride).ok_or(BadRecv)?;
        qp.rq.read(slot * stride, wqe);
        for chunk in wqe.chunks_exact(16).take(qp.geometry.max_sge as usize) {
            let d: m::DataSeg = bytemuck::pod_read_unaligned(chunk);
            if d.is_terminator() {
                break;
            }
            out.push(d.parse().map_err(|_| BadRecv)?);
        }
        Ok(())
    }

    /// The consumer index is word 0 of the CQ doorbell record, 24 bits, big-endian.
    fn cq_outstanding(&self, cq: &CqView, prod: u64) -> u32 {
        let ci = cq.dbrec.load_u32(0).map_or(0, u32::from_be);
        (prod as u32).wrapping_sub(ci) & 0x00ff_ffff
    }

    fn write_cqe(&self, cq: &CqView, c: &Cpl, prod: u64) {
        let log2 = cq.entries.trailing_zeros();
        let slot = if cq.collapsed {
            0
        } else {
            prod & (u64::from(cq.entries) - 1)
        };
        let opcode = match (c.is_recv, c.status.is_ok(), c.opcode) {
            (false, true, _) => CqeOpcode::Req,
            (false, false, _) => CqeOpcode::ReqErr,
            (true, false, _) => CqeOpcode::RespErr,
            (true, true, WcOpcode::RecvRdmaWithImm) => CqeOpcode::RespWrImm,
            (true, true, _) if c.imm.is_some() => CqeOpcode::RespSendImm,
            (true, true, _) => CqeOpcode::RespSend,
        };
        // Collapsed CQs ignore the owner bit (always 0, as `cqe_collapsed` hardware writes it).
        let owner = if cq.collapsed {
            0
        } else {
            ((prod >> log2) & 1) as u8
        };
        let e = CqeRepr {
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
            error: (!c.status.is_ok()).then(|| (syndrome_for(c.status), c.status.as_raw() as u8)),
        }
        .emit();
        // The body, then the tail word (`wqe_counter`, `op_own`) in one store: as one PCIe
        // write of the whole CQE lands, and what the device functions' polls rely on.
        cq.buf
            .publish_cqe(slot as usize * 64, bytemuck::bytes_of(&e));
    }

    /// ConnectX returns an atomic's old value big-endian (`ATOMIC_HCA_REPLY_BE`).
    fn atomic_result(&self, old: u64, width: u32) -> ([u8; 8], usize) {
        let mut b = [0u8; 8];
        if width == 4 {
            b[..4].copy_from_slice(&(old as u32).to_be_bytes());
            (b, 4)
        } else {
            b.copy_from_slice(&old.to_be_bytes());
            (b, 8)
        }
    }

    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}

impl ModelFor<Mlx5> for Mlx5Model {
    fn sq_handle(&self, qp: &QpView) -> Result<Mlx5Sq, ModelError> {
        Ok(Mlx5Sq {
            wq: WqHandle {
                buf: qp.sq.addr(),
                dbrec: qp.dbrec.addr(),
                db: qp.db.addr(),
                entries: qp.geometry.sq_units,
                stride: 64,
                qpn: qp.qpn,
                max_inline: qp.geometry.max_inline,
                max_sge: qp.geometry.max_sge,
            },
            bf_size: BF_SIZE,
        })
    }

    fn rq_handle(&self, qp: &QpView) -> WqHandle {
        qp.rq_wq(qp.dbrec.addr(), 0)
    }
}

impl Modeled for Mlx5 {
    type Model = Mlx5Model;
    fn model() -> Mlx5Model {
        Mlx5Model
    }

    /// Mellanox's PCI vendor id and the ConnectX-6 Dx part number.
    const DEVICE_IDS: (u32, u32) = (<Mlx5 as gda_hal::Provider>::PCI_VENDOR_IDS[0], 4125);

    fn wqe_units(max_sge: u32, max_inline: u32) -> u32 {
        // ctrl + raddr (or ctrl + raddr + atomic + data), then data segments or inline, in
        // 64-byte WQEBBs.
        let sges = 32 + 16 * max_sge.max(1);
        let inline = 32 + (4 + max_inline).div_ceil(16) * 16;
        sges.max(inline).max(64).div_ceil(64)
    }

    unsafe fn posted_directly(sq: &Mlx5Sq, head: u64) -> u64 {
        // SAFETY: the caller's contract: the doorbell record is the live QP's, its word 1 the
        // send counter (big-endian) a program posting directly moves, written only atomically.
        let dbr = unsafe { gda_hal::mmio::load_u32_acquire((sq.wq.dbrec as *const u32).add(1)) };
        // ORDERING: Acquire pairs with the program's Release store of the record
        // (`store_be32_release`): the WQEs it covers are written before it.
        let theirs = u32::from_be(dbr) & 0xffff;
        u64::from(theirs.wrapping_sub(head as u32) & 0xffff)
    }
}
