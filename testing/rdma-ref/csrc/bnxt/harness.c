/*
 * bnxtref harness: compiles rdma-core v55's own providers/bnxt_re/verbs.c,
 * db.c and memory.c (found via -iquote $V/providers/bnxt_re, nothing copied)
 * and drives bnxt_re_post_send / bnxt_re_post_recv / bnxt_re_poll_cq and the
 * db.c doorbell functions over ordinary memory. See NOTES.md.
 */
#include <util/mmio.h>

/*
 * Doorbell capture. Every bnxt_re doorbell goes through
 * bnxt_re_ring_db() -> mmio_write64_le(dpi->dbpage, val) (db.c). The store
 * itself is still done by rdma-core's own mmio_write64_le (a plain 8-byte
 * store into the harness' doorbell word); this macro only counts the stores
 * and remembers the value. It must be defined after util/mmio.h (include
 * guarded) and before db.c is compiled.
 */
static __thread unsigned bref_db_count;
static __thread uint64_t bref_db_last;

static inline void bref_mmio_write64_le(void *addr, __le64 val)
{
	bref_db_count++;
	bref_db_last = le64toh(val);
	mmio_write64_le(addr, val);
}
#define mmio_write64_le bref_mmio_write64_le

#include "verbs.c"
#include "db.c"
#include "memory.c"
#undef mmio_write64_le

#include "harness.h"

/* the doorbell "page": 8-byte aligned ordinary memory, one per thread */
static __thread __u64 bref_dbpage[8] __attribute__((aligned(64)));

static void bref_db_reset(void)
{
	bref_db_count = 0;
	bref_db_last = 0;
	memset(bref_dbpage, 0, sizeof(bref_dbpage));
}

/* ------------------------------------------------------------------ */
/* Fake objects                                                        */
/* ------------------------------------------------------------------ */

struct bref_env {
	struct bnxt_re_dev rdev;
	struct bnxt_re_context cntx;
	struct bnxt_re_cq cq;
	struct bnxt_re_queue cqq;
	struct bnxt_re_qp qp;
	struct bnxt_re_joint_queue jsqq, jrqq;
	struct bnxt_re_queue sq, rq;
	struct bnxt_re_mem swmem; /* scratch slab for the SW queues (memory.c) */
	void *swbuf;
};

static void bref_env_free(struct bref_env *e)
{
	if (!e)
		return;
	free(e->swbuf);
	free(e);
}

/* Lay out and init a SW queue (struct bnxt_re_wrid ring) with rdma-core's own
 * bnxt_re_alloc_init_swque() + bnxt_re_get_obj() on a calloc'd slab. */
static int bref_init_swque(struct bref_env *e, struct bnxt_re_joint_queue *jqq,
			   uint32_t nwr)
{
	struct bnxt_re_qattr qa = {};

	qa.sw_nwr = nwr;
	qa.sz_shad = nwr * sizeof(struct bnxt_re_wrid);
	return bnxt_re_alloc_init_swque(jqq, &e->swmem, &qa);
}

