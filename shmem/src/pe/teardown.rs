//! The end of a PE: abort, collective finalize, and drop (which keeps the heap mapped when a
//! peer might still write into it).

use gda_hal::Provider;

use super::Pe;
use crate::error::Result;

impl<P: Provider> Pe<P> {
    /// Tells the other PEs (where the bootstrap can: threads) that this one failed, so their
    /// waits end at once with `why` instead of at the timeout.
    pub fn abort(&self, why: &str) {
        self.boot.borrow().abort(why);
    }

    /// Collective finalize: quiet, then a bootstrap barrier (so no peer still writes into this
    /// heap), then the heap and queues are released. Dropping a `Pe` does the same, ignoring
    /// errors.
    pub fn finalize(self) -> Result<()> {
        self.finish()
    }

    fn finish(&self) -> Result<()> {
        if self.finalized.replace(true) {
            return Ok(());
        }
        let q = self.quiet();
        let b = self.boot.borrow_mut().barrier();
        let r = q.and(b);
        if r.is_err() {
            self.unsafe_to_unmap.set(true);
        }
        r
    }
}

impl<P: Provider> Drop for Pe<P> {
    fn drop(&mut self) {
        let _ = self.finish();
        // The device context first: its doorbell mappings end before the NIC (in `net`) goes.
        drop(self.device.take());
        if self.unsafe_to_unmap.get() {
            // The job broke down before every PE passed the final barrier: the in-process NIC
            // engine may still execute a peer's RDMA into this mapping (it was registered by
            // address). Keeping the mapping (its name is already gone) is a bounded
            // leak on an error path; unmapping could crash a peer.
            return;
        }
        // SAFETY: every PE passed the final barrier after a quiet, so nothing accesses these
        // mappings any more; they are dropped exactly once, here.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.peer_segs);
            std::mem::ManuallyDrop::drop(&mut self.seg);
            std::mem::ManuallyDrop::drop(&mut self.statics);
        }
    }
}
