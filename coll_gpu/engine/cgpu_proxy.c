/*
 * coll/gpu engine: the inter-node proxy (cgpu_proxy.h), one per process.
 *
 * Threads. Application threads submit requests (cgpu_proxy_isend/irecv) to a queue and
 * read their completion with atomic loads (test/waitall). One progress thread per process
 * does everything else: it opens the provider (btl_glue/cgpu_ofi.c, the only file that
 * calls libfabric), posts operations, reads the completion queue, stages device memory
 * through pinned bounce buffers, and closes everything when the last reference goes. So
 * libfabric is used by a single thread (FI_THREAD_DOMAIN) and no lock is ever held while
 * anybody waits for a peer.
 *
 * Profiler. A request's CGPU_PROF_EVENT_PROXY_V1 event is started by the submitting thread
 * in the group's own context and stopped by the thread that sees the request complete
 * (cgpu_proxy_test/waitall, the application's), so the plugin is only ever called from
 * the communicator's threads and with the communicator's context; the progress thread
 * never calls it.
 *
 * Bounds. At most proxy_max_inflight chunks are in progress at once (half for sends, half
 * for receives: receives waiting for a peer cannot starve this process's sends, which the
 * peer's receives need); the rest wait in the queue in submission order. One exception, so
 * that communicators never wait on each other: a group with nothing of a direction in
 * progress may always start one operation of that direction, past the window and, when
 * staged, with bounce buffers of its own if the pool is taken; and a group's only operation
 * of a direction may always move one chunk at a time. Without
 * it, threads of two communicators that submit in different orders on two processes could
 * fill one process's window with one group's operations and the other's with the other
 * group's, each waiting for what the other's window holds back, until the timeout. So the
 * operations in progress are at most the window plus one per group and direction. Bounce
 * buffers come from a small pool per direction, allocated at the first staged operation on
 * the GPU's NUMA node. Peers are capped by proxy_max_peers. Each lock below protects a
 * short critical section and none is held across a wait.
 */
#include "cgpu_config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cgpu_engine.h"
#include "cgpu_proxy.h"

static atomic_uint_fast64_t proxy_queue_depth;
static atomic_uint_fast64_t proxy_completed;
static atomic_int proxy_npeers;
static unsigned proxy_test_flags;

uint64_t cgpu_proxy_queue_depth(void)
{
    return atomic_load_explicit(&proxy_queue_depth, memory_order_relaxed);
}

uint64_t cgpu_proxy_ops_completed(void)
{
    return atomic_load_explicit(&proxy_completed, memory_order_relaxed);
}

int cgpu_proxy_peers(void)
{
    return atomic_load_explicit(&proxy_npeers, memory_order_relaxed);
}

void cgpu_proxy_set_test_flags(unsigned flags)
{
    proxy_test_flags = flags;
}

#ifdef CGPU_HAVE_LIBFABRIC

#include <hwloc.h>

#include "cgpu_cuda.h"
#include "cgpu_ofi.h"

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
    PROXY_PAIRS_MAX = 4,     /* bounce pairs per direction */
    PROXY_CHUNK_MIN = 4096,  /* smallest chunk (bounce buffer) */
    PROXY_KEYS_WINDOW = 128, /* pending requests one scheduling pass looks at, at most */
    PROXY_IDLE_WAIT_MS = 20, /* an idle thread still progresses the provider this often */
    PROXY_POLL_BATCH = 16,
};
/* then a cancel is abandoned: 2 s, or a quarter of coll_gpu_ras_timeout when that is
 * shorter (at least 0.25 s), so a failing wait ends within the timeout plus the watchdog's
 * own granularity (set at start) */
static uint64_t proxy_cancel_grace_ns = 2000000000ull;
static const uint64_t proxy_idle_poll_ns = 5000000ull;       /* polling after the last op */
static const uint64_t proxy_slow_poll_ns = 1000000000ull;    /* waiting this long: 1 ms naps */

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

/* Lifecycle: life_lock. Submissions and the thread's sleep: sub_lock. Peers: peer_lock. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sub_cond = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

static struct proxy {
    /* life_lock */
    int refs;
    cgpu_status_t failed; /* sticky start failure */
    pthread_t thread;
    /* sub_lock */
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
    /* peer_lock */
    proxy_peer_t **peers;
    int npeers, peers_cap;
    cgpu_proxy_group_t *groups; /* live groups (double-destroy detection) */
} P = {.failed = CGPU_OK};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static void nap_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static inline int req_kind(const cgpu_proxy_req_t *r)
{
    return r->kind & PROXY_KIND_MASK;
}

static const char *kind_name(int kind)
{
    return PROXY_KIND_SEND == (kind & PROXY_KIND_MASK) ? "send" : "recv";
}

static const char *kind_dir(int kind)
{
    return PROXY_KIND_SEND == (kind & PROXY_KIND_MASK) ? "to" : "from";
}

/* Wake the progress thread if it sleeps. */
static void proxy_wake(void)
{
    pthread_mutex_lock(&sub_lock);
    if (P.sleeping) {
        pthread_cond_signal(&sub_cond);
    }
    pthread_mutex_unlock(&sub_lock);
}

/* ------------------------------------------------------------------------------------ */
/* Topology (hwloc): where the thread runs and where bounce buffers live                 */
/* ------------------------------------------------------------------------------------ */

