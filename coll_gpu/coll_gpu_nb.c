/*
 * coll/gpu: non-blocking collectives (MPI_Iallreduce, MPI_Ialltoall, ...).
 *
 * Engine path (iallreduce, ireduce, ireduce_scatter(_block), iscan, iexscan, ibcast,
 * iallgather, ialltoall, igather, iscatter, iallgatherv: those whose sizes every rank can tell from
 * its own arguments; decided exactly as the blocking calls decide, from arguments MPI requires to
 * match and MCA params, so every rank takes the same path; and igatherv, iscatterv, ialltoallv,
 * ialltoallw, decided from the algorithm param and the module alone, whose ranks agree on the
 * largest block on the worker, see run_v): the post packs what is not one gap-free run and queues
 * the call on the communicator's worker thread, which runs it with the engine (our kernels on
 * device buffers) in posting order. A post may not block, and Open MPI itself posts MPI_Iallreduce
 * from inside its progress loop (communicator ids): so when the communicator has no engine
 * communicator yet, the worker creates it, and the bootstrap rounds it needs travel as
 * point-to-point messages with a tag of ours, posted and tested by our progress callback on the
 * application's threads (never the previous module's collectives, whose order on the communicator
 * would then differ between ranks). If that set-up fails (a cap, a resource), the calls queued
 * behind it fail with a message and later calls take the staged path. A communicator spanning nodes
 * (coll_gpu_fake_nodes' nodes too) is never set up by a worker: its non-blocking calls take the
 * staged path until a blocking call has set it up, and the engine path after. The application's
 * thread returns at once; the request completes in MPI_Test/MPI_Wait (our progress callback) once
 * the worker is done. A blocking engine call on the same communicator first waits for the queue.
 *
 * Why a thread per communicator: MPI lets ranks post non-blocking collectives of different
 * communicators in different orders; one queue per process could then wait on a peer that
 * waits on us. The worker never calls MPI (no bootstrap round, no previous module, no
 * Open MPI object reference counts), so it is safe at every thread level. Workers are
 * capped (coll_gpu_nb_max_workers): past the cap a post fails with a message (running it at
 * its post would block, and deadlock ranks that post on two communicators in different
 * orders).
 *
 * Staged path (on device buffers, every call the engine declines: user ops, the algorithms
 * "fallback", the engine off or not set up): the device spans are
 * copied to host memory at the post, the previous module's non-blocking collective runs on the
 * copies, and our request copies the received spans back when that request completes. Calls whose
 * buffers are all in host memory go to the previous module untouched.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

#define M(module) ((mca_coll_gpu_module_t *) (module))

enum nb_kind {
    NB_ALLREDUCE,
    NB_REDUCE,
    NB_REDUCE_SCATTER_BLOCK,
    NB_BCAST,
    NB_ALLGATHER,
    NB_ALLTOALL,
    NB_REDUCE_SCATTER,
    NB_GATHER,
    NB_SCATTER,
    NB_ALLGATHERV,
    NB_GATHERV,
    NB_SCATTERV,
    NB_ALLTOALLV,
    NB_SCAN,
    NB_EXSCAN,
    NB_ALLTOALLW
};
static const char *const nb_names[] = {
    "MPI_Iallreduce",      "MPI_Ireduce",    "MPI_Ireduce_scatter_block",
    "MPI_Ibcast",          "MPI_Iallgather", "MPI_Ialltoall",
    "MPI_Ireduce_scatter", "MPI_Igather",    "MPI_Iscatter",
    "MPI_Iallgatherv",     "MPI_Igatherv",   "MPI_Iscatterv",
    "MPI_Ialltoallv",      "MPI_Iscan",      "MPI_Iexscan",
    "MPI_Ialltoallw"};

/* A user buffer as the engine sees it: the user's own gap-free run, or packed host bytes
 * (packed at the post, unpacked at completion). */
typedef struct nb_view {
    void *host;                 /* the user's layout in host memory (user's or mirror) */
    int count;
    struct ompi_datatype_t *dt;
    mca_coll_gpu_mirror_t mir;  /* the device span, when the layout had to be packed */
    char *pack;                 /* packed bytes; NULL: the engine uses the user's run */
    bool unpack;                /* copy the result back at completion */
    /* an MPI_Ialltoallw side with gaps: block p (wcounts[p] x wdts[p] at host + wdispls[p]
     * bytes) packed after block p - 1; the caller's arrays, which MPI keeps until completion */
    const int *wcounts, *wdispls;
    struct ompi_datatype_t *const *wdts;
    int wn;
} nb_view_t;

/* Open MPI's MPI_I* bindings keep the call's datatypes and op alive by writing them into the
 * returned request past its ompi_request_t (ompi_coll_base_retain_*): our requests are
 * ompi_coll_base_nbc_request_t, as libnbc's are, so that room exists. */
typedef struct mca_coll_gpu_request_t {
    ompi_coll_base_nbc_request_t super;
    mca_coll_gpu_module_t *m; /* retained while the request lives */
    bool engine;              /* engine call (worker) or staged (inner request) */
    bool orphan;              /* freed by the application before completion (erroneous) */
    int rc;                   /* local error found at the post, reported at completion */
    /* engine call */
    enum nb_kind kind;
    const void *s;
    void *r;
    size_t count, bytes;
    cgpu_dtype_t dt;
    cgpu_op_t op;
    int root;
    size_t *counts;           /* NB_REDUCE_SCATTER: every rank's count (ours, freed with us);
                                 NB_ALLGATHERV: every rank's bytes */
    ptrdiff_t *offs;          /* NB_ALLGATHERV: block p at r + offs[p] (in counts' allocation) */
    /* the v-forms (NB_GATHERV, NB_SCATTERV, NB_ALLTOALLV, NB_ALLTOALLW): vb[1] the root's
     * whole message or the receive layout, vb[0] alltoallv's (alltoallw's) send layout (bytes NULL:
     * the side takes no part); their arrays and room for one round's in counts' allocation
     * (v_bytes, v_offs); s and bytes the one block of a gatherv or scatterv; vmax this rank's
     * largest block */
    cgpu_blocks_t vb[2];
    size_t vmax;
    bool create;              /* the worker creates the engine communicator first */
    const void *create_buf;   /* ... on this buffer's device */
    int post_device;          /* the posting thread's current device (-1: none) */
    nb_view_t v[2];
    char *scratch;
    _Atomic int done;
    cgpu_status_t st;
    /* staged call */
    ompi_request_t *inner;
    mca_coll_gpu_staged_buf_t sb[2]; /* staged host copies */
    bool back[2];                     /* ... copied back at completion */
    /* retained handles */
    struct ompi_datatype_t *dts[2];
    struct ompi_op_t *uop;
    struct mca_coll_gpu_args *pa; /* a persistent collective's call (inner: its started one) */
    struct mca_coll_gpu_request_t *qnext;         /* worker queue (persistent: retired list) */
    struct mca_coll_gpu_request_t *pnext, *pprev; /* pending list */
} mca_coll_gpu_request_t;

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

/* One communicator's worker: runs its queued engine calls in posting order. */
typedef struct mca_coll_gpu_nbq {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    mca_coll_gpu_request_t *head, *tail;
    bool stop;
    bool sleeping;
    mca_coll_gpu_module_t *m; /* not retained: the module owns us and joins us first */
    /* the engine communicator's set-up on this worker: its bootstrap rounds are handed to
     * the application's threads (boot_job), which exchange them point to point */
    cgpu_bootstrap_t bs;
    struct boot_job *job;              /* the round in flight, or NULL */
    struct mca_coll_gpu_nbq *jnext;    /* list of workers with a round in flight */
} mca_coll_gpu_nbq_t;

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

/* process-wide: requests waiting for completion, and the worker count */
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static mca_coll_gpu_request_t *pending;
static atomic_int npending;
static atomic_int nworkers;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread bool on_worker;
static bool progress_registered;
static mca_coll_gpu_nbq_t *jobs;  /* workers with a bootstrap round in flight (pending_lock) */
static atomic_int njobs;

/* Bootstrap messages: below every range Open MPI's coll components use except hcoll's,
 * which counts down from its base; one tag, matched in order per communicator and peer. */
#define CGPU_BOOT_TAG (MCA_COLL_BASE_TAG_HCOLL_END + 7)

/* ---- requests ---- */

static void persist_args_free(struct mca_coll_gpu_args *pa);

static void pending_add(mca_coll_gpu_request_t *r)
{
    pthread_mutex_lock(&pending_lock);
    r->pprev = NULL;
    r->pnext = pending;
    if (NULL != pending) {
        pending->pprev = r;
    }
    pending = r;
    atomic_fetch_add(&npending, 1);
    pthread_mutex_unlock(&pending_lock);
}

static void request_destroy(mca_coll_gpu_request_t *r)
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
        opal_output(0, "coll/gpu: a non-blocking collective request on %s was freed before it "
                       "completed (MPI forbids this); coll/gpu completes it and drops it",
                    NULL != r->m ? r->m->comm->c_name : "?");
        r->orphan = true;
        return MPI_SUCCESS;
    }
    request_destroy(r);
    return MPI_SUCCESS;
}

static int request_cancel(ompi_request_t *req, int complete)
{
    (void) req, (void) complete;
    return MPI_SUCCESS; /* collectives cannot be cancelled: the request completes normally */
}

static mca_coll_gpu_request_t *request_new(mca_coll_gpu_module_t *m,
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
    r->super.super.req_cancel = request_cancel;
    r->super.super.req_mpi_object.comm = comm;
    r->engine = engine;
    OBJ_RETAIN(m);
    r->m = m;
    return r;
}

