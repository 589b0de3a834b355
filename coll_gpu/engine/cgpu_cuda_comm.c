/*
 * coll/gpu engine: the cuda backend (inbox set-up over CUDA IPC, allreduce dispatch).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgpu_config.h"
#include "cgpu_cuda_comm.h"

#ifdef CGPU_HAVE_CUDA

#include "cgpu_cuda_kernels.h"

typedef struct cgpu_cuda_comm {
    int device;
    size_t ch_min; /* coll_gpu_cuda_channel_min_bytes */
    void *stream;
    void *stream2;  /* copy-engine reduce/allreduce (2 ranks, enabled): the copies, ahead
                     * of stream */
    void *ev2;      /* orders stream and stream2 */
    void *stream3;  /* copy-engine allreduce: the flags after stream2's copies, so neither
                     * the copies nor stream's reduction wait behind them */
    void *ev3;      /* orders stream3 after stream2, and stream after stream3 */
    void *order_ev; /* recorded on the legacy default stream (NULL: no ordering) */
    bool blocking;  /* stream is a blocking one: ordered after the default stream already */
    size_t inbox_bytes;
    char **peer_inbox; /* [size]; own entry is inbox */
    size_t *peer_release; /* [size]: offset of each peer's release word in its inbox */
    cgpu_inbox_t ib;      /* this rank's inbox, from the pool */
    size_t ring_off;
    size_t oneshot_off;
    size_t ll_off;  /* the LL area (classes 0..ll_classes-1), zeroed with the flags */
    int ll_classes; /* LL size classes this communicator has (ll_class) */
    size_t oneshot_slice;
    size_t tree_off;
    int tree_nch;
    size_t tree_max_bytes;
    uint64_t tree_base[CGPU_CUDA_MAX_CHANNELS];
    int nch_max;
    int threads;
    int block_cap;   /* coll_gpu_cuda_block_budget for this communicator's device (0: none) */
    int sms;         /* the device's multiprocessors (0: unknown), asked once at connect */
    bool block_counted;   /* counted in its device's budget's comms (connect to destroy) */
    bool block_over_said; /* a launch past the cap was reported (once a communicator) */
    int blocks_held; /* blocks the call in progress took (given back when it ends) */
    int nslots;
    size_t slot_bytes;
    uint64_t ring_sbase[CGPU_CUDA_MAX_CHANNELS]; /* items sent right per channel */
    uint64_t ring_rbase[CGPU_CUDA_MAX_CHANNELS]; /* items received from the left */
    uint64_t oneshot_seq;
    uint64_t ll_seq[CGPU_CUDA_LL_CLASSES]; /* each class numbers its calls (cgpu_cuda_kernels.h) */
    size_t a2a_off;
    int a2a_cpd_max; /* alltoall channels per peer distance (0: no device alltoall) */
    uint64_t a2a_base[CGPU_CUDA_MAX_CHANNELS];
    uint64_t ce_seq; /* copy-engine calls so far (same on every rank) */
    void *scratch; /* staging for buffers the kernels cannot use in place */
    size_t scratch_bytes;
    void *zeros; /* cgpu_cuda_comm_zeros */
    size_t zeros_bytes;
    char *pinned;  /* host buffers pass through here, so no copy of ours is pageable */
    size_t pinned_bytes;
    bool shared_device; /* two ranks of the communicator run on one device */
    volatile unsigned long long *err_host; /* kernels' error record, host view */
    unsigned long long *err_dev;           /* the same, device view */
    unsigned long long timeout_ns;
    /* the resident oneshot allreduce (see launch_resident) */
    void *rk_stream;      /* non-blocking: the default stream never waits for it */
    void *rk_ev;          /* recorded after each launch: whether the kernel has ended */
    uint64_t *rk_ctl;     /* control block, host view: RK_DESC.., RK_DONE.., RK_EXITED */
    uint64_t *rk_ctl_dev; /* the same, device view */
    uint64_t *rk_state;   /* device memory the kernel's blocks share */
    uint64_t rk_k;        /* descriptors written */
    bool rk_running;      /* launched, and not seen ending */
    bool rk_listed;       /* counted in rk_count, on the rk_head list */
    cgpu_dtype_t rk_dt;   /* the running (or last) kernel's reduction */
    cgpu_op_t rk_op;
    int rk_blocks;
    bool rk_cluster;      /* the kernel may be one thread block cluster (rk_cluster_now) */
    bool rk_placing;      /* this communicator holds a count of budget placing (rk_claim) */
    uint64_t rk_claim_ns; /* ... since then */
    struct cgpu_cuda_comm *rk_next;
    uint64_t rk_calls, rk_launches, rk_cluster_launches, rk_wait_ns; /* reported at destroy */
} cgpu_cuda_comm_t;

/* word indices in the resident control block (one 64-byte line each part) */
/* words: the descriptor, one completion word per block (a call of up to 8 blocks is one
 * cache line for the host to read), the end */
enum {
    RK_DESC = 0,
    RK_GATE = 8, /* the last gated descriptor the host let through (a line of its own) */
    RK_DONE = 16,
    RK_EXITED = RK_DONE + CGPU_CUDA_MAX_ONESHOT_BLOCKS,
    RK_PLACED = RK_EXITED + 1, /* one word per cluster */
    RK_CTL_BYTES = 512
};
_Static_assert((RK_PLACED + CGPU_CUDA_RESIDENT_CLUSTERS) * 8 <= RK_CTL_BYTES,
               "resident control block");
/* the kernel's device memory: RK_STATE_WORDS of state (zeroed at each launch), then the
 * trace (zeroed once, summed across launches; verbose 10) */
enum { RK_STATE_WORDS = CGPU_CUDA_RESIDENT_STATE_WORDS, RK_TRACE = RK_STATE_WORDS,
       RK_DEV_BYTES = 256 };
_Static_assert((RK_TRACE + CGPU_CUDA_RK_TRACE_WORDS) * 8 <= RK_DEV_BYTES, "resident trace");

/* communicators that have launched a resident kernel (at most cuda_resident_max_kernels) */
static pthread_mutex_t rk_lock = PTHREAD_MUTEX_INITIALIZER;
static cgpu_cuda_comm_t *rk_head;
static int rk_count;
static pthread_once_t rk_hook_once = PTHREAD_ONCE_INIT;
static void rk_stop(cgpu_cuda_comm_t *cc);

/* set-up (cgpu_cuda_setup_begin once no collective is in flight): every resident kernel
 * ends */
static void rk_stop_all(void)
{
    pthread_mutex_lock(&rk_lock);
    for (cgpu_cuda_comm_t *c = rk_head; NULL != c; c = c->rk_next) {
        rk_stop(c);
    }
    pthread_mutex_unlock(&rk_lock);
}

static void rk_hook(void)
{
    cgpu_cuda_set_setup_hook(rk_stop_all);
}

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

static cgpu_status_t ensure_scratch(cgpu_cuda_comm_t *cc, size_t bytes);
static cgpu_status_t ensure_pinned(cgpu_cuda_comm_t *cc, size_t bytes);
static size_t oneshot_blocks(size_t unit);

/* The block budget (coll_gpu_cuda_block_budget). Our kernels spin on the GPU until their
 * peers' kernels deliver; calls in flight on several communicators at once (non-blocking
 * calls' workers, application threads) whose blocks the GPU cannot all hold leave some
 * blocks undispatched behind spinning ones, and where ranks posted the calls in different
 * orders each waits for the other for ever (session 32: twelve communicators with 4 MB
 * allreduces crossed, 32 ring blocks of 512 threads each, one block per multiprocessor at
 * 80-108 registers a thread). So every launch takes its blocks from a count per device
 * shared by the process's threads, and past the budget runs its parts on fewer blocks
 * (cgpu_cuda_kernels.h, CGPU_CUDA_GRID_DOC): each rank's own choice. */
enum { BUDGET_DEVICES = 64 };
typedef struct {
    int used;  /* blocks taken and not given back (cgpu_blocks_take) */
    int comms; /* this process's connected communicators on the device */
    int launched; /* its calls with launched kernels in flight there (rk_cluster_now) */
    int placing;  /* resident clusters launched and not yet seen running (rk_claim) */
    int held;     /* calls that waited for one (reported at verbose 10) */
} block_budget_t;
static block_budget_t budgets[BUDGET_DEVICES];

static block_budget_t *budget_of(const cgpu_cuda_comm_t *cc)
{
    return cc->device >= 0 && cc->device < BUDGET_DEVICES ? &budgets[cc->device] : NULL;
}

/* the blocks this rank's kernels may hold on the device at once, `share` ranks on it */
static int block_cap(const cgpu_cuda_comm_t *cc, int share)
{
    const int b = cgpu_engine_config()->cuda_block_budget;
    if (b >= 0) {
        return b;
    }
    /* a block of up to 128 registers a thread (ours take 80-108), 64 Ki registers and 2048
     * threads a multiprocessor */
    const int t = cc->threads > 0 ? cc->threads : 512;
    int per_sm = 65536 / (t * 128);
    per_sm = per_sm < 1 ? 1 : per_sm > 2048 / t ? 2048 / t : per_sm;
    const int sms = cc->sms;
    const int cap = sms * per_sm / (share > 1 ? share : 1);
    return sms > 0 ? (cap > 1 ? cap : 1) : 0;
}

/* Of the cap, the blocks kept for launches that find the others taken, one block (or
 * pair) each (cgpu_blocks_spare): by default one for every other communicator of this
 * process on the device, since a communicator has at most one call's kernel holding
 * blocks at once (its calls run in order on its stream, blocks given back at the end).
 * Without them the calls past the others took blocks over the cap: with one rank per GPU
 * (the whole GPU its budget) those blocks waited undispatched behind spinning ones, and
 * sixteen communicators' calls crossed hung on 2x H200 (session 34, `test_cuda_nb
 * crossed`); where ranks share a GPU time-sliced, each rank's half had left room for them.
 * A fixed quarter (an eighth) had cost the copy-engine allreduce, 128 blocks wanted, 5%
 * (2%) at 512 MiB with one communicator. */
static int spare_now(const cgpu_cuda_comm_t *cc, const block_budget_t *b)
{
    return cgpu_blocks_spare(cc->block_cap, cgpu_engine_config()->cuda_block_spare,
                             __atomic_load_n(&b->comms, __ATOMIC_RELAXED));
}

/* a launch's grid (0: every part a block, where there is no budget) */
static int blocks_take(cgpu_cuda_comm_t *cc, int want, int pair)
{
    block_budget_t *b = budget_of(cc);
    if (NULL == b || 0 == cc->block_cap) {
        return 0;
    }
    const int spare = spare_now(cc, b);
    const int got = cgpu_blocks_take(&b->used, cc->block_cap, spare, want, pair);
    cc->blocks_held += got;
    if (got < (want > pair ? want / pair * pair : pair)) { /* fewer than the kernel's own grid */
        cgpu_log(CGPU_LOG_TRACE, "cuda: a launch of %d parts on %d blocks (budget %d on device %d)",
                 want, got, cc->block_cap, cc->device);
    }
    if (!cc->block_over_said && __atomic_load_n(&b->used, __ATOMIC_RELAXED) > cc->block_cap) {
        cc->block_over_said = true;
        cgpu_log(CGPU_LOG_INFO,
                 "cuda: more calls in flight than device %d holds blocks for (%d, of which %d "
                 "spare): a call may wait on the GPU behind others until they end, and calls "
                 "crossed between ranks can then time out (coll_gpu_cuda_block_spare)",
                 cc->device, cc->block_cap, spare);
    }
    return got;
}

