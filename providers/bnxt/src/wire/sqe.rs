//! Send-WQE header (`struct bnxt_re_bsqe`), its 16-byte extended headers, and the SGE
//! (nic-formats.md §E.2). All fields little-endian.

use bytemuck::{Pod, Zeroable};
use gda_hal::bits::BitField;
use gda_hal::{Le32, Le64, Remote, Sge};

use super::WqeType;

/// Bytes in one queue slot.
pub const SLOT_BYTES: u32 = 16;
/// Slots of the WQE header (bsqe + extended header).
pub const HDR_SLOTS: u32 = 2;

/// WQE type in `rsv_ws_fl_wt`.
pub const TYPE: BitField = BitField::new(0, 8);
/// Flags in `rsv_ws_fl_wt`.
pub const FLAGS: BitField = BitField::new(8, 8);
/// WQE size in 16-byte slots actually used.
pub const WQE_SIZE: BitField = BitField::new(16, 8);

/// `rsv_ws_fl_wt` flag bits.
pub mod flags {
    /// Generate a CQE.
    pub const SIGNALED: u8 = 0x01;
    /// Read fence.
    pub const RD_FENCE: u8 = 0x02;
    /// Fence (used for `IBV_SEND_FENCE`).
    pub const UC_FENCE: u8 = 0x04;
    /// Solicited event.
    pub const SE: u8 = 0x08;
    /// Inline payload.
    pub const INLINE: u8 = 0x10;
}

/// Layer 1: the first slot of every send WQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct SqeHdr {
    /// type | flags | wqe size | reserved.
    pub rsv_ws_fl_wt: Le32,
    /// Immediate (byte-reversed network value), or the rkey for atomics.
    pub key_immd: Le32,
    /// Payload length (SEND/WRITE/READ) or remote VA (atomics).
    pub lhdr: Le64,
}

/// RDMA extended header (WRITE, WRITE_IMM, READ).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct RdmaExt {
    /// Remote VA.
    pub va: Le64,
    /// Remote key.
    pub rkey: Le32,
    /// Reserved (offset 12).
    pub reserved_12: Le32,
}

/// Atomic extended header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct AtomicExt {
    /// Swap value (CS) or addend (FA).
    pub swap_add: Le64,
    /// Compare value (CS).
    pub compare: Le64,
}

/// A gather entry — note the order: address, lkey, length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BnxtSge {
    /// Address.
    pub addr: Le64,
    /// Local key.
    pub lkey: Le32,
    /// Length.
    pub length: Le32,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<SqeHdr>() == 16);
    assert!(offset_of!(SqeHdr, key_immd) == 4 && offset_of!(SqeHdr, lhdr) == 8);
    assert!(size_of::<RdmaExt>() == 16);
    assert!(offset_of!(RdmaExt, rkey) == 8 && offset_of!(RdmaExt, reserved_12) == 12);
    assert!(size_of::<AtomicExt>() == 16 && offset_of!(AtomicExt, compare) == 8);
    assert!(size_of::<BnxtSge>() == 16);
    assert!(offset_of!(BnxtSge, lkey) == 8 && offset_of!(BnxtSge, length) == 12);
};

impl BnxtSge {
    /// Encodes a gather entry.
    #[inline(always)]
    #[must_use]
    pub const fn emit(s: &Sge) -> Self {
        Self {
            addr: Le64::new(s.addr),
            lkey: Le32::new(s.lkey),
            length: Le32::new(s.length),
        }
    }

    /// Decodes.
    #[inline(always)]
    #[must_use]
    pub const fn parse(&self) -> Sge {
        Sge {
            addr: self.addr.get(),
            length: self.length.get(),
            lkey: self.lkey.get(),
        }
    }
}

impl RdmaExt {
    /// Encodes a remote buffer.
    #[inline(always)]
    #[must_use]
    pub const fn emit(r: Remote) -> Self {
        Self {
            va: Le64::new(r.addr),
            rkey: Le32::new(r.rkey),
            reserved_12: Le32::ZERO,
        }
    }
}

/// Layer 2: the header's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SqeHdrRepr {
    /// WQE type.
    pub wqe_type: WqeType,
    /// Flag bits ([`flags`]).
    pub flags: u8,
    /// Slots used (2 + SGEs, or 2 + inline slots).
    pub wqe_size: u8,
    /// `key_immd` (raw 32-bit value).
    pub key_immd: u32,
    /// `lhdr` (raw 64-bit value).
    pub lhdr: u64,
}

