/*
 * Unit test of the host reduction twin (kernels/cgpu_reduce_host.c).
 *
 * Everything the function under test is compared against is computed here, element by
 * element, with plain scalar code: the table of supported pairs, the element sizes and
 * the reference results. Nothing in this file calls cgpu_reduce_host() to produce an
 * expected value.
 *
 * Build and run from the repository root:
 *   gcc -std=gnu11 -O2 -Wall -Wextra -I. kernels/cgpu_reduce_host.c \
 *       test/unit/test_reduce.c -lcunit -o /tmp/test_reduce && /tmp/test_reduce
 */

#include <CUnit/Basic.h>

#include "cunit_run.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_reduce.h"

/* Elements per reduction: the 16 x 16 pairs of boundary values, then random ones. */
enum { TEST_POOL_SIZE = 16, TEST_COUNT = 400, TEST_GUARD_BYTES = 64 };

/* Byte that fills every buffer region the function under test must not write. */
#define TEST_GUARD_FILL 0xA5

/*
 * MPI's table of predefined operations on C types, written out independently of the
 * implementation: 1 where (type, op) is defined. Columns follow cgpu_op_t.
 */
_Static_assert(12 == CGPU_OP_COUNT, "test_reduce: the support table has one column per op");
_Static_assert(23 == CGPU_DT_COUNT, "test_reduce: the support table has one row per type");

static const unsigned char expected_supported[CGPU_DT_COUNT][CGPU_OP_COUNT] = {
    /*                       sum prod min max land lor lxor band bor bxor minloc maxloc */
    [CGPU_DT_INT8] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_UINT8] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_INT16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_UINT16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_INT32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_UINT32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_INT64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_UINT64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    [CGPU_DT_FLOAT32] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    [CGPU_DT_FLOAT64] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    [CGPU_DT_LONG_DOUBLE] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    [CGPU_DT_BOOL] = {0, 0, 0, 0, 1, 1, 1, 0, 0, 0},
    [CGPU_DT_COMPLEX64] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    [CGPU_DT_COMPLEX128] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0},
    [CGPU_DT_FLOAT_INT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_2INT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_2FLOAT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_2DOUBLE] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_SHORT_INT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_DOUBLE_INT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_LONG_INT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_LONG_DOUBLE_INT] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    [CGPU_DT_COMPLEX_LONG_DOUBLE] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0},
};

typedef enum test_kind {
    TEST_KIND_SIGNED,
    TEST_KIND_UNSIGNED,
    TEST_KIND_FLOAT,
    TEST_KIND_BOOL,
    TEST_KIND_COMPLEX,
    TEST_KIND_PAIR,
} test_kind_t;

/* the C structs MPI's pair types describe */
typedef struct {
    float v;
    int i;
} t_float_int;
typedef struct {
    int v;
    int i;
} t_2int;
typedef struct {
    float v;
    float i;
} t_2float;
typedef struct {
    double v;
    double i;
} t_2double;
typedef struct {
    short v;
    int i;
} t_short_int;
typedef struct {
    double v;
    int i;
} t_double_int;
typedef struct {
    long v;
    int i;
} t_long_int;
typedef struct {
    long double v;
    int i;
} t_long_double_int;

/* What the test knows about each element type, independently of the implementation. */
static const struct {
    size_t size;
    test_kind_t kind;
    unsigned int bits; /* value bits of the integer and bool types */
    const char *label; /* for diagnostics only */
} test_types[CGPU_DT_COUNT] = {
    [CGPU_DT_INT8] = {sizeof(int8_t), TEST_KIND_SIGNED, 8, "INT8"},
    [CGPU_DT_UINT8] = {sizeof(uint8_t), TEST_KIND_UNSIGNED, 8, "UINT8"},
    [CGPU_DT_INT16] = {sizeof(int16_t), TEST_KIND_SIGNED, 16, "INT16"},
    [CGPU_DT_UINT16] = {sizeof(uint16_t), TEST_KIND_UNSIGNED, 16, "UINT16"},
    [CGPU_DT_INT32] = {sizeof(int32_t), TEST_KIND_SIGNED, 32, "INT32"},
    [CGPU_DT_UINT32] = {sizeof(uint32_t), TEST_KIND_UNSIGNED, 32, "UINT32"},
    [CGPU_DT_INT64] = {sizeof(int64_t), TEST_KIND_SIGNED, 64, "INT64"},
    [CGPU_DT_UINT64] = {sizeof(uint64_t), TEST_KIND_UNSIGNED, 64, "UINT64"},
    [CGPU_DT_FLOAT32] = {sizeof(float), TEST_KIND_FLOAT, 0, "FLOAT32"},
    [CGPU_DT_FLOAT64] = {sizeof(double), TEST_KIND_FLOAT, 0, "FLOAT64"},
    [CGPU_DT_LONG_DOUBLE] = {sizeof(long double), TEST_KIND_FLOAT, 0, "LONG_DOUBLE"},
    [CGPU_DT_BOOL] = {sizeof(_Bool), TEST_KIND_BOOL, 8, "BOOL"},
    [CGPU_DT_COMPLEX64] = {sizeof(float _Complex), TEST_KIND_COMPLEX, 0, "COMPLEX64"},
    [CGPU_DT_COMPLEX128] = {sizeof(double _Complex), TEST_KIND_COMPLEX, 0, "COMPLEX128"},
    [CGPU_DT_FLOAT_INT] = {sizeof(t_float_int), TEST_KIND_PAIR, 0, "FLOAT_INT"},
    [CGPU_DT_2INT] = {sizeof(t_2int), TEST_KIND_PAIR, 0, "2INT"},
    [CGPU_DT_2FLOAT] = {sizeof(t_2float), TEST_KIND_PAIR, 0, "2FLOAT"},
    [CGPU_DT_2DOUBLE] = {sizeof(t_2double), TEST_KIND_PAIR, 0, "2DOUBLE"},
    [CGPU_DT_SHORT_INT] = {sizeof(t_short_int), TEST_KIND_PAIR, 0, "SHORT_INT"},
    [CGPU_DT_DOUBLE_INT] = {sizeof(t_double_int), TEST_KIND_PAIR, 0, "DOUBLE_INT"},
    [CGPU_DT_LONG_INT] = {sizeof(t_long_int), TEST_KIND_PAIR, 0, "LONG_INT"},
    [CGPU_DT_LONG_DOUBLE_INT] = {sizeof(t_long_double_int), TEST_KIND_PAIR, 0, "LONG_DOUBLE_INT"},
    [CGPU_DT_COMPLEX_LONG_DOUBLE] = {sizeof(long double _Complex), TEST_KIND_COMPLEX, 0,
                                     "COMPLEX_LONG_DOUBLE"},
};