static void retain_types(mca_coll_gpu_request_t *r, struct ompi_datatype_t *a,
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

/* ---- views: what the engine reads and writes ---- */

/* Between a view's user layout on the host and its packed bytes, either way. */
static int view_copy(nb_view_t *v, bool pack)
{
    if (NULL == v->wdts) {
        return pack ? mca_coll_gpu_typed_copy(v->host, v->pack, (size_t) v->count, v->dt, true)
                    : mca_coll_gpu_typed_copy(v->pack, v->host, (size_t) v->count, v->dt, false);
    }
    int rc = MPI_SUCCESS;
    size_t at = 0;
    for (int p = 0; p < v->wn && MPI_SUCCESS == rc; ++p) {
        if (v->wcounts[p] <= 0) { /* an empty block's type is not looked at */
            continue;
        }
        size_t es;
        ompi_datatype_type_size(v->wdts[p], &es);
        char *typed = (char *) v->host + v->wdispls[p];
        const size_t c = (size_t) v->wcounts[p];
        rc = pack ? mca_coll_gpu_typed_copy(typed, v->pack + at, c, v->wdts[p], true)
                  : mca_coll_gpu_typed_copy(v->pack + at, typed, c, v->wdts[p], false);
        at += c * es;
    }
    return rc;
}

/* The packed bytes of a view whose user layout is on the host (v->host) */
static int view_pack(nb_view_t *v, size_t bytes, bool in, bool out, void **engine_ptr)
{
    v->pack = malloc(bytes > 0 ? bytes : 1);
    int rc = NULL == v->pack ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    if (MPI_SUCCESS == rc && in) {
        rc = view_copy(v, true);
    }
    v->unpack = out;
    *engine_ptr = v->pack;
    return rc;
}

static int view_open(nb_view_t *v, void *buf, int count, struct ompi_datatype_t *dt, size_t bytes,
                     bool in, bool out, void **engine_ptr)
{
    const char *start;
    memset(v, 0, sizeof(*v));
    if (mca_coll_gpu_contiguous_run(buf, count, dt, &start)) {
        *engine_ptr = (void *) start;
        return MPI_SUCCESS;
    }
    int rc = MPI_SUCCESS;
    v->host = buf;
    v->count = count;
    v->dt = dt;
    if (mca_coll_gpu_on_device(buf)) { /* packing runs on the CPU */
        rc = mca_coll_gpu_mirror_in(&v->mir, buf, (size_t) count, dt, &v->host);
    }
    return MPI_SUCCESS == rc ? view_pack(v, bytes, in, out, engine_ptr) : rc;
}

/* An MPI_Ialltoallw side whose blocks have gaps (n blocks, @p bytes in all): the span of
 * the blocks mirrored on the host where it is device memory, every block packed. */
static int view_open_w(nb_view_t *v, void *buf, const int *counts, const int *displs,
                       struct ompi_datatype_t *const *types, int n, size_t bytes, bool in, bool out,
                       void **engine_ptr)
{
    memset(v, 0, sizeof(*v));
    v->host = buf;
    v->wcounts = counts;
    v->wdispls = displs;
    v->wdts = types;
    v->wn = n;
    int rc = MPI_SUCCESS;
    if (mca_coll_gpu_on_device(buf)) {
        ptrdiff_t lo, hi;
        void *h = NULL;
        mca_coll_gpu_w_bytes(counts, displs, NULL, types, n, &lo, &hi);
        rc = mca_coll_gpu_mirror_in(&v->mir, (char *) buf + lo, (size_t) (hi - lo), MPI_BYTE, &h);
        v->host = (char *) h - lo;
    }
    return MPI_SUCCESS == rc ? view_pack(v, bytes, in, out, engine_ptr) : rc;
}

static int view_close(nb_view_t *v, int rc)
{
    if (NULL == v->pack) { /* the user's run, or a view that failed before packing */
        mca_coll_gpu_mirror_drop(&v->mir);
        return rc;
    }
    if (MPI_SUCCESS == rc && v->unpack) {
        rc = view_copy(v, false);
    }
    free(v->pack);
    v->pack = NULL;
    if (v->unpack) {
        return mca_coll_gpu_mirror_out(&v->mir, rc);
    }
    mca_coll_gpu_mirror_drop(&v->mir);
    return rc;
}

/* ---- the worker ---- */

/* The v-forms' arrays, in the request's counts and offs allocation of 4 x size entries
 * each: side @p i's blocks (@p round 0), and room for one round's of them (1). */
static size_t *v_bytes(const mca_coll_gpu_request_t *r, int i, int round)
{
    return r->counts + (size_t) (2 * i + round) * (size_t) ompi_comm_size(r->m->comm);
}

static ptrdiff_t *v_offs(const mca_coll_gpu_request_t *r, int i, int round)
{
    return r->offs + (size_t) (2 * i + round) * (size_t) ompi_comm_size(r->m->comm);
}

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
        opal_output_verbose(10, c->output,
                            "coll/gpu: %s on %s: the largest block (%llu bytes) passes "
                            "coll_gpu_gather_scratch_bytes / ranks (%zu): %llu rounds",
                            nb_names[r->kind], r->m->comm->c_name, (unsigned long long) maxb, chunk,
                            (unsigned long long) ((maxb + chunk - 1) / chunk));
    }
    for (size_t off = 0; CGPU_OK == st && off < maxb; off += chunk) {
        const size_t mb = maxb - off < chunk ? (size_t) maxb - off : chunk;
        const size_t one = r->bytes > off ? r->bytes - off : 0;
        void *one_buf = NULL != r->s && one > 0 ? (char *) r->s + off : (void *) r->s;
        cgpu_blocks_t rounds[2];
        const cgpu_blocks_t *b0 =
            v_round(&r->vb[0], n, off, mb, v_bytes(r, 0, 1), v_offs(r, 0, 1), &rounds[0]);
        const cgpu_blocks_t *b1 =
            v_round(&r->vb[1], n, off, mb, v_bytes(r, 1, 1), v_offs(r, 1, 1), &rounds[1]);
        switch (r->kind) {
        case NB_GATHERV:
            st = cgpu_gatherv(ec, one_buf, one < mb ? one : mb, b1, mb, r->root);
            break;
        case NB_SCATTERV:
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
    case NB_ALLREDUCE:
        return cgpu_allreduce(ec, r->s, r->r, r->count, r->dt, r->op,
                              (cgpu_allreduce_alg_t) c->allreduce_algorithm);
    case NB_REDUCE:
        return cgpu_reduce(ec, r->s, r->r, r->count, r->dt, r->op, r->root);
    case NB_REDUCE_SCATTER_BLOCK:
        return cgpu_reduce_scatter_block(ec, r->s, r->r, r->count, r->dt, r->op);
    case NB_REDUCE_SCATTER:
        return cgpu_reduce_scatter(ec, r->s, r->r, r->counts, r->dt, r->op);
    case NB_BCAST:
        return cgpu_bcast(ec, r->r, r->bytes, r->root);
    case NB_ALLGATHER:
        return cgpu_allgather(ec, r->s, r->r, r->bytes);
    case NB_ALLTOALL:
        return cgpu_alltoall(ec, r->s, r->r, r->bytes,
                             (cgpu_alltoall_alg_t) c->alltoall_algorithm);
    case NB_GATHER: /* s: this rank's block (NULL in place), r: the root's whole message */
        return cgpu_gather(ec, r->s, r->r, r->bytes, r->root);
    case NB_SCATTER:
        return cgpu_scatter(ec, r->r, (void *) r->s, r->bytes, r->root,
                            (cgpu_scatter_alg_t) c->scatter_algorithm);
    case NB_ALLGATHERV:
        return cgpu_allgatherv(ec, r->s, r->r, r->counts, r->offs);
    case NB_GATHERV:
    case NB_SCATTERV:
    case NB_ALLTOALLV:
    case NB_ALLTOALLW:
        return run_v(r);
    case NB_SCAN:
    case NB_EXSCAN:
        return cgpu_scan(ec, r->s, r->r, r->count, r->dt, r->op, NB_EXSCAN == r->kind,
                         (cgpu_scan_alg_t) c->scan_algorithm,
                         mca_coll_gpu_padded_max(cgpu_comm_size(ec)));
    }
    return CGPU_ERR_INVALID_ARG;
}

/* ---- the bootstrap of a worker's set-up: rounds run by the application's threads ---- */

static cgpu_status_t async_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    mca_coll_gpu_nbq_t *q = ctx;
    boot_job_t job = {.s = sbuf, .r = rbuf, .bytes = bytes, .rc = MPI_SUCCESS};
    atomic_init(&job.done, 0);
    memcpy((char *) rbuf + (size_t) q->bs.rank * bytes, sbuf, bytes);
    if (q->bs.size > 1) {
        pthread_mutex_lock(&pending_lock);
        q->job = &job;
        q->jnext = jobs;
        jobs = q;
        atomic_fetch_add(&njobs, 1);
        pthread_mutex_unlock(&pending_lock);
        /* the application's MPI_Test/MPI_Wait (our progress callback) move the round */
        while (0 == atomic_load_explicit(&job.done, memory_order_acquire)) {
            sched_yield();
        }
    }
    return MPI_SUCCESS == job.rc ? CGPU_OK : CGPU_ERR_BOOTSTRAP;
}

static cgpu_status_t async_barrier(void *ctx)
{
    mca_coll_gpu_nbq_t *q = ctx;
    char *tmp = calloc((size_t) q->bs.size, 1);
    if (NULL == tmp) {
        return CGPU_ERR_NO_MEMORY;
    }
    const char one = 1;
    cgpu_status_t st = async_allgather(ctx, &one, tmp, 1);
    free(tmp);
    return st;
}

/* Posts or tests one worker's round (progress callback, pending_lock held: nothing here may
 * make a progress call, which could come back to pending_lock): true when the round is
 * over. */
