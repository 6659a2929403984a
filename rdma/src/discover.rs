//! Device discovery: the NICs rdma-core sees, as [`DeviceInfo`].

use std::ffi::{CStr, c_int};

use gda_hal::control::{DeviceInfo, Gid, GidEntry, GidType, LinkLayer, Mtu, PortInfo, PortState};
use ibverbs_sys as sys;

use crate::load::Verbs;

/// Discovery failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// `ibv_get_device_list` failed.
    #[error("ibv_get_device_list failed: {0}")]
    List(std::io::Error),
    /// `GDA_RDMA_DEVICES` is malformed.
    #[error("{0}")]
    Config(String),
    /// A device could not be opened or queried.
    #[error("{device}: {call} failed: {source}")]
    Query {
        /// The device.
        device: String,
        /// The call.
        call: &'static str,
        /// The errno.
        source: std::io::Error,
    },
}

impl gda_hal::Error for DiscoverError {
    fn kind(&self) -> gda_hal::ErrorKind {
        gda_hal::ErrorKind::NoDevice
    }
}

fn errno(r: c_int) -> std::io::Error {
    if r > 0 {
        std::io::Error::from_raw_os_error(r)
    } else {
        std::io::Error::last_os_error()
    }
}

/// An open device context, closed on drop.
struct Open<'a> {
    verbs: &'a Verbs,
    ctx: *mut sys::ibv_context,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        // SAFETY: a context this value opened and nothing else uses.
        unsafe { (self.verbs.fns().close_device)(self.ctx) };
    }
}

