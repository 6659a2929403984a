//! Opening `libibverbs.so.1` and resolving its entry points by version.

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::Path;

use ibverbs_sys as sys;

/// What to tell someone whose machine lacks rdma-core.
const INSTALL_HINT: &str = "install rdma-core's verbs library (Debian/Ubuntu: apt-get install \
libibverbs1 ibverbs-providers; RHEL/Fedora: dnf install libibverbs), or set GDA_IBVERBS_LIB to \
the path of libibverbs.so.1";

/// Loading rdma-core failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The library could not be opened.
    #[error("cannot load {path}: {reason}; {hint}")]
    Library {
        /// What was opened.
        path: String,
        /// The loader's message.
        reason: String,
        /// What to do.
        hint: &'static str,
    },
    /// The library lacks an entry point gda needs.
    #[error(
        "{path} has no {symbol} (version {version}): it is not rdma-core's libibverbs, or one \
         older than v34; {hint}"
    )]
    Symbol {
        /// The library.
        path: String,
        /// The symbol.
        symbol: &'static str,
        /// The version node looked up.
        version: &'static str,
        /// What to do.
        hint: &'static str,
    },
    /// A provider library (`libbnxt_re`, …) lacks an entry point gda needs.
    #[error("{path} has no {symbol}: {hint}")]
    Entry {
        /// The library.
        path: String,
        /// The symbol.
        symbol: &'static str,
        /// What to do.
        hint: &'static str,
    },
}

impl LoadError {
    /// The same error with another "what to install" hint (for a provider library's own).
    #[must_use]
    pub fn with_hint(self, new: &'static str) -> Self {
        match self {
            Self::Library { path, reason, .. } => Self::Library {
                path,
                reason,
                hint: new,
            },
            Self::Symbol { path, symbol, .. } | Self::Entry { path, symbol, .. } => Self::Entry {
                path,
                symbol,
                hint: new,
            },
        }
    }
}

impl gda_hal::Error for LoadError {
    fn kind(&self) -> gda_hal::ErrorKind {
        gda_hal::ErrorKind::Unsupported
    }
}

/// `int (*)(ibv_context*, uint8_t, ibv_port_attr*)`: rdma-core's exported `ibv_query_port`
/// writes its compat struct (a prefix of `ibv_port_attr`).
type QueryPort = unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr) -> c_int;
/// `ibv_reg_dmabuf_mr` (rdma-core v34+, IBVERBS_1.12).
pub type RegDmabufMr =
    unsafe extern "C" fn(*mut sys::ibv_pd, u64, usize, u64, c_int, c_int) -> *mut sys::ibv_mr;

/// `_ibv_query_gid_ex` (rdma-core v33+, IBVERBS_1.11).
type QueryGidEx = unsafe extern "C" fn(
    *mut sys::ibv_context,
    u32,
    u32,
    *mut sys::ibv_gid_entry,
    u32,
    usize,
) -> c_int;

