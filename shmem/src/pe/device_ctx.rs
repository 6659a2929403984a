//! [`Pe::device_context`]: the SHMEM device context of this PE (`crate::device`).

use gda_hal::Provider;

use super::Pe;
use crate::device::{
    ABI_VERSION, DeviceContext, DeviceCtx, DevicePeer, DeviceRoute, SLOT_BYTES, SLOTS, WORK_BYTES,
    kick,
};
use crate::error::{Result, ShmemError};
use crate::transport::Route;

impl<P: Provider> Pe<P> {
    /// The SHMEM device context of this PE, built on first use (collective-free: every PE may
    /// build its own at any time after init). Hand `&DeviceCtx` (or the address) to code that
    /// uses the device API; it stays valid as long as this `Pe`.
    ///
    /// # Errors
    /// [`ShmemError::Invalid`] if the RDMA queues' provider has no device-API tag.
    pub fn device_context(&self) -> Result<&DeviceCtx> {
        if let Some(d) = self.device.get() {
            return Ok(&d.ctx);
        }
        let built = self.build_device_context()?;
        Ok(&self.device.get_or_init(|| built).ctx)
    }

    fn build_device_context(&self) -> Result<DeviceContext> {
        let n = self.n as usize;
        let qwords = size_of::<gda_hal::SqDevice<P::Sq>>().div_ceil(8);
        let mut queues = vec![0u64; qwords * n];
        let mut peers = Vec::with_capacity(n);
        let mut any_rdma = false;
        for (j, r) in self.net.routes.iter().enumerate() {
            match r {
                Route::P2p(p) => peers.push(DevicePeer {
                    route: DeviceRoute::P2p as u32,
                    rkey: 0,
                    base: p.mapped(0) as u64,
                }),
                Route::Rdma(q) => {
                    any_rdma = true;
                    let (base, rkey) = q.segment();
                    peers.push(DevicePeer {
                        route: DeviceRoute::Rdma as u32,
                        rkey,
                        base,
                    });
                    let dq = q.queue().device_queue();
                    // SAFETY: `queues[j * qwords..]` has room for one `SqDevice<P::Sq>` (qwords
                    // 8-byte words), 8-byte aligned; the handle is plain `#[repr(C)]` data.
                    unsafe {
                        queues
                            .as_mut_ptr()
                            .add(j * qwords)
                            .cast::<gda_hal::SqDevice<P::Sq>>()
                            .write(dq);
                    }
                }
            }
        }
        if any_rdma && P::DEVICE_TAG == 0 {
            return Err(ShmemError::Invalid(format!(
                "the device API has no support for provider {}",
                P::NAME
            )));
        }
        let kick_box = self.net.nudge.clone().map(Box::new);
        let (kick_fn, kick_arg) = match &kick_box {
            Some(b) => (
                kick as unsafe extern "C" fn(*const crate::domain::Nudge) as usize as u64,
                std::ptr::from_ref::<crate::domain::Nudge>(b) as u64,
            ),
            None => (0, 0),
        };
        let ctx = Box::new(DeviceCtx {
            abi: ABI_VERSION,
            size: size_of::<DeviceCtx>() as u32,
            my_pe: self.me,
            n_pes: self.n,
            provider: if any_rdma { P::DEVICE_TAG } else { 0 },
            queue_bytes: (qwords * 8) as u32,
            lkey: self.net.lkey,
            staging_slots: SLOTS as u32,
            local_base: self.base as u64,
            heap_bytes: self.heap_size as u64,
            seg_bytes: (self.device_work + WORK_BYTES) as u64,
            peers: peers.as_ptr() as u64,
            queues: queues.as_ptr() as u64,
            work: self.device_work as u64,
            staging_slot_bytes: SLOT_BYTES as u64,
            timeout_ns: u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX),
            kick_fn,
            kick_arg,
        });
        Ok(DeviceContext {
            ctx,
            _peers: peers,
            _queues: queues,
            _kick: kick_box,
        })
    }
}
