/*
 * coll/gpu engine: communicators whose ranks sit on several nodes.
 *
 * The ranks of one node keep a communicator of their own (shared memory or CUDA IPC,
 * made by cgpu_comm_create like any other, bootstrapped over the proxy); whatever crosses
 * nodes goes through the process's proxy (cgpu_proxy.h), which carries host or device
 * memory. The node of each rank comes from the same table on every rank, so every rank
 * computes the same plan for a call from its arguments alone (DESIGN decision 2).
 *
 * Tags: the top bit set (bit 31 when every rank's proxy takes 32-bit tags, bit 23 when
 * some takes only 24) is this communicator's node-local bootstrap (a round counter);
 * otherwise bits 12-30 (or 12-22) are a phase number and bits 0-11 a step within it.
 * Every rank draws a phase number at the same points of every collective, whether it
 * takes part in that phase or not, so phase numbers agree on every rank. Phase numbers
 * wrap after 2^19 (or 2^11) phases: a rank would have to run that many phases ahead of a
 * peer (a broadcast root's sends complete without waiting) for two to meet; a collective
 * that fails on a rank fails its communicator, since its phases may then be out of step.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "cgpu_comm_internal.h"
#include "cgpu_proxy.h"

struct cgpu_net {
    cgpu_proxy_group_t *group;
    bool proxy_held;
    int nnodes, node;
    int *node_of;     /* [size] node index of every rank (numbered by first appearance) */
    int *node_start;  /* [nnodes + 1] where each node's ranks start in node_ranks */
    int *node_ranks;  /* [size] the ranks of node 0, then node 1, ... each ascending */
    int local_size, local_index;
    int ppn;          /* ranks per node when every node has as many, else 0 */
    int *rail;        /* [nnodes] the rank of each node with this rank's local index (ppn > 1) */
    int *firsts;      /* [nnodes] each node's first rank */
    cgpu_comm_t *local;        /* this node's communicator (NULL when alone on it) */
    cgpu_bootstrap_t local_bs; /* its bootstrap: point-to-point over the proxy */
    uint32_t bs_round;
    uint32_t phase;
    void *order_ev; /* device buffers handed to the proxy wait for the default stream */
    bool wide;      /* every rank's proxy takes 32-bit tags (directed receive): 19-bit phases */
};


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

/* Tag of phase number @p n: bits 12-22 (24-bit tags) or 12-30 (32-bit tags). */
static uint32_t phase_tag(const cgpu_net_t *net, uint32_t n)
{
    return (n & (net->wide ? 0x7ffffu : 0x7ffu)) << 12;
}

static uint32_t next_phase(cgpu_net_t *net)
{
    return phase_tag(net, net->phase++);
}

/* Tag of the node-local bootstrap's round @p n: the top bit of the tag width. */
static uint32_t boot_tag(const cgpu_net_t *net, uint32_t n)
{
    return net->wide ? 0x80000000u | (n & 0x7fffffffu) : 0x800000u | (n & 0x7fffffu);
}

static double wait_limit(void)
{
    return cgpu_engine_config()->ras_timeout_s;
}

static cgpu_status_t wait_reqs(cgpu_comm_t *comm, cgpu_proxy_req_t *reqs, int n)
{
    if (0 == n) {
        return CGPU_OK;
    }
    cgpu_status_t st = cgpu_proxy_waitall(reqs, n, wait_limit(), &comm->ras.abort);
    cgpu_ras_progress(comm);
    return st;
}

/* Rank of node k's i-th rank. */
static int node_rank(const cgpu_net_t *net, int k, int i)
{
    return net->node_ranks[net->node_start[k] + i];
}

static int node_size(const cgpu_net_t *net, int k)
{
    return net->node_start[k + 1] - net->node_start[k];
}

/* ---- the node-local bootstrap: every local peer sends its bytes to every other ---- */

