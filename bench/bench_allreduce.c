/*
 * Benchmark: our MPI_Allreduce on device buffers and ncclAllReduce, side by side in one
 * run, same sizes, same process layout (one process per GPU), each call completed before
 * the next (MPI_Allreduce returns with the result in place; NCCL is followed by a stream
 * synchronize, as nccl-tests -z 2 ... i.e. what MPI semantics require).
 *
 * Reports per size: time per call, algbw = bytes / time, busbw = algbw * 2(n-1)/n (the
 * nccl-tests formula for allreduce), and our/NCCL ratios. Times are the maximum over
 * ranks of the mean over iterations. float32 SUM, out of place.
 *
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self bench/bench_allreduce [maxbytes [minbytes]]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (cudaSuccess != e_) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                  \
                    cudaGetErrorString(e_));                                              \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)
#define NK(call)                                                                          \
    do {                                                                                  \
        ncclResult_t r_ = (call);                                                         \
        if (ncclSuccess != r_) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                  \
                    ncclGetErrorString(r_));                                              \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

static int iters_for(size_t bytes)
{
    if (bytes <= (1 << 20)) {
        return 200;
    }
    size_t it = ((size_t) 4 << 30) / bytes;
    return it < 5 ? 5 : it > 200 ? 200 : (int) it;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n, ndev;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 0) : ((size_t) 2 << 30);
    size_t minb = argc > 2 ? strtoull(argv[2], NULL, 0) : 8;

    ncclUniqueId id;
    if (0 == rank) {
        NK(ncclGetUniqueId(&id));
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t nc;
    NK(ncclCommInitRank(&nc, n, id, rank));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));

    float *sb, *rb;
    CK(cudaMalloc((void **) &sb, maxb));
    CK(cudaMalloc((void **) &rb, maxb));
    {
        size_t cnt = maxb / sizeof(float);
        float *h = malloc(maxb);
        for (size_t i = 0; i < cnt; ++i) {
            h[i] = (float) (rank + 1);
        }
        CK(cudaMemcpy(sb, h, maxb, cudaMemcpyHostToDevice));
        free(h);
    }
    const double bus = 2.0 * (n - 1) / n;
    if (0 == rank) {
        printf("# allreduce float32 sum, %d ranks, %d GPUs, out of place, per-call sync\n", n, ndev);
        printf("%12s %10s %10s %10s %10s %8s %8s %s\n", "bytes", "ours_us", "ours_busbw",
               "nccl_us", "nccl_busbw", "bw_ratio", "lat_ratio", "check");
    }
    for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
        size_t cnt = bytes / sizeof(float);
        int it = iters_for(bytes), warm = 5;
        double t_ours, t_nccl;
        /* ours */
        for (int i = 0; i < warm; ++i) {
            MPI_Allreduce(sb, rb, (int) cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        CK(cudaMemset(rb, 0, bytes));
        CK(cudaDeviceSynchronize());
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < it; ++i) {
            MPI_Allreduce(sb, rb, (int) cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        t_ours = (MPI_Wtime() - t0) / it;
        float probe[2] = {0, 0};
        CK(cudaMemcpy(&probe[0], rb, sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&probe[1], rb + cnt - 1, sizeof(float), cudaMemcpyDeviceToHost));
        int ok = probe[0] == (float) (n * (n + 1) / 2) && probe[1] == probe[0];
        /* NCCL */
        for (int i = 0; i < warm; ++i) {
            NK(ncclAllReduce(sb, rb, cnt, ncclFloat, ncclSum, nc, st));
            CK(cudaStreamSynchronize(st));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < it; ++i) {
            NK(ncclAllReduce(sb, rb, cnt, ncclFloat, ncclSum, nc, st));
            CK(cudaStreamSynchronize(st));
        }
        t_nccl = (MPI_Wtime() - t0) / it;
        double tt[2] = {t_ours, t_nccl}, tm[2];
        int okall;
        MPI_Reduce(tt, tm, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&ok, &okall, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
        if (0 == rank) {
            double bo = bytes / tm[0] / 1e9 * bus, bn = bytes / tm[1] / 1e9 * bus;
            printf("%12zu %10.2f %10.2f %10.2f %10.2f %8.3f %8.3f %s\n", bytes, tm[0] * 1e6, bo,
                   tm[1] * 1e6, bn, bo / bn, tm[0] / tm[1], okall ? "ok" : "WRONG");
            fflush(stdout);
        }
    }
    ncclCommDestroy(nc);
    cudaFree(sb);
    cudaFree(rb);
    MPI_Finalize();
    return 0;
}
