/*
 * coll/gpu: MPI_Bcast entry point.
 *
 * MPI lets ranks describe the message with different layouts of the same signature, so
 * the path depends only on the byte count and MCA params (decision 2); a layout that is
 * not one gap-free run is packed (root) and unpacked (others) around the engine.
 */
#include <stdlib.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

int mca_coll_gpu_bcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    if (mca_coll_gpu_nested() || CGPU_ALLREDUCE_FALLBACK == c->bcast_algorithm || count <= 0) {
        /* nested, forced, or nothing to move: the staged previous module (it counts) */
        return mca_coll_gpu_staged_bcast(buf, count, dt, root, comm, module);
    }
    size_t esize;
    ompi_datatype_type_size(dt, &esize);
    const size_t bytes = (size_t) count * esize; /* equal on every rank */
    mca_coll_gpu_lazy_init(m, buf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_bcast(buf, count, dt, root, comm, module);
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    const char *start;
    char *pack = NULL;
    void *work = buf;
    mca_coll_gpu_mirror_t mb = {0};
    int rc = MPI_SUCCESS;
    if (!mca_coll_gpu_contiguous_run(buf, count, dt, &start)) {
        if (mca_coll_gpu_on_device(buf)) { /* packing runs on the CPU */
            rc = mca_coll_gpu_mirror_in(&mb, buf, (size_t) count, dt, &work);
        }
        pack = malloc(bytes);
        if (MPI_SUCCESS == rc && NULL == pack) {
            rc = MPI_ERR_NO_MEM;
        }
        if (MPI_SUCCESS == rc && is_root) {
            rc = mca_coll_gpu_typed_copy(work, pack, (size_t) count, dt, true);
        }
    }
    /* a local failure still takes part (on scratch) so that no peer waits forever */
    char *scratch = NULL;
    void *target = NULL != pack ? (void *) pack : (void *) start;
    if (MPI_SUCCESS != rc) {
        scratch = calloc(1, bytes);
        target = scratch;
    }
    cgpu_status_t st = CGPU_ERR_NO_MEMORY;
    if (NULL != target) {
        st = MCA_COLL_GPU_ENGINE(m, cgpu_bcast(m->ecomm, target, bytes, root));
    }
    free(scratch);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_engine_rc(st, "MPI_Bcast", comm);
    }
    if (MPI_SUCCESS == rc && NULL != pack && !is_root) {
        rc = mca_coll_gpu_typed_copy(pack, work, (size_t) count, dt, false);
    }
    free(pack);
    return mca_coll_gpu_mirror_out(&mb, rc); /* no-op unless buf was mirrored */
}
