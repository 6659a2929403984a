//! Which GPU, NICs and CPUs each local rank takes.
//!
//! - **GPU**: local rank `r` takes the node's GPU `r mod G` (in the GPU runtime's order when
//!   given, else by PCI address), so ranks spread over the GPUs as `gdarun`, `torchrun` and
//!   `mpirun` place them.
//! - **NICs** (rails): the nearest by PCIe path to that GPU — same switch (`PIX`), then several
//!   bridges (`PXB`), the host bridge (`PHB`), the NUMA node (`NODE`), then any (`SYS`) —
//!   balanced: no NIC takes more than its share, ⌈ranks × rails / NICs⌉, while another is
//!   below it. Pairs are made nearest first over all ranks at once (a rank's own switch NIC
//!   is never taken by a rank farther from it), the least used NIC among equally near ones.
//!   A rank without a GPU is placed by its NUMA node (ranks spread over NUMA nodes in turn).
//! - **CPUs**: those near the GPU (its NUMA node's), or of the rank's NUMA node.
//!
//! Overrides: a device list ([`DeviceList`]: `mlx5_0,mlx5_3:1` keeps only those, `^mlx5_1`
//! leaves those out) and an explicit map of local ranks to NICs ([`NicMap`]).

use crate::node::{Node, Path, PciAddr};

/// Why a selection could not be made.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SelectError(pub String);

/// A NIC chosen for a rank: which, its port, and how near it is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Rail {
    /// The RDMA device (`mlx5_3`).
    pub nic: String,
    /// Its port when the device list or map named one (`mlx5_0:2`); `None`: the device's first
    /// active port.
    pub port: Option<u8>,
    /// The PCIe path from the rank's GPU (or CPUs) to it.
    pub path: Path,
}

/// What one local rank takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The local rank.
    pub rank: usize,
    /// Its GPU's PCI address, when the node has GPUs.
    pub gpu: Option<PciAddr>,
    /// hwloc's name for the GPU (`cuda3`, `rsmi3`), or empty.
    pub gpu_name: String,
    /// Its NICs, nearest first (one per rail).
    pub rails: Vec<Rail>,
    /// The CPUs near it, sorted (all of the node's when nothing is known).
    pub cpus: Vec<usize>,
}

impl Binding {
    /// The JSON object scripts read (`gda topo --json --ranks N`): `rank`, `gpu` (PCI
    /// address or null), `gpu_name`, `nics` (device names), `ports`, `paths`, `cpus` (the
    /// kernel's list form, `0-7,64-71`).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "rank": self.rank,
            "gpu": self.gpu.map(|a| a.to_string()),
            "gpu_name": (!self.gpu_name.is_empty()).then_some(&self.gpu_name),
            "nics": self.rails.iter().map(|r| r.nic.clone()).collect::<Vec<_>>(),
            "ports": self.rails.iter().map(|r| r.port).collect::<Vec<_>>(),
            "paths": self.rails.iter().map(|r| r.path.name()).collect::<Vec<_>>(),
            "cpus": gda_os::cpu::format_list(&self.cpus),
        })
    }
}

/// Which devices may be used: `a,b:1` (only those; `:port` picks the port) or `^a,b` (all but
/// those) — the form NVSHMEM's `NVSHMEM_HCA_LIST`, MORI's `MORI_RDMA_DEVICES` and UCX use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceList {
    /// Where it came from (`GDA_RDMA_DEVICES`), for errors.
    what: String,
    rule: Rule,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    All,
    Only(Vec<DevicePort>),
    Except(Vec<String>),
}

/// A device and the port named with it (`mlx5_0:2`), if one was.
pub type DevicePort = (String, Option<u8>);

