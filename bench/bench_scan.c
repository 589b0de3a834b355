/*
 * MPI_Scan, MPI_Exscan and MPI_Iscan (+ MPI_Wait) on device buffers, as the OSU benchmarks
 * time a collective: each call alone between two MPI_Barriers, the mean over iterations
 * and then over ranks. NCCL has no scan, so the reference is the previous coll module on
 * host copies: run it twice, once as it is (our engine) and once with
 * --mca coll_gpu_scan_algorithm fallback, and compare the two tables
 * (BENCH_PROGS=scan bash bench/gpu_run.sh bench runs both).
 *
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self bench/bench_scan [maxbytes]
 *
 * Every size's result is checked once against the sum computed here (integer-valued
 * floats: exact in any order); a wrong result prints "BAD" and the exit status is 1.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define BENCH_CK_ABORT() MPI_Abort(MPI_COMM_WORLD, 1)
#include "bench_cuda_check.h"

enum { SCAN, EXSCAN, ISCAN, NFORMS };
static const char *form_names[NFORMS] = {"scan", "exscan", "iscan"};

static float value(int r, size_t i)
{
    return (float) ((r + 1) * 3 + (int) (i % 61));
}

static void call(int form, const float *s, float *r, int count)
{
    if (SCAN == form) {
        MPI_Scan(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (EXSCAN == form) {
        MPI_Exscan(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        MPI_Request q;
        MPI_Iscan(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
}

/* wrong elements of rank me's result of form (exscan on rank 0: nothing to check) */
static long wrong(int form, const float *got, size_t count, int me)
{
    long bad = 0;
    const int upto = EXSCAN == form ? me : me + 1;
    for (size_t i = 0; upto > 0 && i < count; ++i) {
        float e = 0;
        for (int p = 0; p < upto; ++p) {
            e += value(p, i);
        }
        bad += got[i] != e;
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n, ndev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % (ndev > 0 ? ndev : 1)));
    const size_t maxb = argc > 1 ? strtoull(argv[1], NULL, 0) : ((size_t) 64 << 20);
    const size_t maxc = maxb / sizeof(float);
    float *h = malloc(maxb), *s, *r;
    CK(cudaMalloc((void **) &s, maxb));
    CK(cudaMalloc((void **) &r, maxb));
    for (size_t i = 0; i < maxc; ++i) {
        h[i] = value(rank, i);
    }
    CK(cudaMemcpy(s, h, maxb, cudaMemcpyHostToDevice));
    if (0 == rank) {
        printf("# MPI_Scan / MPI_Exscan / MPI_Iscan+MPI_Wait, float32 sum, device buffers, %d "
               "ranks, OSU timing (us, mean over ranks)\n%12s %10s %10s %10s\n",
               n, "bytes", "scan", "exscan", "iscan");
    }
    int failed = 0;
    static const size_t sizes[] = {8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && sizes[k] <= maxb; ++k) {
        const size_t bytes = sizes[k];
        const int count = (int) (bytes / sizeof(float));
        const int iters = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 40 : 10;
        double us[NFORMS];
        for (int f = 0; f < NFORMS; ++f) {
            CK(cudaMemset(r, 0, bytes));
            call(f, s, r, count); /* warm-up, and the check */
            CK(cudaMemcpy(h, r, bytes, cudaMemcpyDeviceToHost));
            long bad = wrong(f, h, (size_t) count, rank), all_bad = 0;
            MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
            if (all_bad > 0) {
                failed = 1;
                if (0 == rank) {
                    printf("BAD: %s of %zu bytes: %ld wrong elements\n", form_names[f], bytes,
                           all_bad);
                }
            }
            double t = 0;
            for (int i = 0; i < iters; ++i) {
                MPI_Barrier(MPI_COMM_WORLD);
                const double t0 = MPI_Wtime();
                call(f, s, r, count);
                t += MPI_Wtime() - t0;
                MPI_Barrier(MPI_COMM_WORLD);
            }
            double mean = t / iters * 1e6, sum = 0;
            MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            us[f] = sum / n;
        }
        if (0 == rank) {
            printf("%12zu %10.2f %10.2f %10.2f\n", bytes, us[SCAN], us[EXSCAN], us[ISCAN]);
            fflush(stdout);
        }
    }
    CK(cudaFree(s));
    CK(cudaFree(r));
    free(h);
    MPI_Finalize();
    return failed;
}