static struct bref_env *bref_env_new(uint32_t wqe_mode, uint32_t msn_table,
				     uint32_t gen_p5_p7, uint32_t swq_entries)
{
	struct bref_env *e = calloc(1, sizeof(*e));
	size_t slab;

	if (!e)
		return NULL;
	slab = (size_t)swq_entries * sizeof(struct bnxt_re_wrid) + 64;
	e->swbuf = calloc(1, slab);
	if (!e->swbuf) {
		free(e);
		return NULL;
	}
	e->swmem.va_head = e->swbuf;
	e->swmem.size = slab;
	e->swmem.va_tail = (char *)e->swbuf + slab;

	e->rdev.pg_size = 4096;
	e->rdev.cqe_size = bnxt_re_get_cqe_sz();
	e->rdev.devattr.max_sge = 6;
	e->rdev.devattr.atomic_cap = IBV_ATOMIC_HCA;

	e->cntx.ibvctx.context.device = &e->rdev.vdev.device;
	e->cntx.rdev = &e->rdev;
	e->cntx.wqe_mode = wqe_mode;
	e->cntx.comp_mask = msn_table ? BNXT_RE_COMP_MASK_UCNTX_MSN_TABLE_ENABLED : 0;
	e->cntx.cctx.gen_p5_p7 = gen_p5_p7 ? 1 : 0;
	e->cntx.udpi.dpindx = 0;
	e->cntx.udpi.wcdpi = 0;       /* no WC/push doorbells */
	e->cntx.udpi.dbpage = bref_dbpage;
	e->cntx.udpi.wcdbpg = NULL;
	e->cntx.dbr_page = NULL;      /* no doorbell pacing */
	e->cntx.pbrec = NULL;

	/* a CQ used as send_cq/recv_cq (only touched by poll) */
	e->cq.ibvcq.context = &e->cntx.ibvctx.context;
	e->cq.cqq = &e->cqq;
	e->cq.cntx = &e->cntx;
	e->cq.udpi = &e->cntx.udpi;
	e->cq.cqe_size = bnxt_re_get_cqe_sz();
	e->cqq.stride = bnxt_re_get_cqe_sz();
	pthread_spin_init(&e->cqq.qlock, PTHREAD_PROCESS_PRIVATE);
	list_head_init(&e->cq.sfhead);
	list_head_init(&e->cq.rfhead);
	list_head_init(&e->cq.prev_cq_head);

	e->qp.ibvqp.context = &e->cntx.ibvctx.context;
	e->qp.ibvqp.send_cq = &e->cq.ibvcq;
	e->qp.ibvqp.recv_cq = &e->cq.ibvcq;
	e->qp.ibvqp.state = IBV_QPS_RTS;
	e->qp.cctx = &e->cntx.cctx;
	e->qp.cntx = &e->cntx;
	e->qp.jsqq = &e->jsqq;
	e->qp.jrqq = &e->jrqq;
	e->qp.srq = NULL;
	e->qp.scq = &e->cq;
	e->qp.rcq = &e->cq;
	e->qp.udpi = &e->cntx.udpi;
	e->qp.qpmode = wqe_mode & BNXT_RE_WQE_MODE_VARIABLE;
	e->qp.qpst = IBV_QPS_RTS;
	e->qp.push_st_en = 0;
	e->qp.wqe_cnt = 0;
	fque_init_node(&e->qp.snode);
	fque_init_node(&e->qp.rnode);

	e->jsqq.cntx = &e->cntx;
	e->jsqq.hwque = &e->sq;
	e->jrqq.cntx = &e->cntx;
	e->jrqq.hwque = &e->rq;
	e->sq.stride = sizeof(struct bnxt_re_sge);
	e->rq.stride = sizeof(struct bnxt_re_sge);
	pthread_spin_init(&e->sq.qlock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&e->rq.qlock, PTHREAD_PROCESS_PRIVATE);
	return e;
}

static uint32_t bref_qptype(uint32_t t)
{
	return t == IBV_QPT_UD ? IBV_QPT_UD : IBV_QPT_RC;
}

/* ------------------------------------------------------------------ */
/* post_send                                                           */
/* ------------------------------------------------------------------ */

int bref_post_send_n(const struct bref_qp_cfg *cfg, const struct bref_wr *wrs,
		     uint32_t n, uint8_t *sq_buf, size_t sq_buf_len,
		     struct bref_out *out)
{
	struct ibv_send_wr *swr = NULL, *bad = NULL;
	struct ibv_sge *sges = NULL;
	struct bnxt_re_ah *ahs = NULL;
	uint32_t mode = cfg->wqe_mode & BNXT_RE_WQE_MODE_VARIABLE;
	uint32_t nwr, sw_nwr, npsn, psne, i, j, esz = 0;
	struct bref_env *e = NULL;
	struct bnxt_re_wrid *last;
	int ret = BREF_EHARNESS, nsl;

	memset(out, 0, sizeof(*out));
	out->bad_index = -1;
	if (!cfg->sq_slots || cfg->sq_tail >= cfg->sq_slots ||
	    cfg->sq_head >= cfg->sq_slots || n == 0 ||
	    cfg->mtu_enum < 1 || cfg->mtu_enum > 5 ||
	    cfg->max_inline > BNXT_RE_MAX_INLINE_SIZE)
		goto done;
	if (mode == BNXT_RE_WQE_MODE_STATIC &&
	    (cfg->sq_slots % 8 || cfg->sq_tail % 8))
		goto done;
	for (i = 0; i < n; i++)
		if (wrs[i].num_sge > 8)
			goto done;

	nwr = mode ? cfg->sq_slots : cfg->sq_slots / 8;
	sw_nwr = nwr; /* qattr.sw_nwr: variable -> nslots, static -> nswr */
	npsn = bnxt_re_get_npsn(mode, cfg->sq_slots / 8, cfg->sq_slots);
	if (cfg->msn_table)
		npsn = roundup_pow_of_two(npsn);

