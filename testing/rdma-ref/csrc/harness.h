/* Public C API of the mlx5 reference harness (see harness.c / NOTES.md). */
#ifndef MLX5REF_HARNESS_H
#define MLX5REF_HARNESS_H
#include <stdint.h>

struct ref_sge { uint64_t addr; uint32_t length; uint32_t lkey; };

struct ref_wr {
	uint32_t opcode;      /* enum ibv_wr_opcode: RDMA_WRITE=0, RDMA_WRITE_WITH_IMM=1, SEND=2,
				 SEND_WITH_IMM=3, RDMA_READ=4, ATOMIC_CMP_AND_SWP=5,
				 ATOMIC_FETCH_AND_ADD=6 */
	uint32_t send_flags;  /* IBV_SEND_FENCE=1, SIGNALED=2, SOLICITED=4, INLINE=8 */
	uint32_t imm_data;    /* copied as-is into wr.imm_data ("network order" per verbs) */
	uint32_t rkey;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t num_sge;
	struct ref_sge sg_list[16]; /* for INLINE, addr is a real pointer to the bytes */
};

struct ref_qp_cfg {
	uint32_t qp_num;
	uint32_t sq_wqe_cnt;   /* power of two, WQEBBs */
	uint32_t cur_post;     /* producer counter before the post */
	uint32_t max_inline;   /* qp->max_inline_data */
	uint32_t max_sge;      /* sq max_gs */
	uint32_t bf_size;      /* 0 = doorbell only, else BlueFlame half size e.g. 256 */
	uint32_t sig_all;      /* sq_signal_bits / sq_sig_all */
};

struct ref_out {
	uint32_t dbrec[2];        /* raw 32-bit words as stored by rdma-core (BE values in memory) */
	uint8_t  uar[1024];       /* UAR/BF register memory after the post (doorbell at bf.offset) */
	uint32_t bf_offset_before, bf_offset_after;
	uint32_t cur_post_after;
	int      ret;             /* mlx5_post_send return value */
};

/* sq_buf must hold sq_wqe_cnt*64 bytes; it is used as the SQ ring. Its prior
 * contents are left untouched except for what rdma-core writes. Returns
 * out->ret, or -1 (out->ret = -1) if cfg/wr is rejected by the harness itself
 * (bad wqe_cnt, num_sge > 16, allocation failure). */
int ref_mlx5_post_send(const struct ref_qp_cfg *cfg, const struct ref_wr *wr,
		       uint8_t *sq_buf, struct ref_out *out);

/* Benchmark: posts the same request `iters` times on one QP (completions are
 * simulated by advancing the tail), returns how many posts succeeded. */
uint64_t ref_mlx5_post_loop(const struct ref_qp_cfg *cfg, const struct ref_wr *wr,
			    uint8_t *sq_buf, uint32_t *dbrec, uint64_t iters);

#endif
