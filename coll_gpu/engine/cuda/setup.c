/*
 * coll/gpu engine, cuda backend: a communicator's CUDA state made and freed.
 *
 * Set-up lays out this rank's inbox (flags, LL area, ring slots, oneshot slices, tree and
 * alltoall slots: cgpu_cuda_kernels.h), takes it from the pool, and creates the streams,
 * events and first staging buffers; connect maps every peer's inbox and sizes the
 * communicator's share of channels and blocks; destroy undoes both, telling each peer its
 * inbox is free of us. Apart from the calls because it runs under the set-up exclusion
 * (no collective of the process in flight) and never on a call's path. The device record
 * exchanged before set-up is here too, built with or without CUDA.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_config.h"
#include "cgpu_clock.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

bool cgpu_cuda_comm_supports(cgpu_dtype_t dt, cgpu_op_t op)
{
    return 0 != cgpu_cuda_reduce_supported(dt, op);
}

static pthread_once_t preload_once = PTHREAD_ONCE_INIT;
static int preload_err;

static void preload(void)
{
    preload_err = cgpu_cuda_kernels_preload();
}

/* The channels a call may use: ring channels, and alltoall channels per peer distance (0:
 * no device alltoall), shared out among the `share` ranks on one device. Set-up lays the
 * inbox out for share 1; connect may lower them (every rank computes the same share). */
static void channel_caps(cgpu_cuda_comm_t *cc, int size, int share)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    const int cpd = size > 1 ? cfg->cuda_a2a_channels / (size - 1) : 0;
    cc->nch_max = cfg->cuda_channels / share > 0 ? cfg->cuda_channels / share : 1;
    cc->a2a_cpd_max = 0 == cpd ? 0 : cpd / share > 0 ? cpd / share : 1;
}

