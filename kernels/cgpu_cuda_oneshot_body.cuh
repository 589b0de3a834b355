/*
 * coll/gpu kernels: one block's part of a oneshot call (oneshot_body), shared by the
 * launched oneshot kernel (cgpu_cuda_oneshot.cuh) and the resident one
 * (cgpu_cuda_resident.cuh), which run the same protocol on the same inbox slots and flags,
 * so a peer may run either.
 */
#ifndef CGPU_CUDA_ONESHOT_BODY_CUH
#define CGPU_CUDA_ONESHOT_BODY_CUH

#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_ll.cuh"

namespace {

/* ---- oneshot calls (see cgpu_cuda_kernels.h for the modes): every rank writes its part
 * into every peer's inbox, flags it, waits for every peer's flags, then builds its result
 * from its inbox. Reductions combine the contributions in rank order, so every rank
 * computes identical bits. ---- */

/* rank p's slice of call a.seq in rank r's inbox */
__device__ __forceinline__ char *oneshot_slice(const cgpu_cuda_oneshot_args_t &a, int r, int p)
{
    return a.inbox[r] + a.oneshot_off + ((size_t) (a.seq & 1) * a.nranks + p) * a.slice_bytes;
}

/* block b's share [first, last) of count elements of E: blocks split on a 16-byte grid, so
 * the copies and reductions run on whole vectors (every rank runs this same split) */
template <typename E>
__device__ __forceinline__ void oneshot_share(const cgpu_cuda_oneshot_args_t &a, int b,
                                              size_t &first, size_t &last)
{
    constexpr size_t V = sizeof(uint4) / sizeof(E) > 0 ? sizeof(uint4) / sizeof(E) : 1;
    const size_t per = ((a.count + a.nblocks - 1) / a.nblocks + V - 1) / V * V;
    first = (size_t) b * per < a.count ? (size_t) b * per : a.count;
    last = first + per < a.count ? first + per : a.count;
}

/* this rank's part of block b's share to every peer that takes one (E, OP: a copy) */
template <typename E, int OP>
__device__ __forceinline__ void oneshot_send(const cgpu_cuda_oneshot_args_t &a, size_t first,
                                             size_t cnt)
{
    const int n = a.nranks, me = a.rank, mode = a.mode;
    if (CGPU_CUDA_RING_BCAST == mode && me != a.root) {
        return;
    }
    /* the modes whose input holds one block per rank */
    const bool blocks = CGPU_CUDA_RING_REDUCE_SCATTER == mode || CGPU_CUDA_ONESHOT_ALLTOALL == mode;
    for (int p = 0; p < n; ++p) {
        /* a reduce's data goes to the root; a scan's to the ranks that fold this one in */
        if (p == me || (CGPU_CUDA_RING_REDUCE == mode && p != a.root) ||
            CGPU_CUDA_ONESHOT_FOLDS(mode, p, n) <= me) {
            continue;
        }
        const E *src = (const E *) a.in + (blocks ? (size_t) p * a.count : 0) + first;
        reduce_copy<E, OP>((E *) oneshot_slice(a, p, me) + first, nullptr, nullptr, src, cnt);
    }
}

/* flags: block b of this call is in every peer's inbox; then wait for every peer's block
 * b. False on a timeout (recorded in a.err). ts: block 0's stamps (trace), or NULL. */
__device__ __forceinline__ bool oneshot_sync(const cgpu_cuda_oneshot_args_t &a, int b, uint64_t *ts)
{
    const int n = a.nranks, me = a.rank;
    __syncthreads(); /* every thread's writes, before the flags that release them */
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[0] = global_ns();
    }
    if (threadIdx.x < (unsigned) n && (int) threadIdx.x != me) {
        uint64_t *pf = (uint64_t *) a.inbox[threadIdx.x];
        store_release_sys(pf + CGPU_CUDA_FLAG_ONESHOT(me, b), a.seq);
    }
    const uint64_t *mf = (const uint64_t *) a.inbox[me];
    __shared__ int failed;
    if (0 == threadIdx.x) {
        failed = 0;
    }
    __syncthreads();
    if (threadIdx.x < (unsigned) n && (int) threadIdx.x != me &&
        !spin_ge(mf + CGPU_CUDA_FLAG_ONESHOT(threadIdx.x, b), a.seq, a.timeout_ns, a.err,
                 CGPU_CUDA_ERR_ONESHOT, (int) threadIdx.x)) {
        failed = 1;
    }
    __syncthreads();
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[1] = global_ns();
    }
    return 0 == failed;
}

