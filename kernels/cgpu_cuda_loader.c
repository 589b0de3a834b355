/*
 * coll/gpu kernels, plugin side: the launchers of cgpu_cuda_kernels.h as calls through the
 * table of libcgpu_cuda_kernels.so, opened at the first call (in practice the cuda backend's
 * first communicator set-up, which preloads every kernel).
 *
 * Where the object is looked for: next to the file that holds this code (the installed or
 * built plugin; the object is installed beside it), then in the build tree's library
 * directory (test programs that link the engine themselves). RTLD_LOCAL: its CUDA runtime
 * and symbols stay its own.
 *
 * A failed load is reported once, with the path and the loader's reason, and every launcher
 * then returns cudaErrorSharedObjectInitFailed, which the engine turns into a failed set-up
 * (the communicator stages through host memory) or a failed call.
 */
#define _GNU_SOURCE
#define CGPU_LOG_SUBSYS CGPU_SUB_CUDA
#include "cgpu_config.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cgpu_cuda_kernels.h"
#include "cgpu_log.h"

#ifndef CGPU_KERNELS_BUILD_DIR
#define CGPU_KERNELS_BUILD_DIR "."
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const cgpu_cuda_kernel_ops_t *ops;
static char ops_path[PATH_MAX + 64];

/* Opens @p path and checks its table; NULL (with @p why filled) if either fails. */
static const cgpu_cuda_kernel_ops_t *open_table(const char *path, char *why, size_t len)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (NULL == h) {
        snprintf(why, len, "%s", dlerror());
        return NULL;
    }
    const cgpu_cuda_kernel_ops_t *t = dlsym(h, CGPU_CUDA_KERNELS_SYMBOL);
    const size_t want[] = CGPU_CUDA_KERNELS_SIZES;
    if (NULL == t) {
        snprintf(why, len, "%s has no %s", path, CGPU_CUDA_KERNELS_SYMBOL);
    } else if (CGPU_CUDA_KERNELS_ABI != t->abi || 0 != memcmp(want, t->sizes, sizeof(want))) {
        snprintf(why, len,
                 "%s was built from other sources than this plugin (interface %d, "
                 "this plugin's %d)",
                 path, t->abi, CGPU_CUDA_KERNELS_ABI);
    } else {
        return t;
    }
    dlclose(h);
    return NULL;
}

static void load(void)
{
    char here[PATH_MAX] = ".";
    Dl_info info;
    if (0 != dladdr((void *) &load_once, &info) && NULL != info.dli_fname) {
        snprintf(here, sizeof(here), "%s", info.dli_fname);
        char *slash = strrchr(here, '/');
        if (NULL != slash) {
            *slash = '\0';
        } else {
            snprintf(here, sizeof(here), ".");
        }
    }
    const char *dirs[] = {here, CGPU_KERNELS_BUILD_DIR};
    char why[2][PATH_MAX + 256] = {"", ""};
    /* the build tree's folder only where it is another one */
    const int ndirs = 0 == strcmp(here, CGPU_KERNELS_BUILD_DIR) ? 1 : 2;
    for (int i = 0; i < ndirs && NULL == ops; ++i) {
        snprintf(ops_path, sizeof(ops_path), "%s/%s", dirs[i], CGPU_CUDA_KERNELS_LIB);
        ops = open_table(ops_path, why[i], sizeof(why[i]));
    }
    if (NULL == ops) {
        cgpu_log(CGPU_LOG_WARN,
                 "cuda: cannot load the collective kernels (%s%s%s): device-buffer "
                 "collectives are staged through host memory; reinstall coll/gpu so that %s "
                 "lies next to mca_coll_gpu.so",
                 why[0], 2 == ndirs ? "; " : "", why[1], CGPU_CUDA_KERNELS_LIB);
    } else {
        cgpu_log(CGPU_LOG_INFO, "cuda: collective kernels loaded from %s", ops_path);
    }
}

static inline const cgpu_cuda_kernel_ops_t *kernels(void)
{
    pthread_once(&load_once, load);
    return ops;
}

const char *cgpu_cuda_kernels_where(void)
{
    return NULL != kernels() ? ops_path : NULL;
}

#define CGPU_FORWARD(call)                                                                         \
    do {                                                                                           \
        const cgpu_cuda_kernel_ops_t *k = kernels();                                               \
        return NULL != k ? k->call : (int) cudaErrorSharedObjectInitFailed;                        \
    } while (0)

int cgpu_cuda_kernels_preload(void)
{
    CGPU_FORWARD(preload());
}

int cgpu_cuda_resident_cluster(void)
{
    const cgpu_cuda_kernel_ops_t *k = kernels();
    return NULL != k ? k->resident_cluster() : 0;
}

int cgpu_cuda_resident_launch(const cgpu_cuda_resident_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                              int blocks, int threads, void *stream)
{
    CGPU_FORWARD(resident_launch(a, dt, op, blocks, threads, stream));
}

int cgpu_cuda_ring_reduce_launch(const cgpu_cuda_ring_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                                 int threads, void *stream)
{
    CGPU_FORWARD(ring_reduce_launch(a, dt, op, threads, stream));
}

int cgpu_cuda_ring_copy_launch(const cgpu_cuda_ring_args_t *a, int threads, void *stream)
{
    CGPU_FORWARD(ring_copy_launch(a, threads, stream));
}

int cgpu_cuda_a2a_launch(const cgpu_cuda_a2a_args_t *a, int threads, void *stream)
{
    CGPU_FORWARD(a2a_launch(a, threads, stream));
}

int cgpu_cuda_release_signal(const cgpu_cuda_release_args_t *a, void *stream)
{
    CGPU_FORWARD(release_signal(a, stream));
}

int cgpu_cuda_ce_sync(const cgpu_cuda_ce_sync_args_t *a, void *stream)
{
    CGPU_FORWARD(ce_sync(a, stream));
}

int cgpu_cuda_ce_reduce(const cgpu_cuda_ce_reduce_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                        int blocks, int threads, void *stream)
{
    CGPU_FORWARD(ce_reduce(a, dt, op, blocks, threads, stream));
}

int cgpu_cuda_tree_allreduce(const cgpu_cuda_tree_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int threads, void *stream)
{
    CGPU_FORWARD(tree_allreduce(a, dt, op, threads, stream));
}

int cgpu_cuda_oneshot_launch(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int threads, void *stream)
{
    CGPU_FORWARD(oneshot_launch(a, dt, op, threads, stream));
}
