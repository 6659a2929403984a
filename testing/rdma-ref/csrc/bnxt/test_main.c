/* bnxtref tests: reference vectors of nic-formats.md §E.4/§E.5 plus poll and
 * geometry checks. Only harness.h is used (no rdma-core headers). */
#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"

static int failures, checks;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		checks++;                                                    \
		if (!(cond)) {                                               \
			failures++;                                          \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
		}                                                            \
	} while (0)
#define CHECK_EQ(a, b)                                                       \
	CHECK((uint64_t)(a) == (uint64_t)(b), "%s = 0x%" PRIx64 ", want 0x%" PRIx64, \
	      #a, (uint64_t)(a), (uint64_t)(b))

static void hexdump(const char *tag, const uint8_t *p, size_t n)
{
	printf("  %s:\n", tag);
	for (size_t i = 0; i < n; i += 16) {
		printf("    ");
		for (size_t j = i; j < i + 16 && j < n; j++)
			printf("%02x ", p[j]);
		printf("\n");
	}
}

static void check_bytes(const char *tag, const uint8_t *got, const uint8_t *want, size_t n)
{
	checks++;
	if (memcmp(got, want, n)) {
		failures++;
		printf("FAIL bytes %s\n", tag);
		hexdump("got", got, n);
		hexdump("want", want, n);
	}
}

/* ---- §E.4 reference bytes ---------------------------------------- */

static const uint8_t ref_write[48] = {
	0x04, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0xcd, 0xab, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x20, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x78, 0x56, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
};
static const uint8_t ref_write_psn[8] = { 0x00, 0x01, 0x00, 0x01, 0x04, 0x01, 0x00, 0x00 };
static const uint8_t ref_cs[48] = {
	0x08, 0x05, 0x03, 0x00, 0xcd, 0xab, 0x00, 0x00, 0x00, 0x30, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00,
	0x22, 0x22, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x40, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x78, 0x56, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
};
/* spsn 0x104 | opc IBV_WC_COMP_SWAP(3)<<24 ; npsn 0x105 */
static const uint8_t ref_cs_psn[8] = { 0x04, 0x01, 0x00, 0x03, 0x05, 0x01, 0x00, 0x00 };
static const uint8_t ref_sendimm[48] = {
	0x01, 0x18, 0x03, 0x00, 0xef, 0xbe, 0xad, 0xde, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0x68, 0x65, 0x6c, 0x6c, 0x6f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
/* spsn 0x105 | opc IBV_WC_SEND(0) ; npsn 0x106 */
static const uint8_t ref_sendimm_psn[8] = { 0x05, 0x01, 0x00, 0x00, 0x06, 0x01, 0x00, 0x00 };

static const char hello[] = "hello";

static void make_e4_wrs(struct bref_wr w[3])
{
	memset(w, 0, 3 * sizeof(w[0]));
	w[0].opcode = 0; /* IBV_WR_RDMA_WRITE */
	w[0].send_flags = 2; /* SIGNALED */
	w[0].remote_addr = 0x7f0000001000ull;
	w[0].rkey = 0xabcd;
	w[0].num_sge = 1;
	w[0].sg_list[0] = (struct bref_sge){ 0x7f0000002000ull, 4096, 0x5678 };
	w[0].wr_id = 0x1000;

	w[1].opcode = 5; /* IBV_WR_ATOMIC_CMP_AND_SWP */
	w[1].send_flags = 2 | 1; /* SIGNALED | FENCE */
	w[1].remote_addr = 0x7f0000003000ull;
	w[1].rkey = 0xabcd;
	w[1].compare_add = 0x1111;
	w[1].swap = 0x2222;
	w[1].num_sge = 1;
	w[1].sg_list[0] = (struct bref_sge){ 0x7f0000004000ull, 8, 0x5678 };
	w[1].wr_id = 0x1001;

	w[2].opcode = 3; /* IBV_WR_SEND_WITH_IMM */
	w[2].send_flags = 8 | 4; /* INLINE | SOLICITED */
	w[2].imm_data = htobe32(0xdeadbeef);
	w[2].num_sge = 1;
	w[2].sg_list[0] = (struct bref_sge){ (uintptr_t)hello, 5, 0 };
	w[2].wr_id = 0x1002;
}

static struct bref_qp_cfg e4_cfg(uint32_t sq_slots)
{
	struct bref_qp_cfg c;

	memset(&c, 0, sizeof(c));
	c.qp_id = 0x21;
	c.wqe_mode = 0;
	c.sq_slots = sq_slots;
	c.sq_psn = 0x100;
	c.mtu_enum = 3; /* IBV_MTU_1024 */
	c.max_inline = 96;
	c.max_sge = 6;
	return c;
}

static void test_geometry(uint32_t *sq_slots_out)
{
	struct bref_geom_in in = { .wqe_mode = 0, .max_send_wr = 64, .max_send_sge = 6,
				   .max_inline = 96, .max_recv_wr = 64, .max_recv_sge = 6 };
	struct bref_geom g;

	printf("[geometry] static, max_send_wr 64, 6 SGE, inline 96\n");
	CHECK_EQ(bref_geometry(&in, &g), 0);
	printf("  sq_slots %u nwr %u max_swr %u esize %u diff %u psn_off %u psne %u npsn %u sz_ring %u; rq_slots %u rq_nwr %u rq_max_slots %u\n",
	       g.sq_slots, g.sq_nwr, g.sq_max_swr, g.sq_esize, g.sq_diff, g.psn_offset,
	       g.psn_entry_size, g.psn_entries, g.sq_ring_bytes, g.rq_slots, g.rq_nwr, g.rq_max_slots);
	CHECK_EQ(g.sq_nwr, 256);   /* roundup_pow2(64 + 1 + 128) */
	CHECK_EQ(g.sq_slots, 2048);
	CHECK_EQ(g.sq_max_swr, 256);
	CHECK_EQ(g.sq_esize, 128);
	CHECK_EQ(g.sq_diff, 1024);
	CHECK_EQ(g.psn_offset, 2048 * 16);
	CHECK_EQ(g.psn_entry_size, 8);
	CHECK_EQ(g.psn_entries, 256);
	CHECK_EQ(g.rq_nwr, 128);   /* roundup_pow2(64 + 1) */
	CHECK_EQ(g.rq_max_slots, 8);
	CHECK_EQ(g.rq_slots, 1024);
	*sq_slots_out = g.sq_slots;

	/* the harness' own sizing must agree with rdma-core's create-QP code */
	for (uint32_t mode = 0; mode < 2; mode++)
		for (uint32_t msn = 0; msn < 2; msn++)
			for (uint32_t ext = 0; ext < 2; ext++) {
				struct bref_geom_in gi = { .wqe_mode = mode, .max_send_wr = 100,
							   .max_send_sge = 3, .max_inline = 40,
							   .max_recv_wr = 10, .max_recv_sge = 2,
							   .msn_table = msn, .gen_p5_p7 = ext };
				struct bref_geom gg;
				struct bref_qp_cfg c;
				struct bref_wr w;
				struct bref_out o;
				uint8_t *buf;
				size_t len;

				CHECK_EQ(bref_geometry(&gi, &gg), 0);
				memset(&c, 0, sizeof(c));
				c.qp_id = 1; c.wqe_mode = mode; c.sq_slots = gg.sq_slots;
				c.mtu_enum = 3; c.msn_table = msn; c.psn_ext = ext;
				c.max_inline = 40; c.max_sge = 3;
				memset(&w, 0, sizeof(w));
				w.opcode = 2; /* SEND, no SGE */
				len = (size_t)gg.psn_offset + (size_t)gg.psn_entries * gg.psn_entry_size;
				buf = calloc(1, len);
				bref_post_send(&c, &w, buf, len, &o);
				CHECK(o.ret == 0 && o.psn_table_offset == gg.psn_offset &&
				      o.psn_entry_size == gg.psn_entry_size &&
				      o.psn_table_entries == gg.psn_entries &&
				      o.msn_tbl_sz == gg.msn_tbl_sz && o.sq_diff == gg.sq_diff,
				      "geometry mode %u msn %u ext %u: ret %d off %u/%u psne %u/%u n %u/%u msnsz %u/%u diff %u/%u",
				      mode, msn, ext, o.ret, o.psn_table_offset, gg.psn_offset,
				      o.psn_entry_size, gg.psn_entry_size, o.psn_table_entries,
				      gg.psn_entries, o.msn_tbl_sz, gg.msn_tbl_sz, o.sq_diff, gg.sq_diff);
				if (mode == 1 && msn == 0 && ext == 0)
					printf("  variable (100 WR, 3 SGE, inline 40): sq_slots %u (aligned to 256) max_swr %u esize %u diff %u npsn %u\n",
					       gg.sq_slots, gg.sq_max_swr, gg.sq_esize, gg.sq_diff, gg.psn_entries);
				if (msn)
					printf("  mode %u MSN: msn_tbl_sz %u, table entries %u\n",
					       mode, gg.msn_tbl_sz, gg.psn_entries);
				free(buf);
			}
}

static void test_e4(uint32_t sq_slots)
{
	size_t len = (size_t)sq_slots * 16 + (sq_slots / 8) * 16;
	uint8_t *buf = calloc(1, len), *buf2 = calloc(1, len);
	uint8_t *psn = buf + sq_slots * 16;
	struct bref_wr w[3];
	struct bref_qp_cfg c = e4_cfg(sq_slots);
	struct bref_out o;
	static const uint64_t want_db[3] = { 0x0400002100000001ull, 0x0400002100000002ull,
					     0x0400002100000003ull };
	static const uint8_t *want_wqe[3] = { ref_write, ref_cs, ref_sendimm };
	static const uint8_t *want_psn[3] = { ref_write_psn, ref_cs_psn, ref_sendimm_psn };

	printf("[E.4] static mode, QP 0x21, MTU 1024, PSN 0x100, sq_slots %u, legacy 8-byte PSN entries\n",
	       sq_slots);
	make_e4_wrs(w);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(bref_post_send(&c, &w[i], buf, len, &o), 0);
		hexdump(i == 0 ? "RDMA_WRITE WQE 0 (slots 0-2)" :
			i == 1 ? "ATOMIC_CS WQE 1 (slots 8-10)" : "SEND_WITH_IMM inline WQE 2 (slots 16-18)",
			buf + i * 128, 48);
		hexdump("PSN entry", psn + i * 8, 8);
		printf("  doorbell 0x%016" PRIx64 " (n=%u) tail %u epoch %u psn 0x%x\n",
		       o.doorbell, o.n_doorbells, o.sq_tail_after, o.sq_epoch_after, o.sq_psn_after);
		check_bytes("E.4 WQE", buf + i * 128, want_wqe[i], 48);
		check_bytes("E.4 PSN", psn + i * 8, want_psn[i], 8);
		CHECK_EQ(o.doorbell, want_db[i]);
		CHECK_EQ(o.n_doorbells, 1);
		CHECK_EQ(o.sq_tail_after, (i + 1) * 8);
		CHECK_EQ(o.sw_idx_after, i + 1);
		CHECK_EQ(o.last_slots, 8);
		c.sq_tail = o.sq_tail_after;
		c.sq_epoch = o.sq_epoch_after;
		c.sq_psn = o.sq_psn_after;
	}
	CHECK_EQ(c.sq_psn, 0x106);
	/* nothing written beyond the three WQEs' used slots */
	for (size_t k = 48; k < 128; k++)
		CHECK(buf[k] == 0 && buf[128 + k] == 0, "stray byte at %zu", k);

	/* the same three as one chain: identical bytes, a single doorbell */
	c = e4_cfg(sq_slots);
	CHECK_EQ(bref_post_send_n(&c, w, 3, buf2, len, &o), 0);
	check_bytes("chain == three posts", buf2, buf, len);
	CHECK_EQ(o.n_doorbells, 1);
	CHECK_EQ(o.doorbell, 0x0400002100000003ull);
	CHECK_EQ(o.sq_psn_after, 0x106);

	/* P5/P7 psns_ext (16-byte) entries: same 8 bytes + st_slot_idx LE16 at +8 */
	memset(buf2, 0, len);
	c = e4_cfg(sq_slots);
	c.psn_ext = 1;
	CHECK_EQ(bref_post_send_n(&c, w, 3, buf2, len, &o), 0);
	CHECK_EQ(o.psn_entry_size, 16);
	for (int i = 0; i < 3; i++) {
		uint8_t e[16] = { 0 };

		memcpy(e, want_psn[i], 8);
		e[8] = (uint8_t)(i * 8);
		check_bytes("psns_ext entry", buf2 + sq_slots * 16 + i * 16, e, 16);
	}
	hexdump("psns_ext entry for WQE 1", buf2 + sq_slots * 16 + 16, 16);

	/* MSN table (Thor2): LE64 start_idx<<48 | npsn<<24 | spsn, indexed by msn */
	memset(buf2, 0, len);
	c = e4_cfg(sq_slots);
	c.msn_table = 1;
	c.psn_ext = 1;
	c.msn = 5;
	CHECK_EQ(bref_post_send_n(&c, w, 3, buf2, len, &o), 0);
	CHECK_EQ(o.msn_after, 8);
	CHECK_EQ(o.msn_tbl_sz, sq_slots / 8);
	for (int i = 0; i < 3; i++) {
		uint64_t v;
		static const uint32_t sp[4] = { 0x100, 0x104, 0x105, 0x106 };

		memcpy(&v, buf2 + sq_slots * 16 + (5 + i) * 8, 8);
		CHECK_EQ(le64toh(v), ((uint64_t)i << 48) | ((uint64_t)sp[i + 1] << 24) | sp[i]);
	}
	{
		uint64_t v;
		memcpy(&v, buf2 + sq_slots * 16 + 5 * 8, 8);
		printf("  MSN entry[5] for the WRITE: 0x%016" PRIx64 "\n", le64toh(v));
	}
	/* WQE bytes do not depend on the PSN table mode */
	check_bytes("MSN mode ring == legacy ring", buf2, buf, sq_slots * 16);
	free(buf);
	free(buf2);
}

static void test_variable_and_wrap(void)
{
	/* variable mode: 256 slots, WRITE with 2 SGEs at tail 254 wraps; doorbell index
	 * is the slot tail, epoch toggles */
	uint32_t slots = 256;
	size_t len = slots * 16 + slots * 8;
	uint8_t *buf = calloc(1, len);
	struct bref_qp_cfg c;
	struct bref_wr w;
	struct bref_out o;

	printf("[variable] 256 slots, WRITE 2 SGE at tail 254 (wraps), PSN 0xfffffe\n");
	memset(&c, 0, sizeof(c));
	c.qp_id = 0x21; c.wqe_mode = 1; c.sq_slots = slots; c.sq_tail = 254;
	c.sq_head = 200; /* 54 slots in flight: avail 202 > 4 + diff? diff = 8*esize */
	c.sq_psn = 0xfffffe; c.mtu_enum = 1; c.max_sge = 2; c.max_inline = 0;
	memset(&w, 0, sizeof(w));
	w.opcode = 0; w.send_flags = 2;
	w.remote_addr = 0x1000; w.rkey = 7; w.num_sge = 2;
	w.sg_list[0] = (struct bref_sge){ 0xa000, 300, 1 };
	w.sg_list[1] = (struct bref_sge){ 0xb000, 200, 2 };
	bref_post_send(&c, &w, buf, len, &o);
	printf("  diff %u ret %d\n", o.sq_diff, o.ret);
	/* diff = 128 * esize / 16 = 8 * 64 = 512 > 256 slots: the queue always looks full */
	CHECK_EQ(o.ret, 12 /* ENOMEM */);
	CHECK_EQ(o.n_doorbells, 0);

	/* a realistic variable queue: geometry for 64 WRs / 2 SGE -> slots 1024? */
	{
		struct bref_geom_in gi = { .wqe_mode = 1, .max_send_wr = 64, .max_send_sge = 2,
					   .max_recv_wr = 1, .max_recv_sge = 1 };
		struct bref_geom g;

		bref_geometry(&gi, &g);
		printf("  geometry variable 64 WR/2 SGE: sq_slots %u esize %u diff %u\n",
		       g.sq_slots, g.sq_esize, g.sq_diff);
		slots = g.sq_slots;
	}
	free(buf);
	len = slots * 16 + slots * 8;
	buf = calloc(1, len);
	c.sq_slots = slots; c.sq_tail = slots - 2; c.sq_head = slots - 2;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	hexdump("WQE slots 1022,1023 | 0,1", buf + (slots - 2) * 16, 32);
	hexdump("", buf, 32);
	printf("  doorbell 0x%016" PRIx64 " tail %u epoch %u psn 0x%x\n", o.doorbell,
	       o.sq_tail_after, o.sq_epoch_after, o.sq_psn_after);
	CHECK_EQ(o.sq_tail_after, 2);
	CHECK_EQ(o.sq_epoch_after, 1);
	CHECK_EQ(o.doorbell, 0x0400002101000002ull);
	/* 500 bytes / 256 MTU = 2 packets; PSN wraps at 24 bits */
	CHECK_EQ(o.sq_psn_after, 0x000000);
	{
		uint32_t hdr;
		uint8_t *p = buf + slots * 16 + (slots - 2) * 8; /* entry index = tail before */

		memcpy(&hdr, buf + (slots - 2) * 16, 4);
		CHECK_EQ(le32toh(hdr), 0x00040104); /* ws 4, SIGNALED, WRITE */
		CHECK_EQ(le32toh(*(uint32_t *)p), 0x01fffffe);
		CHECK_EQ(le32toh(*(uint32_t *)(p + 4)), 0x000000);
	}
	/* MSN mode does NOT mask qp->sq_psn to 24 bits */
	memset(buf, 0, len);
	c.msn_table = 1; c.msn = 0;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	printf("  MSN mode psn after: 0x%x (not masked)\n", o.sq_psn_after);
	CHECK_EQ(o.sq_psn_after, 0x1000000);
	{
		uint64_t v;
		memcpy(&v, buf + slots * 16, 8);
		/* start_idx = *dbtail = slot tail before (1022) */
		CHECK_EQ(le64toh(v), ((uint64_t)(slots - 2) << 48) | (0x000000ull << 24) | 0xfffffe);
	}
	free(buf);
}


static void test_misc_send(void)
{
	uint32_t slots = 2048;
	size_t len = slots * 16 + 256 * 16;
	uint8_t *buf = calloc(1, len);
	struct bref_qp_cfg c = e4_cfg(slots);
	struct bref_wr w;
	struct bref_out o;
	uint32_t v;

	printf("[misc] UD SEND, SEND_WITH_INV, unsupported opcode, atomic with 2 SGEs\n");
	memset(&w, 0, sizeof(w));
	c.qp_type = 4; /* UD */
	w.opcode = 2; w.send_flags = 2; w.num_sge = 1;
	w.sg_list[0] = (struct bref_sge){ 0x9000, 100, 0x33 };
	w.ud_remote_qpn = 0x123456; w.ud_remote_qkey = 0x11111111; w.ud_avid = 0xfff00abc;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	hexdump("UD SEND", buf, 48);
	hexdump("UD PSN entry", buf + slots * 16, 8);
	memcpy(&v, buf + 8, 4); CHECK_EQ(le32toh(v), 100);
	memcpy(&v, buf + 12, 4); CHECK_EQ(le32toh(v), 0x11111111); /* qkey in lhdr[63:32] */
	memcpy(&v, buf + 16, 4); CHECK_EQ(le32toh(v), 0x123456);
	memcpy(&v, buf + 20, 4); CHECK_EQ(le32toh(v), 0x00abc);    /* avid & 0xfffff */
	CHECK_EQ(o.sq_psn_after, 0x100);                            /* UD: PSN not advanced */
	memcpy(&v, buf + slots * 16, 4); CHECK_EQ(le32toh(v), 0);    /* opc SEND(0), no spsn */
	memcpy(&v, buf + slots * 16 + 4, 4); CHECK_EQ(le32toh(v), 0);
	CHECK_EQ(o.last_bytes, 0); /* wrid->bytes overwritten by bnxt_re_build_ud_sqe()'s 0 */

	memset(buf, 0, len);
	c = e4_cfg(slots);
	memset(&w, 0, sizeof(w));
	w.opcode = 9; /* IBV_WR_SEND_WITH_INV */
	w.imm_data = 0x44332211; /* invalidate_rkey, stored raw */
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	memcpy(&v, buf, 4); CHECK_EQ(le32toh(v), 0x000200ff); /* type 0xFF (v55 bug) */
	memcpy(&v, buf + 4, 4); CHECK_EQ(v, 0x44332211);
	CHECK_EQ(o.last_wc_opcode, 0xff);
	CHECK_EQ(o.n_doorbells, 1);

	memset(buf, 0, len);
	memset(&w, 0, sizeof(w));
	w.opcode = 7; w.send_flags = 2; /* IBV_WR_LOCAL_INV: not supported */
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), -22); /* -EINVAL (negative!) */
	CHECK_EQ(o.n_doorbells, 0);
	CHECK_EQ(o.bad_index, 0);
	memcpy(&v, buf, 4); CHECK_EQ(le32toh(v), 0x000201ff); /* header already written */

	memset(&w, 0, sizeof(w));
	w.opcode = 5; w.num_sge = 2;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 22); /* +EINVAL */
	c.atomics_disabled = 1; w.num_sge = 1;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 22);
	c.atomics_disabled = 0;
	c.max_sge = 1; w.opcode = 0; w.num_sge = 2;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 12); /* ENOMEM for num_sge > max_sge */

	/* 2nd WR of a chain fails: 1st is kept and the doorbell is still rung */
	{
		struct bref_wr ch[2];
		c = e4_cfg(slots);
		memset(ch, 0, sizeof(ch));
		ch[0].opcode = 2;
		ch[1].opcode = 7;
		CHECK_EQ(bref_post_send_n(&c, ch, 2, buf, len, &o), -22);
		CHECK_EQ(o.bad_index, 1);
		CHECK_EQ(o.n_doorbells, 1);
		CHECK_EQ(o.doorbell, 0x0400002100000001ull);
	}

	/* inline larger than max_inline (align16(17) = 32 > 16): bnxt_re_required_slots
	 * returns -EINVAL, which post_send uses as a slot count; the uint32 full test
	 * (slots + diff wraps to diff - 22) passes, and bnxt_re_put_inline's own
	 * length check then fails -> ENOMEM, nothing rung */
	memset(&w, 0, sizeof(w));
	c = e4_cfg(slots);
	c.max_inline = 16;
	w.opcode = 2; w.send_flags = 8; w.num_sge = 1;
	w.sg_list[0] = (struct bref_sge){ (uintptr_t)buf, 17, 0 };
	CHECK_EQ(bref_post_send(&c, &w, buf + 4096, len - 4096, &o), BREF_EHARNESS); /* len too small */
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 12);
	free(buf);
}


