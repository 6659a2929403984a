/*
 * bnxtref: rdma-core v55's own bnxt_re provider code (providers/bnxt_re/
 * verbs.c, db.c, memory.c, #included by harness.c) driven over ordinary
 * memory. This header has no rdma-core dependency.
 *
 * Conventions (see NOTES.md for the details and the quirks):
 *  - All functions are stateless: every call builds fresh provider objects
 *    (context, dpi, QP, queues, CQ) from the cfg, runs the real provider
 *    function once, and reports the resulting provider state in *out.
 *  - Opcodes/flags/statuses are the libibverbs numeric values
 *    (ibv_wr_opcode, ibv_send_flags, ibv_wc_opcode, ibv_wc_status, ...).
 *  - Harness-level rejections (bad geometry, buffer too small) return -1000
 *    and set out->ret = -1000; anything else is the provider's return value.
 *  - Buffers are never cleared by the harness; the caller chooses the stale
 *    pattern (rdma-core leaves several bytes unwritten, see NOTES.md).
 */
#ifndef BNXTREF_HARNESS_H
#define BNXTREF_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BREF_EHARNESS (-1000)

struct bref_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct bref_wr {
	uint32_t opcode;     /* ibv_wr_opcode */
	uint32_t send_flags; /* ibv_send_flags: FENCE 1, SIGNALED 2, SOLICITED 4, INLINE 8 */
	uint32_t imm_data;   /* copied raw into ibv_send_wr.imm_data (a __be32): pass
				htobe32(x) for immediate x. Also invalidate_rkey. */
	uint32_t rkey;       /* wr.rdma.rkey, or wr.atomic.rkey for opcodes 5/6 */
	uint64_t remote_addr, compare_add, swap;
	uint32_t num_sge;
	struct bref_sge sg_list[8]; /* INLINE: addr must point at readable memory */
	/* additions to the brief's struct: */
	uint64_t wr_id;          /* stored in the SW queue only (not in the WQE) */
	uint32_t ud_remote_qpn;  /* UD only: wr.ud.remote_qpn */
	uint32_t ud_remote_qkey; /* UD only: wr.ud.remote_qkey */
	uint32_t ud_avid;        /* UD only: bnxt_re_ah.avid of the (fake) AH */
};

struct bref_qp_cfg {
	uint32_t qp_id;     /* qp->qpid: xid in doorbells */
	uint32_t wqe_mode;  /* 0 static, 1 variable (cntx->wqe_mode, qp->qpmode) */
	uint32_t sq_slots;  /* SQ depth in 16-byte slots (static: 8 * nwqe) */
	uint32_t sq_tail;   /* producer slot index before the post, < sq_slots;
			       static mode: must be a multiple of 8 */
	uint32_t sq_epoch;  /* tail epoch flag (0/1) before the post */
	uint32_t sq_psn;    /* next PSN before the post (qp->sq_psn) */
	uint32_t mtu_enum;  /* ibv_mtu: 1=256 .. 5=4096; qp->mtu = 0x80 << mtu_enum */
	uint32_t msn_table; /* 1: context has MSN_TABLE_ENABLED (Thor2) */
	uint32_t psn_ext;   /* sets cctx.gen_p5_p7; for non-MSN: 16-byte psns_ext
			       entries (P5/P7), 0 = 8-byte legacy entries */
	uint32_t msn;       /* sq->msn before the post (MSN mode), < msn_tbl_sz */
	uint32_t max_inline; /* qp->cap.max_inline (<= 96) */
	uint32_t max_sge;    /* qp->cap.max_ssge */
	uint32_t sig_all;    /* qp->cap.sqsig */
	/* additions to the brief's struct (zero = the common case): */
	uint32_t sq_head;    /* consumer slot index (que->head) for the queue-full
			        test; 0 with sq_tail 0 means "empty". */
	uint32_t qp_type;    /* 0 or 2 = RC, 4 = UD */
	uint32_t atomics_disabled; /* 1: qp->cap.is_atomic_cap = 0 */
};

