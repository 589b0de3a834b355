/*
 * coll/gpu: the worker threads of the non-blocking engine collectives, and their queues.
 *
 * An engine-path post (iallreduce, ireduce, ireduce_scatter(_block), iscan, iexscan,
 * ibcast, iallgather, ialltoall, igather, iscatter, iallgatherv: those whose sizes every
 * rank can tell from its own arguments, decided exactly as the blocking calls decide; and
 * igatherv, iscatterv, ialltoallv, ialltoallw, decided from the algorithm param and the
 * module alone, whose ranks agree on the largest block here, see run_v) queues the call on
 * the communicator's worker thread, which runs it with the engine (our kernels on device
 * buffers) in posting order, after the engine communicator's set-up when one was planned
 * (coll_gpu_nb_bootstrap.c). The application's thread returns at once; the request
 * completes in MPI_Test/MPI_Wait once the worker is done (coll_gpu_request.c). A blocking
 * engine call on the same communicator first waits for the queue (mca_coll_gpu_lazy_init).
 *
 * Why a thread per communicator: MPI lets ranks post non-blocking collectives of different
 * communicators in different orders; one queue per process could then wait on a peer that
 * waits on us. The worker never calls MPI (no bootstrap round, no previous module, no
 * Open MPI object reference counts), so it is safe at every thread level.
 *
 * Threads are a pool of at most coll_gpu_nb_max_workers, lent to communicators: one whose
 * every posted call the application has completed and freed is idle, and its thread may be
 * taken back for another communicator (its own next post then borrows one again). So any
 * number of communicators can post, as long as no more than the cap have calls outstanding
 * at once; past that a post fails with a message (running it at its post would block, and
 * deadlock ranks that post on two communicators in different orders). "Outstanding" follows
 * the application's own order of posts and waits, the same on every rank of a correct
 * program, so every rank decides alike. A queue taken back is kept for reuse, never freed
 * before the component closes: a poster that read it just before still finds a valid lock,
 * and under it sees that the queue is no longer its communicator's.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NB
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "coll_gpu_nb.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

/* One communicator's worker: runs its queued engine calls in posting order. */
typedef struct mca_coll_gpu_nbq {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    mca_coll_gpu_request_t *head, *tail;
    bool stop;
    bool sleeping;
    /* not retained: the module owns its queue while lent and joins it first; read under
     * lock by posters, which retry when it is no longer theirs */
    mca_coll_gpu_module_t *m;
    struct mca_coll_gpu_nbq *next; /* in the lent list, or the spare list (create_lock) */
    /* the engine communicator's set-up on this worker: its bootstrap rounds are handed to
     * the application's threads */
    mca_coll_gpu_nb_boot_t boot;
} mca_coll_gpu_nbq_t;

static atomic_int nworkers;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
/* queues with a running thread, and queues kept for reuse (create_lock) */
static mca_coll_gpu_nbq_t *lent, *spare;
static __thread bool on_worker;

/* ---- running a call, on the worker ---- */

/* Round @p off of layout @p b: every block's bytes from off on, at most @p chunk of them. */
static const cgpu_blocks_t *v_round(const cgpu_blocks_t *b, int n, size_t off, size_t chunk,
                                    size_t *bytes, ptrdiff_t *offs, cgpu_blocks_t *out)
{
    if (NULL == b->bytes) {
        return NULL;
    }
    for (int p = 0; p < n; ++p) {
        const size_t left = b->bytes[p] > off ? b->bytes[p] - off : 0;
        bytes[p] = left < chunk ? left : chunk;
        offs[p] = b->offs[p] + (ptrdiff_t) off;
    }
    *out = (cgpu_blocks_t){.base = b->base, .bytes = bytes, .offs = offs};
    return out;
}

