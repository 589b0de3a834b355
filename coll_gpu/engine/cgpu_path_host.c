/*
 * coll/gpu engine: the host path's table. Host buffers, or device buffers staged through
 * host copies, moved by the shared-memory algorithms of the host backend (rings, chains,
 * the direct alltoall). It takes every call, so it is also where the other paths' declined
 * calls run. When staging fails locally the rank still takes part, on zeroed scratch, so its
 * peers do not hang, and the failure is returned.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_SHM
#include <stdlib.h>
#include <string.h>

#include "cgpu_host_pool.h"
#include "cgpu_path.h"

/* Host copies of buffers that live on a device, for the host algorithms: blocks of the
 * engine's host pool (cgpu_host_pool.h), pinned where a GPU is usable. */
typedef struct host_stage {
    void *in_copy;
    void *out_copy;
} host_stage_t;

/* Whether @p p is device memory: not where the call check found every rank's buffers of this
 * call on the host (a pointer query costs 0.1-0.2 us, a small host call about 1 us). The test
 * switch coll_gpu_stage_host_buffers stages host memory too, so that CI runs this file's
 * staging without a GPU. */
static bool on_device(const cgpu_comm_t *comm, const void *p)
{
    int dev;
    return cgpu_engine_config()->stage_host_buffers ||
           (!comm->call_all_host && CGPU_BUF_HOST != cgpu_buf_kind(p, &dev));
}

static cgpu_status_t stage_in(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes,
                              host_stage_t *hs, const void **in, void **out)
{
    const bool in_place = (sbuf == rbuf);
    bool s_dev = on_device(comm, sbuf);
    bool r_dev = in_place ? s_dev : on_device(comm, rbuf);
    memset(hs, 0, sizeof(*hs));
    *in = sbuf;
    *out = rbuf;
    if (s_dev) {
        hs->in_copy = cgpu_host_pool_get(bytes);
        if (NULL == hs->in_copy) {
            return CGPU_ERR_NO_MEMORY;
        }
        cgpu_status_t st = cgpu_engine_copy(hs->in_copy, sbuf, bytes);
        if (CGPU_OK != st) {
            return st;
        }
        *in = hs->in_copy;
    }
    if (r_dev) {
        hs->out_copy = in_place ? hs->in_copy : cgpu_host_pool_get(bytes);
        if (NULL == hs->out_copy) {
            return CGPU_ERR_NO_MEMORY;
        }
        *out = hs->out_copy;
    }
    return CGPU_OK;
}

static cgpu_status_t stage_out(void *rbuf, size_t bytes, host_stage_t *hs, cgpu_status_t st)
{
    if (CGPU_OK == st && NULL != hs->out_copy) {
        st = cgpu_engine_copy(rbuf, hs->out_copy, bytes);
    }
    if (hs->out_copy != hs->in_copy) {
        cgpu_host_pool_put(hs->out_copy);
    }
    cgpu_host_pool_put(hs->in_copy);
    return st;
}

/* A host algorithm over buffers of any memory kind: what lives on a device is staged
 * through host copies. When staging fails locally the rank still takes part, on zeroed
 * scratch, so its peers do not hang, and the failure is returned. */
typedef cgpu_status_t (*host_algo_fn)(cgpu_comm_t *comm, const void *in, void *out,
                                      const void *args);

static cgpu_status_t run_host_staged(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes,
                                     host_algo_fn fn, const void *args)
{
    host_stage_t hs;
    const void *in;
    void *out;
    cgpu_status_t st = stage_in(comm, sbuf, rbuf, bytes, &hs, &in, &out);
    if (CGPU_OK == st) {
        st = fn(comm, in, out, args);
    } else {
        void *tmp = calloc(1, bytes);
        if (NULL != tmp) {
            (void) fn(comm, tmp, tmp, args);
            free(tmp);
        }
    }
    return stage_out(rbuf, bytes, &hs, st);
}

typedef struct allreduce_args {
    size_t count;
    cgpu_dtype_t dt;
    cgpu_op_t op;
} allreduce_args_t;

static cgpu_status_t host_allreduce(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const allreduce_args_t *a = args;
    return cgpu_host_ring_allreduce(comm, in, out, a->count, a->dt, a->op);
}

static cgpu_status_t host_alltoall(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    return cgpu_host_alltoall(comm, in, out, *(const size_t *) args);
}

typedef struct bcast_args {
    int root;
    size_t bytes;
} bcast_args_t;

static cgpu_status_t host_bcast(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const bcast_args_t *a = args;
    (void) in; /* in place: staged in and out through the same buffer */
    return cgpu_host_ring_bcast(comm, out, a->bytes, a->root);
}

