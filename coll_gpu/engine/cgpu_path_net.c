/*
 * coll/gpu engine: the net path's table. A communicator that spans nodes runs every
 * collective it has as the hierarchical schedules of cgpu_net.c (node-local steps on the
 * node's own path, the proxy between nodes); it has no scan of its own.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NET
#include "cgpu_path.h"

static cgpu_status_t net_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                   cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                   bool host, const cgpu_pairs_out_t *po)
{
    (void) alg;
    (void) host;
    (void) po;
    return cgpu_net_allreduce(comm, sbuf, rbuf, count, dt, op);
}

static cgpu_status_t net_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                               size_t part_off, size_t part_bytes, bool *kept)
{
    (void) part;
    (void) part_off;
    (void) part_bytes;
    *kept = false;
    return cgpu_net_bcast(comm, buf, bytes, root);
}

const cgpu_path_ops_t cgpu_path_net = {
    .size = sizeof(cgpu_path_ops_t),
    .name = "net",
    .reduces = cgpu_path_no_reduce,
    .allreduce = net_allreduce,
    .alltoall = cgpu_net_alltoall,
    .bcast = net_bcast,
    .allgather = cgpu_net_allgather,
    .reduce_scatter_block = cgpu_net_reduce_scatter_block,
    .reduce = cgpu_net_reduce,
    .scan = cgpu_path_no_scan,
    .transport = cgpu_net_transport,
};
