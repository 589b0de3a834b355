/*
 * coll/gpu engine: the cuda backend of an internal communicator.
 *
 * Each rank owns one device "inbox" (flags, ring slots, oneshot buffers) that its peers
 * map through CUDA IPC; kernels move data by storing into peers' inboxes and signal
 * with counters there, with no host round trip per chunk.
 */
#ifndef CGPU_CUDA_COMM_H
#define CGPU_CUDA_COMM_H

#include "btl_glue/cgpu_cuda.h"
#include "cgpu_comm_internal.h"
#include "cgpu_cuda_pool.h"

/** What each rank publishes at set-up: its inbox's IPC handle and release word offset, and
 * its device's PCI bus id (ranks of one node that share a device find each other by it). */
typedef struct cgpu_cuda_inbox_rec {
    char handle[CGPU_CUDA_IPC_HANDLE_BYTES];
    uint64_t release_off;
    char bus[32];
} cgpu_cuda_inbox_rec_t;

/** Take this rank's inbox (pool or new) and stream on the current device; fill the
 * record (a cgpu_cuda_inbox_rec_t) its peers need. */
cgpu_status_t cgpu_cuda_comm_setup(cgpu_comm_t *comm, void *handle_out);

/** Map every peer's inbox from the allgathered records (size x cgpu_cuda_inbox_rec_t). */
cgpu_status_t cgpu_cuda_comm_connect(cgpu_comm_t *comm, const char *handles);

/** Unmap peers, free the inbox, stream and scratch. Idempotent. */
void cgpu_cuda_comm_destroy(cgpu_comm_t *comm);

/** Allreduce on the GPU (the caller has entered the communicator). */
cgpu_status_t cgpu_cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg);

/** The other collectives on the GPU, same buffer conventions as the engine's entry points
 * (sbuf NULL: in place). bcast and allgather count bytes. */
cgpu_status_t cgpu_cuda_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op);
cgpu_status_t cgpu_cuda_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, int root);
cgpu_status_t cgpu_cuda_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root);
cgpu_status_t cgpu_cuda_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/** Whether this communicator has a device alltoall (enough alltoall channels for its
 * peers); the same answer on every rank. */
bool cgpu_cuda_comm_alltoall_ok(const cgpu_comm_t *comm);

/** True when two ranks of this (node-local) communicator run on one device; the same answer
 * on every rank (it is read from the records every rank received). */
bool cgpu_cuda_comm_shares_device(const cgpu_comm_t *comm);
cgpu_status_t cgpu_cuda_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/** Whether the device kernels do (dt, op). */
bool cgpu_cuda_comm_supports(cgpu_dtype_t dt, cgpu_op_t op);

#endif /* CGPU_CUDA_COMM_H */
