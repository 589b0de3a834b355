/*
 * coll/gpu: layout helpers shared by the entry points, the staged paths and the
 * non-blocking machinery: is a buffer one gap-free run, and pack / unpack it to contiguous
 * bytes when not (for the collectives whose ranks may describe their buffers with different
 * layouts); the bytes a layout of blocks touches (staging copies exactly those); an
 * allgatherv-style (counts, displacements) layout as the engine's blocks; and how many
 * blocks a neighborhood side has (a topology's degrees).
 *
 * Apart from the entry files because all of these are functions of arguments alone, used by
 * the machinery below them too.
 */
#include <stdint.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/topo/base/base.h"

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
                                      packed_or_typed + done * (size_t) extent, (int32_t) k, dtype);
        }
        if (OMPI_SUCCESS != rc) {
            return MPI_ERR_TYPE;
        }
    }
    return MPI_SUCCESS;
}

bool mca_coll_gpu_allgatherv_sizes(bool in_place, int scount, const int *rcounts,
                                   struct ompi_datatype_t *rdt, int n, size_t *rsize, size_t *maxb,
                                   size_t *total)
{
    ompi_datatype_type_size(rdt, rsize);
    bool valid = in_place || scount >= 0;
    *maxb = *total = 0;
    for (int p = 0; p < n; ++p) {
        valid = valid && rcounts[p] >= 0;
        const size_t b = valid ? (size_t) rcounts[p] * *rsize : 0;
        *maxb = b > *maxb ? b : *maxb;
        *total += b;
    }
    return valid;
}

void mca_coll_gpu_allgatherv_layout(const int *rcounts, const int *displs, int n, size_t rsize,
                                    size_t *bytes, ptrdiff_t *offs, ptrdiff_t *lo, ptrdiff_t *hi)
{
    *lo = PTRDIFF_MAX;
    *hi = PTRDIFF_MIN;
    for (int p = 0; p < n; ++p) {
        bytes[p] = (size_t) rcounts[p] * rsize;
        if (rcounts[p] > 0) { /* the span, in elements, of the blocks with data */
            *lo = displs[p] < *lo ? displs[p] : *lo;
            *hi =
                (ptrdiff_t) displs[p] + rcounts[p] > *hi ? (ptrdiff_t) displs[p] + rcounts[p] : *hi;
        }
    }
    if (*lo > *hi) { /* no data at all */
        *lo = *hi = 0;
    }
    for (int p = 0; p < n; ++p) {
        offs[p] = rcounts[p] > 0 ? (displs[p] - *lo) * (ptrdiff_t) rsize : 0;
    }
}

void mca_coll_gpu_degrees(struct ompi_communicator_t *comm, int *in, int *out)
{
    *in = *out = 0;
    if (OMPI_SUCCESS != mca_topo_base_neighbor_count(comm, in, out)) {
        *in = *out = 0; /* not a topology: the previous module reports it */
    }
}

void mca_coll_gpu_count_span(size_t count, struct ompi_datatype_t *dt, ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t tlb, text, lb, ext;
    *lo = *hi = 0;
    if (0 == count) {
        return;
    }
    ompi_datatype_get_true_extent(dt, &tlb, &text);
    ompi_datatype_get_extent(dt, &lb, &ext);
    *lo = tlb;
    *hi = tlb + (ptrdiff_t) (count - 1) * ext + text;
}

void mca_coll_gpu_v_bytes(const int *counts, const int *displs, struct ompi_datatype_t *dt, int n,
                          ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t lb, ext;
    bool any = false;
    ompi_datatype_get_extent(dt, &lb, &ext);
    *lo = *hi = 0;
    for (int p = 0; p < n; ++p) {
        ptrdiff_t a, b;
        mca_coll_gpu_count_span(counts[p] > 0 ? (size_t) counts[p] : 0, dt, &a, &b);
        if (a == b) {
            continue;
        }
        a += (ptrdiff_t) displs[p] * ext;
        b += (ptrdiff_t) displs[p] * ext;
        *lo = any && *lo < a ? *lo : a;
        *hi = any && *hi > b ? *hi : b;
        any = true;
    }
}

void mca_coll_gpu_w_bytes(const int *counts, const int *idispls, const MPI_Aint *adispls,
                          struct ompi_datatype_t *const *types, int n, ptrdiff_t *lo, ptrdiff_t *hi)
{
    bool any = false;
    *lo = *hi = 0;
    for (int p = 0; p < n; ++p) {
        ptrdiff_t a, b;
        if (counts[p] <= 0) { /* an empty block's type is not looked at */
            continue;
        }
        const ptrdiff_t at = NULL != idispls ? (ptrdiff_t) idispls[p] : (ptrdiff_t) adispls[p];
        mca_coll_gpu_count_span((size_t) counts[p], types[p], &a, &b);
        a += at;
        b += at;
        *lo = any && *lo < a ? *lo : a;
        *hi = any && *hi > b ? *hi : b;
        any = true;
    }
}
