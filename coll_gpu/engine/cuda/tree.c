/*
 * coll/gpu engine, cuda backend: launches of the tree allreduce.
 *
 * A binary tree rooted at rank 0 (parent (r - 1) / 2), two blocks a channel: one reduces
 * the channel's region up the tree, in chunks through the tree slots of the parent's inbox,
 * the other broadcasts the result down through the children's. Fewer steps than the ring's
 * 2(n-1), for 3 or more ranks between the oneshot sizes and coll_gpu_cuda_tree_max_bytes
 * (the choice is in dispatch.c). Each channel's count of chunks (tree_base) carries over
 * from call to call, as the ring's counts do.
 */
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

cgpu_status_t cgpu_cuda_launch_tree(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const cgpu_cuda_ring_call_t *rc = args;
    const size_t count = rc->count;
    const cgpu_dtype_t dt = rc->dt;
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t esize = cgpu_dtype_size(dt), bytes = count * esize;
    const size_t align = 16 / esize > 0 ? 16 / esize : 1;
    const size_t slot_elems = (cc->slot_bytes / esize) / align * align;
    /* a channel per 256 KiB, up to the tree channels there are */
    const size_t nch = cgpu_clamp1(cgpu_div_up(bytes, 256 << 10), (size_t) cc->tree_nch);
    const size_t region = cgpu_round_up(cgpu_div_up(count, nch), align);
    const size_t chunk = region < slot_elems ? region : slot_elems;
    const size_t nchunks = cgpu_div_up(region, chunk);
    const int r = comm->rank, n = comm->size;

    cgpu_cuda_tree_args_t a;
    memset(&a, 0, sizeof(a));
    a.timeout_ns = cc->timeout_ns;
    a.err = cc->err_dev;
    a.in = in;
    a.out = out;
    a.count = count;
    a.region = region;
    a.chunk = chunk;
    a.nchunks = (int) nchunks;
    a.nch = (int) nch;
    a.rank = r;
    a.nranks = n;
    a.nslots = cc->nslots;
    a.slot_bytes = cc->slot_bytes;
    a.tree_off = cc->tree_off;
    a.my_inbox = cc->ib.ptr;
    a.parent_inbox = 0 == r ? NULL : cc->peer_inbox[(r - 1) / 2];
    for (int j = 0; j < 2; ++j) {
        int kid = 2 * r + 1 + j;
        a.child_inbox[j] = kid < n ? cc->peer_inbox[kid] : NULL;
    }
    memcpy(a.base, cc->tree_base, sizeof(a.base));
    a.grid = cgpu_cuda_blocks_take(cc, 2 * (int) nch, 2);
    cgpu_log(CGPU_LOG_TRACE, "cuda: tree allreduce rank %d count %zu %s/%s nch %zu chunk %zu "
             "chunks %zu base %llu", r, count, cgpu_dtype_name(dt), cgpu_op_name(rc->op), nch,
             chunk, nchunks, (unsigned long long) cc->tree_base[0]);
    int err = cgpu_cuda_tree_allreduce(&a, dt, rc->op, cc->threads, cc->stream);
    if (0 != err) {
        return cgpu_cuda_check(err, "tree allreduce launch");
    }
    for (size_t c = 0; c < nch; ++c) {
        cc->tree_base[c] += nchunks;
    }
    return CGPU_OK;
}

#endif /* CGPU_HAVE_CUDA */
