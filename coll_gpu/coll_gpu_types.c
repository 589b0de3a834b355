/*
 * coll/gpu: MPI datatypes and ops onto engine types, engine statuses onto MPI classes.
 *
 * Only predefined handles map. Everything else (derived types, user ops, MINLOC/MAXLOC,
 * MPI_CHAR, complex types) is left to the previous module: the decision depends only
 * on the datatype and op, which MPI requires to be the same on every rank of a
 * reduction (decision 2).
 */
#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"

#define SIGNED_OF(type) \
    (1 == sizeof(type) ? CGPU_DT_INT8 : 2 == sizeof(type) ? CGPU_DT_INT16 \
     : 4 == sizeof(type) ? CGPU_DT_INT32 : CGPU_DT_INT64)
#define UNSIGNED_OF(type) \
    (1 == sizeof(type) ? CGPU_DT_UINT8 : 2 == sizeof(type) ? CGPU_DT_UINT16 \
     : 4 == sizeof(type) ? CGPU_DT_UINT32 : CGPU_DT_UINT64)

bool mca_coll_gpu_map_dtype(struct ompi_datatype_t *d, cgpu_dtype_t *out)
{
    if (!ompi_datatype_is_predefined(d)) {
        return false;
    }
    if (MPI_SIGNED_CHAR == d || MPI_INT8_T == d) {
        *out = CGPU_DT_INT8;
    } else if (MPI_UNSIGNED_CHAR == d || MPI_UINT8_T == d || MPI_BYTE == d) {
        *out = CGPU_DT_UINT8;
    } else if (MPI_SHORT == d || MPI_INT16_T == d) {
        *out = SIGNED_OF(short);
    } else if (MPI_UNSIGNED_SHORT == d || MPI_UINT16_T == d) {
        *out = UNSIGNED_OF(unsigned short);
    } else if (MPI_INT == d || MPI_INT32_T == d) {
        *out = SIGNED_OF(int);
    } else if (MPI_UNSIGNED == d || MPI_UINT32_T == d) {
        *out = UNSIGNED_OF(unsigned);
    } else if (MPI_LONG == d) {
        *out = SIGNED_OF(long);
    } else if (MPI_UNSIGNED_LONG == d) {
        *out = UNSIGNED_OF(unsigned long);
    } else if (MPI_LONG_LONG == d || MPI_INT64_T == d) {
        *out = SIGNED_OF(long long);
    } else if (MPI_UNSIGNED_LONG_LONG == d || MPI_UINT64_T == d) {
        *out = UNSIGNED_OF(unsigned long long);
    } else if (MPI_AINT == d) {
        *out = SIGNED_OF(MPI_Aint);
    } else if (MPI_OFFSET == d) {
        *out = SIGNED_OF(MPI_Offset);
    } else if (MPI_COUNT == d) {
        *out = SIGNED_OF(MPI_Count);
    } else if (MPI_FLOAT == d) {
        *out = CGPU_DT_FLOAT32;
    } else if (MPI_DOUBLE == d) {
        *out = CGPU_DT_FLOAT64;
    } else if (MPI_LONG_DOUBLE == d) {
        *out = CGPU_DT_LONG_DOUBLE;
    } else if (MPI_C_BOOL == d) {
        *out = CGPU_DT_BOOL;
    } else {
        return false;
    }
    return true;
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
    case CGPU_ERR_SYSTEM:
    case CGPU_ERR_BOOTSTRAP:
    case CGPU_ERR_DEVICE:
        return MPI_ERR_INTERN;
    }
    return MPI_ERR_UNKNOWN;
}

int mca_coll_gpu_engine_rc(cgpu_status_t st, const char *what, struct ompi_communicator_t *comm)
{
    if (CGPU_OK != st) {
        opal_output(0, "coll/gpu: %s on %s failed in the engine: %s", what, comm->c_name,
                    cgpu_status_string(st));
    }
    return mca_coll_gpu_status_to_mpi(st);
}

bool mca_coll_gpu_engine_reduction(struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                   cgpu_dtype_t *dt, cgpu_op_t *eop)
{
    if (!mca_coll_gpu_map_dtype(dtype, dt) || !mca_coll_gpu_map_op(op, eop) ||
        !cgpu_reduce_supported(*dt, *eop)) {
        return false;
    }
    /* MPI defines only the bitwise operators on MPI_BYTE */
    return MPI_BYTE != dtype || CGPU_OP_BAND == *eop || CGPU_OP_BOR == *eop || CGPU_OP_BXOR == *eop;
}
