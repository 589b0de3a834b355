/*
 * coll/gpu engine: the cuda backend (inbox set-up over CUDA IPC, allreduce dispatch).
 */
#include <stdlib.h>
#include <string.h>

#include "cgpu_config.h"
#include "cgpu_cuda_comm.h"

#ifdef CGPU_HAVE_CUDA

#include "kernels/cgpu_cuda_kernels.h"

typedef struct cgpu_cuda_comm {
    int device;
    void *stream;
    char *inbox;
    size_t inbox_bytes;
    char **peer_inbox; /* [size]; own entry is inbox */
    size_t ring_off;
    size_t oneshot_off;
    size_t oneshot_slice;
    size_t tree_off;
    int tree_nch;
    size_t tree_max_bytes;
    uint64_t tree_base[CGPU_CUDA_MAX_CHANNELS];
    int nch_max;
    int threads;
    int nslots;
    size_t slot_bytes;
    uint64_t ring_base[CGPU_CUDA_MAX_CHANNELS];
    uint64_t oneshot_seq;
    void *scratch; /* staging for buffers the kernels cannot use in place */
    size_t scratch_bytes;
    volatile unsigned long long *err_host; /* kernels' error record, host view */
    unsigned long long *err_dev;           /* the same, device view */
    unsigned long long timeout_ns;
} cgpu_cuda_comm_t;

bool cgpu_cuda_comm_supports(cgpu_dtype_t dt, cgpu_op_t op)
{
    return 0 != cgpu_cuda_reduce_supported(dt, op);
}

cgpu_status_t cgpu_cuda_comm_setup(cgpu_comm_t *comm, void *handle_out)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    if (comm->size > CGPU_CUDA_MAX_RANKS) {
        cgpu_log(CGPU_LOG_INFO, "cuda: %d ranks exceed the %d the cuda backend handles",
                 comm->size, CGPU_CUDA_MAX_RANKS);
        return CGPU_ERR_NOT_SUPPORTED;
    }
    cgpu_cuda_comm_t *cc = calloc(1, sizeof(*cc));
    if (NULL == cc) {
        return CGPU_ERR_NO_MEMORY;
    }
    comm->cuda = cc;
    cc->device = cgpu_cuda_current_device();
    cc->nch_max = cfg->cuda_channels;
    cc->threads = cfg->cuda_threads;
    cc->nslots = cfg->cuda_slots;
    cc->slot_bytes = (cfg->cuda_slot_bytes + 255) & ~(size_t) 255;
    cc->oneshot_slice = (cfg->cuda_oneshot_bytes + 255) & ~(size_t) 255;
    cc->ring_off = (CGPU_CUDA_FLAG_BYTES + 4095) & ~(size_t) 4095;
    cc->oneshot_off = cc->ring_off + (size_t) cc->nch_max * cc->nslots * cc->slot_bytes;
    cc->tree_off = cc->oneshot_off + 2 * (size_t) comm->size * cc->oneshot_slice;
    cc->tree_nch = cfg->cuda_tree_channels;
    cc->tree_max_bytes = cfg->cuda_tree_max_bytes;
    cc->inbox_bytes = cc->tree_off + (size_t) cc->tree_nch * CGPU_CUDA_TREE_PORTS * cc->nslots *
                                         cc->slot_bytes;

    cc->timeout_ns = (unsigned long long) (cfg->cuda_timeout_s * 1e9);
    cgpu_status_t st = cgpu_cuda_stream_create(&cc->stream);
    if (CGPU_OK != st) {
        return st;
    }
    void *eh = NULL, *ed = NULL;
    st = cgpu_cuda_host_alloc_mapped(&eh, &ed, 64);
    if (CGPU_OK != st) {
        return st;
    }
    cc->err_host = eh;
    cc->err_dev = ed;
    st = cgpu_cuda_malloc((void **) &cc->inbox, cc->inbox_bytes);
    if (CGPU_OK != st) {
        return st;
    }
    cc->peer_inbox = calloc((size_t) comm->size, sizeof(char *));
    if (NULL == cc->peer_inbox) {
        return CGPU_ERR_NO_MEMORY;
    }
    cc->peer_inbox[comm->rank] = cc->inbox;
    return cgpu_cuda_ipc_export(cc->inbox, handle_out);
}

