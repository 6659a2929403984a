//! `ibv_modify_qp` validation for RC QPs, as the Linux kernel and its mlx5 driver do it.
//!
//! A real `ibv_modify_qp` on a ConnectX passes through four layers, and each can refuse the
//! call. [`check_modify`] replays them in the same order, so a call refused here is refused
//! with the errno the real stack returns, and the reason ([`Errno::why`], printed with
//! `GDA_VERBS_TRACE=1`) names the transition and the offending attribute(s).
//!
//! | layer | source (torvalds/linux unless noted) | what it refuses |
//! |---|---|---|
//! | libibverbs / libmlx5 | rdma-core v55 `libibverbs/cmd.c` `ibv_cmd_modify_qp`, `providers/mlx5/verbs.c` `mlx5_modify_qp` | mask bits the command cannot carry: `EOPNOTSUPP` |
//! | uverbs | `drivers/infiniband/core/uverbs_cmd.c` `modify_qp` | bad `port_num`, bad AV/alternate-path port, an AV port other than the QP's on INIT→RTR, `qp_state`/`cur_qp_state` out of range: `EINVAL` |
//! | IB core | `drivers/infiniband/core/verbs.c` `_ib_modify_qp` → `rdma_fill_sgid_attr` (`rdma_check_ah_attr`, `cache.c` `rdma_get_gid_attr`) | RoCE AV without a GRH, `sgid_index` outside the GID table (`EINVAL`) or unpopulated (`ENODATA`), an alternate path on RoCE (`EINVAL`) |
//! | mlx5 | `drivers/infiniband/hw/mlx5/qp.c` `mlx5_ib_modify_qp`, `__mlx5_ib_modify_qp` | the state table ([`ib_modify_qp_is_ok`], `EINVAL`), port range, `pkey_index`, `max_rd_atomic`/`max_dest_rd_atomic` above the device limit, `path_mtu` outside 256..4096 (`EINVAL`); `IBV_QP_RATE_LIMIT` on a non-raw QP (`EOPNOTSUPP`, rdma.git cae42d97d94e); a transition the firmware has no command for (`EINVAL`) |
//!
//! **Stricter than the kernel, on purpose.** Where the real stack silently changes a value
//! instead of refusing it, gda refuses with `EINVAL`, because a value that does not survive is
//! a bug in the caller that hardware would hide:
//! - `rq_psn`/`sq_psn` above 24 bits (the IB core masks them to 24 bits with a `dev_warn`);
//! - `dest_qp_num` above 24 bits, `retry_cnt`/`rnr_retry` above 7, `timeout`/`min_rnr_timer`
//!   above 31, `path_mig_state` above `IBV_MIG_ARMED` (mlx5 truncates them into their QPC
//!   fields with `MLX5_SET`);
//! - `qp_access_flags` other than `LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC`
//!   (mlx5 ignores unknown bits);
//! - a `path_mtu` above the port's active MTU (mlx5 checks only 256..4096; hns_roce's
//!   `check_mtu_validate` refuses it as here);
//! - a GRH with `hop_limit` 0 on INIT→RTR (a packet no router forwards; gda-hal's
//!   [`RtrAttr::validate`](gda_hal::control::RtrAttr::validate), which every provider applies);
//! - an `IBV_QP_CUR_STATE` that is not the QP's state (the kernel takes the caller's word for
//!   the table check; the firmware then refuses the command for the real state, also `EINVAL`).
//!
//! These checks only choose the errno. What the QP then does is decided once for every
//! control path: the call becomes gda-hal's transition attributes (`gda_rdma::qp_attr`, the
//! one translation between `ibv_qp_attr` and them, which the hardware control paths use the
//! other way) and the software NIC takes them through `gda_sim::Qp::modify_*`, the
//! transitions `SimDevice`'s QPs make. The field widths are gda-hal's
//! [`QpField`](gda_hal::control::QpField) table, the mask bits gda-rdma's `qp_mask`.
//!
//! The state table is the kernel's `qp_state_table` (`drivers/infiniband/core/verbs.c`), RC
//! column, as of rdma.git 42e3aac65c1c ("IB/core: Extend rate limit support for RC QPs", 2026),
//! which adds `IBV_QP_RATE_LIMIT` as optional to INIT→RTR, RTR→RTS and RTS→RTS. On top of it
//! the mlx5 firmware command table (`__mlx5_ib_modify_qp`'s `optab`) has no RTS→SQD or SQD→SQD
//! command, so an mlx5 RC QP never reaches SQD; RC QPs never enter SQE either (an RC send
//! error moves the QP to ERR), but the table rows for both are here for completeness.