/* the call's kernels have ended */
static void blocks_give(cgpu_cuda_comm_t *cc)
{
    if (cc->blocks_held > 0) {
        cgpu_blocks_give(&budget_of(cc)->used, cc->blocks_held);
        cc->blocks_held = 0;
    }
}

/* A call with launched kernels (not the resident kernel's) begins. It first waits while a
 * resident kernel launched as a cluster is not yet running (rk_claim): its blocks could
 * take the room the cluster needs in a GPC. Counted first, looked second, as rk_claim
 * does the other way round (both sequentially consistent): either the cluster sees this
 * call and is no cluster, or this call sees the cluster and waits until it runs (a few
 * microseconds; RK_PLACE_WAIT_NS at most). */
static void launched_begin(cgpu_cuda_comm_t *cc)
{
    block_budget_t *b = budget_of(cc);
    if (NULL == b) {
        return;
    }
    __atomic_fetch_add(&b->launched, 1, __ATOMIC_SEQ_CST);
    if (0 != __atomic_load_n(&b->placing, __ATOMIC_SEQ_CST)) {
        __atomic_fetch_add(&b->held, 1, __ATOMIC_RELAXED);
        while (0 != __atomic_load_n(&b->placing, __ATOMIC_SEQ_CST)) {
            cgpu_cpu_relax();
        }
    }
}

