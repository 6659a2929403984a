//! This user's private runtime directory (`$XDG_RUNTIME_DIR/gda`, else `/tmp/gda-<uid>`, else
//! `$HOME/.gda`) and the checks that make it safe on a shared host: a directory or file another
//! user could have prepared for us is refused unless it is ours, not a symbolic link and closed
//! to group and others.
//!
//! Users: gda-shmem's job-secret files and the software NIC's host-wide port state
//! (`gda_sim::port`).

use std::path::{Path, PathBuf};

/// Why a directory could not be used.
#[derive(Debug)]
pub enum DirError {
    /// It exists but another user could have prepared it: the path and what is wrong.
    NotPrivate(PathBuf, String),
    /// The system refused an operation: what was being done, and the error.
    Io(String, std::io::Error),
}

impl std::fmt::Display for DirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotPrivate(p, why) => write!(f, "{} {why}", p.display()),
            Self::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for DirError {}

/// What is wrong with a path another user could have prepared for us, if anything: it must be
/// of the kind wanted (a directory when `want_dir`, else a regular file), not a symbolic link,
/// ours (effective uid) and closed to group and others.
#[must_use]
pub fn not_private(md: &std::fs::Metadata, want_dir: bool) -> Option<String> {
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

/// This user's private directory (`$XDG_RUNTIME_DIR/gda`, else `/tmp/gda-<uid>`), created
/// `0700` if missing. An existing one is checked without following symbolic links and refused
/// unless it is a directory of ours with no group/other bits.
///
/// Another user's `/tmp/gda-<uid>` (or a link or file there) cannot be removed by its victim
/// (`/tmp` is sticky), so it must not stop every job: then the directory is `$HOME/.gda`,
/// which no other user can create. Every process of the user makes the same choice.
///
/// # Errors
/// The directory exists and is not private, or cannot be created.
pub fn user_dir() -> Result<PathBuf, DirError> {
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

/// Whether `path` is something this user can neither use nor remove: another user's.
fn planted_by_another(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|md| md.uid() != rustix::process::geteuid().as_raw())
}

/// Creates `dir` (mode 0700) unless it exists, then checks it is private to this user.
///
/// # Errors
/// `dir` exists and is not private ([`not_private`]), or cannot be created.
pub fn private_dir(dir: PathBuf) -> Result<PathBuf, DirError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        // The umask may have taken the owner's bits away (`umask 0277` leaves 0500, in which
        // nothing can be written): set the mode itself.
        Ok(()) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| DirError::Io(format!("setting the mode of {}", dir.display()), e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(DirError::Io(format!("creating {}", dir.display()), e)),
    }
    let md = std::fs::symlink_metadata(&dir)
        .map_err(|e| DirError::Io(format!("checking {}", dir.display()), e))?;
    match not_private(&md, true) {
        Some(why) => Err(DirError::NotPrivate(dir, why)),
        None => Ok(dir),
    }
}
