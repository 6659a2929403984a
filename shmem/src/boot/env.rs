//! What launchers put in the environment.
//!
//! | launcher | rank / size | local rank / size | rendezvous | job id |
//! |---|---|---|---|---|
//! | `gdarun` | `GDA_SHMEM_RANK` / `GDA_SHMEM_SIZE` | `GDA_SHMEM_LOCAL_RANK` / `_SIZE` | `GDA_SHMEM_BOOT` | `GDA_SHMEM_JOB` |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK` / `_SIZE` | `OMPI_COMM_WORLD_LOCAL_RANK` / `_SIZE` | see below | `OMPI_MCA_ess_base_jobid` |
//! | PMI (MPICH, Hydra) | `PMI_RANK` / `PMI_SIZE` | `MPI_LOCALRANKID` / `MPI_LOCALNRANKS` | see below | `PMI_KVSNAME` |
//! | Slurm `srun` | `SLURM_PROCID` / `SLURM_NTASKS` | `SLURM_LOCALID` / `SLURM_TASKS_PER_NODE` at `SLURM_NODEID` | see below | `SLURM_JOB_ID`.`SLURM_STEP_ID` |
//! | `torchrun` | `RANK` / `WORLD_SIZE` | `LOCAL_RANK` / `LOCAL_WORLD_SIZE` | `MASTER_ADDR`:`MASTER_PORT` + 1 | `TORCHELASTIC_RUN_ID` |
//!
//! Without a local rank the job is taken to be one node (local rank = rank); a local rank
//! without its size means at least that many PEs on the node.
//!
//! The rendezvous address is `GDA_SHMEM_BOOT` when set (any launcher); otherwise torchrun's
//! master address with the port after `MASTER_PORT` (torchrun's own store holds that one), else
//! loopback on a port derived from the job id. It is bound on loopback unless an address says
//! otherwise.
//!
//! The job secret is `GDA_SHMEM_SECRET` (hex; `gdarun` makes a random one per job). Other
//! launchers do not carry one, so rank 0 creates a random secret in a file only the user can
//! read (`$XDG_RUNTIME_DIR/gda/<job>.secret`, else `/tmp/gda-<uid>/<job>.secret`) and the other
//! ranks read it: this covers one host and hosts sharing that directory; multi-host jobs
//! without a shared directory set `GDA_SHMEM_SECRET` themselves.

use super::secret::{Secret, secret_dir, write_secret};
use super::tcp::Meet;
use crate::error::{Result, ShmemError};
use std::net::SocketAddr;

/// A process PE's launch parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// This PE.
    pub rank: u32,
    /// Number of PEs.
    pub size: u32,
    /// Where rank 0 listens: the launcher's address, or (no launcher variable names one) a
    /// loopback port derived from the job secret ([`Meet::KeyedPort`]).
    pub addr: Meet,
    /// Job id (`[A-Za-z0-9_.]`).
    pub job: String,
    /// The job secret, when the launcher passed one (else it comes from the secret file).
    pub secret: Option<Vec<u8>>,
    /// Which launcher the variables came from.
    pub launcher: &'static str,
    /// This PE among the PEs of its node (what picks its GPU and NICs): the launcher's local
    /// rank (each launcher's own variables, in this module's table), else `rank` (one node).
    pub local_rank: u32,
    /// PEs on this node: the launcher's local size, else `size`.
    pub local_size: u32,
}

/// Each launcher's local rank and local size variables: `gdarun`'s own, Open MPI's, MPICH
/// Hydra's, Slurm's (the size from `SLURM_TASKS_PER_NODE` and `SLURM_NODEID`) and torchrun's.
const fn local_vars(launcher: &str) -> (&'static str, &'static str) {
    match launcher.as_bytes() {
        b"gdarun" => ("GDA_SHMEM_LOCAL_RANK", "GDA_SHMEM_LOCAL_SIZE"),
        b"mpirun" => ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
        b"pmi" => ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        b"srun" => ("SLURM_LOCALID", "SLURM_TASKS_PER_NODE"),
        _ => ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    }
}

/// Slurm's `SLURM_TASKS_PER_NODE` (`4(x2),3`: tasks on each node of the step, runs
/// compressed) at node `node`.
fn slurm_tasks_on(v: &str, node: u32) -> Option<u32> {
    let mut i = 0u32;
    for part in v.split(',').map(str::trim) {
        let (n, times) = match part.split_once("(x") {
            Some((n, t)) => (n, t.strip_suffix(')')?.parse::<u32>().ok()?),
            None => (part, 1),
        };
        let n: u32 = n.parse().ok()?;
        if node < i.checked_add(times)? {
            return Some(n);
        }
        i += times;
    }
    None
}

fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    if t.is_empty() { "job".into() } else { t }
}

fn parse_u32(var: &str, v: &str) -> Result<u32> {
    v.trim()
        .parse()
        .map_err(|_| ShmemError::Config(format!("{var}={v:?} is not a number")))
}

impl Launch {
    /// One PE on its own: a program started without a launcher (`./a.out`) runs as PE 0 of 1,
    /// as OpenSHMEM implementations run it — a job id of its own (so its shared-memory names
    /// are nobody else's) and a fresh secret, no rendezvous.
    pub fn singleton() -> Self {
        let tag: [u8; 6] = rand::random();
        Self {
            rank: 0,
            size: 1,
            addr: Meet::KeyedPort(std::net::Ipv4Addr::LOCALHOST.into()),
            job: format!("solo{}x{}", std::process::id(), hex::encode(tag)),
            secret: Some(rand::random::<[u8; 32]>().to_vec()),
            launcher: "none",
            local_rank: 0,
            local_size: 1,
        }
    }

    /// Reads the environment of this process.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads launch parameters through `get` (a variable lookup); `None` if no launcher is
    /// recognised.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let pairs: [(&str, &str, &str, &'static str); 5] = [
            (
                "GDA_SHMEM_RANK",
                "GDA_SHMEM_SIZE",
                "GDA_SHMEM_JOB",
                "gdarun",
            ),
            (
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_MCA_ess_base_jobid",
                "mpirun",
            ),
            ("PMI_RANK", "PMI_SIZE", "PMI_KVSNAME", "pmi"),
            ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "srun"),
            ("RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "torchrun"),
        ];
        let Some((rank, size, job, launcher)) = pairs
            .iter()
            .find_map(|&(r, s, j, l)| Some((get(r).map(|v| (r, v))?, (s, get(s)), (j, get(j)), l)))
        else {
            // A launcher's size without its rank is a half-set environment, not "no launcher"
            // (the generic ones — SLURM_NTASKS in an salloc shell, WORLD_SIZE — are left alone).
            for (r, s) in [
                ("GDA_SHMEM_RANK", "GDA_SHMEM_SIZE"),
                ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                ("PMI_RANK", "PMI_SIZE"),
            ] {
                if get(s).is_some() {
                    return Err(ShmemError::Config(format!("{s} is set but {r} is not")));
                }
            }
            return Ok(None);
        };
        let (rvar, rv) = rank;
        let r = parse_u32(rvar, &rv)?;
        let (svar, sv) = size;
        let sv =
            sv.ok_or_else(|| ShmemError::Config(format!("{rvar} is set but {svar} is not")))?;
        let n = parse_u32(svar, &sv)?;
        if n == 0 || r >= n {
            return Err(ShmemError::Config(format!(
                "{rvar}={r} is not below {svar}={n}"
            )));
        }
        let mut job_id = job.1.clone().unwrap_or_default();
        if launcher == "srun" {
            if let Some(step) = get("SLURM_STEP_ID") {
                job_id = format!("{job_id}.{step}");
            }
        }
        if job_id.is_empty() {
            // torchrun without a run id, PMI without a KVS name: the rendezvous point names the job.
            job_id = get("MASTER_PORT")
                .or_else(|| get("GDA_SHMEM_BOOT"))
                .unwrap_or_else(|| "0".into());
        }
        let job = get("GDA_SHMEM_JOB").map_or_else(
            || format!("{launcher}{}", sanitize(&job_id)),
            |j| sanitize(&j),
        );
        let addr = if let Some(b) = get("GDA_SHMEM_BOOT") {
            Meet::At(parse_addr("GDA_SHMEM_BOOT", &b)?)
        } else if let (Some(a), Some(p)) = (get("MASTER_ADDR"), get("MASTER_PORT")) {
            let port: u16 = p
                .trim()
                .parse()
                .map_err(|_| ShmemError::Config(format!("MASTER_PORT={p:?} is not a port")))?;
            let host = if a.contains(':') {
                format!("[{a}]")
            } else {
                a.clone()
            };
            Meet::At(parse_addr(
                "MASTER_ADDR",
                &format!("{host}:{}", port.wrapping_add(1).max(1024)),
            )?)
        } else {
            // The port comes from the job secret once it is known.
            Meet::KeyedPort(std::net::Ipv4Addr::LOCALHOST.into())
        };
        let secret = match get("GDA_SHMEM_SECRET") {
            Some(s) => Some(
                hex::decode(s.trim())
                    .map_err(|_| ShmemError::Config("GDA_SHMEM_SECRET must be hex".into()))?,
            ),
            None => None,
        };
        let (lrvar, lsvar) = local_vars(launcher);
        let (local_rank, local_size) = match get(lrvar) {
            None => (r, n),
            Some(lv) => {
                let lr = parse_u32(lrvar, &lv)?;
                let ls = match get(lsvar) {
                    Some(sv) if launcher == "srun" => {
                        let node =
                            get("SLURM_NODEID").map_or(Ok(0), |v| parse_u32("SLURM_NODEID", &v))?;
                        slurm_tasks_on(&sv, node).ok_or_else(|| {
                            ShmemError::Config(format!(
                                "{lsvar}={sv:?} says nothing of node {node} (SLURM_NODEID)"
                            ))
                        })?
                    }
                    Some(sv) => parse_u32(lsvar, &sv)?,
                    // The local size unknown: at least this many PEs share the node.
                    None => lr + 1,
                };
                if ls == 0 || lr >= ls || ls > n {
                    return Err(ShmemError::Config(format!(
                        "{lrvar}={lr} with a local size of {ls} ({lsvar}) in a job of {n} PEs"
                    )));
                }
                (lr, ls)
            }
        };
        Ok(Some(Self {
            rank: r,
            size: n,
            addr,
            job,
            secret,
            launcher,
            local_rank,
            local_size,
        }))
    }

    /// Where this PE's job secret comes from: the launcher's, else the per-user secret file
    /// (rank 0 writes a fresh one, replacing any stale file of an earlier job with this id;
    /// the other ranks read it and re-read it while it is not rank 0's, see
    /// [`super::tcp`]). The directory and the file are checked first
    /// ([`secret_dir`]).
    pub fn secret_source(&self) -> Result<Secret> {
        if let Some(s) = &self.secret {
            return Ok(Secret::Known(s.clone()));
        }
        let path = secret_dir()?.join(format!("{}.secret", self.job));
        if self.rank == 0 {
            write_secret(&path).map(Secret::Known)
        } else {
            Ok(Secret::File(path))
        }
    }

    /// Rank 0, once everyone has joined: removes the secret file (if one was used), so nothing
    /// of the job stays behind.
    pub fn forget_secret(&self) {
        if self.rank == 0 && self.secret.is_none() {
            if let Ok(d) = secret_dir() {
                let _ = std::fs::remove_file(d.join(format!("{}.secret", self.job)));
            }
        }
    }
}