static bool job_step(mca_coll_gpu_nbq_t *q)
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
                                           MCA_PML_BASE_SEND_STANDARD, comm,
                                           &j->reqs[j->nreqs]));
                j->nreqs += MPI_SUCCESS == j->rc;
            }
        }
        if (MPI_SUCCESS != j->rc) {
            opal_output(0, "coll/gpu: comm %s: posting a set-up message failed (%d)",
                        comm->c_name, j->rc);
            /* what was posted still completes (the peers post theirs too) */
        }
    }
    int flag = 0;
    if (j->nreqs > 0) {
        /* complete, without a progress call of our own: this runs inside our progress
         * callback with pending_lock held, and ompi_request_test_all on requests not yet
         * complete calls opal_progress, whose other callbacks may post a collective that
         * comes back here (a communicator id agreement of MPI_Comm_dup posts an iallreduce:
         * nb_iallreduce, pending_add, the same lock; a self-deadlock in CI, session 41). The
         * application's MPI calls progress the messages. */
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

/* Moves every bootstrap round in flight (pending_lock held). */
static void jobs_progress(void)
{
    for (mca_coll_gpu_nbq_t **pp = &jobs; NULL != *pp;) {
        mca_coll_gpu_nbq_t *q = *pp;
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

/* A worker (or, past the cap, the posting thread) runs one queued call. */
static void run_one(mca_coll_gpu_request_t *r, const cgpu_bootstrap_t *bs)
{
    mca_coll_gpu_module_t *m = r->m;
    if (r->create) {
        /* on the device the posting thread had (the blocking path's choice), unless the
         * buffer is device memory, whose device mca_coll_gpu_create takes */
        if (r->post_device >= 0 && r->post_device != cgpu_engine_current_device()) {
            (void) cgpu_engine_set_device(r->post_device);
        }
        mca_coll_gpu_create(m, r->create_buf, bs);
    }
    if (CGPU_MODULE_READY == __atomic_load_n(&m->state, __ATOMIC_ACQUIRE)) {
        r->st = run_engine(r);
        atomic_fetch_add_explicit(&m->engine_calls, 1, memory_order_relaxed);
    } else {
        /* the set-up this call was queued behind failed on some rank (the same on all) */
        r->st = CGPU_ERR_STATE;
        opal_output(0, "coll/gpu: %s on %s: the engine communicator could not be set up (see "
                       "coll_gpu_verbose 10); this call fails, later ones take the staged path",
                    nb_names[r->kind], m->comm->c_name);
    }
    /* the communicator's count first: a caller that saw its request complete and then
     * makes a blocking call on the communicator finds nothing left to wait for */
    atomic_fetch_add_explicit(&m->nb_done, 1, memory_order_release);
    atomic_store_explicit(&r->done, 1, memory_order_release);
}

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
        run_one(r, &q->bs);
    }
}

/* The communicator's worker, started at its first non-blocking engine call; NULL past
 * the cap or when a thread cannot be made (the call then runs at its post). */
static mca_coll_gpu_nbq_t *worker_of(mca_coll_gpu_module_t *m)
{
    mca_coll_gpu_nbq_t *q = __atomic_load_n(&m->nbq, __ATOMIC_ACQUIRE);
    if (NULL != q) {
        return q;
    }
    pthread_mutex_lock(&create_lock);
    q = m->nbq;
    if (NULL == q && atomic_load(&nworkers) < mca_coll_gpu_component.nb_max_workers) {
        q = calloc(1, sizeof(*q));
        if (NULL != q) {
            pthread_mutex_init(&q->lock, NULL);
            pthread_cond_init(&q->cv, NULL);
            q->m = m;
            q->bs = m->bootstrap; /* rank, size, context id; its exchanges are ours */
            q->bs.ctx = q;
            q->bs.allgather = async_allgather;
            q->bs.barrier = async_barrier;
            if (0 != pthread_create(&q->thread, NULL, worker_main, q)) {
                pthread_mutex_destroy(&q->lock);
                pthread_cond_destroy(&q->cv);
                free(q);
                q = NULL;
            } else {
                atomic_fetch_add(&nworkers, 1);
                __atomic_store_n(&m->nbq, q, __ATOMIC_RELEASE);
            }
        }
    }
    pthread_mutex_unlock(&create_lock);
    return q;
}

void mca_coll_gpu_nb_module_fini(mca_coll_gpu_module_t *m)
{
    mca_coll_gpu_nbq_t *q = m->nbq;
    if (NULL == q) {
        return;
    }
    m->nbq = NULL;
    pthread_mutex_lock(&q->lock);
    q->stop = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cv);
    free(q);
    atomic_fetch_sub(&nworkers, 1);
}

void mca_coll_gpu_nb_drain(mca_coll_gpu_module_t *m)
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
            rc = mca_coll_gpu_engine_rc(r->st, nb_names[r->kind], r->m->comm);
        }
        for (int i = 0; i < 2; ++i) {
            rc = view_close(&r->v[i], rc);
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
        request_destroy(r);
        return;
    }
    r->super.super.req_status.MPI_ERROR = rc;
    ompi_request_complete(&r->super.super, true);
}

static int nb_progress(void)
{
    if (0 == atomic_load_explicit(&npending, memory_order_relaxed) &&
        0 == atomic_load_explicit(&njobs, memory_order_relaxed)) {
        return 0;
    }
    if (0 != pthread_mutex_trylock(&pending_lock)) {
        return 0; /* another thread is at it */
    }
    if (0 != atomic_load_explicit(&njobs, memory_order_relaxed)) {
        jobs_progress();
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
    pthread_mutex_unlock(&pending_lock);
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

static void persist_reap(void);

void mca_coll_gpu_nb_close(void)
{
    if (progress_registered) {
        (void) opal_progress_unregister(nb_progress);
        progress_registered = false;
    }
    persist_reap();
}

/* ---- posting ---- */

/* A post that fails hands back MPI_REQUEST_NULL, so a program that waits on it anyway (its
 * error handler returned) waits for nothing instead of reading an unset handle. */
static int post_failed(ompi_request_t **request, int rc)
{
    *request = &ompi_request_null.request;
    return rc;
}

/* Queue an engine call (or run it now when no worker can be had). */
static int engine_post(mca_coll_gpu_request_t *r, ompi_request_t **request)
{
    mca_coll_gpu_module_t *m = r->m;
    mca_coll_gpu_nbq_t *q = worker_of(m);
    if (NULL == q) {
        /* past the worker cap: running the call here would block the post, and a blocking
         * post deadlocks ranks that post on two communicators in different orders; fail it */
        opal_output(0, "coll/gpu: %s on %s: no worker thread for non-blocking collectives "
                       "(%d running, coll_gpu_nb_max_workers = %d): the call fails; free "
                       "communicators that posted non-blocking collectives, or raise the cap",
                    nb_names[r->kind], m->comm->c_name, atomic_load(&nworkers),
                    mca_coll_gpu_component.nb_max_workers);
        if (r->create) { /* nothing was set up: a later call may try again */
            __atomic_store_n(&m->state, CGPU_MODULE_UNINIT, __ATOMIC_RELEASE);
        }
        for (int i = 0; i < 2; ++i) {
            (void) view_close(&r->v[i], MPI_ERR_OTHER);
        }
        free(r->scratch);
        r->scratch = NULL;
        request_destroy(r);
        return post_failed(request, MPI_ERR_OTHER);
    } else {
        atomic_fetch_add_explicit(&m->nb_posted, 1, memory_order_relaxed);
        r->qnext = NULL;
        pthread_mutex_lock(&q->lock);
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
    pending_add(r);
    *request = &r->super.super;
    if (cgpu_thread_one_cpu()) {
        /* the worker shares this core (Open MPI's default binding): hand it the core now so
         * that it launches the kernel before the application computes; without this the
         * launch waited for the caller's MPI_Wait, and osu_iallreduce showed no overlap */
        sched_yield();
    }
    return MPI_SUCCESS;
}

/* A view failed locally: the engine still runs (on scratch) so no peer waits forever,
 * and the error comes back with the request. */
static bool use_scratch(mca_coll_gpu_request_t *r, size_t bytes)
{
    r->scratch = calloc(1, bytes > 0 ? bytes : 1);
    return NULL != r->scratch;
}

/* Whether a call the engine could run takes the engine path: a function of the module's
 * state, which every rank changes in the same call (decision 2). The first such call on a
 * communicator queues the engine communicator's set-up ahead of itself. */
static bool plan_engine(mca_coll_gpu_module_t *m, bool *create)
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
    int spans = __atomic_load_n(&m->spans_nodes, __ATOMIC_RELAXED);
    if (spans < 0) { /* a function of the communicator alone: any thread may fill it in */
        spans = !mca_coll_gpu_one_node(m->comm);
        __atomic_store_n(&m->spans_nodes, spans, __ATOMIC_RELAXED);
    }
    if (spans) {
        /* a set-up across nodes needs collectives of the previous module, which a post may
         * not wait for: the staged path until a blocking call sets the communicator up (the
         * state stays UNINIT, so that call still does) */
        return false;
    }
    __atomic_store_n(&m->state, CGPU_MODULE_CREATING, __ATOMIC_RELEASE);
    *create = true;
    return true;
}

/* A set-up planned for a request that is not posted after all: a later call plans it
 * again (the state would otherwise stay CREATING, and no call would create it). */
static void unplan(mca_coll_gpu_module_t *m, bool create)
{
    if (create) {
        __atomic_store_n(&m->state, CGPU_MODULE_UNINIT, __ATOMIC_RELEASE);
    }
}

/* A new engine request, the set-up first when planned; NULL (no memory): not planned. */
static mca_coll_gpu_request_t *engine_request(mca_coll_gpu_module_t *m,
                                              struct ompi_communicator_t *comm, bool create,
                                              const void *buf)
{
    mca_coll_gpu_request_t *r = request_new(m, comm, true);
    if (NULL == r) {
        unplan(m, create);
        return NULL;
    }
    r->create = create;
    r->create_buf = buf;
    r->post_device = create ? cgpu_engine_current_device() : -1;
    return r;
}

/* An engine request that cannot be posted (no memory for its scratch): freed, its set-up
 * no longer planned */
static int engine_unpost(mca_coll_gpu_request_t *r, ompi_request_t **request)
{
    unplan(r->m, r->create);
    request_destroy(r);
    return post_failed(request, MPI_ERR_NO_MEM);
}

/* ---- staged path ---- */

static int staged_in(mca_coll_gpu_request_t *r, int i, const void *buf, size_t count,
                     struct ompi_datatype_t *dt, bool back, void **host)
{
    r->back[i] = back;
    return mca_coll_gpu_stage(&r->sb[i], buf, count, dt, host);
}

/* After the previous module's post: a request of ours around it (copies back at completion). */
static int staged_post(mca_coll_gpu_request_t *r, int rc, ompi_request_t **request,
                       const char *what)
{
    if (MPI_SUCCESS != rc) {
        opal_output(0, "coll/gpu: %s on %s: cannot stage device buffers through host memory (%d)",
                    what, r->m->comm->c_name, rc);
        for (int i = 0; i < 2; ++i) {
            (void) mca_coll_gpu_unstage(&r->sb[i], rc, false);
        }
        request_destroy(r);
        return post_failed(request, rc);
    }
    pending_add(r);
    *request = &r->super.super;
    return MPI_SUCCESS;
}

/* The staged call's start: counted, and NULL when it goes to the previous module as it is
 * (nested, or no device buffer). */
static mca_coll_gpu_request_t *staged_begin(mca_coll_gpu_module_t *m,
                                            struct ompi_communicator_t *comm, const void *a,
                                            const void *b)
{
    if (mca_coll_gpu_nested()) {
        return NULL;
    }
    atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    if (!mca_coll_gpu_on_device(a) && !mca_coll_gpu_on_device(b)) {
        return NULL;
    }
    return request_new(m, comm, false);
}

#define STAGED_NEW_OR_PASS(r, a, b, prevcall)                                                 \
    mca_coll_gpu_request_t *r = staged_begin(m, comm, (a), (b));                              \
    if (NULL == r) {                                                                          \
        if (!mca_coll_gpu_nested() && (mca_coll_gpu_on_device(a) || mca_coll_gpu_on_device(b))) \
            return post_failed(request, MPI_ERR_NO_MEM);                                      \
        return MCA_COLL_GPU_PREV(prevcall);                                                   \
    }

/* ---- entry points: the seven with an engine path ---- */

/* An engine reduction (allreduce, reduce, reduce_scatter(_block)) queued for the worker;
 * s NULL: in place. NB_REDUCE_SCATTER takes every rank's count in @p counts (malloc'd,
 * owned by the call from here on; NULL: no memory for them), the others NULL. */
static int post_reduction_counts(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                 enum nb_kind kind, bool create, const void *s, void *r,
                                 size_t count, cgpu_dtype_t dt, cgpu_op_t eop, int root,
                                 size_t *counts, ompi_request_t **request)
{
    if (NB_REDUCE_SCATTER == kind && NULL == counts) {
        unplan(m, create);
        return post_failed(request, MPI_ERR_NO_MEM);
    }
    mca_coll_gpu_request_t *q = engine_request(m, comm, create, NULL != s ? s : r);
    if (NULL == q) {
        free(counts);
        return post_failed(request, MPI_ERR_NO_MEM);
    }
    q->counts = counts;
    q->kind = kind;
    q->s = s;
    q->r = r;
    q->count = count;
    q->dt = dt;
    q->op = eop;
    q->root = root;
    return engine_post(q, request);
}

static int post_reduction(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                          enum nb_kind kind, bool create, const void *s, void *r, size_t count,
                          cgpu_dtype_t dt, cgpu_op_t eop, int root, ompi_request_t **request)
{
    return post_reduction_counts(m, comm, kind, create, s, r, count, dt, eop, root, NULL,
                                 request);
}

static int nb_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    /* Open MPI agrees on a new communicator's id with 1-2 int MAX/MIN Iallreduces on the
     * parent, posted from its progress loop by whichever thread progresses, possibly one
     * inside a call of the previous module (where plan_engine declines): the path of such
     * a call must not depend on that, so calls of this shape always take the previous
     * module (host buffers: directly; device buffers: staged), and never put an engine
     * communicator (GPU memory, on whatever device is current) behind every parent */
    const bool cid_shape =
        count <= 2 && MPI_INT == dtype && (MPI_MAX == op || MPI_MIN == op);
    if (!cid_shape && mca_coll_gpu_allreduce_engine_ok(count, dtype, op, &dt, &eop) &&
        plan_engine(m, &create)) {
        return post_reduction(m, comm, NB_ALLREDUCE, create, MPI_IN_PLACE == sbuf ? rbuf : sbuf,
                              rbuf, (size_t) count, dt, eop, 0, request);
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                               m->prev.coll_iallreduce_module))
    void *hs = (void *) sbuf, *hr;
    int rc = staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallreduce(hs, hr, count, dtype, op, comm, &r->inner,
                                                       m->prev.coll_iallreduce_module));
    }
    return staged_post(r, rc, request, "MPI_Iallreduce");
}

