/*
 * coll/gpu kernels: the other collectives on the ring's links (reduce_scatter and
 * allgather around the ring, bcast and reduce along a chain, scan and exscan from rank 0),
 * one channel a part, and the launcher of the ring modes that only copy.
 */
#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_ring.cuh"
#include "cgpu_cuda_launch.cuh"

namespace {

/* A step's slots: the item from the left (if recv) and room at the right (if send); false
 * after a timeout. */
template <typename T>
__device__ __forceinline__ bool step_slots(RingState &s, bool recv, bool send, const T *&src,
                                           T *&dst)
{
    return (!recv || nullptr != (src = recv_slot<T>(s))) &&
           (!send || nullptr != (dst = send_slot<T>(s)));
}

/* One ring step: take the item from the left (if recv), combine it with `mine` (if
 * given), write the result to `local` (if given) and to the right (if send). Returns
 * false after a timeout. */
template <typename T, int OP>
__device__ __forceinline__ bool ring_step(RingState &s, bool recv, bool send, const T *mine,
                                          T *local, size_t cnt)
{
    const T *src = nullptr;
    T *dst = nullptr;
    if (!step_slots<T>(s, recv, send, src, dst)) {
        return false;
    }
    reduce_copy<T, OP>(dst, nullptr, src, mine, cnt, local);
    step_done(s, send, recv);
    return true;
}

/* An exscan's step: take the prefix from the left (if recv) into `local` (if given), and send
 * it combined with `mine` to the right (if send; the first rank sends `mine`). The send
 * reads `mine` before the block writes `local`, which may be the same memory (in place). */
template <typename T, int OP>
__device__ __forceinline__ bool exscan_step(RingState &s, bool recv, bool send, const T *mine,
                                            T *local, size_t cnt)
{
    const T *src = nullptr;
    T *dst = nullptr;
    if (!step_slots<T>(s, recv, send, src, dst)) {
        return false;
    }
    if (send) {
        reduce_copy<T, OP>(dst, nullptr, src, mine, cnt);
    }
    __syncthreads();
    if (recv && nullptr != local) {
        reduce_copy<T, OP>(local, nullptr, src, nullptr, cnt);
    }
    step_done(s, send, recv);
    return true;
}

/* ---- the other collectives on the ring's links: reduce_scatter and allgather around
 * the ring, bcast and reduce along the chain that ends just before / at the root. Each
 * loop moves, per channel, one chunk of every block (or of the buffer). ---- */
template <typename T, int OP> __device__ bool ringx_channel(const cgpu_cuda_ring_args_t &a, int c)
{
    RingState s;
    ring_state_init(s, &a, c);
    const int n = a.nranks, r = a.rank;
    const T *in = (const T *) a.in;
    T *out = (T *) a.out;
    const size_t cb = a.count; /* elements per block */

    for (int L = 0; L < a.nloops; ++L) {
        size_t o = ((size_t) L * a.nch + s.c) * a.chunk;
        o = o < cb ? o : cb;
        const size_t cnt = cb - o < a.chunk ? cb - o : a.chunk;
        bool ok = true;
        switch (a.mode) {
        case CGPU_CUDA_RING_REDUCE_SCATTER:
            ok = ring_step<T, OP>(s, false, true, in + (size_t) wrap(r - 1, n) * cb + o, nullptr,
                                  cnt);
            for (int k = 1; ok && k < n - 1; ++k) {
                ok = ring_step<T, OP>(s, true, true, in + (size_t) wrap(r - 1 - k, n) * cb + o,
                                      nullptr, cnt);
            }
            ok = ok && ring_step<T, OP>(s, true, false, in + (size_t) r * cb + o, out + o, cnt);
            break;
        case CGPU_CUDA_RING_ALLGATHER:
            ok = ring_step<T, OP>(s, false, true, in + o, out + (size_t) r * cb + o, cnt);
            for (int k = 1; ok && k < n; ++k) {
                ok = ring_step<T, OP>(s, true, k < n - 1, nullptr,
                                      out + (size_t) wrap(r - k, n) * cb + o, cnt);
            }
            break;
        case CGPU_CUDA_RING_BCAST: {
            const int pos = wrap(r - a.root, n);
            ok = 0 == pos ? ring_step<T, OP>(s, false, true, in + o, nullptr, cnt)
                          : ring_step<T, OP>(s, true, pos < n - 1, nullptr, out + o, cnt);
            break;
        }
        case CGPU_CUDA_RING_REDUCE: {
            const int pos = wrap(r - a.root - 1, n);
            ok = ring_step<T, OP>(s, pos > 0, pos < n - 1, in + o, pos == n - 1 ? out + o : nullptr,
                                  cnt);
            break;
        }
        case CGPU_CUDA_ONESHOT_SCAN: /* the reduce's chain from rank 0 to rank n-1, every rank
                                      * keeping its prefix */
            ok = ring_step<T, OP>(s, r > 0, r < n - 1, in + o, out + o, cnt);
            break;
        case CGPU_CUDA_ONESHOT_EXSCAN:
            ok = exscan_step<T, OP>(s, r > 0, r<n - 1, in + o, r> 0 ? out + o : nullptr, cnt);
            break;
        default:
            ok = false;
        }
        if (!ok) {
            return false;
        }
    }
    return true;
}

template <typename T, int OP> __global__ void ringx_kernel(const cgpu_cuda_ring_args_t a)
{
    CGPU_EACH_PART((int) blockIdx.x, a.nch, (int) gridDim.x, (ringx_channel<T, OP>(a, part_)));
}

template <typename T, int OP> struct RingXK {
    static void go(const cgpu_cuda_ring_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, ringx_kernel<T, OP>, threads);
        ringx_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
    static void load()
    {
        load_kernel(ringx_kernel<T, OP>);
    }
};

} /* namespace */

int cgpu_cuda_ringx_dispatch(const cgpu_cuda_ring_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int blocks, int threads, cudaStream_t st)
{
    return dispatch<RingXK>(a, dt, op, blocks, threads, st);
}

int cgpu_cuda_ringx_preload(void)
{
    const int rc = preload_family<RingXK>();
    load_kernel(ringx_kernel<uint8_t, CGPU_OP_SUM>); /* the copies' instance */
    const int rc2 = (int) cudaGetLastError();
    return 0 != rc ? rc : rc2;
}

extern "C" int cgpu_cuda_ring_copy_launch(const cgpu_cuda_ring_args_t *a, int threads, void *stream)
{
    RingXK<uint8_t, CGPU_OP_SUM>::go(a, grid_of(a->grid, a->nch, 1), threads,
                                     (cudaStream_t) stream);
    return (int) cudaGetLastError();
}
