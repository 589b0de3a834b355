/*
 * coll/gpu: MPI datatypes and ops onto engine types, engine statuses onto MPI classes.
 *
 * A reduction runs in the engine when Open MPI itself defines the (predefined datatype,
 * predefined op) pair -- its op table has a function for that datatype's base type -- and
 * that base type has an engine twin: every C and Fortran integer (MPI_CHAR, MPI_WCHAR,
 * MPI_CHARACTER, MPI_INTEGERn, MPI_LOGICAL, MPI_AINT, ...), MPI_FLOAT/MPI_DOUBLE/
 * MPI_LONG_DOUBLE and the Fortran REAL/DOUBLE PRECISION kinds of those sizes, C bool, byte,
 * the float, double and long double complex types (C and Fortran), and MINLOC/MAXLOC on
 * every (value, index) pair type (MPI_FLOAT_INT, MPI_2INT, MPI_2REAL, MPI_2DOUBLE_PRECISION,
 * MPI_2INTEGER, and the padded MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_LONG_INT and
 * MPI_LONG_DOUBLE_INT, which the engine reduces on copies so that their padding, no part of
 * the datatype, is never written). The long double types reduce on the host. Integer SUM and
 * PROD wrap like C unsigned arithmetic (two's complement), whatever an op component does on
 * host memory. Left to the previous module: derived types, user ops, REPLACE/NO_OP, half and
 * quad precision, 16-byte integers, and pairs
 * Open MPI rejects (it reports them as MPI does). Where the previous module reduces such a
 * pair (scan, exscan), it gets a user op that runs the engine's host arithmetic instead
 * (mca_coll_gpu_prev_op), so the results are the ones the engine would give. The decision depends
 * only on the datatype and op, which MPI requires to be the same on every rank of a reduction
 * (decision 2).
 */
#include <stdint.h>
#include <wchar.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/op/op.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

static bool int_of(size_t size, bool is_signed, cgpu_dtype_t *out)
{
    switch (size) {
    case 1:
        *out = is_signed ? CGPU_DT_INT8 : CGPU_DT_UINT8;
        return true;
    case 2:
        *out = is_signed ? CGPU_DT_INT16 : CGPU_DT_UINT16;
        return true;
    case 4:
        *out = is_signed ? CGPU_DT_INT32 : CGPU_DT_UINT32;
        return true;
    case 8:
        *out = is_signed ? CGPU_DT_INT64 : CGPU_DT_UINT64;
        return true;
    }
    return false;
}

static bool float_of(size_t size, cgpu_dtype_t *out)
{
    if (sizeof(float) == size) {
        *out = CGPU_DT_FLOAT32;
    } else if (sizeof(double) == size) {
        *out = CGPU_DT_FLOAT64;
    } else {
        return false; /* half or quad precision: no engine arithmetic */
    }
    return true;
}

