/*
 * coll/gpu: the machinery of the non-blocking and persistent collectives (private to the
 * glue), which the entry files (coll_gpu_<collective>.c) use to post their MPI_I* and
 * MPIX_*_init forms.
 *
 * A non-blocking call takes one of two paths, decided alike on every rank (decision 2):
 *  - the engine path (coll_gpu_worker.c): the post packs what is not one gap-free run
 *    (coll_gpu_nb_view.c) and queues the call on the communicator's worker thread, which
 *    runs it with the engine in posting order, after creating the engine communicator when
 *    the communicator has none yet (coll_gpu_nb_bootstrap.c);
 *  - the staged path (coll_gpu_nb_staged.c): the previous module's non-blocking collective
 *    on host copies of the device buffers.
 * Either way the caller gets a request of ours (coll_gpu_request.c), completed by our
 * progress callback in MPI_Test/MPI_Wait. A persistent request (coll_gpu_persist.c) keeps
 * a call's arguments and posts its non-blocking form at each MPI_Start.
 *
 * Dependency order: this machinery depends on coll_gpu.h alone, never on the entry files;
 * the entry files depend on it; coll_gpu_module.c fills the module's slots from
 * coll_gpu_entry.h.
 */
#ifndef MCA_COLL_GPU_NB_H
#define MCA_COLL_GPU_NB_H

#include <pthread.h>

#include "coll_gpu.h"

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"

BEGIN_C_DECLS

/* The non-blocking calls the engine path serves (the worker's switch). */
typedef enum mca_coll_gpu_nb_kind {
    CGPU_NB_ALLREDUCE,
    CGPU_NB_REDUCE,
    CGPU_NB_REDUCE_SCATTER_BLOCK,
    CGPU_NB_BCAST,
    CGPU_NB_ALLGATHER,
    CGPU_NB_ALLTOALL,
    CGPU_NB_REDUCE_SCATTER,
    CGPU_NB_GATHER,
    CGPU_NB_SCATTER,
    CGPU_NB_ALLGATHERV,
    CGPU_NB_GATHERV,
    CGPU_NB_SCATTERV,
    CGPU_NB_ALLTOALLV,
    CGPU_NB_SCAN,
    CGPU_NB_EXSCAN,
    CGPU_NB_ALLTOALLW
} mca_coll_gpu_nb_kind_t;

/* The MPI name of @p kind, for messages ("MPI_Iallreduce"). */
const char *mca_coll_gpu_nb_name(mca_coll_gpu_nb_kind_t kind);

/* ---- views: a user buffer as the engine sees it (coll_gpu_nb_view.c) ---- */

/* The user's own gap-free run, or packed host bytes (packed at the post, unpacked at
 * completion). */
typedef struct mca_coll_gpu_nb_view {
    void *host; /* the user's layout in host memory (user's or mirror) */
    int count;
    struct ompi_datatype_t *dt;
    mca_coll_gpu_mirror_t mir; /* the device span, when the layout had to be packed */
    char *pack;                /* packed bytes; NULL: the engine uses the user's run */
    bool unpack;               /* copy the result back at completion */
    /* an MPI_Ialltoallw side with gaps: block p (wcounts[p] x wdts[p] at host + wdispls[p]
     * bytes) packed after block p - 1; the caller's arrays, which MPI keeps until completion */
    const int *wcounts, *wdispls;
    struct ompi_datatype_t *const *wdts;
    int wn;
} mca_coll_gpu_nb_view_t;

/* Opens view @p v of count x dt at buf (@p bytes packed): *engine_ptr is the user's run when
 * the layout is one, else the packed bytes (filled from the user's layout when @p in; copied
 * back at the close when @p out). A device buffer with gaps is mirrored on the host first:
 * packing runs on the CPU. */
int mca_coll_gpu_nb_view_open(mca_coll_gpu_nb_view_t *v, void *buf, int count,
                              struct ompi_datatype_t *dt, size_t bytes, bool in, bool out,
                              void **engine_ptr);
/* An MPI_Ialltoallw side whose blocks have gaps (n blocks, @p bytes in all): the span of
 * the blocks mirrored on the host where it is device memory, every block packed. */
