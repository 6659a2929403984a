/* GPUDirect-Async style on the verbs-compatible library: two RC QPs brought up with ibv_*,
 * then the program takes the rings with mlx5dv_init_obj and drives the NIC itself — builds
 * mlx5 WQEs in the send queue, writes the doorbell record and the BlueFlame register, polls
 * CQEs by their owner bit — and mixes that with ibv_post_send on the same QP.
 * Last line: "N passed, M failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static int connect_qp(struct ibv_qp *q, uint32_t dest)
{
	union ibv_gid gid;
	ibv_query_gid(ctx, 1, 1, &gid);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_1024;
	at.dest_qp_num = dest;
	at.max_dest_rd_atomic = 1;
	at.min_rnr_timer = 12;
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = gid;
	at.ah_attr.grh.sgid_index = 1;
	at.ah_attr.grh.hop_limit = 64;
	at.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -2;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.max_rd_atomic = 1;
	return ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) ? -3 : 0;
}

static struct mlx5dv_qp dq;
static struct mlx5dv_cq dc;
static uint32_t bf_offset, ci;

/* An RDMA WRITE WQE at producer index pi, written by hand (three 16-byte segments). */
static void post_direct(uint32_t qpn, uint16_t pi, uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	uint8_t *wqe = (uint8_t *)dq.sq.buf + (size_t)(pi & (dq.sq.wqe_cnt - 1)) * dq.sq.stride;
	struct mlx5_wqe_ctrl_seg *ctrl = (struct mlx5_wqe_ctrl_seg *)wqe;
	mlx5dv_set_ctrl_seg(ctrl, pi, MLX5_OPCODE_RDMA_WRITE, 0, qpn, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
	struct mlx5_wqe_raddr_seg *r = (struct mlx5_wqe_raddr_seg *)(wqe + 16);
	r->raddr = htobe64(raddr);
	r->rkey = htobe32(rkey);
	r->reserved = 0;
	mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(wqe + 32), len, lkey, laddr);
	/* WQE stores before the doorbell record, the record before the doorbell. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	dq.dbrec[MLX5_SND_DBR] = htobe32((uint32_t)(pi + 1) & 0xffff);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*(volatile uint64_t *)((uint8_t *)dq.bf.reg + bf_offset) = *(uint64_t *)ctrl;
	bf_offset ^= dq.bf.size;
}

/* Polls the next CQE by its owner bit; returns its WQE counter or -1 after 10 s. */
static int poll_direct(int *opcode)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct mlx5_cqe64 *cqe = (struct mlx5_cqe64 *)((uint8_t *)dc.buf + (size_t)(ci & (dc.cqe_cnt - 1)) * dc.cqe_size);
		uint8_t op_own = __atomic_load_n(&cqe->op_own, __ATOMIC_ACQUIRE);
		if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & MLX5_CQE_OWNER_MASK) == ((ci / dc.cqe_cnt) & 1)) {
			*opcode = op_own >> 4;
			int counter = be16toh(cqe->wqe_counter);
			ci++;
			dc.dbrec[0] = htobe32(ci & 0xffffff); /* the consumer index: word 0 of the CQ doorbell record */
			return counter;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			return -1;
	}
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "gda_mlx5_0"))
			dev = list[i];
	CHECK(dev && mlx5dv_is_supported(dev), "gda_mlx5_0 is an mlx5 device");
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "gda_bnxt_0"))
			CHECK(!mlx5dv_is_supported(list[i]), "gda_bnxt_0 is not");
	if (!dev)
		goto out;
	ctx = ibv_open_device(dev);
	pd = ibv_alloc_pd(ctx);
	struct mlx5dv_context dctx = { .comp_mask = 0 };
	CHECK(mlx5dv_query_device(ctx, &dctx) == 0, "mlx5dv_query_device");
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cqb = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 32, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = ibv_create_qp(pd, &ia);
	ia.send_cq = ia.recv_cq = cqb;
	struct ibv_qp *b = ibv_create_qp(pd, &ia);
	uint8_t *buf = aligned_alloc(4096, 65536);
	memset(buf, 0, 65536);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(a && b && mr, "objects");
	if (!a || !b || !mr)
		goto out;
	CHECK(connect_qp(a, b->qp_num) == 0 && connect_qp(b, a->qp_num) == 0, "connect");

	struct mlx5dv_obj obj = { .qp = { .in = a, .out = &dq }, .cq = { .in = cq, .out = &dc } };
	CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) == 0, "mlx5dv_init_obj");
	CHECK(dq.sq.stride == 64 && dq.sq.wqe_cnt >= 32 && (dq.sq.wqe_cnt & (dq.sq.wqe_cnt - 1)) == 0, "sq geometry %u x %u", dq.sq.wqe_cnt, dq.sq.stride);
	CHECK(dq.bf.reg && dq.bf.size > 0 && dq.dbrec, "doorbell record and BlueFlame register");
	CHECK(dc.cqe_size == 64 && dc.cqe_cnt >= 65 && dc.buf && dc.dbrec, "cq geometry %u x %u", dc.cqe_cnt, dc.cqe_size);
	/* The CQ ring starts as rdma-core initialises it: every opcode INVALID. */
	int invalid = 0;
	for (uint32_t i = 0; i < dc.cqe_cnt; i++)
		invalid += (((struct mlx5_cqe64 *)((uint8_t *)dc.buf + i * 64))->op_own >> 4) == MLX5_CQE_INVALID;
	CHECK(invalid == (int)dc.cqe_cnt, "%d of %u CQEs INVALID", invalid, dc.cqe_cnt);

	uint64_t A = (uint64_t)buf, B = A + 32768;
	int op, counter;
	/* Three WRITEs posted and polled directly. */
	for (uint16_t pi = 0; pi < 3; pi++) {
		memset(buf + pi * 1024, 'a' + pi, 1024);
		post_direct(a->qp_num, pi, A + pi * 1024, mr->lkey, 1024, B + pi * 1024, mr->rkey);
		counter = poll_direct(&op);
		CHECK(counter == pi && op == MLX5_CQE_REQ, "direct WQE %u: CQE counter %d opcode %d", pi, counter, op);
		CHECK(buf[32768 + pi * 1024] == 'a' + pi && buf[32768 + pi * 1024 + 1023] == 'a' + pi, "direct WQE %u data", pi);
	}
	/* ibv_post_send continues after them (the doorbell record says where). */
	memset(buf + 4096, 'v', 512);
	struct ibv_sge s = { .addr = A + 4096, .length = 512, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 77, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = B + 4096;
	wr.wr.rdma.rkey = mr->rkey;
	CHECK(ibv_post_send(a, &wr, &bad) == 0, "ibv_post_send after direct posts");
	counter = poll_direct(&op);
	CHECK(counter == 3 && op == MLX5_CQE_REQ, "the verbs WQE is at index 3 (CQE counter %d)", counter);
	CHECK(buf[32768 + 4096] == 'v' && buf[32768 + 4096 + 511] == 'v', "verbs WQE data");
	/* And a direct post after it, at the index the doorbell record holds now. */
	uint16_t pi = (uint16_t)be32toh(dq.dbrec[MLX5_SND_DBR]);
	CHECK(pi == 4, "doorbell record after the verbs post: %u", pi);
	memset(buf + 8192, 'z', 256);
	post_direct(a->qp_num, pi, A + 8192, mr->lkey, 256, B + 8192, mr->rkey);
	counter = poll_direct(&op);
	CHECK(counter == 4 && op == MLX5_CQE_REQ, "direct after verbs: counter %d", counter);
	CHECK(buf[32768 + 8192] == 'z', "data");
	/* A direct WQE with a bad rkey gets an error CQE, as on hardware. */
	post_direct(a->qp_num, 5, A, mr->lkey, 8, B, mr->rkey ^ 1);
	counter = poll_direct(&op);
	CHECK(counter == 5 && op == MLX5_CQE_REQ_ERR, "bad rkey: error CQE (opcode %d)", op);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(a, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR, "QP in ERR");

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(cqb);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
out:
	if (list)
		ibv_free_device_list(list);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