/* which bytes rdma-core leaves unwritten (stale pattern 0xee) */
static void test_stale(void)
{
	uint32_t slots = 2048;
	size_t len = slots * 16 + 256 * 8;
	uint8_t *buf = malloc(len);
	struct bref_qp_cfg c = e4_cfg(slots);
	struct bref_wr w;
	struct bref_out o;
	uint32_t v;
	uint64_t q;

	printf("[stale] bytes not written by bnxt_re_post_send (ring pre-filled with 0xee)\n");
	/* RDMA_WRITE: key_immd (4..7) and bnxt_re_rdma.rsvd2 (28..31) stay stale */
	memset(buf, 0xee, len);
	memset(&w, 0, sizeof(w));
	w.opcode = 0; w.remote_addr = 0x1000; w.rkey = 5; w.num_sge = 1;
	w.sg_list[0] = (struct bref_sge){ 0x2000, 10, 6 };
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	hexdump("RDMA_WRITE", buf, 48);
	memcpy(&v, buf + 4, 4); CHECK_EQ(v, 0xeeeeeeee);
	memcpy(&v, buf + 28, 4); CHECK_EQ(v, 0xeeeeeeee);
	/* RC SEND: key_immd and the whole extended slot stay stale */
	memset(buf, 0xee, len);
	w.opcode = 2;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	hexdump("RC SEND", buf, 48);
	memcpy(&v, buf + 4, 4); CHECK_EQ(v, 0xeeeeeeee);
	memcpy(&q, buf + 16, 8); CHECK_EQ(q, 0xeeeeeeeeeeeeeeeeull);
	memcpy(&q, buf + 24, 8); CHECK_EQ(q, 0xeeeeeeeeeeeeeeeeull);
	/* FETCH_AND_ADD: cmp_dt (24..31) stays stale, add value in swp_dt */
	memset(buf, 0xee, len);
	w.opcode = 6; w.compare_add = 0x55; w.swap = 0x66; w.sg_list[0].length = 8;
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	hexdump("ATOMIC_FA", buf, 48);
	memcpy(&q, buf + 16, 8); CHECK_EQ(le64toh(q), 0x55);
	memcpy(&q, buf + 24, 8); CHECK_EQ(q, 0xeeeeeeeeeeeeeeeeull);
	memcpy(&v, buf, 4); CHECK_EQ(le32toh(v), 0x0003000b);
	/* inline: padding after the payload inside the last 16-byte slot is stale */
	memset(buf, 0xee, len);
	memset(&w, 0, sizeof(w));
	w.opcode = 2; w.send_flags = 8; w.num_sge = 2;
	w.sg_list[0] = (struct bref_sge){ (uintptr_t)hello, 5, 0 };
	w.sg_list[1] = (struct bref_sge){ (uintptr_t)hello, 5, 0 }; /* 10 bytes packed */
	CHECK_EQ(bref_post_send(&c, &w, buf, len, &o), 0);
	hexdump("inline SEND 2x\"hello\"", buf, 48);
	CHECK(memcmp(buf + 32, "hellohello", 10) == 0 && buf[42] == 0xee && buf[47] == 0xee,
	      "inline packing/padding");
	memcpy(&v, buf, 4); CHECK_EQ(le32toh(v), 0x00031000); /* ws = 2 + 16/16 */
	free(buf);
}