static const char *const test_op_labels[CGPU_OP_COUNT] = {
    [CGPU_OP_SUM] = "SUM",   [CGPU_OP_PROD] = "PROD",     [CGPU_OP_MIN] = "MIN",
    [CGPU_OP_MAX] = "MAX",   [CGPU_OP_LAND] = "LAND",     [CGPU_OP_LOR] = "LOR",
    [CGPU_OP_LXOR] = "LXOR", [CGPU_OP_BAND] = "BAND",     [CGPU_OP_BOR] = "BOR",
    [CGPU_OP_BXOR] = "BXOR", [CGPU_OP_MINLOC] = "MINLOC", [CGPU_OP_MAXLOC] = "MAXLOC",
};

/* Values outside each enum's range, as a corrupted or newer caller might pass them. */
static const cgpu_dtype_t invalid_dtypes[] = {CGPU_DT_COUNT, (cgpu_dtype_t) (CGPU_DT_COUNT + 7),
                                              (cgpu_dtype_t) -1};
static const cgpu_op_t invalid_ops[] = {CGPU_OP_COUNT, (cgpu_op_t) (CGPU_OP_COUNT + 7),
                                        (cgpu_op_t) -1};

#define TEST_ARRAY_LEN(arr) (sizeof(arr) / sizeof((arr)[0]))

/* ------------------------------------------------------------------------------------- */
/* Plain helpers: random numbers, bit patterns, typed loads and stores                    */
/* ------------------------------------------------------------------------------------- */

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

static uint64_t width_mask(unsigned int bits)
{
    return (64 == bits) ? UINT64_MAX : ((UINT64_C(1) << bits) - 1);
}

/* Two's complement value of the low @p bits bits of @p pattern, computed without UB. */
static int64_t sign_extend(uint64_t pattern, unsigned int bits)
{
    const uint64_t mask = width_mask(bits);
    const uint64_t sign = UINT64_C(1) << (bits - 1);

    pattern &= mask;
    if (0 == (pattern & sign)) {
        return (int64_t) pattern;
    }
    /* negative: -(~pattern within the width) - 1, every step in range */
    return -(int64_t) (~pattern & mask) - 1;
}

/*
 * Boundary bit patterns of a @p bits wide integer. For signed types they include 0, 1,
 * -1, -2, -100, INT_MIN, INT_MAX, INT_MIN + 1 and a value whose square overflows; for
 * unsigned ones the same patterns are 0, UINT_MAX, UINT_MAX - 1, the midpoint and so on.
 */
static uint64_t int_pool_bits(unsigned int bits, size_t k)
{
    const uint64_t sign = UINT64_C(1) << (bits - 1);
    const uint64_t pool[TEST_POOL_SIZE] = {
        0,
        1,
        2,
        3,
        7,
        100,
        UINT64_MAX,             /* -1 */
        UINT64_MAX - 1,         /* -2 */
        0 - UINT64_C(100),      /* -100 */
        sign,                   /* INT_MIN */
        sign - 1,               /* INT_MAX */
        sign + 1,               /* INT_MIN + 1 */
        sign >> 1,              /* its square overflows */
        UINT64_C(0x5555555555555555),
        UINT64_C(0xAAAAAAAAAAAAAAAA),
        UINT64_C(0x0F0F0F0F0F0F0F0F),
    };

    return pool[k % TEST_POOL_SIZE] & width_mask(bits);
}

/* Element @p i of an integer or bool buffer, as the bit pattern of its own width. */
static uint64_t load_bits(cgpu_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case CGPU_DT_INT8:
        return (uint8_t) ((const int8_t *) buf)[i];
    case CGPU_DT_UINT8:
        return ((const uint8_t *) buf)[i];
    case CGPU_DT_INT16:
        return (uint16_t) ((const int16_t *) buf)[i];
    case CGPU_DT_UINT16:
        return ((const uint16_t *) buf)[i];
    case CGPU_DT_INT32:
        return (uint32_t) ((const int32_t *) buf)[i];
    case CGPU_DT_UINT32:
        return ((const uint32_t *) buf)[i];
    case CGPU_DT_INT64:
        return (uint64_t) ((const int64_t *) buf)[i];
    case CGPU_DT_UINT64:
        return ((const uint64_t *) buf)[i];
    case CGPU_DT_BOOL:
        /* as a byte: a _Bool holding anything but 0 or 1 must be reported, not be UB */
        return ((const unsigned char *) buf)[i];
    default:
        CU_FAIL("load_bits called on a non-integer type");
        return 0;
    }
}

/* Stores the low bits of @p pattern as element @p i (signed types wrap as GCC defines). */
static void store_bits(cgpu_dtype_t dt, void *buf, size_t i, uint64_t pattern)
{
    switch (dt) {
    case CGPU_DT_INT8:
        ((int8_t *) buf)[i] = (int8_t) (uint8_t) pattern;
        break;
    case CGPU_DT_UINT8:
        ((uint8_t *) buf)[i] = (uint8_t) pattern;
        break;
    case CGPU_DT_INT16:
        ((int16_t *) buf)[i] = (int16_t) (uint16_t) pattern;
        break;
    case CGPU_DT_UINT16:
        ((uint16_t *) buf)[i] = (uint16_t) pattern;
        break;
    case CGPU_DT_INT32:
        ((int32_t *) buf)[i] = (int32_t) (uint32_t) pattern;
        break;
    case CGPU_DT_UINT32:
        ((uint32_t *) buf)[i] = (uint32_t) pattern;
        break;
    case CGPU_DT_INT64:
        ((int64_t *) buf)[i] = (int64_t) pattern;
        break;
    case CGPU_DT_UINT64:
        ((uint64_t *) buf)[i] = pattern;
        break;
    case CGPU_DT_BOOL:
        ((_Bool *) buf)[i] = (0 != pattern);
        break;
    default:
        CU_FAIL("store_bits called on a non-integer type");
        break;
    }
}

/* ------------------------------------------------------------------------------------- */
/* Reference results                                                                      */
/* ------------------------------------------------------------------------------------- */

/*
 * Reference for integer and bool types on bit patterns: SUM and PROD are the exact result
 * reduced modulo 2^bits (which is what two's complement wrap-around means), MIN and MAX
 * compare signed values for signed types, logical operators give 0 or 1.
 */
