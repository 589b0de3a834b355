/*
 * coll/gpu kernels: the launcher of the oneshot kernel (cgpu_cuda_oneshot.cuh), whose
 * instances are built in one object per type group (cgpu_cuda_oneshot_<group>.cu).
 */
#include "cgpu_cuda_launch.cuh"

namespace {

const cgpu_cuda_types_fn<cgpu_cuda_oneshot_args_t> oneshot_types[CGPU_TYPES_COUNT] = {
    cgpu_cuda_oneshot_types<CGPU_TYPES_I8>,    cgpu_cuda_oneshot_types<CGPU_TYPES_I16>,
    cgpu_cuda_oneshot_types<CGPU_TYPES_I32>,   cgpu_cuda_oneshot_types<CGPU_TYPES_I64>,
    cgpu_cuda_oneshot_types<CGPU_TYPES_FLOAT>, cgpu_cuda_oneshot_types<CGPU_TYPES_PAIR>};

int (*const oneshot_preloads[CGPU_TYPES_COUNT])(void) = {
    cgpu_cuda_oneshot_types_preload<CGPU_TYPES_I8>,
    cgpu_cuda_oneshot_types_preload<CGPU_TYPES_I16>,
    cgpu_cuda_oneshot_types_preload<CGPU_TYPES_I32>,
    cgpu_cuda_oneshot_types_preload<CGPU_TYPES_I64>,
    cgpu_cuda_oneshot_types_preload<CGPU_TYPES_FLOAT>,
    cgpu_cuda_oneshot_types_preload<CGPU_TYPES_PAIR>};

} /* namespace */

int cgpu_cuda_oneshot_preload(void)
{
    return preload_split(oneshot_preloads);
}

extern "C" int cgpu_cuda_oneshot_launch(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt,
                                        cgpu_op_t op, int threads, void *stream)
{
    if (CGPU_CUDA_ONESHOT_COPIES(CGPU_CUDA_ONESHOT_BASE(a->mode))) {
        /* the copies' instance: uint8_t, SUM (CGPU_DT_UINT8's) */
        (void) cgpu_cuda_oneshot_types<CGPU_TYPES_I8>(a, CGPU_DT_UINT8, CGPU_OP_SUM,
                                                      grid_of(a->grid, a->nblocks, 1), threads,
                                                      (cudaStream_t) stream);
        return (int) cudaGetLastError();
    }
    if (!cgpu_cuda_reduce_supported(dt, op)) {
        return (int) cudaErrorInvalidValue;
    }
    int rc = dispatch_split(oneshot_types, a, dt, op, grid_of(a->grid, a->nblocks, 1), threads,
                            (cudaStream_t) stream);
    return 0 != rc ? rc : (int) cudaGetLastError();
}
