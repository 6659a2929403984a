/*
 * shmem_bench.c — a small, portable OpenSHMEM micro-benchmark.
 *
 * Builds unchanged with any OpenSHMEM 1.4 library (gda's `gdacc`, Open MPI's `oshcc`, ...):
 * it uses only shmem_init/finalize, my_pe/n_pes, malloc/free, putmem/getmem, long_p/long_g,
 * quiet, barrier_all, long_atomic_add/fetch_add and global_exit.
 *
 *   gdacc -O2 shmem_bench.c -o shmem_bench && gdarun -n 2 ./shmem_bench
 *   oshcc -O2 shmem_bench.c -o shmem_bench && oshrun -n 2 ./shmem_bench
 *
 * PE 0 measures against PE 1 (the other PEs only take part in barriers and checks) and prints
 * one JSON object per line on stdout:
 *
 *   {"metric":"put_lat","bytes":8,"iters":N,"value":0.031,"unit":"us"}
 *
 * Metrics: put_lat (putmem + quiet, us), put_rate (a window of putmem then one quiet, Mmsg/s;
 * the line also carries "gbps", GB/s = 1e9 B/s), get_lat (getmem, us), amo_add_rate
 * (long_atomic_add back to back then quiet, Mops/s), amo_fadd_lat (long_atomic_fetch_add, us),
 * barrier_lat (barrier_all, us, as timed by PE 0). Every measurement is preceded by a warm-up.
 * Without -i, each measurement runs for about -t milliseconds (the warm-up estimates the cost
 * of one operation); with -i N every measurement runs exactly N iterations (N windows for
 * put_rate).
 *
 * PE 0's local buffers (put source, get target) are page-aligned plus -a OFFSET bytes: libc's
 * memcpy/memmove speed on some CPUs depends on the source/destination alignment, so the figures
 * of a library that copies with it can change with -a. The info line gives the offset and the
 * symmetric put target's address modulo 64.
 *
 * Results are checked: after each put loop PE 1 compares what arrived with the pattern sent,
 * each get is compared with the pattern PE 1 wrote, and the atomic counters must hold the
 * expected sums. A mismatch prints an error on stderr and ends the job with status 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <shmem.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ITERS (1L << 24)
#define MIN_ITERS 16L

static long opt_iters = 0;            /* 0: adaptive */
static double opt_target_ms = 100.0;  /* adaptive: time per measurement */
static size_t opt_min = 8, opt_max = 1 << 20;
static long opt_window = 64;
static long opt_offset = 0;          /* local buffers: page-aligned + this many bytes */

static int me, npes;

/* Symmetric control words. */
static long *ctl;    /* [0]: iteration count PE 0 chose, [1]: expected counter value */
static long *cnt;    /* [0]: atomic_add counter, [1]: fetch_add counter */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "Usage: %s [-i ITERS] [-s MIN:MAX] [-w WINDOW] [-t MS] [-a OFFSET] [-h]\n"
            "  OpenSHMEM micro-benchmark, run with 2 (or more) PEs; PE 0 measures against PE 1\n"
            "  and prints one JSON line per result on stdout.\n"
            "  -i ITERS    iterations per measurement (default: adaptive, see -t)\n"
            "  -s MIN:MAX  message sizes in bytes, powers of two (default 8:1048576;\n"
            "              suffixes k/m accepted, e.g. 8:1m; a single value means MIN=MAX)\n"
            "  -w WINDOW   puts per quiet in put_rate and adds per quiet in amo_add_rate\n"
            "              (default 64)\n"
            "  -t MS       adaptive mode: target time per measurement in ms (default 100)\n"
            "  -a OFFSET   PE 0's local put source and get target start OFFSET bytes after a\n"
            "              page boundary (0..4095, default 0); memcpy speed can depend on it\n"
            "  -h          this help\n"
            "Metrics: put_lat put_rate get_lat amo_add_rate amo_fadd_lat barrier_lat.\n"
            "Exit status: 0 on success, 1 if a result failed its check, 2 on bad arguments.\n",
            prog);
}

