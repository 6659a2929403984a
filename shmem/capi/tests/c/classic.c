/* A program of the usual 1.x kind: <mpp/shmem.h>, start_pes, global and static symmetric
 * variables, shmalloc, the 1.3 atomic names, pSync active-set collectives, a lock, and
 * shmem_barrier_all; it never calls shmem_finalize. Written for gda's tests. Exit status 0 and
 * one "classic ok" line per PE when every result is right. */
#include <mpp/shmem.h>
#include <stdio.h>
#include <stdlib.h>

#define N 16
long pSync[_SHMEM_BCAST_SYNC_SIZE];
long pWrk[_SHMEM_REDUCE_MIN_WRKDATA_SIZE + N];
int ring[N];
static long total;
static long lk;
static int ticket;
static int go;

static void fail(const char *what) {
    fprintf(stderr, "PE %d: %s\n", _my_pe(), what);
    exit(3);
}

int main(void) {
    int i;
    for (i = 0; i < _SHMEM_BCAST_SYNC_SIZE; i++) pSync[i] = _SHMEM_SYNC_VALUE;
    start_pes(0);
    int me = _my_pe(), n = _num_pes();
    int *buf = (int *)shmalloc(N * sizeof(int));
    if (!buf) fail("shmalloc");

    /* Ring shift of a global array. */
    int mine[N];
    for (i = 0; i < N; i++) mine[i] = me * N + i;
    shmem_int_put(ring, mine, N, (me + 1) % n);
    shmem_barrier_all();
    for (i = 0; i < N; i++)
        if (ring[i] != ((me + n - 1) % n) * N + i) fail("ring");

    /* 1.3 atomics on statics: tickets from PE 0. */
    int t = shmem_int_fadd(&ticket, 1, 0);
    if (t < 0 || t >= n) fail("fadd");
    shmem_long_finc(&total, 0);
    shmem_barrier_all();
    if (me == 0 && (ticket != n || total != n)) fail("fadd/finc totals");
    if (shmem_int_cswap(&ticket, n, n, 0) != n) fail("cswap");

    /* Active-set reduction and broadcast with pSync. */
    long v = me + 1, sum = 0;
    static long vs, sums;
    vs = v;
    shmem_barrier_all();
    shmem_long_sum_to_all(&sums, &vs, 1, 0, 0, n, pWrk, pSync);
    sum = sums;
    if (sum != (long)n * (n + 1) / 2) fail("sum_to_all");
    shmem_barrier_all();
    for (i = 0; i < N; i++) buf[i] = me == 0 ? 42 + i : -1;
    shmem_barrier_all();
    shmem_broadcast32(buf, buf, N, 0, 0, 0, n, pSync);
    if (me != 0 && buf[N - 1] != 42 + N - 1) fail("broadcast32");

    /* A lock around a read-modify-write on PE 0. */
    shmem_barrier_all();
    total = 0;
    shmem_barrier_all();
    shmem_set_lock(&lk);
    long cur;
    shmem_long_get(&cur, &total, 1, 0);
    cur += me + 1;
    shmem_long_put(&total, &cur, 1, 0);
    shmem_clear_lock(&lk);
    shmem_barrier_all();
    if (me == 0 && total != (long)n * (n + 1) / 2) fail("lock");

    /* Point-to-point: PE 0 releases everyone with a flag, the 1.3 wait. */
    if (me == 0)
        for (i = 1; i < n; i++) shmem_int_p(&go, 1, i);
    else
        shmem_int_wait(&go, 0);
    shmem_barrier_all();
    shfree(buf);
    printf("PE %d: classic ok\n", me);
    return 0; /* no shmem_finalize: the library finalizes at exit */
}