int mca_coll_gpu_nb_view_open_w(mca_coll_gpu_nb_view_t *v, void *buf, const int *counts,
                                const int *displs, struct ompi_datatype_t *const *types, int n,
                                size_t bytes, bool in, bool out, void **engine_ptr);
/* Closes a view: unpacks (when opened with out and @p rc is success) and frees; returns rc
 * or the copy back's error. */
int mca_coll_gpu_nb_view_close(mca_coll_gpu_nb_view_t *v, int rc);
/* counts x dt at buf, block p at displs[p], as one view @p v over the blocks' span of
 * elements (the user's run, or packed on the host with the elements between the blocks
 * kept; @p in: the span is read, @p out: written back): block p is bytes[p] at offs[p] in
 * *base; *largest the largest block's bytes. */
int mca_coll_gpu_nb_span_view(mca_coll_gpu_nb_view_t *v, void *buf, const int *counts,
                              const int *displs, struct ompi_datatype_t *dt, int n, bool in,
                              bool out, size_t *bytes, ptrdiff_t *offs, size_t *largest,
                              void **base);

/* ---- the request (coll_gpu_request.c) ---- */

/* Open MPI's MPI_I* bindings keep the call's datatypes and op alive by writing them into the
 * returned request past its ompi_request_t (ompi_coll_base_retain_*): our requests are
 * ompi_coll_base_nbc_request_t, as libnbc's are, so that room exists. */
typedef struct mca_coll_gpu_request_t {
    ompi_coll_base_nbc_request_t super;
    mca_coll_gpu_module_t *m; /* retained while the request lives */
    bool engine;              /* engine call (worker) or staged (inner request) */
    bool orphan;              /* freed by the application before completion (erroneous) */
    bool queued;              /* an engine call handed to a worker (counted in nb_posted) */
    int rc;                   /* local error found at the post, reported at completion */
    /* engine call */
    mca_coll_gpu_nb_kind_t kind;
    const void *s;
    void *r;
    size_t count, bytes;
    cgpu_dtype_t dt;
    cgpu_op_t op;
    int root;
    size_t *counts;  /* CGPU_NB_REDUCE_SCATTER: every rank's count (ours, freed with us);
                        CGPU_NB_ALLGATHERV: every rank's bytes */
    ptrdiff_t *offs; /* CGPU_NB_ALLGATHERV: block p at r + offs[p] (in counts' allocation) */
    /* the v-forms (CGPU_NB_GATHERV, _SCATTERV, _ALLTOALLV, _ALLTOALLW): vb[1] the root's
     * whole message or the receive layout, vb[0] alltoallv's (alltoallw's) send layout (bytes
     * NULL: the side takes no part); their arrays and room for one round's in counts'
     * allocation (mca_coll_gpu_nb_v_bytes, _v_offs); s and bytes the one block of a gatherv
     * or scatterv; vmax this rank's largest block */
    cgpu_blocks_t vb[2];
    size_t vmax;
    bool create;            /* the worker creates the engine communicator first */
    const void *create_buf; /* ... on this buffer's device */
    int post_device;        /* the posting thread's current device (-1: none) */
    mca_coll_gpu_nb_view_t v[2];
    char *scratch;
    _Atomic int done;
    cgpu_status_t st;
    /* staged call */
    ompi_request_t *inner;
    mca_coll_gpu_staged_buf_t sb[2]; /* staged host copies */
    bool back[2];                    /* ... copied back at completion */
    /* retained handles */
    struct ompi_datatype_t *dts[2];
    struct ompi_op_t *uop;
    struct mca_coll_gpu_args *pa; /* a persistent collective's call (inner: its started one) */
    struct mca_coll_gpu_request_t *qnext;         /* worker queue (persistent: retired list) */
    struct mca_coll_gpu_request_t *pnext, *pprev; /* pending list */
} mca_coll_gpu_request_t;

OBJ_CLASS_DECLARATION(mca_coll_gpu_request_t);