/* The v-forms on the worker. No rank knows every count, and the post could not wait for an
 * agreement on the previous module as the blocking forms do: the ranks agree here instead,
 * an engine allreduce (MAX) of one word in host memory, on every rank's largest block, by
 * the host algorithm (no device round trip). The
 * padded collective then runs, in rounds of at most the scratch cap's share of every block
 * when the largest passes it (a blocking call would go to the previous module, which a worker
 * may not call). A rank with a local error takes part with no bytes. */
static cgpu_status_t run_v(mca_coll_gpu_request_t *r)
{
    cgpu_comm_t *ec = r->m->ecomm;
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const int n = cgpu_comm_size(ec);
    uint64_t mine = r->vmax, maxb = 0;
    cgpu_status_t st = cgpu_allreduce_host(ec, &mine, &maxb, 1, CGPU_DT_UINT64, CGPU_OP_MAX);
    const size_t share = mca_coll_gpu_padded_max(n);
    const size_t chunk = share > 0 ? share : 1;
    if (CGPU_OK == st && maxb > chunk) {
        cgpu_log(10,
                 "%s on %s: the largest block (%llu bytes) passes "
                 "coll_gpu_gather_scratch_bytes / ranks (%zu): %llu rounds",
                 mca_coll_gpu_nb_name(r->kind), r->m->comm->c_name, (unsigned long long) maxb,
                 chunk, (unsigned long long) ((maxb + chunk - 1) / chunk));
    }
    for (size_t off = 0; CGPU_OK == st && off < maxb; off += chunk) {
        const size_t mb = maxb - off < chunk ? (size_t) maxb - off : chunk;
        const size_t one = r->bytes > off ? r->bytes - off : 0;
        void *one_buf = NULL != r->s && one > 0 ? (char *) r->s + off : (void *) r->s;
        cgpu_blocks_t rounds[2];
        const cgpu_blocks_t *b0 = v_round(&r->vb[0], n, off, mb, mca_coll_gpu_nb_v_bytes(r, 0, 1),
                                          mca_coll_gpu_nb_v_offs(r, 0, 1), &rounds[0]);
        const cgpu_blocks_t *b1 = v_round(&r->vb[1], n, off, mb, mca_coll_gpu_nb_v_bytes(r, 1, 1),
                                          mca_coll_gpu_nb_v_offs(r, 1, 1), &rounds[1]);
        switch (r->kind) {
        case CGPU_NB_GATHERV:
            st = cgpu_gatherv(ec, one_buf, one < mb ? one : mb, b1, mb, r->root);
            break;
        case CGPU_NB_SCATTERV:
            st = cgpu_scatterv(ec, b1, one_buf, one < mb ? one : mb, mb, r->root,
                               (cgpu_scatter_alg_t) c->scatter_algorithm);
            break;
        default:
            st = cgpu_alltoallv(ec, b0, b1, mb, (cgpu_alltoall_alg_t) c->alltoall_algorithm);
            break;
        }
    }
    return st;
}

