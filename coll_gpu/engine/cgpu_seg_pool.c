/*
 * coll/gpu engine: node segments reused across communicators (cgpu_seg_pool.h says how).
 *
 * Both tables are small (coll_gpu_shm_pool own segments, eight times as many idle peer
 * mappings, plus those live communicators use) and touched only at communicator set-up and
 * release: linear scans under one mutex.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_config.h"
#include "cgpu_seg_pool.h"

/* An own segment no communicator uses, and the processes that mapped it. */
typedef struct own_entry {
    cgpu_shm_seg_t seg;
    int npids;
    int32_t pids[CGPU_SEG_POOL_PIDS];
    uint64_t starts[CGPU_SEG_POOL_PIDS];
    uint64_t last_use;
} own_entry_t;

/* A peer's segment this process maps; refs: communicators using it now. */
typedef struct peer_entry {
    cgpu_shm_seg_t seg;
    int refs;
    uint64_t last_use;
} peer_entry_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static own_entry_t *own;
static size_t nown;
static peer_entry_t *peers;
static size_t npeers, peers_cap;
static uint64_t tick;
static atomic_ullong reuses;
static atomic_int kept; /* own segments in the pool and idle peer copies: what pvars read */

/* Recount what the pool keeps; called with the lock held after every change. */
static void count_kept(void)
{
    int n = (int) nown;
    for (size_t i = 0; i < npeers; ++i) {
        n += 0 == peers[i].refs;
    }
    atomic_store_explicit(&kept, n, memory_order_relaxed);
}

int cgpu_seg_pool_kept(void)
{
    return atomic_load_explicit(&kept, memory_order_relaxed);
}

uint64_t cgpu_seg_pool_reuses(void)
{
    return atomic_load_explicit(&reuses, memory_order_relaxed);
}

static size_t own_cap(void)
{
    const int n = cgpu_engine_config()->shm_pool;
    return n > 0 ? (size_t) n : 0;
}

static cgpu_seg_ctrl_t *ctrl_of(const cgpu_shm_seg_t *seg)
{
    return (cgpu_seg_ctrl_t *) seg->base;
}

/* Unmap an own segment for good, its copies marked to go first. */
static void retire(cgpu_shm_seg_t *seg)
{
    if (NULL != seg->base) {
        atomic_store_explicit(&ctrl_of(seg)->retired, 1, memory_order_release);
    }
    cgpu_shm_detach(seg);
    memset(seg, 0, sizeof(*seg));
}

/* Whether every peer of @p comm is one of @p e's processes (same pid and start time). */
static bool mapped_by_all(const own_entry_t *e, const cgpu_comm_t *comm)
{
    for (int p = 0; p < comm->size; ++p) {
        if (p == comm->rank) {
            continue;
        }
        const cgpu_peer_proc_t *pp = &comm->procs[p];
        bool found = false;
        for (int i = 0; i < e->npids && !found; ++i) {
            found = e->pids[i] == pp->pid && e->starts[i] == pp->start_time;
        }
        if (!found) {
            return false;
        }
    }
    return true;
}

/* Peers with a pid and a start time this process can tell apart, at most the table's size. */
static bool peers_known(const cgpu_comm_t *comm)
{
    if (NULL == comm->procs || comm->size - 1 > CGPU_SEG_POOL_PIDS) {
        return false;
    }
    for (int p = 0; p < comm->size; ++p) {
        if (p != comm->rank && 0 == comm->procs[p].start_time) {
            return false; /* another pid namespace may reuse the pid */
        }
    }
    return true;
}

bool cgpu_seg_pool_take(const cgpu_comm_t *comm, size_t bytes, cgpu_shm_seg_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!peers_known(comm)) {
        return false;
    }
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < nown; ++i) {
        own_entry_t *e = &own[i];
        cgpu_seg_ctrl_t *c = ctrl_of(&e->seg);
        if (e->seg.size != bytes || !mapped_by_all(e, comm) ||
            atomic_load_explicit(&c->released.v, memory_order_acquire) < c->released_expect) {
            continue; /* another size, a stranger among the peers, or a peer still on it */
        }
        *out = e->seg;
        own[i] = own[--nown];
        count_kept();
        pthread_mutex_unlock(&pool_lock);
        /* every peer is done with it: nobody else touches it until the set-up exchange */
        memset(c, 0, CGPU_SEG_CTRL_RESET_BYTES);
        c->magic = CGPU_SEG_MAGIC;
        atomic_fetch_add_explicit(&reuses, 1, memory_order_relaxed);
        return true;
    }
    pthread_mutex_unlock(&pool_lock);
    return false;
}

