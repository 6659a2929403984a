/* The smallest OpenSHMEM program: every PE puts its number into its right neighbour's
 * symmetric variable and prints what it got. Build and run (docs/shmem.md):
 *   target/release/gdacc examples/shmem_hello.c -o hello && target/release/gdarun -n 4 ./hello */
#include <shmem.h>
#include <stdio.h>

int main(void) {
    static long got = -1;
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    shmem_long_p(&got, me, (me + 1) % n);
    shmem_barrier_all();
    printf("PE %d of %d: got %ld from PE %d\n", me, n, got, (me + n - 1) % n);
    int ok = got == (me + n - 1) % n;
    shmem_finalize();
    return ok ? 0 : 1;
}
