/* Does a kernel running elsewhere slow the primary context's completion queries? The
 * spinning kernel runs on a non-blocking stream of the primary context (`primary`), of a
 * green context of 8 SMs (`green`), of a second context (`ctx2`), or nowhere (`none`);
 * each says whether it can write the primary context's device memory. One process, device 0.
 * Build: nvcc -O2 -arch=sm_90 -o bench/context_probe bench/context_probe.cu -lcuda
 * Run: for m in none primary green ctx2; do bench/context_probe $m; done (session 18). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define CK(x) do { cudaError_t e_ = (x); if (cudaSuccess != e_) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
#define CU(x) do { CUresult r_ = (x); if (CUDA_SUCCESS != r_) { const char *s_ = ""; cuGetErrorString(r_, &s_); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1);} } while (0)
__global__ void spin_until(volatile int *stop, int *mark)
{
    if (0 == threadIdx.x) *mark = 42;
    while (0 == *stop) { }
}
static double now_us(void){ struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec*1e6+ts.tv_nsec*1e-3; }
#define PER_CALL(name, ...) do { const double t0_ = now_us(); for (int i = 1; i <= n; ++i) { __VA_ARGS__; } printf("  %-46s %.3f us\n", name, (now_us() - t0_) / n); } while (0)
int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "primary";
    const int n = 20000;
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    CUcontext prim; CU(cuCtxGetCurrent(&prim));
    int *stop_h, *stop_d, *mark_d, mark_h = 0;
    CK(cudaHostAlloc((void **) &stop_h, 64, cudaHostAllocMapped)); *stop_h = 0;
    CK(cudaHostGetDevicePointer((void **) &stop_d, stop_h, 0));
    CK(cudaMalloc((void **) &mark_d, 64)); CK(cudaMemset(mark_d, 0, 64));
    cudaEvent_t ev; CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    spin_until<<<1, 1>>>(stop_d, mark_d); *stop_h = 1; CK(cudaDeviceSynchronize()); *stop_h = 0; CK(cudaMemset(mark_d, 0, 64));
    cudaStream_t s = NULL;
    if (!strcmp(mode, "primary")) {
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        spin_until<<<1, 32, 0, s>>>(stop_d, mark_d);
    } else if (!strcmp(mode, "green")) {
        CUdevice dev; CU(cuDeviceGet(&dev, 0));
        CUdevResource all, part, rest; unsigned nb = 1;
        CU(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
        CU(cuDevSmResourceSplitByCount(&part, &nb, &all, &rest, 0, 8));
        printf("green context: %u SMs of %u\n", part.sm.smCount, all.sm.smCount);
        CUdevResourceDesc desc; CU(cuDevResourceGenerateDesc(&desc, &part, 1));
        CUgreenCtx g; CU(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
        CUstream gs; CU(cuGreenCtxStreamCreate(&gs, g, CU_STREAM_NON_BLOCKING, 0));
        s = (cudaStream_t) gs;
        spin_until<<<1, 32, 0, s>>>(stop_d, mark_d);
    } else if (!strcmp(mode, "ctx2")) {
        CUdevice dev; CU(cuDeviceGet(&dev, 0));
        CUcontext c2; CU(cuCtxCreate(&c2, NULL, 0, dev));
        int *stop2_d; CU(cuMemHostGetDevicePointer((CUdeviceptr *) &stop2_d, stop_h, 0));
        int *mark2; CK(cudaMalloc((void **) &mark2, 64));
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        spin_until<<<1, 32, 0, s>>>(stop2_d, mark2);
        CK(cudaGetLastError());
        CU(cuCtxSetCurrent(prim));
    }
    CK(cudaGetLastError());
    { const double t0 = now_us(); while (now_us() - t0 < 20000) {} }
    CK(cudaMemcpy(&mark_h, mark_d, 4, cudaMemcpyDeviceToHost));
    printf("%s: the running kernel %s the primary context's device memory (mark %d)\n", mode, 42 == mark_h ? "wrote" : "did not write", mark_h);
    CK(cudaEventRecord(ev, cudaStreamLegacy)); CK(cudaEventSynchronize(ev));
    for (int pass = 0; pass < 2; ++pass) {
        PER_CALL("cudaEventQuery of a completed event", CK(cudaEventQuery(ev)));
        PER_CALL("record on legacy + query until done", CK(cudaEventRecord(ev, cudaStreamLegacy)); while (cudaErrorNotReady == cudaEventQuery(ev)) {});
        PER_CALL("cudaStreamQuery(legacy)", CK(cudaStreamQuery(cudaStreamLegacy)));
    }
    cudaError_t q = s ? cudaStreamQuery(s) : cudaSuccess;
    printf("  its stream: %s\n", cudaErrorNotReady == q ? "running" : cudaGetErrorString(q));
    *stop_h = 1;
    if (s) CK(cudaStreamSynchronize(s));
    CK(cudaDeviceSynchronize());
    return 0;
}
