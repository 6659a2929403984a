// How long this machine takes to run a thread that sleeps in poll(2) on a pipe after another
// thread writes to the pipe: the cost the software NIC pays whenever a request must wake the
// responder's engine thread (scripts/wake-latency.sh builds and runs this; docs/verbs.md
// explains what the figures mean for ib_write_lat).
//
// For each case: the waker runs on CPU 0 and spins until the sleeper has recorded its wake-up
// time; the sleeper is pinned to CPU 0 (the waker's), to CPU 1, or left free; 0, 1 or 2 other
// threads spin (one per CPU), as perftest's programs do. Prints the median and 90th percentile
// over 2,000 wake-ups. Needs 2 CPUs.
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { ROUNDS = 2000 };

static int fds[2];
static _Atomic unsigned long woke;
static _Atomic int stop;
static int sleeper_cpu;

static unsigned long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long)t.tv_sec * 1000000000ul + (unsigned long)t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void* sleeper(void* arg) {
    (void)arg;
    if (sleeper_cpu >= 0) pin(sleeper_cpu);
    while (!atomic_load(&stop)) {
        struct pollfd p = {fds[0], POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            char b[64];
            if (read(fds[0], b, sizeof b) > 0) atomic_store(&woke, now_ns());
        }
    }
    return NULL;
}

static void* spinner(void* arg) {
    pin((int)(long)arg);
    while (!atomic_load(&stop)) __asm__ volatile("" ::: "memory");
    return NULL;
}

static int cmp(const void* a, const void* b) {
    unsigned long x = *(const unsigned long*)a, y = *(const unsigned long*)b;
    return x < y ? -1 : x > y;
}

static void run(int where, int spinners) {
    static unsigned long lat[ROUNDS];
    pthread_t s, sp[2];
    sleeper_cpu = where;
    atomic_store(&stop, 0);
    pthread_create(&s, NULL, sleeper, NULL);
    for (int i = 0; i < spinners; ++i) pthread_create(&sp[i], NULL, spinner, (void*)(long)i);
    pin(0);
    usleep(20000);
    for (int i = 0; i < ROUNDS; ++i) {
        atomic_store(&woke, 0);
        unsigned long t0 = now_ns();
        if (write(fds[1], "x", 1) != 1) exit(1);
        while (!atomic_load(&woke) && now_ns() - t0 < 50000000ul) {}
        unsigned long w = atomic_load(&woke);
        lat[i] = w ? w - t0 : 50000000ul;
        usleep(100);
    }
    atomic_store(&stop, 1);
    pthread_join(s, NULL);
    for (int i = 0; i < spinners; ++i) pthread_join(sp[i], NULL);
    qsort(lat, ROUNDS, sizeof lat[0], cmp);
    const char* w = where == 0 ? "the waker's CPU" : where == 1 ? "the other CPU  " : "any CPU        ";
    printf("sleeper on %s, %d spinning threads: p50 %6.1f us  p90 %6.1f us\n", w, spinners,
           lat[ROUNDS / 2] / 1e3, lat[ROUNDS * 9 / 10] / 1e3);
}

int main(void) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "wake-latency: needs 2 CPUs\n");
        return 2;
    }
    if (pipe(fds) != 0) return 1;
    for (int spinners = 0; spinners <= 2; spinners += 2) {
        run(0, spinners);
        run(1, spinners);
        run(-1, spinners);
    }
    return 0;
}
