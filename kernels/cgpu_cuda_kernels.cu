/*
 * coll/gpu kernels: device reductions and the collective kernels (ring and chains,
 * tree, oneshot, alltoall).
 *
 * Memory model used throughout: data a peer reads is written with ordinary stores
 * through the peer mapping; then the block synchronizes and one thread per counter
 * stores it with release semantics at system scope (store_release_sys: one per chunk in
 * the ring and the alltoall, per item in the tree, per peer in a oneshot).
 * The reader spins on its local counter with volatile loads and reads the data with
 * ld.global.cg (L2, never a stale L1 line from an earlier step). The caller's buffers are
 * read the same way: the resident kernel stays on an SM across calls and keeps its L1, so
 * a plain load of an input could return what the previous call read there instead of what
 * the application or a copy wrote since (session 17: an alltoall's second use of the same
 * buffers sent the first use's input; test_cuda_colls, carved buffers, under MPS).
 */
#include <atomic>
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cgpu_cuda_kernels.h"

/* The build compiles this file once per part, in parallel (Makefile.am), each part
 * instantiating one family of kernels for every (type, op): 0 the ring and its chains, the
 * alltoall and the small kernels; 1 the tree and the copy-engine reduction; 2 the launched
 * oneshot; 3 the resident kernel. Without CGPU_KERNELS_PART, one object has them all. */
#ifdef CGPU_KERNELS_PART
#define CGPU_PART(n) (CGPU_KERNELS_PART == (n))
#else
#define CGPU_PART(n) 1
#endif

