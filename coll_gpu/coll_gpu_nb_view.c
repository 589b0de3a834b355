/*
 * coll/gpu: views, the bytes a non-blocking engine call reads and writes.
 *
 * The engine moves runs of bytes; MPI lets each rank describe its buffer with its own
 * datatype. A view is the user's own buffer where its layout is one gap-free run, else
 * packed host bytes: packed at the post, unpacked into the user's layout when the request
 * completes (a device buffer mirrored on the host around that, packing runs on the CPU).
 * Apart from the request because the posts open views and the completion closes them, and
 * neither needs to know how the other half works.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NB
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu_nb.h"

#include "ompi/datatype/ompi_datatype.h"

/* Between a view's user layout on the host and its packed bytes, either way. */
static int view_copy(mca_coll_gpu_nb_view_t *v, bool pack)
{
    if (NULL == v->wdts) {
        return pack ? mca_coll_gpu_typed_copy(v->host, v->pack, (size_t) v->count, v->dt, true)
                    : mca_coll_gpu_typed_copy(v->pack, v->host, (size_t) v->count, v->dt, false);
    }
    int rc = MPI_SUCCESS;
    size_t at = 0;
    for (int p = 0; p < v->wn && MPI_SUCCESS == rc; ++p) {
        if (v->wcounts[p] <= 0) { /* an empty block's type is not looked at */
            continue;
        }
        size_t es;
        ompi_datatype_type_size(v->wdts[p], &es);
        char *typed = (char *) v->host + v->wdispls[p];
        const size_t c = (size_t) v->wcounts[p];
        rc = pack ? mca_coll_gpu_typed_copy(typed, v->pack + at, c, v->wdts[p], true)
                  : mca_coll_gpu_typed_copy(v->pack + at, typed, c, v->wdts[p], false);
        at += c * es;
    }
    return rc;
}

/* The packed bytes of a view whose user layout is on the host (v->host) */
static int view_pack(mca_coll_gpu_nb_view_t *v, size_t bytes, bool in, bool out, void **engine_ptr)
{
    v->pack = malloc(bytes > 0 ? bytes : 1);
    int rc = NULL == v->pack ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    if (MPI_SUCCESS == rc && in) {
        rc = view_copy(v, true);
    }
    v->unpack = out;
    *engine_ptr = v->pack;
    return rc;
}

int mca_coll_gpu_nb_view_open(mca_coll_gpu_nb_view_t *v, void *buf, int count,
                              struct ompi_datatype_t *dt, size_t bytes, bool in, bool out,
                              void **engine_ptr)
{
    const char *start;
    memset(v, 0, sizeof(*v));
    if (mca_coll_gpu_contiguous_run(buf, count, dt, &start)) {
        *engine_ptr = (void *) start;
        return MPI_SUCCESS;
    }
    int rc = MPI_SUCCESS;
    v->host = buf;
    v->count = count;
    v->dt = dt;
    if (mca_coll_gpu_on_device_at(buf, (size_t) count, dt)) { /* packing runs on the CPU */
        rc = mca_coll_gpu_mirror_in(&v->mir, buf, (size_t) count, dt, &v->host);
    }
    return MPI_SUCCESS == rc ? view_pack(v, bytes, in, out, engine_ptr) : rc;
}

int mca_coll_gpu_nb_view_open_w(mca_coll_gpu_nb_view_t *v, void *buf, const int *counts,
                                const int *displs, struct ompi_datatype_t *const *types, int n,
                                size_t bytes, bool in, bool out, void **engine_ptr)
{
    memset(v, 0, sizeof(*v));
    v->host = buf;
    v->wcounts = counts;
    v->wdispls = displs;
    v->wdts = types;
    v->wn = n;
    int rc = MPI_SUCCESS;
    ptrdiff_t lo, hi;
    mca_coll_gpu_w_bytes(counts, displs, NULL, types, n, &lo, &hi);
    if (mca_coll_gpu_span_on_device(buf, lo, hi)) {
        void *h = NULL;
        rc = mca_coll_gpu_mirror_in(&v->mir, (char *) buf + lo, (size_t) (hi - lo), MPI_BYTE, &h);
        v->host = (char *) h - lo;
    }
    return MPI_SUCCESS == rc ? view_pack(v, bytes, in, out, engine_ptr) : rc;
}

int mca_coll_gpu_nb_view_close(mca_coll_gpu_nb_view_t *v, int rc)
{
    if (NULL == v->pack) { /* the user's run, or a view that failed before packing */
        mca_coll_gpu_mirror_drop(&v->mir);
        return rc;
    }
    if (MPI_SUCCESS == rc && v->unpack) {
        rc = view_copy(v, false);
    }
    free(v->pack);
    v->pack = NULL;
    if (v->unpack) {
        return mca_coll_gpu_mirror_out(&v->mir, rc);
    }
    mca_coll_gpu_mirror_drop(&v->mir);
    return rc;
}

int mca_coll_gpu_nb_span_view(mca_coll_gpu_nb_view_t *v, void *buf, const int *counts,
                              const int *displs, struct ompi_datatype_t *dt, int n, bool in,
                              bool out, size_t *bytes, ptrdiff_t *offs, size_t *largest,
                              void **base)
{
    size_t es, total;
    if (!mca_coll_gpu_allgatherv_sizes(true, 0, counts, dt, n, &es, largest, &total)) {
        return MPI_ERR_COUNT;
    }
    ptrdiff_t lb, ext, lo, hi;
    ompi_datatype_get_extent(dt, &lb, &ext);
    mca_coll_gpu_allgatherv_layout(counts, displs, n, es, bytes, offs, &lo, &hi);
    if (hi - lo > INT_MAX) {
        return MPI_ERR_COUNT;
    }
    return mca_coll_gpu_nb_view_open(v, (char *) buf + lo * ext, (int) (hi - lo), dt,
                                     (size_t) (hi - lo) * es, in, out, base);
}