cgpu_status_t cgpu_host_view(const void *p, size_t bytes, bool copy_in, void **view, void **own)
{
    int dev;
    *own = NULL;
    *view = (void *) p;
    if (NULL == p || 0 == bytes || CGPU_BUF_HOST == cgpu_buf_kind(p, &dev)) {
        return CGPU_OK;
    }
    *own = cgpu_host_pool_get(bytes);
    if (NULL == *own) {
        return CGPU_ERR_NO_MEMORY;
    }
    *view = *own;
    return copy_in ? cgpu_engine_copy(*own, p, bytes) : CGPU_OK;
}

/* Whether an allreduce of @p bytes runs in the stage areas (cgpu_allreduce_direct.c): a
 * staged size on a one-node communicator whose ranks share a GPU (the host backend taken for
 * time slicing: device buffers are staged), or under the test switch that stages host
 * buffers. Only the communicator's agreed state and the call's size count, so every rank of
 * the call chooses alike, whatever memory its own buffers are in. */
static bool direct_allreduce(const cgpu_comm_t *comm, size_t bytes)
{
    return comm->size > 1 && NULL == comm->net && comm->direct_min > 0 &&
           bytes >= comm->direct_min && !comm->call_all_host &&
           (comm->dev_share > 1 || cgpu_engine_config()->stage_host_buffers);
}

static cgpu_status_t host_path_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                         size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                         cgpu_allreduce_alg_t alg, bool host,
                                         const cgpu_pairs_out_t *po)
{
    (void) alg;
    (void) po;
    /* a type the kernels lack (long double) runs here on every rank: the cuda path declined
     * it from (dt, op) alone */
    allreduce_args_t a = {.count = count, .dt = dt, .op = op};
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool direct = direct_allreduce(comm, bytes);
    cgpu_coll_prof_begin(comm, "allreduce", count, cgpu_dtype_name(dt), cgpu_op_name(op), bytes,
                         direct ? "direct" : "ring");
    cgpu_status_t st;
    if (direct) {
        st = cgpu_host_direct_allreduce(comm, sbuf, rbuf, count, dt, op,
                                        !host && on_device(comm, sbuf),
                                        !host && on_device(comm, rbuf));
    } else {
        st = host ? cgpu_host_ring_allreduce(comm, sbuf, rbuf, count, dt, op)
                  : run_host_staged(comm, sbuf, rbuf, bytes, host_allreduce, &a);
    }
    cgpu_coll_prof_end(comm);
    return st;
}

static cgpu_status_t host_path_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                        size_t bytes)
{
    cgpu_coll_prof_begin(comm, "alltoall", bytes, "byte", "", bytes * (size_t) comm->size,
                         "direct");
    cgpu_status_t st =
        run_host_staged(comm, sbuf, rbuf, bytes * (size_t) comm->size, host_alltoall, &bytes);
    cgpu_coll_prof_end(comm);
    return st;
}

static cgpu_status_t host_path_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root,
                                     void *part, size_t part_off, size_t part_bytes, bool *kept)
{
    (void) part;
    (void) part_off;
    (void) part_bytes;
    *kept = false;
    bcast_args_t a = {.root = root, .bytes = bytes};
    cgpu_coll_prof_begin(comm, "bcast", bytes, "byte", "", bytes, "chain");
    cgpu_status_t st = run_host_staged(comm, buf, buf, bytes, host_bcast, &a);
    cgpu_coll_prof_end(comm);
    return st;
}

/* The ring gathers into rbuf, or into a host copy of it where it is device memory: this
 * rank's block is copied there from sbuf (or from its place in rbuf), and the whole result
 * back once. No device-to-device copy of the block into rbuf first: on a GPU time-sliced
 * with another process that waits for a time slice. */
static cgpu_status_t host_path_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                         size_t bytes)
{
    const size_t total = bytes * (size_t) comm->size;
    char *mine = (char *) rbuf + (size_t) comm->rank * bytes;
    const void *src = NULL != sbuf ? sbuf : mine;
    if (1 == comm->size) {
        return src != mine ? cgpu_engine_copy(mine, src, bytes) : CGPU_OK;
    }
    host_stage_t hs;
    memset(&hs, 0, sizeof(hs));
    char *out = rbuf;
    cgpu_status_t st = CGPU_OK;
    if (on_device(comm, rbuf)) {
        hs.out_copy = cgpu_host_pool_get(total);
        out = hs.out_copy;
        st = NULL == out ? CGPU_ERR_NO_MEMORY : CGPU_OK;
    }
    char *own = NULL != out ? out + (size_t) comm->rank * bytes : NULL;
    if (CGPU_OK == st && src != own) {
        st = cgpu_engine_copy(own, src, bytes);
    }
    cgpu_coll_prof_begin(comm, "allgather", bytes, "byte", "", total, "ring");
    if (CGPU_OK == st) {
        st = cgpu_host_ring_allgather(comm, out, bytes);
    } else {
        /* staging failed here: take part on zeroed scratch, so no peer waits */
        void *tmp = calloc(1, total);
        if (NULL != tmp) {
            (void) cgpu_host_ring_allgather(comm, tmp, bytes);
            free(tmp);
        }
    }
    cgpu_coll_prof_end(comm);
    return stage_out(rbuf, total, &hs, st);
}