	e = bref_env_new(mode, cfg->msn_table, cfg->psn_ext, sw_nwr);
	if (!e)
		goto done;
	psne = bnxt_re_get_psne_size(&e->cntx);
	if (sq_buf_len < (size_t)cfg->sq_slots * 16 + (size_t)npsn * psne)
		goto done;

	/* device max_sge only bounds the esize computation below */
	e->rdev.devattr.max_sge = MAX(6u, cfg->max_sge);
	if (cfg->atomics_disabled)
		e->rdev.devattr.atomic_cap = IBV_ATOMIC_NONE;

	/* --- QP --- */
	e->qp.ibvqp.qp_num = cfg->qp_id;
	e->qp.ibvqp.qp_type = bref_qptype(cfg->qp_type);
	e->qp.qptyp = bref_qptype(cfg->qp_type);
	e->qp.qpid = cfg->qp_id;
	e->qp.sq_psn = cfg->sq_psn;
	e->qp.mtu = (0x80 << cfg->mtu_enum); /* as bnxt_re_modify_qp(IBV_QP_PATH_MTU) */
	e->qp.cap.max_ssge = cfg->max_sge;
	e->qp.cap.max_inline = cfg->max_inline;
	e->qp.cap.sqsig = cfg->sig_all ? 1 : 0;
	e->qp.cap.is_atomic_cap = e->rdev.devattr.atomic_cap;
	e->qp.cap.max_swr = sw_nwr;
	e->qp.rand.seed = cfg->qp_id;

	/* --- SQ hw queue (fields as bnxt_re_alloc_queues sets them) --- */
	nsl = bnxt_re_get_sq_slots(&e->rdev, mode, 1, cfg->max_sge,
				   cfg->max_inline, &esz);
	if (nsl < 0)
		goto done;
	e->sq.va = sq_buf;
	e->sq.depth = cfg->sq_slots;
	e->sq.head = cfg->sq_head;
	e->sq.tail = cfg->sq_tail;
	e->sq.flags = (cfg->sq_epoch & 1) << BNXT_RE_FLAG_EPOCH_TAIL_SHIFT;
	e->sq.esize = esz;
	e->sq.diff = (BNXT_RE_FULL_FLAG_DELTA * esz) / e->sq.stride;
	e->sq.pad = (char *)sq_buf + (size_t)e->sq.depth * e->sq.stride;
	e->sq.pad_stride_log2 = ilog32(psne - 1);
	if (cfg->msn_table) {
		e->sq.msn_tbl_sz = mode ? roundup_pow_of_two(cfg->sq_slots) / 2 :
					  roundup_pow_of_two(nwr);
		if (cfg->msn >= e->sq.msn_tbl_sz)
			goto done;
		e->sq.msn = cfg->msn;
	}
	if (bref_init_swque(e, &e->jsqq, sw_nwr))
		goto done;
	e->jsqq.start_idx = mode ? 0 : cfg->sq_tail / 8;
	e->jsqq.last_idx = e->jsqq.start_idx;
	e->sq.dbtail = mode ? &e->sq.tail : &e->jsqq.start_idx;

