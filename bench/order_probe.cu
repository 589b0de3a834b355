/* What the host's wait for the legacy default stream costs, and what each way of asking
 * covers, while a kernel of ours runs on a non-blocking stream (as the resident kernel
 * does). One process, device 0. Build: nvcc -O2 -o bench/order_probe bench/order_probe.cu
 * Prints: the mean cost of each way over many calls on an idle legacy stream, then, for
 * work queued on the legacy stream, a blocking stream and the per-thread default stream,
 * whether cudaStreamQuery(cudaStreamLegacy) and an event recorded on the legacy stream
 * see it still running. Also the enqueue of a cuStreamWriteValue32 on the legacy stream (a
 * mark the resident kernel waited for in 639c900, reverted) and a cudaPointerGetAttributes
 * (two a resident call). Link with -lcuda. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                               \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (cudaSuccess != e_) {                                                            \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

__global__ void spin_until(volatile int *stop)
{
    while (0 == *stop) {
    }
}

__global__ void spin_for(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static const char *busy(cudaError_t e)
{
    if (cudaErrorNotReady == e) {
        return "sees it running";
    }
    return cudaSuccess == e ? "says idle" : cudaGetErrorString(e);
}

int main(void)
{
    const int n = 20000;
    CK(cudaSetDevice(0));
    int *stop_h = NULL, *stop_d = NULL;
    CK(cudaHostAlloc((void **) &stop_h, sizeof(int), cudaHostAllocMapped));
    *stop_h = 0;
    CK(cudaHostGetDevicePointer((void **) &stop_d, stop_h, 0));
    cudaStream_t rk, blk;
    CK(cudaStreamCreateWithFlags(&rk, cudaStreamNonBlocking));
    CK(cudaStreamCreate(&blk));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    unsigned int *word_d = NULL;
    CK(cudaMalloc((void **) &word_d, 256));
    setvbuf(stdout, NULL, _IONBF, 0);
    /* load both kernels first: a lazy load while spin_until runs would wait for it */
    spin_for<<<1, 1>>>(0);
    CK(cudaDeviceSynchronize());
    spin_until<<<1, 1, 0, rk>>>(stop_d);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(cudaStreamLegacy)); /* idle legacy stream, warm */

/* the mean us of `stmt` over n calls (i: the call's number) */
#define PER_CALL(stmt)                                                                       \
    ({                                                                                       \
        const double t0_ = now_us();                                                         \
        for (int i = 0; i < n; ++i) {                                                        \
            stmt;                                                                            \
        }                                                                                    \
        (now_us() - t0_) / n;                                                                \
    })
    for (int pass = 0; pass < 2; ++pass) {
        const double rec_sync = PER_CALL(CK(cudaEventRecord(ev, cudaStreamLegacy));
                                         CK(cudaEventSynchronize(ev)));
        const double rec = PER_CALL(CK(cudaEventRecord(ev, cudaStreamLegacy)));
        CK(cudaEventSynchronize(ev));
        const double rec_poll = PER_CALL(CK(cudaEventRecord(ev, cudaStreamLegacy));
                                         while (cudaErrorNotReady == cudaEventQuery(ev)) {});
        const double q_legacy = PER_CALL(CK(cudaStreamQuery(cudaStreamLegacy)));
        const double q_blk = PER_CALL(CK(cudaStreamQuery(blk)));
        const double q_ev = PER_CALL(CK(cudaEventQuery(ev)));
        const double wv = PER_CALL(
            if (CUDA_SUCCESS != cuStreamWriteValue32(CU_STREAM_LEGACY, (CUdeviceptr) word_d,
                                                     (cuuint32_t) i, 0)) {
                fprintf(stderr, "cuStreamWriteValue32 failed\n");
                return 1;
            });
        const double pa = PER_CALL(struct cudaPointerAttributes at;
                                   CK(cudaPointerGetAttributes(&at, word_d + (i & 1))));
        printf("pass %d, us a call (idle legacy stream, our kernel running): record+sync %.3f, "
               "record %.3f, record+query loop %.3f, query legacy %.3f, query blocking stream "
               "%.3f, query done event %.3f, cuStreamWriteValue32 on the legacy stream %.3f, "
               "cudaPointerGetAttributes %.3f\n",
               pass, rec_sync, rec, rec_poll, q_legacy, q_blk, q_ev, wv, pa);
    }

    const long long cycles = 200000000LL; /* ~0.1 s */
    const char *where[3] = {"legacy stream", "blocking stream", "per-thread default stream"};
    cudaStream_t on[3] = {cudaStreamLegacy, blk, cudaStreamPerThread};
    for (int w = 0; w < 3; ++w) {
        spin_for<<<1, 1, 0, on[w]>>>(cycles);
        CK(cudaGetLastError());
        cudaError_t q = cudaStreamQuery(cudaStreamLegacy);
        CK(cudaEventRecord(ev, cudaStreamLegacy));
        cudaError_t eq = cudaEventQuery(ev);
        printf("work on the %s: cudaStreamQuery(legacy) %s; event on legacy %s\n", where[w],
               busy(q), busy(eq));
        CK(cudaStreamSynchronize(on[w]));
    }
    *stop_h = 1;
    CK(cudaStreamSynchronize(rk));
    return 0;
}