static cgpu_status_t local_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    cgpu_comm_t *comm = ctx;
    cgpu_net_t *net = comm->net;
    const int L = net->local_size, me = net->local_index;
    const uint32_t tag = boot_tag(net, net->bs_round++);
    memcpy((char *) rbuf + (size_t) me * bytes, sbuf, bytes);
    cgpu_proxy_req_t *reqs = calloc(2 * (size_t) L, sizeof(*reqs));
    if (NULL == reqs) {
        return CGPU_ERR_NO_MEMORY;
    }
    cgpu_status_t st = CGPU_OK;
    int n = 0;
    for (int j = 0; j < L && CGPU_OK == st; ++j) {
        if (j != me) {
            st = cgpu_proxy_irecv(net->group, node_rank(net, net->node, j),
                                  (char *) rbuf + (size_t) j * bytes, bytes, tag, &reqs[n]);
            n += CGPU_OK == st;
        }
    }
    for (int j = 0; j < L && CGPU_OK == st; ++j) {
        if (j != me) {
            st = cgpu_proxy_isend(net->group, node_rank(net, net->node, j), sbuf, bytes, tag,
                                  &reqs[n]);
            n += CGPU_OK == st;
        }
    }
    cgpu_status_t w = wait_reqs(comm, reqs, n);
    free(reqs);
    return CGPU_OK != st ? st : w;
}

static cgpu_status_t local_barrier(void *ctx)
{
    cgpu_comm_t *comm = ctx;
    char one = 1, *all = malloc((size_t) comm->net->local_size);
    if (NULL == all) {
        return CGPU_ERR_NO_MEMORY;
    }
    cgpu_status_t st = local_allgather(ctx, &one, all, 1);
    free(all);
    return st;
}

