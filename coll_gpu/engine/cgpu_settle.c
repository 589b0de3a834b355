/*
 * coll/gpu engine: a communicator set up before its ranks chose their GPUs takes the cuda
 * backend once they have.
 *
 * The commonest start-up of a GPU code finds each rank's GPU from its node-local rank
 * (MPI_Comm_split_type, whose allgather reaches this component on MPI_COMM_WORLD) and only
 * then calls cudaSetDevice. A set-up at that first call sees device 0 on every rank, which
 * says nothing, so cgpu_comm_create starts such a communicator on the host backend
 * (`unsettled`), and this asks again at later calls: rarely (calls 1, 2, 4, 8...),
 * since a process that never uses a GPU keeps paying for the question. The calls that ask
 * are the same on every rank: a call's engine path depends on arguments MPI requires to
 * match, the calls of a communicator come in one order on every rank, and the non-blocking
 * ones run on the worker in that order, a blocking call waiting for them first. So every
 * rank asks at the same call, and the answer, an allgather, is the same table everywhere:
 * one decision (decision 2).
 */
#include <stdlib.h>

#include "cgpu_comm_internal.h"
#include "cgpu_cuda_comm.h"

/* Across nodes the node-local communicator is the one whose devices count: it asks, over
 * its own bootstrap (the proxy), at the calls of the communicator it serves. */
static cgpu_comm_t *the_one_that_asks(const cgpu_comm_t *comm, const cgpu_bootstrap_t **bs)
{
    const cgpu_bootstrap_t *local_bs;
    cgpu_comm_t *local = cgpu_net_local(comm, &local_bs);
    if (NULL != local) {
        *bs = local_bs;
        return local;
    }
    return (cgpu_comm_t *) comm;
}

bool cgpu_comm_unsettled(const cgpu_comm_t *comm)
{
    const cgpu_bootstrap_t *bs = NULL;
    return __atomic_load_n(&the_one_that_asks(comm, &bs)->unsettled, __ATOMIC_ACQUIRE);
}

bool cgpu_comm_settle_due(cgpu_comm_t *top)
{
    const cgpu_bootstrap_t *bs = NULL;
    cgpu_comm_t *comm = the_one_that_asks(top, &bs);
    if (!__atomic_load_n(&comm->unsettled, __ATOMIC_ACQUIRE)) {
        return false;
    }
    const uint64_t n = ++comm->settle_calls;
    return 0 == (n & (n - 1)); /* asked at powers of two only */
}

cgpu_status_t cgpu_comm_settle(cgpu_comm_t *top, const cgpu_bootstrap_t *top_bs)
{
    const cgpu_bootstrap_t *bs = top_bs;
    cgpu_comm_t *comm = the_one_that_asks(top, &bs);
    if (!__atomic_load_n(&comm->unsettled, __ATOMIC_ACQUIRE)) {
        return CGPU_OK;
    }
    cgpu_cuda_dev_rec_t me, *all = calloc((size_t) comm->size, sizeof(*all));
    int32_t *verdicts = calloc((size_t) comm->size, sizeof(*verdicts));
    cgpu_status_t st = CGPU_OK;
    if (NULL == all || NULL == verdicts) {
        /* a few bytes per rank could not be had: the process is about to die anyway, and
         * without the table it cannot take part in the exchange (as at set-up) */
        cgpu_log(CGPU_LOG_WARN, "engine: out of memory asking whether the ranks chose GPUs");
        st = CGPU_ERR_NO_MEMORY;
        goto out;
    }
    cgpu_cuda_dev_rec(&me, cgpu_cuda_current_device(), comm->rank);
    if (CGPU_OK != bs->allgather(bs->ctx, &me, all, sizeof(me))) {
        st = CGPU_ERR_BOOTSTRAP;
        goto out;
    }
    /* the backend is set only once the inboxes are connected, with release: a pvar reader
     * on another thread that loads CUDA (acquire, cgpu_comm_backend) sees them made */
    if (CGPU_BACKEND_CUDA == cgpu_comm_plan_devices(comm, all, sizeof(*all))) {
        st = cgpu_comm_connect_cuda(comm, bs, verdicts);
        if (CGPU_OK == st) {
            __atomic_store_n(&comm->backend, CGPU_BACKEND_CUDA, __ATOMIC_RELEASE);
        } else {
            /* every rank saw the same failure: the host backend goes on serving */
            cgpu_cuda_comm_destroy(comm);
            cgpu_log(0 == comm->rank ? CGPU_LOG_WARN : CGPU_LOG_INFO,
                     "engine: the cuda backend could not be set up once every rank had chosen "
                     "its GPU (%s); this communicator stays on the host backend",
                     cgpu_status_string(st));
            st = CGPU_OK;
        }
    }
out:
    free(all);
    free(verdicts);
    return st;
}
