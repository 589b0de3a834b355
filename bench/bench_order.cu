// bench/bench_order.cu: what ordering a call after the default stream's work costs the host,
// and what cudaStreamQuery on the legacy stream answers. One process, one GPU, no MPI.
//
//   bench/bench_order [calls]      (default 20000)
//
// Per call, the host's microseconds of:
//   event     cudaEventRecord on the legacy stream, then cudaEventSynchronize (what
//             coll_gpu_cuda_stream_order event does before a small call)
//   poll      cudaEventRecord on the legacy stream, then cudaEventQuery until it is done
//   query     cudaStreamQuery(cudaStreamLegacy) alone
//   pointer   cuPointerGetAttributes of a device pointer (memory type, managed, ordinal), as
//             coll/gpu asks for each buffer
// each with the GPU idle and with a kernel spinning on a non-blocking stream (as the
// resident kernel does between calls). Then what the query answers while a kernel runs
// on the legacy stream, on a blocking stream and on a non-blocking stream: whether it
// covers the work the legacy stream is ordered after (every blocking stream's).
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "bench_cuda_check.h"

// spins until the host writes a nonzero stop word (mapped host memory)
__global__ void spin(volatile int *stop)
{
    while (0 == *stop) {
        __nanosleep(200);
    }
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

enum { EVENT, POLL, QUERY, POINTER, NKINDS };
static const char *const kind_name[NKINDS] = {"event", "poll", "query", "pointer"};

static void *dev_buf;

static void pointer_attrs()
{
    CUpointer_attribute what[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned int type = 0, managed = 0;
    int ordinal = -1;
    void *data[3] = {&type, &managed, &ordinal};
    if (CUDA_SUCCESS != cuPointerGetAttributes(3, what, data, (CUdeviceptr) dev_buf) ||
        CU_MEMORYTYPE_DEVICE != type) {
        std::fprintf(stderr, "bench_order: cuPointerGetAttributes failed\n");
        std::exit(1);
    }
}

static double per_call_us(int kind, cudaEvent_t ev, int calls)
{
    double t0 = 0;
    for (int i = -calls / 10; i < calls; ++i) { // a tenth of warm-up calls
        if (0 == i) {
            t0 = now_us();
        }
        if (POINTER == kind) {
            pointer_attrs();
            continue;
        }
        if (QUERY == kind) {
            cudaError_t e = cudaStreamQuery(cudaStreamLegacy);
            if (cudaSuccess != e && cudaErrorNotReady != e) {
                CK(e);
            }
            continue;
        }
        CK(cudaEventRecord(ev, cudaStreamLegacy));
        if (EVENT == kind) {
            CK(cudaEventSynchronize(ev));
        } else {
            cudaError_t e;
            while (cudaErrorNotReady == (e = cudaEventQuery(ev))) {
            }
            CK(e);
        }
    }
    return (now_us() - t0) / calls;
}

// a spinning kernel on @p s, stopped by the returned word
static volatile int *start_spin(cudaStream_t s, volatile int *stop)
{
    *stop = 0;
    int *d = nullptr;
    CK(cudaHostGetDevicePointer((void **) &d, (void *) stop, 0));
    spin<<<1, 1, 0, s>>>(d);
    CK(cudaGetLastError());
    return stop;
}

static const char *query_now()
{
    cudaError_t e = cudaStreamQuery(cudaStreamLegacy);
    if (cudaErrorNotReady == e) {
        return "not ready";
    }
    CK(e);
    return "done";
}

int main(int argc, char **argv)
{
    const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
    if (calls <= 0) {
        std::fprintf(stderr, "usage: bench_order [calls > 0]\n");
        return 2;
    }
    int ndev = 0;
    if (cudaSuccess != cudaGetDeviceCount(&ndev) || 0 == ndev) {
        std::printf("bench_order: skipped: no GPU\n");
        return 0;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaStream_t nb, bl;
    CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&bl, cudaStreamDefault));
    CK(cudaMalloc(&dev_buf, 1 << 20));
    int *stop_h = nullptr;
    CK(cudaHostAlloc((void **) &stop_h, sizeof(int), cudaHostAllocMapped));
    volatile int *stop = stop_h;

    std::printf("# bench_order: %s, %d calls a figure, us a call (host time)\n", prop.name, calls);
    std::printf("%-8s %12s %22s\n", "kind", "gpu idle", "kernel on non-blocking");
    for (int k = 0; k < NKINDS; ++k) {
        const double idle = per_call_us(k, ev, calls);
        start_spin(nb, stop);
        const double busy = per_call_us(k, ev, calls);
        *stop = 1;
        CK(cudaStreamSynchronize(nb));
        std::printf("%-8s %12.3f %22.3f\n", kind_name[k], idle, busy);
    }

    // what the query covers: a kernel spinning on each kind of stream
    const struct {
        const char *name;
        cudaStream_t s;
    } on[] = {
        {"legacy stream", cudaStreamLegacy}, {"blocking stream", bl}, {"non-blocking stream", nb}};
    for (const auto &o : on) {
        start_spin(o.s, stop);
        const char *answer = query_now();
        *stop = 1;
        CK(cudaDeviceSynchronize());
        std::printf("# cudaStreamQuery(cudaStreamLegacy) with a kernel running on the %s: %s\n",
                    o.name, answer);
    }
    CK(cudaFreeHost(stop_h));
    CK(cudaFree(dev_buf));
    CK(cudaStreamDestroy(nb));
    CK(cudaStreamDestroy(bl));
    CK(cudaEventDestroy(ev));
    return 0;
}