use std::ffi::c_int;

use ibverbs_sys as sys;

use gda_hal::control::QpField;

use crate::abi::Errno;

/// The `IBV_QP_*` attribute-mask bits: gda-rdma's, the one set of them (its hardware
/// control path writes them too).
pub use gda_rdma::qp_mask as mask;

/// `IBV_QPS_RESET` (the verbs value, for code that keeps states as `ibv_qp_state::Type`).
pub const RESET: u32 = sys::ibv_qp_state::IBV_QPS_RESET;
/// `IBV_QPS_INIT`.
pub const INIT: u32 = sys::ibv_qp_state::IBV_QPS_INIT;
/// `IBV_QPS_RTR`.
pub const RTR: u32 = sys::ibv_qp_state::IBV_QPS_RTR;
/// `IBV_QPS_RTS`.
pub const RTS: u32 = sys::ibv_qp_state::IBV_QPS_RTS;
/// `IBV_QPS_SQD`.
#[allow(dead_code, reason = "no RC QP here reaches it (see above)")]
pub const SQD: u32 = sys::ibv_qp_state::IBV_QPS_SQD;
/// `IBV_QPS_SQE`.
#[allow(dead_code, reason = "an RC QP never enters it (see above)")]
pub const SQE: u32 = sys::ibv_qp_state::IBV_QPS_SQE;
/// `IBV_QPS_ERR`.
pub const ERR: u32 = sys::ibv_qp_state::IBV_QPS_ERR;

/// The name of verbs state `s` (`?` for a value that is not a state).
#[must_use]
pub fn state_name(s: u32) -> &'static str {
    QpState::from_raw(s).map_or("?", QpState::name)
}

/// A QP state (`enum ibv_qp_state`, which has the kernel's `enum ib_qp_state` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QpState {
    /// `IBV_QPS_RESET`.
    Reset,
    /// `IBV_QPS_INIT`.
    Init,
    /// `IBV_QPS_RTR`.
    Rtr,
    /// `IBV_QPS_RTS`.
    Rts,
    /// `IBV_QPS_SQD`.
    Sqd,
    /// `IBV_QPS_SQE`.
    Sqe,
    /// `IBV_QPS_ERR`.
    Err,
}

impl QpState {
    /// All states, in value order.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// The state with verbs value `v`, `None` above `IBV_QPS_ERR` (the kernel refuses those).
    #[must_use]
    pub fn from_raw(v: sys::ibv_qp_state::Type) -> Option<Self> {
        Self::ALL.get(usize::try_from(v).ok()?).copied()
    }

    /// Its verbs value.
    #[must_use]
    pub fn raw(self) -> sys::ibv_qp_state::Type {
        self as sys::ibv_qp_state::Type
    }

    /// `RESET`, `INIT`, … (as the verbs man pages name them).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            QpState::Reset => "RESET",
            QpState::Init => "INIT",
            QpState::Rtr => "RTR",
            QpState::Rts => "RTS",
            QpState::Sqd => "SQD",
            QpState::Sqe => "SQE",
            QpState::Err => "ERR",
        }
    }
}

/// What one valid transition takes: attribute bits it requires and bits it also accepts
/// (`IBV_QP_STATE` is implied: the kernel always allows it, and without it the QP stays put).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Bits that must be given.
    pub req: u32,
    /// Bits that may be given.
    pub opt: u32,
}

