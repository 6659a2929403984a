/*
 * shmem.h — the OpenSHMEM C API of gda (libgdashmem.so).
 *
 * Build with `gdacc prog.c -o prog`, run with `gdarun -n 4 ./prog`. PEs on one host reach each
 * other by load/store (P2P); GDA_SHMEM_TRANSPORT=rdma sends every remote access through the
 * NIC (the software NIC by default, GDA_SHMEM_PROVIDER=native|mlx5|bnxt picks the queue
 * format it runs). Every misuse (a call before shmem_init, an address outside the symmetric
 * heap or the program's global and static variables, a bad comparison) prints what is wrong on stderr and ends the job with status 1.
 *
 * Values of the constants are gda's own choices where the specification leaves them open;
 * programs must use the names, as with every OpenSHMEM library.
 */
#ifndef GDA_SHMEM_H
#define GDA_SHMEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* the inline long double reductions */
#include <string.h>

#ifdef __cplusplus
#include <complex> /* the std::complex forms of the complex reductions, below */
#endif

/* The complex element types: C's `float _Complex`; in C++ (which has no `_Complex`) the GNU
 * `__complex__ float` g++ and clang++ take in every mode, of the same layout (as is
 * `std::complex<float>`, whose overloads follow the C declarations). */
#if defined(__cplusplus) && defined(__GNUC__)
#define GDA_SHMEM_COMPLEXF __complex__ float
#define GDA_SHMEM_COMPLEXD __complex__ double
#define GDA_SHMEM_HAS_COMPLEX 1
#elif !defined(__cplusplus)
#define GDA_SHMEM_COMPLEXF float _Complex
#define GDA_SHMEM_COMPLEXD double _Complex
#define GDA_SHMEM_HAS_COMPLEX 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Library constants ------------------------------------------------------------------ */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "gda"
/* The specification version as Open MPI's oshmem spells it (major * 10000 + minor * 100),
 * which programs written for Open MPI test before they build (its own examples do). */
#define OSHMEM_SPEC_VERSION (SHMEM_MAJOR_VERSION * 10000 + SHMEM_MINOR_VERSION * 100)

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* Hints of shmem_malloc_with_hints (bits; 0 is no hint). */
#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* pSync arrays of the active-set routines (deprecated in 1.5, still provided). gda's
 * active-set barrier counts rounds in words 0..31 of pSync and a collect passes its running
 * offset in word 32, so every pSync holds 33 longs. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_BARRIER_SYNC_SIZE 33
#define SHMEM_BCAST_SYNC_SIZE 33
#define SHMEM_REDUCE_SYNC_SIZE 33
#define SHMEM_COLLECT_SYNC_SIZE 33
#define SHMEM_ALLTOALL_SYNC_SIZE 33
#define SHMEM_ALLTOALLS_SYNC_SIZE 33
#define SHMEM_SYNC_SIZE 33
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1

/* Teams and contexts: handles (0 is invalid; tables behind them, so a stale handle is an
 * error, not a dangling pointer). */
typedef struct gda_shmem_team *shmem_team_t;
typedef struct gda_shmem_ctx *shmem_ctx_t;
typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)2)
#define SHMEM_TEAM_NUM_CONTEXTS 1L
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)1)
#define SHMEM_CTX_SERIALIZED 1L
#define SHMEM_CTX_PRIVATE 2L
#define SHMEM_CTX_NOSTORE 4L

/* The 1.3 names of the constants. */
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE

/* ---- Type tables (TYPE, TYPENAME), as the specification lists them ------------------------ */

/* Standard RMA types (long double apart: its p and g are inline functions below). */
#define GDA_SHMEM_RMA_TYPES(X) X(long double, longdouble) GDA_SHMEM_RMA_VALUE_TYPES(X)
#define GDA_SHMEM_RMA_VALUE_TYPES(X) \
    X(float, float) X(double, double) X(char, char) \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)

/* Standard AMO types (fetch, set, swap, compare_swap, inc, add and their fetching forms). */
#define GDA_SHMEM_AMO_TYPES(X) \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)

/* Extended AMO types (fetch, set, swap and their non-blocking forms): the standard ones, float
 * and double. */
#define GDA_SHMEM_EXTENDED_AMO_TYPES(X) X(float, float) X(double, double) GDA_SHMEM_AMO_TYPES(X)

/* Bitwise AMO types (and, or, xor). */
#define GDA_SHMEM_BITWISE_AMO_TYPES(X) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

/* The deprecated point-to-point synchronization types (wait_until and test; short's 1.3 wait). */
#define GDA_SHMEM_OLD_SYNC_TYPES(X) X(short, short) X(unsigned short, ushort)

/* Point-to-point synchronization types (32- and 64-bit). */
#define GDA_SHMEM_SYNC_TYPES(X) \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)

/* The distinct C types of the tables above (the type-generic forms choose among these: on
 * LP64, int64_t is long, size_t is unsigned long, …). */
#define GDA_SHMEM_GENERIC_RMA_TYPES(X) \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char) \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define GDA_SHMEM_GENERIC_AMO_TYPES(X) \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(X) \
    X(float, float) X(double, double) GDA_SHMEM_GENERIC_AMO_TYPES(X)
/* Signed and unsigned never coincide, so the fixed-width names can stand for their types. */
#define GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(X) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int32_t, int32) X(int64_t, int64)
#define GDA_SHMEM_GENERIC_OLD_AMO_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
#define GDA_SHMEM_GENERIC_OLD_EXTENDED_AMO_TYPES(X) \
    X(float, float) X(double, double) GDA_SHMEM_GENERIC_OLD_AMO_TYPES(X)
#define GDA_SHMEM_GENERIC_SYNC_TYPES(X) GDA_SHMEM_GENERIC_AMO_TYPES(X)
#define GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(X) \
    X(short, short) X(unsigned short, ushort) GDA_SHMEM_GENERIC_SYNC_TYPES(X)
#define GDA_SHMEM_GENERIC_WAIT_TYPES(X) X(short, short) GDA_SHMEM_GENERIC_SYNC_TYPES(X)
#define GDA_SHMEM_GENERIC_BITWISE_RED_TYPES(X) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64)
#define GDA_SHMEM_GENERIC_ORDERED_RED_TYPES(X) \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long) \
    X(long long, longlong) X(float, float) X(double, double) X(long double, longdouble) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define GDA_SHMEM_GENERIC_ARITH_RED_TYPES(X) \
    GDA_SHMEM_GENERIC_ORDERED_RED_TYPES(X) X(float _Complex, complexf) \
    X(double _Complex, complexd)

/* Forms chosen by their number of arguments (shmem_sync(team) and the deprecated
 * shmem_sync(PE_start, logPE_stride, PE_size, pSync); the C11 forms with and without a context
 * first): NAME##N for N arguments. */
#define GDA_SHMEM_NARG(...) GDA_SHMEM_NARG_(__VA_ARGS__, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define GDA_SHMEM_NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, N, ...) N
#define GDA_SHMEM_CAT(a, b) GDA_SHMEM_CAT_(a, b)
#define GDA_SHMEM_CAT_(a, b) a##b
#define GDA_SHMEM_BY_NARG(NAME, ...) GDA_SHMEM_CAT(NAME, GDA_SHMEM_NARG(__VA_ARGS__))(__VA_ARGS__)

/* The 1.3 atomics (shmem_int_fadd, …) exist for these. */
#define GDA_SHMEM_OLD_AMO_TYPES(X) X(int, int) X(long, long) X(long long, longlong)

/* ---- Setup, exit and query ---------------------------------------------------------------- */

