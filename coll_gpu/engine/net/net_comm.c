/*
 * coll/gpu engine, communicators across nodes: set-up and teardown.
 *
 * cgpu_net_create is collective over the communicator's bootstrap: every rank takes a
 * reference on the proxy and publishes its endpoint name and tag width; all agree on the
 * node tables (from the same node_of on every rank), make the proxy group, and then the
 * ranks of each node make their node-local communicator (net_bootstrap.c). One node's
 * failure is every node's: a communicator that cannot be made on some rank is made on none
 * (it uses the fallback). Teardown undoes this, with one twist for the engine's own
 * finalize (see the orphans below).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "net_internal.h"

/* The engine's own reference on the proxy, taken with the first communicator across nodes
 * and dropped by cgpu_engine_fini: a process that frees its last such communicator and
 * makes another (a split per step) keeps its endpoint, its connections and its address
 * (peers would otherwise collect one address-vector entry per restart, up to the cap). */
static atomic_int proxy_pinned;

/* Node-local communicators whose parent was torn down inside cgpu_engine_fini (which holds
 * the engine's list): released by cgpu_net_shutdown once the list is free again. */
typedef struct orphan {
    cgpu_comm_t *comm;
    struct orphan *next;
} orphan_t;
static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;
static orphan_t *orphans;

void cgpu_net_shutdown(void)
{
    pthread_mutex_lock(&orphan_lock);
    orphan_t *o = orphans;
    orphans = NULL;
    pthread_mutex_unlock(&orphan_lock);
    while (NULL != o) {
        orphan_t *next = o->next;
        (void) cgpu_comm_release(&o->comm);
        free(o);
        o = next;
    }
    if (0 != atomic_exchange(&proxy_pinned, 0)) {
        cgpu_proxy_release();
    }
}

typedef struct net_rec {
    int32_t status;
    uint32_t max_tag; /* the largest tag this rank's proxy takes */
    char addr[CGPU_PROXY_ADDR_BYTES];
} net_rec_t;

static void net_free(cgpu_net_t *net)
{
    if (NULL == net) {
        return;
    }
    if (cgpu_engine_is_up() || NULL == net->local) {
        (void) cgpu_comm_release(&net->local);
    } else {
        /* cgpu_engine_fini, which holds the engine's list: the node-local communicator is
         * on that list (fini frees its resources itself); its release waits for
         * cgpu_net_shutdown */
        orphan_t *o = malloc(sizeof(*o));
        if (NULL != o) {
            o->comm = net->local;
            pthread_mutex_lock(&orphan_lock);
            o->next = orphans;
            orphans = o;
            pthread_mutex_unlock(&orphan_lock);
        }
        net->local = NULL;
    }
    cgpu_cuda_event_destroy(net->order_ev);
    cgpu_proxy_group_destroy(&net->group);
    if (net->proxy_held) {
        cgpu_proxy_release();
    }
    free(net->node_of);
    free(net->node_start);
    free(net->node_ranks);
    free(net->rail);
    free(net->firsts);
    cgpu_net_check_free(net);
    free(net);
}

static cgpu_status_t fill_tables(cgpu_net_t *net, const int *node_of, int nnodes, int size,
                                 int rank)
{
    net->nnodes = nnodes;
    net->node_of = malloc(sizeof(int) * (size_t) size);
    net->node_start = calloc((size_t) nnodes + 1, sizeof(int));
    net->node_ranks = malloc(sizeof(int) * (size_t) size);
    if (NULL == net->node_of || NULL == net->node_start || NULL == net->node_ranks) {
        return CGPU_ERR_NO_MEMORY;
    }
    memcpy(net->node_of, node_of, sizeof(int) * (size_t) size);
    for (int r = 0; r < size; ++r) {
        net->node_start[node_of[r] + 1]++;
    }
    for (int k = 0; k < nnodes; ++k) {
        net->node_start[k + 1] += net->node_start[k];
    }
    int *fill = calloc((size_t) nnodes, sizeof(int));
    if (NULL == fill) {
        return CGPU_ERR_NO_MEMORY;
    }
    for (int r = 0; r < size; ++r) { /* ascending ranks, so each node's list is sorted */
        const int k = node_of[r];
        if (r == rank) {
            net->local_index = fill[k];
        }
        net->node_ranks[net->node_start[k] + fill[k]++] = r;
    }
    free(fill);
    net->node = node_of[rank];
    net->local_size = cgpu_net_node_size(net, net->node);
    net->ppn = net->local_size;
    for (int k = 0; k < nnodes; ++k) {
        if (cgpu_net_node_size(net, k) != net->ppn) {
            net->ppn = 0;
        }
    }
    /* the rings of the allreduce, computed once */
    net->rail = malloc(sizeof(int) * (size_t) nnodes);
    net->firsts = malloc(sizeof(int) * (size_t) nnodes);
    if (NULL == net->rail || NULL == net->firsts) {
        return CGPU_ERR_NO_MEMORY;
    }
    for (int k = 0; k < nnodes; ++k) {
        net->rail[k] = net->ppn > 1 ? cgpu_net_node_rank(net, k, net->local_index) : -1;
        net->firsts[k] = cgpu_net_node_rank(net, k, 0);
    }
    return cgpu_net_check_setup(net);
}

