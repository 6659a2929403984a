//! The software NIC behind gda's host control-path seam ([`gda_hal::control`]): a
//! [`SimDevice`] is one NIC of a [`Fabric`] whose queues provider `P` writes.
//!
//! The NIC looks like a one-port RoCE v2 device with a 4096-byte MTU. Its GID encodes the
//! fabric and NIC it belongs to, so an [`Endpoint`](gda_hal::control::Endpoint) from any
//! process of the same job names the right QP.

use std::marker::PhantomData;

use gda_hal::Provider;
use gda_hal::control::{
    self, Access, CqAttr, Device, DeviceInfo, Gid, GidEntry, GidType, InitAttr, LinkLayer,
    MemoryDesc, Mtu, PortInfo, PortState, QpCaps, RawRcQp, RcQp, Reset, RtrAttr, RtsAttr,
};
use gda_hal::model::Modeled;

use crate::types::{CqMode, Endpoint};
use crate::{Cq, Fabric, Mr, Nic, Pd, Qp, QpInit, SimError};

/// The port every software NIC has.
pub(crate) const PORT: u8 = 1;
/// Its MTU (what a ConnectX port runs at).
pub(crate) const MTU: Mtu = Mtu::B4096;
/// Bytes 8..12 of every software-NIC GID (`"gda\0"`), between the fabric id and the NIC index.
const GID_MARK: [u8; 4] = *b"gda\0";

/// The GID of NIC `nic` on fabric `fabric`: the fabric id (big-endian), the mark, the NIC.
fn gid_of(fabric: u64, nic: u32) -> Gid {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&fabric.to_be_bytes());
    g[8..12].copy_from_slice(&GID_MARK);
    g[12..].copy_from_slice(&nic.to_be_bytes());
    Gid(g)
}

/// The IPv4-mapped GID (`::ffff:a.b.c.d`) of NIC `nic` on a process fabric: `a.b.c` is the
/// fabric's 24-bit token, `d` the NIC index — what a RoCE port with an IPv4 address shows.
/// `None` for fabrics that are not process fabrics (in-process ones) or NICs past 255.
pub(crate) fn ipv4_gid_of(fabric: u64, nic: u32) -> Option<Gid> {
    let token = crate::wire::process_token(fabric)?;
    let nic = u8::try_from(nic).ok()?;
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..15].copy_from_slice(&token.to_be_bytes()[1..]);
    g[15] = nic;
    Some(Gid(g))
}

/// The fabric address a software-NIC GID and QPN name, or `None` for any other GID. Both GID
/// forms decode: the fabric-id form every software NIC has, and the IPv4-mapped form of NICs
/// of process fabrics.
#[must_use]
pub fn endpoint_of(gid: &Gid, qpn: u32) -> Option<Endpoint> {
    let g = &gid.0;
    if g[..10] == [0; 10] && g[10..12] == [0xff, 0xff] {
        let token = u32::from_be_bytes([0, g[12], g[13], g[14]]);
        return Some(Endpoint {
            fabric: crate::wire::process_fabric_id(token),
            nic: u32::from(g[15]),
            qpn,
        });
    }
    (g[8..12] == GID_MARK).then(|| Endpoint {
        fabric: u64::from_be_bytes([g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]]),
        nic: u32::from_be_bytes([g[12], g[13], g[14], g[15]]),
        qpn,
    })
}

/// One software NIC as a control-path [`Device`] for provider `P`.
#[derive(Debug)]
pub struct SimDevice<P> {
    nic: Nic,
    info: DeviceInfo,
    _p: PhantomData<fn() -> P>,
}

impl<P: Modeled> SimDevice<P> {
    /// A new NIC of `P`'s device model on `fabric`.
    pub fn new(fabric: &Fabric) -> Self {
        Self::describe(fabric.add_nic_for::<P>())
    }

    /// `nic`, which must execute `P`'s device model (a NIC of another model is an error
    /// naming both).
    pub fn on(nic: Nic) -> Result<Self, SimError> {
        if nic.model().as_any().downcast_ref::<P::Model>().is_none() {
            return Err(SimError::InvalidArgument(format!(
                "NIC {} executes the {} model, not {}'s",
                nic.index(),
                nic.model().name(),
                P::NAME
            )));
        }
        Ok(Self::describe(nic))
    }

    fn describe(nic: Nic) -> Self {
        let gid = gid_of(nic.fabric().id(), nic.index());
        let info = DeviceInfo {
            name: format!("gda_sim_{}_{}", P::NAME, nic.index()),
            provider: P::NAME,
            vendor_id: 0,
            vendor_part_id: 0,
            fw_ver: concat!("gda-sim ", env!("CARGO_PKG_VERSION")).into(),
            max_qp_wr: QpInit::MAX_WQES,
            max_cqe: Nic::MAX_CQE,
            max_sge: QpInit::MAX_SGE,
            max_inline: QpInit::default().max_inline,
            max_rd_atomic: 16,
            ports: vec![PortInfo {
                port: PORT,
                state: PortState::Active,
                link_layer: LinkLayer::Ethernet,
                max_mtu: MTU,
                active_mtu: MTU,
                lid: 0,
                pkeys: 1,
                // As a RoCE port lists each address: once as RoCE v1, once as RoCE v2; NICs of a
                // process fabric also have an IPv4-mapped address (indices 2 and 3).
                gids: [Some(gid), ipv4_gid_of(nic.fabric().id(), nic.index())]
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .flat_map(|(i, gid)| {
                        [
                            GidEntry {
                                index: 2 * i as u32,
                                gid,
                                kind: GidType::RoceV1,
                            },
                            GidEntry {
                                index: 2 * i as u32 + 1,
                                gid,
                                kind: GidType::RoceV2,
                            },
                        ]
                    })
                    .collect(),
            }],
        };
        Self {
            nic,
            info,
            _p: PhantomData,
        }
    }