/* The engine twin of Open MPI's op base type @p base for a datatype of @p size bytes. */
static bool engine_type_of(int base, size_t size, cgpu_dtype_t *out)
{
    switch (base) {
    case OMPI_OP_BASE_TYPE_INT8_T:
    case OMPI_OP_BASE_TYPE_INT16_T:
    case OMPI_OP_BASE_TYPE_INT32_T:
    case OMPI_OP_BASE_TYPE_INT64_T:
    case OMPI_OP_BASE_TYPE_INTEGER:
    case OMPI_OP_BASE_TYPE_INTEGER1:
    case OMPI_OP_BASE_TYPE_INTEGER2:
    case OMPI_OP_BASE_TYPE_INTEGER4:
    case OMPI_OP_BASE_TYPE_INTEGER8:
    case OMPI_OP_BASE_TYPE_LONG:
    case OMPI_OP_BASE_TYPE_LOGICAL: /* logical ops only (Open MPI's table): 0/1 results */
        return int_of(size, true, out);
    case OMPI_OP_BASE_TYPE_UINT8_T:
    case OMPI_OP_BASE_TYPE_UINT16_T:
    case OMPI_OP_BASE_TYPE_UINT32_T:
    case OMPI_OP_BASE_TYPE_UINT64_T:
    case OMPI_OP_BASE_TYPE_UNSIGNED_LONG:
    case OMPI_OP_BASE_TYPE_BYTE:
        return int_of(size, false, out);
    case OMPI_OP_BASE_TYPE_WCHAR:
        return int_of(size, (wchar_t) -1 < 0, out);
    case OMPI_OP_BASE_TYPE_FLOAT:
    case OMPI_OP_BASE_TYPE_DOUBLE:
    case OMPI_OP_BASE_TYPE_REAL:
    case OMPI_OP_BASE_TYPE_REAL4:
    case OMPI_OP_BASE_TYPE_REAL8:
    case OMPI_OP_BASE_TYPE_DOUBLE_PRECISION:
        return float_of(size, out);
    case OMPI_OP_BASE_TYPE_LONG_DOUBLE:
        if (sizeof(long double) != size) {
            return false;
        }
        *out = CGPU_DT_LONG_DOUBLE;
        return true;
    case OMPI_OP_BASE_TYPE_BOOL:
        if (1 != size) {
            return false;
        }
        *out = CGPU_DT_BOOL;
        return true;
    case OMPI_OP_BASE_TYPE_C_FLOAT_COMPLEX:
        *out = CGPU_DT_COMPLEX64;
        return 2 * sizeof(float) == size;
    case OMPI_OP_BASE_TYPE_C_DOUBLE_COMPLEX:
        *out = CGPU_DT_COMPLEX128;
        return 2 * sizeof(double) == size;
    case OMPI_OP_BASE_TYPE_C_LONG_DOUBLE_COMPLEX: /* host arithmetic */
        *out = CGPU_DT_COMPLEX_LONG_DOUBLE;
        return 2 * sizeof(long double) == size;
    /* the (value, index) pairs: the engine's twin of the same C struct, whose data bytes are
     * the datatype's size (map_dtype checks the extent); the padded ones reduce on copies
     * (cgpu_dtype_runs), so the caller's gaps are never written */
    case OMPI_OP_BASE_TYPE_FLOAT_INT:
        *out = CGPU_DT_FLOAT_INT;
        break;
    case OMPI_OP_BASE_TYPE_2INT:
    case OMPI_OP_BASE_TYPE_2INTEGER: /* of a 4-byte INTEGER */
        *out = CGPU_DT_2INT;
        break;
    case OMPI_OP_BASE_TYPE_2REAL: /* of a 4-byte REAL */
        *out = CGPU_DT_2FLOAT;
        break;
    case OMPI_OP_BASE_TYPE_2DOUBLE_PRECISION: /* of an 8-byte DOUBLE PRECISION */
        *out = CGPU_DT_2DOUBLE;
        break;
    case OMPI_OP_BASE_TYPE_SHORT_INT:
        *out = CGPU_DT_SHORT_INT;
        break;
    case OMPI_OP_BASE_TYPE_DOUBLE_INT:
        *out = CGPU_DT_DOUBLE_INT;
        break;
    case OMPI_OP_BASE_TYPE_LONG_INT:
        *out = CGPU_DT_LONG_INT;
        break;
    case OMPI_OP_BASE_TYPE_LONG_DOUBLE_INT: /* host arithmetic */
        *out = CGPU_DT_LONG_DOUBLE_INT;
        break;
    default:
        return false; /* 16-byte integers, half/quad floats */
    }
    /* a pair */
    size_t off[2], len[2];
    const int runs = cgpu_dtype_runs(*out, off, len);
    return size == len[0] + (2 == runs ? len[1] : 0);
}

/* Open MPI's op base type of @p d (an index into an op's function table), or -1 for a
 * derived datatype or one Open MPI reduces with no predefined op. */