/* ---- set-up and teardown ---- */

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
    net->local_size = node_size(net, net->node);
    net->ppn = net->local_size;
    for (int k = 0; k < nnodes; ++k) {
        if (node_size(net, k) != net->ppn) {
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
        net->rail[k] = net->ppn > 1 ? node_rank(net, k, net->local_index) : -1;
        net->firsts[k] = node_rank(net, k, 0);
    }
    return CGPU_OK;
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
            local = cgpu_proxy_group_create(bs->rank, bs->size, addrs, bs->context_id,
                                            &comm->prof, &net->group);
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
            net->local_bs.allgather = local_allgather;
            net->local_bs.barrier = local_barrier;
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

/* ---- inter-node building blocks ---- */

static bool on_device(const void *p)
{
    int dev;
    return NULL != p && CGPU_BUF_HOST != cgpu_buf_kind(p, &dev);
}

/*
 * Ring allreduce (reduce-scatter, then allgather) of host memory among @p members (ranks,
 * ring order), this rank being members[me], under the tags of phase @p ph. @p tmp holds
 * count / nm + 1 elements (the segment received at each step).
 */
static cgpu_status_t ring_allreduce_host(cgpu_comm_t *comm, const int *members, int nm, int me,
                                         char *buf, size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                         uint32_t ph, char *tmp)
{
    cgpu_net_t *net = comm->net;
    const size_t es = cgpu_dtype_size(dt);
    const int right = members[(me + 1) % nm], left = members[(me + nm - 1) % nm];
#define SEG_LO(i) (count * (size_t) (i) / (size_t) nm)
#define SEG_N(i) (SEG_LO((i) + 1) - SEG_LO(i))
    cgpu_status_t st = CGPU_OK;
    for (int s = 0; s < 2 * (nm - 1) && CGPU_OK == st; ++s) {
        const bool rs = s < nm - 1;
        const int k = rs ? s : s - (nm - 1);
        const int send_i = rs ? (me - k + nm) % nm : (me + 1 - k + nm) % nm;
        const int recv_i = rs ? (me - k - 1 + 2 * nm) % nm : (me - k + nm) % nm;
        cgpu_proxy_req_t req[2];
        int n = 0;
        st = cgpu_proxy_irecv(net->group, left, rs ? tmp : buf + SEG_LO(recv_i) * es,
                              SEG_N(recv_i) * es, ph | (uint32_t) (s & 0xfff), &req[n]);
        n += CGPU_OK == st;
        if (CGPU_OK == st) {
            st = cgpu_proxy_isend(net->group, right, buf + SEG_LO(send_i) * es,
                                  SEG_N(send_i) * es, ph | (uint32_t) (s & 0xfff), &req[n]);
            n += CGPU_OK == st;
        }
        cgpu_status_t w = wait_reqs(comm, req, n);
        st = CGPU_OK != st ? st : w;
        if (CGPU_OK == st && rs && SEG_N(recv_i) > 0) {
            char *d = buf + SEG_LO(recv_i) * es;
            if (0 != cgpu_reduce_host(dt, op, d, d, tmp, SEG_N(recv_i))) {
                st = CGPU_ERR_INVALID_ARG;
            }
        }
    }
#undef SEG_LO
#undef SEG_N
    return st;
}

/* A phase failed in a way that leaves the communicator unusable (a peer did not answer
 * within coll_gpu_ras_timeout, or the watchdog aborted): the other phases are skipped,
 * since their peers fail the same way. Other failures (no memory) still take part. */
static bool fatal(const cgpu_comm_t *comm, cgpu_status_t st)
{
    return CGPU_ERR_TIMEOUT == st || CGPU_ERR_PEER == st || CGPU_ERR_STATE == st ||
           0 != atomic_load_explicit(&comm->ras.abort, memory_order_relaxed);
}

/* The status of a collective whose later phases were skipped by fatal(): never OK. */
static cgpu_status_t skipped(const cgpu_comm_t *comm, cgpu_status_t st)
{
    (void) comm;
    return CGPU_OK != st ? st : CGPU_ERR_TIMEOUT; /* the watchdog aborted it */
}

/* A collective across nodes that failed on this rank may have left its phase numbers out
 * of step with its peers' (a phase skipped, an allocation that failed before a draw): the
 * communicator is failed, so its next calls return errors instead of mismatching. */
static cgpu_status_t finish(cgpu_comm_t *comm, cgpu_status_t st)
{
    if (CGPU_OK != st) {
        atomic_store(&comm->ras.state, CGPU_RAS_FAILED);
    }
    return st;
}

/* Memory the inter-node reduction must stage through host slots (device memory; host
 * memory too under the test switch coll_gpu_stage_host_buffers). */
static bool staged(const void *p)
{
    return on_device(p) || cgpu_engine_config()->stage_host_buffers;
}

/*
 * The same on memory of any kind, in pieces of coll_gpu_proxy_bounce_bytes (the same cut on
 * every rank, whatever its memory, so every rank draws as many phases). Device memory is
 * pipelined through three pinned slots of a stager: piece i+1 is copied in and piece i-1
 * copied back while the ring works on piece i.
 */
static cgpu_status_t ring_allreduce_any(cgpu_comm_t *comm, const int *members, int nm, int me,
                                        void *buf, size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    cgpu_net_t *net = comm->net;
    const size_t es = cgpu_dtype_size(dt);
    size_t pe = cgpu_engine_config()->proxy_bounce_bytes / es;
    pe = pe > 0 ? pe : 1;
    const size_t npieces = 0 == count ? 0 : (count + pe - 1) / pe;
    const uint32_t ph0 = net->phase;
    net->phase += (uint32_t) npieces; /* every rank, member or not */
#define PIECE_PH(i) phase_tag(net, ph0 + (uint32_t) (i))
    if (me < 0 || nm < 2 || 0 == count) {
        return CGPU_OK;
    }
    char *b = buf;
    cgpu_status_t st = CGPU_OK;
    cgpu_stager_t *sg = NULL;
    if (staged(buf) && CGPU_OK != cgpu_stager_get(pe * es, 3, &sg)) {
        sg = NULL; /* no slots: take part on zeros so no peer waits, and report */
        st = CGPU_ERR_NO_MEMORY;
    }
    char *zeros = NULL;
    if (staged(buf) && NULL == sg) {
        zeros = calloc(pe, es);
    }
    /* the segment received at each step of any piece */
    char *tmp = malloc(((pe < count ? pe : count) / (size_t) nm + 1) * es);
    if (NULL == tmp || (staged(buf) && NULL == sg && NULL == zeros)) {
        free(zeros); /* peers time out: nothing else is possible without memory */
        free(tmp);
        cgpu_stager_put(&sg);
        return CGPU_ERR_NO_MEMORY;
    }
#define PIECE_N(i) ((i) + 1 < npieces ? pe : count - (i) * pe)
    if (NULL != sg) {
        st = cgpu_stager_copy(sg, cgpu_stager_slot(sg, 0), b, PIECE_N(0) * es);
        st = CGPU_OK == st ? cgpu_stager_mark(sg, 0) : st;
    }
    for (size_t i = 0; i < npieces && !fatal(comm, st); ++i) {
        const size_t n = PIECE_N(i);
        char *work = b + i * pe * es;
        if (NULL != sg) {
            const int k = (int) (i % 3), k1 = (int) ((i + 1) % 3);
            if (CGPU_OK == st && i + 1 < npieces) { /* in order after piece i-2's copy back */
                st = cgpu_stager_copy(sg, cgpu_stager_slot(sg, k1), b + (i + 1) * pe * es,
                                      PIECE_N(i + 1) * es);
                st = CGPU_OK == st ? cgpu_stager_mark(sg, k1) : st;
            }
            if (CGPU_OK == st) {
                st = cgpu_stager_wait(sg, k); /* piece i is in its slot */
            }
            work = cgpu_stager_slot(sg, k);
        } else if (NULL != zeros) {
            memset(zeros, 0, n * es);
            work = zeros;
        }
        cgpu_status_t rs = ring_allreduce_host(comm, members, nm, me, work, n, dt, op,
                                               PIECE_PH(i), tmp);
        st = CGPU_OK != st ? st : rs;
        if (NULL != sg && CGPU_OK == st) {
            st = cgpu_stager_copy(sg, b + i * pe * es, work, n * es);
            st = CGPU_OK == st ? cgpu_stager_mark(sg, (int) (i % 3)) : st;
        }
    }
    if (NULL != sg) {
        cgpu_status_t f = cgpu_stager_finish(sg);
        st = CGPU_OK != st ? st : f;
        cgpu_stager_put(&sg);
    }
    free(zeros);
    free(tmp);
#undef PIECE_N
#undef PIECE_PH
    return st;
}

/*
 * The proxy reads device memory with its own copies (or the NIC does, with FI_HMEM): what
 * the caller queued on the default stream (and the blocking streams) that writes a buffer
 * must be done first. On a failure the rank still takes part (its peers would wait).
 */
static cgpu_status_t after_default_stream(cgpu_net_t *net, const void *a, const void *b)
{
    if (!on_device(a) && !on_device(b)) {
        return CGPU_OK;
    }
    cgpu_status_t st = NULL == net->order_ev ? cgpu_cuda_event_create(&net->order_ev) : CGPU_OK;
    return CGPU_OK == st ? cgpu_cuda_default_stream_wait_host(net->order_ev) : st;
}

/* Binomial broadcast among @p members (members[0] is the source), of any memory. */
/* Member @p v of the broadcast tree between nodes: the root, then the first rank of every
 * other node in node order from the root's node @p rn. */
static int tree_member(const cgpu_net_t *net, int root, int rn, int v)
{
    return 0 == v ? root : net->firsts[(rn + v) % net->nnodes];
}

static cgpu_status_t tree_bcast(cgpu_comm_t *comm, int root, int rn, int me, void *buf,
                                size_t bytes)
{
    const int nm = comm->net->nnodes;
    const uint32_t ph = next_phase(comm->net);
    if (me < 0 || nm < 2 || 0 == bytes) {
        return CGPU_OK;
    }
    cgpu_net_t *net = comm->net;
    cgpu_status_t st = CGPU_OK;
    int mask = 1;
    while (mask < nm) {
        if (me & mask) {
            cgpu_proxy_req_t req;
            st = cgpu_proxy_irecv(net->group, tree_member(net, root, rn, me - mask), buf, bytes,
                                  ph, &req);
            if (CGPU_OK == st) {
                st = wait_reqs(comm, &req, 1);
            }
            break;
        }
        mask <<= 1;
    }
    cgpu_proxy_req_t reqs[32];
    int n = 0;
    for (mask >>= 1; mask > 0 && CGPU_OK == st; mask >>= 1) {
        if (me + mask < nm) {
            st = cgpu_proxy_isend(net->group, tree_member(net, root, rn, me + mask), buf, bytes,
                                  ph, &reqs[n]);
            n += CGPU_OK == st;
        }
    }
    cgpu_status_t w = wait_reqs(comm, reqs, n);
    return CGPU_OK != st ? st : w;
}

/* ---- collectives ---- */


/* Allreduce without entering the communicator (the callers did). */
static cgpu_status_t net_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                   cgpu_dtype_t dt, cgpu_op_t op)
{
    cgpu_net_t *net = comm->net;
    const size_t es = cgpu_dtype_size(dt);
    cgpu_status_t st = CGPU_OK, s2;
    if (net->ppn > 1 && count >= (size_t) net->ppn && 0 == count % (size_t) net->ppn) {
        /* node reduce-scatter, a ring per local index across nodes, node allgather */
        atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_HIERARCHICAL, memory_order_relaxed);
        const size_t blk = count / (size_t) net->ppn;
        char *mine = (char *) rbuf + (size_t) net->local_index * blk * es;
        if (sbuf != rbuf) {
            st = cgpu_reduce_scatter_block(net->local, sbuf, mine, blk, dt, op);
        } else {
            st = cgpu_reduce_scatter_block(net->local, NULL, rbuf, blk, dt, op);
            if (CGPU_OK == st && 0 != net->local_index) {
                st = cgpu_engine_copy(mine, rbuf, blk * es); /* the result came to the front */
            }
        }
        s2 = fatal(comm, st) ? skipped(comm, st)
                             : ring_allreduce_any(comm, net->rail, net->nnodes, net->node, mine,
                                                  blk, dt, op);
        st = CGPU_OK != st ? st : s2;
        s2 = fatal(comm, st) ? skipped(comm, st) : cgpu_allgather(net->local, NULL, rbuf, blk * es);
        st = CGPU_OK != st ? st : s2;
    } else {
        /* node reduce to its first rank, a ring of first ranks, node broadcast */
        atomic_store_explicit(&comm->ras.alg, net->local_size > 1 ? CGPU_RAS_ALG_HIERARCHICAL
                                                                  : CGPU_RAS_ALG_RING,
                              memory_order_relaxed);
        if (net->local_size > 1) {
            const bool root = 0 == net->local_index;
            st = cgpu_reduce(net->local, (root && sbuf == rbuf) ? NULL : sbuf, rbuf, count, dt,
                             op, 0);
        } else if (sbuf != rbuf) {
            st = cgpu_engine_copy(rbuf, sbuf, count * es);
        }
        s2 = fatal(comm, st) ? skipped(comm, st)
                             : ring_allreduce_any(comm, net->firsts, net->nnodes,
                                                  0 == net->local_index ? net->node : -1, rbuf,
                                                  count, dt, op);
        st = CGPU_OK != st ? st : s2;
        if (net->local_size > 1) {
            s2 = fatal(comm, st) ? skipped(comm, st) : cgpu_bcast(net->local, rbuf, count * es, 0);
            st = CGPU_OK != st ? st : s2;
        }
    }
    return st;
}

