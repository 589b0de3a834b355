/*
 * coll/gpu engine, cuda backend: the resident oneshot kernel's control from the host.
 *
 * Small calls skip the launch: a kernel stays on the device polling a control block in
 * mapped host memory, the host writes each call's descriptor there and polls the blocks'
 * completion words. This file holds that protocol (descriptors, the gate, completion, the
 * kernel's launch, idle end and stop), the process's list of communicators with a resident
 * kernel (at most coll_gpu_cuda_resident_max_kernels, each holding its blocks of the
 * budget), the kernel's placement as a thread block cluster, and its set-up and report.
 * Apart from the launched oneshot (oneshot.c) because only the host side differs: a peer
 * may run the same call either way.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

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

/* The resident kernel's set-up (cgpu_cuda_comm_setup, before the inbox): where it is enabled
 * and the communicator has peers, the streams, control block and state it runs with. */
cgpu_status_t cgpu_cuda_rk_setup(cgpu_comm_t *comm, cgpu_cuda_comm_t *cc)
{
    const cgpu_config_t *cfg = cgpu_engine_config();
    if (1 != cfg->cuda_resident || 0 == cfg->cuda_resident_max_bytes ||
        cfg->cuda_resident_max_kernels <= 0 || comm->size < 2) {
        return CGPU_OK;
    }
    pthread_once(&rk_hook_once, rk_hook);
    cc->rk_dt = CGPU_DT_UINT8; /* the kernel for copies until a reduction comes */
    cc->rk_op = CGPU_OP_SUM;
    /* the blocks of the largest call it takes, whole clusters of 8 (at most 2) where
     * the kernel may be clusters (calls of more blocks are launched) */
    cc->rk_cluster = 0 != cfg->cuda_resident_cluster && 0 != cgpu_cuda_resident_cluster();
    cc->rk_blocks = cgpu_resident_blocks(cgpu_cuda_oneshot_blocks(cfg->cuda_resident_max_bytes),
                                         cc->rk_cluster);
    void *h = NULL, *d = NULL;
    cgpu_status_t st = cgpu_cuda_stream_create(&cc->rk_stream, false);
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
    return st;
}

/* No call of this communicator is in progress (destroy): its kernel ends and leaves the
 * list, giving its blocks back */
void cgpu_cuda_rk_unlist(cgpu_cuda_comm_t *cc)
{
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
        if (NULL != cgpu_cuda_budget_of(cc)) {
            cgpu_blocks_give(&cgpu_cuda_budget_of(cc)->used, cc->rk_blocks);
        }
    }
    pthread_mutex_unlock(&rk_lock);
}

/* The resident kernel's report (verbose 10), once it has ended: calls and launches, the
 * host's mean wait, and where block 0's device time went (the kernel's trace) */