cgpu_status_t cgpu_cuda_comm_connect(cgpu_comm_t *comm, const char *handles)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    for (int i = 0; i < comm->size; ++i) {
        if (i == comm->rank) {
            continue;
        }
        void *p = NULL;
        cgpu_status_t st = cgpu_cuda_ipc_open(handles + (size_t) i * CGPU_CUDA_IPC_HANDLE_BYTES, &p);
        if (CGPU_OK != st) {
            cgpu_log(CGPU_LOG_WARN, "cuda: rank %d cannot map rank %d's inbox", comm->rank, i);
            return st;
        }
        cc->peer_inbox[i] = p;
    }
    return CGPU_OK;
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
    if (NULL != cc->peer_inbox) {
        for (int i = 0; i < comm->size; ++i) {
            if (i != comm->rank) {
                cgpu_cuda_ipc_close(cc->peer_inbox[i]);
            }
        }
        free(cc->peer_inbox);
    }
    cgpu_cuda_free(cc->inbox);
    cgpu_cuda_free(cc->scratch);
    cgpu_cuda_host_free((void *) cc->err_host);
    cgpu_cuda_stream_destroy(cc->stream);
    if (prev >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    free(cc);
}

static cgpu_status_t ensure_scratch(cgpu_cuda_comm_t *cc, size_t bytes)
{
    if (cc->scratch_bytes >= bytes) {
        return CGPU_OK;
    }
    cgpu_cuda_free(cc->scratch);
    cc->scratch = NULL;
    cc->scratch_bytes = 0;
    size_t want = bytes < (1u << 20) ? (1u << 20) : bytes;
    cgpu_status_t st = cgpu_cuda_malloc(&cc->scratch, want);
    if (CGPU_OK == st) {
        cc->scratch_bytes = want;
    }
    return st;
}

/* Can the kernels on cc->device use this buffer in place? */
static bool usable_in_place(const cgpu_cuda_comm_t *cc, const void *p)
{
    int dev;
    cgpu_mem_kind_t k = cgpu_cuda_mem_kind(p, &dev);
    return (CGPU_MEM_DEVICE == k || CGPU_MEM_MANAGED == k) && dev == cc->device;
}

static cgpu_status_t launch_ring(cgpu_comm_t *comm, const void *in, void *out, size_t count,
                                 cgpu_dtype_t dt, cgpu_op_t op)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t esize = cgpu_dtype_size(dt), n = (size_t) comm->size;
    const size_t bytes = count * esize;
    const size_t align = 16 / esize > 0 ? 16 / esize : 1;
    size_t slot_elems = (cc->slot_bytes / esize) / align * align;
    /* add channels only while each still carries >= 64 KiB per rank */
    size_t nch = (bytes + n * (64 << 10) - 1) / (n * (64 << 10));
    nch = nch < 1 ? 1 : nch > (size_t) cc->nch_max ? (size_t) cc->nch_max : nch;
    size_t per = (count + nch * n - 1) / (nch * n);
    per = (per + align - 1) / align * align;
    size_t chunk = per < slot_elems ? per : slot_elems;
    size_t nloops = (count + nch * n * chunk - 1) / (nch * n * chunk);

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
    a.my_inbox = cc->inbox;
    a.right_inbox = cc->peer_inbox[(comm->rank + 1) % comm->size];
    a.left_inbox = cc->peer_inbox[(comm->rank + comm->size - 1) % comm->size];
    a.ring_off = cc->ring_off;
    memcpy(a.base, cc->ring_base, sizeof(a.base));
    cgpu_log(CGPU_LOG_TRACE, "cuda: ring allreduce rank %d count %zu %s/%s nch %zu chunk %zu "
             "loops %zu base %llu", comm->rank, count, cgpu_dtype_name(dt), cgpu_op_name(op), nch,
             chunk, nloops, (unsigned long long) cc->ring_base[0]);
    int err = cgpu_cuda_ring_allreduce(&a, dt, op, cc->threads, cc->stream);
    if (0 != err) {
        return cgpu_cuda_check(err, "ring allreduce launch");
    }
    for (size_t c = 0; c < nch; ++c) {
        cc->ring_base[c] += nloops * 2 * (n - 1);
    }
    return CGPU_OK;
}

