//! Whole send-WQE decoder: the bytes of one WQE (its slots in ring order, unwrapped) back into
//! meaning, with every layout rule checked. Used by the software NIC (which must never trust
//! queue memory), `gda wire decode` and the fuzz targets.

use gda_hal::{AtomicOp, Remote, Sge};

use super::sqe::{self, AtomicExt, BnxtSge, RdmaExt, SqeHdr, SqeHdrRepr};
use super::{ParseError, WqeType};
use crate::mode::WqeMode;

/// Gather entries of a decoded WQE, read in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SgeSlots<'a>(&'a [u8]);

impl<'a> SgeSlots<'a> {
    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len() / 16
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries.
    pub fn iter(&self) -> impl Iterator<Item = Sge> + 'a {
        self.0
            .chunks_exact(16)
            .map(|c| bytemuck::pod_read_unaligned::<BnxtSge>(c).parse())
    }
}

/// The payload of a decoded WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqePayload<'a> {
    /// Inline bytes.
    Inline(&'a [u8]),
    /// Gather entries.
    Sges(SgeSlots<'a>),
}

/// A decoded send WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe<'a> {
    /// The header.
    pub hdr: SqeHdrRepr,
    /// Remote buffer (RDMA and atomics).
    pub remote: Option<Remote>,
    /// Immediate (WRITE/SEND with immediate): the host-order value.
    pub imm: Option<u32>,
    /// Atomic operation.
    pub atomic: Option<AtomicOp>,
    /// Payload (for atomics: the 8-byte result SGE).
    pub payload: WqePayload<'a>,
}

impl<'a> SendWqe<'a> {
    /// Slots the header says the WQE uses (read from the first slot; `None` if too short).
    #[must_use]
    pub fn size_in_slots(first_slot: &[u8]) -> Option<u32> {
        let h: SqeHdr = bytemuck::pod_read_unaligned(first_slot.get(..16)?);
        Some(u32::from(SqeHdrRepr::parse(&h).wqe_size))
    }

