/* Run-time checks of the OpenSHMEM 1.5 forms issue 27 found missing, for every type the
 * specification gives each: the C11 type-generic forms with and without a context first (RMA,
 * atomics, put-with-signal), the non-blocking fetching atomics (typed, context and generic),
 * the extended AMO types (float, double), the deprecated 1.3 atomics and waits (short
 * included), the generic multi-variable waits and tests, the generic team collectives and
 * reductions, shmem_sync in both its forms, shmem_pcontrol, shmem_malloc_with_hints, shrealloc
 * and shmemalign. Every value is checked; `gdarun -n N ./spec_forms` (N >= 2) prints one line
 * per PE with its count of checks, and a failed check exits with status 3 and says which.
 *
 * With an argument it misuses a new routine instead (for the misuse test): `null-fetch`,
 * `ctx-outside-team` (a PE number past a team context's team).
 */
#include <complex.h>
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
/* A check inside a per-type function: names the type too. */
#define CHECKT(name, cond)                                                             \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "PE %d: %s: check failed at line %d: %s\n", shmem_my_pe(), \
                    name, __LINE__, #cond);                                            \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

static int me, npes, right, left;
static shmem_ctx_t ctx; /* a created context: every context form runs on it */

/* ---- The specification's type tables (its own, not the header's) ------------------------ */

#define RMA_TYPES(X) \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char) \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) \
    X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) \
    X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)
#define STD_AMO_TYPES(X) \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)
#define EXT_AMO_TYPES(X) X(float, float) X(double, double) STD_AMO_TYPES(X)
#define BITWISE_AMO_TYPES(X) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)
#define SYNC_TYPES(X) STD_AMO_TYPES(X)
#define BITWISE_RED_TYPES(X) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)
#define SIZES(X) X(8) X(16) X(32) X(64) X(128)
#define ORDERED_RED_TYPES(X) \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long) \
    X(long long, longlong) X(ptrdiff_t, ptrdiff) X(float, float) X(double, double) \
    X(long double, longdouble) BITWISE_RED_TYPES(X)

/* Each test body below runs twice per type: with the type-generic forms (G) and with the
 * typed names (T); OP calls a routine without a context, CX with the created context. */
#define OP_G(N, op, ...) shmem_##op(__VA_ARGS__)
#define CX_G(N, op, ...) shmem_##op(ctx, __VA_ARGS__)
#define OP_T(N, op, ...) shmem_##N##_##op(__VA_ARGS__)
#define CX_T(N, op, ...) shmem_ctx_##N##_##op(ctx, __VA_ARGS__)
/* Defines the G and T functions of a body. */
#define BOTH(BODY, T, N) BODY(T, N, OP_G, CX_G, g) BODY(T, N, OP_T, CX_T, t)

/* ---- RMA: every form, with and without a context, on every RMA type ---------------------- */

