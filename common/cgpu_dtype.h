/*
 * coll/gpu base: element types and reduction operators, with their descriptors.
 *
 * Every layer speaks of data in these terms: the glue maps MPI datatypes and ops onto them,
 * the engine sizes and splits buffers with them, the kernels and the host twin reduce them,
 * the profiler names them. The header includes nothing of ours and is plain C, so nvcc
 * compiles it into the kernels too.
 */
#ifndef CGPU_DTYPE_H
#define CGPU_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Element types the engine reduces. MPI datatypes are mapped onto these by the glue. */
typedef enum cgpu_dtype {
    CGPU_DT_INT8 = 0,
    CGPU_DT_UINT8,
    CGPU_DT_INT16,
    CGPU_DT_UINT16,
    CGPU_DT_INT32,
    CGPU_DT_UINT32,
    CGPU_DT_INT64,
    CGPU_DT_UINT64,
    CGPU_DT_FLOAT32,
    CGPU_DT_FLOAT64,
    CGPU_DT_LONG_DOUBLE, /* host backend only: no device arithmetic for it */
    CGPU_DT_BOOL,        /* C _Bool: logical operators only */
    CGPU_DT_COMPLEX64,   /* float _Complex (re, im): SUM and PROD */
    CGPU_DT_COMPLEX128,  /* double _Complex (re, im): SUM and PROD */
    /* MPI's (value, index) pairs, as Open MPI lays them out (a C struct of the value then the
     * index): MINLOC and MAXLOC only */
    CGPU_DT_FLOAT_INT, /* MPI_FLOAT_INT: float, int (8 bytes) */
    CGPU_DT_2INT,      /* MPI_2INT, MPI_2INTEGER of 4-byte INTEGER: int, int */
    CGPU_DT_2FLOAT,    /* MPI_2REAL of 4-byte REAL: float, float */
    CGPU_DT_2DOUBLE,   /* MPI_2DOUBLE_PRECISION of 8-byte DOUBLE PRECISION: double, double */
    /* the padded pairs: their padding is no part of the datatype (cgpu_dtype_runs) */
    CGPU_DT_SHORT_INT,           /* MPI_SHORT_INT: short, int (8 bytes, 2 of padding inside) */
    CGPU_DT_DOUBLE_INT,          /* MPI_DOUBLE_INT: double, int (16 bytes, 4 of padding after) */
    CGPU_DT_LONG_INT,            /* MPI_LONG_INT: long, int (16 bytes, 4 of padding after) */
    CGPU_DT_LONG_DOUBLE_INT,     /* MPI_LONG_DOUBLE_INT: long double, int; host arithmetic only */
    CGPU_DT_COMPLEX_LONG_DOUBLE, /* long double _Complex: SUM and PROD; host arithmetic only */
    CGPU_DT_COUNT
} cgpu_dtype_t;

/** Reduction operators: MPI's predefined ones minus REPLACE/NO_OP. */
typedef enum cgpu_op {
    CGPU_OP_SUM = 0,
    CGPU_OP_PROD,
    CGPU_OP_MIN,
    CGPU_OP_MAX,
    CGPU_OP_LAND,
    CGPU_OP_LOR,
    CGPU_OP_LXOR,
    CGPU_OP_BAND,
    CGPU_OP_BOR,
    CGPU_OP_BXOR,
    CGPU_OP_MINLOC, /* the pairs: the smaller value, and the smaller index among equal ones */
    CGPU_OP_MAXLOC, /* the pairs: the larger value, and the smaller index among equal ones */
    CGPU_OP_COUNT
} cgpu_op_t;

/** Size in bytes of one element of @p dt (0 for an invalid value). */
size_t cgpu_dtype_size(cgpu_dtype_t dt);

/**
 * The bytes of one element of @p dt that hold data, in order: @p len[k] bytes at @p off[k]
 * for k below the count returned (1 or 2; 0 for an invalid value). Every type is one run,
 * its whole element, but the padded pairs: MPI_SHORT_INT's padding inside the pair, and the
 * padding after the index of MPI_DOUBLE_INT, MPI_LONG_INT and MPI_LONG_DOUBLE_INT, are no
 * part of the datatype, so a collective writes none of it in the caller's buffers.
 */
int cgpu_dtype_runs(cgpu_dtype_t dt, size_t off[2], size_t len[2]);

/** The bytes @p count elements of @p dt span from their first byte to their last data byte
 * (a padded pair's padding after the last index left out); 0 for none or an invalid value. */
size_t cgpu_dtype_span(cgpu_dtype_t dt, size_t count);

/** Whether the device kernels have arithmetic for @p dt (all but the long double types,
 * which reduce on the host). */
bool cgpu_dtype_on_device(cgpu_dtype_t dt);

/** Short name ("int32", "float64", ...) for logs and traces; never NULL ("invalid"). */
const char *cgpu_dtype_name(cgpu_dtype_t dt);

/** Short name ("sum", "band", ...) for logs and traces; never NULL ("invalid"). */
const char *cgpu_op_name(cgpu_op_t op);

/* every (value, index) pair: X(engine type suffix, name, value type, index type); the host
 * loops, their table rows and the layouts all come from this one list */
#define CGPU_DTYPE_PAIRS(X)                                                                        \
    X(FLOAT_INT, float_int, float, int)                                                            \
    X(2INT, 2int, int, int)                                                                        \
    X(2FLOAT, 2float, float, float)                                                                \
    X(2DOUBLE, 2double, double, double)                                                            \
    X(SHORT_INT, short_int, short, int)                                                            \
    X(DOUBLE_INT, double_int, double, int)                                                         \
    X(LONG_INT, long_int, long, int)                                                               \
    X(LONG_DOUBLE_INT, long_double_int, long double, int)

#ifdef __cplusplus
}
#endif

#endif /* CGPU_DTYPE_H */
