//! [`Pe::device_context`]: the SHMEM device context of this PE (`crate::device`).

use gda_hal::control::QueueBuffer;
use gda_hal::{Provider, QueueHandle};

use super::Pe;
use crate::device::{
    ABI_VERSION, Block, ContextMemory, DeviceContext, DeviceCtx, DevicePeer, DeviceRoute,
    SLOT_BYTES, SLOTS, WORK_BYTES, kick,
};
use crate::error::{Result, ShmemError};
use crate::transport::Route;

impl<P: Provider> Pe<P> {
    /// The SHMEM device context of this PE, built on first use (collective-free: every PE may
    /// build its own at any time after init). Hand `&DeviceCtx` (or the address) to code that
    /// uses the device API; it stays valid as long as this `Pe`.
    ///
    /// With a GPU heap (`hip` feature) the context, its arrays, each RDMA queue's protocol
    /// state, rings and doorbell records are in GPU memory and each doorbell is mapped for the
    /// GPU ([`DeviceCtx::memory`] says [`ContextMemory::Device`]): a kernel takes the address
    /// as it is. Otherwise all of it is host memory of this process.
    ///
    /// # Errors
    /// [`ShmemError::Invalid`] if the RDMA queues' provider has no device-API tag;
    /// [`ShmemError::RdmaSetup`] if the queue memory has no room for the context or cannot
    /// map a doorbell for the device.
    pub fn device_context(&self) -> Result<&DeviceCtx> {
        if let Some(d) = self.device.get() {
            return Ok(d.ctx());
        }
        let built = self.build_device_context()?;
        Ok(self.device.get_or_init(|| built).ctx())
    }

