/*
 * coll/gpu: communicators of one rank (MPI_COMM_SELF, `-np 1`, splits that leave a rank
 * alone, cart/graph of size 1).
 *
 * Every collective on one rank is a local copy from the send description to the receive
 * description (or nothing: in place, bcast, barrier, exscan). coll/self would do that copy
 * with memcpy and crash on a device pointer, so coll/gpu takes these communicators with a
 * priority above coll/self's and does the copy itself whenever a buffer of the call lives
 * on a device: one cudaMemcpy (device to device) when both descriptions are one gap-free
 * run of bytes, otherwise the spans go through host copies and Open MPI's datatype engine
 * converts between the two descriptions (derived datatypes keep the bytes of their gaps).
 * Calls with host buffers only keep going to the previous module (coll/self, libnbc).
 * Non-blocking calls complete at once (Open MPI's empty request), as libnbc's do on one rank.
 *
 * Counting (pvars): a call whose buffers are on a device counts in coll_gpu_engine_calls
 * (coll/gpu served it); a host-only call passed on counts in coll_gpu_fallback_calls.
 */
#include <stdlib.h>

#include "coll_gpu.h"
#include "coll_gpu_entry.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/request/request.h"
#include "opal/util/output.h"

#define M(module) ((mca_coll_gpu_module_t *) (module))

/* Decides who serves the call and counts it: true when coll/gpu copies (a device buffer, or
 * MPI_BOTTOM: its data sits at the absolute addresses of its displacements or datatypes, of a
 * kind the pointer does not tell, and the local copy below reads each side where it lies). */
static bool serve(mca_coll_gpu_module_t *m, const void *a, const void *b)
{
    const bool ours =
        !mca_coll_gpu_nested() && (MPI_BOTTOM == a || MPI_BOTTOM == b ||
                                   mca_coll_gpu_on_device(a) || mca_coll_gpu_on_device(b));
    if (!mca_coll_gpu_nested()) {
        atomic_fetch_add_explicit(ours ? &m->engine_calls : &m->fallback_calls, 1,
                                  memory_order_relaxed);
    }
    return ours;
}

/* Copy scount x sdt at sbuf into rcount x rdt at rbuf; either may be device memory. */
static int local_copy(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdt)
{
    size_t ssize, rsize;
    if (scount < 0 || rcount < 0) {
        return MPI_ERR_COUNT;
    }
    ompi_datatype_type_size(sdt, &ssize);
    ompi_datatype_type_size(rdt, &rsize);
    const size_t sbytes = (size_t) scount * ssize, rbytes = (size_t) rcount * rsize;
    if (sbytes > rbytes) {
        return MPI_ERR_TRUNCATE; /* the receive description is too short */
    }
    if (0 == sbytes) {
        return MPI_SUCCESS;
    }
    const char *sstart, *rstart;
    if (mca_coll_gpu_contiguous_run(sbuf, scount, sdt, &sstart) &&
        mca_coll_gpu_contiguous_run(rbuf, rcount, rdt, &rstart)) {
        return CGPU_OK == cgpu_engine_copy((void *) rstart, sstart, sbytes) ? MPI_SUCCESS
                                                                            : MPI_ERR_BUFFER;
    }
    /* a derived layout: Open MPI's datatype engine converts on host copies of the spans
     * (the receive span is copied in too, so the bytes of its gaps survive) */
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = MPI_SUCCESS;
    if (mca_coll_gpu_on_device_at(sbuf, (size_t) scount, sdt)) {
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) scount, sdt, &hs);
    }
    if (MPI_SUCCESS == rc && mca_coll_gpu_on_device_at(rbuf, (size_t) rcount, rdt)) {
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) rcount, rdt, &hr);
    }
    if (MPI_SUCCESS == rc) {
        rc = ompi_datatype_sndrcv(hs, scount, sdt, hr, rcount, rdt);
        rc = OMPI_SUCCESS == rc ? MPI_SUCCESS : MPI_ERR_TYPE;
    }
    mca_coll_gpu_mirror_drop(&ms);
    return mca_coll_gpu_mirror_out(&mr, rc);
}

