/*
 * Stubs for the external (non-libc) symbols referenced by
 * providers/mlx5/qp.c when it is compiled alone. None of them is reachable
 * from mlx5_post_send(); each aborts loudly if ever called.
 *
 * The rdma-core headers are included so the compiler checks that each stub's
 * signature matches rdma-core's prototype.
 */
#include <stdio.h>
#include <stdlib.h>
#include "mlx5.h"

#define UNEXPECTED(name)                                                      \
	do {                                                                  \
		fprintf(stderr, "mlx5ref: unexpected call to stub %s\n", name); \
		abort();                                                      \
	} while (0)

/* libibverbs/verbs.c (exported by libibverbs). Referenced only by
 * mlx5_wr_raw_wqe() (mlx5dv_wr_raw_wqe of the ibv_wr_* "new post send" API,
 * installed by mlx5_qp_fill_wr_pfns()), not by mlx5_post_send(). */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	UNEXPECTED("ibv_qp_to_qp_ex");
	return NULL;
}

/* providers/mlx5/verbs.c (exported by libmlx5). Referenced only by
 * mlx5_qp_query_sqd() <- mlx5dv_qp_cancel_posted_send_wrs() (DEVX QUERY_QP),
 * not by mlx5_post_send(). */
int mlx5dv_devx_qp_query(struct ibv_qp *qp, const void *in, size_t inlen,
			 void *out, size_t outlen)
{
	UNEXPECTED("mlx5dv_devx_qp_query");
	return -1;
}

/* providers/mlx5/verbs.c (internal to libmlx5). Same DEVX path as above. */
int mlx5_get_cmd_status_err(int err, void *out)
{
	UNEXPECTED("mlx5_get_cmd_status_err");
	return -1;
}