/* ... and its kernels have ended */
static void launched_end(cgpu_cuda_comm_t *cc)
{
    block_budget_t *b = budget_of(cc);
    if (NULL != b) {
        __atomic_fetch_sub(&b->launched, 1, __ATOMIC_SEQ_CST);
    }
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
    channel_caps(cc, comm->size, 1);
    cc->ch_min = cfg->cuda_channel_min_bytes;
    cc->threads = cfg->cuda_threads;
    cc->nslots = cfg->cuda_slots;
    cc->slot_bytes = (cfg->cuda_slot_bytes + 255) & ~(size_t) 255;
    cc->oneshot_slice = (cfg->cuda_oneshot_bytes + 255) & ~(size_t) 255;
    /* LL size classes up to coll_gpu_cuda_ll_bytes and 512 KiB / ranks (the area stays
     * near 4 MiB whatever the size); the same on every rank */
    cc->ll_classes = cgpu_ll_classes(cfg->cuda_ll_bytes, comm->size);
    cc->ll_off = (CGPU_CUDA_FLAG_BYTES + 255) & ~(size_t) 255;
    cc->ring_off = (cc->ll_off + CGPU_CUDA_LL_CLASS_OFF(comm->size, cc->ll_classes) + 4095) &
                   ~(size_t) 4095;
    cc->oneshot_off = cc->ring_off + (size_t) cc->nch_max * cc->nslots * cc->slot_bytes;
    cc->tree_off = cc->oneshot_off + 2 * (size_t) comm->size * cc->oneshot_slice;
    cc->tree_nch = cfg->cuda_tree_channels;
    cc->tree_max_bytes = cfg->cuda_tree_max_bytes;
    cc->a2a_off = cc->tree_off +
                  (size_t) cc->tree_nch * CGPU_CUDA_TREE_PORTS * cc->nslots * cc->slot_bytes;
    cc->inbox_bytes = cc->a2a_off + (size_t) cfg->cuda_a2a_channels * cc->nslots * cc->slot_bytes;

    cc->timeout_ns = (unsigned long long) (cfg->cuda_timeout_s * 1e9);
    /* ordering after the caller's default-stream work: the stream waits for order_ev,
     * recorded on the legacy stream (cuda_stage); in `stream` mode the stream is a blocking
     * one instead (ordered after the legacy stream, not after the application's blocking
     * streams); the copy-engine paths and resident calls wait for order_ev on the host */
    cc->blocking = CGPU_ORDER_BLOCKING_STREAM == cfg->cuda_stream_order;
    cgpu_status_t st = cgpu_cuda_stream_create(&cc->stream, cc->blocking);
    if (CGPU_OK == st && CGPU_ORDER_NONE != cfg->cuda_stream_order) {
        st = cgpu_cuda_event_create(&cc->order_ev);
    }
    /* the 2-rank copy-engine reduce and allreduce (their streams): ranks on two devices only
     * (see "copy-engine path" below); dev_share comes from the same table on every rank */
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
    st = cgpu_cuda_host_alloc_mapped(&eh, &ed, 64);
    if (CGPU_OK != st) {
        return st;
    }
    cc->err_host = eh;
    cc->err_dev = ed;
    if (1 == cfg->cuda_resident && 0 != cfg->cuda_resident_max_bytes &&
        cfg->cuda_resident_max_kernels > 0 && comm->size >= 2) {
        pthread_once(&rk_hook_once, rk_hook);
        cc->rk_dt = CGPU_DT_UINT8; /* the kernel for copies until a reduction comes */
        cc->rk_op = CGPU_OP_SUM;
        /* the blocks of the largest call it takes, whole clusters of 8 (at most 2) where
         * the kernel may be clusters (calls of more blocks are launched) */
        cc->rk_cluster = 0 != cfg->cuda_resident_cluster && 0 != cgpu_cuda_resident_cluster();
        cc->rk_blocks =
            cgpu_resident_blocks(oneshot_blocks(cfg->cuda_resident_max_bytes), cc->rk_cluster);
        void *h = NULL, *d = NULL;
        st = cgpu_cuda_stream_create(&cc->rk_stream, false);
        if (CGPU_OK == st) {
            st = cgpu_cuda_event_create(&cc->rk_ev);
        }
        if (CGPU_OK == st) {
            st = cgpu_cuda_host_alloc_mapped(&h, &d, RK_CTL_BYTES);
        }
        if (CGPU_OK == st) {
            cc->rk_ctl = h;
            cc->rk_ctl_dev = d;
            memset(h, 0, RK_CTL_BYTES);
            void *sd = NULL;
            st = cgpu_cuda_malloc(&sd, RK_DEV_BYTES, cc->stream);
            cc->rk_state = sd;
            if (CGPU_OK == st) {
                st = cgpu_cuda_memset_async(sd, 0, RK_DEV_BYTES, cc->stream);
            }
        }
        if (CGPU_OK != st) {
            return st;
        }
    }
    /* the flags and the LL area start from zero (cgpu_cuda_kernels.h) */
    st = cgpu_inbox_get(cc->inbox_bytes, cc->ring_off, comm->size - 1, cc->stream,
                        &cc->ib);
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
     * a larger one grows them later, in the call (see cgpu_cuda_comm_setup) */
    st = ensure_scratch(cc, 1u << 20);
    if (CGPU_OK == st) {
        st = ensure_pinned(cc, 1u << 20);
    }
    if (CGPU_OK != st) {
        return st;
    }
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
    cc->block_cap = block_cap(cc, share); /* no launch comes before connect */
    if (NULL != budget_of(cc)) {
        __atomic_fetch_add(&budget_of(cc)->comms, 1, __ATOMIC_RELAXED);
        cc->block_counted = true;
    }
    if (share > 1) {
        /* the kernels of a call wait for each other across the ranks: under MPS those of
         * the ranks on one device must all fit on it at once (4 ranks x 64 ring channels
         * of 512 threads, beside the resident kernels, do not on an H200), so the ranks
         * that share it share the channels */
        channel_caps(cc, comm->size, share);
        if (0 == comm->rank) {
            cgpu_log(CGPU_LOG_INFO, "cuda: up to %d ranks share a device: at most %d ring "
                     "channels and %d alltoall channels per peer a call", share, cc->nch_max,
                     cc->a2a_cpd_max);
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

/* The resident kernel's report (verbose 10), once it has ended: calls and launches, the
 * host's mean wait, and where block 0's device time went (the kernel's trace) */
static void rk_report(const cgpu_comm_t *comm, cgpu_cuda_comm_t *cc)
{
    if (0 == cc->rk_calls || cgpu_engine_config()->verbose < CGPU_LOG_INFO) {
        return;
    }
    cgpu_log(CGPU_LOG_INFO, "cuda: rank %d: resident oneshot: %llu calls, %llu kernel "
             "launches (%llu as a cluster); mean %.2f us from the descriptor to its "
             "completion", comm->rank, (unsigned long long) cc->rk_calls,
             (unsigned long long) cc->rk_launches, (unsigned long long) cc->rk_cluster_launches,
             (double) cc->rk_wait_ns / 1e3 / (double) cc->rk_calls);
    if (NULL != budget_of(cc)) {
        cgpu_log(CGPU_LOG_INFO,
                 "cuda: rank %d: %d calls so far waited for a resident cluster "
                 "to run on device %d",
                 comm->rank, __atomic_load_n(&budget_of(cc)->held, __ATOMIC_RELAXED), cc->device);
    }
    unsigned long long tr[CGPU_CUDA_RK_TRACE_WORDS] = {0};
    if (CGPU_OK != cgpu_cuda_copy(tr, cc->rk_state + RK_TRACE, sizeof(tr)) ||
        0 == tr[CGPU_CUDA_RK_TRACE_CALLS]) {
        return;
    }
    const double n = (double) tr[CGPU_CUDA_RK_TRACE_CALLS];
    cgpu_log(CGPU_LOG_INFO, "cuda: rank %d: resident oneshot on the device, mean of %llu "
             "calls: %.2f polls; us waiting for the descriptor %.2f, hand-off %.2f, writes and "
             "fence %.2f, peers' flags %.2f, result %.2f, completion %.2f",
             comm->rank, tr[CGPU_CUDA_RK_TRACE_CALLS], tr[CGPU_CUDA_RK_TRACE_POLLS] / n,
             tr[CGPU_CUDA_RK_TRACE_IDLE] / n / 1e3, tr[CGPU_CUDA_RK_TRACE_HANDOFF] / n / 1e3,
             tr[CGPU_CUDA_RK_TRACE_WRITE] / n / 1e3, tr[CGPU_CUDA_RK_TRACE_PEERS] / n / 1e3,
             tr[CGPU_CUDA_RK_TRACE_REDUCE] / n / 1e3, tr[CGPU_CUDA_RK_TRACE_DONE] / n / 1e3);
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
    pthread_mutex_lock(&rk_lock);
    rk_stop(cc);
    if (cc->rk_listed) {
        cgpu_cuda_comm_t **pp = &rk_head;
        while (NULL != *pp && *pp != cc) {
            pp = &(*pp)->rk_next;
        }
        if (NULL != *pp) {
            *pp = cc->rk_next;
        }
        cc->rk_listed = false;
        rk_count--;
        if (NULL != budget_of(cc)) {
            cgpu_blocks_give(&budget_of(cc)->used, cc->rk_blocks);
        }
    }
    pthread_mutex_unlock(&rk_lock);
    if (cc->block_counted) {
        __atomic_fetch_sub(&budget_of(cc)->comms, 1, __ATOMIC_RELAXED);
        cc->block_counted = false;
    }
    rk_report(comm, cc); /* the kernel has ended (rk_stop) */
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
    /* pooled only when every peer mapped it (so every peer will release it) */
    if (all_mapped) {
        cgpu_inbox_put(&cc->ib);
    } else {
        cgpu_cuda_free(cc->ib.ptr);
    }
    cgpu_cuda_free(cc->scratch);
    cgpu_cuda_free(cc->zeros);
    cgpu_cuda_host_free(cc->pinned);
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
    if (prev >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    free(cc);
}

cgpu_status_t cgpu_cuda_comm_zeros(cgpu_comm_t *comm, size_t bytes, const void **out)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    if (NULL == cc) {
        return CGPU_ERR_STATE;
    }
    if (cc->zeros_bytes < bytes) {
        const int prev = cgpu_cuda_current_device();
        if (prev != cc->device) {
            (void) cgpu_cuda_set_device(cc->device);
        }
        cgpu_cuda_free(cc->zeros); /* deferred while a kernel is in flight */
        cc->zeros_bytes = 0;
        /* zero-filled on our stream, which is then synchronized: nothing of ours is queued
         * on it between calls */
        cgpu_status_t st = cgpu_cuda_malloc(&cc->zeros, bytes, cc->stream);
        if (prev >= 0 && prev != cc->device) {
            (void) cgpu_cuda_set_device(prev);
        }
        if (CGPU_OK != st) {
            cc->zeros = NULL;
            return st;
        }
        cc->zeros_bytes = bytes;
    }
    *out = cc->zeros;
    return CGPU_OK;
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
    cgpu_status_t st = cgpu_cuda_malloc(&cc->scratch, want, NULL);
    if (CGPU_OK == st) {
        cc->scratch_bytes = want;
    }
    return st;
}

/* Where a buffer lives, looked up once per call (a driver query each time). */
typedef struct buf_kind {
    bool in_place; /* the kernels on cc->device can use it as it is */
    bool host;     /* host memory: staged by the CPU through pinned memory */
} buf_kind_t;

/* What a buffer is to this communicator's kernels: usable in place needs memory of its
 * device at an address aligned for the elements' loads (@p align; 0 or 1: bytes). MPI takes
 * any address, and a kernel's load off its alignment is a device fault that ends the
 * process's context; such a buffer is staged through aligned scratch instead. */
static buf_kind_t buf_kind(const cgpu_cuda_comm_t *cc, const void *p, size_t align)
{
    int dev;
    cgpu_mem_kind_t k = cgpu_cuda_mem_kind(p, &dev);
    return (buf_kind_t){.in_place = (CGPU_MEM_DEVICE == k || CGPU_MEM_MANAGED == k) &&
                                    dev == cc->device && (align < 2 || 0 == (uintptr_t) p % align),
                        .host = CGPU_MEM_HOST == k};
}

/* The alignment the kernels' loads of @p dt need: the largest power of two dividing its
 * size, up to 16 (a double complex is one 16-byte load; a pair, padded or not, is read field
 * by field or in 16-byte vectors only where aligned for them) */
static size_t dtype_align(cgpu_dtype_t dt)
{
    const size_t size = cgpu_dtype_size(dt), low = size & (~size + 1);
    return low < 16 ? low : 16;
}

/*
 * One collective on the device. The input (in_bytes at sbuf) may lie inside the output
 * (out_bytes at rbuf): the in-place forms. What the kernels cannot use in place (host
 * memory, another device's memory) is staged through scratch; with force_copy_in the
 * input is always copied first (an in-place alltoall reads what it overwrites).
 */
typedef cgpu_status_t (*cuda_launch_fn)(cgpu_comm_t *comm, const void *in, void *out,
                                        const void *args);
typedef struct cuda_call {
    const char *kind, *dtype, *op, *alg;
    size_t count, bytes; /* for the profiler */
    int ras_alg;
    const void *sbuf;
    size_t in_bytes;
    void *rbuf;
    size_t out_bytes;
    bool force_copy_in;
    size_t align;  /* of the elements the kernels load (dtype_align; 0: bytes) */
    bool resident; /* fn hands the call to the resident kernel and waits for it itself; both
                    * buffers are usable in place */
    cuda_launch_fn fn;
    const void *args;
    /* device memory that also gets tail_bytes of the result from tail_off (a scatter's own
     * block), copied on the stream before the wait, so with no wait of its own (a resident
     * call, which has no stream, copies it after) */
    void *tail;
    size_t tail_off, tail_bytes;
    /* a padded pair's result (cgpu_cuda_allreduce): the output goes to scratch, and only
     * the data runs of the elements po asks for go out of it, on the stream; in_bytes
     * ends at the input's last data byte, so the input is always copied in */
    const cgpu_pairs_out_t *po;
    cgpu_dtype_t po_dt;
} cuda_call_t;

static size_t round256(size_t x)
{
    return (x + 255) & ~(size_t) 255;
}

/* A copy from or to pageable memory is synchronous and serialized with such copies of
 * other threads; one of them waiting behind a kernel that waits for a peer would stall
 * this thread before it launches what that peer waits for. So host buffers are copied by
 * the CPU into pinned memory of ours, and only truly asynchronous copies are enqueued. */
static cgpu_status_t ensure_pinned(cgpu_cuda_comm_t *cc, size_t bytes)
{
    if (cc->pinned_bytes >= bytes) {
        return CGPU_OK;
    }
    cgpu_cuda_host_free(cc->pinned);
    cc->pinned = NULL;
    cc->pinned_bytes = 0;
    size_t want = bytes < (1u << 20) ? (1u << 20) : bytes;
    void *h = NULL, *d = NULL;
    cgpu_status_t st = cgpu_cuda_host_alloc_mapped(&h, &d, want);
    if (CGPU_OK == st) {
        cc->pinned = h;
        cc->pinned_bytes = want;
    }
    return st;
}

/* Where the kernels read and write, and what to copy back afterwards. */
typedef struct cuda_staged {
    const void *in;
    void *out;
    bool copy_out;  /* out is scratch: copy it to rbuf after the kernel */
    char *host_out; /* rbuf is host memory: scratch -> here (pinned) -> rbuf by the CPU */
} cuda_staged_t;

/* dst (device) <- src (any memory), through `bounce` (pinned) when src is host memory */
static cgpu_status_t stage_copy_in(cgpu_cuda_comm_t *cc, void *dst, const void *src, size_t n,
                                   bool src_host, char *bounce)
{
    if (src_host) {
        memcpy(bounce, src, n);
        src = bounce;
    }
    return cgpu_cuda_copy_async(dst, src, n, cc->stream);
}

static cgpu_status_t cuda_stage(cgpu_cuda_comm_t *cc, const cuda_call_t *k, cuda_staged_t *sg)
{
    const char *sp = k->sbuf, *rp = k->rbuf;
    const bool aliased = NULL != sp && NULL != rp && k->out_bytes > 0 && sp >= rp &&
                         sp + k->in_bytes <= rp + k->out_bytes;
    /* a padded pair's output (device memory) is always staged, its runs copied out after */
    const buf_kind_t rk = k->out_bytes > 0 && NULL == k->po ? buf_kind(cc, rp, k->align)
                                                            : (buf_kind_t){.in_place = true};
    const buf_kind_t sk = k->in_bytes > 0 ? (aliased ? rk : buf_kind(cc, sp, k->align))
                                          : (buf_kind_t){.in_place = true};
    const bool out_stage = k->out_bytes > 0 && (NULL != k->po || !rk.in_place);
    const bool in_copy = k->in_bytes > 0 && (k->force_copy_in || (!aliased && !sk.in_place));
    sg->in = sp;
    sg->out = (void *) rp;
    sg->copy_out = false;
    sg->host_out = NULL;
    cgpu_status_t st = CGPU_OK;
    /* device memory the caller filled through the default stream (or a blocking stream)
     * may not be written yet: an event on the legacy stream (a legacy-stream operation
     * waits for every blocking stream); in `stream` mode our blocking stream is ordered
     * after the legacy stream only (an event there would also wait for our other
     * communicators' blocking streams: one waited for another's kernel, which waited
     * for a peer, session 17) */
    if (NULL != cc->order_ev && !cc->blocking &&
        ((k->out_bytes > 0 && !rk.host) || (k->in_bytes > 0 && !sk.host))) {
        st = cgpu_cuda_stream_after_default(cc->stream, cc->order_ev);
    }
    if (CGPU_OK != st || (!out_stage && !in_copy)) {
        return st;
    }
    /* the input's room rounded up too: a padded pair's kernel reads its last element whole
     * (its size divides 256, so the round-up holds it) */
    const size_t total =
        (out_stage ? round256(k->out_bytes) : 0) + (in_copy ? round256(k->in_bytes) : 0);
    st = ensure_scratch(cc, total);
    if (CGPU_OK == st && ((out_stage && rk.host) || (in_copy && sk.host))) {
        st = ensure_pinned(cc, total);
    }
    char *p = cc->scratch, *q = cc->pinned; /* the same layout in both */
    if (CGPU_OK == st && out_stage) {
        sg->out = p;
        sg->copy_out = NULL == k->po;
        sg->host_out = rk.host ? q : NULL;
        if (aliased && !in_copy) { /* the input is part of the output: bring it along */
            st = stage_copy_in(cc, p, rp, k->out_bytes, rk.host, q);
            sg->in = p + (sp - rp);
        }
        p += round256(k->out_bytes);
        q = NULL != q ? q + round256(k->out_bytes) : NULL;
    }
    if (CGPU_OK == st && in_copy) {
        st = stage_copy_in(cc, p, sp, k->in_bytes, sk.host, q);
        sg->in = p;
    }
    return st;
}

static bool rk_gated(const cgpu_cuda_comm_t *cc);

static cgpu_status_t cuda_run(cgpu_comm_t *comm, const cuda_call_t *k)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    int prev = cgpu_cuda_current_device();
    cgpu_status_t st = prev != cc->device ? cgpu_cuda_set_device(cc->device) : CGPU_OK;
    if (CGPU_OK != st) {
        return st;
    }
    cuda_staged_t sg = {.in = k->sbuf, .out = k->rbuf};
    if (k->resident) { /* no stream to order: the host waits for the default stream (a
                        * gated call: in resident_call, after the descriptor) */
        st = NULL != cc->order_ev && !rk_gated(cc)
                 ? cgpu_cuda_default_stream_wait_host(cc->order_ev)
                 : CGPU_OK;
    } else {
        st = cuda_stage(cc, k, &sg);
    }
    if (CGPU_OK != st) {
        goto out_restore;
    }
    cgpu_cuda_inflight_begin();
    if (!k->resident) {
        launched_begin(cc);
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
    blocks_give(cc);
    if (!k->resident) {
        launched_end(cc);
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
        st = CGPU_ERR_TIMEOUT;
    }
out_restore:
    if (prev >= 0 && prev != cc->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    return st;
}

/* ---- the ring and the chains along it ---- */

typedef struct ring_call {
    int mode;     /* CGPU_CUDA_RING_* */
    int root;
    size_t count; /* elements (per block where the mode has blocks); bytes when copying */
    cgpu_dtype_t dt;
    cgpu_op_t op;
    bool copy;
} ring_call_t;

static cgpu_status_t launch_ring(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const ring_call_t *rc = args;
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t esize = rc->copy ? 1 : cgpu_dtype_size(rc->dt), n = (size_t) comm->size;
    const size_t count = rc->count;
    const size_t align = 16 / esize > 0 ? 16 / esize : 1;
    const size_t slot_elems = (cc->slot_bytes / esize) / align * align;
    /* the allreduce cuts its buffer into one piece per rank per channel; the others cut
     * each block (or the buffer) into one piece per channel */
    const size_t pieces = CGPU_CUDA_RING_ALLREDUCE == rc->mode ? n : 1;
    /* add channels only while each still carries coll_gpu_cuda_channel_min_bytes a piece */
    const size_t nch =
        cgpu_clamp1(cgpu_div_up(count * esize, pieces * cc->ch_min), (size_t) cc->nch_max);
    const size_t per = cgpu_round_up(cgpu_div_up(count, nch * pieces), align);
    const size_t chunk = per < slot_elems ? per : slot_elems;
    const size_t nloops = cgpu_div_up(count, nch * pieces * chunk);

    /* items each channel sends right and receives from the left, per loop */
    size_t nsend = n - 1, nrecv = n - 1;
    if (CGPU_CUDA_RING_ALLREDUCE == rc->mode) {
        nsend = nrecv = 2 * (n - 1);
    } else if (CGPU_CUDA_RING_BCAST == rc->mode || CGPU_CUDA_RING_REDUCE == rc->mode ||
               CGPU_CUDA_ONESHOT_SCAN == rc->mode || CGPU_CUDA_ONESHOT_EXSCAN == rc->mode) {
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
    a.grid = blocks_take(cc, (int) nch, 1);
    cgpu_log(CGPU_LOG_TRACE, "cuda: ring mode %d rank %d count %zu nch %zu chunk %zu loops %zu "
             "base %llu/%llu", rc->mode, comm->rank, count, nch, chunk, nloops,
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

static cgpu_status_t launch_tree(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const ring_call_t *rc = args;
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
    a.grid = blocks_take(cc, 2 * (int) nch, 2);
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

/* ---- oneshot calls (every mode: see cgpu_cuda_kernels.h), launched or resident ---- */

static const char *oneshot_name(int mode)
{
    static const char *names[] = {
        "allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce", "alltoall", "scan",
        "exscan"};
    return mode >= 0 && mode <= CGPU_CUDA_ONESHOT_EXSCAN ? names[mode] : "?";
}

/* bytes of one block of the call (the unit the kernel splits among its blocks) */
static size_t oneshot_unit(const ring_call_t *rc)
{
    return rc->count * (rc->copy ? 1 : cgpu_dtype_size(rc->dt));
}

/* The LL size class of a oneshot call (cgpu_cuda_kernels.h), or -1 where it sends no LL
 * lines: a unit of at most coll_gpu_cuda_ll_bytes within the communicator's classes,
 * elements of at most 8 bytes, or of 16 (two lines each: ll_body_wide). The same on every
 * rank (sizes and settings), launched or resident. */
static int ll_class(const cgpu_cuda_comm_t *cc, const ring_call_t *rc)
{
    return cgpu_ll_class(oneshot_unit(rc), rc->copy ? 1 : cgpu_dtype_size(rc->dt),
                         cgpu_engine_config()->cuda_ll_bytes, cc->ll_classes);
}

_Static_assert(CGPU_CUDA_LL_CLASS_DATA(CGPU_CUDA_LL_CLASSES - 1) == CGPU_CUDA_LL_BYTES_MAX,
               "coll_gpu_cuda_ll_bytes' cap is the largest LL size class");

/* The kernel's mode for oneshot call rc and the call's number: LL calls are numbered per
 * size class, the others together. One place for both launched and resident calls, which
 * must agree on every rank. */
static uint64_t oneshot_number(cgpu_cuda_comm_t *cc, const ring_call_t *rc, int *mode)
{
    const int c = ll_class(cc, rc);
    *mode = rc->mode | (c >= 0 ? CGPU_CUDA_ONESHOT_LL | c << CGPU_CUDA_LL_CLASS_SHIFT : 0);
    return c >= 0 ? ++cc->ll_seq[c] : ++cc->oneshot_seq;
}

/* A oneshot call's blocks: cgpu_oneshot_blocks (cgpu_engine.h, tested in test_engine) with
 * this process's settings. The same on every rank (sizes and settings): a block flags and
 * waits for the same block of its peers. Smaller blocks for small calls (session 18, 2 ranks
 * under MPS): 8-64 KiB calls 0.4-1.1 us faster with 4 KiB blocks than with 8 KiB (each of
 * 512 threads has one LL line, or one 16-byte vector). */
static size_t oneshot_blocks(size_t unit)
{
    return cgpu_oneshot_blocks(unit, cgpu_engine_config()->cuda_oneshot_block_bytes,
                               cgpu_engine_config()->cuda_oneshot_small_block_bytes);
}

static cgpu_status_t launch_oneshot(cgpu_comm_t *comm, const void *in, void *out,
                                    const void *args)
{
    const ring_call_t *rc = args;
    cgpu_cuda_comm_t *cc = comm->cuda;
    cgpu_cuda_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    a.timeout_ns = cc->timeout_ns;
    a.err = cc->err_dev;
    a.in = in;
    a.out = out;
    a.count = rc->count;
    a.seq = oneshot_number(cc, rc, &a.mode);
    const bool ll = 0 != (a.mode & CGPU_CUDA_ONESHOT_LL);
    a.root = rc->root;
    a.rank = comm->rank;
    a.nranks = comm->size;
    a.nblocks = (int) oneshot_blocks(oneshot_unit(rc));
    a.grid = blocks_take(cc, a.nblocks, 1);
    a.slice_bytes = cc->oneshot_slice;
    a.oneshot_off = cc->oneshot_off;
    a.ll_off = cc->ll_off;
    for (int i = 0; i < comm->size; ++i) {
        a.inbox[i] = cc->peer_inbox[i];
    }
    cgpu_log(CGPU_LOG_TRACE, "cuda: oneshot %s rank %d count %zu %s/%s blocks %d seq %llu%s",
             oneshot_name(rc->mode), comm->rank, rc->count,
             rc->copy ? "byte" : cgpu_dtype_name(rc->dt), rc->copy ? "-" : cgpu_op_name(rc->op),
             a.nblocks, (unsigned long long) a.seq, ll ? " LL" : "");
    int err = cgpu_cuda_oneshot_launch(&a, rc->dt, rc->op, cc->threads, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "oneshot launch") : CGPU_OK;
}

static cgpu_status_t ce_allreduce(cgpu_comm_t *comm, cuda_call_t *k, const void *sbuf, void *rbuf,
                                  size_t count, cgpu_dtype_t dt, cgpu_op_t op, bool may,
                                  bool *done);

/* ---- the resident oneshot kernel (kernels/cgpu_cuda_kernels.cu: resident_kernel) ----
 * The host writes a descriptor into the control block (mapped host memory) and polls the
 * working blocks' RK_DONE words; the kernel, launched on first use and again whenever it
 * has ended (idle, or stopped before a set-up or for another reduction), polls the
 * descriptor. It runs every copying mode and the reductions of its (dt, op). A peer may
 * run the same call as a launched oneshot: the protocol in the inboxes is the same. */

static uint64_t rk_load(const cgpu_cuda_comm_t *cc, int w)
{
    return __atomic_load_n(&cc->rk_ctl[w], __ATOMIC_ACQUIRE);
}

/* whether each of the nblocks blocks that work on descriptor k has published it */
static bool rk_done(const cgpu_cuda_comm_t *cc, uint64_t k, int nblocks)
{
    for (int b = 0; b < nblocks; ++b) {
        if (rk_load(cc, RK_DONE + b) < k) {
            return false;
        }
    }
    return true;
}

/* Whether a resident call is gated (coll_gpu_cuda_resident_gate): the host writes its
 * descriptor, then waits for the default stream, then opens the gate (RK_GATE), so the
 * kernel takes the call, hands it on and finds its code path during the wait (block 0
 * polls the gate and tells the call's other blocks). This rank's choice alone: what the
 * kernel exchanges with the peers is the same. */
static bool rk_gated(const cgpu_cuda_comm_t *cc)
{
    return NULL != cc->order_ev && cgpu_engine_config()->cuda_resident_gate;
}

/* descriptor k = ++rk_k: each part's field, then its tag (see cgpu_cuda_resident_mix) */
static uint64_t rk_write(cgpu_cuda_comm_t *cc, uint64_t in, uint64_t out, uint64_t f2,
                         uint64_t oseq)
{
    const uint64_t k = ++cc->rk_k, f[4] = {in, out, f2, oseq};
    for (int c = 0; c < 4; ++c) {
        __atomic_store_n(&cc->rk_ctl[RK_DESC + 2 * c + 1], f[c], __ATOMIC_RELAXED);
        __atomic_store_n(&cc->rk_ctl[RK_DESC + 2 * c], k ^ cgpu_cuda_resident_mix(f[c]),
                         __ATOMIC_RELEASE);
    }
    return k;
}

/* whether every cluster of the kernel runs (RK_PLACED) */
static bool rk_placed(const cgpu_cuda_comm_t *cc)
{
    const int n = cgpu_resident_clusters(cc->rk_blocks); /* a cluster launch: at most 2 */
    for (int c = 0; c < n && c < CGPU_CUDA_RESIDENT_CLUSTERS; ++c) {
        if (0 == rk_load(cc, RK_PLACED + c)) {
            return false;
        }
    }
    return true;
}

/* whether the kernel has ended (it said so, or its launch's event has completed) */
static bool rk_ended(cgpu_cuda_comm_t *cc)
{
    return 0 != rk_load(cc, RK_EXITED) || CGPU_IN_PROGRESS != cgpu_cuda_event_query(cc->rk_ev);
}

/* No call of this communicator is in progress (callers: the owner between calls, a
 * set-up under the set-up lock, destroy): an exit descriptor ends the kernel at once. */
static void rk_stop(cgpu_cuda_comm_t *cc)
{
    if (!cc->rk_running) {
        return;
    }
    if (0 == rk_load(cc, RK_EXITED)) {
        (void) rk_write(cc, 0, 0, CGPU_CUDA_RESIDENT_EXIT, 0);
        while (!rk_ended(cc)) {
            cgpu_cpu_relax();
        }
    }
    cc->rk_running = false;
}

/* Whether this launch of the resident kernel is one thread block cluster. The GPU places a
 * cluster's 8 blocks within one GPC, so a GPC must have 8 multiprocessors free, while the
 * block budget only counts blocks over the whole device. Ring blocks in flight, one to a
 * multiprocessor, can leave fewer than 8 free in every GPC with many free in all: the
 * cluster then waits undispatched behind kernels that wait for their peers, and where
 * those peers' next launch waits behind the same kind of cluster, every rank waits for
 * ever (session 35: test_cuda_nb at np 2, one rank per H200, 5 runs in 21 timed out in
 * twelve communicators' calls crossed). So a cluster only where no launched kernel of this
 * process is in flight on the device, no other process shares it, and the other resident
 * kernels hold at most a quarter of its multiprocessors (the default 4 kernels of 8
 * blocks: 24 of an H200's 132, where every one of its 8 GPCs (16-18 multiprocessors)
 * would need 9 or more taken to leave no room for 8). Else
 * the mailbox in device memory, whose blocks go wherever the budget left room
 * (session 12: a multi-block call's wait for the other blocks 1.9 us against 0.7-0.9). A
 * launch by another thread (another communicator's non-blocking worker, or an application
 * thread) between this check and the cluster's placement could take the room: rk_claim
 * holds such launches back (launched_begin) until the kernel says it runs. */
static bool rk_cluster_now(const cgpu_cuda_comm_t *cc)
{
    const block_budget_t *b = budget_of(cc);
    /* no count (a device past BUDGET_DEVICES): as if a call were in flight */
    const int launched = NULL != b ? __atomic_load_n(&b->launched, __ATOMIC_SEQ_CST) : 1;
    /* every other listed communicator's kernel, on this device or not (rk_count is the
     * process's) */
    const int others = (__atomic_load_n(&rk_count, __ATOMIC_RELAXED) - 1) * cc->rk_blocks;
    return cc->rk_cluster && cgpu_resident_as_cluster(cgpu_engine_config()->cuda_resident_cluster,
                                                      cc->shared_device, launched, others, cc->sms);
}

/* How long other launches wait for a cluster to run at most: it runs within microseconds
 * unless kernels outside this process fill the device (the application's), which end on
 * their own; past the bound launches go on as before the hold (the race it closes). */
#define RK_PLACE_WAIT_NS 100000000ull

/* the cluster runs (or has ended, or is past the wait's bound): launches go on */
static void rk_unclaim(cgpu_cuda_comm_t *cc)
{
    if (cc->rk_placing) {
        __atomic_fetch_sub(&budget_of(cc)->placing, 1, __ATOMIC_SEQ_CST);
        cc->rk_placing = false;
    }
}

/* Whether this launch is a cluster (rk_cluster_now); if so, by default, other launches of
 * the process on the device wait from here until it runs (RK_PLACED; launched_begin). */
static bool rk_claim(cgpu_cuda_comm_t *cc)
{
    rk_unclaim(cc);
    if (!rk_cluster_now(cc)) {
        return false;
    }
    block_budget_t *b = budget_of(cc);
    if (2 == cgpu_engine_config()->cuda_resident_cluster || NULL == b) {
        return true; /* the old rule (measurements): no hold */
    }
    __atomic_fetch_add(&b->placing, 1, __ATOMIC_SEQ_CST);
    cc->rk_placing = true;
    cc->rk_claim_ns = cgpu_now_ns();
    if (0 != __atomic_load_n(&b->launched, __ATOMIC_SEQ_CST)) {
        rk_unclaim(cc); /* a call began meanwhile: no cluster */
        return false;
    }
    return true;
}

static cgpu_status_t rk_launch(cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op, uint64_t start)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const bool cluster = rk_claim(cc);
    /* the blocks' mailbox (one cluster's are in its blocks' shared memory instead; several
     * clusters' first blocks share it) */
    cgpu_status_t st = cluster && 1 == cgpu_resident_clusters(cc->rk_blocks)
                           ? CGPU_OK
                           : cgpu_cuda_memset_async(cc->rk_state, 0, RK_STATE_WORDS * 8,
                                                    cc->rk_stream);
    if (CGPU_OK != st) {
        rk_unclaim(cc);
        return st;
    }
    __atomic_store_n(&cc->rk_ctl[RK_EXITED], 0, __ATOMIC_RELEASE);
    for (int c = 0; c < CGPU_CUDA_RESIDENT_CLUSTERS; ++c) {
        __atomic_store_n(&cc->rk_ctl[RK_PLACED + c], 0, __ATOMIC_RELEASE);
    }
    cgpu_cuda_resident_args_t a;
    memset(&a, 0, sizeof(a));
    a.desc = cc->rk_ctl_dev + RK_DESC;
    a.completed = cc->rk_ctl_dev + RK_DONE;
    a.exited = cc->rk_ctl_dev + RK_EXITED;
    a.placed = cc->rk_ctl_dev + RK_PLACED;
    a.gate = cc->rk_ctl_dev + RK_GATE;
    a.state = cc->rk_state;
    a.start = start;
    a.cluster = cluster;
    a.idle_ns = (unsigned long long) (cgpu_engine_config()->cuda_resident_idle_us * 1e3);
    if (cgpu_engine_config()->verbose >= CGPU_LOG_INFO) {
        a.trace = (unsigned long long *) (cc->rk_state + RK_TRACE);
    }
    a.o.timeout_ns = cc->timeout_ns;
    a.o.err = cc->err_dev;
    a.o.rank = comm->rank;
    a.o.nranks = comm->size;
    a.o.slice_bytes = cc->oneshot_slice;
    a.o.oneshot_off = cc->oneshot_off;
    a.o.ll_off = cc->ll_off;
    for (int i = 0; i < comm->size; ++i) {
        a.o.inbox[i] = cc->peer_inbox[i];
    }
    int err = cgpu_cuda_resident_launch(&a, dt, op, cc->rk_blocks, cc->threads, cc->rk_stream);
    if (0 != err) {
        rk_unclaim(cc);
        return cgpu_cuda_check(err, "resident kernel launch");
    }
    /* running from here on, whatever follows fails (it owns descriptor `start`) */
    cc->rk_running = true;
    cc->rk_launches++;
    cc->rk_cluster_launches += cluster ? 1 : 0;
    cc->rk_dt = dt;
    cc->rk_op = op;
    cgpu_log(CGPU_LOG_TRACE, "cuda: resident kernel launched, rank %d %s/%s from %llu",
             comm->rank, cgpu_dtype_name(dt), cgpu_op_name(op), (unsigned long long) start);
    return cgpu_cuda_event_record(cc->rk_ev, cc->rk_stream);
}

/* Whether this communicator may hand this oneshot call (`unit` bytes a block) to a
 * resident kernel (this rank's choice alone: a peer running it as a launched oneshot
 * interoperates). Both buffers (NULL: none) must be usable in place. */
static bool rk_takes(cgpu_comm_t *comm, const void *sbuf, const void *rbuf, size_t unit,
                     size_t align)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    if (NULL == cc->rk_stream || unit > cgpu_engine_config()->cuda_resident_max_bytes ||
        oneshot_blocks(unit) > (size_t) cc->rk_blocks ||
        (NULL != rbuf && !buf_kind(cc, rbuf, align).in_place) ||
        (NULL != sbuf && sbuf != rbuf && !buf_kind(cc, sbuf, align).in_place)) {
        return false;
    }
    if (cc->rk_listed) {
        return true;
    }
    block_budget_t *b = budget_of(cc);
    pthread_mutex_lock(&rk_lock);
    /* a listed communicator's kernel holds its blocks of the budget until the
     * communicator ends (it runs again at the next call after an idle end) */
    if (rk_count < cgpu_engine_config()->cuda_resident_max_kernels &&
        (NULL == b ||
         cgpu_blocks_reserve(&b->used, cc->block_cap, spare_now(cc, b), cc->rk_blocks))) {
        rk_count++;
        cc->rk_listed = true;
        cc->rk_next = rk_head;
        rk_head = cc;
    }
    pthread_mutex_unlock(&rk_lock);
    return cc->rk_listed;
}

static cgpu_status_t resident_call(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const ring_call_t *rc = args;
    cgpu_cuda_comm_t *cc = comm->cuda;
    /* a copying call runs on whichever reduction's kernel there is (or was) */
    const cgpu_dtype_t dt = rc->copy ? cc->rk_dt : rc->dt;
    const cgpu_op_t op = rc->copy ? cc->rk_op : rc->op;
    if (cc->rk_running && (dt != cc->rk_dt || op != cc->rk_op)) {
        rk_stop(cc);
    }
    if (cc->rk_running && 0 != rk_load(cc, RK_EXITED)) {
        cc->rk_running = false; /* ended idle: launched again below */
    }
    int mode;
    const uint64_t oseq = oneshot_number(cc, rc, &mode);
    const bool ll = 0 != (mode & CGPU_CUDA_ONESHOT_LL);
    const uint64_t nblocks = oneshot_blocks(oneshot_unit(rc));
    const bool gated = rk_gated(cc);
    const uint64_t t1 = cgpu_now_ns();
    cc->rk_calls++;
    const uint64_t k = rk_write(cc, (uintptr_t) in, (uintptr_t) out,
                                cgpu_cuda_resident_word(rc->count, mode, (int) nblocks,
                                                        rc->root) |
                                    (gated ? CGPU_CUDA_RESIDENT_GATED : 0),
                                oseq);
    cgpu_log(CGPU_LOG_TRACE, "cuda: resident %s rank %d count %zu %s/%s blocks %llu seq %llu%s",
             oneshot_name(rc->mode), comm->rank, rc->count,
             rc->copy ? "byte" : cgpu_dtype_name(dt), rc->copy ? "-" : cgpu_op_name(op),
             (unsigned long long) nblocks, (unsigned long long) oseq, ll ? " LL" : "");
    cgpu_status_t st = cc->rk_running ? CGPU_OK : rk_launch(comm, dt, op, k);
    /* gated: the kernel takes the call meanwhile; whatever the wait returns, the call goes
     * through the gate (the peers take part in it), and a failed wait is this call's error */
    const cgpu_status_t ord =
        gated ? cgpu_cuda_default_stream_wait_host(cc->order_ev) : CGPU_OK;
    if (gated) {
        __atomic_store_n(&cc->rk_ctl[RK_GATE], k, __ATOMIC_RELEASE);
    }
    /* a non-blocking collective's worker bound to the caller's one CPU gives it the core
     * between polls (a poll reads one mapped line): the caller computes meanwhile */
    const bool share = cgpu_thread_worker_shares_cpu();
    for (unsigned long it = 1; CGPU_OK == st; ++it) {
        const uint64_t ended = rk_load(cc, RK_EXITED); /* read first: the blocks publish
                                                          * completions before they end */
        if (cc->rk_placing &&
            (rk_placed(cc) || 0 != ended || cgpu_now_ns() - cc->rk_claim_ns > RK_PLACE_WAIT_NS)) {
            rk_unclaim(cc); /* running, ended, or past the bound */
        }
        if (rk_done(cc, k, (int) nblocks)) {
            cc->rk_wait_ns += cgpu_now_ns() - t1;
            return ord;
        }
        if (ended == k) {
            /* block 0 ended (idle) before taking descriptor k, and so took no other block
             * (it hands every call on): again */
            st = rk_launch(comm, dt, op, k);
            continue;
        }
        /* ended past k: block 0 is done with k and the kernel ends once the other working
         * blocks are (they see the end only then); so only a kernel gone without every
         * completion is a fault */
        if (0 == (it & 0xfff) && CGPU_IN_PROGRESS != cgpu_cuda_event_query(cc->rk_ev) &&
            !rk_done(cc, k, (int) nblocks) && k != rk_load(cc, RK_EXITED)) {
            /* a device error (reported by the query, or here) */
            cc->rk_running = false;
            cgpu_log(CGPU_LOG_WARN, "cuda: rank %d: the resident kernel ended at descriptor "
                     "%llu without completing %llu", comm->rank,
                     (unsigned long long) rk_load(cc, RK_EXITED), (unsigned long long) k);
            return CGPU_ERR_DEVICE;
        }
        /* a wait past 50 us (a call takes 5-10): a peer may wait in MPI for a message of ours */
        if (0 == (it & 0xff) && cgpu_now_ns() - t1 > 50000) {
            rk_unclaim(cc); /* progress may begin a call on this thread (launched_begin) */
            cgpu_progress();
        }
        if (share) {
            sched_yield();
        } else {
            cgpu_cpu_relax();
        }
    }
    cc->rk_running = false;
    return st;
}

static cgpu_status_t launch_resident(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    const cgpu_status_t st = resident_call(comm, in, out, args);
    rk_unclaim(comm->cuda); /* on every way out */
    return st;
}

/* Whether a call of another collective than the allreduce, `unit` bytes a block, goes
 * oneshot: up to coll_gpu_cuda_small_bytes, within an inbox slice, and shrinking as ranks
 * are added like the allreduce's (the same answer on every rank: sizes and settings are) */
static bool small_call(const cgpu_comm_t *comm, size_t unit)
{
    return unit > 0 && unit <= cgpu_engine_config()->cuda_small_bytes &&
           unit <= comm->cuda->oneshot_slice * 2 / (size_t) comm->size;
}

/* k as a oneshot call of rc (k->args), handed to the resident kernel where this rank may */
static cgpu_status_t run_small(cgpu_comm_t *comm, cuda_call_t *k, ring_call_t *rc)
{
    k->resident = rk_takes(comm, k->sbuf, k->rbuf, oneshot_unit(rc), k->align);
    k->alg = k->resident ? "resident" : "oneshot";
    k->ras_alg = CGPU_RAS_ALG_ONESHOT;
    k->force_copy_in = false; /* a block reads its share of the input before it writes out */
    k->fn = k->resident ? launch_resident : launch_oneshot;
    k->args = rc;
    return cuda_run(comm, k);
}

cgpu_status_t cgpu_cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                  const cgpu_pairs_out_t *po)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t bytes = count * cgpu_dtype_size(dt);
    const size_t ce_min = cgpu_engine_config()->cuda_ce_allreduce_min_bytes;
    /* 2 ranks on two devices (stream3), auto, out of place, and both halves whole vectors
     * (the same answer on every rank: count, the settings and the devices are; the buffers
     * are agreed on in ce_prepare) */
    if (CGPU_ALLREDUCE_AUTO == alg && 0 != ce_min && bytes >= ce_min && NULL != cc->stream3 &&
        count >= 32) {
        cuda_call_t k = {.kind = "allreduce", .dtype = cgpu_dtype_name(dt),
                         .op = cgpu_op_name(op), .count = count, .bytes = bytes,
                         .sbuf = sbuf, .in_bytes = bytes, .rbuf = rbuf, .out_bytes = bytes};
        bool done; /* a padded pair's call takes part in the agreement, and declines */
        cgpu_status_t st = ce_allreduce(comm, &k, sbuf, rbuf, count, dt, op, NULL == po, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
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
    ring_call_t rc = {.mode = CGPU_CUDA_RING_ALLREDUCE, .count = count, .dt = dt, .op = op};
    /* A padded pair's whole result by a oneshot, on buffers of this device aligned for the
     * type: the kernel reads the caller's input and writes the caller's output itself (its
     * result stores skip the gaps, and it reads the last element whole only in an aligned
     * 16-byte access, which cannot leave the allocation), so no copies around it and the
     * resident kernel may take it (its test of the buffers answers for both). This rank's
     * choice alone: the kernel and what it exchanges are the same. Else a padded pair's
     * staged copies need the stream, which the resident kernel has not. */
    const size_t align = dtype_align(dt);
    const bool whole = NULL == po || (0 == po->first && count == po->n && po->out == rbuf);
    bool resident = oneshot && whole && rk_takes(comm, sbuf, rbuf, bytes, align);
    if (NULL != po && oneshot && whole &&
        (resident || (buf_kind(cc, sbuf, align).in_place && buf_kind(cc, rbuf, align).in_place))) {
        po = NULL;
    }
    resident = resident && NULL == po;
    cuda_call_t k = {.kind = "allreduce",
                     .dtype = cgpu_dtype_name(dt),
                     .op = cgpu_op_name(op),
                     .alg = resident  ? "resident"
                            : oneshot ? "oneshot"
                            : tree    ? "tree"
                                      : "ring",
                     .count = count,
                     .bytes = bytes,
                     .ras_alg = oneshot ? CGPU_RAS_ALG_ONESHOT
                                : tree  ? CGPU_RAS_ALG_TREE
                                        : CGPU_RAS_ALG_RING,
                     .sbuf = sbuf,
                     .in_bytes = bytes,
                     .rbuf = rbuf,
                     .out_bytes = bytes,
                     .align = align,
                     .resident = resident,
                     .fn = resident  ? launch_resident
                           : oneshot ? launch_oneshot
                           : tree    ? launch_tree
                                     : launch_ring,
                     .args = &rc};
    if (NULL != po) {
        k.po = po;
        k.po_dt = dt;
        k.rbuf = NULL;
        k.in_bytes = cgpu_dtype_span(dt, count);
        k.force_copy_in = true;
    }
    return cuda_run(comm, &k);
}

bool cgpu_cuda_small_in_place(cgpu_comm_t *comm, const void *sbuf, const void *rbuf, size_t bytes,
                              cgpu_dtype_t dt)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t align = dtype_align(dt);
    return NULL != cc && small_call(comm, bytes) &&
           (NULL == sbuf || buf_kind(cc, sbuf, align).in_place) &&
           (NULL == rbuf || buf_kind(cc, rbuf, align).in_place);
}

/* A reduction @p rc of @p bytes (for the profiler) on the ring kernels' launcher: the caller
 * adds the buffers */
static cuda_call_t ring_reduction(const char *kind, const char *alg, ring_call_t *rc, size_t bytes)
{
    return (cuda_call_t){.kind = kind,
                         .dtype = cgpu_dtype_name(rc->dt),
                         .op = cgpu_op_name(rc->op),
                         .alg = alg,
                         .count = rc->count,
                         .bytes = bytes,
                         .ras_alg = CGPU_RAS_ALG_RING,
                         .align = dtype_align(rc->dt),
                         .fn = launch_ring,
                         .args = rc};
}

cgpu_status_t cgpu_cuda_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, bool exclusive)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool out = !exclusive || comm->rank > 0; /* an exscan's rank 0 gets nothing */
    ring_call_t rc = {.mode = exclusive ? CGPU_CUDA_ONESHOT_EXSCAN : CGPU_CUDA_ONESHOT_SCAN,
                      .root = comm->size - 1,
                      .count = count,
                      .dt = dt,
                      .op = op};
    cuda_call_t k = ring_reduction(exclusive ? "exscan" : "scan", "chain", &rc, bytes);
    k.sbuf = NULL != sbuf ? sbuf : rbuf;
    k.in_bytes = bytes;
    k.rbuf = out ? rbuf : NULL;
    k.out_bytes = out ? bytes : 0;
    return small_call(comm, bytes) ? run_small(comm, &k, &rc) : cuda_run(comm, &k);
}

cgpu_status_t cgpu_cuda_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    const size_t bytes = count * cgpu_dtype_size(dt), total = bytes * (size_t) comm->size;
    ring_call_t rc = {.mode = CGPU_CUDA_RING_REDUCE_SCATTER, .count = count, .dt = dt, .op = op};
    cuda_call_t k = ring_reduction("reduce_scatter_block", "ring", &rc, total);
    k.sbuf = NULL != sbuf ? sbuf : rbuf;
    k.in_bytes = total;
    k.rbuf = rbuf;
    k.out_bytes = NULL != sbuf ? bytes : total;
    return small_call(comm, bytes) ? run_small(comm, &k, &rc) : cuda_run(comm, &k);
}

/* copy-engine paths, below */
static cgpu_status_t ce_bcast(cgpu_comm_t *comm, cuda_call_t *k, void *buf, size_t bytes,
                              int root, bool *done);
static cgpu_status_t ce_reduce(cgpu_comm_t *comm, cuda_call_t *k, const void *sbuf, void *rbuf,
                               size_t count, cgpu_dtype_t dt, cgpu_op_t op, int root, bool *done);

cgpu_status_t cgpu_cuda_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool is_root = comm->rank == root;
    ring_call_t rc = {.mode = CGPU_CUDA_RING_REDUCE, .root = root, .count = count, .dt = dt,
                      .op = op};
    cuda_call_t k = ring_reduction("reduce", "chain", &rc, bytes);
    k.sbuf = NULL != sbuf ? sbuf : rbuf;
    k.in_bytes = bytes;
    k.rbuf = is_root ? rbuf : NULL;
    k.out_bytes = is_root ? bytes : 0;
    if (small_call(comm, bytes)) {
        return run_small(comm, &k, &rc);
    }
    const size_t ce_min = cgpu_engine_config()->cuda_ce_reduce_min_bytes;
    if (0 != ce_min && bytes >= ce_min && NULL != comm->cuda->stream2) { /* 2 ranks, 2 devices */
        bool done;
        cgpu_status_t st = ce_reduce(comm, &k, sbuf, rbuf, count, dt, op, root, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    return cuda_run(comm, &k);
}


cgpu_status_t cgpu_cuda_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                              size_t part_off, size_t part_bytes)
{
    ring_call_t rc = {.mode = CGPU_CUDA_RING_BCAST, .root = root, .count = bytes, .copy = true};
    cuda_call_t k = {.kind = "bcast", .dtype = "byte", .op = "", .alg = "chain", .count = bytes,
                     .bytes = bytes, .ras_alg = CGPU_RAS_ALG_RING, .sbuf = buf, .in_bytes = bytes,
                     .rbuf = buf, .out_bytes = bytes, .fn = launch_ring, .args = &rc,
                     .tail = part, .tail_off = part_off, .tail_bytes = NULL != part ? part_bytes : 0};
    if (small_call(comm, bytes)) {
        return run_small(comm, &k, &rc);
    }
    const size_t ce_min = cgpu_engine_config()->cuda_ce_bcast_min_bytes;
    /* the root writes to each peer in turn: with more than 2 ranks the chain is faster */
    if (0 != ce_min && bytes >= ce_min && 2 == comm->size) {
        bool done;
        cgpu_status_t st = ce_bcast(comm, &k, buf, bytes, root, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    return cuda_run(comm, &k);
}

cgpu_status_t cgpu_cuda_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    const size_t total = bytes * (size_t) comm->size;
    ring_call_t rc = {.mode = CGPU_CUDA_RING_ALLGATHER, .count = bytes, .copy = true};
    cuda_call_t k = {.kind = "allgather", .dtype = "byte", .op = "", .alg = "ring", .count = bytes,
                     .bytes = total, .ras_alg = CGPU_RAS_ALG_RING,
                     .sbuf = NULL != sbuf ? sbuf : (char *) rbuf + (size_t) comm->rank * bytes,
                     .in_bytes = bytes, .rbuf = rbuf, .out_bytes = total, .fn = launch_ring,
                     .args = &rc};
    return small_call(comm, bytes) ? run_small(comm, &k, &rc) : cuda_run(comm, &k);
}

/* ---- alltoall ---- */

bool cgpu_cuda_comm_alltoall_ok(const cgpu_comm_t *comm)
{
    return NULL != comm->cuda && comm->cuda->a2a_cpd_max > 0;
}

bool cgpu_cuda_comm_shares_device(const cgpu_comm_t *comm)
{
    return NULL != comm->cuda && comm->cuda->shared_device;
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
    a.grid = blocks_take(cc, 2 * (comm->size - 1) * (int) cpd + (int) nself, 2);
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

/* ---- copy-engine path: each rank's copy engines write straight into the peers' user
 * buffers, mapped through CUDA IPC for the call (and cached), then set a flag in each
 * peer's inbox; a rank's call completes when every peer's flag for it has arrived.
 * The 2-rank reduce and allreduce also need ranks on two devices (comm_setup makes their
 * streams only then): on one device the copies cross no NVLink, and both ranks' reduce
 * kernels (up to 128 blocks each, spinning for the peer's pieces) beside the resident
 * kernels left no room under MPS for what raises a piece's flag, so the 64 MiB allreduce
 * timed out there (session 28, runs 1 and 4). ---- */

typedef struct ce_rec {
    int32_t ok;       /* this rank can take part (its buffers suit, its target exported) */
    int32_t exported; /* handle/offset are valid */
    uint64_t offset;  /* of the target in its allocation */
    uint64_t id;      /* the allocation's unique id (a freed one's handle can come back) */
    char handle[CGPU_CUDA_IPC_HANDLE_BYTES];
} ce_rec_t;

enum { CE_ALLTOALL, CE_BCAST, CE_REDUCE, CE_ALLREDUCE };

typedef struct ce_call {
    int kind;
    int root;
    size_t bytes; /* bcast, reduce: the buffer; alltoall: per peer */
    size_t count; /* reduce: elements */
    cgpu_dtype_t dt;
    cgpu_op_t op;
    void *map[CGPU_CUDA_MAX_RANKS]; /* peers' mapped allocations (NULL: not mapped) */
    char *dst[CGPU_CUDA_MAX_RANKS]; /* peers' target buffers through them */
} ce_call_t;

/* whether @p p serves a copy-engine call as it is (a reduction's kernel loads ce's type) */
static bool usable_as_is(const cgpu_cuda_comm_t *cc, const void *p, const ce_call_t *ce)
{
    const bool reduces = CE_REDUCE == ce->kind || CE_ALLREDUCE == ce->kind;
    return buf_kind(cc, p, reduces ? dtype_align(ce->dt) : 0).in_place;
}

/* two buffers of `bytes` that do not overlap */
static bool apart(const void *a, const void *b, size_t bytes)
{
    const char *x = a, *y = b;
    return x + bytes <= y || y + bytes <= x;
}

static void ce_unmap(ce_call_t *ce, int n)
{
    for (int p = 0; p < n; ++p) {
        if (NULL != ce->map[p]) {
            cgpu_ipc_cache_put(ce->map[p]);
            ce->map[p] = NULL;
        }
    }
}

/* Collective: whether every rank takes the copy-engine path for this call (the same
 * answer on every rank, from records every rank sees), and the mappings this rank needs.
 * `target` is what peers write into (NULL: nothing), `source` what this rank reads. */
static cgpu_status_t ce_prepare(cgpu_comm_t *comm, const void *source, const void *target,
                                bool needs_map, bool local_ok, ce_call_t *ce, bool *use)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const int n = comm->size;
    *use = false;
    ce_rec_t mine;
    memset(&mine, 0, sizeof(mine));
    mine.ok = local_ok && usable_as_is(cc, source, ce) &&
              (NULL == target || usable_as_is(cc, target, ce));
    if (mine.ok && NULL != target) {
        size_t off = 0;
        uint64_t id = 0;
        mine.ok = CGPU_OK == cgpu_cuda_ipc_export_range(target, mine.handle, &off, &id);
        mine.id = id;
        mine.exported = mine.ok;
        mine.offset = off;
        /* peers write into it without our stream's ordering: what the caller queued on the
         * default stream must be finished first */
        if (mine.ok && NULL != cc->order_ev &&
            CGPU_OK != cgpu_cuda_default_stream_wait_host(cc->order_ev)) {
            mine.ok = 0;
        }
    }
    ce_rec_t all[CGPU_CUDA_MAX_RANKS]; /* on the stack: no rank can miss the exchange */
    cgpu_status_t st = comm->bs.allgather(comm->bs.ctx, &mine, all, sizeof(ce_rec_t));
    bool every = CGPU_OK == st;
    for (int p = 0; every && p < n; ++p) {
        every = 0 != all[p].ok;
    }
    int32_t mapped = 1;
    if (every && needs_map) {
        const bool held = cgpu_cuda_setup_begin(); /* opening a handle might wait for kernels */
        for (int p = 0; p < n && mapped; ++p) {
            if (p == comm->rank || !all[p].exported) {
                continue;
            }
            mapped = CGPU_OK == cgpu_ipc_cache_get_id(all[p].handle, all[p].id, &ce->map[p]);
            ce->dst[p] = mapped ? (char *) ce->map[p] + all[p].offset : NULL;
        }
        cgpu_cuda_setup_end(held);
    }
    if (CGPU_OK != st) {
        return st;
    }
    if (!every) {
        return CGPU_OK;
    }
    /* a rank that could not map a peer: every rank learns it, and all take the kernels */
    int32_t oks[CGPU_CUDA_MAX_RANKS];
    st = comm->bs.allgather(comm->bs.ctx, &mapped, oks, sizeof(int32_t));
    bool all_mapped = CGPU_OK == st;
    for (int p = 0; all_mapped && p < n; ++p) {
        all_mapped = 0 != oks[p];
    }
    if (!all_mapped) {
        ce_unmap(ce, n);
    }
    *use = all_mapped;
    return st;
}

/* The copy-engine pieces of `count` elements of `es` bytes (cgpu_cuda_ce_start, npieces of
 * them) from src to dst on stream2, each followed by s->signal raised to base + i + 1 from
 * flag_stream once it has landed (flag_ev orders the flag after the copy). */
static cgpu_status_t ce_push_pieces(cgpu_cuda_comm_t *cc, char *dst, const char *src,
                                    size_t count, size_t es, size_t lo, size_t hi, int npieces,
                                    uint64_t base, cgpu_cuda_ce_sync_args_t *s,
                                    void *flag_stream, void *flag_ev)
{
    cgpu_status_t st = CGPU_OK;
    for (int i = 0; i < npieces && CGPU_OK == st; ++i) {
        const size_t a = cgpu_cuda_ce_start(count, lo, hi, npieces, i);
        const size_t b = cgpu_cuda_ce_start(count, lo, hi, npieces, i + 1);
        if (b > a) { /* an allreduce's smaller half may start with empty pieces */
            st = cgpu_cuda_copy_async(dst + a * es, src + a * es, (b - a) * es, cc->stream2);
        }
        if (CGPU_OK == st) {
            st = cgpu_cuda_stream_after(flag_stream, flag_ev, cc->stream2);
        }
        if (CGPU_OK == st) {
            s->seq = base + (uint64_t) i + 1;
            int err = cgpu_cuda_ce_sync(s, flag_stream);
            st = 0 != err ? cgpu_cuda_check(err, "copy-engine flags") : CGPU_OK;
        }
    }
    return st;
}

/* A copy-engine reduction's blocks: one per 128 KiB of its largest piece, so the reduction
 * keeps ahead of NVLink (2 MiB pieces on 2 blocks measured 73 GB/s at 6140ee8), within
 * the block budget (the kernel splits each piece among whatever blocks it has). Its
 * flag kernels (cgpu_cuda_ce_sync: one block of a few threads) are not counted. */
static int ce_blocks(cgpu_cuda_comm_t *cc, size_t piece_bytes)
{
    const int want = (int) cgpu_clamp1(cgpu_div_up(piece_bytes, 128 << 10), 128);
    const int got = blocks_take(cc, want, 1);
    return got > 0 ? got : want;
}

/* 2-rank reduce: the other rank's copy engines push its input into the root's output in
 * pieces (on a second stream, so the copies run back to back), each followed by a flag;
 * the root's kernel reduces every piece as it lands. Both ranks advance ce_seq alike. */
static cgpu_status_t launch_ce_reduce(cgpu_comm_t *comm, const void *in, void *out,
                                      const ce_call_t *ce)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const int me = comm->rank, peer = 1 - me;
    const size_t es = cgpu_dtype_size(ce->dt);
    /* pieces growing back from a 2 MiB last one to 64 MiB: each copy costs the copy engine
     * some microseconds besides the bytes (uniform 8 and 16 MiB pieces ran 4-5 us slower
     * each than NVLink at 3f85787), and only the last piece's reduction trails the copies */
    const size_t lo = ((size_t) 2 << 20) / es, hi = ((size_t) 64 << 20) / es;
    const int npieces = cgpu_cuda_ce_npieces(ce->count, lo, hi);
    const uint64_t base = cc->ce_seq;
    cc->ce_seq += npieces;
    cgpu_log(CGPU_LOG_TRACE, "cuda: copy-engine reduce rank %d root %d count %zu pieces %d",
             me, ce->root, ce->count, npieces);
    if (me == ce->root) {
        cgpu_cuda_ce_reduce_args_t a = {.timeout_ns = cc->timeout_ns, .err = cc->err_dev,
                                        .out = out, .in = in, .count = ce->count,
                                        .lo = lo, .hi = hi, .npieces = npieces, .peer = peer,
                                        .base = base};
        a.flag = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(peer));
        const size_t largest = ce->count < hi ? ce->count : hi;
        const int blocks = ce_blocks(cc, largest * es);
        int err = cgpu_cuda_ce_reduce(&a, ce->dt, ce->op, blocks, cc->threads, cc->stream);
        return 0 != err ? cgpu_cuda_check(err, "reduce launch") : CGPU_OK;
    }
    cgpu_cuda_ce_sync_args_t s;
    memset(&s, 0, sizeof(s));
    s.timeout_ns = cc->timeout_ns;
    s.err = cc->err_dev;
    s.signal[ce->root] = (uint64_t *) (cc->peer_inbox[ce->root] + CGPU_CUDA_FLAG_CE(me));
    cgpu_status_t st = cgpu_cuda_stream_after(cc->stream2, cc->ev2, cc->stream);
    if (CGPU_OK == st) {
        st = ce_push_pieces(cc, ce->dst[ce->root], in, ce->count, es, lo, hi, npieces, base, &s,
                            cc->stream, cc->ev2);
    }
    return st; /* on an error the root times out waiting: coll_gpu_cuda_timeout */
}

/* 2-rank allreduce: rank r reduces the half h_r of the elements (h_0 first, cut on the
 * 16-element grid). Its copy engines push the other half of its input, in pieces, into the
 * peer's output (stream2), each piece flagged from stream3 once copied; its kernel
 * (stream) reduces each piece of h_r as the peer's copies land in its output and stores the
 * result in both outputs (the peer's through its mapping, over NVLink). A last flag on
 * stream, after all of that, tells the peer its half of our output is written; the call
 * completes when the peer's last flag has arrived. Both ranks advance ce_seq alike. */
static cgpu_status_t launch_ce_allreduce(cgpu_comm_t *comm, const void *in, void *out,
                                         const ce_call_t *ce)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const int me = comm->rank, peer = 1 - me;
    const size_t es = cgpu_dtype_size(ce->dt);
    const size_t mid = cgpu_cuda_ce_half(ce->count);
    const size_t first[2] = {0, mid}, cnt[2] = {mid, ce->count - mid};
    /* the reduce's pieces (see launch_ce_reduce); both halves counted as the larger one,
     * so both ranks number them alike (the smaller half's first piece may be empty) */
    const size_t lo = ((size_t) 2 << 20) / es, hi = ((size_t) 64 << 20) / es;
    const int npieces = cgpu_cuda_ce_npieces(cnt[1], lo, hi);
    const uint64_t base = cc->ce_seq;
    cc->ce_seq += (uint64_t) npieces + 1;
    cgpu_log(CGPU_LOG_TRACE, "cuda: copy-engine allreduce rank %d count %zu pieces %d", me,
             ce->count, npieces);
    /* stream2 and stream3 start after what stream holds (staging, the default stream) */
    cgpu_status_t st = cgpu_cuda_stream_after(cc->stream2, cc->ev2, cc->stream);
    cgpu_cuda_ce_sync_args_t s;
    memset(&s, 0, sizeof(s));
    s.timeout_ns = cc->timeout_ns;
    s.err = cc->err_dev;
    s.signal[peer] = (uint64_t *) (cc->peer_inbox[peer] + CGPU_CUDA_FLAG_CE(me));
    if (CGPU_OK == st) {
        const size_t poff = first[peer] * es;
        st = ce_push_pieces(cc, ce->dst[peer] + poff, (const char *) in + poff, cnt[peer], es, lo,
                            hi, npieces, base, &s, cc->stream3, cc->ev3);
    }
    if (CGPU_OK != st) { /* the peer times out waiting: coll_gpu_cuda_timeout; what this
                          * call queued on stream2 and stream3 ends before it returns */
        (void) cgpu_cuda_stream_after(cc->stream, cc->ev3, cc->stream3);
        (void) cgpu_cuda_stream_after(cc->stream, cc->ev2, cc->stream2);
        return st;
    }
    const size_t off = first[me] * es;
    cgpu_cuda_ce_reduce_args_t a = {.timeout_ns = cc->timeout_ns, .err = cc->err_dev,
                                    .out = (char *) out + off, .out2 = ce->dst[peer] + off,
                                    .in = (const char *) in + off, .count = cnt[me], .lo = lo,
                                    .hi = hi, .npieces = npieces, .peer = peer, .base = base};
    a.flag = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(peer));
    const size_t largest = cnt[me] < hi ? cnt[me] : hi;
    const int blocks = ce_blocks(cc, largest * es);
    int err = cgpu_cuda_ce_reduce(&a, ce->dt, ce->op, blocks, cc->threads, cc->stream);
    if (0 != err) {
        (void) cgpu_cuda_stream_after(cc->stream, cc->ev3, cc->stream3);
        return cgpu_cuda_check(err, "allreduce launch");
    }
    /* our last piece flag is raised before the final one (the same word) */
    st = cgpu_cuda_stream_after(cc->stream, cc->ev3, cc->stream3);
    if (CGPU_OK != st) {
        return st;
    }
    s.seq = base + (uint64_t) npieces + 1;
    s.wait[peer] = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(peer));
    err = cgpu_cuda_ce_sync(&s, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "copy-engine flags") : CGPU_OK;
}