static uint64_t int_reference(cgpu_dtype_t dt, cgpu_op_t op, uint64_t x, uint64_t y)
{
    const unsigned int bits = test_types[dt].bits;
    const bool is_signed = (TEST_KIND_SIGNED == test_types[dt].kind);
    bool x_first; /* MIN/MAX: whether x is the answer */
    uint64_t r = 0;

    switch (op) {
    case CGPU_OP_SUM:
        r = x + y;
        break;
    case CGPU_OP_PROD:
        r = x * y;
        break;
    case CGPU_OP_MIN:
        x_first = is_signed ? (sign_extend(x, bits) <= sign_extend(y, bits)) : (x <= y);
        r = x_first ? x : y;
        break;
    case CGPU_OP_MAX:
        x_first = is_signed ? (sign_extend(x, bits) >= sign_extend(y, bits)) : (x >= y);
        r = x_first ? x : y;
        break;
    case CGPU_OP_LAND:
        r = (0 != x && 0 != y) ? 1 : 0;
        break;
    case CGPU_OP_LOR:
        r = (0 != x || 0 != y) ? 1 : 0;
        break;
    case CGPU_OP_LXOR:
        r = ((0 != x) ^ (0 != y)) ? 1 : 0;
        break;
    case CGPU_OP_BAND:
        r = x & y;
        break;
    case CGPU_OP_BOR:
        r = x | y;
        break;
    case CGPU_OP_BXOR:
        r = x ^ y;
        break;
    default:
        CU_FAIL("int_reference called with an invalid op");
        break;
    }
    return r & width_mask(bits);
}

/*
 * Floating reference, one function per type so that every operation rounds in the type
 * itself. MIN/MAX implement the documented semantics of `a < b ? a : b` and
 * `a > b ? a : b` in a different form: b whenever a NaN is involved or the two compare
 * equal (so min(-0.0, +0.0) is +0.0 and min(+0.0, -0.0) is -0.0), else the smaller/larger.
 */
#define TEST_DEFINE_FLOAT_REFERENCE(NAME, T)                                           \
    static long double NAME(cgpu_op_t op, const void *a, const void *b, size_t i)      \
    {                                                                                  \
        const T x = ((const T *) a)[i];                                                \
        const T y = ((const T *) b)[i];                                                \
        const bool nan = isnan(x) || isnan(y);                                         \
        T r = 0;                                                                       \
                                                                                       \
        switch (op) {                                                                  \
        case CGPU_OP_SUM:                                                              \
            r = x + y;                                                                 \
            break;                                                                     \
        case CGPU_OP_PROD:                                                             \
            r = x * y;                                                                 \
            break;                                                                     \
        case CGPU_OP_MIN:                                                              \
            r = (nan || y <= x) ? y : x;                                               \
            break;                                                                     \
        case CGPU_OP_MAX:                                                              \
            r = (nan || y >= x) ? y : x;                                               \
            break;                                                                     \
        default:                                                                       \
            CU_FAIL("float reference called with an unsupported op");                 \
            break;                                                                     \
        }                                                                              \
        return r;                                                                      \
    }

TEST_DEFINE_FLOAT_REFERENCE(float32_reference, float)
TEST_DEFINE_FLOAT_REFERENCE(float64_reference, double)
TEST_DEFINE_FLOAT_REFERENCE(long_double_reference, long double)

static long double float_reference(cgpu_dtype_t dt, cgpu_op_t op, const void *a, const void *b,
                                   size_t i)
{
    switch (dt) {
    case CGPU_DT_FLOAT32:
        return float32_reference(op, a, b, i);
    case CGPU_DT_FLOAT64:
        return float64_reference(op, a, b, i);
    default:
        return long_double_reference(op, a, b, i);
    }
}

/* Element @p i of a floating buffer, widened exactly to long double. */
static long double load_float(cgpu_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case CGPU_DT_FLOAT32:
        return ((const float *) buf)[i];
    case CGPU_DT_FLOAT64:
        return ((const double *) buf)[i];
    default:
        return ((const long double *) buf)[i];
    }
}

/* Same value, including the sign of zero; any NaN matches any NaN. */
static bool same_float(long double got, long double want)
{
    if (isnan(want)) {
        return isnan(got);
    }
    return got == want && signbit(got) == signbit(want);
}

/* ------------------------------------------------------------------------------------- */
/* Inputs                                                                                 */
/* ------------------------------------------------------------------------------------- */

/*
 * Floating inputs: first every pair of 16 special values (zeros of both signs, the
 * extremes, a denormal, infinities, NaN), then random multiples of 1/64, every seventh
 * one scaled by 1e30 so that products overflow in float.
 */
#define TEST_DEFINE_FLOAT_FILL(NAME, T, MAX, MIN, TRUE_MIN)                            \
    static void NAME(void *a, void *b, size_t n, uint64_t *rng)                        \
    {                                                                                  \
        const T pool[TEST_POOL_SIZE] = {                                               \
            (T) 0, -(T) 0, (T) 1, -(T) 1, (T) 0.5, (T) 3, (T) -2.75, (T) 1e3,          \
            MAX, -(MAX), MIN, TRUE_MIN,                                                \
            (T) INFINITY, -(T) INFINITY, (T) NAN, (T) 1e-3,                            \
        };                                                                             \
        T *ta = (T *) a;                                                               \
        T *tb = (T *) b;                                                               \
                                                                                       \
        for (size_t i = 0; i < n; ++i) {                                               \
            if (i < TEST_POOL_SIZE * TEST_POOL_SIZE) {                                 \
                ta[i] = pool[i % TEST_POOL_SIZE];                                      \
                tb[i] = pool[i / TEST_POOL_SIZE];                                      \
            } else {                                                                   \
                const T scale = (0 == i % 7) ? (T) 1e30 : (T) 1;                       \
                ta[i] = (T) ((int) (next_random(rng) % 20001) - 10000) / 64 * scale;   \
                tb[i] = (T) ((int) (next_random(rng) % 20001) - 10000) / 64;           \
            }                                                                          \
        }                                                                              \
    }

TEST_DEFINE_FLOAT_FILL(fill_float32, float, FLT_MAX, FLT_MIN, FLT_TRUE_MIN)
TEST_DEFINE_FLOAT_FILL(fill_float64, double, DBL_MAX, DBL_MIN, DBL_TRUE_MIN)
TEST_DEFINE_FLOAT_FILL(fill_long_double, long double, LDBL_MAX, LDBL_MIN, LDBL_TRUE_MIN)

