//! Protection domains and the memory regions registered in them.

use std::sync::Arc;

use crate::buf::DmaBuf;
use crate::mem::{Access, Fault, MrInner};
use crate::nic::Nic;
use crate::types::SimError;
use std::sync::atomic::Ordering;

/// A protection domain.
#[derive(Clone, Debug)]
pub struct Pd {
    pub(crate) nic: Nic,
    pub(crate) id: u32,
}

impl Nic {
    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Pd {
        Pd {
            nic: self.clone(),
            id: self.inner.next_pd.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Pd {
    /// The protection domain's number.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The NIC.
    #[must_use]
    pub fn nic(&self) -> &Nic {
        &self.nic
    }

    /// The check this NIC's responder makes before a remote access of `need` to
    /// `[addr, addr + len)` with `rkey` arrives on a QP of this PD: the key must name a live
    /// region of this PD that holds the whole range and grants the access. (The engine runs the
    /// same check for every RDMA WRITE, READ and atomic; a refusal there is a
    /// `REM_ACCESS_ERR` completion and nothing is touched.)
    pub fn remote_access(&self, rkey: u32, addr: u64, len: u64, need: Access) -> Result<(), Fault> {
        self.nic
            .inner
            .mrs
            .check_remote(self.id, rkey, addr, len, need)
            .map(|_| ())
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Mr {
        let buf = DmaBuf::new(len, 4096);
        let (addr, l) = (buf.addr(), len as u64);
        self.insert(addr, l, access, Some(buf), None)
    }

    /// Registers caller memory.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay valid (and not be freed) until the returned [`Mr`] is
    /// dropped; the NIC reads and writes it at any time until then. Dropping the region waits
    /// for a copy in progress, so the memory may be freed right after, even while a peer's
    /// transfer of it runs (that transfer then fails with a remote access error).
    pub unsafe fn register(&self, addr: u64, len: usize, access: Access) -> Mr {
        // On a process fabric, memory peers may reach is moved onto a memfd when it can be
        // (page-aligned private pages), so they can place into it directly.
        let shared = self
            .shareable(access)
            // SAFETY: the caller's memory, kept mapped while registered (the contract).
            .then(|| unsafe { crate::shared::SharedRegion::moved(addr, len as u64) })
            .flatten();
        self.insert(addr, len as u64, access, None, shared)
    }

    /// [`Pd::register`] of memory the program mapped from a file other processes can map: `fd`
    /// (a memfd or a POSIX shared-memory object) from `offset` on, mapped shared and writable at
    /// `[addr, addr + len)`. On a process fabric, peers granted the region map the file
    /// instead of having its pages moved (checked against `/proc/self/maps`; when the mapping is
    /// not that file's, it is registered as [`Pd::register`] would).
    ///
    /// # Safety
    /// As [`Pd::register`].
    pub unsafe fn register_file(
        &self,
        addr: u64,
        len: usize,
        access: Access,
        fd: std::os::fd::OwnedFd,
        offset: u64,
    ) -> Mr {
        let shared = self
            .shareable(access)
            .then(|| crate::shared::SharedRegion::file(addr, len as u64, fd, offset))
            .flatten();
        self.insert(addr, len as u64, access, None, shared)
    }

    /// Whether a region with `access` registered here may be granted to peers for direct
    /// placement: it gives remote READ or WRITE, on a process fabric, with `GDA_SIM_DIRECT` on.
    fn shareable(&self, access: Access) -> bool {
        access.intersects(Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && self.nic.fabric.inner.wire.is_some()
            && crate::shared::enabled()
    }

    fn insert(
        &self,
        addr: u64,
        len: u64,
        access: Access,
        owned: Option<DmaBuf>,
        shared: Option<crate::shared::SharedRegion>,
    ) -> Mr {
        let nic = &self.nic.inner;
        let (mut owned, mut shared) = (owned, shared);
        if shared.is_some() {
            nic.shared_regions.fetch_add(1, Ordering::Relaxed);
        }
        loop {
            let keys = (nic.fresh_key(), nic.fresh_key());
            let mr = Arc::new(MrInner::new(
                self.id,
                addr,
                len,
                access,
                keys,
                owned.take(),
                shared.take(),
            ));
            if nic.mrs.insert(mr.clone()) {
                return Mr {
                    nic: self.nic.clone(),
                    inner: mr,
                };
            }
            // A key raced with another registration: take the memory back and try again.
            if let Ok(m) = Arc::try_unwrap(mr) {
                owned = m._owned;
                shared = m.shared;
            }
        }
    }
}
/// A registered memory region. Dropping it deregisters the keys.
pub struct Mr {
    nic: Nic,
    inner: Arc<MrInner>,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("addr", &format_args!("{:#x}", self.inner.addr))
            .field("len", &self.inner.len)
            .finish()
    }
}

impl Mr {
    /// First byte.
    #[must_use]
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }
    /// Length.
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.len as usize
    }
    /// Whether the region is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }
    /// Local key.
    #[must_use]
    pub fn lkey(&self) -> u32 {
        self.inner.lkey
    }
    /// Remote key.
    #[must_use]
    pub fn rkey(&self) -> u32 {
        self.inner.rkey
    }

    /// The region address of `len` bytes at `offset`, if they lie inside the region
    /// (overflow-checked: a huge `offset` cannot wrap back inside).
    fn span(&self, offset: usize, len: usize, what: &str) -> Result<u64, SimError> {
        offset
            .checked_add(len)
            .filter(|&end| end <= self.len())
            .map(|_| self.addr() + offset as u64)
            .ok_or_else(|| {
                SimError::InvalidArgument(format!(
                    "{what} of {len} bytes at offset {offset} leaves the {}-byte region",
                    self.len()
                ))
            })
    }

    /// Reads `out.len()` bytes at `offset` (the NIC may be writing concurrently; read after the
    /// completion that announces the data). A range outside the region is an error and reads
    /// nothing.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), SimError> {
        let at = self.span(offset, out.len(), "read")?;
        // SAFETY: the range is inside the region, which is valid memory while `self` lives.
        unsafe { gda_hal::mmio::dma_copy(out.as_mut_ptr(), at as *const u8, out.len()) };
        Ok(())
    }

    /// Writes `data` at `offset`. A range outside the region is an error and writes nothing.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), SimError> {
        let at = self.span(offset, data.len(), "write")?;
        // SAFETY: as above.
        unsafe { gda_hal::mmio::dma_copy(at as *mut u8, data.as_ptr(), data.len()) };
        Ok(())
    }
}

impl Drop for Mr {
    /// Deregisters: the keys go stale at once, and a DMA access still copying from or into the
    /// region finishes its chunk (at most `DMA_CHUNK_BYTES`) before this returns — after that the
    /// caller may free registered memory; the rest of such a transfer fails as with a stale key.
    fn drop(&mut self) {
        self.nic.inner.mrs.remove(self.inner.lkey, self.inner.rkey);
        self.inner.retire();
    }
}
