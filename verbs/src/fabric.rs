//! The process's software-NIC fabric.

use gda_sim::{Fabric, FabricConfig};

/// The fabric every device of this process is a NIC of.
///
/// Today an in-process fabric: QPs of one process reach each other. (Reaching QPs of other
/// processes needs the cross-process fabric, `Fabric::process`.)
pub fn process_fabric(config: FabricConfig) -> Result<Fabric, String> {
    Ok(Fabric::new(config))
}