	/* --- WR chain --- */
	swr = calloc(n, sizeof(*swr));
	sges = calloc((size_t)n * 8, sizeof(*sges));
	ahs = calloc(n, sizeof(*ahs));
	if (!swr || !sges || !ahs)
		goto done;
	for (i = 0; i < n; i++) {
		const struct bref_wr *w = &wrs[i];

		for (j = 0; j < w->num_sge; j++) {
			sges[i * 8 + j].addr = w->sg_list[j].addr;
			sges[i * 8 + j].length = w->sg_list[j].length;
			sges[i * 8 + j].lkey = w->sg_list[j].lkey;
		}
		swr[i].wr_id = w->wr_id;
		swr[i].next = (i + 1 < n) ? &swr[i + 1] : NULL;
		swr[i].sg_list = &sges[i * 8];
		swr[i].num_sge = w->num_sge;
		swr[i].opcode = w->opcode;
		swr[i].send_flags = w->send_flags;
		swr[i].imm_data = w->imm_data;
		if (e->qp.qptyp == IBV_QPT_UD) {
			ahs[i].avid = w->ud_avid;
			swr[i].wr.ud.ah = &ahs[i].ibvah;
			swr[i].wr.ud.remote_qpn = w->ud_remote_qpn;
			swr[i].wr.ud.remote_qkey = w->ud_remote_qkey;
		} else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			   w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			swr[i].wr.atomic.remote_addr = w->remote_addr;
			swr[i].wr.atomic.compare_add = w->compare_add;
			swr[i].wr.atomic.swap = w->swap;
			swr[i].wr.atomic.rkey = w->rkey;
		} else {
			swr[i].wr.rdma.remote_addr = w->remote_addr;
			swr[i].wr.rdma.rkey = w->rkey;
		}
	}

	bref_db_reset();
	ret = bnxt_re_post_send(&e->qp.ibvqp, swr, &bad);

	out->sq_tail_after = e->sq.tail;
	out->sq_epoch_after = (e->sq.flags >> BNXT_RE_FLAG_EPOCH_TAIL_SHIFT) & 1;
	out->sq_psn_after = e->qp.sq_psn;
	out->msn_after = e->sq.msn;
	out->n_doorbells = bref_db_count;
	out->doorbell = bref_db_count ? le64toh(*(volatile uint64_t *)bref_dbpage) : 0;
	out->bad_index = bad ? (int32_t)(bad - swr) : -1;
	out->sw_idx_after = e->jsqq.start_idx;
	out->psn_table_offset = cfg->sq_slots * 16;
	out->psn_entry_size = psne;
	out->psn_table_entries = npsn;
	out->msn_tbl_sz = e->sq.msn_tbl_sz;
	out->sq_diff = e->sq.diff;
	/* bookkeeping of the last WR that was accepted */
	if (ret == 0 || out->bad_index > 0) {
		last = &e->jsqq.swque[(e->jsqq.start_idx + sw_nwr - 1) % sw_nwr];
		out->last_slots = last->slots;
		out->last_bytes = last->bytes;
		out->last_wc_opcode = last->wc_opcd;
		out->last_sig = last->sig;
		out->last_st_slot_idx = last->st_slot_idx;
	}
done:
	out->ret = ret;
	free(swr);
	free(sges);
	free(ahs);
	bref_env_free(e);
	return ret;
}

int bref_post_send(const struct bref_qp_cfg *cfg, const struct bref_wr *wr,
		   uint8_t *sq_buf, size_t sq_buf_len, struct bref_out *out)
{
	return bref_post_send_n(cfg, wr, 1, sq_buf, sq_buf_len, out);
}

/* ------------------------------------------------------------------ */
/* post_recv                                                           */
/* ------------------------------------------------------------------ */

int bref_post_recv(const struct bref_rq_cfg *cfg, uint64_t wr_id,
		   uint32_t num_sge, const struct bref_sge *sges,
		   uint8_t *rq_buf, size_t rq_buf_len, struct bref_rq_out *out)
{
	uint32_t mode = cfg->wqe_mode & BNXT_RE_WQE_MODE_VARIABLE;
	struct ibv_recv_wr rwr = {}, *bad = NULL;
	struct ibv_sge isg[16];
	struct bref_env *e = NULL;
	uint32_t esz = 0, nrwr, i;
	int ret = BREF_EHARNESS, nsl;

	memset(out, 0, sizeof(*out));
	if (num_sge > 16 || !cfg->rq_slots || cfg->rq_tail >= cfg->rq_slots ||
	    cfg->rq_head >= cfg->rq_slots ||
	    rq_buf_len < (size_t)cfg->rq_slots * 16)
		goto done;

	e = bref_env_new(mode, 0, 0, 1);
	if (!e)
		goto done;
	e->rdev.devattr.max_sge = MAX(6u, cfg->max_sge);
	/* que->max_slots = esize / stride, esize from bnxt_re_get_rq_slots */
	nsl = bnxt_re_get_rq_slots(&e->rdev, mode, 1, cfg->max_sge, &esz);
	if (nsl < 0)
		goto done;
	e->rq.max_slots = esz / e->rq.stride;
	nrwr = cfg->rq_slots / e->rq.max_slots;
	if (!nrwr || cfg->wqe_idx >= nrwr)
		goto done;
	/* re-create with an RQ SW queue of nrwr entries */
	bref_env_free(e);
	e = bref_env_new(mode, 0, 0, nrwr);
	if (!e)
		goto done;
	e->rdev.devattr.max_sge = MAX(6u, cfg->max_sge);
	e->rq.max_slots = esz / e->rq.stride;

	e->qp.ibvqp.qp_num = cfg->qp_id;
	e->qp.ibvqp.qp_type = IBV_QPT_RC;
	e->qp.qptyp = IBV_QPT_RC;
	e->qp.qpid = cfg->qp_id;
	e->qp.rand.seed = cfg->qp_id;
	e->qp.cap.max_rsge = cfg->max_sge;
	e->qp.cap.max_rwr = nrwr;

	e->rq.va = rq_buf;
	e->rq.depth = cfg->rq_slots;
	e->rq.head = cfg->rq_head;
	e->rq.tail = cfg->rq_tail;
	e->rq.flags = (cfg->rq_epoch & 1) << BNXT_RE_FLAG_EPOCH_TAIL_SHIFT;
	e->rq.dbtail = &e->jrqq.start_idx;
	if (bref_init_swque(e, &e->jrqq, nrwr))
		goto done;
	e->jrqq.start_idx = cfg->wqe_idx;
	e->jrqq.last_idx = cfg->wqe_idx;

	for (i = 0; i < num_sge; i++) {
		isg[i].addr = sges[i].addr;
		isg[i].length = sges[i].length;
		isg[i].lkey = sges[i].lkey;
	}
	rwr.wr_id = wr_id;
	rwr.sg_list = isg;
	rwr.num_sge = num_sge;

	bref_db_reset();
	ret = bnxt_re_post_recv(&e->qp.ibvqp, &rwr, &bad);

	out->rq_tail_after = e->rq.tail;
	out->rq_epoch_after = (e->rq.flags >> BNXT_RE_FLAG_EPOCH_TAIL_SHIFT) & 1;
	out->wqe_idx_after = e->jrqq.start_idx;
	out->max_slots = e->rq.max_slots;
	out->n_doorbells = bref_db_count;
	out->doorbell = bref_db_count ? le64toh(*(volatile uint64_t *)bref_dbpage) : 0;
done:
	out->ret = ret;
	bref_env_free(e);
	return ret;
}

