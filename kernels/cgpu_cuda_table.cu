/*
 * coll/gpu kernels: the one symbol libcgpu_cuda_kernels.so exports, the table of its
 * launchers (cgpu_cuda_kernels.h says why the kernels are a shared object of their own).
 * Everything else in the object is hidden, so its launchers never bind to the plugin's
 * forwarding functions of the same names.
 */
#include "cgpu_cuda_kernels.h"

extern "C" __attribute__((visibility("default"))) const cgpu_cuda_kernel_ops_t
    mca_coll_gpu_cuda_kernels = {
        CGPU_CUDA_KERNELS_ABI,
        CGPU_CUDA_KERNELS_SIZES,
        cgpu_cuda_resident_launch,
        cgpu_cuda_resident_cluster,
        cgpu_cuda_kernels_preload,
        cgpu_cuda_ring_reduce_launch,
        cgpu_cuda_ring_copy_launch,
        cgpu_cuda_a2a_launch,
        cgpu_cuda_release_signal,
        cgpu_cuda_ce_sync,
        cgpu_cuda_ce_reduce,
        cgpu_cuda_tree_allreduce,
        cgpu_cuda_oneshot_launch,
};