cgpu_status_t cgpu_net_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                 cgpu_dtype_t dt, cgpu_op_t op)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    cgpu_coll_prof_begin(comm, "allreduce", count, cgpu_dtype_name(dt), cgpu_op_name(op), bytes,
                         "hierarchical");
    cgpu_status_t st = net_allreduce(comm, sbuf, rbuf, count, dt, op);
    cgpu_coll_prof_end(comm);
    return finish(comm, st);
}

cgpu_status_t cgpu_net_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    cgpu_net_t *net = comm->net;
    const int n = comm->size, me = comm->rank;
    const size_t total = bytes * (size_t) n;
    cgpu_coll_prof_begin(comm, "alltoall", bytes, "byte", "", total, "proxy");
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_PROXY, memory_order_relaxed);
    const uint32_t ph = next_phase(net);
    cgpu_status_t st = after_default_stream(net, sbuf, rbuf);
    const char *src = sbuf;
    char *copy = NULL;
    if (CGPU_OK == st && sbuf == rbuf) { /* in place: what is sent must not be overwritten */
        copy = malloc(total);
        st = NULL == copy ? CGPU_ERR_NO_MEMORY : cgpu_engine_copy(copy, rbuf, total);
        src = copy;
    }
    if (CGPU_OK == st) {
        st = cgpu_engine_copy((char *) rbuf + (size_t) me * bytes, src + (size_t) me * bytes,
                              bytes);
    }
    char *scratch = NULL;
    if (CGPU_OK != st) { /* still exchange (zeros), so no peer waits forever */
        free(copy);
        copy = NULL;
        src = scratch = calloc(1, total);
    }
    /* pairwise rounds, a window at a time: bounded in-flight operations per process */
    const int inflight = cgpu_engine_config()->proxy_max_inflight;
    int window = inflight / 2 > 0 ? inflight / 2 : 1;
    window = window < n - 1 ? window : n - 1;
    cgpu_proxy_req_t *reqs = calloc(2 * (size_t) (window > 0 ? window : 1), sizeof(*reqs));
    if (NULL == reqs || NULL == src) {
        free(reqs);
        free(copy);
        free(scratch);
        cgpu_coll_prof_end(comm);
        return finish(comm, CGPU_ERR_NO_MEMORY);
    }
    cgpu_status_t err = st;
    st = CGPU_OK;
    for (int k0 = 1; k0 < n && CGPU_OK == st; k0 += window) {
        int m = 0;
        for (int k = k0; k < k0 + window && k < n && CGPU_OK == st; ++k) {
            const int from = (me - k + n) % n, to = (me + k) % n;
            st = cgpu_proxy_irecv(net->group, from,
                                  NULL != scratch ? scratch : (char *) rbuf + (size_t) from * bytes,
                                  bytes, ph, &reqs[m]);
            m += CGPU_OK == st;
            if (CGPU_OK == st) {
                st = cgpu_proxy_isend(net->group, to, src + (size_t) to * bytes, bytes, ph,
                                      &reqs[m]);
                m += CGPU_OK == st;
            }
        }
        cgpu_status_t w = wait_reqs(comm, reqs, m);
        st = CGPU_OK != st ? st : w;
    }
    free(reqs);
    free(copy);
    free(scratch);
    cgpu_coll_prof_end(comm);
    return finish(comm, CGPU_OK != err ? err : st);
}