static void test_e5(void)
{
	printf("[E.5] doorbells via db.c\n");
	CHECK_EQ(bref_db(BREF_DB_SQ, 0xABC, 0x123, 1, 0), 0x04000ABC01000123ull);
	CHECK_EQ(bref_db(BREF_DB_RQ, 0xABC, 7, 0, 0), 0x14000ABC00000007ull);
	CHECK_EQ(bref_db(BREF_DB_CQ, 0x10, 0x7F, 1, 0), 0x440000100100007Full);
	CHECK_EQ(bref_db(BREF_DB_CQ_ARMALL, 0x10, 0x7F, 1, 0), 0x640000100100007Full);
	CHECK_EQ(bref_db(BREF_DB_CQ_ARMSE, 0x10, 0x7F, 1, 1), 0x540000100300007Full);
	CHECK_EQ(bref_db(BREF_DB_SRQ_ARM, 0x5, 0x20, 0, 1), 0x3400000502000020ull);
	printf("  SQ 0x%016" PRIx64 " RQ 0x%016" PRIx64 " CQ 0x%016" PRIx64 " ARMALL 0x%016" PRIx64 "\n",
	       bref_db(BREF_DB_SQ, 0xABC, 0x123, 1, 0), bref_db(BREF_DB_RQ, 0xABC, 7, 0, 0),
	       bref_db(BREF_DB_CQ, 0x10, 0x7F, 1, 0), bref_db(BREF_DB_CQ_ARMALL, 0x10, 0x7F, 1, 0));
}

