/*
 * coll/gpu engine, cuda backend: the block budget (coll_gpu_cuda_block_budget).
 *
 * A count per device of the thread blocks this process's launched kernels hold, shared by
 * every thread that launches (cuda_internal.h, cgpu_cuda_block_budget_t, says why our
 * spinning kernels need one). Every launch path takes its grid here and the call gives it
 * back when its kernels have ended; the resident kernel's placement as a cluster reads the
 * calls in flight from the same count. Kept apart because every launch path and the
 * resident kernel share it, and it is process-wide state, not a communicator's.
 */
#include "cgpu_config.h"

#ifdef CGPU_HAVE_CUDA

#include "cuda_internal.h"

enum { BUDGET_DEVICES = 64 };
static cgpu_cuda_block_budget_t budgets[BUDGET_DEVICES];

/* one budget per device, devices past BUDGET_DEVICES not counted */
cgpu_cuda_block_budget_t *cgpu_cuda_budget_of(const cgpu_cuda_comm_t *cc)
{
    return cc->device >= 0 && cc->device < BUDGET_DEVICES ? &budgets[cc->device] : NULL;
}

/* the blocks this rank's kernels may hold on the device at once, `share` ranks on it */
int cgpu_cuda_block_cap(const cgpu_cuda_comm_t *cc, int share)
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
 * Without them the calls past the others take blocks over the cap: with one rank per GPU
 * (the whole GPU its budget) those blocks wait undispatched behind spinning ones, and
 * sixteen communicators' calls crossed hang (`test_cuda_nb crossed`, 2x H200); where ranks
 * share a GPU time-sliced, each rank's share of it leaves room for them. A fixed part
 * instead, a quarter (an eighth), costs the copy-engine allreduce, which wants 128 blocks,
 * 5% (2%) at 512 MiB with one communicator. */
int cgpu_cuda_spare_now(const cgpu_cuda_comm_t *cc, const cgpu_cuda_block_budget_t *b)
{
    return cgpu_blocks_spare(cc->block_cap, cgpu_engine_config()->cuda_block_spare,
                             __atomic_load_n(&b->comms, __ATOMIC_RELAXED));
}

/* a launch's grid (0: every part a block, where there is no budget) */
int cgpu_cuda_blocks_take(cgpu_cuda_comm_t *cc, int want, int pair)
{
    cgpu_cuda_block_budget_t *b = cgpu_cuda_budget_of(cc);
    if (NULL == b || 0 == cc->block_cap) {
        return 0;
    }
    const int spare = cgpu_cuda_spare_now(cc, b);
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
void cgpu_cuda_blocks_give(cgpu_cuda_comm_t *cc)
{
    if (cc->blocks_held > 0) {
        cgpu_blocks_give(&cgpu_cuda_budget_of(cc)->used, cc->blocks_held);
        cc->blocks_held = 0;
    }
}

/* A call with launched kernels (not the resident kernel's) begins. It first waits while a
 * resident kernel launched as a cluster is not yet running (rk_claim, resident.c): its blocks could
 * take the room the cluster needs in a GPC. Counted first, looked second, as rk_claim
 * does the other way round (both sequentially consistent): either the cluster sees this
 * call and is no cluster, or this call sees the cluster and waits until it runs (a few
 * microseconds; RK_PLACE_WAIT_NS at most). */
void cgpu_cuda_launched_begin(cgpu_cuda_comm_t *cc)
{
    cgpu_cuda_block_budget_t *b = cgpu_cuda_budget_of(cc);
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
void cgpu_cuda_launched_end(cgpu_cuda_comm_t *cc)
{
    cgpu_cuda_block_budget_t *b = cgpu_cuda_budget_of(cc);
    if (NULL != b) {
        __atomic_fetch_sub(&b->launched, 1, __ATOMIC_SEQ_CST);
    }
}

#endif /* CGPU_HAVE_CUDA */
