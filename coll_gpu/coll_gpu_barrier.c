/*
 * coll/gpu: MPI_Barrier. No data, so the previous module's barrier serves it, except on a
 * communicator whose engine has failed (a peer process found dead, or, across nodes, a
 * collective that timed out on a peer): without ULFM the previous module would wait for a
 * dead process for ever, so the barrier fails at once, like every other collective there,
 * with the same error (the one that names the dead rank, where one is known).
 */
#include "coll_gpu.h"
#include "coll_gpu_entry.h"

int mca_coll_gpu_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    /* READY is never left while the communicator is in use, and the engine's verdict is an
     * atomic: nothing here waits or locks */
    const cgpu_status_t st = CGPU_MODULE_READY == m->state ? cgpu_comm_refusal(m->ecomm) : CGPU_OK;
    if (CGPU_OK != st) {
        return mca_coll_gpu_engine_rc(st, "MPI_Barrier", comm);
    }
    return m->prev.coll_barrier(comm, m->prev.coll_barrier_module);
}