static cgpu_status_t run_engine(mca_coll_gpu_request_t *r)
{
    cgpu_comm_t *ec = r->m->ecomm;
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    switch (r->kind) {
    case CGPU_NB_ALLREDUCE:
        return cgpu_allreduce(ec, r->s, r->r, r->count, r->dt, r->op,
                              (cgpu_allreduce_alg_t) c->allreduce_algorithm);
    case CGPU_NB_REDUCE:
        return cgpu_reduce(ec, r->s, r->r, r->count, r->dt, r->op, r->root);
    case CGPU_NB_REDUCE_SCATTER_BLOCK:
        return cgpu_reduce_scatter_block(ec, r->s, r->r, r->count, r->dt, r->op);
    case CGPU_NB_REDUCE_SCATTER:
        return cgpu_reduce_scatter(ec, r->s, r->r, r->counts, r->dt, r->op);
    case CGPU_NB_BCAST:
        return cgpu_bcast(ec, r->r, r->bytes, r->root);
    case CGPU_NB_ALLGATHER:
        return cgpu_allgather(ec, r->s, r->r, r->bytes);
    case CGPU_NB_ALLTOALL:
        return cgpu_alltoall(ec, r->s, r->r, r->bytes, (cgpu_alltoall_alg_t) c->alltoall_algorithm);
    case CGPU_NB_GATHER: /* s: this rank's block (NULL in place), r: the root's whole message */
        return cgpu_gather(ec, r->s, r->r, r->bytes, r->root);
    case CGPU_NB_SCATTER:
        return cgpu_scatter(ec, r->r, (void *) r->s, r->bytes, r->root,
                            (cgpu_scatter_alg_t) c->scatter_algorithm);
    case CGPU_NB_ALLGATHERV:
        return cgpu_allgatherv(ec, r->s, r->r, r->counts, r->offs);
    case CGPU_NB_GATHERV:
    case CGPU_NB_SCATTERV:
    case CGPU_NB_ALLTOALLV:
    case CGPU_NB_ALLTOALLW:
        return run_v(r);
    case CGPU_NB_SCAN:
    case CGPU_NB_EXSCAN:
        return cgpu_scan(ec, r->s, r->r, r->count, r->dt, r->op, CGPU_NB_EXSCAN == r->kind,
                         (cgpu_scan_alg_t) c->scan_algorithm,
                         mca_coll_gpu_padded_max(cgpu_comm_size(ec)));
    }
    return CGPU_ERR_INVALID_ARG;
}

/* A worker runs one queued call, after the set-up planned ahead of it. */
static void run_one(mca_coll_gpu_request_t *r, const cgpu_bootstrap_t *bs)
{
    mca_coll_gpu_module_t *m = r->m;
    /* on the device the posting thread had (the blocking path's choice), unless the buffer
     * is device memory, whose device the set-up takes */
    if (r->post_device >= 0 && r->post_device != cgpu_engine_current_device()) {
        (void) cgpu_engine_set_device(r->post_device);
    }
    if (r->create) {
        mca_coll_gpu_create(m, r->create_buf, bs);
    } else if (CGPU_MODULE_READY == __atomic_load_n(&m->state, __ATOMIC_ACQUIRE)) {
        /* in call order, as the blocking path; asked here, not at the post, where a rank
         * whose worker has not finished the set-up yet would answer otherwise */
        mca_coll_gpu_settle(m, r->create_buf, bs);
    }
    if (CGPU_MODULE_READY == __atomic_load_n(&m->state, __ATOMIC_ACQUIRE)) {
        r->st = run_engine(r);
        atomic_fetch_add_explicit(&m->engine_calls, 1, memory_order_relaxed);
    } else {
        /* the set-up this call was queued behind failed on some rank (the same on all) */
        r->st = CGPU_ERR_STATE;
        cgpu_log(CGPU_LOG_WARN,
                 "%s on %s: the engine communicator could not be set up (see "
                 "coll_gpu_verbose 10); this call fails, later ones take the staged path",
                 mca_coll_gpu_nb_name(r->kind), m->comm->c_name);
    }
    /* the communicator's count first: a caller that saw its request complete and then
     * makes a blocking call on the communicator finds nothing left to wait for */
    atomic_fetch_add_explicit(&m->nb_done, 1, memory_order_release);
    atomic_store_explicit(&r->done, 1, memory_order_release);
}

/* ---- the thread ---- */

static void *worker_main(void *arg)
{
    mca_coll_gpu_nbq_t *q = arg;
    on_worker = true;
    cgpu_thread_set_worker(true);
    for (;;) {
        mca_coll_gpu_request_t *r = NULL;
        /* a short spin first: back-to-back calls find the next one without a wake-up */
        for (int spin = 0; spin < 200 && NULL == r; ++spin) {
            pthread_mutex_lock(&q->lock);
            if (NULL != q->head) {
                r = q->head;
                q->head = r->qnext;
                if (NULL == q->head) {
                    q->tail = NULL;
                }
            }
            bool stop = q->stop;
            pthread_mutex_unlock(&q->lock);
            if (NULL == r) {
                if (stop) {
                    return NULL;
                }
                sched_yield();
            }
        }
        if (NULL == r) {
            pthread_mutex_lock(&q->lock);
            while (NULL == q->head && !q->stop) {
                q->sleeping = true;
                pthread_cond_wait(&q->cv, &q->lock);
                q->sleeping = false;
            }
            if (NULL == q->head) { /* stop, queue empty */
                pthread_mutex_unlock(&q->lock);
                return NULL;
            }
            r = q->head;
            q->head = r->qnext;
            if (NULL == q->head) {
                q->tail = NULL;
            }
            pthread_mutex_unlock(&q->lock);
        }
        run_one(r, &q->boot.bs);
    }
}