/* Fills @p n elements of @p a and @p b: all pairs of boundary values first, then random. */
static void fill_inputs(cgpu_dtype_t dt, void *a, void *b, size_t n)
{
    uint64_t rng = UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t) dt;

    switch (dt) {
    case CGPU_DT_FLOAT32:
        fill_float32(a, b, n, &rng);
        return;
    case CGPU_DT_FLOAT64:
        fill_float64(a, b, n, &rng);
        return;
    case CGPU_DT_LONG_DOUBLE:
        fill_long_double(a, b, n, &rng);
        return;
    default:
        break;
    }

    for (size_t i = 0; i < n; ++i) {
        uint64_t x;
        uint64_t y;

        if (CGPU_DT_BOOL == dt) {
            x = (i < 4) ? (i & 1) : (next_random(&rng) & 1);
            y = (i < 4) ? ((i >> 1) & 1) : (next_random(&rng) & 1);
        } else if (i < TEST_POOL_SIZE * TEST_POOL_SIZE) {
            x = int_pool_bits(test_types[dt].bits, i % TEST_POOL_SIZE);
            y = int_pool_bits(test_types[dt].bits, i / TEST_POOL_SIZE);
        } else {
            x = next_random(&rng);
            y = next_random(&rng);
        }
        store_bits(dt, a, i, x);
        store_bits(dt, b, i, y);
    }
}

/* ------------------------------------------------------------------------------------- */
/* The check of one (type, op) pair                                                       */
/* ------------------------------------------------------------------------------------- */

typedef enum test_alias {
    TEST_ALIAS_NONE,     /* dst, a and b are three buffers */
    TEST_ALIAS_DST_IS_A, /* in place: dst == a */
    TEST_ALIAS_DST_IS_B, /* in place: dst == b */
} test_alias_t;

static const char *alias_label(test_alias_t alias)
{
    switch (alias) {
    case TEST_ALIAS_DST_IS_A:
        return "dst == a";
    case TEST_ALIAS_DST_IS_B:
        return "dst == b";
    default:
        return "separate buffers";
    }
}

static bool guard_intact(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; ++i) {
        if (TEST_GUARD_FILL != p[i]) {
            return false;
        }
    }
    return true;
}

/* Whether element @p i of @p got equals the reference for a[i] op b[i]; prints a mismatch. */
static bool element_matches(cgpu_dtype_t dt, cgpu_op_t op, const void *got, const void *a,
                            const void *b, size_t i, test_alias_t alias)
{
    if (TEST_KIND_FLOAT == test_types[dt].kind) {
        const long double want = float_reference(dt, op, a, b, i);
        const long double have = load_float(dt, got, i);

        if (same_float(have, want)) {
            return true;
        }
        printf("\n    %s %s (%s) element %zu: %Lg op %Lg gave %Lg, expected %Lg",
               test_types[dt].label, test_op_labels[op], alias_label(alias), i,
               load_float(dt, a, i), load_float(dt, b, i), have, want);
        return false;
    }

    const uint64_t want = int_reference(dt, op, load_bits(dt, a, i), load_bits(dt, b, i));
    const uint64_t have = load_bits(dt, got, i);

    if (have == want) {
        return true;
    }
    printf("\n    %s %s (%s) element %zu: 0x%llx op 0x%llx gave 0x%llx, expected 0x%llx",
           test_types[dt].label, test_op_labels[op], alias_label(alias), i,
           (unsigned long long) load_bits(dt, a, i), (unsigned long long) load_bits(dt, b, i),
           (unsigned long long) have, (unsigned long long) want);
    return false;
}

/*
 * Reduces TEST_COUNT elements of a supported pair and checks each against the reference
 * computed from saved copies of the inputs, that nothing past the last element was
 * written and, out of place, that the inputs were not modified.
 */
static void check_pair(cgpu_dtype_t dt, cgpu_op_t op, test_alias_t alias)
{
    const size_t bytes = TEST_COUNT * test_types[dt].size;
    const size_t alloc = bytes + TEST_GUARD_BYTES;
    unsigned char *a = malloc(alloc);
    unsigned char *b = malloc(alloc);
    unsigned char *dst = malloc(alloc);
    unsigned char *a_saved = malloc(bytes);
    unsigned char *b_saved = malloc(bytes);
    unsigned char *target;
    size_t mismatches = 0;

    if (NULL == a || NULL == b || NULL == dst || NULL == a_saved || NULL == b_saved) {
        CU_FAIL("out of memory");
        goto out_free;
    }
    memset(a, TEST_GUARD_FILL, alloc);
    memset(b, TEST_GUARD_FILL, alloc);
    memset(dst, TEST_GUARD_FILL, alloc);
    fill_inputs(dt, a, b, TEST_COUNT);
    memcpy(a_saved, a, bytes);
    memcpy(b_saved, b, bytes);

    switch (alias) {
    case TEST_ALIAS_DST_IS_A:
        target = a;
        break;
    case TEST_ALIAS_DST_IS_B:
        target = b;
        break;
    default:
        target = dst;
        break;
    }

    CU_ASSERT_EQUAL(cgpu_reduce_host(dt, op, target, a, b, TEST_COUNT), 0);

    for (size_t i = 0; i < TEST_COUNT; ++i) {
        if (!element_matches(dt, op, target, a_saved, b_saved, i, alias)) {
            ++mismatches;
        }
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT(guard_intact(target + bytes, TEST_GUARD_BYTES));
    if (TEST_ALIAS_NONE == alias) {
        CU_ASSERT_EQUAL(memcmp(a, a_saved, bytes), 0);
        CU_ASSERT_EQUAL(memcmp(b, b_saved, bytes), 0);
    }

out_free:
    free(b_saved);
    free(a_saved);
    free(dst);
    free(b);
    free(a);
}

/* Runs check_pair on every supported pair of the given kinds (independent table). */
static void check_kinds(bool want_int, bool want_float, bool want_bool, test_alias_t alias)
{
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        const test_kind_t kind = test_types[dt].kind;
        const bool wanted = (TEST_KIND_COMPLEX == kind || TEST_KIND_PAIR == kind)
                                ? false /* their own tests */
                            : (TEST_KIND_FLOAT == kind) ? want_float
                            : (TEST_KIND_BOOL == kind)  ? want_bool
                                                        : want_int;

        if (!wanted) {
            continue;
        }
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            if (expected_supported[dt][op]) {
                check_pair((cgpu_dtype_t) dt, (cgpu_op_t) op, alias);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------- */
/* Test cases                                                                             */
/* ------------------------------------------------------------------------------------- */

static void test_supported_pairs_match_mpi(void)
{
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            const bool got = cgpu_reduce_supported((cgpu_dtype_t) dt, (cgpu_op_t) op);
            const bool want = (0 != expected_supported[dt][op]);

            CU_ASSERT_EQUAL(got, want);
            if (got != want) {
                printf("\n    %s %s: supported says %d, MPI says %d", test_types[dt].label,
                       test_op_labels[op], (int) got, (int) want);
            }
        }
    }
}

static void test_out_of_range_values_are_not_supported(void)
{
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_dtypes); ++k) {
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            CU_ASSERT_FALSE(cgpu_reduce_supported(invalid_dtypes[k], (cgpu_op_t) op));
        }
    }
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_ops); ++k) {
        for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
            CU_ASSERT_FALSE(cgpu_reduce_supported((cgpu_dtype_t) dt, invalid_ops[k]));
        }
    }
}

