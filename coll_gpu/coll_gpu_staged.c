/*
 * coll/gpu: the staged path of the blocking collectives: the previous module, made safe for
 * device buffers.
 *
 * Stock Open MPI (built without CUDA) crashes when coll/tuned touches a device pointer.
 * Every blocking call the engine does not take (an entry file's fallback, the
 * intercommunicators' and the neighborhood collectives' every call) goes to the previous
 * module here, with each device buffer replaced by a host copy of the span its datatype
 * touches (received spans copied back afterwards). Host buffers pass straight through.
 * Each rank stages only its own buffers and every rank calls the previous module, so ranks
 * never disagree on the protocol (decision 2).
 */
#include <stdlib.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

int mca_coll_gpu_stage(mca_coll_gpu_staged_buf_t *s, const void *buf, size_t count,
                       struct ompi_datatype_t *dtype, void **host)
{
    s->used = false;
    *host = (void *) buf;
    if (!mca_coll_gpu_on_device_at(buf, count, dtype)) {
        return MPI_SUCCESS;
    }
    int rc = mca_coll_gpu_mirror_in(&s->mirror, buf, count, dtype, host);
    s->used = (MPI_SUCCESS == rc);
    return rc;
}

int mca_coll_gpu_unstage(mca_coll_gpu_staged_buf_t *s, int rc, bool copy_back)
{
    if (!s->used) {
        return rc;
    }
    s->used = false;
    if (copy_back) {
        return mca_coll_gpu_mirror_out(&s->mirror, rc);
    }
    mca_coll_gpu_mirror_drop(&s->mirror);
    return rc;
}

bool mca_coll_gpu_span_on_device(const void *buf, ptrdiff_t lo, ptrdiff_t hi)
{
    if (hi <= lo) {
        return mca_coll_gpu_on_device(buf);
    }
    return mca_coll_gpu_on_device((const char *) buf + lo) ||
           mca_coll_gpu_on_device((const char *) buf + hi - 1);
}

size_t mca_coll_gpu_v_span(const int *counts, const int *displs, int n)
{
    size_t end = 0;
    for (int i = 0; i < n; ++i) {
        size_t e = (size_t) (displs[i] + counts[i]);
        if (counts[i] > 0 && e > end) {
            end = e;
        }
    }
    return end;
}

int mca_coll_gpu_stage_bytes(mca_coll_gpu_staged_buf_t *s, const void *buf, ptrdiff_t lo,
                             ptrdiff_t hi, void **host)
{
    if (hi <= lo) { /* nothing of it is read or written: no device pointer passed on */
        s->used = false;
        *host = mca_coll_gpu_on_device(buf) ? NULL : (void *) buf;
        return MPI_SUCCESS;
    }
    /* one copy of the whole span: its two ends must be memory of one kind (MPI_BOTTOM
     * layouts may address several allocations) */
    if (mca_coll_gpu_on_device((const char *) buf + lo) !=
        mca_coll_gpu_on_device((const char *) buf + hi - 1)) {
        s->used = false;
        *host = NULL;
        cgpu_log(CGPU_LOG_WARN,
                 "a buffer layout addresses both host and device memory; coll/gpu stages one "
                 "kind per buffer: describe the host and the device data in separate calls");
        return MPI_ERR_BUFFER;
    }
    int rc = mca_coll_gpu_stage(s, (const char *) buf + lo, (size_t) (hi - lo), MPI_BYTE, host);
    *host = (char *) *host - lo;
    return rc;
}

/* the first byte a (counts, displs) layout of dt at buf addresses, counted from element 0
 * as its staging copies it; MPI_IN_PLACE as it is (its counts are not looked at) */
static const void *v_first(const void *buf, const int *counts, const int *displs, int n,
                           struct ompi_datatype_t *dt)
{
    if (MPI_IN_PLACE == buf) {
        return buf;
    }
    return mca_coll_gpu_first_byte(buf, mca_coll_gpu_v_span(counts, displs, n), dt);
}

bool mca_coll_gpu_v_on_device(const void *buf, const int *counts, const int *displs, int n,
                              struct ompi_datatype_t *dt)
{
    return mca_coll_gpu_on_device(v_first(buf, counts, displs, n, dt));
}

static size_t sum_counts(const int *counts, int n)
{
    size_t s = 0;
    for (int i = 0; i < n; ++i) {
        s += (size_t) counts[i];
    }
    return s;
}

#define M(module) ((mca_coll_gpu_module_t *) (module))

