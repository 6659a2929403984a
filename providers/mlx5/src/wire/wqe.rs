//! A whole send WQE: decode from bytes (untrusted) and encode back.
//!
//! Input is the WQE in ring order, unwrapped (`ds * 16` bytes starting at the control segment).
//! The decoder checks what hardware checks — DS count against the opcode's layout, inline length
//! against the DS count, pointer segments without the inline flag — so a software NIC can turn a
//! malformed WQE into the error CQE the hardware would write, and `gda wire decode` can say
//! exactly what is wrong. It never panics and never reads past `bytes`.

use gda_hal::{AtomicOp, Remote, Sge};

use super::atomic_seg::{
    self, AtomicSeg, MaskedCs32Seg, MaskedCs64Seg, MaskedFa32Seg, MaskedFa64Seg,
};
use super::{CtrlRepr, CtrlSeg, DataSeg, Opcode, ParseError, RaddrSeg, inline_seg};

/// Most 16-byte units in one WQE (6-bit DS field).
pub const MAX_DS: u32 = 63;

/// The pointer segments of a decoded WQE: a zero-copy view over their bytes (each one already
/// validated by [`WqeRepr::parse`]).
#[derive(Clone, Copy)]
pub struct SgeSegs<'a> {
    bytes: &'a [u8],
}

impl<'a> SgeSegs<'a> {
    /// Number of segments.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bytes.len() / 16
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The gather entries, in WQE order.
    pub fn iter(&self) -> impl Iterator<Item = Sge> + 'a {
        self.bytes.chunks_exact(16).map(|c| {
            let d: DataSeg = bytemuck::pod_read_unaligned(c);
            Sge {
                addr: d.addr.get(),
                length: d.byte_count.get(),
                lkey: d.lkey.get(),
            }
        })
    }
}

impl PartialEq for SgeSegs<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for SgeSegs<'_> {}

impl core::fmt::Debug for SgeSegs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// An atomic's operands and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicRepr {
    /// Operation and operands.
    pub op: AtomicOp,
    /// Operand width (4 or 8).
    pub bytes: u32,
}

/// The payload of a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadRepr<'a> {
    /// No payload segments.
    None,
    /// Inline bytes.
    Inline(&'a [u8]),
    /// Pointer segments.
    Sges(SgeSegs<'a>),
}

/// A decoded send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WqeRepr<'a> {
    /// Control segment.
    pub ctrl: CtrlRepr,
    /// Remote address (RDMA and atomics).
    pub raddr: Option<Remote>,
    /// Atomic operands.
    pub atomic: Option<AtomicRepr>,
    /// Payload (data segments or inline bytes).
    pub payload: PayloadRepr<'a>,
}

fn seg<T: bytemuck::Pod>(bytes: &[u8], ds: usize, what: &'static str) -> Result<T, ParseError> {
    let size = core::mem::size_of::<T>();
    let start = ds * 16;
    bytes
        .get(start..start + size)
        .map(bytemuck::pod_read_unaligned)
        .ok_or(ParseError::Truncated {
            what,
            need: start + size,
            have: bytes.len(),
        })
}

fn parse_payload(
    bytes: &[u8],
    from_ds: usize,
    ds: usize,
    allow_inline: bool,
) -> Result<PayloadRepr<'_>, ParseError> {
    if from_ds >= ds {
        return Ok(PayloadRepr::None);
    }
    let first: DataSeg = seg(bytes, from_ds, "payload segment")?;
    if let Some(len) = inline_seg::parse_header(first.byte_count) {
        if !allow_inline {
            return Err(ParseError::Layout {
                what: "inline data on an opcode that has no inline form",
            });
        }
        let need_ds = inline_seg::ds_for(len) as usize;
        if need_ds == 0 || from_ds + need_ds != ds {
            return Err(ParseError::Range {
                field: "inline.byte_count",
                value: u64::from(len),
            });
        }
        let start = from_ds * 16 + inline_seg::HEADER_BYTES as usize;
        let data = bytes
            .get(start..start + len as usize)
            .ok_or(ParseError::Truncated {
                what: "inline payload",
                need: start + len as usize,
                have: bytes.len(),
            })?;
        return Ok(PayloadRepr::Inline(data));
    }
    for k in from_ds..ds {
        let d: DataSeg = seg(bytes, k, "data segment")?;
        d.parse()?;
    }
    let segs = bytes
        .get(from_ds * 16..ds * 16)
        .ok_or(ParseError::Truncated {
            what: "data segments",
            need: ds * 16,
            have: bytes.len(),
        })?;
    Ok(PayloadRepr::Sges(SgeSegs { bytes: segs }))
}