static void proxy_topology(void)
{
    char busid[32] = "";
    char *near_str = NULL, *bind_str = NULL;
    hwloc_obj_t near = NULL;
    hwloc_bitmap_t cur = NULL;
    const char *bind_how = "left where the process is bound";

    P.bounce_node = -1;
    if (0 != hwloc_topology_init(&P.topo)) {
        P.topo = NULL;
        cgpu_log(CGPU_LOG_INFO, "proxy: hwloc_topology_init failed; thread left unbound");
        return;
    }
    (void) hwloc_topology_set_io_types_filter(P.topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (0 != hwloc_topology_load(P.topo)) {
        cgpu_log(CGPU_LOG_INFO, "proxy: hwloc_topology_load failed; thread left unbound");
        hwloc_topology_destroy(P.topo);
        P.topo = NULL;
        return;
    }
    const int nnuma = hwloc_get_nbobjs_by_type(P.topo, HWLOC_OBJ_NUMANODE);
    const int ncores = hwloc_get_nbobjs_by_type(P.topo, HWLOC_OBJ_CORE);
    const int npus = hwloc_get_nbobjs_by_type(P.topo, HWLOC_OBJ_PU);

    if (P.device >= 0 && CGPU_OK == cgpu_cuda_pci_bus_id(P.device, busid, (int) sizeof(busid))) {
        hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(P.topo, busid);
        if (NULL != pci) {
            near = hwloc_get_non_io_ancestor_obj(P.topo, pci);
        }
    }
    if (NULL != near && NULL != near->cpuset) {
        (void) hwloc_bitmap_list_asprintf(&near_str, near->cpuset);
        if (0 == hwloc_set_cpubind(P.topo, near->cpuset, HWLOC_CPUBIND_THREAD)) {
            bind_how = "pinned near the GPU";
        } else {
            bind_how = "not pinned (hwloc_set_cpubind refused), left where the process is bound";
        }
    }
    cur = hwloc_bitmap_alloc();
    if (NULL != cur && 0 == hwloc_get_cpubind(P.topo, cur, HWLOC_CPUBIND_THREAD)) {
        (void) hwloc_bitmap_list_asprintf(&bind_str, cur);
    }

    /* bounce buffers: the GPU's NUMA node, else the one the thread runs on (if only one) */
    hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
    if (NULL != nodes) {
        if (NULL != near && NULL != near->nodeset) {
            hwloc_bitmap_copy(nodes, near->nodeset);
        } else if (NULL != cur) {
            hwloc_cpuset_to_nodeset(P.topo, cur, nodes);
        }
        if (1 == hwloc_bitmap_weight(nodes)) {
            P.bounce_nodes = nodes;
            P.bounce_node = hwloc_bitmap_first(nodes);
        } else {
            hwloc_bitmap_free(nodes);
        }
    }
    char numa_str[48];
    if (P.bounce_node >= 0) {
        snprintf(numa_str, sizeof(numa_str), "NUMA node %d", P.bounce_node);
    } else {
        snprintf(numa_str, sizeof(numa_str), "first-touch memory (no single NUMA node)");
    }
    if (P.device >= 0) {
        cgpu_log(CGPU_LOG_INFO,
                 "proxy: topology: %d NUMA node(s), %d core(s), %d PU(s); GPU %d (%s) near "
                 "cpuset %s; progress thread %s (cpuset %s); bounce buffers on %s",
                 nnuma, ncores, npus, P.device, '\0' != busid[0] ? busid : "bus id unknown",
                 NULL != near_str ? near_str : "unknown", bind_how,
                 NULL != bind_str ? bind_str : "?", numa_str);
    } else {
        cgpu_log(CGPU_LOG_INFO,
                 "proxy: topology: %d NUMA node(s), %d core(s), %d PU(s); no usable GPU; "
                 "progress thread %s (cpuset %s); bounce buffers on %s",
                 nnuma, ncores, npus, bind_how, NULL != bind_str ? bind_str : "?", numa_str);
    }
    free(near_str);
    free(bind_str);
    hwloc_bitmap_free(cur);
}

static void *bounce_alloc(size_t bytes)
{
    void *p = NULL;
    if (NULL != P.topo && NULL != P.bounce_nodes) {
        p = hwloc_alloc_membind(P.topo, bytes, P.bounce_nodes, HWLOC_MEMBIND_BIND,
                                HWLOC_MEMBIND_BYNODESET);
    }
    if (NULL == p && NULL != P.topo) {
        p = hwloc_alloc(P.topo, bytes);
    }
    if (NULL == p && NULL == P.topo) {
        p = malloc(bytes);
    }
    return p;
}

static void bounce_free(void *p, size_t bytes)
{
    if (NULL == p) {
        return;
    }
    if (NULL != P.topo) {
        hwloc_free(P.topo, p, bytes);
    } else {
        free(p);
    }
}

static void pairs_free(int k)
{
    for (int i = 0; i < P.npairs[k]; ++i) {
        proxy_pair_t *pp = &P.pairs[k][i];
        for (int s = 0; s < 2; ++s) {
            if (NULL != pp->ev[s]) {
                cgpu_cuda_event_destroy(pp->ev[s]);
            }
            if (pp->registered) {
                cgpu_cuda_host_unregister(pp->buf[s]);
            }
            bounce_free(pp->buf[s], P.chunk);
        }
        memset(pp, 0, sizeof(*pp));
    }
    P.npairs[k] = 0;
}

/* The bounce pool of direction @p k, allocated at its first use. */
static cgpu_status_t pairs_alloc(int k)
{
    const int n = P.cap[k] < PROXY_PAIRS_MAX ? P.cap[k] : PROXY_PAIRS_MAX;
    const bool cuda = cgpu_cuda_available() && P.device >= 0;
    bool pinned = cuda;

    for (int i = 0; i < n; ++i) {
        proxy_pair_t *pp = &P.pairs[k][i];
        P.npairs[k] = i + 1;
        for (int s = 0; s < 2; ++s) {
            pp->buf[s] = bounce_alloc(P.chunk);
            if (NULL == pp->buf[s]) {
                cgpu_log(CGPU_LOG_WARN, "proxy: cannot allocate a %zu-byte bounce buffer", P.chunk);
                pairs_free(k);
                return CGPU_ERR_NO_MEMORY;
            }
        }
        if (cuda) {
            pp->registered = CGPU_OK == cgpu_cuda_host_register(pp->buf[0], P.chunk);
            if (pp->registered && CGPU_OK != cgpu_cuda_host_register(pp->buf[1], P.chunk)) {
                cgpu_cuda_host_unregister(pp->buf[0]);
                pp->registered = false;
            }
            pinned = pinned && pp->registered;
            if (CGPU_OK != cgpu_cuda_event_create(&pp->ev[0]) ||
                CGPU_OK != cgpu_cuda_event_create(&pp->ev[1])) {
                pairs_free(k);
                return CGPU_ERR_DEVICE;
            }
        }
    }
    char where[48] = "first-touch memory";
    if (P.bounce_node >= 0) {
        snprintf(where, sizeof(where), "NUMA node %d", P.bounce_node);
    }
    cgpu_log(CGPU_LOG_INFO, "proxy: bounce buffers for %ss: %d pair(s) of 2 x %zu bytes on %s%s",
             kind_name(k), n, P.chunk, where,
             cuda ? (pinned ? ", pinned" : ", NOT pinned (cudaHostRegister failed)") : "");
    return CGPU_OK;
}

static proxy_pair_t *pair_get(int k)
{
    for (int i = 0; i < P.npairs[k]; ++i) {
        if (!P.pairs[k][i].busy) {
            P.pairs[k][i].busy = true;
            return &P.pairs[k][i];
        }
    }
    return NULL;
}

static void pair_temp_free(proxy_pair_t *pp)
{
    for (int s = 0; s < 2; ++s) {
        if (NULL != pp->ev[s]) {
            cgpu_cuda_event_destroy(pp->ev[s]);
        }
        bounce_free(pp->buf[s], pp->temp_bytes);
    }
    free(pp);
}

/* A pair of its own for an operation the pool cannot serve (not pinned: staging copies of
 * device memory from it are slower, and correct). */
static proxy_pair_t *pair_temp(size_t bytes)
{
    proxy_pair_t *pp = calloc(1, sizeof(*pp));
    if (NULL == pp) {
        return NULL;
    }
    pp->temp_bytes = bytes < P.chunk ? (bytes > 0 ? bytes : 1) : P.chunk;
    pp->busy = true;
    const bool cuda = cgpu_cuda_available() && P.device >= 0;
    for (int s = 0; s < 2; ++s) {
        pp->buf[s] = bounce_alloc(pp->temp_bytes);
        if (NULL == pp->buf[s] || (cuda && CGPU_OK != cgpu_cuda_event_create(&pp->ev[s]))) {
            pair_temp_free(pp);
            return NULL;
        }
    }
    return pp;
}

/* ------------------------------------------------------------------------------------ */
/* Operations (progress thread)                                                          */
/* ------------------------------------------------------------------------------------ */

/*
 * The libfabric tag of chunk @p chunk. Layouts (most significant bits first):
 *   directed receive:    chunk:12 | context id:20 | tag:32
 *   no directed receive: chunk:12 | context id:12 | source rank:16 | tag:24
 * The chunk number makes every chunk of a message a distinct message, so chunks match
 * without relying on the provider's ordering. It wraps after 4096 chunks (16 GiB with the
 * default 4 MiB bounce buffers): a sender whose chunk sends complete before the receiver
 * matches them (buffered by the provider) would have to run 4096 chunks ahead for a chunk
 * to meet a later one's receive. 8 bits were not enough: on the GPU machine, the shm
 * provider (FI_HMEM on) let a 60000-byte-chunk sender run 256 chunks ahead, and chunk 257
 * landed in chunk 1's receive.
 */
#define PROXY_CHUNK_SHIFT 52
#define PROXY_CHUNK_MASK 0xfffu

static uint64_t tag_of(const proxy_op_t *op, uint32_t chunk)
{
    return op->tag_base | ((uint64_t) (chunk & PROXY_CHUNK_MASK) << PROXY_CHUNK_SHIFT);
}

/* End the application's view of a request (the thread may keep the op if abandoned). */
static void req_end(cgpu_proxy_req_t *r, cgpu_status_t st)
{
    cgpu_proxy_group_t *g = r->group;
    r->priv = NULL;
    atomic_fetch_sub_explicit(&proxy_queue_depth, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&proxy_completed, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&g->inflight, 1, memory_order_release);
    /* last touch: after this store the request belongs to its owner again */
    atomic_store_explicit(&r->state, (int) st, memory_order_release);
}

/* The operation no longer counts against its group (it ended, or was abandoned: its group
 * may be gone before the provider gives the slot back). */
static void op_uncount(proxy_op_t *op)
{
    if (op->counted) {
        op->counted = false;
        op->group->active[op->kind & PROXY_KIND_MASK]--;
    }
}

static void op_release(proxy_op_t *op)
{
    const int k = op->kind & PROXY_KIND_MASK;
    cgpu_ofi_dereg(op->mr);
    if (NULL != op->pair && op->pair->temp_bytes > 0) {
        pair_temp_free(op->pair);
    } else if (NULL != op->pair) {
        op->pair->busy = false;
    }
    op_uncount(op);
    P.active[k]--;
    memset(op, 0, sizeof(*op));
}

static void op_finish(proxy_op_t *op)
{
    if (NULL != op->req) {
        req_end(op->req, op->status);
    }
    op_release(op);
}

/* Fail (or cancel) @p op: no new chunk starts and posted ones are cancelled. */
static void op_cancel(proxy_op_t *op, cgpu_status_t st)
{
    const int k = op->kind & PROXY_KIND_MASK;
    if (CGPU_OK == op->status) {
        op->status = st;
    }
    if (op->cancelling) {
        return;
    }
    op->cancelling = true;
    op->cancel_ns = now_ns();
    for (int s = 0; s < op->nslots; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        if (SLOT_POSTED == sl->state) {
            cgpu_ofi_cancel(P.ofi, sl->ctx);
        } else if (SLOT_READY == sl->state) {
            sl->state = SLOT_FREE;
            op->busy--;
            P.busy[k]--;
        }
    }
}

static void op_error(proxy_op_t *op, cgpu_status_t st, const char *what)
{
    if (NULL != op->req && CGPU_OK == op->status) {
        cgpu_log(CGPU_LOG_WARN, "proxy: %s of %zu bytes %s rank %d of group %u failed: %s",
                 kind_name(op->kind), op->bytes, kind_dir(op->kind), op->peer,
                 op->group->context_id, what);
    }
    op_cancel(op, st);
}

/* Start a staging copy of slot @p s (send: user -> bounce; receive: bounce -> user). */
static cgpu_status_t slot_copy(proxy_op_t *op, int s)
{
    proxy_slot_t *sl = &op->slot[s];
    const int k = op->kind & PROXY_KIND_MASK;
    char *user = op->buf + sl->off;
    void *bounce = op->pair->buf[s];
    void *dst = PROXY_KIND_SEND == k ? bounce : (void *) user;
    const void *src = PROXY_KIND_SEND == k ? (const void *) user : bounce;

    if (0 == (op->kind & PROXY_CUDA_COPY) || NULL == op->pair->ev[s]) {
        memcpy(dst, src, sl->len);
        return CGPU_OK;
    }
    cgpu_status_t st = cgpu_cuda_copy_async(dst, src, sl->len, P.stream[k]);
    if (CGPU_OK == st) {
        st = cgpu_cuda_event_record(op->pair->ev[s], P.stream[k]);
    }
    return CGPU_OK == st ? CGPU_IN_PROGRESS : st;
}

static void slot_done(proxy_op_t *op, proxy_slot_t *sl)
{
    sl->state = SLOT_FREE;
    op->busy--;
    P.busy[op->kind & PROXY_KIND_MASK]--;
    op->done++;
}

/* Move @p op as far as it goes now; returns true if anything changed. Finishes it. */
static bool op_advance(proxy_op_t *op)
{
    const int k = op->kind & PROXY_KIND_MASK;
    const bool staged = 0 != (op->kind & PROXY_STAGED);
    bool did = false;

    /* staging copies that ended */
    for (int s = 0; s < op->nslots; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        if (SLOT_COPYING != sl->state) {
            continue;
        }
        cgpu_status_t q = cgpu_cuda_event_query(op->pair->ev[s]);
        if (CGPU_IN_PROGRESS == q) {
            continue;
        }
        did = true;
        if (CGPU_OK != q) {
            sl->state = SLOT_FREE;
            op->busy--;
            P.busy[k]--;
            op_error(op, q, "staging copy failed");
        } else if (PROXY_KIND_SEND == k) {
            sl->state = SLOT_READY;
        } else {
            slot_done(op, sl);
        }
    }
    /* start chunks in free slots */
    for (int s = 0; s < op->nslots && !op->cancelling; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        /* past the window its group's only operation of the direction still moves, one
         * chunk at a time (see "Bounds") */
        if (SLOT_FREE != sl->state || op->next >= op->nchunks ||
            (P.busy[k] >= P.cap[k] &&
             (op->busy > 0 || !op->counted || 1 != op->group->active[k]))) {
            continue;
        }
        did = true;
        sl->chunk = op->next++;
        sl->off = (size_t) sl->chunk * P.chunk;
        sl->len = op->bytes - sl->off < P.chunk ? op->bytes - sl->off : P.chunk;
        sl->state = SLOT_READY;
        op->busy++;
        P.busy[k]++;
        if (PROXY_KIND_SEND == k && staged) {
            cgpu_status_t st = slot_copy(op, s);
            if (CGPU_IN_PROGRESS == st) {
                sl->state = SLOT_COPYING;
            } else if (CGPU_OK != st) {
                sl->state = SLOT_FREE;
                op->busy--;
                P.busy[k]--;
                op_error(op, st, "staging copy failed");
            }
        }
    }
    /* post what is ready */
    for (int s = 0; s < op->nslots && !op->cancelling; ++s) {
        proxy_slot_t *sl = &op->slot[s];
        if (SLOT_READY != sl->state) {
            continue;
        }
        void *b = staged ? op->pair->buf[s] : (void *) (op->buf + sl->off);
        cgpu_status_t st;
        if (PROXY_KIND_SEND == k) {
            st = cgpu_ofi_tsend(P.ofi, b, sl->len, op->desc, op->addr, tag_of(op, sl->chunk),
                                sl->ctx);
        } else {
            st = cgpu_ofi_trecv(P.ofi, b, sl->len, op->desc,
                                P.directed ? op->addr : CGPU_OFI_ADDR_ANY, tag_of(op, sl->chunk),
                                sl->ctx);
        }
        if (CGPU_IN_PROGRESS == st) {
            break; /* provider full: completions first, then again (the next pass) */
        }
        did = true;
        if (CGPU_OK == st) {
            sl->state = SLOT_POSTED;
        } else {
            sl->state = SLOT_FREE;
            op->busy--;
            P.busy[k]--;
            op_error(op, st, "the provider refused the operation");
        }
    }
    /* a cancel the provider does not honour in time: give the request back anyway */
    if (op->cancelling && NULL != op->req && op->busy > 0 &&
        now_ns() - op->cancel_ns > proxy_cancel_grace_ns) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: %s of %zu bytes %s rank %d of group %u could not be cancelled within "
                 "%.2f s; it is abandoned (the provider may still use its buffer until the proxy "
                 "stops)",
                 kind_name(op->kind), op->bytes, kind_dir(op->kind), op->peer,
                 op->group->context_id, (double) proxy_cancel_grace_ns / 1e9);
        op_uncount(op);
        req_end(op->req, op->status);
        op->req = NULL;
        did = true;
    }
    if (0 == op->busy && (op->cancelling || op->done == op->nchunks)) {
        op_finish(op);
        did = true;
    }
    return did;
}

