/*
 * coll/gpu engine, cuda backend: the run of one call on the device, whatever its algorithm.
 *
 * Every launch path (ring, tree, oneshot, resident, alltoall, copy engine) hands its call
 * here as a cgpu_cuda_call_t: on the communicator's device, with its buffers staged (or,
 * for a resident call, the default stream waited for), counted in flight for the set-up
 * exclusion and the block budget, reported to the profiler and RAS, launched, waited for
 * (MPI semantics: the result is in the buffer when the call returns) and copied out; a
 * kernel that timed out waiting for a peer is reported here, in one place, with what it
 * waited for.
 */
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

cgpu_status_t cgpu_cuda_run(cgpu_comm_t *comm, const cgpu_cuda_call_t *k)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    int prev = cgpu_cuda_current_device();
    cgpu_status_t st = prev != cc->device ? cgpu_cuda_set_device(cc->device) : CGPU_OK;
    if (CGPU_OK != st) {
        return st;
    }
    cgpu_cuda_staged_t sg = {.in = k->sbuf, .out = k->rbuf};
    if (k->resident) { /* no stream to order: the host waits for the default stream (a
                        * gated call: in resident_call, after the descriptor) */
        st = NULL != cc->order_ev && !cgpu_cuda_rk_gated(cc)
                 ? cgpu_cuda_default_stream_wait_host(cc->order_ev)
                 : CGPU_OK;
    } else {
        st = cgpu_cuda_stage(cc, k, &sg);
    }
    if (CGPU_OK != st) {
        goto out_restore;
    }
    cgpu_cuda_inflight_begin();
    if (!k->resident) {
        cgpu_cuda_launched_begin(cc);
    }
    cc->err_host[0] = 0;
    atomic_store_explicit(&comm->ras.alg, k->ras_alg, memory_order_relaxed);
    cgpu_coll_prof_begin(comm, k->kind, k->count, k->dtype, k->op, k->bytes, k->alg);
    cgpu_prof_ev_t kev = {.on = false};
    if (cgpu_prof_enabled(&comm->prof)) {
        cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_KERNEL_V1, .parent = comm->prof.coll};
        ev.u.kernel = (cgpu_prof_kernel_v1_t){.name = k->alg, .blocks = 0, .threads = cc->threads};
        cgpu_prof_start(&comm->prof, &ev, &kev);
    }
    st = k->fn(comm, sg.in, sg.out, k->args);
    const char *tail_src = (const char *) sg.out + k->tail_off; /* the result, staged or not */
    if (CGPU_OK == st && k->tail_bytes > 0 && !k->resident) {
        st = cgpu_cuda_copy_async(k->tail, tail_src, k->tail_bytes, cc->stream);
    }
    if (CGPU_OK == st && sg.copy_out) {
        st = cgpu_cuda_copy_async(NULL != sg.host_out ? sg.host_out : k->rbuf, sg.out,
                                  k->out_bytes, cc->stream);
    }
    size_t off[2], len[2]; /* a padded pair's result: its data runs out of the staged output */
    const int runs = NULL != k->po && k->po->n > 0 ? cgpu_dtype_runs(k->po_dt, off, len) : 0;
    const size_t es = runs > 0 ? cgpu_dtype_size(k->po_dt) : 0;
    for (int r = 0; CGPU_OK == st && r < runs; ++r) {
        const cgpu_copy_t c = {.dst = k->po->out + off[r],
                               .src = (const char *) sg.out + k->po->first * es + off[r],
                               .bytes = len[r],
                               .rows = k->po->n,
                               .pitch = es};
        st = cgpu_cuda_copy_rows_async(&c, cc->stream);
    }
    /* MPI semantics: the result is in the buffer when the call returns */
    cgpu_status_t sync = k->resident ? CGPU_OK : cgpu_cuda_stream_wait_collective(cc->stream);
    cgpu_cuda_blocks_give(cc);
    if (!k->resident) {
        cgpu_cuda_launched_end(cc);
    }
    cgpu_cuda_inflight_end();
    cgpu_prof_stop(&kev); /* launch to completion */
    cgpu_coll_prof_end(comm);
    if (CGPU_OK == st) {
        st = sync;
    }
    if (CGPU_OK == st && NULL != sg.host_out) {
        memcpy(k->rbuf, sg.host_out, k->out_bytes);
    }
    if (CGPU_OK == st && k->tail_bytes > 0 && k->resident) { /* no stream: a copy of its own */
        st = cgpu_cuda_copy(k->tail, tail_src, k->tail_bytes);
    }
    if (CGPU_OK == st && 0 != cc->err_host[0]) {
        static const char *what[] = {"",
                                     "data from the left neighbour (ring)",
                                     "room at the right neighbour (ring)",
                                     "a peer's oneshot data",
                                     "data from a tree neighbour",
                                     "room at a tree neighbour",
                                     "a peer's alltoall data",
                                     "room at an alltoall peer",
                                     "a peer's copy-engine data"};
        unsigned long long w = cc->err_host[0];
        cgpu_log(CGPU_LOG_WARN,
                 "cuda: %s: rank %d waited more than coll_gpu_cuda_timeout for %s (channel/peer "
                 "%llu: wanted %llu, saw %llu); the collective failed (a peer that never "
                 "delivers may be held in a device-wide CUDA call, a cudaFree or "
                 "cudaDeviceSynchronize while collectives are in flight: between a "
                 "non-blocking post and its wait, or on another thread; README, Limits)",
                 k->kind, comm->rank, w < 9 ? what[w] : "?", cc->err_host[1], cc->err_host[2],
                 cc->err_host[3]);
        /* the peer may be gone rather than slow: then the error names it (cgpu_liveness.c) */
        st = cgpu_liveness_look(comm) ? CGPU_ERR_TIMEOUT : CGPU_ERR_PEER_DEAD;
    }
out_restore:
    if (prev >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    return st;
}

#endif /* CGPU_HAVE_CUDA */
