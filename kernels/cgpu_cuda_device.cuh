/*
 * coll/gpu kernels: the device primitives every kernel family shares (element operations,
 * flags and the waits on them, the one copy/reduce loop). Each kernels/cgpu_cuda_*.cu
 * includes it and compiles what it uses on its own, so the families build in parallel.
 *
 * Memory model used throughout: data a peer reads is written with ordinary stores
 * through the peer mapping; then the block synchronizes and one thread per counter
 * stores it with release semantics at system scope (store_release_sys: one per chunk in
 * the ring and the alltoall, per item in the tree, per peer in a oneshot).
 * The reader spins on its local counter with volatile loads and reads the data with
 * ld.global.cg (L2, never a stale L1 line from an earlier step). The caller's buffers are
 * read the same way: the resident kernel stays on an SM across calls and keeps its L1, so
 * a plain load of an input could return what the previous call read there instead of what
 * the application or a copy wrote since (an alltoall's second use of the same buffers
 * would send the first use's input).
 */
#ifndef CGPU_CUDA_DEVICE_CUH
#define CGPU_CUDA_DEVICE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cgpu_cuda_kernels.h"

/* internal linkage: each family's object keeps its own copy of what it uses */
namespace {

/* ---- element operations (same semantics as the host twin: r = a op b) ---- */

template <typename T, int OP> struct Op;
/* Unsigned arithmetic for every integer op but MIN/MAX: identical bits to two's
 * complement signed results, and no undefined overflow. Small types promote to int in
 * C++, so SUM/PROD go through unsigned int for them. */
template <> struct Op<uint8_t, CGPU_OP_SUM> {
    __device__ static uint8_t f(uint8_t a, uint8_t b)
    {
        return (uint8_t) ((unsigned) a + b);
    }
};
template <> struct Op<uint8_t, CGPU_OP_PROD> {
    __device__ static uint8_t f(uint8_t a, uint8_t b)
    {
        return (uint8_t) ((unsigned) a * b);
    }
};
template <> struct Op<uint16_t, CGPU_OP_SUM> {
    __device__ static uint16_t f(uint16_t a, uint16_t b)
    {
        return (uint16_t) ((unsigned) a + b);
    }
};
template <> struct Op<uint16_t, CGPU_OP_PROD> {
    __device__ static uint16_t f(uint16_t a, uint16_t b)
    {
        return (uint16_t) ((unsigned) a * b);
    }
};
#define CGPU_BIT_OPS(T)                                                                            \
    template <> struct Op<T, CGPU_OP_LAND> {                                                       \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) ((a != 0) && (b != 0));                                                     \
        }                                                                                          \
    };                                                                                             \
    template <> struct Op<T, CGPU_OP_LOR> {                                                        \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) ((a != 0) || (b != 0));                                                     \
        }                                                                                          \
    };                                                                                             \
    template <> struct Op<T, CGPU_OP_LXOR> {                                                       \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) ((a != 0) != (b != 0));                                                     \
        }                                                                                          \
    };                                                                                             \
    template <> struct Op<T, CGPU_OP_BAND> {                                                       \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) (a & b);                                                                    \
        }                                                                                          \
    };                                                                                             \
    template <> struct Op<T, CGPU_OP_BOR> {                                                        \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) (a | b);                                                                    \
        }                                                                                          \
    };                                                                                             \
    template <> struct Op<T, CGPU_OP_BXOR> {                                                       \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) (a ^ b);                                                                    \
        }                                                                                          \
    };
/* 32/64-bit: no promotion surprises, plain arithmetic wraps in the unsigned type */
#define CGPU_INT_OPS(T)                                                                            \
    template <> struct Op<T, CGPU_OP_SUM> {                                                        \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) (a + b);                                                                    \
        }                                                                                          \
    };                                                                                             \
    template <> struct Op<T, CGPU_OP_PROD> {                                                       \
        __device__ static T f(T a, T b)                                                            \
        {                                                                                          \
            return (T) (a * b);                                                                    \
        }                                                                                          \
    };                                                                                             \
    CGPU_BIT_OPS(T)
