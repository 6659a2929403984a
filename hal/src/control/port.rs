//! What a device and its ports offer, and how a QP's path is chosen from it: GIDs and their
//! types, link layers, MTUs, and the selection rules every control path applies the same way.

use std::string::String;
use std::vec::Vec;

use super::ControlError;

/// A 128-bit global identifier (an IPv6 address on RoCE, subnet prefix + GUID on InfiniBand),
/// in network byte order as verbs stores it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The all-zero GID (an unpopulated table entry).
    pub const ZERO: Gid = Gid([0; 16]);

    /// Whether this is the all-zero GID.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// Whether this is an IPv6 link-local address (`fe80::/10`): reachable only on the local
    /// layer-2 segment, so a routed RoCE v2 path must not use it.
    #[must_use]
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), as RoCE v2 stores IPv4.
    #[must_use]
    pub fn ipv4(&self) -> Option<[u8; 4]> {
        (self.0[..10] == [0; 10] && self.0[10..12] == [0xff, 0xff])
            .then(|| [self.0[12], self.0[13], self.0[14], self.0[15]])
    }
}

impl core::fmt::Display for Gid {
    /// Colon-separated groups of four hex digits, as `ibv_devinfo -v` prints GIDs.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, pair) in self.0.chunks_exact(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// How packets to a GID are framed (`enum ibv_gid_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GidType {
    /// Native InfiniBand.
    Ib,
    /// RoCE v1: GRH over Ethernet, not routable.
    RoceV1,
    /// RoCE v2: UDP/IP encapsulation, routable.
    RoceV2,
}

/// One populated entry of a port's GID table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GidEntry {
    /// Its index in the table (what `sgid_index` names).
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// Its framing.
    pub kind: GidType,
}

/// A port's link layer (`IBV_LINK_LAYER_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkLayer {
    /// InfiniBand: LIDs route, GRH optional.
    InfiniBand,
    /// Ethernet (RoCE): every packet carries a GRH, `is_global` is mandatory.
    Ethernet,
}

/// A path MTU (`enum ibv_mtu`: 1 = 256 bytes … 5 = 4096 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Mtu {
    /// 256 bytes.
    B256 = 1,
    /// 512 bytes.
    B512 = 2,
    /// 1024 bytes.
    B1024 = 3,
    /// 2048 bytes.
    B2048 = 4,
    /// 4096 bytes.
    B4096 = 5,
}

impl Mtu {
    /// The verbs enum value (1..=5).
    #[must_use]
    pub fn raw(self) -> u8 {
        self as u8
    }

    /// From the verbs enum value; anything else is an error naming it.
    pub fn from_raw(v: u8) -> Result<Self, ControlError> {
        Ok(match v {
            1 => Self::B256,
            2 => Self::B512,
            3 => Self::B1024,
            4 => Self::B2048,
            5 => Self::B4096,
            _ => {
                return Err(ControlError::Invalid(format_args_owned(
                    "MTU enum",
                    v.into(),
                )));
            }
        })
    }

    /// Bytes.
    #[must_use]
    pub fn bytes(self) -> u32 {
        128 << self.raw()
    }

    /// From a byte count (256, 512, 1024, 2048 or 4096).
    pub fn from_bytes(b: u32) -> Result<Self, ControlError> {
        match b {
            256 | 512 | 1024 | 2048 | 4096 => Self::from_raw(b.trailing_zeros() as u8 - 7),
            _ => Err(ControlError::Invalid(format_args_owned(
                "MTU of bytes (256..=4096, a power of two)",
                b.into(),
            ))),
        }
    }

    /// The path MTU two ends can both use: the smaller one.
    #[must_use]
    pub fn path(self, other: Mtu) -> Mtu {
        self.min(other)
    }
}

fn format_args_owned(what: &str, v: u64) -> String {
    std::format!("{v} is not a valid {what}")
}

/// A port's logical state (`enum ibv_port_state`, the states a control path tells apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortState {
    /// No link.
    Down,
    /// Link up, not yet configured by the subnet manager.
    Init,
    /// Configured, not yet passing data.
    Armed,
    /// Passing data.
    Active,
}

/// One port of a device, as a control path needs it to pick a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (1-based, as verbs counts).
    pub port: u8,
    /// Logical state.
    pub state: PortState,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// Largest MTU the port supports.
    pub max_mtu: Mtu,
    /// MTU configured now (a path MTU may not exceed it).
    pub active_mtu: Mtu,
    /// Local identifier (InfiniBand; 0 on Ethernet).
    pub lid: u16,
    /// Number of partition keys (valid `pkey_index` values are below it).
    pub pkeys: u16,
    /// The populated GID-table entries.
    pub gids: Vec<GidEntry>,
}