#define RMA_VARS(T, N) static T N##_dst[16], N##_src[16]; static uint64_t N##_sig;
RMA_TYPES(RMA_VARS)
#define RMA_BODY(T, N, OP, CX, F)                                                          \
    static void rma_##N##_##F(void) {                                                      \
        const char *t = #N " (" #F ")";                                                    \
        T got[8];                                                                          \
        for (int i = 0; i < 16; i++) {                                                     \
            N##_src[i] = (T)(me * 10 + i + 1);                                             \
            N##_dst[i] = (T)0;                                                             \
        }                                                                                  \
        N##_sig = 0;                                                                       \
        shmem_barrier_all();                                                               \
        OP(N, put, N##_dst, N##_src, 2, right);                                            \
        CX(N, put, N##_dst + 2, N##_src, 2, right);                                        \
        OP(N, put_nbi, N##_dst + 4, N##_src, 2, right);                                    \
        CX(N, put_nbi, N##_dst + 6, N##_src, 2, right);                                    \
        OP(N, p, N##_dst + 8, (T)(me + 50), right);                                        \
        CX(N, p, N##_dst + 9, (T)(me + 60), right);                                        \
        OP(N, iput, N##_dst + 10, N##_src, 2, 1, 2, right);     /* dst 10, 12 */          \
        CX(N, iput, N##_dst + 11, N##_src + 2, 2, 1, 2, right); /* dst 11, 13 */          \
        shmem_ctx_quiet(ctx);                                                              \
        shmem_barrier_all();                                                               \
        for (int k = 0; k < 4; k++) {                                                      \
            CHECKT(t, N##_dst[2 * k] == (T)(left * 10 + 1));                               \
            CHECKT(t, N##_dst[2 * k + 1] == (T)(left * 10 + 2));                           \
        }                                                                                  \
        CHECKT(t, N##_dst[8] == (T)(left + 50) && N##_dst[9] == (T)(left + 60));           \
        CHECKT(t, N##_dst[10] == (T)(left * 10 + 1) && N##_dst[12] == (T)(left * 10 + 2)); \
        CHECKT(t, N##_dst[11] == (T)(left * 10 + 3) && N##_dst[13] == (T)(left * 10 + 4)); \
        memset(got, 0, sizeof got);                                                        \
        OP(N, get, got, N##_src, 2, right);                                                \
        CX(N, get, got + 2, N##_src + 2, 2, right);                                        \
        OP(N, get_nbi, got + 4, N##_src + 4, 1, right);                                    \
        CX(N, get_nbi, got + 5, N##_src + 5, 1, right);                                    \
        shmem_quiet();                                                                     \
        shmem_ctx_quiet(ctx);                                                              \
        for (int i = 0; i < 6; i++) CHECKT(t, got[i] == (T)(right * 10 + i + 1));          \
        CHECKT(t, OP(N, g, N##_src + 6, right) == (T)(right * 10 + 7));                    \
        CHECKT(t, CX(N, g, N##_src + 7, right) == (T)(right * 10 + 8));                    \
        const T *csrc = N##_src;                                                           \
        CHECKT(t, OP(N, g, csrc + 1, right) == (T)(right * 10 + 2));                       \
        memset(got, 0, sizeof got);                                                        \
        OP(N, iget, got, N##_src, 1, 3, 2, right);         /* src 0, 3 */                 \
        CX(N, iget, got + 2, N##_src + 1, 1, 3, 2, right); /* src 1, 4 */                 \
        CHECKT(t, got[0] == (T)(right * 10 + 1) && got[1] == (T)(right * 10 + 4));         \
        CHECKT(t, got[2] == (T)(right * 10 + 2) && got[3] == (T)(right * 10 + 5));         \
        shmem_barrier_all();                                                               \
        /* Put-with-signal in its four forms: each adds 1 to the signal. */               \
        OP(N, put_signal, N##_dst, N##_src + 8, 1, &N##_sig, 1, SHMEM_SIGNAL_ADD, right);  \
        CX(N, put_signal, N##_dst + 1, N##_src + 9, 1, &N##_sig, 1, SHMEM_SIGNAL_ADD,      \
           right);                                                                         \
        OP(N, put_signal_nbi, N##_dst + 2, N##_src + 10, 1, &N##_sig, 1, SHMEM_SIGNAL_ADD, \
           right);                                                                         \
        CX(N, put_signal_nbi, N##_dst + 3, N##_src + 11, 1, &N##_sig, 1, SHMEM_SIGNAL_ADD, \
           right);                                                                         \
        shmem_quiet();                                                                     \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, shmem_signal_wait_until(&N##_sig, SHMEM_CMP_EQ, 4) == 4);               \
        for (int i = 0; i < 4; i++) CHECKT(t, N##_dst[i] == (T)(left * 10 + 9 + i));       \
        shmem_barrier_all();                                                               \
    }
#define RMA_TEST(T, N) BOTH(RMA_BODY, T, N)
RMA_TYPES(RMA_TEST)

/* ---- Atomics ---------------------------------------------------------------------------- */

/* Extended types: fetch, set, swap and their non-blocking forms. PE `left` works on this PE's
 * variable. */
#define EXT_VARS(T, N) static T N##_ext;
EXT_AMO_TYPES(EXT_VARS)
#define EXT_BODY(T, N, OP, CX, F)                                                          \
    static void ext_##N##_##F(void) {                                                      \
        const char *t = #N " (" #F ")";                                                    \
        T f = (T)0;                                                                        \
        N##_ext = (T)0;                                                                    \
        shmem_barrier_all();                                                               \
        OP(N, atomic_set, &N##_ext, (T)1, right);                                          \
        CHECKT(t, OP(N, atomic_fetch, &N##_ext, right) == (T)1);                           \
        CX(N, atomic_set, &N##_ext, (T)2, right);                                          \
        CHECKT(t, CX(N, atomic_fetch, &N##_ext, right) == (T)2);                           \
        CHECKT(t, OP(N, atomic_swap, &N##_ext, (T)5, right) == (T)2);                      \
        CHECKT(t, CX(N, atomic_swap, &N##_ext, (T)8, right) == (T)5);                      \
        OP(N, atomic_fetch_nbi, &f, &N##_ext, right);                                      \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)8);                                                              \
        f = (T)0;                                                                          \
        CX(N, atomic_fetch_nbi, &f, &N##_ext, right);                                      \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)8);                                                              \
        OP(N, atomic_swap_nbi, &f, &N##_ext, (T)9, right);                                 \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)8);                                                              \
        CX(N, atomic_swap_nbi, &f, &N##_ext, (T)12, right);                                \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)9);                                                              \
        shmem_barrier_all();                                                               \
        CHECKT(t, N##_ext == (T)12);                                                       \
        shmem_barrier_all();                                                               \
    }
#define EXT_TEST(T, N) BOTH(EXT_BODY, T, N)
EXT_AMO_TYPES(EXT_TEST)

/* Standard types: compare_swap, fetch_inc, inc, fetch_add, add and the non-blocking forms. */
#define STD_VARS(T, N) static T N##_std;
STD_AMO_TYPES(STD_VARS)
#define STD_BODY(T, N, OP, CX, F)                                                          \
    static void std_##N##_##F(void) {                                                      \
        const char *t = #N " (" #F ")";                                                    \
        T f = (T)0;                                                                        \
        N##_std = (T)10;                                                                   \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, atomic_compare_swap, &N##_std, (T)10, (T)20, right) == (T)10);    \
        CHECKT(t, CX(N, atomic_compare_swap, &N##_std, (T)99, (T)30, right) == (T)20);    \
        CHECKT(t, OP(N, atomic_fetch_inc, &N##_std, right) == (T)20);                      \
        CHECKT(t, CX(N, atomic_fetch_inc, &N##_std, right) == (T)21);                      \
        OP(N, atomic_inc, &N##_std, right);                                                \
        CX(N, atomic_inc, &N##_std, right);                                                \
        CHECKT(t, OP(N, atomic_fetch_add, &N##_std, (T)3, right) == (T)24);                \
        CHECKT(t, CX(N, atomic_fetch_add, &N##_std, (T)3, right) == (T)27);                \
        OP(N, atomic_add, &N##_std, (T)2, right);                                          \
        CX(N, atomic_add, &N##_std, (T)2, right);                                          \
        CHECKT(t, OP(N, atomic_fetch, &N##_std, right) == (T)34);                          \
        OP(N, atomic_compare_swap_nbi, &f, &N##_std, (T)34, (T)40, right);                 \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)34);                                                             \
        CX(N, atomic_compare_swap_nbi, &f, &N##_std, (T)0, (T)77, right); /* no swap */   \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)40);                                                             \
        OP(N, atomic_fetch_inc_nbi, &f, &N##_std, right);                                  \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)40);                                                             \
        CX(N, atomic_fetch_inc_nbi, &f, &N##_std, right);                                  \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)41);                                                             \
        OP(N, atomic_fetch_add_nbi, &f, &N##_std, (T)5, right);                            \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)42);                                                             \
        CX(N, atomic_fetch_add_nbi, &f, &N##_std, (T)5, right);                            \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)47);                                                             \
        shmem_barrier_all();                                                               \
        CHECKT(t, N##_std == (T)52);                                                       \
        shmem_barrier_all();                                                               \
    }
#define STD_TEST(T, N) BOTH(STD_BODY, T, N)
STD_AMO_TYPES(STD_TEST)

/* Bitwise types: and, or, xor, their fetching and non-blocking fetching forms. */
#define BIT_VARS(T, N) static T N##_bit;
BITWISE_AMO_TYPES(BIT_VARS)
#define BIT_BODY(T, N, OP, CX, F)                                                          \
    static void bit_##N##_##F(void) {                                                      \
        const char *t = #N " (" #F ")";                                                    \
        T f = (T)0;                                                                        \
        N##_bit = (T)0xF0;                                                                 \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, atomic_fetch_and, &N##_bit, (T)0x3C, right) == (T)0xF0);          \
        CHECKT(t, CX(N, atomic_fetch_and, &N##_bit, (T)0x10, right) == (T)0x30);          \
        OP(N, atomic_and, &N##_bit, (T)0x1F, right);                                       \
        CX(N, atomic_and, &N##_bit, (T)0x3F, right);                                       \
        CHECKT(t, OP(N, atomic_fetch_or, &N##_bit, (T)0x01, right) == (T)0x10);           \
        CHECKT(t, CX(N, atomic_fetch_or, &N##_bit, (T)0x02, right) == (T)0x11);           \
        OP(N, atomic_or, &N##_bit, (T)0x04, right);                                        \
        CX(N, atomic_or, &N##_bit, (T)0x08, right);                                        \
        CHECKT(t, OP(N, atomic_fetch_xor, &N##_bit, (T)0x01, right) == (T)0x1F);          \
        CHECKT(t, CX(N, atomic_fetch_xor, &N##_bit, (T)0x02, right) == (T)0x1E);          \
        OP(N, atomic_xor, &N##_bit, (T)0x04, right);                                       \
        CX(N, atomic_xor, &N##_bit, (T)0x08, right);                                       \
        CHECKT(t, OP(N, atomic_fetch, &N##_bit, right) == (T)0x10);                        \
        OP(N, atomic_fetch_and_nbi, &f, &N##_bit, (T)0x30, right);                         \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)0x10);                                                           \
        CX(N, atomic_fetch_or_nbi, &f, &N##_bit, (T)0x03, right);                          \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)0x10);                                                           \
        OP(N, atomic_fetch_xor_nbi, &f, &N##_bit, (T)0x01, right);                         \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)0x13);                                                           \
        CX(N, atomic_fetch_and_nbi, &f, &N##_bit, (T)0x06, right);                         \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)0x12);                                                           \
        OP(N, atomic_fetch_or_nbi, &f, &N##_bit, (T)0x40, right);                          \
        shmem_quiet();                                                                     \
        CHECKT(t, f == (T)0x02);                                                           \
        CX(N, atomic_fetch_xor_nbi, &f, &N##_bit, (T)0x02, right);                         \
        shmem_ctx_quiet(ctx);                                                              \
        CHECKT(t, f == (T)0x42);                                                           \
        shmem_barrier_all();                                                               \
        CHECKT(t, N##_bit == (T)0x40);                                                     \
        shmem_barrier_all();                                                               \
    }
#define BIT_TEST(T, N) BOTH(BIT_BODY, T, N)
BITWISE_AMO_TYPES(BIT_TEST)

/* The deprecated 1.3 atomics (no context forms). */
#define OLD_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
#define OLD_EXT_TYPES(X) X(float, float) X(double, double) OLD_TYPES(X)
#define OLD_VARS(T, N) static T N##_old;
OLD_EXT_TYPES(OLD_VARS)
#define OLD_EXT_BODY(T, N, OP, CX, F)                                                      \
    static void old_ext_##N##_##F(void) {                                                  \
        const char *t = #N " (" #F ")";                                                    \
        N##_old = (T)0;                                                                    \
        shmem_barrier_all();                                                               \
        OP(N, set, &N##_old, (T)3, right);                                                 \
        CHECKT(t, OP(N, fetch, &N##_old, right) == (T)3);                                  \
        CHECKT(t, OP(N, swap, &N##_old, (T)4, right) == (T)3);                             \
        shmem_barrier_all();                                                               \
        CHECKT(t, N##_old == (T)4);                                                        \
        shmem_barrier_all();                                                               \
    }
#define OLD_EXT_TEST(T, N) BOTH(OLD_EXT_BODY, T, N)
OLD_EXT_TYPES(OLD_EXT_TEST)
#define OLD_BODY(T, N, OP, CX, F)                                                          \
    static void old_##N##_##F(void) {                                                      \
        const char *t = #N " (" #F ")";                                                    \
        N##_old = (T)1;                                                                    \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, cswap, &N##_old, (T)1, (T)2, right) == (T)1);                     \
        CHECKT(t, OP(N, finc, &N##_old, right) == (T)2);                                   \
        OP(N, inc, &N##_old, right);                                                       \
        CHECKT(t, OP(N, fadd, &N##_old, (T)10, right) == (T)4);                            \
        OP(N, add, &N##_old, (T)10, right);                                                \
        shmem_barrier_all();                                                               \
        CHECKT(t, N##_old == (T)24);                                                       \
        shmem_barrier_all();                                                               \
    }
#define OLD_TEST(T, N) BOTH(OLD_BODY, T, N)
OLD_TYPES(OLD_TEST)

/* ---- Point-to-point synchronization on every type ---------------------------------------- */

#define SYNC_VARS(T, N) static T N##_flag, N##_vars[4];
SYNC_TYPES(SYNC_VARS)
#define SYNC_BODY(T, N, OP, CX, F)                                                         \
    static void sync_##N##_##F(void) {                                                     \
        const char *t = #N " (" #F ")";                                                    \
        T mine[4] = {(T)1, (T)2, (T)3, (T)4}, cmp_values[4] = {(T)1, (T)2, (T)3, (T)4};    \
        size_t idx[4];                                                                     \
        int status[4] = {0, 1, 1, 1};                                                      \
        N##_flag = (T)0;                                                                   \
        memset(N##_vars, 0, sizeof N##_vars);                                              \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, test, &N##_flag, SHMEM_CMP_EQ, (T)0) == 1);                        \
        CHECKT(t, OP(N, test_any, N##_vars, 4, NULL, SHMEM_CMP_NE, (T)0) == SIZE_MAX);     \
        CHECKT(t, OP(N, test_all, N##_vars, 4, NULL, SHMEM_CMP_NE, (T)0) == 0);            \
        shmem_barrier_all();                                                               \
        shmem_put(N##_vars, mine, 4, right);                                               \
        shmem_fence();                                                                     \
        shmem_p(&N##_flag, (T)1, right);                                                   \
        OP(N, wait_until, &N##_flag, SHMEM_CMP_EQ, (T)1);                                  \
        OP(N, wait, &N##_flag, (T)0);                                                      \
        CHECKT(t, OP(N, test, &N##_flag, SHMEM_CMP_GE, (T)1) == 1);                        \
        OP(N, wait_until_all, N##_vars, 4, NULL, SHMEM_CMP_GE, (T)1);                      \
        CHECKT(t, OP(N, wait_until_any, N##_vars, 4, status, SHMEM_CMP_EQ, (T)1) == 0);    \
        CHECKT(t, OP(N, wait_until_some, N##_vars, 4, idx, NULL, SHMEM_CMP_GE, (T)3) == 2); \
        CHECKT(t, idx[0] == 2 && idx[1] == 3);                                             \
        OP(N, wait_until_all_vector, N##_vars, 4, NULL, SHMEM_CMP_EQ, cmp_values);         \
        CHECKT(t, OP(N, wait_until_any_vector, N##_vars, 4, NULL, SHMEM_CMP_EQ,            \
                     cmp_values) < 4);                                                     \
        CHECKT(t, OP(N, wait_until_some_vector, N##_vars, 4, idx, NULL, SHMEM_CMP_EQ,      \
                     cmp_values) == 4);                                                    \
        CHECKT(t, OP(N, test_all, N##_vars, 4, NULL, SHMEM_CMP_GT, (T)0) == 1);            \
        CHECKT(t, OP(N, test_any, N##_vars, 4, status, SHMEM_CMP_GT, (T)1) == SIZE_MAX);   \
        CHECKT(t, OP(N, test_some, N##_vars, 4, idx, NULL, SHMEM_CMP_LE, (T)2) == 2);      \
        CHECKT(t, idx[0] == 0 && idx[1] == 1);                                             \
        CHECKT(t, OP(N, test_all_vector, N##_vars, 4, NULL, SHMEM_CMP_EQ, cmp_values) == 1); \
        CHECKT(t, OP(N, test_any_vector, N##_vars, 4, NULL, SHMEM_CMP_NE, cmp_values) ==   \
                      SIZE_MAX);                                                           \
        CHECKT(t, OP(N, test_some_vector, N##_vars, 4, idx, NULL, SHMEM_CMP_GE,            \
                     cmp_values) == 4);                                                    \
        shmem_barrier_all();                                                               \
    }
#define SYNC_TEST(T, N) BOTH(SYNC_BODY, T, N)
SYNC_TYPES(SYNC_TEST)

/* The deprecated short and unsigned short forms. */
static short short_flag;
static unsigned short ushort_flag;
static void sync_short(void) {
    short_flag = 0;
    ushort_flag = 0;
    shmem_barrier_all();
    CHECK(shmem_short_test(&short_flag, SHMEM_CMP_EQ, 0) == 1);
    CHECK(shmem_test(&ushort_flag, SHMEM_CMP_LT, 1) == 1);
    shmem_barrier_all();
    shmem_short_p(&short_flag, -3, right);
    shmem_ushort_p(&ushort_flag, 65000, right);
    shmem_short_wait_until(&short_flag, SHMEM_CMP_LT, 0);
    shmem_wait_until(&short_flag, SHMEM_CMP_EQ, (short)-3);
    shmem_short_wait(&short_flag, 0);
    shmem_wait(&short_flag, (short)0);
    shmem_ushort_wait_until(&ushort_flag, SHMEM_CMP_GT, 64999);
    shmem_wait_until(&ushort_flag, SHMEM_CMP_EQ, (unsigned short)65000);
    CHECK(shmem_short_test(&short_flag, SHMEM_CMP_EQ, -3) == 1);
    CHECK(shmem_test(&short_flag, SHMEM_CMP_GT, (short)-4) == 1);
    CHECK(shmem_ushort_test(&ushort_flag, SHMEM_CMP_GE, 65000) == 1);
    CHECK(shmem_test(&ushort_flag, SHMEM_CMP_NE, (unsigned short)65000) == 0);
    shmem_barrier_all();
}

/* ---- Generic team collectives and reductions --------------------------------------------- */

#define MAXPE 8
#define COLL_VARS(T, N) static T N##_cs[MAXPE], N##_cd[MAXPE * MAXPE];
RMA_TYPES(COLL_VARS)
#define COLL_BODY(T, N, OP, CX, F)                                                         \
    static void coll_##N##_##F(void) {                                                     \
        const char *t = #N " (" #F ")";                                                    \
        for (int i = 0; i < npes; i++) N##_cs[i] = (T)(me * 10 + i);                       \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, broadcast, SHMEM_TEAM_WORLD, N##_cd, N##_cs, 2, 1) == 0);          \
        CHECKT(t, N##_cd[0] == (T)10 && N##_cd[1] == (T)11);                               \
        CHECKT(t, OP(N, fcollect, SHMEM_TEAM_WORLD, N##_cd, N##_cs, 1) == 0);              \
        for (int j = 0; j < npes; j++) CHECKT(t, N##_cd[j] == (T)(j * 10));                \
        CHECKT(t, OP(N, collect, SHMEM_TEAM_WORLD, N##_cd, N##_cs, 1) == 0);               \
        for (int j = 0; j < npes; j++) CHECKT(t, N##_cd[j] == (T)(j * 10));                \
        CHECKT(t, OP(N, alltoall, SHMEM_TEAM_WORLD, N##_cd, N##_cs, 1) == 0);              \
        for (int j = 0; j < npes; j++) CHECKT(t, N##_cd[j] == (T)(j * 10 + me));           \
        CHECKT(t, OP(N, alltoalls, SHMEM_TEAM_WORLD, N##_cd, N##_cs, 1, 1, 1) == 0);       \
        for (int j = 0; j < npes; j++) CHECKT(t, N##_cd[j] == (T)(j * 10 + me));           \
        shmem_barrier_all();                                                               \
    }
#define COLL_TEST(T, N) BOTH(COLL_BODY, T, N)
RMA_TYPES(COLL_TEST)

/* and, or, xor of 1 << me (and of an all-ones second element). */
#define RED_VARS(T, N) static T N##_rs[2], N##_rd[2];
ORDERED_RED_TYPES(RED_VARS)
#define BIT_RED_BODY(T, N, OP, CX, F)                                                      \
    static void bitred_##N##_##F(void) {                                                   \
        const char *t = #N " (" #F ")";                                                    \
        T all = (T)((1 << npes) - 1);                                                      \
        N##_rs[0] = (T)(1 << me);                                                          \
        N##_rs[1] = all;                                                                   \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, and_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);            \
        CHECKT(t, N##_rd[0] == (T)0 && N##_rd[1] == all);                                  \
        CHECKT(t, OP(N, or_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);             \
        CHECKT(t, N##_rd[0] == all && N##_rd[1] == all);                                   \
        CHECKT(t, OP(N, xor_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);            \
        CHECKT(t, N##_rd[0] == all && N##_rd[1] == (T)(npes % 2 ? all : 0));               \
        shmem_barrier_all();                                                               \
    }
#define BIT_RED_TEST(T, N) BOTH(BIT_RED_BODY, T, N)
BITWISE_RED_TYPES(BIT_RED_TEST)

/* max, min, sum, prod of me + 1 (and of 1). */
static int factorial(int n) { return n <= 1 ? 1 : n * factorial(n - 1); }
#define ORD_RED_BODY(T, N, OP, CX, F)                                                      \
    static void ordred_##N##_##F(void) {                                                   \
        const char *t = #N " (" #F ")";                                                    \
        N##_rs[0] = (T)(me + 1);                                                           \
        N##_rs[1] = (T)1;                                                                  \
        shmem_barrier_all();                                                               \
        CHECKT(t, OP(N, max_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);            \
        CHECKT(t, N##_rd[0] == (T)npes && N##_rd[1] == (T)1);                              \
        CHECKT(t, OP(N, min_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);            \
        CHECKT(t, N##_rd[0] == (T)1 && N##_rd[1] == (T)1);                                 \
        CHECKT(t, OP(N, sum_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);            \
        CHECKT(t, N##_rd[0] == (T)(npes * (npes + 1) / 2) && N##_rd[1] == (T)npes);        \
        CHECKT(t, OP(N, prod_reduce, SHMEM_TEAM_WORLD, N##_rd, N##_rs, 2) == 0);           \
        CHECKT(t, N##_rd[0] == (T)factorial(npes) && N##_rd[1] == (T)1);                   \
        shmem_barrier_all();                                                               \
    }
#define ORD_RED_TEST(T, N) BOTH(ORD_RED_BODY, T, N)
ORDERED_RED_TYPES(ORD_RED_TEST)

static float _Complex cf_src, cf_dst;
static double _Complex cd_src, cd_dst;
static void complex_reductions(void) {
    cf_src = (float)(me + 1) + 1.0f * I;
    cd_src = (double)(me + 1) + 2.0 * I;
    shmem_barrier_all();
    CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, &cf_dst, &cf_src, 1) == 0);
    CHECK(crealf(cf_dst) == (float)(npes * (npes + 1) / 2) && cimagf(cf_dst) == (float)npes);
    CHECK(shmem_complexf_sum_reduce(SHMEM_TEAM_WORLD, &cf_dst, &cf_src, 1) == 0);
    CHECK(crealf(cf_dst) == (float)(npes * (npes + 1) / 2) && cimagf(cf_dst) == (float)npes);
    CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, &cd_dst, &cd_src, 1) == 0);
    CHECK(creal(cd_dst) == (double)(npes * (npes + 1) / 2) && cimag(cd_dst) == 2.0 * npes);
    CHECK(shmem_complexd_sum_reduce(SHMEM_TEAM_WORLD, &cd_dst, &cd_src, 1) == 0);
    CHECK(creal(cd_dst) == (double)(npes * (npes + 1) / 2) && cimag(cd_dst) == 2.0 * npes);
    cf_src = (float)(me + 1);
    cd_src = (double)(me + 1);
    shmem_barrier_all();
    CHECK(shmem_prod_reduce(SHMEM_TEAM_WORLD, &cf_dst, &cf_src, 1) == 0);
    CHECK(crealf(cf_dst) == (float)factorial(npes) && cimagf(cf_dst) == 0.0f);
    CHECK(shmem_prod_reduce(SHMEM_TEAM_WORLD, &cd_dst, &cd_src, 1) == 0);
    CHECK(creal(cd_dst) == (double)factorial(npes) && cimag(cd_dst) == 0.0);
    CHECK(shmem_complexf_prod_reduce(SHMEM_TEAM_WORLD, &cf_dst, &cf_src, 1) == 0);
    CHECK(crealf(cf_dst) == (float)factorial(npes) && cimagf(cf_dst) == 0.0f);
    CHECK(shmem_complexd_prod_reduce(SHMEM_TEAM_WORLD, &cd_dst, &cd_src, 1) == 0);
    CHECK(creal(cd_dst) == (double)factorial(npes) && cimag(cd_dst) == 0.0);
    shmem_barrier_all();
}

/* ---- Sized and untyped forms, with and without a context -------------------------------- */

#define SIZED_VARS(B) static unsigned char s##B##_dst[16 * B / 8], s##B##_src[16 * B / 8];
SIZES(SIZED_VARS)
static uint64_t sized_sig;
/* The sized routines of B bits (and, for B == 8, the untyped ones, whose unit is a byte). */
#define SIZED_BODY(B, PUT, GET, PUTNBI, GETNBI, IPUT, IGET, SIG, SIGNBI, ...)              \
    do {                                                                               \
        const size_t e = B / 8; /* bytes per element */                                \
        for (size_t i = 0; i < sizeof s##B##_src; i++) {                               \
            s##B##_src[i] = (unsigned char)(me * 16 + i % 16 + i / 16);                \
            s##B##_dst[i] = 0;                                                         \
        }                                                                              \
        unsigned char got[16 * B / 8];                                                 \
        sized_sig = 0;                                                                 \
        shmem_barrier_all();                                                           \
        PUT(__VA_ARGS__ s##B##_dst, s##B##_src, 2, right);                             \
        PUTNBI(__VA_ARGS__ s##B##_dst + 2 * e, s##B##_src + 2 * e, 2, right);          \
        IPUT(__VA_ARGS__ s##B##_dst + 4 * e, s##B##_src + 4 * e, 2, 1, 2, right);      \
        shmem_quiet();                                                                 \
        shmem_barrier_all();                                                           \
        for (size_t i = 0; i < 4 * e; i++)                                             \
            CHECKT(#B, s##B##_dst[i] == (unsigned char)(left * 16 + i % 16 + i / 16)); \
        for (size_t k = 0; k < 2; k++)                                                 \
            for (size_t i = 0; i < e; i++)                                             \
                CHECKT(#B, s##B##_dst[(4 + 2 * k) * e + i] ==                          \
                               (unsigned char)(left * 16 + ((4 + k) * e + i) % 16 +    \
                                               ((4 + k) * e + i) / 16));               \
        memset(got, 0, sizeof got);                                                    \
        GET(__VA_ARGS__ got, s##B##_src, 2, right);                                    \
        GETNBI(__VA_ARGS__ got + 2 * e, s##B##_src + 2 * e, 2, right);                 \
        IGET(__VA_ARGS__ got + 4 * e, s##B##_src + 4 * e, 1, 2, 2, right);             \
        shmem_quiet();                                                                 \
        for (size_t i = 0; i < 5 * e; i++)                                             \
            CHECKT(#B, got[i] == (unsigned char)(right * 16 + i % 16 + i / 16));       \
        for (size_t i = 0; i < e; i++)                                                 \
            CHECKT(#B, got[5 * e + i] == (unsigned char)(right * 16 + (6 * e + i) % 16 \
                                                         + (6 * e + i) / 16));         \
        shmem_barrier_all();                                                           \
        memset(s##B##_dst, 0, 2 * e);                                                  \
        shmem_barrier_all();                                                           \
        SIG(__VA_ARGS__ s##B##_dst, s##B##_src, 1, &sized_sig, 1, SHMEM_SIGNAL_ADD, right); \
        SIGNBI(__VA_ARGS__ s##B##_dst + e, s##B##_src + e, 1, &sized_sig, 1,           \
               SHMEM_SIGNAL_ADD, right);                                               \
        shmem_quiet();                                                                 \
        CHECKT(#B, shmem_signal_wait_until(&sized_sig, SHMEM_CMP_EQ, 2) == 2);         \
        CHECKT(#B, shmem_signal_fetch(&sized_sig) == 2);                               \
        for (size_t i = 0; i < 2 * e; i++)                                             \
            CHECKT(#B, s##B##_dst[i] == (unsigned char)(left * 16 + i % 16 + i / 16)); \
        shmem_barrier_all();                                                           \
    } while (0)
#define SIZED_RUN(B)                                                                       \
    SIZED_BODY(B, shmem_put##B, shmem_get##B, shmem_put##B##_nbi, shmem_get##B##_nbi,      \
               shmem_iput##B, shmem_iget##B, shmem_put##B##_signal,                        \
               shmem_put##B##_signal_nbi, );                                               \
    SIZED_BODY(B, shmem_ctx_put##B, shmem_ctx_get##B, shmem_ctx_put##B##_nbi,              \
               shmem_ctx_get##B##_nbi, shmem_ctx_iput##B, shmem_ctx_iget##B,               \
               shmem_ctx_put##B##_signal, shmem_ctx_put##B##_signal_nbi, ctx, );
/* The untyped forms, whose elements are bytes (strided forms: those of 8 bits). */
static void sized_and_untyped(void) {
    SIZES(SIZED_RUN)
    SIZED_BODY(8, shmem_putmem, shmem_getmem, shmem_putmem_nbi, shmem_getmem_nbi, shmem_iput8,
               shmem_iget8, shmem_putmem_signal, shmem_putmem_signal_nbi, );
    SIZED_BODY(8, shmem_ctx_putmem, shmem_ctx_getmem, shmem_ctx_putmem_nbi,
               shmem_ctx_getmem_nbi, shmem_ctx_iput8, shmem_ctx_iget8, shmem_ctx_putmem_signal,
               shmem_ctx_putmem_signal_nbi, ctx, );
    shmem_ctx_fence(ctx);
    shmem_ctx_quiet(ctx);
}

/* The untyped team collectives. */
static long mem_src[MAXPE], mem_dst[MAXPE * MAXPE];
static void mem_collectives(void) {
    for (int i = 0; i < npes; i++) mem_src[i] = me * 10 + i;
    shmem_barrier_all();
    CHECK(shmem_broadcastmem(SHMEM_TEAM_WORLD, mem_dst, mem_src, 2 * sizeof(long), 1) == 0);
    CHECK(mem_dst[0] == 10 && mem_dst[1] == 11);
    CHECK(shmem_fcollectmem(SHMEM_TEAM_WORLD, mem_dst, mem_src, sizeof(long)) == 0);
    for (int j = 0; j < npes; j++) CHECK(mem_dst[j] == j * 10);
    CHECK(shmem_collectmem(SHMEM_TEAM_WORLD, mem_dst, mem_src, sizeof(long)) == 0);
    for (int j = 0; j < npes; j++) CHECK(mem_dst[j] == j * 10);
    CHECK(shmem_alltoallmem(SHMEM_TEAM_WORLD, mem_dst, mem_src, sizeof(long)) == 0);
    for (int j = 0; j < npes; j++) CHECK(mem_dst[j] == j * 10 + me);
    /* alltoallsmem: strides in elements of one byte; a long is moved whole when the element
     * is one byte and the stride is 1 over sizeof(long) elements. */
    CHECK(shmem_alltoallsmem(SHMEM_TEAM_WORLD, mem_dst, mem_src, 1, 1, sizeof(long)) == 0);
    for (int j = 0; j < npes; j++) CHECK(mem_dst[j] == j * 10 + me);
    shmem_barrier_all();
}

/* The deprecated active-set reductions (to_all) of every type and operation. */
long red_psync[SHMEM_REDUCE_SYNC_SIZE];
#define TO_ALL_VARS(T, N) static T N##_ta_src[2], N##_ta_dst[2], N##_ta_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 2];
#define TO_ALL_INT(X) X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define TO_ALL_FLOAT(X) TO_ALL_INT(X) X(float, float) X(double, double) X(long double, longdouble)
TO_ALL_FLOAT(TO_ALL_VARS)
#define TO_ALL_REDUCE(N, OP)                                                                \
    do {                                                                                    \
        shmem_barrier_all();                                                                \
        shmem_##N##_##OP##_to_all(N##_ta_dst, N##_ta_src, 2, 0, 0, npes, N##_ta_wrk,        \
                                  red_psync);                                               \
    } while (0)
#define TO_ALL_INT_TEST(T, N)                                                               \
    static void to_all_int_##N(void) {                                                      \
        const char *t = #N;                                                                 \
        T all = (T)((1 << npes) - 1);                                                       \
        N##_ta_src[0] = (T)(1 << me);                                                       \
        N##_ta_src[1] = all;                                                                \
        TO_ALL_REDUCE(N, and);                                                              \
        CHECKT(t, N##_ta_dst[0] == (T)0 && N##_ta_dst[1] == all);                           \
        TO_ALL_REDUCE(N, or);                                                               \
        CHECKT(t, N##_ta_dst[0] == all && N##_ta_dst[1] == all);                            \
        TO_ALL_REDUCE(N, xor);                                                              \
        CHECKT(t, N##_ta_dst[0] == all && N##_ta_dst[1] == (T)(npes % 2 ? all : 0));        \
    }
TO_ALL_INT(TO_ALL_INT_TEST)
#define TO_ALL_ORD_TEST(T, N)                                                               \
    static void to_all_ord_##N(void) {                                                      \
        const char *t = #N;                                                                 \
        N##_ta_src[0] = (T)(me + 1);                                                        \
        N##_ta_src[1] = (T)1;                                                               \
        TO_ALL_REDUCE(N, max);                                                              \
        CHECKT(t, N##_ta_dst[0] == (T)npes && N##_ta_dst[1] == (T)1);                       \
        TO_ALL_REDUCE(N, min);                                                              \
        CHECKT(t, N##_ta_dst[0] == (T)1 && N##_ta_dst[1] == (T)1);                          \
        TO_ALL_REDUCE(N, sum);                                                              \
        CHECKT(t, N##_ta_dst[0] == (T)(npes * (npes + 1) / 2) && N##_ta_dst[1] == (T)npes); \
        TO_ALL_REDUCE(N, prod);                                                             \
        CHECKT(t, N##_ta_dst[0] == (T)factorial(npes) && N##_ta_dst[1] == (T)1);            \
    }
TO_ALL_FLOAT(TO_ALL_ORD_TEST)
static float _Complex cf_ta_src, cf_ta_dst, cf_ta_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 1];
static double _Complex cd_ta_src, cd_ta_dst, cd_ta_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 1];
static void to_all_complex(void) {
    cf_ta_src = (float)(me + 1) + 1.0f * I;
    cd_ta_src = (double)(me + 1) + 1.0 * I;
    shmem_barrier_all();
    shmem_complexf_sum_to_all(&cf_ta_dst, &cf_ta_src, 1, 0, 0, npes, cf_ta_wrk, red_psync);
    CHECK(crealf(cf_ta_dst) == (float)(npes * (npes + 1) / 2) && cimagf(cf_ta_dst) == npes);
    shmem_barrier_all();
    shmem_complexd_sum_to_all(&cd_ta_dst, &cd_ta_src, 1, 0, 0, npes, cd_ta_wrk, red_psync);
    CHECK(creal(cd_ta_dst) == (double)(npes * (npes + 1) / 2) && cimag(cd_ta_dst) == npes);
    cf_ta_src = (float)(me + 1);
    cd_ta_src = (double)(me + 1);
    shmem_barrier_all();
    shmem_complexf_prod_to_all(&cf_ta_dst, &cf_ta_src, 1, 0, 0, npes, cf_ta_wrk, red_psync);
    CHECK(crealf(cf_ta_dst) == (float)factorial(npes) && cimagf(cf_ta_dst) == 0.0f);
    shmem_barrier_all();
    shmem_complexd_prod_to_all(&cd_ta_dst, &cd_ta_src, 1, 0, 0, npes, cd_ta_wrk, red_psync);
    CHECK(creal(cd_ta_dst) == (double)factorial(npes) && cimag(cd_ta_dst) == 0.0);
    shmem_barrier_all();
}

/* ---- The rest: sync in both forms, pcontrol, allocation with hints, 1.2 and 1.3 names ----- */

long pSync[SHMEM_BARRIER_SYNC_SIZE];
static long w_long, s_long;
static int32_t a32_src[MAXPE], a32_dst[MAXPE];
static int64_t a64_src[MAXPE], a64_dst[MAXPE];

static void the_rest(void) {
    /* shmem_sync(team) (1.5) and shmem_sync(PE_start, logPE_stride, PE_size, pSync). */
    CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0);
    shmem_sync(0, 0, npes, pSync);
    shmem_sync(0, 0, npes, pSync);
    CHECK(shmem_sync(SHMEM_TEAM_SHARED) == 0);

    /* The active-set alltoalls of 32 and 64 bits (strides 1: one element to each PE). */
    for (int i = 0; i < npes; i++) {
        a32_src[i] = me * 10 + i;
        a64_src[i] = me * 100 + i;
    }
    shmem_barrier_all();
    shmem_alltoalls32(a32_dst, a32_src, 1, 1, 1, 0, 0, npes, pSync);
    for (int j = 0; j < npes; j++) CHECK(a32_dst[j] == j * 10 + me);
    shmem_barrier_all();
    shmem_alltoalls64(a64_dst, a64_src, 1, 1, 1, 0, 0, npes, pSync);
    for (int j = 0; j < npes; j++) CHECK(a64_dst[j] == j * 100 + me);
    shmem_barrier_all();

    int level = -1;
    shmem_query_thread(&level);
    CHECK(level >= SHMEM_THREAD_SINGLE && level <= SHMEM_THREAD_MULTIPLE);
    shmem_clear_cache_inv();
    shmem_set_cache_inv();
    shmem_clear_cache_line_inv(&w_long);
    shmem_set_cache_line_inv(&w_long);
    shmem_udcflush();
    shmem_udcflush_line(&w_long);

    shmem_pcontrol(0);
    shmem_pcontrol(1);
    shmem_pcontrol(2, "detailed");
    checks++;

    /* The last: a bit the specification does not define (another library's extension),
     * which is ignored. */
    long hints[5] = {0, SHMEM_MALLOC_ATOMICS_REMOTE, SHMEM_MALLOC_SIGNAL_REMOTE,
                     SHMEM_MALLOC_ATOMICS_REMOTE | SHMEM_MALLOC_SIGNAL_REMOTE, 1L << 8};
    for (int h = 0; h < 5; h++) {
        uint64_t *p = shmem_malloc_with_hints(4 * sizeof(uint64_t), hints[h]);
        CHECK(p != NULL && shmem_addr_accessible(p, right));
        p[0] = 0;
        shmem_barrier_all();
        shmem_uint64_atomic_add(p, (uint64_t)me + 1, right);
        shmem_barrier_all();
        CHECK(p[0] == (uint64_t)left + 1);
        shmem_free(p);
    }
    CHECK(shmem_malloc_with_hints(0, SHMEM_MALLOC_SIGNAL_REMOTE) == NULL);

    long *a = shmemalign(256, 64);
    CHECK(a != NULL && (uintptr_t)a % 256 == 0);
    a[0] = me;
    a = shrealloc(a, 4096);
    CHECK(a != NULL && a[0] == me);
    shmem_barrier_all();
    CHECK(shmem_long_g(a, right) == right);
    shmem_barrier_all();
    shfree(a);

    /* The 1.3 routines of a long, by their own names (the parentheses keep the C11 macros
     * out). */
    w_long = 0;
    s_long = 5;
    shmem_barrier_all();
    CHECK((shmem_swap)(&s_long, 6, right) == 5);
    shmem_long_p(&w_long, 1, right);
    (shmem_wait)(&w_long, 0);
    (shmem_wait_until)(&w_long, SHMEM_CMP_EQ, 1);
    CHECK(w_long == 1);
    shmem_barrier_all();
    CHECK(s_long == 6);
    shmem_barrier_all();
}

int main(int argc, char **argv) {
    for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;
    for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) red_psync[i] = SHMEM_SYNC_VALUE;
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;
    left = (me + npes - 1) % npes;
    if (argc > 1) {
        if (strcmp(argv[1], "null-fetch") == 0) {
            static long v;
            shmem_long_atomic_fetch_add_nbi(NULL, &v, 1, right);
        } else if (strcmp(argv[1], "ctx-outside-team") == 0) {
            /* A team of PE 0 alone, a context on it, and a put to its PE 1. */
            static int x;
            shmem_team_t solo = SHMEM_TEAM_INVALID;
            shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, 1, NULL, 0, &solo);
            shmem_ctx_t c;
            if (solo != SHMEM_TEAM_INVALID && shmem_team_create_ctx(solo, 0, &c) == 0)
                shmem_ctx_int_p(c, &x, 1, 1);
            shmem_barrier_all();
        }
        return 5;
    }
    CHECK(npes >= 2 && npes <= MAXPE);
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0);

#define RUN(T, N) rma_##N##_g(); rma_##N##_t();
    RMA_TYPES(RUN)
#undef RUN
#define RUN(T, N) ext_##N##_g(); ext_##N##_t();
    EXT_AMO_TYPES(RUN)
#undef RUN
#define RUN(T, N) std_##N##_g(); std_##N##_t();
    STD_AMO_TYPES(RUN)
#undef RUN
#define RUN(T, N) bit_##N##_g(); bit_##N##_t();
    BITWISE_AMO_TYPES(RUN)
#undef RUN
#define RUN(T, N) old_ext_##N##_g(); old_ext_##N##_t();
    OLD_EXT_TYPES(RUN)
#undef RUN
#define RUN(T, N) old_##N##_g(); old_##N##_t();
    OLD_TYPES(RUN)
#undef RUN
#define RUN(T, N) sync_##N##_g(); sync_##N##_t();
    SYNC_TYPES(RUN)
#undef RUN
    sync_short();
#define RUN(T, N) coll_##N##_g(); coll_##N##_t();
    RMA_TYPES(RUN)
#undef RUN
#define RUN(T, N) bitred_##N##_g(); bitred_##N##_t();
    BITWISE_RED_TYPES(RUN)
#undef RUN
#define RUN(T, N) ordred_##N##_g(); ordred_##N##_t();
    ORDERED_RED_TYPES(RUN)
#undef RUN
    complex_reductions();
    sized_and_untyped();
    mem_collectives();
#define RUN(T, N) to_all_int_##N();
    TO_ALL_INT(RUN)
#undef RUN
#define RUN(T, N) to_all_ord_##N();
    TO_ALL_FLOAT(RUN)
#undef RUN
    to_all_complex();
    the_rest();

    shmem_ctx_destroy(ctx);
    printf("%d/%d: spec_forms ok, %d checks\n", me, npes, checks);
    shmem_finalize();
    return 0;
}