/* ------------------------------------------------------------------ */
/* poll_cq                                                             */
/* ------------------------------------------------------------------ */

#define BREF_MAX_NWC 64

/* offset of qp_handle inside a 32-byte CQE of the given type, or -1 */
static int bref_handle_off(uint32_t type)
{
	switch (type) {
	case BNXT_RE_WC_TYPE_SEND:
	case BNXT_RE_WC_TYPE_TERM:
		return offsetof(struct bnxt_re_req_cqe, qp_handle);
	case BNXT_RE_WC_TYPE_RECV_RC:
	case BNXT_RE_WC_TYPE_RECV_UD:
		return offsetof(struct bnxt_re_rc_cqe, qp_handle);
	default:
		return -1;
	}
}

int bref_poll_cq(const struct bref_cq_cfg *cfg, uint8_t *cqe_ring,
		 struct bref_wc *wc_out, struct bref_cq_out *out)
{
	struct ibv_wc wc[BREF_MAX_NWC];
	struct bref_env *e = NULL;
	uint64_t *saved = NULL;
	uint32_t i, idx, ph, tail;
	uint32_t cqesz = bnxt_re_get_cqe_sz();
	int ret = BREF_EHARNESS;

	memset(out, 0, sizeof(*out));
	if (!cfg->cq_depth || cfg->cq_head >= cfg->cq_depth ||
	    cfg->nwc > BREF_MAX_NWC || !cfg->max_swr || !cfg->sq_slots ||
	    cfg->n_swqe > cfg->max_swr || cfg->sq_cons_idx >= cfg->max_swr ||
	    cfg->sq_head >= cfg->sq_slots)
		goto done;
	if (cfg->rq_nwr && (cfg->n_rwqe > cfg->rq_nwr ||
			    cfg->rq_cons_idx >= cfg->rq_nwr ||
			    !cfg->rq_slots || cfg->rq_head >= cfg->rq_slots))
		goto done;
	if (!cfg->rq_nwr && cfg->n_rwqe)
		goto done;

	/* Refuse CUT_OFF (resize) CQEs that poll could reach: the resize
	 * completion path needs the kernel (ibv_cmd_poll_cq, munmap). */
	for (i = 0, idx = cfg->cq_head, ph = cfg->cq_phase & 1; i < cfg->cq_depth; i++) {
		uint32_t w = le32toh(*(uint32_t *)(cqe_ring + idx * cqesz + 24));

		if ((w & 1) != ph)
			break;
		if (((w >> 1) & 0xF) == BNXT_RE_WC_TYPE_COFF)
			goto done;
		if (++idx == cfg->cq_depth) {
			idx = 0;
			ph ^= 1;
		}
	}

