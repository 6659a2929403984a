//! `libamdhip64` opened at run time, its entry points, and the GPUs it sees.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Arc;

/// What went wrong with HIP or a GPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HipError {
    /// The HIP runtime library could not be loaded or lacks an entry point.
    #[error("cannot use HIP: {0}")]
    Load(String),
    /// HIP is there but sees no GPU.
    #[error(
        "no AMD GPU is visible ({call}: {what}): GPU memory needs a GPU this process may use — \
         check that the amdgpu driver is loaded, that /dev/kfd and /dev/dri/renderD* exist and \
         this user is in their groups (video, render), and HIP_VISIBLE_DEVICES; gda still runs \
         with host memory"
    )]
    NoGpu {
        /// The call that said so.
        call: &'static str,
        /// HIP's words.
        what: String,
    },
    /// A HIP call failed.
    #[error("{call} failed: {what} (hipError {code}){detail}")]
    Call {
        /// The call.
        call: &'static str,
        /// HIP's error code.
        code: i32,
        /// HIP's words.
        what: String,
        /// Extra context.
        detail: String,
    },
    /// A request HIP would refuse or that makes no sense (zero size, bad alignment).
    #[error("{0}")]
    Invalid(String),
}

impl gda_hal::Error for HipError {
    fn kind(&self) -> gda_hal::ErrorKind {
        match self {
            Self::Load(_) => gda_hal::ErrorKind::Unsupported,
            Self::NoGpu { .. } => gda_hal::ErrorKind::NoDevice,
            Self::Call { .. } => gda_hal::ErrorKind::Other,
            Self::Invalid(_) => gda_hal::ErrorKind::InvalidArgument,
        }
    }
}

/// `hipErrorNoDevice`, `hipErrorInsufficientDriver`, `hipErrorInvalidDevice`.
const NO_DEVICE: [i32; 3] = [100, 35, 101];

type Status = c_int;

/// The HIP entry points gda uses (prototypes of `hip_runtime_api.h`; errors as `int`, so a
/// code this build does not know is still just a number).
#[allow(non_snake_case, missing_docs)]
pub(crate) struct Fns {
    pub hipGetDeviceCount: unsafe extern "C" fn(*mut c_int) -> Status,
    pub hipSetDevice: unsafe extern "C" fn(c_int) -> Status,
    pub hipGetErrorString: unsafe extern "C" fn(Status) -> *const c_char,
    pub hipDeviceGetName: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
    pub hipDeviceGetPCIBusId: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
    pub hipRuntimeGetVersion: unsafe extern "C" fn(*mut c_int) -> Status,
    pub hipExtMallocWithFlags: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> Status,
    pub hipFree: unsafe extern "C" fn(*mut c_void) -> Status,
    pub hipMemcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> Status,
    pub hipMemset: unsafe extern "C" fn(*mut c_void, c_int, usize) -> Status,
    pub hipIpcGetMemHandle:
        unsafe extern "C" fn(*mut hip_sys::hiprt::hipIpcMemHandle_t, *mut c_void) -> Status,
    pub hipIpcOpenMemHandle:
        unsafe extern "C" fn(*mut *mut c_void, hip_sys::hiprt::hipIpcMemHandle_t, c_uint) -> Status,
    pub hipIpcCloseMemHandle: unsafe extern "C" fn(*mut c_void) -> Status,
    pub hipHostRegister: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> Status,
    pub hipHostUnregister: unsafe extern "C" fn(*mut c_void) -> Status,
    pub hipHostGetDevicePointer:
        unsafe extern "C" fn(*mut *mut c_void, *mut c_void, c_uint) -> Status,
    /// ROCm 5.6+: a dma-buf of device memory (from `libhsa-runtime64`).
    pub export_dmabuf:
        Option<unsafe extern "C" fn(*const c_void, usize, *mut c_int, *mut u64) -> c_int>,
}