static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    if (*end == 'k' || *end == 'K') { v <<= 10; end++; }
    else if (*end == 'm' || *end == 'M') { v <<= 20; end++; }
    if (*end != '\0' || v == 0) return -1;
    *out = (size_t)v;
    return 0;
}

static int is_pow2(size_t v) { return v && !(v & (v - 1)); }

static int parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout, argv[0]);
            return 1;
        }
        if (a[0] == '-' && a[1] && strchr("istwa", a[1]) && a[2] == '\0') {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", argv[0], a);
                return -1;
            }
            val = argv[++i];
        } else {
            fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], a);
            return -1;
        }
        char *end;
        switch (a[1]) {
        case 'i':
            opt_iters = strtol(val, &end, 10);
            if (*end || opt_iters < 1 || opt_iters > MAX_ITERS) {
                fprintf(stderr, "%s: -i wants 1..%ld\n", argv[0], MAX_ITERS);
                return -1;
            }
            break;
        case 'w':
            opt_window = strtol(val, &end, 10);
            if (*end || opt_window < 1 || opt_window > 65536) {
                fprintf(stderr, "%s: -w wants 1..65536\n", argv[0]);
                return -1;
            }
            break;
        case 'a':
            opt_offset = strtol(val, &end, 10);
            if (*end || opt_offset < 0 || opt_offset > 4095) {
                fprintf(stderr, "%s: -a wants 0..4095\n", argv[0]);
                return -1;
            }
            break;
        case 't':
            opt_target_ms = strtod(val, &end);
            if (*end || !(opt_target_ms > 0.0) || opt_target_ms > 60000.0) {
                fprintf(stderr, "%s: -t wants a positive number of ms (at most 60000)\n",
                        argv[0]);
                return -1;
            }
            break;
        case 's': {
            char buf[64];
            if (strlen(val) >= sizeof buf) {
                fprintf(stderr, "%s: bad -s '%s'\n", argv[0], val);
                return -1;
            }
            strcpy(buf, val);
            char *colon = strchr(buf, ':');
            if (colon) *colon = '\0';
            if (parse_size(buf, &opt_min) || parse_size(colon ? colon + 1 : buf, &opt_max) ||
                !is_pow2(opt_min) || !is_pow2(opt_max) || opt_min > opt_max ||
                opt_max > ((size_t)1 << 30)) {
                fprintf(stderr, "%s: -s wants MIN:MAX, powers of two, 1 <= MIN <= MAX <= 1g\n",
                        argv[0]);
                return -1;
            }
            break;
        }
        }
    }
    return 0;
}

static void fail(const char *what, size_t bytes, const char *detail) {
    fprintf(stderr, "shmem_bench: PE %d: CHECK FAILED: %s (bytes=%zu): %s\n", me, what, bytes,
            detail);
    fflush(stderr);
    fflush(stdout);
    shmem_global_exit(1);
    exit(1); /* not reached */
}

static void *sym_alloc(size_t n, const char *what) {
    void *p = shmem_malloc(n);
    if (p == NULL) {
        fprintf(stderr, "shmem_bench: PE %d: shmem_malloc(%zu) for %s returned NULL\n", me, n,
                what);
        fflush(stderr);
        shmem_global_exit(1);
        exit(1);
    }
    return p;
}

static unsigned char pattern(size_t i, size_t bytes, unsigned tag) {
    return (unsigned char)((i * 131u + bytes * 7u + tag * 29u + 1u) & 0xffu);
}

static void fill(unsigned char *buf, size_t bytes, unsigned tag) {
    for (size_t i = 0; i < bytes; i++) buf[i] = pattern(i, bytes, tag);
}