	e = bref_env_new(0, 0, 0, cfg->max_swr + (cfg->rq_nwr ? cfg->rq_nwr : 1));
	if (!e)
		goto done;

	/* --- CQ --- */
	e->cq.cqid = cfg->cq_id;
	e->cq.phase = cfg->cq_phase & BNXT_RE_BCQE_PH_MASK;
	e->cq.deffered_db_sup = cfg->deferred_db ? true : false;
	e->cq.hw_cqes = cfg->hw_cqes;
	e->cq.rand.seed = cfg->cq_id;
	e->cq.toggle_map = NULL;
	e->cqq.va = cqe_ring;
	e->cqq.depth = cfg->cq_depth;
	e->cqq.head = cfg->cq_head;
	e->cqq.flags = (cfg->cq_head_epoch & 1) << BNXT_RE_FLAG_EPOCH_HEAD_SHIFT;

	/* --- QP --- */
	e->qp.ibvqp.qp_num = cfg->qp_id;
	e->qp.ibvqp.qp_type = bref_qptype(cfg->qp_type);
	e->qp.qptyp = bref_qptype(cfg->qp_type);
	e->qp.qpid = cfg->qp_id;
	e->qp.cap.max_swr = cfg->max_swr;

	/* SQ: outstanding WQEs from sq_cons_idx on, as post_send left them */
	if (bref_init_swque(e, &e->jsqq, cfg->max_swr))
		goto done;
	e->sq.depth = cfg->sq_slots;
	e->sq.head = cfg->sq_head;
	tail = cfg->sq_head;
	for (i = 0; i < cfg->n_swqe; i++) {
		const struct bref_swqe *s = &cfg->swqe[i];
		struct bnxt_re_wrid *w =
			&e->jsqq.swque[(cfg->sq_cons_idx + i) % cfg->max_swr];

		w->wrid = s->wr_id;
		w->bytes = s->bytes;
		w->sig = s->signaled ? IBV_SEND_SIGNALED : 0;
		w->slots = s->slots;
		w->st_slot_idx = tail;
		w->wc_opcd = bnxt_re_ibv_wr_to_wc_opcd(s->wr_opcode);
		tail = (tail + s->slots) % cfg->sq_slots;
	}
	e->sq.tail = tail;
	e->jsqq.last_idx = cfg->sq_cons_idx;
	e->jsqq.start_idx = (cfg->sq_cons_idx + cfg->n_swqe) % cfg->max_swr;

	/* RQ */
	if (cfg->rq_nwr) {
		if (bref_init_swque(e, &e->jrqq, cfg->rq_nwr))
			goto done;
		e->rq.depth = cfg->rq_slots;
		e->rq.max_slots = cfg->rq_max_slots;
		e->rq.head = cfg->rq_head;
		for (i = 0; i < cfg->n_rwqe; i++) {
			struct bnxt_re_wrid *w =
				&e->jrqq.swque[(cfg->rq_cons_idx + i) % cfg->rq_nwr];

			w->wrid = cfg->rq_wr_id[i];
			w->slots = cfg->rq_max_slots;
			w->wc_opcd = BNXT_RE_WC_OPCD_RECV;
		}
		e->rq.tail = (cfg->rq_head + cfg->n_rwqe * cfg->rq_max_slots) %
			     cfg->rq_slots;
		e->jrqq.last_idx = cfg->rq_cons_idx;
		e->jrqq.start_idx = (cfg->rq_cons_idx + cfg->n_rwqe) % cfg->rq_nwr;
	} else {
		/* empty RQ: flush walks it only if head != tail */
		if (bref_init_swque(e, &e->jrqq, 1))
			goto done;
		e->rq.depth = 1;
	}

	/* substitute the QP pointer for nonzero qp_handle tokens */
	saved = calloc(cfg->cq_depth, sizeof(*saved));
	if (!saved)
		goto done;
	for (i = 0; i < cfg->cq_depth; i++) {
		uint8_t *c = cqe_ring + i * cqesz;
		uint32_t w = le32toh(*(uint32_t *)(c + 24));
		int off = bref_handle_off((w >> 1) & 0xF);
		uint64_t h;

		if (off < 0)
			continue;
		memcpy(&h, c + off, 8);
		saved[i] = h;
		if (h) {
			h = htole64((uintptr_t)&e->qp);
			memcpy(c + off, &h, 8);
		}
	}

	memset(wc, 0, sizeof(wc));
	bref_db_reset();
	ret = bnxt_re_poll_cq(&e->cq.ibvcq, cfg->nwc, wc);