CGPU_BIT_OPS(uint8_t)
CGPU_BIT_OPS(uint16_t)
CGPU_INT_OPS(uint32_t)
CGPU_INT_OPS(uint64_t)

template <typename T> struct Op<T, CGPU_OP_MIN> {
    __device__ static T f(T a, T b)
    {
        return a < b ? a : b;
    }
};
template <typename T> struct Op<T, CGPU_OP_MAX> {
    __device__ static T f(T a, T b)
    {
        return a > b ? a : b;
    }
};
template <> struct Op<float, CGPU_OP_SUM> {
    __device__ static float f(float a, float b)
    {
        return a + b;
    }
};
template <> struct Op<float, CGPU_OP_PROD> {
    __device__ static float f(float a, float b)
    {
        return a * b;
    }
};
template <> struct Op<double, CGPU_OP_SUM> {
    __device__ static double f(double a, double b)
    {
        return a + b;
    }
};
template <> struct Op<double, CGPU_OP_PROD> {
    __device__ static double f(double a, double b)
    {
        return a * b;
    }
};

/* Complex numbers as CUDA's float2/double2 (x = re, y = im): 8/16-byte aligned like the
 * C types, loadable with __ldcg. Each product and sum rounded once, as the host twin. */
template <> struct Op<float2, CGPU_OP_SUM> {
    __device__ static float2 f(float2 a, float2 b)
    {
        return make_float2(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y));
    }
};
template <> struct Op<float2, CGPU_OP_PROD> {
    __device__ static float2 f(float2 a, float2 b)
    {
        return make_float2(__fsub_rn(__fmul_rn(a.x, b.x), __fmul_rn(a.y, b.y)),
                           __fadd_rn(__fmul_rn(a.x, b.y), __fmul_rn(a.y, b.x)));
    }
};
template <> struct Op<double2, CGPU_OP_SUM> {
    __device__ static double2 f(double2 a, double2 b)
    {
        return make_double2(__dadd_rn(a.x, b.x), __dadd_rn(a.y, b.y));
    }
};
template <> struct Op<double2, CGPU_OP_PROD> {
    __device__ static double2 f(double2 a, double2 b)
    {
        return make_double2(__dsub_rn(__dmul_rn(a.x, b.x), __dmul_rn(a.y, b.y)),
                            __dadd_rn(__dmul_rn(a.x, b.y), __dmul_rn(a.y, b.x)));
    }
};

/* MPI's (value, index) pairs, laid out as the C struct Open MPI describes (the value, then
 * the index, padded to the struct's alignment); MINLOC/MAXLOC as the host twin: the pair
 * with the smaller (larger) value, or the value with the smaller index when they are
 * equal; a NaN value is never smaller, larger nor equal, so the b pair wins. */
template <typename V, typename I> struct Loc {
    V v;
    I i;
};
template <typename V, typename I> struct Op<Loc<V, I>, CGPU_OP_MINLOC> {
    __device__ static Loc<V, I> f(Loc<V, I> a, Loc<V, I> b)
    {
        return a.v < b.v ? a : a.v == b.v ? Loc<V, I>{a.v, a.i < b.i ? a.i : b.i} : b;
    }
};
template <typename V, typename I> struct Op<Loc<V, I>, CGPU_OP_MAXLOC> {
    __device__ static Loc<V, I> f(Loc<V, I> a, Loc<V, I> b)
    {
        return a.v > b.v ? a : a.v == b.v ? Loc<V, I>{a.v, a.i < b.i ? a.i : b.i} : b;
    }
};

typedef Loc<short, int> LocShortInt; /* offsetof takes no template's comma */
static_assert(sizeof(Loc<float, int>) == 8 && sizeof(Loc<int, int>) == 8 &&
                  sizeof(Loc<float, float>) == 8 && sizeof(Loc<double, double>) == 16 &&
                  sizeof(Loc<short, int>) == 8 && offsetof(LocShortInt, i) == 4 &&
                  sizeof(Loc<double, int>) == 16 && sizeof(Loc<long, int>) == 16,
              "the pairs are the host twin's C structs, padding included");