void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* Profiling: no profiler is interposed by gda; every level is accepted and has no effect. */
void shmem_pcontrol(const int level, ...);

/* 1.3 names. */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);

/* ---- Memory management -------------------------------------------------------------------- */

void *shmem_malloc(size_t size);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);
void *shmem_malloc_with_hints(size_t size, long hints);
void *shmalloc(size_t size);
void shfree(void *ptr);
void *shrealloc(void *ptr, size_t size);
void *shmemalign(size_t alignment, size_t size);

/* ---- Remote memory access ----------------------------------------------------------------- */

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);

#define GDA_SHMEM_DECL_SIZED(BITS) \
    void shmem_put##BITS(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_get##BITS(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_put##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_get##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_iput##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, \
                          size_t nelems, int pe); \
    void shmem_iget##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, \
                          size_t nelems, int pe);
GDA_SHMEM_DECL_SIZED(8)
GDA_SHMEM_DECL_SIZED(16)
GDA_SHMEM_DECL_SIZED(32)
GDA_SHMEM_DECL_SIZED(64)
GDA_SHMEM_DECL_SIZED(128)

#define GDA_SHMEM_DECL_RMA(TYPE, NAME) \
    void shmem_##NAME##_put(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_get(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_put_nbi(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_get_nbi(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_iput(TYPE *dest, const TYPE *source, ptrdiff_t dst, ptrdiff_t sst, \
                             size_t nelems, int pe); \
    void shmem_##NAME##_iget(TYPE *dest, const TYPE *source, ptrdiff_t dst, ptrdiff_t sst, \
                             size_t nelems, int pe);
GDA_SHMEM_RMA_TYPES(GDA_SHMEM_DECL_RMA)

#define GDA_SHMEM_DECL_PG(TYPE, NAME) \
    void shmem_##NAME##_p(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_g(const TYPE *source, int pe);
GDA_SHMEM_RMA_VALUE_TYPES(GDA_SHMEM_DECL_PG)

static inline void shmem_longdouble_p(long double *dest, long double value, int pe) {
    shmem_putmem(dest, &value, sizeof value, pe);
}
static inline long double shmem_longdouble_g(const long double *source, int pe) {
    long double v;
    shmem_getmem(&v, source, sizeof v, pe);
    return v;
}

/* ---- Atomic memory operations ------------------------------------------------------------- */

#define GDA_SHMEM_DECL_AMO(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_fetch(const TYPE *source, int pe); \
    void shmem_##NAME##_atomic_set(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_swap(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_compare_swap(TYPE *dest, TYPE cond, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_inc(TYPE *dest, int pe); \
    void shmem_##NAME##_atomic_inc(TYPE *dest, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_add(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_add(TYPE *dest, TYPE value, int pe);
GDA_SHMEM_AMO_TYPES(GDA_SHMEM_DECL_AMO)

#define GDA_SHMEM_DECL_AMO_NBI(TYPE, NAME) \
    void shmem_##NAME##_atomic_compare_swap_nbi(TYPE *fetch, TYPE *dest, TYPE cond, TYPE value, \
                                                int pe); \
    void shmem_##NAME##_atomic_fetch_inc_nbi(TYPE *fetch, TYPE *dest, int pe); \
    void shmem_##NAME##_atomic_fetch_add_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe);
GDA_SHMEM_AMO_TYPES(GDA_SHMEM_DECL_AMO_NBI)

/* fetch, set and swap of the extended types that are not standard ones (float, double). */
#define GDA_SHMEM_DECL_EXT_AMO(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_fetch(const TYPE *source, int pe); \
    void shmem_##NAME##_atomic_set(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_swap(TYPE *dest, TYPE value, int pe);
GDA_SHMEM_DECL_EXT_AMO(float, float)
GDA_SHMEM_DECL_EXT_AMO(double, double)

#define GDA_SHMEM_DECL_EXT_AMO_NBI(TYPE, NAME) \
    void shmem_##NAME##_atomic_fetch_nbi(TYPE *fetch, const TYPE *source, int pe); \
    void shmem_##NAME##_atomic_swap_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe);
GDA_SHMEM_EXTENDED_AMO_TYPES(GDA_SHMEM_DECL_EXT_AMO_NBI)

#define GDA_SHMEM_DECL_BITWISE(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_fetch_and(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_and(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_or(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_or(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_xor(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_xor(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_and_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_or_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_xor_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe);
GDA_SHMEM_BITWISE_AMO_TYPES(GDA_SHMEM_DECL_BITWISE)

#define GDA_SHMEM_DECL_OLD_AMO(TYPE, NAME) \
    TYPE shmem_##NAME##_fetch(const TYPE *source, int pe); \
    void shmem_##NAME##_set(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_swap(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_cswap(TYPE *dest, TYPE cond, TYPE value, int pe); \
    TYPE shmem_##NAME##_finc(TYPE *dest, int pe); \
    void shmem_##NAME##_inc(TYPE *dest, int pe); \
    TYPE shmem_##NAME##_fadd(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_add(TYPE *dest, TYPE value, int pe);
GDA_SHMEM_OLD_AMO_TYPES(GDA_SHMEM_DECL_OLD_AMO)
#define GDA_SHMEM_DECL_OLD_EXT_AMO(TYPE, NAME) \
    TYPE shmem_##NAME##_fetch(const TYPE *source, int pe); \
    void shmem_##NAME##_set(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_swap(TYPE *dest, TYPE value, int pe);
GDA_SHMEM_DECL_OLD_EXT_AMO(float, float)
GDA_SHMEM_DECL_OLD_EXT_AMO(double, double)
/* 1.3: swap of a long (C11 programs get the type-generic shmem_swap below). */
long shmem_swap(long *dest, long value, int pe);

/* ---- Point-to-point synchronization ------------------------------------------------------- */

#define GDA_SHMEM_DECL_SYNC(TYPE, NAME) \
    void shmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE cmp_value); \
    int shmem_##NAME##_test(TYPE *ivar, int cmp, TYPE cmp_value); \
    void shmem_##NAME##_wait(TYPE *ivar, TYPE cmp_value);
GDA_SHMEM_SYNC_TYPES(GDA_SHMEM_DECL_SYNC)
/* Deprecated: short and unsigned short (wait_until, test), short's 1.3 wait, and the 1.3
 * routines of a long (C11 programs get the type-generic shmem_wait_until and shmem_wait). */
#define GDA_SHMEM_DECL_OLD_SYNC(TYPE, NAME) \
    void shmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE cmp_value); \
    int shmem_##NAME##_test(TYPE *ivar, int cmp, TYPE cmp_value);
GDA_SHMEM_OLD_SYNC_TYPES(GDA_SHMEM_DECL_OLD_SYNC)
void shmem_short_wait(short *ivar, short cmp_value);
void shmem_wait_until(long *ivar, int cmp, long cmp_value);
void shmem_wait(long *ivar, long cmp_value);

/* ---- Memory ordering and barriers --------------------------------------------------------- */

void shmem_fence(void);
void shmem_quiet(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);

/* ---- Contexts ----------------------------------------------------------------------------- */

/* A context shares the PE's routes: shmem_ctx_quiet/fence complete or order everything the PE
 * issued (at least what a context's own operations need); no independent progress. */
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_quiet(shmem_ctx_t ctx);
void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);

#define GDA_SHMEM_DECL_CTX_SIZED(BITS) \
    void shmem_ctx_put##BITS(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe); \
    void shmem_ctx_get##BITS(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe); \
    void shmem_ctx_put##BITS##_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, \
                                   int pe); \
    void shmem_ctx_get##BITS##_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, \
                                   int pe); \
    void shmem_ctx_iput##BITS(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, \
                              ptrdiff_t sst, size_t nelems, int pe); \
    void shmem_ctx_iget##BITS(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst, \
                              ptrdiff_t sst, size_t nelems, int pe);
