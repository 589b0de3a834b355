/*
 * coll/gpu: the request object of the non-blocking and persistent collectives, and its
 * completion.
 *
 * Both paths hand the caller one of these: an engine call completes when the communicator's
 * worker has run it, a staged call when the previous module's inner request completes, a
 * persistent one when its started call does. Completion runs on the application's threads
 * inside opal_progress (MPI_Test, MPI_Wait): our progress callback looks at the pending
 * requests, and finishes the ready ones (copies back, error codes, request completed)
 * outside its lock. The same callback moves the bootstrap rounds of a worker's set-up
 * (coll_gpu_nb_bootstrap.c), which only the application's threads may exchange.
 *
 * Apart from the worker and the paths that post requests: this file knows nothing of how a
 * request's call runs, only how it ends.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NB
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu_nb.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

static const char *const nb_names[] = {
    [CGPU_NB_ALLREDUCE] = "MPI_Iallreduce",
    [CGPU_NB_REDUCE] = "MPI_Ireduce",
    [CGPU_NB_REDUCE_SCATTER_BLOCK] = "MPI_Ireduce_scatter_block",
    [CGPU_NB_BCAST] = "MPI_Ibcast",
    [CGPU_NB_ALLGATHER] = "MPI_Iallgather",
    [CGPU_NB_ALLTOALL] = "MPI_Ialltoall",
    [CGPU_NB_REDUCE_SCATTER] = "MPI_Ireduce_scatter",
    [CGPU_NB_GATHER] = "MPI_Igather",
    [CGPU_NB_SCATTER] = "MPI_Iscatter",
    [CGPU_NB_ALLGATHERV] = "MPI_Iallgatherv",
    [CGPU_NB_GATHERV] = "MPI_Igatherv",
    [CGPU_NB_SCATTERV] = "MPI_Iscatterv",
    [CGPU_NB_ALLTOALLV] = "MPI_Ialltoallv",
    [CGPU_NB_SCAN] = "MPI_Iscan",
    [CGPU_NB_EXSCAN] = "MPI_Iexscan",
    [CGPU_NB_ALLTOALLW] = "MPI_Ialltoallw",
};

const char *mca_coll_gpu_nb_name(mca_coll_gpu_nb_kind_t kind)
{
    return nb_names[kind];
}

static void request_construct(mca_coll_gpu_request_t *r)
{
    r->m = NULL;
    r->inner = NULL;
    r->scratch = NULL;
    r->counts = NULL;
    r->offs = NULL;
    memset(r->vb, 0, sizeof(r->vb));
    r->vmax = 0;
    r->uop = NULL;
    r->dts[0] = r->dts[1] = NULL;
    memset(r->v, 0, sizeof(r->v));
    memset(r->sb, 0, sizeof(r->sb));
    r->back[0] = r->back[1] = false;
    r->orphan = false;
    r->create = false;
    r->create_buf = NULL;
    r->post_device = -1;
    r->rc = MPI_SUCCESS;
    r->pa = NULL;
    atomic_init(&r->done, 0);
}

OBJ_CLASS_INSTANCE(mca_coll_gpu_request_t, ompi_coll_base_nbc_request_t, request_construct, NULL);

/* process-wide: requests waiting for completion */
pthread_mutex_t mca_coll_gpu_nb_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_gpu_request_t *pending;
static atomic_int npending;
static bool progress_registered;

/* persistent requests freed through a wrapper that reads them after our free returns
 * (ompi_coll_base_retain_*'s free_objs_callback): destroyed at the next init or at close */
static mca_coll_gpu_request_t *retired;

/* ---- the object ---- */

void mca_coll_gpu_nb_pending_add(mca_coll_gpu_request_t *r)
{
    pthread_mutex_lock(&mca_coll_gpu_nb_lock);
    r->pprev = NULL;
    r->pnext = pending;
    if (NULL != pending) {
        pending->pprev = r;
    }
    pending = r;
    atomic_fetch_add(&npending, 1);
    pthread_mutex_unlock(&mca_coll_gpu_nb_lock);
}

