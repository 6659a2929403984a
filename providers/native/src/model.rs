//! The native device model (feature `model`): how the software NIC reads the queues
//! [`Native`]'s device functions write, and writes its CQEs.

use std::vec::Vec;

use gda_hal::model::{
    BadRecv, Cpl, CqView, DeviceModel, Malformed, ModelError, ModelFor, Modeled, OpKind,
    QpGeometry, QpLayout, QpView, WqeOp,
};
use gda_hal::{CqHandle, ParseError, Remote, SendFlags, Sge, WcStatus, WqHandle};

use crate::wire::{self, Data, NativeCqe, NativeSge, NativeWqe, Sges, WqeBody, WqeRepr};
use crate::{Native, UNIT_BYTES};

/// The native model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeModel;

/// Widens a 32-bit position to the one at or after `pos`.
fn widen32(pos: u64, v: u32) -> u64 {
    pos + u64::from(v.wrapping_sub(pos as u32))
}

fn fetch(qp: &QpView, pos: u64, op: &mut WqeOp, scratch: &mut Vec<u8>) -> Result<(), Malformed> {
    let entries = u64::from(qp.geometry.sq_units);
    let off = (pos & (entries - 1)) as usize * 64;
    let mut head = [0u8; 64];
    qp.sq.read(off, &mut head);
    let h: NativeWqe = bytemuck::pod_read_unaligned(&head);
    let bad = |units: u32| Malformed {
        status: WcStatus::LocQpOpErr,
        units: units.clamp(1, qp.geometry.sq_units),
        counter: pos as u32,
    };
    let units = u32::from(h.units);
    if units == 0 || units > crate::MAX_UNITS || units > qp.geometry.sq_units {
        return Err(bad(1));
    }
    if units > 1 {
        qp.copy_sq_units(pos, units, 64, scratch);
    } else {
        scratch.clear();
        scratch.extend_from_slice(&head);
    }
    op.units = units;
    // The device reports its own position (the header's `counter` must equal it).
    op.counter = pos as u32;
    op.hw_opcode = h.opcode;
    let wqe = WqeRepr::parse(scratch).map_err(|e| Malformed {
        status: match e {
            ParseError::Range { field, .. } if field == wire::INLINE_LENGTH => WcStatus::LocLenErr,
            _ => WcStatus::LocQpOpErr,
        },
        ..bad(units)
    })?;
    op.signaled = wqe.flags.contains(SendFlags::SIGNALED);
    op.fence = wqe.flags.contains(SendFlags::FENCE);
    op.solicited = wqe.flags.contains(SendFlags::SOLICITED);
    let sges = |op: &mut WqeOp, s: &Sges<'_>| -> Result<(), Malformed> {
        if s.len() > qp.geometry.max_sge as usize {
            return Err(bad(units));
        }
        op.sges.extend(s.iter().map(|e| Sge {
            addr: e.addr,
            length: e.length,
            lkey: e.lkey,
        }));
        Ok(())
    };
    let data = |op: &mut WqeOp, d: &Data<'_>| match d {
        Data::Inline(b) => {
            op.set_inline(b);
            Ok(())
        }
        Data::Gather(s) => sges(op, s),
    };
    // SEND and NOP carry no remote (the engine does not read it for them).
    op.remote = Remote::default();
    match wqe.body {
        WqeBody::Nop => op.kind = Some(OpKind::Nop),
        WqeBody::Write {
            remote,
            imm,
            data: d,
        } => {
            op.kind = Some(OpKind::Write);
            op.remote = remote;
            op.imm = imm;
            data(op, &d)?;
        }
        WqeBody::Send { imm, data: d } => {
            op.kind = Some(OpKind::Send);
            op.imm = imm;
            data(op, &d)?;
        }
        WqeBody::Read { remote, sges: s } => {
            op.kind = Some(OpKind::Read);
            op.remote = remote;
            sges(op, &s)?;
        }
        WqeBody::Atomic {
            remote,
            local_addr,
            lkey,
            width,
            op: a,
        } => {
            op.kind = Some(OpKind::Atomic);
            op.remote = remote;
            op.atomic = Some((a, u32::from(width)));
            op.sges.push(Sge {
                addr: local_addr,
                length: u32::from(width),
                lkey,
            });
        }
    }
    Ok(())
}

