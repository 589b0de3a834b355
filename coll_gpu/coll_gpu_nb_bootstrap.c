/*
 * coll/gpu: the engine communicator's set-up behind a non-blocking collective.
 *
 * A post may not block, and Open MPI itself posts MPI_Iallreduce from inside its progress
 * loop (communicator ids): so when the communicator has no engine communicator yet, its
 * first engine-path post plans the set-up (mca_coll_gpu_nb_plan_engine) and the worker
 * thread runs it ahead of the call (coll_gpu_worker.c). The bootstrap rounds the set-up
 * needs travel as point-to-point messages with a tag of ours, posted and tested by our
 * progress callback on the application's threads (never the previous module's collectives,
 * whose order on the communicator would then differ between ranks; the worker never calls
 * MPI). If that set-up fails (a cap, a resource), the calls queued behind it fail with a
 * message and later calls take the staged path. A communicator spanning nodes
 * (coll_gpu_fake_nodes' nodes too) is never set up by a worker: its non-blocking calls take
 * the staged path until a blocking call has set it up, and the engine path after.
 *
 * Apart from the worker: this is the one part of the non-blocking machinery that exchanges
 * messages, and it runs on the application's threads, not on the worker.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NB
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu_nb.h"

#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "opal/util/output.h"

/* One bootstrap round: an allgather of @p bytes per rank. */
typedef struct boot_job {
    const void *s;
    char *r;
    size_t bytes;
    bool posted;
    int nreqs;
    ompi_request_t **reqs;
    int rc;
    _Atomic int done;
} boot_job_t;

/* bootstraps with a round in flight (mca_coll_gpu_nb_lock) */
static mca_coll_gpu_nb_boot_t *jobs;
static atomic_int njobs;

/* Bootstrap messages: below every range Open MPI's coll components use except hcoll's,
 * which counts down from its base; one tag, matched in order per communicator and peer. */
#define CGPU_BOOT_TAG (MCA_COLL_BASE_TAG_HCOLL_END + 7)

/* ---- planning, at the post ---- */

bool mca_coll_gpu_nb_plan_engine(mca_coll_gpu_module_t *m, bool *create)
{
    *create = false;
    if (mca_coll_gpu_nested() || 1 != mca_coll_gpu_component.nb_engine) {
        return false;
    }
    switch (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE)) {
    case CGPU_MODULE_READY:
    case CGPU_MODULE_CREATING:
        return true;
    case CGPU_MODULE_FALLBACK:
        return false;
    case CGPU_MODULE_UNINIT:
        break;
    }
    if (mca_coll_gpu_spans_nodes(m)) {
        /* a set-up across nodes needs collectives of the previous module, which a post may
         * not wait for: the staged path until a blocking call sets the communicator up (the
         * state stays UNINIT, so that call still does) */
        return false;
    }
    __atomic_store_n(&m->state, CGPU_MODULE_CREATING, __ATOMIC_RELEASE);
    *create = true;
    return true;
}

void mca_coll_gpu_nb_unplan(mca_coll_gpu_module_t *m, bool create)
{
    if (create) {
        __atomic_store_n(&m->state, CGPU_MODULE_UNINIT, __ATOMIC_RELEASE);
    }
}

/* ---- the rounds: the worker waits, the application's threads exchange ---- */

static cgpu_status_t async_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    mca_coll_gpu_nb_boot_t *q = ctx;
    boot_job_t job = {.s = sbuf, .r = rbuf, .bytes = bytes, .rc = MPI_SUCCESS};
    atomic_init(&job.done, 0);
    memcpy((char *) rbuf + (size_t) q->bs.rank * bytes, sbuf, bytes);
    if (q->bs.size > 1) {
        pthread_mutex_lock(&mca_coll_gpu_nb_lock);
        q->job = &job;
        q->jnext = jobs;
        jobs = q;
        atomic_fetch_add(&njobs, 1);
        pthread_mutex_unlock(&mca_coll_gpu_nb_lock);
        /* the application's MPI_Test/MPI_Wait (our progress callback) move the round */
        while (0 == atomic_load_explicit(&job.done, memory_order_acquire)) {
            sched_yield();
        }
    }
    return MPI_SUCCESS == job.rc ? CGPU_OK : CGPU_ERR_BOOTSTRAP;
}

