/*
 * How much of the caller's CPU a non-blocking collective takes while the GPU is still busy
 * with the application's earlier work: each round queues a large cudaMemsetAsync on the
 * legacy stream, posts MPI_Iallreduce (8 bytes, device buffers), runs a fixed amount of CPU
 * work, and waits. Under Open MPI's default binding our worker shares the caller's core,
 * and it waits on the host for that memset before a resident call; the CPU work's time
 * against its time alone (measured first) is what the worker took.
 *
 *   mpirun -np 2 [--bind-to none] bench/nb_busy_probe [memset MiB] [rounds]
 * Build: mpicc -O2 -I/usr/local/cuda/include bench/nb_busy_probe.c -L/usr/local/cuda/lib64 -lcudart
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

static volatile double sink;

static void cpu_work(long n)
{
    double x = 1.0;
    for (long i = 0; i < n; ++i) {
        x = x * 1.0000001 + 1e-9;
    }
    sink = x;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t) n, sizeof(*v), cmp);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024;
    const int rounds = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 200;
    int ndev = 0;
    if (cudaSuccess != cudaGetDeviceCount(&ndev) || ndev < 1) {
        if (0 == rank) {
            printf("nb_busy_probe: skipped: no GPU\n");
        }
        MPI_Finalize();
        return 0;
    }
    cudaSetDevice(rank % ndev);
    char *big;
    int *d;
    if (cudaSuccess != cudaMalloc((void **) &big, mib << 20) ||
        cudaSuccess != cudaMalloc((void **) &d, 2 * sizeof(int))) {
        fprintf(stderr, "nb_busy_probe: cudaMalloc failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* the memset's time alone, and CPU work of about the same length */
    cudaMemsetAsync(big, 1, mib << 20, 0);
    cudaDeviceSynchronize();
    double t0 = now_us();
    cudaMemsetAsync(big, 2, mib << 20, 0);
    cudaDeviceSynchronize();
    const double memset_us = now_us() - t0;
    long n = 1000000;
    t0 = now_us();
    cpu_work(n);
    n = (long) ((double) n * memset_us / (now_us() - t0));
    double *alone = malloc(sizeof(double) * (size_t) rounds);
    double *post = malloc(sizeof(double) * (size_t) rounds);
    double *work = malloc(sizeof(double) * (size_t) rounds);
    double *wait = malloc(sizeof(double) * (size_t) rounds);
    long bad = 0;
    for (int i = 0; i < rounds; ++i) {
        t0 = now_us();
        cpu_work(n);
        alone[i] = now_us() - t0;
    }
    for (int i = 0; i < rounds + 10; ++i) {
        int h[2] = {rank + i, 1}, r[2] = {0, 0};
        cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
        MPI_Barrier(MPI_COMM_WORLD);
        cudaMemsetAsync(big, i & 0xff, mib << 20, 0); /* the application's earlier GPU work */
        MPI_Request req;
        const double a = now_us();
        MPI_Iallreduce(MPI_IN_PLACE, d, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        const double b = now_us();
        cpu_work(n);
        const double c = now_us();
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        const double e = now_us();
        cudaMemcpy(r, d, sizeof(r), cudaMemcpyDeviceToHost);
        /* host reference: sum over ranks of (rank + i), and size */
        bad += r[0] != size * i + size * (size - 1) / 2 || r[1] != size;
        if (i >= 10) {
            post[i - 10] = b - a;
            work[i - 10] = c - b;
            wait[i - 10] = e - c;
        }
    }
    cudaDeviceSynchronize();
    cudaFree(d);
    cudaFree(big);
    const double m_alone = median(alone, rounds), m_post = median(post, rounds),
                 m_work = median(work, rounds), m_wait = median(wait, rounds);
    for (int p = 0; p < size; ++p) {
        if (p == rank) {
            printf("rank %d: memset %zu MiB %.0f us; CPU work alone %.1f us, during the call %.1f "
                   "(+%.1f); post %.2f us, wait after the work %.1f us; %ld wrong results\n",
                   rank, mib, memset_us, m_alone, m_work, m_work - m_alone, m_post, m_wait, bad);
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(alone);
    free(post);
    free(work);
    free(wait);
    MPI_Finalize();
    return bad != 0;
}
