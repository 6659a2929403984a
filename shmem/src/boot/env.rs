//! What launchers put in the environment.
//!
//! | launcher | rank / size | rendezvous | job id |
//! |---|---|---|---|
//! | `gdarun` | `GDA_SHMEM_RANK` / `GDA_SHMEM_SIZE` | `GDA_SHMEM_BOOT` | `GDA_SHMEM_JOB` |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK` / `_SIZE` | see below | `OMPI_MCA_ess_base_jobid` |
//! | PMI (MPICH, Hydra) | `PMI_RANK` / `PMI_SIZE` | see below | `PMI_KVSNAME` |
//! | Slurm `srun` | `SLURM_PROCID` / `SLURM_NTASKS` | see below | `SLURM_JOB_ID`.`SLURM_STEP_ID` |
//! | `torchrun` | `RANK` / `WORLD_SIZE` | `MASTER_ADDR`:`MASTER_PORT` + 1 | `TORCHELASTIC_RUN_ID` |
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

use super::tcp::{Meet, Secret};
use crate::error::{Result, ShmemError};
use std::net::SocketAddr;
use std::path::PathBuf;

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
        Ok(Some(Self {
            rank: r,
            size: n,
            addr,
            job,
            secret,
            launcher,
        }))
    }

    /// Where this PE's job secret comes from: the launcher's, else the per-user secret file
    /// (rank 0 writes a fresh one, replacing any stale file of an earlier job with this id;
    /// the other ranks read it and re-read it while it is not rank 0's, see
    /// [`super::tcp`]). The directory and the file are checked first ([`secret_dir`]).
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

/// What is wrong with a path another user could have prepared for us, if anything: it must be
/// of `kind`, not a symbolic link, ours (effective uid) and closed to group and others.
fn not_private(md: &std::fs::Metadata, want_dir: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let ft = md.file_type();
    if ft.is_symlink() {
        Some("is a symbolic link".into())
    } else if want_dir && !ft.is_dir() {
        Some("is not a directory".into())
    } else if !want_dir && !ft.is_file() {
        Some("is not a regular file".into())
    } else if md.uid() != me {
        Some(format!(
            "belongs to uid {}, not to this user (uid {me})",
            md.uid()
        ))
    } else if md.mode() & 0o077 != 0 {
        Some(format!(
            "has mode {:o}: group or others may use it (must be {})",
            md.mode() & 0o7777,
            if want_dir { "700" } else { "600" }
        ))
    } else {
        None
    }
}

fn refuse(path: &std::path::Path, why: &str) -> ShmemError {
    ShmemError::Config(format!(
        "refusing to use {} for the job secret: it {why}. Remove it, or point XDG_RUNTIME_DIR \
         at a private directory, or give every rank GDA_SHMEM_SECRET",
        path.display()
    ))
}

/// The per-user directory of job secrets (`$XDG_RUNTIME_DIR/gda`, else `/tmp/gda-<uid>`),
/// created `0700` if missing. An existing one is checked without following symbolic links and
/// refused unless it is a directory of ours with no group/other bits: on a shared host,
/// another user can create `/tmp/gda-<uid>` before us and plant a secret in it.
///
/// Another user's `/tmp/gda-<uid>` (or a link or file there) cannot be removed by its victim
/// (`/tmp` is sticky), so it must not stop every job: then the directory is `$HOME/.gda`,
/// which no other user can create. Every rank of the host makes the same choice.
pub fn secret_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return private_dir(PathBuf::from(d).join("gda"));
    }
    let tmp = PathBuf::from(format!("/tmp/gda-{}", rustix::process::geteuid().as_raw()));
    match private_dir(tmp.clone()) {
        Ok(d) => Ok(d),
        Err(e) if planted_by_another(&tmp) => {
            match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                Some(home) => private_dir(PathBuf::from(home).join(".gda")),
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Whether `path` is something this user can neither use nor remove: another user's, or a
/// symbolic link or non-directory in a sticky directory that is not ours.
fn planted_by_another(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|md| md.uid() != rustix::process::geteuid().as_raw())
}

/// Creates `dir` (mode 0700) unless it exists, then checks it is private to this user.
fn private_dir(dir: PathBuf) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        // The umask may have taken the owner's bits away (`umask 0277` leaves 0500, in which
        // the secret file cannot be written): set the mode itself.
        Ok(()) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| ShmemError::io(format!("setting the mode of {}", dir.display()), e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(ShmemError::io(format!("creating {}", dir.display()), e)),
    }
    let md = std::fs::symlink_metadata(&dir)
        .map_err(|e| ShmemError::io(format!("checking {}", dir.display()), e))?;
    match not_private(&md, true) {
        Some(why) => Err(refuse(&dir, &why)),
        None => Ok(dir),
    }
}

