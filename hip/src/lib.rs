//! # gda-hip — AMD GPU memory for gda
//!
//! Device code on an AMD GPU posts to the NIC through rings, a doorbell and data buffers it can
//! reach. This crate gives the control paths and gda-shmem that memory, through HIP loaded at
//! run time (`libamdhip64.so.5`, `GDA_HIP_LIB` overrides; never linked, so the same binary
//! starts on machines without ROCm and says why GPU memory is unavailable):
//!
//! - [`Hip::load`] and [`Hip::gpus`]: the runtime and the GPUs it sees; with none, a
//!   [`HipError::NoGpu`] that says what to check (`/dev/kfd`, render-group membership,
//!   `HIP_VISIBLE_DEVICES`).
//! - [`DeviceBuffer`]: device memory (fine-grained, so the host can initialise rings and the
//!   NIC can poll them coherently), with [`DeviceBuffer::ipc_handle`] and [`IpcMapping::open`]
//!   for same-host peers (the P2P transport), and [`DeviceBuffer::nic_memory`] for
//!   registration: a dma-buf (`hsa_amd_portable_export_dmabuf`, ROCm 5.6+) first, else the
//!   device address itself for a kernel with AMD's peer-memory support.
//! - [`GpuQueueMemory`]: a [`gda_hal::control::QueueAllocator`] that puts a QP's or CQ's rings
//!   and doorbell record in device memory (`QueueMemory::Caller` on any control path).
//! - [`DoorbellMapping`]: the NIC's doorbell page (a ConnectX UAR / BlueFlame register, a Thor2
//!   doorbell page) mapped into the GPU's address space (`hipHostRegister` with
//!   `hipHostRegisterIoMemory`), so device code rings the doorbell itself.
#![deny(unsafe_op_in_unsafe_fn)]

mod memory;
mod runtime;

pub use memory::{
    DeviceBuffer, DoorbellMapping, GpuQueueMemory, HostMapping, IpcHandle, IpcMapping, NicMemory,
};
pub use runtime::{Gpu, Hip, HipError, Runtime};