static void test_recv(void)
{
	uint8_t buf[64 * 16];
	struct bref_rq_cfg c;
	struct bref_rq_out o;
	struct bref_sge s[2] = { { 0x7f0000005000ull, 256, 0x11 }, { 0x7f0000006000ull, 512, 0x22 } };
	static const uint8_t want[64] = {
		0x80, 0x00, 0x04, 0x00, 0xee, 0xee, 0xee, 0xee, 0x03, 0x00, 0x00, 0x00, 0xee, 0xee, 0xee, 0xee,
		0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
		0x00, 0x50, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x60, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
	};

	printf("[recv] static RQ, 8 RQEs (64 slots), WQE index 3, 2 SGEs; stale pattern 0xee\n");
	memset(buf, 0xee, sizeof(buf));
	memset(&c, 0, sizeof(c));
	c.qp_id = 0x21; c.rq_slots = 64; c.rq_tail = 24; c.wqe_idx = 3; c.max_sge = 2;
	CHECK_EQ(bref_post_recv(&c, 0x77, 2, s, buf, sizeof(buf), &o), 0);
	hexdump("RQE 3", buf + 24 * 16, 64);
	check_bytes("RQE", buf + 24 * 16, want, 64);
	CHECK_EQ(o.doorbell, 0x1400002100000004ull);
	CHECK_EQ(o.rq_tail_after, 32);
	CHECK_EQ(o.wqe_idx_after, 4);
	CHECK_EQ(o.max_slots, 8);

	/* last RQE wraps: doorbell index 0 and epoch 1; zero-SGE RQE writes only
	 * the SGE length (addr/lkey stay stale), ws = 3 */
	memset(buf, 0xee, sizeof(buf));
	c.rq_tail = 56; c.wqe_idx = 7; c.rq_head = 8;
	CHECK_EQ(bref_post_recv(&c, 0x78, 0, NULL, buf, sizeof(buf), &o), 0);
	hexdump("zero-SGE RQE 7", buf + 56 * 16, 48);
	printf("  doorbell 0x%016" PRIx64 " tail %u epoch %u\n", o.doorbell, o.rq_tail_after, o.rq_epoch_after);
	CHECK_EQ(le32toh(*(uint32_t *)(buf + 56 * 16)), 0x00030080);
	CHECK_EQ(le32toh(*(uint32_t *)(buf + 56 * 16 + 8)), 7);
	CHECK_EQ(*(uint64_t *)(buf + 56 * 16 + 32), 0xeeeeeeeeeeeeeeeeull);
	CHECK_EQ(le32toh(*(uint32_t *)(buf + 56 * 16 + 44)), 0);
	CHECK_EQ(o.doorbell, 0x1400002101000000ull);
	CHECK_EQ(o.rq_epoch_after, 1);

	/* variable mode: max_slots = 2 + max_sge */
	memset(&c, 0, sizeof(c));
	c.qp_id = 0x21; c.wqe_mode = 1; c.rq_slots = 4 * 4; c.max_sge = 2;
	CHECK_EQ(bref_post_recv(&c, 0x79, 1, s, buf, sizeof(buf), &o), 0);
	CHECK_EQ(o.max_slots, 4);
	CHECK_EQ(o.rq_tail_after, 4);
	CHECK_EQ(o.doorbell, 0x1400002100000001ull);
}