static void test_element_sizes_match_the_c_types(void)
{
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        CU_ASSERT_EQUAL(cgpu_dtype_size((cgpu_dtype_t) dt), test_types[dt].size);
    }
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_dtypes); ++k) {
        CU_ASSERT_EQUAL(cgpu_dtype_size(invalid_dtypes[k]), 0);
    }
}

/* the data runs: one whole element, but the pairs with padding, whose runs are their two
 * fields as the test's own structs lay them out */
#define CHECK_RUNS_OF_PAIR(DT, T)                                                                  \
    do {                                                                                           \
        const size_t vb = sizeof(((T *) 0)->v), io = offsetof(T, i), ib = sizeof(((T *) 0)->i);    \
        size_t o[2] = {9, 9}, l[2] = {9, 9};                                                       \
        const int n = cgpu_dtype_runs(DT, o, l);                                                   \
        if (vb == io) {                                                                            \
            CU_ASSERT(1 == n && 0 == o[0] && io + ib == l[0]);                                     \
        } else {                                                                                   \
            CU_ASSERT(2 == n && 0 == o[0] && vb == l[0] && io == o[1] && ib == l[1]);              \
        }                                                                                          \
        CU_ASSERT(cgpu_dtype_span(DT, 5) == 4 * sizeof(T) + io + ib);                              \
    } while (0)

static void test_data_runs_leave_out_the_padding(void)
{
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        size_t o[2], l[2];
        if (TEST_KIND_PAIR != test_types[dt].kind) {
            CU_ASSERT(1 == cgpu_dtype_runs((cgpu_dtype_t) dt, o, l) && 0 == o[0] &&
                      test_types[dt].size == l[0]);
            CU_ASSERT(cgpu_dtype_span((cgpu_dtype_t) dt, 7) == 7 * test_types[dt].size);
        }
        CU_ASSERT_EQUAL(cgpu_dtype_span((cgpu_dtype_t) dt, 0), 0);
    }
    CHECK_RUNS_OF_PAIR(CGPU_DT_FLOAT_INT, t_float_int);
    CHECK_RUNS_OF_PAIR(CGPU_DT_2INT, t_2int);
    CHECK_RUNS_OF_PAIR(CGPU_DT_2FLOAT, t_2float);
    CHECK_RUNS_OF_PAIR(CGPU_DT_2DOUBLE, t_2double);
    CHECK_RUNS_OF_PAIR(CGPU_DT_SHORT_INT, t_short_int);
    CHECK_RUNS_OF_PAIR(CGPU_DT_DOUBLE_INT, t_double_int);
    CHECK_RUNS_OF_PAIR(CGPU_DT_LONG_INT, t_long_int);
    CHECK_RUNS_OF_PAIR(CGPU_DT_LONG_DOUBLE_INT, t_long_double_int);
    /* written out: a short, 2 bytes of padding, an int; a double and an int, 4 of padding */
    size_t o[2], l[2];
    CU_ASSERT(2 == cgpu_dtype_runs(CGPU_DT_SHORT_INT, o, l) && 2 == l[0] && 4 == o[1]);
    CU_ASSERT(1 == cgpu_dtype_runs(CGPU_DT_DOUBLE_INT, o, l) && 12 == l[0] &&
              16 == cgpu_dtype_size(CGPU_DT_DOUBLE_INT));
    CU_ASSERT_EQUAL(cgpu_dtype_span(CGPU_DT_DOUBLE_INT, 3), 44); /* 16 + 16 + 12 */
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_dtypes); ++k) {
        CU_ASSERT_EQUAL(cgpu_dtype_runs(invalid_dtypes[k], o, l), 0);
        CU_ASSERT_EQUAL(cgpu_dtype_span(invalid_dtypes[k], 3), 0);
    }
    /* the long double types reduce on the host only */
    CU_ASSERT(!cgpu_dtype_on_device(CGPU_DT_LONG_DOUBLE_INT) &&
              !cgpu_dtype_on_device(CGPU_DT_COMPLEX_LONG_DOUBLE) &&
              !cgpu_dtype_on_device(CGPU_DT_LONG_DOUBLE) && cgpu_dtype_on_device(CGPU_DT_DOUBLE_INT));
}

static void test_names_are_non_null_and_distinct(void)
{
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        const char *name = cgpu_dtype_name((cgpu_dtype_t) dt);

        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        CU_ASSERT_NOT_EQUAL(strlen(name), 0);
        for (int other = 0; other < dt; ++other) {
            CU_ASSERT_STRING_NOT_EQUAL(name, cgpu_dtype_name((cgpu_dtype_t) other));
        }
    }
    for (int op = 0; op < CGPU_OP_COUNT; ++op) {
        const char *name = cgpu_op_name((cgpu_op_t) op);

        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        CU_ASSERT_NOT_EQUAL(strlen(name), 0);
        for (int other = 0; other < op; ++other) {
            CU_ASSERT_STRING_NOT_EQUAL(name, cgpu_op_name((cgpu_op_t) other));
        }
    }
    /* logs print whatever they are handed: out-of-range values must not yield NULL */
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_dtypes); ++k) {
        CU_ASSERT_PTR_NOT_NULL(cgpu_dtype_name(invalid_dtypes[k]));
    }
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_ops); ++k) {
        CU_ASSERT_PTR_NOT_NULL(cgpu_op_name(invalid_ops[k]));
    }
}

static void test_integer_reductions_match_a_scalar_reference(void)
{
    check_kinds(true, false, false, TEST_ALIAS_NONE);
}

static void test_floating_reductions_match_a_scalar_reference(void)
{
    check_kinds(false, true, false, TEST_ALIAS_NONE);
}

static void test_bool_reductions_match_a_scalar_reference(void)
{
    check_kinds(false, false, true, TEST_ALIAS_NONE);
}

