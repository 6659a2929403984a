/* Misuse of the C ABI, one kind per argument: each must end the job with a message naming the
 * routine and the problem, and a non-zero status (never a hang, never silent corruption).
 * Written for gda; run with `gdarun -n 2 ./misuse <case>`. */
#include <shmem.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    if (strcmp(c, "before-init") == 0) {
        printf("%d\n", shmem_my_pe());
        return 0;
    }
    shmem_init();
    if (strcmp(c, "init-after-finalize") == 0) {
        shmem_finalize();
        shmem_init();
        return 0;
    }
    int me = shmem_my_pe(), n = shmem_n_pes();
    long local = 5;
    long *sym = shmem_malloc(sizeof(long));
    if (strcmp(c, "not-symmetric") == 0) {
        long v = 1;
        shmem_long_put(&local, &v, 1, (me + 1) % n); /* a stack address */
    } else if (strcmp(c, "bad-pe") == 0) {
        shmem_long_p(sym, 1, n);
    } else if (strcmp(c, "bad-cmp") == 0) {
        shmem_long_wait_until(sym, 42, 0);
    } else if (strcmp(c, "past-the-heap") == 0) {
        shmem_long_put(sym + (1L << 40), &local, 1, 0);
    } else if (strcmp(c, "huge-stride") == 0) {
        long two[2] = {1, 2};
        shmem_long_iput(sym, two, (ptrdiff_t)1 << 62, 1, 2, 0);
    } else if (strcmp(c, "null-source") == 0) {
        shmem_long_put(sym, NULL, 4, (me + 1) % n);
    } else if (strcmp(c, "null-destination") == 0) {
        shmem_getmem(NULL, sym, 8, (me + 1) % n);
    } else if (strcmp(c, "malloc-mismatch") == 0) {
        void *p = shmem_malloc(me == 0 ? 64 : 128);
        printf("%p\n", p); /* not reached */
    } else if (strcmp(c, "global-exit-0") == 0) {
        if (me == 1) shmem_global_exit(0);
        sleep(60); /* gdarun ends PE 0 at once; were it left running, the job's status is 5 */
        return 5;
    } else if (strcmp(c, "global-exit") == 0) {
        if (me == 1) shmem_global_exit(7);
        shmem_barrier_all(); /* PE 0 waits here until gdarun ends it */
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    shmem_finalize();
    return 0;
}
