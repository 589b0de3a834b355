/*
 * coll/gpu kernels: the resident oneshot kernel's instances for the (value, index) pairs (one
 * object a type group: cgpu_cuda_launch.cuh says why).
 */
#include "cgpu_cuda_resident.cuh"

template int cgpu_cuda_resident_types<CGPU_TYPES_PAIR>(const cgpu_cuda_resident_args_t *a,
                                                       cgpu_dtype_t dt, cgpu_op_t op, int blocks,
                                                       int threads, cudaStream_t st);
template int cgpu_cuda_resident_types_preload<CGPU_TYPES_PAIR>(void);