cgpu_status_t cgpu_net_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root)
{
    cgpu_net_t *net = comm->net;
    cgpu_coll_prof_begin(comm, "bcast", bytes, "byte", "", bytes, "hierarchical");
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_HIERARCHICAL, memory_order_relaxed);
    /* between nodes: the root, and the first rank of every other node (tree_member) */
    const int rn = net->node_of[root], N = net->nnodes;
    int me = -1, local_root = 0;
    if (comm->rank == root) {
        me = 0;
    } else if (net->node != rn && 0 == net->local_index) {
        me = (net->node - rn + N) % N;
    }
    if (net->node == rn) {
        for (int i = 0; i < net->local_size; ++i) {
            if (node_rank(net, rn, i) == root) {
                local_root = i;
            }
        }
    }
    cgpu_status_t st = me >= 0 ? after_default_stream(net, buf, NULL) : CGPU_OK;
    cgpu_status_t tb = tree_bcast(comm, root, rn, me, buf, bytes);
    st = CGPU_OK != st ? st : tb;
    if (net->local_size > 1) {
        cgpu_status_t s2 = fatal(comm, st) ? skipped(comm, st)
                                           : cgpu_bcast(net->local, buf, bytes, local_root);
        st = CGPU_OK != st ? st : s2;
    }
    cgpu_coll_prof_end(comm);
    return finish(comm, st);
}

