//! PSN/MSN table entries (nic-formats.md §E.6). For RC the software fills one entry per WQE at
//! post time; the hardware uses it to retransmit. The table lies directly after the SQ ring.

use bytemuck::{Pod, Zeroable};
use gda_hal::bits::BitField;
use gda_hal::{Le16, Le32, Le64};

/// PSNs are 24-bit.
pub const PSN_MASK: u32 = 0x00ff_ffff;
/// Start PSN in `opc_spsn`, next PSN in `flg_npsn`.
pub const PSN: BitField = BitField::new(0, 24);
/// Opcode (the `ibv_wc_opcode` the provider records) in `opc_spsn`; flags in `flg_npsn`.
pub const HI: BitField = BitField::new(24, 8);

/// Packets a message of `len` bytes uses at `mtu` bytes per packet: `ceil(len / mtu)`, at least
/// one (a zero-length WRITE still sends one packet). An `mtu` of 0 counts one packet.
#[inline(always)]
#[must_use]
pub const fn packets(len: u64, mtu: u32) -> u32 {
    if mtu == 0 || len == 0 {
        return 1;
    }
    let p = len.div_ceil(mtu as u64);
    if p > PSN_MASK as u64 {
        PSN_MASK
    } else {
        p as u32
    }
}

/// `start + n` in 24-bit PSN space.
#[inline(always)]
#[must_use]
pub const fn psn_add(start: u32, n: u32) -> u32 {
    start.wrapping_add(n) & PSN_MASK
}

/// Legacy 8-byte entry (`bnxt_re_psns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct PsnEntry {
    /// opcode (31..24) | start PSN (23..0).
    pub opc_spsn: Le32,
    /// flags (31..24) | next PSN (23..0).
    pub flg_npsn: Le32,
}

/// Gen P5/P7 16-byte entry (`bnxt_re_psns_ext`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct PsnExtEntry {
    /// As [`PsnEntry::opc_spsn`].
    pub opc_spsn: Le32,
    /// As [`PsnEntry::flg_npsn`].
    pub flg_npsn: Le32,
    /// Index of the WQE's first slot.
    pub st_slot_idx: Le16,
    /// Reserved (offset 10).
    pub reserved_10: [u8; 6],
}

/// Thor2 MSN-table entry (`bnxt_re_msns`): start PSN (23..0), next PSN (47..24), start slot (63..48).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct MsnEntry(pub Le64);

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<PsnEntry>() == 8 && offset_of!(PsnEntry, flg_npsn) == 4);
    assert!(size_of::<PsnExtEntry>() == 16 && offset_of!(PsnExtEntry, st_slot_idx) == 8);
    assert!(size_of::<MsnEntry>() == 8);
};

/// What an entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PsnRepr {
    /// First PSN of the message.
    pub start: u32,
    /// PSN after the message.
    pub next: u32,
    /// Opcode byte (legacy/ext) — the `ibv_wc_opcode` of the WQE.
    pub opcode: u8,
    /// Flags byte (legacy/ext).
    pub flags: u8,
    /// First slot of the WQE (ext and MSN forms).
    pub start_slot: u16,
}

impl PsnRepr {
    /// Legacy form.
    #[must_use]
    pub const fn emit_legacy(&self) -> PsnEntry {
        PsnEntry {
            opc_spsn: Le32::new(PSN.place(self.start) | HI.place(self.opcode as u32)),
            flg_npsn: Le32::new(PSN.place(self.next) | HI.place(self.flags as u32)),
        }
    }

    /// P5/P7 form.
    #[must_use]
    pub const fn emit_ext(&self) -> PsnExtEntry {
        let l = self.emit_legacy();
        PsnExtEntry {
            opc_spsn: l.opc_spsn,
            flg_npsn: l.flg_npsn,
            st_slot_idx: Le16::new(self.start_slot),
            reserved_10: [0; 6],
        }
    }

