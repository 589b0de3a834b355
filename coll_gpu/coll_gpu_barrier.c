/*
 * coll/gpu: MPI_Barrier and MPI_Ibarrier entry points.
 *
 * A barrier moves no data, so the previous module serves it as before; it is ours only so
 * that it can refuse. Without ULFM, Open MPI's own barrier waits for a dead process for
 * ever: once this process knows that a rank of the communicator died (any communicator's
 * collective found it) or that the communicator failed, the barrier returns that error at
 * once, as every other collective on it does (mca_coll_gpu_refused).
 */
#include "coll_gpu.h"
#include "coll_gpu_entry.h"

int mca_coll_gpu_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int rc = mca_coll_gpu_refused(m, "MPI_Barrier", comm);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    return MCA_COLL_GPU_PREV(m->prev.coll_barrier(comm, m->prev.coll_barrier_module));
}

int mca_coll_gpu_ibarrier(struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int rc = mca_coll_gpu_refused(m, "MPI_Ibarrier", comm);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    return MCA_COLL_GPU_PREV(m->prev.coll_ibarrier(comm, request, m->prev.coll_ibarrier_module));
}