/* The staging failed on this rank: say so; the caller returns the error (the other ranks
 * then fail in the previous module's protocol or complete: an MPI error either way). */
static int staging_failed(struct ompi_communicator_t *comm, const char *what, int rc)
{
    cgpu_log(CGPU_LOG_WARN, "%s on %s: cannot stage device buffers through host memory (%d)", what,
             comm->c_name, rc);
    return rc;
}

/* Straight to the previous module: a nested call, or no buffer on a device. @p a and @p b
 * are the first bytes the call addresses (mca_coll_gpu_first_byte), not the buffer
 * arguments: an MPI_BOTTOM call's data is elsewhere. */
static bool passthrough_dev(mca_coll_gpu_module_t *m, bool dev)
{
    if (mca_coll_gpu_nested()) {
        return true;
    }
    atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    return !dev;
}

static bool passthrough(mca_coll_gpu_module_t *m, const void *a, const void *b)
{
    return passthrough_dev(m, mca_coll_gpu_on_device(a) || mca_coll_gpu_on_device(b));
}

/* ---- a call described by its arguments (mca_coll_gpu_args_t): the intercommunicators' and
 * the neighborhood collectives ---- */

int mca_coll_gpu_prev_call(mca_coll_gpu_module_t *m, const mca_coll_gpu_args_t *a,
                           struct ompi_communicator_t *c)
{
    const mca_coll_base_comm_coll_t *p = &m->prev;
    switch (a->kind) {
    case CGPU_K_ALLGATHER:
        return p->coll_allgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c,
                                 p->coll_allgather_module);
    case CGPU_K_ALLGATHERV:
        return p->coll_allgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                  p->coll_allgatherv_module);
    case CGPU_K_ALLREDUCE:
        return p->coll_allreduce(a->s, a->r, a->rc, a->rdt, a->op, c, p->coll_allreduce_module);
    case CGPU_K_ALLTOALL:
        return p->coll_alltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c,
                                p->coll_alltoall_module);
    case CGPU_K_ALLTOALLV:
        return p->coll_alltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                 p->coll_alltoallv_module);
    case CGPU_K_ALLTOALLW:
        return p->coll_alltoallw(a->s, a->scs, a->sds, a->sdts, a->r, a->rcs, a->rds, a->rdts, c,
                                 p->coll_alltoallw_module);
    case CGPU_K_BCAST:
        return p->coll_bcast(a->r, a->rc, a->rdt, a->root, c, p->coll_bcast_module);
    case CGPU_K_GATHER:
        return p->coll_gather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                              p->coll_gather_module);
    case CGPU_K_GATHERV:
        return p->coll_gatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, a->root, c,
                               p->coll_gatherv_module);
    case CGPU_K_REDUCE:
        return p->coll_reduce(a->s, a->r, a->rc, a->rdt, a->op, a->root, c, p->coll_reduce_module);
    case CGPU_K_REDUCE_SCATTER:
        return p->coll_reduce_scatter(a->s, a->r, a->rcs, a->rdt, a->op, c,
                                      p->coll_reduce_scatter_module);
    case CGPU_K_REDUCE_SCATTER_BLOCK:
        return p->coll_reduce_scatter_block(a->s, a->r, a->rc, a->rdt, a->op, c,
                                            p->coll_reduce_scatter_block_module);
    case CGPU_K_SCATTER:
        return p->coll_scatter(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                               p->coll_scatter_module);
    case CGPU_K_SCATTERV:
        return p->coll_scatterv(a->s, a->scs, a->sds, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                                p->coll_scatterv_module);
    case CGPU_K_NALLGATHER:
        return p->coll_neighbor_allgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c,
                                          p->coll_neighbor_allgather_module);
    case CGPU_K_NALLGATHERV:
        return p->coll_neighbor_allgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                           p->coll_neighbor_allgatherv_module);
    case CGPU_K_NALLTOALL:
        return p->coll_neighbor_alltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c,
                                         p->coll_neighbor_alltoall_module);
    case CGPU_K_NALLTOALLV:
        return p->coll_neighbor_alltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds,
                                          a->rdt, c, p->coll_neighbor_alltoallv_module);
    case CGPU_K_NALLTOALLW:
        return p->coll_neighbor_alltoallw(a->s, a->scs, a->sad, a->sdts, a->r, a->rcs, a->rad,
                                          a->rdts, c, p->coll_neighbor_alltoallw_module);
    default:
        return MPI_ERR_INTERN;
    }
}

