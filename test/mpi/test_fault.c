/*
 * A peer dies in the middle of collectives across nodes: every survivor must get an MPI
 * error back (no hang) within coll_gpu_ras_timeout, and the failed communicator must keep
 * refusing calls with an error.
 *
 * Run under mpirun --enable-recovery (so the launcher does not kill the survivors first)
 * with --mca coll_gpu_fake_nodes N and --mca coll_gpu_ras_timeout T, as
 *   test_fault <victim rank> <result dir>
 * The victim starts a thread that kills the process with SIGKILL 300 ms after the loop of
 * large allreduces started, so it dies inside one of them. Each survivor writes
 * <result dir>/survivor.<rank> with the failing call's duration and error string, then
 * leaves with _exit (MPI_Finalize would wait for the dead process). The driver checks the
 * files (test/run_all.sh): one per survivor, each duration under T plus a margin.
 *
 *   test_fault <victim rank> <result dir> setup
 * The victim is killed (SIGKILL) while every other rank waits inside its first collective on
 * a new communicator, in the engine's set-up. Run without --enable-recovery: the launcher then
 * kills the survivors where they wait, as it does to a real job. Every rank writes its pid
 * to <result dir>/pid.<rank> first, and each survivor <result dir>/entered.<rank> just
 * before the collective; the victim dies once all have entered and a moment has passed. The
 * driver checks that no process of the job left a segment name in /dev/shm.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void write_file(const char *dir, const char *what, int rank, long value)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
    FILE *f = fopen(path, "w");
    if (NULL != f) {
        fprintf(f, "%ld\n", value);
        fclose(f);
    }
}

/* The victim of the set-up case: dies once every survivor has written entered.<rank>
 * (at most 30 s) and 500 ms more have passed, so that each survivor is inside the set-up. */
static void die_when_all_entered(const char *dir, int rank, int size)
{
    for (int waited = 0; waited < 3000; ++waited) {
        int entered = 0;
        for (int r = 0; r < size; ++r) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/entered.%d", dir, r);
            entered += (r != rank && 0 == access(path, F_OK));
        }
        if (entered == size - 1) {
            break;
        }
        usleep(10 * 1000);
    }
    usleep(500 * 1000);
    raise(SIGKILL);
}

static void *killer(void *arg)
{
    (void) arg;
    usleep(300 * 1000);
    raise(SIGKILL);
    return NULL;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (0 == rank) {
            fprintf(stderr, "usage: test_fault <victim rank> <result dir>\n");
        }
        MPI_Finalize();
        return 2;
    }
    const int victim = atoi(argv[1]);
    const char *dir = argv[2];
    const int setup_case = argc > 3 && 0 == strcmp(argv[3], "setup");
    write_file(dir, "pid", rank, (long) getpid());
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (setup_case) {
        int v = rank;
        if (rank == victim) {
            die_when_all_entered(dir, rank, size);
        }
        write_file(dir, "entered", rank, 1);
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_SUM, comm);
        /* not reached while the victim is dead: the launcher ends the job */
        fprintf(stderr, "test_fault: rank %d: the collective returned without rank %d\n", rank,
                victim);
        _exit(4);
    }

    enum { N = 1 << 20 }; /* 4 MiB of ints per call */
    int *a = malloc(sizeof(int) * N);
    for (int i = 0; i < N; ++i) {
        a[i] = rank + i;
    }
    /* one good call first: the communicator is set up on every rank */
    int rc = MPI_Allreduce(MPI_IN_PLACE, a, N, MPI_INT, MPI_SUM, comm);
    if (MPI_SUCCESS != rc) {
        fprintf(stderr, "test_fault: rank %d: the first allreduce failed\n", rank);
        _exit(3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        pthread_t t;
        pthread_create(&t, NULL, killer, NULL);
    }
    double t0 = now(), took = 0;
    long calls = 0;
    char err[MPI_MAX_ERROR_STRING] = "";
    while (now() - t0 < 120) {
        const double c0 = now();
        rc = MPI_Allreduce(MPI_IN_PLACE, a, N, MPI_INT, MPI_SUM, comm);
        took = now() - c0;
        ++calls;
        if (MPI_SUCCESS != rc) {
            int len = 0;
            MPI_Error_string(rc, err, &len);
            break;
        }
    }
    /* the failed communicator keeps refusing, at once */
    const double c1 = now();
    int rc2 = MPI_Allreduce(MPI_IN_PLACE, a, 16, MPI_INT, MPI_SUM, comm);
    const double again = now() - c1;
    char path[4096];
    snprintf(path, sizeof(path), "%s/survivor.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (NULL != f) {
        fprintf(f,
                "rank %d calls %ld failed %d took %.3f again_failed %d again_took %.3f error %s\n",
                rank, calls, MPI_SUCCESS != rc, took, MPI_SUCCESS != rc2, again, err);
        fclose(f);
    }
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}
