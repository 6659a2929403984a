/* ibv_modify_qp refusals through the C ABI, as the kernel + mlx5 driver refuse them: for each
 * step of RESET->INIT->RTR->RTS, every required attribute removed and a forbidden one added;
 * skipped states (and RESET->ERR, which the kernel's table does not have); bad port, AV port,
 * P_Key index, GID index, MTU, PSN/QPN widths, retry counts, timeouts, RDMA-read depths;
 * IBV_QP_CUR_STATE where it is not accepted or does not match; an alternate path on RoCE;
 * RTS->SQD (no mlx5 command). Each must return the errno the real stack returns (EINVAL;
 * ENODATA for an empty GID-table entry; EOPNOTSUPP for mask bits the command cannot carry and
 * for IBV_QP_RATE_LIMIT on an RC QP), set errno too, and leave the QP in its state
 * (ibv_query_qp). Last line: "N passed, M failed". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static struct ibv_qp *qp;

static enum ibv_qp_state state(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? (enum ibv_qp_state)-1 : a.qp_state;
}

/* Expects `mask` with `at` to be refused with `code` and the QP to stay where it is. */
static void refused_with(const char *what, struct ibv_qp_attr at, int mask, int code)
{
	enum ibv_qp_state before = state();
	errno = 0;
	int r = ibv_modify_qp(qp, &at, mask);
	int e = errno;
	CHECK(r == code && e == code && state() == before, "%s: ret %d errno %d (want %d) state %d->%d", what, r, e, code, before, state());
}