/* Which bytes of a T are data: a padded pair's gaps (after a short value, after the last
 * field) are no part of MPI's type, and a result written to the caller's buffer leaves them
 * as they were (store_out, ll_scatter_out). Everything else is all data. */
template <typename T> struct Layout {
    static constexpr bool padded = false;
    __device__ static constexpr bool data(size_t)
    {
        return true;
    }
};
template <typename V, typename I> struct Layout<Loc<V, I>> {
    static constexpr size_t ioff = (sizeof(V) + alignof(I) - 1) / alignof(I) * alignof(I);
    static constexpr bool padded = sizeof(Loc<V, I>) != sizeof(V) + sizeof(I);
    __device__ static constexpr bool data(size_t b)
    {
        return b < sizeof(V) || (b >= ioff && b < ioff + sizeof(I));
    }
};
static_assert(Layout<LocShortInt>::ioff == offsetof(LocShortInt, i) &&
                  Layout<LocShortInt>::padded && Layout<Loc<double, int>>::padded &&
                  Layout<Loc<long, int>>::padded && !Layout<Loc<float, int>>::padded &&
                  !Layout<Loc<double, double>>::padded,
              "the pairs' gaps as the host twin's layouts (cgpu_dtype_runs)");

/* a result element to the caller's buffer: a padded pair field by field */
template <typename T> __device__ __forceinline__ void store_out(T *p, const T &x)
{
    *p = x;
}
template <typename V, typename I>
__device__ __forceinline__ void store_out(Loc<V, I> *p, const Loc<V, I> &x)
{
    if constexpr (Layout<Loc<V, I>>::padded) {
        p->v = x.v;
        p->i = x.i;
    } else {
        *p = x;
    }
}

/* ---- memory helpers ---- */

/* one element read past L1 (__ldcg knows the built-in types; a pair is read field by field,
 * so its own alignment is all it needs) */
template <typename T> __device__ __forceinline__ T ldcg(const T *p)
{
    return __ldcg(p);
}
template <typename V, typename I> __device__ __forceinline__ Loc<V, I> ldcg(const Loc<V, I> *p)
{
    return Loc<V, I>{__ldcg(&p->v), __ldcg(&p->i)};
}

__device__ __forceinline__ uint64_t load_flag(const uint64_t *p)
{
    return *(const volatile uint64_t *) p;
}

__device__ __forceinline__ void store_flag(uint64_t *p, uint64_t v)
{
    *(volatile uint64_t *) p = v;
}

/* A store with release semantics at system scope: every store this thread made, or that
 * is ordered before it through a barrier (__syncthreads, the cluster barrier), is visible
 * system-wide before the value is (PTX memory model: causality order is transitive). One
 * such store per flag replaces a system-wide fence in every thread: 1.6 us instead of 2.2 us
 * for a small oneshot's writes (2 ranks under MPS). */
__device__ __forceinline__ void store_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* A store with release semantics at GPU scope: what this thread stored, or what is ordered
 * before it through a barrier, has reached this GPU's L2 (the point every later kernel, copy
 * and migration of this device's memory reads through) before the value is visible. For a
 * word only the host reads, whose stores before it went to this device's memory; see the
 * resident kernel's completion. */
