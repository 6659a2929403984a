//! One work request expressed both ways: as the `ibv_send_wr` rdma-core receives and as the
//! [`WorkRequest`] gda's device functions take, plus helpers that run each side on a fresh ring.

use gda_hal::{
    AtomicOp, Payload, Posted, Provider, Remote, SendFlags, Sge, SqPos, WorkRequest, WqHandle,
};
use gda_mlx5::Mlx5;

use crate::{RefOut, RefQpCfg, RefSge, RefWr};

/// `enum ibv_wr_opcode` values the harness accepts.
pub mod ibv_wr {
    /// RDMA WRITE.
    pub const RDMA_WRITE: u32 = 0;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    /// SEND.
    pub const SEND: u32 = 2;
    /// SEND with immediate.
    pub const SEND_WITH_IMM: u32 = 3;
    /// RDMA READ.
    pub const RDMA_READ: u32 = 4;
    /// Compare and swap.
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    /// Fetch and add.
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
}

/// `IBV_SEND_INLINE`.
pub const IBV_SEND_INLINE: u32 = 8;

/// A work request and the queue it is posted on.
#[derive(Clone, Debug)]
pub struct Case {
    /// QP configuration (ring size, producer counter, limits).
    pub cfg: RefQpCfg,
    /// `ibv_wr_opcode`.
    pub opcode: u32,
    /// `IBV_SEND_*` flags (INLINE included when `inline` is used).
    pub send_flags: u32,
    /// `ibv_send_wr.imm_data` as stored (network order).
    pub imm_data: u32,
    /// Remote buffer.
    pub remote: Remote,
    /// Atomic compare/add.
    pub compare_add: u64,
    /// Atomic swap.
    pub swap: u64,
    /// Gather list (for inline: lengths of the pieces of `inline`).
    pub sges: Vec<Sge>,
    /// Inline payload pieces (one per SGE) when `IBV_SEND_INLINE` is set.
    pub inline: Vec<Vec<u8>>,
}

/// A 64-byte aligned zeroed ring.
#[must_use]
pub fn ring(wqebbs: u32) -> Vec<[u64; 8]> {
    vec![[0u64; 8]; wqebbs as usize]
}

/// The ring's bytes.
pub fn bytes_mut(r: &mut [[u64; 8]]) -> &mut [u8] {
    // SAFETY: `[u64; 8]` has no padding and any byte pattern is valid.
    unsafe { std::slice::from_raw_parts_mut(r.as_mut_ptr().cast::<u8>(), r.len() * 64) }
}

impl Case {
    /// The concatenated inline payload.
    #[must_use]
    pub fn inline_bytes(&self) -> Vec<u8> {
        self.inline.concat()
    }