namespace {

/* ---- element operations (same semantics as the host twin: r = a op b) ---- */

template <typename T, int OP> struct Op;
/* Unsigned arithmetic for every integer op but MIN/MAX: identical bits to two's
 * complement signed results, and no undefined overflow. Small types promote to int in
 * C++, so SUM/PROD go through unsigned int for them. */
template <> struct Op<uint8_t, CGPU_OP_SUM> {
    __device__ static uint8_t f(uint8_t a, uint8_t b) { return (uint8_t) ((unsigned) a + b); }
};
template <> struct Op<uint8_t, CGPU_OP_PROD> {
    __device__ static uint8_t f(uint8_t a, uint8_t b) { return (uint8_t) ((unsigned) a * b); }
};
template <> struct Op<uint16_t, CGPU_OP_SUM> {
    __device__ static uint16_t f(uint16_t a, uint16_t b) { return (uint16_t) ((unsigned) a + b); }
};
template <> struct Op<uint16_t, CGPU_OP_PROD> {
    __device__ static uint16_t f(uint16_t a, uint16_t b) { return (uint16_t) ((unsigned) a * b); }
};
#define CGPU_BIT_OPS(T)                                                                  \
    template <> struct Op<T, CGPU_OP_LAND> {                                             \
        __device__ static T f(T a, T b) { return (T) ((a != 0) && (b != 0)); }           \
    };                                                                                   \
    template <> struct Op<T, CGPU_OP_LOR> {                                              \
        __device__ static T f(T a, T b) { return (T) ((a != 0) || (b != 0)); }           \
    };                                                                                   \
    template <> struct Op<T, CGPU_OP_LXOR> {                                             \
        __device__ static T f(T a, T b) { return (T) ((a != 0) != (b != 0)); }           \
    };                                                                                   \
    template <> struct Op<T, CGPU_OP_BAND> {                                             \
        __device__ static T f(T a, T b) { return (T) (a & b); }                          \
    };                                                                                   \
    template <> struct Op<T, CGPU_OP_BOR> {                                              \
        __device__ static T f(T a, T b) { return (T) (a | b); }                          \
    };                                                                                   \
    template <> struct Op<T, CGPU_OP_BXOR> {                                             \
        __device__ static T f(T a, T b) { return (T) (a ^ b); }                          \
    };
/* 32/64-bit: no promotion surprises, plain arithmetic wraps in the unsigned type */
#define CGPU_INT_OPS(T)                                                                  \
    template <> struct Op<T, CGPU_OP_SUM> {                                              \
        __device__ static T f(T a, T b) { return (T) (a + b); }                          \
    };                                                                                   \
    template <> struct Op<T, CGPU_OP_PROD> {                                             \
        __device__ static T f(T a, T b) { return (T) (a * b); }                          \
    };                                                                                   \
    CGPU_BIT_OPS(T)
CGPU_BIT_OPS(uint8_t)
CGPU_BIT_OPS(uint16_t)
CGPU_INT_OPS(uint32_t)
CGPU_INT_OPS(uint64_t)

template <typename T> struct Op<T, CGPU_OP_MIN> {
    __device__ static T f(T a, T b) { return a < b ? a : b; }
};
template <typename T> struct Op<T, CGPU_OP_MAX> {
    __device__ static T f(T a, T b) { return a > b ? a : b; }
};
template <> struct Op<float, CGPU_OP_SUM> {
    __device__ static float f(float a, float b) { return a + b; }
};
template <> struct Op<float, CGPU_OP_PROD> {
    __device__ static float f(float a, float b) { return a * b; }
};
template <> struct Op<double, CGPU_OP_SUM> {
    __device__ static double f(double a, double b) { return a + b; }
};
template <> struct Op<double, CGPU_OP_PROD> {
    __device__ static double f(double a, double b) { return a * b; }
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
    __device__ static constexpr bool data(size_t) { return true; }
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
 * for a small oneshot's writes (2 ranks under MPS, session 13). */
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

/*
 * The one data primitive: r = src0 op src1 (or whichever of them is given), written to
 * dst0 and/or dst1. src0 is a slot filled by a peer (read through L2 only). n elements,
 * the whole block cooperating; 16-byte accesses when every pointer allows it.
 */
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
                           (uintptr_t) src0 | (uintptr_t) src1) & 15;
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
            uint4 r = (nullptr != s0 && nullptr != s1) ? combine<T, OP>(a, b)
                                                     : (nullptr != s0 ? a : b);
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
    }
    for (size_t i = done + tid; i < n; i += nth) {
        T a = nullptr != src0 ? ldcg(src0 + i) : T{};
        T b = nullptr != src1 ? ldcg(src1 + i) : T{};
        T r = (nullptr != src0 && nullptr != src1) ? Op<T, OP>::f(a, b)
                                                   : (nullptr != src0 ? a : b);
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

/* ---- ring allreduce: one block per channel ---- */

struct RingState {
    const cgpu_cuda_ring_args_t *a;
    int c;
    uint64_t sent;  /* items this channel has sent so far in this call */
    uint64_t recvd; /* items it has received so far (a call ends with sent == recvd) */
    uint64_t *my_flags, *right_flags, *left_flags;
};

template <typename T> __device__ T *send_slot(RingState &s)
{
    const cgpu_cuda_ring_args_t *a = s.a;
    uint64_t abs = a->sbase[s.c] + s.sent;
    /* room: the right neighbour has consumed item abs - nslots */
    if (abs >= (uint64_t) a->nslots &&
        !block_wait_ge(s.my_flags + CGPU_CUDA_FLAG_RING_CONSUMED(s.c), abs + 1 - a->nslots,
                       a->timeout_ns, a->err, CGPU_CUDA_ERR_RING_CONSUMED, s.c)) {
        return nullptr;
    }
    char *slots = a->right_inbox + a->ring_off + (size_t) s.c * a->nslots * a->slot_bytes;
    return (T *) (slots + (size_t) (abs % a->nslots) * a->slot_bytes);
}

template <typename T> __device__ const T *recv_slot(RingState &s)
{
    const cgpu_cuda_ring_args_t *a = s.a;
    uint64_t abs = a->rbase[s.c] + s.recvd;
    if (!block_wait_ge(s.my_flags + CGPU_CUDA_FLAG_RING_POSTED(s.c), abs + 1, a->timeout_ns,
                       a->err, CGPU_CUDA_ERR_RING_POSTED, s.c)) {
        return nullptr;
    }
    const char *slots = a->my_inbox + a->ring_off + (size_t) s.c * a->nslots * a->slot_bytes;
    return (const T *) (slots + (size_t) (abs % a->nslots) * a->slot_bytes);
}

/* Finish step: publish what we sent and/or free what we received. */
__device__ void step_done(RingState &s, bool sent, bool received)
{
    if (sent) {
        s.sent++;
        block_publish(s.right_flags + CGPU_CUDA_FLAG_RING_POSTED(s.c), s.a->sbase[s.c] + s.sent);
    } else {
        __syncthreads();
    }
    if (received) {
        s.recvd++;
        if (0 == threadIdx.x) {
            store_flag(s.left_flags + CGPU_CUDA_FLAG_RING_CONSUMED(s.c), s.a->rbase[s.c] + s.recvd);
        }
    }
}

__device__ void ring_state_init(RingState &s, const cgpu_cuda_ring_args_t *a, int c)
{
    s.a = a;
    s.c = c;
    s.sent = 0;
    s.recvd = 0;
    s.my_flags = (uint64_t *) a->my_inbox;
    s.right_flags = (uint64_t *) a->right_inbox;
    s.left_flags = (uint64_t *) a->left_inbox;
}

__device__ __forceinline__ int wrap(int x, int n)
{
    return ((x % n) + n) % n;
}

/* A block's parts (CGPU_CUDA_GRID_DOC) in increasing order, until one times out. Each part
 * starts with a barrier: the previous one's last reads of shared state are done. */
#define CGPU_EACH_PART(first, parts, step, body)                            \
    for (int part_ = (first); part_ < (parts); part_ += (step)) {           \
        __syncthreads();                                                    \
        if (!(body)) {                                                      \
            return;                                                         \
        }                                                                   \
    }

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
            ok = ring_step<T, OP>(s, false, true, in + (size_t) wrap(r - 1, n) * cb + o, nullptr, cnt);
            for (int k = 1; ok && k < n - 1; ++k) {
                ok = ring_step<T, OP>(s, true, true, in + (size_t) wrap(r - 1 - k, n) * cb + o,
                                      nullptr, cnt);
            }
            ok = ok && ring_step<T, OP>(s, true, false, in + (size_t) r * cb + o, out + o, cnt);
            break;
        case CGPU_CUDA_RING_ALLGATHER:
            ok = ring_step<T, OP>(s, false, true, in + o, out + (size_t) r * cb + o, cnt);
            for (int k = 1; ok && k < n; ++k) {
                ok = ring_step<T, OP>(s, true, k < n - 1, nullptr, out + (size_t) wrap(r - k, n) * cb + o,
                                      cnt);
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
            ok = exscan_step<T, OP>(s, r > 0, r < n - 1, in + o, r > 0 ? out + o : nullptr, cnt);
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

/* ---- alltoall: see cgpu_cuda_a2a_args_t. Send blocks store into the receiver's slots
 * over NVLink; receive blocks copy out of their own inbox; nothing waits on anything but
 * the one peer of its channel, so all peers are in flight at once. ---- */
#if CGPU_PART(0)
/* part b of an alltoall: a send (even b) or receive channel, or a share of the own copy
 * (b >= nio); false after a timeout */
__device__ bool a2a_part(const cgpu_cuda_a2a_args_t &a, int b)
{
    const int n = a.nranks, me = a.rank;
    const int nio = 2 * (n - 1) * a.cpd;
    const uint8_t *in = (const uint8_t *) a.in;
    uint8_t *out = (uint8_t *) a.out;
    if (b >= nio) { /* own block: a plain local copy */
        const int k = b - nio;
        const size_t per = ((a.bytes + a.nself - 1) / a.nself + 15) & ~(size_t) 15;
        size_t first = (size_t) k * per, last = first + per;
        first = first < a.bytes ? first : a.bytes;
        last = last < a.bytes ? last : a.bytes;
        reduce_copy<uint8_t, CGPU_OP_SUM>(out + (size_t) me * a.bytes + first, nullptr, nullptr,
                                          in + (size_t) me * a.bytes + first,
                                          last - first);
        return true;
    }
    const bool sender = 0 == (b & 1);
    const int idx = b >> 1, d = 1 + idx / a.cpd, j = idx % a.cpd;
    const int c = (d - 1) * a.cpd_max + j;
    const int peer = sender ? wrap(me - d, n) : wrap(me + d, n);
    uint64_t *myf = (uint64_t *) a.inbox[me];
    uint64_t *pf = (uint64_t *) a.inbox[peer];
    const size_t rfirst = (size_t) j * a.region;
    for (int k = 0; k < a.nchunks; ++k) {
        const uint64_t item = a.base[c] + (uint64_t) k;
        size_t first = rfirst + (size_t) k * a.chunk, last = first + a.chunk;
        const size_t rlast = rfirst + a.region;
        last = last < rlast ? last : rlast;
        first = first < a.bytes ? first : a.bytes;
        last = last < a.bytes ? last : a.bytes;
        last = last > first ? last : first;
        const size_t slot = ((size_t) c * a.nslots + item % a.nslots) * a.slot_bytes;
        if (sender) {
            if (item >= (uint64_t) a.nslots &&
                !block_wait_ge(myf + CGPU_CUDA_FLAG_A2A_CONSUMED(c), item + 1 - a.nslots,
                               a.timeout_ns, a.err, CGPU_CUDA_ERR_A2A_CONSUMED, peer)) {
                return false;
            }
            reduce_copy<uint8_t, CGPU_OP_SUM>((uint8_t *) a.inbox[peer] + a.a2a_off + slot, nullptr,
                                              nullptr,
                                              in + (size_t) peer * a.bytes + first,
                                              last - first);
            block_publish(pf + CGPU_CUDA_FLAG_A2A_POSTED(c), item + 1);
        } else {
            if (!block_wait_ge(myf + CGPU_CUDA_FLAG_A2A_POSTED(c), item + 1, a.timeout_ns, a.err,
                               CGPU_CUDA_ERR_A2A_POSTED, peer)) {
                return false;
            }
            reduce_copy<uint8_t, CGPU_OP_SUM>(out + (size_t) peer * a.bytes + first,
                                              nullptr,
                                              (const uint8_t *) a.inbox[me] + a.a2a_off + slot,
                                              nullptr, last - first);
            __syncthreads();
            if (0 == threadIdx.x) {
                store_flag(pf + CGPU_CUDA_FLAG_A2A_CONSUMED(c), item + 1);
            }
        }
    }
    return true;
}

/* even grids (CGPU_CUDA_GRID_DOC): a channel's send and receive run at once */
__global__ void a2a_kernel(const cgpu_cuda_a2a_args_t a)
{
    const int parts = 2 * (a.nranks - 1) * a.cpd + a.nself;
    CGPU_EACH_PART((int) blockIdx.x, parts, (int) gridDim.x, a2a_part(a, part_));
}

#endif /* CGPU_PART(0) */
/* ---- tree allreduce: block 2c reduces channel c up a binary tree rooted at rank 0 (the
 * root also starts the broadcast), block 2c+1 carries the broadcast down. Reduce and
 * broadcast of different chunks overlap; a rank's broadcast block only ever writes a
 * chunk of `out` after the root has its contribution to it, so in place is safe. ---- */

__device__ __forceinline__ char *tree_slot(char *inbox, const cgpu_cuda_tree_args_t &a, int c,
                                          int port, uint64_t item)
{
    return inbox + a.tree_off +
           (((size_t) c * CGPU_CUDA_TREE_PORTS + port) * a.nslots + item % a.nslots) * a.slot_bytes;
}

/* part 2c + role of a tree allreduce; false after a timeout */
template <typename T, int OP> __device__ bool tree_part(const cgpu_cuda_tree_args_t &a, int part)
{
    const int c = part / 2, role = part % 2, r = a.rank;
    const int parent = 0 == r ? -1 : (r - 1) / 2;
    const int me_as_child = 0 == r ? 0 : (r - 1) - 2 * parent; /* 0 or 1 */
    int nkids = 0;
    for (int j = 0; j < 2; ++j) {
        nkids += nullptr != a.child_inbox[j];
    }
    uint64_t *myf = (uint64_t *) a.my_inbox;
    const T *in = (const T *) a.in;
    T *out = (T *) a.out;
    const uint64_t base = a.base[c];
    if (1 == role && parent < 0) {
        return true; /* the root's reduce block starts the broadcast itself */
    }
    for (int k = 0; k < a.nchunks; ++k) {
        const uint64_t item = base + k;
        size_t first = (size_t) c * a.region + (size_t) k * a.chunk;
        size_t last = first + a.chunk;
        const size_t rend = ((size_t) c + 1) * a.region;
        last = last < rend ? last : rend;
        first = first < a.count ? first : a.count;
        last = last < a.count ? last : a.count;
        last = last > first ? last : first;
        const size_t cnt = last - first;
        T *down[2] = {nullptr, nullptr};

        if (0 == role) {
            /* inputs from the children */
            const T *kid[2] = {nullptr, nullptr};
            for (int j = 0; j < nkids; ++j) {
                if (!block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_POSTED(c, j), item + 1, a.timeout_ns,
                                   a.err, CGPU_CUDA_ERR_TREE_POSTED, c)) {
                    return false;
                }
                kid[j] = (const T *) tree_slot(a.my_inbox, a, c, j, item);
            }
            /* where the partial (or, at the root, final) result goes */
            T *up = nullptr;
            if (parent >= 0) {
                if (item >= (uint64_t) a.nslots &&
                    !block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 0), item + 1 - a.nslots,
                                   a.timeout_ns, a.err, CGPU_CUDA_ERR_TREE_CONSUMED, c)) {
                    return false;
                }
                up = (T *) tree_slot(a.parent_inbox, a, c, me_as_child, item);
            } else {
                for (int j = 0; j < nkids; ++j) {
                    if (item >= (uint64_t) a.nslots &&
                        !block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 1 + j),
                                       item + 1 - a.nslots, a.timeout_ns, a.err,
                                       CGPU_CUDA_ERR_TREE_CONSUMED, c)) {
                        return false;
                    }
                    down[j] = (T *) tree_slot(a.child_inbox[j], a, c, 2, item);
                }
            }
            T *d_local = parent >= 0 ? nullptr : out + first;
            if (0 == nkids) {
                reduce_copy<T, OP>(up, nullptr, nullptr, in + first, cnt);
            } else if (1 == nkids) {
                reduce_copy<T, OP>(parent >= 0 ? up : d_local, down[0], kid[0], in + first, cnt);
            } else {
                /* two children: kid0 op in into out (scratch until the broadcast brings
                 * the final chunk), then kid1 op that to its destinations */
                reduce_copy<T, OP>(out + first, nullptr, kid[0], in + first, cnt);
                __syncthreads();
                reduce_copy<T, OP>(parent >= 0 ? up : d_local, down[0], kid[1], out + first, cnt,
                                   down[1]);
            }
            __syncthreads();
            if (0 == threadIdx.x) {
                if (parent >= 0) {
                    store_release_sys((uint64_t *) a.parent_inbox + CGPU_CUDA_FLAG_TREE_POSTED(c, me_as_child),
                                      item + 1);
                } else {
                    for (int j = 0; j < nkids; ++j) {
                        store_release_sys((uint64_t *) a.child_inbox[j] + CGPU_CUDA_FLAG_TREE_POSTED(c, 2),
                                          item + 1);
                    }
                }
                for (int j = 0; j < nkids; ++j) { /* children's slots are free again */
                    store_release_sys((uint64_t *) a.child_inbox[j] + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 0),
                                      item + 1);
                }
            }
        } else {
            /* broadcast: take the final chunk from the parent, keep it, pass it down */
            if (!block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_POSTED(c, 2), item + 1, a.timeout_ns,
                               a.err, CGPU_CUDA_ERR_TREE_POSTED, c)) {
                return false;
            }
            const T *src = (const T *) tree_slot(a.my_inbox, a, c, 2, item);
            for (int j = 0; j < nkids; ++j) {
                if (item >= (uint64_t) a.nslots &&
                    !block_wait_ge(myf + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 1 + j), item + 1 - a.nslots,
                                   a.timeout_ns, a.err, CGPU_CUDA_ERR_TREE_CONSUMED, c)) {
                    return false;
                }
                down[j] = (T *) tree_slot(a.child_inbox[j], a, c, 2, item);
            }
            reduce_copy<T, OP>(out + first, down[0], src, nullptr, cnt, down[1]);
            __syncthreads();
            if (0 == threadIdx.x) {
                for (int j = 0; j < nkids; ++j) {
                    store_release_sys((uint64_t *) a.child_inbox[j] + CGPU_CUDA_FLAG_TREE_POSTED(c, 2),
                                      item + 1);
                }
                store_release_sys((uint64_t *) a.parent_inbox + CGPU_CUDA_FLAG_TREE_CONSUMED(c, 1 + me_as_child),
                                  item + 1);
            }
        }
    }
    return true;
}