/* Guards the requests waiting for completion, the bootstrap rounds in flight
 * (coll_gpu_nb_bootstrap.c) and the retired persistent requests. The progress callback
 * holds it (taken with a trylock) while it moves them: nothing done under it may make a
 * progress call, which could come back to it. */
extern pthread_mutex_t mca_coll_gpu_nb_lock;

/* A new active request of ours on @p comm (the module retained); NULL without memory. */
mca_coll_gpu_request_t *mca_coll_gpu_request_new(mca_coll_gpu_module_t *m,
                                                 struct ompi_communicator_t *comm, bool engine);
/* Releases what the request retained and frees it. */
void mca_coll_gpu_request_destroy(mca_coll_gpu_request_t *r);
/* req_cancel of our requests: collectives cannot be cancelled (they complete normally). */
int mca_coll_gpu_request_cancel(ompi_request_t *req, int complete);
/* Retains the datatypes and the op (each may be NULL) until the request is destroyed. */
void mca_coll_gpu_request_retain(mca_coll_gpu_request_t *r, struct ompi_datatype_t *a,
                                 struct ompi_datatype_t *b, struct ompi_op_t *op);
/* Retains (or releases) the types of an alltoallw side's n blocks that have data. */
void mca_coll_gpu_request_w_types(struct ompi_datatype_t *const *t, const int *counts, int n,
                                  bool retain);
/* Hands the request to the progress callback, which completes it once it is ready. */
void mca_coll_gpu_nb_pending_add(mca_coll_gpu_request_t *r);
/* Destroys the request later (mca_coll_gpu_request_reap): for persistent requests freed
 * through a wrapper that reads them after our free returns. */
void mca_coll_gpu_request_retire(mca_coll_gpu_request_t *r);
void mca_coll_gpu_request_reap(void);
/* A post that fails hands back MPI_REQUEST_NULL, so a program that waits on it anyway (its
 * error handler returned) waits for nothing instead of reading an unset handle; returns rc. */
int mca_coll_gpu_nb_post_failed(ompi_request_t **request, int rc);

/* ---- the engine communicator's set-up by a worker (coll_gpu_nb_bootstrap.c) ---- */

/* Whether a call the engine could run takes the engine path: a function of the module's
 * state, which every rank changes in the same call (decision 2). The first such call on a
 * communicator plans the engine communicator's set-up ahead of itself (*create). */
bool mca_coll_gpu_nb_plan_engine(mca_coll_gpu_module_t *m, bool *create);
/* A set-up planned for a request that is not posted after all: a later call plans it again
 * (the state would otherwise stay CREATING, and no call would create it). */
void mca_coll_gpu_nb_unplan(mca_coll_gpu_module_t *m, bool create);

/* A worker's bootstrap: the engine's exchanges as rounds handed to the application's
 * threads, which move them point to point from our progress callback. */
typedef struct mca_coll_gpu_nb_boot {
    cgpu_bootstrap_t bs;
    mca_coll_gpu_module_t *m;           /* not retained: the worker's module */
    struct boot_job *job;               /* the round in flight, or NULL */
    struct mca_coll_gpu_nb_boot *jnext; /* list of bootstraps with a round in flight */
} mca_coll_gpu_nb_boot_t;
/* Fills @p b for module @p m (rank, size, context id of the module's bootstrap). */
void mca_coll_gpu_nb_boot_init(mca_coll_gpu_nb_boot_t *b, mca_coll_gpu_module_t *m);
/* Whether some bootstrap round is in flight (a relaxed read, for the progress callback). */
bool mca_coll_gpu_nb_boot_busy(void);
/* Posts or tests every round in flight (mca_coll_gpu_nb_lock held). */
void mca_coll_gpu_nb_boot_progress(void);

/* ---- posting to the worker (coll_gpu_worker.c) ---- */

/* A new engine request, the set-up first when planned (@p create, on @p buf's device);
 * NULL (no memory): not planned any more. */
mca_coll_gpu_request_t *mca_coll_gpu_nb_engine_request(mca_coll_gpu_module_t *m,
                                                       struct ompi_communicator_t *comm,
                                                       bool create, const void *buf);
