//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_alloc_parent_domain` (queue
//! memory from the program's allocator), `ibv_reg_mr` (+ `_iova2`, `ibv_reg_dmabuf_mr`),
//! `ibv_dereg_mr`, `ibv_dealloc_pd`.
//!
//! As a kernel driver: registration checks that the range is mapped (`EFAULT` otherwise — the
//! software NIC touches the memory from its engine thread, so an unmapped page must be refused
//! here, not found later), refuses remote-write or atomic rights without `LOCAL_WRITE`
//! (`EINVAL`), and a PD with regions or QPs still on it is not deallocated (`EBUSY`).

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use std::ptr::NonNull;
use std::sync::Arc;

use gda_hal::control::{Access, QueueAllocator, QueueBuffer};
use ibverbs_sys as sys;

use crate::abi::{Errno, Handle, guard, handle, ret_code, ret_ptr};
use crate::device::Context;

const PD_MAGIC: u64 = 0x6764_6176_5f70_6400; // "gdav_pd"
const MR_MAGIC: u64 = 0x6764_6176_5f6d_7200; // "gdav_mr"

/// A protection domain: `ibv_pd` first, so the pointer programs hold is ours.
#[repr(C)]
pub(crate) struct Pd {
    /// What programs see.
    ibv: sys::ibv_pd,
    magic: u64,
    /// The context it belongs to.
    pub(crate) ctx: &'static Context,
    /// The software NIC's PD.
    pub(crate) sim: gda_sim::Pd,
    /// MRs, QPs and CQs on it (deallocation is refused while any is alive).
    pub(crate) users: AtomicU32,
    /// For a parent domain: the PD it extends and the program's queue allocator.
    parent: Option<Parent>,
}

/// What makes a PD a parent domain.
struct Parent {
    /// The protection domain it extends (its `users` counts this domain).
    of: &'static Pd,
    /// Where its queues' memory comes from (`None`: the library's own, as without allocators).
    memory: gda_hal::control::QueueMemory,
}

impl Pd {
    /// Its number (`pdn`).
    pub(crate) fn number(&self) -> u32 {
        self.ibv.handle
    }

    /// Whether it is a parent domain (`ibv_alloc_parent_domain`).
    pub(crate) fn is_parent_domain(&self) -> bool {
        self.parent.is_some()
    }

