/*
 * coll/gpu kernels: the host reduction twin.
 *
 * The element types and operators are the base layer's (cgpu_dtype.h), so the same enums
 * serve the host loops here and the CUDA kernels (compiled by nvcc as C++ behind extern "C"
 * launchers).
 */
#ifndef CGPU_REDUCE_H
#define CGPU_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "cgpu_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif


/**
 * Whether MPI defines @p op on @p dt (C integer: all ops but MINLOC/MAXLOC; floating: SUM
 * PROD MIN MAX; bool: LAND LOR LXOR; complex: SUM PROD; pairs: MINLOC MAXLOC). The glue never asks
 * the engine for anything outside this set, so an erroneous MPI call reaches the previous module,
 * which reports it as MPI does.
 */
bool cgpu_reduce_supported(cgpu_dtype_t dt, cgpu_op_t op);

/**
 * dst[i] = a[i] op b[i] for i < count, on host memory.
 *
 * count is in elements. The buffers must be aligned for the element type. dst may be
 * equal to a or to b (in-place accumulation); partial overlap (dst == a + k, k != 0) is
 * not supported. With count 0 nothing is read or written and the pointers may be NULL.
 *
 * Signed integer SUM/PROD wrap in two's complement (computed in the unsigned type), as
 * every MPI implementation on our targets does in practice, without relying on undefined
 * behaviour. Floating MIN/MAX are exactly `a < b ? a : b` / `a > b ? a : b`: when a NaN is
 * involved, or for -0.0 against +0.0, the result is b (unlike fmin/fmax or CUDA fminf).
 * BOOL bytes other than 0 and 1 count as true; results are always 0 or 1. Complex PROD is
 * (ac - bd) + (ad + bc)i, each product and sum rounded once (no fused multiply-add, no
 * special handling of infinities as C99 Annex G asks of the `*` operator). MINLOC/MAXLOC
 * of pairs (u, i) and (v, j): (u, i) when u < v (u > v), (u, min(i, j)) when u == v, else
 * (v, j) (a NaN value is never smaller nor equal: the b pair wins); padding bytes are
 * undefined.
 *
 * @return 0, or -1 if (dt, op) is not supported or out of range (nothing written).
 */
int cgpu_reduce_host(cgpu_dtype_t dt, cgpu_op_t op, void *dst, const void *a, const void *b,
                     size_t count);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_REDUCE_H */