struct bref_out {
	int ret;                 /* bnxt_re_post_send() return value */
	uint32_t sq_tail_after, sq_epoch_after, sq_psn_after, msn_after;
	uint64_t doorbell;       /* the 64-bit LE value stored to the doorbell page (0 if none) */
	uint32_t n_doorbells;    /* number of mmio_write64_le doorbell stores */
	/* additions: */
	int32_t bad_index;       /* index of *bad in the chain, -1 if none */
	uint32_t sw_idx_after;   /* jsqq->start_idx after (static: == WQE index) */
	uint32_t psn_table_offset;  /* = sq_slots * 16 */
	uint32_t psn_entry_size;    /* 8 (legacy or MSN) or 16 (psns_ext) */
	uint32_t psn_table_entries; /* entries the harness required in sq_buf */
	uint32_t msn_tbl_sz;        /* MSN mode: table modulus (0 otherwise) */
	uint32_t sq_diff;           /* que->diff used by the queue-full test */
	/* SW-queue bookkeeping of the LAST posted WR (bnxt_re_wrid), for poll tests */
	uint32_t last_slots, last_bytes, last_wc_opcode, last_sig, last_st_slot_idx;
};

/* Required sq_buf_len: sq_slots*16 + psn_table_entries*psn_entry_size, where
 * psn_entry_size = msn_table ? 8 : (psn_ext ? 16 : 8) and
 * psn_table_entries = static:   nwr = sq_slots/8      (MSN: roundup_pow2(nwr))
 *                     variable: sq_slots              (MSN: roundup_pow2(sq_slots))
 * (bnxt_re_get_sqmem_size's npsn; msn_tbl_sz = static roundup_pow2(nwr),
 * variable roundup_pow2(sq_slots)/2, as bnxt_re_alloc_queues sets it). */
int bref_post_send(const struct bref_qp_cfg *cfg, const struct bref_wr *wr,
		   uint8_t *sq_buf, size_t sq_buf_len, struct bref_out *out);
/* Same, for a chain of n WRs (wr[0].next = &wr[1] ...), one doorbell at the end. */
int bref_post_send_n(const struct bref_qp_cfg *cfg, const struct bref_wr *wrs,
		     uint32_t n, uint8_t *sq_buf, size_t sq_buf_len,
		     struct bref_out *out);

/* ---- receive queue ---- */
struct bref_rq_cfg {
	uint32_t qp_id;
	uint32_t wqe_mode;  /* 0 static (8 slots per RQE), 1 variable (2 + max_sge slots) */
	uint32_t rq_slots;  /* RQ depth in 16-byte slots: nrwr * max_slots */
	uint32_t rq_tail;   /* producer slot index before the post */
	uint32_t rq_epoch;  /* tail epoch before */
	uint32_t rq_head;   /* consumer slot index (queue-full test only) */
	uint32_t wqe_idx;   /* jrqq->start_idx before: SW WQE index (= rq_tail/max_slots
			       in a consistent queue); written into the RQE and used
			       as the doorbell index */
	uint32_t max_sge;   /* qp->cap.max_rsge */
};
struct bref_rq_out {
	int ret;
	uint32_t rq_tail_after, rq_epoch_after, wqe_idx_after, max_slots;
	uint64_t doorbell;
	uint32_t n_doorbells;
};
int bref_post_recv(const struct bref_rq_cfg *cfg, uint64_t wr_id,
		   uint32_t num_sge, const struct bref_sge *sges,
		   uint8_t *rq_buf, size_t rq_buf_len, struct bref_rq_out *out);

/* ---- completions ---- */
/* One outstanding SQ WQE as bnxt_re_post_send recorded it (struct bnxt_re_wrid). */
struct bref_swqe {
	uint64_t wr_id;
	uint32_t wr_opcode; /* ibv_wr_opcode; converted with rdma-core's
			       bnxt_re_ibv_wr_to_wc_opcd() like post_send does */
	uint32_t signaled;  /* wrid->sig != 0 (SIGNALED flag or sq_sig_all) */
	uint32_t bytes;     /* wrid->bytes (reported as byte_len for READ/atomics) */
	uint32_t slots;     /* wrid->slots (static mode: 8) */
};

struct bref_cq_cfg {
	uint32_t cq_id;
	uint32_t cq_depth;  /* number of 32-byte CQEs in the ring */
	uint32_t cq_head;   /* consumer index before */
	uint32_t cq_phase;  /* expected phase bit (kernel starts at 1) */
	uint32_t cq_head_epoch; /* cqq->flags bit 1 (head epoch) before */
	uint32_t deferred_db;   /* cq->deffered_db_sup (small CQs) */
	uint32_t hw_cqes;       /* cq->hw_cqes before (deferred mode) */
	uint32_t nwc;           /* num_entries passed to bnxt_re_poll_cq (<= 64) */