/* the copying modes' result: every block of out that comes from a peer (or, for the
 * alltoall and an allgather out of place, from this rank's own input) */
__device__ __forceinline__ void oneshot_place(const cgpu_cuda_oneshot_args_t &a, size_t first,
                                              size_t cnt)
{
    const int n = a.nranks, me = a.rank, mode = a.mode;
    uint8_t *out = (uint8_t *) a.out;
    if (CGPU_CUDA_RING_BCAST == mode) {
        if (me != a.root) {
            reduce_copy<uint8_t, CGPU_OP_SUM>(
                out + first, nullptr, (const uint8_t *) oneshot_slice(a, me, a.root) + first,
                nullptr, cnt);
        }
        return;
    }
    const uint8_t *in = (const uint8_t *) a.in;
    const uint8_t *own = CGPU_CUDA_ONESHOT_ALLTOALL == mode ? in + (size_t) me * a.count : in;
    for (int p = 0; p < n; ++p) {
        uint8_t *dst = out + (size_t) p * a.count + first;
        if (p != me) {
            reduce_copy<uint8_t, CGPU_OP_SUM>(
                dst, nullptr, (const uint8_t *) oneshot_slice(a, me, p) + first, nullptr, cnt);
        } else if (own + first != dst) { /* in place: already there */
            reduce_copy<uint8_t, CGPU_OP_SUM>(dst, nullptr, nullptr, own + first, cnt);
        }
    }
}

/* the reducing modes' result: out = c_0 op c_1 op ... op c_{n-1}, element by element (the
 * scans: up to c_{folds-1}) */
template <typename T, int OP>
__device__ __forceinline__ void oneshot_reduce(const cgpu_cuda_oneshot_args_t &a, size_t first,
                                               size_t last)
{
    const int me = a.rank, n = CGPU_CUDA_ONESHOT_FOLDS(a.mode, me, a.nranks);
    if ((CGPU_CUDA_RING_REDUCE == a.mode && me != a.root) || n < 1) {
        return;
    }
    const size_t cnt = last - first;
    const T *mine =
        (const T *) a.in + (CGPU_CUDA_RING_REDUCE_SCATTER == a.mode ? (size_t) me * a.count : 0);
    T *out = (T *) a.out;
    constexpr size_t V = sizeof(uint4) / sizeof(T) > 0 ? sizeof(uint4) / sizeof(T) : 1;
    auto contrib = [&](int p) -> const T * {
        return p == me ? mine : (const T *) oneshot_slice(a, me, p);
    };
    /* whole 16-byte vectors where the input, out and the inbox slices allow (one load per
     * contribution instead of one per element: 16 for a char), the rest element by element;
     * the same order of operations either way */
    size_t vdone = first;
    if (V > 1 && !Layout<T>::padded &&
        0 == (((uintptr_t) mine | (uintptr_t) out | (uintptr_t) contrib(me == 0 ? 1 : 0) |
               (uintptr_t) a.slice_bytes) &
              15)) {
        const size_t nv = cnt / V;
        for (size_t v = threadIdx.x; v < nv; v += blockDim.x) {
            const size_t i = first + v * V;
            uint4 acc = __ldcg((const uint4 *) (contrib(0) + i));
            for (int p = 1; p < n; ++p) {
                const uint4 x = __ldcg((const uint4 *) (contrib(p) + i));
                acc = combine<T, OP>(acc, x);
            }
            *(uint4 *) (out + i) = acc;
        }
        vdone = first + nv * V;
    }
    for (size_t i = vdone + threadIdx.x; i < last; i += blockDim.x) {
        T acc = ldcg(contrib(0) + i);
        for (int p = 1; p < n; ++p) {
            T v = ldcg(contrib(p) + i);
            acc = Op<T, OP>::f(acc, v);
        }
        store_out(out + i, acc);
    }
}

