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
