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
 *   - with the argument "threads" (MPI_THREAD_MULTIPLE), also 4 more dups, each set up by a
 *     host-buffer call before the GPU is chosen, then served by a thread of its own at once
 *     (two blocking, two non-blocking): the questions of 4 communicators asked concurrently;
 *   - afterwards every communicator runs our kernels (coll_gpu_transport 1, CUDA IPC)
 *     where the ranks' GPUs allow them, else shared memory (0): expected "cuda" or "host" as
 *     an argument says, otherwise from the layout the test sees itself (every rank on a GPU
 *     of its own, or every rank an MPS client: cuda; else host).
 *
 *   test_cuda_settle [cuda|host] [threads]
 *
 * Without a GPU it prints "skipped: no GPU" and exits 77.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

enum { NTHREADS = 4 };
static long failures;
static int rank = 0, size = 1, dev = 0;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                                    \
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

/* An int sum on host memory: sets @p comm up (blocking or not) before the GPU is chosen. */
static void host_call(MPI_Comm comm, int nonblocking)
{
    int one = 1, sum = 0;
    MPI_Request req;
    if (nonblocking) {
        MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    }
    CHECK(sum == size, "host %s before the GPU is chosen: %d, expected %d",
          nonblocking ? "iallreduce" : "allreduce", sum, size);
}

enum { MAX_FLOATS = 1 << 20 };

/* What one caller of device_rounds works on, made before any thread starts and freed after
 * all have ended: with threads, no cudaMalloc, cudaFree or synchronous legacy-stream copy
 * may run while a collective is in flight on another thread (README, Limits: such a call
 * waits for our kernels, which wait for a peer that may be held the same way). Copies go on
 * a non-blocking stream of the caller's own, from pinned memory, synchronized on that
 * stream alone before each collective. */
typedef struct {
    cudaStream_t stream;
    float *h, *d_in, *d_out;
} rounds_mem_t;

static int rounds_mem_make(rounds_mem_t *m)
{
    return cudaSuccess == cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking) &&
           cudaSuccess == cudaMallocHost((void **) &m->h, MAX_FLOATS * sizeof(float)) &&
           cudaSuccess == cudaMalloc((void **) &m->d_in, MAX_FLOATS * sizeof(float)) &&
           cudaSuccess == cudaMalloc((void **) &m->d_out, MAX_FLOATS * sizeof(float));
}

static void rounds_mem_free(rounds_mem_t *m)
{
    cudaFreeHost(m->h);
    cudaFree(m->d_in);
    cudaFree(m->d_out);
    cudaStreamDestroy(m->stream);
}

/* Device allreduces of 1 float to 1 Mi floats on @p comm, 6 rounds, each result against the
 * sum computed on the host. */
