/*
 * coll/gpu: the neighborhood collectives (MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v,w)
 * on cartesian, graph and distributed-graph communicators) made safe for device buffers.
 *
 * No engine path: as for the other staged collectives, each device buffer is replaced by a
 * host copy of the bytes its layout touches (the received ones copied back), and the
 * previous module runs the call on the copies; host buffers pass straight through. A side's
 * blocks are counted by the communicator's topology: a rank receives a block from each of
 * its in-neighbors and sends one to each of its out-neighbors. The non-blocking and
 * persistent forms (coll_gpu_nb.c) stage through the same spans.
 */
#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/topo/base/base.h"
#include "opal/util/output.h"

#define M(module) ((mca_coll_gpu_module_t *) (module))

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

/* A blocking call's two sides: the send bytes [slo, shi) and receive bytes [rlo, rhi)
 * staged (hs, hr: what the previous module gets), copied back after the call. */
typedef struct {
    ptrdiff_t slo, shi, rlo, rhi;
    mca_coll_gpu_staged_buf_t s, r;
    void *hs, *hr;
} sides_t;

static int sides_stage(sides_t *x, const void *sbuf, void *rbuf, struct ompi_communicator_t *comm,
                       const char *what)
{
    int rc = mca_coll_gpu_stage_bytes(&x->s, sbuf, x->slo, x->shi, &x->hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage_bytes(&x->r, rbuf, x->rlo, x->rhi, &x->hr);
        if (MPI_SUCCESS != rc) {
            mca_coll_gpu_unstage(&x->s, rc, false);
        }
    }
    if (MPI_SUCCESS != rc) {
        opal_output(0, "coll/gpu: %s on %s: cannot stage device buffers through host memory (%d)",
                    what, comm->c_name, rc);
    }
    return rc;
}

static int sides_done(sides_t *x, int rc)
{
    mca_coll_gpu_unstage(&x->s, rc, false);
    return mca_coll_gpu_unstage(&x->r, rc, true);
}

static int n_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (mca_coll_gpu_staged_passthrough(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_neighbor_allgather(
            sbuf, scount, sdt, rbuf, rcount, rdt, comm, m->prev.coll_neighbor_allgather_module));
    }
    int in, out;
    sides_t x;
    mca_coll_gpu_degrees(comm, &in, &out);
    mca_coll_gpu_count_span((size_t) scount, sdt, &x.slo, &x.shi);
    mca_coll_gpu_count_span((size_t) rcount * (size_t) in, rdt, &x.rlo, &x.rhi);
    int rc = sides_stage(&x, sbuf, rbuf, comm, "MPI_Neighbor_allgather");
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_neighbor_allgather(
        x.hs, scount, sdt, x.hr, rcount, rdt, comm, m->prev.coll_neighbor_allgather_module));
    return sides_done(&x, rc);
}

static int n_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (mca_coll_gpu_staged_passthrough(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_neighbor_allgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm,
                                             m->prev.coll_neighbor_allgatherv_module));
    }
    int in, out;
    sides_t x;
    mca_coll_gpu_degrees(comm, &in, &out);
    mca_coll_gpu_count_span((size_t) scount, sdt, &x.slo, &x.shi);
    mca_coll_gpu_v_bytes(rcounts, displs, rdt, in, &x.rlo, &x.rhi);
    int rc = sides_stage(&x, sbuf, rbuf, comm, "MPI_Neighbor_allgatherv");
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    rc = MCA_COLL_GPU_PREV(
        m->prev.coll_neighbor_allgatherv(x.hs, scount, sdt, x.hr, rcounts, displs, rdt, comm,
                                         m->prev.coll_neighbor_allgatherv_module));
    return sides_done(&x, rc);
}

static int n_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (mca_coll_gpu_staged_passthrough(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_neighbor_alltoall(
            sbuf, scount, sdt, rbuf, rcount, rdt, comm, m->prev.coll_neighbor_alltoall_module));
    }
    int in, out;
    sides_t x;
    mca_coll_gpu_degrees(comm, &in, &out);
    mca_coll_gpu_count_span((size_t) scount * (size_t) out, sdt, &x.slo, &x.shi);
    mca_coll_gpu_count_span((size_t) rcount * (size_t) in, rdt, &x.rlo, &x.rhi);
    int rc = sides_stage(&x, sbuf, rbuf, comm, "MPI_Neighbor_alltoall");
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_neighbor_alltoall(
        x.hs, scount, sdt, x.hr, rcount, rdt, comm, m->prev.coll_neighbor_alltoall_module));
    return sides_done(&x, rc);
}

static int n_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                       struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                       const int *rdispls, struct ompi_datatype_t *rdt,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (mca_coll_gpu_staged_passthrough(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_neighbor_alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls,
                                            rdt, comm, m->prev.coll_neighbor_alltoallv_module));
    }
    int in, out;
    sides_t x;
    mca_coll_gpu_degrees(comm, &in, &out);
    mca_coll_gpu_v_bytes(scounts, sdispls, sdt, out, &x.slo, &x.shi);
    mca_coll_gpu_v_bytes(rcounts, rdispls, rdt, in, &x.rlo, &x.rhi);
    int rc = sides_stage(&x, sbuf, rbuf, comm, "MPI_Neighbor_alltoallv");
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_neighbor_alltoallv(x.hs, scounts, sdispls, sdt, x.hr,
                                                           rcounts, rdispls, rdt, comm,
                                                           m->prev.coll_neighbor_alltoallv_module));
    return sides_done(&x, rc);
}

static int n_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                       struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                       const MPI_Aint *rdispls, struct ompi_datatype_t *const *rdts,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (mca_coll_gpu_staged_passthrough(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_neighbor_alltoallw(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls,
                                            rdts, comm, m->prev.coll_neighbor_alltoallw_module));
    }
    int in, out;
    sides_t x;
    mca_coll_gpu_degrees(comm, &in, &out);
    mca_coll_gpu_w_bytes(scounts, NULL, sdispls, sdts, out, &x.slo, &x.shi);
    mca_coll_gpu_w_bytes(rcounts, NULL, rdispls, rdts, in, &x.rlo, &x.rhi);
    int rc = sides_stage(&x, sbuf, rbuf, comm, "MPI_Neighbor_alltoallw");
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    rc = MCA_COLL_GPU_PREV(m->prev.coll_neighbor_alltoallw(x.hs, scounts, sdispls, sdts, x.hr,
                                                           rcounts, rdispls, rdts, comm,
                                                           m->prev.coll_neighbor_alltoallw_module));
    return sides_done(&x, rc);
}

void mca_coll_gpu_neighbor_install(mca_coll_gpu_module_t *m)
{
    m->super.coll_neighbor_allgather = n_allgather;
    m->super.coll_neighbor_allgatherv = n_allgatherv;
    m->super.coll_neighbor_alltoall = n_alltoall;
    m->super.coll_neighbor_alltoallv = n_alltoallv;
    m->super.coll_neighbor_alltoallw = n_alltoallw;
}
