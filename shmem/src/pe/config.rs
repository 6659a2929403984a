//! Configuration: the transport policy and the `GDA_SHMEM_*` variables.

use std::time::Duration;

use crate::error::{Result, ShmemError};
use crate::memory::HeapPlacement;

/// Which transport reaches which PE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportPolicy {
    /// P2P for PEs on the same host, RDMA for the others.
    Auto,
    /// RDMA through the provider for every other PE.
    Rdma,
    /// P2P for every PE (all must share the host).
    P2p,
}

impl std::str::FromStr for TransportPolicy {
    type Err = ShmemError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "" | "auto" => Ok(Self::Auto),
            "rdma" => Ok(Self::Rdma),
            "p2p" => Ok(Self::P2p),
            o => Err(ShmemError::Config(format!(
                "GDA_SHMEM_TRANSPORT={o:?}: expected auto, rdma or p2p"
            ))),
        }
    }
}

/// Configuration (defaults, or [`Config::from_env`]).
#[derive(Clone, Debug)]
pub struct Config {
    /// Symmetric heap bytes per PE (`GDA_SHMEM_HEAP_SIZE`, suffixes K/M/G; default 64 MiB).
    pub heap_size: usize,
    /// Transport choice (`GDA_SHMEM_TRANSPORT=auto|rdma|p2p`).
    pub transport: TransportPolicy,
    /// Bound of every wait (`GDA_SHMEM_TIMEOUT_MS`; default 30 s).
    pub timeout: Duration,
    /// Pretend the PEs are spread round-robin over this many hosts (`GDA_SHMEM_HOSTS`), so one
    /// machine can run the mixed P2P/RDMA configuration of a cluster.
    pub hosts: Option<u32>,
    /// Where the symmetric heap lives (`GDA_SHMEM_HEAP=host|gpu`; default host).
    pub heap: HeapPlacement,
    /// The GPU of a GPU heap (`GDA_SHMEM_GPU`; default the PE's local rank — its rank among
    /// the PEs of its node, [`Config::local_rank`] — modulo the GPUs this process sees).
    pub gpu: Option<u32>,
    /// This PE's rank among the PEs of its node, which picks its GPU: set by the launchers
    /// from their local-rank variables (`crate::boot::env::Launch::local_rank`), not read
    /// from the environment here. `None`: the PE's rank (one node).
    pub local_rank: Option<u32>,
    /// Memory of this process to make symmetric besides the heap: the program's global and
    /// static variables ([`StaticRange::executable`](crate::StaticRange::executable); the
    /// OpenSHMEM C library sets it). `None` (the default): only the heap is symmetric. Every
    /// PE must give a range of the same length.
    pub static_data: Option<crate::StaticRange>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            heap_size: 64 << 20,
            transport: TransportPolicy::Auto,
            timeout: Duration::from_secs(30),
            hosts: None,
            heap: HeapPlacement::Host,
            gpu: None,
            local_rank: None,
            static_data: None,
        }
    }
}

/// Largest size [`parse_size`] accepts (1 TiB): beyond the memory of any host a PE runs on.
pub const MAX_SIZE: usize = 1 << 40;

/// Parses a size with an optional K/M/G/T suffix (binary), from 1 byte to `MAX_SIZE` (1 TiB).
pub fn parse_size(var: &str, s: &str) -> Result<usize> {
    let t = s.trim();
    let (num, mul) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u128 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n = num
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| ShmemError::Config(format!("{var}={s:?} is not a size (e.g. 64M)")))?;
    let bytes = u128::from(n) * mul;
    if bytes > MAX_SIZE as u128 {
        return Err(ShmemError::Config(format!(
            "{var}={s:?} is above the limit of 1T ({MAX_SIZE} bytes)"
        )));
    }
    Ok(bytes as usize)
}

impl Config {
    /// Defaults overridden by `GDA_SHMEM_*` variables.
    pub fn from_env() -> Result<Self> {
        let mut c = Self::default();
        if let Ok(v) = std::env::var("GDA_SHMEM_HEAP_SIZE") {
            c.heap_size = parse_size("GDA_SHMEM_HEAP_SIZE", &v)?;
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_TRANSPORT") {
            c.transport = v.parse()?;
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_TIMEOUT_MS") {
            let ms: u64 = v.trim().parse().map_err(|_| {
                ShmemError::Config(format!("GDA_SHMEM_TIMEOUT_MS={v:?} is not a number"))
            })?;
            if ms == 0 {
                // Not "no timeout" (a wait must end) and not silently 1 ms.
                return Err(ShmemError::Config(
                    "GDA_SHMEM_TIMEOUT_MS=0: every wait needs a bound of at least 1 ms \
                     (default 30000)"
                        .into(),
                ));
            }
            c.timeout = Duration::from_millis(ms);
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_HOSTS") {
            let h: u32 = v.trim().parse().ok().filter(|&h| h > 0).ok_or_else(|| {
                ShmemError::Config(format!("GDA_SHMEM_HOSTS={v:?} is not a positive number"))
            })?;
            c.hosts = Some(h);
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_HEAP") {
            c.heap = v.parse()?;
        }
        if let Ok(v) = std::env::var("GDA_SHMEM_GPU") {
            let g: u32 = v.trim().parse().map_err(|_| {
                ShmemError::Config(format!("GDA_SHMEM_GPU={v:?} is not a GPU index"))
            })?;
            c.gpu = Some(g);
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_every_suffix_and_name_the_limit() {
        assert_eq!(parse_size("V", "64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("V", " 2g ").unwrap(), 2 << 30);
        assert_eq!(parse_size("V", "1T").unwrap(), 1 << 40);
        assert_eq!(parse_size("V", "4096").unwrap(), 4096);
        for (bad, why) in [
            ("2T", "above the limit of 1T"),
            ("99999999999999999999", "is not a size"),
            ("18446744073709551615K", "above the limit"),
            ("0", "is not a size"),
            ("-1M", "is not a size"),
            ("lots", "is not a size"),
            ("", "is not a size"),
        ] {
            let e = parse_size("GDA_SHMEM_HEAP_SIZE", bad)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("GDA_SHMEM_HEAP_SIZE") && e.contains(why),
                "{bad:?}: {e}"
            );
        }
    }
}