/// The kernel's `qp_state_table[cur][next]` for `IB_QPT_RC`; `None` where `.valid` is 0.
///
/// Source: torvalds/linux `drivers/infiniband/core/verbs.c` (`qp_state_table`, at f4d8f354),
/// plus rdma.git 42e3aac65c1c (`IB_QP_RATE_LIMIT` optional on INIT→RTR, RTR→RTS, RTS→RTS).
/// RESET→ERR is *not* valid in the kernel's table (every other state may go to RESET or ERR).
#[must_use]
pub const fn rc_rule(cur: QpState, next: QpState) -> Option<Rule> {
    use QpState::*;
    use mask::*;
    const NONE: Rule = Rule { req: 0, opt: 0 };
    Some(match (cur, next) {
        (Reset, Reset) => NONE,
        (Reset, Init) => Rule {
            req: PKEY_INDEX | PORT | ACCESS_FLAGS,
            opt: 0,
        },
        (Init, Init) => Rule {
            req: 0,
            opt: PKEY_INDEX | PORT | ACCESS_FLAGS,
        },
        (Init, Rtr) => Rule {
            req: AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
            opt: ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | RATE_LIMIT,
        },
        (Rtr, Rts) => Rule {
            req: TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC,
            opt: CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE | RATE_LIMIT,
        },
        (Rts, Rts) => Rule {
            req: 0,
            opt: CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER | RATE_LIMIT,
        },
        (Rts, Sqd) => Rule {
            req: 0,
            opt: EN_SQD_ASYNC_NOTIFY,
        },
        (Sqd, Rts) => Rule {
            req: 0,
            opt: CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
        },
        (Sqd, Sqd) => Rule {
            req: 0,
            opt: PORT
                | AV
                | TIMEOUT
                | RETRY_CNT
                | RNR_RETRY
                | MAX_QP_RD_ATOMIC
                | MAX_DEST_RD_ATOMIC
                | ALT_PATH
                | ACCESS_FLAGS
                | PKEY_INDEX
                | MIN_RNR_TIMER
                | PATH_MIG_STATE,
        },
        // The kernel lists SQE→RTS as valid with no RC entry in either mask: STATE only.
        (Sqe, Rts) => NONE,
        (Init | Rtr | Rts | Sqd | Sqe | Err, Reset | Err) => NONE,
        _ => return None,
    })
}

/// The kernel's `ib_modify_qp_is_ok(cur, next, IB_QPT_RC, mask)`, with the reason when not.
///
/// # Errors
/// A sentence naming the transition and the missing or forbidden bits.
pub fn ib_modify_qp_is_ok(cur: QpState, next: QpState, m: u32) -> Result<Rule, String> {
    let arrow = format!("{}→{}", cur.name(), next.name());
    if m & mask::CUR_STATE != 0
        && !matches!(
            cur,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return Err(format!(
            "{arrow}: IBV_QP_CUR_STATE is accepted only from RTR, RTS, SQD or SQE (given: {})",
            mask::names(m)
        ));
    }
    let Some(rule) = rc_rule(cur, next) else {
        let valid: Vec<&str> = QpState::ALL
            .iter()
            .filter(|n| rc_rule(cur, **n).is_some())
            .map(|n| n.name())
            .collect();
        return Err(format!(
            "{arrow} is not a valid RC QP transition (from {}: {})",
            cur.name(),
            valid.join(", ")
        ));
    };
    let missing = rule.req & !m;
    if missing != 0 {
        return Err(format!(
            "{arrow} requires {} (given: {})",
            mask::names(missing),
            mask::names(m)
        ));
    }
    let extra = m & !(rule.req | rule.opt | mask::STATE);
    if extra != 0 {
        return Err(format!(
            "{arrow} does not take {} (required: {}; optional: {}; given: {})",
            mask::names(extra),
            mask::names(rule.req | mask::STATE),
            mask::names(rule.opt),
            mask::names(m)
        ));
    }
    Ok(rule)
}

/// The mlx5 firmware has a modify command for (`__mlx5_ib_modify_qp`'s `optab`, RC states).
/// RESET→RESET is answered before the table is consulted (`mlx5_ib_modify_qp`).
#[must_use]
pub const fn mlx5_has_command(cur: QpState, next: QpState) -> bool {
    use QpState::*;
    matches!(
        (cur, next),
        (_, Reset | Err)
            | (Reset, Init)
            | (Init, Init | Rtr)
            | (Rtr, Rts)
            | (Rts, Rts)
            | (Sqd, Rts)
            | (Sqe, Rts)
    )
}

