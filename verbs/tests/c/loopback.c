/* Every RC operation through the standard verbs API, in one process, on a software-NIC device
 * of the verbs-compatible library: two QPs connected to each other by GID + QP number.
 * Usage: loopback [device]   (default gda_mlx5_0). Last line: "N passed, M failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *a, *b;
static uint8_t *buf; /* 1 MiB: [0, 512K) A's, [512K, 1M) B's */
static struct ibv_mr *mr;
#define HALF (512 * 1024)

static int wait_wc(struct ibv_cq *c, struct ibv_wc *wc, int n)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int got = 0;
	while (got < n) {
		int r = ibv_poll_cq(c, n - got, wc + got);
		if (r < 0)
			return -1;
		got += r;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			break;
	}
	return got;
}

static struct ibv_qp *make_qp(struct ibv_cq *c, int ex)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = c, .recv_cq = c, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};
	if (ex) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ |
				    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	}
	return ibv_create_qp_ex(ctx, &ia);
}

static int connect_qp(struct ibv_qp *q, uint32_t dest, int gid_index)
{
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		return -1;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -2;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_4096;
	at.dest_qp_num = dest;
	at.rq_psn = 0;
	at.max_dest_rd_atomic = 1;
	at.min_rnr_timer = 12;
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = gid;
	at.ah_attr.grh.sgid_index = gid_index;
	at.ah_attr.grh.hop_limit = 64;
	at.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -3;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.sq_psn = 0;
	at.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC))
		return -4;
	return 0;
}

static int post(struct ibv_qp *q, enum ibv_wr_opcode op, uint64_t laddr, uint32_t len, uint64_t raddr,
		uint32_t rkey, unsigned flags, uint64_t id)
{
	struct ibv_sge s = { .addr = laddr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op, .send_flags = flags }, *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	wr.imm_data = htobe32(0xabcd0000u + (uint32_t)id);
	return ibv_post_send(q, &wr, &bad);
}