    /// The NIC.
    pub fn nic(&self) -> &Nic {
        &self.nic
    }
}

impl control::MemoryRegion for Mr {
    fn addr(&self) -> u64 {
        Mr::addr(self)
    }
    fn len(&self) -> usize {
        Mr::len(self)
    }
    fn lkey(&self) -> u32 {
        Mr::lkey(self)
    }
    fn rkey(&self) -> u32 {
        Mr::rkey(self)
    }
}

impl control::CompletionQueue for Cq {
    fn handle(&self) -> gda_hal::CqHandle {
        Cq::handle(self)
    }
}

impl<P: Modeled> Device for SimDevice<P> {
    type Provider = P;
    type Error = SimError;
    type Pd = Pd;
    type Mr = Mr;
    type Cq = Cq;
    type Qp = SimQp<P>;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc_pd(&self) -> Result<Pd, SimError> {
        Ok(self.nic.alloc_pd())
    }

    unsafe fn register(
        &self,
        pd: &Pd,
        mem: &MemoryDesc<'_>,
        access: Access,
    ) -> Result<Mr, SimError> {
        let access = access.check_registration()?;
        if pd.nic().index() != self.nic.index() || pd.nic().fabric().id() != self.nic.fabric().id()
        {
            return Err(SimError::InvalidArgument(
                "the protection domain belongs to another NIC".into(),
            ));
        }
        match *mem {
            // The engine reaches memory where it is: peers in other processes send requests
            // that this process's engine executes.
            MemoryDesc::Host { addr, len } => {
                // SAFETY: the caller keeps the memory valid (this function's contract).
                Ok(unsafe { pd.register(addr as u64, len, access) })
            }
            // A shared object can also be granted to peers for direct placement as it is: the
            // object is opened by name while the name exists (`Pd::register_file` checks it is
            // the one mapped there).
            MemoryDesc::SharedHost {
                addr,
                len,
                object,
                offset,
                ..
            } => {
                let fd =
                    rustix::shm::open(object, rustix::shm::OFlags::RDWR, rustix::fs::Mode::empty());
                // SAFETY: the caller keeps the memory valid (this function's contract).
                Ok(unsafe {
                    match fd {
                        Ok(fd) => pd.register_file(addr as u64, len, access, fd, offset as u64),
                        Err(_) => pd.register(addr as u64, len, access),
                    }
                })
            }
            MemoryDesc::DmaBuf { .. } => Err(SimError::Unsupported(
                "the software NIC has no dma-buf importer (register host memory)",
            )),
        }
    }

    fn create_cq(&self, attr: &CqAttr) -> Result<Cq, SimError> {
        let mode = if attr.collapsed {
            CqMode::Collapsed
        } else {
            CqMode::Normal
        };
        self.nic.create_cq_in(attr.entries, mode, &attr.memory)
    }

    fn create_rc_qp(
        &self,
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: &QpCaps,
    ) -> Result<RcQp<SimQp<P>, Reset>, SimError> {
        let pow2 = |what: &str, v: u32| {
            v.max(1)
                .checked_next_power_of_two()
                .ok_or_else(|| SimError::InvalidArgument(format!("{what} = {v} is too large")))
        };
        let init = QpInit {
            sq_units: pow2("send_wr", caps.send_wr)?,
            rq_wqes: pow2("recv_wr", caps.recv_wr)?,
            max_inline: caps.max_inline,
            max_sge: caps.max_sge,
            rnr_retry: 7,
            path_mtu: MTU.bytes(),
        };
        let qp = pd.create_qp_in(init, send_cq, recv_cq, &caps.memory)?;
        Ok(RcQp::from_raw(SimQp {
            qp,
            _p: PhantomData,
        }))
    }
}

/// A software-NIC RC QP for provider `P` (wrapped in [`RcQp`]).
#[derive(Debug)]
pub struct SimQp<P> {
    qp: Qp,
    _p: PhantomData<fn() -> P>,
}

impl<P> SimQp<P> {
    /// The software NIC's QP (for its own calls: state, endpoint on the fabric, faults).
    pub fn qp(&self) -> &Qp {
        &self.qp
    }
}

impl<P: Modeled> RawRcQp for SimQp<P> {
    type Provider = P;
    type Error = SimError;

    fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    fn send_psn(&self) -> u32 {
        self.qp.start_psn()
    }

    fn sq_handle(&self) -> Result<<P as Provider>::Sq, SimError> {
        self.qp.sq_handle::<P>()
    }

    fn rq_handle(&self) -> Result<<P as Provider>::Rq, SimError> {
        self.qp.rq_handle::<P>()
    }

    fn modify_init(&mut self, attr: &InitAttr) -> Result<(), SimError> {
        self.qp.modify_init(attr)
    }

    fn modify_rtr(&mut self, attr: &RtrAttr) -> Result<(), SimError> {
        self.qp.modify_rtr(attr)
    }

    fn modify_rts(&mut self, attr: &RtsAttr) -> Result<(), SimError> {
        self.qp.modify_rts(attr)
    }

    fn modify_error(&mut self) -> Result<(), SimError> {
        self.qp.modify_error();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_name_their_nic_and_nothing_else() {
        let g = gid_of(0x5348_0123_4567_0002, 7);
        assert_eq!(
            endpoint_of(&g, 0x42),
            Some(Endpoint {
                fabric: 0x5348_0123_4567_0002,
                nic: 7,
                qpn: 0x42
            })
        );
        let mut other = g;
        other.0[9] ^= 1;
        assert_eq!(endpoint_of(&other, 1), None);
    }
}
