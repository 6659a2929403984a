//! A node as gda sees it, read from hwloc's XML: its GPUs, RDMA NICs and NUMA nodes, where each
//! sits, and the PCIe path between a GPU and a NIC.

use std::fmt;

/// Why an XML topology could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct XmlError(pub String);

/// A PCI address, `domain:bus:device.function`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddr {
    /// Domain.
    pub domain: u32,
    /// Bus.
    pub bus: u8,
    /// Device.
    pub dev: u8,
    /// Function.
    pub func: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.dev, self.func
        )
    }
}

impl std::str::FromStr for PciAddr {
    type Err = String;

    /// `0000:18:00.0`, or `18:00.0` (domain 0); case-insensitive.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("{s:?} is not a PCI address (domain:bus:device.function, e.g. 0000:18:00.0)")
        };
        let t = s.trim();
        let (rest, func) = t.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, dev) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        let hex = |x: &str, max: u32| {
            u32::from_str_radix(x, 16)
                .ok()
                .filter(|&v| v <= max && !x.is_empty())
                .ok_or_else(bad)
        };
        Ok(Self {
            domain: hex(domain, u32::MAX)?,
            bus: hex(bus, 0xff)? as u8,
            dev: hex(dev, 0x1f)? as u8,
            func: hex(func, 7)? as u8,
        })
    }
}

/// The PCIe path between two devices, in `nvidia-smi topo -m`'s and NCCL's terms, nearest
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Path {
    /// Through at most one PCIe switch (one bridge level on each side).
    #[serde(rename = "PIX")]
    Pix,
    /// Through several PCIe bridges, without the host bridge.
    #[serde(rename = "PXB")]
    Pxb,
    /// Through a PCIe host bridge (the CPU's root complex).
    #[serde(rename = "PHB")]
    Phb,
    /// Between host bridges of one NUMA node.
    #[serde(rename = "NODE")]
    Node,
    /// Across the interconnect between NUMA nodes (sockets).
    #[serde(rename = "SYS")]
    Sys,
}

impl Path {
    /// Its name (`PIX`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Pix => "PIX",
            Self::Pxb => "PXB",
            Self::Phb => "PHB",
            Self::Node => "NODE",
            Self::Sys => "SYS",
        }
    }

    /// What each name means, one line each (for a legend).
    pub const LEGEND: &'static str = "PIX  = through at most one PCIe switch\n\
        PXB  = through several PCIe bridges, not the host bridge\n\
        PHB  = through a PCIe host bridge (the CPU)\n\
        NODE = between PCIe host bridges of one NUMA node\n\
        SYS  = across the interconnect between NUMA nodes (sockets)";
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A GPU of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// Its PCI address (what HIP's and CUDA's bus id is matched against).
    pub addr: PciAddr,
    /// hwloc's OS-device name (`cuda0`, `rsmi0`, `nvml0`), or empty when hwloc names none.
    pub name: String,
    /// PCI vendor and device ids.
    pub ids: (u16, u16),
    /// The NUMA node it is attached to, when one.
    pub numa: Option<u32>,
    /// The CPUs near it (its NUMA node's, or its package's), sorted.
    pub cpus: Vec<usize>,
    obj: usize,
}

/// An RDMA NIC of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nic {
    /// Its RDMA device name as rdma-core and hwloc report it (`mlx5_3`, `bnxt_re0`).
    pub name: String,
    /// Its PCI address.
    pub addr: PciAddr,
    /// PCI vendor and device ids.
    pub ids: (u16, u16),
    /// Its network interfaces (`ibp24s0`, `ens13f0np0`).
    pub netdevs: Vec<String>,
    /// The NUMA node it is attached to, when one.
    pub numa: Option<u32>,
    /// The CPUs near it, sorted.
    pub cpus: Vec<usize>,
    obj: usize,
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numa {
    /// Its number (the kernel's).
    pub index: u32,
    /// Its CPUs, sorted.
    pub cpus: Vec<usize>,
}

