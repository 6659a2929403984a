//! Protection domains and memory regions: `ibv_alloc_pd`, `ibv_reg_mr` (+ `_iova2`,
//! `ibv_reg_dmabuf_mr`), `ibv_dereg_mr`, `ibv_dealloc_pd`.
//!
//! As a kernel driver: registration checks that the range is mapped (`EFAULT` otherwise — the
//! software NIC touches the memory from its engine thread, so an unmapped page must be refused
//! here, not found later), refuses remote-write or atomic rights without `LOCAL_WRITE`
//! (`EINVAL`), and a PD with regions or QPs still on it is not deallocated (`EBUSY`).

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use gda_hal::control::Access;
use ibverbs_sys as sys;

use crate::abi::{Errno, Handle, guard, handle, ret_code, ret_ptr};
use crate::device::Context;

const PD_MAGIC: u64 = 0x6764_6176_5f70_6400; // "gdav_pd"
const MR_MAGIC: u64 = 0x6764_6176_5f6d_7200; // "gdav_mr"

/// A protection domain: `ibv_pd` first, so the pointer programs hold is ours.
#[repr(C)]
pub struct Pd {
    /// What programs see.
    pub ibv: sys::ibv_pd,
    magic: u64,
    /// The context it belongs to.
    pub ctx: &'static Context,
    /// The software NIC's PD.
    pub sim: gda_sim::Pd,
    /// MRs and QPs on it (deallocation is refused while any is alive).
    pub users: AtomicU32,
}

impl Pd {
    /// The PD behind `pd`.
    ///
    /// # Safety
    /// `pd` is null or points to an `ibv_pd` that is alive.
    pub unsafe fn from_ibv<'a>(pd: *mut sys::ibv_pd) -> Result<&'a Pd, Errno> {
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
            });
            c.retain();
            Ok(Box::into_raw(pd).cast::<sys::ibv_pd>())
        })();
        ret_ptr("ibv_alloc_pd", r)
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
pub struct Mr {
    /// What programs see.
    pub ibv: sys::ibv_mr,
    magic: u64,
    pd: &'static Pd,
    _sim: gda_sim::Mr,
}

/// `IBV_ACCESS_*` bits this device accepts (`LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_READ`,
/// `REMOTE_ATOMIC`, `MW_BIND`, `ZERO_BASED` are refused below when unsupported; the optional
/// range `IBV_ACCESS_OPTIONAL_RANGE` (bits 20..29) is ignored as the kernel ignores it).
const ACCESS_KNOWN: c_uint = 0xf | (1 << 4);
const ACCESS_OPTIONAL_RANGE: c_uint = 0x3ff0_0000;
/// `IBV_ACCESS_RELAXED_ORDERING`: an optional bit every device may ignore.
const ACCESS_RELAXED_ORDERING: c_uint = 1 << 20;

/// The rights `access` asks for, as the kernel checks them.
pub fn access_of(access: c_uint) -> Result<Access, Errno> {
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
fn mapped(addr: u64, len: usize) -> bool {
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
/// `ibv_reg_dmabuf_mr`: the software NIC has no device memory to import; `EOPNOTSUPP`, as a
/// driver without dma-buf support returns.
pub unsafe extern "C" fn gdav_ibv_reg_dmabuf_mr(
    pd: *mut sys::ibv_pd,
    _offset: u64,
    _len: usize,
    _iova: u64,
    _fd: c_int,
    access: c_int,
) -> *mut sys::ibv_mr {
    guard("ibv_reg_dmabuf_mr", std::ptr::null_mut(), || {
        let r = (|| {
            // SAFETY: the caller's PD (checked).
            unsafe { Pd::from_ibv(pd) }?;
            access_of(access as c_uint)?;
            Err(Errno::new(
                libc::EOPNOTSUPP,
                "dma-buf registration: the software NIC has no device memory",
            ))
        })();
        ret_ptr("ibv_reg_dmabuf_mr", r)
    })
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

    #[test]
    fn unmapped_memory_is_refused() {
        let v = vec![0u8; 10_000];
        assert!(mapped(v.as_ptr() as u64, v.len()));
        assert!(!mapped(0x10, 16));
        assert!(!mapped(u64::MAX - 8, 100));
    }
}
