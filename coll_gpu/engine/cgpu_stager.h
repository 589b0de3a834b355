/*
 * coll/gpu engine: stagers and pinned host memory for the paths through host copies.
 */
#ifndef CGPU_STAGER_H
#define CGPU_STAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Stagers: pinned host slots and a copy stream for pipelining a collective through host
 * memory (the glue's staged path). cgpu_stager_get takes one (from a small pool) whose
 * stream starts after the work queued on the default stream; copies are queued in order;
 * mark(i) remembers how far the queue reached, wait(i) blocks until there; finish waits for
 * everything; put gives it back. Without a usable GPU, slots are malloc'd and copies happen
 * at once. cgpu_engine_fini drains the pool.
 */
typedef struct cgpu_stager cgpu_stager_t;
cgpu_status_t cgpu_stager_get(size_t slot_bytes, int nslots, cgpu_stager_t **out);
void *cgpu_stager_slot(const cgpu_stager_t *s, int i);
/* Memory of at least @p bytes on the stager's device (malloc'd without a GPU), kept with
 * the stager while it is pooled; a larger request replaces it once the queue is drained. */
cgpu_status_t cgpu_stager_scratch(cgpu_stager_t *s, size_t bytes, void **out);
cgpu_status_t cgpu_stager_copy(cgpu_stager_t *s, void *dst, const void *src, size_t bytes);
cgpu_status_t cgpu_stager_mark(cgpu_stager_t *s, int i);
cgpu_status_t cgpu_stager_wait(cgpu_stager_t *s, int i);
cgpu_status_t cgpu_stager_finish(cgpu_stager_t *s);
/* gives s back to the pool, which keeps the most recently given back stagers (a few) */
void cgpu_stager_put(cgpu_stager_t **s);
void cgpu_stager_pool_drain(void);
/* how many stagers were made so far (tests: whether the pool reused one) */
unsigned long cgpu_stager_created(void);

/* Host memory that copies to and from device memory run fastest with: pinned (*pinned set)
 * when a GPU is usable, else malloc'd. cgpu_engine_host_free takes the same flag; a pinned
 * release waits for no collective kernel (deferred while one is in flight). */
cgpu_status_t cgpu_engine_host_alloc(size_t bytes, void **out, bool *pinned);
void cgpu_engine_host_free(void *p, bool pinned);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_STAGER_H */
