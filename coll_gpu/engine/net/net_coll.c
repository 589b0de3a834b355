/*
 * coll/gpu engine, communicators across nodes: the collectives.
 *
 * Each collective is a plan of node-local steps (the node's own communicator) and steps
 * between nodes (net_steps.c, over the proxy): the allreduce reduces within the node, runs
 * rings across nodes and spreads the result back; the broadcast goes down a tree of one
 * rank per node, then within each node; the alltoall and allgather go over the proxy rank
 * to rank; the reductions with another output (reduce, reduce-scatter) are an allreduce of
 * a host copy. A phase that fails fatally skips the later ones, and a collective that failed
 * on a rank fails its communicator (finish), since its phase numbers may be out of step.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"

/* The status of a collective whose later phases were skipped by cgpu_net_fatal(): never OK. */
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
        cgpu_net_gave_up(comm); /* this node's ranks waiting on this one name the cause */
    }
    return st;
}

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
        s2 = cgpu_net_fatal(comm, st) ? skipped(comm, st)
                                      : cgpu_net_ring_allreduce_any(comm, net->rail, net->nnodes,
                                                                    net->node, mine, blk, dt, op);
        st = CGPU_OK != st ? st : s2;
        s2 = cgpu_net_fatal(comm, st) ? skipped(comm, st)
                                      : cgpu_allgather(net->local, NULL, rbuf, blk * es);
        st = CGPU_OK != st ? st : s2;
    } else {
        /* node reduce to its first rank, a ring of first ranks, node broadcast */
        atomic_store_explicit(&comm->ras.alg,
                              net->local_size > 1 ? CGPU_RAS_ALG_HIERARCHICAL : CGPU_RAS_ALG_RING,
                              memory_order_relaxed);
        if (net->local_size > 1) {
            const bool root = 0 == net->local_index;
            st = cgpu_reduce(net->local, (root && sbuf == rbuf) ? NULL : sbuf, rbuf, count, dt, op,
                             0);
        } else if (sbuf != rbuf) {
            st = cgpu_engine_copy(rbuf, sbuf, count * es);
        }
        s2 = cgpu_net_fatal(comm, st)
                 ? skipped(comm, st)
                 : cgpu_net_ring_allreduce_any(comm, net->firsts, net->nnodes,
                                               0 == net->local_index ? net->node : -1, rbuf, count,
                                               dt, op);
        st = CGPU_OK != st ? st : s2;
        if (net->local_size > 1) {
            s2 = cgpu_net_fatal(comm, st) ? skipped(comm, st)
                                          : cgpu_bcast(net->local, rbuf, count * es, 0);
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
    const uint32_t ph = cgpu_net_next_phase(net);
    cgpu_status_t st = cgpu_net_after_default_stream(net, sbuf, rbuf);
    const char *src = sbuf;
    char *copy = NULL;
    if (CGPU_OK == st && sbuf == rbuf) { /* in place: what is sent must not be overwritten */
        copy = malloc(total);
        st = NULL == copy ? CGPU_ERR_NO_MEMORY : cgpu_engine_copy(copy, rbuf, total);
        src = copy;
    }
    if (CGPU_OK == st) {
        st =
            cgpu_engine_copy((char *) rbuf + (size_t) me * bytes, src + (size_t) me * bytes, bytes);
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
        cgpu_status_t w = cgpu_net_wait(comm, reqs, m);
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
            if (cgpu_net_node_rank(net, rn, i) == root) {
                local_root = i;
            }
        }
    }
    cgpu_status_t st = me >= 0 ? cgpu_net_after_default_stream(net, buf, NULL) : CGPU_OK;
    cgpu_status_t tb = cgpu_net_tree_bcast(comm, root, rn, me, buf, bytes);
    st = CGPU_OK != st ? st : tb;
    if (net->local_size > 1) {
        cgpu_status_t s2 = cgpu_net_fatal(comm, st)
                               ? skipped(comm, st)
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
    const uint32_t ph = cgpu_net_next_phase(net);
    char *r = rbuf;
    cgpu_status_t st = cgpu_net_after_default_stream(net, sbuf, rbuf);
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
        cgpu_status_t w = cgpu_net_wait(comm, req, m);
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
    cgpu_coll_prof_begin(comm, "reduce_scatter_block", count, cgpu_dtype_name(dt), cgpu_op_name(op),
                         total * es, "hierarchical");
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