/* The address of element @p disp of dtype from @p buf (v-collectives' displacements). */
static const char *at(const void *buf, int disp, struct ompi_datatype_t *dt)
{
    ptrdiff_t lb, ext;
    ompi_datatype_get_extent(dt, &lb, &ext);
    return (const char *) buf + (ptrdiff_t) disp * ext;
}

static int self_copy(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                     int rcount, struct ompi_datatype_t *rdt)
{
    if (MPI_IN_PLACE == sbuf || MPI_IN_PLACE == rbuf) {
        return MPI_SUCCESS; /* the data is where it belongs already */
    }
    return local_copy(sbuf, scount, sdt, rbuf, rcount, rdt);
}

static int self_bcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                      struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, buf, buf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_bcast(buf, count, dt, root, comm, m->prev.coll_bcast_module));
    }
    return MPI_SUCCESS; /* the root's buffer is the result */
}

static int self_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                          struct ompi_op_t *op, struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_allreduce(sbuf, rbuf, count, dt, op, comm, m->prev.coll_allreduce_module));
    }
    return self_copy(sbuf, count, dt, rbuf, count, dt);
}

static int self_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                       struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_reduce(sbuf, rbuf, count, dt, op, root, comm, m->prev.coll_reduce_module));
    }
    return self_copy(sbuf, count, dt, rbuf, count, dt);
}

static int self_scan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                     struct ompi_op_t *op, struct ompi_communicator_t *comm,
                     mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_scan(sbuf, rbuf, count, dt, op, comm, m->prev.coll_scan_module));
    }
    return self_copy(sbuf, count, dt, rbuf, count, dt);
}

static int self_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                       struct ompi_op_t *op, struct ompi_communicator_t *comm,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_exscan(sbuf, rbuf, count, dt, op, comm, m->prev.coll_exscan_module));
    }
    return MPI_SUCCESS; /* rank 0's exscan result is undefined: nothing is written */
}

static int self_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                     struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_reduce_scatter_block(
            sbuf, rbuf, rcount, dt, op, comm, m->prev.coll_reduce_scatter_block_module));
    }
    return self_copy(sbuf, rcount, dt, rbuf, rcount, dt);
}

static int self_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                               struct ompi_datatype_t *dt, struct ompi_op_t *op,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm,
                                                             m->prev.coll_reduce_scatter_module));
    }
    return self_copy(sbuf, rcounts[0], dt, rbuf, rcounts[0], dt);
}

static int self_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                                        m->prev.coll_allgather_module));
    }
    return self_copy(sbuf, scount, sdt, rbuf, rcount, rdt);
}

static int self_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                                       m->prev.coll_alltoall_module));
    }
    return self_copy(sbuf, scount, sdt, rbuf, rcount, rdt);
}

static int self_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdt, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_gather(sbuf, scount, sdt, rbuf, rcount, rdt, root,
                                                     comm, m->prev.coll_gather_module));
    }
    return self_copy(sbuf, scount, sdt, rbuf, rcount, rdt);
}

static int self_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdt, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root,
                                                      comm, m->prev.coll_scatter_module));
    }
    return self_copy(sbuf, scount, sdt, rbuf, rcount, rdt);
}

static int self_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_allgatherv(
            sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m->prev.coll_allgatherv_module));
    }
    return self_copy(sbuf, scount, sdt, (void *) at(rbuf, displs[0], rdt), rcounts[0], rdt);
}

static int self_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                        int root, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_gatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
                                                      root, comm, m->prev.coll_gatherv_module));
    }
    return self_copy(sbuf, scount, sdt, (void *) at(rbuf, displs[0], rdt), rcounts[0], rdt);
}

static int self_scatterv(const void *sbuf, const int *scounts, const int *displs,
                         struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                         struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_scatterv(sbuf, scounts, displs, sdt, rbuf, rcount,
                                                       rdt, root, comm,
                                                       m->prev.coll_scatterv_module));
    }
    if (MPI_IN_PLACE == rbuf) {
        return MPI_SUCCESS;
    }
    return self_copy(at(sbuf, displs[0], sdt), scounts[0], sdt, rbuf, rcount, rdt);
}

