//! gda-hal's QP transition attributes as `struct ibv_qp_attr` plus mask, and back: the one
//! translation between them.
//!
//! The hardware control paths send [`InitAttr`], [`RtrAttr`] and [`RtsAttr`] to rdma-core
//! (`to_ibv_*`); the verbs-compatible library receives a program's `ibv_modify_qp` and hands
//! the software NIC the same attributes (`*_from_ibv`), so a transition is checked by the same
//! rules ([`RtrAttr::validate`], [`RtsAttr::validate`]) whichever side it comes from.

use gda_hal::control::{
    Access, ControlError, Endpoint, Gid, InitAttr, LinkLayer, Mtu, RtrAttr, RtsAttr,
};
use ibverbs_sys as sys;

use crate::qp_mask::*;

fn zeroed() -> sys::ibv_qp_attr {
    // SAFETY: C data; all zeros is valid.
    unsafe { std::mem::zeroed() }
}

/// RESET→INIT as `ibv_modify_qp` takes it.
#[must_use]
pub fn to_ibv_init(attr: &InitAttr) -> (sys::ibv_qp_attr, u32) {
    let mut a = zeroed();
    a.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
    a.port_num = attr.port;
    a.pkey_index = attr.pkey_index;
    a.qp_access_flags = attr.access.bits();
    (a, STATE | PKEY_INDEX | PORT | ACCESS_FLAGS)
}

/// INIT→RTR on `port` as `ibv_modify_qp` takes it, after checking the attributes' ranges.
pub fn to_ibv_rtr(attr: &RtrAttr, port: u8) -> Result<(sys::ibv_qp_attr, u32), ControlError> {
    attr.validate()?;
    let mut a = zeroed();
    a.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
    a.path_mtu = attr.path_mtu as u32;
    a.dest_qp_num = attr.remote.qpn;
    a.rq_psn = attr.remote.psn;
    a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    a.min_rnr_timer = attr.min_rnr_timer;
    a.ah_attr.is_global = u8::from(attr.is_global);
    a.ah_attr.dlid = attr.remote.lid;
    a.ah_attr.port_num = port;
    a.ah_attr.static_rate = attr.static_rate;
    a.ah_attr.grh.dgid.raw = attr.remote.gid.0;
    a.ah_attr.grh.sgid_index = u8::try_from(attr.sgid_index)
        .map_err(|_| ControlError::Invalid(format!("sgid_index {} > 255", attr.sgid_index)))?;
    a.ah_attr.grh.hop_limit = attr.hop_limit;
    a.ah_attr.grh.traffic_class = attr.traffic_class;
    Ok((
        a,
        STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
    ))
}

/// RTR→RTS as `ibv_modify_qp` takes it.
#[must_use]
pub fn to_ibv_rts(attr: &RtsAttr) -> (sys::ibv_qp_attr, u32) {
    let mut a = zeroed();
    a.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
    a.sq_psn = attr.sq_psn;
    a.timeout = attr.timeout;
    a.retry_cnt = attr.retry_cnt;
    a.rnr_retry = attr.rnr_retry;
    a.max_rd_atomic = attr.max_rd_atomic;
    (
        a,
        STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
    )
}

/// Any state → ERR as `ibv_modify_qp` takes it.
#[must_use]
pub fn to_ibv_error() -> (sys::ibv_qp_attr, u32) {
    let mut a = zeroed();
    a.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
    (a, STATE)
}

/// An error unless `mask` holds every bit of `need` (the kernel's required attributes of
/// the transition, which the caller has checked: this only guards the translation).
fn require(arrow: &str, mask: u32, need: u32) -> Result<(), ControlError> {
    if mask & need != need {
        return Err(ControlError::Invalid(format!(
            "{arrow} needs {} (given {})",
            names(need),
            names(mask)
        )));
    }
    Ok(())
}

/// RESET→INIT from a program's `ibv_modify_qp`. Access bits other than verbs' four are an
/// error.
pub fn init_from_ibv(a: &sys::ibv_qp_attr, mask: u32) -> Result<InitAttr, ControlError> {
    require("RESET→INIT", mask, PKEY_INDEX | PORT | ACCESS_FLAGS)?;
    let access = Access::from_bits(a.qp_access_flags).ok_or_else(|| {
        ControlError::Invalid(format!(
            "qp_access_flags {:#x} has bits a QP does not take",
            a.qp_access_flags
        ))
    })?;
    Ok(InitAttr {
        port: a.port_num,
        pkey_index: a.pkey_index,
        access,
    })
}