static cgpu_status_t launch_ce(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const ce_call_t *ce = args;
    if (CE_REDUCE == ce->kind) {
        return launch_ce_reduce(comm, in, out, ce);
    }
    if (CE_ALLREDUCE == ce->kind) {
        return launch_ce_allreduce(comm, in, out, ce);
    }
    const int n = comm->size, me = comm->rank;
    cgpu_cuda_ce_sync_args_t s;
    memset(&s, 0, sizeof(s));
    s.timeout_ns = cc->timeout_ns;
    s.err = cc->err_dev;
    s.seq = ++cc->ce_seq;
    cgpu_status_t st = CGPU_OK;
    if (CE_BCAST == ce->kind) {
        for (int p = 0; p < n && CGPU_OK == st; ++p) {
            if (me == ce->root && p != me) {
                st = cgpu_cuda_copy_async(ce->dst[p], in, ce->bytes, cc->stream);
                s.signal[p] = (uint64_t *) (cc->peer_inbox[p] + CGPU_CUDA_FLAG_CE(me));
            }
        }
        if (me != ce->root) {
            s.wait[ce->root] = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(ce->root));
        }
    } else {
        /* peers in order of distance, so not everyone writes to rank 0 first */
        for (int d = 1; d < n && CGPU_OK == st; ++d) {
            const int p = (me + d) % n;
            st = cgpu_cuda_copy_async(ce->dst[p] + (size_t) me * ce->bytes,
                                      (const char *) in + (size_t) p * ce->bytes, ce->bytes,
                                      cc->stream);
            s.signal[p] = (uint64_t *) (cc->peer_inbox[p] + CGPU_CUDA_FLAG_CE(me));
            s.wait[p] = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(p));
        }
        if (CGPU_OK == st) {
            st = cgpu_cuda_copy_async((char *) out + (size_t) me * ce->bytes,
                                      (const char *) in + (size_t) me * ce->bytes, ce->bytes,
                                      cc->stream);
        }
    }
    if (CGPU_OK != st) {
        return st; /* peers time out waiting for our flag: coll_gpu_cuda_timeout */
    }
    cgpu_log(CGPU_LOG_TRACE, "cuda: copy-engine %s rank %d bytes %zu seq %llu",
             CE_BCAST == ce->kind ? "bcast" : "alltoall", me,
             ce->bytes, (unsigned long long) s.seq);
    int err = cgpu_cuda_ce_sync(&s, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "copy-engine flags") : CGPU_OK;
}