static int post_recv(struct ibv_qp *q, uint64_t addr, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { .addr = addr, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(q, &wr, &bad);
}

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "gda_mlx5_0";
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			dev = list[i];
	CHECK(dev, "device %s found", want);
	if (!dev)
		goto out;
	ctx = ibv_open_device(dev);
	pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	cq = ibv_create_cq(ctx, 255, NULL, ch, 0);
	CHECK(ctx && pd && ch && cq, "context, PD, channel, CQ");
	CHECK(cq && cq->cqe >= 255, "cqe %d >= 255", cq ? cq->cqe : -1);
	buf = aligned_alloc(4096, 2 * HALF);
	memset(buf, 0, 2 * HALF);
	mr = ibv_reg_mr(pd, buf, 2 * HALF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(mr, "reg_mr: %s", strerror(errno));
	a = make_qp(cq, 1);
	b = make_qp(cq, 0);
	CHECK(a && b, "create_qp_ex: %s", strerror(errno));
	if (!a || !b || !mr)
		goto out;
	int gi = 1;
	CHECK(connect_qp(a, b->qp_num, gi) == 0 && connect_qp(b, a->qp_num, gi) == 0, "connect");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(a, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == b->qp_num,
	      "query_qp: RTS, dest %u", qa.dest_qp_num);

	uint64_t A = (uint64_t)buf, B = A + HALF;
	struct ibv_wc wc[8];
	/* WRITE A -> B. */
	for (int i = 0; i < 4096; i++)
		buf[i] = (uint8_t)(i * 7);
	CHECK(post(a, IBV_WR_RDMA_WRITE, A, 4096, B, mr->rkey, IBV_SEND_SIGNALED, 1) == 0, "post write");
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1 && wc[0].opcode == IBV_WC_RDMA_WRITE,
	      "write completion: status %d wr_id %lu", wc[0].status, (unsigned long)wc[0].wr_id);
	CHECK(!memcmp(buf, buf + HALF, 4096), "write data");
	/* Inline WRITE. */
	memcpy(buf + 8192, "inline!!", 8);
	CHECK(post(a, IBV_WR_RDMA_WRITE, A + 8192, 8, B + 8192, mr->rkey, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 2) == 0, "inline");
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].status == IBV_WC_SUCCESS && !memcmp(buf + HALF + 8192, "inline!!", 8), "inline data");
	/* READ B -> A. */
	memset(buf + HALF + 16384, 0x5a, 1000);
	CHECK(post(a, IBV_WR_RDMA_READ, A + 16384, 1000, B + 16384, mr->rkey, IBV_SEND_SIGNALED, 3) == 0, "read");
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_READ && wc[0].byte_len == 1000,
	      "read completion: opcode %d len %u", wc[0].opcode, wc[0].byte_len);
	CHECK(buf[16384] == 0x5a && buf[16384 + 999] == 0x5a, "read data");
	/* SEND/RECV with immediate. */
	CHECK(post_recv(b, B + 32768, 256, 40) == 0, "post_recv");
	strcpy((char *)buf + 32768, "hello over SEND");
	CHECK(post(a, IBV_WR_SEND_WITH_IMM, A + 32768, 16, 0, 0, IBV_SEND_SIGNALED, 4) == 0, "send");
	int got = wait_wc(cq, wc, 2), sends = 0, recvs = 0;
	for (int i = 0; i < got; i++) {
		if (wc[i].opcode == IBV_WC_SEND && wc[i].wr_id == 4 && wc[i].status == 0)
			sends++;
		if (wc[i].opcode == IBV_WC_RECV && wc[i].wr_id == 40 && wc[i].status == 0 && wc[i].byte_len == 16 &&
		    (wc[i].wc_flags & IBV_WC_WITH_IMM) && be32toh(wc[i].imm_data) == 0xabcd0004 && wc[i].qp_num == b->qp_num)
			recvs++;
	}
	CHECK(sends == 1 && recvs == 1, "send/recv completions (%d, %d of %d)", sends, recvs, got);
	CHECK(!strcmp((char *)buf + HALF + 32768, "hello over SEND"), "send data");
	/* WRITE_WITH_IMM consumes a receive. */
	CHECK(post_recv(b, B + 40000, 0, 41) == 0, "post_recv 0");
	CHECK(post(a, IBV_WR_RDMA_WRITE_WITH_IMM, A, 64, B + 65536, mr->rkey, IBV_SEND_SIGNALED, 5) == 0, "write imm");
	got = wait_wc(cq, wc, 2);
	int imm = 0;
	for (int i = 0; i < got; i++)
		if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc[i].wr_id == 41 && be32toh(wc[i].imm_data) == 0xabcd0005)
			imm++;
	CHECK(got == 2 && imm == 1, "write-with-imm completions");
	/* Atomics: FADD then CAS on B's word. */
	uint64_t *word = (uint64_t *)(buf + HALF + 4096 * 3);
	*word = 40;
	struct ibv_sge s = { .addr = A + 4096 * 3, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr w = { .wr_id = 6, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.atomic.remote_addr = (uint64_t)word;
	w.wr.atomic.rkey = mr->rkey;
	w.wr.atomic.compare_add = 2;
	CHECK(ibv_post_send(a, &w, &bad) == 0, "fadd");
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].status == 0 && wc[0].opcode == IBV_WC_FETCH_ADD && *word == 42, "fadd done: %lu", (unsigned long)*word);
	uint64_t old = *(uint64_t *)(buf + 4096 * 3);
	CHECK(old == 40 || be64toh(old) == 40, "fadd fetched the old value (%lx)", (unsigned long)old);
	w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	w.wr.atomic.compare_add = 42;
	w.wr.atomic.swap = 7;
	CHECK(ibv_post_send(a, &w, &bad) == 0, "cas");
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].status == 0 && wc[0].opcode == IBV_WC_COMP_SWAP && *word == 7, "cas done");
	/* Multi-SGE WRITE. */
	struct ibv_sge sg[3] = { { A + 100000, 100, mr->lkey }, { A + 200000, 200, mr->lkey }, { A + 300000, 300, mr->lkey } };
	memset(buf + 100000, 1, 100);
	memset(buf + 200000, 2, 200);
	memset(buf + 300000, 3, 300);
	struct ibv_send_wr mw = { .wr_id = 7, .sg_list = sg, .num_sge = 3, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };
	mw.wr.rdma.remote_addr = B + 400000;
	mw.wr.rdma.rkey = mr->rkey;
	CHECK(ibv_post_send(a, &mw, &bad) == 0, "multi-sge");
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].status == 0, "multi-sge done");
	CHECK(buf[HALF + 400000] == 1 && buf[HALF + 400100] == 2 && buf[HALF + 400300] == 3 && buf[HALF + 400599] == 3, "multi-sge data");
	/* The ibv_wr_* API: a batch of two writes with one doorbell. */
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(a);
	CHECK(qx != NULL, "qp_to_qp_ex");
	if (qx) {
		memset(buf + 450000, 9, 64);
		ibv_wr_start(qx);
		qx->wr_id = 8;
		qx->wr_flags = 0;
		ibv_wr_rdma_write(qx, mr->rkey, B + 450000);
		ibv_wr_set_sge(qx, mr->lkey, A + 450000, 32);
		qx->wr_id = 9;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(qx, mr->rkey, B + 450032);
		ibv_wr_set_inline_data(qx, buf + 450032, 32);
		CHECK(ibv_wr_complete(qx) == 0, "wr_complete");
		CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].wr_id == 9 && wc[0].status == 0, "wr batch completion %lu", (unsigned long)wc[0].wr_id);
		CHECK(buf[HALF + 450000] == 9 && buf[HALF + 450063] == 9, "wr batch data");
	}
	/* A completion channel event. */
	CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify");
	CHECK(post(a, IBV_WR_RDMA_WRITE, A, 8, B, mr->rkey, IBV_SEND_SIGNALED, 10) == 0, "post for event");
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 5000) == 1, "channel fd readable");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq, "get_cq_event");
	ibv_ack_cq_events(cq, 1);
	CHECK(wait_wc(cq, wc, 1) == 1 && wc[0].wr_id == 10, "event's completion");
	/* Objects in use are not destroyed. */
	errno = 0;
	CHECK(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd in use: EBUSY");
	CHECK(ibv_destroy_cq(cq) == EBUSY, "destroy_cq in use: EBUSY");
	CHECK(ibv_destroy_comp_channel(ch) == EBUSY, "destroy channel in use: EBUSY");
	/* dma-buf registration: a bad fd and an fd that is not a dma-buf are refused. */
	errno = 0;
	CHECK(ibv_reg_dmabuf_mr(pd, 0, 4096, 0x10000000, -1, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EBADF, "dmabuf, fd -1: EBADF");
	int mfd = memfd_create("not-a-dmabuf", 0);
	errno = 0;
	CHECK(mfd >= 0 && ibv_reg_dmabuf_mr(pd, 0, 4096, 0x10000000, mfd, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL,
	      "dmabuf, a memfd: EINVAL");
	close(mfd);
	/* Bad access flags. */
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE) == NULL && errno == EINVAL, "REMOTE_WRITE without LOCAL_WRITE: EINVAL");
	/* A bad rkey: REM_ACCESS_ERR, nothing written, later WQEs flushed, QP in ERR. */
	memset(buf + HALF + 480000, 0, 64);
	memset(buf + 480000, 0xee, 64);
	CHECK(post(a, IBV_WR_RDMA_WRITE, A + 480000, 64, B + 480000, mr->rkey ^ 0x5555, IBV_SEND_SIGNALED, 11) == 0, "post bad rkey");
	CHECK(post(a, IBV_WR_RDMA_WRITE, A + 480000, 64, B + 480000, mr->rkey, 0, 12) == 0, "post after");
	got = wait_wc(cq, wc, 2);
	CHECK(got == 2 && wc[0].wr_id == 11 && wc[0].status == IBV_WC_REM_ACCESS_ERR && wc[1].wr_id == 12 && wc[1].status == IBV_WC_WR_FLUSH_ERR,
	      "bad rkey: %d completions, status %d/%d", got, wc[0].status, got > 1 ? wc[1].status : -1);
	CHECK(buf[HALF + 480000] == 0 && buf[HALF + 480063] == 0, "nothing written");
	CHECK(ibv_query_qp(a, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR, "QP in ERR");

	CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0, "destroy QPs");
	CHECK(ibv_dereg_mr(mr) == 0, "dereg");
	CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_comp_channel(ch) == 0 && ibv_dealloc_pd(pd) == 0, "teardown");
	CHECK(ibv_close_device(ctx) == 0, "close");
out:
	if (list)
		ibv_free_device_list(list);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
