/*
 * coll/gpu engine, cuda backend: the inbox pool, the staging pool and the IPC mapping cache
 * (cgpu_cuda_pool.h says how each works).
 *
 * Process-wide device resources that outlive a communicator: a released inbox waits here
 * for its peers' release before a new communicator reuses it, and a peer's mapping stays
 * open for the next communicator that maps the same inbox (or the copy engines' next call
 * on the same buffer). Apart from the communicator's set-up because both tables are shared
 * by every communicator of the process under one lock. The counters the pvars read exist
 * with or without CUDA.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "cgpu_config.h"
#include "cgpu_cuda_pool.h"
#include "cgpu_engine.h"

static atomic_ullong ipc_hits, ipc_misses, ipc_evictions, inbox_reuses;

uint64_t cgpu_ipc_cache_hits(void)
{
    return atomic_load_explicit(&ipc_hits, memory_order_relaxed);
}

uint64_t cgpu_ipc_cache_misses(void)
{
    return atomic_load_explicit(&ipc_misses, memory_order_relaxed);
}

uint64_t cgpu_ipc_cache_evictions(void)
{
    return atomic_load_explicit(&ipc_evictions, memory_order_relaxed);
}

uint64_t cgpu_inbox_reuses(void)
{
    return atomic_load_explicit(&inbox_reuses, memory_order_relaxed);
}

#ifdef CGPU_HAVE_CUDA

#include "cgpu_cuda_kernels.h"

/* Both tables are small (bounded by the MCA caps plus what live communicators use) and
 * touched only at communicator create/release: linear scans under one mutex, which is
 * never held across a call into MPI or a wait for a peer. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct ipc_entry {
    char handle[CGPU_CUDA_IPC_HANDLE_BYTES];
    uint64_t id; /* the exporter's allocation id (0 for inboxes) */
    void *ptr;
    int refs;
    uint64_t last_use;
} ipc_entry_t;
static ipc_entry_t *ipc;
static size_t nipc, ipc_cap;
static uint64_t ipc_clock;

static cgpu_inbox_t *pool;
static size_t npool;

static cgpu_stage_bufs_t *spares; /* staging sets, at most coll_gpu_cuda_inbox_pool */
static size_t nspares;

/* Close unreferenced mappings beyond the cap, least recently used first. */
static void ipc_trim(size_t keep)
{
    for (;;) {
        size_t idle = 0, lru = SIZE_MAX;
        for (size_t i = 0; i < nipc; ++i) {
            if (0 == ipc[i].refs) {
                idle++;
                if (SIZE_MAX == lru || ipc[i].last_use < ipc[lru].last_use) {
                    lru = i;
                }
            }
        }
        if (idle <= keep || SIZE_MAX == lru) {
            return;
        }
        cgpu_cuda_ipc_close(ipc[lru].ptr);
        ipc[lru] = ipc[--nipc];
        atomic_fetch_add_explicit(&ipc_evictions, 1, memory_order_relaxed);
    }
}

cgpu_status_t cgpu_ipc_cache_get(const void *handle, void **ptr)
{
    return cgpu_ipc_cache_get_id(handle, 0, ptr);
}