/* Stops @p q's thread and keeps the queue for reuse; @p q is off the lent list already.
 * Called with create_lock held: the join is short (the thread sleeps with nothing queued,
 * or finishes what is queued first when its communicator is freed). */
static void stop_worker_locked(mca_coll_gpu_nbq_t *q)
{
    pthread_mutex_lock(&q->lock);
    q->stop = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    q->next = spare;
    spare = q;
    atomic_fetch_sub(&nworkers, 1);
}

/* Takes back the thread of one idle communicator (every call it posted completed and freed
 * by the application, nothing queued); false when every lent thread is busy. */
static bool reclaim_idle_locked(void)
{
    for (mca_coll_gpu_nbq_t **pp = &lent; NULL != *pp; pp = &(*pp)->next) {
        mca_coll_gpu_nbq_t *q = *pp;
        mca_coll_gpu_module_t *owner = q->m;
        pthread_mutex_lock(&q->lock);
        /* posts count themselves in nb_posted under this lock, so none slips in between;
         * whether the thread sleeps yet is not asked: that is timing, not the program's
         * order, and every rank must decide alike */
        const bool idle =
            NULL == q->head && atomic_load_explicit(&owner->nb_released, memory_order_acquire) ==
                                   atomic_load_explicit(&owner->nb_posted, memory_order_relaxed);
        if (idle) {
            __atomic_store_n(&owner->nbq, NULL, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&q->lock);
        if (idle) {
            *pp = q->next;
            stop_worker_locked(q);
            cgpu_log(50, "worker of %s lent to another communicator", owner->comm->c_name);
            return true;
        }
    }
    return false;
}

/* The communicator's worker, lent at its first non-blocking engine call (after an idle
 * one's is taken back where the pool is full); NULL when every thread of the pool is busy
 * or a thread cannot be made (the post then fails). */
static mca_coll_gpu_nbq_t *worker_of(mca_coll_gpu_module_t *m)
{
    mca_coll_gpu_nbq_t *q = __atomic_load_n(&m->nbq, __ATOMIC_ACQUIRE);
    if (NULL != q) {
        return q;
    }
    pthread_mutex_lock(&create_lock);
    q = m->nbq;
    if (NULL == q && atomic_load(&nworkers) >= mca_coll_gpu_component.nb_max_workers) {
        (void) reclaim_idle_locked();
    }
    if (NULL == q && atomic_load(&nworkers) < mca_coll_gpu_component.nb_max_workers) {
        bool fresh = NULL == spare;
        if (fresh) {
            q = calloc(1, sizeof(*q));
            if (NULL != q) {
                pthread_mutex_init(&q->lock, NULL);
                pthread_cond_init(&q->cv, NULL);
            }
        } else {
            q = spare;
            spare = q->next;
        }
        if (NULL != q) {
            pthread_mutex_lock(&q->lock); /* a stale poster may be reading q->m */
            q->head = q->tail = NULL;
            q->stop = q->sleeping = false;
            q->m = m;
            mca_coll_gpu_nb_boot_init(&q->boot, m);
            pthread_mutex_unlock(&q->lock);
            if (0 != pthread_create(&q->thread, NULL, worker_main, q)) {
                q->m = NULL;
                q->next = spare; /* kept: a stale poster may hold it */
                spare = q;
                q = NULL;
            } else {
                atomic_fetch_add(&nworkers, 1);
                q->next = lent;
                lent = q;
                __atomic_store_n(&m->nbq, q, __ATOMIC_RELEASE);
            }
        }
    }
    pthread_mutex_unlock(&create_lock);
    return q;
}

void mca_coll_gpu_nb_module_fini(mca_coll_gpu_module_t *m)
{
    pthread_mutex_lock(&create_lock);
    mca_coll_gpu_nbq_t *q = m->nbq;
    if (NULL != q) {
        m->nbq = NULL;
        for (mca_coll_gpu_nbq_t **pp = &lent; NULL != *pp; pp = &(*pp)->next) {
            if (*pp == q) {
                *pp = q->next;
                break;
            }
        }
        stop_worker_locked(q); /* runs what is queued first: nothing posted is dropped */
        q->m = NULL;
    }
    pthread_mutex_unlock(&create_lock);
}

void mca_coll_gpu_nb_workers_close(void)
{
    pthread_mutex_lock(&create_lock);
    while (NULL != spare) { /* every communicator is freed by now: nobody reads these */
        mca_coll_gpu_nbq_t *q = spare;
        spare = q->next;
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->cv);
        free(q);
    }
    pthread_mutex_unlock(&create_lock);
}

