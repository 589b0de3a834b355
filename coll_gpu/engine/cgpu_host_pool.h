/*
 * coll/gpu engine: host memory for the host copies of device buffers.
 *
 * A device buffer that a host algorithm (the host path, or the previous coll module) works
 * on is copied to host memory and back. From pinned memory those copies run at the link's
 * speed; from malloc'd memory at a fraction of it (2 MiB on an H200 that two processes share:
 * 80 us out and 89 in, against 246 and 201 from malloc'd memory, bench/bench_sliced_copies).
 * Pinning costs milliseconds, so pinned blocks are kept
 * between calls: at most CGPU_HOST_POOL_BLOCKS of them and the cap in all
 * (coll_gpu_stage_pinned_bytes), each a power of two of at least 64 KiB. A request that finds
 * no free block large enough frees smaller free blocks until a new one fits; one that still
 * finds no room (the blocks in use fill the table or the cap) gets malloc'd memory, so the
 * pool never fails a call that malloc would serve. One mutex guards the table; it is never held
 * across a copy, a call into MPI or a wait for a peer.
 */
#ifndef CGPU_HOST_POOL_H
#define CGPU_HOST_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CGPU_HOST_POOL_BLOCKS = 8 };

/** The most pinned bytes kept (0: none); set at engine start, before any call. */
void cgpu_host_pool_set_cap(size_t bytes);
/** Host memory of at least @p bytes: a pooled block, else malloc'd; NULL only when malloc
 * fails. */
void *cgpu_host_pool_get(size_t bytes);
/** Gives back memory from cgpu_host_pool_get (NULL: nothing). */
void cgpu_host_pool_put(void *mem);
/** Frees every block not in use (engine end; blocks in use are freed at their put). */
void cgpu_host_pool_drain(void);
/** Pooled blocks now, and their bytes (tests). */
int cgpu_host_pool_blocks(void);
size_t cgpu_host_pool_kept(void);

#ifdef __cplusplus
}
#endif

#endif
