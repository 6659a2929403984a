//! A software NIC's port state, host-wide: a device name (`gda_mlx5_0`) names one NIC on this
//! host for every process of the user, as a ConnectX's name does, so taking its port down is
//! seen by every process that has it open — `ibv_query_port` reports `PORT_DOWN`, each open
//! context gets `IBV_EVENT_PORT_ERR` (and `IBV_EVENT_PORT_ACTIVE` when it comes back), and
//! requests through a NIC whose port is down fail as on a link that carries nothing
//! (`RETRY_EXC_ERR`, [`crate::Nic::set_port_up`]).
//!
//! The state is a file per port that is down, `<name>.down`, in `ports/` of this user's private
//! runtime directory ([`gda_os::dirs::user_dir`]): another user can neither take a port down
//! nor bring it up. Processes learn of a change through inotify — one thread per process, and
//! only once something watches ([`watch`]); no polling.
//!
//! `gda port <name> down|up` is the command-line form ([`set_up`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use gda_os::dirs::DirError;

/// Why a port's state could not be read, set or watched.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// Not a device name: letters, digits and `_`, at most 64.
    #[error("{0:?} is not a device name (letters, digits and _, at most 64)")]
    BadName(String),
    /// The private directory could not be used.
    #[error("{0}")]
    Dir(#[from] DirError),
    /// The system refused: what was being done, and why.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// This process cannot follow port changes (inotify or its thread), and why.
    #[error("{0}")]
    Watch(String),
}

fn check_name(name: &str) -> Result<(), PortError> {
    if name.is_empty()
        || name.len() > 64
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(PortError::BadName(name.to_string()));
    }
    Ok(())
}

/// `ports/` of this user's private runtime directory, created private if missing.
///
/// # Errors
/// The directory is not private to this user, or cannot be created.
pub fn dir() -> Result<PathBuf, PortError> {
    Ok(gda_os::dirs::private_dir(
        gda_os::dirs::user_dir()?.join("ports"),
    )?)
}

fn marker(dir: &std::path::Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.down"))
}

/// Whether port 1 of device `name` is up on this host (it is unless taken down).
///
/// # Errors
/// A bad name, or the directory cannot be used.
pub fn is_up(name: &str) -> Result<bool, PortError> {
    check_name(name)?;
    Ok(!marker(&dir()?, name).exists())
}

/// The devices whose port is down on this host, sorted.
///
/// # Errors
/// The directory cannot be used or read.
pub fn down() -> Result<Vec<String>, PortError> {
    let d = dir()?;
    let entries =
        std::fs::read_dir(&d).map_err(|e| PortError::Io(format!("reading {}", d.display()), e))?;
    let mut v: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".down").map(str::to_string))
        .filter(|n| check_name(n).is_ok())
        .collect();
    v.sort();
    Ok(v)
}

/// Takes port 1 of device `name` down (`up == false`) or brings it up, for every process of
/// this user on the host. Idempotent.
///
/// # Errors
/// A bad name, or the directory or file cannot be used.
pub fn set_up(name: &str, up: bool) -> Result<(), PortError> {
    check_name(name)?;
    let p = marker(&dir()?, name);
    let r = if up {
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&p)
            .map(drop)
    };
    r.map_err(|e| {
        PortError::Io(
            format!(
                "{} {}",
                if up { "removing" } else { "creating" },
                p.display()
            ),
            e,
        )
    })
}

/// A watch on a port; dropping it stops the calls.
pub struct PortWatch {
    id: u64,
}

impl std::fmt::Debug for PortWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortWatch").field("id", &self.id).finish()
    }
}

impl Drop for PortWatch {
    fn drop(&mut self) {
        if let Some(w) = WATCHER.get().and_then(|w| w.as_ref().ok()) {
            lock(&w.watches).retain(|x| x.id != self.id);
        }
    }
}

type OnChange = Arc<dyn Fn(bool) + Send + Sync>;