static cgpu_status_t launch_tree(cgpu_comm_t *comm, const void *in, void *out, size_t count,
                                 cgpu_dtype_t dt, cgpu_op_t op)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t esize = cgpu_dtype_size(dt), bytes = count * esize;
    const size_t align = 16 / esize > 0 ? 16 / esize : 1;
    const size_t slot_elems = (cc->slot_bytes / esize) / align * align;
    /* a channel per 256 KiB, up to the tree channels there are */
    size_t nch = (bytes + (256 << 10) - 1) / (256 << 10);
    nch = nch < 1 ? 1 : nch > (size_t) cc->tree_nch ? (size_t) cc->tree_nch : nch;
    size_t region = (count + nch - 1) / nch;
    region = (region + align - 1) / align * align;
    size_t chunk = region < slot_elems ? region : slot_elems;
    size_t nchunks = (region + chunk - 1) / chunk;
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
    a.my_inbox = cc->inbox;
    a.parent_inbox = 0 == r ? NULL : cc->peer_inbox[(r - 1) / 2];
    for (int j = 0; j < 2; ++j) {
        int kid = 2 * r + 1 + j;
        a.child_inbox[j] = kid < n ? cc->peer_inbox[kid] : NULL;
    }
    memcpy(a.base, cc->tree_base, sizeof(a.base));
    cgpu_log(CGPU_LOG_TRACE, "cuda: tree allreduce rank %d count %zu %s/%s nch %zu chunk %zu "
             "chunks %zu base %llu", r, count, cgpu_dtype_name(dt), cgpu_op_name(op), nch, chunk,
             nchunks, (unsigned long long) cc->tree_base[0]);
    int err = cgpu_cuda_tree_allreduce(&a, dt, op, cc->threads, cc->stream);
    if (0 != err) {
        return cgpu_cuda_check(err, "tree allreduce launch");
    }
    for (size_t c = 0; c < nch; ++c) {
        cc->tree_base[c] += nchunks;
    }
    return CGPU_OK;
}

static cgpu_status_t launch_oneshot(cgpu_comm_t *comm, const void *in, void *out, size_t count,
                                    cgpu_dtype_t dt, cgpu_op_t op)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t bytes = count * cgpu_dtype_size(dt);
    cgpu_cuda_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    a.timeout_ns = cc->timeout_ns;
    a.err = cc->err_dev;
    a.in = in;
    a.out = out;
    a.count = count;
    a.rank = comm->rank;
    a.nranks = comm->size;
    /* one block per 8 KiB, at most the flag slots we have */
    size_t nb = (bytes + (8 << 10) - 1) / (8 << 10);
    a.nblocks = (int) (nb < 1 ? 1 : nb > CGPU_CUDA_MAX_ONESHOT_BLOCKS ? CGPU_CUDA_MAX_ONESHOT_BLOCKS : nb);
    a.seq = ++cc->oneshot_seq;
    a.slice_bytes = cc->oneshot_slice;
    a.oneshot_off = cc->oneshot_off;
    for (int i = 0; i < comm->size; ++i) {
        a.inbox[i] = cc->peer_inbox[i];
    }
    cgpu_log(CGPU_LOG_TRACE, "cuda: oneshot allreduce rank %d count %zu %s/%s blocks %d seq %llu",
             comm->rank, count, cgpu_dtype_name(dt), cgpu_op_name(op), a.nblocks,
             (unsigned long long) a.seq);
    int err = cgpu_cuda_oneshot_allreduce(&a, dt, op, cc->threads, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "oneshot allreduce launch") : CGPU_OK;
}

