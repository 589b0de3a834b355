/*
 * coll/gpu engine, inter-node proxy: groups and the registry of peers.
 *
 * A group is a communicator's view of the proxy: the endpoint names of its ranks (exchanged
 * by the communicator's bootstrap, cgpu_net.c) and a context id equal on every rank. Groups
 * share the process's peers: a rank of any group is looked up by its endpoint name in one
 * registry, at the first operation that names it, so a process that is a rank of several
 * groups is one peer (one address-vector entry), and at most coll_gpu_proxy_max_peers peers
 * are ever made (CGPU_ERR_NO_RESOURCE past the cap, with a message). The progress thread
 * inserts a peer's address at its first operation (proxy_op.c). Destroying a group with
 * requests in flight cancels them and waits for them first.
 */
#include "cgpu_config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_internal.h"

/* Peers connected (inserted in the address vector) since the proxy started. */
atomic_int cgpu_proxy_nconnected;

/* The registry of peers and the list of live groups (cgpu_proxy.peers, .groups). */
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

int cgpu_proxy_peers(void)
{
    return atomic_load_explicit(&cgpu_proxy_nconnected, memory_order_relaxed);
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
    if (context_id > cgpu_proxy_max_context_id() || (!cgpu_proxy.directed && size > 0x10000)) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: group of %d ranks with context id %u: provider %s carries context ids "
                 "up to %u%s",
                 size, context_id, cgpu_proxy.provider, cgpu_proxy_max_context_id(),
                 cgpu_proxy.directed ? "" : " and groups of 65536 ranks at most");
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
    g->next_live = cgpu_proxy.groups;
    cgpu_proxy.groups = g;
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
    for (cgpu_proxy_group_t **p = &cgpu_proxy.groups; NULL != *p; p = &(*p)->next_live) {
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
        atomic_fetch_add(&cgpu_proxy.cancel_gen, 1);
        cgpu_proxy_wake();
        while (atomic_load_explicit(&g->inflight, memory_order_acquire) > 0) {
            cgpu_proxy_nap_ns(100000);
        }
    }
    free(g->names);
    free(g->peers);
    free(g);
    cgpu_proxy_release();
}

/* Make @p peer of @p g a peer of this process, within coll_gpu_proxy_max_peers. */
cgpu_status_t cgpu_proxy_peer_reserve(cgpu_proxy_group_t *g, int peer)
{
    const unsigned char *name = g->names + (size_t) peer * CGPU_PROXY_ADDR_BYTES;
    cgpu_status_t st = CGPU_OK;

    pthread_mutex_lock(&peer_lock);
    if (NULL != g->peers[peer]) {
        goto out_unlock;
    }
    for (int i = 0; i < cgpu_proxy.npeers; ++i) {
        if (0 == memcmp(cgpu_proxy.peers[i]->name, name, CGPU_PROXY_ADDR_BYTES)) {
            g->peers[peer] = cgpu_proxy.peers[i];
            goto out_unlock;
        }
    }
    if (cgpu_proxy.max_peers > 0 && cgpu_proxy.npeers >= cgpu_proxy.max_peers) {
        cgpu_log(CGPU_LOG_WARN,
                 "proxy: coll_gpu_proxy_max_peers (%d) reached: rank %d of group %u would be "
                 "this process's peer number %d; raise coll_gpu_proxy_max_peers or use an "
                 "algorithm that talks to fewer ranks on other nodes",
                 cgpu_proxy.max_peers, peer, g->context_id, cgpu_proxy.npeers + 1);
        st = CGPU_ERR_NO_RESOURCE;
        goto out_unlock;
    }
    if (cgpu_proxy.npeers == cgpu_proxy.peers_cap) {
        int cap = 0 == cgpu_proxy.peers_cap ? 16 : 2 * cgpu_proxy.peers_cap;
        proxy_peer_t **p = realloc(cgpu_proxy.peers, (size_t) cap * sizeof(*p));
        if (NULL == p) {
            st = CGPU_ERR_NO_MEMORY;
            goto out_unlock;
        }
        cgpu_proxy.peers = p;
        cgpu_proxy.peers_cap = cap;
    }
    proxy_peer_t *e = calloc(1, sizeof(*e));
    if (NULL == e) {
        st = CGPU_ERR_NO_MEMORY;
        goto out_unlock;
    }
    memcpy(e->name, name, CGPU_PROXY_ADDR_BYTES);
    cgpu_proxy.peers[cgpu_proxy.npeers++] = e;
    g->peers[peer] = e;
out_unlock:
    pthread_mutex_unlock(&peer_lock);
    return st;
}

void cgpu_proxy_peers_free(void)
{
    pthread_mutex_lock(&peer_lock);
    for (int i = 0; i < cgpu_proxy.npeers; ++i) {
        free(cgpu_proxy.peers[i]);
    }
    free(cgpu_proxy.peers);
    cgpu_proxy.peers = NULL;
    cgpu_proxy.npeers = cgpu_proxy.peers_cap = 0;
    pthread_mutex_unlock(&peer_lock);
}