    fn build_device_context(&self) -> Result<DeviceContext> {
        let n = self.n as usize;
        let qwords = size_of::<gda_hal::SqDevice<P::Sq>>().div_ceil(8);
        let ctx_words = size_of::<DeviceCtx>().div_ceil(8);
        let peer_words = size_of::<DevicePeer>().div_ceil(8);
        // One block: the context, DevicePeer[n], then n queue handles.
        let mut words = vec![0u64; ctx_words + n * (peer_words + qwords)];
        let peers_at = ctx_words;
        let queues_at = ctx_words + n * peer_words;
        let mut any_rdma = false;
        let mut doorbells = Vec::new();
        // The host memory device code touches: mapped for a GPU when there is one (`hip`).
        let mut ranges: Vec<(u64, usize)> = vec![(self.base as u64, self.device_work + WORK_BYTES)];
        let memory = &self.device_memory;
        let put = |words: &mut Vec<u64>, at: usize, bytes: &[u8]| {
            bytemuck::cast_slice_mut::<u64, u8>(&mut words[at..])[..bytes.len()]
                .copy_from_slice(bytes);
        };
        for (j, r) in self.net.routes.iter().enumerate() {
            let peer = match r {
                Route::P2p(p) => {
                    ranges.push((p.mapped(0) as u64, self.device_work + WORK_BYTES));
                    DevicePeer {
                        route: DeviceRoute::P2p as u32,
                        rkey: 0,
                        base: p.mapped(0) as u64,
                    }
                }
                Route::Rdma(q) => {
                    any_rdma = true;
                    let (base, rkey) = q.segment();
                    let mut dq = q.queue().device_queue();
                    dq.sq
                        .memory(P::SQ_UNIT_BYTES, &mut |a, n| ranges.push((a, n)));
                    let cq = dq.proto.cq;
                    ranges.push((cq.buf, cq.entries as usize * cq.cqe_bytes as usize));
                    if cq.dbrec != 0 {
                        ranges.push((cq.dbrec, 8));
                    }
                    ranges.push((dq.proto.state, size_of::<gda_hal::SqShared>()));
                    ranges.push((dq.sq.wq().db, 8));
                    let db = memory
                        .map_doorbell(dq.sq.wq().db)
                        .map_err(|e| ShmemError::rdma_setup(Some(j as u32), &e))?;
                    dq.sq.wq_mut().db = db.device_addr();
                    doorbells.push(db);
                    // The CQ's own doorbell (bnxt acknowledges CQEs through it; mlx5 and the
                    // native format use the record): device code stores to it too.
                    if cq.db != 0 {
                        ranges.push((cq.db, 8));
                        let db = memory
                            .map_doorbell(cq.db)
                            .map_err(|e| ShmemError::rdma_setup(Some(j as u32), &e))?;
                        dq.proto.cq.db = db.device_addr();
                        doorbells.push(db);
                    }
                    // SAFETY: `SqDevice<P::Sq>` is plain `#[repr(C)]` data of `qwords * 8` or
                    // fewer bytes; its bytes are copied as they are.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(
                            std::ptr::from_ref(&dq).cast::<u8>(),
                            size_of::<gda_hal::SqDevice<P::Sq>>(),
                        )
                    };
                    put(&mut words, queues_at + j * qwords, bytes);
                    DevicePeer {
                        route: DeviceRoute::Rdma as u32,
                        rkey,
                        base,
                    }
                }
            };
            put(
                &mut words,
                peers_at + j * peer_words,
                bytemuck::bytes_of(&peer),
            );
        }
        if any_rdma && P::DEVICE_TAG == 0 {
            return Err(ShmemError::Invalid(format!(
                "the device API has no support for provider {}",
                P::NAME
            )));
        }
        let block = match memory
            .place(QueueBuffer::DeviceContext, words.len() * 8, 64)
            .map_err(|e| ShmemError::rdma_setup(None, &e))?
        {
            Some(b) => Block::Placed(b),
            None => Block::Host(Vec::new()),
        };
        // Placed by the queue memory's allocator exactly when that memory is the caller's.
        let placed = matches!(block, Block::Placed(_));
        ranges.push((base_of(&block, &words), words.len() * 8));
        #[cfg(feature = "hip")]
        let mapped = if placed {
            None
        } else {
            // SAFETY: every range is memory this PE keeps mapped (its segment, peers' mapped
            // segments, its queues and their state, the context block) while the context
            // lives; the context drops first (`Pe`'s `Drop`).
            unsafe { crate::memory::map_host_for_gpu(&ranges) }?
        };
        #[cfg(not(feature = "hip"))]
        let mapped: Option<()> = None;
        let base = base_of(&block, &words);
        let kick_box = self.net.nudge.clone().map(Box::new);
        let (kick_fn, kick_arg) = match &kick_box {
            Some(b) => (
                kick as unsafe extern "C" fn(*const crate::domain::Nudge) as usize as u64,
                std::ptr::from_ref::<crate::domain::Nudge>(b) as u64,
            ),
            None => (0, 0),
        };
        let ctx = DeviceCtx {
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
            peers: base + (peers_at * 8) as u64,
            queues: base + (queues_at * 8) as u64,
            work: self.device_work as u64,
            staging_slot_bytes: SLOT_BYTES as u64,
            timeout_ns: u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX),
            kick_fn,
            kick_arg,
            memory: if placed {
                ContextMemory::Device
            } else if mapped.is_some() {
                ContextMemory::Mapped
            } else {
                ContextMemory::Host
            } as u32,
            reserved: 0,
        };
        put(&mut words, 0, bytemuck::bytes_of(&ctx));
        let block = match block {
            Block::Placed(b) => {
                // SAFETY: the placed block has `words.len() * 8` host-writable bytes; nothing
                // else uses it yet.
                unsafe {
                    b.as_ptr()
                        .as_ptr()
                        .copy_from_nonoverlapping(words.as_ptr().cast(), words.len() * 8);
                }
                Block::Placed(b)
            }
            Block::Host(_) => Block::Host(words),
        };
        Ok(DeviceContext {
            #[cfg(feature = "hip")]
            _mapped: mapped,
            block,
            _doorbells: doorbells,
            _kick: kick_box,
        })
    }
}

/// The block's first byte: the placed buffer's, or that of the host words (which move into the
/// block with their heap buffer).
fn base_of(block: &Block, words: &[u64]) -> u64 {
    match block {
        Block::Placed(b) => b.as_ptr().as_ptr() as u64,
        Block::Host(_) => words.as_ptr() as u64,
    }
}