/* even grids (CGPU_CUDA_GRID_DOC): a channel's reduce and broadcast run at once */
template <typename T, int OP> __global__ void tree_kernel(const cgpu_cuda_tree_args_t a)
{
    CGPU_EACH_PART((int) blockIdx.x, 2 * a.nch, (int) gridDim.x, (tree_part<T, OP>(a, part_)));
}

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
__device__ __forceinline__ bool oneshot_sync(const cgpu_cuda_oneshot_args_t &a, int b,
                                             uint64_t *ts)
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
            reduce_copy<uint8_t, CGPU_OP_SUM>(out + first, nullptr,
                                              (const uint8_t *) oneshot_slice(a, me, a.root) + first,
                                              nullptr, cnt);
        }
        return;
    }
    const uint8_t *in = (const uint8_t *) a.in;
    const uint8_t *own = CGPU_CUDA_ONESHOT_ALLTOALL == mode ? in + (size_t) me * a.count : in;
    for (int p = 0; p < n; ++p) {
        uint8_t *dst = out + (size_t) p * a.count + first;
        if (p != me) {
            reduce_copy<uint8_t, CGPU_OP_SUM>(dst, nullptr,
                                              (const uint8_t *) oneshot_slice(a, me, p) + first,
                                              nullptr, cnt);
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
    const T *mine = (const T *) a.in +
                    (CGPU_CUDA_RING_REDUCE_SCATTER == a.mode ? (size_t) me * a.count : 0);
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
               (uintptr_t) a.slice_bytes) & 15)) {
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
 * the call, hands it on and finds its code path meanwhile (0.4-0.5 us of a small call,
 * session 40). Block 0's warp 0 polls the gate word in mapped host memory; the block waits
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
                *(volatile uint64_t *) a.verdict = open ? a.gate_val : a.gate_val | CGPU_CUDA_GATE_BACK;
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

/* ---- LL calls (cgpu_cuda_kernels.h: CGPU_CUDA_ONESHOT_LL) ---- */

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
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst),
                 "r"((uint32_t) v), "r"(n), "r"((uint32_t) (v >> 32)), "r"(n)
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
template <typename T, int OP> __device__ __forceinline__ uint64_t ll_combine(uint64_t acc, uint64_t x)
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
 * (the batches below cost calls of up to 2 KiB 0.1-0.7 us more under MPS, session 17) */
