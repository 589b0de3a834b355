/*
 * coll/gpu engine: device resources shared by the internal communicators of a process.
 *
 * Inbox pool: a released communicator's inbox is kept (up to coll_gpu_cuda_inbox_pool of
 * them) and handed to the next communicator that needs one no larger, with the IPC
 * handle it was exported with. It is reused only once every peer of its last
 * communicator has said it is done with it: each peer, after its last kernel on that
 * communicator completed, adds one to the inbox's release word (a system-scope atomic
 * through its mapping), and the owner waits for the count it expects. Until then no
 * late counter update from a slow peer can land in a new communicator's flags.
 *
 * IPC cache: peers' inboxes mapped once per process, keyed by the handle bytes and
 * refcounted by the communicators using them; unreferenced mappings stay cached (so a
 * reused peer inbox is a hit) up to coll_gpu_cuda_ipc_cache_size, least recently used
 * evicted first.
 *
 * Staging pool: a released communicator's staging buffers (device scratch and pinned host
 * memory, 1 MiB each at set-up) go to the next communicator on the same device, up to
 * coll_gpu_cuda_inbox_pool sets of at most CGPU_STAGE_POOL_MAX_BYTES each: allocating and
 * freeing them (cudaMalloc, cudaHostAlloc, their frees: about 1 ms) would be most of a
 * split/dup cycle.
 *
 * The code is in cuda/pool.c; builds without CUDA get the entries of cuda/stubs.c.
 */
#ifndef CGPU_CUDA_POOL_H
#define CGPU_CUDA_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_status.h"

typedef struct cgpu_inbox {
    char *ptr;
    size_t bytes; /* usable bytes; the release word follows them */
    int device;
    char handle[64]; /* CGPU_CUDA_IPC_HANDLE_BYTES, exported once */
    uint64_t expect; /* release word value at which every peer of its last user is done */
} cgpu_inbox_t;

/** An inbox of at least @p bytes on the current device whose first @p zero_bytes are
 * zero, from the pool or new; @p npeers peers will use it (they release it later). */
cgpu_status_t cgpu_inbox_get(size_t bytes, size_t zero_bytes, int npeers, void *stream,
                             cgpu_inbox_t *out);
/** Give the inbox back (to the pool, or freed when the pool is full). */
void cgpu_inbox_put(cgpu_inbox_t *ib);
/** Tell the owners of these peer inboxes (mapped pointers, NULLs skipped) that this rank
 * is done with them; waits on @p stream. */
cgpu_status_t cgpu_inbox_signal_release(char *const *peer_inbox, const size_t *release_off, int n,
                                        void *stream);

/** Map a peer's inbox (cache hit: no new mapping). */
cgpu_status_t cgpu_ipc_cache_get(const void *handle, void **ptr);
/** Map a peer's allocation identified by its handle and its allocation id (a handle can
 * come back for a new allocation once the old one is freed: the stale mapping, unused, is
 * closed first). Call with no collective of this process in flight (set-up exclusion). */
cgpu_status_t cgpu_ipc_cache_get_id(const void *handle, uint64_t id, void **ptr);
/** Drop one reference taken by cgpu_ipc_cache_get. */
void cgpu_ipc_cache_put(void *ptr);

/** A communicator's staging buffers (either may be NULL). */
typedef struct cgpu_stage_bufs {
    void *scratch; /* device memory of `device` */
    size_t scratch_bytes;
    void *pinned; /* pinned host memory, mapped */
    size_t pinned_bytes;
    int device;
} cgpu_stage_bufs_t;
#define CGPU_STAGE_POOL_MAX_BYTES ((size_t) 4 << 20) /* larger sets are freed, not kept */
/** A pooled set for @p device into @p out (true), or false with @p out zeroed. */
bool cgpu_stage_bufs_get(int device, cgpu_stage_bufs_t *out);
/** Give a set back (pooled, or freed when the pool is full or the set too large); the
 * caller has synchronized every use of it. */
void cgpu_stage_bufs_put(cgpu_stage_bufs_t *b);

/** Counters for the pvars (atomic loads). */
uint64_t cgpu_ipc_cache_hits(void);
uint64_t cgpu_ipc_cache_misses(void);
uint64_t cgpu_ipc_cache_evictions(void);
uint64_t cgpu_inbox_reuses(void);

/** Close every cached mapping and free every pooled inbox and staging set (engine
 * finalize). */
void cgpu_cuda_pool_fini(void);

#endif /* CGPU_CUDA_POOL_H */
