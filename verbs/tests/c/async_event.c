/* Asynchronous events through the standard verbs API: the context's async fd blocks (rdma-core's
 * default) and returns EAGAIN once the program sets O_NONBLOCK; a CQ that overruns raises one
 * IBV_EVENT_CQ_ERR naming it — delivered to a thread already waiting in ibv_get_async_event,
 * and waking poll() on the fd — and a CQ destroyed before its event was taken leaves no event
 * behind. With a private $XDG_RUNTIME_DIR (the test gives one): the device's port taken down
 * host-wide (the file gda's `gda port <dev> down` writes) raises IBV_EVENT_PORT_ERR, the port
 * reads PORT_DOWN and a WRITE fails with RETRY_EXC_ERR; brought up, IBV_EVENT_PORT_ACTIVE and
 * a fresh pair works again.
 * Usage: async_event [device]   (default gda_mlx5_0). Last line: "N passed, M failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *big;
static uint8_t *buf;
static struct ibv_mr *mr;

static struct ibv_qp *make_qp(struct ibv_cq *send_cq)
{
	struct ibv_qp_init_attr ia = { .send_cq = send_cq, .recv_cq = big, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 } };
	return ibv_create_qp(pd, &ia);
}

static int connect_qp(struct ibv_qp *q, uint32_t dest)
{
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 1, &gid))
		return -1;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -2;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_4096;
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
		return -3;
	memset(&at, 0, sizeof at);
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC))
		return -4;
	return 0;
}

/* A connected pair whose requester completes into `send_cq`. */
struct pair { struct ibv_qp *req, *resp; };

static struct pair make_pair(struct ibv_cq *send_cq)
{
	struct pair p = { make_qp(send_cq), make_qp(big) };
	if (!p.req || !p.resp || connect_qp(p.req, p.resp->qp_num) || connect_qp(p.resp, p.req->qp_num)) {
		printf("FAIL: a connected pair: %s\n", strerror(errno));
		failed++;
	}
	return p;
}

/* Posts `n` signaled 64-byte WRITEs on `q` and never polls their CQ. */
static void flood(struct ibv_qp *q, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
		wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
		wr.wr.rdma.rkey = mr->rkey;
		if (ibv_post_send(q, &wr, &bad)) {
			printf("FAIL: post %d: %s\n", i, strerror(errno));
			failed++;
			return;
		}
	}
}

static void set_nonblocking(int on)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* ibv_get_async_event on a non-blocking fd with nothing queued: -1, EAGAIN. */
static int nothing_queued(void)
{
	struct ibv_async_event ev;
	set_nonblocking(1);
	errno = 0;
	int r = ibv_get_async_event(ctx, &ev);
	int e = errno;
	set_nonblocking(0);
	if (r == 0)
		ibv_ack_async_event(&ev);
	return r == -1 && e == EAGAIN;
}

/* The waiter: one blocking ibv_get_async_event. */
static struct ibv_async_event got;
static volatile int waiter_ret = 1, waiter_errno;

static void *waiter(void *arg)
{
	(void)arg;
	int r = ibv_get_async_event(ctx, &got);
	waiter_errno = errno;
	__atomic_store_n(&waiter_ret, r, __ATOMIC_RELEASE);
	return NULL;
}