GDA_SHMEM_DECL_CTX_SIZED(8)
GDA_SHMEM_DECL_CTX_SIZED(16)
GDA_SHMEM_DECL_CTX_SIZED(32)
GDA_SHMEM_DECL_CTX_SIZED(64)
GDA_SHMEM_DECL_CTX_SIZED(128)

#define GDA_SHMEM_DECL_CTX_RMA(TYPE, NAME) \
    void shmem_ctx_##NAME##_put(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, size_t nelems, \
                                int pe); \
    void shmem_ctx_##NAME##_get(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, size_t nelems, \
                                int pe); \
    void shmem_ctx_##NAME##_put_nbi(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, \
                                    size_t nelems, int pe); \
    void shmem_ctx_##NAME##_get_nbi(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, \
                                    size_t nelems, int pe); \
    void shmem_ctx_##NAME##_iput(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, ptrdiff_t dst, \
                                 ptrdiff_t sst, size_t nelems, int pe); \
    void shmem_ctx_##NAME##_iget(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, ptrdiff_t dst, \
                                 ptrdiff_t sst, size_t nelems, int pe);
GDA_SHMEM_RMA_TYPES(GDA_SHMEM_DECL_CTX_RMA)

#define GDA_SHMEM_DECL_CTX_PG(TYPE, NAME) \
    void shmem_ctx_##NAME##_p(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_g(shmem_ctx_t ctx, const TYPE *source, int pe);
GDA_SHMEM_RMA_VALUE_TYPES(GDA_SHMEM_DECL_CTX_PG)

static inline void shmem_ctx_longdouble_p(shmem_ctx_t ctx, long double *dest, long double value,
                                          int pe) {
    shmem_ctx_putmem(ctx, dest, &value, sizeof value, pe);
}
static inline long double shmem_ctx_longdouble_g(shmem_ctx_t ctx, const long double *source,
                                                 int pe) {
    long double v;
    shmem_ctx_getmem(ctx, &v, source, sizeof v, pe);
    return v;
}

#define GDA_SHMEM_DECL_CTX_AMO(TYPE, NAME) \
    TYPE shmem_ctx_##NAME##_atomic_fetch(shmem_ctx_t ctx, const TYPE *source, int pe); \
    void shmem_ctx_##NAME##_atomic_set(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_swap(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_compare_swap(shmem_ctx_t ctx, TYPE *dest, TYPE cond, \
                                                TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_fetch_inc(shmem_ctx_t ctx, TYPE *dest, int pe); \
    void shmem_ctx_##NAME##_atomic_inc(shmem_ctx_t ctx, TYPE *dest, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_fetch_add(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_add(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_compare_swap_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                                    TYPE cond, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                                 int pe); \
    void shmem_ctx_##NAME##_atomic_fetch_add_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                                 TYPE value, int pe);
GDA_SHMEM_AMO_TYPES(GDA_SHMEM_DECL_CTX_AMO)

#define GDA_SHMEM_DECL_CTX_EXT_AMO(TYPE, NAME) \
    TYPE shmem_ctx_##NAME##_atomic_fetch(shmem_ctx_t ctx, const TYPE *source, int pe); \
    void shmem_ctx_##NAME##_atomic_set(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_swap(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe);
GDA_SHMEM_DECL_CTX_EXT_AMO(float, float)
GDA_SHMEM_DECL_CTX_EXT_AMO(double, double)

#define GDA_SHMEM_DECL_CTX_EXT_AMO_NBI(TYPE, NAME) \
    void shmem_ctx_##NAME##_atomic_fetch_nbi(shmem_ctx_t ctx, TYPE *fetch, const TYPE *source, \
                                             int pe); \
    void shmem_ctx_##NAME##_atomic_swap_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                            TYPE value, int pe);
GDA_SHMEM_EXTENDED_AMO_TYPES(GDA_SHMEM_DECL_CTX_EXT_AMO_NBI)

#define GDA_SHMEM_DECL_CTX_BITWISE(TYPE, NAME) \
    TYPE shmem_ctx_##NAME##_atomic_fetch_and(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_and(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_fetch_or(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_or(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    TYPE shmem_ctx_##NAME##_atomic_fetch_xor(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_xor(shmem_ctx_t ctx, TYPE *dest, TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_fetch_and_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                                 TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_fetch_or_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                                TYPE value, int pe); \
    void shmem_ctx_##NAME##_atomic_fetch_xor_nbi(shmem_ctx_t ctx, TYPE *fetch, TYPE *dest, \
                                                 TYPE value, int pe);
GDA_SHMEM_BITWISE_AMO_TYPES(GDA_SHMEM_DECL_CTX_BITWISE)

/* ---- Signals ------------------------------------------------------------------------------ */

void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                                 uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
#define GDA_SHMEM_DECL_SIGNAL_SIZED(BITS) \
    void shmem_put##BITS##_signal(void *dest, const void *source, size_t nelems, \
                                  uint64_t *sig_addr, uint64_t signal, int sig_op, int pe); \
    void shmem_put##BITS##_signal_nbi(void *dest, const void *source, size_t nelems, \
                                      uint64_t *sig_addr, uint64_t signal, int sig_op, int pe); \
    void shmem_ctx_put##BITS##_signal(shmem_ctx_t ctx, void *dest, const void *source, \
                                      size_t nelems, uint64_t *sig_addr, uint64_t signal, \
                                      int sig_op, int pe); \
    void shmem_ctx_put##BITS##_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, \
                                          size_t nelems, uint64_t *sig_addr, uint64_t signal, \
                                          int sig_op, int pe);
GDA_SHMEM_DECL_SIGNAL_SIZED(8)
GDA_SHMEM_DECL_SIGNAL_SIZED(16)
GDA_SHMEM_DECL_SIGNAL_SIZED(32)
GDA_SHMEM_DECL_SIGNAL_SIZED(64)
GDA_SHMEM_DECL_SIGNAL_SIZED(128)
#define GDA_SHMEM_DECL_SIGNAL(TYPE, NAME) \
    void shmem_##NAME##_put_signal(TYPE *dest, const TYPE *source, size_t nelems, \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe); \
    void shmem_##NAME##_put_signal_nbi(TYPE *dest, const TYPE *source, size_t nelems, \
                                       uint64_t *sig_addr, uint64_t signal, int sig_op, int pe); \
    void shmem_ctx_##NAME##_put_signal(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, \
                                       size_t nelems, uint64_t *sig_addr, uint64_t signal, \
                                       int sig_op, int pe); \
    void shmem_ctx_##NAME##_put_signal_nbi(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, \
                                           size_t nelems, uint64_t *sig_addr, uint64_t signal, \
                                           int sig_op, int pe);
GDA_SHMEM_RMA_TYPES(GDA_SHMEM_DECL_SIGNAL)
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* ---- Multi-variable waits and tests ------------------------------------------------------- */

