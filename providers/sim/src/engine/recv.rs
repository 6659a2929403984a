//! Taking the next receive WQE of a responder.

use std::sync::atomic::Ordering;

use crate::state::QpInner;

pub(super) enum Recv {
    Got(u64),
    Empty,
}

/// Consumes the responder's next receive WQE, if one is posted. (The receive position is an
/// atomic on the QP, not in its exec state, because a loopback QP is its own responder.)
pub(super) fn take_recv(rqp: &QpInner) -> Recv {
    let pos = rqp.rq_consumed.load(Ordering::Acquire);
    let prod = rqp.model().rq_producer(&rqp.view, pos);
    // More posted than the ring holds is a stale or garbage producer value: nothing usable.
    if prod > pos && prod - pos <= u64::from(rqp.init.rq_wqes) {
        rqp.rq_consumed.store(pos + 1, Ordering::Release);
        Recv::Got(pos)
    } else {
        Recv::Empty
    }
}