static void put_bcqe(uint8_t *cqe, uint32_t w0, uint32_t w1)
{
	w0 = htole32(w0);
	w1 = htole32(w1);
	memcpy(cqe + 24, &w0, 4);
	memcpy(cqe + 28, &w1, 4);
}

static void put_req_cqe(uint8_t *cqe, uint64_t handle, uint32_t con_indx,
			uint32_t status, uint32_t phase)
{
	uint64_t h = htole64(handle);
	uint32_t ci = htole32(con_indx);

	memset(cqe, 0, 32);
	memcpy(cqe, &h, 8);
	memcpy(cqe + 8, &ci, 4);
	put_bcqe(cqe, (status << 8) | (0 << 1) | phase, 0);
}

static void print_wcs(const struct bref_wc *wc, int n)
{
	for (int i = 0; i < n; i++)
		printf("  wc[%d] wr_id 0x%" PRIx64 " status %u opcode %u vendor_err 0x%x byte_len %u imm 0x%08x flags 0x%x qp 0x%x\n",
		       i, wc[i].wr_id, wc[i].status, wc[i].opcode, wc[i].vendor_err,
		       wc[i].byte_len, wc[i].imm_data, wc[i].wc_flags, wc[i].qp_num);
}

static void test_poll(void)
{
	uint8_t ring[8 * 32];
	struct bref_wc wc[8];
	struct bref_cq_out o;
	struct bref_cq_cfg c;
	struct bref_swqe sw[3] = {
		{ 0x100, 0 /* WRITE */, 1, 4096, 8 },
		{ 0x101, 4 /* READ */, 1, 64, 8 },
		{ 0x102, 2 /* SEND */, 1, 0, 8 },
	};
	uint64_t h;

	printf("[poll] requester CQE con_indx=2 retires 2 signaled WQEs\n");
	memset(ring, 0, sizeof(ring));
	put_req_cqe(ring, 1, 2, 0, 1);
	memset(&c, 0, sizeof(c));
	c.cq_id = 0x10; c.cq_depth = 8; c.cq_phase = 1; c.nwc = 8;
	c.qp_id = 0x21; c.max_swr = 256; c.sq_slots = 2048;
	c.n_swqe = 2; c.swqe = sw;
	CHECK_EQ(bref_poll_cq(&c, ring, wc, &o), 2);
	print_wcs(wc, o.n_wc);
	printf("  cq head %u phase %u doorbell 0x%016" PRIx64 " (n=%u) sq head %u cons %u\n",
	       o.cq_head_after, o.cq_phase_after, o.doorbell, o.n_doorbells, o.sq_head_after,
	       o.sq_cons_idx_after);
	CHECK(wc[0].wr_id == 0x100 && wc[0].status == 0 && wc[0].opcode == 1 &&
	      wc[0].byte_len == 0 && wc[0].qp_num == 0x21, "wc0");
	CHECK(wc[1].wr_id == 0x101 && wc[1].status == 0 && wc[1].opcode == 2 &&
	      wc[1].byte_len == 64, "wc1 (READ reports bytes)");
	CHECK_EQ(o.cq_head_after, 1);
	CHECK_EQ(o.sq_head_after, 16);
	CHECK_EQ(o.sq_cons_idx_after, 2);
	CHECK_EQ(o.n_doorbells, 1);
	CHECK_EQ(o.doorbell, 0x4400001000000001ull);
	memcpy(&h, ring, 8);
	CHECK_EQ(h, 0); /* consumed CQE's qp_handle zeroed by rdma-core */

	printf("[poll] unsignaled WQE retired silently; nwc=1 with a coalesced CQE\n");
	memset(ring, 0, sizeof(ring));
	put_req_cqe(ring, 1, 3, 0, 1);
	sw[0].signaled = 0;
	c.n_swqe = 3; c.nwc = 1;
	CHECK_EQ(bref_poll_cq(&c, ring, wc, &o), 1);
	print_wcs(wc, o.n_wc);
	CHECK_EQ(wc[0].wr_id, 0x101);
	/* stopped after one WC: the CQE is not consumed yet (head unchanged, handle kept) */
	CHECK_EQ(o.cq_head_after, 0);
	CHECK_EQ(o.sq_cons_idx_after, 2);
	CHECK_EQ(o.n_doorbells, 0);
	memcpy(&h, ring, 8);
	CHECK_EQ(h, 1);
	sw[0].signaled = 1;

	printf("[poll] requester status 0x0A -> RETRY_EXC_ERR, remaining WQE flushed\n");
	memset(ring, 0, sizeof(ring));
	put_req_cqe(ring, 1, 1, 0x0A, 1);
	c.n_swqe = 2; c.nwc = 8;
	CHECK_EQ(bref_poll_cq(&c, ring, wc, &o), 2);
	print_wcs(wc, o.n_wc);
	CHECK(wc[0].wr_id == 0x100 && wc[0].status == 12 && wc[0].vendor_err == 0x0A &&
	      wc[0].opcode == 1, "RETRY_EXC_ERR wc");
	CHECK(wc[1].wr_id == 0x101 && wc[1].status == 5 && wc[1].opcode == 128,
	      "flush wc (opcode reported as IBV_WC_RECV: wrid->psns is never set in v55)");
	CHECK_EQ(o.qp_state_after, 6);

	printf("[poll] phase wrap at the end of the ring + RC RECV_RDMA_WITH_IMM\n");
	{
		uint64_t rq_ids[2] = { 0x500, 0x501 };
		uint8_t *cqe = ring + 7 * 32;
		uint32_t len = htole32(100), imm = htole32(0xdeadbeef);

		/* entries 1..6 are stale CQEs of the previous lap (phase 1, handle 0) */
		memset(ring, 0, sizeof(ring));
		for (int k = 1; k < 7; k++)
			put_bcqe(ring + k * 32, 1, 0);
		memset(&c, 0, sizeof(c));
		c.cq_id = 0x10; c.cq_depth = 8; c.cq_head = 7; c.cq_phase = 1; c.nwc = 8;
		c.qp_id = 0x21; c.max_swr = 256; c.sq_slots = 2048;
		c.rq_nwr = 16; c.rq_slots = 128; c.rq_max_slots = 8;
		c.rq_head = 120; c.rq_cons_idx = 15; c.n_rwqe = 2; c.rq_wr_id = rq_ids;
		h = htole64(1);
		memcpy(cqe, &len, 4);
		memcpy(cqe + 4, &imm, 4);
		memcpy(cqe + 8, &h, 8);
		put_bcqe(cqe, ((0x2 | 0x8) << 16) | (1 << 1) | 1, 0);
		/* next CQE at index 0 carries phase 0 after the wrap: plain RECV */
		cqe = ring;
		len = htole32(7);
		memcpy(cqe, &len, 4);
		memcpy(cqe + 8, &h, 8);
		put_bcqe(cqe, (1 << 1) | 0, 0);
		CHECK_EQ(bref_poll_cq(&c, ring, wc, &o), 2);
		print_wcs(wc, o.n_wc);
		printf("  cq head %u phase %u epoch %u doorbell 0x%016" PRIx64 "\n", o.cq_head_after,
		       o.cq_phase_after, o.cq_head_epoch_after, o.doorbell);
		CHECK(wc[0].wr_id == 0x500 && wc[0].opcode == 129 && wc[0].byte_len == 100 &&
		      wc[0].imm_data == htobe32(0xdeadbeef) && wc[0].wc_flags == 2, "recv imm");
		CHECK(wc[1].wr_id == 0x501 && wc[1].opcode == 128 && wc[1].byte_len == 7, "recv");
		CHECK_EQ(o.cq_head_after, 1);
		CHECK_EQ(o.cq_phase_after, 0);
		CHECK_EQ(o.cq_head_epoch_after, 1);
		CHECK_EQ(o.doorbell, 0x4400001001000001ull);
		CHECK_EQ(o.rq_head_after, 8);
		CHECK_EQ(o.rq_cons_idx_after, 1);
	}

	printf("[poll] deferred CQ doorbell: rung only once hw_cqes >= depth/2\n");
	memset(ring, 0, sizeof(ring));
	put_req_cqe(ring, 1, 1, 0, 1);
	memset(&c, 0, sizeof(c));
	c.cq_id = 0x10; c.cq_depth = 8; c.cq_phase = 1; c.nwc = 8; c.deferred_db = 1;
	c.qp_id = 0x21; c.max_swr = 256; c.sq_slots = 2048; c.n_swqe = 1; c.swqe = sw;
	CHECK_EQ(bref_poll_cq(&c, ring, wc, &o), 1);
	CHECK_EQ(o.n_doorbells, 0);
	CHECK_EQ(o.hw_cqes_after, 1);
	put_req_cqe(ring, 1, 1, 0, 1);
	c.hw_cqes = 3;
	CHECK_EQ(bref_poll_cq(&c, ring, wc, &o), 1);
	CHECK_EQ(o.n_doorbells, 1);
	CHECK_EQ(o.hw_cqes_after, 0);
	CHECK_EQ(o.doorbell, 0x4400001000000001ull);
}

int main(void)
{
	uint32_t sq_slots = 0;

	test_geometry(&sq_slots);
	test_e4(sq_slots);
	test_variable_and_wrap();
	test_misc_send();
	test_stale();
	test_e5();
	test_recv();
	test_poll();
	printf("%s: %d checks, %d failures\n", failures ? "FAILED" : "PASSED", checks, failures);
	return failures ? 1 : 0;
}
