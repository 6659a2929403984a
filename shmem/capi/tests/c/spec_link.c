/* Every C routine of the OpenSHMEM 1.5 specification, deprecated ones included, by name: the
 * address of each goes into one table, so a routine the header does not declare fails the
 * compile and one the library does not export fails the link. The type tables are the
 * specification's (written out here, not taken from shmem.h). The type-generic forms are
 * macros, not symbols: spec_forms.c calls each of them on every type.
 *
 * `gdarun -n N ./spec_link` prints one line per PE with the number of routines referenced. */
#include <complex.h>
#include <shmem.h>
#include <stdio.h>

typedef void (*routine_t)(void);
#define R(f) (routine_t)&f,

#ifdef SPEC_LINK_MISSING
/* The test's negative control: a routine declared as the header declares the others, which
 * the library does not export, must fail the link. */
void shmem_gda_missing_routine(void);
#endif

/* ---- Type tables (OpenSHMEM 1.5) --------------------------------------------------------- */

#define RMA_TYPES(X) \
    X(float) X(double) X(longdouble) X(char) X(schar) X(short) X(int) X(long) X(longlong) \
    X(uchar) X(ushort) X(uint) X(ulong) X(ulonglong) X(int8) X(int16) X(int32) X(int64) \
    X(uint8) X(uint16) X(uint32) X(uint64) X(size) X(ptrdiff)
#define STD_AMO_TYPES(X) \
    X(int) X(long) X(longlong) X(uint) X(ulong) X(ulonglong) X(int32) X(int64) X(uint32) \
    X(uint64) X(size) X(ptrdiff)
#define EXT_AMO_TYPES(X) X(float) X(double) STD_AMO_TYPES(X)
#define BITWISE_AMO_TYPES(X) \
    X(uint) X(ulong) X(ulonglong) X(int32) X(int64) X(uint32) X(uint64)
#define SYNC_TYPES(X) STD_AMO_TYPES(X)
#define BITWISE_RED_TYPES(X) \
    X(uchar) X(ushort) X(uint) X(ulong) X(ulonglong) X(int8) X(int16) X(int32) X(int64) \
    X(uint8) X(uint16) X(uint32) X(uint64) X(size)
#define ORDERED_RED_TYPES(X) \
    X(char) X(schar) X(short) X(int) X(long) X(longlong) X(ptrdiff) X(float) X(double) \
    X(longdouble) BITWISE_RED_TYPES(X)
#define ARITH_RED_TYPES(X) ORDERED_RED_TYPES(X) X(complexf) X(complexd)
#define SIZES(X) X(8) X(16) X(32) X(64) X(128)
/* Deprecated: the 1.3 atomics' types, the 1.4 point-to-point short types, the to_all types. */
#define OLD_AMO_TYPES(X) X(int) X(long) X(longlong)
#define OLD_EXT_AMO_TYPES(X) X(float) X(double) OLD_AMO_TYPES(X)
#define TO_ALL_INT_TYPES(X) X(short) X(int) X(long) X(longlong)
#define TO_ALL_FLOAT_TYPES(X) TO_ALL_INT_TYPES(X) X(float) X(double) X(longdouble)
#define TO_ALL_ARITH_TYPES(X) TO_ALL_FLOAT_TYPES(X) X(complexf) X(complexd)

/* ---- Per-type routine sets --------------------------------------------------------------- */