static int self_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                          struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                          const int *rdispls, struct ompi_datatype_t *rdt,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                                        rdispls, rdt, comm,
                                                        m->prev.coll_alltoallv_module));
    }
    if (MPI_IN_PLACE == sbuf) {
        return MPI_SUCCESS;
    }
    return self_copy(at(sbuf, sdispls[0], sdt), scounts[0], sdt, (void *) at(rbuf, rdispls[0], rdt),
                     rcounts[0], rdt);
}

static int self_alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                          struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                          const int *rdispls, struct ompi_datatype_t *const *rdts,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoallw(sbuf, scounts, sdispls, sdts, rbuf, rcounts,
                                                        rdispls, rdts, comm,
                                                        m->prev.coll_alltoallw_module));
    }
    if (MPI_IN_PLACE == sbuf) {
        return MPI_SUCCESS;
    }
    /* alltoallw displacements are in bytes */
    return self_copy((const char *) sbuf + sdispls[0], scounts[0], sdts[0],
                     (char *) rbuf + rdispls[0], rcounts[0], rdts[0]);
}

/* ---- non-blocking: the same copy, then a request that is complete already ---- */

static int done_now(int rc, ompi_request_t **request)
{
    *request = &ompi_request_empty;
    return rc;
}

static int self_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iallreduce(sbuf, rbuf, count, dt, op, comm, request,
                                                         m->prev.coll_iallreduce_module));
    }
    return done_now(self_copy(sbuf, count, dt, rbuf, count, dt), request);
}

static int self_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                        struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_ireduce(sbuf, rbuf, count, dt, op, root, comm,
                                                      request, m->prev.coll_ireduce_module));
    }
    return done_now(self_copy(sbuf, count, dt, rbuf, count, dt), request);
}

static int self_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iscan(sbuf, rbuf, count, dt, op, comm, request,
                                                    m->prev.coll_iscan_module));
    }
    return done_now(self_copy(sbuf, count, dt, rbuf, count, dt), request);
}

static int self_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iexscan(sbuf, rbuf, count, dt, op, comm, request,
                                                      m->prev.coll_iexscan_module));
    }
    return done_now(MPI_SUCCESS, request);
}

static int self_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm, ompi_request_t **request,
                                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter_block(
            sbuf, rbuf, rcount, dt, op, comm, request, m->prev.coll_ireduce_scatter_block_module));
    }
    return done_now(self_copy(sbuf, rcount, dt, rbuf, rcount, dt), request);
}

static int self_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter(
            sbuf, rbuf, rcounts, dt, op, comm, request, m->prev.coll_ireduce_scatter_module));
    }
    return done_now(self_copy(sbuf, rcounts[0], dt, rbuf, rcounts[0], dt), request);
}

static int self_ibcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                       struct ompi_communicator_t *comm, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, buf, buf)) {
        return MCA_COLL_GPU_PREV(
            m->prev.coll_ibcast(buf, count, dt, root, comm, request, m->prev.coll_ibcast_module));
    }
    return done_now(MPI_SUCCESS, request);
}

static int self_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iallgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                                         request, m->prev.coll_iallgather_module));
    }
    return done_now(self_copy(sbuf, scount, sdt, rbuf, rcount, rdt), request);
}

static int self_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_ialltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                                        request, m->prev.coll_ialltoall_module));
    }
    return done_now(self_copy(sbuf, scount, sdt, rbuf, rcount, rdt), request);
}

static int self_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdt, int root,
                        struct ompi_communicator_t *comm, ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_igather(sbuf, scount, sdt, rbuf, rcount, rdt, root,
                                                      comm, request, m->prev.coll_igather_module));
    }
    return done_now(self_copy(sbuf, scount, sdt, rbuf, rcount, rdt), request);
}

static int self_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iscatter(sbuf, scount, sdt, rbuf, rcount, rdt, root,
                                                       comm, request,
                                                       m->prev.coll_iscatter_module));
    }
    return done_now(self_copy(sbuf, scount, sdt, rbuf, rcount, rdt), request);
}

