/* Misuse of the C ABI, one kind per argument: each must end the job with a message naming the
 * routine and the problem, and a non-zero status (never a hang, never silent corruption).
 * Written for gda; run with `gdarun -n 2 ./misuse <case>`. */
#define _GNU_SOURCE
#include <shmem.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The symmetric words a strided case must leave untouched, reported at exit (a fatal error
 * exits through exit(), so this runs after the routine refused). */
static long *watched;
static void report(void) {
    if (watched)
        printf("target %s\n", watched[0] == 0 && watched[1] == 0 ? "untouched" : "touched");
    fflush(stdout);
}

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
    long *sym = shmem_malloc(4 * sizeof(long));
    memset(sym, 0, 4 * sizeof(long));
    shmem_barrier_all();
    long page = sysconf(_SC_PAGESIZE);
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
    } else if (strcmp(c, "iput-past-the-heap") == 0) {
        /* Elements 8 MiB apart: the later ones fall past the heap; the first must not move. */
        long src[16] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
        watched = sym;
        atexit(report);
        shmem_long_iput(sym, src, (ptrdiff_t)1 << 20, 1, 16, me);
    } else if (strcmp(c, "iput-past-the-local-array") == 0) {
        /* The source's last two elements lie on a page that cannot be read. */
        char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mprotect(p + page, page, PROT_NONE);
        long *src = (long *)(p + page) - 2;
        src[0] = src[1] = 7;
        watched = sym;
        atexit(report);
        shmem_long_iput(sym, src, 1, 1, 4, me);
    } else if (strcmp(c, "iget-into-read-only") == 0) {
        long *dst = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        shmem_long_iget(dst, sym, 1, 1, 2, me);
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