/* Queues engine request @p r on the communicator's worker and hands it to the caller; past
 * the worker cap the post fails (running the call here would block the post). */
int mca_coll_gpu_nb_engine_post(mca_coll_gpu_request_t *r, ompi_request_t **request);
/* An engine request that cannot be posted (no memory for its scratch): freed, its set-up no
 * longer planned; returns MPI_ERR_NO_MEM. */
int mca_coll_gpu_nb_engine_unpost(mca_coll_gpu_request_t *r, ompi_request_t **request);
/* A view failed locally: the engine still runs (on @p bytes of zeroed scratch, r->scratch)
 * so that no peer waits forever, and the error comes back with the request. false: no
 * memory even for that. */
bool mca_coll_gpu_nb_use_scratch(mca_coll_gpu_request_t *r, size_t bytes);
/* An engine reduction (allreduce, reduce, reduce_scatter(_block), scan, exscan) queued for
 * the worker; s NULL: in place. CGPU_NB_REDUCE_SCATTER takes every rank's count in @p
 * counts (malloc'd, owned by the call from here on; NULL: no memory for them), the others
 * NULL (mca_coll_gpu_nb_post_reduction). */
int mca_coll_gpu_nb_post_reduction_counts(mca_coll_gpu_module_t *m,
                                          struct ompi_communicator_t *comm,
                                          mca_coll_gpu_nb_kind_t kind, bool create, const void *s,
                                          void *r, size_t count, cgpu_dtype_t dt, cgpu_op_t eop,
                                          int root, size_t *counts, ompi_request_t **request);
int mca_coll_gpu_nb_post_reduction(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                   mca_coll_gpu_nb_kind_t kind, bool create, const void *s, void *r,
                                   size_t count, cgpu_dtype_t dt, cgpu_op_t eop, int root,
                                   ompi_request_t **request);

/* The v-forms' arrays, in the request's counts and offs allocation of 4 x size entries
 * each: side @p i's blocks (@p round 0), and room for one round's of them (1). */
static inline size_t *mca_coll_gpu_nb_v_bytes(const mca_coll_gpu_request_t *r, int i, int round)
{
    return r->counts + (size_t) (2 * i + round) * (size_t) ompi_comm_size(r->m->comm);
}

static inline ptrdiff_t *mca_coll_gpu_nb_v_offs(const mca_coll_gpu_request_t *r, int i, int round)
{
    return r->offs + (size_t) (2 * i + round) * (size_t) ompi_comm_size(r->m->comm);
}

/* ---- the staged path (coll_gpu_nb_staged.c) ---- */

/* Stages side @p i of @p r (count x dt at buf) through host memory (*host: the copy, or buf
 * itself when it is host memory); @p back: copied back at completion. */
int mca_coll_gpu_nb_staged_in(mca_coll_gpu_request_t *r, int i, const void *buf, size_t count,
                              struct ompi_datatype_t *dt, bool back, void **host);
/* After the previous module's post (@p rc, r->inner): @p r handed to the caller, its copies
 * back at completion; on failure, a message (@p what: the call), the copies dropped and
 * MPI_REQUEST_NULL handed back. */
int mca_coll_gpu_nb_staged_post(mca_coll_gpu_request_t *r, int rc, ompi_request_t **request,
                                const char *what);
/* The staged call's start: counted, and NULL when it goes to the previous module as it is
 * (nested, or @p dev false: no device memory among the bytes the call addresses), or when no
 * request can be had. */
mca_coll_gpu_request_t *mca_coll_gpu_nb_staged_begin(mca_coll_gpu_module_t *m,
                                                     struct ompi_communicator_t *comm, bool dev);

/* In an entry point with m, comm and request in scope: declares r, the staged request of a
 * call whose addressed bytes hold device memory where @p dev (mca_coll_gpu_on_device_at of
 * each buffer the rank uses, not the buffer arguments: MPI_BOTTOM), or returns: the previous
 * module's post @p prevcall as it is (nested, no device memory), or MPI_ERR_NO_MEM. */