template <typename T, int OP>
__device__ __forceinline__ void ll_body_one(const cgpu_cuda_oneshot_args_t &a, const int lo,
                                            const int hi, uint64_t *ts)
{
    const int n = a.nranks, me = a.rank, mode = CGPU_CUDA_ONESHOT_BASE(a.mode), root = a.root;
    const bool copies = CGPU_CUDA_ONESHOT_COPIES(mode);
    const size_t len = a.count * (copies ? 1 : sizeof(T)); /* bytes of one block */
    const bool blocks = CGPU_CUDA_RING_REDUCE_SCATTER == mode || CGPU_CUDA_ONESHOT_ALLTOALL == mode;
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
                    const uint8_t *own = in + (CGPU_CUDA_ONESHOT_ALLTOALL == mode ? (size_t) me * len : 0);
                    uint8_t *dst = out + (size_t) me * len;
                    if (own != dst) {
                        ll_scatter(dst, off, len, ll_gather(own, off, len));
                    }
                }
            }
        } else {
            /* rank order, as oneshot_reduce: every rank computes identical bits; every
             * peer's line is taken (LL's rule), those past the scans' folds unused */
            const uint8_t *mine = in + (CGPU_CUDA_RING_REDUCE_SCATTER == mode ? (size_t) me * len : 0);
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
__device__ __forceinline__ void ll_body(const cgpu_cuda_oneshot_args_t &a, const int b, uint64_t *ts)
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
                v[u] = data ? ll_gather(in + (blocks ? (size_t) p * len : 0), (size_t) l * 8, len) : 0;
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
                    const uint8_t *own = in + (CGPU_CUDA_ONESHOT_ALLTOALL == mode ? (size_t) me * len : 0);
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
            const uint8_t *mine = in + (CGPU_CUDA_RING_REDUCE_SCATTER == mode ? (size_t) me * len : 0);
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
            for (int u = 0; ok && folds > 0 && u < cnt && (CGPU_CUDA_RING_REDUCE != mode || me == root);
                 ++u) {
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

/* Whether no part of this launch has timed out (the record is the whole launch's: a later
 * part would only wait out the timeout again). Thread 0 alone reads the record, which is
 * mapped host memory: every thread of 32 blocks reading it took 200-400 us a call under
 * MPS (session 32). */
__device__ __forceinline__ bool oneshot_on(const cgpu_cuda_oneshot_args_t &a)
{
    return 0 == __syncthreads_or(0 == threadIdx.x && 0 != *(volatile unsigned long long *) a.err);
}

/* a block's parts in increasing order (CGPU_CUDA_GRID_DOC); the record is read only
 * before a second part, so a launch of a block a part never reads it */
template <typename T, int OP> __global__ void oneshot_kernel(const cgpu_cuda_oneshot_args_t a)
{
    for (int b = (int) blockIdx.x; b < a.nblocks; b += (int) gridDim.x) {
        if (b != (int) blockIdx.x && !oneshot_on(a)) {
            return;
        }
        (void) oneshot_body<T, OP>(a, b); /* no gate: always runs */
    }
}

/* ---- resident oneshot calls: the kernel stays on the device between calls and takes
 * each call from a descriptor the host writes into mapped host memory, so a small call
 * costs no launch and no stream synchronize. Block 0's warp 0 polls the descriptor (its
 * four 16-byte parts each carry a tag made of the descriptor's number and the part's field:
 * one 64-byte read over PCIe takes a whole, checked descriptor) and hands it on in the same
 * form (a mailbox of four tagged parts) to the blocks that work on the call; every working
 * block runs its part of the oneshot protocol above (the same inbox slots, flags and call
 * numbers as a launched oneshot, so a peer may run either) and then publishes the number
 * in its own completion word, which the host reads. Block 0 alone decides that the kernel
 * ends (after idle_ns without a descriptor, or on an exit descriptor): it hands the end to
 * every block, so no block ever takes a call block 0 has given up (the host launches the
 * kernel again from the number it was waiting for). ---- */

__device__ __forceinline__ void load16_volatile(const void *p, uint64_t &x, uint64_t &y)
{
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p));
}

/* a mailbox part, generic address (this block's shared memory, another block's through the
 * cluster's window, or device memory) */
__device__ __forceinline__ void load16_volatile_any(const void *p, uint64_t &x, uint64_t &y)
{
    asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(x), "=l"(y) : "l"(p) : "memory");
}
__device__ __forceinline__ void store16_volatile_any(void *p, uint64_t x, uint64_t y)
{
    asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(x), "l"(y) : "memory");
}

