/* The RC conformance cases between two processes on the verbs-compatible library: QPs created
 * with ibv_* in each process (the test forks before either touches verbs), connected by GID +
 * QPN exchanged over a socket pair, memory from plain malloc. The client (parent) is the
 * requester; the server (child) is the responder and answers commands (post a receive, check
 * memory, report a receive completion, deregister, recreate its QP, exit).
 * Usage: xproc [device]. Last line (the client's): "N passed, M failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } } while (0)

/* Whether process `pid` is stopped (state T in /proc/<pid>/stat), waiting up to 5 s. */
static int stopped(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		if (f) {
			size_t n = fread(line, 1, sizeof line - 1, f);
			fclose(f);
			line[n] = 0;
			char *p = strrchr(line, ')');
			if (p && p[1] == ' ' && p[2] == 'T')
				return 1;
		}
		usleep(1000);
	}
	return 0;
}


#define BIG (8u << 20)
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static uint8_t *buf, *ro, *gone;
static struct ibv_mr *mr, *mr_ro, *mr_gone;
static int sock;
static pid_t server_pid;

struct info { uint32_t qpn; union ibv_gid gid; uint64_t addr, ro_addr, gone_addr; uint32_t rkey, ro_rkey, gone_rkey; };
struct cmd { char op; uint32_t a, b; uint64_t c; };
struct reply { int32_t status, opcode; uint32_t len, imm, flags; uint64_t value; };

static void xwrite(const void *p, size_t n) { if (write(sock, p, n) != (ssize_t)n) exit(3); }
static void xread(void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(sock, (char *)p + got, n - got);
		if (r <= 0)
			exit(4);
		got += r;
	}
}

static void open_dev(const char *name)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		printf("no device %s\n", name);
		exit(2);
	}
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
}

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4, .max_inline_data = 64 } };
	struct ibv_qp *q = ibv_create_qp(pd, &ia);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
	if (!q || ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		exit(5);
	return q;
}

/* INIT -> RTR -> RTS towards `dest` at `gid` (the IPv4-mapped RoCE v2 GID, index 3). */
static int connect_qp(struct ibv_qp *q, uint32_t dest, union ibv_gid gid, uint8_t rnr_retry)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = dest,
		.max_dest_rd_atomic = 4, .min_rnr_timer = 1 };
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = gid;
	at.ah_attr.grh.sgid_index = 3;
	at.ah_attr.grh.hop_limit = 64;
	at.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = rnr_retry;
	at.max_rd_atomic = 4;
	return ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int poll1(struct ibv_wc *wc, int secs)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int r = ibv_poll_cq(cq, 1, wc);
		if (r)
			return r;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= secs)
			return 0;
	}
}

static struct info me(void)
{
	struct info i = { .qpn = qp->qp_num, .addr = (uint64_t)buf, .ro_addr = (uint64_t)ro, .rkey = mr->rkey,
			  .ro_rkey = mr_ro->rkey, .gone_addr = (uint64_t)gone, .gone_rkey = mr_gone ? mr_gone->rkey : 0 };
	ibv_query_gid(ctx, 1, 3, &i.gid);
	return i;
}

static void server(void)
{
	qp = new_qp();
	struct info mine = me(), peer;
	xwrite(&mine, sizeof mine);
	xread(&peer, sizeof peer);
	if (connect_qp(qp, peer.qpn, peer.gid, 7))
		exit(6);
	for (;;) {
		struct cmd c;
		xread(&c, sizeof c);
		struct reply r = { 0 };
		switch (c.op) {
		case 'R': { /* post a receive of c.a bytes at offset c.c */
			struct ibv_sge s = { (uint64_t)buf + c.c, c.a, mr->lkey };
			struct ibv_recv_wr w = { .wr_id = c.b, .sg_list = &s, .num_sge = 1 }, *bad;
			r.status = ibv_post_recv(qp, &w, &bad);
			break;
		}
		case 'Q': { /* the next receive completion */
			struct ibv_wc wc;
			if (poll1(&wc, 10)) {
				r.status = wc.status;
				r.opcode = wc.opcode;
				r.len = wc.byte_len;
				r.imm = be32toh(wc.imm_data);
				r.flags = wc.wc_flags;
				r.value = wc.wr_id;
			} else {
				r.status = -1;
			}
			break;
		}
		case 'C': { /* checksum of [c.c, c.c + c.a) */
			uint64_t sum = 0;
			for (uint64_t i = 0; i < c.a; i++)
				sum = sum * 31 + buf[c.c + i];
			r.value = sum;
			break;
		}
		case 'W': /* fill [c.c, c.c + c.a) with byte c.b */
			memset(buf + c.c, (int)c.b, c.a);
			break;
		case 'V': /* the 8-byte word at c.c */
			memcpy(&r.value, buf + c.c, 8);
			break;
		case 'D':
			r.status = ibv_dereg_mr(mr_gone);
			mr_gone = NULL;
			break;
		case 'N': { /* a fresh QP, connected to the peer's fresh QP c.a */
			ibv_destroy_qp(qp);
			struct ibv_wc wc;
			while (ibv_poll_cq(cq, 1, &wc) > 0)
				;
			qp = new_qp();
			r.value = qp->qp_num;
			xwrite(&r, sizeof r);
			xread(&c, sizeof c);
			r.status = connect_qp(qp, c.a, peer.gid, 7);
			break;
		}
		case 'K':
			_exit(0);
		}
		xwrite(&r, sizeof r);
	}
}

