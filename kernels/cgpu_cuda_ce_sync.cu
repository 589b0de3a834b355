/*
 * coll/gpu kernels: the copy-engine path's synchronization (each peer told that this
 * rank's copies into its buffer are done, then the peers' word on this rank's awaited)
 * and its launcher.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* One thread per rank. The copies this stream enqueued before have completed when the
 * kernel starts; the fence orders them before the flag for the peer that reads both. */
__global__ void ce_sync_kernel(const cgpu_cuda_ce_sync_args_t a)
{
    const int i = (int) threadIdx.x;
    /* after a timeout of ours (a reduction that gave up) the peers must not be told our
     * part is written: they time out too, and every rank reports the failure */
    if (nullptr != a.signal[i] && 0 == *(volatile unsigned long long *) a.err) {
        __threadfence_system();
        store_flag(a.signal[i], a.seq);
    }
    if (nullptr != a.wait[i]) {
        (void) spin_ge(a.wait[i], a.seq, a.timeout_ns, a.err, CGPU_CUDA_ERR_CE, i);
    }
}

} /* namespace */

int cgpu_cuda_ce_sync_preload(void)
{
    load_kernel(ce_sync_kernel);
    return (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_ce_sync(const cgpu_cuda_ce_sync_args_t *a, void *stream)
{
    ce_sync_kernel<<<1, CGPU_CUDA_MAX_RANKS, 0, (cudaStream_t) stream>>>(*a);
    return (int) cudaGetLastError();
}