static cgpu_status_t async_barrier(void *ctx)
{
    mca_coll_gpu_nb_boot_t *q = ctx;
    char *tmp = calloc((size_t) q->bs.size, 1);
    if (NULL == tmp) {
        return CGPU_ERR_NO_MEMORY;
    }
    const char one = 1;
    cgpu_status_t st = async_allgather(ctx, &one, tmp, 1);
    free(tmp);
    return st;
}

void mca_coll_gpu_nb_boot_init(mca_coll_gpu_nb_boot_t *b, mca_coll_gpu_module_t *m)
{
    b->m = m;
    b->job = NULL;
    b->jnext = NULL;
    b->bs = m->bootstrap; /* rank, size, context id; its exchanges are ours */
    b->bs.ctx = b;
    b->bs.allgather = async_allgather;
    b->bs.barrier = async_barrier;
}

/* Posts or tests one bootstrap's round (progress callback, mca_coll_gpu_nb_lock held:
 * nothing here may make a progress call, which could come back to that lock): true when the
 * round is over. */
static bool job_step(mca_coll_gpu_nb_boot_t *q)
{
    boot_job_t *j = q->job;
    struct ompi_communicator_t *comm = q->m->comm;
    const int n = q->bs.size, me = q->bs.rank;
    if (!j->posted) {
        j->posted = true;
        j->reqs = calloc(2 * (size_t) n, sizeof(*j->reqs));
        if (NULL == j->reqs) {
            j->rc = MPI_ERR_NO_MEM;
            return true;
        }
        for (int p = 0; p < n && MPI_SUCCESS == j->rc; ++p) {
            if (p == me) {
                continue;
            }
            j->rc = MCA_PML_CALL(irecv(j->r + (size_t) p * j->bytes, j->bytes, MPI_BYTE, p,
                                       CGPU_BOOT_TAG, comm, &j->reqs[j->nreqs]));
            j->nreqs += MPI_SUCCESS == j->rc;
            if (MPI_SUCCESS == j->rc) {
                j->rc = MCA_PML_CALL(isend(j->s, j->bytes, MPI_BYTE, p, CGPU_BOOT_TAG,
                                           MCA_PML_BASE_SEND_STANDARD, comm, &j->reqs[j->nreqs]));
                j->nreqs += MPI_SUCCESS == j->rc;
            }
        }
        if (MPI_SUCCESS != j->rc) {
            cgpu_log(CGPU_LOG_WARN, "comm %s: posting a set-up message failed (%d)", comm->c_name,
                     j->rc);
            /* what was posted still completes (the peers post theirs too) */
        }
    }
    int flag = 0;
    if (j->nreqs > 0) {
        /* complete, without a progress call of our own: this runs inside our progress
         * callback with the lock held, and ompi_request_test_all on requests not yet
         * complete calls opal_progress, whose other callbacks may post a collective that
         * comes back here (a communicator id agreement of MPI_Comm_dup posts an iallreduce,
         * whose post takes the same lock: a self-deadlock). The application's MPI calls
         * progress the messages. */
        for (int i = 0; i < j->nreqs; ++i) {
            if (!REQUEST_COMPLETE(j->reqs[i])) {
                return false;
            }
        }
        int rc = ompi_request_test_all(j->nreqs, j->reqs, &flag, MPI_STATUSES_IGNORE);
        if (OMPI_SUCCESS != rc && MPI_SUCCESS == j->rc) {
            j->rc = rc;
        }
        if (!flag) {
            return false;
        }
    }
    free(j->reqs);
    j->reqs = NULL;
    return true;
}

bool mca_coll_gpu_nb_boot_busy(void)
{
    return 0 != atomic_load_explicit(&njobs, memory_order_relaxed);
}

void mca_coll_gpu_nb_boot_progress(void)
{
    for (mca_coll_gpu_nb_boot_t **pp = &jobs; NULL != *pp;) {
        mca_coll_gpu_nb_boot_t *q = *pp;
        if (job_step(q)) {
            *pp = q->jnext;
            boot_job_t *j = q->job;
            q->job = NULL;
            atomic_fetch_sub(&njobs, 1);
            atomic_store_explicit(&j->done, 1, memory_order_release);
        } else {
            pp = &q->jnext;
        }
    }
}
