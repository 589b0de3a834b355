/*
 * GPU demo: MPI_Allreduce on CUDA device buffers for a few sizes, each checked against
 * the host reference; prints one line per call. One process per GPU (rank % devices).
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self examples/demo_gpu
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (cudaSuccess != cudaGetDeviceCount(&ndev) || 0 == ndev) {
        if (0 == rank) {
            printf("skipped: no GPU\n");
        }
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(rank % ndev);
    int failures = 0;
    size_t counts[] = {1, 1000, 100000, 10000000};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        size_t c = counts[k];
        int *h = malloc(c * sizeof(int)), *d = NULL;
        for (size_t i = 0; i < c; ++i) {
            h[i] = (int) (i % 100) + rank;
        }
        cudaMalloc((void **) &d, c * sizeof(int));
        cudaMemcpy(d, h, c * sizeof(int), cudaMemcpyHostToDevice);
        double t0 = MPI_Wtime();
        int rc = MPI_Allreduce(MPI_IN_PLACE, d, (int) c, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        cudaMemcpy(h, d, c * sizeof(int), cudaMemcpyDeviceToHost);
        long bad = 0;
        for (size_t i = 0; i < c; ++i) {
            bad += h[i] != (int) (i % 100) * n + n * (n - 1) / 2;
        }
        failures += (MPI_SUCCESS != rc || 0 != bad);
        if (0 == rank) {
            printf("allreduce int32 sum of %zu elements on device: rc %d, %s, %.1f us\n", c, rc,
                   0 == bad ? "correct" : "WRONG", dt * 1e6);
            fflush(stdout);
        }
        cudaFree(d);
        free(h);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0 == all ? 0 : 1;
}