int mca_coll_gpu_prev_post(mca_coll_gpu_module_t *m, const mca_coll_gpu_args_t *a,
                           struct ompi_communicator_t *c, ompi_request_t **q)
{
    const mca_coll_base_comm_coll_t *p = &m->prev;
    switch (a->kind) {
    case CGPU_K_ALLGATHER:
        return p->coll_iallgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, q,
                                  p->coll_iallgather_module);
    case CGPU_K_ALLGATHERV:
        return p->coll_iallgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c, q,
                                   p->coll_iallgatherv_module);
    case CGPU_K_ALLREDUCE:
        return p->coll_iallreduce(a->s, a->r, a->rc, a->rdt, a->op, c, q,
                                  p->coll_iallreduce_module);
    case CGPU_K_ALLTOALL:
        return p->coll_ialltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, q,
                                 p->coll_ialltoall_module);
    case CGPU_K_ALLTOALLV:
        return p->coll_ialltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds, a->rdt, c, q,
                                  p->coll_ialltoallv_module);
    case CGPU_K_ALLTOALLW:
        return p->coll_ialltoallw(a->s, a->scs, a->sds, a->sdts, a->r, a->rcs, a->rds, a->rdts, c,
                                  q, p->coll_ialltoallw_module);
    case CGPU_K_BCAST:
        return p->coll_ibcast(a->r, a->rc, a->rdt, a->root, c, q, p->coll_ibcast_module);
    case CGPU_K_GATHER:
        return p->coll_igather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c, q,
                               p->coll_igather_module);
    case CGPU_K_GATHERV:
        return p->coll_igatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, a->root, c, q,
                                p->coll_igatherv_module);
    case CGPU_K_REDUCE:
        return p->coll_ireduce(a->s, a->r, a->rc, a->rdt, a->op, a->root, c, q,
                               p->coll_ireduce_module);
    case CGPU_K_REDUCE_SCATTER:
        return p->coll_ireduce_scatter(a->s, a->r, a->rcs, a->rdt, a->op, c, q,
                                       p->coll_ireduce_scatter_module);
    case CGPU_K_REDUCE_SCATTER_BLOCK:
        return p->coll_ireduce_scatter_block(a->s, a->r, a->rc, a->rdt, a->op, c, q,
                                             p->coll_ireduce_scatter_block_module);
    case CGPU_K_SCATTER:
        return p->coll_iscatter(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c, q,
                                p->coll_iscatter_module);
    case CGPU_K_SCATTERV:
        return p->coll_iscatterv(a->s, a->scs, a->sds, a->sdt, a->r, a->rc, a->rdt, a->root, c, q,
                                 p->coll_iscatterv_module);
    case CGPU_K_NALLGATHER:
        return p->coll_ineighbor_allgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, q,
                                           p->coll_ineighbor_allgather_module);
    case CGPU_K_NALLGATHERV:
        return p->coll_ineighbor_allgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c, q,
                                            p->coll_ineighbor_allgatherv_module);
    case CGPU_K_NALLTOALL:
        return p->coll_ineighbor_alltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, q,
                                          p->coll_ineighbor_alltoall_module);
    case CGPU_K_NALLTOALLV:
        return p->coll_ineighbor_alltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds,
                                           a->rdt, c, q, p->coll_ineighbor_alltoallv_module);
    case CGPU_K_NALLTOALLW:
        return p->coll_ineighbor_alltoallw(a->s, a->scs, a->sad, a->sdts, a->r, a->rcs, a->rad,
                                           a->rdts, c, q, p->coll_ineighbor_alltoallw_module);
    default:
        return MPI_ERR_INTERN;
    }
}