void mca_coll_gpu_request_w_types(struct ompi_datatype_t *const *t, const int *counts, int n,
                                  bool retain)
{
    for (int p = 0; NULL != t && p < n; ++p) {
        struct ompi_datatype_t *dt = t[p]; /* the caller's array is const */
        if (counts[p] > 0 && retain) {
            OBJ_RETAIN(dt);
        } else if (counts[p] > 0) {
            OBJ_RELEASE(dt);
        }
    }
}

static void persist_args_free(mca_coll_gpu_args_t *pa)
{
    if (NULL != pa) {
        mca_coll_gpu_request_w_types(pa->sdts, pa->scs, pa->sn, false);
        mca_coll_gpu_request_w_types(pa->rdts, pa->rcs, pa->rn, false);
        free(pa);
    }
}

void mca_coll_gpu_request_destroy(mca_coll_gpu_request_t *r)
{
    for (int i = 0; i < 2; ++i) {
        if (NULL != r->dts[i]) {
            OBJ_RELEASE(r->dts[i]);
        }
    }
    if (NULL != r->uop) {
        OBJ_RELEASE(r->uop);
    }
    if (NULL != r->m) {
        if (r->queued) { /* its communicator's worker may now be lent to another one */
            atomic_fetch_add_explicit(&r->m->nb_released, 1, memory_order_release);
        }
        OBJ_RELEASE(r->m);
    }
    free(r->counts);
    persist_args_free(r->pa);
    OMPI_REQUEST_FINI(&r->super.super);
    OBJ_RELEASE(r);
}

static int request_free(ompi_request_t **req)
{
    mca_coll_gpu_request_t *r = (mca_coll_gpu_request_t *) *req;
    *req = MPI_REQUEST_NULL;
    if (!REQUEST_COMPLETE(&r->super.super)) {
        /* MPI forbids freeing an active collective request; finish it quietly later */
        cgpu_log(CGPU_LOG_WARN,
                 "a non-blocking collective request on %s was freed before it "
                 "completed (MPI forbids this); coll/gpu completes it and drops it",
                 NULL != r->m ? r->m->comm->c_name : "?");
        r->orphan = true;
        return MPI_SUCCESS;
    }
    mca_coll_gpu_request_destroy(r);
    return MPI_SUCCESS;
}

int mca_coll_gpu_request_cancel(ompi_request_t *req, int complete)
{
    (void) req, (void) complete;
    return MPI_SUCCESS; /* collectives cannot be cancelled: the request completes normally */
}

mca_coll_gpu_request_t *mca_coll_gpu_request_new(mca_coll_gpu_module_t *m,
                                                 struct ompi_communicator_t *comm, bool engine)
{
    mca_coll_gpu_request_t *r = OBJ_NEW(mca_coll_gpu_request_t);
    if (NULL == r) {
        return NULL;
    }
    OMPI_REQUEST_INIT(&r->super.super, false);
    r->super.super.req_type = OMPI_REQUEST_COLL;
    r->super.super.req_state = OMPI_REQUEST_ACTIVE;
    r->super.super.req_status.MPI_ERROR = MPI_SUCCESS;
    r->super.super.req_free = request_free;
    r->super.super.req_cancel = mca_coll_gpu_request_cancel;
    r->super.super.req_mpi_object.comm = comm;
    r->engine = engine;
    OBJ_RETAIN(m);
    r->m = m;
    return r;
}

void mca_coll_gpu_request_retain(mca_coll_gpu_request_t *r, struct ompi_datatype_t *a,
                                 struct ompi_datatype_t *b, struct ompi_op_t *op)
{
    if (NULL != a) {
        OBJ_RETAIN(a);
        r->dts[0] = a;
    }
    if (NULL != b) {
        OBJ_RETAIN(b);
        r->dts[1] = b;
    }
    if (NULL != op) {
        OBJ_RETAIN(op);
        r->uop = op;
    }
}

void mca_coll_gpu_request_retire(mca_coll_gpu_request_t *r)
{
    pthread_mutex_lock(&mca_coll_gpu_nb_lock);
    r->qnext = retired;
    retired = r;
    pthread_mutex_unlock(&mca_coll_gpu_nb_lock);
}