static cgpu_status_t comm_setup(cgpu_comm_t *comm, void *handle_out)
{
    /* before any of our kernels can run, so no lazy load ever waits for one */
    pthread_once(&preload_once, preload);
    if (0 != preload_err) {
        return cgpu_cuda_check(preload_err, "loading the collective kernels");
    }
    const cgpu_config_t *cfg = cgpu_engine_config();
    if (comm->size > CGPU_CUDA_MAX_RANKS) {
        cgpu_log(CGPU_LOG_INFO, "cuda: %d ranks exceed the %d the cuda backend handles", comm->size,
                 CGPU_CUDA_MAX_RANKS);
        return CGPU_ERR_NOT_SUPPORTED;
    }
    cgpu_cuda_comm_t *cc = calloc(1, sizeof(*cc));
    if (NULL == cc) {
        return CGPU_ERR_NO_MEMORY;
    }
    comm->cuda = cc;
    cc->device = cgpu_cuda_current_device();
    channel_caps(cc, comm->size, 1);
    cc->ch_min = cfg->cuda_channel_min_bytes;
    cc->chain_chunk = cfg->cuda_chain_chunk_bytes;
    cc->threads = cfg->cuda_threads;
    cc->nslots = cfg->cuda_slots;
    cc->slot_bytes = (cfg->cuda_slot_bytes + 255) & ~(size_t) 255;
    cc->oneshot_slice = (cfg->cuda_oneshot_bytes + 255) & ~(size_t) 255;
    /* LL size classes up to coll_gpu_cuda_ll_bytes and 512 KiB / ranks (the area stays
     * near 4 MiB whatever the size); the same on every rank */
    cc->ll_classes = cgpu_ll_classes(cfg->cuda_ll_bytes, comm->size);
    cc->ll_off = (CGPU_CUDA_FLAG_BYTES + 255) & ~(size_t) 255;
    cc->ring_off =
        (cc->ll_off + CGPU_CUDA_LL_CLASS_OFF(comm->size, cc->ll_classes) + 4095) & ~(size_t) 4095;
    cc->oneshot_off = cc->ring_off + (size_t) cc->nch_max * cc->nslots * cc->slot_bytes;
    cc->tree_off = cc->oneshot_off + 2 * (size_t) comm->size * cc->oneshot_slice;
    cc->tree_nch = cfg->cuda_tree_channels;
    cc->tree_max_bytes = cfg->cuda_tree_max_bytes;
    cc->a2a_off =
        cc->tree_off + (size_t) cc->tree_nch * CGPU_CUDA_TREE_PORTS * cc->nslots * cc->slot_bytes;
    cc->inbox_bytes = cc->a2a_off + (size_t) cfg->cuda_a2a_channels * cc->nslots * cc->slot_bytes;

    cc->timeout_ns = (unsigned long long) (cfg->cuda_timeout_s * 1e9);
    /* ordering after the caller's default-stream work: the stream waits for order_ev,
     * recorded on the legacy stream (cgpu_cuda_stage); in `stream` mode the stream is a
     * blocking one instead (ordered after the legacy stream, not after the application's
     * blocking streams); the copy-engine paths and resident calls wait for order_ev on the
     * host */
    cc->blocking = CGPU_ORDER_BLOCKING_STREAM == cfg->cuda_stream_order;
    uint64_t t[6]; /* where the set-up's time goes (verbose 50) */
    t[0] = cgpu_now_ns();
    cgpu_status_t st = cgpu_cuda_stream_create(&cc->stream, cc->blocking);
    if (CGPU_OK == st && CGPU_ORDER_NONE != cfg->cuda_stream_order) {
        st = cgpu_cuda_event_create(&cc->order_ev);
    }
    /* the 2-rank copy-engine reduce and allreduce (their streams): ranks on two devices only
     * (copy_engine.c says why); dev_share comes from the same table on every rank */
    const bool ce2 = 2 == comm->size && 1 == comm->dev_share &&
                     (0 != cfg->cuda_ce_reduce_min_bytes || 0 != cfg->cuda_ce_allreduce_min_bytes);
    if (CGPU_OK == st && ce2) {
        st = cgpu_cuda_stream_create(&cc->stream2, false);
        if (CGPU_OK == st) {
            st = cgpu_cuda_event_create(&cc->ev2);
        }
    }
    if (CGPU_OK == st && ce2 && 0 != cfg->cuda_ce_allreduce_min_bytes) {
        st = cgpu_cuda_stream_create(&cc->stream3, false);
        if (CGPU_OK == st) {
            st = cgpu_cuda_event_create(&cc->ev3);
        }
    }
    if (CGPU_OK != st) {
        return st;
    }
    void *eh = NULL, *ed = NULL;
    t[1] = cgpu_now_ns();
    st = cgpu_cuda_host_alloc_mapped(&eh, &ed, 64);
    if (CGPU_OK != st) {
        return st;
    }
    cc->err_host = eh;
    cc->err_dev = ed;
    t[2] = cgpu_now_ns();
    st = cgpu_cuda_rk_setup(comm, cc);
    if (CGPU_OK != st) {
        return st;
    }
    /* the flags and the LL area start from zero (cgpu_cuda_kernels.h) */
    t[3] = cgpu_now_ns();
    st = cgpu_inbox_get(cc->inbox_bytes, cc->ring_off, comm->size - 1, cc->stream, &cc->ib);
    if (CGPU_OK != st) {
        return st;
    }
    cc->peer_inbox = calloc((size_t) comm->size, sizeof(char *));
    cc->peer_release = calloc((size_t) comm->size, sizeof(size_t));
    if (NULL == cc->peer_inbox || NULL == cc->peer_release) {
        return CGPU_ERR_NO_MEMORY;
    }
    cc->peer_inbox[comm->rank] = cc->ib.ptr;
    /* staging buffers for messages up to 1 MiB now, while no collective is in flight:
     * a larger one grows them later, in the call (see cgpu_cuda_comm_setup below) */
    t[4] = cgpu_now_ns();
    cgpu_stage_bufs_t spare;
    if (cgpu_stage_bufs_get(cc->device, &spare)) { /* a released communicator's */
        cc->scratch = spare.scratch;
        cc->scratch_bytes = spare.scratch_bytes;
        cc->pinned = spare.pinned;
        cc->pinned_bytes = spare.pinned_bytes;
    }
    st = cgpu_cuda_ensure_scratch(cc, 1u << 20);
    if (CGPU_OK == st) {
        st = cgpu_cuda_ensure_pinned(cc, 1u << 20);
    }
    if (CGPU_OK != st) {
        return st;
    }
    t[5] = cgpu_now_ns();
    cgpu_log(CGPU_LOG_DEBUG,
             "cuda: set-up of rank %d of %d: streams %.0f us, error word %.0f, resident %.0f, "
             "inbox %.0f, staging %.0f",
             comm->rank, comm->size, (double) (t[1] - t[0]) / 1e3, (double) (t[2] - t[1]) / 1e3,
             (double) (t[3] - t[2]) / 1e3, (double) (t[4] - t[3]) / 1e3,
             (double) (t[5] - t[4]) / 1e3);
    cgpu_cuda_inbox_rec_t *rec = handle_out;
    memcpy(rec->handle, cc->ib.handle, sizeof(rec->handle));
    rec->release_off = cc->ib.bytes;
    return CGPU_OK;
}

