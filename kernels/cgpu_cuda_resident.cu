/*
 * coll/gpu kernels: the launcher of the resident oneshot kernel (cgpu_cuda_resident.cuh),
 * whose instances are built in one object per type group (cgpu_cuda_resident_<group>.cu),
 * and whether this device runs it as thread block clusters (the device can, and the code it
 * runs was compiled for it).
 */
#include "cgpu_cuda_launch.cuh"

namespace {

const cgpu_cuda_types_fn<cgpu_cuda_resident_args_t> resident_types[CGPU_TYPES_COUNT] = {
    cgpu_cuda_resident_types<CGPU_TYPES_I8>,    cgpu_cuda_resident_types<CGPU_TYPES_I16>,
    cgpu_cuda_resident_types<CGPU_TYPES_I32>,   cgpu_cuda_resident_types<CGPU_TYPES_I64>,
    cgpu_cuda_resident_types<CGPU_TYPES_FLOAT>, cgpu_cuda_resident_types<CGPU_TYPES_PAIR>};

int (*const resident_preloads[CGPU_TYPES_COUNT])(void) = {
    cgpu_cuda_resident_types_preload<CGPU_TYPES_I8>,
    cgpu_cuda_resident_types_preload<CGPU_TYPES_I16>,
    cgpu_cuda_resident_types_preload<CGPU_TYPES_I32>,
    cgpu_cuda_resident_types_preload<CGPU_TYPES_I64>,
    cgpu_cuda_resident_types_preload<CGPU_TYPES_FLOAT>,
    cgpu_cuda_resident_types_preload<CGPU_TYPES_PAIR>};

/* Built with the same architecture flags as every kernel, so the device runs the code of
 * the same architecture for it as for the resident kernel: its PTX version says whether that
 * code has the cluster path (CGPU_RK_CLUSTER: compiled for 9.0 or later). A build of
 * compute_80 PTX alone, compiled by the driver for a 9.0 device, has not. */
__global__ void arch_probe_kernel()
{
}

} /* namespace */

int cgpu_cuda_resident_preload(void)
{
    const int rc = preload_split(resident_preloads);
    load_kernel(arch_probe_kernel);
    const int rc2 = (int) cudaGetLastError();
    return 0 != rc ? rc : rc2;
}

extern "C" int cgpu_cuda_resident_launch(const cgpu_cuda_resident_args_t *a, cgpu_dtype_t dt,
                                         cgpu_op_t op, int blocks, int threads, void *stream)
{
    if (!cgpu_cuda_reduce_supported(dt, op) ||
        blocks > (a->cluster ? CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS * CGPU_CUDA_RESIDENT_CLUSTERS
                             : CGPU_CUDA_MAX_ONESHOT_BLOCKS) ||
        (a->cluster && blocks > CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS &&
         0 != blocks % CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS)) {
        return (int) cudaErrorInvalidValue;
    }
    int rc = dispatch_split(resident_types, a, dt, op, blocks, threads, (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_resident_cluster(void)
{
    int dev = 0, major = 0, cluster = 0;
    cudaFuncAttributes at;
    if (cudaSuccess != cudaGetDevice(&dev) ||
        cudaSuccess != cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ||
        cudaSuccess != cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, dev) ||
        major < 9 || 0 == cluster) {
        return 0;
    }
    if (cudaSuccess != cudaFuncGetAttributes(&at, arch_probe_kernel)) {
        (void) cudaGetLastError(); /* not the error of a later launch */
        return 0;
    }
    return at.ptxVersion >= 90;
}
