//! What two RC QPs exchange to connect, and its byte form for out-of-band exchange (a
//! bootstrap allgather, a TCP socket, a file).

use super::{ControlError, Gid, LinkLayer, Mtu};

/// One end of an RC connection: the attributes a peer's RTR transition needs about this QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// QP number (24 bits).
    pub qpn: u32,
    /// The first PSN this QP sends (24 bits): the peer's expected receive PSN.
    pub psn: u32,
    /// Local identifier (InfiniBand; 0 on Ethernet).
    pub lid: u16,
    /// The source GID this QP sends from (the peer's destination GID).
    pub gid: Gid,
    /// This end's active MTU (the path MTU is the smaller of both).
    pub mtu: Mtu,
    /// Port number (informational: the peer does not need it).
    pub port: u8,
    /// Link layer (both ends must agree).
    pub link_layer: LinkLayer,
}

/// `"GDAE"`: what every serialized endpoint starts with.
const MAGIC: [u8; 4] = *b"GDAE";
/// The format version; a reader refuses any other.
const VERSION: u8 = 1;

impl Endpoint {
    /// Serialized size in bytes.
    pub const BYTES: usize = 32;

    /// The byte form (little-endian, versioned):
    ///
    /// | bytes | field |
    /// |---|---|
    /// | 0..4 | `"GDAE"` |
    /// | 4 | version (1) |
    /// | 5 | link layer (1 InfiniBand, 2 Ethernet, as `IBV_LINK_LAYER_*`) |
    /// | 6 | port |
    /// | 7 | MTU (`enum ibv_mtu`) |
    /// | 8..11 | QPN (24 bits) |
    /// | 11..14 | PSN (24 bits) |
    /// | 14..16 | LID |
    /// | 16..32 | GID |
    #[must_use]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = match self.link_layer {
            LinkLayer::InfiniBand => 1,
            LinkLayer::Ethernet => 2,
        };
        b[6] = self.port;
        b[7] = self.mtu.raw();
        b[8..11].copy_from_slice(&self.qpn.to_le_bytes()[..3]);
        b[11..14].copy_from_slice(&self.psn.to_le_bytes()[..3]);
        b[14..16].copy_from_slice(&self.lid.to_le_bytes());
        b[16..].copy_from_slice(&self.gid.0);
        b
    }

    /// Parses and validates what [`Endpoint::to_bytes`] wrote. Every refusal names the field.
    pub fn from_bytes(b: &[u8]) -> Result<Self, ControlError> {
        let bad = |what: &str| ControlError::BadEndpoint(what.into());
        let b: &[u8; Self::BYTES] = b.try_into().map_err(|_| {
            ControlError::BadEndpoint(std::format!(
                "expected {} bytes, got {}",
                Self::BYTES,
                b.len()
            ))
        })?;
        if b[..4] != MAGIC {
            return Err(bad("not a gda endpoint (magic)"));
        }
        if b[4] != VERSION {
            return Err(ControlError::BadEndpoint(std::format!(
                "format version {} (this build reads {VERSION})",
                b[4]
            )));
        }
        let link_layer = match b[5] {
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            _ => return Err(bad("link layer")),
        };
        let mtu = Mtu::from_raw(b[7]).map_err(|_| bad("MTU"))?;
        let u24 = |r: core::ops::Range<usize>| {
            let mut w = [0u8; 4];
            w[..3].copy_from_slice(&b[r]);
            u32::from_le_bytes(w)
        };
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..]);
        let ep = Self {
            qpn: u24(8..11),
            psn: u24(11..14),
            lid: u16::from_le_bytes([b[14], b[15]]),
            gid: Gid(gid),
            mtu,
            port: b[6],
            link_layer,
        };
        if ep.link_layer == LinkLayer::Ethernet && ep.gid.is_zero() {
            return Err(bad("zero GID on an Ethernet (RoCE) endpoint"));
        }
        Ok(ep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep() -> Endpoint {
        Endpoint {
            qpn: 0x00ab_cdef,
            psn: 0x00ff_ff01,
            lid: 0,
            gid: Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]),
            mtu: Mtu::B4096,
            port: 1,
            link_layer: LinkLayer::Ethernet,
        }
    }

    #[test]
    fn round_trips_and_refuses_every_malformed_field() {
        let e = ep();
        let b = e.to_bytes();
        assert_eq!(Endpoint::from_bytes(&b).unwrap(), e);
        let mut cases = 0;
        for (at, v) in [(0usize, b'X'), (4, 2), (5, 0), (5, 3), (7, 0), (7, 6)] {
            let mut m = b;
            m[at] = v;
            assert!(
                matches!(Endpoint::from_bytes(&m), Err(ControlError::BadEndpoint(_))),
                "byte {at} = {v}"
            );
            cases += 1;
        }
        let mut zero_gid = b;
        zero_gid[16..].fill(0);
        assert!(Endpoint::from_bytes(&zero_gid).is_err());
        assert!(Endpoint::from_bytes(&b[..31]).is_err());
        assert!(Endpoint::from_bytes(&[]).is_err());
        assert_eq!(cases, 6);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = Endpoint::from_bytes(&b);
        }

        #[test]
        fn any_valid_endpoint_round_trips(qpn in 0u32..1 << 24, psn in 0u32..1 << 24, lid: u16,
            g: [u8; 16], m in 1u8..=5, port: u8, ib: bool) {
            let mut gid = Gid(g);
            if !ib && gid.is_zero() { gid.0[15] = 1; }
            let e = Endpoint { qpn, psn, lid, gid, mtu: Mtu::from_raw(m).unwrap(), port,
                link_layer: if ib { LinkLayer::InfiniBand } else { LinkLayer::Ethernet } };
            proptest::prop_assert_eq!(Endpoint::from_bytes(&e.to_bytes()).unwrap(), e);
        }
    }
}
