/*
 * coll/gpu: MPI_Allreduce entry point.
 *
 * Engine or fallback is decided from (datatype, op, count, MCA params) only: MPI
 * requires these to be the same on every rank, so every rank takes the same path
 * (decision 2). The fallback receives exactly the caller's arguments.
 */
#include "coll_gpu.h"

#include "opal/util/output.h"

bool mca_coll_gpu_allreduce_engine_ok(int count, struct ompi_datatype_t *dtype,
                                      struct ompi_op_t *op, cgpu_dtype_t *dt, cgpu_op_t *eop)
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
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    cgpu_dtype_t dt;
    cgpu_op_t eop;

    if (mca_coll_gpu_nested()) { /* a previous module's own building block */
        return MCA_COLL_GPU_PREV(m->prev.coll_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                                        m->prev.coll_allreduce_module));
    }
    if (!mca_coll_gpu_allreduce_engine_ok(count, dtype, op, &dt, &eop)) {
        goto fallback;
    }
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        goto fallback;
    }

    /* held for the call: a communicator freed by another thread meanwhile (erroneous)
     * must not free the module under us; its teardown then waits for this release */
    cgpu_status_t st = MCA_COLL_GPU_ENGINE(
        m, cgpu_allreduce(m->ecomm, MPI_IN_PLACE == sbuf ? rbuf : sbuf, rbuf, (size_t) count,
                          dt, eop, (cgpu_allreduce_alg_t) c->allreduce_algorithm));
    return mca_coll_gpu_engine_rc(st, "MPI_Allreduce", comm);

fallback:
    return mca_coll_gpu_fallback_allreduce(m, sbuf, rbuf, count, dtype, op, comm);
}