cgpu_status_t cgpu_net_create(cgpu_comm_t *comm, const int *node_of, int nnodes)
{
    const cgpu_bootstrap_t *bs = &comm->bs;
    cgpu_net_t *net = calloc(1, sizeof(*net));
    net_rec_t mine, *all = calloc((size_t) bs->size, sizeof(*all));
    memset(&mine, 0, sizeof(mine));
    cgpu_status_t local = (NULL == net || NULL == all) ? CGPU_ERR_NO_MEMORY : CGPU_OK;
    if (CGPU_OK == local) {
        local = cgpu_proxy_acquire();
        net->proxy_held = (CGPU_OK == local);
        if (CGPU_OK == local && 0 == atomic_exchange(&proxy_pinned, 1) &&
            CGPU_OK != cgpu_proxy_acquire()) {
            atomic_store(&proxy_pinned, 0);
        }
    }
    if (CGPU_OK == local) {
        local = cgpu_proxy_addr(mine.addr);
        mine.max_tag = cgpu_proxy_max_tag();
    }
    mine.status = (int32_t) local;
    if (NULL == all) {
        net_free(net);
        return CGPU_ERR_NO_MEMORY; /* cannot take part in the exchange: the process is dying */
    }
    cgpu_status_t st = CGPU_OK;
    if (CGPU_OK != bs->allgather(bs->ctx, &mine, all, sizeof(mine))) {
        st = CGPU_ERR_BOOTSTRAP;
    }
    for (int i = 0; CGPU_OK == st && i < bs->size; ++i) {
        if (CGPU_OK != all[i].status) {
            st = (cgpu_status_t) all[i].status;
            cgpu_log(CGPU_LOG_INFO,
                     "engine: rank %d cannot use the inter-node proxy (%s); this communicator "
                     "spans %d nodes and uses the fallback",
                     i, cgpu_status_string(st), nnodes);
        }
    }
    char *addrs = NULL;
    if (CGPU_OK == st) {
        net->wide = true; /* the same verdict on every rank, from the same table */
        for (int i = 0; i < bs->size; ++i) {
            net->wide = net->wide && UINT32_MAX == all[i].max_tag;
        }
        local = fill_tables(net, node_of, nnodes, bs->size, bs->rank);
        addrs = malloc((size_t) bs->size * CGPU_PROXY_ADDR_BYTES);
        if (CGPU_OK == local && NULL == addrs) {
            local = CGPU_ERR_NO_MEMORY;
        }
        for (int i = 0; CGPU_OK == local && i < bs->size; ++i) {
            memcpy(addrs + (size_t) i * CGPU_PROXY_ADDR_BYTES, all[i].addr, CGPU_PROXY_ADDR_BYTES);
        }
        if (CGPU_OK == local) {
            local = cgpu_proxy_group_create(bs->rank, bs->size, addrs, bs->context_id, &comm->prof,
                                            &net->group);
        }
        st = cgpu_comm_agree(bs, local);
    }
    free(addrs);
    free(all);
    if (CGPU_OK == st) {
        comm->net = net; /* the local bootstrap below reaches the group through it */
        local = CGPU_OK;
        if (net->local_size > 1) {
            net->local_bs.ctx = comm;
            net->local_bs.rank = net->local_index;
            net->local_bs.size = net->local_size;
            net->local_bs.context_id = bs->context_id;
            net->local_bs.allgather = cgpu_net_local_allgather;
            net->local_bs.barrier = cgpu_net_local_barrier;
            local = cgpu_comm_create(&net->local_bs, &net->local);
            if (CGPU_OK == local) {
                net->local->abort_on_timeout = true;
                net->local->report_ranks = net->node_ranks + net->node_start[net->node];
            }
        }
        st = cgpu_comm_agree(bs, local); /* one node's failure is every node's */
    }
    if (CGPU_OK != st) {
        comm->net = NULL;
        net_free(net);
        return st;
    }
    comm->abort_on_timeout = true;
    cgpu_log(CGPU_LOG_INFO,
             "engine: communicator of %d ranks on %d nodes (node %d, %d rank(s) here%s); "
             "between nodes: proxy over %s%s",
             bs->size, nnodes, net->node, net->local_size,
             net->ppn > 1 ? ", as many on every node" : "", cgpu_proxy_provider(),
             cgpu_proxy_hmem() ? " (device memory direct)" : "");
    return CGPU_OK;
}

