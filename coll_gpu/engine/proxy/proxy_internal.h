/*
 * coll/gpu engine: the inter-node proxy's private header (the public one is cgpu_proxy.h).
 *
 * The proxy is one progress thread per process that drives libfabric for every
 * communicator (btl_glue/cgpu_ofi.c is the only file that calls libfabric). Its files, one
 * concern each, share the process-wide state below:
 *   proxy_life.c      the process-wide reference: start and stop, what the start found
 *   proxy_thread.c    the progress thread, its submission queue and its stop-time drain
 *   proxy_endpoint.c  the provider's set-up and teardown (endpoint, FI_HMEM, chunk size)
 *   proxy_topo.c      where the thread runs and where bounce buffers live (hwloc)
 *   proxy_bounce.c    the pinned bounce buffers of staged operations
 *   proxy_group.c     groups (a communicator's view) and the registry of peers
 *   proxy_req.c       the application's side of a request: submit, test, wait, cancel
 *   proxy_sched.c     which pending request starts when (the window, "Bounds")
 *   proxy_op.c        an operation on the wire: tags, chunks, slots, staging, completions
 *   proxy_stubs.c     the public functions of a build without libfabric
 *
 * Threads. Application threads submit requests (cgpu_proxy_isend/irecv) to a queue and
 * read their completion with atomic loads (test/waitall). The progress thread does
 * everything else: it opens the provider, posts operations, reads the completion queue,
 * stages device memory through pinned bounce buffers, and closes everything when the last
 * reference goes. So libfabric is used by a single thread (FI_THREAD_DOMAIN) and no lock is
 * ever held while anybody waits for a peer. Each lock protects a short critical section:
 * the lifecycle (proxy_life.c), the submission queue and the thread's sleep
 * (proxy_thread.c), the peers and live groups (proxy_group.c).
 */
#ifndef CGPU_PROXY_INTERNAL_H
#define CGPU_PROXY_INTERNAL_H

#ifndef CGPU_LOG_SUBSYS
#define CGPU_LOG_SUBSYS CGPU_SUB_NET
#endif

#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cgpu_ofi.h"
#include "cgpu_engine.h"
#include "cgpu_proxy.h"

enum {
    PROXY_KIND_SEND = 0,
    PROXY_KIND_RECV = 1,
    PROXY_KIND_MASK = 1,
    PROXY_STAGED = 1 << 4,    /* goes through bounce buffers */
    PROXY_CUDA_COPY = 1 << 5, /* device (or managed) memory: staging copies are CUDA copies */
    PROXY_DEVICE = 1 << 6,    /* device memory handed to the provider directly (FI_HMEM) */
    PROXY_DEV_SHIFT = 8,      /* device ordinal + 1 above this bit */
};

_Static_assert(CGPU_PROXY_ADDR_BYTES == CGPU_OFI_NAME_BYTES,
               "an endpoint name is exchanged as the proxy's address");

/* A request's state while the application asked to cancel it (reads as in progress). */
#define PROXY_CANCEL_REQUESTED 2

enum {
    PROXY_PAIRS_MAX = 4, /* bounce pairs per direction */
};

/* Slot of an operation: one chunk in progress. */
enum { SLOT_FREE = 0, SLOT_COPYING, SLOT_READY, SLOT_POSTED };

struct proxy_op;

typedef struct proxy_slot {
    _Alignas(16) char ctx[CGPU_OFI_CTX_BYTES]; /* first: libfabric's context (FI_CONTEXT2) */
    struct proxy_op *op;
    int state;
    uint32_t chunk;
    size_t off;
    size_t len;
} proxy_slot_t;

/* Two pinned buffers (and their copy events) for one staged operation. */
typedef struct proxy_pair {
    void *buf[2];
    void *ev[2];
    bool registered;
    bool busy;
    size_t temp_bytes; /* > 0: an operation's own pair (past the pool), freed with it */
} proxy_pair_t;

