/*
 * coll/gpu kernels: the host side every family's launcher shares: threads and grid fitted
 * to a kernel instance, the (type, op) -> instance dispatch, and the preload of a family's
 * instances. Included by each kernels/cgpu_cuda_*.cu after its kernels.
 */
#ifndef CGPU_CUDA_LAUNCH_CUH
#define CGPU_CUDA_LAUNCH_CUH

#include <atomic>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cgpu_cuda_device.cuh"
#include "cgpu_cuda_kernels.h"

/* Each family's loader (cgpu_cuda_kernels_preload calls them all): it loads every instance
 * of the family's kernels and returns 0 or a cudaError_t value. */
int cgpu_cuda_ring_preload(void);
int cgpu_cuda_ringx_preload(void);
int cgpu_cuda_a2a_preload(void);
int cgpu_cuda_tree_preload(void);
int cgpu_cuda_oneshot_preload(void);
int cgpu_cuda_resident_preload(void);
int cgpu_cuda_ce_reduce_preload(void);
int cgpu_cuda_ce_sync_preload(void);
int cgpu_cuda_release_preload(void);

/* A reducing ring mode other than the allreduce on cgpu_cuda_ringx.cu's kernel (the ring
 * launcher, cgpu_cuda_ring_reduce_launch, takes every reducing mode). */
int cgpu_cuda_ringx_dispatch(const cgpu_cuda_ring_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int blocks, int threads, cudaStream_t st);

/* Type groups. A family with too many instances for one ptxas run (a minute at most on one
 * core) builds them in one object per group, cgpu_cuda_<family>_<group>.cu: the kernel
 * header of the family (cgpu_cuda_<family>.cuh) defines <family>_types<G>, a launch of any
 * (type, op) of group G, and <family>_types_preload<G>, each group's object instantiates
 * both for its group, and the family's launcher (cgpu_cuda_<family>.cu) calls the one of
 * the launch's type (dispatch_split). */
enum {
    CGPU_TYPES_I8 = 0,
    CGPU_TYPES_I16,
    CGPU_TYPES_I32,
    CGPU_TYPES_I64,
    CGPU_TYPES_FLOAT,
    CGPU_TYPES_PAIR,
    CGPU_TYPES_COUNT
};

/* a launch of the instances of one type group */
template <typename Args>
using cgpu_cuda_types_fn = int (*)(const Args *a, cgpu_dtype_t dt, cgpu_op_t op, int blocks,
                                   int threads, cudaStream_t st);

/* the split families' groups (cgpu_cuda_oneshot_<group>.cu, cgpu_cuda_resident_<group>.cu) */
template <int G>
int cgpu_cuda_oneshot_types(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                            int blocks, int threads, cudaStream_t st);
template <int G> int cgpu_cuda_oneshot_types_preload(void);
template <int G>
int cgpu_cuda_resident_types(const cgpu_cuda_resident_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int blocks, int threads, cudaStream_t st);
template <int G> int cgpu_cuda_resident_types_preload(void);