#define GDA_SHMEM_DECL_MULTI(TYPE, NAME) \
    void shmem_##NAME##_wait_until_all(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                       TYPE cmp_value); \
    size_t shmem_##NAME##_wait_until_any(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                         TYPE cmp_value); \
    size_t shmem_##NAME##_wait_until_some(TYPE *ivars, size_t nelems, size_t *indices, \
                                          const int *status, int cmp, TYPE cmp_value); \
    void shmem_##NAME##_wait_until_all_vector(TYPE *ivars, size_t nelems, const int *status, \
                                              int cmp, TYPE *cmp_values); \
    size_t shmem_##NAME##_wait_until_any_vector(TYPE *ivars, size_t nelems, const int *status, \
                                                int cmp, TYPE *cmp_values); \
    size_t shmem_##NAME##_wait_until_some_vector(TYPE *ivars, size_t nelems, size_t *indices, \
                                                 const int *status, int cmp, TYPE *cmp_values); \
    int shmem_##NAME##_test_all(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                TYPE cmp_value); \
    size_t shmem_##NAME##_test_any(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                   TYPE cmp_value); \
    size_t shmem_##NAME##_test_some(TYPE *ivars, size_t nelems, size_t *indices, \
                                    const int *status, int cmp, TYPE cmp_value); \
    int shmem_##NAME##_test_all_vector(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                       TYPE *cmp_values); \
    size_t shmem_##NAME##_test_any_vector(TYPE *ivars, size_t nelems, const int *status, \
                                          int cmp, TYPE *cmp_values); \
    size_t shmem_##NAME##_test_some_vector(TYPE *ivars, size_t nelems, size_t *indices, \
                                           const int *status, int cmp, TYPE *cmp_values);
/* 1.5 lists short and unsigned short for these too. */
GDA_SHMEM_OLD_SYNC_TYPES(GDA_SHMEM_DECL_MULTI)
GDA_SHMEM_SYNC_TYPES(GDA_SHMEM_DECL_MULTI)

/* ---- Locks -------------------------------------------------------------------------------- */

void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

/* 1.3 cache routines (no-ops). */
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void *target);
void shmem_set_cache_line_inv(void *target);
void shmem_udcflush(void);
void shmem_udcflush_line(void *target);

/* ---- Teams -------------------------------------------------------------------------------- */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config, long xaxis_mask,
                        shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);
int shmem_team_sync(shmem_team_t team);
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);

/* ---- Collectives (teams) ------------------------------------------------------------------ */

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems,
                       int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);
#define GDA_SHMEM_DECL_COLL(TYPE, NAME) \
    int shmem_##NAME##_broadcast(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                 size_t nelems, int PE_root); \
    int shmem_##NAME##_collect(shmem_team_t team, TYPE *dest, const TYPE *source, size_t nelems); \
    int shmem_##NAME##_fcollect(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                size_t nelems); \
    int shmem_##NAME##_alltoall(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                size_t nelems); \
    int shmem_##NAME##_alltoalls(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                 ptrdiff_t dst, ptrdiff_t sst, size_t nelems);
GDA_SHMEM_RMA_TYPES(GDA_SHMEM_DECL_COLL)

#define GDA_SHMEM_DECL_REDUCE(TYPE, NAME, OP) \
    int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                     size_t nreduce);
#define GDA_SHMEM_BITWISE_RED_TYPES(X, OP) \
    X(unsigned char, uchar, OP) X(unsigned short, ushort, OP) X(unsigned int, uint, OP) \
    X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP) X(int8_t, int8, OP) \
    X(int16_t, int16, OP) X(int32_t, int32, OP) X(int64_t, int64, OP) X(uint8_t, uint8, OP) \
    X(uint16_t, uint16, OP) X(uint32_t, uint32, OP) X(uint64_t, uint64, OP) X(size_t, size, OP)
#define GDA_SHMEM_ORDERED_RED_TYPES(X, OP) \
    X(char, char, OP) X(signed char, schar, OP) X(short, short, OP) X(int, int, OP) \
    X(long, long, OP) X(long long, longlong, OP) X(ptrdiff_t, ptrdiff, OP) \
    X(float, float, OP) X(double, double, OP) GDA_SHMEM_BITWISE_RED_TYPES(X, OP)
GDA_SHMEM_BITWISE_RED_TYPES(GDA_SHMEM_DECL_REDUCE, and)
GDA_SHMEM_BITWISE_RED_TYPES(GDA_SHMEM_DECL_REDUCE, or)
GDA_SHMEM_BITWISE_RED_TYPES(GDA_SHMEM_DECL_REDUCE, xor)
GDA_SHMEM_ORDERED_RED_TYPES(GDA_SHMEM_DECL_REDUCE, max)
GDA_SHMEM_ORDERED_RED_TYPES(GDA_SHMEM_DECL_REDUCE, min)
GDA_SHMEM_ORDERED_RED_TYPES(GDA_SHMEM_DECL_REDUCE, sum)
GDA_SHMEM_ORDERED_RED_TYPES(GDA_SHMEM_DECL_REDUCE, prod)
#ifdef GDA_SHMEM_HAS_COMPLEX
GDA_SHMEM_DECL_REDUCE(GDA_SHMEM_COMPLEXF, complexf, sum)
GDA_SHMEM_DECL_REDUCE(GDA_SHMEM_COMPLEXF, complexf, prod)
GDA_SHMEM_DECL_REDUCE(GDA_SHMEM_COMPLEXD, complexd, sum)
GDA_SHMEM_DECL_REDUCE(GDA_SHMEM_COMPLEXD, complexd, prod)
#endif

/* ---- Collectives (active sets with pSync; the 1.4 names) ---------------------------------- */

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);
/* shmem_sync(team) (1.5) is shmem_team_sync; four arguments are the deprecated active-set form
 * above (the macro's own name is not expanded again inside it). */
#define gda_shmem_sync_1(team) shmem_team_sync(team)
#define gda_shmem_sync_4(PE_start, logPE_stride, PE_size, pSync) \
    shmem_sync(PE_start, logPE_stride, PE_size, pSync)
#define shmem_sync(...) GDA_SHMEM_BY_NARG(gda_shmem_sync_, __VA_ARGS__)
#define GDA_SHMEM_DECL_ACTIVE(BITS) \
    void shmem_broadcast##BITS(void *dest, const void *source, size_t nelems, int PE_root, \
                               int PE_start, int logPE_stride, int PE_size, long *pSync); \
    void shmem_collect##BITS(void *dest, const void *source, size_t nelems, int PE_start, \
                             int logPE_stride, int PE_size, long *pSync); \
    void shmem_fcollect##BITS(void *dest, const void *source, size_t nelems, int PE_start, \
                              int logPE_stride, int PE_size, long *pSync); \
    void shmem_alltoall##BITS(void *dest, const void *source, size_t nelems, int PE_start, \
                              int logPE_stride, int PE_size, long *pSync); \
    void shmem_alltoalls##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, \
                               size_t nelems, int PE_start, int logPE_stride, int PE_size, \
                               long *pSync);
GDA_SHMEM_DECL_ACTIVE(32)
GDA_SHMEM_DECL_ACTIVE(64)

#define GDA_SHMEM_DECL_TO_ALL(TYPE, NAME, OP) \
    void shmem_##NAME##_##OP##_to_all(TYPE *dest, const TYPE *source, int nreduce, int PE_start, \
                                      int logPE_stride, int PE_size, TYPE *pWrk, long *pSync);
#define GDA_SHMEM_INT_TO_ALL(OP) \
    GDA_SHMEM_DECL_TO_ALL(short, short, OP) GDA_SHMEM_DECL_TO_ALL(int, int, OP) \
    GDA_SHMEM_DECL_TO_ALL(long, long, OP) GDA_SHMEM_DECL_TO_ALL(long long, longlong, OP)
#define GDA_SHMEM_FLOAT_TO_ALL(OP) \
    GDA_SHMEM_INT_TO_ALL(OP) GDA_SHMEM_DECL_TO_ALL(float, float, OP) \
    GDA_SHMEM_DECL_TO_ALL(double, double, OP)
