/*
 * coll/gpu engine: broadcast and allgather on the host backend, over the same ring
 * queues as the allreduce, pipelined in slot-sized pieces.
 *
 * Broadcast is a chain along the ring starting at the root: each rank keeps every piece
 * and passes it on, except the rank before the root. Allgather is the allgather half of
 * the ring allreduce: each rank starts its own block around the ring and forwards what
 * it receives for n-2 steps. Both sides of every connection move the same pieces in the
 * same order, so the queues stay in lockstep across calls.
 */
#include <string.h>

#include "cgpu_conn.h"

cgpu_status_t cgpu_host_ring_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root)
{
    const int n = comm->size;
    const int pos = ((comm->rank - root) % n + n) % n; /* distance from the root */
    char *b = buf;
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_RING, memory_order_relaxed);
    for (size_t off = 0; off < bytes; off += comm->slot_bytes) {
        const size_t len = bytes - off < comm->slot_bytes ? bytes - off : comm->slot_bytes;
        cgpu_prof_ev_t ev;
        if (0 == pos) {
            cgpu_step_prof_begin(comm, &ev, "send", (comm->rank + 1) % n, 0, len);
            void *dst = cgpu_ring_send_slot(comm);
            if (NULL == dst) {
                cgpu_prof_stop(&ev);
                return cgpu_comm_wait_failed(comm);
            }
            cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
            memcpy(dst, b + off, len);
            cgpu_ring_send_post(comm, len);
            cgpu_prof_stop(&ev);
            continue;
        }
        const bool last = (n - 1 == pos);
        cgpu_step_prof_begin(comm, &ev, last ? "recv" : "recv_copy_send", (comm->rank + n - 1) % n,
                             0, len);
        const void *src = cgpu_ring_recv_slot(comm);
        void *dst = (NULL == src || last) ? NULL : cgpu_ring_send_slot(comm);
        if (NULL == src || (!last && NULL == dst)) {
            cgpu_prof_stop(&ev);
            return cgpu_comm_wait_failed(comm);
        }
        cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
        memcpy(b + off, src, len);
        if (!last) {
            memcpy(dst, src, len);
            cgpu_ring_send_post(comm, len);
        }
        cgpu_ring_recv_done(comm);
        cgpu_prof_stop(&ev);
    }
    return CGPU_OK;
}

cgpu_status_t cgpu_host_ring_allgather(cgpu_comm_t *comm, void *rbuf, size_t bytes)
{
    const int n = comm->size, r = comm->rank;
    char *out = rbuf;
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_RING, memory_order_relaxed);
    for (size_t off = 0; off < bytes; off += comm->slot_bytes) {
        const size_t len = bytes - off < comm->slot_bytes ? bytes - off : comm->slot_bytes;
        cgpu_prof_ev_t ev;
        cgpu_step_prof_begin(comm, &ev, "send", (r + 1) % n, 0, len);
        void *dst = cgpu_ring_send_slot(comm);
        if (NULL == dst) {
            cgpu_prof_stop(&ev);
            return cgpu_comm_wait_failed(comm);
        }
        cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
        memcpy(dst, out + (size_t) r * bytes + off, len);
        cgpu_ring_send_post(comm, len);
        cgpu_prof_stop(&ev);
        for (int s = 1; s < n; ++s) {
            const int blk = ((r - s) % n + n) % n;
            const bool fwd = s < n - 1;
            cgpu_step_prof_begin(comm, &ev, fwd ? "recv_copy_send" : "recv", (r + n - 1) % n, 0,
                                 len);
            const void *src = cgpu_ring_recv_slot(comm);
            dst = (NULL == src || !fwd) ? NULL : cgpu_ring_send_slot(comm);
            if (NULL == src || (fwd && NULL == dst)) {
                cgpu_prof_stop(&ev);
                return cgpu_comm_wait_failed(comm);
            }
            cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
            memcpy(out + (size_t) blk * bytes + off, src, len);
            if (fwd) {
                memcpy(dst, src, len);
                cgpu_ring_send_post(comm, len);
            }
            cgpu_ring_recv_done(comm);
            cgpu_prof_stop(&ev);
        }
    }
    return CGPU_OK;
}
