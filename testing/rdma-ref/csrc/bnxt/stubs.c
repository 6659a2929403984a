/*
 * Stubs for the external (non-libc) symbols referenced by
 * providers/bnxt_re/{verbs.c,db.c,memory.c} when compiled alone.
 * None is reachable from what the harness calls (bnxt_re_post_send,
 * bnxt_re_post_recv, bnxt_re_poll_cq, the db.c ring functions, and the
 * create-QP sizing helpers used by bref_geometry); each aborts loudly.
 *
 * The rdma-core headers are included so the compiler checks that every stub's
 * signature matches rdma-core's prototype.
 */
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/driver.h>
#include <infiniband/cmd_ioctl.h>
#include <util/util.h>

#define UNEXPECTED(name)                                                       \
	do {                                                                   \
		fprintf(stderr, "bnxtref: unexpected call to stub %s\n", name);  \
		abort();                                                       \
	} while (0)

/* ---- libibverbs kernel-command layer (cmd*.c): every verb that talks to
 * the uverbs fd. Referenced by bnxt_re_{query_device,query_port,alloc_pd,
 * free_pd,reg_mr,reg_dmabuf_mr,dereg_mr,create_cq,resize_cq,destroy_cq,
 * create_qp,modify_qp,query_qp,destroy_qp,create_srq,modify_srq,destroy_srq,
 * query_srq,create_ah,destroy_ah}, the CQ-resize completion
 * (bnxt_re_resize_cq_complete <- CUT_OFF CQE, refused by the harness), and
 * bnxt_re_force_rts2rts (UD QP on pre-P5 chips after 0x400000 WQEs;
 * unreachable: the harness starts with qp->wqe_cnt = 0). ---- */
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
{ UNEXPECTED("ibv_cmd_alloc_pd"); return -1; }
int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{ UNEXPECTED("ibv_cmd_dealloc_pd"); return -1; }
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size)
{ UNEXPECTED("ibv_cmd_create_ah"); return -1; }
int ibv_cmd_destroy_ah(struct ibv_ah *ah)
{ UNEXPECTED("ibv_cmd_destroy_ah"); return -1; }
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size)
{ UNEXPECTED("ibv_cmd_create_cq"); return -1; }
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size)
{ UNEXPECTED("ibv_cmd_resize_cq"); return -1; }
int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{ UNEXPECTED("ibv_cmd_destroy_cq"); return -1; }
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{ UNEXPECTED("ibv_cmd_poll_cq"); return -1; }
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size)
{ UNEXPECTED("ibv_cmd_create_qp"); return -1; }
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd, size_t cmd_size)
{ UNEXPECTED("ibv_cmd_modify_qp"); return -1; }
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size)
{ UNEXPECTED("ibv_cmd_query_qp"); return -1; }
int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{ UNEXPECTED("ibv_cmd_destroy_qp"); return -1; }
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
{ UNEXPECTED("ibv_cmd_create_srq"); return -1; }
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size)
{ UNEXPECTED("ibv_cmd_modify_srq"); return -1; }
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size)
{ UNEXPECTED("ibv_cmd_query_srq"); return -1; }
int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{ UNEXPECTED("ibv_cmd_destroy_srq"); return -1; }
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)
{ UNEXPECTED("ibv_cmd_reg_mr"); return -1; }
int ibv_cmd_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
			  uint64_t iova, int fd, int access,
			  struct verbs_mr *vmr, struct ibv_command_buffer *driver)
{ UNEXPECTED("ibv_cmd_reg_dmabuf_mr"); return -1; }
int ibv_cmd_dereg_mr(struct verbs_mr *vmr)
{ UNEXPECTED("ibv_cmd_dereg_mr"); return -1; }
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size)
{ UNEXPECTED("ibv_cmd_query_device_any"); return -1; }
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size)
{ UNEXPECTED("ibv_cmd_query_port"); return -1; }

/* libibverbs cmd_ioctl.c: used by the inline DECLARE_COMMAND_BUFFER/
 * execute_ioctl paths of bnxt_re_alloc_page/bnxt_re_notify_drv/
 * bnxt_re_get_toggle_mem (context/CQ setup and doorbell-pacing alarm;
 * the harness runs with dbr_page == NULL, i.e. no pacing). */
int execute_ioctl(struct ibv_context *context, struct ibv_command_buffer *cmd)
{ UNEXPECTED("execute_ioctl"); return -1; }

/* libibverbs memory.c: memory.c's bnxt_re_alloc_mem/bnxt_re_free_mem (mmap'd
 * slabs). The harness lays slabs out in calloc'd memory instead. */
int ibv_dontfork_range(void *base, size_t size)
{ UNEXPECTED("ibv_dontfork_range"); return -1; }
int ibv_dofork_range(void *base, size_t size)
{ UNEXPECTED("ibv_dofork_range"); return -1; }

/* rdma-core util/util.c: db.c's rnd() inside bnxt_re_do_pacing, reached only
 * when cntx->dbr_page (DBR pacing page) is non-NULL; the harness keeps it NULL. */
uint32_t xorshift32(struct xorshift32_state *state)
{ UNEXPECTED("xorshift32"); return 0; }
