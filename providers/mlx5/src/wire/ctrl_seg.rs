//! Control segment — the first 16 bytes of every send WQE (`struct mlx5_wqe_ctrl_seg`,
//! nic-formats.md §A.2–A.3).

use bytemuck::{Pod, Zeroable};
use gda_hal::Be32;
use gda_hal::bits::BitField;

use super::{Opcode, ParseError};

/// Byte ranges of the control segment (the view layer's map).
pub mod field {
    use core::ops::Range;
    /// BE32: opmod (31..24) | wqe_index (23..8) | opcode (7..0).
    pub const OPMOD_IDX_OPCODE: Range<usize> = 0..4;
    /// BE32: qpn (31..8) | ds (5..0).
    pub const QPN_DS: Range<usize> = 4..8;
    /// WQE signature byte.
    pub const SIGNATURE: usize = 8;
    /// BE16: DC initiator stream channel (0 for RC).
    pub const DCI_STREAM: Range<usize> = 9..11;
    /// Fence mode | completion mode | solicited.
    pub const FM_CE_SE: usize = 11;
    /// Immediate / invalidate key, as passed.
    pub const IMM: Range<usize> = 12..16;
}

/// opmod in `opmod_idx_opcode`.
pub const OPMOD: BitField = BitField::new(24, 8);
/// 16-bit WQE index in `opmod_idx_opcode`.
pub const WQE_INDEX: BitField = BitField::new(8, 16);
/// Opcode in `opmod_idx_opcode`.
pub const OPCODE: BitField = BitField::new(0, 8);
/// QP number in `qpn_ds`.
pub const QPN: BitField = BitField::new(8, 24);
/// DS count (16-byte units in the whole WQE) in `qpn_ds`.
pub const DS: BitField = BitField::new(0, 6);
/// Reserved bits 7..6 of `qpn_ds`.
pub const QPN_DS_RSVD: BitField = BitField::new(6, 2);

/// `fm_ce_se` bit meanings.
pub mod fm_ce_se {
    /// Fence mode field (bits 7..5), as a mask.
    pub const FM_MASK: u8 = 0xe0;
    /// rdma-core's `MLX5_WQE_CTRL_FENCE` (fence mode 4, small-and-fence) for `IBV_SEND_FENCE`.
    pub const FENCE: u8 = 0x80;
    /// Initiator small fence (fence mode 1).
    pub const INITIATOR_SMALL_FENCE: u8 = 0x20;
    /// Completion mode field (bits 3..2), as a mask.
    pub const CE_MASK: u8 = 0x0c;
    /// CE = 2: always generate a CQE (`MLX5_WQE_CTRL_CQ_UPDATE`).
    pub const CQ_UPDATE: u8 = 0x08;
    /// Solicited event.
    pub const SOLICITED: u8 = 0x02;
    /// Reserved bits (4 and 0).
    pub const RESERVED: u8 = 0x11;
}

/// Layer 1: the control segment as it sits in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct CtrlSeg {
    /// opmod | wqe_index | opcode.
    pub opmod_idx_opcode: Be32,
    /// qpn | ds.
    pub qpn_ds: Be32,
    /// WQE signature (0 unless the QP has signatures enabled).
    pub signature: u8,
    /// DC stream channel id, BE16 (unaligned in the C struct, so bytes here).
    pub dci_stream_channel_id: [u8; 2],
    /// Fence / completion / solicited flags.
    pub fm_ce_se: u8,
    /// Immediate data or invalidate key, bytes as on the wire.
    pub imm: Be32,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<CtrlSeg>() == 16);
    assert!(offset_of!(CtrlSeg, opmod_idx_opcode) == field::OPMOD_IDX_OPCODE.start);
    assert!(offset_of!(CtrlSeg, qpn_ds) == field::QPN_DS.start);
    assert!(offset_of!(CtrlSeg, signature) == field::SIGNATURE);
    assert!(offset_of!(CtrlSeg, dci_stream_channel_id) == field::DCI_STREAM.start);
    assert!(offset_of!(CtrlSeg, fm_ce_se) == field::FM_CE_SE);
    assert!(offset_of!(CtrlSeg, imm) == field::IMM.start);
};

