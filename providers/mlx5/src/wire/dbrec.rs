//! Doorbell records in host memory (nic-formats.md §B.1): the QP record (receive counter in word
//! 0, send counter in word 1) and the CQ record (consumer index in word 0, arm word in word 1).
//! Both words are big-endian.

use bytemuck::{Pod, Zeroable};
use gda_hal::Be32;

/// Word index of the receive counter in a QP doorbell record (`MLX5_RCV_DBR`).
pub const RCV_DBR: usize = 0;
/// Word index of the send counter in a QP doorbell record (`MLX5_SND_DBR`).
pub const SND_DBR: usize = 1;
/// Word index of the consumer index in a CQ doorbell record (`MLX5_CQ_SET_CI`).
pub const CQ_SET_CI: usize = 0;
/// Word index of the arm word in a CQ doorbell record (`MLX5_CQ_ARM_DB`).
pub const CQ_ARM_DB: usize = 1;
/// Offset of the CQ doorbell in the UAR page (`MLX5_CQ_DOORBELL`).
pub const CQ_DOORBELL_OFFSET: u64 = 0x20;

/// An 8-byte doorbell record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct DoorbellRecord(pub [Be32; 2]);

const _: () = assert!(core::mem::size_of::<DoorbellRecord>() == 8);

/// The send-counter word for a producer position (`cur_post & 0xffff`).
#[inline(always)]
#[must_use]
pub const fn sq_word(cur_post: u32) -> Be32 {
    Be32::new(cur_post & 0xffff)
}

/// The receive-counter word for a receive head (`head & 0xffff`).
#[inline(always)]
#[must_use]
pub const fn rq_word(head: u32) -> Be32 {
    Be32::new(head & 0xffff)
}

/// The CQ consumer-index word (`ci & 0xffffff`).
#[inline(always)]
#[must_use]
pub const fn cq_ci_word(ci: u32) -> Be32 {
    Be32::new(ci & 0x00ff_ffff)
}

/// The CQ arm word: `sn << 28 | cmd | ci` (`solicited_only` selects `MLX5_CQ_DB_REQ_NOT_SOL`).
#[inline(always)]
#[must_use]
pub const fn cq_arm_word(sn: u32, solicited_only: bool, ci: u32) -> u32 {
    ((sn & 3) << 28) | if solicited_only { 1 << 24 } else { 0 } | (ci & 0x00ff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_words() {
        assert_eq!(sq_word(0x1_ffff).to_bytes(), [0, 0, 0xff, 0xff]);
        assert_eq!(sq_word(0x2_0000).to_bytes(), [0, 0, 0, 0]);
        assert_eq!(cq_ci_word(0x0123_4567).to_bytes(), [0, 0x23, 0x45, 0x67]);
        // nic-formats.md §C.5: sn=1, ci=0x10 → `10 00 00 10`.
        assert_eq!(
            Be32::new(cq_arm_word(1, false, 0x10)).to_bytes(),
            [0x10, 0, 0, 0x10]
        );
    }
}