cgpu_status_t cgpu_net_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    cgpu_net_t *net = comm->net;
    const int n = comm->size, me = comm->rank;
    cgpu_coll_prof_begin(comm, "allgather", bytes, "byte", "", bytes * (size_t) n, "proxy");
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_PROXY, memory_order_relaxed);
    const uint32_t ph = next_phase(net);
    char *r = rbuf;
    cgpu_status_t st = after_default_stream(net, sbuf, rbuf);
    if (CGPU_OK == st && NULL != sbuf && sbuf != r + (size_t) me * bytes) {
        st = cgpu_engine_copy(r + (size_t) me * bytes, sbuf, bytes);
    }
    /* a ring over every rank: at step s, block me - s goes right, block me - s - 1 arrives */
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    cgpu_status_t err = st;
    st = CGPU_OK;
    for (int s = 0; s < n - 1 && CGPU_OK == st; ++s) {
        const int sb = (me - s + n) % n, rb = (me - s - 1 + 2 * n) % n;
        cgpu_proxy_req_t req[2];
        int m = 0;
        st = cgpu_proxy_irecv(net->group, left, r + (size_t) rb * bytes, bytes,
                              ph | (uint32_t) (s & 0xfff), &req[m]);
        m += CGPU_OK == st;
        if (CGPU_OK == st) {
            st = cgpu_proxy_isend(net->group, right, r + (size_t) sb * bytes, bytes,
                                  ph | (uint32_t) (s & 0xfff), &req[m]);
            m += CGPU_OK == st;
        }
        cgpu_status_t w = wait_reqs(comm, req, m);
        st = CGPU_OK != st ? st : w;
    }
    cgpu_coll_prof_end(comm);
    return finish(comm, CGPU_OK != err ? err : st);
}