/// Writes a fresh random secret to `path` (a new file, then renamed over any stale one).
fn write_secret(path: &std::path::Path) -> Result<Vec<u8>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let secret: [u8; 32] = rand::random();
    let tmp = path.with_extension(format!("tmp{}", hex::encode(rand::random::<[u8; 8]>())));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)
        .map_err(|e| ShmemError::io(format!("creating {}", tmp.display()), e))?;
    let written = f
        .write_all(hex::encode(secret).as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(ShmemError::io(format!("writing {}", path.display()), e));
    }
    Ok(secret.to_vec())
}

/// Reads a secret file: `None` while it does not exist or does not hold a whole secret yet
/// (rank 0 has not written it); an error if it is not a private file of ours.
pub(crate) fn read_secret_file(path: &std::path::Path) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    let mut f = match f {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(refuse(path, "is a symbolic link"));
        }
        Err(e) => return Err(ShmemError::io(format!("opening {}", path.display()), e)),
    };
    let md = f
        .metadata()
        .map_err(|e| ShmemError::io(format!("checking {}", path.display()), e))?;
    if let Some(why) = not_private(&md, false) {
        return Err(refuse(path, &why));
    }
    let mut s = String::new();
    // A secret is 64 hex digits; anything longer is not one of ours.
    (&mut f)
        .take(128)
        .read_to_string(&mut s)
        .map_err(|e| ShmemError::io(format!("reading {}", path.display()), e))?;
    Ok(match s.trim() {
        t if t.len() == 64 => hex::decode(t).ok(),
        _ => None,
    })
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

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gda-env-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn planted_secret_directories_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = scratch("dirs");
        // Missing: created private.
        let d = private_dir(base.join("fresh")).unwrap();
        let mode = std::fs::metadata(&d).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // World-writable or group-readable: someone else may have planted a secret in it.
        for m in [0o777, 0o750, 0o701] {
            let d = base.join(format!("m{m:o}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(m)).unwrap();
            let e = private_dir(d.clone()).unwrap_err().to_string();
            assert!(e.contains(&d.display().to_string()), "{e}");
            assert!(e.contains(&format!("mode {m:o}")), "{e}");
        }
        // A symbolic link to a private directory is not followed.
        let link = base.join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let e = private_dir(link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // A file where the directory should be.
        std::fs::write(base.join("file"), b"x").unwrap();
        assert!(
            private_dir(base.join("file"))
                .unwrap_err()
                .to_string()
                .contains("not a directory")
        );
        // Another user's directory (needs root to plant here; otherwise say so).
        if rustix::process::geteuid().is_root() {
            let d = base.join("theirs");
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
            let e = private_dir(d).unwrap_err().to_string();
            assert!(e.contains("belongs to uid 65534"), "{e}");
        } else {
            eprintln!("SKIPPED: directory of another user (needs root to chown)");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn secret_files_are_checked() {
        use std::os::unix::fs::PermissionsExt;
        let d = private_dir(scratch("files").join("gda")).unwrap();
        let p = d.join("j.secret");
        assert_eq!(read_secret_file(&p).unwrap(), None, "missing: not yet");
        let s = write_secret(&p).unwrap();
        assert_eq!(read_secret_file(&p).unwrap(), Some(s.clone()));
        // A stale secret is replaced, never reused.
        let s2 = write_secret(&p).unwrap();
        assert_ne!(s, s2);
        assert_eq!(read_secret_file(&p).unwrap(), Some(s2));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_secret_file(&p).unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("j.secret"), "{e}");
        let link = d.join("l.secret");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = read_secret_file(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::write(d.join("g.secret"), b"not hex").unwrap();
        std::fs::set_permissions(d.join("g.secret"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        assert_eq!(read_secret_file(&d.join("g.secret")).unwrap(), None);
        std::fs::remove_dir_all(d.parent().unwrap()).unwrap();
    }

    #[test]
    fn bad_variables_are_clear_errors() {
        for (vars, needle) in [
            (&[("PMI_RANK", "x"), ("PMI_SIZE", "2")][..], "PMI_RANK"),
            (&[("PMI_RANK", "2"), ("PMI_SIZE", "2")][..], "not below"),
            (&[("PMI_RANK", "0")][..], "PMI_SIZE"),
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
