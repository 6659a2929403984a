//! The GPU runtime opened at run time — AMD's HIP (`libamdhip64`) or NVIDIA's CUDA runtime
//! (`libcudart`) — its entry points, and the GPUs it sees.
//!
//! HIP's runtime API is CUDA's with another prefix: the calls gda makes have the same
//! prototypes, flag values (`HostRegisterPortable` 1, `Mapped` 2, `IoMemory` 4, `Memcpy`
//! kinds, `IpcMemLazyEnablePeerAccess` 1), a 64-byte IPC handle, and the same numbers for the
//! errors gda tells apart (no device 100, insufficient driver 35, invalid device 101). So one
//! table of entry points serves both; what only one runtime has is an `Option`.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Arc;

/// What went wrong with HIP or a GPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HipError {
    /// The HIP runtime library could not be loaded or lacks an entry point.
    #[error("cannot use HIP: {0}")]
    Load(String),
    /// The runtime is there but sees no GPU.
    #[error(
        "no {} GPU is visible ({call}: {what}): GPU memory needs a GPU this process may use — \
         {}; gda still runs with host memory",
        .runtime.vendor(), .runtime.what_to_check()
    )]
    NoGpu {
        /// The call that said so.
        call: &'static str,
        /// The runtime's words.
        what: String,
        /// The runtime that said so.
        runtime: Runtime,
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
    /// What this runtime cannot give (device memory the host reads, from CUDA).
    #[error("{0}")]
    Unsupported(String),
}

/// Which GPU runtime a [`Hip`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// AMD's HIP (`libamdhip64`).
    Hip,
    /// NVIDIA's CUDA runtime (`libcudart`).
    Cuda,
}

impl Runtime {
    /// The GPU vendor this runtime drives.
    pub fn vendor(self) -> &'static str {
        match self {
            Self::Hip => "AMD",
            Self::Cuda => "NVIDIA",
        }
    }

    fn what_to_check(self) -> &'static str {
        match self {
            Self::Hip => {
                "check that the amdgpu driver is loaded, that /dev/kfd and /dev/dri/renderD* \
                 exist and this user is in their groups (video, render), and HIP_VISIBLE_DEVICES"
            }
            Self::Cuda => {
                "check that the nvidia driver is loaded (nvidia-smi), that /dev/nvidia0 and \
                 /dev/nvidiactl exist and this user may open them, and CUDA_VISIBLE_DEVICES"
            }
        }
    }
}

impl gda_hal::Error for HipError {
    fn kind(&self) -> gda_hal::ErrorKind {
        match self {
            Self::Load(_) => gda_hal::ErrorKind::Unsupported,
            Self::NoGpu { .. } => gda_hal::ErrorKind::NoDevice,
            Self::Call { .. } => gda_hal::ErrorKind::Other,
            Self::Invalid(_) => gda_hal::ErrorKind::InvalidArgument,
            Self::Unsupported(_) => gda_hal::ErrorKind::Unsupported,
        }
    }
}

/// `hipErrorNoDevice`, `hipErrorInsufficientDriver`, `hipErrorInvalidDevice` (CUDA's
/// `cudaError` has the same numbers).
const NO_DEVICE: [i32; 3] = [100, 35, 101];

type Status = c_int;