/// Layer 2: the control segment's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtrlRepr {
    /// Operation.
    pub opcode: Opcode,
    /// Opcode modifier (masked atomics: `0x08 | (log2(bytes) - 2)`).
    pub opmod: u8,
    /// 16-bit WQE index (`cur_post & 0xffff`).
    pub wqe_index: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// 16-byte units in the whole WQE (1..=63).
    pub ds: u8,
    /// Signature byte.
    pub signature: u8,
    /// DC stream channel id.
    pub dci_stream: u16,
    /// Raw `fm_ce_se` byte (see [`fm_ce_se`]).
    pub fm_ce_se: u8,
    /// Immediate, as the 32-bit big-endian value on the wire (host-order value).
    pub imm: u32,
}

impl CtrlRepr {
    /// Encodes into layer 1.
    #[inline(always)]
    #[must_use]
    pub const fn emit(&self) -> CtrlSeg {
        CtrlSeg {
            opmod_idx_opcode: Be32::new(
                OPMOD.place(self.opmod as u32)
                    | WQE_INDEX.place(self.wqe_index as u32)
                    | OPCODE.place(self.opcode.raw() as u32),
            ),
            qpn_ds: Be32::new(QPN.place(self.qpn) | DS.place(self.ds as u32)),
            signature: self.signature,
            dci_stream_channel_id: self.dci_stream.to_be_bytes(),
            fm_ce_se: self.fm_ce_se,
            imm: Be32::new(self.imm),
        }
    }

    /// Decodes layer 1, rejecting what hardware would reject (DS out of 1..=63, reserved bits).
    pub fn parse(seg: &CtrlSeg) -> Result<Self, ParseError> {
        let w0 = seg.opmod_idx_opcode.get();
        let w1 = seg.qpn_ds.get();
        if QPN_DS_RSVD.get(w1) != 0 {
            return Err(ParseError::Reserved {
                field: "ctrl.qpn_ds[7:6]",
            });
        }
        let ds = DS.get(w1) as u8;
        if ds == 0 {
            return Err(ParseError::Range {
                field: "ctrl.ds",
                value: 0,
            });
        }
        Ok(Self {
            opcode: Opcode::from_raw(OPCODE.get(w0) as u8),
            opmod: OPMOD.get(w0) as u8,
            wqe_index: WQE_INDEX.get(w0) as u16,
            qpn: QPN.get(w1),
            ds,
            signature: seg.signature,
            dci_stream: u16::from_be_bytes(seg.dci_stream_channel_id),
            fm_ce_se: seg.fm_ce_se,
            imm: seg.imm.get(),
        })
    }

    /// Whether a CQE is requested on success.
    #[must_use]
    pub const fn signaled(&self) -> bool {
        self.fm_ce_se & fm_ce_se::CE_MASK == fm_ce_se::CQ_UPDATE
    }

    /// Whether a fence is requested.
    #[must_use]
    pub const fn fenced(&self) -> bool {
        self.fm_ce_se & fm_ce_se::FM_MASK != 0
    }

    /// Whether the solicited-event bit is set.
    #[must_use]
    pub const fn solicited(&self) -> bool {
        self.fm_ce_se & fm_ce_se::SOLICITED != 0
    }
}

/// A zero-copy view of a control segment over any byte buffer (smoltcp-style layer 2 view).
#[derive(Debug)]
pub struct CtrlView<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> CtrlView<T> {
    /// Wraps `buf` after checking it holds 16 bytes.
    pub fn new_checked(buf: T) -> Result<Self, ParseError> {
        if buf.as_ref().len() < 16 {
            return Err(ParseError::Truncated {
                what: "ctrl segment",
                need: 16,
                have: buf.as_ref().len(),
            });
        }
        Ok(Self(buf))
    }

    fn word(&self, r: core::ops::Range<usize>) -> u32 {
        let b = self.0.as_ref();
        u32::from_be_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
    }

