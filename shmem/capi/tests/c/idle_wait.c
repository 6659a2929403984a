/* A PE that waits long in a barrier (its peer sleeps 1 s first) must not burn a core doing
 * so, on every software-NIC engine: PE 1 prints the CPU time its process used during the
 * wait, in milliseconds. */
#include <shmem.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static long cpu_ms(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000L +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000L;
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe();
    if (me == 0)
        sleep(1);
    long before = cpu_ms();
    shmem_barrier_all();
    long used = cpu_ms() - before;
    if (me == 1)
        printf("PE 1 used %ld ms of CPU in a 1 s barrier wait\n", used);
    shmem_finalize();
    return 0;
}
