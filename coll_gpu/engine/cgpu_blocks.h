/*
 * coll/gpu engine: the arithmetic of thread blocks: the process's block budget, the LL size
 * classes and the oneshot and resident kernels' grids. Plain functions of their arguments,
 * so the unit tests check them without a GPU.
 */
#ifndef CGPU_BLOCKS_H
#define CGPU_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* launch geometry: a / b rounded up (b > 0); x rounded up to a multiple of m; v within
 * [1, hi] */
static inline size_t cgpu_div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

static inline size_t cgpu_round_up(size_t x, size_t m)
{
    return cgpu_div_up(x, m) * m;
}

static inline size_t cgpu_clamp1(size_t v, size_t hi)
{
    return v < 1 ? 1 : v > hi ? hi : v;
}

/**
 * A launch's thread blocks out of a budget of @p cap blocks (@p used: those taken and not
 * given back, shared by the threads of the process), of which @p spare are kept for
 * launches that find the others taken: @p want (one per part of the call) or as many of
 * the cap - spare as are left, a multiple of @p pair; where fewer than @p pair of those
 * are left, one @p pair (out of the spare blocks while they last, then over the cap: a
 * call is never held back, since a rank waiting for blocks that its peers' calls hold
 * could wait for ever; cgpu_cuda_kernels.h, CGPU_CUDA_GRID_DOC). The spare blocks are what
 * lets calls in flight on many communicators at once each have a block on the GPU: every
 * block a rank's kernels take must be one the GPU holds beside the others, or a block left
 * undispatched behind spinning ones can wait for a peer's call that waits for it.
 * cap <= 0: no budget, @p want. Give the result back with cgpu_blocks_give once the
 * launch's kernel has ended.
 */
int cgpu_blocks_take(int *used, int cap, int spare, int want, int pair);
/** @p n blocks of the budget's cap - @p spare if they are left (or there is no budget:
 *  cap <= 0): true; else none taken, false. */
bool cgpu_blocks_reserve(int *used, int cap, int spare, int n);
void cgpu_blocks_give(int *used, int n);
/** The spare blocks of a cap of @p cap for @p comms communicators of this process on the
 *  device: @p setting (coll_gpu_cuda_block_spare) where >= 0, at most cap - 1; -1: comms - 1
 *  (a block under the cap for every other communicator's call in flight), at most half the
 *  cap (a 64-channel ring still whole on an H200). cap <= 1: none. */
int cgpu_blocks_spare(int cap, int setting, int comms);
/** Whether a resident kernel's launch is one thread block cluster, on a device that has
 *  them: @p setting (coll_gpu_cuda_resident_cluster) 0 never, 2 always; 1 only where no
 *  other rank shares the device (@p shared), @p launched (the process's calls with
 *  launched kernels in flight on the device) is 0, and the other resident kernels' blocks
 *  (@p resident_blocks) are at most a quarter of the device's @p sms. A cluster must be
 *  placed within one GPC, which blocks elsewhere can leave too full while the block
 *  budget, counted over the whole device, says there is room (cgpu_cuda_comm.c,
 *  rk_cluster_now). */
bool cgpu_resident_as_cluster(int setting, bool shared, int launched, int resident_blocks, int sms);

/** How many LL size classes (1 KiB << c of data, kernels/cgpu_cuda_kernels.h) a
 *  communicator of @p nranks keeps for @p ll_bytes (coll_gpu_cuda_ll_bytes): those up to
 *  ll_bytes and 512 KiB / nranks, at least one unless ll_bytes is 0, at most
 *  CGPU_CUDA_LL_CLASSES. The same on every rank (sizes and settings). */
int cgpu_ll_classes(size_t ll_bytes, int nranks);

/** The LL size class of a oneshot call whose rank's unit is @p unit bytes of elements of
 *  @p elem_size bytes (1 for the copying collectives), or -1 where it sends no LL lines: an
 *  empty unit, one past @p ll_bytes, elements of more than 8 bytes other than 16, or a
 *  class past the communicator's @p classes (cgpu_ll_classes). The same on every rank. */
int cgpu_ll_class(size_t unit, size_t elem_size, size_t ll_bytes, int classes);

/** The thread blocks of a oneshot call whose rank's unit is @p unit bytes: one per
 *  @p block_bytes (coll_gpu_cuda_oneshot_block_bytes, > 0), or one per @p small_block_bytes
 *  (coll_gpu_cuda_oneshot_small_block_bytes; 0: never) while that makes at most
 *  CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS, never fewer than the first rule gives; at least 1,
 *  at most CGPU_CUDA_MAX_ONESHOT_BLOCKS (the flag slots). The same on every rank, and
 *  non-decreasing in the unit: the resident kernel's largest call bounds every call it
 *  takes. */
size_t cgpu_oneshot_blocks(size_t unit, size_t block_bytes, size_t small_block_bytes);

/** The resident kernel's blocks, for a largest call of @p blocks (cgpu_oneshot_blocks):
 *  as clusters (@p cluster), that many up to CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS (one
 *  cluster), else whole clusters of that size, at most CGPU_CUDA_RESIDENT_CLUSTERS (calls
 *  of more blocks are launched); without, at most CGPU_CUDA_MAX_ONESHOT_BLOCKS. At least 1. */
int cgpu_resident_blocks(size_t blocks, bool cluster);
/** The clusters of a resident kernel of @p blocks launched as clusters (cgpu_resident_blocks). */
int cgpu_resident_clusters(int blocks);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_BLOCKS_H */