    /// The opcode.
    #[must_use]
    pub fn opcode(&self) -> Opcode {
        Opcode::from_raw(OPCODE.get(self.word(field::OPMOD_IDX_OPCODE)) as u8)
    }
    /// The 16-bit WQE index.
    #[must_use]
    pub fn wqe_index(&self) -> u16 {
        WQE_INDEX.get(self.word(field::OPMOD_IDX_OPCODE)) as u16
    }
    /// The DS count.
    #[must_use]
    pub fn ds(&self) -> u8 {
        DS.get(self.word(field::QPN_DS)) as u8
    }
    /// The QP number.
    #[must_use]
    pub fn qpn(&self) -> u32 {
        QPN.get(self.word(field::QPN_DS))
    }
    /// The `fm_ce_se` byte.
    #[must_use]
    pub fn fm_ce_se(&self) -> u8 {
        self.0.as_ref()[field::FM_CE_SE]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CtrlView<T> {
    /// Writes every byte of the segment from `repr`.
    pub fn emit(&mut self, repr: &CtrlRepr) {
        let b = self.0.as_mut();
        let w0 = OPMOD.place(u32::from(repr.opmod))
            | WQE_INDEX.place(u32::from(repr.wqe_index))
            | OPCODE.place(u32::from(repr.opcode.raw()));
        b[field::OPMOD_IDX_OPCODE].copy_from_slice(&w0.to_be_bytes());
        let w1 = QPN.place(repr.qpn) | DS.place(u32::from(repr.ds));
        b[field::QPN_DS].copy_from_slice(&w1.to_be_bytes());
        b[field::SIGNATURE] = repr.signature;
        b[field::DCI_STREAM].copy_from_slice(&repr.dci_stream.to_be_bytes());
        b[field::FM_CE_SE] = repr.fm_ce_se;
        b[field::IMM].copy_from_slice(&repr.imm.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_rdma_write_ctrl() {
        // nic-formats.md §A.11: RDMA_WRITE idx 0xFFFE, QPN 0x1234, signaled, ds=3.
        let r = CtrlRepr {
            opcode: Opcode::RdmaWrite,
            opmod: 0,
            wqe_index: 0xfffe,
            qpn: 0x1234,
            ds: 3,
            signature: 0,
            dci_stream: 0,
            fm_ce_se: fm_ce_se::CQ_UPDATE,
            imm: 0,
        };
        assert_eq!(
            bytemuck::bytes_of(&r.emit()),
            &[
                0x00, 0xff, 0xfe, 0x08, 0x00, 0x12, 0x34, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0
            ]
        );
        assert!(r.signaled() && !r.fenced());
    }

    fn arb_repr() -> impl Strategy<Value = CtrlRepr> {
        (
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            0u32..1 << 24,
            1u8..64,
            any::<u8>(),
            any::<u16>(),
            any::<u8>(),
            any::<u32>(),
        )
            .prop_map(|(op, opmod, idx, qpn, ds, sig, dci, f, imm)| CtrlRepr {
                opcode: Opcode::from_raw(op),
                opmod,
                wqe_index: idx,
                qpn,
                ds,
                signature: sig,
                dci_stream: dci,
                fm_ce_se: f,
                imm,
            })
    }

    proptest! {
        #[test]
        fn round_trip_and_layers_agree(r in arb_repr()) {
            let pod = r.emit();
            prop_assert_eq!(CtrlRepr::parse(&pod), Ok(r));
            let mut buf = [0xa5u8; 16];
            CtrlView::new_checked(&mut buf[..]).unwrap().emit(&r);
            prop_assert_eq!(&buf[..], bytemuck::bytes_of(&pod));
            let v = CtrlView::new_checked(&buf[..]).unwrap();
            prop_assert_eq!((v.opcode(), v.wqe_index(), v.ds(), v.qpn(), v.fm_ce_se()), (r.opcode, r.wqe_index, r.ds, r.qpn, r.fm_ce_se));
        }

        #[test]
        fn parse_never_panics(b in proptest::array::uniform16(any::<u8>())) {
            let seg: CtrlSeg = bytemuck::cast(b);
            if let Ok(r) = CtrlRepr::parse(&seg) { prop_assert_eq!(r.emit(), seg); }
        }
    }
}