/// INIT→RTR from a program's `ibv_modify_qp` on a port of `link_layer`. The peer's MTU is
/// not part of the call; it is taken to be the path MTU (the kernel does not check it either).
pub fn rtr_from_ibv(
    a: &sys::ibv_qp_attr,
    mask: u32,
    link_layer: LinkLayer,
) -> Result<RtrAttr, ControlError> {
    require(
        "INIT→RTR",
        mask,
        AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
    )?;
    let path_mtu = u8::try_from(a.path_mtu)
        .map_err(|_| ControlError::Invalid(format!("path_mtu {}", a.path_mtu)))
        .and_then(Mtu::from_raw)?;
    let ah = &a.ah_attr;
    // SAFETY: `ibv_gid` is a union of plain bytes; every bit pattern is a valid `raw`.
    let dgid = unsafe { ah.grh.dgid.raw };
    let attr = RtrAttr {
        remote: Endpoint {
            qpn: a.dest_qp_num,
            psn: a.rq_psn,
            lid: ah.dlid,
            gid: Gid(dgid),
            mtu: path_mtu,
            port: ah.port_num,
            link_layer,
        },
        path_mtu,
        sgid_index: ah.grh.sgid_index.into(),
        is_global: ah.is_global != 0,
        hop_limit: ah.grh.hop_limit,
        traffic_class: ah.grh.traffic_class,
        static_rate: ah.static_rate,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
    };
    attr.validate()?;
    Ok(attr)
}

/// RTR→RTS from a program's `ibv_modify_qp`.
pub fn rts_from_ibv(a: &sys::ibv_qp_attr, mask: u32) -> Result<RtsAttr, ControlError> {
    require(
        "RTR→RTS",
        mask,
        SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
    )?;
    let attr = RtsAttr {
        sq_psn: a.sq_psn,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        max_rd_atomic: a.max_rd_atomic,
    };
    attr.validate()?;
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gda_hal::control::{GidEntry, GidType, LocalPath};

    fn path() -> LocalPath {
        LocalPath {
            port: 1,
            gid: GidEntry {
                index: 3,
                gid: Gid([0xfe; 16]),
                kind: GidType::RoceV2,
            },
            lid: 0,
            mtu: Mtu::B4096,
            link_layer: LinkLayer::Ethernet,
        }
    }

    fn remote() -> Endpoint {
        Endpoint {
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            lid: 0,
            gid: Gid([7; 16]),
            mtu: Mtu::B1024,
            port: 1,
            link_layer: LinkLayer::Ethernet,
        }
    }

    #[test]
    fn every_transition_survives_the_round_trip() {
        let init = InitAttr::new(&path());
        let (a, m) = to_ibv_init(&init);
        assert_eq!(init_from_ibv(&a, m).unwrap(), init);

        let rtr = RtrAttr::new(&path(), &remote()).unwrap();
        let (a, m) = to_ibv_rtr(&rtr, 1).unwrap();
        // The peer's MTU is not in the call: it comes back as the path MTU.
        assert_eq!(rtr_from_ibv(&a, m, LinkLayer::Ethernet).unwrap(), rtr);

        let mut rts = RtsAttr::new(0x00ff_fffe);
        rts.rnr_retry = 3;
        let (a, m) = to_ibv_rts(&rts);
        assert_eq!(rts_from_ibv(&a, m).unwrap(), rts);
    }

    #[test]
    fn the_translation_applies_the_hal_rules() {
        let (mut a, m) = to_ibv_rts(&RtsAttr::new(1));
        a.sq_psn = 1 << 24;
        let e = rts_from_ibv(&a, m).unwrap_err().to_string();
        assert!(e.contains("sq_psn 0x1000000 does not fit its field"), "{e}");

        let (mut a, m) = to_ibv_rtr(&RtrAttr::new(&path(), &remote()).unwrap(), 1).unwrap();
        a.ah_attr.is_global = 0;
        let e = rtr_from_ibv(&a, m, LinkLayer::Ethernet)
            .unwrap_err()
            .to_string();
        assert!(e.contains("GRH"), "{e}");
        a.ah_attr.is_global = 1;
        a.path_mtu = 9;
        assert!(rtr_from_ibv(&a, m, LinkLayer::Ethernet).is_err());
        a.path_mtu = 3;
        let e = rtr_from_ibv(&a, m & !RQ_PSN, LinkLayer::Ethernet)
            .unwrap_err()
            .to_string();
        assert!(e.contains("IBV_QP_RQ_PSN"), "{e}");

        let (mut a, m) = to_ibv_init(&InitAttr::new(&path()));
        a.qp_access_flags |= 1 << 5;
        assert!(init_from_ibv(&a, m).is_err());
    }
}