/* An operation the progress thread works on (a started request). Owned by the thread. */
typedef struct proxy_op {
    proxy_slot_t slot[2];
    cgpu_proxy_req_t *req; /* NULL once abandoned (cancel the provider did not honour) */
    cgpu_proxy_group_t *group;
    int peer;
    uint32_t tag;
    int kind;
    char *buf;
    size_t bytes;
    uint32_t nchunks, next, done;
    int nslots;
    int busy; /* slots not free */
    cgpu_status_t status;
    bool in_use;
    bool counted; /* in its group's active count (until it ends or is abandoned) */
    bool cancelling;
    uint64_t cancel_ns;
    uint64_t addr;
    uint64_t tag_base;
    proxy_pair_t *pair;
    void *mr, *desc;
} proxy_op_t;

typedef struct proxy_peer {
    unsigned char name[CGPU_PROXY_ADDR_BYTES];
    uint64_t addr; /* progress thread only */
    bool inserted; /* progress thread only */
} proxy_peer_t;

struct cgpu_proxy_group {
    int rank;
    int size;
    uint32_t context_id;
    cgpu_prof_comm_t *prof;
    unsigned char *names; /* size x CGPU_PROXY_ADDR_BYTES */
    proxy_peer_t **peers; /* registry entry per rank, NULL until first used (peer_lock) */
    atomic_int inflight;  /* requests submitted and not ended */
    atomic_int destroying;
    int active[2];            /* progress thread: operations in progress per direction */
    unsigned waiting_pass[2]; /* progress thread: the scheduling pass one of them waited in */
    struct cgpu_proxy_group *next_live;
};

/* The process-wide proxy. Each part names what protects it. */
struct cgpu_proxy_state {
    /* life_lock (proxy_life.c) */
    int refs;
    cgpu_status_t failed; /* sticky start failure */
    pthread_t thread;
    /* sub_lock (proxy_thread.c) */
    cgpu_proxy_req_t *sub_head, *sub_tail;
    bool stop;
    bool sleeping;
    bool setup_done;
    cgpu_status_t setup_st;
    atomic_uint cancel_gen; /* bumped when a request or a group asks to be cancelled */
    /* set by the thread before setup_done, read-only afterwards */
    atomic_bool up;
    cgpu_ofi_t *ofi;
    unsigned char name[CGPU_PROXY_ADDR_BYTES];
    char provider[64];
    bool hmem;
    bool directed;
    size_t chunk;
    unsigned flags;
    int device; /* CUDA device of the process at the first acquire (-1: none) */
    int max_peers;
    int cap[2]; /* chunks in progress per direction at most */
    /* progress thread only */
    cgpu_proxy_req_t *pend_head, *pend_tail;
    proxy_op_t **ops; /* each allocated once and kept (libfabric holds its slots' contexts) */
    int nops, ops_cap;
    int active[2];
    int busy[2];
    proxy_pair_t pairs[2][PROXY_PAIRS_MAX];
    int npairs[2];   /* allocated (0 until the first staged operation) */
    void *stream[2]; /* CUDA copy streams, one per direction */
    hwloc_topology_t topo;
    hwloc_nodeset_t bounce_nodes; /* NULL: first touch */
    int bounce_node;
    /* peer_lock (proxy_group.c) */
    proxy_peer_t **peers;
    int npeers, peers_cap;
    cgpu_proxy_group_t *groups; /* live groups (double-destroy detection) */
};

/* The one proxy of the process (proxy_life.c). */
extern struct cgpu_proxy_state cgpu_proxy;

/* Process-wide counters behind cgpu_proxy_queue_depth, cgpu_proxy_ops_completed
 * (proxy_req.c) and cgpu_proxy_peers (proxy_group.c); reset at each start. */
extern atomic_uint_fast64_t cgpu_proxy_nqueued;
extern atomic_uint_fast64_t cgpu_proxy_ncompleted;
extern atomic_int cgpu_proxy_nconnected;

/* How long a cancel may take before it is abandoned (proxy_endpoint.c sets it at start). */
extern uint64_t cgpu_proxy_cancel_grace_ns;

static inline uint64_t cgpu_proxy_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static inline void cgpu_proxy_nap_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static inline int cgpu_proxy_req_kind(const cgpu_proxy_req_t *r)
{
    return r->kind & PROXY_KIND_MASK;
}

