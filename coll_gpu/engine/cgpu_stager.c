/*
 * coll/gpu engine: stagers, the pinned host slots and the copy stream through which the
 * glue pipelines a collective it hands to the previous module (chunk i+1 copied to the host
 * while the previous module works on chunk i, chunk i-1 copied back meanwhile).
 *
 * A stager is taken for one call and given back; given-back stagers stay in a small
 * process-wide pool (their pinned memory is costly to allocate). Without a usable GPU the
 * slots are plain host memory and every copy is a memcpy done at once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "cgpu_engine.h"

enum { STAGER_MAX_SLOTS = 4, STAGER_POOL = 4 };

struct cgpu_stager {
    size_t slot_bytes;
    int nslots;
    bool cuda; /* slots pinned, copies on the stream */
    char *slot[STAGER_MAX_SLOTS];
    void *ev[STAGER_MAX_SLOTS];
    void *stream;
    void *order_ev;
    int device;
    void *scratch; /* device memory (malloc'd without a GPU), kept with the stager */
    size_t scratch_bytes;
    struct cgpu_stager *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cgpu_stager_t *pool; /* most recently given back first */
static int pooled;
static atomic_ulong created; /* stagers made so far (cgpu_stager_created) */

static void scratch_drop(cgpu_stager_t *s)
{
    if (s->cuda) {
        cgpu_cuda_free(s->scratch);
    } else {
        free(s->scratch);
    }
    s->scratch = NULL;
    s->scratch_bytes = 0;
}

static void stager_destroy(cgpu_stager_t *s)
{
    for (int i = 0; i < s->nslots; ++i) {
        if (s->cuda) {
            cgpu_cuda_host_free(s->slot[i]); /* deferred while a kernel is in flight */
            cgpu_cuda_event_destroy(s->ev[i]);
        } else {
            free(s->slot[i]);
        }
    }
    scratch_drop(s);
    if (s->cuda) {
        cgpu_cuda_event_destroy(s->order_ev);
        cgpu_cuda_stream_destroy(s->stream);
    }
    free(s);
}

static cgpu_status_t stager_new(size_t slot_bytes, int nslots, bool cuda, cgpu_stager_t **out)
{
    cgpu_stager_t *s = calloc(1, sizeof(*s));
    if (NULL == s) {
        return CGPU_ERR_NO_MEMORY;
    }
    s->slot_bytes = slot_bytes;
    s->nslots = nslots;
    s->cuda = cuda;
    s->device = cuda ? cgpu_cuda_current_device() : -1;
    cgpu_status_t st = CGPU_OK;
    if (cuda) {
        CGPU_CHECK_GOTO(cgpu_cuda_stream_create(&s->stream, false), st, out_destroy);
        CGPU_CHECK_GOTO(cgpu_cuda_event_create(&s->order_ev), st, out_destroy);
    }
    for (int i = 0; i < nslots; ++i) {
        if (cuda) {
            void *dev;
            CGPU_CHECK_GOTO(cgpu_cuda_host_alloc_mapped((void **) &s->slot[i], &dev, slot_bytes),
                            st, out_destroy);
            CGPU_CHECK_GOTO(cgpu_cuda_event_create(&s->ev[i]), st, out_destroy);
        } else {
            s->slot[i] = malloc(slot_bytes);
            CGPU_REQUIRE_GOTO(NULL != s->slot[i], CGPU_ERR_NO_MEMORY, st, out_destroy);
        }
    }
    atomic_fetch_add_explicit(&created, 1, memory_order_relaxed);
    *out = s;
    return CGPU_OK;

out_destroy: /* what was made so far: stager_destroy skips what is NULL */
    stager_destroy(s);
    return st;
}

unsigned long cgpu_stager_created(void)
{
    return atomic_load_explicit(&created, memory_order_relaxed);
}

cgpu_status_t cgpu_engine_host_alloc(size_t bytes, void **out, bool *pinned)
{
    void *dev;
    *pinned = cgpu_cuda_available() && CGPU_OK == cgpu_cuda_host_alloc_mapped(out, &dev, bytes);
    if (!*pinned) {
        *out = malloc(bytes > 0 ? bytes : 1);
    }
    return NULL != *out ? CGPU_OK : CGPU_ERR_NO_MEMORY;
}

void cgpu_engine_host_free(void *p, bool pinned)
{
    if (pinned) {
        cgpu_cuda_host_free(p);
    } else {
        free(p);
    }
}