/* Reductions whose output differs from the allreduce's: an allreduce of a host copy. */
static cgpu_status_t allreduce_copy(cgpu_comm_t *comm, const void *in, size_t count,
                                    cgpu_dtype_t dt, cgpu_op_t op, char **out)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    char *h = malloc(bytes > 0 ? bytes : 1);
    cgpu_status_t st = NULL == h ? CGPU_ERR_NO_MEMORY : CGPU_OK;
    if (CGPU_OK == st && NULL != in) {
        st = cgpu_engine_copy(h, in, bytes);
    }
    if (CGPU_OK != st) { /* take part on zeros */
        free(h);
        h = calloc(1, bytes > 0 ? bytes : 1);
        if (NULL == h) {
            return CGPU_ERR_NO_MEMORY;
        }
    }
    cgpu_status_t s2 = net_allreduce(comm, h, h, count, dt, op);
    *out = h;
    return CGPU_OK != st ? st : s2;
}

cgpu_status_t cgpu_net_reduce_scatter_block(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                            size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    const size_t es = cgpu_dtype_size(dt), total = count * (size_t) comm->size;
    cgpu_coll_prof_begin(comm, "reduce_scatter_block", count, cgpu_dtype_name(dt),
                         cgpu_op_name(op), total * es, "hierarchical");
    char *h = NULL;
    cgpu_status_t st = allreduce_copy(comm, NULL != sbuf ? sbuf : rbuf, total, dt, op, &h);
    if (CGPU_OK == st) {
        st = cgpu_engine_copy(rbuf, h + (size_t) comm->rank * count * es, count * es);
    }
    free(h);
    cgpu_coll_prof_end(comm);
    return finish(comm, st);
}

cgpu_status_t cgpu_net_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                              cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    cgpu_coll_prof_begin(comm, "reduce", count, cgpu_dtype_name(dt), cgpu_op_name(op), bytes,
                         "hierarchical");
    char *h = NULL;
    cgpu_status_t st = allreduce_copy(comm, NULL != sbuf ? sbuf : rbuf, count, dt, op, &h);
    if (CGPU_OK == st && comm->rank == root) {
        st = cgpu_engine_copy(rbuf, h, bytes);
    }
    free(h);
    cgpu_coll_prof_end(comm);
    return finish(comm, st);
}