/// What the checks need to know of the device, its port(s) and the QP. Plain data: the
/// caller builds it from `ibv_query_device`/`ibv_query_port`-level facts and the QP's port.
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
    /// GID table length (`gid_tbl_len`): an `sgid_index` at or above it is `EINVAL`, an
    /// unpopulated one below it `ENODATA`.
    pub gid_table_len: u32,
    /// P_Key table length.
    pub pkeys: u16,
    /// The device's `max_qp_rd_atom` (mlx5: `1 << log_max_ra_res_qp`): the largest
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// The largest `max_dest_rd_atomic`: reads the QP answers as responder (mlx5:
    /// `1 << log_max_ra_req_qp`).
    pub max_dest_rd_atomic: u8,
    /// The port the QP was bound to by RESET→INIT (`IBV_QP_PORT`); 0 while it has none.
    /// INIT→RTR's `ah_attr.port_num` must equal it (uverbs `modify_qp`).
    pub qp_port: u8,
}

/// Access flags a QP takes: remote operations it accepts (and `LOCAL_WRITE`, which perftest
/// passes and the kernel ignores) — gda-hal's [`Access`](gda_hal::control::Access), whose
/// bits are verbs' (checked below).
pub const QP_ACCESS_FLAGS: u32 = gda_hal::control::Access::ALL.bits();

const _: () = assert!(
    QP_ACCESS_FLAGS
        == sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0
);

