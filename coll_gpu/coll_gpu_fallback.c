/*
 * coll/gpu: the fallback, with device buffers staged through host memory.
 *
 * Decision 1: the previous coll module never sees a device pointer. When a buffer lives
 * on a GPU, the span its datatype touches is copied to a host buffer (the receive span
 * too, so gaps of a derived type keep their bytes), the previous module runs on the host
 * copies, and the receive span is copied back.
 */
#include <stdlib.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

/* Bytes from the first to the last byte count elements of dtype touch, and the offset
 * of the first from the buffer pointer. */
static size_t span_of(size_t count, struct ompi_datatype_t *dtype, ptrdiff_t *first)
{
    ptrdiff_t lb, extent, tlb, textent;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &tlb, &textent);
    *first = tlb;
    return 0 == count ? 0 : (count - 1) * (size_t) extent + (size_t) textent;
}

__thread int mca_coll_gpu_depth;

bool mca_coll_gpu_on_device(const void *p)
{
    int dev;
    if (NULL == p || MPI_IN_PLACE == p) {
        return false;
    }
    /* testing: coll_gpu_stage_host_buffers sends host buffers through the staging code */
    return mca_coll_gpu_component.stage_host_buffers || CGPU_BUF_HOST != cgpu_buf_kind(p, &dev);
}

int mca_coll_gpu_mirror_in(mca_coll_gpu_mirror_t *m, const void *buf, size_t count, struct ompi_datatype_t *dtype,
                     void **host)
{
    m->dev = (void *) buf;
    m->span = span_of(count, dtype, &m->first);
    m->mem = malloc(m->span > 0 ? m->span : 1);
    if (NULL == m->mem) {
        return MPI_ERR_NO_MEM;
    }
    if (CGPU_OK != cgpu_engine_copy(m->mem, (const char *) buf + m->first, m->span)) {
        free(m->mem);
        m->mem = NULL;
        return MPI_ERR_BUFFER;
    }
    *host = m->mem - m->first;
    return MPI_SUCCESS;
}

int mca_coll_gpu_mirror_out(mca_coll_gpu_mirror_t *m, int rc)
{
    if (NULL == m->mem) {
        return rc;
    }
    if (MPI_SUCCESS == rc &&
        CGPU_OK != cgpu_engine_copy((char *) m->dev + m->first, m->mem, m->span)) {
        rc = MPI_ERR_BUFFER;
    }
    free(m->mem);
    m->mem = NULL;
    return rc;
}

int mca_coll_gpu_fallback_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf,
                                    int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm)
{
    if (!mca_coll_gpu_nested()) {
        atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    }
    if (mca_coll_gpu_nested() || (!mca_coll_gpu_on_device(sbuf) && !mca_coll_gpu_on_device(rbuf))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_allreduce(sbuf, rbuf, count, dtype, op, comm, m->prev.coll_allreduce_module));
    }
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = MPI_SUCCESS;
    if (mca_coll_gpu_on_device(sbuf)) {
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) count, dtype, &hs);
    }
    if (MPI_SUCCESS == rc && mca_coll_gpu_on_device(rbuf)) {
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) count, dtype, &hr);
    }
    /* a local staging failure must not strand the peers inside the previous module's
     * protocol: take part anyway on the (possibly unstaged) host copies is impossible,
     * so report and let the error handler decide */
    if (MPI_SUCCESS == rc) {
        rc = MCA_COLL_GPU_PREV(m->prev.coll_allreduce(hs, hr, count, dtype, op, comm, m->prev.coll_allreduce_module));
    } else {
        opal_output(0, "coll/gpu: MPI_Allreduce on %s: cannot stage device buffers to host "
                       "for the fallback", comm->c_name);
    }
    free(ms.mem);
    return mca_coll_gpu_mirror_out(&mr, rc);
}

int mca_coll_gpu_fallback_alltoall(mca_coll_gpu_module_t *m, const void *sbuf, int scount,
                                   struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                   struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm)
{
    if (!mca_coll_gpu_nested()) {
        atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    }
    if (mca_coll_gpu_nested() || (!mca_coll_gpu_on_device(sbuf) && !mca_coll_gpu_on_device(rbuf))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                m->prev.coll_alltoall_module));
    }
    const size_t n = (size_t) ompi_comm_size(comm);
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = MPI_SUCCESS;
    if (mca_coll_gpu_on_device(sbuf)) {
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) scount * n, sdtype, &hs);
    }
    if (MPI_SUCCESS == rc && mca_coll_gpu_on_device(rbuf)) {
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) rcount * n, rdtype, &hr);
    }
    if (MPI_SUCCESS == rc) {
        rc = MCA_COLL_GPU_PREV(m->prev.coll_alltoall(hs, scount, sdtype, hr, rcount, rdtype, comm,
                              m->prev.coll_alltoall_module));
    } else {
        opal_output(0, "coll/gpu: MPI_Alltoall on %s: cannot stage device buffers to host "
                       "for the fallback", comm->c_name);
    }
    free(ms.mem);
    return mca_coll_gpu_mirror_out(&mr, rc);
}
