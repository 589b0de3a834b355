/*
 * Start-up cost of a job: how long MPI_Init, a first MPI_Barrier and MPI_Finalize take,
 * timed inside the program with CLOCK_MONOTONIC. bench/bench_init.sh runs it with and
 * without coll/gpu in the coll list and compares; a component that declines, or one that
 * has not been asked for any work yet, should cost next to nothing here.
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self bench/bench_init
 * Prints one line on rank 0: "init <s> barrier <s> finalize <s>", init and barrier the
 * largest over the ranks, finalize rank 0's own (nothing can be gathered after it).
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

int main(int argc, char **argv)
{
    double t0 = now_s();
    MPI_Init(&argc, &argv);
    double t1 = now_s();
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now_s();

    int rank = 0;
    double mine[2] = {t1 - t0, t2 - t1}, worst[2] = {0, 0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* taken before this reduction, so its cost is not in them */
    MPI_Reduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    double t3 = now_s();
    MPI_Finalize();
    double t4 = now_s();
    if (0 == rank) {
        printf("init %.6f barrier %.6f finalize %.6f\n", worst[0], worst[1], t4 - t3);
    }
    return 0;
}
