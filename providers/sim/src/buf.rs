//! Page-aligned, zeroed memory owned by the software NIC (queue rings, doorbell pages) or handed
//! to users as registered buffers.

use std::alloc::{Layout, alloc_zeroed, dealloc};

/// A zeroed, `align`-aligned allocation that never moves.
#[derive(Debug)]
pub struct DmaBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain memory; all concurrent access goes through `gda_hal::mmio` (atomics
// or DMA copies whose ranges the owner serialises), exactly as a NIC and a CPU share memory.
unsafe impl Send for DmaBuf {}
// SAFETY: as above.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Allocates `len` zeroed bytes (at least 1) aligned to `align` (a power of two).
    ///
    /// # Panics
    /// If the allocator fails or the layout is invalid (an out-of-memory condition).
    #[must_use]
    pub fn new(len: usize, align: usize) -> Self {
        let layout = Layout::from_size_align(len.max(1), align).expect("valid DMA buffer layout");
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Self { ptr, layout }
    }

    /// Address of the first byte.
    #[must_use]
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether the buffer is empty (never: at least one byte is allocated).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Copies `out.len()` bytes starting at `offset` out of the buffer with a raw copy (no
    /// reference to memory other agents are writing). Out-of-range parts are left untouched.
    pub fn read_into(&self, offset: usize, out: &mut [u8]) {
        let len = out.len().min(self.len().saturating_sub(offset));
        // SAFETY: `offset + len <= self.len()`; the source is valid for the life of `self`.
        unsafe {
            gda_hal::mmio::dma_copy(out.as_mut_ptr(), self.ptr.add(offset.min(self.len())), len)
        };
    }

    /// Copies `data` into the buffer at `offset` with a raw copy (the NIC may be reading or
    /// writing other bytes of it: no reference to the buffer is formed). Out-of-range parts
    /// are dropped.
    pub fn write_from(&self, offset: usize, data: &[u8]) {
        let len = data.len().min(self.len().saturating_sub(offset));
        // SAFETY: `offset + len <= self.len()`; the destination is valid for the life of `self`.
        unsafe {
            gda_hal::mmio::dma_copy(self.ptr.add(offset.min(self.len())), data.as_ptr(), len)
        };
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// Queue memory: the NIC's own, or the caller's (`gda_hal::control::QueueMemory::Caller`),
/// zeroed either way and released on drop.
#[derive(Debug)]
pub(crate) enum QueueMem {
    /// The NIC's own buffer.
    Own(DmaBuf),
    /// Memory from the caller's allocator, returned to it on drop.
    Caller {
        ptr: std::ptr::NonNull<u8>,
        len: usize,
        what: gda_hal::control::QueueBuffer,
        alloc: std::sync::Arc<dyn gda_hal::control::QueueAllocator>,
    },
}

// SAFETY: as for `DmaBuf`: plain memory reached only through `gda_hal::mmio`; the allocator is
// `Send + Sync` by its trait bound.
unsafe impl Send for QueueMem {}
// SAFETY: as above.
unsafe impl Sync for QueueMem {}

impl QueueMem {
    /// `len` zeroed bytes aligned to `align` for `what`, from `memory`; an allocator that
    /// refuses, or returns memory that is not aligned, is an error naming the buffer.
    pub(crate) fn new(
        memory: &gda_hal::control::QueueMemory,
        what: gda_hal::control::QueueBuffer,
        len: usize,
        align: usize,
    ) -> Result<Self, String> {
        use gda_hal::control::QueueMemory;
        match memory {
            QueueMemory::Provider => Ok(Self::Own(DmaBuf::new(len, align))),
            QueueMemory::Caller(a) => {
                let len = len.max(1);
                let ptr = a.alloc(what, len, align).ok_or_else(|| {
                    format!("the queue allocator refused {len} bytes for the {what:?}")
                })?;
                let mem = Self::Caller {
                    ptr,
                    len,
                    what,
                    alloc: a.clone(),
                };
                if ptr.as_ptr() as usize % align != 0 {
                    // Dropping `mem` hands the memory back.
                    return Err(format!(
                        "the queue allocator returned {ptr:p} for the {what:?}, not {align}-byte aligned"
                    ));
                }
                // SAFETY: the allocator gave `len` bytes at `ptr` for this queue (its contract);
                // nobody else uses them yet.
                unsafe { gda_hal::sym::sym_fill(ptr.as_ptr(), 0, len) };
                Ok(mem)
            }
        }
    }

    /// Address of the first byte.
    pub(crate) fn addr(&self) -> u64 {
        match self {
            Self::Own(b) => b.addr(),
            Self::Caller { ptr, .. } => ptr.as_ptr() as u64,
        }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Own(b) => b.len(),
            Self::Caller { len, .. } => *len,
        }
    }
}

impl Drop for QueueMem {
    fn drop(&mut self) {
        if let Self::Caller {
            ptr,
            len,
            what,
            alloc,
        } = self
        {
            // SAFETY: `ptr` came from `alloc.alloc(what, len, _)`; the queue that used it is
            // gone (this is its last owner).
            unsafe { alloc.free(*what, *ptr, *len) };
        }
    }
}