static void op_completion(const cgpu_ofi_cqe_t *e)
{
    proxy_slot_t *sl = (proxy_slot_t *) e->ctx;
    proxy_op_t *op = sl->op;
    const int k = op->kind & PROXY_KIND_MASK;

    if (SLOT_POSTED != sl->state) {
        cgpu_log(CGPU_LOG_WARN, "proxy: completion for an operation not posted (ignored)");
        return;
    }
    if (CGPU_OK != e->st) {
        sl->state = SLOT_FREE;
        op->busy--;
        P.busy[k]--;
        if (e->canceled && op->cancelling) {
            op_cancel(op, CGPU_ERR_TIMEOUT);
        } else if (e->canceled) { /* nobody asked: the provider gave up (a peer that died) */
            op_error(op, CGPU_ERR_PEER,
                     "the provider cancelled it (the connection to the peer was lost)");
        } else {
            op_error(op, e->st, e->msg);
        }
    } else if (PROXY_KIND_RECV == k && e->len != sl->len) {
        char what[128];
        snprintf(what, sizeof(what),
                 "chunk %u carried %zu bytes where %zu were expected (sizes differ between "
                 "sender and receiver)",
                 sl->chunk, e->len, sl->len);
        sl->state = SLOT_FREE;
        op->busy--;
        P.busy[k]--;
        op_error(op, CGPU_ERR_INVALID_ARG, what);
    } else if (PROXY_KIND_RECV == k && 0 != (op->kind & PROXY_STAGED)) {
        cgpu_status_t st = op->cancelling ? CGPU_OK : slot_copy(op, (int) (sl - op->slot));
        if (CGPU_IN_PROGRESS == st) {
            sl->state = SLOT_COPYING;
        } else {
            slot_done(op, sl);
            if (CGPU_OK != st) {
                op_error(op, st, "staging copy failed");
            }
        }
    } else {
        slot_done(op, sl);
    }
    (void) op_advance(op);
}