GDA_SHMEM_INT_TO_ALL(and)
GDA_SHMEM_INT_TO_ALL(or)
GDA_SHMEM_INT_TO_ALL(xor)
GDA_SHMEM_FLOAT_TO_ALL(max)
GDA_SHMEM_FLOAT_TO_ALL(min)
GDA_SHMEM_FLOAT_TO_ALL(sum)
GDA_SHMEM_FLOAT_TO_ALL(prod)
#ifdef GDA_SHMEM_HAS_COMPLEX
GDA_SHMEM_DECL_TO_ALL(GDA_SHMEM_COMPLEXF, complexf, sum)
GDA_SHMEM_DECL_TO_ALL(GDA_SHMEM_COMPLEXF, complexf, prod)
GDA_SHMEM_DECL_TO_ALL(GDA_SHMEM_COMPLEXD, complexd, sum)
GDA_SHMEM_DECL_TO_ALL(GDA_SHMEM_COMPLEXD, complexd, prod)
#endif

/* long double reductions: gathered with shmem_getmem and combined here, in C (the library is
 * written in Rust, which has no long double arithmetic). Each is collective like the others:
 * a synchronisation (every source ready), the gets, a second one (no member still reads a
 * source that dest may overlap), then this PE's dest. */
#define GDA_SHMEM_LD_OP_max(a, b) ((b) > (a) ? (b) : (a))
#define GDA_SHMEM_LD_OP_min(a, b) ((b) < (a) ? (b) : (a))
#define GDA_SHMEM_LD_OP_sum(a, b) ((a) + (b))
#define GDA_SHMEM_LD_OP_prod(a, b) ((a) * (b))
#define GDA_SHMEM_LD_REDUCE(OP) \
    static inline int shmem_longdouble_##OP##_reduce(shmem_team_t team, long double *dest, \
                                                     const long double *source, size_t n) { \
        int np = shmem_team_n_pes(team), me = shmem_team_my_pe(team); \
        long double *acc = (long double *)malloc((n ? n : 1) * sizeof *acc); \
        long double *more = (long double *)malloc((n ? n : 1) * sizeof *more); \
        if (np < 0 || !acc || !more) { \
            free(acc); \
            free(more); \
            return -1; \
        } \
        shmem_quiet(); \
        shmem_team_sync(team); \
        memcpy(acc, source, n * sizeof *acc); \
        for (int k = 0; k < np; k++) { \
            if (k == me) \
                continue; \
            shmem_getmem(more, source, n * sizeof *more, \
                         shmem_team_translate_pe(team, k, SHMEM_TEAM_WORLD)); \
            for (size_t i = 0; i < n; i++) \
                acc[i] = GDA_SHMEM_LD_OP_##OP(acc[i], more[i]); \
        } \
        shmem_team_sync(team); \
        memcpy(dest, acc, n * sizeof *acc); \
        free(acc); \
        free(more); \
        return 0; \
    } \
    static inline void shmem_longdouble_##OP##_to_all( \
        long double *dest, const long double *source, int nreduce, int PE_start, \
        int logPE_stride, int PE_size, long double *pWrk, long *pSync) { \
        size_t n = nreduce > 0 ? (size_t)nreduce : 0; \
        long double *acc = (long double *)malloc((n ? n : 1) * sizeof *acc); \
        long double *more = (long double *)malloc((n ? n : 1) * sizeof *more); \
        (void)pWrk; \
        if (!acc || !more) \
            shmem_global_exit(1); \
        shmem_barrier(PE_start, logPE_stride, PE_size, pSync); \
        memcpy(acc, source, n * sizeof *acc); \
        for (int k = 0; k < PE_size; k++) { \
            int pe = PE_start + (k << logPE_stride); \
            if (pe == shmem_my_pe()) \
                continue; \
            shmem_getmem(more, source, n * sizeof *more, pe); \
            for (size_t i = 0; i < n; i++) \
                acc[i] = GDA_SHMEM_LD_OP_##OP(acc[i], more[i]); \
        } \
        shmem_barrier(PE_start, logPE_stride, PE_size, pSync); \
        memcpy(dest, acc, n * sizeof *acc); \
        free(acc); \
        free(more); \
    }
GDA_SHMEM_LD_REDUCE(max)
GDA_SHMEM_LD_REDUCE(min)
GDA_SHMEM_LD_REDUCE(sum)
GDA_SHMEM_LD_REDUCE(prod)

/* ---- Type-generic forms (C11) ------------------------------------------------------------- */

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
/* Closes an association list without a default (no type matches it; the expression is never
 * selected). */
struct gda_shmem_no_match;
#define GDA_SHMEM_G_END struct gda_shmem_no_match *: 0

/* RMA (with or without a context first: chosen by the number of arguments). */
#define GDA_SHMEM_G_PUT(TYPE, NAME) TYPE *: shmem_##NAME##_put,
#define GDA_SHMEM_G_CTX_PUT(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_put,
#define gda_shmem_put_4(dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_PUT) GDA_SHMEM_G_END)(dest, source, nelems, pe)
#define gda_shmem_put_5(ctx, dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_PUT) GDA_SHMEM_G_END)(ctx, dest, source, nelems, pe)
#define shmem_put(...) GDA_SHMEM_BY_NARG(gda_shmem_put_, __VA_ARGS__)
#define GDA_SHMEM_G_GET(TYPE, NAME) TYPE *: shmem_##NAME##_get,
#define GDA_SHMEM_G_CTX_GET(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_get,
#define gda_shmem_get_4(dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_GET) GDA_SHMEM_G_END)(dest, source, nelems, pe)
#define gda_shmem_get_5(ctx, dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_GET) GDA_SHMEM_G_END)(ctx, dest, source, nelems, pe)
#define shmem_get(...) GDA_SHMEM_BY_NARG(gda_shmem_get_, __VA_ARGS__)
#define GDA_SHMEM_G_PUT_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_put_nbi,
#define GDA_SHMEM_G_CTX_PUT_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_put_nbi,
#define gda_shmem_put_nbi_4(dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_PUT_NBI) GDA_SHMEM_G_END)(dest, source, nelems, pe)
#define gda_shmem_put_nbi_5(ctx, dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_PUT_NBI) GDA_SHMEM_G_END)(ctx, dest, source, nelems, pe)
#define shmem_put_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_put_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_GET_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_get_nbi,
#define GDA_SHMEM_G_CTX_GET_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_get_nbi,
#define gda_shmem_get_nbi_4(dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_GET_NBI) GDA_SHMEM_G_END)(dest, source, nelems, pe)
#define gda_shmem_get_nbi_5(ctx, dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_GET_NBI) GDA_SHMEM_G_END)(ctx, dest, source, nelems, pe)
#define shmem_get_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_get_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_IPUT(TYPE, NAME) TYPE *: shmem_##NAME##_iput,
#define GDA_SHMEM_G_CTX_IPUT(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_iput,
#define gda_shmem_iput_6(dest, source, dst, sst, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_IPUT) GDA_SHMEM_G_END)(dest, source, dst, sst, nelems, pe)
#define gda_shmem_iput_7(ctx, dest, source, dst, sst, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_IPUT) GDA_SHMEM_G_END)(ctx, dest, source, dst, sst, nelems, pe)
#define shmem_iput(...) GDA_SHMEM_BY_NARG(gda_shmem_iput_, __VA_ARGS__)
#define GDA_SHMEM_G_IGET(TYPE, NAME) TYPE *: shmem_##NAME##_iget,
#define GDA_SHMEM_G_CTX_IGET(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_iget,
#define gda_shmem_iget_6(dest, source, dst, sst, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_IGET) GDA_SHMEM_G_END)(dest, source, dst, sst, nelems, pe)
#define gda_shmem_iget_7(ctx, dest, source, dst, sst, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_IGET) GDA_SHMEM_G_END)(ctx, dest, source, dst, sst, nelems, pe)
#define shmem_iget(...) GDA_SHMEM_BY_NARG(gda_shmem_iget_, __VA_ARGS__)
#define GDA_SHMEM_G_P(TYPE, NAME) TYPE *: shmem_##NAME##_p,
#define GDA_SHMEM_G_CTX_P(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_p,
#define gda_shmem_p_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_P) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_p_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_P) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_p(...) GDA_SHMEM_BY_NARG(gda_shmem_p_, __VA_ARGS__)
#define GDA_SHMEM_G_G(TYPE, NAME) TYPE *: shmem_##NAME##_g, const TYPE *: shmem_##NAME##_g,
#define GDA_SHMEM_G_CTX_G(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_g, const TYPE *: shmem_ctx_##NAME##_g,
#define gda_shmem_g_2(source, pe) \
    _Generic((source), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_G) GDA_SHMEM_G_END)(source, pe)