static const cgpu_cuda_inbox_rec_t *rec_of(const char *handles, int i)
{
    return (const cgpu_cuda_inbox_rec_t *) (handles + (size_t) i * sizeof(cgpu_cuda_inbox_rec_t));
}

static cgpu_status_t comm_connect(cgpu_comm_t *comm, const char *handles)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    /* the most ranks on one device (cgpu_comm_create, from the first exchange) */
    const int share = comm->dev_share;
    cc->shared_device = share > 1;
    cc->sms = cgpu_cuda_device_sms(cc->device);
    cc->block_cap = cgpu_cuda_block_cap(cc, share); /* no launch comes before connect */
    if (NULL != cgpu_cuda_budget_of(cc)) {
        __atomic_fetch_add(&cgpu_cuda_budget_of(cc)->comms, 1, __ATOMIC_RELAXED);
        cc->block_counted = true;
    }
    if (share > 1) {
        /* the kernels of a call wait for each other across the ranks: under MPS those of
         * the ranks on one device must all fit on it at once (4 ranks x 64 ring channels
         * of 512 threads, beside the resident kernels, do not on an H200), so the ranks
         * that share it share the channels */
        channel_caps(cc, comm->size, share);
        if (0 == comm->rank) {
            cgpu_log(CGPU_LOG_INFO,
                     "cuda: up to %d ranks share a device: at most %d ring "
                     "channels and %d alltoall channels per peer a call",
                     share, cc->nch_max, cc->a2a_cpd_max);
        }
    }
    for (int i = 0; i < comm->size; ++i) {
        if (i == comm->rank) {
            continue;
        }
        void *p = NULL;
        const cgpu_cuda_inbox_rec_t *rec = rec_of(handles, i);
        cc->peer_release[i] = (size_t) rec->release_off;
        cgpu_status_t st = cgpu_ipc_cache_get(rec->handle, &p);
        if (CGPU_OK != st) {
            cgpu_log(CGPU_LOG_WARN, "cuda: rank %d cannot map rank %d's inbox", comm->rank, i);
            return st;
        }
        cc->peer_inbox[i] = p;
    }
    return CGPU_OK;
}

/* The CUDA runtime might make allocation and IPC calls wait for the kernels running on the
 * device; if one of ours waited for a peer blocked the same way, neither would finish. So
 * a communicator's set-up first waits, for a bounded time, until no collective of this
 * process is in flight (cgpu_cuda_setup_begin, which says why the wait is bounded: it can
 * close a cycle of its own between threads of different ranks). Growing a staging buffer
 * inside a call is never done under it (two ranks could wait for each other's kernels);
 * set-up allocates them for messages up to 1 MiB. */
cgpu_status_t cgpu_cuda_comm_setup(cgpu_comm_t *comm, void *handle_out)
{
    const bool held = cgpu_cuda_setup_begin();
    cgpu_status_t st = comm_setup(comm, handle_out);
    cgpu_cuda_setup_end(held);
    return st;
}

cgpu_status_t cgpu_cuda_comm_connect(cgpu_comm_t *comm, const char *handles)
{
    const bool held = cgpu_cuda_setup_begin();
    cgpu_status_t st = comm_connect(comm, handles);
    cgpu_cuda_setup_end(held);
    return st;
}