void mca_coll_gpu_request_reap(void)
{
    pthread_mutex_lock(&mca_coll_gpu_nb_lock);
    mca_coll_gpu_request_t *r = retired;
    retired = NULL;
    pthread_mutex_unlock(&mca_coll_gpu_nb_lock);
    while (NULL != r) {
        mca_coll_gpu_request_t *next = r->qnext;
        mca_coll_gpu_request_destroy(r);
        r = next;
    }
}

int mca_coll_gpu_nb_post_failed(ompi_request_t **request, int rc)
{
    *request = &ompi_request_null.request;
    return rc;
}

/* ---- completion (the application's threads, inside opal_progress) ---- */

static bool ready(mca_coll_gpu_request_t *r)
{
    return r->engine ? 0 != atomic_load_explicit(&r->done, memory_order_acquire)
                     : REQUEST_COMPLETE(r->inner);
}

static void finish(mca_coll_gpu_request_t *r)
{
    int rc = r->rc;
    if (r->engine) {
        if (MPI_SUCCESS == rc) {
            rc = mca_coll_gpu_engine_rc(r->st, mca_coll_gpu_nb_name(r->kind), r->m->comm);
        }
        for (int i = 0; i < 2; ++i) {
            rc = mca_coll_gpu_nb_view_close(&r->v[i], rc);
        }
        free(r->scratch);
        r->scratch = NULL;
    } else {
        if (MPI_SUCCESS == rc) {
            rc = r->inner->req_status.MPI_ERROR;
        }
        (void) ompi_request_free(&r->inner);
        for (int i = 0; i < 2; ++i) {
            rc = mca_coll_gpu_unstage(&r->sb[i], rc, r->back[i]);
        }
    }
    if (r->orphan) {
        mca_coll_gpu_request_destroy(r);
        return;
    }
    r->super.super.req_status.MPI_ERROR = rc;
    ompi_request_complete(&r->super.super, true);
}

static int nb_progress(void)
{
    if (0 == atomic_load_explicit(&npending, memory_order_relaxed) &&
        !mca_coll_gpu_nb_boot_busy()) {
        return 0;
    }
    if (0 != pthread_mutex_trylock(&mca_coll_gpu_nb_lock)) {
        return 0; /* another thread is at it */
    }
    if (mca_coll_gpu_nb_boot_busy()) {
        mca_coll_gpu_nb_boot_progress();
    }
    mca_coll_gpu_request_t *done = NULL;
    bool worker_busy = false; /* an engine call outstanding: a worker needs the core */
    for (mca_coll_gpu_request_t *r = pending, *next; NULL != r; r = next) {
        next = r->pnext;
        if (!ready(r)) {
            worker_busy = worker_busy || r->engine;
            continue;
        }
        if (NULL != r->pprev) {
            r->pprev->pnext = r->pnext;
        } else {
            pending = r->pnext;
        }
        if (NULL != r->pnext) {
            r->pnext->pprev = r->pprev;
        }
        atomic_fetch_sub(&npending, 1);
        r->pnext = done;
        done = r;
    }
    pthread_mutex_unlock(&mca_coll_gpu_nb_lock);
    if (worker_busy && NULL == done) {
        /* the workers may share this core (Open MPI binds a rank to one core): a caller
         * spinning in MPI_Wait would keep the worker off it for a whole time slice */
        sched_yield();
    }
    int n = 0;
    while (NULL != done) { /* outside the lock: finishing copies and may call back */
        mca_coll_gpu_request_t *r = done;
        done = r->pnext;
        finish(r);
        ++n;
    }
    return n;
}

void mca_coll_gpu_nb_open(void)
{
    if (!progress_registered && OPAL_SUCCESS == opal_progress_register(nb_progress)) {
        progress_registered = true;
    }
}

void mca_coll_gpu_nb_close(void)
{
    if (progress_registered) {
        (void) opal_progress_unregister(nb_progress);
        progress_registered = false;
    }
    mca_coll_gpu_request_reap();
    mca_coll_gpu_nb_workers_close();
}
