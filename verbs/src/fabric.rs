//! The process's software-NIC fabric, and the software NIC's GIDs.

use gda_sim::{Fabric, FabricConfig};

/// The fabric every device of this process is a NIC of: a process fabric
/// ([`Fabric::process`]), so QPs of other processes on this host (of the same user) connect to
/// this process's QPs by GID and QP number, and every RC operation between them executes at the
/// responder, where the memory is.
pub fn process_fabric(config: FabricConfig) -> Result<Fabric, String> {
    Fabric::process(config).map_err(|e| e.to_string())
}
/// Bytes 8..12 of a software-NIC GID (`"gda\0"`), between the fabric id and the NIC index
/// (`gda_sim`'s `SimDevice` GID layout).
const GID_MARK: [u8; 4] = *b"gda\0";

/// The software NIC's address of QP `qpn` behind `gid`, or `None` for a GID no software NIC has.
pub fn endpoint_of(gid: &[u8; 16], qpn: u32) -> Option<gda_sim::Endpoint> {
    (gid[8..12] == GID_MARK).then(|| gda_sim::Endpoint {
        fabric: u64::from_be_bytes([
            gid[0], gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7],
        ]),
        nic: u32::from_be_bytes([gid[12], gid[13], gid[14], gid[15]]),
        qpn,
    })
}
