/*
 * coll/gpu kernels: the LL protocol of small oneshot calls (cgpu_cuda_kernels.h:
 * CGPU_CUDA_ONESHOT_LL): 16-byte lines that carry their own call number, so no flag and no
 * fence. Included through cgpu_cuda_oneshot_body.cuh by the launched and the resident oneshot.
 */
#ifndef CGPU_CUDA_LL_CUH
#define CGPU_CUDA_LL_CUH

#include "cgpu_cuda_device.cuh"

namespace {

/* line l of rank p's LL data in rank r's inbox, for call a.seq of a.mode's class */
__device__ __forceinline__ uint4 *ll_line(const cgpu_cuda_oneshot_args_t &a, int r, int p, int l)
{
    const int c = CGPU_CUDA_LL_CLASS(a.mode);
    return (uint4 *) (a.inbox[r] + a.ll_off + CGPU_CUDA_LL_CLASS_OFF(a.nranks, c)) +
           ((size_t) ((a.seq & 1) * (uint64_t) a.nranks + (uint64_t) p) *
                ((size_t) CGPU_CUDA_LL_LINES << c) +
            (size_t) l);
}

__device__ __forceinline__ void ll_store(uint4 *dst, uint64_t v, uint32_t n)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"((uint32_t) v),
                 "r"(n), "r"((uint32_t) (v >> 32)), "r"(n)
                 : "memory");
}

/* bytes [off, off + 8) of src as one word, zeros from len on (src of any alignment) */
__device__ __forceinline__ uint64_t ll_gather(const uint8_t *src, size_t off, size_t len)
{
    if (off + 8 <= len && 0 == (((uintptr_t) src + off) & 7)) {
        return __ldcg((const unsigned long long *) (src + off));
    }
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && off + i < len; ++i) {
        v |= (uint64_t) __ldcg(src + off + i) << (8 * i);
    }
    return v;
}

/* the bytes of v that fall before len, to dst + off */
__device__ __forceinline__ void ll_scatter(uint8_t *dst, size_t off, size_t len, uint64_t v)
{
    if (off + 8 <= len && 0 == (((uintptr_t) dst + off) & 7)) {
        *(uint64_t *) (dst + off) = v;
        return;
    }
    for (size_t i = 0; i < 8 && off + i < len; ++i) {
        dst[off + i] = (uint8_t) (v >> (8 * i));
    }
}

/* result element x to dst + off (an element's offset), its bytes before len: a padded
 * pair's gaps are left as they were */
template <typename T>
__device__ __forceinline__ void ll_scatter_elem(uint8_t *dst, size_t off, size_t len, const T &x)
{
    if (off + sizeof(T) <= len && 0 == ((uintptr_t) dst + off) % alignof(T)) {
        store_out((T *) (dst + off), x);
        return;
    }
    uint8_t b[sizeof(T)];
    memcpy(b, &x, sizeof(T));
    for (size_t i = 0; i < sizeof(T) && off + i < len; ++i) {
        if (Layout<T>::data(i)) {
            dst[off + i] = b[i];
        }
    }
}

/* ll_scatter of a reduction's result: a padded pair's gaps are left as they were */
template <typename T>
__device__ __forceinline__ void ll_scatter_out(uint8_t *dst, size_t off, size_t len, uint64_t v)
{
    if constexpr (!Layout<T>::padded) {
        ll_scatter(dst, off, len, v);
    } else {
        static_assert(8 == sizeof(T), "an LL line holds whole elements");
        T x;
        memcpy(&x, &v, 8);
        ll_scatter_elem(dst, off, len, x);
    }
}

/* LL lines a thread keeps in flight: its loads of the input, and its polls of the peers'
 * lines, go out together instead of one round trip after another (a class of 8 KiB in one
 * block of 512 threads is two lines a thread) */
#define CGPU_LL_BATCH 4

/* every 1024th poll of a wait for rank p's line: whether the wait has passed the timeout
 * (then recorded, with the number the line held) */
