//! The 64-bit doorbell (`struct bnxt_re_db_hdr`, nic-formats.md §E.5): one little-endian store
//! to offset 0 of the doorbell page. There is no doorbell record: the index in the doorbell is
//! the producer (or CQ consumer) state.

/// Doorbell types (bits 63..60).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DbType {
    /// Send queue producer index.
    Sq = 0x0,
    /// Receive queue producer index.
    Rq = 0x1,
    /// SRQ producer index.
    Srq = 0x2,
    /// SRQ arm.
    SrqArm = 0x3,
    /// CQ consumer index.
    Cq = 0x4,
    /// Arm CQ for solicited events.
    CqArmSe = 0x5,
    /// Arm CQ for any event.
    CqArmAll = 0x6,
    /// Enable CQ arming.
    CqArmEna = 0x7,
    /// Enable SRQ arming.
    SrqArmEna = 0x8,
    /// CQ cut acknowledgement.
    CqCutAck = 0x9,
    /// Push start.
    PushStart = 0xc,
    /// Push end.
    PushEnd = 0xd,
    /// Null.
    Null = 0xf,
}

impl DbType {
    /// Decodes a 4-bit type, `None` for unassigned values.
    #[must_use]
    pub const fn from_raw(v: u8) -> Option<Self> {
        Some(match v {
            0x0 => Self::Sq,
            0x1 => Self::Rq,
            0x2 => Self::Srq,
            0x3 => Self::SrqArm,
            0x4 => Self::Cq,
            0x5 => Self::CqArmSe,
            0x6 => Self::CqArmAll,
            0x7 => Self::CqArmEna,
            0x8 => Self::SrqArmEna,
            0x9 => Self::CqCutAck,
            0xc => Self::PushStart,
            0xd => Self::PushEnd,
            0xf => Self::Null,
            _ => return None,
        })
    }
}

/// Index field mask (bits 23..0).
pub const INDEX_MASK: u64 = 0x00ff_ffff;
/// Epoch bit.
pub const EPOCH_SHIFT: u32 = 24;
/// Toggle bit (arm doorbells).
pub const TOGGLE_SHIFT: u32 = 25;
/// xid field (bits 51..32, 20 bits).
pub const XID_SHIFT: u32 = 32;
/// xid mask (after shifting).
pub const XID_MASK: u64 = 0x000f_ffff;
/// Valid bit.
pub const VALID: u64 = 1 << 58;
/// Type shift.
pub const TYPE_SHIFT: u32 = 60;

/// A decoded doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DoorbellRepr {
    /// Type.
    pub db_type: DbType,
    /// QP / CQ / SRQ id (20 bits).
    pub xid: u32,
    /// Producer (or consumer) index (24 bits).
    pub index: u32,
    /// Epoch bit.
    pub epoch: bool,
    /// Toggle bit.
    pub toggle: bool,
}

impl DoorbellRepr {
    /// The 64-bit value (stored little-endian).
    #[inline(always)]
    #[must_use]
    pub const fn value(&self) -> u64 {
        (self.index as u64 & INDEX_MASK)
            | ((self.epoch as u64) << EPOCH_SHIFT)
            | ((self.toggle as u64) << TOGGLE_SHIFT)
            | ((self.xid as u64 & XID_MASK) << XID_SHIFT)
            | VALID
            | ((self.db_type as u64) << TYPE_SHIFT)
    }

    /// The bytes stored to the doorbell page.
    #[inline(always)]
    #[must_use]
    pub const fn to_bytes(&self) -> [u8; 8] {
        self.value().to_le_bytes()
    }

    /// Decodes, checking the valid bit, the type and the reserved bits.
    pub fn parse(v: u64) -> Result<Self, super::ParseError> {
        if v & VALID == 0 {
            return Err(super::ParseError::Range {
                field: "doorbell.valid",
                value: v,
            });
        }
        let reserved = v & !(INDEX_MASK
            | 1 << EPOCH_SHIFT
            | 1 << TOGGLE_SHIFT
            | XID_MASK << XID_SHIFT
            | VALID
            | 0xf << TYPE_SHIFT);
        if reserved != 0 {
            return Err(super::ParseError::Reserved {
                field: "doorbell reserved bits",
            });
        }
        let t = (v >> TYPE_SHIFT) as u8;
        Ok(Self {
            db_type: DbType::from_raw(t).ok_or(super::ParseError::Range {
                field: "doorbell.type",
                value: u64::from(t),
            })?,
            xid: ((v >> XID_SHIFT) & XID_MASK) as u32,
            index: (v & INDEX_MASK) as u32,
            epoch: v >> EPOCH_SHIFT & 1 == 1,
            toggle: v >> TOGGLE_SHIFT & 1 == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    fn db(db_type: DbType, xid: u32, index: u32, epoch: bool) -> u64 {
        DoorbellRepr {
            db_type,
            xid,
            index,
            epoch,
            toggle: false,
        }
        .value()
    }

    #[test]
    fn golden_values() {
        // nic-formats.md §E.5, checked there with the provider's own db.c.
        assert_eq!(db(DbType::Sq, 0xabc, 0x123, true), 0x0400_0abc_0100_0123);
        assert_eq!(db(DbType::Rq, 0xabc, 7, false), 0x1400_0abc_0000_0007);
        assert_eq!(db(DbType::Cq, 0x10, 0x7f, true), 0x4400_0010_0100_007f);
        assert_eq!(
            db(DbType::CqArmAll, 0x10, 0x7f, true),
            0x6400_0010_0100_007f
        );
        assert_eq!(
            DoorbellRepr::parse(0x0400_0abc_0100_0123)
                .unwrap()
                .to_bytes(),
            [0x23, 0x01, 0x00, 0x01, 0xbc, 0x0a, 0x00, 0x04]
        );
        // §E.4 doorbells: QP 0x21, WQE indexes 1, 2, 3.
        assert_eq!(db(DbType::Sq, 0x21, 1, false), 0x0400_0021_0000_0001);
        assert!(DoorbellRepr::parse(0).is_err(), "valid bit required");
    }

    proptest! {
        #[test]
        fn round_trip(t in proptest::sample::select(std::vec![0u8,1,2,3,4,5,6,7,8,9,0xc,0xd,0xf]), xid in 0u32..1 << 20, index in 0u32..1 << 24, epoch: bool, toggle: bool) {
            let r = DoorbellRepr { db_type: DbType::from_raw(t).unwrap(), xid, index, epoch, toggle };
            prop_assert_eq!(DoorbellRepr::parse(r.value()), Ok(r));
        }

        #[test]
        fn parse_never_panics(v: u64) {
            if let Ok(r) = DoorbellRepr::parse(v) { prop_assert_eq!(r.value(), v); }
        }
    }
}