static const char *const kind_names[] = {
    [CGPU_K_ALLGATHER] = "MPI_(I)allgather",
    [CGPU_K_ALLGATHERV] = "MPI_(I)allgatherv",
    [CGPU_K_ALLREDUCE] = "MPI_(I)allreduce",
    [CGPU_K_ALLTOALL] = "MPI_(I)alltoall",
    [CGPU_K_ALLTOALLV] = "MPI_(I)alltoallv",
    [CGPU_K_ALLTOALLW] = "MPI_(I)alltoallw",
    [CGPU_K_BCAST] = "MPI_(I)bcast",
    [CGPU_K_EXSCAN] = "MPI_(I)exscan",
    [CGPU_K_GATHER] = "MPI_(I)gather",
    [CGPU_K_GATHERV] = "MPI_(I)gatherv",
    [CGPU_K_REDUCE] = "MPI_(I)reduce",
    [CGPU_K_REDUCE_SCATTER] = "MPI_(I)reduce_scatter",
    [CGPU_K_REDUCE_SCATTER_BLOCK] = "MPI_(I)reduce_scatter_block",
    [CGPU_K_SCAN] = "MPI_(I)scan",
    [CGPU_K_SCATTER] = "MPI_(I)scatter",
    [CGPU_K_SCATTERV] = "MPI_(I)scatterv",
    [CGPU_K_NALLGATHER] = "MPI_(I)neighbor_allgather",
    [CGPU_K_NALLGATHERV] = "MPI_(I)neighbor_allgatherv",
    [CGPU_K_NALLTOALL] = "MPI_(I)neighbor_alltoall",
    [CGPU_K_NALLTOALLV] = "MPI_(I)neighbor_alltoallv",
    [CGPU_K_NALLTOALLW] = "MPI_(I)neighbor_alltoallw",
};

const char *mca_coll_gpu_kind_name(mca_coll_gpu_kind_t k)
{
    return (unsigned) k < sizeof(kind_names) / sizeof(kind_names[0]) && NULL != kind_names[k]
               ? kind_names[k]
               : "?";
}

int mca_coll_gpu_staged_call(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const mca_coll_gpu_args_t *a, mca_coll_gpu_spans_fn_t spans)
{
    mca_coll_gpu_spans_t sp;
    spans(a, comm, &sp);
    if (passthrough_dev(m, mca_coll_gpu_span_on_device(a->s, sp.slo, sp.shi) ||
                               mca_coll_gpu_span_on_device(a->r, sp.rlo, sp.rhi))) {
        return MCA_COLL_GPU_PREV(mca_coll_gpu_prev_call(m, a, comm));
    }
    mca_coll_gpu_staged_buf_t s = {.used = false}, r = {.used = false};
    mca_coll_gpu_args_t h = *a;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage_bytes(&s, a->s, sp.slo, sp.shi, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage_bytes(&r, a->r, sp.rlo, sp.rhi, &hr);
    }
    if (MPI_SUCCESS != rc) {
        mca_coll_gpu_unstage(&s, rc, false);
        return staging_failed(comm, mca_coll_gpu_kind_name(a->kind), rc);
    }
    h.s = hs;
    h.r = hr;
    rc = MCA_COLL_GPU_PREV(mca_coll_gpu_prev_call(m, &h, comm));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, sp.rback);
}

int mca_coll_gpu_staged_bcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (passthrough(m, mca_coll_gpu_first_byte(buf, (size_t) count, dt), NULL)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_bcast(buf, count, dt, root, comm, m->prev.coll_bcast_module));
    }
    mca_coll_gpu_staged_buf_t b;
    void *h;
    int rc = mca_coll_gpu_stage(&b, buf, (size_t) count, dt, &h);
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Bcast", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_bcast(h, count, dt, root, comm, m->prev.coll_bcast_module));
    return mca_coll_gpu_unstage(&b, rc, ompi_comm_rank(comm) != root);
}

