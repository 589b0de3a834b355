/*
 * Forced into the OSU micro-benchmarks' C files by `bench/gpu_run.sh osu` (-include): CUDA 13
 * dropped the cudaMemPrefetchAsync(ptr, bytes, device, stream) form OSU 7.4 calls (managed
 * memory only, which our runs do not use); this maps it onto the form with a location.
 * Nothing here changes with older toolkits.
 */
#ifndef CGPU_OSU_CUDA13_COMPAT_H
#define CGPU_OSU_CUDA13_COMPAT_H

#include <cuda_runtime.h>

#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
static inline cudaError_t cgpu_osu_prefetch(const void *p, size_t bytes, int device,
                                            cudaStream_t stream)
{
    struct cudaMemLocation loc;
    loc.type = cudaCpuDeviceId == device ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = cudaCpuDeviceId == device ? 0 : device;
    return cudaMemPrefetchAsync(p, bytes, loc, 0, stream);
}
#define cudaMemPrefetchAsync cgpu_osu_prefetch
#endif

#endif
