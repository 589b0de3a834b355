/*
 * coll/gpu unit test: the CUDA kernels come as their own shared object, opened at the cuda
 * backend's first set-up (kernels/cgpu_cuda_kernels.h says why), not with the plugin.
 *
 * Checks that the loader finds libcgpu_cuda_kernels.so, that its table matches this build's
 * interface, and that it exports nothing but the table (its launchers must not bind to the
 * plugin's forwarding functions of the same names). Needs no GPU: loading the object runs no
 * kernel. A host-only build has no kernels: it prints "skipped: host-only build" (exit 77).
 */
#define _GNU_SOURCE
#include "cgpu_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CGPU_HAVE_CUDA
#include <dlfcn.h>

#include "cgpu_cuda_kernels.h"
#include "cunit_run.h"

static void test_loads(void)
{
    const char *where = cgpu_cuda_kernels_where();
    CU_ASSERT_PTR_NOT_NULL_FATAL(where);
    const size_t n = strlen(where), m = strlen("/" CGPU_CUDA_KERNELS_LIB);
    CU_ASSERT_TRUE(n > m && 0 == strcmp(where + n - m, "/" CGPU_CUDA_KERNELS_LIB));
    /* asked again: the same object, not a second load */
    CU_ASSERT_PTR_EQUAL(cgpu_cuda_kernels_where(), where);
}

static void test_exports_table_only(void)
{
    const char *where = cgpu_cuda_kernels_where();
    CU_ASSERT_PTR_NOT_NULL_FATAL(where);
    void *h = dlopen(where, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h); /* the loader's handle: still open */
    const cgpu_cuda_kernel_ops_t *t = dlsym(h, CGPU_CUDA_KERNELS_SYMBOL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const size_t sizes[] = CGPU_CUDA_KERNELS_SIZES;
    CU_ASSERT_EQUAL(t->abi, CGPU_CUDA_KERNELS_ABI);
    CU_ASSERT_EQUAL(0, memcmp(sizes, t->sizes, sizeof(sizes)));
    CU_ASSERT_PTR_NOT_NULL(t->oneshot_launch);
    CU_ASSERT_PTR_NOT_NULL(t->preload);
    /* every launcher, and the host helpers compiled into the object, are hidden */
    const char *hidden[] = {"cgpu_cuda_oneshot_launch",   "cgpu_cuda_kernels_preload",
                            "cgpu_cuda_ring_copy_launch", "cgpu_cuda_reduce_supported",
                            "cgpu_dtype_on_device",       "cgpu_reduce_supported"};
    for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); ++i) {
        if (NULL != dlsym(h, hidden[i])) {
            fprintf(stderr, "%s exports %s\n", where, hidden[i]);
            CU_FAIL("a symbol other than the table is exported");
        }
    }
    dlclose(h);
}

int main(void)
{
    const cgpu_unit_case_t cases[] = {
        {"the loader finds the kernels' object", test_loads},
        {"the object exports its table and nothing else", test_exports_table_only},
    };
    return cgpu_unit_run("test_kernels_lib", cases, sizeof(cases) / sizeof(cases[0]));
}
#else
int main(void)
{
    printf("skipped: host-only build (no CUDA kernels to load)\n");
    return 77;
}
#endif