static int nb_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    const bool is_root = ompi_comm_rank(comm) == root;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.reduce_algorithm && count > 0 &&
        mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop) &&
        plan_engine(m, &create)) {
        return post_reduction(m, comm, NB_REDUCE, create, MPI_IN_PLACE == sbuf ? NULL : sbuf,
                              is_root ? rbuf : NULL, (size_t) count, dt, eop, root, request);
    }
    STAGED_NEW_OR_PASS(r, sbuf, is_root ? rbuf : NULL,
                       m->prev.coll_ireduce(sbuf, rbuf, count, dtype, op, root, comm, request,
                                            m->prev.coll_ireduce_module))
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce(hs, hr, count, dtype, op, root, comm,
                                                    &r->inner, m->prev.coll_ireduce_module));
    }
    return staged_post(r, rc, request, "MPI_Ireduce");
}

/* Both reduce_scatter forms (with data): the engine (plan_engine) for what it reduces,
 * unless coll_gpu_reduce_scatter_algorithm is fallback */
static bool plan_reduce_scatter(mca_coll_gpu_module_t *m, struct ompi_datatype_t *dtype,
                                struct ompi_op_t *op, cgpu_dtype_t *dt, cgpu_op_t *eop,
                                bool *create)
{
    return CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.reduce_scatter_algorithm &&
           mca_coll_gpu_engine_reduction(dtype, op, dt, eop) && plan_engine(m, create);
}

static int nb_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                    struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm, ompi_request_t **request,
                                    mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (rcount > 0 && plan_reduce_scatter(m, dtype, op, &dt, &eop, &create)) {
        return post_reduction(m, comm, NB_REDUCE_SCATTER_BLOCK, create,
                              MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t) rcount, dt, eop,
                              0, request);
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ireduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm,
                                                          request,
                                                          m->prev.coll_ireduce_scatter_block_module))
    const size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    void *hs = (void *) sbuf, *hr;
    int rc = staged_in(r, 0, sbuf, total, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, MPI_IN_PLACE == sbuf ? total : (size_t) rcount, dtype, true,
                       &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter_block(
            hs, hr, rcount, dtype, op, comm, &r->inner, m->prev.coll_ireduce_scatter_block_module));
    }
    return staged_post(r, rc, request, "MPI_Ireduce_scatter_block");
}

static int nb_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                     struct ompi_communicator_t *comm, ompi_request_t **request,
                     mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.bcast_algorithm && count > 0 &&
        plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = engine_request(m, comm, create, buf);
        if (NULL == r) {
            return post_failed(request, MPI_ERR_NO_MEM);
        }
        size_t esize;
        ompi_datatype_type_size(dtype, &esize);
        const bool is_root = ompi_comm_rank(comm) == root;
        r->kind = NB_BCAST;
        r->bytes = (size_t) count * esize;
        r->root = root;
        r->rc = view_open(&r->v[0], buf, count, dtype, r->bytes, is_root, !is_root, &r->r);
        if (MPI_SUCCESS != r->rc) {
            if (!use_scratch(r, r->bytes)) {
                return engine_unpost(r, request);
            }
            r->r = r->scratch;
        }
        if (NULL != r->v[0].pack) {
            retain_types(r, dtype, NULL, NULL);
        }
        return engine_post(r, request);
    }
    STAGED_NEW_OR_PASS(r, buf, NULL,
                       m->prev.coll_ibcast(buf, count, dtype, root, comm, request,
                                           m->prev.coll_ibcast_module))
    void *h;
    int rc = staged_in(r, 0, buf, (size_t) count, dtype, ompi_comm_rank(comm) != root, &h);
    if (MPI_SUCCESS == rc) {
        retain_types(r, dtype, NULL, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ibcast(h, count, dtype, root, comm, &r->inner,
                                                   m->prev.coll_ibcast_module));
    }
    return staged_post(r, rc, request, "MPI_Ibcast");
}

static int nb_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const int n = ompi_comm_size(comm);
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.allgather_algorithm && rcount > 0 &&
        (in_place || scount >= 0) && plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = engine_request(m, comm, create, in_place ? rbuf : sbuf);
        if (NULL == r) {
            return post_failed(request, MPI_ERR_NO_MEM);
        }
        size_t rsize;
        ompi_datatype_type_size(rdt, &rsize);
        r->kind = NB_ALLGATHER;
        r->bytes = (size_t) rcount * rsize;
        void *s = NULL;
        r->rc = view_open(&r->v[1], rbuf, rcount * n, rdt, r->bytes * (size_t) n, in_place, true,
                          &r->r);
        if (MPI_SUCCESS == r->rc && !in_place) {
            r->rc = view_open(&r->v[0], (void *) sbuf, scount, sdt, r->bytes, true, false, &s);
        }
        r->s = s;
        if (MPI_SUCCESS != r->rc) {
            if (!use_scratch(r, r->bytes * (size_t) n)) {
                view_close(&r->v[0], MPI_ERR_NO_MEM);
                view_close(&r->v[1], MPI_ERR_NO_MEM);
                return engine_unpost(r, request);
            }
            r->s = NULL;
            r->r = r->scratch;
        }
        retain_types(r, sdt, rdt, NULL);
        return engine_post(r, request);
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_iallgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                               request, m->prev.coll_iallgather_module))
    void *hs, *hr;
    int rc = staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, (size_t) rcount * (size_t) n, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallgather(hs, scount, sdt, hr, rcount, rdt, comm,
                                                       &r->inner, m->prev.coll_iallgather_module));
    }
    return staged_post(r, rc, request, "MPI_Iallgather");
}