/* A gated resident call (a.gate set) waits here, before it reads any buffer of the
 * caller's, until the host has let it through: the host writes the descriptor first and
 * then waits for the work the call must follow (the default stream's), so the kernel takes
 * the call, hands it on and finds its code path meanwhile (0.4-0.5 us of a small call).
 * Block 0's warp 0 polls the gate word in mapped host memory; the block waits
 * at its barrier. The host lets every gated call through, failed wait or not; but while a
 * call waits here the kernel keeps its multiprocessors, which the default-stream work the
 * host waits for may need (a kernel of the whole device). So a gate shut for longer than
 * a.gate_ns (the idle time) gives the call back: false, before the call has read or sent
 * anything, and the kernel ends as an idle one does, with the call's number, from which
 * the host launches it again once its wait is over. A call of several blocks: block 0
 * alone reads the gate and tells the others its verdict (a.verdict, device memory: the
 * call's number, or with CGPU_CUDA_GATE_BACK given back), so all of a call's blocks go, or
 * none. True: the gate is open (or none). */
#define CGPU_CUDA_GATE_BACK (1ull << 63)
__device__ __forceinline__ bool call_gate(const cgpu_cuda_oneshot_args_t &a)
{
    if (nullptr == a.gate) {
        return true;
    }
    __shared__ int s_open;
    if (threadIdx.x < 32) {
        int open = 0;
        if (0 == blockIdx.x) {
            const uint64_t t0 = global_ns();
            for (unsigned it = 0;; ++it) {
                uint64_t g = 0;
                if (0 == threadIdx.x) {
                    g = *(const volatile uint64_t *) a.gate;
                }
                if (__shfl_sync(0xffffffffu, g, 0) >= a.gate_val) {
                    open = 1;
                    break;
                }
                int late = 0;
                if (0 == threadIdx.x && 0 == (it & 3)) { /* a poll: ~1 us */
                    late = global_ns() - t0 > a.gate_ns;
                }
                if (__shfl_sync(0xffffffffu, late, 0)) {
                    break;
                }
            }
            if (a.nblocks > 1 && 0 == threadIdx.x) {
                *(volatile uint64_t *) a.verdict =
                    open ? a.gate_val : a.gate_val | CGPU_CUDA_GATE_BACK;
            }
        } else {
            /* block 0 decides within a.gate_ns; until then an earlier call's verdict */
            for (;;) {
                uint64_t v = 0;
                if (0 == threadIdx.x) {
                    v = *(const volatile uint64_t *) a.verdict;
                }
                v = __shfl_sync(0xffffffffu, v, 0);
                if (v == a.gate_val) {
                    open = 1;
                    break;
                }
                if (v == (a.gate_val | CGPU_CUDA_GATE_BACK)) {
                    break;
                }
            }
        }
        if (0 == threadIdx.x) {
            s_open = open;
        }
    }
    __syncthreads();
    return 0 != s_open;
}

/* block b's part of a oneshot call; T, OP: the reduction (unused by the copying modes);
 * false: a gated call given back before it read or sent anything (call_gate) */
template <typename T, int OP>
__device__ __forceinline__ bool oneshot_body(const cgpu_cuda_oneshot_args_t &a, const int b,
                                             uint64_t *ts = nullptr)
{
    if (!call_gate(a)) {
        return false;
    }
    size_t first, last;
    if (0 != (a.mode & CGPU_CUDA_ONESHOT_LL)) {
        if (CGPU_CUDA_ONESHOT_COPIES(CGPU_CUDA_ONESHOT_BASE(a.mode))) {
            ll_body<uint8_t, CGPU_OP_SUM>(a, b, ts);
        } else if constexpr (sizeof(T) <= 8) {
            ll_body<T, OP>(a, b, ts);
        } else if constexpr (16 == sizeof(T)) {
            ll_body_wide<T, OP>(a, b, ts);
        } /* the host sends no LL reduction of other sizes */
        return true;
    }
    if (CGPU_CUDA_ONESHOT_COPIES(a.mode)) {
        oneshot_share<uint8_t>(a, b, first, last);
        oneshot_send<uint8_t, CGPU_OP_SUM>(a, first, last - first);
        if (oneshot_sync(a, b, ts)) {
            oneshot_place(a, first, last - first);
        }
    } else {
        oneshot_share<T>(a, b, first, last);
        oneshot_send<T, OP>(a, first, last - first);
        if (oneshot_sync(a, b, ts)) {
            oneshot_reduce<T, OP>(a, first, last);
        }
    }
    return true;
}

} /* namespace */

#endif /* CGPU_CUDA_ONESHOT_BODY_CUH */
