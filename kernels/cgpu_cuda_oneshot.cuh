/*
 * coll/gpu kernels: the launched oneshot kernel (small messages: every rank writes its part
 * straight into its peers' inboxes, cgpu_cuda_oneshot_body.cuh) and the launch of its
 * instances of one type group, which each group's object (cgpu_cuda_oneshot_<group>.cu)
 * instantiates: over every instance at once, ptxas takes minutes an architecture.
 */
#ifndef CGPU_CUDA_ONESHOT_CUH
#define CGPU_CUDA_ONESHOT_CUH

#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_oneshot_body.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* Whether no part of this launch has timed out (the record is the whole launch's: a later
 * part would only wait out the timeout again). Thread 0 alone reads the record, which is
 * mapped host memory: every thread of 32 blocks reading it costs 200-400 us a call under
 * MPS. */
__device__ __forceinline__ bool oneshot_on(const cgpu_cuda_oneshot_args_t &a)
{
    return 0 == __syncthreads_or(0 == threadIdx.x && 0 != *(volatile unsigned long long *) a.err);
}

/* a block's parts in increasing order (CGPU_CUDA_GRID_DOC); the record is read only
 * before a second part, so a launch of a block a part never reads it. The call's arguments,
 * one copy a block in shared memory, as the resident kernel keeps them: the body indexes
 * inbox[] at run time, which the kernel parameter itself takes through the parameter space
 * at every use, and which costs ptxas three times as long for sm_80 (minutes per object). */
template <typename T, int OP> __global__ void oneshot_kernel(const cgpu_cuda_oneshot_args_t a)
{
    __shared__ cgpu_cuda_oneshot_args_t s_a;
    if (0 == threadIdx.x) {
        s_a = a;
    }
    __syncthreads();
    for (int b = (int) blockIdx.x; b < s_a.nblocks; b += (int) gridDim.x) {
        if (b != (int) blockIdx.x && !oneshot_on(s_a)) {
            return;
        }
        (void) oneshot_body<T, OP>(s_a, b); /* no gate: always runs */
    }
}

template <typename T, int OP> struct OneshotK {
    static void go(const cgpu_cuda_oneshot_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, oneshot_kernel<T, OP>, threads);
        oneshot_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
    static void load()
    {
        load_kernel(oneshot_kernel<T, OP>);
    }
};

} /* namespace */

/* a launch of (dt, op) of type group G */
template <int G>
int cgpu_cuda_oneshot_types(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                            int blocks, int threads, cudaStream_t st)
{
    return dispatch_types<G, OneshotK>(a, dt, op, blocks, threads, st);
}

/* every instance of type group G loaded */
template <int G> int cgpu_cuda_oneshot_types_preload(void)
{
    return preload_family<OneshotK, G>();
}

#endif /* CGPU_CUDA_ONESHOT_CUH */