impl<'a> WqeRepr<'a> {
    /// Decodes a WQE from its unwrapped bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ParseError> {
        let ctrl_seg: CtrlSeg = seg(bytes, 0, "ctrl segment")?;
        let ctrl = CtrlRepr::parse(&ctrl_seg)?;
        let ds = usize::from(ctrl.ds);
        if bytes.len() < ds * 16 {
            return Err(ParseError::Truncated {
                what: "WQE (ctrl.ds)",
                need: ds * 16,
                have: bytes.len(),
            });
        }
        let mut w = WqeRepr {
            ctrl,
            raddr: None,
            atomic: None,
            payload: PayloadRepr::None,
        };
        let need = |ok: bool, what: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(ParseError::Layout { what })
            }
        };
        match ctrl.opcode {
            Opcode::Nop => need(ds == 1, "NOP must be exactly 1 DS")?,
            Opcode::RdmaWrite | Opcode::RdmaWriteImm => {
                need(ds >= 2, "RDMA WRITE needs a raddr segment")?;
                w.raddr = Some(seg::<RaddrSeg>(bytes, 1, "raddr")?.parse());
                w.payload = parse_payload(bytes, 2, ds, true)?;
            }
            Opcode::Send | Opcode::SendImm | Opcode::SendInval => {
                w.payload = parse_payload(bytes, 1, ds, true)?;
            }
            Opcode::RdmaRead => {
                need(ds >= 2, "RDMA READ needs a raddr segment")?;
                w.raddr = Some(seg::<RaddrSeg>(bytes, 1, "raddr")?.parse());
                w.payload = parse_payload(bytes, 2, ds, false)?;
            }
            Opcode::AtomicCs | Opcode::AtomicFa => {
                need(ds == 4, "ATOMIC must be 4 DS")?;
                need(ctrl.opmod == 0, "standard atomics have opmod 0")?;
                w.raddr = Some(seg::<RaddrSeg>(bytes, 1, "raddr")?.parse());
                let a: AtomicSeg = seg(bytes, 2, "atomic")?;
                let op = if ctrl.opcode == Opcode::AtomicCs {
                    AtomicOp::CompareSwap {
                        compare: a.compare.get(),
                        swap: a.swap_add.get(),
                    }
                } else {
                    AtomicOp::FetchAdd {
                        add: a.swap_add.get(),
                    }
                };
                w.atomic = Some(AtomicRepr { op, bytes: 8 });
                w.payload = parse_payload(bytes, 3, ds, false)?;
            }
            Opcode::AtomicMaskedCs | Opcode::AtomicMaskedFa => {
                let width = atomic_seg::ext_bytes(ctrl.opmod).ok_or(ParseError::Range {
                    field: "ctrl.opmod",
                    value: u64::from(ctrl.opmod),
                })?;
                w.raddr = Some(seg::<RaddrSeg>(bytes, 1, "raddr")?.parse());
                let (op, data_ds) = match (ctrl.opcode, width) {
                    (Opcode::AtomicMaskedCs, 4) => {
                        let s: MaskedCs32Seg = seg(bytes, 2, "masked CS")?;
                        let op = AtomicOp::MaskedCompareSwap {
                            compare: u64::from(s.compare.get()),
                            compare_mask: u64::from(s.compare_mask.get()),
                            swap: u64::from(s.swap.get()),
                            swap_mask: u64::from(s.swap_mask.get()),
                        };
                        (op, 3)
                    }
                    (Opcode::AtomicMaskedCs, _) => {
                        let s: MaskedCs64Seg = seg(bytes, 2, "masked CS")?;
                        let op = AtomicOp::MaskedCompareSwap {
                            compare: s.compare.get(),
                            compare_mask: s.compare_mask.get(),
                            swap: s.swap.get(),
                            swap_mask: s.swap_mask.get(),
                        };
                        (op, 4)
                    }
                    (_, 4) => {
                        let s: MaskedFa32Seg = seg(bytes, 2, "masked FA")?;
                        let op = AtomicOp::MaskedFetchAdd {
                            add: u64::from(s.add.get()),
                            field_boundary: u64::from(s.field_boundary.get()),
                        };
                        (op, 3)
                    }
                    _ => {
                        let s: MaskedFa64Seg = seg(bytes, 2, "masked FA")?;
                        let op = AtomicOp::MaskedFetchAdd {
                            add: s.add.get(),
                            field_boundary: s.field_boundary.get(),
                        };
                        (op, 3)
                    }
                };
                need(
                    ds == data_ds + 1,
                    "masked atomic DS count does not match its width",
                )?;
                w.atomic = Some(AtomicRepr { op, bytes: width });
                w.payload = parse_payload(bytes, data_ds, ds, false)?;
            }
            _ => return Err(ParseError::UnknownOpcode(ctrl.opcode.raw())),
        }
        if w.atomic.is_some() {
            let ok = matches!(w.payload, PayloadRepr::Sges(l) if l.len() == 1);
            need(ok, "an atomic carries exactly one data segment")?;
        }
        Ok(w)
    }

    /// Encodes into `out` (contiguous, `ds * 16` bytes) and returns the byte count.
    /// Bytes of the last 16-byte unit past the inline payload are written as zero.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, ParseError> {
        let total = usize::from(self.ctrl.ds) * 16;
        let out = out.get_mut(..total).ok_or(ParseError::Truncated {
            what: "output buffer",
            need: total,
            have: 0,
        })?;
        out.fill(0);
        let mut put = |ds: usize, bytes: &[u8]| -> Result<(), ParseError> {
            let dst = out
                .get_mut(ds * 16..ds * 16 + bytes.len())
                .ok_or(ParseError::Range {
                    field: "ctrl.ds",
                    value: total as u64 / 16,
                })?;
            dst.copy_from_slice(bytes);
            Ok(())
        };
        put(0, bytemuck::bytes_of(&self.ctrl.emit()))?;
        let mut k = 1;
        if let Some(r) = self.raddr {
            put(k, bytemuck::bytes_of(&RaddrSeg::emit(r)))?;
            k += 1;
        }
        if let Some(a) = self.atomic {
            let segs = atomic_seg::encode(&a.op, a.bytes);
            for unit in segs.as_slice() {
                put(k, unit)?;
                k += 1;
            }
        }
        match self.payload {
            PayloadRepr::None => {}
            PayloadRepr::Inline(data) => {
                let len = u32::try_from(data.len()).map_err(|_| ParseError::Range {
                    field: "inline",
                    value: u64::MAX,
                })?;
                let mut hdr = [0u8; 4];
                hdr.copy_from_slice(&inline_seg::header(len).to_bytes());
                put(k, &hdr)?;
                let start = k * 16 + 4;
                let dst = out
                    .get_mut(start..start + data.len())
                    .ok_or(ParseError::Range {
                        field: "ctrl.ds",
                        value: total as u64 / 16,
                    })?;
                dst.copy_from_slice(data);
            }
            PayloadRepr::Sges(list) => {
                for s in list.iter() {
                    put(k, bytemuck::bytes_of(&DataSeg::emit(&s)))?;
                    k += 1;
                }
            }
        }
        Ok(total)
    }
}
