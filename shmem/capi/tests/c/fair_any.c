/* OpenSHMEM 1.5: "If an entry i in ivars within the test set satisfies the test condition, a
 * series of calls to shmem_test_any must eventually return i." Every `_any` form, called over
 * and over on arrays whose every element keeps holding, must come round to every element (and
 * never to one its status excludes). Written for gda; run with `gdarun -n N ./fair_any`. */
#include <stddef.h>
#include <string.h>

#include "check.h"

#define N 4
#define CALLS 12

static long lv[N];
static int iv[N];
static short sv[N];
static unsigned short uv[N];

/* Records index `i` (which must be a real element), counted in `seen`. */
static void saw(size_t i, int seen[N]) {
    CHECK(i < N);
    if (i < N) seen[i]++;
}

static void every(const int seen[N], const int *status) {
    for (int i = 0; i < N; i++) {
        if (status && status[i]) {
            CHECK(seen[i] == 0);
        } else {
            CHECK(seen[i] > 0);
        }
    }
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    for (int i = 0; i < N; i++) {
        lv[i] = 1;
        iv[i] = 1;
        sv[i] = 1;
        uv[i] = 1;
    }
    shmem_barrier_all();
    long cmps[N] = {1, 1, 1, 1};
    int seen[N];

    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++) saw(shmem_long_test_any(lv, N, NULL, SHMEM_CMP_EQ, 1), seen);
    every(seen, NULL);

    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++)
        saw(shmem_long_wait_until_any(lv, N, NULL, SHMEM_CMP_EQ, 1), seen);
    every(seen, NULL);

    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++)
        saw(shmem_long_test_any_vector(lv, N, NULL, SHMEM_CMP_EQ, cmps), seen);
    every(seen, NULL);

    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++)
        saw(shmem_long_wait_until_any_vector(lv, N, NULL, SHMEM_CMP_EQ, cmps), seen);
    every(seen, NULL);

    /* The C11 generic form, on int. */
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++) saw(shmem_test_any(iv, N, NULL, SHMEM_CMP_EQ, 1), seen);
    every(seen, NULL);

    /* 16-bit arrays (1.5 lists short and unsigned short for these too), generic forms. */
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++) saw(shmem_test_any(sv, N, NULL, SHMEM_CMP_EQ, (short)1), seen);
    every(seen, NULL);
    memset(seen, 0, sizeof seen);
    unsigned short ucmps[N] = {1, 1, 1, 1};
    for (int k = 0; k < CALLS; k++)
        saw(shmem_wait_until_any_vector(uv, N, NULL, SHMEM_CMP_EQ, ucmps), seen);
    every(seen, NULL);
    CHECK(shmem_short_test_all(sv, N, NULL, SHMEM_CMP_EQ, 1) == 1);
    size_t ix[N];
    CHECK(shmem_ushort_test_some(uv, N, ix, NULL, SHMEM_CMP_EQ, 1) == N);
    CHECK(shmem_short_test_all(sv, N, NULL, SHMEM_CMP_EQ, 2) == 0);

    /* A status that leaves out element 2: the other three come round, 2 never. */
    const int status[N] = {0, 0, 1, 0};
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < CALLS; k++)
        saw(shmem_int_wait_until_any(iv, N, status, SHMEM_CMP_EQ, 1), seen);
    every(seen, status);

    /* Two arrays in turn: each comes round on its own. */
    int seen2[N];
    memset(seen, 0, sizeof seen);
    memset(seen2, 0, sizeof seen2);
    for (int k = 0; k < CALLS; k++) {
        saw(shmem_long_test_any(lv, N, NULL, SHMEM_CMP_EQ, 1), seen);
        saw(shmem_int_test_any(iv, N, NULL, SHMEM_CMP_EQ, 1), seen2);
    }
    every(seen, NULL);
    every(seen2, NULL);

    shmem_barrier_all();
    printf("PE %d/%d: fair_any ok, %d checks\n", me, n, checks);
    shmem_finalize();
    return 0;
}
