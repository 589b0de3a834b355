/*
 * coll/gpu engine, cuda backend: launches of the ring kernels, for the ring allreduce,
 * reduce-scatter and allgather and for the chains along the ring (bcast, reduce, and the
 * scans past the oneshot sizes).
 *
 * Each channel moves its pieces through the ring slots of the right neighbour's inbox;
 * this file sizes a call's channels and chunks and keeps, per channel, the counts of items
 * sent right and received from the left (ring_sbase, ring_rbase), which each call's flags
 * continue from.
 */
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

cgpu_status_t cgpu_cuda_launch_ring(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const cgpu_cuda_ring_call_t *rc = args;
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t esize = rc->copy ? 1 : cgpu_dtype_size(rc->dt), n = (size_t) comm->size;
    const size_t count = rc->count;
    /* the allreduce cuts its buffer into one piece per rank per channel; the others cut
     * each block (or the buffer) into one piece per channel */
    const size_t pieces = CGPU_CUDA_RING_ALLREDUCE == rc->mode ? n : 1;
    const bool chain = CGPU_CUDA_RING_BCAST == rc->mode || CGPU_CUDA_RING_REDUCE == rc->mode ||
                       CGPU_CUDA_ONESHOT_SCAN == rc->mode || CGPU_CUDA_ONESHOT_EXSCAN == rc->mode;
    const cgpu_cuda_ring_plan_t plan =
        cgpu_cuda_ring_plan(count, esize, pieces, cc->ch_min, (size_t) cc->nch_max, cc->slot_bytes,
                            chain, n, cc->chain_chunk);
    const size_t nch = plan.nch, chunk = plan.chunk, nloops = plan.nloops;

    /* items each channel sends right and receives from the left, per loop */
    size_t nsend = n - 1, nrecv = n - 1;
    if (CGPU_CUDA_RING_ALLREDUCE == rc->mode) {
        nsend = nrecv = 2 * (n - 1);
    } else if (chain) {
        /* chain position: 0 starts it, n-1 ends it (the scans: the reduce's chain to root
         * n-1, from rank 0) */
        const int shift = CGPU_CUDA_RING_BCAST == rc->mode ? 0 : 1;
        const size_t pos = (size_t) ((comm->rank - rc->root - shift + 2 * comm->size) % comm->size);
        nsend = pos < n - 1 ? 1 : 0;
        nrecv = pos > 0 ? 1 : 0;
    }

    cgpu_cuda_ring_args_t a;
    memset(&a, 0, sizeof(a));
    a.timeout_ns = cc->timeout_ns;
    a.err = cc->err_dev;
    a.in = in;
    a.out = out;
    a.count = count;
    a.chunk = chunk;
    a.nloops = (int) nloops;
    a.nch = (int) nch;
    a.rank = comm->rank;
    a.nranks = comm->size;
    a.nslots = cc->nslots;
    a.slot_bytes = cc->slot_bytes;
    a.my_inbox = cc->ib.ptr;
    a.right_inbox = cc->peer_inbox[(comm->rank + 1) % comm->size];
    a.left_inbox = cc->peer_inbox[(comm->rank + comm->size - 1) % comm->size];
    a.ring_off = cc->ring_off;
    a.mode = rc->mode;
    a.root = rc->root;
    memcpy(a.sbase, cc->ring_sbase, sizeof(a.sbase));
    memcpy(a.rbase, cc->ring_rbase, sizeof(a.rbase));
    a.grid = cgpu_cuda_blocks_take(cc, (int) nch, 1);
    cgpu_log(CGPU_LOG_TRACE,
             "cuda: ring mode %d rank %d count %zu nch %zu chunk %zu loops %zu "
             "base %llu/%llu",
             rc->mode, comm->rank, count, nch, chunk, nloops,
             (unsigned long long) cc->ring_sbase[0], (unsigned long long) cc->ring_rbase[0]);
    int err = rc->copy ? cgpu_cuda_ring_copy_launch(&a, cc->threads, cc->stream)
                       : cgpu_cuda_ring_reduce_launch(&a, rc->dt, rc->op, cc->threads, cc->stream);
    if (0 != err) {
        return cgpu_cuda_check(err, "ring launch");
    }
    for (size_t c = 0; c < nch; ++c) {
        cc->ring_sbase[c] += nloops * nsend;
        cc->ring_rbase[c] += nloops * nrecv;
    }
    return CGPU_OK;
}

#endif /* CGPU_HAVE_CUDA */
