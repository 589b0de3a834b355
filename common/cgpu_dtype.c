/*
 * coll/gpu base: the descriptors of the element types and operators (cgpu_dtype.h).
 */
#include <stddef.h>
#include <stdint.h>

#include "cgpu_dtype.h"

/* the layout of each (value, index) pair, as MPI and the host loops see it */
#define CGPU_PAIR_LAYOUT(E, N, V, I)                                                               \
    typedef struct {                                                                               \
        V v;                                                                                       \
        I i;                                                                                       \
    } pair_##N##_t;
CGPU_DTYPE_PAIRS(CGPU_PAIR_LAYOUT)
#undef CGPU_PAIR_LAYOUT

/*
 * Range checks go through unsigned int: the enums' underlying type is
 * implementation-defined (GCC picks unsigned int here), and a value cast in from a
 * negative int must be rejected either way.
 */
static bool dtype_is_valid(cgpu_dtype_t dt)
{
    return (unsigned int) dt < (unsigned int) CGPU_DT_COUNT;
}

static bool op_is_valid(cgpu_op_t op)
{
    return (unsigned int) op < (unsigned int) CGPU_OP_COUNT;
}

#define CGPU_PAIR_INFO(E, N, V, I)                                                                 \
    [CGPU_DT_##E] = {sizeof(pair_##N##_t), #N, sizeof(((pair_##N##_t *) 0)->v),                    \
                     offsetof(pair_##N##_t, i), sizeof(((pair_##N##_t *) 0)->i)},

static const struct {
    size_t size;
    const char *name;
    size_t value_bytes, index_off, index_bytes; /* pairs only */
} dtype_info[CGPU_DT_COUNT] = {
    [CGPU_DT_INT8] = {sizeof(int8_t), "int8"},
    [CGPU_DT_UINT8] = {sizeof(uint8_t), "uint8"},
    [CGPU_DT_INT16] = {sizeof(int16_t), "int16"},
    [CGPU_DT_UINT16] = {sizeof(uint16_t), "uint16"},
    [CGPU_DT_INT32] = {sizeof(int32_t), "int32"},
    [CGPU_DT_UINT32] = {sizeof(uint32_t), "uint32"},
    [CGPU_DT_INT64] = {sizeof(int64_t), "int64"},
    [CGPU_DT_UINT64] = {sizeof(uint64_t), "uint64"},
    [CGPU_DT_FLOAT32] = {sizeof(float), "float32"},
    [CGPU_DT_FLOAT64] = {sizeof(double), "float64"},
    [CGPU_DT_LONG_DOUBLE] = {sizeof(long double), "long_double"},
    [CGPU_DT_BOOL] = {sizeof(_Bool), "bool"},
    [CGPU_DT_COMPLEX64] = {2 * sizeof(float), "complex64"},
    [CGPU_DT_COMPLEX128] = {2 * sizeof(double), "complex128"},
    // clang-format off
    CGPU_DTYPE_PAIRS(CGPU_PAIR_INFO)
    [CGPU_DT_COMPLEX_LONG_DOUBLE] = {2 * sizeof(long double), "complex_long_double"},
    // clang-format on
};

static const char *const op_names[CGPU_OP_COUNT] = {
    [CGPU_OP_SUM] = "sum",   [CGPU_OP_PROD] = "prod",     [CGPU_OP_MIN] = "min",
    [CGPU_OP_MAX] = "max",   [CGPU_OP_LAND] = "land",     [CGPU_OP_LOR] = "lor",
    [CGPU_OP_LXOR] = "lxor", [CGPU_OP_BAND] = "band",     [CGPU_OP_BOR] = "bor",
    [CGPU_OP_BXOR] = "bxor", [CGPU_OP_MINLOC] = "minloc", [CGPU_OP_MAXLOC] = "maxloc",
};

/* Name returned for an enum value outside the defined range, so logs never get NULL. */
static const char invalid_name[] = "invalid";

/** Size in bytes of one element of @p dt, 0 for an out-of-range value. See cgpu_dtype.h. */
size_t cgpu_dtype_size(cgpu_dtype_t dt)
{
    if (!dtype_is_valid(dt)) {
        return 0;
    }
    return dtype_info[dt].size;
}

/** The data runs of one element of @p dt. See cgpu_dtype.h. */
int cgpu_dtype_runs(cgpu_dtype_t dt, size_t off[2], size_t len[2])
{
    if (!dtype_is_valid(dt)) {
        return 0;
    }
    off[0] = 0;
    if (0 == dtype_info[dt].index_bytes) { /* not a pair: the whole element */
        len[0] = dtype_info[dt].size;
        return 1;
    }
    if (dtype_info[dt].index_off == dtype_info[dt].value_bytes) { /* nothing between */
        len[0] = dtype_info[dt].index_off + dtype_info[dt].index_bytes;
        return 1;
    }
    len[0] = dtype_info[dt].value_bytes;
    off[1] = dtype_info[dt].index_off;
    len[1] = dtype_info[dt].index_bytes;
    return 2;
}

size_t cgpu_dtype_span(cgpu_dtype_t dt, size_t count)
{
    size_t off[2], len[2];
    const int runs = cgpu_dtype_runs(dt, off, len);
    return 0 == count || 0 == runs
               ? 0
               : (count - 1) * dtype_info[dt].size + off[runs - 1] + len[runs - 1];
}

bool cgpu_dtype_on_device(cgpu_dtype_t dt)
{
    return dtype_is_valid(dt) && CGPU_DT_LONG_DOUBLE != dt && CGPU_DT_LONG_DOUBLE_INT != dt &&
           CGPU_DT_COMPLEX_LONG_DOUBLE != dt;
}

/** Short name of @p dt; "invalid" for an out-of-range value, never NULL. See cgpu_dtype.h. */
const char *cgpu_dtype_name(cgpu_dtype_t dt)
{
    if (!dtype_is_valid(dt)) {
        return invalid_name;
    }
    return dtype_info[dt].name;
}

/** Short name of @p op; "invalid" for an out-of-range value, never NULL. See cgpu_dtype.h. */
const char *cgpu_op_name(cgpu_op_t op)
{
    if (!op_is_valid(op)) {
        return invalid_name;
    }
    return op_names[op];
}