#define gda_shmem_g_3(ctx, source, pe) \
    _Generic((source), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_G) GDA_SHMEM_G_END)(ctx, source, pe)
#define shmem_g(...) GDA_SHMEM_BY_NARG(gda_shmem_g_, __VA_ARGS__)
#define GDA_SHMEM_G_PUT_SIGNAL(TYPE, NAME) TYPE *: shmem_##NAME##_put_signal,
#define GDA_SHMEM_G_CTX_PUT_SIGNAL(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_put_signal,
#define gda_shmem_put_signal_7(dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_PUT_SIGNAL) GDA_SHMEM_G_END)(dest, source, nelems, sig_addr, signal, sig_op, pe)
#define gda_shmem_put_signal_8(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_PUT_SIGNAL) GDA_SHMEM_G_END)(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe)
#define shmem_put_signal(...) GDA_SHMEM_BY_NARG(gda_shmem_put_signal_, __VA_ARGS__)
#define GDA_SHMEM_G_PUT_SIGNAL_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_put_signal_nbi,
#define GDA_SHMEM_G_CTX_PUT_SIGNAL_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_put_signal_nbi,
#define gda_shmem_put_signal_nbi_7(dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_PUT_SIGNAL_NBI) GDA_SHMEM_G_END)(dest, source, nelems, sig_addr, signal, sig_op, pe)
#define gda_shmem_put_signal_nbi_8(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_CTX_PUT_SIGNAL_NBI) GDA_SHMEM_G_END)(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe)
#define shmem_put_signal_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_put_signal_nbi_, __VA_ARGS__)

/* Atomics: extended types (fetch, set, swap), standard types, bitwise types. */
#define GDA_SHMEM_G_ATOMIC_FETCH(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch, const TYPE *: shmem_##NAME##_atomic_fetch,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch, const TYPE *: shmem_ctx_##NAME##_atomic_fetch,
#define gda_shmem_atomic_fetch_2(source, pe) \
    _Generic((source), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH) GDA_SHMEM_G_END)(source, pe)
#define gda_shmem_atomic_fetch_3(ctx, source, pe) \
    _Generic((source), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH) GDA_SHMEM_G_END)(ctx, source, pe)
#define shmem_atomic_fetch(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_SET(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_set,
#define GDA_SHMEM_G_CTX_ATOMIC_SET(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_set,
#define gda_shmem_atomic_set_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_ATOMIC_SET) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_set_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_SET) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_set(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_set_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_SWAP(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_swap,
#define GDA_SHMEM_G_CTX_ATOMIC_SWAP(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_swap,
#define gda_shmem_atomic_swap_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_ATOMIC_SWAP) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_swap_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_SWAP) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_swap(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_swap_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_nbi,
#define gda_shmem_atomic_fetch_nbi_3(fetch, source, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_NBI) GDA_SHMEM_G_END)(fetch, source, pe)
#define gda_shmem_atomic_fetch_nbi_4(ctx, fetch, source, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_NBI) GDA_SHMEM_G_END)(ctx, fetch, source, pe)
#define shmem_atomic_fetch_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_SWAP_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_swap_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_SWAP_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_swap_nbi,
#define gda_shmem_atomic_swap_nbi_4(fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_ATOMIC_SWAP_NBI) GDA_SHMEM_G_END)(fetch, dest, value, pe)
#define gda_shmem_atomic_swap_nbi_5(ctx, fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_EXTENDED_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_SWAP_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, value, pe)
#define shmem_atomic_swap_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_swap_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_COMPARE_SWAP(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_compare_swap,
#define GDA_SHMEM_G_CTX_ATOMIC_COMPARE_SWAP(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_compare_swap,
#define gda_shmem_atomic_compare_swap_4(dest, cond, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_COMPARE_SWAP) GDA_SHMEM_G_END)(dest, cond, value, pe)
#define gda_shmem_atomic_compare_swap_5(ctx, dest, cond, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_COMPARE_SWAP) GDA_SHMEM_G_END)(ctx, dest, cond, value, pe)
#define shmem_atomic_compare_swap(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_compare_swap_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_INC(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_inc,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_INC(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_inc,
#define gda_shmem_atomic_fetch_inc_2(dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_INC) GDA_SHMEM_G_END)(dest, pe)
#define gda_shmem_atomic_fetch_inc_3(ctx, dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_INC) GDA_SHMEM_G_END)(ctx, dest, pe)
#define shmem_atomic_fetch_inc(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_inc_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_INC(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_inc,
#define GDA_SHMEM_G_CTX_ATOMIC_INC(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_inc,
#define gda_shmem_atomic_inc_2(dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_INC) GDA_SHMEM_G_END)(dest, pe)
#define gda_shmem_atomic_inc_3(ctx, dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_INC) GDA_SHMEM_G_END)(ctx, dest, pe)
#define shmem_atomic_inc(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_inc_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_ADD(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_add,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_ADD(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_add,
#define gda_shmem_atomic_fetch_add_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_ADD) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_fetch_add_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_ADD) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_fetch_add(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_add_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_ADD(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_add,
#define GDA_SHMEM_G_CTX_ATOMIC_ADD(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_add,
#define gda_shmem_atomic_add_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_ADD) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_add_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_ADD) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_add(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_add_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_COMPARE_SWAP_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_compare_swap_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_COMPARE_SWAP_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_compare_swap_nbi,
#define gda_shmem_atomic_compare_swap_nbi_5(fetch, dest, cond, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_COMPARE_SWAP_NBI) GDA_SHMEM_G_END)(fetch, dest, cond, value, pe)
#define gda_shmem_atomic_compare_swap_nbi_6(ctx, fetch, dest, cond, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_COMPARE_SWAP_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, cond, value, pe)
#define shmem_atomic_compare_swap_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_compare_swap_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_INC_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_inc_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_INC_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_inc_nbi,
#define gda_shmem_atomic_fetch_inc_nbi_3(fetch, dest, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_INC_NBI) GDA_SHMEM_G_END)(fetch, dest, pe)
#define gda_shmem_atomic_fetch_inc_nbi_4(ctx, fetch, dest, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_INC_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, pe)
#define shmem_atomic_fetch_inc_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_inc_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_ADD_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_add_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_ADD_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_add_nbi,
#define gda_shmem_atomic_fetch_add_nbi_4(fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_ADD_NBI) GDA_SHMEM_G_END)(fetch, dest, value, pe)
#define gda_shmem_atomic_fetch_add_nbi_5(ctx, fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_ADD_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, value, pe)
#define shmem_atomic_fetch_add_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_add_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_AND(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_and,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_AND(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_and,
#define gda_shmem_atomic_fetch_and_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_AND) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_fetch_and_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_AND) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_fetch_and(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_and_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_AND(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_and,
#define GDA_SHMEM_G_CTX_ATOMIC_AND(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_and,
#define gda_shmem_atomic_and_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_AND) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_and_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_AND) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_and(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_and_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_AND_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_and_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_AND_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_and_nbi,
#define gda_shmem_atomic_fetch_and_nbi_4(fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_AND_NBI) GDA_SHMEM_G_END)(fetch, dest, value, pe)
#define gda_shmem_atomic_fetch_and_nbi_5(ctx, fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_AND_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, value, pe)
#define shmem_atomic_fetch_and_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_and_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_OR(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_or,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_OR(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_or,
#define gda_shmem_atomic_fetch_or_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_OR) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_fetch_or_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_OR) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_fetch_or(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_or_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_OR(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_or,
#define GDA_SHMEM_G_CTX_ATOMIC_OR(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_or,
#define gda_shmem_atomic_or_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_OR) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_or_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_OR) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_or(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_or_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_OR_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_or_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_OR_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_or_nbi,
#define gda_shmem_atomic_fetch_or_nbi_4(fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_OR_NBI) GDA_SHMEM_G_END)(fetch, dest, value, pe)
#define gda_shmem_atomic_fetch_or_nbi_5(ctx, fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_OR_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, value, pe)
#define shmem_atomic_fetch_or_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_or_nbi_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_XOR(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_xor,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_XOR(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_xor,
#define gda_shmem_atomic_fetch_xor_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_XOR) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_fetch_xor_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_XOR) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_fetch_xor(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_xor_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_XOR(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_xor,
#define GDA_SHMEM_G_CTX_ATOMIC_XOR(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_xor,
#define gda_shmem_atomic_xor_3(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_XOR) GDA_SHMEM_G_END)(dest, value, pe)
#define gda_shmem_atomic_xor_4(ctx, dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_XOR) GDA_SHMEM_G_END)(ctx, dest, value, pe)
#define shmem_atomic_xor(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_xor_, __VA_ARGS__)
#define GDA_SHMEM_G_ATOMIC_FETCH_XOR_NBI(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_xor_nbi,
#define GDA_SHMEM_G_CTX_ATOMIC_FETCH_XOR_NBI(TYPE, NAME) TYPE *: shmem_ctx_##NAME##_atomic_fetch_xor_nbi,
#define gda_shmem_atomic_fetch_xor_nbi_4(fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_ATOMIC_FETCH_XOR_NBI) GDA_SHMEM_G_END)(fetch, dest, value, pe)
#define gda_shmem_atomic_fetch_xor_nbi_5(ctx, fetch, dest, value, pe) \
    _Generic((fetch), GDA_SHMEM_GENERIC_BITWISE_AMO_TYPES(GDA_SHMEM_G_CTX_ATOMIC_FETCH_XOR_NBI) GDA_SHMEM_G_END)(ctx, fetch, dest, value, pe)