static void refused(const char *what, struct ibv_qp_attr at, int mask)
{
	refused_with(what, at, mask, EINVAL);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "gda_mlx5_0"))
			ctx = ibv_open_device(list[i]);
	CHECK(ctx, "gda_mlx5_0");
	if (!ctx)
		goto out;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp && state() == IBV_QPS_RESET, "a QP in RESET");
	/* Creation limits. */
	struct ibv_qp_init_attr big = ia;
	big.cap.max_send_sge = 1000;
	errno = 0;
	CHECK(ibv_create_qp(pd, &big) == NULL && errno == EINVAL, "max_send_sge above the device's: EINVAL");
	big = ia;
	big.qp_type = IBV_QPT_UD;
	errno = 0;
	CHECK(ibv_create_qp(pd, &big) == NULL && errno == EOPNOTSUPP, "a UD QP: EOPNOTSUPP");

	union ibv_gid gid;
	ibv_query_gid(ctx, 1, 3, &gid);
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
	struct ibv_qp_attr rtr = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qp->qp_num,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 12 };
	rtr.ah_attr.is_global = 1;
	rtr.ah_attr.grh.dgid = gid;
	rtr.ah_attr.grh.sgid_index = 3;
	rtr.ah_attr.grh.hop_limit = 64;
	rtr.ah_attr.port_num = 1;
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .sq_psn = 0, .max_rd_atomic = 1 };

	struct step { const char *name; struct ibv_qp_attr *at; int req[8]; int forbidden; } steps[] = {
		{ "RESET->INIT", &init, { IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_ACCESS_FLAGS }, IBV_QP_AV },
		{ "INIT->RTR", &rtr, { IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER }, IBV_QP_SQ_PSN },
		{ "RTR->RTS", &rts, { IBV_QP_SQ_PSN, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_MAX_QP_RD_ATOMIC }, IBV_QP_DEST_QPN },
	};
	int removed = 0;
	for (unsigned s = 0; s < 3; s++) {
		int all = IBV_QP_STATE;
		for (int k = 0; steps[s].req[k]; k++)
			all |= steps[s].req[k];
		/* Skipping this step: the state after it, from here, is refused. */
		if (s < 2) {
			struct ibv_qp_attr skip = *steps[s + 1].at;
			int m = IBV_QP_STATE;
			for (int k = 0; steps[s + 1].req[k]; k++)
				m |= steps[s + 1].req[k];
			refused("skipped state", skip, m);
		}
		for (int k = 0; steps[s].req[k]; k++) {
			char what[64];
			snprintf(what, sizeof what, "%s without required bit %#x", steps[s].name, steps[s].req[k]);
			refused(what, *steps[s].at, all & ~steps[s].req[k]);
			removed++;
		}
		refused("forbidden attribute", *steps[s].at, all | steps[s].forbidden);
		/* Bad values at this step. */
		struct ibv_qp_attr bad = *steps[s].at;
		if (s == 0) {
			bad.port_num = 2;
			refused("port 2", bad, all);
			bad = init;
			bad.pkey_index = 1;
			refused("pkey index 1", bad, all);
			bad = init;
			bad.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | (1 << 6);
			refused("unknown access flag", bad, all);
			bad = init;
			bad.port_num = 0;
			refused("port 0", bad, all);
			struct ibv_qp_attr to_err = { .qp_state = IBV_QPS_ERR };
			refused("RESET->ERR (not in the kernel's table)", to_err, IBV_QP_STATE);
			bad = init;
			bad.cur_qp_state = IBV_QPS_RESET;
			refused("IBV_QP_CUR_STATE from RESET", bad, all | IBV_QP_CUR_STATE);
			refused_with("mask bit 26 (no such attribute)", init, all | (1 << 26), EOPNOTSUPP);
			refused_with("mask bit 21 (_IBV_QP_SMAC, never exposed)", init, all | (1 << 21), EOPNOTSUPP);
		} else if (s == 1) {
			bad.ah_attr.grh.sgid_index = 4;
			refused_with("GID index 4 (empty)", bad, all, ENODATA);
			bad = rtr;
			bad.ah_attr.grh.sgid_index = 200;
			refused_with("GID index 200 (empty)", bad, all, ENODATA);
			bad = rtr;
			bad.ah_attr.port_num = 2;
			refused("AV port 2", bad, all);
			bad = rtr;
			bad.ah_attr.port_num = 0;
			refused("AV port 0", bad, all);
			bad = rtr;
			bad.alt_ah_attr = rtr.ah_attr;
			bad.alt_port_num = 1;
			refused("an alternate path on RoCE", bad, all | IBV_QP_ALT_PATH);
			refused_with("IBV_QP_RATE_LIMIT on an RC QP", rtr, all | IBV_QP_RATE_LIMIT, EOPNOTSUPP);
			bad = rtr;
			bad.max_dest_rd_atomic = 17;
			refused("max_dest_rd_atomic 17 (device: 16)", bad, all);
			bad = rtr;
			bad.ah_attr.is_global = 0;
			refused("RoCE without a GRH", bad, all);
			bad = rtr;
			bad.path_mtu = 6;
			refused("MTU 6", bad, all);
			bad = rtr;
			bad.path_mtu = 0;
			refused("MTU 0", bad, all);
			bad = rtr;
			bad.dest_qp_num = 1 << 24;
			refused("QPN over 24 bits", bad, all);
			bad = rtr;
			bad.rq_psn = 1 << 24;
			refused("rq_psn over 24 bits", bad, all);
			bad = rtr;
			bad.min_rnr_timer = 32;
			refused("min_rnr_timer 32", bad, all);
		} else {
			bad.retry_cnt = 8;
			refused("retry_cnt 8", bad, all);
			bad = rts;
			bad.rnr_retry = 8;
			refused("rnr_retry 8", bad, all);
			bad = rts;
			bad.timeout = 32;
			refused("timeout 32", bad, all);
			bad = rts;
			bad.sq_psn = 1 << 24;
			refused("sq_psn over 24 bits", bad, all);
			bad = rts;
			bad.max_rd_atomic = 17;
			refused("max_rd_atomic 17 (device: 16)", bad, all);
			bad = rts;
			bad.cur_qp_state = IBV_QPS_RTS;
			refused("IBV_QP_CUR_STATE RTS while in RTR", bad, all | IBV_QP_CUR_STATE);
		}
		/* Then the real step succeeds. */
		enum ibv_qp_state want = steps[s].at->qp_state;
		CHECK(ibv_modify_qp(qp, steps[s].at, all) == 0 && state() == want, "%s succeeds", steps[s].name);
	}
	CHECK(removed == 14, "%d required attributes removed", removed);
	/* From RTS: RTS->RTS takes only its optional attributes; RTS->INIT does not exist. */
	struct ibv_qp_attr again = { .qp_state = IBV_QPS_RTS, .min_rnr_timer = 5 };
	CHECK(ibv_modify_qp(qp, &again, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER) == 0, "RTS->RTS with MIN_RNR_TIMER");
	refused("RTS->RTS with PATH_MTU", rtr, IBV_QP_STATE | IBV_QP_PATH_MTU);
	struct ibv_qp_attr back = init;
	refused("RTS->INIT", back, IBV_QP_STATE);
	struct ibv_qp_attr cur = { .qp_state = IBV_QPS_RTS, .cur_qp_state = IBV_QPS_RTS };
	CHECK(ibv_modify_qp(qp, &cur, IBV_QP_STATE | IBV_QP_CUR_STATE) == 0 && state() == IBV_QPS_RTS, "RTS->RTS with a matching IBV_QP_CUR_STATE");
	cur.cur_qp_state = IBV_QPS_SQD;
	refused("IBV_QP_CUR_STATE SQD while in RTS", cur, IBV_QP_STATE | IBV_QP_CUR_STATE);
	refused_with("RTS->RTS with IBV_QP_RATE_LIMIT", again, IBV_QP_STATE | IBV_QP_RATE_LIMIT, EOPNOTSUPP);
	struct ibv_qp_attr drain = { .qp_state = IBV_QPS_SQD };
	refused("RTS->SQD (mlx5 has no drain command)", drain, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
	/* Any state -> ERR. */
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0 && state() == IBV_QPS_ERR, "RTS->ERR");
	refused("ERR->RTS", rts, IBV_QP_STATE);
	CHECK(ibv_modify_qp(qp, &err, IBV_QP_STATE) == 0 && state() == IBV_QPS_ERR, "ERR->ERR");

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
out:
	if (list)
		ibv_free_device_list(list);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
