/*
 * coll/gpu engine, inter-node proxy: the bounce buffers of staged operations.
 *
 * Device memory (and host memory under the test flag CGPU_PROXY_TEST_STAGE_HOST) reaches
 * the provider through pairs of host buffers of one chunk each, so that one buffer is
 * copied while the other is on the wire. A pool of such pairs per direction is allocated at
 * the first staged operation of that direction (on the NUMA node proxy_topo.c chose,
 * registered with CUDA so the copies are DMA). An operation that must start while the pool
 * is taken (its group's only operation of that direction: see "Bounds" in proxy_sched.c)
 * gets a pair of its own, freed with it. Progress thread only.
 */
#include "cgpu_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "proxy_internal.h"

static void *bounce_alloc(size_t bytes)
{
    void *p = NULL;
    if (NULL != cgpu_proxy.topo && NULL != cgpu_proxy.bounce_nodes) {
        p = hwloc_alloc_membind(cgpu_proxy.topo, bytes, cgpu_proxy.bounce_nodes, HWLOC_MEMBIND_BIND,
                                HWLOC_MEMBIND_BYNODESET);
    }
    if (NULL == p && NULL != cgpu_proxy.topo) {
        p = hwloc_alloc(cgpu_proxy.topo, bytes);
    }
    if (NULL == p && NULL == cgpu_proxy.topo) {
        p = malloc(bytes);
    }
    return p;
}

static void bounce_free(void *p, size_t bytes)
{
    if (NULL == p) {
        return;
    }
    if (NULL != cgpu_proxy.topo) {
        hwloc_free(cgpu_proxy.topo, p, bytes);
    } else {
        free(p);
    }
}

void cgpu_proxy_pairs_free(int k)
{
    for (int i = 0; i < cgpu_proxy.npairs[k]; ++i) {
        proxy_pair_t *pp = &cgpu_proxy.pairs[k][i];
        for (int s = 0; s < 2; ++s) {
            if (NULL != pp->ev[s]) {
                cgpu_cuda_event_destroy(pp->ev[s]);
            }
            if (pp->registered) {
                cgpu_cuda_host_unregister(pp->buf[s]);
            }
            bounce_free(pp->buf[s], cgpu_proxy.chunk);
        }
        memset(pp, 0, sizeof(*pp));
    }
    cgpu_proxy.npairs[k] = 0;
}

/* The bounce pool of direction @p k, allocated at its first use. */
cgpu_status_t cgpu_proxy_pairs_alloc(int k)
{
    const int n = cgpu_proxy.cap[k] < PROXY_PAIRS_MAX ? cgpu_proxy.cap[k] : PROXY_PAIRS_MAX;
    const bool cuda = cgpu_cuda_available() && cgpu_proxy.device >= 0;
    bool pinned = cuda;

    for (int i = 0; i < n; ++i) {
        proxy_pair_t *pp = &cgpu_proxy.pairs[k][i];
        cgpu_proxy.npairs[k] = i + 1;
        for (int s = 0; s < 2; ++s) {
            pp->buf[s] = bounce_alloc(cgpu_proxy.chunk);
            if (NULL == pp->buf[s]) {
                cgpu_log(CGPU_LOG_WARN, "proxy: cannot allocate a %zu-byte bounce buffer",
                         cgpu_proxy.chunk);
                cgpu_proxy_pairs_free(k);
                return CGPU_ERR_NO_MEMORY;
            }
        }
        if (cuda) {
            pp->registered = CGPU_OK == cgpu_cuda_host_register(pp->buf[0], cgpu_proxy.chunk);
            if (pp->registered &&
                CGPU_OK != cgpu_cuda_host_register(pp->buf[1], cgpu_proxy.chunk)) {
                cgpu_cuda_host_unregister(pp->buf[0]);
                pp->registered = false;
            }
            pinned = pinned && pp->registered;
            if (CGPU_OK != cgpu_cuda_event_create(&pp->ev[0]) ||
                CGPU_OK != cgpu_cuda_event_create(&pp->ev[1])) {
                cgpu_proxy_pairs_free(k);
                return CGPU_ERR_DEVICE;
            }
        }
    }
    char where[48] = "first-touch memory";
    if (cgpu_proxy.bounce_node >= 0) {
        snprintf(where, sizeof(where), "NUMA node %d", cgpu_proxy.bounce_node);
    }
    cgpu_log(CGPU_LOG_INFO, "proxy: bounce buffers for %ss: %d pair(s) of 2 x %zu bytes on %s%s",
             cgpu_proxy_kind_name(k), n, cgpu_proxy.chunk, where,
             cuda ? (pinned ? ", pinned" : ", NOT pinned (cudaHostRegister failed)") : "");
    return CGPU_OK;
}

proxy_pair_t *cgpu_proxy_pair_get(int k)
{
    for (int i = 0; i < cgpu_proxy.npairs[k]; ++i) {
        if (!cgpu_proxy.pairs[k][i].busy) {
            cgpu_proxy.pairs[k][i].busy = true;
            return &cgpu_proxy.pairs[k][i];
        }
    }
    return NULL;
}

void cgpu_proxy_pair_temp_free(proxy_pair_t *pp)
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
proxy_pair_t *cgpu_proxy_pair_temp(size_t bytes)
{
    proxy_pair_t *pp = calloc(1, sizeof(*pp));
    if (NULL == pp) {
        return NULL;
    }
    pp->temp_bytes = bytes < cgpu_proxy.chunk ? (bytes > 0 ? bytes : 1) : cgpu_proxy.chunk;
    pp->busy = true;
    const bool cuda = cgpu_cuda_available() && cgpu_proxy.device >= 0;
    for (int s = 0; s < 2; ++s) {
        pp->buf[s] = bounce_alloc(pp->temp_bytes);
        if (NULL == pp->buf[s] || (cuda && CGPU_OK != cgpu_cuda_event_create(&pp->ev[s]))) {
            cgpu_proxy_pair_temp_free(pp);
            return NULL;
        }
    }
    return pp;
}
