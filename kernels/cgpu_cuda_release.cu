/*
 * coll/gpu kernels: the release signal (one system-scope add on each peer's release word,
 * see cgpu_cuda_pool.h) and its launcher.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

__global__ void release_kernel(const cgpu_cuda_release_args_t a)
{
    if ((int) threadIdx.x < a.n && nullptr != a.word[threadIdx.x]) {
        __threadfence_system(); /* after every store this stream made to that inbox */
        atomicAdd_system(a.word[threadIdx.x], 1ull);
    }
}

} /* namespace */

int cgpu_cuda_release_preload(void)
{
    load_kernel(release_kernel);
    return (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_release_signal(const cgpu_cuda_release_args_t *a, void *stream)
{
    release_kernel<<<1, CGPU_CUDA_MAX_RANKS, 0, (cudaStream_t) stream>>>(*a);
    return (int) cudaGetLastError();
}
