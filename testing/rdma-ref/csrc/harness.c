/*
 * Differential-test reference: runs rdma-core's own mlx5_post_send() (from
 * providers/mlx5/qp.c of the vendored rdma-core tree) against plain memory.
 *
 * Nothing from rdma-core is copied here: qp.c is #included from the source
 * tree. build.sh passes `-iquote $V/providers/mlx5`, so "qp.c" (and the
 * "mlx5.h"/"wqe.h"/... it includes) resolve inside $V.
 */
#include "qp.c"

#include "harness.h"

/* Compile-time check that our numbering matches the rdma-core headers. */
_Static_assert(IBV_WR_RDMA_WRITE == 0 && IBV_WR_RDMA_WRITE_WITH_IMM == 1 &&
	       IBV_WR_SEND == 2 && IBV_WR_SEND_WITH_IMM == 3 &&
	       IBV_WR_RDMA_READ == 4 && IBV_WR_ATOMIC_CMP_AND_SWP == 5 &&
	       IBV_WR_ATOMIC_FETCH_AND_ADD == 6, "ibv_wr_opcode numbering");
_Static_assert(IBV_SEND_FENCE == 1 && IBV_SEND_SIGNALED == 2 &&
	       IBV_SEND_SOLICITED == 4 && IBV_SEND_INLINE == 8,
	       "ibv_send_flags numbering");

/* Persistent QP for benchmarks: set up once, post many times. */
struct ref_state {
	struct mlx5_context *ctx;
	struct mlx5_cq *cq;
	struct mlx5_qp *qp;
	struct mlx5_bf *bf;
	uint8_t *uar;
};

static void ref_free(struct ref_state *st)
{
	if (st->qp) {
		free(st->qp->sq.wrid);
		free(st->qp->sq.wqe_head);
		free(st->qp->sq.wr_data);
	}
	free(st->uar);
	free(st->bf);
	free(st->qp);
	free(st->cq);
	free(st->ctx);
	free(st);
}

static struct ref_state *ref_open(const struct ref_qp_cfg *cfg, uint8_t *sq_buf, __be32 *dbrec)
{
	struct ref_state *st;
	struct ibv_qp *ibqp;
	uint32_t n = cfg->sq_wqe_cnt;

	if (n == 0 || (n & (n - 1)) || cfg->bf_size > 512)
		return NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->ctx = calloc(1, sizeof(*st->ctx));
	st->cq = calloc(1, sizeof(*st->cq));
	st->qp = calloc(1, sizeof(*st->qp));
	st->bf = calloc(1, sizeof(*st->bf));
	st->uar = aligned_alloc(64, 1024);
	if (!st->ctx || !st->cq || !st->qp || !st->bf || !st->uar) {
		ref_free(st);
		return NULL;
	}
	st->qp->sq.wrid = calloc(n, sizeof(*st->qp->sq.wrid));
	st->qp->sq.wqe_head = calloc(n, sizeof(*st->qp->sq.wqe_head));
	st->qp->sq.wr_data = calloc(n, sizeof(*st->qp->sq.wr_data));
	if (!st->qp->sq.wrid || !st->qp->sq.wqe_head || !st->qp->sq.wr_data) {
		ref_free(st);
		return NULL;
	}

	/* context: defaults of an mlx5 context with no environment overrides */
	st->ctx->dbg_fp = stderr;
	st->ctx->shut_up_bf = 0;
	st->ctx->prefer_bf = 0;
	/* send CQ: only its lock is touched (mlx5_wq_overflow slow path) */
	mlx5_spinlock_init(&st->cq->lock, 1);
	/* BlueFlame register: an aligned scratch page standing in for the UAR */
	memset(st->uar, 0, 1024);
	st->bf->reg = st->uar;
	st->bf->offset = 0;
	st->bf->buf_size = cfg->bf_size;
	st->bf->uuarn = cfg->bf_size ? 1 : 0;	/* uuarn 0 == no BlueFlame */
	st->bf->need_lock = 1;
	mlx5_spinlock_init(&st->bf->lock, 1);

	ibqp = &st->qp->verbs_qp.qp;
	ibqp->context = &st->ctx->ibv_ctx.context;
	ibqp->send_cq = &st->cq->verbs_cq.cq;
	ibqp->recv_cq = &st->cq->verbs_cq.cq;
	ibqp->qp_num = cfg->qp_num;
	ibqp->qp_type = IBV_QPT_RC;
	ibqp->state = IBV_QPS_RTS;
	st->qp->ibv_qp = ibqp;