    /// The request as rdma-core's `ibv_send_wr` (inline SGEs point at `self.inline`).
    #[must_use]
    pub fn to_ref(&self) -> RefWr {
        let mut wr = RefWr {
            opcode: self.opcode,
            send_flags: self.send_flags,
            imm_data: self.imm_data,
            rkey: self.remote.rkey,
            remote_addr: self.remote.addr,
            compare_add: self.compare_add,
            swap: self.swap,
            num_sge: self.sges.len() as u32,
            ..RefWr::default()
        };
        for (i, s) in self.sges.iter().enumerate().take(16) {
            wr.sg_list[i] = if self.send_flags & IBV_SEND_INLINE != 0 {
                let piece = &self.inline[i];
                RefSge {
                    addr: piece.as_ptr() as u64,
                    length: piece.len() as u32,
                    lkey: s.lkey,
                }
            } else {
                RefSge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                }
            };
        }
        wr
    }

    /// The request in gda's terms, using `inline` for the concatenated inline bytes.
    #[must_use]
    pub fn to_gda<'a>(&'a self, inline: &'a [u8]) -> WorkRequest<'a> {
        // verbs hands imm_data over already in network order; gda takes the host-order value.
        let imm = u32::from_be(self.imm_data);
        let payload = if self.send_flags & IBV_SEND_INLINE != 0 {
            Payload::Inline(inline)
        } else {
            Payload::Sges(&self.sges)
        };
        match self.opcode {
            ibv_wr::RDMA_WRITE => WorkRequest::Write {
                remote: self.remote,
                payload,
                imm: None,
            },
            ibv_wr::RDMA_WRITE_WITH_IMM => WorkRequest::Write {
                remote: self.remote,
                payload,
                imm: Some(imm),
            },
            ibv_wr::SEND => WorkRequest::Send { payload, imm: None },
            ibv_wr::SEND_WITH_IMM => WorkRequest::Send {
                payload,
                imm: Some(imm),
            },
            ibv_wr::RDMA_READ => WorkRequest::Read {
                remote: self.remote,
                sges: &self.sges,
            },
            ibv_wr::ATOMIC_CMP_AND_SWP => WorkRequest::Atomic {
                remote: self.remote,
                local: self.sges.first().copied().unwrap_or_default(),
                op: AtomicOp::CompareSwap {
                    compare: self.compare_add,
                    swap: self.swap,
                },
                bytes: 8,
            },
            _ => WorkRequest::Atomic {
                remote: self.remote,
                local: self.sges.first().copied().unwrap_or_default(),
                op: AtomicOp::FetchAdd {
                    add: self.compare_add,
                },
                bytes: 8,
            },
        }
    }

    /// gda's send flags for this request.
    #[must_use]
    pub fn gda_flags(&self) -> SendFlags {
        let mut f = SendFlags::from_bits_truncate(self.send_flags) - SendFlags::INLINE;
        if self.cfg.sig_all != 0 {
            f |= SendFlags::SIGNALED;
        }
        f
    }

    /// Whether rdma-core uses BlueFlame for this request: a single WR that took the inline path
    /// (INLINE flag and at least one SGE, even of length 0), of more than one DS, fitting the
    /// BlueFlame half.
    #[must_use]
    pub fn blueflame(&self, units_ds: u32) -> bool {
        self.cfg.bf_size != 0
            && self.send_flags & IBV_SEND_INLINE != 0
            && !self.inline.is_empty()
            && units_ds > 1
            && units_ds * 16 <= self.cfg.bf_size
    }

    /// Runs rdma-core on a fresh zeroed ring.
    #[must_use]
    pub fn run_ref(&self, sq: &mut [[u64; 8]]) -> RefOut {
        crate::mlx5_post_send(&self.cfg, &self.to_ref(), bytes_mut(sq))
    }

    /// Runs gda on a fresh ring with its own doorbell record and register: returns the
    /// `Posted`, record words, register bytes and next BlueFlame offset, or the `check` error.
    pub fn run_gda(&self, sq: &mut [[u64; 8]]) -> Result<GdaOut, gda_hal::PostError> {
        self.run_with(sq, |wq, wr, flags, blueflame| {
            // SAFETY: the ring, record and register are owned by `run_with` and sized for the
            // request, which `check` accepted.
            unsafe {
                let p = Mlx5::post(wq, SqPos::at_unit(self.cfg.cur_post), wr, flags);
                let off = Mlx5::ring_sq_bf(wq, &p, 0, blueflame);
                (p, off)
            }
        })
    }

    /// As [`Case::run_gda`], through the device API's C++ header (`device/include/gda/mlx5.hpp`)
    /// instead of gda's Rust device functions.
    pub fn run_device(&self, sq: &mut [[u64; 8]]) -> Result<GdaOut, gda_hal::PostError> {
        self.run_with(sq, |wq, wr, flags, blueflame| {
            // SAFETY: as in `run_gda`.
            unsafe { crate::device::post_ring(wq, self.cfg.cur_post, wr, flags.bits(), blueflame) }
        })
    }

    /// The queue around `sq` (with its own record and register), checked, then `post` (which
    /// writes and rings: the Posted and the next BlueFlame offset).
    fn run_with(
        &self,
        sq: &mut [[u64; 8]],
        post: impl FnOnce(
            &gda_mlx5::Mlx5Sq,
            &gda_hal::WorkRequest<'_>,
            SendFlags,
            bool,
        ) -> (Posted, u32),
    ) -> Result<GdaOut, gda_hal::PostError> {
        let inline = self.inline_bytes();
        let wr = self.to_gda(&inline);
        let mut dbrec = [0u32; 2];
        let mut uar = [[0u64; 8]; 16];
        let wq = gda_mlx5::Mlx5Sq {
            wq: WqHandle {
                buf: sq.as_mut_ptr() as u64,
                dbrec: dbrec.as_mut_ptr() as u64,
                db: uar.as_mut_ptr() as u64,
                entries: self.cfg.sq_wqe_cnt,
                stride: 0,
                qpn: self.cfg.qp_num,
                max_inline: self.cfg.max_inline,
                max_sge: self.cfg.max_sge,
            },
            bf_size: self.cfg.bf_size,
        };
        Mlx5::check(&wq, &wr)?;
        let ds = gda_mlx5::device::ds_for(&wr);
        let (posted, next_off) = post(&wq, &wr, self.gda_flags(), self.blueflame(ds));
        let mut reg = [0u8; 1024];
        reg.copy_from_slice(bytes_mut(&mut uar));
        Ok(GdaOut {
            posted,
            dbrec,
            uar: reg,
            bf_offset_after: next_off,
        })
    }
}

/// What gda produced for one request.
#[derive(Clone, Copy, Debug)]
pub struct GdaOut {
    /// Positions and doorbell value.
    pub posted: Posted,
    /// Doorbell record words as stored.
    pub dbrec: [u32; 2],
    /// Register memory.
    pub uar: [u8; 1024],
    /// Next BlueFlame offset.
    pub bf_offset_after: u32,
}