impl DeviceModel for NativeModel {
    fn name(&self) -> &'static str {
        "native"
    }

    fn cqe_bytes(&self) -> u32 {
        32
    }

    fn layout(&self, g: &QpGeometry) -> Result<QpLayout, ModelError> {
        Ok(QpLayout {
            sq_bytes: g.sq_units as usize * UNIT_BYTES as usize,
            rq_stride: (16 * (1 + g.max_sge)).next_power_of_two(),
        })
    }

    fn cq_handle(&self, cq: &CqView) -> CqHandle {
        CqHandle {
            buf: cq.buf.addr(),
            dbrec: cq.dbrec.addr(),
            db: 0,
            entries: cq.entries,
            cqe_bytes: 32,
            cqn: cq.cqn,
            collapsed: u32::from(cq.collapsed),
        }
    }

    /// The doorbell word is the producer position itself.
    fn sq_doorbell(&self, qp: &QpView, pos: u64) -> Option<u64> {
        let v = qp.db.load_u64(0)? as u32;
        let target = widen32(pos, v);
        (target != pos).then_some(target)
    }

    fn fetch(
        &self,
        qp: &QpView,
        pos: u64,
        op: &mut WqeOp,
        scratch: &mut Vec<u8>,
    ) -> Result<(), Malformed> {
        op.reset();
        fetch(qp, pos, op, scratch)
    }

    fn counter_for(&self, _qp: &QpView, start: u64, _units: u32) -> u32 {
        start as u32
    }

    fn rq_producer(&self, qp: &QpView, pos: u64) -> u64 {
        qp.dbrec.load_u64(0).map_or(pos, |v| widen32(pos, v as u32))
    }

    fn fetch_recv(&self, qp: &QpView, pos: u64, out: &mut Vec<Sge>) -> Result<(), BadRecv> {
        out.clear();
        let slot = (pos & (u64::from(qp.geometry.rq_wqes) - 1)) as usize;
        let stride = qp.rq_stride as usize;
        let mut wqe_buf = [0u8; 16 * 32];
        let wqe = wqe_buf.get_mut(..stride).ok_or(BadRecv)?;
        qp.rq.read(slot * stride, wqe);
        let n = u32::from_le_bytes(wqe[..4].try_into().map_err(|_| BadRecv)?) as usize;
        if n > qp.geometry.max_sge as usize || 16 * (n + 1) > stride {
            return Err(BadRecv);
        }
        for i in 0..n {
            let e: NativeSge = bytemuck::pod_read_unaligned(&wqe[16 * (i + 1)..16 * (i + 2)]);
            out.push(Sge {
                addr: e.addr,
                length: e.length,
                lkey: e.lkey,
            });
        }
        Ok(())
    }

    fn cq_outstanding(&self, cq: &CqView, prod: u64) -> u32 {
        let ci = cq.dbrec.load_u64(0).unwrap_or(0);
        (prod as u32).wrapping_sub(ci as u32)
    }

    /// A collapsed CQ's slot is rewritten in place: the owner byte is invalidated first and the
    /// body carries a new generation, so a poller that re-checks both never accepts a torn CQE.
    fn write_cqe(&self, cq: &CqView, c: &Cpl, prod: u64) {
        let log2 = cq.entries.trailing_zeros();
        let slot = if cq.collapsed {
            0
        } else {
            prod & (u64::from(cq.entries) - 1)
        };
        let off = slot as usize * 32;
        let n = NativeCqe {
            counter: c.counter,
            byte_len: c.byte_len,
            imm: c.imm.unwrap_or(0),
            qpn: c.qpn,
            status: c.status.as_raw() as u8,
            opcode: c.opcode as u32 as u8,
            flags: (if c.is_recv { wire::cqe_flags::RECV } else { 0 })
                | (if c.imm.is_some() {
                    wire::cqe_flags::HAS_IMM
                } else {
                    0
                }),
            vendor_err: if c.status.is_ok() {
                0
            } else {
                c.status.as_raw() as u8
            },
            generation: (prod as u8).wrapping_add(1),
            owner: 0,
            ..NativeCqe::default()
        };
        let owner = if cq.collapsed {
            1
        } else {
            wire::owner_for(prod as u32, log2)
        };
        if cq.collapsed {
            cq.buf.store_u8(off + wire::OWNER_OFFSET, 0);
            gda_hal::mmio::dma_publish();
        }
        let bytes = bytemuck::bytes_of(&n);
        cq.buf.write(off, &bytes[..wire::OWNER_OFFSET]);
        cq.buf.store_u8(off + wire::OWNER_OFFSET, owner);
    }

    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}

impl ModelFor<Native> for NativeModel {
    fn sq_handle(&self, qp: &QpView) -> Result<WqHandle, ModelError> {
        Ok(WqHandle {
            buf: qp.sq.addr(),
            dbrec: 0,
            db: qp.db.addr(),
            entries: qp.geometry.sq_units,
            stride: 64,
            qpn: qp.qpn,
            max_inline: qp.geometry.max_inline,
            max_sge: qp.geometry.max_sge,
        })
    }

    fn rq_handle(&self, qp: &QpView) -> WqHandle {
        qp.rq_wq(qp.dbrec.addr(), 0)
    }
}

impl Modeled for Native {
    type Model = NativeModel;
    fn model() -> NativeModel {
        NativeModel
    }
}