	uint32_t qp_id;
	uint32_t qp_type;   /* 0/2 RC, 4 UD */
	/* SQ bookkeeping */
	uint32_t max_swr;   /* qp->cap.max_swr = SW queue size (static: nwr, variable: slots);
			       requester con_indx is taken modulo this */
	uint32_t sq_slots;  /* SQ hw depth in slots */
	uint32_t sq_head;   /* SQ consumer slot index before */
	uint32_t sq_cons_idx; /* jsqq->last_idx: SW index of the oldest outstanding WQE */
	uint32_t n_swqe;      /* outstanding WQEs, placed at sq_cons_idx, +1, ... (mod max_swr) */
	const struct bref_swqe *swqe;
	/* RQ bookkeeping */
	uint32_t rq_nwr;      /* RQ SW queue size */
	uint32_t rq_slots;    /* RQ hw depth in slots */
	uint32_t rq_max_slots;
	uint32_t rq_head;     /* consumer slot before */
	uint32_t rq_cons_idx; /* jrqq->last_idx */
	uint32_t n_rwqe;
	const uint64_t *rq_wr_id;
};

struct bref_wc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len;
	uint32_t imm_data; /* raw ibv_wc.imm_data (__be32 memory value) */
	uint32_t wc_flags, qp_num, src_qp, sl;
};

struct bref_cq_out {
	int n_wc;               /* bnxt_re_poll_cq() return value */
	uint32_t cq_head_after, cq_phase_after, cq_head_epoch_after, hw_cqes_after;
	uint64_t doorbell;      /* last CQ doorbell value stored (0 if none) */
	uint32_t n_doorbells;
	uint32_t sq_head_after, sq_cons_idx_after, rq_head_after, rq_cons_idx_after;
	uint32_t qp_state_after; /* qp->qpst (ibv_qp_state; starts as RTS=3, ERR=6) */
};

/* In cqe_ring, the qp_handle field (bytes 0..7 of requester/TERM CQEs,
 * bytes 8..15 of RC/UD receive CQEs) must hold any NONZERO value to mean
 * "this QP" (0 = stale CQE, skipped by rdma-core). The harness substitutes
 * the fake QP pointer for the call and afterwards restores the caller's value,
 * except where rdma-core cleared it (consumed CQEs read back as 0). */
int bref_poll_cq(const struct bref_cq_cfg *cfg, uint8_t *cqe_ring,
		 struct bref_wc *wc_out, struct bref_cq_out *out);

/* ---- doorbells (db.c) ---- */
enum {
	BREF_DB_SQ = 0, BREF_DB_RQ = 1, BREF_DB_SRQ = 2, BREF_DB_SRQ_ARM = 3,
	BREF_DB_CQ = 4, BREF_DB_CQ_ARMSE = 5, BREF_DB_CQ_ARMALL = 6,
	BREF_DB_CQ_CUT_ACK = 9,
};
/* Runs the real bnxt_re_ring_{sq,rq,srq,srq_arm,cq,cq_arm}_db on fake objects:
 *  SQ/RQ/SRQ: index = producer (dbtail / srq tail), epoch = tail epoch;
 *  CQ, CQ_ARMSE, CQ_ARMALL, CQ_CUT_ACK: index = cq head, epoch = head epoch,
 *    toggle = value in the toggle page (ARM) or resize_tog (CUT_ACK);
 *  SRQ_ARM: index = srq_limit, toggle = toggle page value.
 * Returns the doorbell value, or 0 for an unsupported type. */
uint64_t bref_db(uint32_t type, uint32_t xid, uint32_t index, uint32_t epoch,
		 uint32_t toggle);

/* ---- geometry, computed by rdma-core's own create-QP sizing code ---- */
struct bref_geom_in {
	uint32_t wqe_mode, max_send_wr, max_send_sge, max_inline;
	uint32_t max_recv_wr, max_recv_sge;
	uint32_t msn_table, gen_p5_p7, pow2_disabled;
	uint32_t dev_max_sge; /* devattr.max_sge, 0 -> 6 */
};
struct bref_geom {
	int ret;
	uint32_t sq_slots, sq_nwr, sq_max_swr, sq_esize, sq_diff;
	uint32_t psn_offset, psn_entry_size, psn_entries, msn_tbl_sz;
	uint32_t sq_ring_bytes;  /* qattr.sz_ring: ring + psn table, page aligned */
	uint32_t rq_slots, rq_nwr, rq_max_slots;
};
/* bnxt_re_get_qpmem_size + bnxt_re_alloc_queue_ptr + bnxt_re_alloc_queues on a
 * scratch bnxt_re_mem (no ibv_cmd_create_qp). */
int bref_geometry(const struct bref_geom_in *in, struct bref_geom *g);

#ifdef __cplusplus
}
#endif
#endif