void cgpu_net_destroy(cgpu_comm_t *comm)
{
    cgpu_net_t *net = comm->net;
    comm->net = NULL;
    net_free(net);
}

cgpu_comm_t *cgpu_net_local(const cgpu_comm_t *comm, const cgpu_bootstrap_t **bs)
{
    cgpu_net_t *net = comm->net;
    *bs = NULL == net ? NULL : &net->local_bs;
    return NULL == net ? NULL : net->local;
}

void cgpu_net_describe(cgpu_comm_t *comm)
{
    cgpu_net_t *net = comm->net;
    if (NULL != net->local) {
        snprintf(net->local->ras.name, sizeof(net->local->ras.name), "%.40s, node-local part",
                 comm->ras.name);
    }
}

int cgpu_net_transport(const cgpu_comm_t *comm)
{
    const cgpu_net_t *net = comm->net;
    if (NULL == net->local) {
        return CGPU_RAS_TRANSPORT_PROXY;
    }
    return CGPU_BACKEND_CUDA == net->local->backend ? CGPU_RAS_TRANSPORT_PROXY_CUDA_IPC
                                                    : CGPU_RAS_TRANSPORT_PROXY_SHM;
}

int cgpu_net_dead_peer(const cgpu_comm_t *comm, long *pid)
{
    /* the node-local communicator names its peers by their ranks here (report_ranks) */
    return NULL != comm->net && NULL != comm->net->local
               ? cgpu_comm_dead_peer(comm->net->local, pid)
               : -1;
}

int cgpu_net_unanswered(const cgpu_comm_t *comm)
{
    /* the node-local communicator names its peers by their ranks here (report_ranks) */
    return NULL != comm->net && NULL != comm->net->local ? cgpu_comm_unanswered(comm->net->local)
                                                         : -1;
}

void cgpu_net_gave_up(cgpu_comm_t *comm)
{
    cgpu_comm_t *local = NULL != comm->net ? comm->net->local : NULL;
    if (NULL == local || NULL == local->peer_segs || local->resources_freed) {
        return; /* alone on its node: nobody here waits on this rank */
    }
    const int dead = cgpu_comm_dead_peer(comm, NULL);
    const int blamed = dead >= 0 ? dead : cgpu_comm_unanswered(comm);
    int32_t none = 0;
    if (atomic_compare_exchange_strong(&cgpu_ctrl(local, local->rank)->gave_up, &none,
                                       blamed >= 0 ? blamed + 1 : CGPU_GAVE_UP_NOBODY) &&
        dead >= 0) {
        cgpu_net_notice_send(comm, dead); /* the other nodes cannot see that process */
    }
}

void cgpu_net_call_sig(cgpu_comm_t *comm, const cgpu_sig_t *sig)
{
    if (NULL != comm->net && NULL != comm->net->local) {
        comm->net->local->outer_sig = sig;
    }
}
