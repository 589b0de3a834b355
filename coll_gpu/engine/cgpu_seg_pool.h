/*
 * coll/gpu engine: node segments reused across communicators of the same processes.
 *
 * Making a segment (a 1.5 MiB file in /dev/shm, its pages reserved, mapped by every peer,
 * then removed) and unmapping it at release are most of what a communicator's set-up and
 * release cost, and split/dup loops pay them every cycle. So a released communicator's own
 * segment stays mapped in its process (up to coll_gpu_shm_pool of them), and so do the
 * peers' segments it mapped (up to 8 times as many no communicator uses).
 *
 * A pooled segment has no name in /dev/shm any more: only processes that still map it can
 * take part. Its owner offers it to a new communicator only when every peer of that
 * communicator mapped it before (the pool keeps who did), and only once every peer of its
 * last communicator said it is done with it: each peer adds one to the segment's released
 * counter when it releases a communicator (cgpu_seg_peer_put), and the owner waits for as
 * many as it had peers. A peer that dropped its copy in the meantime says so in the set-up
 * exchange; the owner then retires that segment and makes a new one (cgpu_comm.c). A
 * segment of a communicator that failed is never reused: its peers may be gone or stopped
 * in the middle of a call. A retired segment is marked in its control block, so that the
 * peers' copies go first when their cache trims.
 *
 * One mutex guards both tables; it is never held across a call into MPI or a wait for a
 * peer.
 */
#ifndef CGPU_SEG_POOL_H
#define CGPU_SEG_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "cgpu_comm_internal.h"

/* processes a pooled segment remembers as mapping it; a communicator with more peers on one
 * node makes a new segment every time */
#define CGPU_SEG_POOL_PIDS 64

/**
 * A segment of @p bytes from this process's pool that every peer of @p comm (its procs, the
 * peers' pids and start times) has mapped before and released since, its control block
 * reset as a new segment's is. False when there is none (then the caller makes one).
 */
bool cgpu_seg_pool_take(const cgpu_comm_t *comm, size_t bytes, cgpu_shm_seg_t *out);

/**
 * The own segment of @p comm, at its release: kept for a later communicator when @p reuse and
 * the pool has room, else retired and unmapped. @p seg is emptied either way.
 */
void cgpu_seg_pool_put(const cgpu_comm_t *comm, cgpu_shm_seg_t *seg, bool reuse);

/**
 * A peer's pooled segment this process still maps under @p name: @p out aliases the mapping
 * (one more user). False when it does not map it any more.
 */
bool cgpu_seg_peer_cached(const char *name, size_t bytes, cgpu_shm_seg_t *out);

/** Map a peer's new segment by @p name (cgpu_shm_attach), kept in the cache once released. */
cgpu_status_t cgpu_seg_peer_attach(const char *name, size_t bytes, cgpu_shm_seg_t *out);

/**
 * Done with a peer's segment: with @p done, tells its owner (its released counter) that this
 * process will not touch it again for the communicator that used it; the mapping stays in
 * the cache, or is unmapped past the cache's size. @p seg is emptied.
 */
void cgpu_seg_peer_put(cgpu_shm_seg_t *seg, bool done);

/** Unmap everything pooled and cached that no communicator uses (cgpu_engine_fini). */
void cgpu_seg_pool_fini(void);

/** Own segments taken from the pool since the process started (pvar, tests). */
uint64_t cgpu_seg_pool_reuses(void);

/** Segments mapped for the pool alone: own ones kept and peers' copies no communicator uses
 * (an atomic load: pvars read it). */
int cgpu_seg_pool_kept(void);

#endif /* CGPU_SEG_POOL_H */
