/*
 * coll/gpu engine, communicators across nodes: the call check between nodes.
 *
 * On one node every rank reads every rank's call from shared memory (cgpu_call.c). Across
 * nodes no memory is shared, and the node-local check sees only its own node: ranks whose
 * node agrees with itself but not with another node would run plans of different sizes,
 * roots or ops against each other over the proxy (a truncated message, a wait that times
 * out, or a success with wrong data), and their phase numbers would drift apart. So before
 * a call across nodes moves any data:
 *   1. each node's ranks compare their calls on the node-local communicator (a call of its
 *      own that moves nothing): every rank of a node learns whether its node agrees;
 *   2. every rank sends its call and its node's verdict to its partners, at least one rank
 *      of every other node, and receives theirs, under one phase drawn on every rank.
 * A node that agrees with itself is represented by any of its ranks, so every rank then
 * knows every node's call and verdict, and all reach the same verdict: the first node (in
 * node order) whose ranks differ among themselves names that difference; else the first
 * node whose call differs from node 0's is named against rank 0. Every rank has drawn the
 * same phases whatever the verdict, so a mismatch leaves the communicator usable.
 *
 * Partners: rank i of node k and rank i' of node j (k != j) when i' = i mod size(j) or
 * i = i' mod size(k), a relation that is symmetric and gives every rank at least one partner
 * on every other node (exactly one where every node has as many ranks). The cost is one
 * node-local comparison and one exchange of a few hundred bytes with nodes - 1 (or a few
 * more) peers a call; coll_gpu_check_calls turns it off.
 */
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"

/* What a rank tells its partners about a call. */
struct cgpu_net_call_rec {
    cgpu_sig_t sig;           /* its call (host not set: MPI lets ranks mix memories) */
    int32_t status;           /* its node's comparison: OK, CGPU_ERR_MISMATCH, or a failure */
    int32_t node;             /* its node */
    int32_t blame;            /* a failure: the rank it names (dead or silent), else -1 */
    cgpu_mismatch_t mismatch; /* status CGPU_ERR_MISMATCH: what its node found */
};

static bool partners(const cgpu_net_t *net, int k, int i, int j, int i2)
{
    return k != j && (i2 == i % cgpu_net_node_size(net, j) || i == i2 % cgpu_net_node_size(net, k));
}

cgpu_status_t cgpu_net_check_setup(cgpu_net_t *net)
{
    int n = 0;
    for (int pass = 0; pass < 2; ++pass) {
        n = 0;
        for (int j = 0; j < net->nnodes; ++j) {
            for (int i2 = 0; i2 < cgpu_net_node_size(net, j); ++i2) {
                if (!partners(net, net->node, net->local_index, j, i2)) {
                    continue;
                }
                if (1 == pass) {
                    net->partners[n] = cgpu_net_node_rank(net, j, i2);
                }
                ++n;
            }
        }
        if (0 == pass) {
            net->npartners = n;
            net->partners = malloc(sizeof(int) * (size_t) (n > 0 ? n : 1));
            net->check_recs = calloc((size_t) n + 1, sizeof(cgpu_net_call_rec_t));
            net->check_reqs = calloc(2 * (size_t) (n > 0 ? n : 1), sizeof(cgpu_proxy_req_t));
            net->check_of_node = calloc((size_t) net->nnodes, sizeof(*net->check_of_node));
            if (NULL == net->partners || NULL == net->check_recs || NULL == net->check_reqs ||
                NULL == net->check_of_node) {
                return CGPU_ERR_NO_MEMORY; /* freed by cgpu_net_check_free */
            }
        }
    }
    return CGPU_OK;
}

void cgpu_net_check_free(cgpu_net_t *net)
{
    free(net->partners);
    free(net->check_recs);
    free(net->check_reqs);
    free(net->check_of_node);
    net->partners = NULL;
    net->check_recs = NULL;
    net->check_reqs = NULL;
    net->check_of_node = NULL;
}

/* Step 1: this node's ranks compare their calls (the node-local communicator's own call,
 * which publishes @p sig: cgpu_net_call_sig set it as its outer signature). */
static void node_check(cgpu_comm_t *comm, const cgpu_sig_t *sig, cgpu_net_call_rec_t *mine)
{
    cgpu_comm_t *local = comm->net->local;
    mine->status = CGPU_OK;
    if (NULL == local) {
        return; /* alone on its node: nothing to compare */
    }
    /* the node-local communicator counts it as a call of the kind the user made */
    const cgpu_status_t st =
        cgpu_comm_enter(local, "the call check across nodes", comm->ras.kind, sig);
    if (CGPU_OK == st) {
        cgpu_comm_leave(local, st, 0);
    } else if (CGPU_ERR_MISMATCH == st) {
        mine->mismatch = local->mismatch; /* its ranks named as this communicator's */
    } else {
        /* the partners on other nodes cannot see this node's processes: they name whom
         * this rank names */
        const int dead = cgpu_comm_dead_peer(comm, NULL);
        mine->blame = dead >= 0 ? dead : cgpu_comm_unanswered(comm);
    }
    mine->status = (int32_t) st;
}

