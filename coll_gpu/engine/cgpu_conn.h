/*
 * coll/gpu engine: point-to-point primitives over the mapped segments.
 *
 * The ring connection is a single-producer single-consumer queue of nslots slots that
 * lives in the receiver's segment: the left neighbour fills slots and bumps
 * ring_posted, the owner drains them and bumps ring_consumed. The same shape carries
 * over to CUDA IPC (slots in device memory, flags in peer-mapped memory).
 */
#ifndef CGPU_CONN_H
#define CGPU_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "cgpu_comm_internal.h"

/**
 * Wait (spin, then yield, then sleep) until *ctr >= value; past the spins it runs the MPI
 * library's progress now and then (cgpu_progress), and every few ms looks whether the peers'
 * processes still exist (cgpu_liveness.c). Returns false, at once, if the watchdog aborted
 * the communicator's collective (coll_gpu_ras_abort_on_timeout), or once a peer is found
 * dead; cgpu_comm_wait_failed(comm) then says which of the two. @p peer: the rank whose
 * write the wait needs (-1: any of several), for the watchdog's report.
 */
bool cgpu_wait_ge(cgpu_comm_t *comm, _Atomic uint64_t *ctr, uint64_t value, int peer);

/** Next free slot in the right neighbour's queue (waits for room); NULL if aborted. */
void *cgpu_ring_send_slot(cgpu_comm_t *comm);
/** Publish the slot returned by cgpu_ring_send_slot, holding @p bytes (for the profiler). */
void cgpu_ring_send_post(cgpu_comm_t *comm, size_t bytes);
/** Next filled slot of this rank's queue (waits for the left neighbour); NULL if aborted. */
const void *cgpu_ring_recv_slot(cgpu_comm_t *comm);
/** Hand the slot returned by cgpu_ring_recv_slot back to the left neighbour. */
void cgpu_ring_recv_done(cgpu_comm_t *comm);

#endif /* CGPU_CONN_H */