int mca_coll_gpu_staged_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                               struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                               mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    if (passthrough(m, mca_coll_gpu_first_byte(sbuf, (size_t) count, dt),
                    is_root ? mca_coll_gpu_first_byte(rbuf, (size_t) count, dt) : NULL)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_reduce(sbuf, rbuf, count, dt, op, root, comm, m->prev.coll_reduce_module));
    }
    mca_coll_gpu_staged_buf_t s, r = {.used = false};
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_stage(&s, sbuf, (size_t) count, dt, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_stage(&r, rbuf, (size_t) count, dt, &hr);
    }
    if (MPI_SUCCESS != rc) {
        mca_coll_gpu_unstage(&s, rc, false);
        return staging_failed(comm, "MPI_Reduce", rc);
    }
    rc = MCA_COLL_GPU_PREV(
        m->prev.coll_reduce(hs, hr, count, dt, op, root, comm, m->prev.coll_reduce_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                  void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (passthrough(
            m, mca_coll_gpu_first_byte(sbuf, (size_t) scount, sdt),
            mca_coll_gpu_first_byte(rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                                        m->prev.coll_allgather_module));
    }
    const size_t n = (size_t) ompi_comm_size(comm);
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage(&s, sbuf, (size_t) scount, sdt, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, (size_t) rcount * n, rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Allgather", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_allgather(hs, scount, sdt, hr, rcount, rdt, comm,
                                                  m->prev.coll_allgather_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                   void *rbuf, const int *rcounts, const int *displs,
                                   struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                                   mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (passthrough(m, mca_coll_gpu_first_byte(sbuf, (size_t) scount, sdt),
                    v_first(rbuf, rcounts, displs, ompi_comm_size(comm), rdt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_allgatherv(
            sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m->prev.coll_allgatherv_module));
    }
    const int n = ompi_comm_size(comm);
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage(&s, sbuf, (size_t) scount, sdt, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, mca_coll_gpu_v_span(rcounts, displs, n), rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Allgatherv", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_allgatherv(hs, scount, sdt, hr, rcounts, displs, rdt, comm,
                                                   m->prev.coll_allgatherv_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdt, int root,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    if (passthrough(m, mca_coll_gpu_first_byte(sbuf, (size_t) scount, sdt),
                    is_root ? mca_coll_gpu_first_byte(
                                  rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt)
                            : NULL)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_gather(sbuf, scount, sdt, rbuf, rcount, rdt, root,
                                                     comm, m->prev.coll_gather_module));
    }
    mca_coll_gpu_staged_buf_t s, r = {.used = false};
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_stage(&s, sbuf, (size_t) scount, sdt, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc =
            mca_coll_gpu_stage(&r, rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Gather", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_gather(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                               m->prev.coll_gather_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                void *rbuf, const int *rcounts, const int *displs,
                                struct ompi_datatype_t *rdt, int root,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    if (passthrough(m, mca_coll_gpu_first_byte(sbuf, (size_t) scount, sdt),
                    is_root ? v_first(rbuf, rcounts, displs, ompi_comm_size(comm), rdt) : NULL)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_gatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
                                                      root, comm, m->prev.coll_gatherv_module));
    }
    mca_coll_gpu_staged_buf_t s, r = {.used = false};
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_stage(&s, sbuf, (size_t) scount, sdt, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_stage(
            &r, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Gatherv", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_gatherv(hs, scount, sdt, hr, rcounts, displs, rdt, root,
                                                comm, m->prev.coll_gatherv_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdt, int root,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    if (passthrough(m,
                    is_root ? mca_coll_gpu_first_byte(
                                  sbuf, (size_t) scount * (size_t) ompi_comm_size(comm), sdt)
                            : NULL,
                    mca_coll_gpu_first_byte(rbuf, (size_t) rcount, rdt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root,
                                                      comm, m->prev.coll_scatter_module));
    }
    mca_coll_gpu_staged_buf_t s = {.used = false}, r;
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc =
            mca_coll_gpu_stage(&s, sbuf, (size_t) scount * (size_t) ompi_comm_size(comm), sdt, &hs);
    }
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, (size_t) rcount, rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Scatter", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_scatter(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                                m->prev.coll_scatter_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_scatterv(const void *sbuf, const int *scounts, const int *displs,
                                 struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                                 struct ompi_datatype_t *rdt, int root,
                                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    if (passthrough(m, is_root ? v_first(sbuf, scounts, displs, ompi_comm_size(comm), sdt) : NULL,
                    mca_coll_gpu_first_byte(rbuf, (size_t) rcount, rdt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_scatterv(sbuf, scounts, displs, sdt, rbuf, rcount,
                                                       rdt, root, comm,
                                                       m->prev.coll_scatterv_module));
    }
    mca_coll_gpu_staged_buf_t s = {.used = false}, r;
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = mca_coll_gpu_stage(
            &s, sbuf, mca_coll_gpu_v_span(scounts, displs, ompi_comm_size(comm)), sdt, &hs);
    }
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, (size_t) rcount, rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Scatterv", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_scatterv(hs, scounts, displs, sdt, hr, rcount, rdt, root,
                                                 comm, m->prev.coll_scatterv_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                                  struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                                  const int *rdispls, struct ompi_datatype_t *rdt,
                                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (passthrough(m, v_first(sbuf, scounts, sdispls, ompi_comm_size(comm), sdt),
                    v_first(rbuf, rcounts, rdispls, ompi_comm_size(comm), rdt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                                        rdispls, rdt, comm,
                                                        m->prev.coll_alltoallv_module));
    }
    const int n = ompi_comm_size(comm);
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage(
        &s, sbuf, MPI_IN_PLACE == sbuf ? 0 : mca_coll_gpu_v_span(scounts, sdispls, n), sdt, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, mca_coll_gpu_v_span(rcounts, rdispls, n), rdt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Alltoallv", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_alltoallv(hs, scounts, sdispls, sdt, hr, rcounts, rdispls,
                                                  rdt, comm, m->prev.coll_alltoallv_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

void mca_coll_gpu_alltoallw_spans(const mca_coll_gpu_args_t *a, struct ompi_communicator_t *comm,
                                  mca_coll_gpu_spans_t *sp)
{
    const int n = ompi_comm_size(comm);
    *sp = (mca_coll_gpu_spans_t){.rback = true};
    if (MPI_IN_PLACE != a->s) { /* else sent from the receive layout */
        mca_coll_gpu_w_bytes(a->scs, a->sds, NULL, a->sdts, n, &sp->slo, &sp->shi);
    }
    mca_coll_gpu_w_bytes(a->rcs, a->rds, NULL, a->rdts, n, &sp->rlo, &sp->rhi);
}

int mca_coll_gpu_staged_alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                                  struct ompi_datatype_t *const *sdts, void *rbuf,
                                  const int *rcounts, const int *rdispls,
                                  struct ompi_datatype_t *const *rdts,
                                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    const mca_coll_gpu_args_t a =
        mca_coll_gpu_alltoallw_args(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts);
    return mca_coll_gpu_staged_call(M(module), comm, &a, mca_coll_gpu_alltoallw_spans);
}

int mca_coll_gpu_staged_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                       struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const size_t all = sum_counts(rcounts, ompi_comm_size(comm));
    if (passthrough(
            m, mca_coll_gpu_first_byte(sbuf, all, dt),
            mca_coll_gpu_first_byte(
                rbuf, MPI_IN_PLACE == sbuf ? all : (size_t) rcounts[ompi_comm_rank(comm)], dt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm,
                                                             m->prev.coll_reduce_scatter_module));
    }
    const size_t total = sum_counts(rcounts, ompi_comm_size(comm));
    const size_t mine = (size_t) rcounts[ompi_comm_rank(comm)];
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage(&s, sbuf, total, dt, &hs);
    if (MPI_SUCCESS == rc) { /* in place: the receive buffer holds all the input */
        rc = mca_coll_gpu_stage(&r, rbuf, MPI_IN_PLACE == sbuf ? total : mine, dt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Reduce_scatter", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_reduce_scatter(hs, hr, rcounts, dt, op, comm,
                                                       m->prev.coll_reduce_scatter_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

int mca_coll_gpu_staged_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                             struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                             struct ompi_communicator_t *comm,
                                             mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const size_t all = (size_t) rcount * (size_t) ompi_comm_size(comm);
    if (passthrough(
            m, mca_coll_gpu_first_byte(sbuf, all, dt),
            mca_coll_gpu_first_byte(rbuf, MPI_IN_PLACE == sbuf ? all : (size_t) rcount, dt))) {
        return MCA_COLL_GPU_PREV(m->prev.coll_reduce_scatter_block(
            sbuf, rbuf, rcount, dt, op, comm, m->prev.coll_reduce_scatter_block_module));
    }
    const size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage(&s, sbuf, total, dt, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, MPI_IN_PLACE == sbuf ? total : (size_t) rcount, dt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, "MPI_Reduce_scatter_block", rc);
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_reduce_scatter_block(
        hs, hr, rcount, dt, op, comm, m->prev.coll_reduce_scatter_block_module));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}

/* scan and exscan have the same shape */
int mca_coll_gpu_staged_scan(bool ex, const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dt, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    mca_coll_base_module_scan_fn_t fn = ex ? m->prev.coll_exscan : m->prev.coll_scan;
    mca_coll_base_module_t *pm = ex ? m->prev.coll_exscan_module : m->prev.coll_scan_module;
    op = mca_coll_gpu_prev_op(dt, op); /* on every rank alike, host buffers too */
    if (passthrough(m, mca_coll_gpu_first_byte(sbuf, (size_t) count, dt),
                    mca_coll_gpu_first_byte(rbuf, (size_t) count, dt))) {
        return MCA_COLL_GPU_PREV(fn(sbuf, rbuf, count, dt, op, comm, pm));
    }
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
    int rc = mca_coll_gpu_stage(&s, sbuf, (size_t) count, dt, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage(&r, rbuf, (size_t) count, dt, &hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        return staging_failed(comm, ex ? "MPI_Exscan" : "MPI_Scan", rc);
    }
    rc = MCA_COLL_GPU_PREV(fn(hs, hr, count, dt, op, comm, pm));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, true);
}
