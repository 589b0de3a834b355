/*
 * coll/gpu: the engine's bootstrap (allgather, barrier on host bytes) built from the
 * previous coll module saved at enable time. Only host memory ever passes through it.
 */
#include "coll_gpu.h"

static cgpu_status_t boot_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    mca_coll_gpu_module_t *m = ctx;
    if (bytes > (size_t) INT_MAX) {
        return CGPU_ERR_INVALID_ARG;
    }
    int rc = MCA_COLL_GPU_PREV(m->prev.coll_allgather(sbuf, (int) bytes, MPI_BYTE, rbuf, (int) bytes, MPI_BYTE, m->comm,
                               m->prev.coll_allgather_module));
    return OMPI_SUCCESS == rc ? CGPU_OK : CGPU_ERR_BOOTSTRAP;
}

static cgpu_status_t boot_barrier(void *ctx)
{
    mca_coll_gpu_module_t *m = ctx;
    int rc = MCA_COLL_GPU_PREV(m->prev.coll_barrier(m->comm, m->prev.coll_barrier_module));
    return OMPI_SUCCESS == rc ? CGPU_OK : CGPU_ERR_BOOTSTRAP;
}

void mca_coll_gpu_bootstrap_setup(mca_coll_gpu_module_t *m)
{
    m->bootstrap.ctx = m;
    m->bootstrap.rank = ompi_comm_rank(m->comm);
    m->bootstrap.size = ompi_comm_size(m->comm);
    m->bootstrap.context_id = ompi_comm_get_cid(m->comm);
    m->bootstrap.allgather = boot_allgather;
    m->bootstrap.barrier = boot_barrier;
}
