/* The offsets and sizes of the rdma-core structs gda-verbs lays out itself, as the system's
 * C compiler sees them in <infiniband/verbs.h>: the layout unit test compares them with the
 * Rust definitions. (verbs_context is identical in rdma-core v44, which Debian 12 ships, and
 * v55, whose ABI the library implements.) */
#include <stddef.h>
#include <infiniband/verbs.h>

struct gdav_field { const char *name; long value; };

#define OFF(f) { #f, (long)offsetof(struct verbs_context, f) }
const struct gdav_field gdav_c_layout[] = {
	{ "sizeof", (long)sizeof(struct verbs_context) },
	OFF(query_port), OFF(advise_mr), OFF(alloc_null_mr), OFF(read_counters),
	OFF(attach_counters_point_flow), OFF(create_counters), OFF(destroy_counters),
	OFF(reg_dm_mr), OFF(alloc_dm), OFF(free_dm), OFF(modify_flow_action_esp),
	OFF(destroy_flow_action), OFF(create_flow_action_esp), OFF(modify_qp_rate_limit),
	OFF(alloc_parent_domain), OFF(dealloc_td), OFF(alloc_td), OFF(modify_cq),
	OFF(post_srq_ops), OFF(destroy_rwq_ind_table), OFF(create_rwq_ind_table),
	OFF(destroy_wq), OFF(modify_wq), OFF(create_wq), OFF(query_rt_values),
	OFF(create_cq_ex), OFF(priv), OFF(query_device_ex), OFF(ibv_destroy_flow),
	OFF(ibv_create_flow), OFF(open_qp), OFF(create_qp_ex), OFF(get_srq_num),
	OFF(create_srq_ex), OFF(open_xrcd), OFF(close_xrcd), OFF(sz), OFF(context),
	{ 0, 0 },
};

#include <infiniband/mlx5dv.h>
#define Q(f) { "qp." #f, (long)offsetof(struct mlx5dv_qp, f) }
#define C(f) { "cq." #f, (long)offsetof(struct mlx5dv_cq, f) }
#define O(f) { "obj." #f, (long)offsetof(struct mlx5dv_obj, f) }
const struct gdav_field gdav_c_mlx5dv_layout[] = {
	{ "qp.sizeof", (long)sizeof(struct mlx5dv_qp) }, Q(dbrec), Q(sq.buf), Q(sq.wqe_cnt), Q(sq.stride),
	Q(rq.buf), Q(rq.wqe_cnt), Q(rq.stride), Q(bf.reg), Q(bf.size), Q(comp_mask), Q(uar_mmap_offset),
	Q(tirn), Q(tisn), Q(rqn), Q(sqn), Q(tir_icm_addr),
	{ "cq.sizeof", (long)sizeof(struct mlx5dv_cq) }, C(buf), C(dbrec), C(cqe_cnt), C(cqe_size), C(cq_uar),
	C(cqn), C(comp_mask),
	{ "pd.sizeof", (long)sizeof(struct mlx5dv_pd) },
	{ "obj.sizeof", (long)sizeof(struct mlx5dv_obj) }, O(qp), O(cq), O(pd),
	{ 0, 0 },
};