static void test_sum_of_int8_wraps_like_twos_complement(void)
{
    const int8_t a[] = {127, -128, -1, 100, 0, -128, 127};
    const int8_t b[] = {1, -1, 1, 100, -128, -128, 127};
    const int8_t want[] = {-128, 127, 0, -56, -128, 0, -2};
    int8_t got[TEST_ARRAY_LEN(a)];

    CU_ASSERT_EQUAL_FATAL(cgpu_reduce_host(CGPU_DT_INT8, CGPU_OP_SUM, got, a, b, TEST_ARRAY_LEN(a)),
                          0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a); ++i) {
        CU_ASSERT_EQUAL(got[i], want[i]);
    }
}

static void test_product_of_signed_integers_wraps_like_twos_complement(void)
{
    const int16_t a16[] = {INT16_MIN, 256, 181, 182, -3};
    const int16_t b16[] = {-1, 256, 181, 182, 7};
    const int16_t want16[] = {INT16_MIN, 0, 32761, -32412, -21};
    const int32_t a32[] = {INT32_MAX, INT32_MIN, 65536, -3, INT32_MIN};
    const int32_t b32[] = {2, -1, 65536, 7, INT32_MIN};
    const int32_t want32[] = {-2, INT32_MIN, 0, -21, 0};
    const int64_t a64[] = {INT64_MIN, INT64_MAX, INT64_C(1) << 32, -1};
    const int64_t b64[] = {-1, INT64_MAX, INT64_C(1) << 32, INT64_MIN};
    const int64_t want64[] = {INT64_MIN, 1, 0, INT64_MIN};
    int16_t got16[TEST_ARRAY_LEN(a16)];
    int32_t got32[TEST_ARRAY_LEN(a32)];
    int64_t got64[TEST_ARRAY_LEN(a64)];

    CU_ASSERT_EQUAL_FATAL(
        cgpu_reduce_host(CGPU_DT_INT16, CGPU_OP_PROD, got16, a16, b16, TEST_ARRAY_LEN(a16)), 0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a16); ++i) {
        CU_ASSERT_EQUAL(got16[i], want16[i]);
    }
    CU_ASSERT_EQUAL_FATAL(
        cgpu_reduce_host(CGPU_DT_INT32, CGPU_OP_PROD, got32, a32, b32, TEST_ARRAY_LEN(a32)), 0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a32); ++i) {
        CU_ASSERT_EQUAL(got32[i], want32[i]);
    }
    CU_ASSERT_EQUAL_FATAL(
        cgpu_reduce_host(CGPU_DT_INT64, CGPU_OP_PROD, got64, a64, b64, TEST_ARRAY_LEN(a64)), 0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a64); ++i) {
        CU_ASSERT_EQUAL(got64[i], want64[i]);
    }
}

static void test_product_of_uint16_does_not_overflow_int(void)
{
    /* 0xffff * 0xffff overflows int if the operands are promoted: the result must be 1 */
    const uint16_t a[] = {UINT16_MAX, UINT16_MAX, 256};
    const uint16_t b[] = {UINT16_MAX, 2, 256};
    const uint16_t want[] = {1, UINT16_MAX - 1, 0};
    uint16_t got[TEST_ARRAY_LEN(a)];

    CU_ASSERT_EQUAL_FATAL(
        cgpu_reduce_host(CGPU_DT_UINT16, CGPU_OP_PROD, got, a, b, TEST_ARRAY_LEN(a)), 0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a); ++i) {
        CU_ASSERT_EQUAL(got[i], want[i]);
    }
}

static void test_float_min_and_max_return_b_when_a_nan_is_involved(void)
{
    const float a[] = {NAN, 1.0f, NAN, -0.0f, 0.0f, 2.0f};
    const float b[] = {1.0f, NAN, NAN, 0.0f, -0.0f, -3.0f};
    const float want_min[] = {1.0f, NAN, NAN, 0.0f, -0.0f, -3.0f};
    const float want_max[] = {1.0f, NAN, NAN, 0.0f, -0.0f, 2.0f};
    const double da[] = {NAN, 1.0, -0.0};
    const double db[] = {1.0, NAN, 0.0};
    const double dwant[] = {1.0, NAN, 0.0}; /* same for min and max */
    float got[TEST_ARRAY_LEN(a)];
    double dgot[TEST_ARRAY_LEN(da)];

    CU_ASSERT_EQUAL_FATAL(
        cgpu_reduce_host(CGPU_DT_FLOAT32, CGPU_OP_MIN, got, a, b, TEST_ARRAY_LEN(a)), 0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a); ++i) {
        CU_ASSERT(same_float(got[i], want_min[i]));
    }
    CU_ASSERT_EQUAL_FATAL(
        cgpu_reduce_host(CGPU_DT_FLOAT32, CGPU_OP_MAX, got, a, b, TEST_ARRAY_LEN(a)), 0);
    for (size_t i = 0; i < TEST_ARRAY_LEN(a); ++i) {
        CU_ASSERT(same_float(got[i], want_max[i]));
    }
    for (int op = CGPU_OP_MIN; op <= CGPU_OP_MAX; ++op) {
        CU_ASSERT_EQUAL_FATAL(
            cgpu_reduce_host(CGPU_DT_FLOAT64, (cgpu_op_t) op, dgot, da, db, TEST_ARRAY_LEN(da)),
            0);
        for (size_t i = 0; i < TEST_ARRAY_LEN(da); ++i) {
            CU_ASSERT(same_float(dgot[i], dwant[i]));
        }
    }
}

static void test_bool_bytes_other_than_0_and_1_count_as_true(void)
{
    /* not valid _Bool values, but they reach us from Fortran LOGICAL and memset buffers */
    const unsigned char a[] = {2, 0, 0xFF, 2};
    const unsigned char b[] = {0, 3, 1, 0x80};
    const unsigned char want[CGPU_OP_COUNT][4] = {
        [CGPU_OP_LAND] = {0, 0, 1, 1},
        [CGPU_OP_LOR] = {1, 1, 1, 1},
        [CGPU_OP_LXOR] = {1, 1, 0, 0},
    };
    const cgpu_op_t ops[] = {CGPU_OP_LAND, CGPU_OP_LOR, CGPU_OP_LXOR};
    unsigned char got[4];

    for (size_t k = 0; k < TEST_ARRAY_LEN(ops); ++k) {
        CU_ASSERT_EQUAL_FATAL(cgpu_reduce_host(CGPU_DT_BOOL, ops[k], got, a, b, 4), 0);
        CU_ASSERT_EQUAL(memcmp(got, want[ops[k]], 4), 0);
    }
}

