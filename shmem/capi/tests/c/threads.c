/* SHMEM_THREAD_MULTIPLE: every PE runs 4 threads that put, add atomically and wait at the
 * same time (one of them waits on a flag another thread of the same PE sets). Written for
 * gda's tests. Prints one "threads ok" line per PE. */
#include <pthread.h>
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define T 4
#define K 200
long slots[T * K];
long hits;
int flag;

static int me, n;

static void *waits_forever(void *arg) {
    (void)arg;
    shmem_int_wait_until(&flag, SHMEM_CMP_EQ, 1);
    return NULL;
}

static void *work(void *arg) {
    long t = (long)arg;
    int right = (me + 1) % n;
    shmem_ctx_t ctx;
    if (shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) != 0) abort();
    for (int k = 0; k < K; k++) {
        long v = me * 100000L + t * 1000 + k;
        shmem_ctx_long_p(ctx, &slots[t * K + k], v, right);
        shmem_ctx_long_atomic_add(ctx, &hits, 1, 0);
    }
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
    if (t == 0) shmem_int_wait_until(&flag, SHMEM_CMP_EQ, 1); /* set by thread 1 */
    if (t == 1) shmem_int_atomic_set(&flag, 1, me);
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
    if (provided != SHMEM_THREAD_MULTIPLE) {
        fprintf(stderr, "provided %d\n", provided);
        return 3;
    }
    if (argc > 1 && argv[1][0] == 'd') {
        /* "dead": PE 1 dies without finalizing; PE 0 waits (from a second thread, so the
         * library's own polling loop runs) on a flag nobody sets, and must fail naming PE 1
         * long before its timeout. */
        shmem_barrier_all();
        if (shmem_my_pe() == 1) _exit(9);
        pthread_t waiter;
        pthread_create(&waiter, NULL, waits_forever, NULL);
        pthread_join(waiter, NULL);
        return 4; /* not reached: the wait fails */
    }
    me = shmem_my_pe();
    n = shmem_n_pes();
    pthread_t th[T];
    for (long t = 0; t < T; t++) pthread_create(&th[t], NULL, work, (void *)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
    shmem_barrier_all();
    int left = (me + n - 1) % n;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
            if (slots[t * K + k] != left * 100000L + t * 1000 + k) {
                fprintf(stderr, "PE %d: slot %d/%d wrong\n", me, t, k);
                return 3;
            }
    if (me == 0 && hits != (long)n * T * K) {
        fprintf(stderr, "hits %ld\n", hits);
        return 3;
    }
    printf("PE %d: threads ok\n", me);
    shmem_finalize();
    return 0;
}
