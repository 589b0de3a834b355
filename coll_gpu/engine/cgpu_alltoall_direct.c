/*
 * coll/gpu engine: alltoall by direct exchange through each rank's staging area.
 *
 * Round k: every rank copies the k-th piece of each of its outgoing blocks into its own
 * stage (one slot per destination), publishes the round number, and then copies the
 * piece meant for it out of every peer's stage, counting itself as a reader there.
 * Before overwriting its stage in the next round a rank waits until all peers have
 * read the previous one. All peers are in flight at once; memory is one stage per rank
 * whatever the message size. In place is safe: a rank stages all its pieces of a round
 * before it overwrites the same ranges of its buffer with what it reads.
 */
#include <string.h>

#include "cgpu_conn.h"

cgpu_status_t cgpu_host_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    const int n = comm->size, me = comm->rank;
    const char *in = sbuf;
    char *out = rbuf;
    if (in != out) {
        memcpy(out + (size_t) me * bytes, in + (size_t) me * bytes, bytes);
    }
    if (1 == n) {
        return CGPU_OK;
    }
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_DIRECT, memory_order_relaxed);

    size_t piece = comm->stage_bytes / (size_t) n;
    piece &= ~(size_t) 63; /* keep every destination's slot cache-line aligned */
    if (0 == piece) {
        piece = comm->stage_bytes / (size_t) n;
    }
    if (piece > bytes) {
        piece = bytes;
    }
    cgpu_seg_ctrl_t *mine = cgpu_ctrl(comm, me);
    char *my_stage = cgpu_stage_area(comm, me);

    for (size_t off = 0; off < bytes; off += piece) {
        size_t len = bytes - off < piece ? bytes - off : piece;
        uint64_t round = ++comm->a2a_round;
        /* our stage is free once every peer has read round - 1 */
        if (!cgpu_wait_ge(comm, &mine->a2a_readers.v, (round - 1) * (uint64_t) (n - 1), -1)) {
            return cgpu_comm_wait_failed(comm);
        }
        for (int p = 0; p < n; ++p) {
            if (p != me) {
                memcpy(my_stage + (size_t) p * piece, in + (size_t) p * bytes + off, len);
            }
        }
        atomic_store_explicit(&mine->a2a_posted.v, round, memory_order_release);
        for (int k = 1; k < n; ++k) {
            int p = (me + k) % n; /* start at different peers to spread the load */
            cgpu_seg_ctrl_t *pc = cgpu_ctrl(comm, p);
            cgpu_prof_ev_t ev;
            cgpu_step_prof_begin(comm, &ev, "recv", p, 0, len);
            if (!cgpu_wait_ge(comm, &pc->a2a_posted.v, round, p)) {
                cgpu_prof_stop(&ev);
                return cgpu_comm_wait_failed(comm);
            }
            cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
            const char *pstage = cgpu_stage_area(comm, p);
            memcpy(out + (size_t) p * bytes + off, pstage + (size_t) me * piece, len);
            atomic_fetch_add_explicit(&pc->a2a_readers.v, 1, memory_order_acq_rel);
            cgpu_ras_progress(comm);
            cgpu_prof_stop(&ev);
        }
    }
    return CGPU_OK;
}
