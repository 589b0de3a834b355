/*
 * bench/pmpi_probe.so: the time a program spends inside the six collectives bench_colls and
 * bench_python time, measured at the MPI interface (PMPI), whatever called them.
 *
 *   mpirun ... -x LD_PRELOAD=$PWD/bench/pmpi_probe.so -x CGPU_PROBE_OUT=/path/prefix PROGRAM
 *
 * At MPI_Finalize each rank writes PREFIX.<rank>: one line per (collective, bytes) with the
 * calls and their mean microseconds inside MPI. Set against the caller's own per-call figure,
 * the difference is what the caller adds around MPI: for mpi4py, its argument handling and
 * the interpreter; set against a C program's inside time, whether the calls themselves ran
 * slower.
 *
 * Only the calls the caller times should count: its warm-up runs the first call's set-up,
 * and its own bookkeeping (a result's maximum over ranks, a check) is made of the same
 * collectives on host buffers. So the probe follows MPI_Pcontrol, the standard's switch for
 * profiling tools: level 0 stops the counting, any other level resumes it. A program that
 * never calls it has every call counted; bench_colls and bench_python call MPI_Pcontrol(0)
 * after MPI_Init and bracket each timed loop with MPI_Pcontrol(1) and MPI_Pcontrol(0).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { P_ALLREDUCE, P_ALLTOALL, P_ALLGATHER, P_REDUCE_SCATTER, P_BCAST, P_REDUCE, P_N };
static const char *const names[P_N] = {"allreduce",      "alltoall", "allgather",
                                       "reduce_scatter", "bcast",    "reduce"};
enum { MAX_LOG2 = 40 };
static double sum_ns[P_N][MAX_LOG2];
static long calls[P_N][MAX_LOG2];
static int counting = 1; /* MPI_Pcontrol's level is not 0 */

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e9 + (double) t.tv_nsec;
}

static void note(int which, long bytes, double t0)
{
    const double dt = now_ns() - t0;
    if (!counting) {
        return;
    }
    int b = 0;
    while (b + 1 < MAX_LOG2 && (1L << (b + 1)) <= bytes) {
        ++b;
    }
    sum_ns[which][b] += dt;
    calls[which][b]++;
}

static long bytes_of(int count, MPI_Datatype dt)
{
    int size = 0;
    PMPI_Type_size(dt, &size);
    return (long) count * size;
}

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c)
{
    const double t0 = now_ns();
    const int rc = PMPI_Allreduce(s, r, n, dt, op, c);
    note(P_ALLREDUCE, bytes_of(n, dt), t0);
    return rc;
}

/* the receive buffer's bytes over the communicator */
static long whole(int count, MPI_Datatype dt, MPI_Comm c)
{
    int p = 1;
    PMPI_Comm_size(c, &p);
    return bytes_of(count, dt) * p;
}

/* alltoall and allgather take the same arguments */
#define BLOCKS_WRAPPER(NAME, WHICH)                                                                \
    int MPI_##NAME(const void *s, int sn, MPI_Datatype sd, void *r, int rn, MPI_Datatype rd,       \
                   MPI_Comm c)                                                                     \
    {                                                                                              \
        const double t0 = now_ns();                                                                \
        const int rc = PMPI_##NAME(s, sn, sd, r, rn, rd, c);                                       \
        note(WHICH, whole(rn, rd, c), t0);                                                         \
        return rc;                                                                                 \
    }
BLOCKS_WRAPPER(Alltoall, P_ALLTOALL)
BLOCKS_WRAPPER(Allgather, P_ALLGATHER)

int MPI_Reduce_scatter_block(const void *s, void *r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c)
{
    const double t0 = now_ns();
    const int rc = PMPI_Reduce_scatter_block(s, r, n, dt, op, c);
    note(P_REDUCE_SCATTER, whole(n, dt, c), t0);
    return rc;
}

int MPI_Bcast(void *b, int n, MPI_Datatype dt, int root, MPI_Comm c)
{
    const double t0 = now_ns();
    const int rc = PMPI_Bcast(b, n, dt, root, c);
    note(P_BCAST, bytes_of(n, dt), t0);
    return rc;
}

int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm c)
{
    const double t0 = now_ns();
    const int rc = PMPI_Reduce(s, r, n, dt, op, root, c);
    note(P_REDUCE, bytes_of(n, dt), t0);
    return rc;
}

int MPI_Pcontrol(const int level, ...)
{
    counting = 0 != level;
    return PMPI_Pcontrol(level);
}

int MPI_Finalize(void)
{
    const char *prefix = getenv("CGPU_PROBE_OUT");
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (NULL != prefix) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", prefix, rank);
        FILE *f = fopen(path, "w");
        if (NULL != f) {
            fprintf(f, "# coll bytes calls inside_us (mean of the calls counted)\n");
            for (int w = 0; w < P_N; ++w) {
                for (int b = 0; b < MAX_LOG2; ++b) {
                    if (calls[w][b] > 0) {
                        fprintf(f, "%s %ld %ld %.3f\n", names[w], 1L << b, calls[w][b],
                                sum_ns[w][b] / (double) calls[w][b] / 1e3);
                    }
                }
            }
            fclose(f);
        }
    }
    return PMPI_Finalize();
}