static int nb_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const int n = ompi_comm_size(comm);
    size_t bytes;
    if (mca_coll_gpu_alltoall_engine_ok(in_place ? rcount : scount, rcount, rdt, &bytes) &&
        plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = engine_request(m, comm, create, in_place ? rbuf : sbuf);
        if (NULL == r) {
            return post_failed(request, MPI_ERR_NO_MEM);
        }
        const size_t total = bytes * (size_t) n;
        r->kind = NB_ALLTOALL;
        r->bytes = bytes;
        void *s = NULL;
        r->rc = view_open(&r->v[1], rbuf, rcount * n, rdt, total, in_place, true, &r->r);
        if (MPI_SUCCESS == r->rc) {
            if (in_place) {
                s = r->r;
            } else {
                r->rc = view_open(&r->v[0], (void *) sbuf, scount * n, sdt, total, true, false,
                                  &s);
            }
        }
        r->s = s;
        if (MPI_SUCCESS != r->rc) {
            if (!use_scratch(r, total)) {
                view_close(&r->v[0], MPI_ERR_NO_MEM);
                view_close(&r->v[1], MPI_ERR_NO_MEM);
                return engine_unpost(r, request);
            }
            r->s = r->r = r->scratch;
        }
        retain_types(r, in_place ? NULL : sdt, rdt, NULL);
        return engine_post(r, request);
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ialltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm, request,
                                              m->prev.coll_ialltoall_module))
    void *hs, *hr;
    int rc = staged_in(r, 0, sbuf, in_place ? 0 : (size_t) scount * (size_t) n, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, (size_t) rcount * (size_t) n, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, in_place ? NULL : sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ialltoall(hs, scount, sdt, hr, rcount, rdt, comm,
                                                      &r->inner, m->prev.coll_ialltoall_module));
    }
    return staged_post(r, rc, request, "MPI_Ialltoall");
}

/* ---- gather, scatter, allgatherv: the engine when every rank can tell ---- */

/* MPI_Igather (gather) and MPI_Iscatter on the engine, decided as the blocking calls decide
 * (rooted() in coll_gpu_gather.c): the bytes per rank come from the root's count of the
 * whole message and everyone else's own block, which MPI requires to match. The root's
 * whole message is all_count x all_dt at all_buf, each rank's block one_count x one_dt at
 * one_buf (MPI_IN_PLACE at the root). false: the engine does not take the call (the same on
 * every rank); true: it was posted, *rc is the post's answer. */
static bool rooted_post(bool gather, const void *one_buf, int one_count,
                        struct ompi_datatype_t *one_dt, const void *all_buf, int all_count,
                        struct ompi_datatype_t *all_dt, int root, struct ompi_communicator_t *comm,
                        mca_coll_gpu_module_t *m, ompi_request_t **request, int *rc)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const int n = ompi_comm_size(comm);
    const bool is_root = ompi_comm_rank(comm) == root;
    const bool in_place = is_root && MPI_IN_PLACE == one_buf;
    const int count = is_root ? all_count : one_count;
    size_t es;
    ompi_datatype_type_size(is_root ? all_dt : one_dt, &es);
    const size_t bytes = count > 0 ? (size_t) count * es : 0;
    bool create;
    if (CGPU_ALLREDUCE_FALLBACK == (gather ? c->gather_algorithm : c->scatter_algorithm) ||
        0 == bytes || bytes > mca_coll_gpu_padded_max(n) || bytes * (size_t) n > (size_t) INT_MAX ||
        !plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r = engine_request(m, comm, create, is_root ? all_buf : one_buf);
    if (NULL == r) {
        *rc = post_failed(request, MPI_ERR_NO_MEM);
        return true;
    }
    r->kind = gather ? NB_GATHER : NB_SCATTER;
    r->bytes = bytes;
    r->root = root;
    void *one = NULL, *all = NULL;
    /* the root's own block disagreeing with its whole message is its error alone: it still
     * takes part (on scratch) so that no peer waits */
    r->rc = is_root && !in_place && one_count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS;
    if (MPI_SUCCESS == r->rc && is_root) { /* gather in place: the root's block packed too */
        r->rc = view_open(&r->v[1], (void *) all_buf, all_count * n, all_dt, bytes * (size_t) n,
                          !gather || in_place, gather, &all);
    }
    if (MPI_SUCCESS == r->rc && !in_place) { /* a scatter's block: gaps keep their bytes */
        r->rc =
            view_open(&r->v[0], (void *) one_buf, one_count, one_dt, bytes, gather, !gather, &one);
    }
    if (MPI_SUCCESS != r->rc) {
        if (!use_scratch(r, bytes * (size_t) (is_root ? n : 1))) {
            view_close(&r->v[0], MPI_ERR_NO_MEM);
            view_close(&r->v[1], MPI_ERR_NO_MEM);
            *rc = engine_unpost(r, request);
            return true;
        }
        one = is_root ? NULL : r->scratch;
        all = is_root ? r->scratch : NULL;
    }
    r->s = one;
    r->r = all;
    retain_types(r, in_place ? NULL : one_dt, is_root ? all_dt : NULL, NULL);
    *rc = engine_post(r, request);
    return true;
}

/* counts x dt at buf, block p at displs[p], as one view @p v over the blocks' span of
 * elements (the user's run, or packed on the host with the elements between the blocks
 * kept; @p in: the span is read, @p out: written back): block p is bytes[p] at offs[p] in
 * *base; *largest the largest block's bytes. */
static int span_view(nb_view_t *v, void *buf, const int *counts, const int *displs,
                     struct ompi_datatype_t *dt, int n, bool in, bool out, size_t *bytes,
                     ptrdiff_t *offs, size_t *largest, void **base)
{
    size_t es, total;
    if (!mca_coll_gpu_allgatherv_sizes(true, 0, counts, dt, n, &es, largest, &total)) {
        return MPI_ERR_COUNT;
    }
    ptrdiff_t lb, ext, lo, hi;
    ompi_datatype_get_extent(dt, &lb, &ext);
    mca_coll_gpu_allgatherv_layout(counts, displs, n, es, bytes, offs, &lo, &hi);
    if (hi - lo > INT_MAX) {
        return MPI_ERR_COUNT;
    }
    return view_open(v, (char *) buf + lo * ext, (int) (hi - lo), dt, (size_t) (hi - lo) * es, in,
                     out, base);
}

/* MPI_Iallgatherv on the engine, decided as the blocking call decides: every rank knows
 * every count. The receive side is one view over the blocks' whole span (packed on the host
 * when its elements have gaps, the bytes between blocks kept), block p at offs[p] in it. */
static bool allgatherv_post(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                            ompi_request_t **request, int *rc)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    size_t rsize, maxb, total;
    const bool valid = mca_coll_gpu_allgatherv_sizes(in_place, scount, rcounts, rdt, n, &rsize,
                                                     &maxb, &total);
    bool create;
    if (!valid || CGPU_ALLREDUCE_FALLBACK == c->allgather_algorithm || 0 == maxb ||
        maxb > mca_coll_gpu_padded_max(n) || !plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r = engine_request(m, comm, create, in_place ? rbuf : sbuf);
    if (NULL == r) {
        *rc = post_failed(request, MPI_ERR_NO_MEM);
        return true;
    }
    r->kind = NB_ALLGATHERV;
    r->counts = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * (size_t) n);
    if (NULL == r->counts) {
        *rc = engine_unpost(r, request);
        return true;
    }
    r->offs = (ptrdiff_t *) (r->counts + n);
    void *s = NULL, *rv = NULL;
    r->rc = span_view(&r->v[1], rbuf, rcounts, displs, rdt, n, true, true, r->counts, r->offs,
                      &maxb, &rv);
    if (MPI_SUCCESS == r->rc && !in_place) {
        size_t ssize;
        ompi_datatype_type_size(sdt, &ssize);
        r->rc =
            (size_t) scount * ssize != r->counts[me]
                ? MPI_ERR_TRUNCATE
                : view_open(&r->v[0], (void *) sbuf, scount, sdt, r->counts[me], true, false, &s);
    }
    if (MPI_SUCCESS != r->rc) { /* take part on zeroed scratch, blocks back to back */
        if (!use_scratch(r, total)) {
            view_close(&r->v[0], MPI_ERR_NO_MEM);
            view_close(&r->v[1], MPI_ERR_NO_MEM);
            *rc = engine_unpost(r, request);
            return true;
        }
        ptrdiff_t at = 0;
        for (int p = 0; p < n; ++p) {
            r->offs[p] = at;
            at += (ptrdiff_t) r->counts[p];
        }
        s = NULL;
        rv = r->scratch;
    }
    r->s = s;
    r->r = rv;
    retain_types(r, in_place ? NULL : sdt, rdt, NULL);
    *rc = engine_post(r, request);
    return true;
}

static int nb_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    int prc;
    if (allgatherv_post(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m, request, &prc)) {
        return prc;
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_iallgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
                                                comm, request, m->prev.coll_iallgatherv_module))
    void *hs, *hr;
    int rc = staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallgatherv(hs, scount, sdt, hr, rcounts, displs, rdt,
                                                        comm, &r->inner,
                                                        m->prev.coll_iallgatherv_module));
    }
    return staged_post(r, rc, request, "MPI_Iallgatherv");
}