void cgpu_seg_pool_put(const cgpu_comm_t *comm, cgpu_shm_seg_t *seg, bool reuse)
{
    if (NULL == seg->base) {
        return;
    }
    cgpu_shm_unlink(seg); /* a set-up that failed before the peers mapped it */
    if (!reuse || 0 == own_cap() || !peers_known(comm)) {
        retire(seg);
        return;
    }
    own_entry_t e;
    memset(&e, 0, sizeof(e));
    e.seg = *seg;
    for (int p = 0; p < comm->size; ++p) {
        if (p != comm->rank) {
            e.pids[e.npids] = comm->procs[p].pid;
            e.starts[e.npids++] = comm->procs[p].start_time;
        }
    }
    /* the owner's word: its count of releases to wait for grows by this communicator's peers */
    ctrl_of(seg)->released_expect += (uint64_t) e.npids;
    memset(seg, 0, sizeof(*seg));

    cgpu_shm_seg_t drop;
    memset(&drop, 0, sizeof(drop));
    pthread_mutex_lock(&pool_lock);
    e.last_use = ++tick;
    if (nown >= own_cap()) { /* full: the one unused longest makes room */
        size_t oldest = 0;
        for (size_t i = 1; i < nown; ++i) {
            oldest = own[i].last_use < own[oldest].last_use ? i : oldest;
        }
        drop = own[oldest].seg;
        own[oldest] = e;
    } else {
        own_entry_t *grown = realloc(own, (nown + 1) * sizeof(*own));
        if (NULL != grown) {
            own = grown;
            own[nown++] = e;
        } else {
            drop = e.seg;
        }
    }
    count_kept();
    pthread_mutex_unlock(&pool_lock);
    retire(&drop);
}

/* The next idle peer copy to unmap: one its owner retired, else the longest unused while
 * more than @p keep live idle ones are mapped; npeers when none. Called with the lock held. */
static size_t idle_victim(size_t keep)
{
    size_t live_idle = 0, oldest = npeers;
    for (size_t i = 0; i < npeers; ++i) {
        if (0 != peers[i].refs) {
            continue;
        }
        if (0 != atomic_load_explicit(&ctrl_of(&peers[i].seg)->retired, memory_order_acquire)) {
            return i;
        }
        ++live_idle;
        if (npeers == oldest || peers[i].last_use < peers[oldest].last_use) {
            oldest = i;
        }
    }
    return live_idle > keep ? oldest : npeers;
}

/* Unmap the idle peer copies that are retired or past @p keep live ones (a few at a time,
 * the unmapping outside the lock). */
static void unmap_idle_peers(size_t keep)
{
    enum { BATCH = 16 };
    cgpu_shm_seg_t gone[BATCH];
    size_t n;
    do {
        n = 0;
        pthread_mutex_lock(&pool_lock);
        for (size_t v; n < BATCH && npeers != (v = idle_victim(keep));) {
            gone[n++] = peers[v].seg;
            peers[v] = peers[--npeers];
        }
        if (0 == npeers) {
            free(peers);
            peers = NULL;
            peers_cap = 0;
        }
        count_kept();
        pthread_mutex_unlock(&pool_lock);
        for (size_t i = 0; i < n; ++i) {
            cgpu_shm_detach(&gone[i]);
        }
    } while (BATCH == n);
}

bool cgpu_seg_peer_cached(const char *name, size_t bytes, cgpu_shm_seg_t *out)
{
    memset(out, 0, sizeof(*out));
    bool found = false;
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < npeers && !found; ++i) {
        peer_entry_t *e = &peers[i];
        if (e->seg.size == bytes && 0 == strcmp(e->seg.name, name) &&
            0 == atomic_load_explicit(&ctrl_of(&e->seg)->retired, memory_order_acquire)) {
            ++e->refs;
            e->last_use = ++tick;
            *out = e->seg;
            found = true;
        }
    }
    count_kept();
    pthread_mutex_unlock(&pool_lock);
    return found;
}

cgpu_status_t cgpu_seg_peer_attach(const char *name, size_t bytes, cgpu_shm_seg_t *out)
{
    cgpu_status_t st = cgpu_shm_attach(out, name, bytes);
    if (CGPU_OK != st) {
        return st;
    }
    pthread_mutex_lock(&pool_lock);
    if (npeers == peers_cap) {
        const size_t cap = 0 == peers_cap ? 8 : 2 * peers_cap;
        peer_entry_t *grown = realloc(peers, cap * sizeof(*peers));
        if (NULL != grown) {
            peers = grown;
            peers_cap = cap;
        }
    }
    if (npeers < peers_cap) {
        peers[npeers].seg = *out;
        peers[npeers].refs = 1;
        peers[npeers].last_use = ++tick;
        ++npeers;
        pthread_mutex_unlock(&pool_lock);
        return CGPU_OK;
    }
    pthread_mutex_unlock(&pool_lock);
    cgpu_shm_detach(out); /* no room to track it: the set-up fails as without memory */
    return CGPU_ERR_NO_MEMORY;
}

void cgpu_seg_peer_put(cgpu_shm_seg_t *seg, bool done)
{
    if (NULL == seg->base) {
        return;
    }
    if (done) {
        atomic_fetch_add_explicit(&ctrl_of(seg)->released.v, 1, memory_order_release);
    }
    bool found = false;
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < npeers && !found; ++i) {
        if (peers[i].seg.base == seg->base && peers[i].refs > 0) {
            --peers[i].refs;
            peers[i].last_use = ++tick;
            found = true;
        }
    }
    count_kept();
    pthread_mutex_unlock(&pool_lock);
    if (!found) {
        cgpu_log(CGPU_LOG_WARN, "engine: release of a peer segment %p the cache does not hold "
                                "(ignored)",
                 seg->base);
    }
    memset(seg, 0, sizeof(*seg));
    unmap_idle_peers(8 * own_cap());
}

void cgpu_seg_pool_fini(void)
{
    pthread_mutex_lock(&pool_lock);
    own_entry_t *o = own;
    const size_t no = nown;
    own = NULL;
    nown = 0;
    count_kept();
    pthread_mutex_unlock(&pool_lock);
    for (size_t i = 0; i < no; ++i) {
        retire(&o[i].seg);
    }
    free(o);
    unmap_idle_peers(0);
}