static int op_base_of(struct ompi_datatype_t *d)
{
    if (!ompi_datatype_is_predefined(d) || d->id < 0 || d->id >= OMPI_DATATYPE_MAX_PREDEFINED) {
        return -1;
    }
    return ompi_op_ddt_map[d->id];
}

static bool map_dtype(struct ompi_datatype_t *d, int base, cgpu_dtype_t *out)
{
    size_t size;
    ompi_datatype_type_size(d, &size);
    if (MPI_OFFSET == d) {
        /* Open MPI's op table files MPI_Offset under an unsigned type; the C type is signed,
         * and MIN/MAX follow the C type here */
        return int_of(size, true, out);
    }
    /* and the engine's element spans the datatype's extent, from offset 0 */
    ptrdiff_t lb, ext;
    ompi_datatype_get_extent(d, &lb, &ext);
    return engine_type_of(base, size, out) && 0 == lb && (size_t) ext == cgpu_dtype_size(*out);
}

bool mca_coll_gpu_map_op(struct ompi_op_t *op, cgpu_op_t *out)
{
    if (MPI_SUM == op) {
        *out = CGPU_OP_SUM;
    } else if (MPI_PROD == op) {
        *out = CGPU_OP_PROD;
    } else if (MPI_MIN == op) {
        *out = CGPU_OP_MIN;
    } else if (MPI_MAX == op) {
        *out = CGPU_OP_MAX;
    } else if (MPI_LAND == op) {
        *out = CGPU_OP_LAND;
    } else if (MPI_LOR == op) {
        *out = CGPU_OP_LOR;
    } else if (MPI_LXOR == op) {
        *out = CGPU_OP_LXOR;
    } else if (MPI_BAND == op) {
        *out = CGPU_OP_BAND;
    } else if (MPI_BOR == op) {
        *out = CGPU_OP_BOR;
    } else if (MPI_BXOR == op) {
        *out = CGPU_OP_BXOR;
    } else if (MPI_MINLOC == op) {
        *out = CGPU_OP_MINLOC;
    } else if (MPI_MAXLOC == op) {
        *out = CGPU_OP_MAXLOC;
    } else {
        return false;
    }
    return true;
}

int mca_coll_gpu_status_to_mpi(cgpu_status_t st)
{
    switch (st) {
    case CGPU_OK:
    case CGPU_IN_PROGRESS:
        return MPI_SUCCESS;
    case CGPU_ERR_NO_MEMORY:
        return MPI_ERR_NO_MEM;
    case CGPU_ERR_MISMATCH: /* the class of what differed: coll_gpu_error.c */
        return MPI_ERR_ARG;
    case CGPU_ERR_INVALID_ARG:
        return MPI_ERR_ARG;
    case CGPU_ERR_NOT_SUPPORTED:
        return MPI_ERR_UNSUPPORTED_OPERATION;
    case CGPU_ERR_STATE:
        return MPI_ERR_COMM;
    case CGPU_ERR_NO_RESOURCE:
    case CGPU_ERR_TIMEOUT:
    case CGPU_ERR_PEER:
        return MPI_ERR_OTHER;
    case CGPU_ERR_PEER_DEAD:
        return MCA_COLL_GPU_ERR_PEER_DEAD_CLASS; /* the code naming the peer: coll_gpu_error.c */
    case CGPU_ERR_SYSTEM:
    case CGPU_ERR_BOOTSTRAP:
    case CGPU_ERR_DEVICE:
    case CGPU_DECLINED: /* engine-internal: never returned from the engine's API */
        return MPI_ERR_INTERN;
    }
    return MPI_ERR_UNKNOWN;
}

bool mca_coll_gpu_engine_reduction(struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                   cgpu_dtype_t *dt, cgpu_op_t *eop)
{
    const int base = op_base_of(dtype);
    /* Open MPI must define the pair (else the previous module reports the erroneous call),
     * and the engine must have it */
    return base >= 0 && mca_coll_gpu_map_op(op, eop) && NULL != op->o_func.intrinsic.fns[base] &&
           map_dtype(dtype, base, dt) && cgpu_reduce_supported(*dt, *eop);
}