static cgpu_status_t host_path_reduce_scatter_block(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                                    size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    const size_t es = cgpu_dtype_size(dt), total = count * es * (size_t) comm->size;
    cgpu_status_t st = CGPU_OK;
    /* input: sbuf, or rbuf itself (in place); the output block may alias the input */
    const void *src = NULL != sbuf ? sbuf : rbuf;
    void *in_view, *in_own, *out_view, *out_own;
    st = cgpu_host_view(src, total, true, &in_view, &in_own);
    if (CGPU_OK == st) {
        st = cgpu_host_view(rbuf, NULL != sbuf ? count * es : total, NULL == sbuf, &out_view,
                            &out_own);
    } else {
        out_own = NULL;
        out_view = rbuf;
    }
    void *scratch = NULL;
    if (CGPU_OK != st) { /* take part on scratch so no peer waits */
        scratch = calloc(1, total);
        in_view = out_view = scratch;
    }
    char *tmp = NULL;
    if (NULL == sbuf && CGPU_OK == st) {
        /* in place: the result goes to the front of rbuf, which is input block 0 */
        tmp = malloc(count * es);
        st = NULL == tmp ? CGPU_ERR_NO_MEMORY : CGPU_OK;
    }
    if (NULL != in_view) {
        cgpu_coll_prof_begin(comm, "reduce_scatter_block", count, cgpu_dtype_name(dt),
                             cgpu_op_name(op), total, "ring");
        cgpu_status_t rs = comm->size > 1
                               ? cgpu_host_ring_reduce_scatter(
                                     comm, in_view, NULL != tmp ? tmp : out_view, count, dt, op)
                               : CGPU_OK;
        if (1 == comm->size) {
            memmove(NULL != tmp ? (void *) tmp : out_view, in_view, count * es);
        }
        cgpu_coll_prof_end(comm);
        if (CGPU_OK == st) {
            st = rs;
        }
    }
    if (CGPU_OK == st && NULL != tmp) {
        memcpy(out_view, tmp, count * es);
    }
    if (CGPU_OK == st && NULL != out_own) {
        st = cgpu_engine_copy(rbuf, out_own, count * es);
    }
    free(tmp);
    free(scratch);
    cgpu_host_pool_put(in_own);
    cgpu_host_pool_put(out_own);
    return st;
}

static cgpu_status_t host_path_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                      cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool is_root = comm->rank == root;
    cgpu_status_t st;
    void *in_view, *in_own, *out_view = NULL, *out_own = NULL;
    st = cgpu_host_view(NULL != sbuf ? sbuf : rbuf, bytes, true, &in_view, &in_own);
    if (CGPU_OK == st && is_root) {
        st = cgpu_host_view(rbuf, bytes, false, &out_view, &out_own);
    }
    void *scratch = NULL;
    if (CGPU_OK != st) {
        scratch = calloc(1, bytes);
        in_view = out_view = scratch;
    }
    if (NULL != in_view) {
        cgpu_coll_prof_begin(comm, "reduce", count, cgpu_dtype_name(dt), cgpu_op_name(op), bytes,
                             "chain");
        cgpu_status_t rs = CGPU_OK;
        if (comm->size > 1) {
            rs = cgpu_host_ring_reduce(comm, in_view, out_view, count, dt, op, root);
        } else if (out_view != in_view) {
            memcpy(out_view, in_view, bytes);
        }
        cgpu_coll_prof_end(comm);
        if (CGPU_OK == st) {
            st = rs;
        }
    }
    if (CGPU_OK == st && is_root && NULL != out_own) {
        st = cgpu_engine_copy(rbuf, out_own, bytes);
    }
    free(scratch);
    cgpu_host_pool_put(in_own);
    cgpu_host_pool_put(out_own);
    return st;
}

static int host_transport(const cgpu_comm_t *comm)
{
    (void) comm;
    return CGPU_RAS_TRANSPORT_SHM;
}

const cgpu_path_ops_t cgpu_path_host = {
    .size = sizeof(cgpu_path_ops_t),
    .name = "host",
    .reduces = cgpu_path_no_reduce,
    .allreduce = host_path_allreduce,
    .alltoall = host_path_alltoall,
    .bcast = host_path_bcast,
    .allgather = host_path_allgather,
    .reduce_scatter_block = host_path_reduce_scatter_block,
    .reduce = host_path_reduce,
    .scan = cgpu_path_no_scan,
    .transport = host_transport,
};