static bool same_key(const cgpu_proxy_req_t *a, const cgpu_proxy_req_t *b)
{
    return a->group == b->group && a->peer == b->peer && a->tag == b->tag &&
           req_kind(a) == req_kind(b);
}

/* A free operation, a new one past those made so far (at most the window plus one per group
 * and direction are ever in use). */
static proxy_op_t *op_alloc(void)
{
    for (int i = 0; i < P.nops; ++i) {
        if (!P.ops[i]->in_use) {
            P.ops[i]->in_use = true;
            return P.ops[i];
        }
    }
    if (P.nops == P.ops_cap) {
        const int cap = P.ops_cap > 0 ? 2 * P.ops_cap : 16;
        proxy_op_t **ops = realloc(P.ops, sizeof(*ops) * (size_t) cap);
        if (NULL == ops) {
            return NULL;
        }
        P.ops = ops;
        P.ops_cap = cap;
    }
    proxy_op_t *op = calloc(1, sizeof(*op));
    if (NULL == op) {
        return NULL;
    }
    P.ops[P.nops++] = op;
    op->in_use = true;
    return op;
}

/* Start request @p r as an operation; false if it must wait (nothing changed then). */
static bool op_start(cgpu_proxy_req_t *r, proxy_pair_t *pair)
{
    const int k = req_kind(r);
    cgpu_proxy_group_t *g = r->group;
    proxy_peer_t *peer = g->peers[r->peer];
    proxy_op_t *op = op_alloc();
    cgpu_status_t st = CGPU_OK;

    if (NULL == op) {
        if (NULL != pair && pair->temp_bytes > 0) {
            pair_temp_free(pair);
        } else if (NULL != pair) {
            pair->busy = false;
        }
        cgpu_log(CGPU_LOG_WARN, "proxy: %s of %zu bytes %s rank %d of group %u: no memory for it",
                 kind_name(r->kind), r->bytes, kind_dir(r->kind), r->peer, g->context_id);
        req_end(r, CGPU_ERR_NO_MEMORY);
        return true;
    }
    P.active[k]++;
    g->active[k]++;
    op->counted = true;
    op->req = r;
    op->group = g;
    op->peer = r->peer;
    op->tag = r->tag;
    op->kind = r->kind;
    op->buf = r->buf;
    op->bytes = r->bytes;
    op->pair = pair;
    op->status = CGPU_OK;
    op->nchunks = 0 == r->bytes ? 1 : (uint32_t) ((r->bytes + P.chunk - 1) / P.chunk);
    op->nslots = op->nchunks > 1 ? 2 : 1;
    for (int s = 0; s < 2; ++s) {
        op->slot[s].op = op;
        op->slot[s].state = SLOT_FREE;
    }
    r->priv = op;
    if (P.directed) {
        op->tag_base = ((uint64_t) (g->context_id & 0xfffffu) << 32) | r->tag;
    } else {
        const uint64_t src = PROXY_KIND_SEND == k ? (uint64_t) g->rank : (uint64_t) r->peer;
        op->tag_base = ((uint64_t) (g->context_id & 0xfffu) << 40) | ((src & 0xffffu) << 24) |
                       (r->tag & 0xffffffu);
    }
    if (!peer->inserted) {
        st = cgpu_ofi_insert(P.ofi, peer->name, &peer->addr);
        if (CGPU_OK != st) {
            op_error(op, st, "its address was refused by the address vector");
            op_finish(op);
            return true;
        }
        peer->inserted = true;
        const int n = atomic_fetch_add(&proxy_npeers, 1) + 1;
        cgpu_log(CGPU_LOG_DEBUG, "proxy: connected to rank %d of group %u (%d peer(s) now)",
                 r->peer, g->context_id, n);
    }
    op->addr = peer->addr;
    if (0 != (r->kind & PROXY_DEVICE) && r->bytes > 0) {
        const int dev = (r->kind >> PROXY_DEV_SHIFT) - 1;
        st = cgpu_ofi_reg_cuda(P.ofi, r->buf, r->bytes, dev, &op->mr, &op->desc);
        if (CGPU_OK != st) {
            op_error(op, st, "device memory registration failed");
            op_finish(op);
            return true;
        }
    }
    (void) op_advance(op);
    return true;
}

/* Take @p r (preceded by @p prev, NULL at the head) out of the pending list. */
static void pend_unlink(cgpu_proxy_req_t *prev, cgpu_proxy_req_t *r)
{
    if (NULL == prev) {
        P.pend_head = r->next;
    } else {
        prev->next = r->next;
    }
    if (P.pend_tail == r) {
        P.pend_tail = prev;
    }
    r->next = NULL;
}

/*
 * Start what the caps allow from the pending list; returns true if anything changed.
 * Each direction starts in submission order: once one request of a direction waits for
 * room, the later ones of that direction wait too, except the first request of a group
 * that has nothing of that direction in progress, which starts anyway (with a bounce pair
 * of its own when staged and the pool is taken): see "Bounds" at the top. Within a group a
 * waiting request holds back the later ones of its direction. A request also waits while
 * one with the same group, peer, tag and direction is in progress (or waits before it),
 * and a staged one while no bounce pair is free.
 */