#define shmem_atomic_fetch_xor_nbi(...) GDA_SHMEM_BY_NARG(gda_shmem_atomic_fetch_xor_nbi_, __VA_ARGS__)

/* The deprecated (1.3) atomics. */
#define GDA_SHMEM_G_FETCH(TYPE, NAME) TYPE *: shmem_##NAME##_fetch, const TYPE *: shmem_##NAME##_fetch,
#define shmem_fetch(source, pe) \
    _Generic((source), GDA_SHMEM_GENERIC_OLD_EXTENDED_AMO_TYPES(GDA_SHMEM_G_FETCH) GDA_SHMEM_G_END)(source, pe)
#define GDA_SHMEM_G_SET(TYPE, NAME) TYPE *: shmem_##NAME##_set,
#define shmem_set(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_EXTENDED_AMO_TYPES(GDA_SHMEM_G_SET) GDA_SHMEM_G_END)(dest, value, pe)
#define GDA_SHMEM_G_SWAP(TYPE, NAME) TYPE *: shmem_##NAME##_swap,
#define shmem_swap(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_EXTENDED_AMO_TYPES(GDA_SHMEM_G_SWAP) GDA_SHMEM_G_END)(dest, value, pe)
#define GDA_SHMEM_G_CSWAP(TYPE, NAME) TYPE *: shmem_##NAME##_cswap,
#define shmem_cswap(dest, cond, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_AMO_TYPES(GDA_SHMEM_G_CSWAP) GDA_SHMEM_G_END)(dest, cond, value, pe)
#define GDA_SHMEM_G_FINC(TYPE, NAME) TYPE *: shmem_##NAME##_finc,
#define shmem_finc(dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_AMO_TYPES(GDA_SHMEM_G_FINC) GDA_SHMEM_G_END)(dest, pe)
#define GDA_SHMEM_G_INC(TYPE, NAME) TYPE *: shmem_##NAME##_inc,
#define shmem_inc(dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_AMO_TYPES(GDA_SHMEM_G_INC) GDA_SHMEM_G_END)(dest, pe)
#define GDA_SHMEM_G_FADD(TYPE, NAME) TYPE *: shmem_##NAME##_fadd,
#define shmem_fadd(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_AMO_TYPES(GDA_SHMEM_G_FADD) GDA_SHMEM_G_END)(dest, value, pe)
#define GDA_SHMEM_G_ADD(TYPE, NAME) TYPE *: shmem_##NAME##_add,
#define shmem_add(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_OLD_AMO_TYPES(GDA_SHMEM_G_ADD) GDA_SHMEM_G_END)(dest, value, pe)

/* Collectives on teams. */
#define GDA_SHMEM_G_BROADCAST(TYPE, NAME) TYPE *: shmem_##NAME##_broadcast,
#define shmem_broadcast(team, dest, source, nelems, PE_root) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_BROADCAST) GDA_SHMEM_G_END)(team, dest, source, nelems, PE_root)
#define GDA_SHMEM_G_COLLECT(TYPE, NAME) TYPE *: shmem_##NAME##_collect,
#define shmem_collect(team, dest, source, nelems) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_COLLECT) GDA_SHMEM_G_END)(team, dest, source, nelems)
#define GDA_SHMEM_G_FCOLLECT(TYPE, NAME) TYPE *: shmem_##NAME##_fcollect,
#define shmem_fcollect(team, dest, source, nelems) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_FCOLLECT) GDA_SHMEM_G_END)(team, dest, source, nelems)
#define GDA_SHMEM_G_ALLTOALL(TYPE, NAME) TYPE *: shmem_##NAME##_alltoall,
#define shmem_alltoall(team, dest, source, nelems) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_ALLTOALL) GDA_SHMEM_G_END)(team, dest, source, nelems)
#define GDA_SHMEM_G_ALLTOALLS(TYPE, NAME) TYPE *: shmem_##NAME##_alltoalls,
#define shmem_alltoalls(team, dest, source, dst, sst, nelems) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_ALLTOALLS) GDA_SHMEM_G_END)(team, dest, source, dst, sst, nelems)
#define GDA_SHMEM_G_AND_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_and_reduce,
#define shmem_and_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_RED_TYPES(GDA_SHMEM_G_AND_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)
#define GDA_SHMEM_G_OR_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_or_reduce,
#define shmem_or_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_RED_TYPES(GDA_SHMEM_G_OR_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)
#define GDA_SHMEM_G_XOR_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_xor_reduce,
#define shmem_xor_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_BITWISE_RED_TYPES(GDA_SHMEM_G_XOR_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)
#define GDA_SHMEM_G_MAX_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_max_reduce,
#define shmem_max_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_ORDERED_RED_TYPES(GDA_SHMEM_G_MAX_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)
#define GDA_SHMEM_G_MIN_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_min_reduce,
#define shmem_min_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_ORDERED_RED_TYPES(GDA_SHMEM_G_MIN_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)
#define GDA_SHMEM_G_SUM_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_sum_reduce,
#define shmem_sum_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_ARITH_RED_TYPES(GDA_SHMEM_G_SUM_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)
#define GDA_SHMEM_G_PROD_REDUCE(TYPE, NAME) TYPE *: shmem_##NAME##_prod_reduce,
#define shmem_prod_reduce(team, dest, source, nreduce) \
    _Generic((dest), GDA_SHMEM_GENERIC_ARITH_RED_TYPES(GDA_SHMEM_G_PROD_REDUCE) GDA_SHMEM_G_END)(team, dest, source, nreduce)