	for (i = 0; i < cfg->cq_depth; i++) {
		uint8_t *c = cqe_ring + i * cqesz;
		uint32_t w = le32toh(*(uint32_t *)(c + 24));
		int off = bref_handle_off((w >> 1) & 0xF);
		uint64_t h;

		if (off < 0)
			continue;
		memcpy(&h, c + off, 8);
		if (h == htole64((uintptr_t)&e->qp))
			memcpy(c + off, &saved[i], 8);
	}

	for (i = 0; ret > 0 && i < (uint32_t)ret; i++) {
		wc_out[i].wr_id = wc[i].wr_id;
		wc_out[i].status = wc[i].status;
		wc_out[i].opcode = wc[i].opcode;
		wc_out[i].vendor_err = wc[i].vendor_err;
		wc_out[i].byte_len = wc[i].byte_len;
		wc_out[i].imm_data = wc[i].imm_data;
		wc_out[i].wc_flags = wc[i].wc_flags;
		wc_out[i].qp_num = wc[i].qp_num;
		wc_out[i].src_qp = wc[i].src_qp;
		wc_out[i].sl = wc[i].sl;
	}
	out->cq_head_after = e->cqq.head;
	out->cq_phase_after = e->cq.phase;
	out->cq_head_epoch_after = (e->cqq.flags >> BNXT_RE_FLAG_EPOCH_HEAD_SHIFT) & 1;
	out->hw_cqes_after = e->cq.hw_cqes;
	out->n_doorbells = bref_db_count;
	out->doorbell = bref_db_count ? le64toh(*(volatile uint64_t *)bref_dbpage) : 0;
	out->sq_head_after = e->sq.head;
	out->sq_cons_idx_after = e->jsqq.last_idx;
	out->rq_head_after = e->rq.head;
	out->rq_cons_idx_after = e->jrqq.last_idx;
	out->qp_state_after = e->qp.qpst;
done:
	out->n_wc = ret;
	free(saved);
	bref_env_free(e);
	return ret;
}

/* ------------------------------------------------------------------ */
/* doorbells                                                           */
/* ------------------------------------------------------------------ */

uint64_t bref_db(uint32_t type, uint32_t xid, uint32_t index, uint32_t epoch,
		 uint32_t toggle)
{
	struct bref_env *e = bref_env_new(0, 0, 0, 1);
	struct bnxt_re_srq srq = {};
	struct bnxt_re_queue srqq = {};
	uint32_t tog = toggle;
	uint64_t v = 0;

	if (!e)
		return 0;
	bref_db_reset();
	switch (type) {
	case BREF_DB_SQ:
	case BREF_DB_RQ: {
		struct bnxt_re_joint_queue *jq =
			type == BREF_DB_SQ ? &e->jsqq : &e->jrqq;

		e->qp.qpid = xid;
		e->qp.rand.seed = xid;
		jq->start_idx = index;
		jq->hwque->dbtail = &jq->start_idx;
		jq->hwque->flags = (epoch & 1) << BNXT_RE_FLAG_EPOCH_TAIL_SHIFT;
		if (type == BREF_DB_SQ)
			bnxt_re_ring_sq_db(&e->qp);
		else
			bnxt_re_ring_rq_db(&e->qp);
		break;
	}
	case BREF_DB_SRQ:
	case BREF_DB_SRQ_ARM:
		srq.cntx = &e->cntx;
		srq.srqq = &srqq;
		srq.udpi = &e->cntx.udpi;
		srq.srqid = xid;
		srq.rand.seed = xid;
		srqq.tail = index;
		srqq.flags = (epoch & 1) << BNXT_RE_FLAG_EPOCH_TAIL_SHIFT;
		srq.cap.srq_limit = index;
		srq.toggle_map = &tog;
		if (type == BREF_DB_SRQ)
			bnxt_re_ring_srq_db(&srq);
		else
			bnxt_re_ring_srq_arm(&srq);
		break;
	case BREF_DB_CQ:
	case BREF_DB_CQ_ARMSE:
	case BREF_DB_CQ_ARMALL:
	case BREF_DB_CQ_CUT_ACK:
		e->cq.cqid = xid;
		e->cq.rand.seed = xid;
		e->cqq.head = index;
		e->cqq.flags = (epoch & 1) << BNXT_RE_FLAG_EPOCH_HEAD_SHIFT;
		e->cq.toggle_map = &tog;
		e->cq.resize_tog = toggle;
		if (type == BREF_DB_CQ)
			bnxt_re_ring_cq_db(&e->cq);
		else
			bnxt_re_ring_cq_arm_db(&e->cq, type);
		break;
	default:
		break;
	}
	if (bref_db_count)
		v = le64toh(*(volatile uint64_t *)bref_dbpage);
	bref_env_free(e);
	return v;
}