/// Reads one `name[:port]`.
fn device_port(s: &str, what: &str) -> Result<DevicePort, SelectError> {
    let (name, port) = match s.split_once(':') {
        Some((n, p)) => {
            let port =
                p.parse::<u8>().ok().filter(|&p| p >= 1).ok_or_else(|| {
                    SelectError(format!("{what}: {s:?}: port {p:?} is not 1..=255"))
                })?;
            (n, Some(port))
        }
        None => (s, None),
    };
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        return Err(SelectError(format!("{what}: {s:?} is not a device name")));
    }
    Ok((name.to_string(), port))
}

impl DeviceList {
    /// Every device.
    #[must_use]
    pub fn all() -> Self {
        Self {
            what: "device list".into(),
            rule: Rule::All,
        }
    }

    /// Reads `a,b:1` or `^a,b` (from `what`, named in errors); empty means every device.
    ///
    /// # Errors
    /// A malformed entry (named), a port on an excluded device, or a device twice.
    pub fn parse(s: &str, what: &str) -> Result<Self, SelectError> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(Self {
                what: what.into(),
                rule: Rule::All,
            });
        }
        let (except, body) = match s.strip_prefix('^') {
            Some(b) => (true, b),
            None => (false, s),
        };
        let mut v: Vec<DevicePort> = Vec::new();
        for e in body.split(',').map(str::trim) {
            let (n, p) = device_port(e, what)?;
            if except && e.contains(':') {
                return Err(SelectError(format!(
                    "{what}: {e:?}: a port means nothing on a device left out"
                )));
            }
            if v.iter().any(|(m, _)| *m == n) {
                return Err(SelectError(format!("{what}: {n} is listed twice")));
            }
            v.push((n, p));
        }
        Ok(Self {
            what: what.into(),
            rule: if except {
                Rule::Except(v.into_iter().map(|(n, _)| n).collect())
            } else {
                Rule::Only(v)
            },
        })
    }

    /// Whether the list keeps device `name` (by name alone: what rdma-core's discovery
    /// filters with before any topology is read).
    #[must_use]
    pub fn keeps(&self, name: &str) -> bool {
        match &self.rule {
            Rule::All => true,
            Rule::Only(v) => v.iter().any(|(n, _)| n == name),
            Rule::Except(v) => !v.iter().any(|n| n == name),
        }
    }

    /// The node's NICs this list keeps (indices into `node.nics`) with their ports, in the
    /// node's order.
    ///
    /// # Errors
    /// The list names a device the node does not have (the message names those it has), or
    /// keeps none.
    pub fn apply(&self, node: &Node) -> Result<Vec<(usize, Option<u8>)>, SelectError> {
        let what = &self.what;
        let have = || {
            let v: Vec<&str> = node.nics.iter().map(|n| n.name.as_str()).collect();
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let find = |name: &str| node.nics.iter().position(|n| n.name == name);
        // A device kept must exist; one left out need not (discovery may have left it out
        // already, or the node may not have it: either way it is not used).
        let names: Vec<&str> = match &self.rule {
            Rule::Only(v) => v.iter().map(|(n, _)| n.as_str()).collect(),
            Rule::All | Rule::Except(_) => Vec::new(),
        };
        if let Some(bad) = names.iter().find(|n| find(n).is_none()) {
            return Err(SelectError(format!(
                "{what}: no RDMA device {bad} on this node (it has: {})",
                have()
            )));
        }
        let kept: Vec<(usize, Option<u8>)> = match &self.rule {
            Rule::All => (0..node.nics.len()).map(|i| (i, None)).collect(),
            Rule::Only(v) => {
                let mut k: Vec<(usize, Option<u8>)> = v
                    .iter()
                    .filter_map(|(n, p)| find(n).map(|i| (i, *p)))
                    .collect();
                k.sort_unstable();
                k
            }
            Rule::Except(v) => (0..node.nics.len())
                .filter(|&i| !v.contains(&node.nics[i].name))
                .map(|i| (i, None))
                .collect(),
        };
        if kept.is_empty() {
            return Err(SelectError(format!(
                "{what}: no RDMA device left to use (the node has: {})",
                have()
            )));
        }
        Ok(kept)
    }
}