#[derive(Clone, Debug)]
struct Obj {
    parent: Option<usize>,
    kind: Kind,
    /// The NUMA nodes of the nearest non-I/O ancestor (itself if not I/O).
    nodes: Vec<u32>,
    cpus: Vec<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Machine, Package, Group, Core…: not I/O.
    Cpu,
    HostBridge,
    PciBridge,
    PciDev,
    OsDev,
}

/// The node: its GPUs and RDMA NICs in PCI-address order, its NUMA nodes, and the PCI tree
/// between them.
#[derive(Clone, Debug)]
pub struct Node {
    /// The machine's host name as hwloc recorded it, when it did.
    pub host: Option<String>,
    /// Packages (sockets).
    pub packages: usize,
    /// NUMA nodes, by number.
    pub numa: Vec<Numa>,
    /// GPUs, by PCI address.
    pub gpus: Vec<Gpu>,
    /// RDMA NICs, by PCI address.
    pub nics: Vec<Nic>,
    /// Every CPU of the node, sorted.
    pub cpus: Vec<usize>,
    objs: Vec<Obj>,
}

/// Reads an hwloc bitmap (`0x000000ff`, `0x00000001,0x00000000`: 32-bit words, most
/// significant first) as sorted bit numbers; an infinite set (`0xf...f`) reads as its finite
/// words.
fn bitmap(s: &str) -> Vec<usize> {
    let words: Vec<&str> = s.split(',').collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        let w = w.trim().trim_start_matches("0x");
        let Ok(v) = u32::from_str_radix(w, 16) else {
            continue;
        };
        out.extend((0..32).filter(|b| v >> b & 1 == 1).map(|b| i * 32 + b));
    }
    out
}

/// `pci_type="0302 [10de:2330] [10de:16c1] a1"`: class, vendor, device.
fn pci_type(s: &str) -> Option<(u16, u16, u16)> {
    let mut it = s.split_whitespace();
    let class = u16::from_str_radix(it.next()?, 16).ok()?;
    let ids = it.next()?.trim_matches(|c| c == '[' || c == ']');
    let (v, d) = ids.split_once(':')?;
    Some((
        class,
        u16::from_str_radix(v, 16).ok()?,
        u16::from_str_radix(d, 16).ok()?,
    ))
}

/// PCI vendors whose display or accelerator functions are GPUs gda can drive (a server's BMC
/// also shows a display function: ASPEED's, which is not one).
const GPU_VENDORS: [u16; 2] = [0x10de, 0x1002];

/// hwloc's OS-device type of an RDMA device (`HWLOC_OBJ_OSDEV_OPENFABRICS` in hwloc 2.x).
const OSDEV_OPENFABRICS: &str = "3";
/// hwloc's OS-device type of a network interface.
const OSDEV_NETWORK: &str = "2";