/* Waits until the communicator's queued non-blocking engine collectives are done (no-op on
 * the worker itself). */
static void nb_drain(mca_coll_gpu_module_t *m)
{
    if (on_worker) {
        return;
    }
    while (atomic_load_explicit(&m->nb_done, memory_order_acquire) !=
           atomic_load_explicit(&m->nb_posted, memory_order_relaxed)) {
        opal_progress(); /* a set-up queued on the worker needs our progress callback */
        sched_yield();   /* and the worker may share this core */
    }
}

int mca_coll_gpu_lazy_init(mca_coll_gpu_module_t *m, const void *buf)
{
    /* a blocking engine call runs after the non-blocking ones posted before it */
    nb_drain(m);
    const int state = __atomic_load_n(&m->state, __ATOMIC_ACQUIRE);
    if (CGPU_MODULE_UNINIT == state) {
        mca_coll_gpu_create(m, buf, &m->bootstrap);
    } else if (CGPU_MODULE_READY == state) {
        mca_coll_gpu_settle(m, buf, &m->bootstrap); /* a load and back, once settled */
    }
    return OMPI_SUCCESS;
}

/* ---- posting, on the application's thread ---- */

mca_coll_gpu_request_t *mca_coll_gpu_nb_engine_request(mca_coll_gpu_module_t *m,
                                                       struct ompi_communicator_t *comm,
                                                       bool create, const void *buf)
{
    mca_coll_gpu_request_t *r = mca_coll_gpu_request_new(m, comm, true);
    if (NULL == r) {
        mca_coll_gpu_nb_unplan(m, create);
        return NULL;
    }
    r->create = create;
    r->create_buf = buf;
    /* the posting thread's device, where the worker may set the communicator up or ask
     * whether the ranks chose GPUs (cgpu_comm_settle): its own current device says nothing.
     * A communicator found set up and settled stays so. */
    const bool settled = CGPU_MODULE_READY == __atomic_load_n(&m->state, __ATOMIC_ACQUIRE) &&
                         !cgpu_comm_unsettled(m->ecomm);
    r->post_device = create || !settled ? cgpu_engine_current_device() : -1;
    return r;
}

