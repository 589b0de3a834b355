/*
 * test_cuda_settle: the start-up of most GPU codes, on MPI_COMM_WORLD.
 *
 *   MPI_Init; an MPI_Allreduce of one int (host memory) before any GPU is chosen: that call
 *   sets the world's engine communicator up; the node-local rank from MPI_Comm_split_type;
 *   cudaSetDevice(local rank % devices); then MPI_Allreduce on device buffers.
 *
 * Checks, on every rank:
 *   - the host-buffer calls made no CUDA context: device 0's primary context (the driver's
 *     answer) is inactive after them where it was before;
 *   - every device allreduce (several sizes, float sum) equals the sum computed on the host;
 *   - the same on a dup of the world that only ever sees MPI_Iallreduce (its set-up and
 *     its questions run on the worker thread);
 *   - afterwards both communicators run our kernels (coll_gpu_transport 1, CUDA IPC)
 *     where the ranks' GPUs allow them, else shared memory (0): expected "cuda" or "host" as
 *     the first argument says, otherwise from the layout the test sees itself (every rank on
 *     a GPU of its own, or every rank an MPS client: cuda; else host).
 *
 * Without a GPU it prints "skipped: no GPU" and exits 77.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static long failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ++failures;                                                                            \
            printf("[rank %d] FAIL %s:%d: ", rank, __FILE__, __LINE__);                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* 1: device 0's primary context is active; 0: not; -1: the driver cannot say */
static int primary_ctx_active(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (NULL == lib) {
        return -1;
    }
    int (*init)(unsigned) = (int (*)(unsigned)) dlsym(lib, "cuInit");
    int (*get)(int *, int) = (int (*)(int *, int)) dlsym(lib, "cuDeviceGet");
    int (*state)(int, unsigned *, int *) =
        (int (*)(int, unsigned *, int *)) dlsym(lib, "cuDevicePrimaryCtxGetState");
    int dev = 0, active = 0;
    unsigned flags = 0;
    if (NULL == init || NULL == get || NULL == state || 0 != init(0) || 0 != get(&dev, 0) ||
        0 != state(dev, &flags, &active)) {
        return -1;
    }
    return active ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rank = 0, size = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const int before = primary_ctx_active();
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size, "host allreduce before the GPU is chosen: %d, expected %d", sum, size);
    /* a communicator that only ever sees non-blocking calls: set up by its first one */
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Request req;
    sum = 0;
    MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(sum == size, "host iallreduce before the GPU is chosen: %d, expected %d", sum, size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int local = 0;
    MPI_Comm_rank(node, &local);
    const int after = primary_ctx_active();
    CHECK(!(0 == before && 0 != after),
          "host-buffer collectives before the GPU was chosen made a context on device 0 "
          "(primary context active: %d before, %d after)",
          before, after);

    int ndev = 0;
    int have = cudaSuccess == cudaGetDeviceCount(&ndev) && ndev > 0;
    int all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        if (0 == rank) {
            printf("test_cuda_settle: skipped: no GPU\n");
        }
        MPI_Comm_free(&dup);
        MPI_Comm_free(&node);
        MPI_Finalize();
        return 77;
    }
    const int dev = local % ndev;
    cudaSetDevice(dev);

    /* what the layout allows: a GPU each, or MPS everywhere (the test's own look) */
    char bus[32] = {0}, *buses = calloc((size_t) size, sizeof(bus));
    cudaDeviceGetPCIBusId(bus, (int) sizeof(bus) - 1, dev);
    int mps = 0, all_mps = 0;
    cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, dev);
    mps = 0 != mps;
    MPI_Allgather(bus, (int) sizeof(bus), MPI_CHAR, buses, (int) sizeof(bus), MPI_CHAR,
                  MPI_COMM_WORLD);
    MPI_Allreduce(&mps, &all_mps, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int distinct = 1;
    for (int i = 0; i < size; ++i) {
        for (int j = 0; j < i; ++j) {
            distinct = distinct && 0 != strcmp(buses + (size_t) i * sizeof(bus),
                                               buses + (size_t) j * sizeof(bus));
        }
    }
    free(buses);
    int want = distinct || all_mps;
    if (argc > 1 && 0 == strcmp(argv[1], "cuda")) {
        want = 1;
    } else if (argc > 1 && 0 == strcmp(argv[1], "host")) {
        want = 0;
    }

    const size_t max = 1 << 20;
    float *h = malloc(max * sizeof(float)), *d_in = NULL, *d_out = NULL;
    cudaMalloc((void **) &d_in, max * sizeof(float));
    cudaMalloc((void **) &d_out, max * sizeof(float));
    for (int round = 0; round < 6; ++round) {
        for (size_t n = 1; n <= max; n *= 16) {
            for (int c = 0; c < 2; ++c) { /* on the world, blocking; on dup, non-blocking */
                for (size_t i = 0; i < n; ++i) {
                    h[i] = (float) ((rank + 1) * ((i + (size_t) round) % 7));
                }
                cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice);
                cudaMemset(d_out, 0xff, n * sizeof(float));
                if (0 == c) {
                    MPI_Allreduce(d_in, d_out, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                } else {
                    MPI_Iallreduce(d_in, d_out, (int) n, MPI_FLOAT, MPI_SUM, dup, &req);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                }
                cudaMemcpy(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
                long bad = 0, first = -1;
                for (size_t i = 0; i < n; ++i) {
                    /* sum over ranks r of (r + 1) * k: small integers, exact in float */
                    const float expect =
                        (float) (size * (size + 1) / 2 * (int) ((i + (size_t) round) % 7));
                    if (h[i] != expect) {
                        first = first < 0 ? (long) i : first;
                        ++bad;
                    }
                }
                CHECK(0 == bad, "%s, round %d, %zu floats: %ld wrong elements, the first at %ld",
                      0 == c ? "MPI_Allreduce on the world" : "MPI_Iallreduce on a dup", round, n,
                      bad, first);
            }
        }
    }
    free(h);
    cudaFree(d_in);
    cudaFree(d_out);

    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    const int transport = mt_comm_int_pvar(MPI_COMM_WORLD, "coll_gpu_transport");
    const int dup_transport = mt_comm_int_pvar(dup, "coll_gpu_transport");
    MPI_T_finalize();
    if (size > 1) {
        CHECK(transport == want,
              "MPI_COMM_WORLD runs coll_gpu_transport %d after the ranks chose their GPUs, "
              "expected %d (%s)",
              transport, want, want ? "our kernels over CUDA IPC" : "shared memory");
        CHECK(dup_transport == want,
              "a dup that saw only non-blocking calls runs coll_gpu_transport %d after the "
              "ranks chose their GPUs, expected %d",
              dup_transport, want);
    }

    long total = 0;
    MPI_Reduce(&failures, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("test_cuda_settle: np=%d transport %d (expected %d): %ld failures: %s\n", size,
               transport, want, total, 0 == total ? "PASSED" : "FAILED");
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0 == total ? 0 : 1;
}