/* Compute capability 9.0 and later: the kernel is one thread block cluster (at most 8
 * blocks, CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS) and block 0 stores each call straight into the
 * mailboxes in the working blocks' shared memory (distributed shared memory), where they
 * poll without leaving their SM. Before 9.0 (or with coll_gpu_cuda_resident_cluster off),
 * one mailbox in device memory (a.state) serves every block. Session 13's trace: handing each call on through the cluster's barrier and
 * waiting at a second barrier for every block to be done cost 0.9-1.0 us per call of
 * several blocks (0.1 for one block). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CGPU_RK_CLUSTER 1
__device__ __forceinline__ void cluster_sync_all()
{
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/* a call's four tagged parts (number n, fields f) into the mailboxes of this cluster's
 * blocks 1 .. count - 1, one part a lane of the calling warp */
__device__ __forceinline__ void cluster_hand_on(const cooperative_groups::cluster_group &cl,
                                                uint64_t *s_mb, const uint64_t *f, uint64_t n,
                                                int count, unsigned lane)
{
    for (int l = (int) lane; l < 4 * (count - 1); l += 32) {
        const uint64_t g = f[l & 3];
        store16_volatile_any(cl.map_shared_rank(s_mb, 1 + (l >> 2)) + 2 * (l & 3),
                             n ^ cgpu_cuda_resident_mix(g), g);
    }
}
#else
#define CGPU_RK_CLUSTER 0
#endif

/* the blocks a descriptor's call runs on (the end: every block) */
__device__ __forceinline__ int resident_nb(bool ex, uint64_t f2)
{
    return ex ? (int) gridDim.x : (int) (f2 >> CGPU_CUDA_RESIDENT_BLOCKS_SHIFT & 0xff);
}

/* 512 threads a block, coll_gpu_cuda_threads' default (the launch clamps a larger request):
 * left to itself the compiler gives this kernel 168-173 registers a thread, so it could
 * launch only 384, and a 4 KiB block's 512 LL lines took the batched LL path. The kernel's
 * phases measured the same either way on 2x H200 (session 37); the LL default of 32 KiB was
 * measured with 512. */
template <typename T, int OP>
__global__ void __launch_bounds__(512, 1) resident_kernel(const cgpu_cuda_resident_args_t a)
{
    __shared__ __align__(16) uint64_t s_mb[8]; /* this block's mailbox (clusters) */
    __shared__ uint64_t s_f[4], s_k;
    __shared__ int s_exit;
    __shared__ uint64_t s_ts[2]; /* block 0's stamps inside the oneshot body (trace) */
    /* the call's arguments, one copy a block in shared memory: a copy of each thread's own
     * (a run-time index into inbox[] puts it in local memory) cost the oneshot body a chain
     * of local loads on every call */
    __shared__ cgpu_cuda_oneshot_args_t s_o;
    if (0 == threadIdx.x) {
        s_o = a.o; /* the call's fields are written before each call's barrier below */
        s_o.gate_ns = a.idle_ns; /* a gate shut this long gives the call back (call_gate) */
        s_o.verdict = a.state + CGPU_CUDA_RESIDENT_VERDICT;
    }
    /* block 0 gave a gated call back (its gate stayed shut): it ends the kernel as an idle
     * one does, with the call's number, so the host launches it again from that call */
    bool given_back = false;
    uint64_t t_idle = global_ns(), t_seen = 0, t_fwd = 0;
    /* a.cluster: launched as one cluster (compute capability 9.0 and later, unless
     * coll_gpu_cuda_resident_cluster is off) */
    const bool clustered = CGPU_RK_CLUSTER && 0 != a.cluster;
    /* with clusters: the blocks of each cluster (cs), and whether this block is the first of
     * a cluster other than block 0's (a leader: it takes the calls of more than cs blocks,
     * and the end, from the mailbox in device memory and hands them on in its cluster) */
    unsigned cs = 0;
    bool leader = false;
#if CGPU_RK_CLUSTER
    cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
    if (clustered) {
        cs = cl.num_blocks();
        leader = 0 != blockIdx.x && 0 == cl.block_rank();
        if (threadIdx.x < 8) {
            s_mb[threadIdx.x] = 0; /* an earlier launch's parts may still be here */
        }
        cluster_sync_all(); /* every mailbox is clear before a block stores into one */
    }
#endif
    if ((0 == blockIdx.x || leader) && 0 == threadIdx.x && nullptr != a.placed) {
        /* the host holds other launches back until every cluster runs (a word each) */
        store_release_sys(a.placed + (clustered ? blockIdx.x / cs : 0), a.start);
    }
    /* a.state: zeroed before the launch */
    uint64_t *const mine = clustered && !leader ? s_mb : a.state;
    /* block 0: the descriptor it waits for; the others: the least number they may take (they
     * skip the calls they have no part in) */
    for (uint64_t k = a.start;; ++k) {
        if (threadIdx.x < 32) {
            const unsigned lane = threadIdx.x;
            if (0 == blockIdx.x) {
                /* warp 0 polls: lanes 0-3 read one 16-byte part each, one 64-byte read over
                 * PCIe per poll */
                for (unsigned it = 0;; ++it) {
                    uint64_t q = 0, f = 0;
                    if (lane < 4 && !given_back) {
                        load16_volatile(a.desc + 2 * lane, q, f);
                    }
                    if (!given_back &&
                        __all_sync(0xffffffffu, lane >= 4 || (q ^ cgpu_cuda_resident_mix(f)) == k)) {
                        if (lane < 4) {
                            s_f[lane] = f;
                        }
                        if (0 == lane && nullptr != a.trace) {
                            t_seen = global_ns();
                            a.trace[CGPU_CUDA_RK_TRACE_POLLS] += it + 1;
                            a.trace[CGPU_CUDA_RK_TRACE_IDLE] += t_seen - t_idle;
                        }
                        break;
                    }
                    int idle = 0;
                    if (0 == lane && 0 == (it & 3)) { /* a poll: ~1 us */
                        idle = given_back || global_ns() - t_idle > a.idle_ns;
                    }
                    if (__shfl_sync(0xffffffffu, idle, 0)) {
                        if (lane < 4) { /* the end, as an exit descriptor would say */
                            s_f[lane] = 2 == lane ? CGPU_CUDA_RESIDENT_EXIT : 0;
                        }
                        break;
                    }
                }
                __syncwarp();
                const int ex = 0 != (s_f[2] & CGPU_CUDA_RESIDENT_EXIT);
                if (0 == lane) {
                    s_exit = ex;
                }
                /* hand the call on to the blocks that work on it (the end: to every block),
                 * one 16-byte part per lane */
                const int nb = resident_nb(ex, s_f[2]);
                /* the mailbox in device memory: every other block without clusters, the
                 * other clusters' leaders with them */
                if ((clustered ? nb > (int) cs : nb > 1) && lane < 4) {
                    store16_volatile_any(a.state + 2 * lane,
                                         k ^ cgpu_cuda_resident_mix(s_f[lane]), s_f[lane]);
                }
#if CGPU_RK_CLUSTER
                if (clustered) { /* block 0's cluster's share */
                    cluster_hand_on(cl, s_mb, s_f, k, nb < (int) cs ? nb : (int) cs, lane);
                }
#endif
                if (0 == lane && nullptr != a.trace) {
                    t_fwd = global_ns();
                }
            } else {
                /* lanes 0-3 poll this block's mailbox: a whole one (the four parts tell the
                 * same number) of at least k */
                for (;;) {
                    uint64_t q = 0, f = 0, n = 0;
                    if (lane < 4) {
                        load16_volatile_any(mine + 2 * lane, q, f);
                        n = q ^ cgpu_cuda_resident_mix(f);
                    }
                    const uint64_t n0 = __shfl_sync(0xffffffffu, n, 0);
                    if (__all_sync(0xffffffffu, lane >= 4 || (n == n0 && n0 >= k))) {
                        if (lane < 4) {
                            s_f[lane] = f;
                        }
                        __syncwarp();
                        const bool ex = 0 != (s_f[2] & CGPU_CUDA_RESIDENT_EXIT);
                        if (0 == lane) {
                            s_k = n0;
                            s_exit = ex;
                        }
#if CGPU_RK_CLUSTER
                        if (leader) { /* on to the blocks of this cluster that work on it */
                            const int left = resident_nb(ex, s_f[2]) - (int) blockIdx.x;
                            cluster_hand_on(cl, s_mb, s_f, n0, left < (int) cs ? left : (int) cs,
                                            lane);
                        }
#endif
                        break;
                    }
                }
            }
            if (0 == lane) { /* s_f is this warp's (after its __syncwarp) */
                s_o.in = (const void *) s_f[0];
                s_o.out = (void *) s_f[1];
                s_o.count = (size_t) (s_f[2] & CGPU_CUDA_RESIDENT_COUNT_MASK);
                s_o.mode = (int) (s_f[2] >> CGPU_CUDA_RESIDENT_MODE_SHIFT & 0xff);
                s_o.nblocks = (int) (s_f[2] >> CGPU_CUDA_RESIDENT_BLOCKS_SHIFT & 0xff);
                s_o.root = (int) (s_f[2] >> CGPU_CUDA_RESIDENT_ROOT_SHIFT & 0x7f);
                s_o.seq = s_f[3];
                s_o.gate = 0 != (s_f[2] & CGPU_CUDA_RESIDENT_GATED) ? a.gate : nullptr;
                s_o.gate_val = 0 == blockIdx.x ? k : s_k;
            }
        }
        __syncthreads();
        if (0 != blockIdx.x) {
            k = s_k;
        }
        if (s_exit) {
#if CGPU_RK_CLUSTER
            if (clustered) {
                cluster_sync_all(); /* stores into the others' shared memory are done */
            }
#endif
            if (0 == blockIdx.x && 0 == threadIdx.x) {
                __threadfence_system();
                store_flag(a.exited, given_back ? k - 1 : k); /* k - 1: the call given back */
            }
            return;
        }
        const bool traced = nullptr != a.trace && 0 == blockIdx.x;
        if ((int) blockIdx.x < s_o.nblocks) {
            if (!oneshot_body<T, OP>(s_o, (int) blockIdx.x, traced ? s_ts : nullptr)) {
                /* given back at its gate (every block of the call alike): no completion;
                 * block 0's next round ends the kernel (descriptor k + 1 to the others,
                 * which wait for one past k; this call's number to the host) */
                given_back = true;
                __syncthreads(); /* s_f, s_k and s_exit are read (as below) */
                t_idle = global_ns();
                continue;
            }
            __syncthreads(); /* every thread's part of the result, before the release */
            if (0 == threadIdx.x) {
                const uint64_t t_body = traced ? global_ns() : 0;
                /* GPU scope: the host reads only this word, and the result went to this
                 * device's memory, which whatever the application does next reads through
                 * this GPU's L2 (the peers' inboxes are the protocol's business, with its own
                 * system-scope releases) */
                store_release_gpu(a.completed + blockIdx.x, k);
                if (traced) {
                    const uint64_t t_done = global_ns();
                    unsigned long long *tr = a.trace;
                    tr[CGPU_CUDA_RK_TRACE_CALLS] += 1;
                    tr[CGPU_CUDA_RK_TRACE_HANDOFF] += t_fwd - t_seen;
                    tr[CGPU_CUDA_RK_TRACE_WRITE] += s_ts[0] - t_fwd;
                    tr[CGPU_CUDA_RK_TRACE_PEERS] += s_ts[1] - s_ts[0];
                    tr[CGPU_CUDA_RK_TRACE_REDUCE] += t_body - s_ts[1];
                    tr[CGPU_CUDA_RK_TRACE_DONE] += t_done - t_body;
                }
            }
        }
        __syncthreads(); /* s_f, s_k and s_exit are read before warp 0 writes them again */
        t_idle = global_ns();
    }
}