#define CGPU_NB_STAGED_NEW_OR_PASS(r, dev, prevcall)                                               \
    const bool r##_dev = (dev);                                                                    \
    mca_coll_gpu_request_t *r = mca_coll_gpu_nb_staged_begin(m, comm, r##_dev);                    \
    if (NULL == r) {                                                                               \
        if (!mca_coll_gpu_nested() && r##_dev)                                                     \
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);                           \
        return MCA_COLL_GPU_PREV(prevcall);                                                        \
    }

/* A staged non-blocking call: the spans @p spans gives of a's buffers copied to host
 * memory, the previous module's post run on the copies, the received span copied back when
 * its request completes; no device buffer (or nested): posted as it is. */
int mca_coll_gpu_nb_staged_call(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                const mca_coll_gpu_args_t *a, mca_coll_gpu_spans_fn_t spans,
                                ompi_request_t **request);

/* A collective's blocking entry point pfx_name and non-blocking one pfx_iname, both staged
 * over the spans spans_fn gives for the call's arguments a: PARAMS is the
 * coll interface's parameter list before the communicator, INIT the designated
 * initializers of a, each in parentheses. The two halves apart serve an entry file that
 * writes one of the forms itself. */
#define CGPU_UNPAREN(...) __VA_ARGS__
#define CGPU_STAGED_ENTRIES(pfx, name, PARAMS, INIT, spans_fn)                                     \
    CGPU_STAGED_BLOCKING_ENTRY(pfx, name, PARAMS, INIT, spans_fn)                                  \
    CGPU_STAGED_NB_ENTRY(pfx, name, PARAMS, INIT, spans_fn)
#define CGPU_STAGED_BLOCKING_ENTRY(pfx, name, PARAMS, INIT, spans_fn)                              \
    static int pfx##_##name(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm,                 \
                            mca_coll_base_module_t *module)                                        \
    {                                                                                              \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return mca_coll_gpu_staged_call((mca_coll_gpu_module_t *) module, comm, &a, spans_fn);     \
    }
#define CGPU_STAGED_NB_ENTRY(pfx, name, PARAMS, INIT, spans_fn)                                    \
    static int pfx##_i##name(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm,                \
                             ompi_request_t **request, mca_coll_base_module_t *module)             \
    {                                                                                              \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return mca_coll_gpu_nb_staged_call((mca_coll_gpu_module_t *) module, comm, &a, spans_fn,   \
                                           request);                                               \
    }

/* ---- persistent collectives (coll_gpu_persist.c) ---- */

/* A new persistent request for the call @p a (copied); the types and op it names retained.
 * Each MPI_Start posts the call through the module's own non-blocking form. */
int mca_coll_gpu_persist_new(mca_coll_base_module_t *module, struct ompi_communicator_t *comm,
                             const mca_coll_gpu_args_t *a, ompi_request_t **request);

/* The persistent init @p fn: a new request keeping the arguments INIT names (PARAMS: the
 * coll interface's list before the communicator, INIT: designated initializers of a
 * mca_coll_gpu_args_t). */
#define CGPU_PERSIST_INIT(fn, PARAMS, INIT)                                                        \
    int fn(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm, struct ompi_info_t *info,        \
           ompi_request_t **request, mca_coll_base_module_t *module)                               \
    {                                                                                              \
        (void) info;                                                                               \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return mca_coll_gpu_persist_new(module, comm, &a, request);                                \
    }

/* The datatypes a rank's persistent call names and may use, in CGPU_PERSIST_INIT's INIT:
 * none for a buffer it does not pass (in place), nor for a side a rooted call does not use
 * on this rank: the root's whole message elsewhere, and on an intercommunicator anything at
 * MPI_PROC_NULL (CGPU_MEMBER false). */
#define CGPU_SEND_DT(buf, dt) (MPI_IN_PLACE == (buf) ? NULL : (dt))
#define CGPU_IS_ROOT mca_coll_gpu_is_root(comm, root)
#define CGPU_MEMBER (!OMPI_COMM_IS_INTER(comm) || root >= 0) /* sends (gather) or receives */

END_C_DECLS

#endif /* MCA_COLL_GPU_NB_H */