void cgpu_cuda_rk_report(const cgpu_comm_t *comm, cgpu_cuda_comm_t *cc)
{
    if (0 == cc->rk_calls || cgpu_engine_config()->verbose < CGPU_LOG_INFO) {
        return;
    }
    cgpu_log(CGPU_LOG_INFO, "cuda: rank %d: resident oneshot: %llu calls, %llu kernel "
             "launches (%llu as a cluster); mean %.2f us from the descriptor to its "
             "completion", comm->rank, (unsigned long long) cc->rk_calls,
             (unsigned long long) cc->rk_launches, (unsigned long long) cc->rk_cluster_launches,
             (double) cc->rk_wait_ns / 1e3 / (double) cc->rk_calls);
    if (NULL != cgpu_cuda_budget_of(cc)) {
        cgpu_log(CGPU_LOG_INFO,
                 "cuda: rank %d: %d calls so far waited for a resident cluster "
                 "to run on device %d",
                 comm->rank, __atomic_load_n(&cgpu_cuda_budget_of(cc)->held, __ATOMIC_RELAXED),
                 cc->device);
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
bool cgpu_cuda_rk_gated(const cgpu_cuda_comm_t *cc)
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
 * ever (test_cuda_nb at np 2, one rank per H200, timed out in twelve communicators' calls
 * crossed). So a cluster only where no launched kernel of this process is in flight on the
 * device, no other process shares it, and the other resident kernels hold at most a quarter
 * of its multiprocessors (the default 4 kernels of 8 blocks: 24 of an H200's 132, where
 * every one of its 8 GPCs (16-18 multiprocessors) would need 9 or more taken to leave no
 * room for 8). Else the mailbox in device memory, whose blocks go wherever the budget left
 * room (a multi-block call's wait for the other blocks 1.9 us against 0.7-0.9). A launch by
 * another thread (another communicator's non-blocking worker, or an application thread)
 * between this check and the cluster's placement could take the room: rk_claim holds such
 * launches back (cgpu_cuda_launched_begin) until the kernel says it runs. */
static bool rk_cluster_now(const cgpu_cuda_comm_t *cc)
{
    const cgpu_cuda_block_budget_t *b = cgpu_cuda_budget_of(cc);
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
        __atomic_fetch_sub(&cgpu_cuda_budget_of(cc)->placing, 1, __ATOMIC_SEQ_CST);
        cc->rk_placing = false;
    }
}

/* Whether this launch is a cluster (rk_cluster_now); if so, by default, other launches of
 * the process on the device wait from here until it runs (RK_PLACED;
 * cgpu_cuda_launched_begin). */
static bool rk_claim(cgpu_cuda_comm_t *cc)
{
    rk_unclaim(cc);
    if (!rk_cluster_now(cc)) {
        return false;
    }
    cgpu_cuda_block_budget_t *b = cgpu_cuda_budget_of(cc);
    if (2 == cgpu_engine_config()->cuda_resident_cluster || NULL == b) {
        return true; /* setting 2 (for measurements), or no count for the device: no hold */
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
    cc->rk_launch_ns = cgpu_now_ns();
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
bool cgpu_cuda_rk_takes(cgpu_comm_t *comm, const void *sbuf, const void *rbuf, size_t unit,
                        size_t align)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    if (NULL == cc->rk_stream || unit > cgpu_engine_config()->cuda_resident_max_bytes ||
        cgpu_cuda_oneshot_blocks(unit) > (size_t) cc->rk_blocks ||
        (NULL != rbuf && !cgpu_cuda_buf_kind(cc, rbuf, align).in_place) ||
        (NULL != sbuf && sbuf != rbuf && !cgpu_cuda_buf_kind(cc, sbuf, align).in_place)) {
        return false;
    }
    if (cc->rk_listed) {
        return true;
    }
    cgpu_cuda_block_budget_t *b = cgpu_cuda_budget_of(cc);
    pthread_mutex_lock(&rk_lock);
    /* a listed communicator's kernel holds its blocks of the budget until the
     * communicator ends (it runs again at the next call after an idle end) */
    if (rk_count < cgpu_engine_config()->cuda_resident_max_kernels &&
        (NULL == b ||
         cgpu_blocks_reserve(&b->used, cc->block_cap, cgpu_cuda_spare_now(cc, b), cc->rk_blocks))) {
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
    const cgpu_cuda_ring_call_t *rc = args;
    cgpu_cuda_comm_t *cc = comm->cuda;
    /* a copying call runs on whichever reduction's kernel there is (or was) */
    const cgpu_dtype_t dt = rc->copy ? cc->rk_dt : rc->dt;
    const cgpu_op_t op = rc->copy ? cc->rk_op : rc->op;
    /* another reduction's kernel, or one past its lifetime: a device-wide synchronize on
     * another thread waits for the kernel to end, which calls closer than the idle time
     * would otherwise put off for as long as they come */
    const double life_us = cgpu_engine_config()->cuda_resident_life_us;
    if (cc->rk_running &&
        (dt != cc->rk_dt || op != cc->rk_op ||
         (life_us > 0 && (double) (cgpu_now_ns() - cc->rk_launch_ns) > life_us * 1e3))) {
        rk_stop(cc);
    }
    if (cc->rk_running && 0 != rk_load(cc, RK_EXITED)) {
        cc->rk_running = false; /* ended idle: launched again below */
    }
    int mode;
    const uint64_t oseq = cgpu_cuda_oneshot_number(cc, rc, &mode);
    const bool ll = 0 != (mode & CGPU_CUDA_ONESHOT_LL);
    const uint64_t nblocks = cgpu_cuda_oneshot_blocks(cgpu_cuda_oneshot_unit(rc));
    const bool gated = cgpu_cuda_rk_gated(cc);
    const uint64_t t1 = cgpu_now_ns();
    cc->rk_calls++;
    const uint64_t k = rk_write(cc, (uintptr_t) in, (uintptr_t) out,
                                cgpu_cuda_resident_word(rc->count, mode, (int) nblocks,
                                                        rc->root) |
                                    (gated ? CGPU_CUDA_RESIDENT_GATED : 0),
                                oseq);
    cgpu_log(CGPU_LOG_TRACE, "cuda: resident %s rank %d count %zu %s/%s blocks %llu seq %llu%s",
             cgpu_cuda_oneshot_name(rc->mode), comm->rank, rc->count,
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
    uint64_t look_ns = 0; /* the clock of the liveness looks (cgpu_liveness.c) */
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
            /* a device error (reported by the query, or here), or the kernel's own timeout
             * on a peer whose process died, which names it */
            cc->rk_running = false;
            if (!cgpu_liveness_look(comm)) {
                return CGPU_ERR_PEER_DEAD;
            }
            cgpu_log(CGPU_LOG_WARN, "cuda: rank %d: the resident kernel ended at descriptor "
                     "%llu without completing %llu", comm->rank,
                     (unsigned long long) rk_load(cc, RK_EXITED), (unsigned long long) k);
            return CGPU_ERR_DEVICE;
        }
        /* a peer whose process died never completes its part: every few ms of waiting the
         * peers' processes are looked at, as the host backend's waits do. The call fails at
         * once; the kernel gives up on the peer after coll_gpu_cuda_timeout and ends, which
         * the communicator's teardown (rk_stop) waits for, and the communicator refuses
         * every later call (cgpu_comm_enter), so nothing is written to it meanwhile */
        if (0 == (it & 0xff) && cgpu_liveness_due(&look_ns) && !cgpu_liveness_look(comm)) {
            return CGPU_ERR_PEER_DEAD;
        }
        /* a wait past 50 us (a call takes 5-10): a peer may wait in MPI for a message of ours */
        if (0 == (it & 0xff) && cgpu_now_ns() - t1 > 50000) {
            /* progress may begin a call on this thread (cgpu_cuda_launched_begin) */
            rk_unclaim(cc);
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

cgpu_status_t cgpu_cuda_launch_resident(cgpu_comm_t *comm, const void *in, void *out,
                                        const void *args)
{
    const cgpu_status_t st = resident_call(comm, in, out, args);
    rk_unclaim(comm->cuda); /* on every way out */
    return st;
}

#endif /* CGPU_HAVE_CUDA */