/// The entry points of `libibverbs.so.1` gda uses, resolved once.
#[allow(missing_docs)]
pub struct Fns {
    pub get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut sys::ibv_device,
    pub free_device_list: unsafe extern "C" fn(*mut *mut sys::ibv_device),
    pub get_device_name: unsafe extern "C" fn(*mut sys::ibv_device) -> *const c_char,
    pub open_device: unsafe extern "C" fn(*mut sys::ibv_device) -> *mut sys::ibv_context,
    pub close_device: unsafe extern "C" fn(*mut sys::ibv_context) -> c_int,
    pub query_device:
        unsafe extern "C" fn(*mut sys::ibv_context, *mut sys::ibv_device_attr) -> c_int,
    pub query_port: QueryPort,
    pub query_gid:
        unsafe extern "C" fn(*mut sys::ibv_context, u8, c_int, *mut sys::ibv_gid) -> c_int,
    pub alloc_pd: unsafe extern "C" fn(*mut sys::ibv_context) -> *mut sys::ibv_pd,
    pub dealloc_pd: unsafe extern "C" fn(*mut sys::ibv_pd) -> c_int,
    pub reg_mr:
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut c_void, usize, c_int) -> *mut sys::ibv_mr,
    pub dereg_mr: unsafe extern "C" fn(*mut sys::ibv_mr) -> c_int,
    pub create_cq: unsafe extern "C" fn(
        *mut sys::ibv_context,
        c_int,
        *mut c_void,
        *mut sys::ibv_comp_channel,
        c_int,
    ) -> *mut sys::ibv_cq,
    pub destroy_cq: unsafe extern "C" fn(*mut sys::ibv_cq) -> c_int,
    pub create_qp:
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_qp_init_attr) -> *mut sys::ibv_qp,
    pub modify_qp: unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_qp_attr, c_int) -> c_int,
    pub destroy_qp: unsafe extern "C" fn(*mut sys::ibv_qp) -> c_int,
    pub query_qp: unsafe extern "C" fn(
        *mut sys::ibv_qp,
        *mut sys::ibv_qp_attr,
        c_int,
        *mut sys::ibv_qp_init_attr,
    ) -> c_int,
    /// Optional (rdma-core v33+): GID entries with their type.
    pub query_gid_ex: Option<QueryGidEx>,
    /// Optional (rdma-core v34+): dma-buf registration.
    pub reg_dmabuf_mr: Option<RegDmabufMr>,
}

/// Opens a shared library of rdma-core's (`libmlx5.so.1`, …): `env` names the variable that
/// overrides `default`.
pub fn open_lib(
    env: &str,
    default: &str,
) -> Result<(libloading::Library, *mut c_void, String), LoadError> {
    let path = std::env::var_os(env)
        .filter(|p| !p.is_empty())
        .map_or_else(|| default.into(), std::path::PathBuf::from);
    open_path(&path)
}

/// Opens `path` and returns the library, its raw handle (for `dlvsym`) and its name.
pub fn open_path(path: &Path) -> Result<(libloading::Library, *mut c_void, String), LoadError> {
    let shown = path.display().to_string();
    // SAFETY: loading a shared library runs its initialisers; rdma-core's are benign.
    let lib = unsafe {
        libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_LOCAL)
    }
    .map_err(|e| LoadError::Library {
        path: shown.clone(),
        reason: e.to_string(),
        hint: INSTALL_HINT,
    })?;
    let handle = lib.into_raw();
    // SAFETY: the handle was just returned by dlopen; ownership goes back to a Library.
    let lib: libloading::Library =
        unsafe { libloading::os::unix::Library::from_raw(handle) }.into();
    Ok((lib, handle, shown))
}

/// Resolves `name@version` in an opened library, or a [`LoadError::Symbol`].
///
/// # Safety
/// `F` is a function pointer type matching the symbol's prototype; `handle` is live.
pub unsafe fn resolve<F: Copy>(
    handle: *mut c_void,
    path: &str,
    name: &'static str,
    version: &'static str,
) -> Result<F, LoadError> {
    let p = symbol(handle, name, version).ok_or(LoadError::Symbol {
        path: path.to_owned(),
        symbol: name,
        version,
        hint: INSTALL_HINT,
    })?;
    // SAFETY: the caller's contract.
    Ok(unsafe { as_fn(p) })
}

/// rdma-core's `libibverbs.so.1`, opened.
pub struct Verbs {
    path: String,
    fns: Fns,
    // Last: the entry points above point into it.
    _lib: libloading::Library,
}

// SAFETY: the library handle and function pointers are usable from any thread (libibverbs is
// thread-safe).
unsafe impl Send for Verbs {}
// SAFETY: as above.
unsafe impl Sync for Verbs {}