/// Checks `ibv_modify_qp(qp, attr, mask)` for an RC QP in state `cur` and returns the state
/// it moves to; `Err` carries the errno the kernel + mlx5 stack returns (see the module docs
/// for the few places gda is stricter) and which check refused.
///
/// # Errors
/// `EOPNOTSUPP` for mask bits the command cannot carry or `IBV_QP_RATE_LIMIT`; `ENODATA` for
/// an unpopulated `sgid_index`; `EINVAL` for everything else.
pub fn check_modify(
    cur: sys::ibv_qp_state::Type,
    attr: &sys::ibv_qp_attr,
    mask: c_int,
    port: &PortView,
) -> Result<sys::ibv_qp_state::Type, Errno> {
    let m = mask as u32;
    let cur_state = QpState::from_raw(cur)
        .ok_or_else(|| Errno::inval(format!("the QP is in an unknown state {cur}")))?;
    check_command_bits(m)?;

    // uverbs `modify_qp`: ports and state values, before anything else looks at the call.
    let next_raw = if m & mask::STATE != 0 {
        attr.qp_state
    } else {
        cur
    };
    let valid_port = |p: u8| p >= 1 && p <= port.port_count;
    if m & mask::PORT != 0 && !valid_port(attr.port_num) {
        return Err(Errno::inval(format!(
            "IBV_QP_PORT: port_num {} is not a port of this device (ports 1..={})",
            attr.port_num, port.port_count
        )));
    }
    if m & mask::AV != 0 {
        let ah_port = attr.ah_attr.port_num;
        if !valid_port(ah_port) {
            return Err(Errno::inval(format!(
                "IBV_QP_AV: ah_attr.port_num {ah_port} is not a port of this device (ports 1..={})",
                port.port_count
            )));
        }
        if m & mask::STATE != 0 && attr.qp_state == sys::ibv_qp_state::IBV_QPS_RTR {
            if ah_port != port.qp_port {
                let hint = if port.qp_port == 0 {
                    " (a QP has no port until RESET→INIT sets one)"
                } else {
                    " (set by RESET→INIT)"
                };
                return Err(Errno::inval(format!(
                    "{}→RTR: ah_attr.port_num {ah_port} is not the QP's port {}{hint}",
                    cur_state.name(),
                    port.qp_port
                )));
            }
        } else if m & mask::PORT != 0 && attr.port_num != ah_port {
            return Err(Errno::inval(format!(
                "IBV_QP_PORT {} and ah_attr.port_num {ah_port} differ",
                attr.port_num
            )));
        }
    }
    if m & mask::ALT_PATH != 0
        && (!valid_port(attr.alt_port_num)
            || !valid_port(attr.alt_ah_attr.port_num)
            || attr.alt_port_num != attr.alt_ah_attr.port_num)
    {
        return Err(Errno::inval(format!(
            "IBV_QP_ALT_PATH: alt_port_num {} and alt_ah_attr.port_num {} must be the same port of this device (ports 1..={})",
            attr.alt_port_num, attr.alt_ah_attr.port_num, port.port_count
        )));
    }
    if m & mask::CUR_STATE != 0 && QpState::from_raw(attr.cur_qp_state).is_none() {
        return Err(Errno::inval(format!(
            "IBV_QP_CUR_STATE: cur_qp_state {} is not a QP state (0..=6)",
            attr.cur_qp_state
        )));
    }
    let next = QpState::from_raw(next_raw).ok_or_else(|| {
        Errno::inval(format!(
            "IBV_QP_STATE: qp_state {next_raw} is not a QP state (0..=6)"
        ))
    })?;

    // IB core `_ib_modify_qp`: the address vectors' source GIDs.
    if m & mask::AV != 0 {
        check_av(&attr.ah_attr, "ah_attr", port)?;
    }
    if m & mask::ALT_PATH != 0 {
        check_av(&attr.alt_ah_attr, "alt_ah_attr", port)?;
        if port.ethernet {
            return Err(Errno::inval(
                "IBV_QP_ALT_PATH: alternate paths (APM) exist only on InfiniBand ports, not RoCE",
            ));
        }
    }

    // mlx5 `mlx5_ib_modify_qp`: the state table, with the caller's CUR_STATE if given.
    let table_cur = if m & mask::CUR_STATE != 0 {
        QpState::from_raw(attr.cur_qp_state).unwrap_or(cur_state)
    } else {
        cur_state
    };
    ib_modify_qp_is_ok(table_cur, next, m).map_err(Errno::inval)?;
    if table_cur != cur_state {
        return Err(Errno::inval(format!(
            "IBV_QP_CUR_STATE says {} but the QP is in {}",
            table_cur.name(),
            cur_state.name()
        )));
    }
    let arrow = format!("{}→{}", cur_state.name(), next.name());
    if m & mask::PKEY_INDEX != 0 && attr.pkey_index >= port.pkeys {
        return Err(Errno::inval(format!(
            "{arrow}: pkey_index {} is outside the P_Key table (length {})",
            attr.pkey_index, port.pkeys
        )));
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 && attr.max_rd_atomic > port.max_rd_atomic {
        return Err(Errno::inval(format!(
            "{arrow}: max_rd_atomic {} exceeds the device's max_qp_rd_atom {}",
            attr.max_rd_atomic, port.max_rd_atomic
        )));
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 && attr.max_dest_rd_atomic > port.max_dest_rd_atomic {
        return Err(Errno::inval(format!(
            "{arrow}: max_dest_rd_atomic {} exceeds the device's limit {}",
            attr.max_dest_rd_atomic, port.max_dest_rd_atomic
        )));
    }
    if cur_state == QpState::Reset && next == QpState::Reset {
        return Ok(next.raw());
    }

    // mlx5 `__mlx5_ib_modify_qp`.
    if m & mask::PATH_MTU != 0 {
        let mtu = attr.path_mtu;
        if !(sys::IBV_MTU_256..=sys::IBV_MTU_4096).contains(&mtu) {
            return Err(Errno::inval(format!(
                "{arrow}: path_mtu {mtu} is not an MTU (1 = 256 … 5 = 4096)"
            )));
        }
        if mtu > port.active_mtu {
            return Err(Errno::inval(format!(
                "{arrow}: path_mtu {} ({} bytes) exceeds the port's active MTU {} ({} bytes)",
                mtu,
                mtu_bytes(mtu),
                port.active_mtu,
                mtu_bytes(port.active_mtu)
            )));
        }
    }
    if m & mask::RATE_LIMIT != 0 {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!("{arrow}: IBV_QP_RATE_LIMIT: mlx5 rate-limits only raw packet QPs"),
        ));
    }
    if !mlx5_has_command(cur_state, next) {
        return Err(Errno::inval(format!(
            "{arrow}: the mlx5 firmware has no {arrow} command (an mlx5 RC QP cannot be drained to SQD)"
        )));
    }

    check_values(attr, m, &arrow)?;
    Ok(next.raw())
}

