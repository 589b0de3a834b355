/*
 * coll/gpu: the persistent collectives' requests (MPIX_*_init, Open MPI's pcollreq
 * extension).
 *
 * Open MPI hands the persistent forms to the highest-priority module that provides them,
 * and libnbc's would run on device pointers. Ours keep the call's arguments; each
 * MPI_Start posts the call through this module's own non-blocking form (the engine, or the
 * staged path), and the persistent request completes with it, as a staged request does:
 * our progress callback sees the started call complete, frees it and completes the
 * persistent request, which stays for the next MPI_Start until MPI_Request_free. MPI keeps
 * the argument arrays unchanged until then; the datatypes and the op are retained here.
 * The inits themselves (CGPU_PERSIST_INIT) sit beside their collectives' entry points.
 *
 * Apart from the request object because a persistent request has its own life (inactive,
 * started, completed, started again) and starts its calls through the module's slots.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NB
#include <stdlib.h>

#include "coll_gpu_nb.h"

#include "opal/util/output.h"

static int persist_post(mca_coll_gpu_request_t *r, ompi_request_t **inner)
{
    const mca_coll_gpu_args_t *a = r->pa;
    mca_coll_gpu_module_t *m = r->m;
    mca_coll_base_module_t *s = &m->super;
    struct ompi_communicator_t *c = m->comm;
    switch (a->kind) {
    case CGPU_K_ALLGATHER:
        return s->coll_iallgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, inner, s);
    case CGPU_K_ALLGATHERV:
        return s->coll_iallgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c, inner, s);
    case CGPU_K_ALLREDUCE:
        return s->coll_iallreduce(a->s, a->r, a->rc, a->rdt, a->op, c, inner, s);
    case CGPU_K_ALLTOALL:
        return s->coll_ialltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, inner, s);
    case CGPU_K_ALLTOALLV:
        return s->coll_ialltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                  inner, s);
    case CGPU_K_ALLTOALLW:
        return s->coll_ialltoallw(a->s, a->scs, a->sds, a->sdts, a->r, a->rcs, a->rds, a->rdts, c,
                                  inner, s);
    case CGPU_K_BCAST:
        return s->coll_ibcast(a->r, a->rc, a->rdt, a->root, c, inner, s);
    case CGPU_K_EXSCAN:
        return s->coll_iexscan(a->s, a->r, a->rc, a->rdt, a->op, c, inner, s);
    case CGPU_K_GATHER:
        return s->coll_igather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c, inner, s);
    case CGPU_K_GATHERV:
        return s->coll_igatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, a->root, c,
                                inner, s);
    case CGPU_K_REDUCE:
        return s->coll_ireduce(a->s, a->r, a->rc, a->rdt, a->op, a->root, c, inner, s);
    case CGPU_K_REDUCE_SCATTER:
        return s->coll_ireduce_scatter(a->s, a->r, a->rcs, a->rdt, a->op, c, inner, s);
    case CGPU_K_REDUCE_SCATTER_BLOCK:
        return s->coll_ireduce_scatter_block(a->s, a->r, a->rc, a->rdt, a->op, c, inner, s);
    case CGPU_K_SCAN:
        return s->coll_iscan(a->s, a->r, a->rc, a->rdt, a->op, c, inner, s);
    case CGPU_K_SCATTER:
        return s->coll_iscatter(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c, inner, s);
    case CGPU_K_SCATTERV:
        return s->coll_iscatterv(a->s, a->scs, a->sds, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                                 inner, s);
    case CGPU_K_NALLGATHER:
        return s->coll_ineighbor_allgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, inner, s);
    case CGPU_K_NALLGATHERV:
        return s->coll_ineighbor_allgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                            inner, s);
    case CGPU_K_NALLTOALL:
        return s->coll_ineighbor_alltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, inner, s);
    case CGPU_K_NALLTOALLV:
        return s->coll_ineighbor_alltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds,
                                           a->rdt, c, inner, s);
    case CGPU_K_NALLTOALLW:
        return s->coll_ineighbor_alltoallw(a->s, a->scs, a->sad, a->sdts, a->r, a->rcs, a->rad,
                                           a->rdts, c, inner, s);
    }
    return MPI_ERR_INTERN;
}

static int persist_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        mca_coll_gpu_request_t *r = (mca_coll_gpu_request_t *) requests[i];
        if (OMPI_REQUEST_ACTIVE == r->super.super.req_state) {
            cgpu_log(CGPU_LOG_WARN,
                     "MPI_Start on %s: the persistent collective request is "
                     "still active (MPI forbids this)",
                     r->m->comm->c_name);
            return MPI_ERR_REQUEST;
        }
        ompi_request_t *inner = MPI_REQUEST_NULL;
        int rc = persist_post(r, &inner);
        if (MPI_SUCCESS != rc) {
            return rc; /* the post said why; the request stays inactive */
        }
        r->inner = inner;
        r->rc = MPI_SUCCESS;
        r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
        r->super.super.req_complete = REQUEST_PENDING;
        r->super.super.req_state = OMPI_REQUEST_ACTIVE;
        mca_coll_gpu_nb_pending_add(r); /* completed with its started call */
    }
    return MPI_SUCCESS;
}

static int persist_free(ompi_request_t **req)
{
    mca_coll_gpu_request_t *r = (mca_coll_gpu_request_t *) *req;
    if (!REQUEST_COMPLETE(&r->super.super)) {
        cgpu_log(CGPU_LOG_WARN,
                 "MPI_Request_free on %s: the persistent collective request is "
                 "active (MPI forbids this); complete it first, then free it",
                 r->m->comm->c_name);
        return MPI_ERR_REQUEST;
    }
    *req = MPI_REQUEST_NULL;
    if (persist_free != r->super.super.req_free) { /* a wrapper reads it after us */
        mca_coll_gpu_request_retire(r);
        return MPI_SUCCESS;
    }
    mca_coll_gpu_request_destroy(r);
    return MPI_SUCCESS;
}

int mca_coll_gpu_persist_new(mca_coll_base_module_t *module, struct ompi_communicator_t *comm,
                             const mca_coll_gpu_args_t *a, ompi_request_t **request)
{
    mca_coll_gpu_request_reap();
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    mca_coll_gpu_request_t *r = OBJ_NEW(mca_coll_gpu_request_t);
    mca_coll_gpu_args_t *pa = malloc(sizeof(*pa));
    if (NULL == r || NULL == pa) {
        if (NULL != r) {
            OBJ_RELEASE(r);
        }
        free(pa);
        return MPI_ERR_NO_MEM;
    }
    *pa = *a;
    pa->sn = pa->rn = OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
    if (pa->kind >= CGPU_K_NALLGATHER) {
        mca_coll_gpu_degrees(comm, &pa->rn, &pa->sn);
    }
    OMPI_REQUEST_INIT(&r->super.super, true); /* inactive and complete */
    r->super.super.req_type = OMPI_REQUEST_COLL;
    r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.super.req_start = persist_start;
    r->super.super.req_free = persist_free;
    r->super.super.req_cancel = mca_coll_gpu_request_cancel;
    r->super.super.req_mpi_object.comm = comm;
    r->engine = false;
    OBJ_RETAIN(m);
    r->m = m;
    mca_coll_gpu_request_retain(r, pa->sdt, pa->rdt, pa->op);
    mca_coll_gpu_request_w_types(pa->sdts, pa->scs, pa->sn, true);
    mca_coll_gpu_request_w_types(pa->rdts, pa->rcs, pa->rn, true);
    r->pa = pa;
    *request = &r->super.super;
    return MPI_SUCCESS;
}
