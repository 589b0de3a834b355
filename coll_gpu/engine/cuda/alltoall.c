/*
 * coll/gpu engine, cuda backend: the alltoall, its entry point and its launch.
 *
 * Small calls go oneshot (oneshot.c); large ones between separate buffers may go on the
 * copy engines (copy_engine.c); the rest on the direct alltoall kernel, whose channels per
 * peer distance (a2a_cpd_max, set at connect) move each peer's block through the alltoall
 * slots of its inbox, a channel's count of chunks carried over from call to call. Apart
 * from the ring-based collectives because it has kernels, inbox slots and channel counts of
 * its own.
 */
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

bool cgpu_cuda_comm_alltoall_ok(const cgpu_comm_t *comm)
{
    return NULL != comm->cuda && comm->cuda->a2a_cpd_max > 0;
}

static cgpu_status_t launch_a2a(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t bytes = *(const size_t *) args, n = (size_t) comm->size;
    /* a channel per 64 KiB of a peer's block, up to this distance's share */
    const size_t cpd = cgpu_clamp1(cgpu_div_up(bytes, 64 << 10), (size_t) cc->a2a_cpd_max);
    const size_t region = cgpu_round_up(cgpu_div_up(bytes, cpd), 16);
    const size_t chunk = region < cc->slot_bytes ? region : cc->slot_bytes;
    const size_t nchunks = cgpu_div_up(region, chunk);
    const size_t nself = cgpu_clamp1(cgpu_div_up(bytes, 256 << 10), 16);

    cgpu_cuda_a2a_args_t a;
    memset(&a, 0, sizeof(a));
    a.timeout_ns = cc->timeout_ns;
    a.err = cc->err_dev;
    a.in = in;
    a.out = out;
    a.bytes = bytes;
    a.region = region;
    a.chunk = chunk;
    a.nchunks = (int) nchunks;
    a.cpd = (int) cpd;
    a.cpd_max = cc->a2a_cpd_max;
    a.nself = (int) nself;
    a.rank = comm->rank;
    a.nranks = comm->size;
    a.nslots = cc->nslots;
    a.slot_bytes = cc->slot_bytes;
    a.a2a_off = cc->a2a_off;
    for (int i = 0; i < comm->size; ++i) {
        a.inbox[i] = cc->peer_inbox[i];
    }
    memcpy(a.base, cc->a2a_base, sizeof(a.base));
    a.grid = cgpu_cuda_blocks_take(cc, 2 * (comm->size - 1) * (int) cpd + (int) nself, 2);
    cgpu_log(CGPU_LOG_TRACE, "cuda: alltoall rank %d bytes %zu cpd %zu chunk %zu chunks %zu",
             comm->rank, bytes, cpd, chunk, nchunks);
    int err = cgpu_cuda_a2a_launch(&a, cc->threads, cc->stream);
    if (0 != err) {
        return cgpu_cuda_check(err, "alltoall launch");
    }
    for (size_t d = 1; d < n; ++d) {
        for (size_t j = 0; j < cpd; ++j) {
            cc->a2a_base[(d - 1) * (size_t) cc->a2a_cpd_max + j] += nchunks;
        }
    }
    return CGPU_OK;
}

cgpu_status_t cgpu_cuda_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    const size_t total = bytes * (size_t) comm->size;
    cgpu_cuda_call_t k = {.kind = "alltoall",
                          .dtype = "byte",
                          .op = "",
                          .alg = "direct",
                          .count = bytes,
                          .bytes = total,
                          .ras_alg = CGPU_RAS_ALG_DIRECT,
                          .sbuf = sbuf,
                          .in_bytes = total,
                          .rbuf = rbuf,
                          .out_bytes = total,
                          .force_copy_in = sbuf == rbuf,
                          .fn = launch_a2a,
                          .args = &bytes};
    cgpu_cuda_ring_call_t rc = {.mode = CGPU_CUDA_ONESHOT_ALLTOALL, .count = bytes, .copy = true};
    if (cgpu_cuda_small_call(comm, CGPU_CUDA_SMALL_PEER, bytes)) {
        return cgpu_cuda_run_small(comm, &k, &rc);
    }
    const size_t ce_min = cgpu_engine_config()->cuda_ce_alltoall_min_bytes;
    if (0 != ce_min && total >= ce_min) {
        bool done;
        cgpu_status_t st = cgpu_cuda_ce_try_alltoall(comm, &k, sbuf, rbuf, bytes, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    return cgpu_cuda_run(comm, &k);
}

#endif /* CGPU_HAVE_CUDA */
