/*
 * coll/gpu engine: the pool of pinned host blocks (cgpu_host_pool.h).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "cgpu_host_pool.h"
#include "cgpu_stager.h"

/* a pooled block's memory starts GUARD bytes into its allocation, so that a block handed to
 * free() by mistake aborts at once instead of being reused after it */
enum { MIN_BLOCK = 65536, GUARD = 64 };

typedef struct host_block {
    char *base;   /* as allocated */
    char *mem;    /* NULL while being allocated */
    size_t bytes; /* 0: a free entry */
    bool pinned;
    bool busy;
} host_block_t;

static host_block_t blocks[CGPU_HOST_POOL_BLOCKS];
static size_t kept; /* bytes in blocks */
static size_t cap;
static bool draining; /* engine end: a block given back is freed, not kept */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void cgpu_host_pool_set_cap(size_t bytes)
{
    pthread_mutex_lock(&lock);
    cap = bytes;
    draining = false;
    pthread_mutex_unlock(&lock);
}

void *cgpu_host_pool_get(size_t bytes)
{
    size_t size = MIN_BLOCK;
    while (size < bytes && size <= SIZE_MAX / 4) {
        size *= 2;
    }
    pthread_mutex_lock(&lock);
    int best = -1, empty = -1, nspare = 0;
    size_t spare = 0; /* bytes of free blocks smaller than the new size */
    for (int i = 0; i < CGPU_HOST_POOL_BLOCKS; ++i) {
        const host_block_t *b = &blocks[i];
        const bool free_block = !b->busy && NULL != b->mem;
        if (0 == b->bytes) {
            empty = empty < 0 ? i : empty;
        } else if (free_block && b->bytes >= bytes && (best < 0 || b->bytes < blocks[best].bytes)) {
            best = i;
        }
        if (free_block && b->bytes < size) {
            spare += b->bytes;
            ++nspare;
        }
    }
    char *mem = NULL;
    host_block_t gone[CGPU_HOST_POOL_BLOCKS];
    int ngone = 0;
    /* none freed unless freeing them all would make room */
    if (best < 0 && !draining && size >= bytes && kept - spare + size <= cap &&
        (empty >= 0 || nspare > 0)) {
        /* room for the new size: free blocks smaller than it go, smallest first (they
         * cannot serve this request, and the larger block serves theirs), so calls of
         * growing sizes end with large blocks instead of a table full of small ones that
         * sends every larger call to malloc */
        while (empty < 0 || kept + size > cap) {
            int victim = -1;
            for (int i = 0; i < CGPU_HOST_POOL_BLOCKS; ++i) {
                const host_block_t *b = &blocks[i];
                if (NULL != b->mem && !b->busy && b->bytes < size &&
                    (victim < 0 || b->bytes < blocks[victim].bytes)) {
                    victim = i;
                }
            }
            if (victim < 0) {
                break;
            }
            gone[ngone++] = blocks[victim];
            kept -= blocks[victim].bytes;
            blocks[victim] = (host_block_t){0};
            empty = empty < 0 ? victim : empty;
        }
    }
    if (best >= 0) {
        blocks[best].busy = true;
        mem = blocks[best].mem;
    } else if (empty >= 0 && !draining && size >= bytes && kept + size <= cap) {
        /* reserved under the lock, allocated outside it: pinning takes milliseconds */
        host_block_t *b = &blocks[empty];
        b->busy = true;
        b->bytes = size;
        kept += size;
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < ngone; ++i) {
            cgpu_engine_host_free(gone[i].base, gone[i].pinned);
        }
        ngone = 0;
        void *p = NULL;
        bool pinned = false;
        const bool ok = CGPU_OK == cgpu_engine_host_alloc(size + GUARD, &p, &pinned);
        pthread_mutex_lock(&lock);
        if (ok) {
            b->base = p;
            b->mem = mem = b->base + GUARD;
            b->pinned = pinned;
        } else {
            kept -= size;
            *b = (host_block_t){0};
        }
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < ngone; ++i) {
        cgpu_engine_host_free(gone[i].base, gone[i].pinned);
    }
    return NULL != mem ? mem : malloc(bytes > 0 ? bytes : 1);
}

void cgpu_host_pool_put(void *mem)
{
    if (NULL == mem) {
        return;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < CGPU_HOST_POOL_BLOCKS; ++i) {
        host_block_t *b = &blocks[i];
        if (NULL != b->mem && b->mem == mem) {
            b->busy = false;
            if (draining) {
                host_block_t gone = *b;
                kept -= b->bytes;
                *b = (host_block_t){0};
                pthread_mutex_unlock(&lock);
                cgpu_engine_host_free(gone.base, gone.pinned);
                return;
            }
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    pthread_mutex_unlock(&lock);
    free(mem);
}

void cgpu_host_pool_drain(void)
{
    host_block_t gone[CGPU_HOST_POOL_BLOCKS];
    int n = 0;
    pthread_mutex_lock(&lock);
    draining = true;
    for (int i = 0; i < CGPU_HOST_POOL_BLOCKS; ++i) {
        host_block_t *b = &blocks[i];
        if (NULL != b->mem && !b->busy) { /* a busy one belongs to a call still running */
            gone[n++] = *b;
            kept -= b->bytes;
            *b = (host_block_t){0};
        }
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; ++i) {
        cgpu_engine_host_free(gone[i].base, gone[i].pinned);
    }
}

int cgpu_host_pool_blocks(void)
{
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < CGPU_HOST_POOL_BLOCKS; ++i) {
        n += NULL != blocks[i].mem;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

size_t cgpu_host_pool_kept(void)
{
    pthread_mutex_lock(&lock);
    const size_t n = kept;
    pthread_mutex_unlock(&lock);
    return n;
}
