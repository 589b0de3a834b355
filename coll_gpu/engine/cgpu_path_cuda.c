/*
 * coll/gpu engine: the cuda path's table. The communicator's ranks are on one node and
 * agreed on the cuda backend: our kernels over CUDA IPC (cuda_comm) run the call, except
 * what they do not take, which declines to the host path: a (type, op) the kernels have no
 * arithmetic for (the long double types), a call of a few words of host memory, a single
 * rank, an alltoall without enough channels. Each condition depends only on the call's
 * arguments and the communicator's agreed state, the same on every rank.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_CUDA
#include "cgpu_path.h"

static bool cuda_reduces(const cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op)
{
    (void) comm;
    return cgpu_cuda_comm_supports(dt, op);
}

static cgpu_status_t cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                    cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                    bool host, const cgpu_pairs_out_t *po)
{
    if (host || !cgpu_cuda_comm_supports(dt, op)) {
        return CGPU_DECLINED;
    }
    return cgpu_cuda_allreduce(comm, sbuf, rbuf, count, dt, op, alg, po); /* profiles itself */
}

static cgpu_status_t cuda_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    if (!cgpu_cuda_comm_alltoall_ok(comm)) {
        return CGPU_DECLINED;
    }
    return cgpu_cuda_alltoall(comm, sbuf, rbuf, bytes); /* profiles itself */
}

static cgpu_status_t cuda_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                                size_t part_off, size_t part_bytes, bool *kept)
{
    int dev;
    /* a device part rides the kernel's stream, with no wait of its own */
    const bool tail = NULL != part && CGPU_BUF_DEVICE == cgpu_buf_kind(part, &dev);
    *kept = tail;
    return cgpu_cuda_bcast(comm, buf, bytes, root, tail ? part : NULL, part_off, part_bytes);
}

static cgpu_status_t cuda_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    if (comm->size < 2) {
        return CGPU_DECLINED;
    }
    return cgpu_cuda_allgather(comm, sbuf, rbuf, bytes); /* places its own block too */
}

static cgpu_status_t cuda_reduce_scatter_block(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                               size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    if (comm->size < 2 || !cgpu_cuda_comm_supports(dt, op)) {
        return CGPU_DECLINED;
    }
    return cgpu_cuda_reduce_scatter(comm, sbuf, rbuf, count, dt, op);
}

static cgpu_status_t cuda_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                 cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    if (comm->size < 2 || !cgpu_cuda_comm_supports(dt, op)) {
        return CGPU_DECLINED;
    }
    return cgpu_cuda_reduce(comm, sbuf, rbuf, count, dt, op, root);
}

static cgpu_status_t cuda_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, bool exclusive)
{
    if (comm->size < 2 || !cgpu_cuda_comm_supports(dt, op)) {
        return CGPU_DECLINED;
    }
    return cgpu_cuda_scan(comm, sbuf, rbuf, count, dt, op, exclusive);
}

static int cuda_transport(const cgpu_comm_t *comm)
{
    (void) comm;
    return CGPU_RAS_TRANSPORT_CUDA_IPC;
}

const cgpu_path_ops_t cgpu_path_cuda = {
    .size = sizeof(cgpu_path_ops_t),
    .name = "cuda",
    .reduces = cuda_reduces,
    .allreduce = cuda_allreduce,
    .alltoall = cuda_alltoall,
    .bcast = cuda_bcast,
    .allgather = cuda_allgather,
    .reduce_scatter_block = cuda_reduce_scatter_block,
    .reduce = cuda_reduce,
    .scan = cuda_scan,
    .transport = cuda_transport,
};
