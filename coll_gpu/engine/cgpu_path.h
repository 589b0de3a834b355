/*
 * coll/gpu engine: the paths a communicator's data takes, as ops tables.
 *
 * A communicator moves its data one of three ways: across nodes (the proxy between nodes
 * and the node-local steps: net), between the GPUs of one node (our kernels over CUDA IPC:
 * cuda), or through host shared memory (host). Which one is fixed by the communicator's
 * set-up (nodes, agreed backend), the same on every rank, and cgpu_path_of answers it. The
 * entry points (cgpu_coll.c) validate a call, enter the communicator, hand the call to the
 * path and leave; a path that does not take a particular call (a type its kernels lack, a
 * single rank, a host-memory call of a few words) answers CGPU_DECLINED before touching
 * anything, and the host path, which takes every call, runs it. Every rank of a call decides
 * from the same arguments, so every rank takes the same path.
 *
 * Tables are written with designated initializers; an entry a path has no algorithm for
 * points to the explicit declining stub of cgpu_path.c, never NULL.
 */
#ifndef CGPU_PATH_H
#define CGPU_PATH_H

#include "cgpu_comm_internal.h"
#include "cgpu_cuda_comm.h"

typedef struct cgpu_path_ops {
    size_t size;      /* sizeof(cgpu_path_ops_t): a table from an older header is shorter */
    const char *name; /* "net", "cuda", "host": logs */
    /* whether this path's own kernels reduce (dt, op) (the padded pairs' plans ask it) */
    bool (*reduces)(const cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op);
    /* @p host: a call of a few words of host memory on every rank; @p po: see
     * cgpu_cuda_allreduce (only a path whose reduces() said yes gets one) */
    cgpu_status_t (*allreduce)(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg, bool host,
                               const cgpu_pairs_out_t *po);
    cgpu_status_t (*alltoall)(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);
    /* @p part (or NULL): also keep part_bytes of the result from part_off there; *kept says
     * whether the path did (else the caller copies it) */
    cgpu_status_t (*bcast)(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                           size_t part_off, size_t part_bytes, bool *kept);
    cgpu_status_t (*allgather)(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);
    cgpu_status_t (*reduce_scatter_block)(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                          size_t count, cgpu_dtype_t dt, cgpu_op_t op);
    cgpu_status_t (*reduce)(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                            cgpu_dtype_t dt, cgpu_op_t op, int root);
    /* a scan of this path's own (the caller has entered the communicator) */
    cgpu_status_t (*scan)(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                          cgpu_dtype_t dt, cgpu_op_t op, bool exclusive);
    /* what the RAS transport pvar reports (cgpu_ras_transport_t) */
    int (*transport)(const cgpu_comm_t *comm);
} cgpu_path_ops_t;

extern const cgpu_path_ops_t cgpu_path_net;
extern const cgpu_path_ops_t cgpu_path_cuda;
extern const cgpu_path_ops_t cgpu_path_host;

/** The path of @p comm's collectives (constant once the communicator is ready). */
static inline const cgpu_path_ops_t *cgpu_path_of(const cgpu_comm_t *comm)
{
    if (NULL != comm->net) {
        return &cgpu_path_net;
    }
    return CGPU_BACKEND_CUDA == cgpu_backend_now(comm) ? &cgpu_path_cuda : &cgpu_path_host;
}

/** The path of the call @p comm runs now: the host path where the call check found host
 * buffers on every rank (on a cuda communicator they would be staged through the device),
 * else the communicator's. The same on every rank: all read the same records. */
static inline const cgpu_path_ops_t *cgpu_call_path(const cgpu_comm_t *comm)
{
    return comm->call_all_host ? &cgpu_path_host : cgpu_path_of(comm);
}

/* The declining stubs, for the entries a path has no algorithm for. */
bool cgpu_path_no_reduce(const cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op);
cgpu_status_t cgpu_path_no_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                cgpu_dtype_t dt, cgpu_op_t op, bool exclusive);

/* Host copies of what lives on a device, for the host algorithms that read @p bytes at @p p
 * (copied in when @p copy_in) or write there: *view is what to use, *own what to give back
 * to the host pool, cgpu_host_pool_put (and, for an output, copy back). */
cgpu_status_t cgpu_host_view(const void *p, size_t bytes, bool copy_in, void **view, void **own);

#endif /* CGPU_PATH_H */