    /// Where queues created on this PD keep their rings.
    pub(crate) fn queue_memory(&self) -> gda_hal::control::QueueMemory {
        self.parent
            .as_ref()
            .map_or(gda_hal::control::QueueMemory::Provider, |p| {
                p.memory.clone()
            })
    }
}

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`, `_PD_CONTEXT`.
const PARENT_ALLOCATORS: u32 = 1 << 0;
const PARENT_PD_CONTEXT: u32 = 1 << 1;
/// `IBV_ALLOCATOR_USE_DEFAULT`.
const USE_DEFAULT: *mut c_void = usize::MAX as *mut c_void;

type CAllocFn =
    unsafe extern "C" fn(*mut sys::ibv_pd, *mut c_void, usize, usize, u64) -> *mut c_void;
type CFreeFn = unsafe extern "C" fn(*mut sys::ibv_pd, *mut c_void, *mut c_void, u64);

/// The program's `alloc`/`free` callbacks as the software NIC's [`QueueAllocator`]: each
/// buffer is asked for with rdma-core's mlx5 resource type (the SQ and RQ rings are one
/// `MLX5DV_RES_TYPE_QP` buffer each here, the doorbell record `_DBR`, a CQ ring `_CQ`); an
/// answer of `IBV_ALLOCATOR_USE_DEFAULT` makes this library allocate it, as rdma-core does.
struct CAlloc {
    pd: usize,
    ctx: usize,
    alloc: CAllocFn,
    free: CFreeFn,
    /// Buffers this library allocated itself (`IBV_ALLOCATOR_USE_DEFAULT`), with their layout.
    own: std::sync::Mutex<std::collections::HashMap<usize, std::alloc::Layout>>,
}

impl std::fmt::Debug for CAlloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CAlloc")
            .field("pd", &self.pd)
            .finish_non_exhaustive()
    }
}

/// rdma-core's resource type of `what`; `None` for the buffers rdma-core has no type for
/// (the posting-protocol state and device contexts), which this library allocates itself.
fn res_type(what: QueueBuffer) -> Option<u64> {
    use gda_rdma::res_type::*;
    match what {
        QueueBuffer::SendQueue | QueueBuffer::RecvQueue => Some(MLX5_QP),
        QueueBuffer::DoorbellRecord => Some(MLX5_DBR),
        QueueBuffer::CompletionQueue => Some(MLX5_CQ),
        QueueBuffer::SendState | QueueBuffer::DeviceContext => None,
    }
}

impl QueueAllocator for CAlloc {
    fn alloc(&self, what: QueueBuffer, len: usize, align: usize) -> Option<NonNull<u8>> {
        let p = match res_type(what) {
            // SAFETY: the program's callback with the arguments rdma-core passes.
            Some(t) => unsafe {
                (self.alloc)(
                    self.pd as *mut sys::ibv_pd,
                    self.ctx as *mut c_void,
                    len,
                    align,
                    t,
                )
            },
            None => USE_DEFAULT,
        };
        if p == USE_DEFAULT {
            let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(1)).ok()?;
            // SAFETY: a non-zero layout.
            let own = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })?;
            self.own
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(own.as_ptr() as usize, layout);
            return Some(own);
        }
        NonNull::new(p.cast())
    }

    unsafe fn free(&self, what: QueueBuffer, ptr: NonNull<u8>, _len: usize) {
        let mine = self
            .own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(ptr.as_ptr() as usize));
        if let Some(layout) = mine {
            // SAFETY: allocated in `alloc` with this layout.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) };
            return;
        }
        // Buffers without a resource type were all allocated here (above).
        let Some(t) = res_type(what) else { return };
        // SAFETY: the program's callback, for memory it gave.
        unsafe {
            (self.free)(
                self.pd as *mut sys::ibv_pd,
                self.ctx as *mut c_void,
                ptr.as_ptr().cast(),
                t,
            )
        };
    }
}

impl Pd {
    /// The PD behind `pd`.
    ///
    /// # Safety
    /// `pd` is null or points to an `ibv_pd` that is alive.
    pub(crate) unsafe fn from_ibv<'a>(pd: *mut sys::ibv_pd) -> Result<&'a Pd, Errno> {
        // SAFETY: the caller's contract.
        unsafe { handle(pd.cast()) }
    }
}

// SAFETY: repr(C) with `ibv_pd` first; `magic` follows it.
unsafe impl Handle for Pd {
    const TAG: u64 = PD_MAGIC;
    const WHAT: &'static str = "PD";
    fn tag(&self) -> u64 {
        self.magic
    }
}

#[unsafe(no_mangle)]
/// `ibv_alloc_pd`.
pub unsafe extern "C" fn gdav_ibv_alloc_pd(ctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    guard("ibv_alloc_pd", std::ptr::null_mut(), || {
        let r = (|| {
            // SAFETY: the caller's context (checked).
            let c: &'static Context = unsafe { Context::from_ibv(ctx) }?;
            let sim = c.dev.nic.alloc_pd();
            let pd = Box::new(Pd {
                ibv: sys::ibv_pd {
                    context: c.ibv(),
                    handle: sim.id(),
                },
                magic: PD_MAGIC,
                ctx: c,
                sim,
                users: AtomicU32::new(0),
                parent: None,
            });
            c.retain();
            Ok(Box::into_raw(pd).cast::<sys::ibv_pd>())
        })();
        ret_ptr("ibv_alloc_pd", r)
    })
}

/// `ibv_alloc_parent_domain` (through `verbs_context`): a PD whose CQs (`ibv_create_cq_ex`
/// with `IBV_CQ_INIT_ATTR_MASK_PD`) and QPs take their rings and doorbell records from the
/// program's allocator. Thread domains are not supported (`EOPNOTSUPP`); the PD it extends
/// is busy until it is deallocated.
pub(crate) unsafe extern "C" fn alloc_parent_domain(
    ctx: *mut sys::ibv_context,
    attr: *mut sys::ibv_parent_domain_init_attr,
) -> *mut sys::ibv_pd {
    guard("ibv_alloc_parent_domain", std::ptr::null_mut(), || {
        let r = (|| {
            // SAFETY: the caller's context (checked).
            let c: &'static Context = unsafe { Context::from_ibv(ctx) }?;
            if attr.is_null() {
                return Err(Errno::inval("null attr"));
            }
            // SAFETY: checked non-null; the caller's struct.
            let a = unsafe { &*attr };
            // SAFETY: the caller's PD (checked).
            let of: &'static Pd = unsafe { Pd::from_ibv(a.pd) }?;
            if !std::ptr::eq(of.ctx, c) {
                return Err(Errno::inval("attr.pd belongs to another context"));
            }
            if of.parent.is_some() {
                return Err(Errno::inval("attr.pd is itself a parent domain"));
            }
            if !a.td.is_null() {
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    "thread domains are not supported",
                ));
            }
            if a.comp_mask & !(PARENT_ALLOCATORS | PARENT_PD_CONTEXT) != 0 {
                return Err(Errno::new(
                    libc::EOPNOTSUPP,
                    format!("comp_mask {:#x}", a.comp_mask),
                ));
            }
            let memory = if a.comp_mask & PARENT_ALLOCATORS != 0 {
                let (Some(alloc), Some(free)) = (a.alloc, a.free) else {
                    return Err(Errno::inval(
                        "IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS without alloc and free",
                    ));
                };
                Some((alloc, free))
            } else {
                None
            };
            let user = if a.comp_mask & PARENT_PD_CONTEXT != 0 {
                a.pd_context as usize
            } else {
                0
            };
            let pd = Box::into_raw(Box::new(Pd {
                ibv: sys::ibv_pd {
                    context: c.ibv(),
                    handle: of.ibv.handle,
                },
                magic: PD_MAGIC,
                ctx: c,
                sim: of.sim.clone(),
                users: AtomicU32::new(0),
                parent: None,
            }));
            let memory = match memory {
                None => gda_hal::control::QueueMemory::Provider,
                Some((alloc, free)) => gda_hal::control::QueueMemory::Caller(Arc::new(CAlloc {
                    pd: pd as usize,
                    ctx: user,
                    alloc,
                    free,
                    own: std::sync::Mutex::new(std::collections::HashMap::new()),
                })),
            };
            // SAFETY: just made, not shared yet.
            unsafe { (*pd).parent = Some(Parent { of, memory }) };
            of.users.fetch_add(1, Ordering::AcqRel);
            c.retain();
            Ok(pd.cast::<sys::ibv_pd>())
        })();
        ret_ptr("ibv_alloc_parent_domain", r)
    })
}

#[unsafe(no_mangle)]
/// `ibv_dealloc_pd`: `EBUSY` while regions or QPs use it.
pub unsafe extern "C" fn gdav_ibv_dealloc_pd(pd: *mut sys::ibv_pd) -> c_int {
    guard("ibv_dealloc_pd", libc::EIO, || {
        let r = (|| {
            // SAFETY: the caller's PD (checked).
            let p = unsafe { Pd::from_ibv(pd) }?;
            let users = p.users.load(Ordering::Acquire);
            if users > 0 {
                return Err(Errno::new(
                    libc::EBUSY,
                    format!("PD {} still has {users} MRs/QPs", p.ibv.handle),
                ));
            }
            let ctx = p.ctx;
            if let Some(parent) = &p.parent {
                parent.of.users.fetch_sub(1, Ordering::AcqRel);
            }
            // SAFETY: made by Box::into_raw in `ibv_alloc_pd`; the magic is cleared so a second
            // dealloc of the same pointer is refused rather than freed twice (best effort).
            unsafe {
                (*pd.cast::<Pd>()).magic = 0;
                drop(Box::from_raw(pd.cast::<Pd>()));
            }
            ctx.release();
            Ok(())
        })();
        ret_code("ibv_dealloc_pd", r)
    })
}

/// A memory region: `ibv_mr` first.
#[repr(C)]
struct Mr {
    /// What programs see.
    ibv: sys::ibv_mr,
    magic: u64,
    pd: &'static Pd,
    // Dropped in this order: the keys first, then the mapping they pointed into.
    _sim: gda_sim::Mr,
    _mapping: Option<Mapping>,
}

/// `IBV_ACCESS_*` bits this device accepts (`LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ`,
/// `REMOTE_ATOMIC`, `MW_BIND`, `ZERO_BASED` are refused below when unsupported; the optional
/// range `IBV_ACCESS_OPTIONAL_RANGE` (bits 20..29) is ignored as the kernel ignores it).
const ACCESS_KNOWN: c_uint = 0xf | (1 << 4);
const ACCESS_OPTIONAL_RANGE: c_uint = 0x3ff0_0000;
/// `IBV_ACCESS_RELAXED_ORDERING`: an optional bit every device may ignore.
const ACCESS_RELAXED_ORDERING: c_uint = 1 << 20;

/// The rights `access` asks for, as the kernel checks them.
fn access_of(access: c_uint) -> Result<Access, Errno> {
    let required = access & !ACCESS_OPTIONAL_RANGE;
    if required & !ACCESS_KNOWN != 0 {
        return Err(Errno::inval(format!(
            "access flags {access:#x}: bits {:#x} are not supported by this device",
            required & !ACCESS_KNOWN
        )));
    }
    let a = Access::from_bits_truncate(required & 0xf);
    if a.intersects(Access::NEEDS_LOCAL_WRITE) && !a.contains(Access::LOCAL_WRITE) {
        return Err(Errno::inval(format!(
            "access flags {access:#x}: REMOTE_WRITE or REMOTE_ATOMIC need LOCAL_WRITE"
        )));
    }
    let _ = ACCESS_RELAXED_ORDERING;
    Ok(a)
}

/// Whether every page of `[addr, addr + len)` is mapped in this process.
pub(crate) fn mapped(addr: u64, len: usize) -> bool {
    let page = 4096u64;
    let start = addr & !(page - 1);
    let Some(end) = addr.checked_add(len as u64) else {
        return false;
    };
    let span = (end - start).div_ceil(page) as usize;
    let mut vec = vec![0u8; span.max(1)];
    // SAFETY: mincore only reads the page tables of the range and writes `span` bytes to `vec`;
    // it fails with ENOMEM for a range with an unmapped page.
    unsafe {
        libc::mincore(
            start as *mut c_void,
            (end - start) as usize,
            vec.as_mut_ptr(),
        ) == 0
    }
}

fn reg(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> Result<*mut sys::ibv_mr, Errno> {
    // SAFETY: the caller's PD (checked).
    let p: &'static Pd = unsafe { Pd::from_ibv(pd) }?;
    let rights = access_of(access)?;
    if len == 0 {
        return Err(Errno::inval("zero-length region"));
    }
    if iova != addr as u64 {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!(
                "iova {iova:#x} differs from the address {:#x}: the software NIC addresses registered memory by its virtual address",
                addr as u64
            ),
        ));
    }
    if addr.is_null() || !mapped(addr as u64, len) {
        return Err(Errno::new(
            libc::EFAULT,
            format!("[{:#x}, +{len}) is not mapped in this process", addr as u64),
        ));
    }
    // SAFETY: the range is mapped now; verbs makes the caller keep it valid until
    // `ibv_dereg_mr` (as pinned memory on a real NIC).
    let sim = unsafe { p.sim.register(addr as u64, len, rights) };
    let mr = Box::new(Mr {
        ibv: sys::ibv_mr {
            context: p.ctx.ibv(),
            pd,
            addr,
            length: len,
            handle: sim.lkey(),
            lkey: sim.lkey(),
            rkey: sim.rkey(),
        },
        magic: MR_MAGIC,
        pd: p,
        _sim: sim,
        _mapping: None,
    });
    p.users.fetch_add(1, Ordering::AcqRel);
    Ok(Box::into_raw(mr).cast())
}

#[unsafe(no_mangle)]
/// `ibv_reg_mr`.
pub unsafe extern "C" fn gdav_ibv_reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut sys::ibv_mr {
    guard("ibv_reg_mr", std::ptr::null_mut(), || {
        ret_ptr(
            "ibv_reg_mr",
            reg(pd, addr, len, addr as u64, access as c_uint),
        )
    })
}

#[unsafe(no_mangle)]
/// `ibv_reg_mr_iova2` (`ibv_reg_mr` with optional access bits, `ibv_reg_mr_iova`).
pub unsafe extern "C" fn gdav_ibv_reg_mr_iova2(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut sys::ibv_mr {
    guard("ibv_reg_mr_iova2", std::ptr::null_mut(), || {
        ret_ptr("ibv_reg_mr_iova2", reg(pd, addr, len, iova, access))
    })
}

#[unsafe(no_mangle)]
/// `ibv_reg_dmabuf_mr`: registers `len` bytes at `offset` of the dma-buf `fd`, reachable at
/// `iova`.
///
/// As a kernel driver: a bad fd is `EBADF`, an fd that is not a dma-buf `EINVAL`. The software
/// NIC addresses registered memory by virtual address, so the buffer is mapped (`mmap` of the
/// dma-buf, `MAP_FIXED_NOREPLACE`) at exactly `iova`; an iova range already in use in this
/// process is `EINVAL`, saying so. The mapping lives as long as the region.
pub unsafe extern "C" fn gdav_ibv_reg_dmabuf_mr(
    pd: *mut sys::ibv_pd,
    offset: u64,
    len: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut sys::ibv_mr {
    guard("ibv_reg_dmabuf_mr", std::ptr::null_mut(), || {
        let r =
            dmabuf_kind(fd).and_then(|()| reg_mapped(pd, offset, len, iova, fd, access as c_uint));
        ret_ptr("ibv_reg_dmabuf_mr", r)
    })
}

/// Whether `fd` is a dma-buf: the kernel names dma-buf files `anon_inode:dmabuf` (older
/// kernels) or `/dmabuf:<name>`.
fn dmabuf_kind(fd: c_int) -> Result<(), Errno> {
    if fd < 0 {
        return Err(Errno::new(libc::EBADF, format!("fd {fd}")));
    }
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map_err(|_| Errno::new(libc::EBADF, format!("fd {fd} is not open")))?;
    let name = link.to_string_lossy();
    if !name.starts_with("anon_inode:dmabuf") && !name.starts_with("/dmabuf:") {
        return Err(Errno::inval(format!("fd {fd} ({name}) is not a dma-buf")));
    }
    Ok(())
}

/// A mapping this library made for a region (unmapped when the region is deregistered).
struct Mapping {
    addr: *mut c_void,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: a mapping made by `reg_mapped`, no longer registered (the region's keys are
        // removed first: `Mr` drops `_sim` before `_mapping`).
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Maps `len` bytes at `offset` of `fd` at `iova` and registers them (the dma-buf path after
/// the fd's kind was checked).
fn reg_mapped(
    pd: *mut sys::ibv_pd,
    offset: u64,
    len: usize,
    iova: u64,
    fd: c_int,
    access: c_uint,
) -> Result<*mut sys::ibv_mr, Errno> {
    // SAFETY: the caller's PD (checked).
    unsafe { Pd::from_ibv(pd) }?;
    access_of(access)?;
    if len == 0 {
        return Err(Errno::inval("zero-length region"));
    }
    let page = 4096u64;
    if iova == 0 || iova % page != offset % page {
        return Err(Errno::inval(format!(
            "iova {iova:#x} must be non-zero and have the page offset of offset {offset:#x}"
        )));
    }
    let at = iova - iova % page;
    let map_len = (iova % page)
        .checked_add(len as u64)
        .map(|n| n.div_ceil(page) * page)
        .filter(|&n| at.checked_add(n).is_some())
        .ok_or_else(|| Errno::inval(format!("{len} bytes at iova {iova:#x} overflow")))?;
    // SAFETY: a new shared mapping of the caller's fd; MAP_FIXED_NOREPLACE never replaces an
    // existing mapping (it fails with EEXIST instead).
    let m = unsafe {
        libc::mmap(
            at as *mut c_void,
            map_len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
            fd,
            (offset - offset % page) as libc::off_t,
        )
    };
    if m == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(Errno::inval(format!(
            "cannot map the buffer at iova {iova:#x} ({e}): the software NIC needs that range free in this process"
        )));
    }
    let mapping = Mapping {
        addr: m,
        len: map_len as usize,
    };
    if m as u64 != at {
        // A kernel without MAP_FIXED_NOREPLACE took the address as a hint.
        return Err(Errno::inval(format!(
            "iova {iova:#x} is in use in this process"
        )));
    }
    let mr = reg(pd, iova as *mut c_void, len, iova, access)?;
    // SAFETY: `reg` returned a live `Mr` of ours.
    unsafe { (*mr.cast::<Mr>())._mapping = Some(mapping) };
    Ok(mr)
}

#[unsafe(no_mangle)]
/// `ibv_dereg_mr`: later remote accesses with its rkey fail (`REM_ACCESS_ERR`).
pub unsafe extern "C" fn gdav_ibv_dereg_mr(mr: *mut sys::ibv_mr) -> c_int {
    guard("ibv_dereg_mr", libc::EIO, || {
        let r = (|| {
            if mr.is_null() {
                return Err(Errno::inval("null MR"));
            }
            // SAFETY: `ibv` is the first member of `Mr`; the magic tells ours apart.
            let m = unsafe { &mut *mr.cast::<Mr>() };
            if m.magic != MR_MAGIC {
                return Err(Errno::inval("not an MR of this library"));
            }
            m.magic = 0;
            let pd = m.pd;
            // SAFETY: made by Box::into_raw in `reg`.
            drop(unsafe { Box::from_raw(mr.cast::<Mr>()) });
            pd.users.fetch_sub(1, Ordering::AcqRel);
            Ok(())
        })();
        ret_code("ibv_dereg_mr", r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_rules() {
        let ok = [0, 1, 1 | 2, 1 | 4, 1 | 8, 1 | 2 | 4 | 8, 4, 1 | (1 << 20)];
        let bad = [2, 8, 2 | 4, 1 << 5, 1 << 8, 1 << 15];
        for a in ok {
            assert!(access_of(a).is_ok(), "{a:#x}");
        }
        for a in bad {
            assert_eq!(access_of(a).unwrap_err().code, libc::EINVAL, "{a:#x}");
        }
        assert_eq!(ok.len() + bad.len(), 14);
    }

    /// The dma-buf path after the kind check, on a memfd (no dma-buf exporter exists on
    /// machines without a GPU or udmabuf): the buffer appears at exactly the iova, the region
    /// covers it, and deregistering unmaps it. An fd that is not a dma-buf, and a bad fd, are
    /// refused before anything is mapped.
    #[test]
    fn dmabuf_registration_maps_at_the_iova() {
        use crate::device::gdav_ibv_get_device_list;
        use crate::ops::gdav_ibv_open_device;
        // SAFETY: the library's own entry points, called as a program would.
        unsafe {
            let list = gdav_ibv_get_device_list(std::ptr::null_mut());
            let ctx = gdav_ibv_open_device(*list);
            let pd = gdav_ibv_alloc_pd(ctx);
            assert!(!pd.is_null());
            let fd = libc::memfd_create(c"gda-dmabuf-test".as_ptr(), 0);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, 3 * 4096), 0);
            let msg = b"bytes through the fd";
            assert_eq!(
                libc::pwrite(fd, msg.as_ptr().cast(), msg.len(), 4096 + 100),
                msg.len() as isize
            );
            assert_eq!(dmabuf_kind(fd).unwrap_err().code, libc::EINVAL);
            assert_eq!(dmabuf_kind(-1).unwrap_err().code, libc::EBADF);
            assert_eq!(dmabuf_kind(1_000_000).unwrap_err().code, libc::EBADF);
            // A free iova: find one by mapping and unmapping a scratch range.
            let probe = libc::mmap(
                std::ptr::null_mut(),
                1 << 20,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(probe, libc::MAP_FAILED);
            libc::munmap(probe, 1 << 20);
            let iova = probe as u64 + 100;
            let mr = reg_mapped(pd, 4096 + 100, 2000, iova, fd, 1 | 2).unwrap();
            assert_eq!((*mr).addr as u64, iova);
            assert_eq!(
                std::slice::from_raw_parts(iova as *const u8, msg.len()),
                msg
            );
            // The same range again is refused (in use), nothing replaced.
            let e = reg_mapped(pd, 4096 + 100, 2000, iova, fd, 1).unwrap_err();
            assert_eq!(e.code, libc::EINVAL);
            assert!(e.why.contains("free"), "{}", e.why);
            // A page offset that differs from the buffer's, and iova 0, are refused.
            assert_eq!(
                reg_mapped(pd, 0, 10, iova, fd, 1).unwrap_err().code,
                libc::EINVAL
            );
            assert_eq!(
                reg_mapped(pd, 0, 10, 0, fd, 1).unwrap_err().code,
                libc::EINVAL
            );
            assert_eq!(gdav_ibv_dereg_mr(mr), 0);
            assert!(!mapped(iova, 2000), "deregistering unmaps the buffer");
            libc::close(fd);
            assert_eq!(gdav_ibv_dealloc_pd(pd), 0);
        }
    }

    #[test]
    fn unmapped_memory_is_refused() {
        let v = vec![0u8; 10_000];
        assert!(mapped(v.as_ptr() as u64, v.len()));
        assert!(!mapped(0x10, 16));
        assert!(!mapped(u64::MAX - 8, 100));
    }
}
