/*
 * coll/gpu kernels: the preload of every family's kernels before the first launch.
 */
#include "cgpu_cuda_launch.cuh"

extern "C" int cgpu_cuda_kernels_preload(void)
{
    const int rc[] = {
        cgpu_cuda_ring_preload(),      cgpu_cuda_ringx_preload(),   cgpu_cuda_a2a_preload(),
        cgpu_cuda_tree_preload(),      cgpu_cuda_oneshot_preload(), cgpu_cuda_resident_preload(),
        cgpu_cuda_ce_reduce_preload(), cgpu_cuda_ce_sync_preload(), cgpu_cuda_release_preload()};
    for (size_t i = 0; i < sizeof(rc) / sizeof(rc[0]); ++i) {
        if (0 != rc[i]) {
            return rc[i];
        }
    }
    return 0;
}
