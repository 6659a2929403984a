//! Where a PE's copy of the job secret comes from ([`Secret`]), and the per-user secret files
//! of launchers that do not pass one (see [`super::env`]): the directory
//! (`$XDG_RUNTIME_DIR/gda`, else `/tmp/gda-<uid>`, else `$HOME/.gda`) and the file are refused
//! unless they are private to this user, because on a shared host another user can create
//! either first and plant a secret in it.
//!
//! Both the launch parameters ([`super::env`]) and the rendezvous ([`super::tcp`]) use these;
//! this module uses neither.

use std::path::PathBuf;

use crate::error::{Result, ShmemError};

/// Where a PE's copy of the job secret comes from.
#[derive(Clone, Debug)]
pub enum Secret {
    /// Given by the launcher (`GDA_SHMEM_SECRET`): it cannot change.
    Known(Vec<u8>),
    /// Written by rank 0 to this file (see [`super::env::Launch::secret_source`]): a client
    /// that finds it missing or stale (another id than rank 0's) reads it again until the
    /// deadline.
    File(PathBuf),
}

impl Secret {
    /// The secret as it is now: `None` while the file does not hold one yet.
    pub(crate) fn current(&self) -> Result<Option<Vec<u8>>> {
        match self {
            Self::Known(s) => Ok(Some(s.clone())),
            Self::File(p) => read_secret_file(p),
        }
    }
}

use gda_os::dirs::{DirError, not_private};

fn refuse(path: &std::path::Path, why: &str) -> ShmemError {
    ShmemError::Config(format!(
        "refusing to use {} for the job secret: it {why}. Remove it, or point XDG_RUNTIME_DIR \
         at a private directory, or give every rank GDA_SHMEM_SECRET",
        path.display()
    ))
}

fn dir_error(e: DirError) -> ShmemError {
    match e {
        DirError::NotPrivate(p, why) => refuse(&p, &why),
        DirError::Io(what, e) => ShmemError::io(what, e),
    }
}

/// The per-user directory of job secrets ([`gda_os::dirs::user_dir`]): on a shared host,
/// another user can create `/tmp/gda-<uid>` before us and plant a secret in it, so one that is
/// not private is refused (or avoided for `$HOME/.gda` when another user's).
pub fn secret_dir() -> Result<PathBuf> {
    gda_os::dirs::user_dir().map_err(dir_error)
}

#[cfg(test)]
fn private_dir(dir: PathBuf) -> Result<PathBuf> {
    gda_os::dirs::private_dir(dir).map_err(dir_error)
}

/// Writes a fresh random secret to `path` (a new file, then renamed over any stale one).
pub(crate) fn write_secret(path: &std::path::Path) -> Result<Vec<u8>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