/* Runs the call on the copy engines when every rank can; *done says whether it did (if not,
 * *k is as it was: the caller runs its kernels). */
static cgpu_status_t ce_try(cgpu_comm_t *comm, cuda_call_t *k, ce_call_t *ce, const void *source,
                            const void *target, bool needs_map, bool local_ok, bool *done)
{
    *done = false;
    if (!cgpu_thread_may_call_mpi()) { /* a non-blocking collective's worker: no agreement */
        return CGPU_OK;
    }
    int prev = cgpu_cuda_current_device();
    cgpu_status_t st = prev != comm->cuda->device ? cgpu_cuda_set_device(comm->cuda->device)
                                                   : CGPU_OK;
    bool use = false;
    if (CGPU_OK == st) {
        st = ce_prepare(comm, source, target, needs_map, local_ok, ce, &use);
    }
    if (prev >= 0 && prev != comm->cuda->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    if (CGPU_OK != st || !use) {
        return st;
    }
    *done = true;
    k->alg = "copy-engine";
    k->ras_alg = CGPU_RAS_ALG_COPY_ENGINE;
    k->fn = launch_ce;
    k->args = ce;
    st = cuda_run(comm, k);
    ce_unmap(ce, comm->size);
    return st;
}

/* The root maps the other rank's buffer and writes it; the other rank exports it. */
static cgpu_status_t ce_bcast(cgpu_comm_t *comm, cuda_call_t *k, void *buf, size_t bytes,
                              int root, bool *done)
{
    ce_call_t ce = {.kind = CE_BCAST, .root = root, .bytes = bytes};
    const bool is_root = comm->rank == root;
    return ce_try(comm, k, &ce, buf, is_root ? NULL : buf, is_root, true, done);
}

/* The root exports its output; the other rank maps it and pushes its input there. */
static cgpu_status_t ce_reduce(cgpu_comm_t *comm, cuda_call_t *k, const void *sbuf, void *rbuf,
                               size_t count, cgpu_dtype_t dt, cgpu_op_t op, int root, bool *done)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    ce_call_t ce = {.kind = CE_REDUCE, .root = root, .bytes = bytes, .count = count, .dt = dt,
                    .op = op};
    const bool is_root = comm->rank == root;
    /* the root's output must be apart from its input and usable as it is */
    const bool ok =
        is_root ? NULL != sbuf && apart(sbuf, rbuf, bytes) && usable_as_is(comm->cuda, rbuf, &ce)
                : NULL != sbuf;
    return ce_try(comm, k, &ce, NULL != sbuf ? sbuf : rbuf, is_root ? rbuf : NULL, !is_root, ok,
                  done);
}

