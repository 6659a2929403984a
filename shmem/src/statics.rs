//! Symmetric static data: the program's global and `static` variables as symmetric objects.
//!
//! OpenSHMEM programs put to and get from global and `static` variables, not only heap memory:
//! the data and bss of the executable are symmetric by the specification. Every PE runs the
//! same executable, so a variable sits at the same offset from the start of its writable
//! segment on every PE (addresses differ between processes under ASLR, offsets do not).
//!
//! At init, a PE configured with [`Config::static_data`](crate::Config::static_data) makes the
//! range symmetric (`StaticSeg::claim`):
//!
//! 1. a job shared-memory object `data<rank>` (`gda_os::shm`: `O_EXCL`, mode 0600, its memory
//!    reserved) of the range's length receives a copy of its current bytes — of the `.bss`
//!    part only the pages the process has touched (the others are zero in both);
//! 2. the object is mapped over the range (`MAP_FIXED`), so the program's variables now live
//!    in shared memory, at the addresses they always had;
//! 3. same-host peers map it by name (P2P), and the NIC registers it as a second region
//!    (RDMA), exactly as the heap.
//!
//! Offsets at or above `DATA_TAG` name this segment throughout the transports; the heap's
//! offsets are far below it.
//!
//! The range is found from the executable's program headers (`dl_iterate_phdr`): its writable
//! `PT_LOAD` segment, minus the `PT_GNU_RELRO` part the dynamic loader makes read-only (GOT,
//! `.dynamic`, `.init_array`), page-aligned. That is `.data`, `.bss` and whatever the linker
//! put beside them (such as copy-relocated library variables like `stdout`), all copied
//! unchanged. Variables of other shared libraries are not symmetric (as in other OpenSHMEM
//! implementations).

use core::ffi::c_void;

use gda_hal::control::MemoryDesc;
use gda_os::shm::Segment;

use crate::error::{Result, ShmemError};

/// Symmetric offsets at or above this name the static-data segment, at `off - DATA_TAG`.
pub(crate) const DATA_TAG: usize = 1 << 56;

/// A page-aligned range of this process's writable memory to make symmetric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticRange {
    addr: usize,
    len: usize,
    /// First page wholly past the file's bytes (`p_filesz`): from here on the range is
    /// anonymous `.bss`, zero until written.
    bss_from: usize,
    /// Identifies the executable's layout (a hash of its program headers): PEs must run the
    /// same executable, not only one with as much static data.
    fingerprint: u64,
}

impl StaticRange {
    /// The executable's writable data (`.data` and `.bss`; see the module documentation).
    ///
    /// # Safety
    /// A [`Pe`](crate::Pe) initialised with it replaces that memory with a shared copy: until
    /// the init returns, no other thread of this process may write the executable's global
    /// variables (their writes could be lost), and each process may have only one such PE.
    pub unsafe fn executable() -> Result<Self> {
        let mut found = Found::default();
        // SAFETY: the callback only reads the program headers it is given, and stops at the
        // first object (the executable).
        unsafe { libc::dl_iterate_phdr(Some(first_object), (&raw mut found).cast()) };
        let page = rustix::param::page_size();
        let (start, end) = found.range.ok_or_else(|| {
            ShmemError::Config("the executable has no writable segment to make symmetric".into())
        })?;
        let start = match found.relro_end {
            Some(r) if r > start => r,
            _ => start,
        } & !(page - 1);
        let end = end.next_multiple_of(page);
        if end <= start {
            return Err(ShmemError::Config(
                "the executable's writable data is all read-only after relocation".into(),
            ));
        }
        let bss_from = found.file_end.next_multiple_of(page).clamp(start, end);
        Ok(Self {
            addr: start,
            len: end - start,
            bss_from,
            fingerprint: found.fingerprint,
        })
    }

    /// A hash of the executable's program headers (types, offsets, addresses, sizes, flags):
    /// two PEs with different ones run different executables.
    #[must_use]
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// First byte.
    #[must_use]
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never, for a range [`StaticRange::executable`] found).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What the program-header walk found in the executable.
#[derive(Default)]
struct Found {
    /// The writable `PT_LOAD` segment: first and one-past-last byte, relocated.
    range: Option<(usize, usize)>,
    /// End of `PT_GNU_RELRO`, relocated.
    relro_end: Option<usize>,
    /// End of the writable segment's file bytes (`p_vaddr + p_filesz`), relocated.
    file_end: usize,
    /// FNV-1a over every program header's fields except the load address.
    fingerprint: u64,
}