struct Watch {
    id: u64,
    name: String,
    last: bool,
    on_change: OnChange,
}

struct Watcher {
    dir: PathBuf,
    watches: Mutex<Vec<Watch>>,
    next: std::sync::atomic::AtomicU64,
}

static WATCHER: OnceLock<Result<Watcher, String>> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Calls `init(up)` with the state of port 1 of device `name` now, then `on_change(up)`
/// whenever it goes down or comes up on this host, on this process's port thread (so neither
/// may block for long). `init` runs under the lock the port thread takes before a call, so a
/// change made while the watch is set up is seen after `init`, never before it.
///
/// # Errors
/// A bad name; the directory cannot be used; inotify is unavailable.
pub fn watch(
    name: &str,
    init: impl FnOnce(bool),
    on_change: impl Fn(bool) + Send + Sync + 'static,
) -> Result<(bool, PortWatch), PortError> {
    check_name(name)?;
    let w = WATCHER
        .get_or_init(start)
        .as_ref()
        .map_err(|e| PortError::Watch(e.clone()))?;
    let mut ws = lock(&w.watches);
    let up = !marker(&w.dir, name).exists();
    init(up);
    let id = w.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ws.push(Watch {
        id,
        name: name.to_string(),
        last: up,
        on_change: Arc::new(on_change),
    });
    Ok((up, PortWatch { id }))
}

/// Watches `dir` for markers coming and going, and for itself going away.
fn add_watch(fd: &std::os::fd::OwnedFd, dir: &std::path::Path) -> rustix::io::Result<i32> {
    use rustix::fs::inotify::WatchFlags;
    rustix::fs::inotify::add_watch(
        fd,
        dir,
        WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF,
    )
}

/// Sets up inotify on the directory and starts the port thread.
fn start() -> Result<Watcher, String> {
    use rustix::fs::inotify;
    let dir = dir().map_err(|e| e.to_string())?;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC)
        .map_err(|e| format!("inotify for {}: {e}", dir.display()))?;
    add_watch(&fd, &dir).map_err(|e| format!("watching {}: {e}", dir.display()))?;
    std::thread::Builder::new()
        .name("gda-ports".into())
        .spawn(move || run(&fd))
        .map_err(|e| format!("starting the port thread: {e}"))?;
    Ok(Watcher {
        dir,
        watches: Mutex::new(Vec::new()),
        next: std::sync::atomic::AtomicU64::new(0),
    })
}

/// The port thread: after each batch of directory events, every watch whose port changed is
/// called (outside the lock, so a call may set up or drop watches).
fn run(fd: &std::os::fd::OwnedFd) {
    use rustix::fs::inotify::ReadFlags;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = rustix::fs::inotify::Reader::new(fd, &mut buf);
    let mut lost = false;
    loop {
        match reader.next() {
            Ok(e) => {
                lost |= e
                    .events()
                    .intersects(ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF);
            }
            Err(rustix::io::Errno::INTR) => continue,
            // The fd cannot fail otherwise; if it does, ports stop being watched (their state
            // as last seen stays).
            Err(_) => return,
        }
        if !reader.is_buffer_empty() {
            continue;
        }
        let Some(Ok(w)) = WATCHER.get() else { continue };
        if std::mem::take(&mut lost) {
            // The directory was removed or moved (a tmp cleaner, logind removing the runtime
            // directory at logout): make it again and watch the new one; every port in it is
            // up until a marker appears.
            if gda_os::dirs::private_dir(w.dir.clone()).is_err() || add_watch(fd, &w.dir).is_err() {
                return;
            }
        }
        let calls: Vec<(OnChange, bool)> = {
            let mut ws = lock(&w.watches);
            ws.iter_mut()
                .filter_map(|x| {
                    let up = !marker(&w.dir, &x.name).exists();
                    (up != x.last).then(|| {
                        x.last = up;
                        (x.on_change.clone(), up)
                    })
                })
                .collect()
        };
        for (f, up) in calls {
            f(up);
        }
    }
}