static struct info peer;
static struct reply ask(char op, uint32_t a, uint32_t b, uint64_t c)
{
	struct cmd m = { op, a, b, c };
	struct reply r;
	xwrite(&m, sizeof m);
	xread(&r, sizeof r);
	return r;
}

static uint64_t sum_local(uint64_t off, uint64_t len)
{
	uint64_t s = 0;
	for (uint64_t i = 0; i < len; i++)
		s = s * 31 + buf[off + i];
	return s;
}

static int post_one(enum ibv_wr_opcode op, uint64_t laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		    unsigned flags, uint64_t id)
{
	struct ibv_sge s = { laddr, len, lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op, .send_flags = flags }, *bad;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	w.imm_data = htobe32(0x1000 + (uint32_t)id);
	return ibv_post_send(qp, &w, &bad);
}

static void fresh_pair(uint8_t rnr_retry)
{
	ibv_destroy_qp(qp);
	struct ibv_wc wc;
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
	qp = new_qp();
	struct reply r = ask('N', 0, 0, 0);
	uint32_t sqpn = (uint32_t)r.value;
	struct cmd m = { 'x', qp->qp_num, 0, 0 };
	xwrite(&m, sizeof m);
	xread(&r, sizeof r);
	CHECK(r.status == 0 && connect_qp(qp, sqpn, peer.gid, rnr_retry) == 0, "fresh QP pair");
	peer.qpn = sqpn;
}

/* An error case: one signalled WQE expected to fail with `want`, one after it flushed. */
static void expect_error(const char *what, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey, uint32_t len, int want)
{
	ask('W', 64, 0, 4 * BIG / 2 - 64);
	uint64_t before = ask('C', 64, 0, 4 * BIG / 2 - 64).value;
	memset(buf + 3 * BIG, 0x77, len);
	CHECK(post_one(op, (uint64_t)buf + 3 * BIG, len, mr->lkey, raddr, rkey, IBV_SEND_SIGNALED, 90) == 0, "%s: post", what);
	CHECK(post_one(IBV_WR_RDMA_WRITE, (uint64_t)buf + 3 * BIG, 8, mr->lkey, peer.addr, peer.rkey, 0, 91) == 0, "%s: post 2", what);
	struct ibv_wc wc[2];
	int got = poll1(&wc[0], 10);
	got += poll1(&wc[1], 10);
	CHECK(got == 2 && wc[0].wr_id == 90 && (int)wc[0].status == want, "%s: status %d, want %d", what, got ? (int)wc[0].status : -1, want);
	CHECK(got == 2 && wc[1].wr_id == 91 && wc[1].status == IBV_WC_WR_FLUSH_ERR, "%s: the next WQE is flushed", what);
	(void)before;
}

