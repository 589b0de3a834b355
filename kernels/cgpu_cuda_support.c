/*
 * coll/gpu kernels: which (type, op) the device kernels implement. Host code only, built
 * into the plugin (its path decisions ask before any kernel is loaded) and into the kernels'
 * shared object (its launchers ask again).
 */
#include "cgpu_cuda_kernels.h"
#include "cgpu_dtype.h"

int cgpu_cuda_reduce_supported(cgpu_dtype_t dt, cgpu_op_t op)
{
    return cgpu_dtype_on_device(dt) && cgpu_reduce_supported(dt, op);
}