static int nb_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdt, int root,
                      struct ompi_communicator_t *comm, ompi_request_t **request,
                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (rooted_post(true, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, m, request, &prc)) {
        return prc;
    }
    STAGED_NEW_OR_PASS(r, sbuf, is_root ? rbuf : NULL,
                       m->prev.coll_igather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                                            request, m->prev.coll_igather_module))
    void *hs, *hr = rbuf;
    int rc = staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = staged_in(r, 1, rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt, true,
                       &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_igather(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                                    &r->inner, m->prev.coll_igather_module));
    }
    return staged_post(r, rc, request, "MPI_Igather");
}

/* ---- the v-forms on the engine: igatherv, iscatterv, ialltoallv, ialltoallw ---- */

/* Side @p i of a v-form (span_view): its blocks in vb[i], its largest in vmax. */
static int v_side(mca_coll_gpu_request_t *r, int i, void *buf, const int *counts, const int *displs,
                  struct ompi_datatype_t *dt, bool in, bool out)
{
    size_t largest = 0;
    void *base = NULL;
    r->vb[i] = (cgpu_blocks_t){.bytes = v_bytes(r, i, 0), .offs = v_offs(r, i, 0)};
    int rc = span_view(&r->v[i], buf, counts, displs, dt, ompi_comm_size(r->m->comm), in, out,
                       v_bytes(r, i, 0), v_offs(r, i, 0), &largest, &base);
    r->vb[i].base = base;
    r->vmax = largest > r->vmax ? largest : r->vmax;
    return rc;
}

/* Side @p i of an MPI_Ialltoallw (mca_coll_gpu_a2a_blocks' layout). Where every block is a
 * gap-free run the engine reads or writes the user's buffer, else every block is packed on
 * the host, back to back (view_open_w). */
static int w_side(mca_coll_gpu_request_t *r, int i, const mca_coll_gpu_a2a_side_t *x, bool out)
{
    const int n = ompi_comm_size(r->m->comm);
    size_t *bytes = v_bytes(r, i, 0), largest;
    ptrdiff_t *offs = v_offs(r, i, 0);
    void *base = (void *) x->buf;
    bool gaps;
    r->vb[i] = (cgpu_blocks_t){.base = base, .bytes = bytes, .offs = offs};
    int rc = mca_coll_gpu_a2a_blocks(x, n, bytes, offs, &largest, &gaps);
    r->vmax = largest > r->vmax ? largest : r->vmax;
    if (MPI_SUCCESS != rc || !gaps) {
        return rc;
    }
    ptrdiff_t at = 0;
    for (int p = 0; p < n; ++p) {
        offs[p] = at;
        at += (ptrdiff_t) bytes[p];
    }
    rc =
        view_open_w(&r->v[i], base, x->counts, x->displs, x->dts, n, (size_t) at, true, out, &base);
    r->vb[i].base = base;
    return rc;
}

/* A v-form's request, when the engine takes the call: as the blocking forms, unless the
 * algorithm is fallback (@p off) or the engine is not planned (the same on every rank).
 * false: not taken; true: *out is the request to fill in, or NULL with *rc the post's
 * answer (no memory). */
static bool v_begin(enum nb_kind kind, bool off, int root, const void *buf,
                    struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                    mca_coll_gpu_request_t **out, ompi_request_t **request, int *rc)
{
    bool create;
    *out = NULL;
    if (off || !plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r = engine_request(m, comm, create, buf);
    if (NULL == r) {
        *rc = post_failed(request, MPI_ERR_NO_MEM);
        return true;
    }
    r->kind = kind;
    r->root = root;
    r->s = NULL; /* no block of its own (yet), or a root in place */
    r->bytes = 0;
    const size_t n = (size_t) ompi_comm_size(comm);
    r->counts = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * 4 * n); /* v_bytes, v_offs */
    if (NULL == r->counts) {
        *rc = engine_unpost(r, request);
        return true;
    }
    r->offs = (ptrdiff_t *) (r->counts + 4 * n);
    *out = r;
    return true;
}

/* The v-form's post, its sides opened: a rank whose sides failed (r->rc) takes part with no
 * bytes, so that no peer waits, and gets its error back with the request. */
static int v_post(mca_coll_gpu_request_t *r, struct ompi_datatype_t *a, struct ompi_datatype_t *b,
                  ompi_request_t **request)
{
    if (MPI_SUCCESS != r->rc) {
        for (int i = 0; i < 2; ++i) { /* the sides v_side began: every block empty */
            if (NULL != r->vb[i].bytes) {
                const size_t n = (size_t) ompi_comm_size(r->m->comm);
                memset(v_bytes(r, i, 0), 0, sizeof(size_t) * n);
                memset(v_offs(r, i, 0), 0, sizeof(ptrdiff_t) * n);
                r->vb[i].base = (char *) r->counts; /* any host memory: no byte is moved */
            }
        }
        r->s = NULL;
        r->bytes = 0;
        r->vmax = 0;
    }
    retain_types(r, a, b, NULL);
    return engine_post(r, request);
}

/* MPI_Igatherv (gather) and MPI_Iscatterv on the engine: the root's whole message is
 * all_counts x all_dt at all_buf (block p at displs[p]), each rank's block one_count x one_dt
 * at one_buf (MPI_IN_PLACE at the root). */
static bool v_rooted_post(bool gather, const void *one_buf, int one_count,
                          struct ompi_datatype_t *one_dt, const void *all_buf,
                          const int *all_counts, const int *displs, struct ompi_datatype_t *all_dt,
                          int root, struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                          ompi_request_t **request, int *rc)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const bool is_root = ompi_comm_rank(comm) == root;
    const bool in_place = is_root && MPI_IN_PLACE == one_buf;
    mca_coll_gpu_request_t *r;
    if (!v_begin(gather ? NB_GATHERV : NB_SCATTERV,
                 CGPU_ALLREDUCE_FALLBACK == (gather ? c->gather_algorithm : c->scatter_algorithm),
                 root, is_root ? all_buf : one_buf, comm, m, &r, request, rc)) {
        return false;
    }
    if (NULL == r) {
        return true;
    }
    if (is_root) { /* a gatherv's receive side keeps the bytes between its blocks */
        r->rc = v_side(r, 1, (void *) all_buf, all_counts, displs, all_dt, true, gather);
    }
    if (MPI_SUCCESS == r->rc && !in_place) {
        size_t es;
        ompi_datatype_type_size(one_dt, &es);
        r->bytes = one_count > 0 ? (size_t) one_count * es : 0;
        r->vmax = r->bytes > r->vmax ? r->bytes : r->vmax;
        void *one = NULL;
        r->rc = one_count < 0 ? MPI_ERR_COUNT
                              : view_open(&r->v[0], (void *) one_buf, one_count, one_dt, r->bytes,
                                          gather, !gather, &one);
        r->s = one;
    }
    *rc = v_post(r, in_place ? NULL : one_dt, is_root ? all_dt : NULL, request);
    return true;
}

static int a2a_side(mca_coll_gpu_request_t *r, int i, const mca_coll_gpu_a2a_side_t *x, bool out)
{
    return NULL != x->dts ? w_side(r, i, x, out)
                          : v_side(r, i, (void *) x->buf, x->counts, x->displs, x->dt, true, out);
}

/* MPI_Ialltoallv and MPI_Ialltoallw (the same engine call, blocks of any sizes and types) */
static bool alltoall_post(enum nb_kind kind, const mca_coll_gpu_a2a_side_t *s,
                          const mca_coll_gpu_a2a_side_t *rv, struct ompi_communicator_t *comm,
                          mca_coll_gpu_module_t *m, ompi_request_t **request, int *rc)
{
    const bool in_place = MPI_IN_PLACE == s->buf; /* sent from the receive layout */
    mca_coll_gpu_request_t *r;
    if (!v_begin(kind, CGPU_ALLTOALL_FALLBACK == mca_coll_gpu_component.alltoall_algorithm, -1,
                 in_place ? rv->buf : s->buf, comm, m, &r, request, rc)) {
        return false;
    }
    if (NULL == r) {
        return true;
    }
    r->rc = a2a_side(r, 1, rv, true);
    if (MPI_SUCCESS == r->rc && !in_place) {
        r->rc = a2a_side(r, 0, s, false);
    }
    /* an alltoallw's types: the binding keeps the caller's arrays' (retain_datatypes_w) */
    *rc = v_post(r, in_place ? NULL : s->dt, rv->dt, request);
    return true;
}

/* ---- the others: staged only ---- */

static int nb_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                       int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (v_rooted_post(true, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm, m, request,
                      &prc)) {
        return prc;
    }
    STAGED_NEW_OR_PASS(r, sbuf, is_root ? rbuf : NULL,
                       m->prev.coll_igatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root,
                                             comm, request, m->prev.coll_igatherv_module))
    void *hs, *hr = rbuf;
    int rc = staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_igatherv(hs, scount, sdt, hr, rcounts, displs, rdt,
                                                     root, comm, &r->inner,
                                                     m->prev.coll_igatherv_module));
    }
    return staged_post(r, rc, request, "MPI_Igatherv");
}

static int nb_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdt, int root,
                       struct ompi_communicator_t *comm, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (rooted_post(false, rbuf, rcount, rdt, sbuf, scount, sdt, root, comm, m, request, &prc)) {
        return prc;
    }
    STAGED_NEW_OR_PASS(r, is_root ? sbuf : NULL, rbuf,
                       m->prev.coll_iscatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                                             request, m->prev.coll_iscatter_module))
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = staged_in(r, 0, sbuf, (size_t) scount * (size_t) ompi_comm_size(comm), sdt, false,
                       &hs);
    }
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, (size_t) rcount, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iscatter(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                                     &r->inner, m->prev.coll_iscatter_module));
    }
    return staged_post(r, rc, request, "MPI_Iscatter");
}

