/*
 * coll/gpu: datatype helpers shared by the entry points whose ranks may describe their
 * buffers with different layouts (alltoall, allgather, bcast): is a buffer one gap-free
 * run, and pack / unpack it to contiguous bytes when not.
 */
#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"

/* A buffer of count elements of dtype that is one gap-free run of bytes, and where
 * that run starts. */
bool mca_coll_gpu_contiguous_run(const void *buf, int count, struct ompi_datatype_t *dtype,
                           const char **start)
{
    ptrdiff_t tlb, text;
    ompi_datatype_get_true_extent(dtype, &tlb, &text);
    *start = (const char *) buf + tlb;
    return 0 != ompi_datatype_is_contiguous_memory_layout(dtype, count < 2 ? count : 2);
}

/* Copy count elements between a typed buffer and packed bytes, in pieces whose byte
 * count fits the int32 interface of ompi_datatype_sndrcv. */
int mca_coll_gpu_typed_copy(const char *typed, char *packed_or_typed, size_t count,
                      struct ompi_datatype_t *dtype, bool pack)
{
    size_t esize;
    ptrdiff_t lb, extent;
    ompi_datatype_type_size(dtype, &esize);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    size_t step = esize > 0 ? (size_t) INT_MAX / esize : count;
    if (0 == step) {
        return MPI_ERR_TYPE;
    }
    for (size_t done = 0; done < count; done += step) {
        size_t k = count - done < step ? count - done : step;
        int rc;
        if (pack) {
            rc = ompi_datatype_sndrcv(typed + done * (size_t) extent, (int32_t) k, dtype,
                                      packed_or_typed + done * esize, (int32_t) (k * esize),
                                      MPI_PACKED);
        } else {
            rc = ompi_datatype_sndrcv(typed + done * esize, (int32_t) (k * esize), MPI_PACKED,
                                      packed_or_typed + done * (size_t) extent, (int32_t) k,
                                      dtype);
        }
        if (OMPI_SUCCESS != rc) {
            return MPI_ERR_TYPE;
        }
    }
    return MPI_SUCCESS;
}

