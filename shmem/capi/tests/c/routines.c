/* The C ABI's routine families, checked with data on every PE: setup and query, memory, RMA
 * (typed, sized, strided, non-blocking, single-element), atomics (standard, bitwise, the 1.3
 * names), point-to-point synchronisation, ordering, barriers, shmem_ptr, and the C11
 * type-generic forms. Written for gda; run with `gdarun -n N ./routines`. Prints one line per
 * PE with its count of checks; any failed check exits with status 3 and says which. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(void) {
    int provided = -1;
    shmem_init_thread(SHMEM_THREAD_FUNNELED, &provided);
    CHECK(provided == SHMEM_THREAD_FUNNELED);
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;
    CHECK(n >= 2 && me == _my_pe() && n == _num_pes());
    int major = 0, minor = 0;
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_version(&major, &minor);
    shmem_info_get_name(name);
    CHECK(major == SHMEM_MAJOR_VERSION && minor == SHMEM_MINOR_VERSION);
    CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0);
    CHECK(shmem_pe_accessible(right) && !shmem_pe_accessible(n));

    /* Memory. */
    long *l = shmem_malloc(64 * sizeof(long));
    int *zi = shmem_calloc(16, sizeof(int));
    double *al = shmem_align(4096, 8 * sizeof(double));
    CHECK(l && zi && al && ((size_t)al % 4096) == 0);
    for (int i = 0; i < 16; i++) CHECK(zi[i] == 0);
    long on_stack = 0;
    CHECK(shmem_addr_accessible(l, right) && shmem_addr_accessible(&checks, right) &&
          !shmem_addr_accessible(&on_stack, right));
    CHECK(shmem_malloc(0) == NULL);

    /* Typed RMA: PE me writes its rank pattern into its right neighbour. */
    long src[64];
    for (int i = 0; i < 64; i++) src[i] = me * 1000 + i;
    shmem_long_put(l, src, 64, right);
    shmem_barrier_all();
    for (int i = 0; i < 64; i++) CHECK(l[i] == left * 1000 + i);
    long back[64];
    shmem_long_get(back, l, 64, right); /* right's l holds my pattern */
    for (int i = 0; i < 64; i++) CHECK(back[i] == me * 1000 + i);
    shmem_barrier_all();
    shmem_double_p(al, 0.5 + me, right);
    shmem_int_p(&zi[1], me + 7, right);
    shmem_barrier_all();
    CHECK(al[0] == 0.5 + left && zi[1] == left + 7);
    CHECK(shmem_double_g(al, right) == 0.5 + me);
    CHECK(shmem_int_g(&zi[1], right) == me + 7);
    long double ld = 1.25L + me;
    long double *lds = shmem_malloc(2 * sizeof(long double));
    shmem_longdouble_p(lds, ld, right);
    shmem_barrier_all();
    CHECK(lds[0] == 1.25L + left && shmem_longdouble_g(lds, right) == 1.25L + me);

    /* Sized, strided and non-blocking forms. */
    int *buf = shmem_calloc(64, sizeof(int));
    int words[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    shmem_put32(buf, words, 8, right);
    shmem_iput32(buf + 16, words, 2, 1, 4, right); /* buf[16,18,20,22] = 1,2,3,4 */
    shmem_int_put_nbi(buf + 32, words, 8, right);
    shmem_putmem_nbi(buf + 48, words, sizeof words, right);
    shmem_quiet();
    shmem_barrier_all();
    for (int i = 0; i < 8; i++) CHECK(buf[i] == i + 1 && buf[32 + i] == i + 1 && buf[48 + i] == i + 1);
    CHECK(buf[16] == 1 && buf[17] == 0 && buf[18] == 2 && buf[22] == 4);
    int strided[4] = {0}, strided32[4] = {0};
    shmem_int_iget(strided, buf + 16, 1, 2, 4, left); /* every PE's buf got its left's puts */
    shmem_iget32(strided32, buf + 16, 1, 2, 4, me);
    for (int i = 0; i < 4; i++) CHECK(strided[i] == i + 1 && strided32[i] == i + 1);
    char bytes[5] = "abcd";
    char *cs = shmem_malloc(8);
    shmem_putmem(cs, bytes, 5, right);
    shmem_barrier_all();
    CHECK(strcmp(cs, "abcd") == 0);
    char got[5];
    shmem_getmem(got, cs, 5, left);
    CHECK(strcmp(got, "abcd") == 0);

    /* Atomics on PE 0's counters. */
    long *ctr = shmem_calloc(4, sizeof(long));
    unsigned int *bits = shmem_calloc(2, sizeof(unsigned int));
    int *old = shmem_calloc(4, sizeof(int));
    long f = shmem_long_atomic_fetch_add(&ctr[0], me + 1, 0);
    CHECK(f >= 0 && f <= (long)n * (n + 1) / 2);
    shmem_long_atomic_inc(&ctr[1], 0);
    shmem_long_atomic_add(&ctr[1], 2, 0);
    shmem_uint_atomic_or(&bits[0], 1u << me, 0);
    shmem_int_fadd(&old[0], 1, 0);          /* 1.3 name */
    shmem_long_finc(&ctr[2], 0);            /* 1.3 name */
    shmem_int_atomic_fetch_inc(&old[1], 0);
    shmem_barrier_all();
    CHECK(shmem_long_atomic_fetch(&ctr[0], 0) == (long)n * (n + 1) / 2);
    CHECK(shmem_long_atomic_fetch(&ctr[1], 0) == 3L * n);
    CHECK(shmem_uint_atomic_fetch(&bits[0], 0) == (n >= 32 ? ~0u : (1u << n) - 1));
    CHECK(shmem_int_fetch(&old[0], 0) == n && shmem_long_fetch(&ctr[2], 0) == n);
    CHECK(shmem_int_atomic_fetch(&old[1], 0) == n);
    shmem_barrier_all();
    /* Exactly one PE wins the compare-and-swap. */
    int won = shmem_int_atomic_compare_swap(&old[2], 0, me + 1, 0) == 0;
    int won_old = shmem_int_cswap(&old[3], 0, me + 1, 0) == 0;
    long *wins = shmem_calloc(1, sizeof(long));
    shmem_long_atomic_add(wins, won + won_old, 0);
    shmem_barrier_all();
    CHECK(shmem_long_g(wins, 0) == 2);
    CHECK(shmem_int_atomic_swap(&zi[2], -5, me) == 0 && zi[2] == -5);
    CHECK(shmem_int_swap(&zi[2], 9, me) == -5 && zi[2] == 9); /* 1.3 name */
    shmem_uint_atomic_set(&bits[1], 0xF0F0u, me);
    CHECK(shmem_uint_atomic_fetch_and(&bits[1], 0xFF00u, me) == 0xF0F0u);
    CHECK(shmem_uint_atomic_fetch_xor(&bits[1], 0x0F00u, me) == 0xF000u);
    CHECK(shmem_uint_atomic_fetch(&bits[1], me) == 0xFF00u);
    shmem_int_atomic_set(&old[1], -3, me);
    CHECK(shmem_int_atomic_fetch(&old[1], me) == -3);

    /* Point-to-point: a token around the ring, signed comparisons. */
    int *flag = shmem_calloc(1, sizeof(int));
    long *lflag = shmem_calloc(1, sizeof(long));
    shmem_barrier_all();
    if (me == 0) {
        shmem_int_atomic_set(flag, 1, right);
        shmem_int_wait_until(flag, SHMEM_CMP_EQ, 1); /* back from the last PE */
    } else {
        shmem_int_wait_until(flag, SHMEM_CMP_NE, 0);
        shmem_int_atomic_set(flag, 1, right);
    }
    CHECK(*flag == 1);
    shmem_long_atomic_set(lflag, -7, me);
    CHECK(shmem_long_test(lflag, SHMEM_CMP_LT, 0));
    CHECK(!shmem_long_test(lflag, SHMEM_CMP_GT, 0));
    shmem_long_wait(lflag, 0); /* returns at once: -7 != 0 */
    shmem_barrier_all();

    /* Ordering: data, fence, flag; the reader sees the data once it sees the flag. */
    long *data = shmem_calloc(8, sizeof(long));
    long *ready = shmem_calloc(1, sizeof(long));
    long payload[8] = {11, 12, 13, 14, 15, 16, 17, 18};
    shmem_long_put(data, payload, 8, right);
    shmem_fence();
    shmem_long_p(ready, 1, right);
    shmem_long_wait_until(ready, SHMEM_CMP_EQ, 1);
    for (int i = 0; i < 8; i++) CHECK(data[i] == 11 + i);
    shmem_sync_all();

    /* shmem_ptr: null or the peer's copy, which then holds what the peer wrote. */
    long *rp = shmem_ptr(l, right);
    if (rp) CHECK(rp[0] == me * 1000);
    CHECK(shmem_ptr(l, me) == l);

    /* C11 type-generic forms. */
    long gv = 42;
    shmem_put(l, &gv, 1, right);
    shmem_p(&l[1], 43L, right);
    shmem_barrier_all();
    CHECK(l[0] == 42 && shmem_g(&l[1], me) == 43);
    shmem_atomic_add(&ctr[3], 1L, 0);
    shmem_barrier_all();
    CHECK(shmem_atomic_fetch(&ctr[3], 0) == n);

    /* realloc keeps the contents; free everything. */
    long *big = shmem_realloc(l, 128 * sizeof(long));
    CHECK(big && big[0] == 42);
    shmem_free(big);
    shmem_free(zi);
    shmem_free(al);
    shmem_free(lds);
    shmem_free(buf);
    shmem_free(cs);
    shmem_free(ctr);
    shmem_free(bits);
    shmem_free(old);
    shmem_free(wins);
    shmem_free(flag);
    shmem_free(lflag);
    shmem_free(data);
    shmem_free(ready);
    printf("PE %d/%d: routines ok, %d checks\n", me, n, checks);
    shmem_finalize();
    return 0;
}
