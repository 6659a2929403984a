// The most two copies across cores can move on this machine: what bounds a 64-KiB RDMA WRITE
// or READ stream between two processes on the software NIC, whose requester copies each
// message into a shared-memory ring and whose responder copies it out on another CPU
// (scripts/cross-core-copy.sh builds and runs this; docs/verbs.md explains what the figures
// mean for ib_write_bw and ib_read_bw).
//
// A producer thread on CPU 0 copies a 64-KiB source into the next slot of a 4 MiB ring (the
// size of the software NIC's rings) and publishes it; a consumer thread on CPU 1 copies each
// published slot into a 64-KiB destination and frees it. Nothing else runs: no parsing, no
// completions, no wake-ups, so no program built this way can do better here. For comparison,
// memcpy of the same 64 KiB on one CPU (what scripts/perftest-sim.sh's memcpy line measures),
// and the one-copy alternative between processes: process_vm_readv(2) of 64 KiB from a child
// process (the kernel copies, pinning the pages each time). Prints the median and best of 7
// runs of 2 GiB each (the last of 256 MiB), in GB/s. Needs 2 CPUs.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MSG = 64 << 10, SLOTS = (4 << 20) / MSG, RUNS = 7 };
static const long MESSAGES = (2l << 30) / MSG;

static char *ring, *src, *dst;
// Producer and consumer positions, each on a cache line of its own.
static _Alignas(64) _Atomic long head;
static _Alignas(64) _Atomic long tail;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void* consumer(void* arg) {
    (void)arg;
    pin(1);
    for (long i = 0; i < MESSAGES; i++) {
        while (atomic_load_explicit(&head, memory_order_acquire) <= i) {
        }
        memcpy(dst, ring + (i % SLOTS) * MSG, MSG);
        atomic_store_explicit(&tail, i + 1, memory_order_release);
    }
    return NULL;
}

static double pipeline(void) {
    atomic_store(&head, 0);
    atomic_store(&tail, 0);
    pthread_t t;
    pthread_create(&t, NULL, consumer, NULL);
    double t0 = now_s();
    for (long i = 0; i < MESSAGES; i++) {
        while (i - atomic_load_explicit(&tail, memory_order_acquire) >= SLOTS) {
        }
        memcpy(ring + (i % SLOTS) * MSG, src, MSG);
        atomic_store_explicit(&head, i + 1, memory_order_release);
    }
    pthread_join(t, NULL);
    return (double)MESSAGES * MSG / (now_s() - t0) / 1e9;
}

static double one_cpu(void) {
    double t0 = now_s();
    for (long i = 0; i < MESSAGES; i++) {
        memcpy(dst, src, MSG);
        // The copy is not dead code.
        __asm__ volatile("" : : "r"(dst) : "memory");
    }
    return (double)MESSAGES * MSG / (now_s() - t0) / 1e9;
}

// 64 KiB from `src` in process `pid` (a fork of this one, so at the same address) into `dst`,
// over and over; 0 when the kernel refuses (no ptrace rights over the child).
static double one_copy(pid_t pid) {
    long n = MESSAGES / 8;
    struct iovec local = {dst, MSG}, remote = {src, MSG};
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != MSG) {
            return 0;
        }
    }
    return (double)n * MSG / (now_s() - t0) / 1e9;
}

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(void) {
    ring = aligned_alloc(4096, (size_t)SLOTS * MSG);
    src = aligned_alloc(4096, MSG);
    dst = aligned_alloc(4096, MSG);
    if (!ring || !src || !dst) {
        perror("aligned_alloc");
        return 1;
    }
    memset(ring, 0, (size_t)SLOTS * MSG);
    memset(src, 1, MSG);
    memset(dst, 2, MSG);
    pin(0);
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    double pipe[RUNS], copy[RUNS], cma[RUNS];
    for (int r = 0; r < RUNS; r++) {
        pipe[r] = pipeline();
        copy[r] = one_cpu();
        cma[r] = child > 0 ? one_copy(child) : 0;
    }
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    qsort(pipe, RUNS, sizeof pipe[0], by_value);
    qsort(copy, RUNS, sizeof copy[0], by_value);
    qsort(cma, RUNS, sizeof cma[0], by_value);
    printf("two copies across CPUs (64 KiB through a 4 MiB ring): median %.1f GB/s, best %.1f\n",
           pipe[RUNS / 2], pipe[RUNS - 1]);
    printf("memcpy of 64 KiB on one CPU:                           median %.1f GB/s, best %.1f\n",
           copy[RUNS / 2], copy[RUNS - 1]);
    printf("one copy between processes (process_vm_readv):        median %.1f GB/s, best %.1f\n",
           cma[RUNS / 2], cma[RUNS - 1]);
    return 0;
}