/// A device's identity and the limits callers size their queues by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device name (`mlx5_0`, `bnxt_re0`, `gda_sim0`, …).
    pub name: String,
    /// The provider that drives its queues (`Provider::NAME`).
    pub provider: &'static str,
    /// PCI vendor id (0x15b3 Mellanox/NVIDIA, 0x14e4 Broadcom; 0 for the software NIC).
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Firmware version text.
    pub fw_ver: String,
    /// Most work requests a queue may hold.
    pub max_qp_wr: u32,
    /// Most CQEs a CQ may hold.
    pub max_cqe: u32,
    /// Most gather/scatter entries per work request.
    pub max_sge: u32,
    /// Largest inline payload.
    pub max_inline: u32,
    /// Most outstanding READs/atomics a QP may have as requester or responder.
    pub max_rd_atomic: u8,
    /// Its ports.
    pub ports: Vec<PortInfo>,
}

impl DeviceInfo {
    /// Port `port`, or an error listing the ports there are.
    pub fn port(&self, port: u8) -> Result<&PortInfo, ControlError> {
        self.ports.iter().find(|p| p.port == port).ok_or_else(|| {
            ControlError::Invalid(std::format!(
                "{} has no port {port} (ports: {:?})",
                self.name,
                self.ports.iter().map(|p| p.port).collect::<Vec<_>>()
            ))
        })
    }
}

/// What a caller asks of a path (both `None`: the rules below choose).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathRequest {
    /// A port number (`None`: the first active port).
    pub port: Option<u8>,
    /// A GID index (`None`: the preferred GID; `GDA_IB_GID_INDEX` sets it in tools).
    pub gid_index: Option<u32>,
}

/// The local end of a path: port, GID and MTU a QP is brought up with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalPath {
    /// Port number.
    pub port: u8,
    /// Link layer of the port.
    pub link_layer: LinkLayer,
    /// Local identifier (InfiniBand).
    pub lid: u16,
    /// The source GID (`sgid_index` = `gid.index`).
    pub gid: GidEntry,
    /// The port's active MTU (the path MTU is the smaller of both ends').
    pub mtu: Mtu,
}