/* ---- copy-engine reduce, root side: every block waits for each piece in turn, then
 * reduces its slice of it (whole 16-byte vectors); the landed data is read through L2 ---- */
template <typename T, int OP> __global__ void ce_reduce_kernel(const cgpu_cuda_ce_reduce_args_t a)
{
    constexpr size_t V = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
    T *out = (T *) a.out, *out2 = (T *) a.out2;
    const T *in = (const T *) a.in;
    for (int p = 0; p < a.npieces; ++p) {
        if (!block_wait_ge(a.flag, a.base + (uint64_t) p + 1, a.timeout_ns, a.err,
                           CGPU_CUDA_ERR_CE, a.peer)) {
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

/* ---- dispatch: (dtype, op) -> kernel instance ---- */

template <template <typename, int> class K, typename Args>
int launch_typed(const Args *a, cgpu_dtype_t dt, cgpu_op_t op, int blocks, int threads,
                 cudaStream_t st);

/* Threads per block, clamped to what this kernel instance can launch with (its
 * register use decides), in whole warps: a too-large coll_gpu_cuda_threads must never
 * turn into a launch failure on one rank and a hang on the others. */
template <typename F> int fit_threads(F *kernel, int want)
{
    cudaFuncAttributes at;
    if (cudaSuccess != cudaFuncGetAttributes(&at, kernel)) {
        (void) cudaGetLastError();
        return want < 256 ? want : 256;
    }
    int t = want < at.maxThreadsPerBlock ? want : at.maxThreadsPerBlock;
    return t < 32 ? 32 : t / 32 * 32;
}

/* fit_threads(kernel, want), cached per kernel instance: want and its fit in one word, so a
 * clamped request (the fit below want) is not looked up again at every launch */
template <typename F> int cached_fit(std::atomic<unsigned long long> &c, F *kernel, int want)
{
    const unsigned long long w = c.load(std::memory_order_relaxed);
    if (0 != w && (int) (w >> 32) == want) {
        return (int) (w & 0xffffffffu);
    }
    const int fit = fit_threads(kernel, want);
    c.store((unsigned long long) (unsigned) want << 32 | (unsigned) fit, std::memory_order_relaxed);
    return fit;
}

/* The blocks a launch of `parts` parts takes: the caller's grid (0: one block a part),
 * at most one a part, a multiple of `pair` (CGPU_CUDA_GRID_DOC) */
static inline int grid_of(int grid, int parts, int pair)
{
    int g = grid > 0 && grid < parts ? grid : parts;
    g = g / pair * pair;
    return g >= pair ? g : pair;
}

template <typename T, int OP> struct RingK {
    static void go(const cgpu_cuda_ring_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, ring_kernel<T, OP>, threads);
        ring_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
};
template <typename T, int OP> struct RingXK {
    static void go(const cgpu_cuda_ring_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, ringx_kernel<T, OP>, threads);
        ringx_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
};
template <typename T, int OP> struct TreeK {
    static void go(const cgpu_cuda_tree_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, tree_kernel<T, OP>, threads);
        tree_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
};
template <typename T, int OP> struct CeReduceK {
    static void go(const cgpu_cuda_ce_reduce_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, ce_reduce_kernel<T, OP>, threads);
        ce_reduce_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
};
template <typename T, int OP> struct ResidentK {
    static void go(const cgpu_cuda_resident_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, resident_kernel<T, OP>, threads);
        if (!a->cluster) {
            resident_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
            return;
        }
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        /* the whole grid one cluster, or clusters of CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS */
        at[0].val.clusterDim.x = (unsigned) (blocks < CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS
                                                 ? blocks
                                                 : CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS);
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned) blocks);
        cfg.blockDim = dim3((unsigned) fit);
        cfg.stream = st;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        (void) cudaLaunchKernelEx(&cfg, resident_kernel<T, OP>, *a); /* its error: last error */
    }
};
template <typename T, int OP> struct OneshotK {
    static void go(const cgpu_cuda_oneshot_args_t *a, int blocks, int threads, cudaStream_t st)
    {
        static std::atomic<unsigned long long> fitc{0};
        const int fit = cached_fit(fitc, oneshot_kernel<T, OP>, threads);
        oneshot_kernel<T, OP><<<blocks, fit, 0, st>>>(*a);
    }
};

