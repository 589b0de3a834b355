/*
 * coll/gpu engine: reduce_scatter_block and reduce on the host backend, over the ring
 * queues, pipelined in slot-sized pieces.
 *
 * Reduce-scatter is the first half of the ring allreduce with one block per rank.
 * Reduce is a chain along the ring that ends at the root: the rank after the root starts
 * it, every rank folds in its contribution and passes the partial result on, the root
 * folds in its own last. Both use only predefined (commutative) operators.
 */
#include <string.h>

#include "cgpu_conn.h"

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

cgpu_status_t cgpu_host_ring_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                            size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    const int n = comm->size, r = comm->rank;
    const size_t es = cgpu_dtype_size(dt), piece = comm->slot_bytes / es;
    const char *in = sbuf;
    char *out = rbuf;
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_RING, memory_order_relaxed);
    for (size_t off = 0; off < count; off += piece) {
        const size_t len = count - off < piece ? count - off : piece;
        cgpu_prof_ev_t ev;
        /* step 0: our contribution to block r-1 */
        cgpu_step_prof_begin(comm, &ev, "send", mod(r + 1, n), 0, len * es);
        void *dst = cgpu_ring_send_slot(comm);
        if (NULL == dst) {
            cgpu_prof_stop(&ev);
            return cgpu_comm_wait_failed(comm);
        }
        memcpy(dst, in + ((size_t) mod(r - 1, n) * count + off) * es, len * es);
        cgpu_ring_send_post(comm, len * es);
        cgpu_prof_stop(&ev);
        for (int s = 1; s < n; ++s) {
            const int blk = mod(r - 1 - s, n);
            const bool last = (n - 1 == s); /* blk == r: the result stays here */
            cgpu_step_prof_begin(comm, &ev, last ? "recv_reduce" : "recv_reduce_send",
                                 mod(r - 1, n), 0, len * es);
            const void *src = cgpu_ring_recv_slot(comm);
            dst = (NULL == src || last) ? NULL : cgpu_ring_send_slot(comm);
            if (NULL == src || (!last && NULL == dst)) {
                cgpu_prof_stop(&ev);
                return cgpu_comm_wait_failed(comm);
            }
            cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
            const char *mine = in + ((size_t) blk * count + off) * es;
            cgpu_reduce_host(dt, op, last ? out + off * es : dst, src, mine, len);
            if (!last) {
                cgpu_ring_send_post(comm, len * es);
            }
            cgpu_ring_recv_done(comm);
            cgpu_prof_stop(&ev);
        }
    }
    return CGPU_OK;
}

cgpu_status_t cgpu_host_ring_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                    cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    const int n = comm->size;
    const int pos = mod(comm->rank - root - 1, n); /* 0: starts the chain, n-1: the root */
    const size_t es = cgpu_dtype_size(dt), piece = comm->slot_bytes / es;
    const char *in = sbuf;
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_RING, memory_order_relaxed);
    for (size_t off = 0; off < count; off += piece) {
        const size_t len = count - off < piece ? count - off : piece;
        cgpu_prof_ev_t ev;
        if (0 == pos) {
            cgpu_step_prof_begin(comm, &ev, "send", mod(comm->rank + 1, n), 0, len * es);
            void *dst = cgpu_ring_send_slot(comm);
            if (NULL == dst) {
                cgpu_prof_stop(&ev);
                return cgpu_comm_wait_failed(comm);
            }
            memcpy(dst, in + off * es, len * es);
            cgpu_ring_send_post(comm, len * es);
            cgpu_prof_stop(&ev);
            continue;
        }
        const bool is_root = (n - 1 == pos);
        cgpu_step_prof_begin(comm, &ev, is_root ? "recv_reduce" : "recv_reduce_send",
                             mod(comm->rank - 1, n), 0, len * es);
        const void *src = cgpu_ring_recv_slot(comm);
        void *dst = (NULL == src || is_root) ? NULL : cgpu_ring_send_slot(comm);
        if (NULL == src || (!is_root && NULL == dst)) {
            cgpu_prof_stop(&ev);
            return cgpu_comm_wait_failed(comm);
        }
        cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
        cgpu_reduce_host(dt, op, is_root ? (char *) rbuf + off * es : dst, src, in + off * es, len);
        if (!is_root) {
            cgpu_ring_send_post(comm, len * es);
        }
        cgpu_ring_recv_done(comm);
        cgpu_prof_stop(&ev);
    }
    return CGPU_OK;
}