int mca_coll_gpu_nb_engine_post(mca_coll_gpu_request_t *r, ompi_request_t **request)
{
    mca_coll_gpu_module_t *m = r->m;
    mca_coll_gpu_nbq_t *q;
    while (NULL != (q = worker_of(m))) {
        pthread_mutex_lock(&q->lock);
        if (q->m == m && !q->stop) {
            break; /* holding its lock: the queue stays ours until the call is in it */
        }
        pthread_mutex_unlock(&q->lock); /* taken back meanwhile: borrow again */
    }
    if (NULL == q) {
        /* past the worker cap: running the call here would block the post, and a blocking
         * post deadlocks ranks that post on two communicators in different orders; fail it */
        cgpu_log_once(CGPU_LOG_WARN,
                      "%s on %s: no worker thread for non-blocking collectives "
                      "(%d running, coll_gpu_nb_max_workers = %d, each held by a communicator "
                      "with calls outstanding): the call fails, as will further ones past the "
                      "cap (shown once per process); wait for calls before posting on more "
                      "communicators, or raise the cap",
                      mca_coll_gpu_nb_name(r->kind), m->comm->c_name, atomic_load(&nworkers),
                      mca_coll_gpu_component.nb_max_workers);
        if (r->create) { /* nothing was set up: a later call may try again */
            __atomic_store_n(&m->state, CGPU_MODULE_UNINIT, __ATOMIC_RELEASE);
        }
        for (int i = 0; i < 2; ++i) {
            (void) mca_coll_gpu_nb_view_close(&r->v[i], MPI_ERR_OTHER);
        }
        free(r->scratch);
        r->scratch = NULL;
        mca_coll_gpu_request_destroy(r);
        return mca_coll_gpu_nb_post_failed(request, MPI_ERR_OTHER);
    } else {
        r->qnext = NULL;
        r->queued = true;
        atomic_fetch_add_explicit(&m->nb_posted, 1, memory_order_relaxed);
        if (NULL == q->tail) {
            q->head = q->tail = r;
        } else {
            q->tail->qnext = r;
            q->tail = r;
        }
        if (q->sleeping) {
            pthread_cond_signal(&q->cv);
        }
        pthread_mutex_unlock(&q->lock);
    }
    mca_coll_gpu_nb_pending_add(r);
    *request = &r->super.super;
    if (cgpu_thread_one_cpu()) {
        /* the worker shares this core (Open MPI's default binding): hand it the core now so
         * that it launches the kernel before the application computes; otherwise the launch
         * waits for the caller's MPI_Wait, and nothing overlaps the computation */
        sched_yield();
    }
    return MPI_SUCCESS;
}

bool mca_coll_gpu_nb_use_scratch(mca_coll_gpu_request_t *r, size_t bytes)
{
    r->scratch = calloc(1, bytes > 0 ? bytes : 1);
    return NULL != r->scratch;
}

int mca_coll_gpu_nb_engine_unpost(mca_coll_gpu_request_t *r, ompi_request_t **request)
{
    mca_coll_gpu_nb_unplan(r->m, r->create);
    mca_coll_gpu_request_destroy(r);
    return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
}

int mca_coll_gpu_nb_post_reduction_counts(mca_coll_gpu_module_t *m,
                                          struct ompi_communicator_t *comm,
                                          mca_coll_gpu_nb_kind_t kind, bool create, const void *s,
                                          void *r, size_t count, cgpu_dtype_t dt, cgpu_op_t eop,
                                          int root, size_t *counts, ompi_request_t **request)
{
    if (CGPU_NB_REDUCE_SCATTER == kind && NULL == counts) {
        mca_coll_gpu_nb_unplan(m, create);
        return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
    }
    mca_coll_gpu_request_t *q = mca_coll_gpu_nb_engine_request(m, comm, create, NULL != s ? s : r);
    if (NULL == q) {
        free(counts);
        return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
    }
    q->counts = counts;
    q->kind = kind;
    q->s = s;
    q->r = r;
    q->count = count;
    q->dt = dt;
    q->op = eop;
    q->root = root;
    return mca_coll_gpu_nb_engine_post(q, request);
}

int mca_coll_gpu_nb_post_reduction(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                   mca_coll_gpu_nb_kind_t kind, bool create, const void *s, void *r,
                                   size_t count, cgpu_dtype_t dt, cgpu_op_t eop, int root,
                                   ompi_request_t **request)
{
    return mca_coll_gpu_nb_post_reduction_counts(m, comm, kind, create, s, r, count, dt, eop, root,
                                                 NULL, request);
}
