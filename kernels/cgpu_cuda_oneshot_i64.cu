/*
 * coll/gpu kernels: the launched oneshot kernel's instances for the 64-bit integers (one object a
 * type group: cgpu_cuda_launch.cuh says why).
 */
#include "cgpu_cuda_oneshot.cuh"

template int cgpu_cuda_oneshot_types<CGPU_TYPES_I64>(const cgpu_cuda_oneshot_args_t *a,
                                                     cgpu_dtype_t dt, cgpu_op_t op, int blocks,
                                                     int threads, cudaStream_t st);
template int cgpu_cuda_oneshot_types_preload<CGPU_TYPES_I64>(void);