cgpu_status_t cgpu_cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool in_place = (sbuf == rbuf);
    cgpu_status_t st = CGPU_OK;

    int prev = cgpu_cuda_current_device();
    if (prev != cc->device) {
        st = cgpu_cuda_set_device(cc->device);
        if (CGPU_OK != st) {
            return st;
        }
    }
    /* Stage what the kernels cannot use in place (host memory, another device's
     * memory): into scratch, [in | out] or one shared region when in place. */
    const void *in = sbuf;
    void *out = rbuf;
    bool stage_in = !usable_in_place(cc, sbuf);
    bool stage_out = in_place ? stage_in : !usable_in_place(cc, rbuf);
    if (stage_in || stage_out) {
        st = ensure_scratch(cc, 2 * bytes);
        if (CGPU_OK != st) {
            goto out_restore;
        }
    }
    if (stage_in) {
        st = cgpu_cuda_copy_async(cc->scratch, sbuf, bytes, cc->stream);
        if (CGPU_OK != st) {
            goto out_restore;
        }
        in = cc->scratch;
    }
    if (stage_out) {
        out = in_place ? cc->scratch : (char *) cc->scratch + bytes;
    }

    cc->err_host[0] = 0;
    /* oneshot moves (n-1) x bytes out of every rank, the ring 2(n-1)/n x bytes: with
     * auto, its size limit shrinks as ranks are added (2 ranks: the whole slice) */
    size_t oneshot_max = CGPU_ALLREDUCE_ONESHOT == alg ? cc->oneshot_slice
                                                        : cc->oneshot_slice * 2 / (size_t) comm->size;
    bool oneshot = (CGPU_ALLREDUCE_ONESHOT == alg || CGPU_ALLREDUCE_AUTO == alg) &&
                   bytes <= oneshot_max;
    /* tree: forced, or auto for 3+ ranks between the oneshot limit and tree_max_bytes
     * (fewer steps than the ring's 2(n-1) where latency still matters) */
    bool tree = !oneshot && cc->tree_nch > 0 &&
                (CGPU_ALLREDUCE_TREE == alg ||
                 (CGPU_ALLREDUCE_AUTO == alg && comm->size >= 3 && bytes <= cc->tree_max_bytes));
    const char *alg_name = oneshot ? "oneshot" : tree ? "tree" : "ring";
    atomic_store_explicit(&comm->ras.alg,
                          oneshot ? CGPU_RAS_ALG_ONESHOT : tree ? CGPU_RAS_ALG_TREE : CGPU_RAS_ALG_RING,
                          memory_order_relaxed);
    cgpu_coll_prof_begin(comm, "allreduce", count, cgpu_dtype_name(dt), cgpu_op_name(op), bytes,
                         alg_name);
    cgpu_prof_ev_t kev = {.on = false};
    if (cgpu_prof_enabled(&comm->prof)) {
        cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_KERNEL_V1, .parent = comm->prof.coll};
        ev.u.kernel = (cgpu_prof_kernel_v1_t){.name = alg_name, .blocks = 0, .threads = cc->threads};
        cgpu_prof_start(&comm->prof, &ev, &kev);
    }
    st = oneshot ? launch_oneshot(comm, in, out, count, dt, op)
         : tree  ? launch_tree(comm, in, out, count, dt, op)
                 : launch_ring(comm, in, out, count, dt, op);
    if (CGPU_OK == st && stage_out) {
        st = cgpu_cuda_copy_async(rbuf, out, bytes, cc->stream);
    }
    /* MPI semantics: the result is in the buffer when the call returns */
    cgpu_status_t sync = cgpu_cuda_stream_sync(cc->stream);
    cgpu_prof_stop(&kev); /* launch to completion */
    cgpu_coll_prof_end(comm);
    if (CGPU_OK == st) {
        st = sync;
    }
    if (CGPU_OK == st && 0 != cc->err_host[0]) {
        static const char *what[] = {"", "data from the left neighbour (ring)",
                                     "room at the right neighbour (ring)", "a peer's oneshot data",
                                     "data from a tree neighbour", "room at a tree neighbour"};
        unsigned long long k = cc->err_host[0];
        cgpu_log(CGPU_LOG_WARN,
                 "cuda: rank %d waited more than coll_gpu_cuda_timeout for %s (channel/peer "
                 "%llu: wanted %llu, saw %llu); the collective failed",
                 comm->rank, k < 6 ? what[k] : "?", cc->err_host[1], cc->err_host[2],
                 cc->err_host[3]);
        st = CGPU_ERR_TIMEOUT;
    }

out_restore:
    if (prev >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    return st;
}

#else /* !CGPU_HAVE_CUDA */

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
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) count, (void) dt, (void) op, (void) alg;
    return CGPU_ERR_NOT_SUPPORTED;
}

#endif /* CGPU_HAVE_CUDA */
