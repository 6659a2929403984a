//! The process's software-NIC fabric.

use gda_sim::{Fabric, FabricConfig};

/// The fabric every device of this process is a NIC of: a process fabric
/// ([`Fabric::process`]), so QPs of other processes on this host (of the same user) connect to
/// this process's QPs by GID and QP number, and every RC operation between them executes at the
/// responder, where the memory is.
pub fn process_fabric(config: FabricConfig) -> Result<Fabric, String> {
    Fabric::process(config).map_err(|e| e.to_string())
}