/// Chooses a port and source GID the way the control paths of every provider do:
/// - the requested port, else the first `Active` one (a port that is not active is an error:
///   a QP on it would only ever see retry errors);
/// - the requested GID index, which must be populated and of a type the link layer can carry;
/// - otherwise on Ethernet a RoCE v2 GID (routable), preferring an IPv4-mapped one, never a
///   link-local one while a routable one exists, then RoCE v1; on InfiniBand the first IB GID.
///
/// Zero (unpopulated) entries are never chosen.
pub fn select_path(dev: &DeviceInfo, want: PathRequest) -> Result<LocalPath, ControlError> {
    let port = match want.port {
        Some(p) => dev.port(p)?,
        None => dev
            .ports
            .iter()
            .find(|p| p.state == PortState::Active)
            .ok_or_else(|| ControlError::NoPath(std::format!("{} has no active port", dev.name)))?,
    };
    if port.state != PortState::Active {
        return Err(ControlError::NoPath(std::format!(
            "{} port {} is {:?}, not active",
            dev.name,
            port.port,
            port.state
        )));
    }
    let usable = |e: &&GidEntry| {
        !e.gid.is_zero()
            && match port.link_layer {
                LinkLayer::Ethernet => e.kind != GidType::Ib,
                LinkLayer::InfiniBand => e.kind == GidType::Ib,
            }
    };
    let gid = match want.gid_index {
        Some(i) => {
            let e = port.gids.iter().find(|e| e.index == i).ok_or_else(|| {
                ControlError::NoPath(std::format!(
                    "{} port {}: GID index {i} is not populated",
                    dev.name,
                    port.port
                ))
            })?;
            if !usable(&e) {
                return Err(ControlError::NoPath(std::format!(
                    "{} port {}: GID index {i} ({:?} {}) cannot be used on a {:?} link",
                    dev.name,
                    port.port,
                    e.kind,
                    e.gid,
                    port.link_layer
                )));
            }
            *e
        }
        None => {
            // Lower rank is better; ties go to the lower index (the table's order).
            let rank = |e: &GidEntry| match (e.kind, e.gid.is_link_local(), e.gid.ipv4()) {
                (GidType::RoceV2, false, Some(_)) => 0,
                (GidType::RoceV2, false, None) => 1,
                (GidType::Ib, _, _) => 1,
                (GidType::RoceV2, true, _) => 2,
                (GidType::RoceV1, false, _) => 3,
                (GidType::RoceV1, true, _) => 4,
            };
            *port
                .gids
                .iter()
                .filter(usable)
                .min_by_key(|e| (rank(e), e.index))
                .ok_or_else(|| {
                    ControlError::NoPath(std::format!(
                        "{} port {} has no usable GID",
                        dev.name,
                        port.port
                    ))
                })?
        }
    };
    Ok(LocalPath {
        port: port.port,
        link_layer: port.link_layer,
        lid: port.lid,
        gid,
        mtu: port.active_mtu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    fn gid(b: &[u8]) -> Gid {
        let mut g = [0u8; 16];
        g[..b.len()].copy_from_slice(b);
        Gid(g)
    }
    fn ll() -> Gid {
        gid(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    }
    fn v4() -> Gid {
        gid(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7])
    }
    fn dev(ll_layer: LinkLayer, gids: Vec<GidEntry>) -> DeviceInfo {
        DeviceInfo {
            name: "t0".into(),
            provider: "test",
            vendor_id: 0,
            vendor_part_id: 0,
            fw_ver: String::new(),
            max_qp_wr: 1,
            max_cqe: 1,
            max_sge: 1,
            max_inline: 0,
            max_rd_atomic: 1,
            ports: vec![
                PortInfo {
                    port: 1,
                    state: PortState::Down,
                    link_layer: ll_layer,
                    max_mtu: Mtu::B4096,
                    active_mtu: Mtu::B4096,
                    lid: 0,
                    pkeys: 1,
                    gids: gids.clone(),
                },
                PortInfo {
                    port: 2,
                    state: PortState::Active,
                    link_layer: ll_layer,
                    max_mtu: Mtu::B4096,
                    active_mtu: Mtu::B1024,
                    lid: 9,
                    pkeys: 1,
                    gids,
                },
            ],
        }
    }
    fn e(index: u32, gid: Gid, kind: GidType) -> GidEntry {
        GidEntry { index, gid, kind }
    }

    #[test]
    fn roce_prefers_routable_v2_ipv4_then_avoids_link_local() {
        // The order an mlx5 port lists them: link-local v1/v2, then the address's v1/v2.
        let t = vec![
            e(0, ll(), GidType::RoceV1),
            e(1, ll(), GidType::RoceV2),
            e(2, v4(), GidType::RoceV1),
            e(3, v4(), GidType::RoceV2),
        ];
        let p = select_path(&dev(LinkLayer::Ethernet, t.clone()), PathRequest::default()).unwrap();
        assert_eq!((p.port, p.gid.index, p.mtu), (2, 3, Mtu::B1024));
        // Without the address, the link-local RoCE v2 GID beats RoCE v1.
        let p = select_path(
            &dev(LinkLayer::Ethernet, t[..2].to_vec()),
            PathRequest::default(),
        );
        assert_eq!(p.unwrap().gid.index, 1);
        // A zero entry is never chosen; an IB GID is refused on Ethernet.
        let t2 = vec![e(0, Gid::ZERO, GidType::RoceV2), e(1, ll(), GidType::Ib)];
        let err = select_path(
            &dev(LinkLayer::Ethernet, t2.clone()),
            PathRequest::default(),
        );
        assert!(matches!(err, Err(ControlError::NoPath(_))), "{err:?}");
        let err = select_path(
            &dev(LinkLayer::Ethernet, t2),
            PathRequest {
                port: None,
                gid_index: Some(1),
            },
        );
        assert!(matches!(err, Err(ControlError::NoPath(_))), "{err:?}");
        // An explicit index wins when it is usable.
        let p = select_path(
            &dev(LinkLayer::Ethernet, t),
            PathRequest {
                port: None,
                gid_index: Some(0),
            },
        );
        assert_eq!(p.unwrap().gid.index, 0);
    }

    #[test]
    fn ports_must_exist_and_be_active() {
        let t = vec![e(0, v4(), GidType::RoceV2)];
        let d = dev(LinkLayer::Ethernet, t);
        assert!(
            select_path(
                &d,
                PathRequest {
                    port: Some(1),
                    gid_index: None
                }
            )
            .is_err()
        );
        assert!(
            select_path(
                &d,
                PathRequest {
                    port: Some(7),
                    gid_index: None
                }
            )
            .is_err()
        );
        let ib = dev(LinkLayer::InfiniBand, vec![e(0, ll(), GidType::Ib)]);
        let p = select_path(&ib, PathRequest::default()).unwrap();
        assert_eq!(
            (p.lid, p.gid.index, p.link_layer),
            (9, 0, LinkLayer::InfiniBand)
        );
    }

    #[test]
    fn mtu_values_round_trip_and_path_takes_the_smaller() {
        for (raw, bytes) in [(1u8, 256u32), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
            let m = Mtu::from_raw(raw).unwrap();
            assert_eq!((m.raw(), m.bytes()), (raw, bytes));
            assert_eq!(Mtu::from_bytes(bytes).unwrap(), m);
        }
        for bad in [0u8, 6, 255] {
            assert!(Mtu::from_raw(bad).is_err());
        }
        for bad in [0u32, 128, 1000, 8192, u32::MAX] {
            assert!(Mtu::from_bytes(bad).is_err());
        }
        assert_eq!(Mtu::B4096.path(Mtu::B1024), Mtu::B1024);
    }

    #[test]
    fn gid_classes_and_text() {
        assert!(ll().is_link_local() && !v4().is_link_local());
        assert_eq!(v4().ipv4(), Some([10, 0, 0, 7]));
        assert_eq!(ll().ipv4(), None);
        assert_eq!(
            std::format!("{}", v4()),
            "0000:0000:0000:0000:0000:ffff:0a00:0007"
        );
    }
}