static void device_rounds(MPI_Comm comm, int nonblocking, const char *what, const rounds_mem_t *m)
{
    float *h = m->h;
    for (int round = 0; round < 6; ++round) {
        for (size_t n = 1; n <= MAX_FLOATS; n *= 16) {
            for (size_t i = 0; i < n; ++i) {
                h[i] = (float) ((rank + 1) * ((i + (size_t) round) % 7));
            }
            cudaMemcpyAsync(m->d_in, h, n * sizeof(float), cudaMemcpyHostToDevice, m->stream);
            cudaMemsetAsync(m->d_out, 0xff, n * sizeof(float), m->stream);
            cudaStreamSynchronize(m->stream);
            if (nonblocking) {
                MPI_Request req;
                MPI_Iallreduce(m->d_in, m->d_out, (int) n, MPI_FLOAT, MPI_SUM, comm, &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            } else {
                MPI_Allreduce(m->d_in, m->d_out, (int) n, MPI_FLOAT, MPI_SUM, comm);
            }
            cudaMemcpyAsync(h, m->d_out, n * sizeof(float), cudaMemcpyDeviceToHost, m->stream);
            cudaStreamSynchronize(m->stream);
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
            CHECK(0 == bad, "%s, round %d, %zu floats: %ld wrong elements, the first at %ld", what,
                  round, n, bad, first);
        }
    }
}

typedef struct {
    MPI_Comm comm;
    int index;
    const rounds_mem_t *mem;
} thread_arg_t;

static void *thread_main(void *p)
{
    const thread_arg_t *a = p;
    cudaSetDevice(dev); /* a new thread's current device is 0 */
    char what[64];
    snprintf(what, sizeof(what), "thread %d's dup (%s)", a->index,
             a->index % 2 ? "MPI_Iallreduce" : "MPI_Allreduce");
    device_rounds(a->comm, a->index % 2, what, a->mem);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 0, want_arg = -1;
    for (int i = 1; i < argc; ++i) {
        threads = threads || 0 == strcmp(argv[i], "threads");
        want_arg = 0 == strcmp(argv[i], "cuda") ? 1 : 0 == strcmp(argv[i], "host") ? 0 : want_arg;
    }
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (threads && MPI_THREAD_MULTIPLE != provided) {
        if (0 == rank) {
            printf("test_cuda_settle: FAIL: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        }
        MPI_Finalize();
        return 1;
    }

    const int before = primary_ctx_active();
    host_call(MPI_COMM_WORLD, 0);
    /* a communicator that only ever sees non-blocking calls: set up by its first one */
    MPI_Comm dup, tdup[NTHREADS];
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    host_call(dup, 1);
    for (int t = 0; threads && t < NTHREADS; ++t) {
        MPI_Comm_dup(MPI_COMM_WORLD, &tdup[t]);
        host_call(tdup[t], t % 2);
    }
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
        MPI_Finalize();
        return 77;
    }
    dev = local % ndev;
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
    const int want = want_arg >= 0 ? want_arg : distinct || all_mps;

    /* the threads' dups all at once, their questions concurrent; the world and the
     * non-blocking dup meanwhile on this thread */
    rounds_mem_t mem[NTHREADS + 1];
    const int nmem = threads ? NTHREADS + 1 : 1;
    int made = 0;
    for (int i = 0; i < nmem; ++i) {
        made += rounds_mem_make(&mem[i]);
    }
    CHECK(made == nmem, "device memory for %d callers: %d made", nmem, made);
    if (made != nmem) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pthread_t tid[NTHREADS];
    thread_arg_t targ[NTHREADS];
    int started = 0;
    for (int t = 0; threads && t < NTHREADS; ++t) {
        targ[t] = (thread_arg_t){tdup[t], t, &mem[1 + t]};
        started += 0 == pthread_create(&tid[t], NULL, thread_main, &targ[t]);
    }
    CHECK(started == (threads ? NTHREADS : 0), "%d of %d threads started", started, NTHREADS);
    device_rounds(MPI_COMM_WORLD, 0, "MPI_Allreduce on the world", &mem[0]);
    device_rounds(dup, 1, "MPI_Iallreduce on a dup", &mem[0]);
    for (int t = 0; t < started; ++t) {
        pthread_join(tid[t], NULL);
    }
    for (int i = 0; i < nmem; ++i) {
        rounds_mem_free(&mem[i]);
    }

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    const int transport = mt_comm_int_pvar(MPI_COMM_WORLD, "coll_gpu_transport");
    const int dup_transport = mt_comm_int_pvar(dup, "coll_gpu_transport");
    int tdup_transport[NTHREADS];
    for (int t = 0; threads && t < NTHREADS; ++t) {
        tdup_transport[t] = mt_comm_int_pvar(tdup[t], "coll_gpu_transport");
    }
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
        for (int t = 0; threads && t < NTHREADS; ++t) {
            CHECK(tdup_transport[t] == want,
                  "thread %d's dup runs coll_gpu_transport %d after the ranks chose their GPUs, "
                  "expected %d",
                  t, tdup_transport[t], want);
        }
    }

    long total = 0;
    MPI_Reduce(&failures, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("test_cuda_settle: np=%d%s transport %d (expected %d): %ld failures: %s\n", size,
               threads ? " threads" : "", transport, want, total, 0 == total ? "PASSED" : "FAILED");
    }
    for (int t = 0; threads && t < NTHREADS; ++t) {
        MPI_Comm_free(&tdup[t]);
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0 == total ? 0 : 1;
}
