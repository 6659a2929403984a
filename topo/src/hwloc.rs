//! hwloc's C library, loaded at run time, once per process (as gda loads rdma-core): gda runs
//! without it, and then says so ([`HwlocError::Missing`]).
//!
//! gda asks hwloc for one thing — the topology, with its PCI devices, bridges and OS devices,
//! exported as hwloc's XML — and reads that ([`crate::Node::from_xml`]). No hwloc structure is
//! read from memory, so nothing here depends on the layout of `struct hwloc_obj`; the calls
//! used take and return only opaque pointers, integers and strings, and exist unchanged in
//! every hwloc 2.x (`libhwloc.so.15`). hwloc 1.x and 3.x are refused by their API version.

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_ulong, c_void};
use std::path::Path;

/// Why hwloc gave no topology.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HwlocError {
    /// The library is not installed (or not at `GDA_HWLOC_LIB`).
    #[error(
        "hwloc is not installed ({0}): install it (Debian/Ubuntu: apt-get install libhwloc15; \
         RHEL: dnf install hwloc-libs) or point GDA_HWLOC_LIB at libhwloc.so.15"
    )]
    Missing(String),
    /// A library without a call gda needs, or of another major version.
    #[error("{0}")]
    Unusable(String),
    /// hwloc refused: the call and what it said.
    #[error("hwloc: {0}")]
    Failed(String),
}

type Topology = *mut c_void;

/// `HWLOC_TYPE_FILTER_KEEP_IMPORTANT`: PCI devices of the classes that matter (GPUs, NICs,
/// storage…), the bridges above them and their OS devices.
const KEEP_IMPORTANT: c_int = 3;

struct Api {
    _lib: libloading::Library,
    api_version: unsafe extern "C" fn() -> c_uint,
    init: unsafe extern "C" fn(*mut Topology) -> c_int,
    set_io_types_filter: unsafe extern "C" fn(Topology, c_int) -> c_int,
    set_xml: unsafe extern "C" fn(Topology, *const c_char) -> c_int,
    load: unsafe extern "C" fn(Topology) -> c_int,
    export_xmlbuffer:
        unsafe extern "C" fn(Topology, *mut *mut c_char, *mut c_int, c_ulong) -> c_int,
    free_xmlbuffer: unsafe extern "C" fn(Topology, *mut c_char),
    destroy: unsafe extern "C" fn(Topology),
}

/// The library, loaded once per process and kept (hwloc's own plugins stay loaded with it).
static API: std::sync::OnceLock<Result<Api, HwlocError>> = std::sync::OnceLock::new();

impl Api {
    /// The process's hwloc, loaded on first use.
    fn get() -> Result<&'static Self, HwlocError> {
        API.get_or_init(Self::open).as_ref().map_err(Clone::clone)
    }

    fn open() -> Result<Self, HwlocError> {
        let name = std::env::var_os("GDA_HWLOC_LIB")
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "libhwloc.so.15".into());
        // SAFETY: loading hwloc runs its initialisers, which have no preconditions.
        let lib = unsafe { libloading::Library::new(&name) }
            .map_err(|e| HwlocError::Missing(e.to_string()))?;
        macro_rules! sym {
            ($n:literal) => {
                // SAFETY: the symbol has this C signature in every hwloc 2.x (checked by the
                // API version below before any other call).
                *unsafe { lib.get(concat!($n, "\0").as_bytes()) }.map_err(|e| {
                    HwlocError::Unusable(format!("{}: no {}: {e}", name.to_string_lossy(), $n))
                })?
            };
        }
        let api = Self {
            api_version: sym!("hwloc_get_api_version"),
            init: sym!("hwloc_topology_init"),
            set_io_types_filter: sym!("hwloc_topology_set_io_types_filter"),
            set_xml: sym!("hwloc_topology_set_xml"),
            load: sym!("hwloc_topology_load"),
            export_xmlbuffer: sym!("hwloc_topology_export_xmlbuffer"),
            free_xmlbuffer: sym!("hwloc_free_xmlbuffer"),
            destroy: sym!("hwloc_topology_destroy"),
            _lib: lib,
        };
        // SAFETY: no arguments.
        let v = unsafe { (api.api_version)() };
        if v >> 16 != 2 {
            return Err(HwlocError::Unusable(format!(
                "{}: hwloc API {}.{}, gda needs 2.x",
                name.to_string_lossy(),
                v >> 16,
                (v >> 8) & 0xff
            )));
        }
        Ok(api)
    }
}

/// A topology being built; destroyed on every path out.
struct Handle<'a> {
    api: &'a Api,
    t: Topology,
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised by `init`, destroyed once.
        unsafe { (self.api.destroy)(self.t) };
    }
}

/// The version of hwloc's API (`major.minor.patch`; hwloc 2.9.0's is 2.8.0), or why hwloc
/// cannot be used.
///
/// # Errors
/// hwloc is missing or unusable.
pub fn version() -> Result<String, HwlocError> {
    let api = Api::get()?;
    // SAFETY: no arguments.
    let v = unsafe { (api.api_version)() };
    Ok(format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff))
}

/// The topology as hwloc's XML: of the file `xml` when given (what `HWLOC_XMLFILE` also does,
/// for hwloc honours it itself), else of this machine — with the PCI devices that matter, their
/// bridges and their OS devices (`mlx5_0`, `cuda0`, …).
///
/// # Errors
/// hwloc is missing or unusable, or refused the file or the discovery.
pub fn export(xml: Option<&Path>) -> Result<String, HwlocError> {
    let api = Api::get()?;
    let mut t: Topology = std::ptr::null_mut();
    // SAFETY: `t` is written by init.
    if unsafe { (api.init)(&raw mut t) } != 0 || t.is_null() {
        return Err(HwlocError::Failed("hwloc_topology_init failed".into()));
    }
    let h = Handle { api, t };
    // SAFETY: a live topology, before load.
    if unsafe { (api.set_io_types_filter)(h.t, KEEP_IMPORTANT) } != 0 {
        return Err(HwlocError::Failed("keeping I/O devices refused".into()));
    }
    if let Some(p) = xml {
        let c = CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| HwlocError::Failed(format!("{}: a NUL in the path", p.display())))?;
        // SAFETY: a live topology and a NUL-terminated path.
        if unsafe { (api.set_xml)(h.t, c.as_ptr()) } != 0 {
            return Err(HwlocError::Failed(format!(
                "{}: not a topology hwloc can read ({})",
                p.display(),
                std::io::Error::last_os_error()
            )));
        }
    }
    // SAFETY: a live topology.
    if unsafe { (api.load)(h.t) } != 0 {
        let what = xml.map_or_else(
            || std::env::var("HWLOC_XMLFILE").map_or("this machine".into(), |f| f),
            |p| p.display().to_string(),
        );
        return Err(HwlocError::Failed(format!(
            "loading the topology of {what} failed ({})",
            std::io::Error::last_os_error()
        )));
    }
    let mut buf: *mut c_char = std::ptr::null_mut();
    let mut len: c_int = 0;
    // SAFETY: a loaded topology; hwloc allocates the buffer (freed below).
    if unsafe { (api.export_xmlbuffer)(h.t, &raw mut buf, &raw mut len, 0) } != 0 || buf.is_null() {
        return Err(HwlocError::Failed(
            "exporting the topology as XML failed".into(),
        ));
    }
    // SAFETY: hwloc returns a NUL-terminated buffer.
    let s = unsafe { CStr::from_ptr(buf) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: the buffer hwloc allocated for this topology, freed once.
    unsafe { (api.free_xmlbuffer)(h.t, buf) };
    Ok(s)
}