/// The entry points gda uses (prototypes of `hip_runtime_api.h`, which `cuda_runtime_api.h`
/// shares under the `cuda` prefix; errors as `int`, so a code this build does not know is
/// still just a number). Named by their HIP names.
#[allow(non_snake_case, missing_docs)]
pub(crate) struct Fns {
    pub hipGetDeviceCount: unsafe extern "C" fn(*mut c_int) -> Status,
    pub hipSetDevice: unsafe extern "C" fn(c_int) -> Status,
    pub hipGetErrorString: unsafe extern "C" fn(Status) -> *const c_char,
    /// HIP only; CUDA's runtime names a device through its properties (`props`).
    pub hipDeviceGetName: Option<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status>,
    /// CUDA only: `cudaGetDeviceProperties[_v2]`, whose first field is the 256-byte name.
    pub props: Option<unsafe extern "C" fn(*mut c_void, c_int) -> Status>,
    pub hipDeviceGetPCIBusId: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
    pub hipRuntimeGetVersion: unsafe extern "C" fn(*mut c_int) -> Status,
    /// HIP only: fine-grained device memory, which the host and the NIC read coherently. CUDA
    /// has no such memory (its device memory is not host-addressable), so a GPU heap and rings
    /// in device memory are AMD's; an NVIDIA GPU reaches host memory gda maps for it.
    pub hipExtMallocWithFlags:
        Option<unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> Status>,
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

/// A GPU runtime, loaded: HIP, or CUDA's runtime through the same entry points (the type
/// keeps its name: gda's GPU paths were written for HIP first).
pub struct Hip {
    pub(crate) f: Fns,
    runtime: Runtime,
    path: String,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hip")
            .field("runtime", &self.runtime)
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
const INSTALL_CUDA: &str = "install the CUDA runtime (the CUDA toolkit, or pip's \
                            nvidia-cuda-runtime), or set GDA_CUDA_LIB=/path/to/libcudart.so";

impl Hip {
    /// The GPU runtime of this machine: `GDA_HIP_LIB` or `GDA_CUDA_LIB` when set (that file,
    /// as HIP or as CUDA's runtime); else HIP (`libamdhip64.so.5`, `.so.6`, `.so`) when it
    /// sees a GPU, else CUDA's runtime (`libcudart.so.13`, `.12`, `.so`) when it sees one, else
    /// whichever loaded (its [`Hip::gpus`] then says why there is no GPU), HIP first.
    pub fn load() -> Result<Arc<Self>, HipError> {
        let env = |k| std::env::var(k).ok().filter(|p: &String| !p.is_empty());
        if let Some(p) = env("GDA_HIP_LIB") {
            return Self::load_from(&p);
        }
        if let Some(p) = env("GDA_CUDA_LIB") {
            return Self::load_cuda_from(&p);
        }
        let first = |names: &[&str], open: fn(&str) -> Result<Arc<Self>, HipError>| {
            let mut last = HipError::Load(String::new());
            for n in names {
                match open(n) {
                    Err(e @ HipError::Load(_)) => last = e,
                    other => return other,
                }
            }
            Err(last)
        };
        let hip = first(
            &["libamdhip64.so.5", "libamdhip64.so.6", "libamdhip64.so"],
            Self::load_from,
        );
        if matches!(&hip, Ok(h) if h.gpus().is_ok()) {
            return hip;
        }
        let cuda = first(
            &["libcudart.so.13", "libcudart.so.12", "libcudart.so"],
            Self::load_cuda_from,
        );
        match (hip, cuda) {
            (_, Ok(c)) if c.gpus().is_ok() => Ok(c),
            (Ok(h), _) => Ok(h),
            (Err(_), Ok(c)) => Ok(c),
            (Err(HipError::Load(h)), Err(HipError::Load(c))) => {
                Err(HipError::Load(format!("{h}; and no CUDA runtime: {c}")))
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// Opens the HIP runtime at `path` (a file name is searched as `dlopen` searches).
    pub fn load_from(path: &str) -> Result<Arc<Self>, HipError> {
        Self::open(path, Runtime::Hip)
    }

    /// Opens NVIDIA's CUDA runtime (`libcudart`) at `path`.
    pub fn load_cuda_from(path: &str) -> Result<Arc<Self>, HipError> {
        Self::open(path, Runtime::Cuda)
    }

    fn open(path: &str, runtime: Runtime) -> Result<Arc<Self>, HipError> {
        let install = match runtime {
            Runtime::Hip => INSTALL,
            Runtime::Cuda => INSTALL_CUDA,
        };
        // SAFETY: loading the runtime runs its initialisers (it does not touch a GPU until
        // called).
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => Self::from_lib(lib, path.to_owned(), runtime).map(Arc::new),
            Err(e) => Err(HipError::Load(format!("{path}: {e}; {install}"))),
        }
    }

    fn from_lib(
        lib: libloading::Library,
        path: String,
        runtime: Runtime,
    ) -> Result<Self, HipError> {
        let cuda = runtime == Runtime::Cuda;
        let install = if cuda { INSTALL_CUDA } else { INSTALL };
        let sym = |name: &str| -> Option<*const c_void> {
            let mut z = name.as_bytes().to_vec();
            z.push(0);
            // SAFETY: looked up as a raw address; cast below to its documented prototype.
            unsafe { lib.get::<*const c_void>(&z) }.ok().map(|s| *s)
        };
        macro_rules! opt {
            ($hip:ident, $cuda:literal) => {{
                let name = if cuda { $cuda } else { stringify!($hip) };
                // SAFETY: the runtime's prototype for this entry point (field type of `Fns`,
                // the same for both runtimes).
                sym(name).map(|p| unsafe { std::mem::transmute::<*const c_void, _>(p) })
            }};
        }
        macro_rules! need {
            ($hip:ident, $cuda:literal) => {{
                let name = if cuda { $cuda } else { stringify!($hip) };
                opt!($hip, $cuda).ok_or_else(|| {
                    HipError::Load(format!(
                        "{path} has no {name}: not a {} runtime; {install}",
                        if cuda { "CUDA" } else { "HIP" }
                    ))
                })?
            }};
        }
        // dma-buf export lives in ROCr (libhsa-runtime64), which libamdhip64 links: looking
        // the symbol up through HIP's handle searches HIP and the libraries it loaded, so the
        // export comes from the ROCr of *this* HIP (never a system ROCr beside another HIP).
        let export_dmabuf = if cuda {
            None
        } else {
            // SAFETY: `hsa_amd_portable_export_dmabuf`'s prototype (hsa_ext_amd.h, ROCm 5.6+).
            sym("hsa_amd_portable_export_dmabuf").map(|p| unsafe {
                std::mem::transmute::<
                    *const c_void,
                    unsafe extern "C" fn(*const c_void, usize, *mut c_int, *mut u64) -> c_int,
                >(p)
            })
        };
        let f = Fns {
            hipGetDeviceCount: need!(hipGetDeviceCount, "cudaGetDeviceCount"),
            hipSetDevice: need!(hipSetDevice, "cudaSetDevice"),
            hipGetErrorString: need!(hipGetErrorString, "cudaGetErrorString"),
            hipDeviceGetName: if cuda {
                None
            } else {
                Some(need!(hipDeviceGetName, ""))
            },
            // CUDA 12 renamed the call (`cudaGetDeviceProperties` is a macro for `_v2`); the
            // name leads the structure in every version.
            props: if cuda {
                let p = sym("cudaGetDeviceProperties_v2")
                    .or_else(|| sym("cudaGetDeviceProperties"))
                    .ok_or_else(|| {
                        HipError::Load(format!(
                            "{path} has no cudaGetDeviceProperties: not a CUDA runtime; {install}"
                        ))
                    })?;
                // SAFETY: `cudaError_t (cudaDeviceProp*, int)`, the prototype of both names.
                Some(unsafe {
                    std::mem::transmute::<
                        *const c_void,
                        unsafe extern "C" fn(*mut c_void, c_int) -> Status,
                    >(p)
                })
            } else {
                None
            },
            hipDeviceGetPCIBusId: need!(hipDeviceGetPCIBusId, "cudaDeviceGetPCIBusId"),
            hipRuntimeGetVersion: need!(hipRuntimeGetVersion, "cudaRuntimeGetVersion"),
            hipExtMallocWithFlags: if cuda {
                None
            } else {
                Some(need!(hipExtMallocWithFlags, ""))
            },
            hipFree: need!(hipFree, "cudaFree"),
            hipMemcpy: need!(hipMemcpy, "cudaMemcpy"),
            hipMemset: need!(hipMemset, "cudaMemset"),
            hipIpcGetMemHandle: need!(hipIpcGetMemHandle, "cudaIpcGetMemHandle"),
            hipIpcOpenMemHandle: need!(hipIpcOpenMemHandle, "cudaIpcOpenMemHandle"),
            hipIpcCloseMemHandle: need!(hipIpcCloseMemHandle, "cudaIpcCloseMemHandle"),
            hipHostRegister: need!(hipHostRegister, "cudaHostRegister"),
            hipHostUnregister: need!(hipHostUnregister, "cudaHostUnregister"),
            hipHostGetDevicePointer: need!(hipHostGetDevicePointer, "cudaHostGetDevicePointer"),
            export_dmabuf,
        };
        Ok(Self {
            f,
            runtime,
            path,
            _lib: lib,
        })
    }

    /// Which runtime this is.
    pub fn runtime(&self) -> Runtime {
        self.runtime
    }

    /// Whether a release that returned `code` is worth a line on stderr: not success, and not
    /// the runtime already torn down at process exit (`hipErrorDeinitialized`,
    /// `cudaErrorCudartUnloading`: both 4), when the driver frees everything itself.
    pub(crate) fn report_on_drop(code: Status) -> bool {
        code != 0 && code != 4
    }

    /// `call` (a HIP name) as this runtime names it, for errors.
    fn call_name(&self, call: &'static str) -> &'static str {
        if self.runtime == Runtime::Hip {
            return call;
        }
        match call {
            "hipGetDeviceCount" => "cudaGetDeviceCount",
            "hipSetDevice" => "cudaSetDevice",
            "hipDeviceGetPCIBusId" => "cudaDeviceGetPCIBusId",
            "hipRuntimeGetVersion" => "cudaRuntimeGetVersion",
            "hipMemcpy" => "cudaMemcpy",
            "hipMemset" => "cudaMemset",
            "hipIpcGetMemHandle" => "cudaIpcGetMemHandle",
            "hipIpcOpenMemHandle" => "cudaIpcOpenMemHandle",
            "hipHostRegister" => "cudaHostRegister",
            "hipHostGetDevicePointer" => "cudaHostGetDevicePointer",
            other => other,
        }
    }

    /// `hipExtMallocWithFlags`, or why this runtime cannot give device memory gda's host code
    /// and the NIC read.
    pub(crate) fn fine_grained_malloc(
        &self,
    ) -> Result<unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> Status, HipError> {
        self.f.hipExtMallocWithFlags.ok_or_else(|| {
            HipError::Unsupported(format!(
                "a GPU heap and rings in device memory need memory the host and the NIC read \
                 coherently, which is AMD's fine-grained memory; {} is {}'s runtime, whose \
                 device memory the host cannot address: use host memory (GDA_SHMEM_HEAP=host), \
                 which gda maps for the GPU",
                self.path,
                self.runtime.vendor()
            ))
        })
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
        let call = self.call_name(call);
        let what = self.words(code);
        if NO_DEVICE.contains(&code) {
            return Err(HipError::NoGpu {
                call,
                what,
                runtime: self.runtime,
            });
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
                call: self.call_name("hipGetDeviceCount"),
                what: "0 devices".into(),
                runtime: self.runtime,
            });
        }
        (0..n)
            .map(|i| {
                let mut name = [0 as c_char; 256];
                let mut pci = [0 as c_char; 64];
                if let Some(get_name) = self.f.hipDeviceGetName {
                    // SAFETY: an output buffer of the size given.
                    let r = unsafe { get_name(name.as_mut_ptr(), 256, i) };
                    self.check("hipDeviceGetName", r, format!(" (device {i})"))?;
                } else if let Some(props) = self.f.props {
                    // `cudaDeviceProp` is about 1 KiB in CUDA 12 and 13; 8 KiB leaves room
                    // for growth. Its first field is `char name[256]`.
                    let mut p = vec![0u64; 1024];
                    // SAFETY: an output buffer larger than the structure.
                    let r = unsafe { props(p.as_mut_ptr().cast(), i) };
                    self.check("cudaGetDeviceProperties", r, format!(" (device {i})"))?;
                    let bytes: &[u8] = bytemuck::cast_slice(&p[..32]);
                    for (d, s) in name.iter_mut().zip(bytes) {
                        *d = *s as c_char;
                    }
                    name[255] = 0;
                }
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
