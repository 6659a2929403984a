/* The C ABI's remaining routine families, checked with data on every PE and on global and
 * static (symmetric) variables as well as the heap: teams, team collectives and reductions
 * (complex and long double included), active-set collectives with pSync arrays, contexts,
 * put-with-signal, locks, and the multi-variable waits and tests. Written for gda; run with
 * `gdarun -n N ./families` (N >= 2). Prints one line per PE with its count of checks; any
 * failed check exits with status 3 and says which. */
#include <complex.h>
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAXPE 64
/* Symmetric globals: the active-set routines' work arrays, as 1.x programs declare them. */
long pSync[SHMEM_REDUCE_SYNC_SIZE];
long pSync2[SHMEM_BCAST_SYNC_SIZE];
long pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 64];
static long lock;
static long counter;
int src32[8], dst32[8 * MAXPE];
long src64[8], dst64[8 * MAXPE];
static double dsrc[4], ddst[4];
uint64_t sig;
long flags[MAXPE];

int main(void) {
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;
    for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) pSync2[i] = SHMEM_SYNC_VALUE;
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n;
    CHECK(n >= 2 && n <= MAXPE);

    /* ---- Teams ---- */
    CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me && shmem_team_n_pes(SHMEM_TEAM_WORLD) == n);
    CHECK(shmem_team_n_pes(SHMEM_TEAM_INVALID) == -1);
    shmem_team_t evens = SHMEM_TEAM_INVALID;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens) == 0);
    CHECK((me % 2 == 0) == (evens != SHMEM_TEAM_INVALID));
    if (evens != SHMEM_TEAM_INVALID) {
        CHECK(shmem_team_my_pe(evens) == me / 2 && shmem_team_n_pes(evens) == (n + 1) / 2);
        CHECK(shmem_team_translate_pe(evens, 0, SHMEM_TEAM_WORLD) == 0);
        CHECK(shmem_team_sync(evens) == 0);
        shmem_team_config_t cfg;
        CHECK(shmem_team_get_config(evens, 0, &cfg) == 0);
    } else {
        checks += 4;
    }
    shmem_team_t xt, yt;
    CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &xt, NULL, 0, &yt) == 0);
    CHECK(shmem_team_my_pe(xt) == me % 2 && shmem_team_my_pe(yt) == me / 2);
    CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, xt) == me % 2);
    CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, &counter, right) != NULL ||
          shmem_ptr(&counter, right) == NULL);

    /* ---- Team collectives on the heap ---- */
    long *hs = shmem_malloc(8 * sizeof(long)), *hd = shmem_malloc(8 * MAXPE * sizeof(long));
    CHECK(hs && hd);
    for (int i = 0; i < 8; i++) hs[i] = me * 100 + i;
    CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, hd, hs, 8, 1) == 0);
    int ok = 1;
    for (int i = 0; i < 8; i++) ok &= hd[i] == 100 + i;
    CHECK(ok);
    CHECK(shmem_long_fcollect(SHMEM_TEAM_WORLD, hd, hs, 8) == 0);
    ok = 1;
    for (int p = 0; p < n; p++)
        for (int i = 0; i < 8; i++) ok &= hd[p * 8 + i] == p * 100 + i;
    CHECK(ok);
    /* collect: PE p gives p + 1 elements. */
    CHECK(shmem_long_collect(SHMEM_TEAM_WORLD, hd, hs, (size_t)me + 1) == 0);
    ok = 1;
    for (int p = 0, at = 0; p < n; at += p + 1, p++)
        for (int i = 0; i <= p; i++) ok &= hd[at + i] == p * 100 + i;
    CHECK(ok);
    long *a2a = shmem_malloc((size_t)n * 2 * sizeof(long));
    for (int p = 0; p < n; p++) { a2a[2 * p] = me * 1000 + p; a2a[2 * p + 1] = -me; }
    CHECK(shmem_long_alltoall(SHMEM_TEAM_WORLD, hd, a2a, 2) == 0);
    ok = 1;
    for (int p = 0; p < n; p++) ok &= hd[2 * p] == p * 1000 + me && hd[2 * p + 1] == -p;
    CHECK(ok);
    CHECK(shmem_long_alltoalls(SHMEM_TEAM_WORLD, hd, a2a, 1, 2, 1) == 0);
    ok = 1;
    for (int p = 0; p < n; p++) ok &= hd[p] == p * 1000 + me;
    CHECK(ok);
    CHECK(shmem_broadcastmem(SHMEM_TEAM_WORLD, hd, hs, 3, 0) == 0 && ((char *)hd)[0] == 0);

    /* Reductions: integers, floats, complex, long double; on statics too. */
    int *ri = shmem_malloc(4 * sizeof(int)), *ro = shmem_malloc(4 * sizeof(int));
    for (int i = 0; i < 4; i++) ri[i] = me + i;
    CHECK(shmem_int_sum_reduce(SHMEM_TEAM_WORLD, ro, ri, 4) == 0);
    CHECK(ro[0] == n * (n - 1) / 2 && ro[3] == n * (n - 1) / 2 + 3 * n);
    CHECK(shmem_int_max_reduce(SHMEM_TEAM_WORLD, ro, ri, 4) == 0 && ro[0] == n - 1);
    unsigned *ui = shmem_malloc(sizeof(unsigned)), *uo = shmem_malloc(sizeof(unsigned));
    *ui = 1u << me;
    CHECK(shmem_uint_or_reduce(SHMEM_TEAM_WORLD, uo, ui, 1) == 0 && *uo == (1u << n) - 1);
    dsrc[0] = me + 0.5;
    CHECK(shmem_double_sum_reduce(SHMEM_TEAM_WORLD, ddst, dsrc, 1) == 0);
    CHECK(ddst[0] == n * (n - 1) / 2.0 + 0.5 * n);
    double _Complex *cs = shmem_malloc(sizeof *cs), *cd = shmem_malloc(sizeof *cd);
    *cs = 1.0 + 1.0 * I;
    CHECK(shmem_complexd_prod_reduce(SHMEM_TEAM_WORLD, cd, cs, 1) == 0);
    double _Complex want = 1.0;
    for (int p = 0; p < n; p++) want *= 1.0 + 1.0 * I;
    CHECK(creal(*cd) == creal(want) && cimag(*cd) == cimag(want));
    long double *ls = shmem_malloc(sizeof *ls), *ld = shmem_malloc(sizeof *ld);
    *ls = (long double)me / 3;
    CHECK(shmem_longdouble_max_reduce(SHMEM_TEAM_WORLD, ld, ls, 1) == 0);
    CHECK(*ld == (long double)(n - 1) / 3);
    if (evens != SHMEM_TEAM_INVALID) {
        CHECK(shmem_int_sum_reduce(evens, ro, ri, 1) == 0);
        int w = 0;
        for (int p = 0; p < n; p += 2) w += p;
        CHECK(ro[0] == w);
        shmem_team_destroy(evens);
    } else {
        checks += 2;
    }

    /* ---- Active-set collectives with pSync (on globals) ---- */
    shmem_barrier_all();
    for (int i = 0; i < 8; i++) { src32[i] = me * 10 + i; src64[i] = me * 10L + i; }
    shmem_barrier(0, 0, n, pSync);
    shmem_broadcast64(dst64, src64, 8, 0, 0, 0, n, pSync2);
    if (me != 0) CHECK(dst64[7] == 7); else checks++;
    shmem_barrier_all();
    shmem_fcollect32(dst32, src32, 8, 0, 0, n, pSync);
    ok = 1;
    for (int p = 0; p < n; p++) ok &= dst32[p * 8 + 3] == p * 10 + 3;
    CHECK(ok);
    shmem_collect64(dst64, src64, (size_t)me + 1, 0, 0, n, pSync2);
    ok = 1;
    for (int p = 0, at = 0; p < n; at += p + 1, p++) ok &= dst64[at + p] == p * 10L + p;
    CHECK(ok);
    shmem_barrier_all();
    for (int p = 0; p < n && p < 8; p++) src32[p] = me * 100 + p;
    if (n <= 8) {
        shmem_alltoall32(dst32, src32, 1, 0, 0, n, pSync);
        ok = 1;
        for (int p = 0; p < n; p++) ok &= dst32[p] == p * 100 + me;
        CHECK(ok);
    } else {
        checks++;
    }
    shmem_barrier_all();
    /* to_all on statics and globals, then on the even active set (stride 2^1). */
    src64[0] = me + 1;
    shmem_long_sum_to_all(dst64, src64, 1, 0, 0, n, pWrk, pSync);
    CHECK(dst64[0] == (long)n * (n + 1) / 2);
    shmem_long_prod_to_all(dst64, src64, 1, 0, 0, n, pWrk, pSync2);
    long fact = 1;
    for (int p = 1; p <= n; p++) fact *= p;
    CHECK(dst64[0] == fact);
    /* dest == source is allowed. */
    src64[1] = me;
    shmem_long_max_to_all(&src64[1], &src64[1], 1, 0, 0, n, pWrk, pSync);
    CHECK(src64[1] == n - 1);
    if (me % 2 == 0) {
        int sz = (n + 1) / 2;
        dsrc[1] = me;
        shmem_double_min_to_all(&ddst[1], &dsrc[1], 1, 0, 1, sz, (double *)pWrk, pSync2);
        CHECK(ddst[1] == 0.0);
        static long double lsrc, ldst;
        static long ldsync[SHMEM_REDUCE_SYNC_SIZE];
        lsrc = me;
        shmem_longdouble_sum_to_all(&ldst, &lsrc, 1, 0, 1, sz, NULL, ldsync);
        CHECK(ldst == (long double)(sz * (sz - 1)));
    } else {
        checks += 2;
    }
    shmem_barrier_all();
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) ok &= pSync[i] == SHMEM_SYNC_VALUE;
    CHECK(ok);

    /* ---- Contexts ---- */
    shmem_ctx_t ctx;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0 && ctx != SHMEM_CTX_INVALID);
    shmem_team_t ct;
    CHECK(shmem_ctx_get_team(ctx, &ct) == 0 && ct == SHMEM_TEAM_WORLD);
    shmem_ctx_long_p(ctx, &flags[me], me + 7, right);
    shmem_ctx_long_atomic_add(ctx, &counter, 1, 0);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    CHECK(flags[(me + n - 1) % n] == (me + n - 1) % n + 7);
    CHECK(shmem_ctx_long_g(ctx, &flags[me], right) == me + 7);
    if (me == 0) CHECK(shmem_ctx_long_atomic_fetch(ctx, &counter, 0) == n); else checks++;
    shmem_ctx_destroy(ctx);
    shmem_ctx_t tctx;
    CHECK(shmem_team_create_ctx(xt, 0, &tctx) == 0);
    shmem_ctx_destroy(tctx);
    shmem_barrier_all();

    /* ---- Put with signal ---- */
    long payload[4] = {me, me + 1, me + 2, me + 3};
    shmem_long_put_signal(hd, payload, 4, &sig, 1, SHMEM_SIGNAL_ADD, right);
    uint64_t got = shmem_signal_wait_until(&sig, SHMEM_CMP_GE, 1);
    int from = (me + n - 1) % n;
    CHECK(got == 1 && hd[3] == from + 3);
    CHECK(shmem_signal_fetch(&sig) == 1);
    shmem_barrier_all();

    /* ---- Locks: every PE increments a counter on PE 1 under the lock ---- */
    counter = 0;
    shmem_barrier_all();
    for (int k = 0; k < 5; k++) {
        shmem_set_lock(&lock);
        long v = shmem_long_g(&counter, 1);
        shmem_long_p(&counter, v + 1, 1);
        shmem_clear_lock(&lock);
    }
    shmem_barrier_all();
    if (me == 1) CHECK(counter == 5L * n); else checks++;
    if (me == 0) {
        CHECK(shmem_test_lock(&lock) == 0);
        shmem_clear_lock(&lock);
    } else {
        checks++;
    }
    shmem_barrier_all();

    /* ---- Multi-variable waits and tests ---- */
    for (int p = 0; p < n; p++) flags[p] = 0;
    shmem_barrier_all();
    shmem_long_atomic_set(&flags[me], 1, 0); /* everyone flags itself on PE 0 */
    if (me == 0) {
        shmem_long_wait_until_all(flags, (size_t)n, NULL, SHMEM_CMP_EQ, 1);
        CHECK(shmem_long_test_all(flags, (size_t)n, NULL, SHMEM_CMP_EQ, 1) == 1);
        size_t idx[MAXPE];
        CHECK(shmem_long_test_some(flags, (size_t)n, idx, NULL, SHMEM_CMP_EQ, 1) == (size_t)n);
        int status[MAXPE] = {0};
        status[0] = 1;
        size_t any = shmem_long_wait_until_any(flags, (size_t)n, status, SHMEM_CMP_EQ, 1);
        CHECK(any >= 1 && any < (size_t)n);
        long want_v[MAXPE];
        for (int p = 0; p < n; p++) want_v[p] = 1;
        shmem_long_wait_until_all_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want_v);
        CHECK(shmem_long_test_any(flags, (size_t)n, NULL, SHMEM_CMP_EQ, 2) == SIZE_MAX);
    } else {
        checks += 4;
    }
    shmem_barrier_all();

    printf("PE %d/%d: families ok, %d checks\n", me, n, checks);
    shmem_free(hs);
    shmem_free(hd);
    shmem_finalize();
    return 0;
}