namespace {

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

/* Loads one kernel: CUDA loads kernels lazily by default, at their first launch, and that
 * load waits for the kernels already running on the device: if those are ours, spinning
 * until a peer catches up, and the peer is blocked the same way, both hang. */
template <typename F> void load_kernel(F *kernel)
{
    cudaFuncAttributes at;
    (void) cudaFuncGetAttributes(&at, kernel);
}

/* clang-format off */
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

/* the type group of dt (CGPU_TYPES_*; CGPU_TYPES_COUNT: no device type) */
inline int types_of(cgpu_dtype_t dt)
{
    switch (dt) {
    case CGPU_DT_INT8:
    case CGPU_DT_UINT8:
    case CGPU_DT_BOOL:
        return CGPU_TYPES_I8;
    case CGPU_DT_INT16:
    case CGPU_DT_UINT16:
        return CGPU_TYPES_I16;
    case CGPU_DT_INT32:
    case CGPU_DT_UINT32:
        return CGPU_TYPES_I32;
    case CGPU_DT_INT64:
    case CGPU_DT_UINT64:
        return CGPU_TYPES_I64;
    case CGPU_DT_FLOAT32:
    case CGPU_DT_FLOAT64:
    case CGPU_DT_COMPLEX64:
    case CGPU_DT_COMPLEX128:
        return CGPU_TYPES_FLOAT;
    case CGPU_DT_FLOAT_INT:
    case CGPU_DT_2INT:
    case CGPU_DT_2FLOAT:
    case CGPU_DT_2DOUBLE:
    case CGPU_DT_SHORT_INT:
    case CGPU_DT_DOUBLE_INT:
    case CGPU_DT_LONG_INT:
        return CGPU_TYPES_PAIR;
    default:
        return CGPU_TYPES_COUNT;
    }
}

/* K<T, OP>::go for (dt, op) of type group G: only G's instances are compiled */
template <int G, template <typename, int> class K, typename Args>
int dispatch_types(const Args *a, cgpu_dtype_t dt, cgpu_op_t op, int blocks, int threads,
                   cudaStream_t st)
{
    if constexpr (CGPU_TYPES_I8 == G) {
        switch (dt) {
        case CGPU_DT_INT8: CGPU_DISPATCH_INT(K, uint8_t, int8_t)
        case CGPU_DT_UINT8: CGPU_DISPATCH_INT(K, uint8_t, uint8_t)
        case CGPU_DT_BOOL: CGPU_DISPATCH_INT(K, uint8_t, uint8_t)
        default: return (int) cudaErrorInvalidValue;
        }
    } else if constexpr (CGPU_TYPES_I16 == G) {
        switch (dt) {
        case CGPU_DT_INT16: CGPU_DISPATCH_INT(K, uint16_t, int16_t)
        case CGPU_DT_UINT16: CGPU_DISPATCH_INT(K, uint16_t, uint16_t)
        default: return (int) cudaErrorInvalidValue;
        }
    } else if constexpr (CGPU_TYPES_I32 == G) {
        switch (dt) {
        case CGPU_DT_INT32: CGPU_DISPATCH_INT(K, uint32_t, int32_t)
        case CGPU_DT_UINT32: CGPU_DISPATCH_INT(K, uint32_t, uint32_t)
        default: return (int) cudaErrorInvalidValue;
        }
    } else if constexpr (CGPU_TYPES_I64 == G) {
        switch (dt) {
        case CGPU_DT_INT64: CGPU_DISPATCH_INT(K, uint64_t, int64_t)
        case CGPU_DT_UINT64: CGPU_DISPATCH_INT(K, uint64_t, uint64_t)
        default: return (int) cudaErrorInvalidValue;
        }
    } else if constexpr (CGPU_TYPES_FLOAT == G) {
        switch (dt) {
        case CGPU_DT_FLOAT32: CGPU_DISPATCH_FLOAT(K, float)
        case CGPU_DT_FLOAT64: CGPU_DISPATCH_FLOAT(K, double)
        case CGPU_DT_COMPLEX64: CGPU_DISPATCH_COMPLEX(K, float2)
        case CGPU_DT_COMPLEX128: CGPU_DISPATCH_COMPLEX(K, double2)
        default: return (int) cudaErrorInvalidValue;
        }
    } else {
        static_assert(CGPU_TYPES_PAIR == G, "a type group");
        switch (dt) {
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
}
/* clang-format on */

/* K<T, OP>::go for (dt, op), every instance of the family in this object */
template <template <typename, int> class K, typename Args>
int dispatch(const Args *a, cgpu_dtype_t dt, cgpu_op_t op, int blocks, int threads, cudaStream_t st)
{
    switch (types_of(dt)) {
    case CGPU_TYPES_I8:
        return dispatch_types<CGPU_TYPES_I8, K>(a, dt, op, blocks, threads, st);
    case CGPU_TYPES_I16:
        return dispatch_types<CGPU_TYPES_I16, K>(a, dt, op, blocks, threads, st);
    case CGPU_TYPES_I32:
        return dispatch_types<CGPU_TYPES_I32, K>(a, dt, op, blocks, threads, st);
    case CGPU_TYPES_I64:
        return dispatch_types<CGPU_TYPES_I64, K>(a, dt, op, blocks, threads, st);
    case CGPU_TYPES_FLOAT:
        return dispatch_types<CGPU_TYPES_FLOAT, K>(a, dt, op, blocks, threads, st);
    case CGPU_TYPES_PAIR:
        return dispatch_types<CGPU_TYPES_PAIR, K>(a, dt, op, blocks, threads, st);
    default:
        return (int) cudaErrorInvalidValue;
    }
}

/* (dt, op) on a family split by type group: types[g] launches group g's instances (the
 * function that group's object defines) */
template <typename Args>
int dispatch_split(const cgpu_cuda_types_fn<Args> (&types)[CGPU_TYPES_COUNT], const Args *a,
                   cgpu_dtype_t dt, cgpu_op_t op, int blocks, int threads, cudaStream_t st)
{
    const int g = types_of(dt);
    return g < CGPU_TYPES_COUNT ? types[g](a, dt, op, blocks, threads, st)
                                : (int) cudaErrorInvalidValue;
}

/* a split family's preload: each group's (preloads[g]); 0 or the first cudaError_t value */
inline int preload_split(int (*const (&preloads)[CGPU_TYPES_COUNT])(void))
{
    int rc = 0;
    for (int g = 0; g < CGPU_TYPES_COUNT; ++g) {
        const int r = preloads[g]();
        rc = 0 != rc ? rc : r;
    }
    return rc;
}

/* K<T, OP>::load() in the form dispatch() calls */
template <template <typename, int> class K> struct Loader {
    template <typename T, int OP> struct Of {
        static void go(const int *a, int blocks, int threads, cudaStream_t st)
        {
            (void) a, (void) blocks, (void) threads, (void) st;
            K<T, OP>::load();
        }
    };
};

/* every instance of family K of type group G (CGPU_TYPES_COUNT: of every group) loaded, one
 * for each supported (type, op); 0 or a cudaError_t value */
template <template <typename, int> class K, int G = CGPU_TYPES_COUNT> int preload_family()
{
    const int none = 0;
    for (int d = 0; d < CGPU_DT_COUNT; ++d) {
        for (int o = 0; o < CGPU_OP_COUNT; ++o) {
            const cgpu_dtype_t dt = (cgpu_dtype_t) d;
            const cgpu_op_t op = (cgpu_op_t) o;
            if (!cgpu_dtype_on_device(dt) || !cgpu_reduce_supported(dt, op)) {
                continue;
            }
            if constexpr (CGPU_TYPES_COUNT == G) {
                (void) dispatch<Loader<K>::template Of>(&none, dt, op, 0, 0, (cudaStream_t) 0);
            } else if (G == types_of(dt)) {
                (void) dispatch_types<G, Loader<K>::template Of>(&none, dt, op, 0, 0,
                                                                 (cudaStream_t) 0);
            }
        }
    }
    return (int) cudaGetLastError();
}

} /* namespace */

#endif /* CGPU_CUDA_LAUNCH_CUH */
