/*
 * What one small collective call cannot go below on this machine, one process, one GPU:
 *   - cudaPointerGetAttributes (coll/gpu asks it for each buffer of a call),
 *   - an empty kernel launched and waited for with cudaStreamSynchronize,
 *   - the same kernel waited for by polling a flag it writes to mapped host memory,
 *   - cudaEventRecord + cudaStreamWaitEvent (the "event" stream order),
 *   - cudaEventRecord on the legacy stream + cudaEventSynchronize (the resident path's
 *     host-side order), and cudaStreamQuery on the idle legacy stream (a cheaper test?),
 *   - a round trip to a kernel that stays resident: the host writes a number to mapped
 *     host memory, the kernel (polling it) writes it back to another word the host polls,
 *   - the same with the host's order first (legacy event record + synchronize, then the
 *     write: what a resident call costs today before any exchange between GPUs),
 *   - a stream memory operation (cuStreamWriteValue64) on the legacy stream to mapped host
 *     memory, the host polling it (a host-side order without a driver wait),
 *   - the resident round trip where the legacy stream itself hands the number to the
 *     kernel: cuStreamWriteValue64 on the legacy stream into device memory the kernel polls
 *     (ordered after the application's work with no host wait, no poll over PCIe).
 * Mean over many calls after a warm-up, in microseconds.
 *
 *   bench/bench_floor [iterations]
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (cudaSuccess != e_) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                  \
                    cudaGetErrorString(e_));                                              \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

__global__ void empty_kernel() {}

/* n round trips: waits for number i in req (device or mapped host memory), answers in resp */
__global__ void echo_kernel(const volatile unsigned long long *req, volatile unsigned long long *resp,
                            unsigned long long n)
{
    if (0 == threadIdx.x) {
        for (unsigned long long i = 1; i <= n; ++i) {
            while (*req < i) {
            }
            __threadfence_system();
            *resp = i;
        }
    }
}

__global__ void flag_kernel(volatile unsigned long long *flag, unsigned long long v)
{
    if (0 == threadIdx.x && 0 == blockIdx.x) {
        __threadfence_system();
        *flag = v;
    }
}

static double now_us()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

/* Mean us of `it` round trips after `warm` untimed ones: post(i) hands number i to the other
 * side (a store, or an enqueued operation), then the host waits until *resp says i. */
template <typename F>
static double round_trips(int warm, int it, const unsigned long long *resp, F post)
{
    double t0 = now_us();
    for (int i = 1; i <= warm + it; ++i) {
        if (warm + 1 == i) {
            t0 = now_us();
        }
        post((unsigned long long) i);
        while (__atomic_load_n(resp, __ATOMIC_ACQUIRE) != (unsigned long long) i) {
        }
    }
    return (now_us() - t0) / it;
}