/// Mask bits the user→kernel command can carry (libibverbs `ibv_cmd_modify_qp`: only bits
/// below `IBV_QP_RATE_LIMIT`; libmlx5 takes the extended command for `RATE_LIMIT`, which the
/// kernel accepts up to bit 25 and whose legacy bits 21..=24 the state table then refuses).
fn check_command_bits(m: u32) -> Result<(), Errno> {
    let carried = if m & mask::RATE_LIMIT != 0 {
        (mask::RATE_LIMIT << 1) - 1
    } else {
        mask::DEST_QPN | (mask::DEST_QPN - 1)
    };
    let extra = m & !carried;
    if extra != 0 {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!(
                "attribute mask bits {} are not modify_qp attributes (given: {})",
                mask::names(extra),
                mask::names(m)
            ),
        ));
    }
    Ok(())
}

/// `rdma_fill_sgid_attr`: `rdma_check_ah_attr` then the GID-table lookup.
fn check_av(ah: &sys::ibv_ah_attr, which: &str, port: &PortView) -> Result<(), Errno> {
    if port.ethernet && ah.is_global == 0 {
        return Err(Errno::inval(format!(
            "{which}.is_global is 0 on a RoCE port: RoCE needs a GRH (set is_global, grh.dgid and grh.sgid_index)"
        )));
    }
    if ah.is_global == 0 {
        return Ok(());
    }
    let idx = u32::from(ah.grh.sgid_index);
    if idx >= port.gid_table_len {
        return Err(Errno::inval(format!(
            "{which}.grh.sgid_index {idx} is outside the GID table (length {})",
            port.gid_table_len
        )));
    }
    if !port.gids.iter().any(|(i, _)| *i == idx) {
        let populated: Vec<String> = port
            .gids
            .iter()
            .map(|(i, v2)| format!("{i}{}", if *v2 { " (RoCE v2)" } else { "" }))
            .collect();
        return Err(Errno::new(
            libc::ENODATA,
            format!(
                "{which}.grh.sgid_index {idx} names an empty GID-table entry (populated: {})",
                populated.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The values gda refuses where mlx5 would truncate them (module docs): the field widths are
/// gda-hal's one table ([`QpField`]), which every provider's transitions check too.
fn check_values(attr: &sys::ibv_qp_attr, m: u32, arrow: &str) -> Result<(), Errno> {
    let fields: [(u32, QpField, u32); 7] = [
        (mask::DEST_QPN, QpField::DestQpn, attr.dest_qp_num),
        (mask::RQ_PSN, QpField::RqPsn, attr.rq_psn),
        (mask::SQ_PSN, QpField::SqPsn, attr.sq_psn),
        (mask::RETRY_CNT, QpField::RetryCnt, attr.retry_cnt.into()),
        (mask::RNR_RETRY, QpField::RnrRetry, attr.rnr_retry.into()),
        (mask::TIMEOUT, QpField::Timeout, attr.timeout.into()),
        (
            mask::MIN_RNR_TIMER,
            QpField::MinRnrTimer,
            attr.min_rnr_timer.into(),
        ),
    ];
    for (bit, field, value) in fields {
        if m & bit != 0 {
            field
                .check(value)
                .map_err(|e| Errno::inval(format!("{arrow}: {e}")))?;
        }
    }
    if m & mask::PATH_MIG_STATE != 0 && attr.path_mig_state > sys::IBV_MIG_ARMED {
        return Err(Errno::inval(format!(
            "{arrow}: path_mig_state {:#x} does not fit its field (at most {:#x})",
            attr.path_mig_state,
            sys::IBV_MIG_ARMED
        )));
    }
    if m & mask::ACCESS_FLAGS != 0 && attr.qp_access_flags & !QP_ACCESS_FLAGS != 0 {
        return Err(Errno::inval(format!(
            "{arrow}: qp_access_flags {:#x} has bits {:#x} a QP does not take (only LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC)",
            attr.qp_access_flags,
            attr.qp_access_flags & !QP_ACCESS_FLAGS
        )));
    }
    Ok(())
}

fn mtu_bytes(mtu: u32) -> u32 {
    if (1..=5).contains(&mtu) {
        128 << mtu
    } else {
        0
    }
}

#[cfg(test)]
mod tests;
