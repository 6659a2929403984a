//! Queue modes: how WQEs sit in the ring and which PSN-table form software fills
//! (nic-formats.md §E.1, §E.6). The kernel reports them at context and QP creation; device
//! code gets them from [`crate::BnxtSq::mode`], decoded once at queue creation.

/// How send WQEs occupy the ring, and what a "unit" of the posting protocol is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WqeMode {
    /// The kernel's static mode: every WQE takes 8 slots (128 bytes). Unit = one WQE; the
    /// doorbell index and the PSN-table index are WQE indexes.
    Static = 0,
    /// The kernel's variable mode: a WQE takes exactly the slots it uses (2 + SGEs, or 2 +
    /// inline slots) and may wrap the ring. Unit = one 16-byte slot; the doorbell index is the
    /// slot index.
    Variable = 1,
    /// Variable mode with every WQE exactly 3 slots (header, extended header, one SGE or up to
    /// 16 inline bytes): the form GPU-initiated code uses (MORI, rocSHMEM), so a WQE's place is a
    /// multiplication, not a running sum. Unit = one WQE; the ring holds `3 × entries` slots;
    /// the doorbell index is the slot index.
    Fixed3 = 2,
}

impl WqeMode {
    /// Slots one unit of this mode spans.
    #[inline(always)]
    #[must_use]
    pub const fn slots_per_unit(self) -> u32 {
        match self {
            Self::Static => 8,
            Self::Variable => 1,
            Self::Fixed3 => 3,
        }
    }

    /// Name as tools spell it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Variable => "variable",
            Self::Fixed3 => "fixed3",
        }
    }
}

/// Which PSN-table entries software fills per WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PsnForm {
    /// 8-byte `bnxt_re_psns` (pre-P5 chips), indexed by the WQE's doorbell-unit position.
    Legacy = 0,
    /// 16-byte `bnxt_re_psns_ext` (Gen P5/P7 without the MSN table), same index.
    Ext = 1,
    /// 8-byte `bnxt_re_msns` (Thor2 hardware retransmission), indexed by the message number
    /// modulo the table size.
    Msn = 2,
}

impl PsnForm {
    /// Bytes of one entry.
    #[inline(always)]
    #[must_use]
    pub const fn entry_bytes(self) -> u32 {
        match self {
            Self::Ext => 16,
            Self::Legacy | Self::Msn => 8,
        }
    }

    /// Name as tools spell it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Ext => "ext",
            Self::Msn => "msn",
        }
    }
}

/// A send queue's mode: WQE layout and PSN-table form. `#[repr(C)]`: it is part of
/// [`crate::BnxtSq`], which the C++ device API (`device/include/gda/bnxt.hpp`) reads as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Mode {
    /// WQE layout.
    pub wqe: WqeMode,
    /// PSN-table form.
    pub psn: PsnForm,
}

impl Default for Mode {
    /// Thor2 with the kernel's default: static WQEs, MSN table.
    fn default() -> Self {
        Self {
            wqe: WqeMode::Static,
            psn: PsnForm::Msn,
        }
    }
}

impl Mode {
    /// A compact encoding (for tools and serialized endpoints): WQE mode in bits 3..0, PSN form in 7..4.
    #[inline(always)]
    #[must_use]
    pub const fn bits(self) -> u32 {
        self.wqe as u32 | (self.psn as u32) << 4
    }

    /// Decodes [`Mode::bits`]; `None` for values no mode has.
    #[inline(always)]
    #[must_use]
    pub const fn from_bits(v: u32) -> Option<Self> {
        let wqe = match v & 0xf {
            0 => WqeMode::Static,
            1 => WqeMode::Variable,
            2 => WqeMode::Fixed3,
            _ => return None,
        };
        let psn = match (v >> 4) & 0xf {
            0 => PsnForm::Legacy,
            1 => PsnForm::Ext,
            2 => PsnForm::Msn,
            _ => return None,
        };
        if v >> 8 != 0 {
            return None;
        }
        Some(Self { wqe, psn })
    }

    /// Slots in a send ring of `entries` units.
    #[inline(always)]
    #[must_use]
    pub const fn ring_slots(self, entries: u32) -> u32 {
        entries.wrapping_mul(self.wqe.slots_per_unit())
    }

    /// PSN-table entries a send ring of `entries` units needs, as rdma-core sizes it
    /// (`bnxt_re_get_sqmem_size` / `bnxt_re_alloc_queues`): legacy/ext forms have one entry per
    /// doorbell index (WQE index in static mode, slot otherwise); the MSN table has
    /// `roundup_pow2(WQEs)` entries in static mode and `roundup_pow2(slots) / 2` otherwise.
    #[must_use]
    pub const fn psn_entries(self, entries: u32) -> u32 {
        match (self.psn, self.wqe) {
            (PsnForm::Msn, WqeMode::Static) => entries,
            (PsnForm::Msn, _) => {
                let s = self.ring_slots(entries);
                let p = if s <= 1 { 1 } else { s.next_power_of_two() };
                if p >= 2 { p / 2 } else { 1 }
            }
            (_, WqeMode::Static) => entries,
            (_, _) => self.ring_slots(entries),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_and_reject() {
        for wqe in [WqeMode::Static, WqeMode::Variable, WqeMode::Fixed3] {
            for psn in [PsnForm::Legacy, PsnForm::Ext, PsnForm::Msn] {
                let m = Mode { wqe, psn };
                assert_eq!(Mode::from_bits(m.bits()), Some(m));
            }
        }
        assert_eq!(Mode::from_bits(3), None);
        assert_eq!(Mode::from_bits(0x30), None);
        assert_eq!(Mode::from_bits(0x100), None);
        let m = Mode {
            wqe: WqeMode::Fixed3,
            psn: PsnForm::Msn,
        };
        // 3 × 64 = 192 slots → 256 / 2 (MORI sizes its MSN table the same way).
        assert_eq!(m.psn_entries(64), 128);
    }
}
