/*
 * coll/gpu engine, cuda backend: every entry the rest of the engine calls, for builds
 * without CUDA (--with-cuda=no), in one place.
 *
 * Set-up and the collectives answer CGPU_ERR_NOT_SUPPORTED, the questions answer no, and
 * releases do nothing, so the engine calls the backend the same way in both builds. What
 * exists in both builds (the device record, the pool's counters) is not here but beside
 * its CUDA code (setup.c, pool.c).
 */
#include <string.h>

#include "cgpu_config.h"
#include "cgpu_cuda_comm.h"
#include "cgpu_cuda_pool.h"

#ifndef CGPU_HAVE_CUDA

/* ---- the communicator (cgpu_cuda_comm.h) ---- */

bool cgpu_cuda_comm_supports(cgpu_dtype_t dt, cgpu_op_t op)
{
    (void) dt, (void) op;
    return false;
}

cgpu_status_t cgpu_cuda_comm_setup(cgpu_comm_t *comm, void *handle_out)
{
    (void) comm, (void) handle_out;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_comm_connect(cgpu_comm_t *comm, const char *handles)
{
    (void) comm, (void) handles;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_cuda_comm_destroy(cgpu_comm_t *comm)
{
    (void) comm;
}

cgpu_status_t cgpu_cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                  const cgpu_pairs_out_t *po)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) count, (void) dt, (void) op, (void) alg;
    (void) po;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) count, (void) dt, (void) op;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_comm_zeros(cgpu_comm_t *comm, size_t bytes, const void **out)
{
    (void) comm, (void) bytes, (void) out;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) count, (void) dt, (void) op, (void) root;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                              size_t part_off, size_t part_bytes)
{
    (void) comm, (void) buf, (void) bytes, (void) root, (void) part, (void) part_off,
        (void) part_bytes;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_cuda_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) bytes;
    return CGPU_ERR_NOT_SUPPORTED;
}

bool cgpu_cuda_comm_shares_device(const cgpu_comm_t *comm)
{
    (void) comm;
    return false;
}

bool cgpu_cuda_comm_alltoall_ok(const cgpu_comm_t *comm)
{
    (void) comm;
    return false;
}

cgpu_status_t cgpu_cuda_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) bytes;
    return CGPU_ERR_NOT_SUPPORTED;
}

bool cgpu_cuda_small_in_place(cgpu_comm_t *comm, cgpu_cuda_small_kind_t kind, const void *sbuf,
                              const void *rbuf, size_t bytes, cgpu_dtype_t dt)
{
    (void) comm, (void) kind, (void) sbuf, (void) rbuf, (void) bytes, (void) dt;
    return false;
}

cgpu_status_t cgpu_cuda_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, bool exclusive)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) count, (void) dt, (void) op, (void) exclusive;
    return CGPU_ERR_NOT_SUPPORTED;
}

/* ---- the inbox pool and IPC cache (cgpu_cuda_pool.h) ---- */

cgpu_status_t cgpu_inbox_get(size_t bytes, size_t zero_bytes, int npeers, void *stream,
                             cgpu_inbox_t *out)
{
    (void) bytes, (void) zero_bytes, (void) npeers, (void) stream;
    memset(out, 0, sizeof(*out));
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_inbox_put(cgpu_inbox_t *ib)
{
    (void) ib;
}

cgpu_status_t cgpu_inbox_signal_release(char *const *peer_inbox, const size_t *release_off, int n,
                                        void *stream)
{
    (void) peer_inbox, (void) release_off, (void) n, (void) stream;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_ipc_cache_get(const void *handle, void **ptr)
{
    (void) handle;
    *ptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

cgpu_status_t cgpu_ipc_cache_get_id(const void *handle, uint64_t id, void **ptr)
{
    (void) handle, (void) id;
    *ptr = NULL;
    return CGPU_ERR_NOT_SUPPORTED;
}

void cgpu_ipc_cache_put(void *ptr)
{
    (void) ptr;
}

bool cgpu_stage_bufs_get(int device, cgpu_stage_bufs_t *out)
{
    (void) device;
    memset(out, 0, sizeof(*out));
    return false;
}

void cgpu_stage_bufs_put(cgpu_stage_bufs_t *b)
{
    (void) b;
}

void cgpu_cuda_pool_fini(void)
{
}

#endif /* !CGPU_HAVE_CUDA */