/* Loads every instance (CUDA loads kernels lazily by default, at their first launch, and
 * that load waits for the kernels already running on the device: if those are ours,
 * spinning until a peer catches up, and the peer is blocked the same way, both hang). */
template <typename T, int OP> struct PreloadK {
    static void go(const int *a, int blocks, int threads, cudaStream_t st)
    {
        (void) a, (void) blocks, (void) threads, (void) st;
        cudaFuncAttributes at;
#if CGPU_PART(0)
        (void) cudaFuncGetAttributes(&at, ring_kernel<T, OP>);
        (void) cudaFuncGetAttributes(&at, ringx_kernel<T, OP>);
#endif
#if CGPU_PART(1)
        (void) cudaFuncGetAttributes(&at, tree_kernel<T, OP>);
        (void) cudaFuncGetAttributes(&at, ce_reduce_kernel<T, OP>);
#endif
#if CGPU_PART(2)
        (void) cudaFuncGetAttributes(&at, oneshot_kernel<T, OP>);
#endif
#if CGPU_PART(3)
        (void) cudaFuncGetAttributes(&at, resident_kernel<T, OP>);
#endif
    }
};

/* Integer ops other than MIN/MAX are the same bits for signed and unsigned: they use
 * the unsigned instance of the same width (fewer kernels to compile). */
#define CGPU_DISPATCH_INT(K, U, S)                                                       \
    switch (op) {                                                                        \
    case CGPU_OP_SUM: K<U, CGPU_OP_SUM>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_PROD: K<U, CGPU_OP_PROD>::go(a, blocks, threads, st); return 0;         \
    case CGPU_OP_MIN: K<S, CGPU_OP_MIN>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_MAX: K<S, CGPU_OP_MAX>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_LAND: K<U, CGPU_OP_LAND>::go(a, blocks, threads, st); return 0;         \
    case CGPU_OP_LOR: K<U, CGPU_OP_LOR>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_LXOR: K<U, CGPU_OP_LXOR>::go(a, blocks, threads, st); return 0;         \
    case CGPU_OP_BAND: K<U, CGPU_OP_BAND>::go(a, blocks, threads, st); return 0;         \
    case CGPU_OP_BOR: K<U, CGPU_OP_BOR>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_BXOR: K<U, CGPU_OP_BXOR>::go(a, blocks, threads, st); return 0;         \
    default: return (int) cudaErrorInvalidValue;                                         \
    }
#define CGPU_DISPATCH_FLOAT(K, F)                                                        \
    switch (op) {                                                                        \
    case CGPU_OP_SUM: K<F, CGPU_OP_SUM>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_PROD: K<F, CGPU_OP_PROD>::go(a, blocks, threads, st); return 0;         \
    case CGPU_OP_MIN: K<F, CGPU_OP_MIN>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_MAX: K<F, CGPU_OP_MAX>::go(a, blocks, threads, st); return 0;           \
    default: return (int) cudaErrorInvalidValue;                                         \
    }
#define CGPU_DISPATCH_LOC(K, V, I)                                                       \
    switch (op) {                                                                        \
    case CGPU_OP_MINLOC: K<Loc<V, I>, CGPU_OP_MINLOC>::go(a, blocks, threads, st); return 0; \
    case CGPU_OP_MAXLOC: K<Loc<V, I>, CGPU_OP_MAXLOC>::go(a, blocks, threads, st); return 0; \
    default: return (int) cudaErrorInvalidValue;                                         \
    }
#define CGPU_DISPATCH_COMPLEX(K, C)                                                      \
    switch (op) {                                                                        \
    case CGPU_OP_SUM: K<C, CGPU_OP_SUM>::go(a, blocks, threads, st); return 0;           \
    case CGPU_OP_PROD: K<C, CGPU_OP_PROD>::go(a, blocks, threads, st); return 0;         \
    default: return (int) cudaErrorInvalidValue;                                         \
    }

template <template <typename, int> class K, typename Args>
int dispatch(const Args *a, cgpu_dtype_t dt, cgpu_op_t op, int blocks, int threads,
             cudaStream_t st)
{
    switch (dt) {
    case CGPU_DT_INT8: CGPU_DISPATCH_INT(K, uint8_t, int8_t)
    case CGPU_DT_UINT8: CGPU_DISPATCH_INT(K, uint8_t, uint8_t)
    case CGPU_DT_BOOL: CGPU_DISPATCH_INT(K, uint8_t, uint8_t)
    case CGPU_DT_INT16: CGPU_DISPATCH_INT(K, uint16_t, int16_t)
    case CGPU_DT_UINT16: CGPU_DISPATCH_INT(K, uint16_t, uint16_t)
    case CGPU_DT_INT32: CGPU_DISPATCH_INT(K, uint32_t, int32_t)
    case CGPU_DT_UINT32: CGPU_DISPATCH_INT(K, uint32_t, uint32_t)
    case CGPU_DT_INT64: CGPU_DISPATCH_INT(K, uint64_t, int64_t)
    case CGPU_DT_UINT64: CGPU_DISPATCH_INT(K, uint64_t, uint64_t)
    case CGPU_DT_FLOAT32: CGPU_DISPATCH_FLOAT(K, float)
    case CGPU_DT_FLOAT64: CGPU_DISPATCH_FLOAT(K, double)
    case CGPU_DT_COMPLEX64: CGPU_DISPATCH_COMPLEX(K, float2)
    case CGPU_DT_COMPLEX128: CGPU_DISPATCH_COMPLEX(K, double2)
    case CGPU_DT_FLOAT_INT: CGPU_DISPATCH_LOC(K, float, int)
    case CGPU_DT_2INT: CGPU_DISPATCH_LOC(K, int, int)
    case CGPU_DT_2FLOAT: CGPU_DISPATCH_LOC(K, float, float)
    case CGPU_DT_2DOUBLE: CGPU_DISPATCH_LOC(K, double, double)
    case CGPU_DT_SHORT_INT: CGPU_DISPATCH_LOC(K, short, int)
    case CGPU_DT_DOUBLE_INT: CGPU_DISPATCH_LOC(K, double, int)
    case CGPU_DT_LONG_INT: CGPU_DISPATCH_LOC(K, long, int)
    default: return (int) cudaErrorInvalidValue;
    }
}