/* Step 2: the records of this rank's partners, into recs[0..npartners). */
static cgpu_status_t exchange(cgpu_comm_t *comm, const cgpu_net_call_rec_t *mine,
                              cgpu_net_call_rec_t *recs, uint32_t tag)
{
    cgpu_net_t *net = comm->net;
    cgpu_proxy_req_t *reqs = net->check_reqs;
    cgpu_status_t st = CGPU_OK;
    int m = 0;
    for (int p = 0; p < net->npartners && CGPU_OK == st; ++p) {
        st = cgpu_proxy_irecv(net->group, net->partners[p], &recs[p], sizeof(*recs), tag, &reqs[m]);
        m += CGPU_OK == st;
        if (CGPU_OK == st) {
            st = cgpu_proxy_isend(net->group, net->partners[p], mine, sizeof(*mine), tag, &reqs[m]);
            m += CGPU_OK == st;
        }
    }
    const cgpu_status_t w = cgpu_net_wait(comm, reqs, m);
    return CGPU_OK != st ? st : w;
}

/* The verdict every rank reaches from the same records (see the top of this file). */
static cgpu_status_t verdict(cgpu_comm_t *comm, const cgpu_net_call_rec_t *mine,
                             const cgpu_net_call_rec_t *recs)
{
    cgpu_net_t *net = comm->net;
    const cgpu_net_call_rec_t **of = net->check_of_node;
    for (int k = 0; k < net->nnodes; ++k) {
        of[k] = NULL;
    }
    of[net->node] = mine;
    cgpu_status_t failed = CGPU_OK;
    for (int p = 0; p < net->npartners; ++p) {
        const int k = net->node_of[net->partners[p]];
        if (recs[p].node != k) {
            failed = CGPU_ERR_PEER; /* cannot be, unless the partners' tables differ */
        } else if (CGPU_OK != recs[p].status && CGPU_ERR_MISMATCH != recs[p].status) {
            failed = CGPU_ERR_PEER; /* a node lost a rank or timed out: so does the call */
            if (recs[p].blame >= 0 && recs[p].blame < comm->size) {
                cgpu_comm_note_unanswered(comm, recs[p].blame); /* what the error names */
            }
        }
        if (NULL == of[k]) {
            of[k] = &recs[p];
        }
    }
    if (CGPU_OK != mine->status && CGPU_ERR_MISMATCH != mine->status) {
        return (cgpu_status_t) mine->status;
    }
    for (int k = 0; k < net->nnodes && CGPU_OK == failed; ++k) {
        if (NULL == of[k]) {
            failed = CGPU_ERR_PEER; /* every node has a partner (cgpu_net_check_setup) */
        }
    }
    if (CGPU_OK != failed) {
        cgpu_log(CGPU_LOG_INFO,
                 "net: call %llu on communicator %s: a node's ranks could not compare their "
                 "calls; the call fails",
                 (unsigned long long) (comm->seq + 1), comm->ras.name);
        return failed;
    }
    for (int k = 0; k < net->nnodes; ++k) {
        if (CGPU_ERR_MISMATCH == of[k]->status) {
            comm->mismatch = of[k]->mismatch;
            cgpu_log(CGPU_LOG_INFO, "net: call %llu on communicator %s does not match: %s",
                     (unsigned long long) (comm->seq + 1), comm->ras.name, comm->mismatch.text);
            return CGPU_ERR_MISMATCH;
        }
    }
    for (int k = 1; k < net->nnodes; ++k) {
        cgpu_mismatch_t m;
        if (CGPU_MISMATCH_NONE !=
            cgpu_call_compare(&of[0]->sig, &of[k]->sig, net->firsts[0], net->firsts[k], &m)) {
            comm->mismatch = m;
            cgpu_log(CGPU_LOG_INFO,
                     "net: call %llu on communicator %s does not match between nodes 0 and "
                     "%d: %s",
                     (unsigned long long) (comm->seq + 1), comm->ras.name, k, m.text);
            return CGPU_ERR_MISMATCH;
        }
    }
    return CGPU_OK;
}

cgpu_status_t cgpu_net_call_check(cgpu_comm_t *comm, const cgpu_sig_t *sig)
{
    cgpu_net_t *net = comm->net;
    const uint32_t tag = cgpu_net_next_phase(net); /* on every rank, whatever happens next */
    cgpu_net_call_rec_t *recs = net->check_recs, *mine = &recs[net->npartners];
    memset(mine, 0, sizeof(*mine));
    mine->sig = *sig;
    mine->sig.host = false;
    mine->node = net->node;
    mine->blame = -1;
    node_check(comm, sig, mine);
    /* a node that failed its comparison still tells its partners, who would wait for it */
    cgpu_status_t st = exchange(comm, mine, recs, tag);
    if (CGPU_OK == st) {
        st = verdict(comm, mine, recs);
    } else if (CGPU_OK != mine->status && CGPU_ERR_MISMATCH != mine->status) {
        st = (cgpu_status_t) mine->status; /* the node's failure (a dead peer) says more */
    }
    if (CGPU_OK != st && CGPU_ERR_MISMATCH != st) {
        /* the nodes may not have reached one verdict: the phases that follow cannot be
         * trusted to line up */
        atomic_store(&comm->ras.state, CGPU_RAS_FAILED);
        cgpu_net_gave_up(comm);
    }
    return st;
}