/// An explicit map of local ranks to NICs: `0=mlx5_0,1=mlx5_1+mlx5_2:1` (a rank's rails
/// joined by `+`). Ranks it does not name are placed as usual.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicMap {
    /// Where it came from (`GDA_NIC_MAP`), for errors.
    what: String,
    /// Each named rank and its rails.
    pub entries: Vec<(usize, Vec<DevicePort>)>,
}

impl NicMap {
    /// Reads the map; empty is no map.
    ///
    /// # Errors
    /// A malformed entry (named), or a rank twice.
    pub fn parse(s: &str, what: &str) -> Result<Self, SelectError> {
        let mut v: Vec<(usize, Vec<DevicePort>)> = Vec::new();
        for e in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (r, nics) = e.split_once('=').ok_or_else(|| {
                SelectError(format!("{what}: {e:?} is not rank=device[+device…]"))
            })?;
            let rank: usize = r
                .trim()
                .parse()
                .map_err(|_| SelectError(format!("{what}: {e:?}: {r:?} is not a rank")))?;
            if v.iter().any(|(q, _)| *q == rank) {
                return Err(SelectError(format!("{what}: rank {rank} is mapped twice")));
            }
            let rails = nics
                .split('+')
                .map(|n| device_port(n.trim(), what))
                .collect::<Result<Vec<_>, _>>()?;
            v.push((rank, rails));
        }
        Ok(Self {
            what: what.into(),
            entries: v,
        })
    }
}

/// What to select for.
#[derive(Clone, Debug)]
pub struct Request {
    /// Local ranks on the node.
    pub ranks: usize,
    /// NICs per rank (rails); 0 means 1.
    pub rails: usize,
    /// The GPUs in the GPU runtime's order (PCI addresses), when it is known; `None`: the
    /// node's GPUs by PCI address.
    pub gpu_order: Option<Vec<PciAddr>>,
    /// Which devices may be used.
    pub devices: DeviceList,
    /// Ranks whose NICs are given.
    pub map: NicMap,
}

impl Request {
    /// `ranks` local ranks, one rail each, every device, no map.
    #[must_use]
    pub fn new(ranks: usize) -> Self {
        Self {
            ranks,
            rails: 1,
            gpu_order: None,
            devices: DeviceList::all(),
            map: NicMap::default(),
        }
    }
}

