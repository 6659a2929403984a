/*
 * shmem.h — the OpenSHMEM C API of gda (libgdashmem.so).
 *
 * Build with `gdacc prog.c -o prog`, run with `gdarun -n 4 ./prog`. PEs on one host reach each
 * other by load/store (P2P); GDA_SHMEM_TRANSPORT=rdma sends every remote access through the
 * NIC (the software NIC by default, GDA_SHMEM_PROVIDER=native|mlx5|bnxt picks the queue
 * format it runs). Every misuse (a call before shmem_init, an address outside the symmetric
 * heap, a bad comparison) prints what is wrong on stderr and ends the job with status 1.
 *
 * Values of the constants are gda's own choices where the specification leaves them open;
 * programs must use the names, as with every OpenSHMEM library.
 */
#ifndef GDA_SHMEM_H
#define GDA_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Library constants ------------------------------------------------------------------ */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "gda"

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

/* pSync arrays of the active-set routines (deprecated in 1.5, still provided). */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_BARRIER_SYNC_SIZE 16
#define SHMEM_BCAST_SYNC_SIZE 16
#define SHMEM_REDUCE_SYNC_SIZE 16
#define SHMEM_COLLECT_SYNC_SIZE 16
#define SHMEM_ALLTOALL_SYNC_SIZE 16
#define SHMEM_ALLTOALLS_SYNC_SIZE 16
#define SHMEM_SYNC_SIZE 16
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1

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

/* Bitwise AMO types (and, or, xor). */
#define GDA_SHMEM_BITWISE_AMO_TYPES(X) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

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
void *shmalloc(size_t size);
void shfree(void *ptr);

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

#define GDA_SHMEM_DECL_BITWISE(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_fetch_and(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_and(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_or(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_or(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_xor(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_xor(TYPE *dest, TYPE value, int pe);
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

/* ---- Point-to-point synchronization ------------------------------------------------------- */

#define GDA_SHMEM_DECL_SYNC(TYPE, NAME) \
    void shmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE cmp_value); \
    int shmem_##NAME##_test(TYPE *ivar, int cmp, TYPE cmp_value); \
    void shmem_##NAME##_wait(TYPE *ivar, TYPE cmp_value);
GDA_SHMEM_SYNC_TYPES(GDA_SHMEM_DECL_SYNC)

/* ---- Memory ordering and barriers --------------------------------------------------------- */

void shmem_fence(void);
void shmem_quiet(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);

/* ---- Type-generic forms (C11) ------------------------------------------------------------- */

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
#define GDA_SHMEM_G_RMA(TYPE, NAME) TYPE *: shmem_##NAME##_put,
#define shmem_put(dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_RMA) default: shmem_putmem)( \
        dest, source, nelems, pe)
#define GDA_SHMEM_G_GET(TYPE, NAME) TYPE *: shmem_##NAME##_get,
#define shmem_get(dest, source, nelems, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_GET) default: shmem_getmem)( \
        dest, source, nelems, pe)
#define GDA_SHMEM_G_P(TYPE, NAME) TYPE *: shmem_##NAME##_p,
#define shmem_p(dest, value, pe) _Generic((dest), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_P) \
    default: shmem_int_p)(dest, value, pe)
#define GDA_SHMEM_G_G(TYPE, NAME) TYPE *: shmem_##NAME##_g,
#define shmem_g(source, pe) _Generic((source), GDA_SHMEM_GENERIC_RMA_TYPES(GDA_SHMEM_G_G) \
    default: shmem_int_g)(source, pe)
#define GDA_SHMEM_G_FADD(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_add,
#define shmem_atomic_fetch_add(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_FADD) default: shmem_long_atomic_fetch_add)( \
        dest, value, pe)
#define GDA_SHMEM_G_ADD(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_add,
#define shmem_atomic_add(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_ADD) default: shmem_long_atomic_add)( \
        dest, value, pe)
#define GDA_SHMEM_G_FINC(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_fetch_inc,
#define shmem_atomic_fetch_inc(dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_FINC) default: shmem_long_atomic_fetch_inc)( \
        dest, pe)
#define GDA_SHMEM_G_INC(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_inc,
#define shmem_atomic_inc(dest, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_INC) default: shmem_long_atomic_inc)(dest, pe)
#define GDA_SHMEM_G_CSWAP(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_compare_swap,
#define shmem_atomic_compare_swap(dest, cond, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_CSWAP) \
             default: shmem_long_atomic_compare_swap)(dest, cond, value, pe)
#define GDA_SHMEM_G_SWAP(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_swap,
#define shmem_atomic_swap(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_SWAP) default: shmem_long_atomic_swap)( \
        dest, value, pe)
#define GDA_SHMEM_G_FETCH(TYPE, NAME) const TYPE *: shmem_##NAME##_atomic_fetch, \
    TYPE *: shmem_##NAME##_atomic_fetch,
#define shmem_atomic_fetch(source, pe) \
    _Generic((source), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_FETCH) \
             default: shmem_long_atomic_fetch)(source, pe)
#define GDA_SHMEM_G_SET(TYPE, NAME) TYPE *: shmem_##NAME##_atomic_set,
#define shmem_atomic_set(dest, value, pe) \
    _Generic((dest), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_SET) default: shmem_long_atomic_set)( \
        dest, value, pe)
#define GDA_SHMEM_G_WAIT(TYPE, NAME) TYPE *: shmem_##NAME##_wait_until,
#define shmem_wait_until(ivar, cmp, value) \
    _Generic((ivar), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_WAIT) default: shmem_long_wait_until)( \
        ivar, cmp, value)
#define GDA_SHMEM_G_TEST(TYPE, NAME) TYPE *: shmem_##NAME##_test,
#define shmem_test(ivar, cmp, value) \
    _Generic((ivar), GDA_SHMEM_GENERIC_AMO_TYPES(GDA_SHMEM_G_TEST) default: shmem_long_test)( \
        ivar, cmp, value)
#endif

#ifdef __cplusplus
}
#endif

#endif /* GDA_SHMEM_H */