fn parse_addr(var: &str, v: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    v.trim()
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| ShmemError::Config(format!("{var}={v:?} is not a host:port address")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        Launch::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn every_launcher_is_recognised() {
        let l = launch(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_MCA_ess_base_jobid", "77"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.rank, l.size, l.launcher, l.job.as_str()),
            (2, 4, "mpirun", "mpirun77")
        );
        assert!(
            matches!(l.addr, Meet::KeyedPort(ip) if ip.is_loopback()),
            "{:?}",
            l.addr
        );
        let l = launch(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")])
            .unwrap()
            .unwrap();
        assert_eq!((l.rank, l.size, l.launcher), (0, 2, "pmi"));
        let l = launch(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_JOB_ID", "123"),
            ("SLURM_STEP_ID", "4"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((l.rank, l.size, l.job.as_str()), (3, 8, "srun123.4"));
        let l = launch(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.launcher, l.addr),
            ("torchrun", Meet::At("127.0.0.1:29501".parse().unwrap()))
        );
        let l = launch(&[
            ("GDA_SHMEM_RANK", "1"),
            ("GDA_SHMEM_SIZE", "2"),
            ("GDA_SHMEM_JOB", "j1"),
            ("GDA_SHMEM_BOOT", "127.0.0.1:4000"),
            ("GDA_SHMEM_SECRET", "00ff"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.launcher, l.job.as_str(), l.addr, l.secret),
            (
                "gdarun",
                "j1",
                Meet::At("127.0.0.1:4000".parse().unwrap()),
                Some(vec![0, 255])
            )
        );
        assert_eq!(launch(&[]).unwrap(), None);
    }

    /// Each launcher's local rank and size (issue 46: a PE's GPU and NICs follow its local
    /// rank, not its global one); without them, the job is one node.
    #[test]
    fn every_launcher_gives_its_local_rank() {
        type Vars<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Vars<'_>, (u32, u32)); 7] = [
            (
                &[
                    ("GDA_SHMEM_RANK", "5"),
                    ("GDA_SHMEM_SIZE", "8"),
                    ("GDA_SHMEM_LOCAL_RANK", "1"),
                    ("GDA_SHMEM_LOCAL_SIZE", "4"),
                ],
                (1, 4),
            ),
            (
                &[
                    ("OMPI_COMM_WORLD_RANK", "9"),
                    ("OMPI_COMM_WORLD_SIZE", "16"),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
                    ("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
                ],
                (1, 8),
            ),
            (
                &[
                    ("PMI_RANK", "3"),
                    ("PMI_SIZE", "4"),
                    ("MPI_LOCALRANKID", "1"),
                    ("MPI_LOCALNRANKS", "2"),
                ],
                (1, 2),
            ),
            (
                &[
                    ("SLURM_PROCID", "10"),
                    ("SLURM_NTASKS", "11"),
                    ("SLURM_LOCALID", "2"),
                    ("SLURM_TASKS_PER_NODE", "4(x2),3"),
                    ("SLURM_NODEID", "2"),
                ],
                (2, 3),
            ),
            (
                &[
                    ("RANK", "6"),
                    ("WORLD_SIZE", "8"),
                    ("LOCAL_RANK", "2"),
                    ("LOCAL_WORLD_SIZE", "4"),
                ],
                (2, 4),
            ),
            // No local variables: one node.
            (&[("PMI_RANK", "3"), ("PMI_SIZE", "4")], (3, 4)),
            // A local rank without its size: at least that many on the node.
            (
                &[("RANK", "6"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "2")],
                (2, 3),
            ),
        ];
        let mut checked = 0;
        for (vars, want) in cases {
            let l = launch(vars).unwrap().unwrap();
            assert_eq!((l.local_rank, l.local_size), want, "{vars:?}");
            checked += 1;
        }
        assert_eq!(checked, 7);
        for (vars, want) in [
            (
                &[
                    ("RANK", "1"),
                    ("WORLD_SIZE", "4"),
                    ("LOCAL_RANK", "4"),
                    ("LOCAL_WORLD_SIZE", "4"),
                ][..],
                "LOCAL_RANK=4 with a local size of 4",
            ),
            (
                &[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "x")][..],
                "LOCAL_RANK=\"x\" is not a number",
            ),
            (
                &[
                    ("RANK", "1"),
                    ("WORLD_SIZE", "4"),
                    ("LOCAL_RANK", "0"),
                    ("LOCAL_WORLD_SIZE", "9"),
                ][..],
                "in a job of 4 PEs",
            ),
            (
                &[
                    ("SLURM_PROCID", "1"),
                    ("SLURM_NTASKS", "4"),
                    ("SLURM_LOCALID", "0"),
                    ("SLURM_TASKS_PER_NODE", "2(x2)"),
                    ("SLURM_NODEID", "5"),
                ][..],
                "says nothing of node 5",
            ),
        ] {
            let e = launch(vars).unwrap_err().to_string();
            assert!(e.contains(want), "{vars:?}: {e}");
        }
    }

    #[test]
    fn a_program_without_a_launcher_is_one_pe_of_its_own() {
        let (a, b) = (Launch::singleton(), Launch::singleton());
        assert_eq!((a.rank, a.size, a.launcher), (0, 1, "none"));
        assert_ne!(a.job, b.job, "each run a job of its own");
        assert_ne!(a.secret, b.secret);
        assert!(
            a.job
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'),
            "{}",
            a.job
        );
        assert_eq!(Launch::from_vars(|_| None).unwrap(), None);
    }

    #[test]
    fn bad_variables_are_clear_errors() {
        for (vars, needle) in [
            (&[("PMI_RANK", "x"), ("PMI_SIZE", "2")][..], "PMI_RANK"),
            (&[("PMI_RANK", "2"), ("PMI_SIZE", "2")][..], "not below"),
            (&[("PMI_RANK", "0")][..], "PMI_SIZE"),
            // Half-set the other way: a size without its rank is not "no launcher".
            (&[("GDA_SHMEM_SIZE", "2")][..], "GDA_SHMEM_RANK is not"),
            (&[("OMPI_COMM_WORLD_SIZE", "4")][..], "OMPI_COMM_WORLD_RANK"),
            (
                &[
                    ("RANK", "0"),
                    ("WORLD_SIZE", "2"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "http"),
                ][..],
                "MASTER_PORT",
            ),
            (
                &[
                    ("PMI_RANK", "0"),
                    ("PMI_SIZE", "1"),
                    ("GDA_SHMEM_SECRET", "zz"),
                ][..],
                "hex",
            ),
            (
                &[
                    ("PMI_RANK", "0"),
                    ("PMI_SIZE", "1"),
                    ("GDA_SHMEM_BOOT", "nowhere"),
                ][..],
                "GDA_SHMEM_BOOT",
            ),
        ] {
            let e = launch(vars).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}
