/*
 * Host buffers: MPI_Allreduce (float sum), MPI_Alltoall, MPI_Bcast (root 0) and MPI_Allgather
 * on malloc'ed memory, timed as the OSU micro-benchmarks time them: each call alone between
 * two MPI_Barriers, the mean over iterations on each rank, then the mean over ranks. One job
 * runs one coll configuration; bench/bench_host.sh runs coll/gpu's and the stock one's
 * interleaved and prints them side by side.
 *
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host \
 *       bench/bench_host [all|allreduce|alltoall|bcast|allgather[,...]] [max_bytes [min_bytes]]
 *
 * Sizes double from min_bytes (default 8) to max_bytes (default 4 MiB): the allreduce and
 * bcast buffer, one rank's block of the alltoall and the allgather (OSU's convention).
 * Prints on rank 0 one line a size: "name bytes us check"; check is "ok" when every rank's
 * result matched a host computation of it on the first and the last iteration, else "BAD"
 * (and the exit status is 1).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_COLLS = 4 };
static const char *const coll_names[N_COLLS] = {"allreduce", "alltoall", "bcast", "allgather"};

static int rank, size;

/* Values every rank can compute for any rank, element and round: the reference. */
static float val(int r, size_t i, int round)
{
    return (float) ((r + 1) * 3 + (int) (i % 97) + round);
}

static void fill(int coll, float *s, size_t n, int round)
{
    const int blocks = 1 == coll ? size : 1; /* alltoall: block p goes to rank p */
    for (int p = 0; p < blocks; ++p) {
        for (size_t i = 0; i < n; ++i) {
            s[(size_t) p * n + i] = val(rank, i + (size_t) p, round);
        }
    }
}

static int check(int coll, const float *r, size_t n, int round)
{
    size_t bad = 0;
    switch (coll) {
    case 0: /* allreduce: the sum over ranks, exact in float for these small integers */
        for (size_t i = 0; i < n; ++i) {
            float want = 0;
            for (int p = 0; p < size; ++p) {
                want += val(p, i, round);
            }
            bad += r[i] != want;
        }
        break;
    case 1: /* alltoall: block p is what p sent to this rank */
        for (int p = 0; p < size; ++p) {
            for (size_t i = 0; i < n; ++i) {
                bad += r[(size_t) p * n + i] != val(p, i + (size_t) rank, round);
            }
        }
        break;
    case 2: /* bcast: root 0's values */
        for (size_t i = 0; i < n; ++i) {
            bad += r[i] != val(0, i, round);
        }
        break;
    default: /* allgather: block p is p's values */
        for (int p = 0; p < size; ++p) {
            for (size_t i = 0; i < n; ++i) {
                bad += r[(size_t) p * n + i] != val(p, i, round);
            }
        }
        break;
    }
    return 0 != bad;
}

static void call(int coll, float *s, float *r, size_t n)
{
    switch (coll) {
    case 0:
        MPI_Allreduce(s, r, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case 1:
        MPI_Alltoall(s, (int) n, MPI_FLOAT, r, (int) n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case 2:
        MPI_Bcast(r, (int) n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    default:
        MPI_Allgather(s, (int) n, MPI_FLOAT, r, (int) n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    }
}

/* The bcast's buffer is the root's input and everyone's output. */
static void prepare(int coll, float *s, float *r, size_t n, int round)
{
    fill(coll, s, n, round);
    if (2 == coll) {
        if (0 == rank) {
            memcpy(r, s, n * sizeof(float));
        } else {
            memset(r, 0, n * sizeof(float));
        }
    }
}

/* OSU's counts: fewer iterations for large messages. */
static int iterations(size_t bytes)
{
    return bytes > 8192 ? 100 : 1000;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *which = argc > 1 ? argv[1] : "all";
    const size_t max_bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : (size_t) 4 << 20;
    const size_t min_bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 8;
    if (min_bytes < sizeof(float) || max_bytes < min_bytes) {
        if (0 == rank) {
            fprintf(stderr, "bench_host: sizes must satisfy 4 <= min_bytes <= max_bytes\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const size_t max_n = max_bytes / sizeof(float);
    float *s = malloc(max_n * (size_t) size * sizeof(float));
    float *r = malloc(max_n * (size_t) size * sizeof(float));
    if (NULL == s || NULL == r) {
        fprintf(stderr, "bench_host: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int failed = 0;
    if (0 == rank) {
        printf("# bench_host: np %d, host buffers, OSU timing (us: mean over iterations, "
               "then over ranks)\n# coll bytes us check\n",
               size);
    }
    for (int coll = 0; coll < N_COLLS; ++coll) {
        if (0 != strcmp(which, "all") && NULL == strstr(which, coll_names[coll])) {
            continue;
        }
        for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
            const size_t n = bytes / sizeof(float);
            const int iters = iterations(bytes), warm = iters / 10;
            int bad = 0;
            double sum = 0;
            for (int it = -warm; it < iters; ++it) {
                const int checked = -warm == it || iters - 1 == it;
                if (checked) {
                    prepare(coll, s, r, n, it & 7);
                }
                MPI_Barrier(MPI_COMM_WORLD);
                const double t0 = MPI_Wtime();
                call(coll, s, r, n);
                const double t1 = MPI_Wtime();
                if (it >= 0) {
                    sum += t1 - t0;
                }
                if (checked) {
                    bad |= check(coll, r, n, it & 7);
                }
            }
            double mean = sum / iters * 1e6, avg;
            int anybad;
            MPI_Reduce(&mean, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
            failed |= anybad;
            if (0 == rank) {
                printf("%s %zu %.2f %s\n", coll_names[coll], bytes, avg / size,
                       anybad ? "BAD" : "ok");
                fflush(stdout);
            }
        }
    }
    free(s);
    free(r);
    MPI_Finalize();
    return failed;
}
