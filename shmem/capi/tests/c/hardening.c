/* Hardening cases of the C ABI (issue 25), one per argument; run with
 * `gdarun -n 2 ./hardening <case>`. Each prints "<case> ok" on every PE when it holds.
 *   fork   a child forked after shmem_init has private copies of the globals and the heap,
 *          its exit does not finalize the parent's PE, and a SHMEM call in it is a named
 *          fatal error (exit status 1) that leaves the job running
 *   align  shmem_align returns addresses aligned as asked (64 KiB, 1 MiB, 2 MiB) and NULL for
 *          an alignment no heap can give
 *   bss    a 256 MiB .bss is symmetric without being copied (resident memory stays small) */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long counter = 1;
static char big[256 << 20];

static int fail(const char *what) {
    fprintf(stderr, "PE %d: FAILED: %s\n", shmem_my_pe(), what);
    shmem_global_exit(3);
    return 3;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    if (strcmp(c, "fork") == 0) {
        long *h = shmem_malloc(sizeof(long));
        *h = 1;
        shmem_barrier_all();
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            counter = 2;
            *h = 2;
            exit(0); /* atexit: no collective finalize of the parent's PE */
        }
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return fail("the first child did not exit 0");
        if (counter != 1 || *h != 1) return fail("the child's writes reached the parent");
        p = fork();
        if (p == 0) {
            shmem_barrier_all(); /* fatal in a child: exits 1 */
            _exit(9);
        }
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 1)
            return fail("a SHMEM call in the child was not a fatal error");
        /* The parent's PE works on (once every PE has checked its own copy). */
        shmem_barrier_all();
        shmem_long_p(h, me + 10, (me + 1) % n);
        shmem_barrier_all();
        if (*h != (me + n - 1) % n + 10) return fail("put after fork");
        shmem_free(h);
    } else if (strcmp(c, "align") == 0) {
        size_t aligns[] = {64 << 10, 1 << 20, 2 << 20};
        for (int i = 0; i < 3; i++) {
            char *p = shmem_align(aligns[i], 100);
            if (!p || (uintptr_t)p % aligns[i] != 0) return fail("misaligned shmem_align");
            p[99] = 1;
            shmem_free(p);
        }
        if (shmem_align((size_t)1 << 62, 8) != NULL) return fail("shmem_align(1<<62) not NULL");
    } else if (strcmp(c, "bss") == 0) {
        long kb = rss_kb();
        size_t off = (size_t)200 << 20;
        big[off] = (char)me;
        shmem_barrier_all();
        char v = 0;
        shmem_getmem(&v, &big[off], 1, (me + 1) % n);
        if (v != (char)((me + 1) % n)) return fail("get from the peer's .bss");
        printf("PE %d: rss_kb=%ld\n", me, kb);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    shmem_barrier_all();
    printf("PE %d: %s ok\n", me, c);
    shmem_finalize();
    return 0;
}