	st->qp->bf = st->bf;
	st->qp->max_inline_data = cfg->max_inline;
	st->qp->fm_cache = 0;
	st->qp->sq_signal_bits = cfg->sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	st->qp->sq_start = sq_buf;
	st->qp->db = dbrec;
	st->qp->wq_sig = 0;
	st->qp->atomics_enabled = 1;
	st->qp->flags = 0;
	mlx5_spinlock_init(&st->qp->sq.lock, 1);
	st->qp->sq.wqe_cnt = n;
	st->qp->sq.max_post = n;
	st->qp->sq.head = 0;
	st->qp->sq.tail = 0;
	st->qp->sq.cur_post = cfg->cur_post;
	st->qp->sq.max_gs = cfg->max_sge;
	st->qp->sq.qp_state_max_gs = cfg->max_sge;	/* == max_gs in RTS */
	st->qp->sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	st->qp->sq.offset = 0;
	st->qp->sq.qend = sq_buf + (size_t)n * MLX5_SEND_WQE_BB;
	return st;
}

static void ref_fill_wr(const struct ref_wr *rwr, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	uint32_t i;

	memset(wr, 0, sizeof(*wr));
	for (i = 0; i < rwr->num_sge && i < 16; i++) {
		sge[i].addr = rwr->sg_list[i].addr;
		sge[i].length = rwr->sg_list[i].length;
		sge[i].lkey = rwr->sg_list[i].lkey;
	}
	wr->sg_list = sge;
	wr->num_sge = (int)rwr->num_sge;
	wr->opcode = (enum ibv_wr_opcode)rwr->opcode;
	wr->send_flags = rwr->send_flags;
	wr->imm_data = rwr->imm_data;
	if (rwr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    rwr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = rwr->remote_addr;
		wr->wr.atomic.compare_add = rwr->compare_add;
		wr->wr.atomic.swap = rwr->swap;
		wr->wr.atomic.rkey = rwr->rkey;
	} else {
		wr->wr.rdma.remote_addr = rwr->remote_addr;
		wr->wr.rdma.rkey = rwr->rkey;
	}
}

int ref_mlx5_post_send(const struct ref_qp_cfg *cfg, const struct ref_wr *rwr,
		       uint8_t *sq_buf, struct ref_out *out)
{
	struct ref_state *st;
	struct ibv_sge sge[16];
	struct ibv_send_wr wr, *bad_wr = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	out->ret = -1;
	if (rwr->num_sge > 16 || rwr->opcode == IBV_WR_BIND_MW || rwr->opcode == IBV_WR_LOCAL_INV)
		return -1;
	st = ref_open(cfg, sq_buf, (__be32 *)out->dbrec);
	if (!st)
		return -1;
	ref_fill_wr(rwr, &wr, sge);
	out->bf_offset_before = st->bf->offset;
	ret = mlx5_post_send(&st->qp->verbs_qp.qp, &wr, &bad_wr);	/* the real rdma-core code */
	out->ret = ret;
	out->bf_offset_after = st->bf->offset;
	out->cur_post_after = st->qp->sq.cur_post;
	memcpy(out->uar, st->uar, sizeof(out->uar));
	ref_free(st);
	return ret;
}

uint64_t ref_mlx5_post_loop(const struct ref_qp_cfg *cfg, const struct ref_wr *rwr,
			    uint8_t *sq_buf, uint32_t *dbrec, uint64_t iters)
{
	struct ref_state *st;
	struct ibv_sge sge[16];
	struct ibv_send_wr wr, *bad_wr = NULL;
	uint64_t i, ok = 0;

	if (rwr->num_sge > 16)
		return 0;
	st = ref_open(cfg, sq_buf, (__be32 *)dbrec);
	if (!st)
		return 0;
	ref_fill_wr(rwr, &wr, sge);
	for (i = 0; i < iters; i++) {
		/* Stand in for completions: everything posted so far is done. */
		st->qp->sq.tail = st->qp->sq.head;
		ok += mlx5_post_send(&st->qp->verbs_qp.qp, &wr, &bad_wr) == 0;
	}
	ref_free(st);
	return ok;
}

/* ---- mlx5dv.h public inline helpers and struct layouts, for cross-checks ---- */

