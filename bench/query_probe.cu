/* What each way for the host to learn that the legacy default stream is done costs, with
 * nothing else running on the device and with a kernel of ours running on a non-blocking
 * stream of the same context (as the resident kernel does). One process, device 0.
 * Build: nvcc -O2 -o bench/query_probe bench/query_probe.cu -lcuda
 * Run: bench/query_probe idle; bench/query_probe running (session 18:
 * query_probe_1xH200_<commit>.txt in bench/results). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define CK(x) do { cudaError_t e_ = (x); if (cudaSuccess != e_) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
#define CU(x) do { if (CUDA_SUCCESS != (x)) { fprintf(stderr, "%s:%d failed\n", __FILE__, __LINE__); exit(1);} } while (0)
__global__ void spin_until(volatile int *stop) { while (0 == *stop) { } }
__global__ void put(volatile unsigned *w, unsigned v) { *w = v; __threadfence_system(); }
static double now_us(void){ struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec*1e6+ts.tv_nsec*1e-3; }
static int n = 20000;
/* the mean us of the statements over n calls (i: the call's number, from 1) */
#define PER_CALL(name, ...) do { const double t0_ = now_us(); for (int i = 1; i <= n; ++i) { __VA_ARGS__; } \
    printf("  %-58s %.3f us\n", name, (now_us() - t0_) / n); } while (0)
int main(int argc, char **argv)
{
    const int running = argc > 1 && !strcmp(argv[1], "running");
    CK(cudaSetDevice(0));
    volatile unsigned *word_h; unsigned *word_d; int *stop_h, *stop_d;
    CK(cudaHostAlloc((void **) &word_h, 64, cudaHostAllocMapped)); word_h[0] = 0;
    CK(cudaHostGetDevicePointer((void **) &word_d, (void *) word_h, 0));
    CK(cudaHostAlloc((void **) &stop_h, 64, cudaHostAllocMapped)); *stop_h = 0;
    CK(cudaHostGetDevicePointer((void **) &stop_d, stop_h, 0));
    unsigned *src_h; CK(cudaHostAlloc((void **) &src_h, 64, 0));
    cudaStream_t rk, s2; CK(cudaStreamCreateWithFlags(&rk, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t ev, evi, ev2; CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&evi, cudaEventDisableTiming | cudaEventInterprocess));
    CK(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming));
    cudaEvent_t evt; CK(cudaEventCreate(&evt));
    put<<<1, 1>>>(word_d, 0); spin_until<<<1, 1, 0, rk>>>(stop_d); *stop_h = 1; CK(cudaDeviceSynchronize()); *stop_h = 0;
    if (running) { spin_until<<<1, 32, 0, rk>>>(stop_d); CK(cudaGetLastError()); }
    CK(cudaStreamSynchronize(cudaStreamLegacy));
    printf("%s\n", running ? "a kernel of ours running" : "nothing running");
    CK(cudaEventRecord(ev, cudaStreamLegacy)); CK(cudaEventSynchronize(ev));
    unsigned base = 0;
    for (int pass = 0; pass < 2; ++pass) {
        printf(" pass %d\n", pass);
        PER_CALL("cudaEventQuery of a completed event", CK(cudaEventQuery(ev)));
        CK(cudaEventRecord(evi, cudaStreamLegacy)); CK(cudaEventSynchronize(evi));
        PER_CALL("cudaEventQuery of a completed interprocess event", CK(cudaEventQuery(evi)));
        PER_CALL("record interprocess on legacy + query until done", CK(cudaEventRecord(evi, cudaStreamLegacy)); while (cudaErrorNotReady == cudaEventQuery(evi)) {});
        PER_CALL("record interprocess on legacy alone", CK(cudaEventRecord(evi, cudaStreamLegacy)));
        CK(cudaEventSynchronize(evi));
        CK(cudaEventRecord(evt, cudaStreamLegacy)); CK(cudaEventSynchronize(evt));
        PER_CALL("cudaEventQuery of a completed timing event", CK(cudaEventQuery(evt)));
        PER_CALL("record timing event on legacy + query until done", CK(cudaEventRecord(evt, cudaStreamLegacy)); while (cudaErrorNotReady == cudaEventQuery(evt)) {});
        PER_CALL("record timing event on legacy alone", CK(cudaEventRecord(evt, cudaStreamLegacy)));
        CK(cudaEventSynchronize(evt));
        CK(cudaEventRecord(ev2, s2)); CK(cudaEventSynchronize(ev2));
        PER_CALL("cudaEventQuery of a completed event of s2", CK(cudaEventQuery(ev2)));
        PER_CALL("cudaStreamQuery(s2), idle", CK(cudaStreamQuery(s2)));
        PER_CALL("record on legacy + query until done", CK(cudaEventRecord(ev, cudaStreamLegacy)); while (cudaErrorNotReady == cudaEventQuery(ev)) {});
        PER_CALL("record on legacy + cudaEventSynchronize", CK(cudaEventRecord(ev, cudaStreamLegacy)); CK(cudaEventSynchronize(ev)));
        base += n; PER_CALL("cuStreamWriteValue32(legacy, host word) + poll word", CU(cuStreamWriteValue32(CU_STREAM_LEGACY, (CUdeviceptr) word_d, base + i, 0)); while (word_h[0] != base + i) {});
        base += n; PER_CALL("record legacy, s2 waits, WriteValue32(s2, host) + poll", CK(cudaEventRecord(ev, cudaStreamLegacy)); CK(cudaStreamWaitEvent(s2, ev, 0)); CU(cuStreamWriteValue32((CUstream) s2, (CUdeviceptr) word_d, base + i, 0)); while (word_h[0] != base + i) {});
        base += n; PER_CALL("put<<<1,1>>> on legacy writing the host word + poll", put<<<1, 1>>>(word_d, base + i); while (word_h[0] != base + i) {});
        base += n; PER_CALL("cudaMemcpyAsync 4 B pinned->mapped on legacy + poll", src_h[0] = base + i; CK(cudaMemcpyAsync((void *) word_h, src_h, 4, cudaMemcpyHostToHost, cudaStreamLegacy)); while (word_h[0] != base + i) {});
        PER_CALL("cudaStreamQuery(legacy), idle", CK(cudaStreamQuery(cudaStreamLegacy)));
        PER_CALL("cudaEventRecord on legacy alone", CK(cudaEventRecord(ev, cudaStreamLegacy)));
        CK(cudaEventSynchronize(ev));
        base += n; PER_CALL("cuStreamWriteValue32 on legacy alone", CU(cuStreamWriteValue32(CU_STREAM_LEGACY, (CUdeviceptr) word_d, base + i, 0)));
        CK(cudaStreamSynchronize(cudaStreamLegacy));
    }
    *stop_h = 1; CK(cudaDeviceSynchronize());
    return 0;
}
