/*
 * coll/gpu kernels: the copy-engine reduce's kernel (the root of 2 ranks reduces each
 * piece the peer's copy engines land in its output) and its launcher.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* ---- copy-engine reduce, root side: every block waits for each piece in turn, then
 * reduces its slice of it (whole 16-byte vectors); the landed data is read through L2 ---- */
template <typename T, int OP> __global__ void ce_reduce_kernel(const cgpu_cuda_ce_reduce_args_t a)
{
    constexpr size_t V = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
    T *out = (T *) a.out, *out2 = (T *) a.out2;
    const T *in = (const T *) a.in;
    for (int p = 0; p < a.npieces; ++p) {
        if (!block_wait_ge(a.flag, a.base + (uint64_t) p + 1, a.timeout_ns, a.err, CGPU_CUDA_ERR_CE,
                           a.peer)) {
            return;
        }
        const size_t first = cgpu_cuda_ce_start(a.count, a.lo, a.hi, a.npieces, p);
        const size_t cnt = cgpu_cuda_ce_start(a.count, a.lo, a.hi, a.npieces, p + 1) - first;
        const size_t per = ((cnt + gridDim.x - 1) / gridDim.x + V - 1) / V * V;
        size_t s = (size_t) blockIdx.x * per, e = s + per;
        s = s < cnt ? s : cnt;
        e = e < cnt ? e : cnt;
        reduce_copy<T, OP>(out + first + s, nullptr != out2 ? out2 + first + s : nullptr,
                           out + first + s, in + first + s, e - s);
    }
}

template <typename T, int OP> struct CeReduceK {
    static void go(const cgpu_cuda_ce_reduce_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, ce_reduce_kernel<T, OP>, threads);
        ce_reduce_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
    static void load()
    {
        load_kernel(ce_reduce_kernel<T, OP>);
    }
};

} /* namespace */

int cgpu_cuda_ce_reduce_preload(void)
{
    return preload_family<CeReduceK>();
}

extern "C" int cgpu_cuda_ce_reduce(const cgpu_cuda_ce_reduce_args_t *a, cgpu_dtype_t dt,
                                   cgpu_op_t op, int blocks, int threads, void *stream)
{
    if (!cgpu_cuda_reduce_supported(dt, op)) {
        return (int) cudaErrorInvalidValue;
    }
    int rc = dispatch<CeReduceK>(a, dt, op, blocks, threads, (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}