/* Point-to-point synchronization (the deprecated short and unsigned short forms too). */
/* A variable a program waits on may be declared volatile (1.3's prototypes took
 * `volatile TYPE *`): each type is matched with and without the qualifier, which the call then
 * drops (the routines read the variable with atomic loads either way). Any other type is a
 * compile error, never a routine of another width. */
#define GDA_SHMEM_G_WAIT_UNTIL(TYPE, NAME) \
    TYPE *: shmem_##NAME##_wait_until, volatile TYPE *: shmem_##NAME##_wait_until,
#define shmem_wait_until(ivar, cmp, cmp_value) \
    _Generic((ivar), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL) GDA_SHMEM_G_END)((void *)(ivar), cmp, cmp_value)
#define GDA_SHMEM_G_TEST(TYPE, NAME) TYPE *: shmem_##NAME##_test, volatile TYPE *: shmem_##NAME##_test,
#define shmem_test(ivar, cmp, cmp_value) \
    _Generic((ivar), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST) GDA_SHMEM_G_END)((void *)(ivar), cmp, cmp_value)
#define GDA_SHMEM_G_WAIT(TYPE, NAME) TYPE *: shmem_##NAME##_wait, volatile TYPE *: shmem_##NAME##_wait,
#define shmem_wait(ivar, cmp_value) \
    _Generic((ivar), GDA_SHMEM_GENERIC_WAIT_TYPES(GDA_SHMEM_G_WAIT) GDA_SHMEM_G_END)((void *)(ivar), cmp_value)
#define GDA_SHMEM_G_WAIT_UNTIL_ALL(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until_all,
#define shmem_wait_until_all(ivars, nelems, status, cmp, cmp_value) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL_ALL) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_value)
#define GDA_SHMEM_G_WAIT_UNTIL_ALL_VECTOR(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until_all_vector,
#define shmem_wait_until_all_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL_ALL_VECTOR) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_values)
#define GDA_SHMEM_G_WAIT_UNTIL_ANY(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until_any,
#define shmem_wait_until_any(ivars, nelems, status, cmp, cmp_value) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL_ANY) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_value)
#define GDA_SHMEM_G_WAIT_UNTIL_ANY_VECTOR(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until_any_vector,
#define shmem_wait_until_any_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL_ANY_VECTOR) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_values)
#define GDA_SHMEM_G_WAIT_UNTIL_SOME(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until_some,
#define shmem_wait_until_some(ivars, nelems, indices, status, cmp, cmp_value) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL_SOME) GDA_SHMEM_G_END)(ivars, nelems, indices, status, cmp, cmp_value)
#define GDA_SHMEM_G_WAIT_UNTIL_SOME_VECTOR(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until_some_vector,
#define shmem_wait_until_some_vector(ivars, nelems, indices, status, cmp, cmp_values) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_WAIT_UNTIL_SOME_VECTOR) GDA_SHMEM_G_END)(ivars, nelems, indices, status, cmp, cmp_values)
#define GDA_SHMEM_G_TEST_ALL(TYPE, NAME) TYPE *: shmem_##NAME##_test_all,
#define shmem_test_all(ivars, nelems, status, cmp, cmp_value) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST_ALL) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_value)
#define GDA_SHMEM_G_TEST_ALL_VECTOR(TYPE, NAME) TYPE *: shmem_##NAME##_test_all_vector,
#define shmem_test_all_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST_ALL_VECTOR) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_values)
#define GDA_SHMEM_G_TEST_ANY(TYPE, NAME) TYPE *: shmem_##NAME##_test_any,
#define shmem_test_any(ivars, nelems, status, cmp, cmp_value) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST_ANY) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_value)
#define GDA_SHMEM_G_TEST_ANY_VECTOR(TYPE, NAME) TYPE *: shmem_##NAME##_test_any_vector,
#define shmem_test_any_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST_ANY_VECTOR) GDA_SHMEM_G_END)(ivars, nelems, status, cmp, cmp_values)
#define GDA_SHMEM_G_TEST_SOME(TYPE, NAME) TYPE *: shmem_##NAME##_test_some,
#define shmem_test_some(ivars, nelems, indices, status, cmp, cmp_value) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST_SOME) GDA_SHMEM_G_END)(ivars, nelems, indices, status, cmp, cmp_value)
#define GDA_SHMEM_G_TEST_SOME_VECTOR(TYPE, NAME) TYPE *: shmem_##NAME##_test_some_vector,
#define shmem_test_some_vector(ivars, nelems, indices, status, cmp, cmp_values) \
    _Generic((ivars), GDA_SHMEM_GENERIC_OLD_SYNC_TYPES(GDA_SHMEM_G_TEST_SOME_VECTOR) GDA_SHMEM_G_END)(ivars, nelems, indices, status, cmp, cmp_values)

#endif

#ifdef __cplusplus
}

#ifdef GDA_SHMEM_HAS_COMPLEX
/* The complex reductions on std::complex (same layout as the C types), as C++ programs
 * written for other OpenSHMEM libraries call them. */
#define GDA_SHMEM_CXX_COMPLEX(T, C, NAME, OP) \
    inline int shmem_##NAME##_##OP##_reduce(shmem_team_t team, std::complex<T> *dest, \
                                            const std::complex<T> *source, size_t nreduce) { \
        return shmem_##NAME##_##OP##_reduce(team, reinterpret_cast<C *>(dest), \
                                            reinterpret_cast<const C *>(source), nreduce); \
    } \
    inline void shmem_##NAME##_##OP##_to_all(std::complex<T> *dest, const std::complex<T> *source, \
                                             int nreduce, int PE_start, int logPE_stride, \
                                             int PE_size, std::complex<T> *pWrk, long *pSync) { \
        shmem_##NAME##_##OP##_to_all(reinterpret_cast<C *>(dest), reinterpret_cast<const C *>(source), \
                                     nreduce, PE_start, logPE_stride, PE_size, \
                                     reinterpret_cast<C *>(pWrk), pSync); \
    }
GDA_SHMEM_CXX_COMPLEX(float, GDA_SHMEM_COMPLEXF, complexf, sum)
GDA_SHMEM_CXX_COMPLEX(float, GDA_SHMEM_COMPLEXF, complexf, prod)
GDA_SHMEM_CXX_COMPLEX(double, GDA_SHMEM_COMPLEXD, complexd, sum)
GDA_SHMEM_CXX_COMPLEX(double, GDA_SHMEM_COMPLEXD, complexd, prod)
#undef GDA_SHMEM_CXX_COMPLEX
#endif
#endif

#endif /* GDA_SHMEM_H */
