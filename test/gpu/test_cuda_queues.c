/*
 * The hardware work queues of this process's CUDA context (coll_gpu_cuda_connections).
 *
 * coll/gpu sets CUDA_DEVICE_MAX_CONNECTIONS at MPI_Init when the environment leaves it
 * unset and no CUDA context exists yet. This test checks that it did (or, run with
 * --mca coll_gpu_cuda_connections 0, that it left the variable alone), and then measures
 * what the setting is for: one stream is held on the GPU (a wait on a word of mapped host
 * memory that the GPU's front end runs in the stream's hardware queue, as one of our kernels
 * waits there for its peers; cuStreamWaitValue32), and NSTREAMS other streams each queue
 * one small memset. A stream that shares the held stream's hardware queue cannot run its memset
 * until the hold ends. With 32 queues and fewer streams than that, every memset must finish
 * during the hold; with CUDA's default of 8 queues some must not (the negative control,
 * argument "shared").
 *
 * Usage: test_cuda_queues [shared]   (one rank is enough; every rank checks its own process)
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"
#include "mt_twin.h"

enum { NSTREAMS = 24, HOLD_MS = 1500 };

/* the driver's cuStreamWaitValue32 (CUstream, CUdeviceptr, cuuint32_t, flags), found at run
 * time so the test needs no link to the driver library; flags 0: wait until >= value */
typedef int (*wait_value_fn)(cudaStream_t, unsigned long long, unsigned int, unsigned int);

static wait_value_fn find_wait_value(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (NULL == lib) {
        return NULL;
    }
    wait_value_fn f = (wait_value_fn) dlsym(lib, "cuStreamWaitValue32_v2");
    if (NULL == f) {
        f = (wait_value_fn) dlsym(lib, "cuStreamWaitValue32");
    }
    return f;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* How many of the NSTREAMS streams' memsets have not finished while the first stream is
 * held for up to HOLD_MS (it stops early once all have). */
static int held_streams(void)
{
    cudaStream_t held, s[NSTREAMS];
    int *dev = NULL;
    volatile unsigned int *gate = NULL;
    void *gate_dev = NULL;
    wait_value_fn wait_value = find_wait_value();
    MT_CHECK(NULL != wait_value, "cuStreamWaitValue32 not found in the driver library");
    MT_CHECK(cudaSuccess == cudaHostAlloc((void **) &gate, sizeof(*gate), cudaHostAllocMapped) &&
                 cudaSuccess == cudaHostGetDevicePointer(&gate_dev, (void *) gate, 0),
             "mapped host memory for the gate");
    if (NULL == wait_value || NULL == gate_dev) {
        return -1;
    }
    *gate = 0;
    MT_CHECK(cudaSuccess == cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking),
             "cudaStreamCreate");
    for (int i = 0; i < NSTREAMS; ++i) {
        MT_CHECK(cudaSuccess == cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking),
                 "cudaStreamCreate %d", i);
    }
    MT_CHECK(cudaSuccess == cudaMalloc((void **) &dev, sizeof(int) * (NSTREAMS + 1)), "cudaMalloc");
    /* the held stream: the GPU waits until the gate word is 1, then a memset behind it */
    MT_CHECK(0 == wait_value(held, (unsigned long long) (uintptr_t) gate_dev, 1, 0),
             "cuStreamWaitValue32 (stream memory operations unsupported here?)");
    MT_CHECK(cudaSuccess == cudaMemsetAsync(dev + NSTREAMS, 0, sizeof(int), held), "memset");
    for (int i = 0; i < NSTREAMS; ++i) {
        MT_CHECK(cudaSuccess == cudaMemsetAsync(dev + i, 0, sizeof(int), s[i]), "memset %d", i);
    }
    int pending = NSTREAMS;
    const double until = now_ms() + HOLD_MS;
    while (pending > 0 && now_ms() < until) {
        pending = 0;
        for (int i = 0; i < NSTREAMS; ++i) {
            pending += cudaSuccess != cudaStreamQuery(s[i]);
        }
    }
    MT_CHECK(cudaErrorNotReady == cudaStreamQuery(held),
             "the held stream finished while its gate was still closed");
    *gate = 1;
    MT_CHECK(cudaSuccess == cudaDeviceSynchronize(), "cudaDeviceSynchronize after the hold");
    for (int i = 0; i < NSTREAMS; ++i) {
        cudaStreamDestroy(s[i]);
    }
    cudaStreamDestroy(held);
    cudaFree(dev);
    cudaFreeHost((void *) gate);
    return pending;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_cuda_queues");
    mt_twin_init(); /* exits 77 ("skipped: no GPU") without a device */
    const int shared = argc > 1 && 0 == strcmp(argv[1], "shared");
    const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (shared) {
        /* run with --mca coll_gpu_cuda_connections 0 and the variable unset: left alone */
        MT_CHECK(NULL == v,
                 "CUDA_DEVICE_MAX_CONNECTIONS is %s; coll_gpu_cuda_connections 0 "
                 "must leave it unset",
                 v);
    } else {
        MT_CHECK(NULL != v && 0 == strcmp(v, "32"),
                 "CUDA_DEVICE_MAX_CONNECTIONS is %s after MPI_Init; coll/gpu sets 32 when it is "
                 "unset and no CUDA context exists yet",
                 NULL != v ? v : "unset");
    }
    const int pending = held_streams();
    MT_CHECK(pending >= 0, "the probe could not run");
    mt_note("%d of %d streams held behind another stream's held work (%s queues)", pending,
            NSTREAMS, NULL != v ? v : "CUDA's default");
    if (pending < 0) {
        /* reported above */
    } else if (shared) {
        MT_CHECK(pending > 0,
                 "with CUDA's default queues every one of %d streams ran beside a "
                 "held stream: the control cannot show what the setting prevents",
                 NSTREAMS);
    } else {
        MT_CHECK(0 == pending,
                 "%d of %d streams waited behind another stream's held work with "
                 "CUDA_DEVICE_MAX_CONNECTIONS=%s",
                 pending, NSTREAMS, NULL != v ? v : "unset");
    }
    return mt_finalize();
}
