//! Completion queues.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use gda_hal::CqHandle;

use crate::state::CqInner;

/// A completion queue.
#[derive(Clone)]
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("cqn", &self.inner.cqn)
            .field("mode", &self.inner.mode)
            .finish()
    }
}

impl Cq {
    /// The device handle kernels poll with.
    #[must_use]
    pub fn handle(&self) -> CqHandle {
        self.inner.model.cq_handle(&self.inner.view)
    }

    /// Whether the NIC found the CQ full and dropped a completion (hardware raises a CQ error).
    #[must_use]
    pub fn overrun(&self) -> bool {
        self.inner.overrun.load(Ordering::Acquire)
    }

    /// Sets what the NIC calls, once, when this CQ first overruns — on the engine thread, so
    /// it must not block (push an event, write an eventfd). A CQ takes one such call; a
    /// second is refused (`false`).
    pub fn on_overrun(&self, raise: impl Fn() + Send + Sync + 'static) -> bool {
        self.inner.on_overrun.set(Box::new(raise)).is_ok()
    }

    /// CQEs the NIC has written.
    #[must_use]
    pub fn produced(&self) -> u64 {
        self.inner.prod.load(Ordering::Acquire)
    }
}