/* this part's instances of every supported (type, op), loaded (see PreloadK) */
void preload_part()
{
    const int none = 0;
    for (int d = 0; d < CGPU_DT_COUNT; ++d) {
        for (int o = 0; o < CGPU_OP_COUNT; ++o) {
            const cgpu_dtype_t dt = (cgpu_dtype_t) d;
            const cgpu_op_t op = (cgpu_op_t) o;
            if (cgpu_dtype_on_device(dt) && cgpu_reduce_supported(dt, op)) {
                (void) dispatch<PreloadK>(&none, dt, op, 0, 0, (cudaStream_t) 0);
            }
        }
    }
}

} /* namespace */

/* the other parts' loaders (each defined in its own part) */
#ifdef CGPU_KERNELS_PART
extern "C" int cgpu_cuda_kernels_preload_1(void);
extern "C" int cgpu_cuda_kernels_preload_2(void);
extern "C" int cgpu_cuda_kernels_preload_3(void);
#endif
#if defined(CGPU_KERNELS_PART) && CGPU_KERNELS_PART > 0
#define CGPU_PRELOAD_FN2(n) cgpu_cuda_kernels_preload_##n
#define CGPU_PRELOAD_FN(n) CGPU_PRELOAD_FN2(n)
extern "C" int CGPU_PRELOAD_FN(CGPU_KERNELS_PART)(void)
{
    preload_part();
    return (int) cudaGetLastError();
}
#endif

#if CGPU_PART(0)
extern "C" int cgpu_cuda_reduce_supported(cgpu_dtype_t dt, cgpu_op_t op)
{
    return cgpu_dtype_on_device(dt) && cgpu_reduce_supported(dt, op);
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
                 : dispatch<RingXK>(a, dt, op, blocks, threads, (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_ring_copy_launch(const cgpu_cuda_ring_args_t *a, int threads, void *stream)
{
    RingXK<uint8_t, CGPU_OP_SUM>::go(a, grid_of(a->grid, a->nch, 1), threads,
                                     (cudaStream_t) stream);
    return (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_a2a_launch(const cgpu_cuda_a2a_args_t *a, int threads, void *stream)
{
    static std::atomic<unsigned long long> fitc{0};
    const int fit = cached_fit(fitc, a2a_kernel, threads);
    const int blocks = grid_of(a->grid, 2 * (a->nranks - 1) * a->cpd + a->nself, 2);
    a2a_kernel<<<blocks, fit, 0, (cudaStream_t) stream>>>(*a);
    return (int) cudaGetLastError();
}

namespace {
__global__ void release_kernel(const cgpu_cuda_release_args_t a)
{
    if ((int) threadIdx.x < a.n && nullptr != a.word[threadIdx.x]) {
        __threadfence_system(); /* after every store this stream made to that inbox */
        atomicAdd_system(a.word[threadIdx.x], 1ull);
    }
}

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

extern "C" int cgpu_cuda_ce_sync(const cgpu_cuda_ce_sync_args_t *a, void *stream)
{
    ce_sync_kernel<<<1, CGPU_CUDA_MAX_RANKS, 0, (cudaStream_t) stream>>>(*a);
    return (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_release_signal(const cgpu_cuda_release_args_t *a, void *stream)
{
    release_kernel<<<1, CGPU_CUDA_MAX_RANKS, 0, (cudaStream_t) stream>>>(*a);
    return (int) cudaGetLastError();
}

#endif /* CGPU_PART(0) */

#if CGPU_PART(1)
extern "C" int cgpu_cuda_tree_allreduce(const cgpu_cuda_tree_args_t *a, cgpu_dtype_t dt,
                                        cgpu_op_t op, int threads, void *stream)
{
    if (!cgpu_cuda_reduce_supported(dt, op)) {
        return (int) cudaErrorInvalidValue;
    }
    int rc = dispatch<TreeK>(a, dt, op, grid_of(a->grid, 2 * a->nch, 2), threads,
                             (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
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

#endif /* CGPU_PART(1) */

#if CGPU_PART(2)
extern "C" int cgpu_cuda_oneshot_launch(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt,
                                        cgpu_op_t op, int threads, void *stream)
{
    if (CGPU_CUDA_ONESHOT_COPIES(CGPU_CUDA_ONESHOT_BASE(a->mode))) {
        OneshotK<uint8_t, CGPU_OP_SUM>::go(a, grid_of(a->grid, a->nblocks, 1), threads,
                                           (cudaStream_t) stream);
        return (int) cudaGetLastError();
    }
    if (!cgpu_cuda_reduce_supported(dt, op)) {
        return (int) cudaErrorInvalidValue;
    }
    int rc = dispatch<OneshotK>(a, dt, op, grid_of(a->grid, a->nblocks, 1), threads,
                                (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}

#endif /* CGPU_PART(2) */

#if CGPU_PART(3)
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
    int rc = dispatch<ResidentK>(a, dt, op, blocks, threads, (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}

extern "C" int cgpu_cuda_resident_cluster(void)
{
    int dev = 0, major = 0, cluster = 0;
    return cudaSuccess == cudaGetDevice(&dev) &&
           cudaSuccess == cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) &&
           cudaSuccess == cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, dev) &&
           major >= 9 && 0 != cluster;
}

#endif /* CGPU_PART(3) */

#if CGPU_PART(0)
extern "C" int cgpu_cuda_kernels_preload(void)
{
    preload_part();
    cudaFuncAttributes at;
    (void) cudaFuncGetAttributes(&at, a2a_kernel);
    (void) cudaFuncGetAttributes(&at, release_kernel);
    (void) cudaFuncGetAttributes(&at, ce_sync_kernel);
    (void) cudaFuncGetAttributes(&at, ringx_kernel<uint8_t, CGPU_OP_SUM>);
    int rc = (int) cudaGetLastError();
#ifdef CGPU_KERNELS_PART
    const int more[] = {cgpu_cuda_kernels_preload_1(), cgpu_cuda_kernels_preload_2(),
                        cgpu_cuda_kernels_preload_3()};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); ++i) {
        rc = 0 != rc ? rc : more[i];
    }
#endif
    return rc;
}
#endif /* CGPU_PART(0) */