__device__ __forceinline__ bool ll_timed_out(const cgpu_cuda_oneshot_args_t &a, unsigned it,
                                             uint64_t &t0, int p, uint32_t seen)
{
    if (0 != (it & 1023) || 0 == a.timeout_ns) {
        return false;
    }
    const uint64_t t = global_ns();
    if (0 == t0) {
        t0 = t;
        return false;
    }
    if (t - t0 <= a.timeout_ns) {
        return false;
    }
    report_timeout(a.err, CGPU_CUDA_ERR_ONESHOT, p, (uint32_t) a.seq, seen);
    return true;
}

/* waits for line l from rank p; false after the timeout (recorded) */
__device__ __forceinline__ bool ll_take1(const cgpu_cuda_oneshot_args_t &a, int p, int l,
                                         uint64_t &v)
{
    const uint4 *src = ll_line(a, a.rank, p, l);
    const uint32_t n = (uint32_t) a.seq;
    uint64_t t0 = 0;
    for (unsigned it = 1;; ++it) {
        uint32_t x, y, z, w;
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                     : "l"(src)
                     : "memory");
        if (y == n && w == n) {
            v = (uint64_t) x | (uint64_t) z << 32;
            return true;
        }
        if (ll_timed_out(a, it, t0, p, y)) {
            return false;
        }
    }
}

/* waits for lines l[0..cnt) from rank p, polling every missing one in each round; false
 * after the timeout (recorded) */
__device__ __forceinline__ bool ll_take(const cgpu_cuda_oneshot_args_t &a, int p, const int *l,
                                        int cnt, uint64_t *v)
{
    const uint32_t n = (uint32_t) a.seq;
    unsigned missing = (1u << cnt) - 1;
    uint64_t t0 = 0;
    for (unsigned it = 1;; ++it) {
        uint32_t x[CGPU_LL_BATCH], y[CGPU_LL_BATCH], z[CGPU_LL_BATCH], w[CGPU_LL_BATCH];
#pragma unroll
        for (int u = 0; u < CGPU_LL_BATCH; ++u) {
            if (missing >> u & 1) {
                asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(x[u]), "=r"(y[u]), "=r"(z[u]), "=r"(w[u])
                             : "l"(ll_line(a, a.rank, p, l[u]))
                             : "memory");
            }
        }
#pragma unroll
        for (int u = 0; u < CGPU_LL_BATCH; ++u) {
            if ((missing >> u & 1) && y[u] == n && w[u] == n) {
                v[u] = (uint64_t) x[u] | (uint64_t) z[u] << 32;
                missing &= ~(1u << u);
            }
        }
        if (0 == missing) {
            return true;
        }
        if (ll_timed_out(a, it, t0, p, y[__ffs(missing) - 1])) {
            return false;
        }
    }
}

/* acc = acc op x, element by element over the 8 bytes (T of at most 8 bytes) */
template <typename T, int OP>
__device__ __forceinline__ uint64_t ll_combine(uint64_t acc, uint64_t x)
{
    union W {
        uint64_t u;
        T e[8 / sizeof(T)];
    } r, y;
    r.u = acc;
    y.u = x;
#pragma unroll
    for (int i = 0; i < (int) (8 / sizeof(T)); ++i) {
        r.e[i] = Op<T, OP>::f(r.e[i], y.e[i]);
    }
    return r.u;
}

/* Lines [lo, hi) of an LL call to every peer, one at a time: data where the peer takes some,
 * else zeros (len: bytes of one block); then the block's barrier, which puts every read of
 * the input before any write of the output (in place), and ts[0] */
__device__ __forceinline__ void ll_send_lines(const cgpu_cuda_oneshot_args_t &a, const int lo,
                                              const int hi, const size_t len, uint64_t *ts)
{
    const int n = a.nranks, me = a.rank, mode = CGPU_CUDA_ONESHOT_BASE(a.mode), root = a.root;
    const bool blocks = CGPU_CUDA_RING_REDUCE_SCATTER == mode || CGPU_CUDA_ONESHOT_ALLTOALL == mode;
    const uint8_t *in = (const uint8_t *) a.in;
    const uint32_t num = (uint32_t) a.seq;
    for (int i = threadIdx.x; i < (n - 1) * (hi - lo); i += blockDim.x) {
        const int q = i / (hi - lo), l = lo + i % (hi - lo);
        const int p = q < me ? q : q + 1;
        const bool data = CGPU_CUDA_RING_BCAST == mode    ? me == root
                          : CGPU_CUDA_RING_REDUCE == mode ? p == root
                                                          : true;
        const uint64_t v =
            data ? ll_gather(in + (blocks ? (size_t) p * len : 0), (size_t) l * 8, len) : 0;
        ll_store(ll_line(a, p, me, l), v, num);
    }
    __syncthreads();
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[0] = global_ns();
    }
}