static bool proxy_schedule(void)
{
    static unsigned pass;
    const cgpu_proxy_req_t *skipped[PROXY_KEYS_WINDOW];
    int nskipped = 0;
    bool blocked[2] = {false, false}, stage_blocked[2] = {false, false};
    bool did = false;
    cgpu_proxy_req_t *prev = NULL, *r = P.pend_head;

    if (0 == ++pass) {
        pass = 1; /* 0 is every group's initial mark */
    }
    for (; NULL != r && nskipped < PROXY_KEYS_WINDOW;) {
        cgpu_proxy_req_t *next = r->next;
        const int k = req_kind(r);
        cgpu_proxy_group_t *g = r->group;
        const int state = atomic_load_explicit(&r->state, memory_order_relaxed);
        const bool destroying = 0 != atomic_load_explicit(&g->destroying, memory_order_relaxed);
        const bool held = pass == g->waiting_pass[k]; /* an earlier one of its group waits */
        const bool own_turn = !held && 0 == g->active[k];
        enum { WAIT, WAIT_BLOCKED, START, END } action = START;
        cgpu_status_t end_st = CGPU_OK;
        proxy_pair_t *pair = NULL;

        if (PROXY_CANCEL_REQUESTED == state || destroying) {
            action = END;
            end_st = destroying ? CGPU_ERR_STATE : CGPU_ERR_TIMEOUT;
        } else if (held ||
                   (!own_turn && (blocked[k] || P.active[k] >= P.cap[k] || P.busy[k] >= P.cap[k]))) {
            blocked[k] = true;
            action = WAIT_BLOCKED;
        } else {
            for (int i = 0; i < nskipped && START == action; ++i) {
                action = same_key(skipped[i], r) ? WAIT : START;
            }
            for (int i = 0; i < P.nops && START == action; ++i) {
                if (P.ops[i]->in_use && NULL != P.ops[i]->req && same_key(P.ops[i]->req, r)) {
                    action = WAIT;
                }
            }
            if (START == action && 0 != (r->kind & PROXY_STAGED)) {
                if (0 == P.npairs[k] && CGPU_OK != (end_st = pairs_alloc(k))) {
                    action = END;
                } else if (!stage_blocked[k] && NULL != (pair = pair_get(k))) {
                    /* from the pool */
                } else if (own_turn && NULL != (pair = pair_temp(r->bytes))) {
                    /* the pool is taken (by other groups, maybe waiting on us): its own */
                } else {
                    stage_blocked[k] = stage_blocked[k] || !own_turn;
                    action = WAIT;
                }
            }
        }
        if (WAIT_BLOCKED == action) {
            g->waiting_pass[k] = pass; /* its group's later requests of the direction wait */
            prev = r; /* later requests of this direction wait too: no key to remember */
        } else if (WAIT == action) {
            skipped[nskipped++] = r;
            prev = r;
        } else {
            pend_unlink(prev, r);
            did = true;
            if (END == action) {
                req_end(r, end_st);
            } else {
                (void) op_start(r, pair);
            }
        }
        r = next;
    }
    return did;
}

/* Cancel requested by waitall (timeout, abort) or by a group being destroyed. */
static void proxy_scan_cancels(void)
{
    for (cgpu_proxy_req_t *prev = NULL, *r = P.pend_head, *next; NULL != r; r = next) {
        next = r->next;
        const bool destroying =
            0 != atomic_load_explicit(&r->group->destroying, memory_order_relaxed);
        if (!destroying &&
            PROXY_CANCEL_REQUESTED != atomic_load_explicit(&r->state, memory_order_relaxed)) {
            prev = r;
            continue;
        }
        pend_unlink(prev, r);
        req_end(r, destroying ? CGPU_ERR_STATE : CGPU_ERR_TIMEOUT);
    }
    for (int i = 0; i < P.nops; ++i) {
        proxy_op_t *op = P.ops[i];
        if (!op->in_use || NULL == op->req || op->cancelling) {
            continue;
        }
        if (0 != atomic_load_explicit(&op->group->destroying, memory_order_relaxed)) {
            op_cancel(op, CGPU_ERR_STATE);
        } else if (PROXY_CANCEL_REQUESTED ==
                   atomic_load_explicit(&op->req->state, memory_order_relaxed)) {
            op_cancel(op, CGPU_ERR_TIMEOUT);
        }
    }
}

static int proxy_poll(void)
{
    cgpu_ofi_cqe_t cqe[PROXY_POLL_BATCH];
    int n = cgpu_ofi_poll(P.ofi, cqe, PROXY_POLL_BATCH);
    if (n < 0) {
        return 0; /* logged by cgpu_ofi; the queue is polled again */
    }
    for (int i = 0; i < n; ++i) {
        op_completion(&cqe[i]);
    }
    return n;
}

/* ------------------------------------------------------------------------------------ */
/* The progress thread                                                                   */
/* ------------------------------------------------------------------------------------ */

static cgpu_status_t proxy_setup(void)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    cgpu_ofi_opts_t opts = {0};
    cgpu_status_t st;
    int inflight = cfg->proxy_max_inflight < 2 ? 2 : cfg->proxy_max_inflight;

    if (P.device >= 0 && CGPU_OK != cgpu_cuda_set_device(P.device)) {
        P.device = -1;
    }
    proxy_topology();
    P.cap[PROXY_KIND_SEND] = inflight / 2;
    P.cap[PROXY_KIND_RECV] = inflight - inflight / 2;
    P.nops = 0;
    P.ops_cap = inflight;
    P.ops = calloc((size_t) P.ops_cap, sizeof(*P.ops)); /* the operations: made as needed */
    if (NULL == P.ops) {
        return CGPU_ERR_NO_MEMORY;
    }
    opts.provider = cfg->ofi_provider;
    opts.want_hmem = P.device >= 0;
    opts.no_directed = 0 != (P.flags & CGPU_PROXY_TEST_NO_DIRECTED);
    opts.cq_size = (size_t) inflight * 2 + 1024; /* and one operation per group past it */
    opts.av_size = cfg->proxy_max_peers > 0 ? (size_t) cfg->proxy_max_peers : 64;
    st = cgpu_ofi_open(&opts, &P.ofi);
    if (CGPU_OK != st) {
        return st;
    }
    snprintf(P.provider, sizeof(P.provider), "%s", cgpu_ofi_provider(P.ofi));
    P.hmem = cgpu_ofi_hmem(P.ofi) && P.device >= 0;
    if (P.hmem) {
        /* A provider may report FI_HMEM and still refuse CUDA registrations (shm built
         * without CUDA support: ENOSYS): probe once; if so, device memory is staged, and
         * the endpoint is opened again without FI_HMEM, which costs host-memory transfers
         * (shm on 2x H200: 0.80-0.86 of raw libfabric at 1-64 MiB with it) */
        void *probe = NULL;
        cgpu_status_t ps = cgpu_cuda_malloc(&probe, 4096, NULL);
        if (CGPU_OK == ps) {
            ps = cgpu_ofi_probe_cuda(P.ofi, probe, 4096, P.device);
            cgpu_cuda_free(probe);
        }
        if (CGPU_OK != ps) {
            P.hmem = false;
            cgpu_log(CGPU_LOG_INFO,
                     "proxy: provider %s reports FI_HMEM but cannot register CUDA memory (%s); "
                     "device memory is staged through bounce buffers, the endpoint opened "
                     "without FI_HMEM",
                     P.provider, cgpu_status_string(ps));
            cgpu_ofi_close(&P.ofi);
            opts.want_hmem = false;
            st = cgpu_ofi_open(&opts, &P.ofi);
            if (CGPU_OK != st) {
                return st;
            }
            snprintf(P.provider, sizeof(P.provider), "%s", cgpu_ofi_provider(P.ofi));
        }
    }
    st = cgpu_ofi_getname(P.ofi, P.name);
    if (CGPU_OK != st) {
        return st;
    }
    if (cfg->ras_timeout_s > 0) {
        const double q = cfg->ras_timeout_s / 4 < 0.25 ? 0.25 : cfg->ras_timeout_s / 4;
        proxy_cancel_grace_ns = q < 2.0 ? (uint64_t) (q * 1e9) : 2000000000ull;
    }
    P.directed = cgpu_ofi_directed(P.ofi);
    P.chunk = cfg->proxy_bounce_bytes < PROXY_CHUNK_MIN ? PROXY_CHUNK_MIN : cfg->proxy_bounce_bytes;
    if (P.chunk > cgpu_ofi_max_msg(P.ofi)) {
        P.chunk = cgpu_ofi_max_msg(P.ofi);
    }
    if (P.device >= 0) {
        for (int k = 0; k < 2; ++k) {
            if (CGPU_OK != cgpu_cuda_stream_create(&P.stream[k], false)) {
                return CGPU_ERR_DEVICE;
            }
        }
    }
    cgpu_log(CGPU_LOG_INFO,
             "proxy: started on provider %s: %d send(s) and %d receive(s) in flight at most, "
             "chunks of %zu bytes, device memory %s, peers at most %d",
             P.provider, P.cap[0], P.cap[1], P.chunk,
             P.hmem ? "direct (FI_HMEM)" : "staged through bounce buffers", cfg->proxy_max_peers);
    return CGPU_OK;
}

