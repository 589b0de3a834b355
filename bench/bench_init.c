/*
 * Start-up cost of a job: how long MPI_Init, a first MPI_Barrier and MPI_Finalize take,
 * timed inside the program with CLOCK_MONOTONIC. bench/bench_init.sh runs it with and
 * without coll/gpu in the coll list and compares; a component that declines, or one that
 * has not been asked for any work yet, should cost next to nothing here.
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self bench/bench_init
 * Prints one line on rank 0: "init <s> barrier <s> finalize <s> cpu <s>": init and
 * barrier the largest over the ranks, finalize rank 0's own (nothing can be gathered after
 * it), cpu the largest CPU time (user + system, all threads) a process had used when
 * MPI_Init returned. On a loaded machine the wall times wander with the load; the CPU
 * time much less, but it misses time spent asleep (a library calibrating its clock).
 */
#include <mpi.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           1e-6 * (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int main(int argc, char **argv)
{
    double t0 = now_s();
    MPI_Init(&argc, &argv);
    double t1 = now_s(), cpu = cpu_s();
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now_s();

    int rank = 0;
    double mine[3] = {t1 - t0, t2 - t1, cpu}, worst[3] = {0, 0, 0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* taken before this reduction, so its cost is not in them */
    MPI_Reduce(mine, worst, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    double t3 = now_s();
    MPI_Finalize();
    double t4 = now_s();
    if (0 == rank) {
        printf("init %.6f barrier %.6f finalize %.6f cpu %.6f\n", worst[0], worst[1], t4 - t3,
               worst[2]);
    }
    return 0;
}