static int nb_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                        struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                        struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (v_rooted_post(false, rbuf, rcount, rdt, sbuf, scounts, displs, sdt, root, comm, m, request,
                      &prc)) {
        return prc;
    }
    STAGED_NEW_OR_PASS(r, is_root ? sbuf : NULL, rbuf,
                       m->prev.coll_iscatterv(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root,
                                              comm, request, m->prev.coll_iscatterv_module))
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = staged_in(r, 0, sbuf, mca_coll_gpu_v_span(scounts, displs, ompi_comm_size(comm)), sdt, false, &hs);
    }
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, (size_t) rcount, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iscatterv(hs, scounts, displs, sdt, hr, rcount, rdt,
                                                      root, comm, &r->inner,
                                                      m->prev.coll_iscatterv_module));
    }
    return staged_post(r, rc, request, "MPI_Iscatterv");
}

static int nb_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                         struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                         const int *rdispls, struct ompi_datatype_t *rdt,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const int n = ompi_comm_size(comm);
    int prc;
    const mca_coll_gpu_a2a_side_t sv = {sbuf, scounts, sdispls, sdt, NULL};
    const mca_coll_gpu_a2a_side_t rv = {rbuf, rcounts, rdispls, rdt, NULL};
    if (alltoall_post(NB_ALLTOALLV, &sv, &rv, comm, m, request, &prc)) {
        return prc;
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ialltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                               rdispls, rdt, comm, request,
                                               m->prev.coll_ialltoallv_module))
    void *hs, *hr;
    int rc = staged_in(r, 0, sbuf, MPI_IN_PLACE == sbuf ? 0 : mca_coll_gpu_v_span(scounts, sdispls, n), sdt,
                       false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, rdispls, n), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, MPI_IN_PLACE == sbuf ? NULL : sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ialltoallv(hs, scounts, sdispls, sdt, hr, rcounts,
                                                       rdispls, rdt, comm, &r->inner,
                                                       m->prev.coll_ialltoallv_module));
    }
    return staged_post(r, rc, request, "MPI_Ialltoallv");
}

static int nb_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                         struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                         const int *rdispls, struct ompi_datatype_t *const *rdts,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    int prc;
    const mca_coll_gpu_a2a_side_t sv = {sbuf, scounts, sdispls, NULL, sdts};
    const mca_coll_gpu_a2a_side_t rv = {rbuf, rcounts, rdispls, NULL, rdts};
    if (alltoall_post(NB_ALLTOALLW, &sv, &rv, comm, m, request, &prc)) {
        return prc;
    }
    const mca_coll_gpu_args_t a =
        mca_coll_gpu_alltoallw_args(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts);
    return mca_coll_gpu_nb_staged_call(m, comm, &a, mca_coll_gpu_alltoallw_spans, request);
}

static int nb_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, ompi_request_t **request,
                              mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    size_t total = 0;
    for (int i = 0; i < ompi_comm_size(comm); ++i) {
        total += (size_t) rcounts[i];
    }
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (total > 0 && plan_reduce_scatter(m, dtype, op, &dt, &eop, &create)) {
        return post_reduction_counts(m, comm, NB_REDUCE_SCATTER, create,
                                     MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, total, dt, eop, 0,
                                     mca_coll_gpu_engine_counts(rcounts, ompi_comm_size(comm)),
                                     request);
    }
    STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ireduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, request,
                                                    m->prev.coll_ireduce_scatter_module))
    const size_t mine = (size_t) rcounts[ompi_comm_rank(comm)];
    void *hs, *hr;
    int rc = staged_in(r, 0, sbuf, total, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, MPI_IN_PLACE == sbuf ? total : mine, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter(hs, hr, rcounts, dtype, op, comm,
                                                            &r->inner,
                                                            m->prev.coll_ireduce_scatter_module));
    }
    return staged_post(r, rc, request, "MPI_Ireduce_scatter");
}

static int nb_iscan_like(bool ex, const void *sbuf, void *rbuf, int count,
                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_scan_engine_ok(count, dtype, op, ompi_comm_size(comm), &dt, &eop) &&
        plan_engine(m, &create)) {
        return post_reduction(m, comm, ex ? NB_EXSCAN : NB_SCAN, create,
                              MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t) count, dt, eop, 0,
                              request);
    }
    mca_coll_base_module_iscan_fn_t fn = ex ? m->prev.coll_iexscan : m->prev.coll_iscan;
    mca_coll_base_module_t *pm = ex ? m->prev.coll_iexscan_module : m->prev.coll_iscan_module;
    op = mca_coll_gpu_prev_op(dtype, op); /* on every rank alike, host buffers too */
    STAGED_NEW_OR_PASS(r, sbuf, rbuf, fn(sbuf, rbuf, count, dtype, op, comm, request, pm))
    void *hs, *hr;
    int rc = staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        retain_types(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(fn(hs, hr, count, dtype, op, comm, &r->inner, pm));
    }
    return staged_post(r, rc, request, ex ? "MPI_Iexscan" : "MPI_Iscan");
}

static int nb_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                    struct ompi_op_t *op, struct ompi_communicator_t *comm,
                    ompi_request_t **request, mca_coll_base_module_t *module)
{
    return nb_iscan_like(false, sbuf, rbuf, count, dtype, op, comm, request, module);
}

static int nb_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    return nb_iscan_like(true, sbuf, rbuf, count, dtype, op, comm, request, module);
}

void mca_coll_gpu_nb_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
    s->coll_iallreduce = nb_iallreduce;
    s->coll_ireduce = nb_ireduce;
    s->coll_ireduce_scatter_block = nb_ireduce_scatter_block;
    s->coll_ibcast = nb_ibcast;
    s->coll_iallgather = nb_iallgather;
    s->coll_ialltoall = nb_ialltoall;
    s->coll_iallgatherv = nb_iallgatherv;
    s->coll_igather = nb_igather;
    s->coll_igatherv = nb_igatherv;
    s->coll_iscatter = nb_iscatter;
    s->coll_iscatterv = nb_iscatterv;
    s->coll_ialltoallv = nb_ialltoallv;
    s->coll_ialltoallw = nb_ialltoallw;
    s->coll_ireduce_scatter = nb_ireduce_scatter;
    s->coll_iscan = nb_iscan;
    s->coll_iexscan = nb_iexscan;
}

/* ---- staged calls described by their arguments (intercommunicators, neighborhoods) ---- */

int mca_coll_gpu_nb_staged_call(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                const mca_coll_gpu_args_t *a, mca_coll_gpu_spans_fn_t spans,
                                ompi_request_t **request)
{
    STAGED_NEW_OR_PASS(r, a->s, a->r, mca_coll_gpu_prev_post(m, a, comm, request))
    mca_coll_gpu_spans_t sp;
    mca_coll_gpu_args_t h = *a;
    void *hs, *hr;
    spans(a, comm, &sp);
    r->back[1] = sp.rback;
    int rc = mca_coll_gpu_stage_bytes(&r->sb[0], a->s, sp.slo, sp.shi, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage_bytes(&r->sb[1], a->r, sp.rlo, sp.rhi, &hr);
    }
    if (MPI_SUCCESS == rc) {
        h.s = hs;
        h.r = hr;
        /* only what this rank's call uses (the others need not be valid handles); the
         * type arrays of a w-call are the caller's, alive until completion */
        const bool s_used = sp.shi > sp.slo, r_used = sp.rhi > sp.rlo;
        retain_types(r, s_used ? a->sdt : NULL,
                     r_used || (s_used && NULL != a->op) ? a->rdt : NULL, /* a reduction's */
                     s_used || r_used ? a->op : NULL);
        rc = MCA_COLL_GPU_PREV(mca_coll_gpu_prev_post(m, &h, comm, &r->inner));
    }
    return staged_post(r, rc, request, mca_coll_gpu_kind_name(a->kind));
}

/* ---- persistent collectives (MPIX_*_init, Open MPI's pcollreq extension) ----
 *
 * Open MPI hands the persistent forms to the highest-priority module that provides them,
 * and libnbc's would run on device pointers. Ours keep the call's arguments; each
 * MPI_Start posts the call through this module's own non-blocking form (the engine, or the
 * staged path), and the persistent request completes with it, as a staged request does:
 * our progress callback sees the started call complete, frees it and completes the
 * persistent request, which stays for the next MPI_Start until MPI_Request_free. MPI keeps
 * the argument arrays unchanged until then; the datatypes and the op are retained here. */

/* persistent requests freed through a wrapper that reads them after our free returns
 * (ompi_coll_base_retain_*'s free_objs_callback): destroyed at the next init or at close */
static mca_coll_gpu_request_t *retired;

static void persist_reap(void)
{
    pthread_mutex_lock(&pending_lock);
    mca_coll_gpu_request_t *r = retired;
    retired = NULL;
    pthread_mutex_unlock(&pending_lock);
    while (NULL != r) {
        mca_coll_gpu_request_t *next = r->qnext;
        request_destroy(r);
        r = next;
    }
}

static void w_types(struct ompi_datatype_t *const *t, const int *counts, int n, bool retain)
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
        w_types(pa->sdts, pa->scs, pa->sn, false);
        w_types(pa->rdts, pa->rcs, pa->rn, false);
        free(pa);
    }
}

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
            opal_output(0,
                        "coll/gpu: MPI_Start on %s: the persistent collective request is "
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
        pending_add(r); /* finish() completes it with its started call */
    }
    return MPI_SUCCESS;
}

