/*
 * coll/gpu engine: ring queue and waiting.
 */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "cgpu_conn.h"

bool cgpu_wait_ge(cgpu_comm_t *comm, _Atomic uint64_t *ctr, uint64_t value, int peer)
{
    unsigned spins = 0;
    uint64_t look_ns = 0; /* the clock of this wait's liveness looks (cgpu_liveness.c) */
    bool ok = true;
    while (atomic_load_explicit(ctr, memory_order_acquire) < value) {
        if (0 != atomic_load_explicit(&comm->ras.abort, memory_order_relaxed)) {
            ok = false;
            break;
        }
        cgpu_progress_poll(++spins, 256); /* the peer may wait in MPI for us */
        if (spins < 256) {
            cgpu_cpu_relax();
            continue; /* the fast path: no clock, no system call */
        }
        if (256 == spins) { /* what the watchdog reports, should this wait last */
            atomic_store_explicit(&comm->ras.waiting_on, peer, memory_order_relaxed);
        }
        /* a peer that died never bumps the counter: past the spins, every 16th poll reads
         * the clock, and every few ms of waiting the peers' processes are looked at */
        if (0 == (spins & 15) && cgpu_liveness_due(&look_ns) && !cgpu_liveness_look(comm)) {
            ok = false;
            break;
        }
        if (spins < 20000) {
            /* Oversubscribed runs (more ranks than cores) need the peer to get the CPU. */
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    if (spins >= 256) {
        atomic_store_explicit(&comm->ras.waiting_on, -1, memory_order_relaxed);
    }
    if (!ok) {
        cgpu_liveness_blame(comm, peer); /* whom the error names */
    }
    return ok;
}

static inline int ring_right(const cgpu_comm_t *comm)
{
    return (comm->rank + 1) % comm->size;
}

/* Stop the transport events of the items the right neighbour has consumed. */
static void xfer_stop_upto(cgpu_comm_t *comm, uint64_t consumed)
{
    while (comm->xfer_stopped < comm->xfer_started && comm->xfer_stopped < consumed) {
        cgpu_prof_stop(&comm->xfer[comm->xfer_stopped % (uint64_t) comm->nslots]);
        comm->xfer_stopped++;
    }
}

void *cgpu_ring_send_slot(cgpu_comm_t *comm)
{
    cgpu_seg_ctrl_t *rc = cgpu_ctrl(comm, ring_right(comm));
    uint64_t n = comm->ring_sent;
    if (n >= (uint64_t) comm->nslots &&
        !cgpu_wait_ge(comm, &rc->ring_consumed.v, n + 1 - (uint64_t) comm->nslots,
                      ring_right(comm))) {
        return NULL;
    }
    if (comm->xfer_started > comm->xfer_stopped) {
        xfer_stop_upto(comm, atomic_load_explicit(&rc->ring_consumed.v, memory_order_acquire));
    }
    char *base = (char *) rc + CGPU_SEG_CTRL_BYTES;
    return base + (size_t) (n % (uint64_t) comm->nslots) * comm->slot_bytes;
}

void cgpu_ring_send_post(cgpu_comm_t *comm, size_t bytes)
{
    cgpu_seg_ctrl_t *rc = cgpu_ctrl(comm, ring_right(comm));
    comm->ring_sent++;
    atomic_store_explicit(&rc->ring_posted.v, comm->ring_sent, memory_order_release);
    cgpu_ras_progress(comm);
    if (comm->prof.coll_on) { /* the item is in flight in the neighbour's queue */
        if (NULL == comm->xfer) {
            comm->xfer = calloc((size_t) comm->nslots, sizeof(*comm->xfer));
        }
        if (comm->xfer_started == comm->xfer_stopped) { /* none in flight: count from here */
            comm->xfer_started = comm->xfer_stopped = comm->ring_sent - 1;
        }
        if (NULL != comm->xfer && comm->xfer_started == comm->ring_sent - 1) {
            cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_PROXY_V1, .parent = comm->prof.coll};
            ev.u.proxy = (cgpu_prof_proxy_v1_t){
                .what = "shm_queue", .peer = ring_right(comm), .bytes = bytes};
            cgpu_prof_start(&comm->prof, &ev,
                            &comm->xfer[comm->xfer_started % (uint64_t) comm->nslots]);
            comm->xfer_started++;
        }
    }
}

void cgpu_ring_prof_drain(cgpu_comm_t *comm)
{
    if (comm->xfer_started == comm->xfer_stopped || comm->size < 2 || NULL == comm->peer_segs) {
        return;
    }
    cgpu_seg_ctrl_t *rc = cgpu_ctrl(comm, ring_right(comm));
    /* the neighbour consumes them within this same collective; an aborted one stops
     * waiting at once, and the events end anyway */
    (void) cgpu_wait_ge(comm, &rc->ring_consumed.v, comm->xfer_started, ring_right(comm));
    xfer_stop_upto(comm, comm->xfer_started);
}

const void *cgpu_ring_recv_slot(cgpu_comm_t *comm)
{
    cgpu_seg_ctrl_t *mc = cgpu_ctrl(comm, comm->rank);
    uint64_t n = comm->ring_recvd;
    if (!cgpu_wait_ge(comm, &mc->ring_posted.v, n + 1,
                      (comm->rank + comm->size - 1) % comm->size)) {
        return NULL;
    }
    const char *base = (const char *) mc + CGPU_SEG_CTRL_BYTES;
    return base + (size_t) (n % (uint64_t) comm->nslots) * comm->slot_bytes;
}

void cgpu_ring_recv_done(cgpu_comm_t *comm)
{
    cgpu_seg_ctrl_t *mc = cgpu_ctrl(comm, comm->rank);
    comm->ring_recvd++;
    atomic_store_explicit(&mc->ring_consumed.v, comm->ring_recvd, memory_order_release);
}