#define RMA(N) \
    R(shmem_##N##_put) R(shmem_##N##_get) R(shmem_##N##_p) R(shmem_##N##_g) \
    R(shmem_##N##_iput) R(shmem_##N##_iget) R(shmem_##N##_put_nbi) R(shmem_##N##_get_nbi) \
    R(shmem_ctx_##N##_put) R(shmem_ctx_##N##_get) R(shmem_ctx_##N##_p) R(shmem_ctx_##N##_g) \
    R(shmem_ctx_##N##_iput) R(shmem_ctx_##N##_iget) R(shmem_ctx_##N##_put_nbi) \
    R(shmem_ctx_##N##_get_nbi) \
    R(shmem_##N##_put_signal) R(shmem_##N##_put_signal_nbi) R(shmem_ctx_##N##_put_signal) \
    R(shmem_ctx_##N##_put_signal_nbi) \
    R(shmem_##N##_broadcast) R(shmem_##N##_collect) R(shmem_##N##_fcollect) \
    R(shmem_##N##_alltoall) R(shmem_##N##_alltoalls)
#define SIZED(B) \
    R(shmem_put##B) R(shmem_get##B) R(shmem_iput##B) R(shmem_iget##B) R(shmem_put##B##_nbi) \
    R(shmem_get##B##_nbi) R(shmem_ctx_put##B) R(shmem_ctx_get##B) R(shmem_ctx_iput##B) \
    R(shmem_ctx_iget##B) R(shmem_ctx_put##B##_nbi) R(shmem_ctx_get##B##_nbi) \
    R(shmem_put##B##_signal) R(shmem_put##B##_signal_nbi) R(shmem_ctx_put##B##_signal) \
    R(shmem_ctx_put##B##_signal_nbi)
#define EXT_AMO(N) \
    R(shmem_##N##_atomic_fetch) R(shmem_##N##_atomic_set) R(shmem_##N##_atomic_swap) \
    R(shmem_##N##_atomic_fetch_nbi) R(shmem_##N##_atomic_swap_nbi) \
    R(shmem_ctx_##N##_atomic_fetch) R(shmem_ctx_##N##_atomic_set) \
    R(shmem_ctx_##N##_atomic_swap) R(shmem_ctx_##N##_atomic_fetch_nbi) \
    R(shmem_ctx_##N##_atomic_swap_nbi)
#define STD_AMO(N) \
    R(shmem_##N##_atomic_compare_swap) R(shmem_##N##_atomic_fetch_inc) \
    R(shmem_##N##_atomic_inc) R(shmem_##N##_atomic_fetch_add) R(shmem_##N##_atomic_add) \
    R(shmem_##N##_atomic_compare_swap_nbi) R(shmem_##N##_atomic_fetch_inc_nbi) \
    R(shmem_##N##_atomic_fetch_add_nbi) \
    R(shmem_ctx_##N##_atomic_compare_swap) R(shmem_ctx_##N##_atomic_fetch_inc) \
    R(shmem_ctx_##N##_atomic_inc) R(shmem_ctx_##N##_atomic_fetch_add) \
    R(shmem_ctx_##N##_atomic_add) R(shmem_ctx_##N##_atomic_compare_swap_nbi) \
    R(shmem_ctx_##N##_atomic_fetch_inc_nbi) R(shmem_ctx_##N##_atomic_fetch_add_nbi)
#define BITWISE_AMO(N) \
    R(shmem_##N##_atomic_fetch_and) R(shmem_##N##_atomic_and) \
    R(shmem_##N##_atomic_fetch_or) R(shmem_##N##_atomic_or) \
    R(shmem_##N##_atomic_fetch_xor) R(shmem_##N##_atomic_xor) \
    R(shmem_##N##_atomic_fetch_and_nbi) R(shmem_##N##_atomic_fetch_or_nbi) \
    R(shmem_##N##_atomic_fetch_xor_nbi) \
    R(shmem_ctx_##N##_atomic_fetch_and) R(shmem_ctx_##N##_atomic_and) \
    R(shmem_ctx_##N##_atomic_fetch_or) R(shmem_ctx_##N##_atomic_or) \
    R(shmem_ctx_##N##_atomic_fetch_xor) R(shmem_ctx_##N##_atomic_xor) \
    R(shmem_ctx_##N##_atomic_fetch_and_nbi) R(shmem_ctx_##N##_atomic_fetch_or_nbi) \
    R(shmem_ctx_##N##_atomic_fetch_xor_nbi)
#define SYNC(N) R(shmem_##N##_wait_until) R(shmem_##N##_test) R(shmem_##N##_wait) MULTI(N)
#define MULTI(N) \
    R(shmem_##N##_wait_until_all) R(shmem_##N##_wait_until_any) \
    R(shmem_##N##_wait_until_some) R(shmem_##N##_wait_until_all_vector) \
    R(shmem_##N##_wait_until_any_vector) R(shmem_##N##_wait_until_some_vector) \
    R(shmem_##N##_test_all) R(shmem_##N##_test_any) R(shmem_##N##_test_some) \
    R(shmem_##N##_test_all_vector) R(shmem_##N##_test_any_vector) \
    R(shmem_##N##_test_some_vector)
#define AND_RED(N) R(shmem_##N##_and_reduce) R(shmem_##N##_or_reduce) R(shmem_##N##_xor_reduce)
#define ORD_RED(N) R(shmem_##N##_max_reduce) R(shmem_##N##_min_reduce)
#define ARITH_RED(N) R(shmem_##N##_sum_reduce) R(shmem_##N##_prod_reduce)
#define OLD_AMO(N) \
    R(shmem_##N##_cswap) R(shmem_##N##_finc) R(shmem_##N##_inc) R(shmem_##N##_fadd) \
    R(shmem_##N##_add)
#define OLD_EXT_AMO(N) R(shmem_##N##_fetch) R(shmem_##N##_set) R(shmem_##N##_swap)
#define INT_TO_ALL(N) R(shmem_##N##_and_to_all) R(shmem_##N##_or_to_all) R(shmem_##N##_xor_to_all)
#define ORD_TO_ALL(N) R(shmem_##N##_max_to_all) R(shmem_##N##_min_to_all)
#define ARITH_TO_ALL(N) R(shmem_##N##_sum_to_all) R(shmem_##N##_prod_to_all)

static const routine_t routines[] = {
    /* Library setup, exit and query; thread support; profiling. */
    R(shmem_init) R(shmem_init_thread) R(shmem_query_thread) R(shmem_finalize)
    R(shmem_global_exit) R(shmem_my_pe) R(shmem_n_pes) R(shmem_pe_accessible)
    R(shmem_addr_accessible) R(shmem_ptr) R(shmem_team_ptr) R(shmem_info_get_version)
    R(shmem_info_get_name) R(shmem_pcontrol)
    /* Memory management. */
    R(shmem_malloc) R(shmem_free) R(shmem_realloc) R(shmem_align) R(shmem_malloc_with_hints)
    R(shmem_calloc)
    /* Teams and contexts. */
    R(shmem_team_my_pe) R(shmem_team_n_pes) R(shmem_team_get_config)
    R(shmem_team_translate_pe) R(shmem_team_split_strided) R(shmem_team_split_2d)
    R(shmem_team_destroy) R(shmem_ctx_create) R(shmem_team_create_ctx) R(shmem_ctx_destroy)
    R(shmem_ctx_get_team)
    /* RMA and signals, untyped. */
    R(shmem_putmem) R(shmem_getmem) R(shmem_putmem_nbi) R(shmem_getmem_nbi)
    R(shmem_ctx_putmem) R(shmem_ctx_getmem) R(shmem_ctx_putmem_nbi) R(shmem_ctx_getmem_nbi)
    R(shmem_putmem_signal) R(shmem_putmem_signal_nbi) R(shmem_ctx_putmem_signal)
    R(shmem_ctx_putmem_signal_nbi) R(shmem_signal_fetch)
    RMA_TYPES(RMA) SIZES(SIZED)
    /* AMOs. */
    EXT_AMO_TYPES(EXT_AMO) STD_AMO_TYPES(STD_AMO) BITWISE_AMO_TYPES(BITWISE_AMO)
    /* Collectives. */
    R(shmem_barrier_all) R(shmem_sync_all) R(shmem_team_sync) R(shmem_sync)
    R(shmem_broadcastmem) R(shmem_collectmem) R(shmem_fcollectmem) R(shmem_alltoallmem)
    R(shmem_alltoallsmem)
    BITWISE_RED_TYPES(AND_RED) ORDERED_RED_TYPES(ORD_RED) ARITH_RED_TYPES(ARITH_RED)
    /* Point-to-point synchronization. */
    SYNC_TYPES(SYNC) R(shmem_signal_wait_until)
    /* Memory ordering, locks. */
    R(shmem_fence) R(shmem_quiet) R(shmem_ctx_fence) R(shmem_ctx_quiet) R(shmem_set_lock)
    R(shmem_clear_lock) R(shmem_test_lock)
    /* Deprecated: 1.2 names, active-set collectives, to_all reductions, cache routines, 1.3
     * atomics, the short and unsigned short waits and tests, the long forms of 1.3. */
    R(start_pes) R(_my_pe) R(_num_pes) R(shmalloc) R(shfree) R(shrealloc) R(shmemalign)
    R(shmem_barrier) R(shmem_broadcast32) R(shmem_broadcast64) R(shmem_collect32)
    R(shmem_collect64) R(shmem_fcollect32) R(shmem_fcollect64) R(shmem_alltoall32)
    R(shmem_alltoall64) R(shmem_alltoalls32) R(shmem_alltoalls64)
    TO_ALL_INT_TYPES(INT_TO_ALL) TO_ALL_FLOAT_TYPES(ORD_TO_ALL) TO_ALL_ARITH_TYPES(ARITH_TO_ALL)
    R(shmem_clear_cache_inv) R(shmem_set_cache_inv) R(shmem_clear_cache_line_inv)
    R(shmem_set_cache_line_inv) R(shmem_udcflush) R(shmem_udcflush_line)
    OLD_AMO_TYPES(OLD_AMO) OLD_EXT_AMO_TYPES(OLD_EXT_AMO) R(shmem_swap)
    R(shmem_short_wait_until) R(shmem_short_test) R(shmem_short_wait)
    R(shmem_ushort_wait_until) R(shmem_ushort_test) R(shmem_wait_until) R(shmem_wait)
    /* The multi-variable waits and tests of short and unsigned short (1.5 lists them). */
    MULTI(short) MULTI(ushort)
#ifdef SPEC_LINK_MISSING
    R(shmem_gda_missing_routine)
#endif
};

int main(void) {
    shmem_init();
    size_t n = sizeof routines / sizeof routines[0], null = 0;
    for (size_t i = 0; i < n; i++) null += routines[i] == NULL;
    if (null) {
        fprintf(stderr, "%zu routines have no address\n", null);
        return 3;
    }
    printf("%d/%d: spec_link ok, %zu routines\n", shmem_my_pe(), shmem_n_pes(), n);
    shmem_finalize();
    return 0;
}