static void proxy_teardown(void)
{
    for (int k = 0; k < 2; ++k) {
        if (NULL != P.stream[k]) {
            (void) cgpu_cuda_stream_sync(P.stream[k]);
        }
    }
    cgpu_ofi_close(&P.ofi);
    for (int k = 0; k < 2; ++k) {
        pairs_free(k);
        if (NULL != P.stream[k]) {
            cgpu_cuda_stream_destroy(P.stream[k]);
            P.stream[k] = NULL;
        }
    }
    for (int i = 0; i < P.nops; ++i) {
        free(P.ops[i]);
    }
    free(P.ops);
    P.ops = NULL;
    P.nops = P.ops_cap = 0;
    if (NULL != P.bounce_nodes) {
        hwloc_bitmap_free(P.bounce_nodes);
        P.bounce_nodes = NULL;
    }
    if (NULL != P.topo) {
        hwloc_topology_destroy(P.topo);
        P.topo = NULL;
    }
}

/* Stop: pending requests end with CGPU_ERR_STATE, started ones are cancelled and waited for
 * (abandoned after the grace period). */
static void proxy_drain(void)
{
    for (cgpu_proxy_req_t *r = P.pend_head, *next; NULL != r; r = next) {
        next = r->next;
        r->next = NULL;
        req_end(r, CGPU_ERR_STATE);
    }
    P.pend_head = P.pend_tail = NULL;
    bool any = false;
    for (int i = 0; i < P.nops; ++i) {
        if (P.ops[i]->in_use) {
            any = true;
            op_cancel(P.ops[i], CGPU_ERR_STATE);
        }
    }
    if (any) {
        cgpu_log(CGPU_LOG_WARN, "proxy: stopping with operations in flight; they are cancelled");
    }
    const uint64_t until = now_ns() + proxy_cancel_grace_ns;
    while (any && now_ns() < until) {
        any = false;
        (void) proxy_poll();
        for (int i = 0; i < P.nops; ++i) {
            if (P.ops[i]->in_use) {
                (void) op_advance(P.ops[i]);
                any = any || P.ops[i]->in_use;
            }
        }
        if (any) {
            nap_ns(100000);
        }
    }
    for (int i = 0; i < P.nops; ++i) {
        if (P.ops[i]->in_use) {
            if (NULL != P.ops[i]->req) {
                req_end(P.ops[i]->req, CGPU_ERR_STATE);
            }
            op_release(P.ops[i]);
        }
    }
}

static void *proxy_main(void *arg)
{
    (void) arg;
    cgpu_thread_set_worker(true); /* never calls MPI: no bootstrap, no MPI progress */
    cgpu_status_t st = proxy_setup();

    pthread_mutex_lock(&sub_lock);
    P.setup_st = st;
    P.setup_done = true;
    pthread_cond_broadcast(&sub_cond);
    pthread_mutex_unlock(&sub_lock);
    if (CGPU_OK != st) {
        proxy_teardown();
        return NULL;
    }

    unsigned seen_gen = atomic_load(&P.cancel_gen);
    unsigned spins = 0;
    uint64_t last_did = now_ns();
    for (;;) {
        bool did = false;

        pthread_mutex_lock(&sub_lock);
        if (P.stop) {
            pthread_mutex_unlock(&sub_lock);
            break;
        }
        if (NULL != P.sub_head) {
            if (NULL == P.pend_tail) {
                P.pend_head = P.sub_head;
            } else {
                P.pend_tail->next = P.sub_head;
            }
            P.pend_tail = P.sub_tail;
            P.sub_head = P.sub_tail = NULL;
            did = true;
        }
        pthread_mutex_unlock(&sub_lock);

        const unsigned gen = atomic_load(&P.cancel_gen);
        if (gen != seen_gen) {
            seen_gen = gen;
            proxy_scan_cancels();
            did = true;
        }
        if (NULL != P.pend_head) {
            did = proxy_schedule() || did;
        }
        int nactive = 0;
        for (int i = 0; i < P.nops; ++i) {
            if (P.ops[i]->in_use) {
                did = op_advance(P.ops[i]) || did;
                nactive += P.ops[i]->in_use ? 1 : 0;
            }
        }
        did = proxy_poll() > 0 || did;

        if (did) {
            spins = 0;
            last_did = now_ns();
            continue;
        }
        const uint64_t idle = now_ns() - last_did;
        if (nactive > 0 || NULL != P.pend_head) {
            if (++spins < 64) {
                continue;
            } else if (spins < 2000) {
                sched_yield();
            } else {
                nap_ns(idle > proxy_slow_poll_ns ? 1000000 : 20000);
            }
        } else if (idle < proxy_idle_poll_ns) {
            /* the provider may still owe a peer something (an acknowledgement) */
            nap_ns(50000);
        } else {
            pthread_mutex_lock(&sub_lock);
            if (NULL == P.sub_head && !P.stop && gen == atomic_load(&P.cancel_gen)) {
                const struct timespec until =
                    cgpu_deadline_after_ns((uint64_t) PROXY_IDLE_WAIT_MS * 1000000ull);
                P.sleeping = true;
                pthread_cond_timedwait(&sub_cond, &sub_lock, &until);
                P.sleeping = false;
            }
            pthread_mutex_unlock(&sub_lock);
        }
    }
    proxy_drain();
    proxy_teardown();
    return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Public functions                                                                      */
/* ------------------------------------------------------------------------------------ */

bool cgpu_proxy_built(void)
{
    return true;
}

/* Start the thread and wait until it has opened the provider (life_lock held: local work,
 * no peer involved). */
static cgpu_status_t proxy_start(void)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    P.flags = proxy_test_flags;
    P.device = cgpu_cuda_available() ? cgpu_cuda_current_device() : -1;
    P.max_peers = cfg->proxy_max_peers;
    P.stop = false;
    P.setup_done = false;
    P.sub_head = P.sub_tail = NULL;
    P.pend_head = P.pend_tail = NULL;
    memset(P.active, 0, sizeof(P.active));
    memset(P.busy, 0, sizeof(P.busy));
    atomic_store(&proxy_queue_depth, 0);
    atomic_store(&proxy_completed, 0);
    atomic_store(&proxy_npeers, 0);

    int rc = pthread_create(&P.thread, NULL, proxy_main, NULL);
    if (0 != rc) {
        cgpu_log(CGPU_LOG_WARN, "proxy: cannot start the progress thread: %s", strerror(rc));
        return CGPU_ERR_SYSTEM;
    }
    pthread_mutex_lock(&sub_lock);
    while (!P.setup_done) {
        pthread_cond_wait(&sub_cond, &sub_lock);
    }
    cgpu_status_t st = P.setup_st;
    pthread_mutex_unlock(&sub_lock);
    if (CGPU_OK != st) {
        pthread_join(P.thread, NULL);
        return st;
    }
    atomic_store(&P.up, true);
    return CGPU_OK;
}

static void proxy_peers_free(void)
{
    pthread_mutex_lock(&peer_lock);
    for (int i = 0; i < P.npeers; ++i) {
        free(P.peers[i]);
    }
    free(P.peers);
    P.peers = NULL;
    P.npeers = P.peers_cap = 0;
    pthread_mutex_unlock(&peer_lock);
}

cgpu_status_t cgpu_proxy_acquire(void)
{
    cgpu_status_t st = CGPU_OK;
    pthread_mutex_lock(&life_lock);
    if (CGPU_OK != P.failed) {
        st = P.failed;
    } else if (P.refs > 0) {
        P.refs++;
    } else {
        st = proxy_start();
        if (CGPU_OK == st) {
            P.refs = 1;
        } else {
            P.failed = st;
            cgpu_log(CGPU_LOG_WARN,
                     "proxy: the inter-node proxy could not start (%s); ranks on other nodes "
                     "cannot be reached through it in this process",
                     cgpu_status_string(st));
        }
    }
    pthread_mutex_unlock(&life_lock);
    return st;
}