    /// Thor2 MSN form.
    #[must_use]
    pub const fn emit_msn(&self) -> MsnEntry {
        MsnEntry(Le64::new(
            (self.start & PSN_MASK) as u64
                | ((self.next & PSN_MASK) as u64) << 24
                | (self.start_slot as u64) << 48,
        ))
    }

    /// Decodes a legacy entry.
    #[must_use]
    pub const fn parse_legacy(e: &PsnEntry) -> Self {
        let a = e.opc_spsn.get();
        let b = e.flg_npsn.get();
        Self {
            start: PSN.get(a),
            next: PSN.get(b),
            opcode: HI.get(a) as u8,
            flags: HI.get(b) as u8,
            start_slot: 0,
        }
    }

    /// Decodes a P5/P7 entry.
    #[must_use]
    pub const fn parse_ext(e: &PsnExtEntry) -> Self {
        let l = Self::parse_legacy(&PsnEntry {
            opc_spsn: e.opc_spsn,
            flg_npsn: e.flg_npsn,
        });
        Self {
            start_slot: e.st_slot_idx.get(),
            ..l
        }
    }

    /// Decodes an MSN entry (no opcode/flags).
    #[must_use]
    pub const fn parse_msn(e: &MsnEntry) -> Self {
        let v = e.0.get();
        Self {
            start: (v & PSN_MASK as u64) as u32,
            next: ((v >> 24) & PSN_MASK as u64) as u32,
            opcode: 0,
            flags: 0,
            start_slot: (v >> 48) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_entry_and_packets() {
        // nic-formats.md §E.4: WRITE 4096 B at MTU 1024 from PSN 0x100 → `00 01 00 01 04 01 00 00`.
        let r = PsnRepr {
            start: 0x100,
            next: psn_add(0x100, packets(4096, 1024)),
            opcode: 1,
            flags: 0,
            start_slot: 0,
        };
        assert_eq!(
            bytemuck::bytes_of(&r.emit_legacy()),
            &[0x00, 0x01, 0x00, 0x01, 0x04, 0x01, 0x00, 0x00]
        );
        assert_eq!(
            (
                packets(0, 1024),
                packets(1, 1024),
                packets(1024, 1024),
                packets(1025, 1024)
            ),
            (1, 1, 1, 2)
        );
        assert_eq!(psn_add(0xff_fffe, 3), 1, "24-bit wrap");
    }

    proptest! {
        #[test]
        fn forms_round_trip(start in 0u32..1 << 24, next in 0u32..1 << 24, op: u8, fl: u8, slot: u16) {
            let r = PsnRepr { start, next, opcode: op, flags: fl, start_slot: slot };
            prop_assert_eq!(PsnRepr::parse_ext(&r.emit_ext()), r);
            prop_assert_eq!(PsnRepr::parse_legacy(&r.emit_legacy()), PsnRepr { start_slot: 0, ..r });
            prop_assert_eq!(PsnRepr::parse_msn(&r.emit_msn()), PsnRepr { opcode: 0, flags: 0, ..r });
        }

        #[test]
        fn psn_math_matches_u64_model(start in 0u32..1 << 24, lens in proptest::collection::vec(0u64..1 << 22, 1..50), mtu_log in 8u32..13) {
            let mtu = 1u32 << mtu_log;
            let mut psn = start;
            let mut model = u64::from(start);
            for len in lens {
                let p = packets(len, mtu);
                // Model: count MTU-sized packets until the message is sent (at least one).
                let (mut rem, mut n) = (len, 0u64);
                loop {
                    n += 1;
                    rem = rem.saturating_sub(u64::from(mtu));
                    if rem == 0 { break; }
                }
                prop_assert_eq!(u64::from(p), n);
                psn = psn_add(psn, p);
                model += u64::from(p);
                prop_assert_eq!(u64::from(psn), model & 0xff_ffff);
            }
        }
    }
}