void cgpu_cuda_comm_destroy(cgpu_comm_t *comm)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    if (NULL == cc) {
        return;
    }
    comm->cuda = NULL;
    int prev = cgpu_cuda_current_device();
    if (cc->device >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(cc->device);
    }
    if (NULL != cc->stream) {
        (void) cgpu_cuda_stream_sync(cc->stream);
    }
    cgpu_cuda_rk_unlist(cc);
    if (cc->block_counted) {
        __atomic_fetch_sub(&cgpu_cuda_budget_of(cc)->comms, 1, __ATOMIC_RELAXED);
        cc->block_counted = false;
    }
    cgpu_cuda_rk_report(comm, cc); /* the kernel has ended (cgpu_cuda_rk_unlist) */
    bool all_mapped = NULL != cc->peer_inbox;
    if (NULL != cc->peer_inbox) {
        /* every kernel of ours has completed (the stream is synchronized): tell each
         * peer its inbox is free of us, then drop our mappings (cached for reuse) */
        char **peers = calloc((size_t) comm->size, sizeof(char *));
        for (int i = 0; NULL != peers && i < comm->size; ++i) {
            peers[i] = i == comm->rank ? NULL : cc->peer_inbox[i];
            all_mapped = all_mapped && (i == comm->rank || NULL != cc->peer_inbox[i]);
        }
        if (NULL != peers && NULL != cc->stream) {
            (void) cgpu_inbox_signal_release(peers, cc->peer_release, comm->size, cc->stream);
        }
        free(peers);
        for (int i = 0; i < comm->size; ++i) {
            if (i != comm->rank) {
                cgpu_ipc_cache_put(cc->peer_inbox[i]);
            }
        }
        free(cc->peer_inbox);
    }
    free(cc->peer_release);
    const uint64_t t_frees = cgpu_now_ns();
    /* pooled only when every peer mapped it (so every peer will release it) */
    if (all_mapped) {
        cgpu_inbox_put(&cc->ib);
    } else {
        cgpu_cuda_free(cc->ib.ptr);
    }
    /* for the next communicator on this device (its stream is synchronized above) */
    cgpu_stage_bufs_t spare = {.scratch = cc->scratch,
                               .scratch_bytes = cc->scratch_bytes,
                               .pinned = cc->pinned,
                               .pinned_bytes = cc->pinned_bytes,
                               .device = cc->device};
    cgpu_stage_bufs_put(&spare);
    cgpu_cuda_free(cc->zeros);
    cgpu_cuda_host_free((void *) cc->err_host);
    cgpu_cuda_free(cc->rk_state);
    cgpu_cuda_host_free(cc->rk_ctl);
    cgpu_cuda_event_destroy(cc->rk_ev);
    cgpu_cuda_stream_destroy(cc->rk_stream);
    cgpu_cuda_event_destroy(cc->order_ev);
    cgpu_cuda_event_destroy(cc->ev2);
    cgpu_cuda_stream_destroy(cc->stream2);
    cgpu_cuda_event_destroy(cc->ev3);
    cgpu_cuda_stream_destroy(cc->stream3);
    cgpu_cuda_stream_destroy(cc->stream);
    cgpu_log(CGPU_LOG_DEBUG, "cuda: release of rank %d of %d: frees %.0f us", comm->rank,
             comm->size, (double) (cgpu_now_ns() - t_frees) / 1e3);
    if (prev >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    free(cc);
}

bool cgpu_cuda_comm_shares_device(const cgpu_comm_t *comm)
{
    return NULL != comm->cuda && comm->cuda->shared_device;
}

#endif /* CGPU_HAVE_CUDA */

/* with or without CUDA: the glue answers "unknown" without it */
void cgpu_cuda_dev_rec(cgpu_cuda_dev_rec_t *rec, int device, int rank)
{
    memset(rec, 0, sizeof(*rec));
    /* asked first: the queries below must not be what makes the context active */
    rec->chosen = 1 == cgpu_cuda_device_in_use(device);
    if (device < 0 ||
        CGPU_OK != cgpu_cuda_pci_bus_id(device, rec->bus, (int) sizeof(rec->bus) - 1)) {
        snprintf(rec->bus, sizeof(rec->bus), "?%d", rank); /* unknown: shares nothing */
    }
    rec->mps = device < 0 ? -1 : cgpu_cuda_mps_enabled(device);
    rec->sliced = rec->chosen && cgpu_cuda_time_sliced();
}
