//! The SHMEM device context: what a kernel (or a CPU thread standing in for one) needs to call
//! the device API (`device/include/gda/shmem.hpp`) as this PE — its routes to every PE, the
//! RDMA queues it shares with this PE's host code, keys, and the device work area.
//!
//! [`DeviceCtx`] and [`DevicePeer`] are the C layout of `gda::shmem::Ctx` and `gda::shmem::Peer`;
//! both sides assert sizes and offsets, and testing/rdma-ref's `device_shmem` test compares
//! them. A context names this PE's mappings and queues: it is valid for as long as the `Pe`
//! that built it ([`Pe::device_context`](crate::Pe::device_context)) and in this address space only.
//!
//! The work area (the last [`WORK_BYTES`] of the PE's segment, beyond the host's staging) holds
//! the device collectives' sync words and the staging slots device routines use for sources,
//! destinations and atomic results the NIC cannot reach in place. Its layout is
//! `gda::shmem::work` in the header.

use std::cell::OnceCell;

/// The context layout's version (`gda::shmem::ABI_VERSION`).
pub const ABI_VERSION: u32 = 2;

/// Bytes of the device work area at the end of every PE's segment.
pub const WORK_BYTES: usize = 1 << 20;
/// Where the staging slots start in the work area (`gda::shmem::work::STAGING`).
const STAGING_AT: usize = 4096;
/// Staging slot size and count.
pub(crate) const SLOT_BYTES: usize = 16 << 10;
pub(crate) const SLOTS: usize = (WORK_BYTES - STAGING_AT) / SLOT_BYTES;

/// How this PE reaches a peer (`gda::shmem::Route`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRoute {
    /// No route (never in a built context).
    None = 0,
    /// The peer's segment is mapped here.
    P2p = 1,
    /// Through the NIC.
    Rdma = 2,
}

/// One PE as the device sees it (`gda::shmem::Peer`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DevicePeer {
    /// [`DeviceRoute`] as a number.
    pub route: u32,
    /// RDMA: the key of the peer's segment.
    pub rkey: u32,
    /// P2P: the peer's segment mapped here; RDMA: its address in the peer's address space.
    pub base: u64,
}

/// The device context (`gda::shmem::Ctx`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeviceCtx {
    /// [`ABI_VERSION`].
    pub abi: u32,
    /// `size_of::<DeviceCtx>()`.
    pub size: u32,
    /// This PE.
    pub my_pe: u32,
    /// PEs in the job.
    pub n_pes: u32,
    /// The RDMA queues' provider (`Provider::DEVICE_TAG`; 0 without RDMA routes).
    pub provider: u32,
    /// Bytes from one PE's queue to the next in `queues`.
    pub queue_bytes: u32,
    /// This PE's segment key (RDMA sources, destinations, results).
    pub lkey: u32,
    /// Staging slots in the work area.
    pub staging_slots: u32,
    /// This PE's segment in this address space.
    pub local_base: u64,
    /// Bytes of the symmetric heap (the segment's start).
    pub heap_bytes: u64,
    /// Bytes of the whole segment.
    pub seg_bytes: u64,
    /// Address of `DevicePeer[n_pes]`.
    pub peers: u64,
    /// Address of PE 0's queue (`gda_hal::SqDevice<P::Sq>`); PE j's is `j * queue_bytes` on.
    pub queues: u64,
    /// Segment offset of the work area.
    pub work: u64,
    /// Bytes per staging slot.
    pub staging_slot_bytes: u64,
    /// Bound of every device-side wait, in nanoseconds.
    pub timeout_ns: u64,
    /// Host only: `fn(arg)` that wakes the software NIC's engine after a post (0: none; a GPU
    /// never calls it: the engine serves device doorbells without it).
    pub kick_fn: u64,
    /// Its argument.
    pub kick_arg: u64,
    /// [`ContextMemory`] as a number: where this context, its arrays, the queues' state and
    /// rings are.
    pub memory: u32,
    /// Zero.
    pub reserved: u32,
}

/// Where a device context lives (`gda::shmem::Memory`), with the state it points at: the
/// arrays, each RDMA queue's protocol state, rings and doorbell records.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextMemory {
    /// Host memory of this process: code on CPU threads uses it as is; a GPU kernel needs it
    /// mapped (`hipHostRegister`/`cudaHostRegister`).
    Host = 0,
    /// The memory of the PE's heap and queues placed by a caller's allocator (GPU memory with
    /// a GPU heap), with each doorbell mapped for the device: a kernel uses it as is.
    Device = 1,
    /// Host memory of this process that is also mapped for this process's GPU at the same
    /// addresses (`hip` feature, a host heap, a GPU present): the context, its arrays, the
    /// heap, every mapped peer heap, and each RDMA queue's ring, records, table, protocol
    /// state and doorbell. A kernel uses it as is.
    Mapped = 2,
}