void cgpu_proxy_release(void)
{
    pthread_mutex_lock(&life_lock);
    if (P.refs <= 0) {
        pthread_mutex_unlock(&life_lock);
        cgpu_log(CGPU_LOG_DEBUG, "proxy: release without a reference (ignored)");
        return;
    }
    if (0 == --P.refs) {
        atomic_store(&P.up, false);
        pthread_mutex_lock(&sub_lock);
        P.stop = true;
        pthread_cond_broadcast(&sub_cond);
        pthread_mutex_unlock(&sub_lock);
        pthread_join(P.thread, NULL);
        proxy_peers_free();
        cgpu_log(CGPU_LOG_DEBUG, "proxy: stopped");
    }
    pthread_mutex_unlock(&life_lock);
}

cgpu_status_t cgpu_proxy_addr(void *addr)
{
    if (!atomic_load(&P.up)) {
        return CGPU_ERR_STATE;
    }
    memcpy(addr, P.name, CGPU_PROXY_ADDR_BYTES);
    return CGPU_OK;
}

const char *cgpu_proxy_provider(void)
{
    return atomic_load(&P.up) ? P.provider : "none";
}

bool cgpu_proxy_hmem(void)
{
    return atomic_load(&P.up) && P.hmem;
}

uint32_t cgpu_proxy_max_context_id(void)
{
    if (!atomic_load(&P.up)) {
        return 0;
    }
    return P.directed ? 0xfffffu : 0xfffu;
}

uint32_t cgpu_proxy_max_tag(void)
{
    if (!atomic_load(&P.up)) {
        return 0;
    }
    return P.directed ? UINT32_MAX : 0xffffffu;
}

size_t cgpu_proxy_chunk_bytes(void)
{
    return atomic_load(&P.up) ? P.chunk : 0;
}

cgpu_status_t cgpu_proxy_group_create(int rank, int size, const void *addrs, uint32_t context_id,
                                      cgpu_prof_comm_t *prof, cgpu_proxy_group_t **out)
{
    cgpu_status_t st;
    cgpu_proxy_group_t *g;

    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size || NULL == addrs) {
        return CGPU_ERR_INVALID_ARG;
    }
    st = cgpu_proxy_acquire();
    if (CGPU_OK != st) {
        return st;
    }
    if (context_id > cgpu_proxy_max_context_id() || (!P.directed && size > 0x10000)) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: group of %d ranks with context id %u: provider %s carries context ids "
                 "up to %u%s",
                 size, context_id, P.provider, cgpu_proxy_max_context_id(),
                 P.directed ? "" : " and groups of 65536 ranks at most");
        st = CGPU_ERR_INVALID_ARG;
        goto out_release;
    }
    g = calloc(1, sizeof(*g));
    if (NULL == g) {
        st = CGPU_ERR_NO_MEMORY;
        goto out_release;
    }
    g->names = malloc((size_t) size * CGPU_PROXY_ADDR_BYTES);
    g->peers = calloc((size_t) size, sizeof(*g->peers));
    if (NULL == g->names || NULL == g->peers) {
        st = CGPU_ERR_NO_MEMORY;
        goto out_free_group;
    }
    memcpy(g->names, addrs, (size_t) size * CGPU_PROXY_ADDR_BYTES);
    g->rank = rank;
    g->size = size;
    g->context_id = context_id;
    g->prof = prof;
    atomic_init(&g->inflight, 0);
    atomic_init(&g->destroying, 0);
    pthread_mutex_lock(&peer_lock);
    g->next_live = P.groups;
    P.groups = g;
    pthread_mutex_unlock(&peer_lock);
    *out = g;
    return CGPU_OK;

out_free_group:
    free(g->names);
    free(g->peers);
    free(g);
out_release:
    cgpu_proxy_release();
    return st;
}

void cgpu_proxy_group_destroy(cgpu_proxy_group_t **gp)
{
    cgpu_proxy_group_t *g = NULL == gp ? NULL : *gp;
    bool live = false;

    if (NULL == g) {
        return;
    }
    *gp = NULL;
    pthread_mutex_lock(&peer_lock);
    for (cgpu_proxy_group_t **p = &P.groups; NULL != *p; p = &(*p)->next_live) {
        if (*p == g) {
            *p = g->next_live;
            live = true;
            break;
        }
    }
    pthread_mutex_unlock(&peer_lock);
    if (!live) {
        cgpu_log(CGPU_LOG_WARN, "proxy: a group was destroyed twice (or never created); ignored");
        return;
    }
    const int n = atomic_load(&g->inflight);
    if (n > 0) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: group %u destroyed with %d operation(s) in flight; they are cancelled "
                 "(wait for them before destroying the group)",
                 g->context_id, n);
        atomic_store(&g->destroying, 1);
        atomic_fetch_add(&P.cancel_gen, 1);
        proxy_wake();
        while (atomic_load_explicit(&g->inflight, memory_order_acquire) > 0) {
            nap_ns(100000);
        }
    }
    free(g->names);
    free(g->peers);
    free(g);
    cgpu_proxy_release();
}

/* Make @p peer of @p g a peer of this process, within coll_gpu_proxy_max_peers. */
static cgpu_status_t peer_reserve(cgpu_proxy_group_t *g, int peer)
{
    const unsigned char *name = g->names + (size_t) peer * CGPU_PROXY_ADDR_BYTES;
    cgpu_status_t st = CGPU_OK;

    pthread_mutex_lock(&peer_lock);
    if (NULL != g->peers[peer]) {
        goto out_unlock;
    }
    for (int i = 0; i < P.npeers; ++i) {
        if (0 == memcmp(P.peers[i]->name, name, CGPU_PROXY_ADDR_BYTES)) {
            g->peers[peer] = P.peers[i];
            goto out_unlock;
        }
    }
    if (P.max_peers > 0 && P.npeers >= P.max_peers) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: coll_gpu_proxy_max_peers (%d) reached: rank %d of group %u would be "
                 "this process's peer number %d; raise coll_gpu_proxy_max_peers or use an "
                 "algorithm that talks to fewer ranks on other nodes",
                 P.max_peers, peer, g->context_id, P.npeers + 1);
        st = CGPU_ERR_NO_RESOURCE;
        goto out_unlock;
    }
    if (P.npeers == P.peers_cap) {
        int cap = 0 == P.peers_cap ? 16 : 2 * P.peers_cap;
        proxy_peer_t **p = realloc(P.peers, (size_t) cap * sizeof(*p));
        if (NULL == p) {
            st = CGPU_ERR_NO_MEMORY;
            goto out_unlock;
        }
        P.peers = p;
        P.peers_cap = cap;
    }
    proxy_peer_t *e = calloc(1, sizeof(*e));
    if (NULL == e) {
        st = CGPU_ERR_NO_MEMORY;
        goto out_unlock;
    }
    memcpy(e->name, name, CGPU_PROXY_ADDR_BYTES);
    P.peers[P.npeers++] = e;
    g->peers[peer] = e;
out_unlock:
    pthread_mutex_unlock(&peer_lock);
    return st;
}

