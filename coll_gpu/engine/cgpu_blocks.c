/*
 * coll/gpu engine: the arithmetic of thread blocks (cgpu_blocks.h).
 */
#include <stdatomic.h>

#include "cgpu_blocks.h"
#include "cgpu_cuda_kernels.h" /* the LL size classes (plain C) */

/* the blocks of a cap that regular grids and reservations take: all but the spare ones */
static int blocks_regular(int cap, int spare)
{
    return cap - (spare > 0 ? spare : 0);
}

int cgpu_blocks_take(int *used, int cap, int spare, int want, int pair)
{
    pair = pair > 1 ? pair : 1;
    want = want > pair ? want : pair;
    const int regular = blocks_regular(cap, spare);
    int cur = __atomic_load_n(used, __ATOMIC_RELAXED);
    for (;;) {
        int got = want;
        if (cap > 0) {
            const int left = regular - cur;
            got = left < want ? left : want;
            got = got / pair * pair;
            got = got >= pair ? got : pair;
        }
        if (__atomic_compare_exchange_n(used, &cur, cur + got, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            return got;
        }
    }
}

bool cgpu_blocks_reserve(int *used, int cap, int spare, int n)
{
    const int regular = blocks_regular(cap, spare);
    int cur = __atomic_load_n(used, __ATOMIC_RELAXED);
    do {
        if (cap > 0 && cur + n > regular) {
            return false;
        }
    } while (!__atomic_compare_exchange_n(used, &cur, cur + n, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

int cgpu_blocks_spare(int cap, int setting, int comms)
{
    if (cap <= 1) {
        return 0;
    }
    const int most = setting >= 0 ? cap - 1 : cap / 2;
    const int s = setting >= 0 ? setting : comms - 1;
    return s < 0 ? 0 : s < most ? s : most;
}

bool cgpu_resident_as_cluster(int setting, bool shared, int launched, int resident_blocks,
                              int sms)
{
    return 2 == setting ||
           (1 == setting && !shared && 0 == launched && resident_blocks * 4 <= sms);
}

int cgpu_ll_classes(size_t ll_bytes, int nranks)
{
    const size_t per = (512u << 10) / (size_t) (nranks > 0 ? nranks : 1);
    const size_t top = ll_bytes < per ? ll_bytes : per;
    int c = 0;
    while (0 != ll_bytes && c < CGPU_CUDA_LL_CLASSES &&
           (0 == c || CGPU_CUDA_LL_CLASS_DATA(c) <= top)) {
        c++;
    }
    return c;
}

int cgpu_ll_class(size_t unit, size_t elem_size, size_t ll_bytes, int classes)
{
    if (0 == unit || unit > ll_bytes || (elem_size > 8 && 16 != elem_size)) {
        return -1;
    }
    int c = 0;
    while (c < CGPU_CUDA_LL_CLASSES && CGPU_CUDA_LL_CLASS_DATA(c) < unit) {
        ++c;
    }
    return c < classes ? c : -1;
}

size_t cgpu_oneshot_blocks(size_t unit, size_t block_bytes, size_t small_block_bytes)
{
    size_t b = cgpu_div_up(unit, block_bytes);
    if (0 != small_block_bytes) {
        const size_t s =
            cgpu_clamp1(cgpu_div_up(unit, small_block_bytes), CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS);
        b = s > b ? s : b;
    }
    return cgpu_clamp1(b, CGPU_CUDA_MAX_ONESHOT_BLOCKS);
}

int cgpu_resident_blocks(size_t blocks, bool cluster)
{
    const size_t cb = CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS;
    if (!cluster) {
        return (int) cgpu_clamp1(blocks, CGPU_CUDA_MAX_ONESHOT_BLOCKS);
    }
    if (blocks <= cb) {
        return (int) cgpu_clamp1(blocks, cb);
    }
    const size_t whole = cgpu_round_up(blocks, cb), most = cb * CGPU_CUDA_RESIDENT_CLUSTERS;
    return (int) (whole < most ? whole : most);
}

int cgpu_resident_clusters(int blocks)
{
    return blocks > CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS ? blocks / CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS
                                                      : 1;
}

void cgpu_blocks_give(int *used, int n)
{
    if (n > 0) {
        (void) __atomic_fetch_sub(used, n, __ATOMIC_RELAXED);
    }
}
