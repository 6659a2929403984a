//! The process's software-NIC fabric, and the software NIC's GIDs.

use gda_sim::{Fabric, FabricConfig};

/// The fabric every device of this process is a NIC of: a process fabric
/// ([`Fabric::process`]), so QPs of other processes on this host (of the same user) connect to
/// this process's QPs by GID and QP number, and every RC operation between them executes at the
/// responder, where the memory is.
pub fn process_fabric(config: FabricConfig) -> Result<Fabric, String> {
    Fabric::process(config).map_err(|e| e.to_string())
}
/// The software NIC's address of QP `qpn` behind `gid` (either GID form a software NIC
/// shows), or `None` for a GID no software NIC has.
pub fn endpoint_of(gid: &[u8; 16], qpn: u32) -> Option<gda_sim::Endpoint> {
    gda_sim::endpoint_of(&gda_hal::control::Gid(*gid), qpn)
}