/* Index of the first byte that differs from the pattern, or -1. */
static long verify(const unsigned char *buf, size_t bytes, unsigned tag) {
    for (size_t i = 0; i < bytes; i++)
        if (buf[i] != pattern(i, bytes, tag)) return (long)i;
    return -1;
}

static void check_pattern(const unsigned char *buf, size_t bytes, unsigned tag,
                          const char *what) {
    long bad = verify(buf, bytes, tag);
    if (bad >= 0) {
        char d[128];
        snprintf(d, sizeof d, "byte %ld is %u, expected %u", bad, buf[bad],
                 pattern((size_t)bad, bytes, tag));
        fail(what, bytes, d);
    }
}

/* Number of iterations to time, given the measured cost of `warm` iterations. */
static long choose_iters(double warm_us, long warm) {
    if (opt_iters) return opt_iters;
    double per = warm_us / (double)warm;
    if (per < 1e-3) per = 1e-3;
    double n = opt_target_ms * 1e3 / per;
    if (n < (double)MIN_ITERS) return MIN_ITERS;
    if (n > (double)MAX_ITERS) return MAX_ITERS;
    return (long)n;
}

/* Warm-up: a tenth of -i, or (adaptive) doubling runs until one lasts a tenth of the target
 * time, whose cost per iteration sets the count. `op` runs `n` iterations. */
typedef void (*loop_fn)(long n, size_t bytes);

static long warm_and_choose(loop_fn op, size_t bytes) {
    if (opt_iters) {
        long w = opt_iters / 10;
        if (w < 4) w = 4;
        op(w, bytes);
        return opt_iters;
    }
    long n = 4;
    double t;
    for (;;) {
        double t0 = now_us();
        op(n, bytes);
        t = now_us() - t0;
        if (t >= opt_target_ms * 100.0 /* a tenth, in us */ || n >= MAX_ITERS / 8) break;
        n *= 2;
    }
    return choose_iters(t, n);
}

/* ---- The timed loops (PE 0 only) ---------------------------------------------------------- */

static unsigned char *sym_dst; /* put target on PE 1 */
static unsigned char *sym_src; /* get source on PE 1 */
static unsigned char *loc_src; /* local put source */
static unsigned char *loc_dst; /* local get target */

static void loop_put_lat(long n, size_t bytes) {
    for (long i = 0; i < n; i++) {
        shmem_putmem(sym_dst, loc_src, bytes, 1);
        shmem_quiet();
    }
}

static void loop_put_rate(long n, size_t bytes) {
    for (long i = 0; i < n; i++) {
        for (long w = 0; w < opt_window; w++) shmem_putmem(sym_dst, loc_src, bytes, 1);
        shmem_quiet();
    }
}

static void loop_get_lat(long n, size_t bytes) {
    for (long i = 0; i < n; i++) shmem_getmem(loc_dst, sym_src, bytes, 1);
}

static long amo_adds; /* adds issued to cnt[0] on PE 1 */
static void loop_amo_add(long n, size_t bytes) {
    (void)bytes;
    for (long i = 0; i < n; i++) {
        for (long w = 0; w < opt_window; w++) shmem_long_atomic_add(&cnt[0], 1, 1);
        shmem_quiet();
    }
    amo_adds += n * opt_window;
}

static long fadd_done; /* fetch-adds issued to cnt[1] on PE 1 */
static long fadd_bad;  /* returned values that were not the previous count */
static void loop_amo_fadd(long n, size_t bytes) {
    (void)bytes;
    for (long i = 0; i < n; i++) {
        long old = shmem_long_atomic_fetch_add(&cnt[1], 1, 1);
        if (old != fadd_done + i) fadd_bad++;
    }
    fadd_done += n;
}

static void emit(const char *metric, size_t bytes, long iters, double value, const char *unit,
                 double gbps) {
    if (gbps >= 0.0)
        printf("{\"metric\":\"%s\",\"bytes\":%zu,\"iters\":%ld,\"value\":%.6g,\"unit\":\"%s\","
               "\"gbps\":%.6g}\n",
               metric, bytes, iters, value, unit, gbps);
    else
        printf("{\"metric\":\"%s\",\"bytes\":%zu,\"iters\":%ld,\"value\":%.6g,\"unit\":\"%s\"}\n",
               metric, bytes, iters, value, unit);
    fflush(stdout);
}