impl Node {
    /// Reads hwloc's XML export (what [`crate::hwloc::export`] returns, or `lstopo --of xml`
    /// writes).
    ///
    /// # Errors
    /// Not XML, or not an hwloc 2.x topology.
    pub fn from_xml(xml: &str) -> Result<Self, XmlError> {
        let doc = roxmltree::Document::parse_with_options(
            xml,
            roxmltree::ParsingOptions {
                allow_dtd: true,
                ..roxmltree::ParsingOptions::default()
            },
        )
        .map_err(|e| XmlError(format!("not XML: {e}")))?;
        let root = doc.root_element();
        if root.tag_name().name() != "topology" {
            return Err(XmlError(format!(
                "not an hwloc topology (root element <{}>)",
                root.tag_name().name()
            )));
        }
        let Some(machine) = root.children().find(|n| n.has_tag_name("object")) else {
            return Err(XmlError("an hwloc topology without objects".into()));
        };
        let mut node = Self {
            host: None,
            packages: 0,
            numa: Vec::new(),
            gpus: Vec::new(),
            nics: Vec::new(),
            cpus: machine.attribute("cpuset").map(bitmap).unwrap_or_default(),
            objs: Vec::new(),
        };
        node.host = machine
            .children()
            .find(|c| c.has_tag_name("info") && c.attribute("name") == Some("HostName"))
            .and_then(|c| c.attribute("value"))
            .map(str::to_string);
        // Depth-first, parents before children; explicit stack (no recursion on input).
        let mut stack = vec![(machine, None::<usize>)];
        let mut pcidevs: Vec<(usize, roxmltree::Node<'_, '_>)> = Vec::new();
        while let Some((el, parent)) = stack.pop() {
            let ty = el.attribute("type").unwrap_or("");
            let kind = match ty {
                "Bridge"
                    if el
                        .attribute("bridge_type")
                        .is_some_and(|b| b.starts_with("0-")) =>
                {
                    Kind::HostBridge
                }
                "Bridge" => Kind::PciBridge,
                "PCIDev" => Kind::PciDev,
                "OSDev" => Kind::OsDev,
                _ => Kind::Cpu,
            };
            let (nodes, cpus) = match (kind, parent) {
                (Kind::Cpu, _) => (
                    el.attribute("nodeset")
                        .map(bitmap)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|n| n as u32)
                        .collect(),
                    el.attribute("cpuset").map(bitmap).unwrap_or_default(),
                ),
                (_, Some(p)) => (node.objs[p].nodes.clone(), node.objs[p].cpus.clone()),
                (_, None) => (Vec::new(), Vec::new()),
            };
            let me = node.objs.len();
            node.objs.push(Obj {
                parent,
                kind,
                nodes,
                cpus,
            });
            match ty {
                "Package" => node.packages += 1,
                "NUMANode" => {
                    let index = el
                        .attribute("os_index")
                        .and_then(|i| i.parse().ok())
                        .ok_or_else(|| XmlError("a NUMANode without os_index".into()))?;
                    node.numa.push(Numa {
                        index,
                        cpus: el.attribute("cpuset").map(bitmap).unwrap_or_default(),
                    });
                }
                "PCIDev" => pcidevs.push((me, el)),
                _ => {}
            }
            let kids: Vec<_> = el.children().filter(|c| c.has_tag_name("object")).collect();
            stack.extend(kids.into_iter().rev().map(|c| (c, Some(me))));
        }
        for (obj, el) in pcidevs {
            let Some(addr) = el.attribute("pci_busid").and_then(|b| b.parse().ok()) else {
                continue;
            };
            let Some((class, vendor, device)) = el.attribute("pci_type").and_then(pci_type) else {
                continue;
            };
            let osdevs: Vec<_> = el
                .children()
                .filter(|c| c.has_tag_name("object") && c.attribute("type") == Some("OSDev"))
                .collect();
            let o = &node.objs[obj];
            let numa = (o.nodes.len() == 1).then(|| o.nodes[0]);
            let cpus = o.cpus.clone();
            let base = class >> 8;
            if GPU_VENDORS.contains(&vendor) && (base == 0x03 || base == 0x12) {
                let name = osdevs
                    .iter()
                    .filter(|d| d.attribute("subtype").is_some())
                    .find_map(|d| d.attribute("name"))
                    .unwrap_or("")
                    .to_string();
                node.gpus.push(Gpu {
                    addr,
                    name,
                    ids: (vendor, device),
                    numa,
                    cpus,
                    obj,
                });
                continue;
            }
            let netdevs: Vec<String> = osdevs
                .iter()
                .filter(|d| d.attribute("osdev_type") == Some(OSDEV_NETWORK))
                .filter_map(|d| d.attribute("name").map(str::to_string))
                .collect();
            for d in &osdevs {
                if d.attribute("osdev_type") == Some(OSDEV_OPENFABRICS)
                    && let Some(name) = d.attribute("name")
                {
                    node.nics.push(Nic {
                        name: name.to_string(),
                        addr,
                        ids: (vendor, device),
                        netdevs: netdevs.clone(),
                        numa,
                        cpus: cpus.clone(),
                        obj,
                    });
                }
            }
        }
        node.gpus.sort_by_key(|g| g.addr);
        node.nics
            .sort_by(|a, b| (a.addr, &a.name).cmp(&(b.addr, &b.name)));
        node.numa.sort_by_key(|n| n.index);
        Ok(node)
    }

    /// A node known only by its RDMA devices' names (no hwloc): no GPU, no locality.
    #[must_use]
    pub fn flat(nics: &[String]) -> Self {
        let mut n = Self {
            host: None,
            packages: 0,
            numa: Vec::new(),
            gpus: Vec::new(),
            nics: Vec::new(),
            cpus: Vec::new(),
            objs: Vec::new(),
        };
        n.add_unplaced(nics);
        n
    }

    /// Adds RDMA devices the topology does not show (rdma-core lists them, hwloc does not: a
    /// software device, or hwloc without its OpenFabrics support), with no locality: every
    /// path to them is `SYS`.
    pub fn add_unplaced(&mut self, names: &[String]) {
        let start = self.nics.len();
        for (i, n) in names.iter().enumerate() {
            if self.nics.iter().any(|x| x.name == *n) {
                continue;
            }
            self.nics.push(Nic {
                name: n.clone(),
                addr: PciAddr {
                    domain: 0,
                    bus: 0,
                    dev: 0,
                    func: 0,
                },
                ids: (0, 0),
                netdevs: Vec::new(),
                numa: None,
                cpus: Vec::new(),
                obj: usize::MAX - start - i,
            });
        }
    }

    /// Whether the node's locality is known (read from hwloc), not just its NIC names.
    #[must_use]
    pub fn has_locality(&self) -> bool {
        !self.objs.is_empty()
    }

    /// The ancestors of object `o`, itself first.
    fn chain(&self, o: usize) -> Vec<usize> {
        let mut v = vec![o];
        let mut cur = o;
        while let Some(p) = self.objs.get(cur).and_then(|x| x.parent) {
            v.push(p);
            cur = p;
        }
        v
    }

    /// The path between two PCI devices (objects), by their nearest common ancestor.
    fn path_between(&self, a: usize, b: usize) -> Path {
        if !self.has_locality() {
            return Path::Sys;
        }
        let (ca, cb) = (self.chain(a), self.chain(b));
        let Some((ia, common)) = ca.iter().enumerate().find(|(_, x)| cb.contains(x)) else {
            return Path::Sys;
        };
        let ib = cb.iter().position(|x| x == common).unwrap_or(usize::MAX);
        match self.objs[*common].kind {
            // Both behind one switch: each at most one bridge level below it.
            Kind::PciBridge | Kind::PciDev | Kind::OsDev if ia <= 2 && ib <= 2 => Path::Pix,
            Kind::PciBridge | Kind::PciDev | Kind::OsDev => Path::Pxb,
            Kind::HostBridge => Path::Phb,
            Kind::Cpu => {
                let (na, nb) = (&self.objs[a].nodes, &self.objs[b].nodes);
                if na.len() == 1 && na == nb {
                    Path::Node
                } else {
                    Path::Sys
                }
            }
        }
    }

    /// The path between GPU `g` and NIC `n` (indices into [`Node::gpus`] and
    /// [`Node::nics`]).
    #[must_use]
    pub fn gpu_nic_path(&self, g: usize, n: usize) -> Path {
        match (self.gpus.get(g), self.nics.get(n)) {
            (Some(g), Some(n)) => self.path_between(g.obj, n.obj),
            _ => Path::Sys,
        }
    }

    /// The path between NUMA node `numa` (its CPUs) and NIC `n`: `NODE` when the NIC is
    /// attached to it, else `SYS`.
    #[must_use]
    pub fn numa_nic_path(&self, numa: Option<u32>, n: usize) -> Path {
        match (numa, self.nics.get(n).and_then(|n| n.numa)) {
            (Some(a), Some(b)) if a == b => Path::Node,
            _ => Path::Sys,
        }
    }
}