/// Chooses each local rank's GPU, NICs and CPUs, by the rules at the top of this file (and
/// `docs/topology.md`).
///
/// # Errors
/// A device list or map naming a device the node lacks (or a rank outside `0..ranks`); a GPU
/// order naming a GPU the node lacks; no NIC to use.
pub fn select(node: &Node, req: &Request) -> Result<Vec<Binding>, SelectError> {
    let usable = req.devices.apply(node)?;
    let rails = req.rails.max(1).min(usable.len());
    let gpus: Vec<usize> = match &req.gpu_order {
        Some(order) => order
            .iter()
            .map(|a| {
                node.gpus.iter().position(|g| g.addr == *a).ok_or_else(|| {
                    SelectError(format!(
                        "the GPU runtime's GPU {a} is not in the topology (it has: {})",
                        node.gpus
                            .iter()
                            .map(|g| g.addr.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
        None => (0..node.gpus.len()).collect(),
    };
    for (r, _) in &req.map.entries {
        if *r >= req.ranks {
            return Err(SelectError(format!(
                "{}: rank {r} is not a local rank (0..{})",
                req.map.what, req.ranks
            )));
        }
    }
    let cap = (req.ranks * rails).div_ceil(usable.len()).max(1);
    // Each rank's GPU and NUMA node, and its path to every NIC.
    let placed: Vec<(Option<usize>, Option<u32>)> = (0..req.ranks)
        .map(|rank| {
            let gpu = (!gpus.is_empty()).then(|| gpus[rank % gpus.len()]);
            let numa = match gpu {
                Some(g) => node.gpus[g].numa,
                None if !node.numa.is_empty() => Some(node.numa[rank % node.numa.len()].index),
                None => None,
            };
            (gpu, numa)
        })
        .collect();
    // The path from each GPU (or NUMA node) to each NIC, computed once: ranks share GPUs.
    let nn = node.nics.len();
    let by_gpu: Vec<Path> = (0..node.gpus.len())
        .flat_map(|g| (0..nn).map(move |n| node.gpu_nic_path(g, n)))
        .collect();
    let by_numa: Vec<(Option<u32>, Vec<Path>)> = placed
        .iter()
        .filter(|(g, _)| g.is_none())
        .map(|(_, numa)| *numa)
        .fold(Vec::new(), |mut v, numa| {
            if !v.iter().any(|(m, _)| *m == numa) {
                v.push((numa, (0..nn).map(|n| node.numa_nic_path(numa, n)).collect()));
            }
            v
        });
    let path = |rank: usize, n: usize| match placed[rank] {
        (Some(g), _) => by_gpu[g * nn + n],
        (None, numa) => by_numa
            .iter()
            .find(|(m, _)| *m == numa)
            .map_or(Path::Sys, |(_, v)| v[n]),
    };
    let mut load = vec![0usize; node.nics.len()];
    let mut rails_of: Vec<Vec<Rail>> = vec![Vec::new(); req.ranks];
    let mapped = |rank: usize| req.map.entries.iter().find(|(r, _)| *r == rank);
    // Ranks the map names take exactly what it gives.
    for (rank, given) in &req.map.entries {
        for (name, port) in given {
            let n = node
                .nics
                .iter()
                .position(|x| x.name == *name)
                .ok_or_else(|| {
                    SelectError(format!(
                        "{}: rank {rank}: no RDMA device {name} on this node (it has: {})",
                        req.map.what,
                        node.nics
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            load[n] += 1;
            rails_of[*rank].push(Rail {
                nic: name.clone(),
                port: *port,
                path: path(*rank, n),
            });
        }
    }
    // The others, one rail per round: each step takes the nearest (rank, NIC) pair left, a
    // NIC at its share only when none below it remains, then the least used; ties by rank
    // and the node's order. So a rank's own switch NIC is never taken by a rank farther
    // from it.
    for _ in 0..rails {
        let mut waiting: Vec<usize> = (0..req.ranks).filter(|&r| mapped(r).is_none()).collect();
        while !waiting.is_empty() {
            let taken = &rails_of;
            let best = waiting
                .iter()
                .enumerate()
                .flat_map(|(wi, &r)| {
                    usable
                        .iter()
                        .filter(move |(n, _)| !taken[r].iter().any(|x| x.nic == node.nics[*n].name))
                        .map(move |&(n, port)| (wi, r, n, port))
                })
                .min_by_key(|&(_, r, n, _)| (load[n] >= cap, path(r, n), load[n], r, n));
            let Some((wi, r, n, port)) = best else {
                break;
            };
            waiting.swap_remove(wi);
            load[n] += 1;
            rails_of[r].push(Rail {
                nic: node.nics[n].name.clone(),
                port,
                path: path(r, n),
            });
        }
    }
    let mut out = Vec::with_capacity(req.ranks);
    for (rank, rails) in rails_of.into_iter().enumerate() {
        let (gpu, numa) = placed[rank];
        let cpus = match (gpu, numa) {
            (Some(g), _) if !node.gpus[g].cpus.is_empty() => node.gpus[g].cpus.clone(),
            (_, Some(i)) => node
                .numa
                .iter()
                .find(|n| n.index == i)
                .map_or_else(|| node.cpus.clone(), |n| n.cpus.clone()),
            _ => node.cpus.clone(),
        };
        out.push(Binding {
            rank,
            gpu: gpu.map(|g| node.gpus[g].addr),
            gpu_name: gpu.map(|g| node.gpus[g].name.clone()).unwrap_or_default(),
            rails,
            cpus,
        });
    }
    Ok(out)
}