    /// Decodes a WQE of `mode` from `bytes` (at least its `wqe_size` slots; more is ignored).
    pub fn parse(bytes: &'a [u8], mode: WqeMode) -> Result<Self, ParseError> {
        let first = bytes.get(..16).ok_or(ParseError::Truncated {
            what: "WQE header",
            need: 16,
            have: bytes.len(),
        })?;
        let hdr = SqeHdrRepr::parse(&bytemuck::pod_read_unaligned::<SqeHdr>(first));
        let ws = usize::from(hdr.wqe_size);
        let max_ws = match mode {
            WqeMode::Static => 8,
            WqeMode::Fixed3 => 3,
            WqeMode::Variable => (sqe::HDR_SLOTS + sqe::MAX_SGE) as usize,
        };
        if ws < 2 || ws > max_ws || (mode == WqeMode::Fixed3 && ws != 3) {
            return Err(ParseError::Range {
                field: "wqe_size",
                value: ws as u64,
            });
        }
        let all = bytes.get(..ws * 16).ok_or(ParseError::Truncated {
            what: "WQE slots",
            need: ws * 16,
            have: bytes.len(),
        })?;
        let ext = &all[16..32];
        let payload = &all[32..];
        let inline = hdr.flags & sqe::flags::INLINE != 0;
        let len = hdr.lhdr & 0xffff_ffff;
        let sges = || -> Result<WqePayload<'a>, ParseError> {
            let s = SgeSlots(payload);
            let total: u64 = s.iter().map(|g| u64::from(g.length)).sum();
            if total != len {
                return Err(ParseError::Layout {
                    what: "header length differs from the sum of the SGE lengths",
                });
            }
            Ok(WqePayload::Sges(s))
        };
        let data = || -> Result<WqePayload<'a>, ParseError> {
            if !inline {
                return sges();
            }
            let n = len as usize;
            if n > payload.len() {
                return Err(ParseError::Layout {
                    what: "inline length runs past the WQE",
                });
            }
            if mode != WqeMode::Fixed3 && n.div_ceil(16) != payload.len() / 16 {
                return Err(ParseError::Layout {
                    what: "inline length does not match the WQE size",
                });
            }
            Ok(WqePayload::Inline(&payload[..n]))
        };
        let rdma = bytemuck::pod_read_unaligned::<RdmaExt>(ext);
        let rdma_remote = Remote {
            addr: rdma.va.get(),
            rkey: rdma.rkey.get(),
        };
        let (remote, imm, atomic, payload) = match hdr.wqe_type {
            WqeType::RdmaWrite => (Some(rdma_remote), None, None, data()?),
            WqeType::RdmaWriteImm => (Some(rdma_remote), Some(hdr.key_immd), None, data()?),
            WqeType::Send => (None, None, None, data()?),
            WqeType::SendImm => (None, Some(hdr.key_immd), None, data()?),
            WqeType::RdmaRead if !inline => (Some(rdma_remote), None, None, sges()?),
            WqeType::AtomicCs | WqeType::AtomicFa if !inline => {
                if ws != 3 {
                    return Err(ParseError::Layout {
                        what: "an atomic has exactly one result SGE",
                    });
                }
                let x = bytemuck::pod_read_unaligned::<AtomicExt>(ext);
                let op = if hdr.wqe_type == WqeType::AtomicCs {
                    AtomicOp::CompareSwap {
                        compare: x.compare.get(),
                        swap: x.swap_add.get(),
                    }
                } else {
                    AtomicOp::FetchAdd {
                        add: x.swap_add.get(),
                    }
                };
                let s = SgeSlots(payload);
                if s.iter().next().map(|g| g.length) != Some(8) {
                    return Err(ParseError::Layout {
                        what: "atomic result SGE must be 8 bytes",
                    });
                }
                let remote = Remote {
                    addr: hdr.lhdr,
                    rkey: hdr.key_immd,
                };
                (Some(remote), None, Some(op), WqePayload::Sges(s))
            }
            WqeType::RdmaRead | WqeType::AtomicCs | WqeType::AtomicFa => {
                return Err(ParseError::Layout {
                    what: "READ and atomics have no inline form",
                });
            }
            t => return Err(ParseError::UnknownOpcode(t.raw())),
        };
        Ok(Self {
            hdr,
            remote,
            imm,
            atomic,
            payload,
        })
    }

    /// Payload bytes (what PSNs count).
    #[must_use]
    pub fn length(&self) -> u64 {
        match self.payload {
            WqePayload::Inline(d) => d.len() as u64,
            WqePayload::Sges(s) => s.iter().map(|g| u64::from(g.length)).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::mode::{Mode, PsnForm};
    use crate::{Bnxt, BnxtSq, device::MAX_SGE};
    use gda_hal::{Payload, Provider, SendFlags, SqPos, WorkRequest, WqHandle};
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    proptest! {
        #[test]
        fn never_panics(raw in proptest::collection::vec(any::<u8>(), 0..200), m in 0u8..3) {
            let mode = [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3][m as usize];
            let _ = SendWqe::parse(&raw, mode);
        }

        /// post → parse gives back the request, in every mode.
        #[test]
        fn post_then_parse(m in 0u8..3, op in 0u8..7, n in 0usize..=6, len in 0u32..5000, inline_len in 0usize..=96,
                           imm: u32, addr: u64, rkey: u32, a: u64, b: u64) {
            let mode = [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3][m as usize];
            let (n, inline_len) = if mode == WqeMode::Fixed3 { (n.min(1), inline_len.min(16)) } else { (n, inline_len) };
            let sges: Vec<Sge> = (0..n as u64).map(|i| Sge { addr: 0x1000 * i, length: len, lkey: i as u32 }).collect();
            let data: Vec<u8> = (0..inline_len as u8).collect();
            let remote = Remote { addr, rkey };
            let one = [Sge { addr: 0x40, length: 8, lkey: 7 }];
            let wr = match op {
                0 => WorkRequest::Write { remote, payload: Payload::Sges(&sges), imm: None },
                1 => WorkRequest::Write { remote, payload: Payload::Inline(&data), imm: Some(imm) },
                2 => WorkRequest::Send { payload: Payload::Inline(&data), imm: None },
                3 => WorkRequest::Send { payload: Payload::Sges(&sges), imm: Some(imm) },
                4 => WorkRequest::Read { remote, sges: &sges },
                5 => WorkRequest::Atomic { remote, local: one[0], op: AtomicOp::CompareSwap { compare: a, swap: b }, bytes: 8 },
                _ => WorkRequest::Atomic { remote, local: one[0], op: AtomicOp::FetchAdd { add: a }, bytes: 8 },
            };
            let mut ring = vec![0u8; 16 * 8 * 8 + 16 * 64];
            let base = ring.as_mut_ptr() as u64;
            let wq = WqHandle { buf: base, entries: 8, max_inline: 96, max_sge: MAX_SGE, ..WqHandle::default() };
            let m = Mode { wqe: mode, psn: PsnForm::Msn };
            let wq = BnxtSq::new(wq, m, base + 16 * 8 * 8, m.psn_entries(8), 1024, 0).unwrap();
            prop_assume!(Bnxt::check(&wq, &wr).is_ok());
            // SAFETY: the ring and table are owned here.
            unsafe { Bnxt::post(&wq, SqPos::ZERO, &wr, SendFlags::SIGNALED) };
            let w = SendWqe::parse(&ring, mode).unwrap();
            match wr {
                WorkRequest::Atomic { op, .. } => prop_assert_eq!(w.atomic, Some(op)),
                WorkRequest::Read { .. } | WorkRequest::Write { payload: Payload::Sges(_), .. } | WorkRequest::Send { payload: Payload::Sges(_), .. } => {
                    if let WqePayload::Sges(s) = w.payload {
                        let got: Vec<Sge> = s.iter().filter(|g| mode != WqeMode::Fixed3 || g.length != 0 || n == 1).collect();
                        prop_assert_eq!(&got[..], &sges[..]);
                    } else {
                        prop_assert!(false, "expected SGEs");
                    }
                }
                _ => prop_assert_eq!(w.payload, WqePayload::Inline(&data)),
            }
            if let WorkRequest::Write { imm: i, .. } | WorkRequest::Send { imm: i, .. } = wr {
                prop_assert_eq!(w.imm, i);
            }
        }
    }
}
