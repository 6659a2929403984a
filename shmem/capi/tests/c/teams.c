/* Teams and the corners of the team routines (issue 27): shmem_team_split_2d for several
 * x ranges (also of a split parent), splits with a negative stride, many splits that reuse
 * destroyed teams, shmem_team_ptr on split teams, shmem_team_destroy of the
 * SHMEM_TEAM_INVALID handle a split gives to PEs outside the new team (a no-op),
 * shmem_team_get_config reporting the contexts asked for, shmem_align (alignments, sizes,
 * size 0, an alignment that is not a power of two), and every collective with zero elements
 * (team and active-set forms). Written for gda; run with `gdarun -n N ./teams` (N >= 2).
 * Prints one line per PE with its count of checks; failed checks are listed on stderr and
 * the PE exits with status 3. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failed;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failed++;                                                                  \
            fprintf(stderr, "PE %d: check failed at line %d: %s\n", shmem_my_pe(),     \
                    __LINE__, #cond);                                                  \
        }                                                                              \
    } while (0)

#define MAXPE 64
long pSync[SHMEM_REDUCE_SYNC_SIZE];
long pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 64];
long src[MAXPE], dst[MAXPE * MAXPE];
int isrc[MAXPE], idst[MAXPE];

/* Checks a team's size, my number, and that member k is world PE `world_of(k)`. */
static void check_team(shmem_team_t t, int size, int my, int first, int step) {
    CHECK(t != SHMEM_TEAM_INVALID);
    CHECK(shmem_team_n_pes(t) == size);
    CHECK(shmem_team_my_pe(t) == my);
    int ok = 1;
    for (int k = 0; k < size; k++)
        ok &= shmem_team_translate_pe(t, k, SHMEM_TEAM_WORLD) == first + k * step;
    CHECK(ok);
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, shmem_my_pe(), t) == my);
}

/* fcollect over t: element k is team member k's world PE, and a sum reduction agrees. */
static void check_collectives(shmem_team_t t) {
    int size = shmem_team_n_pes(t);
    src[0] = shmem_my_pe();
    for (int k = 0; k < size; k++) dst[k] = -1;
    CHECK(shmem_long_fcollect(t, dst, src, 1) == 0);
    int ok = 1;
    long sum = 0;
    for (int k = 0; k < size; k++) {
        ok &= dst[k] == shmem_team_translate_pe(t, k, SHMEM_TEAM_WORLD);
        sum += dst[k];
    }
    CHECK(ok);
    CHECK(shmem_long_sum_reduce(t, &dst[MAXPE], src, 1) == 0);
    CHECK(dst[MAXPE] == sum);
    dst[0] = -1;
    src[0] = 1000 + shmem_my_pe();
    CHECK(shmem_long_broadcast(t, dst, src, 1, size - 1) == 0);
    CHECK(dst[0] == 1000 + shmem_team_translate_pe(t, size - 1, SHMEM_TEAM_WORLD));
    CHECK(shmem_team_sync(t) == 0);
}

static void split_2d(shmem_team_t parent, int xrange) {
    int n = shmem_team_n_pes(parent), me = shmem_team_my_pe(parent);
    int x = xrange < n ? xrange : n;
    shmem_team_t xt = SHMEM_TEAM_INVALID, yt = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_2d(parent, xrange, NULL, 0, &xt, NULL, 0, &yt) == 0);
    int row = me / x, col = me % x;
    int row_len = n - row * x < x ? n - row * x : x;
    int col_len = (n - col + x - 1) / x;
    int base = shmem_team_translate_pe(parent, 0, SHMEM_TEAM_WORLD);
    int pstep = n > 1 ? shmem_team_translate_pe(parent, 1, SHMEM_TEAM_WORLD) - base : 1;
    check_team(xt, row_len, col, base + row * x * pstep, pstep);
    check_team(yt, col_len, row, base + col * pstep, x * pstep);
    check_collectives(xt);
    check_collectives(yt);
    shmem_team_destroy(xt);
    shmem_team_destroy(yt);
}

