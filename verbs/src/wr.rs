//! The `ibv_wr_*` send API of an `ibv_qp_ex` (QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`): `wr_start`, an opcode call per request (taking `wr_id`
//! and `wr_flags` from the `ibv_qp_ex`), its data (`wr_set_sge`, `_sge_list`, `_inline_data`,
//! `_inline_data_list`), then `wr_complete` posts the batch with one doorbell (or `wr_abort`
//! drops it). Requests go through the same translation and device functions as
//! `ibv_post_send`.

use std::ffi::{c_int, c_void};

use gda_hal::Sge;
use ibverbs_sys as sys;

use crate::abi::{Errno, trace};
use crate::post::translate;
use crate::qp::{Batch, Pending, Qp};

/// `IBV_QP_EX_WITH_*` this library implements: RDMA_WRITE, _WITH_IMM, SEND, SEND_WITH_IMM,
/// RDMA_READ, ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD.
const OPS_SUPPORTED: u64 = 0x7f;

/// Whether this library implements the `send_ops_flags` a QP is asked for with.
pub(crate) fn check(ops: u64) -> Result<(), Errno> {
    if ops & !OPS_SUPPORTED != 0 {
        return Err(Errno::new(
            libc::EOPNOTSUPP,
            format!("send_ops_flags {:#x} not supported", ops & !OPS_SUPPORTED),
        ));
    }
    Ok(())
}

/// Fills the `ibv_wr_*` callbacks of a new QP asked for them (its `send_ops_flags` passed
/// [`check`]).
pub(crate) fn install(e: &mut sys::ibv_qp_ex) {
    e.wr_start = Some(wr_start);
    e.wr_complete = Some(wr_complete);
    e.wr_abort = Some(wr_abort);
    e.wr_rdma_write = Some(wr_rdma_write);
    e.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    e.wr_rdma_read = Some(wr_rdma_read);
    e.wr_send = Some(wr_send);
    e.wr_send_imm = Some(wr_send_imm);
    e.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    e.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    e.wr_set_sge = Some(wr_set_sge);
    e.wr_set_sge_list = Some(wr_set_sge_list);
    e.wr_set_inline_data = Some(wr_set_inline_data);
    e.wr_set_inline_data_list = Some(wr_set_inline_data_list);
}

fn with(qp: *mut sys::ibv_qp_ex, f: impl FnOnce(&Qp, &mut Batch)) {
    // SAFETY: the callbacks are installed only on our QPs.
    let Ok(q) = (unsafe { Qp::from_ibv(qp.cast()) }) else {
        return;
    };
    let mut b = q.wr.lock().unwrap_or_else(|e| e.into_inner());
    f(q, &mut b);
}

fn begin(qp: *mut sys::ibv_qp_ex, opcode: u32, set: impl FnOnce(&mut sys::ibv_send_wr)) {
    with(qp, |q, b| {
        if !b.open {
            b.error.get_or_insert(Errno::inval(
                "an ibv_wr_* opcode outside wr_start/wr_complete",
            ));
            return;
        }
        // SAFETY: C data.
        let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = q.ex.wr_id;
        wr.send_flags = q.ex.wr_flags;
        wr.opcode = opcode;
        set(&mut wr);
        b.reqs.push(Pending {
            wr,
            sges: Vec::new(),
            inline: Vec::new(),
            buf: Vec::new(),
        });
    });
}

fn data(qp: *mut sys::ibv_qp_ex, f: impl FnOnce(&mut Pending)) {
    with(qp, |_, b| match b.reqs.last_mut() {
        Some(p) if b.open => f(p),
        _ => {
            b.error
                .get_or_insert(Errno::inval("ibv_wr_set_* before an opcode"));
        }
    });
}

unsafe extern "C" fn wr_start(qp: *mut sys::ibv_qp_ex) {
    with(qp, |_, b| {
        *b = Batch {
            open: true,
            ..Batch::default()
        };
    });
}

unsafe extern "C" fn wr_abort(qp: *mut sys::ibv_qp_ex) {
    with(qp, |_, b| *b = Batch::default());
}