static void client(void)
{
	qp = new_qp();
	struct info mine = me();
	xread(&peer, sizeof peer);
	xwrite(&mine, sizeof mine);
	CHECK(connect_qp(qp, peer.qpn, peer.gid, 7) == 0, "connect to the other process");
	struct ibv_wc wc;
	/* WRITE: small, 8 MiB, inline, multi-SGE. */
	uint32_t sizes[] = { 1, 4096, BIG };
	for (int i = 0; i < 3; i++) {
		for (uint32_t k = 0; k < sizes[i]; k++)
			buf[k] = (uint8_t)(k * 13 + i);
		CHECK(post_one(IBV_WR_RDMA_WRITE, (uint64_t)buf, sizes[i], mr->lkey, peer.addr + BIG, peer.rkey, IBV_SEND_SIGNALED, i) == 0, "post write %u", sizes[i]);
		CHECK(poll1(&wc, 30) && wc.status == 0 && wc.wr_id == (uint64_t)i && wc.opcode == IBV_WC_RDMA_WRITE, "write %u done", sizes[i]);
		CHECK(ask('C', sizes[i], 0, BIG).value == sum_local(0, sizes[i]), "write %u data at the responder", sizes[i]);
	}
	memcpy(buf, "inline-bytes!", 13);
	CHECK(post_one(IBV_WR_RDMA_WRITE, (uint64_t)buf, 13, 0, peer.addr + 100, peer.rkey, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 5) == 0 &&
	      poll1(&wc, 10) && wc.status == 0 && ask('C', 13, 0, 100).value == sum_local(0, 13), "inline write");
	struct ibv_sge sg[3] = { { (uint64_t)buf + 1000, 10, mr->lkey }, { (uint64_t)buf + 5000, 20, mr->lkey }, { (uint64_t)buf + 9000, 30, mr->lkey } };
	memset(buf + 1000, 1, 10);
	memset(buf + 5000, 2, 20);
	memset(buf + 9000, 3, 30);
	struct ibv_send_wr mw = { .wr_id = 6, .sg_list = sg, .num_sge = 3, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	mw.wr.rdma.remote_addr = peer.addr + 200;
	mw.wr.rdma.rkey = peer.rkey;
	CHECK(ibv_post_send(qp, &mw, &bad) == 0 && poll1(&wc, 10) && wc.status == 0, "multi-SGE write");
	CHECK(ask('V', 0, 0, 200).value == 0x0101010101010101ull && ask('V', 0, 0, 230).value == 0x0303030303030303ull, "multi-SGE data");
	/* READ: small and 8 MiB. */
	ask('W', BIG, 0x5c, 2 * BIG);
	memset(buf, 0, BIG);
	CHECK(post_one(IBV_WR_RDMA_READ, (uint64_t)buf, BIG, mr->lkey, peer.addr + 2 * BIG, peer.rkey, IBV_SEND_SIGNALED, 7) == 0 &&
	      poll1(&wc, 30) && wc.status == 0 && wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == BIG, "read 8 MiB");
	CHECK(buf[0] == 0x5c && buf[BIG - 1] == 0x5c && sum_local(0, BIG) == ask('C', BIG, 0, 2 * BIG).value, "read data");
	/* WRITE_WITH_IMM and SEND consume receives at the responder. */
	CHECK(ask('R', 64, 70, 3 * BIG).status == 0, "responder posts a receive");
	CHECK(post_one(IBV_WR_RDMA_WRITE_WITH_IMM, (uint64_t)buf, 16, mr->lkey, peer.addr + 300, peer.rkey, IBV_SEND_SIGNALED, 8) == 0 &&
	      poll1(&wc, 10) && wc.status == 0, "write with imm");
	struct reply q = ask('Q', 0, 0, 0);
	CHECK(q.status == 0 && q.opcode == IBV_WC_RECV_RDMA_WITH_IMM && q.imm == 0x1008 && (q.flags & IBV_WC_WITH_IMM) && q.value == 70,
	      "responder: RECV_RDMA_WITH_IMM (status %d opcode %d imm %x)", q.status, q.opcode, q.imm);
	CHECK(ask('R', 4096, 71, 3 * BIG).status == 0, "receive for a SEND");
	memcpy(buf, "a message between processes", 28);
	CHECK(post_one(IBV_WR_SEND_WITH_IMM, (uint64_t)buf, 28, mr->lkey, 0, 0, IBV_SEND_SIGNALED, 9) == 0 && poll1(&wc, 10) && wc.status == 0 && wc.opcode == IBV_WC_SEND, "send");
	q = ask('Q', 0, 0, 0);
	CHECK(q.status == 0 && q.opcode == IBV_WC_RECV && q.len == 28 && q.imm == 0x1009 && q.value == 71, "responder: RECV of 28 bytes");
	CHECK(ask('C', 28, 0, 3 * BIG).value == sum_local(0, 28), "send data landed");
	/* RNR, then success once the receive is posted (rnr_retry 7: retry for ever). */
	CHECK(post_one(IBV_WR_SEND, (uint64_t)buf, 8, mr->lkey, 0, 0, IBV_SEND_SIGNALED, 10) == 0, "send before a receive");
	CHECK(poll1(&wc, 1) == 0, "no completion while the responder has no receive");
	CHECK(ask('R', 64, 72, 3 * BIG).status == 0 && poll1(&wc, 10) && wc.status == 0 && wc.wr_id == 10, "completes after the receive is posted");
	CHECK(ask('Q', 0, 0, 0).value == 72, "responder: that receive");
	/* Atomics on the responder's memory. */
	ask('W', 8, 0, 4096);
	uint64_t *old = (uint64_t *)(buf + 64);
	struct ibv_sge as = { (uint64_t)old, 8, mr->lkey };
	struct ibv_send_wr aw = { .wr_id = 11, .sg_list = &as, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED };
	aw.wr.atomic.remote_addr = peer.addr + 4096;
	aw.wr.atomic.rkey = peer.rkey;
	aw.wr.atomic.compare_add = 5;
	for (int i = 0; i < 3; i++)
		CHECK(ibv_post_send(qp, &aw, &bad) == 0 && poll1(&wc, 10) && wc.status == 0 && wc.opcode == IBV_WC_FETCH_ADD, "fadd %d", i);
	CHECK(ask('V', 0, 0, 4096).value == 15 && (*old == 10 || be64toh(*old) == 10), "fadd result 15, last old value 10");
	aw.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	aw.wr.atomic.compare_add = 15;
	aw.wr.atomic.swap = 99;
	CHECK(ibv_post_send(qp, &aw, &bad) == 0 && poll1(&wc, 10) && wc.status == 0 && wc.opcode == IBV_WC_COMP_SWAP, "cas");
	CHECK(ask('V', 0, 0, 4096).value == 99, "cas swapped");
	aw.wr.atomic.compare_add = 1;
	aw.wr.atomic.swap = 5;
	CHECK(ibv_post_send(qp, &aw, &bad) == 0 && poll1(&wc, 10) && wc.status == 0 && ask('V', 0, 0, 4096).value == 99, "cas with a wrong compare leaves it");

	/* A stream of small WRITEs, then no call into the library: every one lands (posts whose
	 * doorbell was left to the engine thread are served in bounded time), then the last,
	 * signalled, completes. */
	ask('W', 320, 0, 8192);
	for (int i = 0; i < 40; i++) {
		uint64_t v = 0x1000 + (uint64_t)i;
		memcpy(buf + 512 + 8 * i, &v, 8);
		CHECK(post_one(IBV_WR_RDMA_WRITE, (uint64_t)buf + 512 + 8 * i, 8, mr->lkey, peer.addr + 8192 + 8 * i, peer.rkey,
			       i == 39 ? IBV_SEND_SIGNALED : 0, 100 + (uint64_t)i) == 0,
		      "stream: post %d", i);
	}
	{
		struct timespec s0, s1;
		clock_gettime(CLOCK_MONOTONIC, &s0);
		uint64_t last = 0;
		do {
			last = ask('V', 0, 0, 8192 + 8 * 39).value;
			clock_gettime(CLOCK_MONOTONIC, &s1);
		} while (last != 0x1000 + 39 && s1.tv_sec - s0.tv_sec < 5);
		CHECK(last == 0x1000 + 39, "stream: the last WRITE landed without a poll (%llx)", (unsigned long long)last);
		int all = 1;
		for (int i = 0; i < 40; i++)
			all &= ask('V', 0, 0, 8192 + 8 * (uint64_t)i).value == 0x1000 + (uint64_t)i;
		CHECK(all, "stream: every WRITE landed");
		CHECK(poll1(&wc, 10) && wc.status == 0 && wc.wr_id == 139, "stream: the signalled one completes");
	}

	/* Errors, each on a fresh QP pair: the status hardware reports, nothing written, later
	 * WQEs flushed. */
	ask('W', 64, 0, 4 * BIG / 2 - 64);
	expect_error("bad rkey", IBV_WR_RDMA_WRITE, peer.addr, peer.rkey ^ 0x77, 64, IBV_WC_REM_ACCESS_ERR);
	CHECK(ask('V', 0, 0, 0).value != 0x7777777777777777ull, "bad rkey: nothing written");
	fresh_pair(7);
	expect_error("out of bounds", IBV_WR_RDMA_WRITE, peer.addr + 4 * BIG - 8, peer.rkey, 64, IBV_WC_REM_ACCESS_ERR);
	fresh_pair(7);
	expect_error("write to a read-only region", IBV_WR_RDMA_WRITE, peer.ro_addr, peer.ro_rkey, 64, IBV_WC_REM_ACCESS_ERR);
	fresh_pair(7);
	expect_error("atomic without REMOTE_ATOMIC", IBV_WR_ATOMIC_FETCH_AND_ADD, peer.ro_addr, peer.ro_rkey, 8, IBV_WC_REM_ACCESS_ERR);
	fresh_pair(7);
	CHECK(ask('D', 0, 0, 0).status == 0, "responder deregisters a region");
	expect_error("deregistered rkey", IBV_WR_RDMA_WRITE, peer.gone_addr, peer.gone_rkey, 64, IBV_WC_REM_ACCESS_ERR);
	fresh_pair(7);
	CHECK(ask('R', 8, 73, 3 * BIG).status == 0, "a receive of 8 bytes");
	expect_error("receive too small", IBV_WR_SEND, 0, 0, 64, IBV_WC_REM_INV_REQ_ERR);
	q = ask('Q', 0, 0, 0);
	CHECK(q.status == IBV_WC_LOC_LEN_ERR && q.value == 73, "responder: LOC_LEN_ERR (%d)", q.status);
	fresh_pair(0);
	expect_error("RNR retries exceeded", IBV_WR_SEND, 0, 0, 8, IBV_WC_RNR_RETRY_EXC_ERR);
	fresh_pair(7);
	/* A stopped peer (SIGSTOP: its socket open, nothing of it running): a SEND of 1 MiB, which
	 * only its engine can take (a SEND is never placed), fails with RETRY_EXC_ERR in bounded
	 * time instead of hanging the requester; the peer, continued, serves on. */
	struct timespec t0, t1;
	CHECK(ask('R', 1u << 20, 74, 3 * BIG).status == 0, "stopped peer: a receive of 1 MiB");
	CHECK(kill(server_pid, SIGSTOP) == 0, "stopped peer: SIGSTOP");
	/* kill() returns once the signal is sent, not once the peer has stopped: on a busy machine
	 * its engine could still take the SEND. Wait until the kernel says it is stopped. */
	CHECK(stopped(server_pid), "stopped peer: stopped within 5 s");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(post_one(IBV_WR_SEND, (uint64_t)buf, 1u << 20, mr->lkey, 0, 0, IBV_SEND_SIGNALED, 13) == 0 && poll1(&wc, 20) &&
	      wc.wr_id == 13 && wc.status == IBV_WC_RETRY_EXC_ERR, "stopped peer: RETRY_EXC_ERR (status %d)", wc.status);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(t1.tv_sec - t0.tv_sec < 10, "stopped peer: in bounded time");
	kill(server_pid, SIGCONT);
	fresh_pair(7);
	CHECK(post_one(IBV_WR_RDMA_WRITE, (uint64_t)buf, 8, mr->lkey, peer.addr, peer.rkey, IBV_SEND_SIGNALED, 14) == 0 && poll1(&wc, 10) &&
	      wc.status == IBV_WC_SUCCESS, "stopped peer, continued: a fresh pair works (status %d)", wc.status);
	fresh_pair(7);
	/* A dead peer: requests fail with RETRY_EXC_ERR, in bounded time. */
	struct cmd k = { 'K', 0, 0, 0 };
	xwrite(&k, sizeof k);
	int status;
	waitpid(server_pid, &status, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(post_one(IBV_WR_RDMA_WRITE, (uint64_t)buf, 8, mr->lkey, peer.addr, peer.rkey, IBV_SEND_SIGNALED, 12) == 0 && poll1(&wc, 20) &&
	      wc.status == IBV_WC_RETRY_EXC_ERR, "dead peer: RETRY_EXC_ERR (status %d)", wc.status);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(t1.tv_sec - t0.tv_sec < 10, "in bounded time");
	printf("%d passed, %d failed\n", passed, failed);
	exit(failed != 0);
}

int main(int argc, char **argv)
{
	const char *dev = argc > 1 ? argv[1] : "gda_mlx5_0";
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 2;
	/* Fork before either process touches verbs: each has its own software NIC. */
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	server_pid = pid;
	sock = pid == 0 ? sv[1] : sv[0];
	open_dev(dev);
	buf = aligned_alloc(4096, 4 * BIG);
	ro = aligned_alloc(4096, 4096);
	gone = aligned_alloc(4096, 4096);
	memset(buf, 0, 4 * BIG);
	mr = ibv_reg_mr(pd, buf, 4 * BIG, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	mr_ro = ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	mr_gone = ibv_reg_mr(pd, gone, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr || !mr_ro || !mr_gone)
		return 2;
	if (pid == 0) {
		server();
	} else {
		client();
	}
	return 0;
}