impl Verbs {
    /// The NICs rdma-core lists, in its order; `GDA_RDMA_DEVICES` keeps those it names
    /// (`mlx5_0,mlx5_3`) or leaves out those it names after a `^` (`^mlx5_1`), as
    /// `gda_topo::DeviceList` reads it.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>, DiscoverError> {
        let keep = gda_topo::DeviceList::parse(
            &std::env::var("GDA_RDMA_DEVICES").unwrap_or_default(),
            "GDA_RDMA_DEVICES",
        )
        .map_err(|e| DiscoverError::Config(e.to_string()))?;
        let f = self.fns();
        let mut n: c_int = 0;
        // SAFETY: rdma-core's ibv_get_device_list with a valid out pointer.
        let list = unsafe { (f.get_device_list)(&mut n) };
        if list.is_null() {
            let e = std::io::Error::last_os_error();
            // ENOSYS: the kernel has no RDMA support (no uverbs), i.e. no devices — not a failure.
            if e.raw_os_error() == Some(libc::ENOSYS) {
                return Ok(Vec::new());
            }
            return Err(DiscoverError::List(e));
        }
        let mut out = Vec::new();
        let mut result = Ok(());
        for i in 0..n.max(0) as usize {
            // SAFETY: the list has `n` entries.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a device of the list; rdma-core returns a C string it owns.
            let name = unsafe { CStr::from_ptr((f.get_device_name)(dev)) }
                .to_string_lossy()
                .into_owned();
            if !keep.keeps(&name) {
                continue;
            }
            match self.describe(dev, &name) {
                Ok(d) => out.push(d),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // SAFETY: the list from ibv_get_device_list, freed once.
        unsafe { (f.free_device_list)(list) };
        result.map(|()| out)
    }

    fn describe(&self, dev: *mut sys::ibv_device, name: &str) -> Result<DeviceInfo, DiscoverError> {
        let f = self.fns();
        let q = |call, r: c_int| -> Result<(), DiscoverError> {
            if r == 0 {
                Ok(())
            } else {
                Err(DiscoverError::Query {
                    device: name.to_owned(),
                    call,
                    source: errno(r),
                })
            }
        };
        // SAFETY: a device of the current list.
        let ctx = unsafe { (f.open_device)(dev) };
        if ctx.is_null() {
            return Err(DiscoverError::Query {
                device: name.to_owned(),
                call: "ibv_open_device",
                source: std::io::Error::last_os_error(),
            });
        }
        let open = Open { verbs: self, ctx };
        // SAFETY: C data, all zeros valid.
        let mut a: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: an open context and a writable attr.
        q("ibv_query_device", unsafe {
            (f.query_device)(open.ctx, &mut a)
        })?;
        // SAFETY: rdma-core writes a NUL-terminated string into fw_ver.
        let fw_ver = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut ports = Vec::new();
        for port in 1..=a.phys_port_cnt {
            // SAFETY: C data; the exported ibv_query_port writes its compat prefix of it.
            let mut p: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
            // SAFETY: an open context and a struct at least as large as the compat one.
            q("ibv_query_port", unsafe {
                (f.query_port)(open.ctx, port, &mut p)
            })?;
            let link_layer = if u32::from(p.link_layer) == sys::IBV_LINK_LAYER_ETHERNET {
                LinkLayer::Ethernet
            } else {
                LinkLayer::InfiniBand
            };
            let gids = self.gids(&open, name, port, p.gid_tbl_len, link_layer);
            ports.push(PortInfo {
                port,
                state: match p.state {
                    sys::ibv_port_state::IBV_PORT_ACTIVE => PortState::Active,
                    sys::ibv_port_state::IBV_PORT_ARMED => PortState::Armed,
                    sys::ibv_port_state::IBV_PORT_INIT => PortState::Init,
                    _ => PortState::Down,
                },
                link_layer,
                max_mtu: Mtu::from_raw(p.max_mtu as u8).unwrap_or(Mtu::B1024),
                active_mtu: Mtu::from_raw(p.active_mtu as u8).unwrap_or(Mtu::B1024),
                lid: p.lid,
                pkeys: p.pkey_tbl_len,
                gids,
            });
        }
        Ok(DeviceInfo {
            name: name.to_owned(),
            // Claimed by the vendor table (`gda-providers`), which knows the vendor ids.
            provider: "unknown",
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            fw_ver,
            max_qp_wr: a.max_qp_wr.max(0) as u32,
            max_cqe: a.max_cqe.max(0) as u32,
            max_sge: a.max_sge.max(0) as u32,
            // Not reported by ibv_query_device: found when a QP is created.
            max_inline: 0,
            max_rd_atomic: a.max_qp_rd_atom.clamp(0, 255) as u8,
            ports,
        })
    }

    /// The populated GID entries of `port`, with their types: from `_ibv_query_gid_ex` when
    /// rdma-core has it, else `ibv_query_gid` with the type read from sysfs.
    fn gids(
        &self,
        open: &Open<'_>,
        name: &str,
        port: u8,
        len: c_int,
        ll: LinkLayer,
    ) -> Vec<GidEntry> {
        let f = self.fns();
        let mut out = Vec::new();
        for index in 0..len.clamp(0, 1024) as u32 {
            let entry = match f.query_gid_ex {
                Some(ex) => {
                    // SAFETY: C data.
                    let mut e: sys::ibv_gid_entry = unsafe { std::mem::zeroed() };
                    // SAFETY: an open context, a writable entry of the size passed.
                    let r = unsafe {
                        ex(
                            open.ctx,
                            u32::from(port),
                            index,
                            &mut e,
                            0,
                            size_of::<sys::ibv_gid_entry>(),
                        )
                    };
                    if r != 0 {
                        continue; // ENODATA: an empty slot
                    }
                    let kind = match e.gid_type {
                        sys::IBV_GID_TYPE_ROCE_V2 => GidType::RoceV2,
                        sys::IBV_GID_TYPE_ROCE_V1 => GidType::RoceV1,
                        _ => GidType::Ib,
                    };
                    // SAFETY: reading the GID union's bytes.
                    (Gid(unsafe { e.gid.raw }), kind)
                }
                None => {
                    // SAFETY: C data.
                    let mut g: sys::ibv_gid = unsafe { std::mem::zeroed() };
                    // SAFETY: an open context, a writable GID.
                    if unsafe { (f.query_gid)(open.ctx, port, index as c_int, &mut g) } != 0 {
                        continue;
                    }
                    // SAFETY: reading the GID union's bytes.
                    let raw = unsafe { g.raw };
                    let kind = match ll {
                        LinkLayer::InfiniBand => GidType::Ib,
                        LinkLayer::Ethernet => {
                            let t = std::fs::read_to_string(format!(
                                "/sys/class/infiniband/{name}/ports/{port}/gid_attrs/types/{index}"
                            ))
                            .unwrap_or_default();
                            if t.contains("v2") {
                                GidType::RoceV2
                            } else {
                                GidType::RoceV1
                            }
                        }
                    };
                    (Gid(raw), kind)
                }
            };
            if entry.0.0 == [0; 16] {
                continue;
            }
            out.push(GidEntry {
                index,
                gid: entry.0,
                kind: entry.1,
            });
        }
        out
    }
}