impl SqeHdrRepr {
    /// Encodes.
    #[inline(always)]
    #[must_use]
    pub const fn emit(&self) -> SqeHdr {
        SqeHdr {
            rsv_ws_fl_wt: Le32::new(
                TYPE.place(self.wqe_type.raw() as u32)
                    | FLAGS.place(self.flags as u32)
                    | WQE_SIZE.place(self.wqe_size as u32),
            ),
            key_immd: Le32::new(self.key_immd),
            lhdr: Le64::new(self.lhdr),
        }
    }

    /// Decodes (reserved bits 31..24 are ignored, as hardware does).
    #[inline(always)]
    #[must_use]
    pub const fn parse(h: &SqeHdr) -> Self {
        let w = h.rsv_ws_fl_wt.get();
        Self {
            wqe_type: WqeType::from_raw(TYPE.get(w) as u8),
            flags: FLAGS.get(w) as u8,
            wqe_size: WQE_SIZE.get(w) as u8,
            key_immd: h.key_immd.get(),
            lhdr: h.lhdr.get(),
        }
    }
}

/// The `key_immd` value for an immediate whose network-order value is `imm` (the provider stores
/// `le32(value_of_network_order_imm)`: memory bytes are the reverse of wire order).
#[inline(always)]
#[must_use]
pub const fn imm_to_key_immd(imm: u32) -> u32 {
    imm.swap_bytes()
}

/// Largest inline payload (`BNXT_RE_MAX_INLINE_SIZE`).
pub const MAX_INLINE: u32 = 96;
/// Most SGEs in one WQE (static mode's 6; variable WQEs are held to the same 8-slot bound).
pub const MAX_SGE: u32 = 6;
/// Inline bytes that fit the fixed three-slot form.
pub const FIXED3_MAX_INLINE: u32 = 16;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_write_header() {
        // nic-formats.md §E.4: RDMA_WRITE 4096 B signalled, ws 3.
        let h = SqeHdrRepr {
            wqe_type: WqeType::RdmaWrite,
            flags: flags::SIGNALED,
            wqe_size: 3,
            key_immd: 0,
            lhdr: 0x1000,
        };
        assert_eq!(
            bytemuck::bytes_of(&h.emit()),
            &[0x04, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0]
        );
        let x = RdmaExt::emit(Remote {
            addr: 0x7f00_0000_1000,
            rkey: 0xabcd,
        });
        assert_eq!(
            bytemuck::bytes_of(&x),
            &[0, 0x10, 0, 0, 0, 0x7f, 0, 0, 0xcd, 0xab, 0, 0, 0, 0, 0, 0]
        );
        let s = BnxtSge::emit(&Sge {
            addr: 0x7f00_0000_2000,
            length: 4096,
            lkey: 0x5678,
        });
        assert_eq!(
            bytemuck::bytes_of(&s),
            &[
                0, 0x20, 0, 0, 0, 0x7f, 0, 0, 0x78, 0x56, 0, 0, 0, 0x10, 0, 0
            ]
        );
        // SEND_WITH_IMM header (§E.4): `key_immd` bytes `ef be ad de`.
        let h = SqeHdrRepr {
            wqe_type: WqeType::SendImm,
            flags: flags::INLINE | flags::SE,
            wqe_size: 3,
            key_immd: imm_to_key_immd(0xefbe_adde),
            lhdr: 5,
        };
        assert_eq!(
            &bytemuck::bytes_of(&h.emit())[..8],
            &[0x01, 0x18, 0x03, 0, 0xef, 0xbe, 0xad, 0xde]
        );
    }

    proptest! {
        #[test]
        fn header_round_trip(t: u8, f: u8, ws: u8, k: u32, l: u64) {
            let r = SqeHdrRepr { wqe_type: WqeType::from_raw(t), flags: f, wqe_size: ws, key_immd: k, lhdr: l };
            prop_assert_eq!(SqeHdrRepr::parse(&r.emit()), r);
        }

        #[test]
        fn sge_round_trip(a: u64, len: u32, k: u32) {
            let s = Sge { addr: a, length: len, lkey: k };
            prop_assert_eq!(BnxtSge::emit(&s).parse(), s);
        }
    }
}
