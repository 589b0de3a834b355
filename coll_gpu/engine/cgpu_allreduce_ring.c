/*
 * coll/gpu engine: ring allreduce (reduce-scatter, then allgather), pipelined in
 * slot-sized chunks.
 *
 * The data is walked in loops of size * chunk elements; in each loop rank r owns chunk
 * r. Reduce-scatter: a partial sum travels right around the ring, each rank folding in
 * its own contribution, so that after size-1 steps rank r holds the full result of
 * chunk r. Allgather: each finished chunk travels size-1 more steps. Every step moves
 * one slot; because the queue to the right has nslots slots, up to nslots steps of
 * consecutive loops overlap. Both sides of a connection compute the same element
 * counts, including empty chunks (still sent, so the sequence stays in lockstep).
 */
#include <string.h>

#include "cgpu_conn.h"

typedef struct ring_args {
    const char *in; /* this rank's contribution */
    char *out;      /* result (may equal in) */
    size_t count;
    size_t esize;
    cgpu_dtype_t dt;
    cgpu_op_t op;
} ring_args_t;

/* Element range [*first, *first + *n) of chunk j in the loop that starts at off. */
static void chunk_range(size_t off, size_t count, size_t per_chunk, int j, size_t *first,
                        size_t *n)
{
    size_t start = off + (size_t) j * per_chunk;
    size_t end = start + per_chunk;
    if (start > count) {
        start = count;
    }
    if (end > count) {
        end = count;
    }
    *first = start;
    *n = end - start;
}

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* false when the watchdog aborted the collective (its state is then unusable) */
static bool ring_loop(cgpu_comm_t *comm, const ring_args_t *a, size_t off, size_t per_chunk)
{
    const int n = comm->size, r = comm->rank;
    const int left = mod(r - 1, n), right = mod(r + 1, n);
    size_t first, cnt;
    cgpu_prof_ev_t ev; /* one profiler event per step (nothing happens when off) */

    /* reduce-scatter, step 0: send our own contribution for chunk r-1 */
    chunk_range(off, a->count, per_chunk, mod(r - 1, n), &first, &cnt);
    cgpu_step_prof_begin(comm, &ev, "send", right, 0, cnt * a->esize);
    void *dst = cgpu_ring_send_slot(comm);
    if (NULL == dst) {
        goto out_abort;
    }
    cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
    memcpy(dst, a->in + first * a->esize, cnt * a->esize);
    cgpu_ring_send_post(comm, cnt * a->esize);
    cgpu_prof_stop(&ev);

    /* steps 1 .. n-2: fold our contribution into the partial result and pass it on */
    for (int s = 1; s < n - 1; ++s) {
        chunk_range(off, a->count, per_chunk, mod(r - 1 - s, n), &first, &cnt);
        cgpu_step_prof_begin(comm, &ev, "recv_reduce_send", left, 0, cnt * a->esize);
        const void *src = cgpu_ring_recv_slot(comm);
        dst = NULL == src ? NULL : cgpu_ring_send_slot(comm);
        if (NULL == dst) {
            goto out_abort;
        }
        cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
        cgpu_reduce_host(a->dt, a->op, dst, src, a->in + first * a->esize, cnt);
        cgpu_ring_recv_done(comm);
        cgpu_ring_send_post(comm, cnt * a->esize);
        cgpu_prof_stop(&ev);
    }

    /* step n-1: chunk r is now complete; keep it and start it around the ring */
    chunk_range(off, a->count, per_chunk, r, &first, &cnt);
    cgpu_step_prof_begin(comm, &ev, "recv_reduce_copy_send", left, 0, cnt * a->esize);
    const void *src = cgpu_ring_recv_slot(comm);
    if (NULL == src) {
        goto out_abort;
    }
    cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
    char *mine = a->out + first * a->esize;
    cgpu_reduce_host(a->dt, a->op, mine, src, a->in + first * a->esize, cnt);
    cgpu_ring_recv_done(comm);
    dst = cgpu_ring_send_slot(comm);
    if (NULL == dst) {
        goto out_abort;
    }
    memcpy(dst, mine, cnt * a->esize);
    cgpu_ring_send_post(comm, cnt * a->esize);
    cgpu_prof_stop(&ev);

    /* allgather: take each finished chunk, keep it, pass it on (except the last) */
    for (int s = 1; s < n; ++s) {
        chunk_range(off, a->count, per_chunk, mod(r - s, n), &first, &cnt);
        cgpu_step_prof_begin(comm, &ev, s < n - 1 ? "recv_copy_send" : "recv", left, 0,
                             cnt * a->esize);
        src = cgpu_ring_recv_slot(comm);
        if (NULL == src) {
            goto out_abort;
        }
        cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
        memcpy(a->out + first * a->esize, src, cnt * a->esize);
        if (s < n - 1) {
            dst = cgpu_ring_send_slot(comm);
            if (NULL == dst) {
                goto out_abort;
            }
            memcpy(dst, src, cnt * a->esize);
            cgpu_ring_send_post(comm, cnt * a->esize);
        }
        cgpu_ring_recv_done(comm);
        cgpu_prof_stop(&ev);
    }
    return true;

out_abort:
    cgpu_prof_stop(&ev);
    return false;
}

cgpu_status_t cgpu_host_ring_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    const size_t esize = cgpu_dtype_size(dt);
    if (1 == comm->size) {
        if (sbuf != rbuf) {
            memcpy(rbuf, sbuf, count * esize);
        }
        return CGPU_OK;
    }
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_RING, memory_order_relaxed);
    ring_args_t a = {.in = sbuf, .out = rbuf, .count = count, .esize = esize, .dt = dt, .op = op};
    const size_t slot_elems = comm->slot_bytes / esize;
    const size_t n = (size_t) comm->size;
    for (size_t off = 0; off < count; off += n * slot_elems) {
        size_t rem = count - off;
        size_t per_chunk = (rem + n - 1) / n;
        if (per_chunk > slot_elems) {
            per_chunk = slot_elems;
        }
        if (!ring_loop(comm, &a, off, per_chunk)) {
            return cgpu_comm_wait_failed(comm);
        }
    }
    return CGPU_OK;
}