/* ll_body's lines [lo, hi) where a thread has at most one line each way: one at a time
 * (the batches below cost calls of up to 2 KiB 0.1-0.7 us more under MPS) */
template <typename T, int OP>
__device__ __forceinline__ void ll_body_one(const cgpu_cuda_oneshot_args_t &a, const int lo,
                                            const int hi, uint64_t *ts)
{
    const int n = a.nranks, me = a.rank, mode = CGPU_CUDA_ONESHOT_BASE(a.mode), root = a.root;
    const bool copies = CGPU_CUDA_ONESHOT_COPIES(mode);
    const size_t len = a.count * (copies ? 1 : sizeof(T)); /* bytes of one block */
    const uint8_t *in = (const uint8_t *) a.in;
    uint8_t *out = (uint8_t *) a.out;
    ll_send_lines(a, lo, hi, len, ts);
    bool ok = true; /* false after a timeout (recorded): this thread stops */
    for (int l = lo + (int) threadIdx.x; l < hi && ok; l += blockDim.x) {
        const size_t off = (size_t) l * 8;
        if (copies) {
            for (int p = 0; p < n && ok; ++p) {
                uint64_t v = 0;
                if (p != me) {
                    ok = ll_take1(a, p, l, v);
                    if (ok && off < len && (CGPU_CUDA_RING_BCAST != mode || p == root)) {
                        ll_scatter(out + (CGPU_CUDA_RING_BCAST == mode ? 0 : (size_t) p * len), off,
                                   len, v);
                    }
                } else if (CGPU_CUDA_RING_BCAST != mode && off < len) {
                    /* this rank's own block of the allgather or alltoall (not in place) */
                    const uint8_t *own =
                        in + (CGPU_CUDA_ONESHOT_ALLTOALL == mode ? (size_t) me * len : 0);
                    uint8_t *dst = out + (size_t) me * len;
                    if (own != dst) {
                        ll_scatter(dst, off, len, ll_gather(own, off, len));
                    }
                }
            }
        } else {
            /* rank order, as oneshot_reduce: every rank computes identical bits; every
             * peer's line is taken (LL's rule), those past the scans' folds unused */
            const uint8_t *mine =
                in + (CGPU_CUDA_RING_REDUCE_SCATTER == mode ? (size_t) me * len : 0);
            const int folds = CGPU_CUDA_ONESHOT_FOLDS(mode, me, n);
            uint64_t acc = 0;
            for (int p = 0; p < n && ok; ++p) {
                uint64_t v = 0;
                if (p == me) {
                    v = ll_gather(mine, off, len);
                } else {
                    ok = ll_take1(a, p, l, v);
                }
                acc = 0 == p ? v : p < folds ? ll_combine<T, OP>(acc, v) : acc;
            }
            if (ok && off < len && folds > 0 && (CGPU_CUDA_RING_REDUCE != mode || me == root)) {
                ll_scatter_out<T>(out, off, len, acc);
            }
        }
    }
    __syncthreads();
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[1] = global_ns();
    }
}