cgpu_status_t cgpu_ipc_cache_get_id(const void *handle, uint64_t id, void **ptr)
{
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < nipc; ++i) {
        if (0 != memcmp(ipc[i].handle, handle, CGPU_CUDA_IPC_HANDLE_BYTES)) {
            continue;
        }
        if (ipc[i].id != id) {
            /* the same handle for a new allocation where a freed one was: the old mapping
             * must go before the handle can be opened again */
            if (0 != ipc[i].refs) {
                pthread_mutex_unlock(&pool_lock);
                return CGPU_ERR_STATE;
            }
            cgpu_cuda_ipc_close_now(ipc[i].ptr);
            ipc[i] = ipc[--nipc];
            atomic_fetch_add_explicit(&ipc_evictions, 1, memory_order_relaxed);
            break;
        }
        ipc[i].refs++;
        ipc[i].last_use = ++ipc_clock;
        *ptr = ipc[i].ptr;
        pthread_mutex_unlock(&pool_lock);
        atomic_fetch_add_explicit(&ipc_hits, 1, memory_order_relaxed);
        return CGPU_OK;
    }
    if (nipc == ipc_cap) {
        size_t cap = ipc_cap ? 2 * ipc_cap : 16;
        ipc_entry_t *grown = realloc(ipc, cap * sizeof(*grown));
        if (NULL == grown) {
            pthread_mutex_unlock(&pool_lock);
            return CGPU_ERR_NO_MEMORY;
        }
        ipc = grown;
        ipc_cap = cap;
    }
    cgpu_status_t st = cgpu_cuda_ipc_open(handle, ptr);
    if (CGPU_OK == st) {
        ipc_entry_t *e = &ipc[nipc++];
        memcpy(e->handle, handle, CGPU_CUDA_IPC_HANDLE_BYTES);
        e->id = id;
        e->ptr = *ptr;
        e->refs = 1;
        e->last_use = ++ipc_clock;
        atomic_fetch_add_explicit(&ipc_misses, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&pool_lock);
    return st;
}

void cgpu_ipc_cache_put(void *ptr)
{
    if (NULL == ptr) {
        return;
    }
    pthread_mutex_lock(&pool_lock);
    bool found = false;
    for (size_t i = 0; i < nipc; ++i) {
        if (ipc[i].ptr == ptr && ipc[i].refs > 0) {
            ipc[i].refs--;
            found = true;
            break;
        }
    }
    if (found) {
        ipc_trim((size_t) cgpu_engine_config()->cuda_ipc_cache_size);
    }
    pthread_mutex_unlock(&pool_lock);
    if (!found) {
        cgpu_log(CGPU_LOG_WARN,
                 "cuda: release of a peer mapping %p the cache does not hold "
                 "(ignored)",
                 ptr);
    }
}

static uint64_t read_release_word(const cgpu_inbox_t *ib, void *stream)
{
    uint64_t v = UINT64_MAX;
    if (CGPU_OK != cgpu_cuda_copy_async(&v, ib->ptr + ib->bytes, sizeof(v), stream) ||
        CGPU_OK != cgpu_cuda_stream_sync(stream)) {
        return UINT64_MAX; /* unknown: treated as "not released" by the caller's compare */
    }
    return v;
}

cgpu_status_t cgpu_inbox_get(size_t bytes, size_t zero_bytes, int npeers, void *stream,
                             cgpu_inbox_t *out)
{
    const int device = cgpu_cuda_current_device();
    memset(out, 0, sizeof(*out));
    /* a pooled inbox on this device, no larger than twice what is needed, that every peer
     * of its last communicator has released */
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < npool; ++i) {
        cgpu_inbox_t *p = &pool[i];
        if (p->device != device || p->bytes < bytes || p->bytes > 2 * bytes) {
            continue;
        }
        uint64_t w = read_release_word(p, stream);
        if (UINT64_MAX == w || w < p->expect) {
            continue; /* a slow peer is still on its last communicator */
        }
        *out = *p;
        pool[i] = pool[--npool];
        pthread_mutex_unlock(&pool_lock);
        out->expect = w + (uint64_t) npeers;
        atomic_fetch_add_explicit(&inbox_reuses, 1, memory_order_relaxed);
        cgpu_status_t st = cgpu_cuda_memset_async(out->ptr, 0, zero_bytes, stream);
        return CGPU_OK == st ? cgpu_cuda_stream_sync(stream) : st;
    }
    pthread_mutex_unlock(&pool_lock);

    /* a new one, with room for the release word after it */
    void *p = NULL;
    cgpu_status_t st = cgpu_cuda_malloc(&p, bytes + 256, NULL);
    if (CGPU_OK != st) {
        return st;
    }
    out->ptr = p;
    out->bytes = bytes;
    out->device = device;
    out->expect = (uint64_t) npeers;
    st = cgpu_cuda_memset_async(out->ptr, 0, zero_bytes, stream);
    if (CGPU_OK == st) {
        st = cgpu_cuda_memset_async(out->ptr + bytes, 0, 256, stream);
    }
    if (CGPU_OK == st) {
        st = cgpu_cuda_stream_sync(stream);
    }
    if (CGPU_OK == st) {
        st = cgpu_cuda_ipc_export(out->ptr, out->handle);
    }
    if (CGPU_OK != st) {
        cgpu_cuda_free(out->ptr);
        out->ptr = NULL;
    }
    return st;
}