/* PE 0 runs one timed put benchmark at `bytes`; all PEs call it. PE 1 clears the target before
 * and checks the pattern after. */
static void bench_put(size_t bytes, int rate, unsigned tag) {
    if (me == 1) memset(sym_dst, 0, bytes);
    if (me == 0) fill(loc_src, bytes, tag);
    shmem_barrier_all();
    if (me == 0) {
        loop_fn op = rate ? loop_put_rate : loop_put_lat;
        long iters = warm_and_choose(op, bytes);
        double t0 = now_us();
        op(iters, bytes);
        double us = now_us() - t0;
        if (rate) {
            double msgs = (double)iters * (double)opt_window;
            emit("put_rate", bytes, iters * opt_window, msgs / us, "Mmsg/s",
                 msgs * (double)bytes / us * 1e-3);
        } else {
            emit("put_lat", bytes, iters, us / (double)iters, "us", -1.0);
        }
    }
    shmem_barrier_all();
    if (me == 1) check_pattern(sym_dst, bytes, tag, rate ? "put_rate data" : "put_lat data");
}

static void bench_get(size_t bytes, unsigned tag) {
    if (me == 1) fill(sym_src, bytes, tag);
    if (me == 0) memset(loc_dst, 0, bytes);
    shmem_barrier_all();
    if (me == 0) {
        long iters = warm_and_choose(loop_get_lat, bytes);
        double t0 = now_us();
        loop_get_lat(iters, bytes);
        double us = now_us() - t0;
        check_pattern(loc_dst, bytes, tag, "get_lat data");
        emit("get_lat", bytes, iters, us / (double)iters, "us", -1.0);
    }
    shmem_barrier_all();
}

static void bench_atomics(void) {
    if (me == 1) cnt[0] = cnt[1] = 0;
    shmem_barrier_all();

    /* Non-fetching add rate. */
    if (me == 0) {
        long iters = warm_and_choose(loop_amo_add, 0);
        long before = amo_adds;
        double t0 = now_us();
        loop_amo_add(iters, 0);
        double us = now_us() - t0;
        long ops = amo_adds - before;
        long seen = shmem_long_g(&cnt[0], 1);
        if (seen != amo_adds) {
            char d[128];
            snprintf(d, sizeof d, "counter on PE 1 reads %ld, expected %ld", seen, amo_adds);
            fail("amo_add_rate sum", 8, d);
        }
        emit("amo_add_rate", 8, ops, (double)ops / us, "Mops/s", -1.0);
        shmem_long_p(&ctl[1], amo_adds, 1);
        shmem_quiet();
    }
    shmem_barrier_all();
    if (me == 1 && cnt[0] != ctl[1]) {
        char d[128];
        snprintf(d, sizeof d, "counter holds %ld, expected %ld", cnt[0], ctl[1]);
        fail("amo_add_rate sum", 8, d);
    }

    /* Fetch-add latency. */
    if (me == 0) {
        long iters = warm_and_choose(loop_amo_fadd, 0);
        double t0 = now_us();
        loop_amo_fadd(iters, 0);
        double us = now_us() - t0;
        if (fadd_bad) {
            char d[128];
            snprintf(d, sizeof d, "%ld fetched values were not the running count", fadd_bad);
            fail("amo_fadd_lat values", 8, d);
        }
        emit("amo_fadd_lat", 8, iters, us / (double)iters, "us", -1.0);
        shmem_long_p(&ctl[1], fadd_done, 1);
        shmem_quiet();
    }
    shmem_barrier_all();
    if (me == 1 && cnt[1] != ctl[1]) {
        char d[128];
        snprintf(d, sizeof d, "counter holds %ld, expected %ld", cnt[1], ctl[1]);
        fail("amo_fadd_lat sum", 8, d);
    }
    shmem_barrier_all();
}