// The layout `gda::shmem::Ctx` and `Peer` assert too (tests/device_abi.rs compares every
// offset with the C++ compiler's).
mod layout {
    use super::{DeviceCtx, DevicePeer};
    use static_assertions::{assert_eq_size, const_assert_eq};
    use std::mem::offset_of;
    assert_eq_size!(DevicePeer, [u8; 16]);
    const_assert_eq!(offset_of!(DevicePeer, base), 8);
    assert_eq_size!(DeviceCtx, [u8; 120]);
    const_assert_eq!(offset_of!(DeviceCtx, memory), 112);
    const_assert_eq!(offset_of!(DeviceCtx, local_base), 32);
    const_assert_eq!(offset_of!(DeviceCtx, peers), 56);
    const_assert_eq!(offset_of!(DeviceCtx, work), 72);
    const_assert_eq!(offset_of!(DeviceCtx, timeout_ns), 88);
    const_assert_eq!(offset_of!(DeviceCtx, kick_fn), 96);
}

impl DeviceCtx {
    /// The size and every field offset, in declaration order (the layout test compares these
    /// with the C++ compiler's).
    pub const LAYOUT: [usize; 21] = {
        use std::mem::offset_of;
        [
            size_of::<Self>(),
            offset_of!(Self, size),
            offset_of!(Self, my_pe),
            offset_of!(Self, n_pes),
            offset_of!(Self, provider),
            offset_of!(Self, queue_bytes),
            offset_of!(Self, lkey),
            offset_of!(Self, staging_slots),
            offset_of!(Self, local_base),
            offset_of!(Self, heap_bytes),
            offset_of!(Self, seg_bytes),
            offset_of!(Self, peers),
            offset_of!(Self, queues),
            offset_of!(Self, work),
            offset_of!(Self, staging_slot_bytes),
            offset_of!(Self, timeout_ns),
            offset_of!(Self, kick_fn),
            offset_of!(Self, kick_arg),
            offset_of!(Self, memory),
            offset_of!(Self, reserved),
            size_of::<DevicePeer>(),
        ]
    };
}

/// One block holding a context, then its `DevicePeer[n]`, then its queues: host words, or
/// memory the PE's queue allocator placed.
pub(crate) enum Block {
    /// `u64` words, so every part is 8-byte aligned.
    Host(Vec<u64>),
    Placed(gda_hal::control::PlacedBuffer),
}

impl Block {
    pub(crate) fn as_ptr(&self) -> *const u8 {
        match self {
            Self::Host(v) => v.as_ptr().cast(),
            Self::Placed(b) => b.as_ptr().as_ptr(),
        }
    }
}

/// A built context with what it points at (kept by the `Pe`, dropped before its NIC).
pub(crate) struct DeviceContext {
    /// Host memory mapped for the GPU (dropped first: the unmapping precedes the frees).
    #[cfg(feature = "hip")]
    pub(crate) _mapped: Option<gda_hip::HostMapping>,
    pub(crate) block: Block,
    /// The queues' doorbells as device code addresses them.
    pub(crate) _doorbells: Vec<gda_hal::control::DeviceDoorbell>,
    pub(crate) _kick: Option<Box<crate::domain::Nudge>>,
}

impl DeviceContext {
    pub(crate) fn ctx(&self) -> &DeviceCtx {
        // SAFETY: the block starts with an initialised, 8-byte aligned `DeviceCtx` (written by
        // `Pe::device_context` before this value was made) and lives as long as `self`.
        unsafe { &*self.block.as_ptr().cast::<DeviceCtx>() }
    }
}

/// The C entry of [`DeviceCtx::kick_fn`].
pub(crate) unsafe extern "C" fn kick(arg: *const crate::domain::Nudge) {
    // SAFETY: `arg` is the context's boxed nudge, alive while the context is (the caller of the
    // context's `kick_fn` uses it only while the `Pe` lives).
    if let Some(n) = unsafe { arg.as_ref() } {
        n();
    }
}

/// Where the work area starts in a segment of `total` bytes.
pub(crate) const fn work_offset(total: usize) -> usize {
    total - WORK_BYTES
}

pub(crate) type Cell = OnceCell<DeviceContext>;
