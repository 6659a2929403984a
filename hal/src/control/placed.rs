//! State that device code shares with the host, in memory the caller's [`QueueAllocator`]
//! placed: a send queue's posting-protocol state ([`QueueBuffer::SendState`]), a device-API
//! context ([`QueueBuffer::DeviceContext`]), and the doorbell register mapped for the device.
//!
//! With [`QueueMemory::Provider`] none of this is needed (device code runs on CPU threads of
//! this process and reaches ordinary memory and the doorbell as they are), so every helper
//! returns `None` there and the caller keeps its own host allocation.

use core::ptr::NonNull;
use std::format;
use std::sync::Arc;

use super::{ControlError, QueueAllocator, QueueBuffer, QueueMemory};

/// Zeroed bytes from a caller's allocator, returned to it when dropped.
pub struct PlacedBuffer {
    alloc: Arc<dyn QueueAllocator>,
    what: QueueBuffer,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: an allocation only this value frees; the allocator is `Send + Sync`.
unsafe impl Send for PlacedBuffer {}
// SAFETY: as above; `&PlacedBuffer` gives out the address only.
unsafe impl Sync for PlacedBuffer {}

impl core::fmt::Debug for PlacedBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "PlacedBuffer({:?}, {:p}, {} bytes)",
            self.what, self.ptr, self.len
        )
    }
}

impl PlacedBuffer {
    /// The first byte (host-writable, reachable by the device).
    #[must_use]
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Its length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: a placement of 0 bytes is refused).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PlacedBuffer {
    fn drop(&mut self) {
        // SAFETY: from `self.alloc.alloc(self.what, self.len, _)`; whoever placed state here
        // dropped its users first (the owner's field order).
        unsafe { self.alloc.free(self.what, self.ptr, self.len) };
    }
}

/// A doorbell register as device code addresses it; the mapping ends when dropped.
pub struct DeviceDoorbell {
    alloc: Option<Arc<dyn QueueAllocator>>,
    host: u64,
    device: u64,
}

impl core::fmt::Debug for DeviceDoorbell {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DeviceDoorbell({:#x} -> {:#x})", self.host, self.device)
    }
}

impl DeviceDoorbell {
    /// The address device code stores to.
    #[must_use]
    pub fn device_addr(&self) -> u64 {
        self.device
    }
}

impl Drop for DeviceDoorbell {
    fn drop(&mut self) {
        if let Some(a) = &self.alloc {
            // SAFETY: mapped by `a.map_doorbell(self.host)`; the owner drops this after the
            // device code that used it is done (its field order).
            unsafe { a.unmap_doorbell(self.host) };
        }
    }
}

impl QueueMemory {
    /// `len` zeroed bytes aligned to `align` for `what` from the caller's allocator, or
    /// `Ok(None)` for provider memory (the caller uses a host allocation of its own).
    ///
    /// # Errors
    /// [`ControlError::Invalid`] for a zero length or an alignment that is not a power of two;
    /// [`ControlError::NoMemory`] if the allocator has none.
    pub fn place(
        &self,
        what: QueueBuffer,
        len: usize,
        align: usize,
    ) -> Result<Option<PlacedBuffer>, ControlError> {
        let Self::Caller(alloc) = self else {
            return Ok(None);
        };
        if len == 0 || !align.is_power_of_two() {
            return Err(ControlError::Invalid(format!(
                "{what:?}: {len} bytes aligned to {align}"
            )));
        }
        let ptr = alloc.alloc(what, len, align).ok_or_else(|| {
            ControlError::NoMemory(format!("{what:?} of {len} bytes from the queue allocator"))
        })?;
        if ptr.as_ptr() as usize % align != 0 {
            // SAFETY: just allocated, never used.
            unsafe { alloc.free(what, ptr, len) };
            return Err(ControlError::NoMemory(format!(
                "{what:?}: the queue allocator returned {ptr:p}, not aligned to {align}"
            )));
        }
        // SAFETY: `len` bytes the allocator handed out, host-writable (its contract).
        unsafe { ptr.as_ptr().write_bytes(0, len) };
        Ok(Some(PlacedBuffer {
            alloc: alloc.clone(),
            what,
            ptr,
            len,
        }))
    }

    /// The doorbell register at host address `db` as device code of this memory addresses it:
    /// `db` itself for provider memory, else mapped by the caller's allocator.
    ///
    /// # Errors
    /// [`ControlError::Invalid`] for address 0; [`ControlError::NoMemory`] if the allocator
    /// cannot map it.
    pub fn map_doorbell(&self, db: u64) -> Result<DeviceDoorbell, ControlError> {
        if db == 0 {
            return Err(ControlError::Invalid("no doorbell address".into()));
        }
        match self {
            Self::Provider => Ok(DeviceDoorbell {
                alloc: None,
                host: db,
                device: db,
            }),
            Self::Caller(a) => {
                let device = a.map_doorbell(db).ok_or_else(|| {
                    ControlError::NoMemory(format!(
                        "the queue allocator cannot map the doorbell at {db:#x} for the device"
                    ))
                })?;
                Ok(DeviceDoorbell {
                    alloc: Some(a.clone()),
                    host: db,
                    device,
                })
            }
        }
    }
}