static int self_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iallgatherv(sbuf, scount, sdt, rbuf, rcounts, displs,
                                                          rdt, comm, request,
                                                          m->prev.coll_iallgatherv_module));
    }
    return done_now(
        self_copy(sbuf, scount, sdt, (void *) at(rbuf, displs[0], rdt), rcounts[0], rdt), request);
}

static int self_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                         int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_igatherv(sbuf, scount, sdt, rbuf, rcounts, displs,
                                                       rdt, root, comm, request,
                                                       m->prev.coll_igatherv_module));
    }
    return done_now(
        self_copy(sbuf, scount, sdt, (void *) at(rbuf, displs[0], rdt), rcounts[0], rdt), request);
}

static int self_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                          struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                          ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_iscatterv(sbuf, scounts, displs, sdt, rbuf, rcount,
                                                        rdt, root, comm, request,
                                                        m->prev.coll_iscatterv_module));
    }
    if (MPI_IN_PLACE == rbuf) {
        return done_now(MPI_SUCCESS, request);
    }
    return done_now(self_copy(at(sbuf, displs[0], sdt), scounts[0], sdt, rbuf, rcount, rdt),
                    request);
}

static int self_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                           struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                           const int *rdispls, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_ialltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                                         rdispls, rdt, comm, request,
                                                         m->prev.coll_ialltoallv_module));
    }
    if (MPI_IN_PLACE == sbuf) {
        return done_now(MPI_SUCCESS, request);
    }
    return done_now(self_copy(at(sbuf, sdispls[0], sdt), scounts[0], sdt,
                              (void *) at(rbuf, rdispls[0], rdt), rcounts[0], rdt),
                    request);
}

static int self_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                           struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                           const int *rdispls, struct ompi_datatype_t *const *rdts,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    if (!serve(m, sbuf, rbuf)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_ialltoallw(sbuf, scounts, sdispls, sdts, rbuf,
                                                         rcounts, rdispls, rdts, comm, request,
                                                         m->prev.coll_ialltoallw_module));
    }
    if (MPI_IN_PLACE == sbuf) {
        return done_now(MPI_SUCCESS, request);
    }
    return done_now(self_copy((const char *) sbuf + sdispls[0], scounts[0], sdts[0],
                              (char *) rbuf + rdispls[0], rcounts[0], rdts[0]),
                    request);
}

void mca_coll_gpu_self_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
    s->coll_allreduce = self_allreduce;
    s->coll_alltoall = self_alltoall;
    s->coll_allgather = self_allgather;
    s->coll_allgatherv = self_allgatherv;
    s->coll_alltoallv = self_alltoallv;
    s->coll_alltoallw = self_alltoallw;
    s->coll_bcast = self_bcast;
    s->coll_exscan = self_exscan;
    s->coll_gather = self_gather;
    s->coll_gatherv = self_gatherv;
    s->coll_reduce = self_reduce;
    s->coll_reduce_scatter = self_reduce_scatter;
    s->coll_reduce_scatter_block = self_reduce_scatter_block;
    s->coll_scan = self_scan;
    s->coll_scatter = self_scatter;
    s->coll_scatterv = self_scatterv;
    s->coll_iallreduce = self_iallreduce;
    s->coll_ialltoall = self_ialltoall;
    s->coll_iallgather = self_iallgather;
    s->coll_iallgatherv = self_iallgatherv;
    s->coll_ialltoallv = self_ialltoallv;
    s->coll_ialltoallw = self_ialltoallw;
    s->coll_ibcast = self_ibcast;
    s->coll_iexscan = self_iexscan;
    s->coll_igather = self_igather;
    s->coll_igatherv = self_igatherv;
    s->coll_ireduce = self_ireduce;
    s->coll_ireduce_scatter = self_ireduce_scatter;
    s->coll_ireduce_scatter_block = self_ireduce_scatter_block;
    s->coll_iscan = self_iscan;
    s->coll_iscatter = self_iscatter;
    s->coll_iscatterv = self_iscatterv;
}
