/*
 * mt_twin.h - buffers with a device twin, so one test source runs on host memory (the MPI
 * suite, host backend) and, built with -DCGPU_TEST_CUDA, on CUDA device memory (test/gpu).
 *
 * A test allocates host buffers with mt_twin_alloc, fills and checks them on the host, and
 * hands MT_D(p) to MPI: p itself on the host build, the same offset into p's device twin on
 * the CUDA build. mt_push(p) copies a whole host buffer to its twin before the calls that
 * read it, mt_pull(p) copies the twin back after the calls that wrote it; both are no-ops on
 * the host build.
 */
#ifndef CGPU_TEST_MT_TWIN_H
#define CGPU_TEST_MT_TWIN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#ifdef CGPU_TEST_CUDA
#include <cuda_runtime.h>

typedef struct {
    char *h, *d;
    size_t bytes;
} mt_twin_t;

enum { MT_TWIN_MAX = 256 };
static mt_twin_t mt_twins[MT_TWIN_MAX];
static int mt_twin_device = -1; /* the device mt_twin_init chose */

/* Selects the rank's device (rank % count); exits 77 with "skipped: no GPU" without one.
 * Call before MPI_Init's first collective on device memory. */
static inline void mt_twin_init(void)
{
    int n = 0;
    if (cudaSuccess != cudaGetDeviceCount(&n) || n < 1) {
        printf("skipped: no GPU\n");
        fflush(stdout);
        MPI_Finalize();
        exit(77);
    }
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int r = NULL != lr ? atoi(lr) : mt_world_rank();
    mt_twin_device = r % n;
    cudaSetDevice(mt_twin_device);
}

/* A thread the test starts uses the device mt_twin_init chose (a new thread's current
 * device is 0, and its default-stream copies would go through device 0's stream). */

static inline void mt_twin_thread_init(void)
{
    if (mt_twin_device >= 0) {
        cudaSetDevice(mt_twin_device);
    }
}

static inline void *mt_twin_alloc(size_t bytes)
{
    char *h = mt_xmalloc(bytes > 0 ? bytes : 1);
    for (int i = 0; i < MT_TWIN_MAX; ++i) {
        if (NULL == mt_twins[i].h) {
            void *d = NULL;
            if (cudaSuccess != cudaMalloc(&d, bytes > 0 ? bytes : 1)) {
                fprintf(stderr, "mt_twin_alloc: cudaMalloc(%zu) failed\n", bytes);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            mt_twins[i] = (mt_twin_t){h, d, bytes};
            return h;
        }
    }
    fprintf(stderr, "mt_twin_alloc: more than %d buffers\n", MT_TWIN_MAX);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return NULL;
}

static inline mt_twin_t *mt_twin_of(const void *p)
{
    for (int i = 0; i < MT_TWIN_MAX; ++i) {
        mt_twin_t *t = &mt_twins[i];
        if (NULL != t->h && (const char *) p >= t->h && (const char *) p <= t->h + t->bytes) {
            return t;
        }
    }
    return NULL;
}

/* The device address of host address p (MPI_IN_PLACE, NULL and unknown pointers as is). */
static inline void *mt_twin_d(const void *p)
{
    mt_twin_t *t = mt_twin_of(p);
    return NULL == t ? (void *) p : t->d + ((const char *) p - t->h);
}

static inline void mt_push(const void *p)
{
    mt_twin_t *t = mt_twin_of(p);
    if (NULL != t && cudaSuccess != cudaMemcpy(t->d, t->h, t->bytes, cudaMemcpyHostToDevice)) {
        MT_CHECK(0, "mt_push: cudaMemcpy failed");
    }
}

static inline void mt_pull(void *p)
{
    mt_twin_t *t = mt_twin_of(p);
    if (NULL != t && cudaSuccess != cudaMemcpy(t->h, t->d, t->bytes, cudaMemcpyDeviceToHost)) {
        MT_CHECK(0, "mt_pull: cudaMemcpy failed");
    }
}

static inline void mt_twin_free(void *p)
{
    mt_twin_t *t = mt_twin_of(p);
    if (NULL != t) {
        cudaFree(t->d);
        free(t->h);
        memset(t, 0, sizeof(*t));
    }
}

#define MT_D(p) mt_twin_d(p)
#define MT_ON_DEVICE 1

#else /* host memory */

static inline void mt_twin_init(void) {}
static inline void mt_twin_thread_init(void) {}
static inline void *mt_twin_alloc(size_t bytes) { return mt_xmalloc(bytes > 0 ? bytes : 1); }
static inline void mt_push(const void *p) { (void) p; }
static inline void mt_pull(void *p) { (void) p; }
static inline void mt_twin_free(void *p) { free(p); }
#define MT_D(p) (p)
#define MT_ON_DEVICE 0

#endif

#endif /* CGPU_TEST_MT_TWIN_H */