impl std::fmt::Debug for Verbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verbs")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Resolves `name@version` (falling back to the default version) in `handle`.
fn symbol(handle: *mut c_void, name: &str, version: &str) -> Option<*mut c_void> {
    let n = CString::new(name).ok()?;
    let v = CString::new(version).ok()?;
    // SAFETY: a live dlopen handle and NUL-terminated strings.
    let p = unsafe { libc::dlvsym(handle, n.as_ptr(), v.as_ptr()) };
    if !p.is_null() {
        return Some(p);
    }
    // SAFETY: as above.
    let p = unsafe { libc::dlsym(handle, n.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `F` is a function pointer type whose signature is the symbol's.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    const { assert!(size_of::<F>() == size_of::<*mut c_void>()) };
    // SAFETY: same size (checked at compile time); the caller vouches for the signature.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

impl Verbs {
    /// Opens rdma-core: `GDA_IBVERBS_LIB` if set, else `libibverbs.so.1` from the loader's
    /// search path (the `.so.1` name: the unversioned one exists only with -dev packages).
    pub fn load() -> Result<Self, LoadError> {
        let path = std::env::var_os("GDA_IBVERBS_LIB")
            .filter(|p| !p.is_empty())
            .map_or_else(|| "libibverbs.so.1".into(), std::path::PathBuf::from);
        Self::load_from(&path)
    }

    /// Opens the library at `path` (a file name is looked up on the loader's search path).
    pub fn load_from(path: &Path) -> Result<Self, LoadError> {
        let (lib, handle, shown) = open_path(path)?;
        macro_rules! need {
            ($name:literal, $ver:literal) => {{
                let p = symbol(handle, $name, $ver).ok_or(LoadError::Symbol {
                    path: shown.clone(),
                    symbol: $name,
                    version: $ver,
                    hint: INSTALL_HINT,
                })?;
                // SAFETY: rdma-core's prototype of this symbol is the pointer type assigned to.
                unsafe { as_fn(p) }
            }};
        }
        let fns = Fns {
            get_device_list: need!("ibv_get_device_list", "IBVERBS_1.1"),
            free_device_list: need!("ibv_free_device_list", "IBVERBS_1.1"),
            get_device_name: need!("ibv_get_device_name", "IBVERBS_1.1"),
            open_device: need!("ibv_open_device", "IBVERBS_1.1"),
            close_device: need!("ibv_close_device", "IBVERBS_1.1"),
            query_device: need!("ibv_query_device", "IBVERBS_1.1"),
            query_port: need!("ibv_query_port", "IBVERBS_1.1"),
            query_gid: need!("ibv_query_gid", "IBVERBS_1.1"),
            alloc_pd: need!("ibv_alloc_pd", "IBVERBS_1.1"),
            dealloc_pd: need!("ibv_dealloc_pd", "IBVERBS_1.1"),
            reg_mr: need!("ibv_reg_mr", "IBVERBS_1.1"),
            dereg_mr: need!("ibv_dereg_mr", "IBVERBS_1.1"),
            create_cq: need!("ibv_create_cq", "IBVERBS_1.1"),
            destroy_cq: need!("ibv_destroy_cq", "IBVERBS_1.1"),
            create_qp: need!("ibv_create_qp", "IBVERBS_1.1"),
            modify_qp: need!("ibv_modify_qp", "IBVERBS_1.1"),
            destroy_qp: need!("ibv_destroy_qp", "IBVERBS_1.1"),
            query_qp: need!("ibv_query_qp", "IBVERBS_1.1"),
            query_gid_ex: symbol(handle, "_ibv_query_gid_ex", "IBVERBS_1.11")
                // SAFETY: rdma-core's prototype of `_ibv_query_gid_ex`.
                .map(|p| unsafe { std::mem::transmute::<*mut c_void, QueryGidEx>(p) }),
            reg_dmabuf_mr: symbol(handle, "ibv_reg_dmabuf_mr", "IBVERBS_1.12")
                // SAFETY: rdma-core's prototype of `ibv_reg_dmabuf_mr`.
                .map(|p| unsafe { std::mem::transmute::<*mut c_void, RegDmabufMr>(p) }),
        };
        Ok(Self {
            path: shown,
            fns,
            _lib: lib,
        })
    }

    /// The library's path as it was opened.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The resolved entry points.
    pub fn fns(&self) -> &Fns {
        &self.fns
    }
}