static void write_value(unsigned long long *dptr, unsigned long long v)
{
    const CUresult r = cuStreamWriteValue64(CU_STREAM_LEGACY, (CUdeviceptr) dptr, (cuuint64_t) v, 0);
    if (CUDA_SUCCESS != r) {
        fprintf(stderr, "cuStreamWriteValue64: %d\n", (int) r);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const int it = argc > 1 ? atoi(argv[1]) : 20000;
    cudaStream_t st;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    void *d;
    CK(cudaMalloc(&d, 1 << 20));
    unsigned long long *hflag, *dflag;
    CK(cudaHostAlloc((void **) &hflag, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **) &dflag, hflag, 0));
    *hflag = 0;
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    for (int w = 0; w < 1000; ++w) {
        empty_kernel<<<1, 32, 0, st>>>();
    }
    CK(cudaStreamSynchronize(st));

    cudaPointerAttributes a;
    double t0 = now_us();
    for (int i = 0; i < it; ++i) {
        CK(cudaPointerGetAttributes(&a, (char *) d + (i & 1023)));
    }
    const double attr = (now_us() - t0) / it;

    t0 = now_us();
    for (int i = 0; i < it; ++i) {
        empty_kernel<<<1, 32, 0, st>>>();
        CK(cudaStreamSynchronize(st));
    }
    const double sync = (now_us() - t0) / it;

    t0 = now_us();
    for (int i = 0; i < it; ++i) {
        empty_kernel<<<1, 32, 0, st>>>();
    }
    CK(cudaStreamSynchronize(st));
    const double launch = (now_us() - t0) / it;

    t0 = now_us();
    for (int i = 1; i <= it; ++i) {
        flag_kernel<<<1, 32, 0, st>>>(dflag, (unsigned long long) i);
        while (*(volatile unsigned long long *) hflag != (unsigned long long) i) {
        }
    }
    const double poll = (now_us() - t0) / it;
    CK(cudaStreamSynchronize(st));

    t0 = now_us();
    for (int i = 0; i < it; ++i) {
        CK(cudaEventRecord(ev, 0));
        CK(cudaStreamWaitEvent(st, ev, 0));
    }
    const double order = (now_us() - t0) / it;
    CK(cudaStreamSynchronize(st));

    t0 = now_us();
    for (int i = 0; i < it; ++i) {
        CK(cudaEventRecord(ev, cudaStreamLegacy));
        CK(cudaEventSynchronize(ev));
    }
    const double host_order = (now_us() - t0) / it;

    int idle = 0;
    t0 = now_us();
    for (int i = 0; i < it; ++i) {
        idle += cudaSuccess == cudaStreamQuery(cudaStreamLegacy);
    }
    const double query = (now_us() - t0) / it;

    unsigned long long *hreq, *dreq;
    CK(cudaHostAlloc((void **) &hreq, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **) &dreq, hreq, 0));
    const int warm = 100;
    auto store_req = [&](unsigned long long v) { __atomic_store_n(hreq, v, __ATOMIC_RELEASE); };
    *hreq = 0;
    *hflag = 0;
    echo_kernel<<<1, 32, 0, st>>>(dreq, dflag, (unsigned long long) (warm + it));
    const double echo = round_trips(warm, it, hflag, store_req);
    CK(cudaStreamSynchronize(st));

    /* the host's legacy-stream order, then the round trip (the resident call's host part) */
    *hreq = 0;
    *hflag = 0;
    echo_kernel<<<1, 32, 0, st>>>(dreq, dflag, (unsigned long long) (warm + it));
    const double echo_ordered = round_trips(warm, it, hflag, [&](unsigned long long v) {
        CK(cudaEventRecord(ev, cudaStreamLegacy));
        CK(cudaEventSynchronize(ev));
        store_req(v);
    });
    CK(cudaStreamSynchronize(st));

    /* stream memory operations (cuStreamWriteValue64, v2) on the legacy stream */
    double wv_host = -1, wv_echo = -1, wv_echo_host = -1;
    unsigned long long *dgo;
    CK(cudaMalloc((void **) &dgo, 64));
    CK(cudaMemset(dgo, 0, 64));
    CK(cudaDeviceSynchronize());
    const CUresult probe = cuStreamWriteValue64(CU_STREAM_LEGACY, (CUdeviceptr) dgo, 0, 0);
    CK(cudaDeviceSynchronize());
    printf("cuStreamWriteValue64 on the legacy stream: %s (%d)\n",
           CUDA_SUCCESS == probe ? "works" : "fails", (int) probe);
    if (CUDA_SUCCESS == probe) {
        /* to mapped host memory, the host polling it */
        *hflag = 0;
        wv_host = round_trips(warm, it, hflag, [&](unsigned long long v) { write_value(dflag, v); });
        /* to device memory a resident kernel polls; it answers in mapped host memory */
        *hflag = 0;
        echo_kernel<<<1, 32, 0, st>>>(dgo, dflag, (unsigned long long) (warm + it));
        wv_echo = round_trips(warm, it, hflag, [&](unsigned long long v) { write_value(dgo, v); });
        CK(cudaStreamSynchronize(st));
        /* to mapped host memory the resident kernel polls */
        *hflag = 0;
        *hreq = 0;
        echo_kernel<<<1, 32, 0, st>>>(dreq, dflag, (unsigned long long) (warm + it));
        wv_echo_host = round_trips(warm, it, hflag, [&](unsigned long long v) { write_value(dreq, v); });
        CK(cudaStreamSynchronize(st));
    }

    printf("cudaPointerGetAttributes          %7.2f us\n", attr);
    printf("kernel launch (queued, no wait)   %7.2f us\n", launch);
    printf("launch + cudaStreamSynchronize    %7.2f us\n", sync);
    printf("launch + poll mapped host flag    %7.2f us\n", poll);
    printf("event record + stream wait event  %7.2f us\n", order);
    printf("legacy event record + synchronize %7.2f us\n", host_order);
    printf("cudaStreamQuery(legacy), idle     %7.2f us (%d of %d idle)\n", query, idle, it);
    printf("round trip to a resident kernel   %7.2f us\n", echo);
    printf("legacy order + resident round trip %6.2f us\n", echo_ordered);
    printf("legacy write-value, host polls    %7.2f us\n", wv_host);
    printf("legacy write-value -> resident kernel (device word) -> host %7.2f us\n", wv_echo);
    printf("legacy write-value -> resident kernel (host word) -> host   %7.2f us\n", wv_echo_host);
    return 0;
}