void ref_mlx5dv_set_ctrl_seg(uint8_t *seg, uint16_t pi, uint8_t opcode, uint8_t opmod,
			     uint32_t qp_num, uint8_t fm_ce_se, uint8_t ds, uint8_t signature,
			     uint32_t imm)
{
	mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)seg, pi, opcode, opmod, qp_num,
			    fm_ce_se, ds, signature, imm);
}

void ref_mlx5dv_set_data_seg(uint8_t *seg, uint32_t length, uint32_t lkey, uint64_t address)
{
	mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)seg, length, lkey, (uintptr_t)address);
}

/* owner, opcode, solicited, format as the mlx5dv.h getters decode them */
void ref_mlx5dv_cqe_fields(uint8_t *cqe, uint8_t out[4])
{
	struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)cqe;

	out[0] = mlx5dv_get_cqe_owner(c);
	out[1] = mlx5dv_get_cqe_opcode(c);
	out[2] = mlx5dv_get_cqe_se(c);
	out[3] = mlx5dv_get_cqe_format(c);
}

#define L(s, f) offsetof(struct s, f)
/* sizeof/offsetof of every structure gda encodes, in a fixed order (see src/lib.rs). */
uint32_t ref_mlx5_layout(uint32_t *out, uint32_t cap)
{
	const uint32_t v[] = {
		sizeof(struct mlx5_wqe_ctrl_seg), L(mlx5_wqe_ctrl_seg, opmod_idx_opcode),
		L(mlx5_wqe_ctrl_seg, qpn_ds), L(mlx5_wqe_ctrl_seg, signature),
		L(mlx5_wqe_ctrl_seg, fm_ce_se), L(mlx5_wqe_ctrl_seg, imm),
		sizeof(struct mlx5_wqe_raddr_seg), L(mlx5_wqe_raddr_seg, raddr),
		L(mlx5_wqe_raddr_seg, rkey),
		sizeof(struct mlx5_wqe_data_seg), L(mlx5_wqe_data_seg, byte_count),
		L(mlx5_wqe_data_seg, lkey), L(mlx5_wqe_data_seg, addr),
		sizeof(struct mlx5_wqe_atomic_seg), L(mlx5_wqe_atomic_seg, swap_add),
		L(mlx5_wqe_atomic_seg, compare),
		sizeof(struct mlx5_wqe_masked_atomic_seg), L(mlx5_wqe_masked_atomic_seg, swap_add),
		L(mlx5_wqe_masked_atomic_seg, compare), L(mlx5_wqe_masked_atomic_seg, swap_add_mask),
		L(mlx5_wqe_masked_atomic_seg, compare_mask),
		sizeof(struct mlx5_cqe64), L(mlx5_cqe64, srqn_uidx), L(mlx5_cqe64, imm_inval_pkey),
		L(mlx5_cqe64, byte_cnt), L(mlx5_cqe64, sop_drop_qpn), L(mlx5_cqe64, wqe_counter),
		L(mlx5_cqe64, signature), L(mlx5_cqe64, op_own),
		sizeof(struct mlx5_err_cqe), L(mlx5_err_cqe, vendor_err_synd),
		L(mlx5_err_cqe, syndrome), L(mlx5_err_cqe, s_wqe_opcode_qpn),
		L(mlx5_err_cqe, wqe_counter), L(mlx5_err_cqe, op_own),
		MLX5_OPCODE_NOP, MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_OPCODE_SEND,
		MLX5_OPCODE_SEND_IMM, MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_ATOMIC_CS,
		MLX5_OPCODE_ATOMIC_FA, MLX5_OPCODE_ATOMIC_MASKED_CS, MLX5_OPCODE_ATOMIC_MASKED_FA,
		MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_SOLICITED, MLX5_WQE_CTRL_FENCE,
		MLX5_INLINE_SEG, MLX5_INVALID_LKEY, MLX5_SND_DBR, MLX5_RCV_DBR,
		MLX5_CQE_REQ, MLX5_CQE_RESP_WR_IMM, MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND_IMM,
		MLX5_CQE_RESP_SEND_INV, MLX5_CQE_REQ_ERR, MLX5_CQE_RESP_ERR, MLX5_CQE_INVALID,
		MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR,
		MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
		MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
		MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
	};
	uint32_t i, n = sizeof(v) / sizeof(v[0]);

	for (i = 0; i < n && i < cap; i++)
		out[i] = v[i];
	return n;
}