/* Every rank exports its output and maps the other's; both buffers usable as they are and
 * apart (an in-place allreduce would overwrite the input the peer has yet to push). */
static cgpu_status_t ce_allreduce(cgpu_comm_t *comm, cuda_call_t *k, const void *sbuf, void *rbuf,
                                  size_t count, cgpu_dtype_t dt, cgpu_op_t op, bool may, bool *done)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    ce_call_t ce = {.kind = CE_ALLREDUCE, .bytes = bytes, .count = count, .dt = dt, .op = op};
    const bool ok = may && NULL != sbuf && NULL != rbuf && apart(sbuf, rbuf, bytes) &&
                    cgpu_cuda_reduce_supported(dt, op);
    return ce_try(comm, k, &ce, NULL != sbuf ? sbuf : rbuf, ok ? rbuf : NULL, true, ok, done);
}

cgpu_status_t cgpu_cuda_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    const size_t total = bytes * (size_t) comm->size;
    cuda_call_t k = {.kind = "alltoall", .dtype = "byte", .op = "", .alg = "direct",
                     .count = bytes, .bytes = total, .ras_alg = CGPU_RAS_ALG_DIRECT,
                     .sbuf = sbuf, .in_bytes = total, .rbuf = rbuf, .out_bytes = total,
                     .force_copy_in = sbuf == rbuf, .fn = launch_a2a, .args = &bytes};
    ring_call_t rc = {.mode = CGPU_CUDA_ONESHOT_ALLTOALL, .count = bytes, .copy = true};
    if (small_call(comm, bytes)) {
        return run_small(comm, &k, &rc);
    }
    const size_t ce_min = cgpu_engine_config()->cuda_ce_alltoall_min_bytes;
    /* separate buffers only (in place needs the inbox) */
    if (0 != ce_min && total >= ce_min && apart(sbuf, rbuf, total)) {
        ce_call_t ce = {.kind = CE_ALLTOALL, .bytes = bytes};
        bool done;
        cgpu_status_t st = ce_try(comm, &k, &ce, sbuf, rbuf, true, true, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    return cuda_run(comm, &k);
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

bool cgpu_cuda_small_in_place(cgpu_comm_t *comm, const void *sbuf, const void *rbuf, size_t bytes,
                              cgpu_dtype_t dt)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) bytes, (void) dt;
    return false;
}

cgpu_status_t cgpu_cuda_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, bool exclusive)
{
    (void) comm, (void) sbuf, (void) rbuf, (void) count, (void) dt, (void) op, (void) exclusive;
    return CGPU_ERR_NOT_SUPPORTED;
}

#endif /* CGPU_HAVE_CUDA */

/* with or without CUDA: the glue answers "unknown" without it */
void cgpu_cuda_dev_rec(cgpu_cuda_dev_rec_t *rec, int device, int rank)
{
    memset(rec, 0, sizeof(*rec));
    if (device < 0 ||
        CGPU_OK != cgpu_cuda_pci_bus_id(device, rec->bus, (int) sizeof(rec->bus) - 1)) {
        snprintf(rec->bus, sizeof(rec->bus), "?%d", rank); /* unknown: shares nothing */
    }
    rec->mps = device < 0 ? -1 : cgpu_cuda_mps_enabled(device);
}