/* The previous module's reductions in our arithmetic (scan, exscan): for a (predefined
 * datatype, op) pair the engine reduces, that module gets a user op (one per operator, made
 * at first use and kept to the end) that runs cgpu_reduce_host, so its sums wrap as ours do
 * (Open MPI 4.1's op/avx saturates 8- and 16-bit sums, open-mpi/ompi#8045, and its op table
 * orders MPI_UNSIGNED_LONG as signed for MIN and MAX). */
static void prev_op_apply(cgpu_op_t eop, void *in, void *inout, const int *len, MPI_Datatype *dtype)
{
    cgpu_dtype_t dt;
    const int base = op_base_of(*dtype);
    if (base < 0 || !map_dtype(*dtype, base, &dt) ||
        0 != cgpu_reduce_host(dt, eop, inout, in, inout, *len > 0 ? (size_t) *len : 0)) {
        /* only ever handed to the previous module with the pairs mapped below */
        cgpu_log(CGPU_LOG_WARN, "no host arithmetic for %s on %s", cgpu_op_name(eop),
                 (*dtype)->name);
    }
}

#define CGPU_PREV_OP_FN(k)                                                                         \
    static void prev_op_##k(void *in, void *inout, int *len, MPI_Datatype *dtype)                  \
    {                                                                                              \
        prev_op_apply(CGPU_OP_##k, in, inout, len, dtype);                                         \
    }
CGPU_PREV_OP_FN(SUM)
CGPU_PREV_OP_FN(PROD)
CGPU_PREV_OP_FN(MIN)
CGPU_PREV_OP_FN(MAX)
CGPU_PREV_OP_FN(LAND)
CGPU_PREV_OP_FN(LOR)
CGPU_PREV_OP_FN(LXOR)
CGPU_PREV_OP_FN(BAND)
CGPU_PREV_OP_FN(BOR)
CGPU_PREV_OP_FN(BXOR)
CGPU_PREV_OP_FN(MINLOC)
CGPU_PREV_OP_FN(MAXLOC)

static MPI_User_function *const prev_op_fns[CGPU_OP_COUNT] = {
    prev_op_SUM,  prev_op_PROD, prev_op_MIN, prev_op_MAX,  prev_op_LAND,   prev_op_LOR,
    prev_op_LXOR, prev_op_BAND, prev_op_BOR, prev_op_BXOR, prev_op_MINLOC, prev_op_MAXLOC};
static struct ompi_op_t *_Atomic prev_ops[CGPU_OP_COUNT];

struct ompi_op_t *mca_coll_gpu_prev_op(struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (!mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
        return op;
    }
    struct ompi_op_t *u = atomic_load_explicit(&prev_ops[eop], memory_order_acquire);
    if (NULL != u) {
        return u;
    }
    /* as MPI_Op_create does: the C function goes into the same slot of the op */
    struct ompi_op_t *made = ompi_op_create_user(
        true, (ompi_op_fortran_handler_fn_t *) (void (*)(void)) prev_op_fns[eop]);
    if (NULL == made) {
        return op; /* no memory: Open MPI's own arithmetic */
    }
    struct ompi_op_t *none = NULL;
    if (!atomic_compare_exchange_strong(&prev_ops[eop], &none, made)) {
        OBJ_RELEASE(made); /* another thread made one first */
        return none;
    }
    return made;
}

bool mca_coll_gpu_host_reducible(struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    if (!ompi_op_is_intrinsic(op)) {
        return true; /* a user function: it takes any datatype */
    }
    /* Open MPI's own function for a predefined datatype; other pairs (and REPLACE/NO_OP,
     * which are no reduction) go to the previous module, which reports them */
    const int base = op_base_of(dtype);
    return base >= 0 && MPI_REPLACE != op && MPI_NO_OP != op &&
           NULL != op->o_func.intrinsic.fns[base];
}