static int persist_free(ompi_request_t **req)
{
    mca_coll_gpu_request_t *r = (mca_coll_gpu_request_t *) *req;
    if (!REQUEST_COMPLETE(&r->super.super)) {
        opal_output(0,
                    "coll/gpu: MPI_Request_free on %s: the persistent collective request is "
                    "active (MPI forbids this); complete it first, then free it",
                    r->m->comm->c_name);
        return MPI_ERR_REQUEST;
    }
    *req = MPI_REQUEST_NULL;
    if (persist_free != r->super.super.req_free) { /* a wrapper reads it after us */
        pthread_mutex_lock(&pending_lock);
        r->qnext = retired;
        retired = r;
        pthread_mutex_unlock(&pending_lock);
        return MPI_SUCCESS;
    }
    request_destroy(r);
    return MPI_SUCCESS;
}

/* A new persistent request for the call @p a (copied); the types and op it names retained. */
static int persist_new(mca_coll_base_module_t *module, struct ompi_communicator_t *comm,
                       const mca_coll_gpu_args_t *a, ompi_request_t **request)
{
    persist_reap();
    mca_coll_gpu_module_t *m = M(module);
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
    r->super.super.req_cancel = request_cancel;
    r->super.super.req_mpi_object.comm = comm;
    r->engine = false;
    OBJ_RETAIN(m);
    r->m = m;
    retain_types(r, pa->sdt, pa->rdt, pa->op);
    w_types(pa->sdts, pa->scs, pa->sn, true);
    w_types(pa->rdts, pa->rcs, pa->rn, true);
    r->pa = pa;
    *request = &r->super.super;
    return MPI_SUCCESS;
}

/* The datatypes a rank's call names and may use: none for a buffer it does not pass (in
 * place), nor for a side a rooted call does not use on this rank: the root's whole
 * message elsewhere, and on an intercommunicator anything at MPI_PROC_NULL. */
#define SEND_DT(buf, dt) (MPI_IN_PLACE == (buf) ? NULL : (dt))
#define IS_ROOT mca_coll_gpu_is_root(comm, root)
#define MEMBER (!OMPI_COMM_IS_INTER(comm) || root >= 0) /* sends (gather) or receives */

/* one persistent init: a new request keeping the arguments INIT names (PARAMS: the coll
 * interface's list before the communicator) */
#define CGPU_PERSIST_INIT(name, PARAMS, INIT)                                                      \
    static int p_##name(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm,                     \
                        struct ompi_info_t *info, ompi_request_t **request,                        \
                        mca_coll_base_module_t *module)                                            \
    {                                                                                              \
        (void) info;                                                                               \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return persist_new(module, comm, &a, request);                                             \
    }
#define P_BLOCKS                                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,            \
     struct ompi_datatype_t *rdt)
#define A_BLOCKS(k)                                                                                \
    (.kind = (k), .s = sbuf, .sc = scount, .sdt = SEND_DT(sbuf, sdt), .r = rbuf, .rc = rcount,     \
     .rdt = rdt)
#define P_GATHERV_ALL                                                                              \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,    \
     const int *displs, struct ompi_datatype_t *rdt)
#define A_GATHERV_ALL(k)                                                                           \
    (.kind = (k), .s = sbuf, .sc = scount, .sdt = SEND_DT(sbuf, sdt), .r = rbuf, .rcs = rcounts,   \
     .rds = displs, .rdt = rdt)
#define P_REDUCTION                                                                                \
    (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt, struct ompi_op_t *op)
#define A_REDUCTION(k)                                                                             \
    (.kind = (k), .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op, .root = -1)
#define P_V                                                                                        \
    (const void *sbuf, const int *scounts, const int *sdispls, struct ompi_datatype_t *sdt,        \
     void *rbuf, const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdt)
#define A_V(k)                                                                                     \
    (.kind = (k), .s = sbuf, .scs = scounts, .sds = sdispls, .sdt = SEND_DT(sbuf, sdt), .r = rbuf, \
     .rcs = rcounts, .rds = rdispls, .rdt = rdt)
#define P_ROOTED                                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,            \
     struct ompi_datatype_t *rdt, int root)

CGPU_PERSIST_INIT(allgather, P_BLOCKS, A_BLOCKS(CGPU_K_ALLGATHER))
CGPU_PERSIST_INIT(alltoall, P_BLOCKS, A_BLOCKS(CGPU_K_ALLTOALL))
CGPU_PERSIST_INIT(nallgather, P_BLOCKS, A_BLOCKS(CGPU_K_NALLGATHER))
CGPU_PERSIST_INIT(nalltoall, P_BLOCKS, A_BLOCKS(CGPU_K_NALLTOALL))
CGPU_PERSIST_INIT(allgatherv, P_GATHERV_ALL, A_GATHERV_ALL(CGPU_K_ALLGATHERV))
CGPU_PERSIST_INIT(nallgatherv, P_GATHERV_ALL, A_GATHERV_ALL(CGPU_K_NALLGATHERV))
CGPU_PERSIST_INIT(allreduce, P_REDUCTION, A_REDUCTION(CGPU_K_ALLREDUCE))
CGPU_PERSIST_INIT(scan, P_REDUCTION, A_REDUCTION(CGPU_K_SCAN))
CGPU_PERSIST_INIT(exscan, P_REDUCTION, A_REDUCTION(CGPU_K_EXSCAN))
CGPU_PERSIST_INIT(reduce_scatter_block, P_REDUCTION, A_REDUCTION(CGPU_K_REDUCE_SCATTER_BLOCK))
CGPU_PERSIST_INIT(reduce,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op, int root),
                  (.kind = CGPU_K_REDUCE, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                   .root = root))
CGPU_PERSIST_INIT(reduce_scatter,
                  (const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_REDUCE_SCATTER, .s = sbuf, .r = rbuf, .rcs = rcounts, .rdt = dt,
                   .op = op))
CGPU_PERSIST_INIT(alltoallv, P_V, A_V(CGPU_K_ALLTOALLV))
CGPU_PERSIST_INIT(nalltoallv, P_V, A_V(CGPU_K_NALLTOALLV))
CGPU_PERSIST_INIT(nalltoallw,
                  (const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                   struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                   const MPI_Aint *rdispls, struct ompi_datatype_t *const *rdts),
                  (.kind = CGPU_K_NALLTOALLW, .s = sbuf, .scs = scounts, .sad = sdispls,
                   .sdts = sdts, .r = rbuf, .rcs = rcounts, .rad = rdispls, .rdts = rdts))
CGPU_PERSIST_INIT(alltoallw,
                  (const void *sbuf, const int *scounts, const int *sdispls,
                   struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                   const int *rdispls, struct ompi_datatype_t *const *rdts),
                  (.kind = CGPU_K_ALLTOALLW, .s = sbuf, .scs = scounts, .sds = sdispls,
                   .sdts = MPI_IN_PLACE == sbuf ? NULL : sdts, .r = rbuf, .rcs = rcounts,
                   .rds = rdispls, .rdts = rdts))
CGPU_PERSIST_INIT(bcast, (void *buf, int count, struct ompi_datatype_t *dt, int root),
                  (.kind = CGPU_K_BCAST, .r = buf, .rc = count, .rdt = dt, .root = root))
/* gather and scatter: the root's whole message, and each member's block */
CGPU_PERSIST_INIT(gather, P_ROOTED,
                  (.kind = CGPU_K_GATHER, .s = sbuf, .sc = scount,
                   .sdt = MPI_IN_PLACE != sbuf && MEMBER ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MPI_IN_PLACE != rbuf && IS_ROOT ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(scatter, P_ROOTED,
                  (.kind = CGPU_K_SCATTER, .s = sbuf, .sc = scount,
                   .sdt = MPI_IN_PLACE != sbuf && IS_ROOT ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MPI_IN_PLACE != rbuf && MEMBER ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(gatherv,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   const int *rcounts, const int *displs, struct ompi_datatype_t *rdt, int root),
                  (.kind = CGPU_K_GATHERV, .s = sbuf, .sc = scount,
                   .sdt = MEMBER ? SEND_DT(sbuf, sdt) : NULL, .r = rbuf, .rcs = rcounts,
                   .rds = displs, .rdt = IS_ROOT ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(scatterv,
                  (const void *sbuf, const int *scounts, const int *displs,
                   struct ompi_datatype_t *sdt, void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                   int root),
                  (.kind = CGPU_K_SCATTERV, .s = sbuf, .scs = scounts, .sds = displs,
                   .sdt = IS_ROOT ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MEMBER ? SEND_DT(rbuf, rdt) : NULL, .root = root))

void mca_coll_gpu_persist_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
    /* each persistent form where this module has the non-blocking one it starts */
#define CGPU_PERSIST(name, fn) s->coll_##name##_init = NULL != s->coll_i##name ? (fn) : NULL;
    CGPU_PERSIST(allgather, p_allgather)
    CGPU_PERSIST(allgatherv, p_allgatherv)
    CGPU_PERSIST(allreduce, p_allreduce)
    CGPU_PERSIST(alltoall, p_alltoall)
    CGPU_PERSIST(alltoallv, p_alltoallv)
    CGPU_PERSIST(alltoallw, p_alltoallw)
    CGPU_PERSIST(bcast, p_bcast)
    CGPU_PERSIST(exscan, p_exscan)
    CGPU_PERSIST(gather, p_gather)
    CGPU_PERSIST(gatherv, p_gatherv)
    CGPU_PERSIST(reduce, p_reduce)
    CGPU_PERSIST(reduce_scatter, p_reduce_scatter)
    CGPU_PERSIST(reduce_scatter_block, p_reduce_scatter_block)
    CGPU_PERSIST(scan, p_scan)
    CGPU_PERSIST(scatter, p_scatter)
    CGPU_PERSIST(scatterv, p_scatterv)
    CGPU_PERSIST(neighbor_allgather, p_nallgather)
    CGPU_PERSIST(neighbor_allgatherv, p_nallgatherv)
    CGPU_PERSIST(neighbor_alltoall, p_nalltoall)
    CGPU_PERSIST(neighbor_alltoallv, p_nalltoallv)
    CGPU_PERSIST(neighbor_alltoallw, p_nalltoallw)
#undef CGPU_PERSIST
}