/* ------------------------------------------------------------------ */
/* geometry                                                            */
/* ------------------------------------------------------------------ */

int bref_geometry(const struct bref_geom_in *in, struct bref_geom *g)
{
	struct bnxt_re_dev rdev = {};
	struct bnxt_re_context cntx = {};
	struct ibv_qp_init_attr attr = {};
	struct bnxt_re_qattr qattr[2];
	struct bnxt_re_mem mem = {};
	struct bnxt_re_qp *qp;
	uint32_t mode = in->wqe_mode & BNXT_RE_WQE_MODE_VARIABLE;
	void *buf = NULL;
	int bytes, ret = BREF_EHARNESS;

	memset(g, 0, sizeof(*g));
	memset(qattr, 0, sizeof(qattr));
	rdev.pg_size = 4096;
	rdev.devattr.max_sge = in->dev_max_sge ? in->dev_max_sge : 6;
	cntx.rdev = &rdev;
	cntx.wqe_mode = mode;
	cntx.cctx.gen_p5_p7 = in->gen_p5_p7 ? 1 : 0;
	cntx.comp_mask = (in->msn_table ? BNXT_RE_COMP_MASK_UCNTX_MSN_TABLE_ENABLED : 0) |
			 (in->pow2_disabled ? BNXT_RE_COMP_MASK_UCNTX_POW2_DISABLED : 0);
	attr.cap.max_send_wr = in->max_send_wr;
	attr.cap.max_send_sge = in->max_send_sge;
	attr.cap.max_inline_data = in->max_inline;
	attr.cap.max_recv_wr = in->max_recv_wr;
	attr.cap.max_recv_sge = in->max_recv_sge;
	attr.qp_type = IBV_QPT_RC;

	/* bnxt_re_create_qp() up to (not including) ibv_cmd_create_qp, with the
	 * slab calloc'd instead of mmap'd (bnxt_re_alloc_mem needs ibv_dontfork_range) */
	bytes = bnxt_re_get_qpmem_size(&cntx, &attr, qattr);
	if (bytes < 0)
		goto out;
	bytes = align(bytes, rdev.pg_size);
	buf = calloc(1, bytes);
	if (!buf)
		goto out;
	mem.va_head = buf;
	mem.size = bytes;
	mem.va_tail = (char *)buf + bytes;
	qp = bnxt_re_get_obj(&mem, sizeof(*qp));
	if (!qp)
		goto out;
	qp->mem = &mem;
	qp->cctx = &cntx.cctx;
	qp->cntx = &cntx;
	qp->qpmode = mode;
	if (bnxt_re_alloc_queue_ptr(qp, &attr))
		goto out;
	if (bnxt_re_alloc_queues(qp, &attr, qattr))
		goto out;

	g->sq_slots = qp->jsqq->hwque->depth;
	g->sq_nwr = qattr[0].nwr;
	g->sq_max_swr = qp->cap.max_swr;
	g->sq_esize = qattr[0].esize;
	g->sq_diff = qp->jsqq->hwque->diff;
	g->psn_offset = (uint32_t)((char *)qp->jsqq->hwque->pad -
				   (char *)qp->jsqq->hwque->va);
	g->psn_entry_size = bnxt_re_get_psne_size(&cntx);
	g->psn_entries = bnxt_re_get_npsn(mode, qattr[0].nwr, qattr[0].slots);
	if (BNXT_RE_MSN_TBL_EN(&cntx))
		g->psn_entries = roundup_pow_of_two(g->psn_entries);
	g->msn_tbl_sz = qp->jsqq->hwque->msn_tbl_sz;
	g->sq_ring_bytes = qattr[0].sz_ring;
	g->rq_slots = qp->jrqq->hwque->depth;
	g->rq_nwr = qp->cap.max_rwr;
	g->rq_max_slots = qp->jrqq->hwque->max_slots;
	pthread_spin_destroy(&qp->jsqq->hwque->qlock);
	pthread_spin_destroy(&qp->jrqq->hwque->qlock);
	ret = 0;
out:
	g->ret = ret;
	free(buf);
	return ret;
}
