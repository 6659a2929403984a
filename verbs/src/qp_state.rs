//! The Linux kernel's RC QP state table (`ib_modify_qp_is_ok` in
//! `drivers/infiniband/core/verbs.c`, the `qp_state_table` rows for `IB_QPT_RC`) and the
//! attribute checks an mlx5 driver makes in `ibv_modify_qp`.
//!
//! For each (current, next) state pair the table says whether the transition exists, which
//! attribute-mask bits it requires and which it allows besides `IBV_QP_STATE`. A missing
//! required bit, any other bit, or a pair not in the table is `EINVAL`; so is an attribute
//! value the port cannot honour. Every refusal names the transition and the attributes.

use std::ffi::c_int;

use ibverbs_sys as sys;

use crate::abi::Errno;

/// What the checks need to know of the device's port(s).
#[derive(Clone, Debug)]
pub struct PortView {
    /// Number of ports (ports are 1..=count).
    pub port_count: u8,
    /// The port's active MTU (`enum ibv_mtu`: 1 = 256 … 5 = 4096).
    pub active_mtu: u32,
    /// RoCE (Ethernet link layer): an address handle must carry a GRH.
    pub ethernet: bool,
    /// Populated GID indices and whether each is RoCE v2.
    pub gids: Vec<(u32, bool)>,
    /// P_Key table length.
    pub pkeys: u16,
    /// Largest `max_rd_atomic` / `max_dest_rd_atomic`.
    pub max_rd_atomic: u8,
}

/// `enum ibv_qp_attr_mask` bits.
#[allow(missing_docs)]
pub mod mask {
    pub const STATE: u32 = 1 << 0;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const ALT_PATH: u32 = 1 << 14;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    pub const CAP: u32 = 1 << 19;
    pub const DEST_QPN: u32 = 1 << 20;
    pub const RATE_LIMIT: u32 = 1 << 25;

