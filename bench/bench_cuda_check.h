/*
 * bench/bench_cuda_check.h: the CUDA check of the benchmark programs (C and CUDA C++).
 *
 * CK(call) prints the failed call, where it is and CUDA's message, then ends the program.
 * A program that runs under MPI defines BENCH_CK_ABORT() as MPI_Abort(MPI_COMM_WORLD, 1)
 * before including this: one rank's failure must end the whole job, not leave the other
 * ranks waiting for it inside a collective.
 */
#ifndef BENCH_CUDA_CHECK_H
#define BENCH_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BENCH_CK_ABORT
#define BENCH_CK_ABORT() exit(1)
#endif

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (cudaSuccess != e_) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
            BENCH_CK_ABORT();                                                                      \
        }                                                                                          \
    } while (0)

#endif /* BENCH_CUDA_CHECK_H */