int main(void) {
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    CHECK(n >= 2 && n <= MAXPE);

    /* ---- shmem_team_split_2d: x ranges 1, 2, 3, n and beyond n ---- */
    int xr[] = {1, 2, 3, n, n + 3};
    for (unsigned i = 0; i < sizeof xr / sizeof xr[0]; i++) split_2d(SHMEM_TEAM_WORLD, xr[i]);

    /* A 3D grid, as the specification's example makes it: a 2D split of the world, then a
     * 2D split of its y team, which is destroyed at once; the two splits need no sync. */
    int xd = n >= 4 ? 2 : 1, yd = 2;
    shmem_team_t gx = SHMEM_TEAM_INVALID, gyz = SHMEM_TEAM_INVALID, gy = SHMEM_TEAM_INVALID,
                 gz = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, xd, NULL, 0, &gx, NULL, 0, &gyz) == 0);
    CHECK(shmem_team_split_2d(gyz, yd, NULL, 0, &gy, NULL, 0, &gz) == 0);
    shmem_team_destroy(gyz);
    CHECK(shmem_team_my_pe(gx) == me % xd);
    CHECK(shmem_team_my_pe(gy) == (me / xd) % yd);
    CHECK(shmem_team_my_pe(gz) == me / (xd * yd));
    check_collectives(gy);
    check_collectives(gz);
    shmem_team_destroy(gx);
    shmem_team_destroy(gy);
    shmem_team_destroy(gz);

    /* ---- Negative strides: the new team runs from `start` downwards ---- */
    shmem_team_t rev = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &rev) == 0);
    check_team(rev, n, n - 1 - me, n - 1, -1);
    check_collectives(rev);
    /* A 2D split of the reversed team (a parent that is not the world, running down it). */
    split_2d(rev, 2);
    /* A context made on the reversed team numbers PEs within it: team PE 0 is world PE n-1.
     * Every PE writes its slot of `ctx_slots` on team PE 0 through the context. */
    static int ctx_slots[MAXPE];
    shmem_ctx_t rctx;
    CHECK(shmem_team_create_ctx(rev, 0, &rctx) == 0);
    shmem_barrier_all();
    shmem_ctx_int_p(rctx, &ctx_slots[me], 100 + me, 0);
    shmem_ctx_quiet(rctx);
    shmem_barrier_all();
    int ctx_ok = 1;
    for (int i = 0; i < n; i++) ctx_ok &= ctx_slots[i] == (me == n - 1 ? 100 + i : 0);
    CHECK(ctx_ok);
    /* And a read through it: team PE n-1 is world PE 0. */
    CHECK(shmem_ctx_int_g(rctx, &ctx_slots[me], n - 1) == 0 || n == 1);
    shmem_ctx_destroy(rctx);
    shmem_team_destroy(rev);
    /* Splitting SHMEM_TEAM_INVALID makes no team: non-zero status, SHMEM_TEAM_INVALID out. */
    shmem_team_t none = (shmem_team_t)1;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &none) != 0);
    CHECK(none == SHMEM_TEAM_INVALID);
    shmem_team_t nx = (shmem_team_t)1, ny = (shmem_team_t)1;
    CHECK(shmem_team_split_2d(SHMEM_TEAM_INVALID, 1, NULL, 0, &nx, NULL, 0, &ny) != 0);
    CHECK(nx == SHMEM_TEAM_INVALID && ny == SHMEM_TEAM_INVALID);
    /* A split that leaves out the odd PEs: they get SHMEM_TEAM_INVALID, and destroy it. */
    shmem_team_t evens = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens) == 0);
    CHECK((evens != SHMEM_TEAM_INVALID) == (me % 2 == 0));
    /* As the spec's team-context example does: a context on the team (SHMEM_CTX_INVALID on the
     * PEs outside it), quieted, fenced and destroyed by every PE — no operation on the invalid
     * one (1.5). */
    shmem_ctx_t ectx = (shmem_ctx_t)7;
    CHECK((shmem_team_create_ctx(evens, 0, &ectx) == 0) == (me % 2 == 0));
    CHECK((ectx == SHMEM_CTX_INVALID) == (me % 2 != 0));
    shmem_ctx_quiet(ectx);
    shmem_ctx_fence(ectx);
    shmem_team_t et = SHMEM_TEAM_INVALID;
    CHECK((shmem_ctx_get_team(ectx, &et) == 0) == (me % 2 == 0));
    shmem_ctx_destroy(ectx);
    shmem_team_destroy(evens); /* SHMEM_TEAM_INVALID on the odd PEs: nothing happens */
    shmem_team_t down2 = SHMEM_TEAM_INVALID;
    int nd = (n + 1) / 2; /* n-1, n-3, ... */
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -2, nd, NULL, 0, &down2) == 0);
    if ((n - 1 - me) % 2 == 0) {
        check_team(down2, nd, (n - 1 - me) / 2, n - 1, -2);
        check_collectives(down2);
    } else {
        CHECK(down2 == SHMEM_TEAM_INVALID);
        checks += 11; /* as many as the members' check_team and check_collectives */
    }
    shmem_team_destroy(down2);
    /* A negative stride that leaves the parent is an error on every PE, not fatal. */
    shmem_team_t bad = (shmem_team_t)1;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, -1, 2, NULL, 0, &bad) != 0);
    CHECK(bad == SHMEM_TEAM_INVALID);

    /* ---- Splits that reuse destroyed teams: more than the teams alive at once ---- */
    int reuse_ok = 1;
    for (int i = 0; i < 40; i++) {
        shmem_team_t a = SHMEM_TEAM_INVALID, b = SHMEM_TEAM_INVALID;
        int half = n / 2;
        reuse_ok &= shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, half, NULL, 0, &a) == 0;
        reuse_ok &= shmem_team_split_strided(SHMEM_TEAM_WORLD, half, 1, n - half, NULL, 0,
                                             &b) == 0;
        shmem_team_t mine = me < half ? a : b;
        reuse_ok &= mine != SHMEM_TEAM_INVALID && (me < half ? b : a) == SHMEM_TEAM_INVALID;
        if (mine != SHMEM_TEAM_INVALID) {
            src[0] = me;
            reuse_ok &= shmem_long_max_reduce(mine, dst, src, 1) == 0;
            reuse_ok &= dst[0] == (me < half ? half - 1 : n - 1);
            /* A team split from the split team, destroyed first. */
            shmem_team_t c = SHMEM_TEAM_INVALID;
            reuse_ok &= shmem_team_split_strided(mine, 0, 1, 1, NULL, 0, &c) == 0;
            reuse_ok &= (c != SHMEM_TEAM_INVALID) == (shmem_team_my_pe(mine) == 0);
            shmem_team_destroy(c);
        }
        shmem_team_destroy(a);
        shmem_team_destroy(b);
    }
    CHECK(reuse_ok);

    /* ---- shmem_team_ptr on split teams: as shmem_ptr of the member's world PE ---- */
    long *buf = shmem_malloc(sizeof(long));
    *buf = 7000 + me;
    shmem_team_t odd = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, n / 2, NULL, 0, &odd) == 0);
    shmem_barrier_all();
    if (odd != SHMEM_TEAM_INVALID) {
        int ok = 1;
        for (int k = 0; k < shmem_team_n_pes(odd); k++) {
            int w = shmem_team_translate_pe(odd, k, SHMEM_TEAM_WORLD);
            long *p = shmem_team_ptr(odd, buf, k);
            ok &= p == shmem_ptr(buf, w);
            if (p) ok &= *p == 7000 + w;
        }
        CHECK(ok);
        CHECK(shmem_team_ptr(odd, buf, shmem_team_my_pe(odd)) == buf);
        CHECK(shmem_team_ptr(odd, buf, shmem_team_n_pes(odd)) == NULL);
        CHECK(shmem_team_ptr(odd, buf, -1) == NULL);
    } else {
        CHECK(shmem_team_ptr(odd, buf, 0) == NULL); /* SHMEM_TEAM_INVALID: no pointer */
        checks += 3;
    }
    shmem_barrier_all();
    shmem_team_destroy(odd);
    shmem_free(buf);

    /* ---- shmem_team_destroy(SHMEM_TEAM_INVALID) does nothing, on any PE ---- */
    shmem_team_destroy(SHMEM_TEAM_INVALID);
    CHECK(shmem_team_n_pes(SHMEM_TEAM_WORLD) == n);

    /* ---- shmem_team_get_config: the contexts asked for at creation ---- */
    shmem_team_config_t cfg = {.num_contexts = 3}, got = {.num_contexts = -1};
    shmem_team_t withctx = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, &cfg, SHMEM_TEAM_NUM_CONTEXTS,
                                   &withctx) == 0);
    CHECK(shmem_team_get_config(withctx, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0);
    CHECK(got.num_contexts == 3);
    shmem_ctx_t ctx[3];
    int made = 0;
    for (int i = 0; i < 3; i++) made += shmem_team_create_ctx(withctx, 0, &ctx[i]) == 0;
    CHECK(made == 3);
    for (int i = 0; i < made; i++) shmem_ctx_destroy(ctx[i]);
    shmem_team_destroy(withctx);
    /* Without the mask bit the config is not read: the default, no contexts. */
    shmem_team_t noctx = SHMEM_TEAM_INVALID;
    cfg.num_contexts = 5;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, &cfg, 0, &noctx) == 0);
    got.num_contexts = -1;
    CHECK(shmem_team_get_config(noctx, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0);
    CHECK(got.num_contexts == 0);
    shmem_team_destroy(noctx);
    shmem_team_t xt = SHMEM_TEAM_INVALID, yt = SHMEM_TEAM_INVALID;
    shmem_team_config_t xc = {.num_contexts = 2}, yc = {.num_contexts = 4};
    CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, &xc, SHMEM_TEAM_NUM_CONTEXTS, &xt, &yc,
                              SHMEM_TEAM_NUM_CONTEXTS, &yt) == 0);
    CHECK(shmem_team_get_config(xt, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 && got.num_contexts == 2);
    CHECK(shmem_team_get_config(yt, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0 && got.num_contexts == 4);
    shmem_team_destroy(xt);
    shmem_team_destroy(yt);
    CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, SHMEM_TEAM_NUM_CONTEXTS, &got) == 0);
    CHECK(shmem_team_get_config(SHMEM_TEAM_INVALID, SHMEM_TEAM_NUM_CONTEXTS, &got) != 0);

    /* ---- shmem_align ---- */
    size_t aligns[] = {sizeof(void *), 16, 64, 128, 4096, 64 << 10, 1 << 20, 2 << 20};
    size_t sizes[] = {1, 8, 100, 4097, 3 << 20};
    int align_ok = 1, sym_ok = 1;
    for (unsigned a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            char *p = shmem_align(aligns[a], sizes[s]);
            align_ok &= p != NULL && (uintptr_t)p % aligns[a] == 0;
            if (!p) continue;
            /* Symmetric: the right neighbour's copy is at the same address. */
            memset(p, 0, sizes[s]);
            shmem_barrier_all();
            char v = (char)(me + 1);
            shmem_putmem(p + sizes[s] - 1, &v, 1, (me + 1) % n);
            shmem_barrier_all();
            sym_ok &= p[sizes[s] - 1] == (char)((me + n - 1) % n + 1);
            shmem_free(p);
        }
    }
    CHECK(align_ok);
    CHECK(sym_ok);
    /* Blocks kept alive together (not freed in between), small alignments included: each
     * aligned, apart from the others, in the heap, shmem_ptr to itself. */
    size_t keep_align[] = {1, 2, 4, 8, 32, 512, 8192, 1 << 20};
    char *kept[8];
    int kept_ok = 1;
    for (int i = 0; i < 8; i++) {
        kept[i] = shmem_align(keep_align[i], 1000 + i);
        kept_ok &= kept[i] != NULL && (uintptr_t)kept[i] % keep_align[i] == 0;
        if (!kept[i]) continue;
        memset(kept[i], i + 1, 1000 + i);
        kept_ok &= shmem_ptr(kept[i], me) == kept[i];
        kept_ok &= shmem_addr_accessible(kept[i], (me + 1) % n) == 1;
    }
    for (int i = 0; i < 8; i++)
        for (int j = 0; kept[i] && j < 1000 + i; j++) kept_ok &= kept[i][j] == i + 1;
    for (int i = 7; i >= 0; i--) shmem_free(kept[i]);
    CHECK(kept_ok);
    /* Half the heap at a 16 MiB alignment. */
    char *big = shmem_align(16 << 20, 16 << 20);
    CHECK(big != NULL && (uintptr_t)big % (16 << 20) == 0);
    shmem_free(big);
    /* Size 0: no action, NULL (and no allocation a later one collides with). */
    CHECK(shmem_align(64, 0) == NULL);
    /* Alignments that are not a power of two are refused with NULL. */
    CHECK(shmem_align(24, 64) == NULL);
    CHECK(shmem_align(0, 64) == NULL);
    /* Interleaved with shmem_malloc, the blocks stay apart and symmetric. */
    long *m1 = shmem_malloc(3 * sizeof(long));
    long *a1 = shmem_align(256, 5 * sizeof(long));
    long *m2 = shmem_malloc(sizeof(long));
    CHECK(m1 && a1 && m2 && (uintptr_t)a1 % 256 == 0);
    CHECK((char *)a1 >= (char *)(m1 + 3) || (char *)(a1 + 5) <= (char *)m1);
    a1[4] = me;
    shmem_barrier_all();
    CHECK(shmem_long_g(&a1[4], (me + 1) % n) == (me + 1) % n);
    shmem_barrier_all();
    shmem_free(m2);
    shmem_free(a1);
    shmem_free(m1);

    /* ---- Collectives with zero elements do nothing (buffers untouched) ---- */
    for (int i = 0; i < MAXPE; i++) dst[i] = -5, idst[i] = -5;
    CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, dst, src, 0, 0) == 0);
    CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    CHECK(shmem_long_fcollect(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    CHECK(shmem_long_alltoall(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    CHECK(shmem_long_alltoalls(SHMEM_TEAM_WORLD, dst, src, 1, 1, 0) == 0);
    CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    CHECK(shmem_int_max_reduce(SHMEM_TEAM_WORLD, idst, isrc, 0) == 0);
    CHECK(shmem_broadcastmem(SHMEM_TEAM_WORLD, dst, src, 0, 0) == 0);
    CHECK(shmem_collectmem(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    CHECK(shmem_fcollectmem(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    CHECK(shmem_alltoallmem(SHMEM_TEAM_WORLD, dst, src, 0) == 0);
    /* Zero elements need no buffers at all. */
    CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, NULL, NULL, 0, 0) == 0);
    CHECK(shmem_long_fcollect(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
    CHECK(shmem_long_alltoall(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
    CHECK(shmem_long_alltoalls(SHMEM_TEAM_WORLD, NULL, NULL, 1, 1, 0) == 0);
    CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
    CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
    CHECK(shmem_collectmem(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0);
    /* Zero on this PE only (collect's counts may differ): the others' parts arrive. */
    src[0] = 100 + me;
    CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, dst, src, me % 2 ? 1 : 0) == 0);
    int ok = 1;
    for (int k = 1, at = 0; k < n; k += 2, at++) ok &= dst[at] == 100 + k;
    CHECK(ok);
    for (int i = 0; i < MAXPE; i++) dst[i] = -5;
    shmem_barrier_all();
    /* Active sets (1.4 names), every PE and every other PE. */
    shmem_broadcast64(dst, src, 0, 0, 0, 0, n, pSync);
    shmem_collect64(dst, src, 0, 0, 0, n, pSync);
    shmem_fcollect64(dst, src, 0, 0, 0, n, pSync);
    shmem_alltoall64(dst, src, 0, 0, 0, n, pSync);
    shmem_alltoalls64(dst, src, 1, 1, 0, 0, 0, n, pSync);
    shmem_long_sum_to_all(dst, src, 0, 0, 0, n, pWrk, pSync);
    shmem_int_max_to_all(idst, isrc, 0, 0, 0, n, (int *)pWrk, pSync);
    shmem_broadcast32(NULL, NULL, 0, 0, 0, 0, n, pSync);
    shmem_collect32(NULL, NULL, 0, 0, 0, n, pSync);
    shmem_fcollect64(NULL, NULL, 0, 0, 0, n, pSync);
    shmem_alltoalls32(NULL, NULL, 1, 1, 0, 0, 0, n, pSync);
    shmem_int_xor_to_all(NULL, NULL, 0, 0, 0, n, (int *)pWrk, pSync);
    shmem_long_sum_to_all(NULL, NULL, 0, 0, 0, n, pWrk, pSync);
    if (me % 2 == 0) {
        shmem_fcollect32(idst, isrc, 0, 0, 1, (n + 1) / 2, pSync);
        shmem_long_prod_to_all(dst, src, 0, 0, 1, (n + 1) / 2, pWrk, pSync);
    }
    ok = 1;
    for (int i = 0; i < MAXPE; i++) ok &= dst[i] == -5 && idst[i] == -5;
    CHECK(ok);
    /* pSync is back at SHMEM_SYNC_VALUE: a real collective on it still works. */
    shmem_barrier_all();
    src[0] = me;
    shmem_long_sum_to_all(dst, src, 1, 0, 0, n, pWrk, pSync);
    CHECK(dst[0] == (long)n * (n - 1) / 2);

    shmem_barrier_all();
    if (failed) {
        fprintf(stderr, "PE %d: %d of %d checks failed\n", me, failed, checks);
        shmem_global_exit(3);
    }
    printf("PE %d/%d: teams ok, %d checks\n", me, n, checks);
    shmem_finalize();
    return 0;
}