static void bench_barrier(void) {
    /* Warm-up (all PEs), then PE 0 picks the count and tells the others. */
    long warm = opt_iters ? (opt_iters / 10 < 4 ? 4 : opt_iters / 10) : 256;
    shmem_barrier_all();
    double t0 = now_us();
    for (long i = 0; i < warm; i++) shmem_barrier_all();
    double t = now_us() - t0;
    if (me == 0) {
        long iters = choose_iters(t, warm);
        for (int pe = 1; pe < npes; pe++) shmem_long_p(&ctl[0], iters, pe);
        shmem_quiet();
        ctl[0] = iters;
    }
    shmem_barrier_all();
    long iters = ctl[0];
    if (iters < 1 || iters > MAX_ITERS) fail("barrier count", 0, "bad iteration count received");
    t0 = now_us();
    for (long i = 0; i < iters; i++) shmem_barrier_all();
    t = now_us() - t0;
    if (me == 0) emit("barrier_lat", 0, iters, t / (double)iters, "us", -1.0);
    shmem_barrier_all();
}

int main(int argc, char **argv) {
    int r = parse_args(argc, argv);
    if (r > 0) return 0;
    if (r < 0) {
        usage(stderr, argv[0]);
        return 2;
    }

    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    if (npes < 2) {
        if (me == 0) fprintf(stderr, "shmem_bench: needs at least 2 PEs (got %d)\n", npes);
        shmem_finalize();
        return 2;
    }

    ctl = sym_alloc(2 * sizeof(long), "control words");
    cnt = sym_alloc(2 * sizeof(long), "atomic counters");
    sym_dst = sym_alloc(opt_max, "put target");
    sym_src = sym_alloc(opt_max, "get source");
    ctl[0] = ctl[1] = 0;
    cnt[0] = cnt[1] = 0;
    void *loc_src_mem = NULL, *loc_dst_mem = NULL;
    if (me == 0) {
        if (posix_memalign(&loc_src_mem, 4096, opt_max + 4096) ||
            posix_memalign(&loc_dst_mem, 4096, opt_max + 4096)) {
            fprintf(stderr, "shmem_bench: posix_memalign(%zu) failed\n", opt_max + 4096);
            shmem_global_exit(1);
        }
        loc_src = (unsigned char *)loc_src_mem + opt_offset;
        loc_dst = (unsigned char *)loc_dst_mem + opt_offset;
        printf("{\"metric\":\"info\",\"vendor\":\"%s\",\"spec\":\"%d.%d\",\"npes\":%d,"
               "\"window\":%ld,\"iters\":%ld,\"target_ms\":%g,\"offset\":%ld,"
               "\"dst_mod64\":%lu}\n",
               SHMEM_VENDOR_STRING, SHMEM_MAJOR_VERSION, SHMEM_MINOR_VERSION, npes, opt_window,
               opt_iters, opt_target_ms, opt_offset, (unsigned long)((uintptr_t)sym_dst % 64));
        fflush(stdout);
    }
    shmem_barrier_all();

    unsigned tag = 1;
    for (size_t b = opt_min; b <= opt_max; b <<= 1) bench_put(b, 0, tag++);
    for (size_t b = opt_min; b <= opt_max; b <<= 1) bench_put(b, 1, tag++);
    for (size_t b = opt_min; b <= opt_max; b <<= 1) bench_get(b, tag++);
    bench_atomics();
    bench_barrier();

    shmem_barrier_all();
    if (me == 0) {
        free(loc_src_mem);
        free(loc_dst_mem);
    }
    shmem_free(sym_src);
    shmem_free(sym_dst);
    shmem_free(cnt);
    shmem_free(ctl);
    shmem_finalize();
    return 0;
}