/* Complex SUM and PROD against C99's complex arithmetic on values whose products are exact
 * (small integers and halves), in place and not, float and double. */
static void test_complex_reductions_match_c99_complex_arithmetic(void)
{
    enum { N = 37 };
    uint64_t seed = 0x5eed;
    float _Complex fa[N], fb[N], fgot[N], fwant[N];
    double _Complex da[N], db[N], dgot[N], dwant[N];
    for (int i = 0; i < N; ++i) {
        const double re1 = (double) ((int) (next_random(&seed) % 41) - 20) / 2;
        const double im1 = (double) ((int) (next_random(&seed) % 41) - 20) / 2;
        const double re2 = (double) ((int) (next_random(&seed) % 41) - 20) / 2;
        const double im2 = (double) ((int) (next_random(&seed) % 41) - 20) / 2;
        fa[i] = CMPLXF((float) re1, (float) im1);
        fb[i] = CMPLXF((float) re2, (float) im2);
        da[i] = CMPLX(re1, im1);
        db[i] = CMPLX(re2, im2);
    }
    for (int op = CGPU_OP_SUM; op <= CGPU_OP_PROD; ++op) {
        for (int i = 0; i < N; ++i) {
            fwant[i] = CGPU_OP_SUM == op ? fa[i] + fb[i] : fa[i] * fb[i];
            dwant[i] = CGPU_OP_SUM == op ? da[i] + db[i] : da[i] * db[i];
        }
        CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_COMPLEX64, (cgpu_op_t) op, fgot, fa, fb, N), 0);
        CU_ASSERT_EQUAL(memcmp(fgot, fwant, sizeof(fgot)), 0);
        CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_COMPLEX128, (cgpu_op_t) op, dgot, da, db, N), 0);
        CU_ASSERT_EQUAL(memcmp(dgot, dwant, sizeof(dgot)), 0);
        /* in place into a */
        memcpy(dgot, da, sizeof(dgot));
        CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_COMPLEX128, (cgpu_op_t) op, dgot, dgot, db, N),
                        0);
        CU_ASSERT_EQUAL(memcmp(dgot, dwant, sizeof(dgot)), 0);
    }
    /* long double complex, on the same values */
    long double _Complex la[N], lb[N], lgot[N], lwant[N];
    for (int i = 0; i < N; ++i) {
        la[i] = CMPLXL(creal(da[i]), cimag(da[i]));
        lb[i] = CMPLXL(creal(db[i]), cimag(db[i]));
    }
    for (int op = CGPU_OP_SUM; op <= CGPU_OP_PROD; ++op) {
        int bad = 0;
        CU_ASSERT_EQUAL(
            cgpu_reduce_host(CGPU_DT_COMPLEX_LONG_DOUBLE, (cgpu_op_t) op, lgot, la, lb, N), 0);
        for (int i = 0; i < N; ++i) {
            lwant[i] = CGPU_OP_SUM == op ? la[i] + lb[i] : la[i] * lb[i];
            bad += creall(lgot[i]) != creall(lwant[i]) || cimagl(lgot[i]) != cimagl(lwant[i]);
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
    /* (1 + 2i)(3 - i) = 5 + 5i, written out */
    const double x[2] = {1, 2}, y[2] = {3, -1};
    double z[2] = {0, 0};
    CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_COMPLEX128, CGPU_OP_PROD, z, x, y, 1), 0);
    CU_ASSERT(5.0 == z[0] && 5.0 == z[1]);
}

/* MINLOC/MAXLOC of every pair type against MPI's rule written out here: values from a
 * small range (so equal values with different indices are common), both orders of the
 * operands, out of place and in place into a and into b; the value and index fields are
 * compared, and out of place the padding of the padded pairs must keep its guard bytes. */
#define CHECK_LOC_PAIRS(DT, T)                                                                     \
    do {                                                                                           \
        enum { N = 61 };                                                                           \
        T a[N], b[N], got[N], want[N];                                                             \
        for (int k = 0; k < N; ++k) {                                                              \
            a[k].v = (__typeof__(a[k].v)) ((int) (next_random(&seed) % 7) - 3);                    \
            b[k].v = (__typeof__(b[k].v)) ((int) (next_random(&seed) % 7) - 3);                    \
            a[k].i = (__typeof__(a[k].i)) (next_random(&seed) % 5);                                \
            b[k].i = (__typeof__(b[k].i)) (next_random(&seed) % 5);                                \
        }                                                                                          \
        for (int op = CGPU_OP_MINLOC; op <= CGPU_OP_MAXLOC; ++op) {                                \
            for (int k = 0; k < N; ++k) {                                                          \
                const bool first = CGPU_OP_MINLOC == op ? a[k].v < b[k].v : a[k].v > b[k].v;       \
                want[k] = first ? a[k] : b[k];                                                     \
                if (a[k].v == b[k].v) {                                                            \
                    want[k].i = a[k].i < b[k].i ? a[k].i : b[k].i;                                 \
                }                                                                                  \
            }                                                                                      \
            for (int alias = 0; alias < 3; ++alias) {                                              \
                T x[N], y[N];                                                                      \
                memcpy(x, a, sizeof(x));                                                           \
                memcpy(y, b, sizeof(y));                                                           \
                memset(got, TEST_GUARD_FILL, sizeof(got));                                         \
                T *dst = 0 == alias ? got : 1 == alias ? x : y;                                    \
                CU_ASSERT_EQUAL(cgpu_reduce_host(DT, (cgpu_op_t) op, dst, x, y, N), 0);            \
                int bad = 0;                                                                       \
                for (int k = 0; k < N; ++k) {                                                      \
                    bad += dst[k].v != want[k].v || dst[k].i != want[k].i;                         \
                }                                                                                  \
                /* out of place: the padding (inside a pair, after it) keeps the guard */          \
                for (int k = 0; 0 == alias && k < N; ++k) {                                        \
                    const unsigned char *e = (const unsigned char *) &got[k];                      \
                    for (size_t o = sizeof(got[k].v); o < offsetof(T, i); ++o) {                   \
                        bad += TEST_GUARD_FILL != e[o];                                            \
                    }                                                                              \
                    for (size_t o = offsetof(T, i) + sizeof(got[k].i); o < sizeof(T); ++o) {       \
                        bad += TEST_GUARD_FILL != e[o];                                            \
                    }                                                                              \
                }                                                                                  \
                CU_ASSERT_EQUAL(bad, 0);                                                           \
                if (0 != bad) {                                                                    \
                    printf("\n    %s %s alias %d: %d of %d pairs wrong", test_types[DT].label,     \
                           test_op_labels[op], alias, bad, (int) N);                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void test_minloc_maxloc_follow_mpi_on_every_pair_type(void)
{
    uint64_t seed = 0x10c;
    CHECK_LOC_PAIRS(CGPU_DT_FLOAT_INT, t_float_int);
    CHECK_LOC_PAIRS(CGPU_DT_2INT, t_2int);
    CHECK_LOC_PAIRS(CGPU_DT_2FLOAT, t_2float);
    CHECK_LOC_PAIRS(CGPU_DT_2DOUBLE, t_2double);
    CHECK_LOC_PAIRS(CGPU_DT_SHORT_INT, t_short_int);
    CHECK_LOC_PAIRS(CGPU_DT_DOUBLE_INT, t_double_int);
    CHECK_LOC_PAIRS(CGPU_DT_LONG_INT, t_long_int);
    CHECK_LOC_PAIRS(CGPU_DT_LONG_DOUBLE_INT, t_long_double_int);
    /* written out: MINLOC of (2, 7) and (2, 3) is (2, 3); MAXLOC of (1, 0) and (5, 9) is
     * (5, 9); a NaN value loses to the b pair either way */
    t_float_int p = {2, 7}, q = {2, 3}, r;
    CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_FLOAT_INT, CGPU_OP_MINLOC, &r, &p, &q, 1), 0);
    CU_ASSERT(2.0f == r.v && 3 == r.i);
    t_2int u = {1, 0}, w = {5, 9}, z;
    CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_2INT, CGPU_OP_MAXLOC, &z, &u, &w, 1), 0);
    CU_ASSERT(5 == z.v && 9 == z.i);
    t_2double n = {NAN, 1}, o = {4.0, 8}, x;
    CU_ASSERT_EQUAL(cgpu_reduce_host(CGPU_DT_2DOUBLE, CGPU_OP_MINLOC, &x, &n, &o, 1), 0);
    CU_ASSERT(4.0 == x.v && 8 == x.i);
}