/* block b's share of an LL call's lines; ts as in oneshot_sync */
template <typename T, int OP>
__device__ __forceinline__ void ll_body(const cgpu_cuda_oneshot_args_t &a, const int b,
                                        uint64_t *ts)
{
    const int n = a.nranks, me = a.rank, mode = CGPU_CUDA_ONESHOT_BASE(a.mode), root = a.root;
    const int lines = CGPU_CUDA_LL_LINES << CGPU_CUDA_LL_CLASS(a.mode);
    const int per = (lines + a.nblocks - 1) / a.nblocks;
    const int lo = b * per < lines ? b * per : lines, hi = lo + per < lines ? lo + per : lines;
    const bool copies = CGPU_CUDA_ONESHOT_COPIES(mode);
    const size_t len = a.count * (copies ? 1 : sizeof(T)); /* bytes of one block */
    const bool blocks = CGPU_CUDA_RING_REDUCE_SCATTER == mode || CGPU_CUDA_ONESHOT_ALLTOALL == mode;
    const uint8_t *in = (const uint8_t *) a.in;
    uint8_t *out = (uint8_t *) a.out;
    const uint32_t num = (uint32_t) a.seq;
    const int total = (n - 1) * (hi - lo), nth = (int) blockDim.x;
    if (total <= nth && hi - lo <= nth) {
        ll_body_one<T, OP>(a, lo, hi, ts);
        return;
    }
    /* every line of this block's share to every peer: data where it takes some, else zeros
     * (a batch of loads, then their stores) */
    for (int i0 = (int) threadIdx.x; i0 < total; i0 += CGPU_LL_BATCH * nth) {
        uint64_t v[CGPU_LL_BATCH] = {};
        uint4 *dst[CGPU_LL_BATCH];
#pragma unroll
        for (int u = 0; u < CGPU_LL_BATCH; ++u) {
            const int i = i0 + u * nth;
            if (i < total) {
                const int q = i / (hi - lo), l = lo + i % (hi - lo);
                const int p = q < me ? q : q + 1;
                const bool data = CGPU_CUDA_RING_BCAST == mode    ? me == root
                                  : CGPU_CUDA_RING_REDUCE == mode ? p == root
                                                                  : true;
                v[u] =
                    data ? ll_gather(in + (blocks ? (size_t) p * len : 0), (size_t) l * 8, len) : 0;
                dst[u] = ll_line(a, p, me, l);
            }
        }
#pragma unroll
        for (int u = 0; u < CGPU_LL_BATCH; ++u) {
            if (i0 + u * nth < total) {
                ll_store(dst[u], v[u], num);
            }
        }
    }
    __syncthreads(); /* every read of the input before any write of the output (in place) */
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[0] = global_ns();
    }
    bool ok = true; /* false after a timeout (recorded): this thread stops */
    for (int l0 = lo + (int) threadIdx.x; l0 < hi && ok; l0 += CGPU_LL_BATCH * nth) {
        int ls[CGPU_LL_BATCH], cnt = 0; /* this thread's lines of the batch */
#pragma unroll
        for (int u = 0; u < CGPU_LL_BATCH; ++u) {
            ls[u] = l0 + u * nth;
            cnt += ls[u] < hi;
        }
        uint64_t v[CGPU_LL_BATCH] = {};
        if (copies) {
            for (int p = 0; p < n && ok; ++p) {
                if (p != me) {
                    ok = ll_take(a, p, ls, cnt, v);
                    for (int u = 0; ok && u < cnt; ++u) {
                        const size_t off = (size_t) ls[u] * 8;
                        if (off < len && (CGPU_CUDA_RING_BCAST != mode || p == root)) {
                            ll_scatter(out + (CGPU_CUDA_RING_BCAST == mode ? 0 : (size_t) p * len),
                                       off, len, v[u]);
                        }
                    }
                } else if (CGPU_CUDA_RING_BCAST != mode) {
                    /* this rank's own block of the allgather or alltoall (not in place) */
                    const uint8_t *own =
                        in + (CGPU_CUDA_ONESHOT_ALLTOALL == mode ? (size_t) me * len : 0);
                    uint8_t *dst = out + (size_t) me * len;
                    for (int u = 0; own != dst && u < cnt; ++u) {
                        const size_t off = (size_t) ls[u] * 8;
                        if (off < len) {
                            ll_scatter(dst, off, len, ll_gather(own, off, len));
                        }
                    }
                }
            }
        } else {
            /* rank order, as oneshot_reduce: every rank computes identical bits; every
             * peer's line is taken (LL's rule), those past the scans' folds unused */
            const uint8_t *mine =
                in + (CGPU_CUDA_RING_REDUCE_SCATTER == mode ? (size_t) me * len : 0);
            const int folds = CGPU_CUDA_ONESHOT_FOLDS(mode, me, n);
            uint64_t acc[CGPU_LL_BATCH], own[CGPU_LL_BATCH];
#pragma unroll
            for (int u = 0; u < CGPU_LL_BATCH; ++u) { /* loaded before the peers' lines come */
                own[u] = u < cnt ? ll_gather(mine, (size_t) ls[u] * 8, len) : 0;
            }
            for (int p = 0; p < n && ok; ++p) {
                if (p != me) {
                    ok = ll_take(a, p, ls, cnt, v);
                }
#pragma unroll
                for (int u = 0; u < CGPU_LL_BATCH; ++u) {
                    const uint64_t x = p == me ? own[u] : v[u];
                    acc[u] = 0 == p ? x : p < folds ? ll_combine<T, OP>(acc[u], x) : acc[u];
                }
            }
            for (int u = 0;
                 ok && folds > 0 && u < cnt && (CGPU_CUDA_RING_REDUCE != mode || me == root); ++u) {
                const size_t off = (size_t) ls[u] * 8;
                if (off < len) {
                    ll_scatter_out<T>(out, off, len, acc[u]);
                }
            }
        }
    }
    __syncthreads();
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[1] = global_ns();
    }
}

