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

int ref_mlx5_post_send(const struct ref_qp_cfg *cfg, const struct ref_wr *rwr,
		       uint8_t *sq_buf, struct ref_out *out)
{
	struct mlx5_context *ctx;
	struct mlx5_cq *cq;
	struct mlx5_qp *qp;
	struct mlx5_bf *bf;
	struct ibv_qp *ibqp;
	struct ibv_sge sge[16];
	struct ibv_send_wr wr, *bad_wr = NULL;
	/* The BlueFlame/doorbell register. A real UAR is page aligned and
	 * mlx5 does 8-byte (doorbell) and 64-byte (BlueFlame) stores into it;
	 * struct ref_out is only 4-byte aligned, so post into an aligned
	 * scratch copy and hand the bytes back in out->uar afterwards. */
	_Alignas(64) uint8_t uar[sizeof(out->uar)];
	uint32_t n = cfg->sq_wqe_cnt;
	uint32_t i;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	out->ret = -1;
	if (n == 0 || (n & (n - 1)) || rwr->num_sge > 16 ||
	    rwr->opcode == IBV_WR_BIND_MW || rwr->opcode == IBV_WR_LOCAL_INV ||
	    cfg->bf_size > sizeof(out->uar) / 2)
		return -1;

	/* Heap objects: mlx5_context is large; calloc also zeroes every field
	 * we do not set explicitly (see NOTES.md for the list we do set). */
	ctx = calloc(1, sizeof(*ctx));
	cq = calloc(1, sizeof(*cq));
	qp = calloc(1, sizeof(*qp));
	bf = calloc(1, sizeof(*bf));
	if (!ctx || !cq || !qp || !bf)
		goto free_objs;
	qp->sq.wrid = calloc(n, sizeof(*qp->sq.wrid));
	qp->sq.wqe_head = calloc(n, sizeof(*qp->sq.wqe_head));
	qp->sq.wr_data = calloc(n, sizeof(*qp->sq.wr_data));
	if (!qp->sq.wrid || !qp->sq.wqe_head || !qp->sq.wr_data)
		goto free_arrays;

	/* --- context: defaults of an mlx5 context with no env overrides --- */
	ctx->dbg_fp = stderr;		/* only read; mlx5_dbg() is a no-op w/o MLX5_DEBUG */
	ctx->shut_up_bf = 0;		/* MLX5_SHUT_UP_BF unset */
	ctx->prefer_bf = 0;		/* MLX5_POST_SEND_PREFER_BF unset */

	/* --- send CQ: only its lock is touched (mlx5_wq_overflow slow path) --- */
	mlx5_spinlock_init(&cq->lock, 1);

	/* --- BlueFlame register: "UAR" is the aligned scratch, copied to out->uar --- */
	memset(uar, 0, sizeof(uar));
	bf->reg = uar;
	bf->offset = 0;
	bf->buf_size = cfg->bf_size;
	bf->uuarn = cfg->bf_size ? 1 : 0;	/* uuarn 0 == no BlueFlame (doorbell only) */
	bf->need_lock = 1;			/* exercise mmio_wc_spinlock()/unlock path */
	mlx5_spinlock_init(&bf->lock, 1);

	/* --- ibv_qp embedded in mlx5_qp (to_mqp() is container_of) --- */
	ibqp = &qp->verbs_qp.qp;
	ibqp->context = &ctx->ibv_ctx.context;
	ibqp->send_cq = &cq->verbs_cq.cq;
	ibqp->recv_cq = &cq->verbs_cq.cq;
	ibqp->qp_num = cfg->qp_num;
	ibqp->qp_type = IBV_QPT_RC;
	ibqp->state = IBV_QPS_RTS;
	qp->ibv_qp = ibqp;

	/* --- mlx5_qp send-side fields --- */
	qp->bf = bf;
	qp->max_inline_data = cfg->max_inline;
	qp->fm_cache = 0;
	qp->sq_signal_bits = cfg->sig_all ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	qp->sq_start = sq_buf;
	qp->db = (__be32 *)out->dbrec;
	qp->wq_sig = 0;
	qp->atomics_enabled = 1;
	qp->flags = 0;

	mlx5_spinlock_init(&qp->sq.lock, 1);
	qp->sq.wqe_cnt = n;
	qp->sq.max_post = n;		/* verbs.c: wq_size / wqe_size */
	qp->sq.head = 0;
	qp->sq.tail = 0;
	qp->sq.cur_post = cfg->cur_post;
	qp->sq.max_gs = cfg->max_sge;
	qp->sq.qp_state_max_gs = cfg->max_sge;	/* == max_gs in RTS (verbs.c) */
	qp->sq.wqe_shift = MLX5_SEND_WQE_SHIFT;
	qp->sq.offset = 0;
	qp->sq.qend = sq_buf + (size_t)n * MLX5_SEND_WQE_BB;

	/* --- the work request --- */
	memset(&wr, 0, sizeof(wr));
	for (i = 0; i < rwr->num_sge; i++) {
		sge[i].addr = rwr->sg_list[i].addr;
		sge[i].length = rwr->sg_list[i].length;
		sge[i].lkey = rwr->sg_list[i].lkey;
	}
	wr.wr_id = 0;
	wr.next = NULL;
	wr.sg_list = sge;
	wr.num_sge = (int)rwr->num_sge;
	wr.opcode = (enum ibv_wr_opcode)rwr->opcode;
	wr.send_flags = rwr->send_flags;
	wr.imm_data = rwr->imm_data;	/* union with invalidate_rkey */
	if (rwr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    rwr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = rwr->remote_addr;
		wr.wr.atomic.compare_add = rwr->compare_add;
		wr.wr.atomic.swap = rwr->swap;
		wr.wr.atomic.rkey = rwr->rkey;
	} else {
		wr.wr.rdma.remote_addr = rwr->remote_addr;
		wr.wr.rdma.rkey = rwr->rkey;
	}

	out->bf_offset_before = bf->offset;
	ret = mlx5_post_send(ibqp, &wr, &bad_wr);	/* the real rdma-core code */
	out->ret = ret;
	out->bf_offset_after = bf->offset;
	out->cur_post_after = qp->sq.cur_post;
	memcpy(out->uar, uar, sizeof(out->uar));

	pthread_spin_destroy(&bf->lock.lock);
	pthread_spin_destroy(&qp->sq.lock.lock);
	pthread_spin_destroy(&cq->lock.lock);
free_arrays:
	free(qp->sq.wrid);
	free(qp->sq.wqe_head);
	free(qp->sq.wr_data);
free_objs:
	free(bf);
	free(qp);
	free(cq);
	free(ctx);
	return ret;
}
