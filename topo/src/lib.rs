//! # gda-topo — the node as gda sees it, and which GPU, NICs and CPUs each local rank takes
//!
//! Device-initiated RDMA pays off only when each GPU drives the NIC next to it. This crate
//! reads the node's topology from **hwloc** — the engine Open MPI, Slurm and PMIx use —
//! loaded at run time ([`hwloc`]; gda runs without it, and says placement falls back to
//! round-robin), as hwloc's XML ([`Node::from_xml`]): GPUs matched by PCI address, RDMA NICs
//! by their rdma-core names (`mlx5_3`), NUMA nodes, and the PCIe path between each GPU and NIC
//! in `nvidia-smi topo -m`'s terms ([`Path`]). [`select`] then gives each local rank its GPU,
//! its NICs (one per rail, nearest first, balanced) and its CPUs.
//!
//! hwloc reads the machine, or an XML file (`HWLOC_XMLFILE`, or [`Source::Xml`]): tests ship
//! XML of realistic nodes (`tests/fixtures/topology/`).
//!
//! ## Environment
//! | variable | meaning |
//! |---|---|
//! | `HWLOC_XMLFILE` | read this hwloc XML instead of the machine (hwloc's own variable) |
//! | `GDA_HWLOC_LIB` | path of `libhwloc.so.15` (default: the loader's search path) |
//! | `GDA_RDMA_DEVICES` | devices to use: `mlx5_0,mlx5_3:1` (only those, `:port`) or `^mlx5_1` (all but those) |
//! | `GDA_NIC_MAP` | local rank → NICs: `0=mlx5_0,1=mlx5_1+mlx5_2` (ranks not named are placed as usual) |
//! | `GDA_RAILS` | NICs per rank (default 1: the nearest) |
#![deny(unsafe_op_in_unsafe_fn)]

pub mod hwloc;
mod node;
mod select;

use std::path::PathBuf;

pub use node::{Gpu, Nic, Node, Numa, Path, PciAddr, XmlError};
pub use select::{Binding, DeviceList, DevicePort, NicMap, Rail, Request, SelectError, select};

/// Where the topology comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// This machine (or `HWLOC_XMLFILE`, which hwloc honours itself).
    Host,
    /// An hwloc XML file.
    Xml(PathBuf),
}

/// Why the node could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// hwloc is missing, unusable or refused.
    #[error(transparent)]
    Hwloc(#[from] hwloc::HwlocError),
    /// hwloc's XML could not be read.
    #[error("{what}: {err}")]
    Xml {
        /// What was read.
        what: String,
        /// Why it failed.
        err: XmlError,
    },
}

/// The node, from hwloc.
///
/// # Errors
/// hwloc is missing or failed, or its XML could not be read.
pub fn discover(source: &Source) -> Result<Node, TopoError> {
    let file = match source {
        Source::Host => None,
        Source::Xml(p) => Some(p.as_path()),
    };
    let xml = hwloc::export(file)?;
    Node::from_xml(&xml).map_err(|err| TopoError::Xml {
        what: file.map_or_else(
            || "hwloc's export of this machine".to_string(),
            |p| p.display().to_string(),
        ),
        err,
    })
}

/// A [`Request`] for `ranks` local ranks with the overrides the environment gives
/// (`GDA_RDMA_DEVICES`, `GDA_NIC_MAP`, `GDA_RAILS`).
///
/// # Errors
/// A malformed variable (named in the message).
pub fn request_from_env(ranks: usize) -> Result<Request, SelectError> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let rails = match var("GDA_RAILS").trim() {
        "" => 1,
        s => s
            .parse::<usize>()
            .ok()
            .filter(|r| (1..=64).contains(r))
            .ok_or_else(|| SelectError(format!("GDA_RAILS: {s:?} is not a count 1..=64")))?,
    };
    Ok(Request {
        ranks,
        rails,
        gpu_order: None,
        devices: DeviceList::parse(&var("GDA_RDMA_DEVICES"), "GDA_RDMA_DEVICES")?,
        map: NicMap::parse(&var("GDA_NIC_MAP"), "GDA_NIC_MAP")?,
    })
}
