//! The `IBV_QP_*` attribute-mask bits (`enum ibv_qp_attr_mask`), as plain `u32`s, with their
//! names for messages: the one set of them in gda. The verbs-compatible library checks a
//! program's masks with them (`ibv_modify_qp`), the hardware control paths build their own
//! calls with them.

use ibverbs_sys::ibv_qp_attr_mask as m;

/// `IBV_QP_STATE`.
pub const STATE: u32 = m::IBV_QP_STATE.0;
/// `IBV_QP_CUR_STATE`.
pub const CUR_STATE: u32 = m::IBV_QP_CUR_STATE.0;
/// `IBV_QP_EN_SQD_ASYNC_NOTIFY`.
pub const EN_SQD_ASYNC_NOTIFY: u32 = m::IBV_QP_EN_SQD_ASYNC_NOTIFY.0;
/// `IBV_QP_ACCESS_FLAGS`.
pub const ACCESS_FLAGS: u32 = m::IBV_QP_ACCESS_FLAGS.0;
/// `IBV_QP_PKEY_INDEX`.
pub const PKEY_INDEX: u32 = m::IBV_QP_PKEY_INDEX.0;
/// `IBV_QP_PORT`.
pub const PORT: u32 = m::IBV_QP_PORT.0;
/// `IBV_QP_QKEY`.
pub const QKEY: u32 = m::IBV_QP_QKEY.0;
/// `IBV_QP_AV`.
pub const AV: u32 = m::IBV_QP_AV.0;
/// `IBV_QP_PATH_MTU`.
pub const PATH_MTU: u32 = m::IBV_QP_PATH_MTU.0;
/// `IBV_QP_TIMEOUT`.
pub const TIMEOUT: u32 = m::IBV_QP_TIMEOUT.0;
/// `IBV_QP_RETRY_CNT`.
pub const RETRY_CNT: u32 = m::IBV_QP_RETRY_CNT.0;
/// `IBV_QP_RNR_RETRY`.
pub const RNR_RETRY: u32 = m::IBV_QP_RNR_RETRY.0;
/// `IBV_QP_RQ_PSN`.
pub const RQ_PSN: u32 = m::IBV_QP_RQ_PSN.0;
/// `IBV_QP_MAX_QP_RD_ATOMIC`.
pub const MAX_QP_RD_ATOMIC: u32 = m::IBV_QP_MAX_QP_RD_ATOMIC.0;
/// `IBV_QP_ALT_PATH`.
pub const ALT_PATH: u32 = m::IBV_QP_ALT_PATH.0;
/// `IBV_QP_MIN_RNR_TIMER`.
pub const MIN_RNR_TIMER: u32 = m::IBV_QP_MIN_RNR_TIMER.0;
/// `IBV_QP_SQ_PSN`.
pub const SQ_PSN: u32 = m::IBV_QP_SQ_PSN.0;
/// `IBV_QP_MAX_DEST_RD_ATOMIC`.
pub const MAX_DEST_RD_ATOMIC: u32 = m::IBV_QP_MAX_DEST_RD_ATOMIC.0;
/// `IBV_QP_PATH_MIG_STATE`.
pub const PATH_MIG_STATE: u32 = m::IBV_QP_PATH_MIG_STATE.0;
/// `IBV_QP_CAP`.
pub const CAP: u32 = m::IBV_QP_CAP.0;
/// `IBV_QP_DEST_QPN`.
pub const DEST_QPN: u32 = m::IBV_QP_DEST_QPN.0;
/// `IBV_QP_RATE_LIMIT`.
pub const RATE_LIMIT: u32 = m::IBV_QP_RATE_LIMIT.0;

/// Bits 21..=24: `_IBV_QP_SMAC`, `_ALT_SMAC`, `_VID`, `_ALT_VID` — older kernels took them,
/// libibverbs never exposed them (verbs.h). Only the extended command can carry them.
#[allow(dead_code, reason = "named for the reader: never accepted")]
pub const LEGACY_ETH: u32 = 0xf << 21;

/// Every bit with a name, in bit order, for messages.
pub const NAMED: [(u32, &str); 22] = [
    (STATE, "IBV_QP_STATE"),
    (CUR_STATE, "IBV_QP_CUR_STATE"),
    (EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"),
    (ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"),
    (PKEY_INDEX, "IBV_QP_PKEY_INDEX"),
    (PORT, "IBV_QP_PORT"),
    (QKEY, "IBV_QP_QKEY"),
    (AV, "IBV_QP_AV"),
    (PATH_MTU, "IBV_QP_PATH_MTU"),
    (TIMEOUT, "IBV_QP_TIMEOUT"),
    (RETRY_CNT, "IBV_QP_RETRY_CNT"),
    (RNR_RETRY, "IBV_QP_RNR_RETRY"),
    (RQ_PSN, "IBV_QP_RQ_PSN"),
    (MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"),
    (ALT_PATH, "IBV_QP_ALT_PATH"),
    (MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"),
    (SQ_PSN, "IBV_QP_SQ_PSN"),
    (MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"),
    (PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"),
    (CAP, "IBV_QP_CAP"),
    (DEST_QPN, "IBV_QP_DEST_QPN"),
    (RATE_LIMIT, "IBV_QP_RATE_LIMIT"),
];

/// `IBV_QP_A|IBV_QP_B|…` for the bits of `mask` (unnamed bits as `bit N`; `0` for none).
#[must_use]
pub fn names(mask: u32) -> String {
    let mut parts: Vec<String> = Vec::new();
    for bit in 0..32 {
        let b = 1u32 << bit;
        if mask & b == 0 {
            continue;
        }
        match NAMED.iter().find(|(v, _)| *v == b) {
            Some((_, n)) => parts.push((*n).to_owned()),
            None => parts.push(format!("bit {bit}")),
        }
    }
    if parts.is_empty() {
        "0".to_owned()
    } else {
        parts.join("|")
    }
}