/* An LL reduction of 16-byte elements (a double complex, a pair of 8-byte fields, a padded
 * pair): an element spans two lines, so a block's share of lines starts on an even line
 * and one thread takes both lines of an element from every peer, then combines. Lines
 * carry their own numbers, so which block sends or takes a line matters to no peer. */
template <typename T, int OP>
__device__ __forceinline__ void ll_body_wide(const cgpu_cuda_oneshot_args_t &a, const int b,
                                             uint64_t *ts)
{
    static_assert(16 == sizeof(T), "two lines an element");
    const int n = a.nranks, me = a.rank, mode = CGPU_CUDA_ONESHOT_BASE(a.mode), root = a.root;
    const int lines = CGPU_CUDA_LL_LINES << CGPU_CUDA_LL_CLASS(a.mode);
    const int per = ((lines + a.nblocks - 1) / a.nblocks + 1) & ~1;
    const int lo = b * per < lines ? b * per : lines, hi = lo + per < lines ? lo + per : lines;
    const size_t len = a.count * sizeof(T); /* bytes of one block */
    const bool blocks = CGPU_CUDA_RING_REDUCE_SCATTER == mode;
    const uint8_t *in = (const uint8_t *) a.in;
    ll_send_lines(a, lo, hi, len, ts);
    /* rank order, as oneshot_reduce; every peer's lines taken (LL's rule) */
    const uint8_t *mine = in + (blocks ? (size_t) me * len : 0);
    const int folds = CGPU_CUDA_ONESHOT_FOLDS(mode, me, n);
    bool ok = true; /* false after a timeout (recorded): this thread stops */
    for (int e = lo / 2 + (int) threadIdx.x; e < hi / 2 && ok; e += blockDim.x) {
        const int ls[2] = {2 * e, 2 * e + 1};
        const size_t off = (size_t) e * sizeof(T);
        T acc{};
        for (int p = 0; p < n && ok; ++p) {
            uint64_t v[CGPU_LL_BATCH] = {};
            if (p == me) {
                v[0] = ll_gather(mine, off, len);
                v[1] = ll_gather(mine, off + 8, len);
            } else {
                ok = ll_take(a, p, ls, 2, v);
            }
            T x;
            memcpy(&x, v, sizeof(T));
            acc = 0 == p ? x : p < folds ? Op<T, OP>::f(acc, x) : acc;
        }
        if (ok && off < len && folds > 0 && (CGPU_CUDA_RING_REDUCE != mode || me == root)) {
            ll_scatter_elem((uint8_t *) a.out, off, len, acc);
        }
    }
    __syncthreads();
    if (nullptr != ts && 0 == threadIdx.x) {
        ts[1] = global_ns();
    }
}

} /* namespace */

#endif /* CGPU_CUDA_LL_CUH */