/// `dl_iterate_phdr` callback: records the first object's (the executable's) writable segment.
unsafe extern "C" fn first_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid info for the duration of the call, and `data` is the
    // `Found` passed to `dl_iterate_phdr`.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<Found>()) };
    let phdrs: &[libc::Elf64_Phdr] = if info.dlpi_phdr.is_null() {
        &[]
    } else {
        // SAFETY: `dlpi_phnum` headers at `dlpi_phdr`, valid during the call.
        unsafe { core::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
    };
    let base = info.dlpi_addr as usize;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for ph in phdrs {
        for v in [
            u64::from(ph.p_type),
            u64::from(ph.p_flags),
            ph.p_offset,
            ph.p_vaddr,
            ph.p_filesz,
            ph.p_memsz,
        ] {
            for b in v.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
        }
        let start = base.wrapping_add(ph.p_vaddr as usize);
        let end = start.wrapping_add(ph.p_memsz as usize);
        if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_W != 0 && found.range.is_none() {
            found.range = Some((start, end));
            found.file_end = start.wrapping_add(ph.p_filesz as usize);
        } else if ph.p_type == libc::PT_GNU_RELRO {
            found.relro_end = Some(end);
        }
    }
    found.fingerprint = h;
    1
}

/// Copies `len` bytes at `from` to `to` (a fresh, zero-filled object), skipping the pages at
/// or after `bss_from` the process never touched: they are zero already, and reading them
/// would fault in every page of a large `.bss` (2 GiB: seconds and gigabytes of memory).
///
/// # Safety
/// `from..from + len` is readable memory of this process, `to..to + len` writable, both
/// page-aligned, not overlapping.
unsafe fn copy_touched(from: usize, to: *mut u8, len: usize, bss_from: usize) {
    let page = rustix::param::page_size();
    // One residency byte per page of the bss part, asked for in blocks (mincore's vector).
    const BLOCK: usize = 4096;
    let mut vec = [0u8; BLOCK];
    let data_len = bss_from.saturating_sub(from).min(len);
    // SAFETY: within both ranges (caller).
    unsafe { core::ptr::copy_nonoverlapping(from as *const u8, to, data_len) };
    let mut off = data_len;
    while off < len {
        let pages = ((len - off) / page).min(BLOCK);
        // SAFETY: `vec` holds `pages` bytes; the range is mapped memory of ours (caller).
        let ok =
            unsafe { libc::mincore((from + off) as *mut c_void, pages * page, vec.as_mut_ptr()) }
                == 0;
        for (i, &v) in vec[..pages].iter().enumerate() {
            if !ok || v & 1 != 0 {
                let o = off + i * page;
                // SAFETY: one page within both ranges (caller).
                unsafe { core::ptr::copy_nonoverlapping((from + o) as *const u8, to.add(o), page) };
            }
        }
        off += pages * page;
    }
}

/// Only one PE per process may claim the executable's data.
static CLAIMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This PE's static data, made shared (see the module documentation).
pub(crate) struct StaticSeg {
    seg: Segment,
    addr: *mut u8,
}

impl StaticSeg {
    /// Copies `range` into a new job object `data<me>` and maps it over the range.
    ///
    /// # Safety
    /// As [`StaticRange::executable`]: nothing else writes the range during the call.
    pub(crate) unsafe fn claim(
        range: StaticRange,
        names: &gda_os::shm::JobNames,
        me: u32,
    ) -> Result<Self> {
        use std::sync::atomic::Ordering;
        if CLAIMED.swap(true, Ordering::AcqRel) {
            return Err(ShmemError::Config(
                "symmetric static data is per process: only one PE of a process can have it \
                 (thread PEs cannot)"
                    .into(),
            ));
        }
        let io = |what: &str| {
            let what = format!("PE {me}: {what} ({} bytes at {:#x})", range.len, range.addr);
            move |e| ShmemError::io(what, e)
        };
        let seg = Segment::create(names.job(), &names.what(&format!("data{me}")), range.len)
            .map_err(io("symmetric static data"))?;
        let addr = range.addr as *mut u8;
        // SAFETY: the range is this process's mapped, readable data (found from its program
        // headers), page-aligned; the new object is as long, zero-filled and not yet shared.
        unsafe { copy_touched(range.addr, seg.as_ptr(), range.len, range.bss_from) };
        // SAFETY: the object now holds the range's bytes, and nothing else writes the range
        // during the call (caller): replacing it keeps every variable's value.
        unsafe { seg.map_at(addr) }.map_err(io("mapping the static data over itself"))?;
        Ok(Self { seg, addr })
    }

    /// The program's data (the shared mapping at its own addresses).
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.addr
    }

    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.seg.len()
    }

    /// Maps same-host PE `j`'s static data of `len` bytes.
    pub(crate) fn open_peer(names: &gda_os::shm::JobNames, j: u32, len: usize) -> Result<Segment> {
        Segment::open(names.job(), &names.what(&format!("data{j}")), len)
            .map_err(|e| ShmemError::io(format!("mapping PE {j}'s static data"), e))
    }

    /// The description a NIC registers: the object, at the program's addresses.
    pub(crate) fn nic_desc(&self) -> MemoryDesc<'_> {
        MemoryDesc::SharedHost {
            addr: self.addr,
            len: self.seg.len(),
            object: self.seg.name(),
            offset: 0,
            object_len: self.seg.len(),
        }
    }

    /// Removes the name once every peer has mapped it.
    pub(crate) fn unlink(&self) -> Result<()> {
        self.seg
            .unlink()
            .map_err(|e| ShmemError::io("removing the static data's name", e))
    }
}