/// The HIP runtime, loaded.
pub struct Hip {
    pub(crate) f: Fns,
    path: String,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hip")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// HIP's device index.
    pub index: u32,
    /// Marketing name (`hipDeviceGetName`).
    pub name: String,
    /// PCI bus id (`0000:c1:00.0`): which NIC shares its PCIe switch decides the path.
    pub pci: String,
}

const INSTALL: &str = "install the HIP runtime (Debian/Ubuntu: apt-get install libamdhip64-5, \
                       or ROCm), or set GDA_HIP_LIB=/path/to/libamdhip64.so";

impl Hip {
    /// Opens `GDA_HIP_LIB`, else `libamdhip64.so.5`, `libamdhip64.so.6`, `libamdhip64.so`.
    pub fn load() -> Result<Arc<Self>, HipError> {
        match std::env::var("GDA_HIP_LIB") {
            Ok(p) if !p.is_empty() => Self::load_from(&p),
            _ => {
                let mut last = String::new();
                for n in ["libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so"] {
                    match Self::load_from(n) {
                        Err(HipError::Load(e)) => last = e,
                        other => return other,
                    }
                }
                Err(HipError::Load(last))
            }
        }
    }

    /// Opens the HIP runtime at `path` (a file name is searched as `dlopen` searches).
    pub fn load_from(path: &str) -> Result<Arc<Self>, HipError> {
        // SAFETY: loading HIP runs its initialisers (it does not touch a GPU until called).
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => Self::from_lib(lib, path.to_owned()).map(Arc::new),
            Err(e) => Err(HipError::Load(format!("{path}: {e}; {INSTALL}"))),
        }
    }

    fn from_lib(lib: libloading::Library, path: String) -> Result<Self, HipError> {
        macro_rules! need {
            ($name:ident) => {{
                // SAFETY: the prototype of `hip_runtime_api.h` (field type of `Fns`).
                let s = unsafe { lib.get(concat!(stringify!($name), "\0").as_bytes()) }.map_err(
                    |e| {
                        HipError::Load(format!(
                            "{path} has no {} ({e}): not a HIP runtime; {INSTALL}",
                            stringify!($name)
                        ))
                    },
                )?;
                *s
            }};
        }
        // dma-buf export lives in ROCr (libhsa-runtime64), which libamdhip64 links: looking
        // the symbol up through HIP's handle searches HIP and the libraries it loaded, so the
        // export comes from the ROCr of *this* HIP (never a system ROCr beside another HIP).
        // SAFETY: `hsa_amd_portable_export_dmabuf`'s prototype (hsa_ext_amd.h, ROCm 5.6+).
        let export_dmabuf = unsafe {
            lib.get::<unsafe extern "C" fn(*const c_void, usize, *mut c_int, *mut u64) -> c_int>(
                b"hsa_amd_portable_export_dmabuf\0",
            )
        }
        .ok()
        .map(|s| *s);
        let f = Fns {
            hipGetDeviceCount: need!(hipGetDeviceCount),
            hipSetDevice: need!(hipSetDevice),
            hipGetErrorString: need!(hipGetErrorString),
            hipDeviceGetName: need!(hipDeviceGetName),
            hipDeviceGetPCIBusId: need!(hipDeviceGetPCIBusId),
            hipRuntimeGetVersion: need!(hipRuntimeGetVersion),
            hipExtMallocWithFlags: need!(hipExtMallocWithFlags),
            hipFree: need!(hipFree),
            hipMemcpy: need!(hipMemcpy),
            hipMemset: need!(hipMemset),
            hipIpcGetMemHandle: need!(hipIpcGetMemHandle),
            hipIpcOpenMemHandle: need!(hipIpcOpenMemHandle),
            hipIpcCloseMemHandle: need!(hipIpcCloseMemHandle),
            hipHostRegister: need!(hipHostRegister),
            hipHostUnregister: need!(hipHostUnregister),
            hipHostGetDevicePointer: need!(hipHostGetDevicePointer),
            export_dmabuf,
        };
        Ok(Self { f, path, _lib: lib })
    }

    /// The library's path as opened.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether this ROCm can export device memory as a dma-buf (ROCm 5.6+).
    pub fn has_dmabuf_export(&self) -> bool {
        self.f.export_dmabuf.is_some()
    }

    /// HIP's words for `code`.
    pub(crate) fn words(&self, code: Status) -> String {
        // SAFETY: HIP returns a static string for any code.
        let p = unsafe { (self.f.hipGetErrorString)(code) };
        if p.is_null() {
            return format!("error {code}");
        }
        // SAFETY: a NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// `Ok` for `hipSuccess`, else the error (a missing GPU as [`HipError::NoGpu`]).
    pub(crate) fn check(
        &self,
        call: &'static str,
        code: Status,
        detail: String,
    ) -> Result<(), HipError> {
        if code == 0 {
            return Ok(());
        }
        let what = self.words(code);
        if NO_DEVICE.contains(&code) {
            return Err(HipError::NoGpu { call, what });
        }
        Err(HipError::Call {
            call,
            code,
            what,
            detail,
        })
    }

    /// The runtime's version (`hipRuntimeGetVersion`).
    pub fn version(&self) -> Result<i32, HipError> {
        let mut v = 0;
        // SAFETY: an output int.
        let r = unsafe { (self.f.hipRuntimeGetVersion)(&mut v) };
        self.check("hipRuntimeGetVersion", r, String::new())?;
        Ok(v)
    }

    /// The address the GPU uses for host memory at `host`, which must lie in a range
    /// registered with HIP (`hipHostGetDevicePointer`).
    pub fn device_address_of_host(&self, host: u64) -> Result<u64, HipError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: an output pointer; HIP checks the address itself.
        let r = unsafe { (self.f.hipHostGetDevicePointer)(&mut d, host as *mut c_void, 0) };
        self.check("hipHostGetDevicePointer", r, format!(" ({host:#x})"))?;
        Ok(d as u64)
    }

    /// The GPUs HIP sees; none is [`HipError::NoGpu`].
    pub fn gpus(&self) -> Result<Vec<Gpu>, HipError> {
        let mut n: c_int = 0;
        // SAFETY: an output int.
        let r = unsafe { (self.f.hipGetDeviceCount)(&mut n) };
        self.check("hipGetDeviceCount", r, String::new())?;
        if n <= 0 {
            return Err(HipError::NoGpu {
                call: "hipGetDeviceCount",
                what: "0 devices".into(),
            });
        }
        (0..n)
            .map(|i| {
                let mut name = [0 as c_char; 256];
                let mut pci = [0 as c_char; 64];
                // SAFETY: output buffers of the sizes given.
                let r = unsafe { (self.f.hipDeviceGetName)(name.as_mut_ptr(), 256, i) };
                self.check("hipDeviceGetName", r, format!(" (device {i})"))?;
                // SAFETY: as above.
                let r = unsafe { (self.f.hipDeviceGetPCIBusId)(pci.as_mut_ptr(), 64, i) };
                self.check("hipDeviceGetPCIBusId", r, format!(" (device {i})"))?;
                // HIP writes a NUL-terminated string into the (zeroed) buffer.
                let s = |b: &[c_char]| {
                    let bytes: Vec<u8> = b.iter().map(|&c| c as u8).collect();
                    CStr::from_bytes_until_nul(&bytes)
                        .map(|c| c.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
                };
                Ok(Gpu {
                    index: i as u32,
                    name: s(&name),
                    pci: s(&pci),
                })
            })
            .collect()
    }

    /// Makes GPU `index` current for this thread's later allocations.
    pub fn set_device(&self, index: u32) -> Result<(), HipError> {
        let i = c_int::try_from(index).map_err(|_| HipError::Invalid(format!("GPU {index}")))?;
        // SAFETY: a device index (HIP checks it).
        let r = unsafe { (self.f.hipSetDevice)(i) };
        self.check("hipSetDevice", r, format!(" (device {index})"))
    }
}