__device__ __forceinline__ void store_release_gpu(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* the first wait of a launch to time out says why (see cgpu_cuda_kernels.h) */
__device__ __forceinline__ void report_timeout(unsigned long long *err, int kind, int who,
                                               uint64_t want, uint64_t seen)
{
    if (0 == atomicCAS(err, 0ull, (unsigned long long) kind)) {
        err[1] = (unsigned long long) who;
        err[2] = want;
        err[3] = seen;
        __threadfence_system();
    }
}

/* Spin until *flag >= v or the timeout passes (then record why and return false). */
__device__ bool spin_ge(const uint64_t *flag, uint64_t v, unsigned long long timeout_ns,
                        unsigned long long *err, int kind, int who)
{
    if (load_flag(flag) >= v) {
        return true;
    }
    const uint64_t t0 = global_ns();
    unsigned it = 0;
    while (load_flag(flag) < v) {
        if (0 == (++it & 1023) && 0 != timeout_ns && global_ns() - t0 > timeout_ns) {
            report_timeout(err, kind, who, v, load_flag(flag));
            return false;
        }
    }
    return true;
}

/* Thread 0 waits until *flag >= v; the block then proceeds together, or, after a
 * timeout, returns false in every thread so the kernel can end. */
__device__ __forceinline__ bool block_wait_ge(const uint64_t *flag, uint64_t v,
                                              unsigned long long timeout_ns,
                                              unsigned long long *err, int kind, int who)
{
    __shared__ int ok;
    if (0 == threadIdx.x) {
        ok = spin_ge(flag, v, timeout_ns, err, kind, who) ? 1 : 0;
    }
    __syncthreads();
    return 0 != ok;
}

/* All threads' stores are visible system-wide before thread 0 publishes: the barrier
 * orders them before thread 0's release, which is cumulative (store_release_sys), so one
 * release per block is enough. */
__device__ __forceinline__ void block_publish(uint64_t *flag, uint64_t v)
{
    __syncthreads();
    if (0 == threadIdx.x) {
        store_release_sys(flag, v);
    }
}

template <typename T> union Vec {
    uint4 u;
    T e[sizeof(uint4) / sizeof(T)];
};

/* one 16-byte vector of T: r = x op y, element by element */
template <typename T, int OP>
__device__ __forceinline__ uint4 combine(const uint4 &x, const uint4 &y)
{
    Vec<T> a, b, r;
    a.u = x;
    b.u = y;
#pragma unroll
    for (size_t k = 0; k < sizeof(uint4) / sizeof(T); ++k) {
        r.e[k] = Op<T, OP>::f(a.e[k], b.e[k]);
    }
    return r.u;
}

/* A copy of nw words of type W (8, 4 or 2 bytes) from src to each given dst, the whole
 * block cooperating, UNROLL words in flight per thread: the path of copies whose pointers
 * share no 16-byte alignment (an alltoall or allgather block of 3 ranks' uneven share lands
 * at an offset that is a multiple of the element only), which element by element would move
 * one byte per thread and instruction. */
template <typename W>
__device__ void copy_words(W *d0, W *d1, W *d2, const W *src, size_t nw)
{
    constexpr int UNROLL = 8;
    const size_t tid = threadIdx.x, nth = blockDim.x, step = nth * UNROLL;
    size_t i = tid;
    for (; i + (UNROLL - 1) * nth < nw; i += step) {
        W a[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            a[u] = __ldcg(src + i + u * nth);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            if (nullptr != d0) {
                d0[i + u * nth] = a[u];
            }
            if (nullptr != d1) {
                d1[i + u * nth] = a[u];
            }
            if (nullptr != d2) {
                d2[i + u * nth] = a[u];
            }
        }
    }
    for (; i < nw; i += nth) {
        const W a = __ldcg(src + i);
        if (nullptr != d0) {
            d0[i] = a;
        }
        if (nullptr != d1) {
            d1[i] = a;
        }
        if (nullptr != d2) {
            d2[i] = a;
        }
    }
}

/* the elements of n of type T that a copy moved as W words (the rest: the caller's tail) */
template <typename T, typename W>
__device__ __forceinline__ size_t copy_as(T *dst0, T *dst1, T *dst2, const T *src, size_t n)
{
    const size_t nw = n * sizeof(T) / sizeof(W);
    copy_words<W>((W *) dst0, (W *) dst1, (W *) dst2, (const W *) src, nw);
    return nw * sizeof(W) / sizeof(T);
}

/*
 * The one data primitive: r = src0 op src1 (or whichever of them is given), written to
 * dst0 and/or dst1. src0 is a slot filled by a peer (read through L2 only). n elements,
 * the whole block cooperating; 16-byte accesses when every pointer allows it, UNROLL of
 * them in flight per thread (all loads issued before the first store), since a remote
 * store over NVLink and an HBM load both take long enough that one at a time starves
 * the link.
 */
template <typename T, int OP>
__device__ void reduce_copy(T *dst0, T *dst1, const T *src0, const T *src1, size_t n,
                            T *dst2 = nullptr)
{
    constexpr int UNROLL = 4;
    const size_t tid = threadIdx.x, nth = blockDim.x;
    const uintptr_t mis = ((uintptr_t) dst0 | (uintptr_t) dst1 | (uintptr_t) dst2 |
                           (uintptr_t) src0 | (uintptr_t) src1) &
                          15;
    size_t done = 0;
    if (0 == mis) {
        constexpr size_t V = sizeof(uint4) / sizeof(T);
        const size_t nv = n / V;
        const uint4 *s0 = (const uint4 *) src0, *s1 = (const uint4 *) src1;
        uint4 *d0 = (uint4 *) dst0, *d1 = (uint4 *) dst1, *d2 = (uint4 *) dst2;
        const size_t step = nth * UNROLL;
        size_t i = tid;
        for (; i + (UNROLL - 1) * nth < nv; i += step) {
            uint4 a[UNROLL], b[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (nullptr != s0) {
                    a[u] = __ldcg(s0 + i + u * nth);
                }
                if (nullptr != s1) {
                    b[u] = __ldcg(s1 + i + u * nth);
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                uint4 r = (nullptr != s0 && nullptr != s1) ? combine<T, OP>(a[u], b[u])
                                                           : (nullptr != s0 ? a[u] : b[u]);
                if (nullptr != d0) {
                    d0[i + u * nth] = r;
                }
                if (nullptr != d1) {
                    d1[i + u * nth] = r;
                }
                if (nullptr != d2) {
                    d2[i + u * nth] = r;
                }
            }
        }
        for (; i < nv; i += nth) {
            uint4 a = nullptr != s0 ? __ldcg(s0 + i) : uint4();
            uint4 b = nullptr != s1 ? __ldcg(s1 + i) : uint4();
            uint4 r =
                (nullptr != s0 && nullptr != s1) ? combine<T, OP>(a, b) : (nullptr != s0 ? a : b);
            if (nullptr != d0) {
                d0[i] = r;
            }
            if (nullptr != d1) {
                d1[i] = r;
            }
            if (nullptr != d2) {
                d2[i] = r;
            }
        }
        done = nv * V;
    } else if ((nullptr == src0) != (nullptr == src1)) {
        /* a copy: in the widest word every pointer allows, where wider than an element */
        const T *src = nullptr != src0 ? src0 : src1;
        if (0 == (mis & 7) && sizeof(T) < 8) {
            done = copy_as<T, unsigned long long>(dst0, dst1, dst2, src, n);
        } else if (0 == (mis & 3) && sizeof(T) < 4) {
            done = copy_as<T, unsigned int>(dst0, dst1, dst2, src, n);
        } else if (0 == (mis & 1) && sizeof(T) < 2) {
            done = copy_as<T, unsigned short>(dst0, dst1, dst2, src, n);
        }
    }
    for (size_t i = done + tid; i < n; i += nth) {
        T a = nullptr != src0 ? ldcg(src0 + i) : T{};
        T b = nullptr != src1 ? ldcg(src1 + i) : T{};
        T r = (nullptr != src0 && nullptr != src1) ? Op<T, OP>::f(a, b) : (nullptr != src0 ? a : b);
        if (nullptr != dst0) {
            dst0[i] = r;
        }
        if (nullptr != dst1) {
            dst1[i] = r;
        }
        if (nullptr != dst2) {
            dst2[i] = r;
        }
    }
}

__device__ __forceinline__ int wrap(int x, int n)
{
    return ((x % n) + n) % n;
}

/* A block's parts (CGPU_CUDA_GRID_DOC) in increasing order, until one times out. Each part
 * starts with a barrier: the previous one's last reads of shared state are done. */
#define CGPU_EACH_PART(first, parts, step, body)                                                   \
    for (int part_ = (first); part_ < (parts); part_ += (step)) {                                  \
        __syncthreads();                                                                           \
        if (!(body)) {                                                                             \
            return;                                                                                \
        }                                                                                          \
    }

} /* namespace */

#endif /* CGPU_CUDA_DEVICE_CUH */
