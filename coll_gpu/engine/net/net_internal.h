/*
 * coll/gpu engine: communicators whose ranks sit on several nodes (private header; the
 * entry points are declared in cgpu_comm_internal.h).
 *
 * The ranks of one node keep a communicator of their own (shared memory or CUDA IPC,
 * made by cgpu_comm_create like any other, bootstrapped over the proxy); whatever crosses
 * nodes goes through the process's proxy (cgpu_proxy.h), which carries host or device
 * memory. The node of each rank comes from the same table on every rank, so every rank
 * computes the same plan for a call from its arguments alone (DESIGN decision 2).
 *   net_comm.c       set-up and teardown: node tables, the proxy group, the node-local part
 *   net_bootstrap.c  the node-local communicator's bootstrap, over the proxy
 *   net_steps.c      the steps between nodes: ring allreduce, tree broadcast, waits and
 *                    the failure notices that name a dead rank to the other nodes
 *   net_coll.c       the collectives, each a plan of node-local and inter-node steps
 *   net_check.c      the call check between nodes, before any of a call's data moves
 *
 * Tags: every bit of the width set is a failure notice (net_steps.c); otherwise the top bit
 * set (bit 31 when every rank's proxy takes 32-bit tags, bit 23 when some takes only 24) is
 * this communicator's node-local bootstrap (a round counter);
 * otherwise bits 12-30 (or 12-22) are a phase number and bits 0-11 a step within it.
 * Every rank draws a phase number at the same points of every collective, whether it
 * takes part in that phase or not, so phase numbers agree on every rank. Phase numbers
 * wrap after 2^19 (or 2^11) phases: a rank would have to run that many phases ahead of a
 * peer (a broadcast root's sends complete without waiting) for two to meet; a collective
 * that fails on a rank fails its communicator, since its phases may then be out of step.
 */
#ifndef CGPU_NET_INTERNAL_H
#define CGPU_NET_INTERNAL_H

#ifndef CGPU_LOG_SUBSYS
#define CGPU_LOG_SUBSYS CGPU_SUB_NET
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_comm_internal.h"
#include "cgpu_proxy.h"

typedef struct cgpu_net_call_rec cgpu_net_call_rec_t;

struct cgpu_net {
    cgpu_proxy_group_t *group;
    bool proxy_held;
    int nnodes, node;
    int *node_of;    /* [size] node index of every rank (numbered by first appearance) */
    int *node_start; /* [nnodes + 1] where each node's ranks start in node_ranks */
    int *node_ranks; /* [size] the ranks of node 0, then node 1, ... each ascending */
    int local_size, local_index;
    int ppn;            /* ranks per node when every node has as many, else 0 */
    int *rail;          /* [nnodes] the rank of each node with this rank's local index (ppn > 1) */
    int *firsts;        /* [nnodes] each node's first rank */
    cgpu_comm_t *local; /* this node's communicator (NULL when alone on it) */
    cgpu_bootstrap_t local_bs; /* its bootstrap: point-to-point over the proxy */
    uint32_t bs_round;
    uint32_t phase;
    void *order_ev; /* device buffers handed to the proxy wait for the default stream */
    bool wide;      /* every rank's proxy takes 32-bit tags (directed receive): 19-bit phases */
    /* the call check between nodes (net_check.c): the ranks this one exchanges its calls
     * with, and room for one call's records, requests and the record standing for each node */
    int *partners;
    int npartners;
    cgpu_net_call_rec_t *check_recs; /* [npartners + 1]: the partners', then this rank's */
    cgpu_proxy_req_t *check_reqs;    /* [2 * npartners] */
    const cgpu_net_call_rec_t **check_of_node; /* [nnodes] */
};

/* Tag of phase number @p n: bits 12-22 (24-bit tags) or 12-30 (32-bit tags). */
static inline uint32_t cgpu_net_phase_tag(const cgpu_net_t *net, uint32_t n)
{
    return (n & (net->wide ? 0x7ffffu : 0x7ffu)) << 12;
}

static inline uint32_t cgpu_net_next_phase(cgpu_net_t *net)
{
    return cgpu_net_phase_tag(net, net->phase++);
}

/* The tag of failure notices: every bit of the width (the bootstrap's rounds skip it). */
static inline uint32_t cgpu_net_notice_tag(const cgpu_net_t *net)
{
    return net->wide ? 0xffffffffu : 0xffffffu;
}

/* Rank of node k's i-th rank. */
static inline int cgpu_net_node_rank(const cgpu_net_t *net, int k, int i)
{
    return net->node_ranks[net->node_start[k] + i];
}

static inline int cgpu_net_node_size(const cgpu_net_t *net, int k)
{
    return net->node_start[k + 1] - net->node_start[k];
}

/* ---- net_bootstrap.c: the node-local communicator's bootstrap (cgpu_bootstrap_t) ---- */

/** Allgather among this node's ranks (@p ctx is the communicator across nodes). */
cgpu_status_t cgpu_net_local_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes);

/** Barrier among this node's ranks. */
cgpu_status_t cgpu_net_local_barrier(void *ctx);

/* ---- net_check.c ---- */

/** The call check's partners and buffers, from the node tables (set-up; freed by _free). */
cgpu_status_t cgpu_net_check_setup(cgpu_net_t *net);
void cgpu_net_check_free(cgpu_net_t *net);

/* ---- net_steps.c ---- */

/**
 * Wait for @p n proxy requests of @p comm within coll_gpu_ras_timeout (the watchdog's abort
 * stops the wait too), then let the RAS see the communicator progress.
 */
cgpu_status_t cgpu_net_wait(cgpu_comm_t *comm, cgpu_proxy_req_t *reqs, int n);

/**
 * Failure notices. A rank of @p comm that found rank @p dead of its node dead tells its
 * partners on other nodes (rings, the call check), who cannot see that process: a partner
 * whose wait on this rank then gives up names @p dead, not this rank (alive, but out of the
 * collective). Small sends, waited for briefly; only after a death.
 */
void cgpu_net_notice_send(cgpu_comm_t *comm, int dead);

/** True when @p st leaves the communicator unusable: later phases are skipped. */
bool cgpu_net_fatal(const cgpu_comm_t *comm, cgpu_status_t st);

/**
 * Ring allreduce of @p count elements at @p buf (any memory) among @p members (ranks, ring
 * order; this rank is members[me], or me < 0 when not a member), in pieces of
 * coll_gpu_proxy_bounce_bytes. Draws one phase per piece on every rank, member or not.
 */
cgpu_status_t cgpu_net_ring_allreduce_any(cgpu_comm_t *comm, const int *members, int nm, int me,
                                          void *buf, size_t count, cgpu_dtype_t dt, cgpu_op_t op);

/** Order the proxy's reads of device buffers @p a, @p b after the default stream's work. */
cgpu_status_t cgpu_net_after_default_stream(cgpu_net_t *net, const void *a, const void *b);

/**
 * Binomial broadcast of @p bytes at @p buf from @p root (on node @p rn) to the first rank
 * of every other node; @p me is this rank's place in that tree, or < 0 when not in it.
 * Draws one phase on every rank.
 */
cgpu_status_t cgpu_net_tree_bcast(cgpu_comm_t *comm, int root, int rn, int me, void *buf,
                                  size_t bytes);

#endif /* CGPU_NET_INTERNAL_H */