static void test_in_place_into_a_matches_the_reference(void)
{
    check_kinds(true, true, true, TEST_ALIAS_DST_IS_A);
}

static void test_in_place_into_b_matches_the_reference(void)
{
    check_kinds(true, true, true, TEST_ALIAS_DST_IS_B);
}

static void test_count_zero_writes_nothing(void)
{
    /* long double is the largest element: 8 of them of room for every type */
    long double a[8] = {0};
    long double b[8] = {0};
    unsigned char dst[sizeof(long double) * 8];

    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            if (!expected_supported[dt][op]) {
                continue;
            }
            memset(dst, TEST_GUARD_FILL, sizeof(dst));
            CU_ASSERT_EQUAL(cgpu_reduce_host((cgpu_dtype_t) dt, (cgpu_op_t) op, dst, a, b, 0),
                            0);
            CU_ASSERT(guard_intact(dst, sizeof(dst)));
            /* MPI allows NULL buffers with count 0; nothing may be dereferenced */
            CU_ASSERT_EQUAL(
                cgpu_reduce_host((cgpu_dtype_t) dt, (cgpu_op_t) op, NULL, NULL, NULL, 0), 0);
        }
    }
}

/* -1 and an untouched dst; @p a and @p b hold 8 zeroed elements of any type. */
static void check_rejected(cgpu_dtype_t dt, cgpu_op_t op, const void *a, const void *b)
{
    unsigned char dst[sizeof(long double) * 8];

    memset(dst, TEST_GUARD_FILL, sizeof(dst));
    CU_ASSERT_EQUAL(cgpu_reduce_host(dt, op, dst, a, b, 8), -1);
    CU_ASSERT(guard_intact(dst, sizeof(dst)));
}

static void test_unsupported_pairs_return_minus_one_and_leave_dst_untouched(void)
{
    long double a[8] = {0};
    long double b[8] = {0};

    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            if (!expected_supported[dt][op]) {
                check_rejected((cgpu_dtype_t) dt, (cgpu_op_t) op, a, b);
            }
        }
        for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_ops); ++k) {
            check_rejected((cgpu_dtype_t) dt, invalid_ops[k], a, b);
        }
    }
    for (size_t k = 0; k < TEST_ARRAY_LEN(invalid_dtypes); ++k) {
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            check_rejected(invalid_dtypes[k], (cgpu_op_t) op, a, b);
        }
    }
}

/* ------------------------------------------------------------------------------------- */
/* Registration                                                                           */
/* ------------------------------------------------------------------------------------- */

static const cgpu_unit_case_t test_cases[] = {
    {"supported pairs match MPI's table of predefined operations", test_supported_pairs_match_mpi},
    {"MINLOC and MAXLOC follow MPI's rule on every pair type",
     test_minloc_maxloc_follow_mpi_on_every_pair_type},
    {"out-of-range types and operators are not supported",
     test_out_of_range_values_are_not_supported},
    {"element sizes match the C types", test_element_sizes_match_the_c_types},
    {"type and operator names are non-NULL and distinct", test_names_are_non_null_and_distinct},
    {"data runs leave out the pairs' padding", test_data_runs_leave_out_the_padding},
    {"integer reductions match a scalar reference on boundary values",
     test_integer_reductions_match_a_scalar_reference},
    {"floating reductions match a scalar reference on special values",
     test_floating_reductions_match_a_scalar_reference},
    {"bool reductions match a scalar reference", test_bool_reductions_match_a_scalar_reference},
    {"sum of int8 wraps like two's complement", test_sum_of_int8_wraps_like_twos_complement},
    {"product of signed integers wraps like two's complement",
     test_product_of_signed_integers_wraps_like_twos_complement},
    {"product of uint16 does not overflow int", test_product_of_uint16_does_not_overflow_int},
    {"float min and max return b when a NaN is involved",
     test_float_min_and_max_return_b_when_a_nan_is_involved},
    {"bool bytes other than 0 and 1 count as true",
     test_bool_bytes_other_than_0_and_1_count_as_true},
    {"in-place reduction into a matches the reference", test_in_place_into_a_matches_the_reference},
    {"in-place reduction into b matches the reference", test_in_place_into_b_matches_the_reference},
    {"count zero writes nothing", test_count_zero_writes_nothing},
    {"complex reductions match C99 complex arithmetic",
     test_complex_reductions_match_c99_complex_arithmetic},
    {"unsupported pairs return -1 and leave dst untouched",
     test_unsupported_pairs_return_minus_one_and_leave_dst_untouched},
};

int main(void)
{

    return cgpu_unit_run("test_reduce", test_cases, TEST_ARRAY_LEN(test_cases));
}