    /// Names, for messages.
    pub const NAMES: [(u32, &str); 22] = [
        (STATE, "STATE"),
        (CUR_STATE, "CUR_STATE"),
        (EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY"),
        (ACCESS_FLAGS, "ACCESS_FLAGS"),
        (PKEY_INDEX, "PKEY_INDEX"),
        (PORT, "PORT"),
        (QKEY, "QKEY"),
        (AV, "AV"),
        (PATH_MTU, "PATH_MTU"),
        (TIMEOUT, "TIMEOUT"),
        (RETRY_CNT, "RETRY_CNT"),
        (RNR_RETRY, "RNR_RETRY"),
        (RQ_PSN, "RQ_PSN"),
        (MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"),
        (ALT_PATH, "ALT_PATH"),
        (MIN_RNR_TIMER, "MIN_RNR_TIMER"),
        (SQ_PSN, "SQ_PSN"),
        (MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"),
        (PATH_MIG_STATE, "PATH_MIG_STATE"),
        (CAP, "CAP"),
        (DEST_QPN, "DEST_QPN"),
        (RATE_LIMIT, "RATE_LIMIT"),
    ];
}

/// QP states (`enum ibv_qp_state`).
pub const RESET: u32 = 0;
/// Initialised.
pub const INIT: u32 = 1;
/// Ready to receive.
pub const RTR: u32 = 2;
/// Ready to send.
pub const RTS: u32 = 3;
/// Send queue drained.
pub const SQD: u32 = 4;
/// Send queue error.
pub const SQE: u32 = 5;
/// Error.
pub const ERR: u32 = 6;

/// A state's name.
pub fn state_name(s: u32) -> &'static str {
    ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
        .get(s as usize)
        .copied()
        .unwrap_or("?")
}

/// Names of the bits in `m` (`IBV_QP_STATE|IBV_QP_AV|…`).
pub fn mask_names(m: u32) -> String {
    let mut v: Vec<String> = mask::NAMES
        .iter()
        .filter(|(b, _)| m & b != 0)
        .map(|(_, n)| format!("IBV_QP_{n}"))
        .collect();
    let known: u32 = mask::NAMES.iter().map(|(b, _)| b).sum();
    if m & !known != 0 {
        v.push(format!("{:#x}", m & !known));
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join("|")
    }
}

/// The RC row of the kernel's table: `Some((required, optional))` when `cur → next` exists.
pub fn transition(cur: u32, next: u32) -> Option<(u32, u32)> {
    use mask::*;
    Some(match (cur, next) {
        (_, RESET) | (_, ERR) if cur <= ERR => (0, 0),
        (RESET, INIT) => (PKEY_INDEX | PORT | ACCESS_FLAGS, 0),
        (INIT, INIT) => (0, PKEY_INDEX | PORT | ACCESS_FLAGS),
        (INIT, RTR) => (
            AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
            ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
        ),
        (RTR, RTS) => (
            SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
            CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
        ),
        (RTS, RTS) => (
            0,
            CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER,
        ),
        (RTS, SQD) => (0, EN_SQD_ASYNC_NOTIFY),
        (SQD, RTS) => (
            0,
            CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
        ),
        (SQD, SQD) => (
            0,
            PKEY_INDEX
                | PORT
                | AV
                | ALT_PATH
                | ACCESS_FLAGS
                | TIMEOUT
                | RETRY_CNT
                | RNR_RETRY
                | MAX_QP_RD_ATOMIC
                | MAX_DEST_RD_ATOMIC
                | MIN_RNR_TIMER
                | PATH_MIG_STATE,
        ),
        (SQE, RTS) => (0, CUR_STATE | ACCESS_FLAGS),
        _ => return None,
    })
}

/// Checks `ibv_modify_qp(qp, attr, mask)` for an RC QP in state `cur` and returns the state
/// it moves to; `Err` carries the errno a kernel driver returns and which check refused.
pub fn check_modify(
    cur: sys::ibv_qp_state::Type,
    attr: &sys::ibv_qp_attr,
    mask_bits: c_int,
    port: &PortView,
) -> Result<sys::ibv_qp_state::Type, Errno> {
    use mask::*;
    let m = mask_bits as u32;
    let next = if m & STATE != 0 { attr.qp_state } else { cur };
    if next > ERR || cur > ERR {
        return Err(Errno::inval(format!("qp_state {next} is not a QP state")));
    }
    let arrow = format!("{}→{}", state_name(cur), state_name(next));
    let Some((req, opt)) = transition(cur, next) else {
        return Err(Errno::inval(format!(
            "{arrow} is not a transition of an RC QP (ib_modify_qp_is_ok)"
        )));
    };
    if m & CUR_STATE != 0 {
        if !matches!(cur, RTR | RTS | SQD | SQE) {
            return Err(Errno::inval(format!(
                "{arrow}: IBV_QP_CUR_STATE given in state {}",
                state_name(cur)
            )));
        }
        if attr.cur_qp_state != cur {
            return Err(Errno::inval(format!(
                "{arrow}: cur_qp_state {} does not match the QP's state",
                state_name(attr.cur_qp_state)
            )));
        }
    }
    if m & req != req {
        return Err(Errno::inval(format!(
            "{arrow} requires {} (given: {})",
            mask_names(req & !m),
            mask_names(m)
        )));
    }
    let extra = m & !(req | opt | STATE);
    if extra != 0 {
        return Err(Errno::inval(format!(
            "{arrow} does not take {} (given: {})",
            mask_names(extra),
            mask_names(m)
        )));
    }
    check_values(attr, m, port).map_err(|why| Errno::inval(format!("{arrow}: {why}")))?;
    Ok(next)
}

fn check_values(a: &sys::ibv_qp_attr, m: u32, port: &PortView) -> Result<(), String> {
    use mask::*;
    let psn_ok = |v: u32| v < (1 << 24);
    if m & PORT != 0 && (a.port_num == 0 || a.port_num > port.port_count) {
        return Err(format!("port_num {} does not exist", a.port_num));
    }
    if m & PKEY_INDEX != 0 && a.pkey_index >= port.pkeys {
        return Err(format!(
            "pkey_index {} is outside the P_Key table ({} entries)",
            a.pkey_index, port.pkeys
        ));
    }
    if m & ACCESS_FLAGS != 0 && a.qp_access_flags & !0xf != 0 {
        return Err(format!(
            "qp_access_flags {:#x} has unknown bits",
            a.qp_access_flags
        ));
    }
    if m & AV != 0 {
        let ah = &a.ah_attr;
        if ah.port_num != 0 && ah.port_num > port.port_count {
            return Err(format!("ah_attr.port_num {} does not exist", ah.port_num));
        }
        if port.ethernet && ah.is_global == 0 {
            return Err("RoCE needs a GRH: set ah_attr.is_global and grh.sgid_index".into());
        }
        if ah.is_global != 0 {
            let idx = u32::from(ah.grh.sgid_index);
            if !port.gids.iter().any(|&(i, _)| i == idx) {
                let have: Vec<String> = port.gids.iter().map(|(i, _)| i.to_string()).collect();
                return Err(format!(
                    "grh.sgid_index {idx} names no GID (populated: {})",
                    have.join(", ")
                ));
            }
            if ah.grh.hop_limit == 0 && port.ethernet {
                // A kernel accepts it, but routed RoCE then drops every packet: say so.
                crate::abi::trace(format_args!("note: grh.hop_limit 0 on RoCE"));
            }
        }
        if ah.static_rate > 22 {
            return Err(format!(
                "ah_attr.static_rate {} is not an ibv_rate",
                ah.static_rate
            ));
        }
    }
    if m & PATH_MTU != 0 && (a.path_mtu < 1 || a.path_mtu > 5) {
        return Err(format!("path_mtu {} is not an ibv_mtu (1..=5)", a.path_mtu));
    }
    if m & PATH_MTU != 0 && a.path_mtu > port.active_mtu {
        return Err(format!(
            "path_mtu {} ({} bytes) exceeds the port's active MTU {} ({} bytes)",
            a.path_mtu,
            128 << a.path_mtu,
            port.active_mtu,
            128 << port.active_mtu
        ));
    }
    if m & DEST_QPN != 0 && !psn_ok(a.dest_qp_num) {
        return Err(format!(
            "dest_qp_num {:#x} does not fit in 24 bits",
            a.dest_qp_num
        ));
    }
    if m & RQ_PSN != 0 && !psn_ok(a.rq_psn) {
        return Err(format!("rq_psn {:#x} does not fit in 24 bits", a.rq_psn));
    }
    if m & SQ_PSN != 0 && !psn_ok(a.sq_psn) {
        return Err(format!("sq_psn {:#x} does not fit in 24 bits", a.sq_psn));
    }
    if m & RETRY_CNT != 0 && a.retry_cnt > 7 {
        return Err(format!("retry_cnt {} > 7", a.retry_cnt));
    }
    if m & RNR_RETRY != 0 && a.rnr_retry > 7 {
        return Err(format!("rnr_retry {} > 7", a.rnr_retry));
    }
    if m & TIMEOUT != 0 && a.timeout > 31 {
        return Err(format!("timeout {} > 31", a.timeout));
    }
    if m & MIN_RNR_TIMER != 0 && a.min_rnr_timer > 31 {
        return Err(format!("min_rnr_timer {} > 31", a.min_rnr_timer));
    }
    if m & MAX_QP_RD_ATOMIC != 0 && a.max_rd_atomic > port.max_rd_atomic {
        return Err(format!(
            "max_rd_atomic {} > the device's {}",
            a.max_rd_atomic, port.max_rd_atomic
        ));
    }
    if m & MAX_DEST_RD_ATOMIC != 0 && a.max_dest_rd_atomic > port.max_rd_atomic {
        return Err(format!(
            "max_dest_rd_atomic {} > the device's {}",
            a.max_dest_rd_atomic, port.max_rd_atomic
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::mask::*;
    use super::*;

    fn port() -> PortView {
        PortView {
            port_count: 1,
            active_mtu: 5,
            ethernet: true,
            gids: vec![(0, false), (1, true), (2, false), (3, true)],
            pkeys: 1,
            max_rd_atomic: 16,
        }
    }

    /// Attributes every check accepts.
    fn good() -> sys::ibv_qp_attr {
        // SAFETY: plain C data.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.port_num = 1;
        a.path_mtu = 5;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.sgid_index = 3;
        a.ah_attr.grh.hop_limit = 64;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        a.max_dest_rd_atomic = 1;
        a
    }

    fn run(cur: u32, next: u32, m: u32, a: &sys::ibv_qp_attr) -> Result<u32, Errno> {
        let mut a = *a;
        a.qp_state = next;
        a.cur_qp_state = cur;
        check_modify(cur, &a, m as c_int, &port())
    }

    const ALL_BITS: [u32; 21] = [
        CUR_STATE,
        EN_SQD_ASYNC_NOTIFY,
        ACCESS_FLAGS,
        PKEY_INDEX,
        PORT,
        QKEY,
        AV,
        PATH_MTU,
        TIMEOUT,
        RETRY_CNT,
        RNR_RETRY,
        RQ_PSN,
        MAX_QP_RD_ATOMIC,
        ALT_PATH,
        MIN_RNR_TIMER,
        SQ_PSN,
        MAX_DEST_RD_ATOMIC,
        PATH_MIG_STATE,
        CAP,
        DEST_QPN,
        RATE_LIMIT,
    ];

    /// Every valid transition passes with its required bits; each required bit removed, each
    /// bit outside required ∪ optional added, and every pair outside the table fail.
    #[test]
    fn the_kernel_table() {
        let a = good();
        let (mut pass, mut missing, mut forbidden, mut invalid) = (0, 0, 0, 0);
        for cur in RESET..=ERR {
            for next in RESET..=ERR {
                match transition(cur, next) {
                    Some((req, opt)) => {
                        assert_eq!(
                            run(cur, next, STATE | req, &a).unwrap(),
                            next,
                            "{cur}->{next}"
                        );
                        assert_eq!(run(cur, next, STATE | req | opt, &a).unwrap(), next);
                        pass += 1;
                        for &b in ALL_BITS.iter().filter(|&&b| req & b != 0) {
                            let e = run(cur, next, (STATE | req) & !b, &a).unwrap_err();
                            assert_eq!(e.code, libc::EINVAL);
                            assert!(e.why.contains("requires"), "{}", e.why);
                            missing += 1;
                        }
                        for &b in ALL_BITS.iter().filter(|&&b| (req | opt) & b == 0) {
                            let e = run(cur, next, STATE | req | b, &a).unwrap_err();
                            assert_eq!(e.code, libc::EINVAL, "{cur}->{next} + {b:#x}");
                            forbidden += 1;
                        }
                    }
                    None => {
                        let e = run(cur, next, STATE, &a).unwrap_err();
                        assert!(e.why.contains("is not a transition"), "{}", e.why);
                        invalid += 1;
                    }
                }
            }
        }
        // 7 ×2 to RESET/ERR, RESET→INIT, INIT→INIT, INIT→RTR, RTR→RTS, RTS→RTS, RTS→SQD,
        // SQD→RTS, SQD→SQD, SQE→RTS.
        assert_eq!(pass, 23);
        assert_eq!(invalid, 49 - 23);
        assert_eq!(missing, 3 + 6 + 5);
        assert!(forbidden > 300, "{forbidden}");
        // Skipped states named explicitly.
        assert!(run(RESET, RTR, STATE, &a).is_err());
        assert!(run(INIT, RTS, STATE, &a).is_err());
    }

    #[test]
    fn values_are_checked() {
        let rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
        let rts = STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC;
        let init = STATE | PKEY_INDEX | PORT | ACCESS_FLAGS;
        type Case = (u32, u32, u32, fn(&mut sys::ibv_qp_attr), &'static str);
        let cases: [Case; 16] = [
            (RESET, INIT, init, |a| a.port_num = 2, "port_num"),
            (RESET, INIT, init, |a| a.port_num = 0, "port_num"),
            (RESET, INIT, init, |a| a.pkey_index = 1, "pkey_index"),
            (
                RESET,
                INIT,
                init,
                |a| a.qp_access_flags = 0x10,
                "qp_access_flags",
            ),
            (INIT, RTR, rtr, |a| a.ah_attr.is_global = 0, "GRH"),
            (
                INIT,
                RTR,
                rtr,
                |a| a.ah_attr.grh.sgid_index = 4,
                "sgid_index",
            ),
            (INIT, RTR, rtr, |a| a.path_mtu = 6, "path_mtu"),
            (INIT, RTR, rtr, |a| a.path_mtu = 0, "path_mtu"),
            (INIT, RTR, rtr, |a| a.dest_qp_num = 1 << 24, "dest_qp_num"),
            (INIT, RTR, rtr, |a| a.rq_psn = 1 << 24, "rq_psn"),
            (INIT, RTR, rtr, |a| a.min_rnr_timer = 32, "min_rnr_timer"),
            (
                INIT,
                RTR,
                rtr,
                |a| a.max_dest_rd_atomic = 17,
                "max_dest_rd_atomic",
            ),
            (RTR, RTS, rts, |a| a.sq_psn = 1 << 24, "sq_psn"),
            (RTR, RTS, rts, |a| a.retry_cnt = 8, "retry_cnt"),
            (RTR, RTS, rts, |a| a.rnr_retry = 8, "rnr_retry"),
            (RTR, RTS, rts, |a| a.timeout = 32, "timeout"),
        ];
        for (cur, next, m, f, what) in cases {
            let mut a = good();
            assert!(
                run(cur, next, m, &a).is_ok(),
                "{what}: the base case passes"
            );
            f(&mut a);
            let e = run(cur, next, m, &a).unwrap_err();
            assert_eq!(e.code, libc::EINVAL);
            assert!(e.why.contains(what), "{what}: {}", e.why);
        }
        // A smaller active MTU refuses a larger path MTU.
        let mut p = port();
        p.active_mtu = 3;
        let mut a = good();
        a.qp_state = RTR;
        assert!(check_modify(INIT, &a, rtr as c_int, &p).is_err());
        a.path_mtu = 3;
        assert!(check_modify(INIT, &a, rtr as c_int, &p).is_ok());
        // CUR_STATE must match.
        let mut a = good();
        a.cur_qp_state = RTR;
        a.qp_state = RTS;
        assert!(check_modify(RTS, &a, (STATE | CUR_STATE) as c_int, &port()).is_err());
    }

    #[test]
    fn messages_name_transition_and_bits() {
        let e = run(INIT, RTR, STATE | AV | PATH_MTU, &good()).unwrap_err();
        assert_eq!(
            e.why,
            "INIT→RTR requires IBV_QP_RQ_PSN|IBV_QP_MIN_RNR_TIMER|IBV_QP_MAX_DEST_RD_ATOMIC|IBV_QP_DEST_QPN (given: IBV_QP_STATE|IBV_QP_AV|IBV_QP_PATH_MTU)"
        );
    }

    proptest::proptest! {
        /// For every valid pair, a mask is accepted iff required ⊆ mask ⊆ required ∪ optional.
        #[test]
        fn masks(cur in 0u32..7, next in 0u32..7, bits in proptest::collection::vec(0usize..21, 0..6)) {
            let m = bits.iter().fold(STATE, |m, &i| m | ALL_BITS[i]);
            let ok = run(cur, next, m, &good()).is_ok();
            let expect = transition(cur, next).is_some_and(|(req, opt)| {
                m & req == req && m & !(req | opt | STATE) == 0
                    && (m & CUR_STATE == 0 || matches!(cur, RTR | RTS | SQD | SQE))
            });
            proptest::prop_assert_eq!(ok, expect);
        }
    }
}