unsafe extern "C" fn wr_complete(qp: *mut sys::ibv_qp_ex) -> c_int {
    crate::abi::guard("ibv_wr_complete", libc::EIO, || {
        // SAFETY: the callbacks are installed only on our QPs.
        let Ok(q) = (unsafe { Qp::from_ibv(qp.cast()) }) else {
            return libc::EINVAL;
        };
        let batch = std::mem::take(&mut *q.wr.lock().unwrap_or_else(|e| e.into_inner()));
        if !batch.open {
            return crate::abi::ret_code("ibv_wr_complete", Err(Errno::inval("no wr_start")));
        }
        if let Some(e) = batch.error {
            return crate::abi::ret_code("ibv_wr_complete", Err(e));
        }
        let mut pend = batch.reqs;
        let mut it = pend.iter_mut().map(|p| {
            let Pending {
                wr,
                sges,
                inline,
                buf,
            } = p;
            if wr.send_flags & sys::ibv_send_flags::IBV_SEND_INLINE.0 != 0 {
                // The inline bytes were copied at wr_set_inline_data: gather from that copy.
                *sges = vec![Sge {
                    addr: inline.as_ptr() as u64,
                    length: inline.len() as u32,
                    lkey: 0,
                }];
            } else if sges.len() as u32 > q.cap.max_send_sge {
                return Err(Errno::inval(format!(
                    "{} SGEs, the QP takes {}",
                    sges.len(),
                    q.cap.max_send_sge
                )));
            }
            translate(wr, sges, buf, q.sig_all).map(|r| (wr.wr_id, r))
        });
        match q.post_requests(&mut it) {
            Ok(()) => 0,
            Err((i, e)) => {
                trace(format_args!("ibv_wr_complete: request {i} of the batch"));
                crate::abi::ret_code("ibv_wr_complete", Err(e))
            }
        }
    })
}

unsafe extern "C" fn wr_rdma_write(qp: *mut sys::ibv_qp_ex, rkey: u32, raddr: u64) {
    begin(qp, 0, |w| {
        w.wr.rdma.rkey = rkey;
        w.wr.rdma.remote_addr = raddr;
    });
}
unsafe extern "C" fn wr_rdma_write_imm(qp: *mut sys::ibv_qp_ex, rkey: u32, raddr: u64, imm: u32) {
    begin(qp, 1, |w| {
        w.wr.rdma.rkey = rkey;
        w.wr.rdma.remote_addr = raddr;
        w.__bindgen_anon_1.imm_data = imm;
    });
}
unsafe extern "C" fn wr_send(qp: *mut sys::ibv_qp_ex) {
    begin(qp, 2, |_| {});
}
unsafe extern "C" fn wr_send_imm(qp: *mut sys::ibv_qp_ex, imm: u32) {
    begin(qp, 3, |w| w.__bindgen_anon_1.imm_data = imm);
}
unsafe extern "C" fn wr_rdma_read(qp: *mut sys::ibv_qp_ex, rkey: u32, raddr: u64) {
    begin(qp, 4, |w| {
        w.wr.rdma.rkey = rkey;
        w.wr.rdma.remote_addr = raddr;
    });
}
unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut sys::ibv_qp_ex,
    rkey: u32,
    raddr: u64,
    compare: u64,
    swap: u64,
) {
    begin(qp, 5, |w| {
        w.wr.atomic.rkey = rkey;
        w.wr.atomic.remote_addr = raddr;
        w.wr.atomic.compare_add = compare;
        w.wr.atomic.swap = swap;
    });
}
unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut sys::ibv_qp_ex, rkey: u32, raddr: u64, add: u64) {
    begin(qp, 6, |w| {
        w.wr.atomic.rkey = rkey;
        w.wr.atomic.remote_addr = raddr;
        w.wr.atomic.compare_add = add;
    });
}
unsafe extern "C" fn wr_set_sge(qp: *mut sys::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    data(qp, |p| p.sges = vec![Sge { addr, length, lkey }]);
}
unsafe extern "C" fn wr_set_sge_list(qp: *mut sys::ibv_qp_ex, n: usize, list: *const sys::ibv_sge) {
    data(qp, |p| {
        p.sges = (0..n)
            .map(|i| {
                // SAFETY: the program's list of `n` entries.
                let s = unsafe { *list.add(i) };
                Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                }
            })
            .collect();
    });
}
unsafe extern "C" fn wr_set_inline_data(qp: *mut sys::ibv_qp_ex, addr: *mut c_void, length: usize) {
    data(qp, |p| {
        p.wr.send_flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
        // SAFETY: the program's buffer; inline data is copied now, as the API allows reuse.
        p.inline = unsafe { std::slice::from_raw_parts(addr as *const u8, length) }.to_vec();
    });
}
unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut sys::ibv_qp_ex,
    n: usize,
    list: *const sys::ibv_data_buf,
) {
    data(qp, |p| {
        p.wr.send_flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
        p.inline.clear();
        for i in 0..n {
            // SAFETY: the program's list of `n` buffers.
            let b = unsafe { *list.add(i) };
            // SAFETY: the program's buffer.
            p.inline.extend_from_slice(unsafe {
                std::slice::from_raw_parts(b.addr as *const u8, b.length)
            });
        }
    });
}
