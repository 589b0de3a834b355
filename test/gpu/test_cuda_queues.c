/*
 * The hardware work queues of this process's CUDA context (coll_gpu_cuda_connections).
 *
 * coll/gpu sets CUDA_DEVICE_MAX_CONNECTIONS at MPI_Init when the environment leaves it
 * unset and no CUDA context exists yet. This test checks that it did (or, run with
 * --mca coll_gpu_cuda_connections 0, that it left the variable alone), and then measures
 * what the setting is for: one stream is held on the GPU (work queued behind a host
 * function that does not return until released, as work queued behind one of our kernels
 * waits while that kernel waits for its peers), and NSTREAMS other streams each queue one
 * small memset. A stream that shares the held stream's hardware queue cannot run its memset
 * until the hold ends. With 32 queues and fewer streams than that, every memset must finish
 * during the hold; with CUDA's default of 8 queues some must not (the negative control,
 * argument "shared").
 *
 * Usage: test_cuda_queues [shared]   (one rank is enough; every rank checks its own process)
 */
#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"
#include "mt_twin.h"

enum { NSTREAMS = 24, HOLD_MS = 1500 };

static atomic_int gate; /* 1 while the held stream must stay held */

static void CUDART_CB hold(void *arg)
{
    (void) arg;
    while (atomic_load(&gate)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
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
    MT_CHECK(cudaSuccess == cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking),
             "cudaStreamCreate");
    for (int i = 0; i < NSTREAMS; ++i) {
        MT_CHECK(cudaSuccess == cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking),
                 "cudaStreamCreate %d", i);
    }
    MT_CHECK(cudaSuccess == cudaMalloc((void **) &dev, sizeof(int) * (NSTREAMS + 1)), "cudaMalloc");
    atomic_store(&gate, 1);
    /* the held stream: a host function that waits for the gate, then a memset behind it
     * (device work at the head of its queue, waiting for the host function) */
    MT_CHECK(cudaSuccess == cudaLaunchHostFunc(held, hold, NULL), "cudaLaunchHostFunc");
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
             "the held stream finished while its host function was still waiting");
    atomic_store(&gate, 0);
    MT_CHECK(cudaSuccess == cudaDeviceSynchronize(), "cudaDeviceSynchronize after the hold");
    for (int i = 0; i < NSTREAMS; ++i) {
        cudaStreamDestroy(s[i]);
    }
    cudaStreamDestroy(held);
    cudaFree(dev);
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
    mt_note("%d of %d streams held behind another stream's held work (%s queues)", pending,
            NSTREAMS, NULL != v ? v : "CUDA's default");
    if (shared) {
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
