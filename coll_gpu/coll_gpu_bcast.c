/*
 * coll/gpu: MPI_Bcast, MPI_Ibcast and MPIX_Bcast_init entry points.
 *
 * MPI lets ranks describe the message with different layouts of the same signature, so
 * the path depends only on the byte count and MCA params (decision 2); a layout that is
 * not one gap-free run is packed (root) and unpacked (others) around the engine.
 */
#include <stdlib.h>

#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

int mca_coll_gpu_bcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Bcast", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    if (mca_coll_gpu_nested() || CGPU_ALLREDUCE_FALLBACK == c->bcast_algorithm || count <= 0) {
        /* nested, forced, or nothing to move: the staged previous module (it counts) */
        return mca_coll_gpu_staged_bcast(buf, count, dt, root, comm, module);
    }
    size_t esize;
    ompi_datatype_type_size(dt, &esize);
    const size_t bytes = (size_t) count * esize; /* equal on every rank */
    if (mca_coll_gpu_host_leaves(m, MCA_COLL_GPU_HOST_BCAST, bytes)) {
        return mca_coll_gpu_staged_bcast(buf, count, dt, root, comm, module);
    }
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
        if (mca_coll_gpu_on_device_at(buf, (size_t) count, dt)) { /* packing runs on the CPU */
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

int mca_coll_gpu_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ibcast", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    bool create;
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.bcast_algorithm && count > 0 &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, buf);
        if (NULL == r) {
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        }
        size_t esize;
        ompi_datatype_type_size(dtype, &esize);
        const bool is_root = ompi_comm_rank(comm) == root;
        r->kind = CGPU_NB_BCAST;
        r->bytes = (size_t) count * esize;
        r->root = root;
        r->rc = mca_coll_gpu_nb_view_open(&r->v[0], buf, count, dtype, r->bytes, is_root, !is_root,
                                          &r->r);
        if (MPI_SUCCESS != r->rc) {
            if (!mca_coll_gpu_nb_use_scratch(r, r->bytes)) {
                return mca_coll_gpu_nb_engine_unpost(r, request);
            }
            r->r = r->scratch;
        }
        if (NULL != r->v[0].pack) {
            mca_coll_gpu_request_retain(r, dtype, NULL, NULL);
        }
        return mca_coll_gpu_nb_engine_post(r, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r, mca_coll_gpu_on_device_at(buf, (size_t) count, dtype),
        m->prev.coll_ibcast(buf, count, dtype, root, comm, request, m->prev.coll_ibcast_module))
    void *h;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, buf, (size_t) count, dtype,
                                       ompi_comm_rank(comm) != root, &h);
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ibcast(h, count, dtype, root, comm, &r->inner,
                                                   m->prev.coll_ibcast_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ibcast");
}

CGPU_PERSIST_INIT(mca_coll_gpu_bcast_init,
                  (void *buf, int count, struct ompi_datatype_t *dt, int root),
                  (.kind = CGPU_K_BCAST, .r = buf, .rc = count, .rdt = dt, .root = root))
