/*
 * Cost of health polling: collective throughput with and without a thread that reads
 * every coll_gpu pvar of the communicator as fast as it can (yielding between rounds).
 *   mpirun -np 4 --mca coll gpu,... [--mca coll_gpu_backend host] bench/bench_ras_poll
 * Prints calls/s both ways and the ratio, for an 8-byte and a 1 MiB float allreduce.
 * Built with CUDA, an argument "device" puts the buffers in device memory (rank % GPUs).
 */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CGPU_BENCH_CUDA
#include <cuda_runtime.h>
#endif

static MPI_T_pvar_session sess;
static MPI_T_pvar_handle handles[64];
static int nh;
static atomic_int stop_poll;
static unsigned long long reads;

static void *poll_main(void *arg)
{
    (void) arg;
    unsigned long long v[2];
    while (!atomic_load(&stop_poll)) {
        for (int i = 0; i < nh; ++i) {
            MPI_T_pvar_read(sess, handles[i], v);
            ++reads;
        }
        sched_yield();
    }
    return NULL;
}

static double run(MPI_Comm c, int count, int iters, float *a, float *b)
{
    MPI_Barrier(c);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, c);
    }
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, c);
    return iters / tmax;
}

int main(int argc, char **argv)
{
    int provided, rank, num;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_T_pvar_session_create(&sess);
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num && nh < 64; ++i) {
        char nm[128], desc[256];
        int nl = sizeof(nm), dl = sizeof(desc), verb, cls, bind, ro, cont, at, cnt;
        MPI_Datatype dt;
        MPI_T_enum en;
        MPI_T_pvar_get_info(i, nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont, &at);
        if (0 == strncmp(nm, "coll_gpu_", 9) && MPI_T_BIND_MPI_COMM == bind &&
            MPI_SUCCESS == MPI_T_pvar_handle_alloc(sess, i, &c, &handles[nh], &cnt)) {
            ++nh;
        }
    }
    const int counts[2] = {2, 262144};
    float *a = calloc(262144, sizeof(float)), *b = calloc(262144, sizeof(float));
    const char *where = "host";
#ifdef CGPU_BENCH_CUDA
    int ndev = 0;
    if (argc > 1 && 0 == strcmp(argv[1], "device") && cudaSuccess == cudaGetDeviceCount(&ndev) &&
        ndev > 0) {
        free(a);
        free(b);
        cudaSetDevice(rank % ndev);
        if (cudaSuccess != cudaMalloc((void **) &a, 262144 * sizeof(float)) ||
            cudaSuccess != cudaMalloc((void **) &b, 262144 * sizeof(float))) {
            fprintf(stderr, "bench_ras_poll: cudaMalloc failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        cudaMemset(a, 0, 262144 * sizeof(float));
        where = "device";
    }
#endif
    for (int k = 0; k < 2; ++k) {
        int iters = 0 == k ? 20000 : 500;
        run(c, counts[k], iters / 10, a, b); /* warm-up */
        double plain = run(c, counts[k], iters, a, b);
        atomic_store(&stop_poll, 0);
        reads = 0;
        pthread_t th;
        pthread_create(&th, NULL, poll_main, NULL);
        double t0 = MPI_Wtime();
        double polled = run(c, counts[k], iters, a, b);
        double dt = MPI_Wtime() - t0;
        atomic_store(&stop_poll, 1);
        pthread_join(th, NULL);
        if (0 == rank) {
            printf("allreduce %7zu bytes (%s): %9.0f calls/s without polling, %9.0f with %d pvars polled "
                   "at %.2e reads/s per rank: ratio %.3f\n",
                   counts[k] * sizeof(float), where, plain, polled, nh, reads / dt, polled / plain);
        }
    }
    for (int i = 0; i < nh; ++i) {
        MPI_T_pvar_handle_free(sess, &handles[i]);
    }
    MPI_T_pvar_session_free(&sess);
    MPI_T_finalize();
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}