static cgpu_status_t proxy_submit(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                                  uint32_t tag, cgpu_proxy_req_t *req, int kind)
{
    cgpu_status_t st;

    if (NULL == req) {
        return CGPU_ERR_INVALID_ARG;
    }
    if (NULL == g || peer < 0 || peer >= g->size || peer == g->rank || (bytes > 0 && NULL == buf)) {
        cgpu_log(CGPU_LOG_WARN, "proxy: %s to/from rank %d refused: invalid arguments",
                 kind_name(kind), peer);
        return CGPU_ERR_INVALID_ARG;
    }
    if (!atomic_load(&P.up) || 0 != atomic_load(&g->destroying)) {
        return CGPU_ERR_STATE;
    }
    if (tag > cgpu_proxy_max_tag()) {
        cgpu_log(CGPU_LOG_WARN, "proxy: %s with tag %u refused: provider %s carries tags up to %u",
                 kind_name(kind), tag, P.provider, cgpu_proxy_max_tag());
        return CGPU_ERR_INVALID_ARG;
    }
    st = peer_reserve(g, peer);
    if (CGPU_OK != st) {
        return st;
    }
    if (bytes > 0) {
        int dev = -1;
        cgpu_mem_kind_t mk = cgpu_cuda_mem_kind(buf, &dev);
        if (CGPU_MEM_HOST != mk) {
            kind |= P.hmem ? PROXY_DEVICE | ((dev + 1) << PROXY_DEV_SHIFT)
                           : PROXY_STAGED | PROXY_CUDA_COPY;
        } else if (0 != (P.flags & CGPU_PROXY_TEST_STAGE_HOST)) {
            kind |= PROXY_STAGED;
        }
    }
    req->next = NULL;
    req->group = g;
    req->peer = peer;
    req->kind = kind;
    req->buf = buf;
    req->bytes = bytes;
    req->tag = tag;
    req->posted_ns = now_ns();
    req->priv = NULL;
    req->ev.on = false;
    if (NULL != g->prof) {
        cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_PROXY_V1,
                                   .parent = g->prof->coll_on ? g->prof->coll : NULL};
        ev.u.proxy = (cgpu_prof_proxy_v1_t){.what = kind_name(kind), .peer = peer, .bytes = bytes};
        cgpu_prof_start(g->prof, &ev, &req->ev);
    }
    atomic_store_explicit(&req->state, CGPU_IN_PROGRESS, memory_order_relaxed);
    atomic_fetch_add_explicit(&proxy_queue_depth, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g->inflight, 1, memory_order_relaxed);

    pthread_mutex_lock(&sub_lock);
    if (NULL == P.sub_tail) {
        P.sub_head = req;
    } else {
        P.sub_tail->next = req;
    }
    P.sub_tail = req;
    if (P.sleeping) {
        pthread_cond_signal(&sub_cond);
    }
    pthread_mutex_unlock(&sub_lock);
    return CGPU_OK;
}

cgpu_status_t cgpu_proxy_isend(cgpu_proxy_group_t *g, int peer, const void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    return proxy_submit(g, peer, (void *) buf, bytes, tag, req, PROXY_KIND_SEND);
}

cgpu_status_t cgpu_proxy_irecv(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    return proxy_submit(g, peer, buf, bytes, tag, req, PROXY_KIND_RECV);
}

cgpu_status_t cgpu_proxy_test(cgpu_proxy_req_t *req)
{
    const int s = atomic_load_explicit(&req->state, memory_order_acquire);
    if (CGPU_IN_PROGRESS == s || PROXY_CANCEL_REQUESTED == s) {
        return CGPU_IN_PROGRESS;
    }
    if (req->ev.on) { /* the completing thread ends the event, in the group's context */
        cgpu_prof_stop(&req->ev);
        req->ev.on = false;
    }
    return (cgpu_status_t) s;
}

cgpu_status_t cgpu_proxy_waitall(cgpu_proxy_req_t *reqs, int n, double timeout_s,
                                 const _Atomic int *abort)
{
    const uint64_t start = now_ns();
    const uint64_t limit = timeout_s > 0 ? (uint64_t) (timeout_s * 1e9) : 0;
    bool stopped = false, aborted = false;
    unsigned spins = 0;

    for (;;) {
        bool all = true;
        for (int i = 0; i < n; ++i) {
            all = CGPU_IN_PROGRESS != cgpu_proxy_test(&reqs[i]) && all;
        }
        if (all) {
            break;
        }
        if (!stopped) {
            aborted = NULL != abort && 0 != atomic_load_explicit(abort, memory_order_relaxed);
            const uint64_t waited = now_ns() - start;
            if (aborted || (limit > 0 && waited > limit)) {
                stopped = true;
                int told = 0, more = 0;
                for (int i = 0; i < n; ++i) {
                    int expect = CGPU_IN_PROGRESS;
                    if (!atomic_compare_exchange_strong(&reqs[i].state, &expect,
                                                        PROXY_CANCEL_REQUESTED)) {
                        continue;
                    }
                    if (told++ >= 8) {
                        ++more;
                        continue;
                    }
                    const cgpu_proxy_req_t *r = &reqs[i];
                    if (aborted) {
                        cgpu_log(CGPU_LOG_WARN,
                                 "proxy: %s of %zu bytes %s rank %d of group %u stopped by an "
                                 "abort after %.1f s",
                                 kind_name(r->kind), r->bytes, kind_dir(r->kind), r->peer,
                                 r->group->context_id, (double) waited / 1e9);
                    } else {
                        cgpu_log(CGPU_LOG_WARN,
                                 "proxy: %s of %zu bytes %s rank %d of group %u did not complete "
                                 "within %.1f s (peer unreachable or dead)",
                                 kind_name(r->kind), r->bytes, kind_dir(r->kind), r->peer,
                                 r->group->context_id, timeout_s);
                    }
                }
                if (more > 0) {
                    cgpu_log(CGPU_LOG_WARN, "proxy: ... and %d more operation(s) of that wait",
                             more);
                }
                atomic_fetch_add(&P.cancel_gen, 1);
                proxy_wake();
            }
        }
        cgpu_progress_poll(++spins, 100); /* a peer may wait in MPI for us */
        if (spins < 100) {
            cgpu_cpu_relax();
        } else if (spins < 2000) {
            sched_yield();
        } else {
            nap_ns(20000);
        }
    }
    if (stopped) {
        return CGPU_ERR_TIMEOUT;
    }
    for (int i = 0; i < n; ++i) {
        const int s = atomic_load_explicit(&reqs[i].state, memory_order_relaxed);
        if (CGPU_OK != s) {
            return (cgpu_status_t) s;
        }
    }
    return CGPU_OK;
}

#else /* !CGPU_HAVE_LIBFABRIC: the proxy is not built; every entry point says so */

bool cgpu_proxy_built(void)
{
    return false;
}

cgpu_status_t cgpu_proxy_acquire(void)
{
    static atomic_int told;
    if (0 == atomic_exchange(&told, 1)) {
        cgpu_log(CGPU_LOG_INFO, "proxy: not built (configure did not find libfabric)");
    }
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_proxy_release(void)
{
}

cgpu_status_t cgpu_proxy_addr(void *addr)
{
    (void) addr;
    return CGPU_ERR_NOT_SUPPORTED;
}

const char *cgpu_proxy_provider(void)
{
    return "none";
}

bool cgpu_proxy_hmem(void)
{
    return false;
}

uint32_t cgpu_proxy_max_context_id(void)
{
    return 0;
}

uint32_t cgpu_proxy_max_tag(void)
{
    return 0;
}

size_t cgpu_proxy_chunk_bytes(void)
{
    return 0;
}

cgpu_status_t cgpu_proxy_group_create(int rank, int size, const void *addrs, uint32_t context_id,
                                      cgpu_prof_comm_t *prof, cgpu_proxy_group_t **out)
{
    (void) rank, (void) size, (void) addrs, (void) context_id, (void) prof;
    *out = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_proxy_group_destroy(cgpu_proxy_group_t **g)
{
    if (NULL != g) {
        *g = NULL;
    }
}

cgpu_status_t cgpu_proxy_isend(cgpu_proxy_group_t *g, int peer, const void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    (void) g, (void) peer, (void) buf, (void) bytes, (void) tag, (void) req;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_proxy_irecv(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    (void) g, (void) peer, (void) buf, (void) bytes, (void) tag, (void) req;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_proxy_test(cgpu_proxy_req_t *req)
{
    return (cgpu_status_t) atomic_load(&req->state);
}

cgpu_status_t cgpu_proxy_waitall(cgpu_proxy_req_t *reqs, int n, double timeout_s,
                                 const _Atomic int *abort)
{
    (void) reqs, (void) n, (void) timeout_s, (void) abort;
    return CGPU_ERR_NOT_SUPPORTED;
}

#endif /* CGPU_HAVE_LIBFABRIC */