static inline const char *cgpu_proxy_kind_name(int kind)
{
    return PROXY_KIND_SEND == (kind & PROXY_KIND_MASK) ? "send" : "recv";
}

static inline const char *cgpu_proxy_kind_dir(int kind)
{
    return PROXY_KIND_SEND == (kind & PROXY_KIND_MASK) ? "to" : "from";
}

/* ---- proxy_thread.c ---- */

/** Start the progress thread and wait until it has opened the provider (or failed to). */
cgpu_status_t cgpu_proxy_thread_start(void);

/** Ask the progress thread to stop, and join it (it drains and closes everything first). */
void cgpu_proxy_thread_stop(void);

/** Wake the progress thread if it sleeps. */
void cgpu_proxy_wake(void);

/** Hand a filled-in request to the progress thread (the submission queue). */
void cgpu_proxy_enqueue(cgpu_proxy_req_t *req);

/* ---- proxy_endpoint.c (progress thread) ---- */

/** Open the provider and everything the thread needs; the failure is the start's. */
cgpu_status_t cgpu_proxy_setup(void);

/** Close what cgpu_proxy_setup opened (also after a partial set-up). */
void cgpu_proxy_teardown(void);

/* ---- proxy_topo.c (progress thread) ---- */

/** Pin the thread near the GPU and choose the bounce buffers' NUMA node (logs both). */
void cgpu_proxy_topology(void);

/** Free what cgpu_proxy_topology kept. */
void cgpu_proxy_topology_free(void);

/* ---- proxy_bounce.c (progress thread) ---- */

/** Allocate the bounce pool of direction @p k (at its first staged operation). */
cgpu_status_t cgpu_proxy_pairs_alloc(int k);

/** Free the bounce pool of direction @p k. */
void cgpu_proxy_pairs_free(int k);

/** A free pair of the pool of direction @p k, marked busy; NULL if all are taken. */
proxy_pair_t *cgpu_proxy_pair_get(int k);

/** A pair of its own for an operation of @p bytes that the pool cannot serve. */
proxy_pair_t *cgpu_proxy_pair_temp(size_t bytes);

/** Free a pair made by cgpu_proxy_pair_temp. */
void cgpu_proxy_pair_temp_free(proxy_pair_t *pp);

/* ---- proxy_group.c ---- */

/** Make @p peer of @p g a peer of this process, within coll_gpu_proxy_max_peers. */
cgpu_status_t cgpu_proxy_peer_reserve(cgpu_proxy_group_t *g, int peer);

/** Forget every peer (the proxy stopped). */
void cgpu_proxy_peers_free(void);

/* ---- proxy_req.c ---- */

/** End the application's view of a request with @p st (its last touch by the proxy). */
void cgpu_proxy_req_end(cgpu_proxy_req_t *r, cgpu_status_t st);

/* ---- proxy_sched.c (progress thread) ---- */

/** Start what the window allows from the pending list; true if anything changed. */
bool cgpu_proxy_schedule(void);

/** Act on the cancels asked by waitall (timeout, abort) or by a group being destroyed. */
void cgpu_proxy_scan_cancels(void);

/* ---- proxy_op.c (progress thread) ---- */

/** Start request @p r as an operation, with bounce pair @p pair when staged. */
bool cgpu_proxy_op_start(cgpu_proxy_req_t *r, proxy_pair_t *pair);

/** Move @p op as far as it goes now; true if anything changed. Finishes it. */
bool cgpu_proxy_op_advance(proxy_op_t *op);

/** Fail (or cancel) @p op: no new chunk starts and posted ones are cancelled. */
void cgpu_proxy_op_cancel(proxy_op_t *op, cgpu_status_t st);

/** Give @p op back (its pair, its registration, its counts), whatever its state. */
void cgpu_proxy_op_release(proxy_op_t *op);

/** Read the completion queue once; returns the number of completions handled. */
int cgpu_proxy_poll(void);

#endif /* CGPU_PROXY_INTERNAL_H */