cgpu_status_t cgpu_stager_get(size_t slot_bytes, int nslots, cgpu_stager_t **out)
{
    *out = NULL;
    if (0 == slot_bytes || nslots < 1 || nslots > STAGER_MAX_SLOTS) {
        return CGPU_ERR_INVALID_ARG;
    }
    const bool cuda = cgpu_cuda_available();
    const int dev = cuda ? cgpu_cuda_current_device() : -1;
    pthread_mutex_lock(&pool_lock);
    for (cgpu_stager_t **pp = &pool; NULL != *pp; pp = &(*pp)->next) {
        cgpu_stager_t *s = *pp;
        if (s->slot_bytes == slot_bytes && s->nslots >= nslots && s->device == dev) {
            *pp = s->next;
            --pooled;
            pthread_mutex_unlock(&pool_lock);
            s->next = NULL;
            *out = s;
            goto ordered;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    cgpu_status_t st = stager_new(slot_bytes, nslots, cuda, out);
    if (CGPU_OK != st) {
        return st;
    }
ordered:
    /* the device data was written through the application's default stream */
    return (*out)->cuda ? cgpu_cuda_stream_after_default((*out)->stream, (*out)->order_ev)
                        : CGPU_OK;
}

void *cgpu_stager_slot(const cgpu_stager_t *s, int i)
{
    return s->slot[i];
}

cgpu_status_t cgpu_stager_scratch(cgpu_stager_t *s, size_t bytes, void **out)
{
    *out = NULL;
    if (s->scratch_bytes < bytes) {
        /* the stream's copies may still read the old one */
        cgpu_status_t st = cgpu_stager_finish(s);
        if (CGPU_OK != st) {
            return st;
        }
        scratch_drop(s);
        if (s->cuda) {
            st = cgpu_cuda_malloc(&s->scratch, bytes, NULL);
        } else {
            s->scratch = malloc(bytes);
            st = NULL == s->scratch ? CGPU_ERR_NO_MEMORY : CGPU_OK;
        }
        if (CGPU_OK != st) {
            s->scratch = NULL;
            return st;
        }
        s->scratch_bytes = bytes;
    }
    *out = s->scratch;
    return CGPU_OK;
}

cgpu_status_t cgpu_stager_copy(cgpu_stager_t *s, void *dst, const void *src, size_t bytes)
{
    if (0 == bytes) {
        return CGPU_OK;
    }
    if (!s->cuda) {
        memcpy(dst, src, bytes);
        return CGPU_OK;
    }
    /* on a time-sliced GPU a small host-to-device run would wait for a time slice */
    return cgpu_cuda_time_sliced() ? cgpu_cuda_copy_engine_async(dst, src, bytes, s->stream)
                                   : cgpu_cuda_copy_async(dst, src, bytes, s->stream);
}

cgpu_status_t cgpu_stager_mark(cgpu_stager_t *s, int i)
{
    return s->cuda ? cgpu_cuda_event_record(s->ev[i], s->stream) : CGPU_OK;
}

cgpu_status_t cgpu_stager_wait(cgpu_stager_t *s, int i)
{
    return s->cuda ? cgpu_cuda_event_sync(s->ev[i]) : CGPU_OK;
}

cgpu_status_t cgpu_stager_finish(cgpu_stager_t *s)
{
    return s->cuda ? cgpu_cuda_stream_sync(s->stream) : CGPU_OK;
}

void cgpu_stager_put(cgpu_stager_t **sp)
{
    cgpu_stager_t *s = *sp;
    *sp = NULL;
    if (NULL == s) {
        return;
    }
    (void) cgpu_stager_finish(s);
    /* the one given back is kept; a full pool loses its least recently given back stager,
     * so a program that moves between more sizes than the pool holds still reuses the one
     * it is working with (pinned memory costs milliseconds to make) */
    cgpu_stager_t *old = NULL;
    pthread_mutex_lock(&pool_lock);
    s->next = pool;
    pool = s;
    if (++pooled > STAGER_POOL) {
        cgpu_stager_t **pp = &pool;
        while (NULL != (*pp)->next) {
            pp = &(*pp)->next;
        }
        old = *pp;
        *pp = NULL;
        --pooled;
    }
    pthread_mutex_unlock(&pool_lock);
    if (NULL != old) {
        stager_destroy(old);
    }
}

void cgpu_stager_pool_drain(void)
{
    pthread_mutex_lock(&pool_lock);
    cgpu_stager_t *s = pool;
    pool = NULL;
    pooled = 0;
    pthread_mutex_unlock(&pool_lock);
    while (NULL != s) {
        cgpu_stager_t *next = s->next;
        stager_destroy(s);
        s = next;
    }
}
