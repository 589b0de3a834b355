/*
 * coll/gpu: MPI_Allreduce, MPI_Iallreduce and MPIX_Allreduce_init entry points.
 *
 * Engine or fallback is decided from (datatype, op, count, MCA params) only: MPI
 * requires these to be the same on every rank, so every rank takes the same path
 * (decision 2). The fallback receives exactly the caller's arguments.
 */
#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include "opal/util/output.h"

/* The engine-path decision shared by the blocking and non-blocking calls: a function of
 * arguments MPI requires to match on every rank and of MCA params (decision 2). */
static bool allreduce_engine_ok(int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                cgpu_dtype_t *dt, cgpu_op_t *eop)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    if (CGPU_ALLREDUCE_FALLBACK == c->allreduce_algorithm || count < 0 ||
        !mca_coll_gpu_engine_reduction(dtype, op, dt, eop)) {
        return false;
    }
    const size_t bytes = (size_t) count * cgpu_dtype_size(*dt);
    return bytes >= c->allreduce_min_bytes &&
           (0 == c->allreduce_max_bytes || bytes <= c->allreduce_max_bytes);
}

int mca_coll_gpu_allreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Allreduce", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    cgpu_dtype_t dt;
    cgpu_op_t eop;

    if (mca_coll_gpu_nested()) { /* a previous module's own building block */
        return MCA_COLL_GPU_PREV(m->prev.coll_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                                        m->prev.coll_allreduce_module));
    }
    if (!allreduce_engine_ok(count, dtype, op, &dt, &eop) ||
        mca_coll_gpu_host_leaves(m, MCA_COLL_GPU_HOST_ALLREDUCE,
                                 (size_t) count * cgpu_dtype_size(dt))) {
        goto fallback;
    }
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        goto fallback;
    }

    /* held for the call: a communicator freed by another thread meanwhile (erroneous)
     * must not free the module under us; its teardown then waits for this release */
    cgpu_status_t st = MCA_COLL_GPU_ENGINE(
        m, cgpu_allreduce(m->ecomm, MPI_IN_PLACE == sbuf ? rbuf : sbuf, rbuf, (size_t) count, dt,
                          eop, (cgpu_allreduce_alg_t) c->allreduce_algorithm));
    return mca_coll_gpu_engine_rc(st, "MPI_Allreduce", comm);

fallback:
    return mca_coll_gpu_fallback_allreduce(m, sbuf, rbuf, count, dtype, op, comm);
}

int mca_coll_gpu_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                            struct ompi_op_t *op, struct ompi_communicator_t *comm,
                            ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Iallreduce", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    /* Open MPI agrees on a new communicator's id with 1-2 int MAX/MIN Iallreduces on the
     * parent, posted from its progress loop by whichever thread progresses, possibly one
     * inside a call of the previous module (where the engine is not planned): the path of
     * such a call must not depend on that, so calls of this shape always take the previous
     * module (host buffers: directly; device buffers: staged), and never put an engine
     * communicator (GPU memory, on whatever device is current) behind every parent */
    const bool cid_shape = count <= 2 && MPI_INT == dtype && (MPI_MAX == op || MPI_MIN == op);
    if (!cid_shape && allreduce_engine_ok(count, dtype, op, &dt, &eop) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, CGPU_NB_ALLREDUCE, create,
                                              MPI_IN_PLACE == sbuf ? rbuf : sbuf, rbuf,
                                              (size_t) count, dt, eop, 0, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r,
                               mca_coll_gpu_on_device_at(sbuf, (size_t) count, dtype) ||
                                   mca_coll_gpu_on_device_at(rbuf, (size_t) count, dtype),
                               m->prev.coll_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                                       m->prev.coll_iallreduce_module))
    void *hs = (void *) sbuf, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallreduce(hs, hr, count, dtype, op, comm, &r->inner,
                                                       m->prev.coll_iallreduce_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iallreduce");
}

CGPU_PERSIST_INIT(mca_coll_gpu_allreduce_init,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_ALLREDUCE, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                   .root = -1))
