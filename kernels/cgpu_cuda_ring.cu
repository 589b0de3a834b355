/*
 * coll/gpu kernels: the ring allreduce (reduce-scatter then allgather around the ring, one
 * channel a part) and the launcher of every reducing ring mode; the modes other than the
 * allreduce run on cgpu_cuda_ringx.cu's kernel.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_ring.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* channel c of a ring allreduce; false after a timeout */
template <typename T, int OP> __device__ bool ring_channel(const cgpu_cuda_ring_args_t &a, int c)
{
    RingState s;
    ring_state_init(s, &a, c);
    const int n = a.nranks, r = a.rank;
    const T *in = (const T *) a.in;
    T *out = (T *) a.out;
    const size_t loop_elems = (size_t) a.nch * n * a.chunk;

    for (int L = 0; L < a.nloops; ++L) {
        const size_t ch_base = (size_t) L * loop_elems + (size_t) s.c * n * a.chunk;
        auto range = [&](int j, size_t *first) -> size_t {
            size_t st = ch_base + (size_t) j * a.chunk;
            size_t en = st + a.chunk;
            st = st < a.count ? st : a.count;
            en = en < a.count ? en : a.count;
            *first = st;
            return en - st;
        };
        size_t f, cnt;
        /* reduce-scatter */
        cnt = range(wrap(r - 1, n), &f);
        T *dst = send_slot<T>(s);
        if (nullptr == dst) {
            return false;
        }
        reduce_copy<T, OP>(dst, nullptr, nullptr, in + f, cnt);
        step_done(s, true, false);
        for (int k = 1; k < n - 1; ++k) {
            cnt = range(wrap(r - 1 - k, n), &f);
            const T *src = recv_slot<T>(s);
            dst = nullptr == src ? nullptr : send_slot<T>(s);
            if (nullptr == dst) {
                return false;
            }
            reduce_copy<T, OP>(dst, nullptr, src, in + f, cnt);
            step_done(s, true, true);
        }
        cnt = range(r, &f);
        {
            const T *src = recv_slot<T>(s);
            dst = nullptr == src ? nullptr : send_slot<T>(s);
            if (nullptr == dst) {
                return false;
            }
            reduce_copy<T, OP>(out + f, dst, src, in + f, cnt);
            step_done(s, true, true);
        }
        /* allgather */
        for (int k = 1; k < n; ++k) {
            cnt = range(wrap(r - k, n), &f);
            const T *src = recv_slot<T>(s);
            if (nullptr == src) {
                return false;
            }
            if (k < n - 1) {
                dst = send_slot<T>(s);
                if (nullptr == dst) {
                    return false;
                }
                reduce_copy<T, OP>(out + f, dst, src, nullptr, cnt);
                step_done(s, true, true);
            } else {
                reduce_copy<T, OP>(out + f, nullptr, src, nullptr, cnt);
                step_done(s, false, true);
            }
        }
    }
    return true;
}

template <typename T, int OP> __global__ void ring_kernel(const cgpu_cuda_ring_args_t a)
{
    CGPU_EACH_PART((int) blockIdx.x, a.nch, (int) gridDim.x, (ring_channel<T, OP>(a, part_)));
}

template <typename T, int OP> struct RingK {
    static void go(const cgpu_cuda_ring_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, ring_kernel<T, OP>, threads);
        ring_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
    static void load()
    {
        load_kernel(ring_kernel<T, OP>);
    }
};

} /* namespace */

int cgpu_cuda_ring_preload(void)
{
    return preload_family<RingK>();
}

extern "C" int cgpu_cuda_ring_reduce_launch(const cgpu_cuda_ring_args_t *a, cgpu_dtype_t dt,
                                            cgpu_op_t op, int threads, void *stream)
{
    if (!cgpu_cuda_reduce_supported(dt, op)) {
        return (int) cudaErrorInvalidValue;
    }
    const int blocks = grid_of(a->grid, a->nch, 1);
    int rc = CGPU_CUDA_RING_ALLREDUCE == a->mode
                 ? dispatch<RingK>(a, dt, op, blocks, threads, (cudaStream_t) stream)
                 : cgpu_cuda_ringx_dispatch(a, dt, op, blocks, threads, (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}