static int wait_done(int seconds)
{
	for (int i = 0; i < seconds * 100; i++) {
		if (__atomic_load_n(&waiter_ret, __ATOMIC_ACQUIRE) != 1)
			return 1;
		usleep(10000);
	}
	return 0;
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
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	big = ctx ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	buf = aligned_alloc(4096, 8192);
	mr = pd ? ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	CHECK(ctx && pd && big && mr, "context, PD, CQ, MR: %s", strerror(errno));
	if (!mr)
		goto out;

	/* The fd blocks by default; O_NONBLOCK makes an empty queue EAGAIN; a bad call is refused. */
	CHECK(!(fcntl(ctx->async_fd, F_GETFL) & O_NONBLOCK), "async fd blocking by default");
	CHECK(nothing_queued(), "non-blocking fd, no event: EAGAIN");
	errno = 0;
	CHECK(ibv_get_async_event(ctx, NULL) == -1 && errno == EINVAL, "null event: EINVAL (errno %d)", errno);

	/* 1. A thread waits; a 1-entry CQ overruns; the thread gets IBV_EVENT_CQ_ERR naming it. */
	pthread_t t;
	pthread_create(&t, NULL, waiter, NULL);
	usleep(100000);
	CHECK(__atomic_load_n(&waiter_ret, __ATOMIC_ACQUIRE) == 1, "the waiter blocks while nothing happened");
	struct ibv_cq *small = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	CHECK(small, "1-entry CQ");
	if (!small)
		goto out;
	struct pair p = make_pair(small);
	flood(p.req, 8);
	CHECK(wait_done(10), "the waiter woke within 10 s of the overrun");
	if (waiter_ret == 1)
		goto out; /* the thread is still blocked: nothing more to learn */
	pthread_join(t, NULL);
	CHECK(waiter_ret == 0, "ibv_get_async_event: %d (%s)", waiter_ret, strerror(waiter_errno));
	CHECK(got.event_type == IBV_EVENT_CQ_ERR && got.element.cq == small,
	      "event %d (%s) about %p, want IBV_EVENT_CQ_ERR about %p", got.event_type,
	      ibv_event_type_str(got.event_type), (void *)got.element.cq, (void *)small);
	ibv_ack_async_event(&got);
	/* One event per overrun: more dropped completions raise nothing more. */
	flood(p.req, 4);
	usleep(200000);
	CHECK(nothing_queued(), "a CQ raises CQ_ERR once");

	/* 2. poll() on the fd wakes when the next CQ overruns. */
	struct ibv_cq *small2 = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	struct pair p2 = make_pair(small2);
	flood(p2.req, 8);
	struct pollfd pf = { .fd = ctx->async_fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN), "poll on the async fd: POLLIN");
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == small2,
	      "second CQ's event");
	ibv_ack_async_event(&ev);

	/* 3. A CQ destroyed before its event was taken: the event is withdrawn. */
	struct ibv_cq *small3 = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	struct pair p3 = make_pair(small3);
	flood(p3.req, 8);
	pf.revents = 0;
	CHECK(poll(&pf, 1, 10000) == 1, "third CQ overran");
	CHECK(ibv_destroy_qp(p3.req) == 0 && ibv_destroy_qp(p3.resp) == 0 && ibv_destroy_cq(small3) == 0, "destroy");
	CHECK(nothing_queued(), "a destroyed CQ's event is not delivered");
	pf.revents = 0;
	CHECK(poll(&pf, 1, 0) == 0, "and the fd is not left readable by it");

	/* 4. The port, host-wide: down, a WRITE fails; up, a fresh pair works. */
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg) {
		char path[4096];
		snprintf(path, sizeof path, "%s/gda/ports/%s.down", xdg, want);
		struct ibv_cq *cq4 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		struct pair p4 = make_pair(cq4);
		FILE *f = fopen(path, "w");
		CHECK(f, "creating %s: %s", path, strerror(errno));
		if (f)
			fclose(f);
		CHECK(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_PORT_ERR && ev.element.port_num == 1,
		      "port down: %s port %d", ibv_event_type_str(ev.event_type), ev.element.port_num);
		ibv_ack_async_event(&ev);
		struct ibv_port_attr pa;
		CHECK(ibv_query_port(ctx, 1, &pa) == 0 && pa.state == IBV_PORT_DOWN, "query_port: state %d", pa.state);
		flood(p4.req, 1);
		struct ibv_wc wc = { 0 };
		int got = 0;
		for (int i = 0; i < 1000 && !got; i++) {
			got = ibv_poll_cq(cq4, 1, &wc);
			usleep(1000);
		}
		CHECK(got == 1 && wc.status == IBV_WC_RETRY_EXC_ERR, "WRITE on a down port: %d %s", got, ibv_wc_status_str(wc.status));
		CHECK(unlink(path) == 0, "removing %s", path);
		CHECK(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_PORT_ACTIVE && ev.element.port_num == 1,
		      "port up: %s", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		CHECK(ibv_query_port(ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE, "query_port: state %d", pa.state);
		struct pair p5 = make_pair(cq4);
		flood(p5.req, 1);
		got = 0;
		for (int i = 0; i < 1000 && !got; i++) {
			got = ibv_poll_cq(cq4, 1, &wc);
			usleep(1000);
		}
		CHECK(got == 1 && wc.status == IBV_WC_SUCCESS, "WRITE after the port came up: %d %s", got, ibv_wc_status_str(wc.status));
		ibv_destroy_qp(p4.req);
		ibv_destroy_qp(p4.resp);
		ibv_destroy_qp(p5.req);
		ibv_destroy_qp(p5.resp);
		ibv_destroy_cq(cq4);
	}

	CHECK(ibv_destroy_qp(p.req) == 0 && ibv_destroy_qp(p.resp) == 0 && ibv_destroy_cq(small) == 0, "destroy 1");
	CHECK(ibv_destroy_qp(p2.req) == 0 && ibv_destroy_qp(p2.resp) == 0 && ibv_destroy_cq(small2) == 0, "destroy 2");
	ibv_dereg_mr(mr);
	ibv_destroy_cq(big);
	ibv_dealloc_pd(pd);
	CHECK(ibv_close_device(ctx) == 0, "close");
out:
	if (list)
		ibv_free_device_list(list);
	printf("%d passed, %d failed\n", passed, failed);
	fflush(stdout);
	/* _exit: a waiter still blocked (a failure above) must not hold the process. */
	_exit(failed ? 1 : 0);
}