void cgpu_inbox_put(cgpu_inbox_t *ib)
{
    if (NULL == ib->ptr) {
        return;
    }
    const size_t cap = (size_t) cgpu_engine_config()->cuda_inbox_pool;
    pthread_mutex_lock(&pool_lock);
    if (npool < cap) {
        cgpu_inbox_t *grown = realloc(pool, (npool + 1) * sizeof(*grown));
        if (NULL != grown) {
            pool = grown;
            pool[npool++] = *ib;
            pthread_mutex_unlock(&pool_lock);
            ib->ptr = NULL;
            return;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    cgpu_cuda_free(ib->ptr);
    ib->ptr = NULL;
}

cgpu_status_t cgpu_inbox_signal_release(char *const *peer_inbox, const size_t *release_off, int n,
                                        void *stream)
{
    cgpu_cuda_release_args_t a;
    memset(&a, 0, sizeof(a));
    a.n = n < CGPU_CUDA_MAX_RANKS ? n : CGPU_CUDA_MAX_RANKS;
    bool any = false;
    for (int i = 0; i < a.n; ++i) {
        if (NULL != peer_inbox[i]) {
            a.word[i] = (unsigned long long *) (peer_inbox[i] + release_off[i]);
            any = true;
        }
    }
    if (!any) {
        return CGPU_OK;
    }
    cgpu_status_t st = cgpu_cuda_check(cgpu_cuda_release_signal(&a, stream), "release signal");
    return CGPU_OK == st ? cgpu_cuda_stream_sync(stream) : st;
}

bool cgpu_stage_bufs_get(int device, cgpu_stage_bufs_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < nspares; ++i) {
        if (spares[i].device == device) {
            *out = spares[i];
            spares[i] = spares[--nspares];
            pthread_mutex_unlock(&pool_lock);
            return true;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return false;
}

static void stage_bufs_free(cgpu_stage_bufs_t *b)
{
    cgpu_cuda_free(b->scratch);
    cgpu_cuda_host_free(b->pinned);
    memset(b, 0, sizeof(*b));
}

void cgpu_stage_bufs_put(cgpu_stage_bufs_t *b)
{
    if (NULL == b->scratch && NULL == b->pinned) {
        return;
    }
    const size_t cap = (size_t) cgpu_engine_config()->cuda_inbox_pool;
    if (b->scratch_bytes <= CGPU_STAGE_POOL_MAX_BYTES &&
        b->pinned_bytes <= CGPU_STAGE_POOL_MAX_BYTES) {
        pthread_mutex_lock(&pool_lock);
        if (nspares < cap) {
            cgpu_stage_bufs_t *grown = realloc(spares, (nspares + 1) * sizeof(*grown));
            if (NULL != grown) {
                spares = grown;
                spares[nspares++] = *b;
                pthread_mutex_unlock(&pool_lock);
                memset(b, 0, sizeof(*b));
                return;
            }
        }
        pthread_mutex_unlock(&pool_lock);
    }
    stage_bufs_free(b);
}

void cgpu_cuda_pool_fini(void)
{
    pthread_mutex_lock(&pool_lock);
    for (size_t i = 0; i < nipc; ++i) {
        cgpu_cuda_ipc_close(ipc[i].ptr);
    }
    free(ipc);
    ipc = NULL;
    nipc = ipc_cap = 0;
    for (size_t i = 0; i < npool; ++i) {
        cgpu_cuda_free(pool[i].ptr);
    }
    free(pool);
    pool = NULL;
    npool = 0;
    for (size_t i = 0; i < nspares; ++i) {
        stage_bufs_free(&spares[i]);
    }
    free(spares);
    spares = NULL;
    nspares = 0;
    pthread_mutex_unlock(&pool_lock);
}

#endif /* CGPU_HAVE_CUDA */
