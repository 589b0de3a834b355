/*
 * Benchmark: our MPI collectives on device buffers and NCCL's, side by side in one run,
 * same sizes, same process layout (one process per GPU), each call completed before the
 * next (MPI returns with the result in place; NCCL is followed by a stream synchronize,
 * as nccl-tests -z 2 ... i.e. what MPI semantics require).
 *
 * Sizes and bandwidths follow nccl-tests: size is the allreduce/bcast/reduce buffer, the
 * whole gathered buffer (allgather), the whole input (reduce_scatter) and the whole
 * send buffer (alltoall); algbw = size / time; busbw = algbw x 2(n-1)/n (allreduce),
 * (n-1)/n (allgather, reduce_scatter, alltoall), 1 (bcast, reduce). NCCL's alltoall is
 * what nccl-tests runs: grouped ncclSend/ncclRecv to every peer. Times are the maximum
 * over ranks of the mean over iterations. float32 (SUM), out of place, root 0.
 *
 * Also: allreduce_char and reduce_char (MPI_CHAR SUM, the OSU benchmarks' default, against
 * NCCL's int8 sum: both wrap) and iallreduce (MPI_Iallreduce + MPI_Wait against the same
 * ncclAllReduce + synchronize), and allreduce_maxloc (MPI_2INT MPI_MAXLOC; NCCL has no
 * MAXLOC, so its column is an int64 max over the same bytes: a reference for the speed of
 * one 8-byte reduction, not the same operation) and allreduce_dint (MPI_DOUBLE_INT MAXLOC, a
 * padded pair; bytes are its extent, 16 a pair) and reduce_dint (the same to root 0), not
 * part of "all".
 *
 *   mpirun -np 2 --mca coll gpu,tuned,libnbc,basic,self bench/bench_colls \
 *       [all|allreduce|alltoall|allgather|reduce_scatter|bcast|reduce|allreduce_char|
 *        reduce_char|iallreduce|allreduce_maxloc|allreduce_dint|reduce_dint] [maxbytes [minbytes]]
 * With CGPU_BENCH_THREAD=multiple, MPI_Init_thread at MPI_THREAD_MULTIPLE.
 * With CGPU_BENCH_OSU=1 each call is timed alone between two MPI_Barriers and the mean over
 * ranks is reported, as the OSU benchmarks time it (default: back to back, slowest rank).
 * With CGPU_BENCH_STALL_LOG=prefix as well, each rank writes prefix.<rank>: one line per call
 * over 50 us, "side coll bytes start_ns length_ns cpu involuntary_switches" (start on
 * CLOCK_MONOTONIC; the switches are the thread's during that call).
 */
#define _GNU_SOURCE /* sched_getcpu, RUSAGE_THREAD */
#include <cuda_runtime.h>
#include <sched.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_CK_ABORT() MPI_Abort(MPI_COMM_WORLD, 1)
#include "bench_cuda_check.h"
#define NK(call)                                                                          \
    do {                                                                                  \
        ncclResult_t r_ = (call);                                                         \
        if (ncclSuccess != r_) {                                                          \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                  \
                    ncclGetErrorString(r_));                                              \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

enum {
    ALLREDUCE,
    ALLTOALL,
    ALLGATHER,
    REDUCE_SCATTER,
    BCAST,
    REDUCE,
    NCOLLS_ALL,
    ALLREDUCE_CHAR = NCOLLS_ALL,
    REDUCE_CHAR,
    IALLREDUCE,
    ALLREDUCE_MAXLOC,
    ALLREDUCE_DINT,
    REDUCE_DINT,
    NCOLLS
};
static const char *names[NCOLLS] = {"allreduce",        "alltoall",       "allgather",
                                    "reduce_scatter",   "bcast",          "reduce",
                                    "allreduce_char",   "reduce_char",    "iallreduce",
                                    "allreduce_maxloc", "allreduce_dint", "reduce_dint"};

static int is_char(int coll)
{
    return ALLREDUCE_CHAR == coll || REDUCE_CHAR == coll;
}

static int is_dint(int coll)
{
    return ALLREDUCE_DINT == coll || REDUCE_DINT == coll;
}

static int is_loc(int coll)
{
    return ALLREDUCE_MAXLOC == coll || is_dint(coll);
}

/* bytes of one element: MPI_CHAR, an MPI_2INT pair, an MPI_DOUBLE_INT pair (its extent), a
 * float */
static size_t elem_size(int coll)
{
    return is_char(coll)              ? 1
           : ALLREDUCE_MAXLOC == coll ? 2 * sizeof(int)
           : is_dint(coll)            ? 16
                                      : sizeof(float);
}

/* the collective whose algorithm, busbw factor and check a variant shares */
static int base_of(int coll)
{
    return REDUCE_CHAR == coll || REDUCE_DINT == coll                     ? REDUCE
           : ALLREDUCE_CHAR == coll || IALLREDUCE == coll || is_loc(coll) ? ALLREDUCE
                                                                          : coll;
}

static int rank, n;
static int have_nccl; /* NCCL refuses two ranks on one GPU: then only ours is timed */
/* CGPU_BENCH_OSU=1: each call timed alone between two MPI_Barriers, the mean over ranks
 * reported, as the OSU benchmarks do (default: back to back, the slowest rank's mean) */
static int osu_mode;
static ncclComm_t nc;
static cudaStream_t st;
static float *sb, *rb;

/* at most MAX_ITERS: the stall columns keep every timed call (call_s) */
#define MAX_ITERS 200
static int iters_for(size_t bytes)
{
    if (bytes <= (1 << 20)) {
        return MAX_ITERS;
    }
    size_t it = ((size_t) 4 << 30) / bytes;
    return it < 5 ? 5 : it > MAX_ITERS ? MAX_ITERS : (int) it;
}

/* elements per call argument (count as MPI and NCCL take it) for a size */
static size_t count_for(int coll, size_t bytes)
{
    size_t e = bytes / elem_size(coll);
    return ALLTOALL == coll || ALLGATHER == coll || REDUCE_SCATTER == coll ? e / (size_t) n : e;
}

static void ours(int coll, size_t cnt)
{
    const int c = (int) cnt;
    switch (coll) {
    case ALLREDUCE: MPI_Allreduce(sb, rb, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(sb, c, MPI_FLOAT, rb, c, MPI_FLOAT, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(sb, c, MPI_FLOAT, rb, c, MPI_FLOAT, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(sb, rb, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case BCAST: MPI_Bcast(rb, c, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE_CHAR: MPI_Allreduce(sb, rb, c, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD); break;
    case REDUCE_CHAR: MPI_Reduce(sb, rb, c, MPI_CHAR, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE_MAXLOC:
        MPI_Allreduce(sb, rb, c, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
        break;
    case ALLREDUCE_DINT:
        MPI_Allreduce(sb, rb, c, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
        break;
    case REDUCE_DINT:
        MPI_Reduce(sb, rb, c, MPI_DOUBLE_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD);
        break;
    case IALLREDUCE: {
        MPI_Request r;
        MPI_Iallreduce(sb, rb, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        break;
    }
    default: MPI_Reduce(sb, rb, c, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    }
}

static void nccl(int coll, size_t cnt)
{
    switch (coll) {
    case ALLREDUCE:
    case IALLREDUCE: NK(ncclAllReduce(sb, rb, cnt, ncclFloat, ncclSum, nc, st)); break;
    case ALLREDUCE_CHAR: NK(ncclAllReduce(sb, rb, cnt, ncclInt8, ncclSum, nc, st)); break;
    case REDUCE_CHAR: NK(ncclReduce(sb, rb, cnt, ncclInt8, ncclSum, 0, nc, st)); break;
    case ALLREDUCE_MAXLOC:
        NK(ncclAllReduce(sb, rb, cnt, ncclInt64, ncclMax, nc, st));
        break;
    case ALLREDUCE_DINT:
        NK(ncclAllReduce(sb, rb, 2 * cnt, ncclInt64, ncclMax, nc, st));
        break;
    case REDUCE_DINT:
        NK(ncclReduce(sb, rb, 2 * cnt, ncclInt64, ncclMax, 0, nc, st));
        break;
    case ALLTOALL:
        NK(ncclGroupStart());
        for (int p = 0; p < n; ++p) {
            NK(ncclSend(sb + (size_t) p * cnt, cnt, ncclFloat, p, nc, st));
            NK(ncclRecv(rb + (size_t) p * cnt, cnt, ncclFloat, p, nc, st));
        }
        NK(ncclGroupEnd());
        break;
    case ALLGATHER: NK(ncclAllGather(sb, rb, cnt, ncclFloat, nc, st)); break;
    case REDUCE_SCATTER: NK(ncclReduceScatter(sb, rb, cnt, ncclFloat, ncclSum, nc, st)); break;
    case BCAST: NK(ncclBroadcast(rb, rb, cnt, ncclFloat, 0, nc, st)); break;
    default: NK(ncclReduce(sb, rb, cnt, ncclFloat, ncclSum, 0, nc, st)); break;
    }
    CK(cudaStreamSynchronize(st));
}

/* Prepare rb so the check after the timed loop proves this collective wrote it. */
static void reset(int coll, size_t bytes)
{
    CK(cudaMemset(rb, 0, bytes));
    if (BCAST == coll && 0 == rank) {
        CK(cudaMemcpy(rb, sb, bytes, cudaMemcpyDeviceToDevice)); /* sb holds rank + 1 = 1 */
    }
    CK(cudaDeviceSynchronize());
}

/* First and last element of what this rank received, against what they must be. */
static int check(int coll, size_t cnt)
{
    if (is_char(coll)) { /* the int8 sum of every rank's first and last byte, wrapped */
        signed char mine[2], got[2];
        CK(cudaMemcpy(&mine[0], sb, 1, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&mine[1], (char *) sb + cnt - 1, 1, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&got[0], rb, 1, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&got[1], (char *) rb + cnt - 1, 1, cudaMemcpyDeviceToHost));
        int in[2] = {mine[0], mine[1]}, sum[2];
        MPI_Allreduce(in, sum, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        return (REDUCE_CHAR == coll && 0 != rank) ||
               (got[0] == (signed char) sum[0] && got[1] == (signed char) sum[1]);
    }
    if (is_loc(coll)) { /* rank p's words are the bits of p + 1.0f: the last rank's pair is
                         * the largest (as an MPI_DOUBLE_INT its double too), and its value
                         * and index win: the first and last pair's words (an MPI_DOUBLE_INT's
                         * three before its padding) are all that */
        if (REDUCE_DINT == coll && 0 != rank) {
            return 1;
        }
        const size_t es = elem_size(coll), words = is_dint(coll) ? 3 : 2;
        int got[2][3];
        const float top = (float) n;
        int want, ok = 1;
        memcpy(&want, &top, sizeof(want));
        CK(cudaMemcpy(got[0], rb, words * sizeof(int), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(got[1], (char *) rb + (cnt - 1) * es, words * sizeof(int),
                      cudaMemcpyDeviceToHost));
        for (size_t w = 0; w < words; ++w) {
            ok = ok && got[0][w] == want && got[1][w] == want;
        }
        return ok;
    }
    coll = base_of(coll);
    size_t last = cnt - 1;
    float want_first = (float) (n * (n + 1) / 2), want_last = want_first;
    if (ALLTOALL == coll || ALLGATHER == coll) { /* block p comes from rank p: p + 1 */
        last = cnt * (size_t) n - 1;
        want_first = 1;
        want_last = (float) n;
    } else if (BCAST == coll) {
        want_first = want_last = 1;
    } else if (REDUCE == coll && 0 != rank) {
        return 1;
    }
    float probe[2] = {0, 0};
    CK(cudaMemcpy(&probe[0], rb, sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&probe[1], rb + last, sizeof(float), cudaMemcpyDeviceToHost));
    return probe[0] == want_first && probe[1] == want_last;
}

/* each timed call's seconds on this rank, sorted after the run (the stall columns: median
 * and slowest call, and calls over 50 us; back to back, a call is the time from the end of
 * the one before to its own end) */
static double call_s[MAX_ITERS];
/* CGPU_BENCH_STALL_LOG: this rank's stall log, and the row it is timing */
static FILE *stall_log;
static const char *stall_side, *stall_coll;
static size_t stall_bytes;

static unsigned long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long) ts.tv_sec * 1000000000ull + (unsigned long long) ts.tv_nsec;
}

static long thread_nivcsw(void)
{
    struct rusage ru;
    return 0 == getrusage(RUSAGE_THREAD, &ru) ? ru.ru_nivcsw : -1;
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *) x, b = *(const double *) y;
    return a < b ? -1 : a > b;
}

/* Mean seconds of one of @p it calls of fn on this rank, after 5 warm-up calls (200 for the
 * program's first timing of each side, as OSU skips 200 small calls: clocks and caches are
 * cold before it) then the receive buffer's @p reset_bytes reset, if any: back to back, or
 * each call alone between two MPI_Barriers (osu_mode). */
static double timed(void (*fn)(int, size_t), int coll, size_t cnt, int it, size_t reset_bytes)
{
    static void (*warmed[2])(int, size_t);
    int warm = 5;
    if (fn != warmed[0] && fn != warmed[1]) {
        warmed[NULL == warmed[0] ? 0 : 1] = fn;
        warm = 200;
    }
    for (int i = 0; i < warm; ++i) {
        fn(coll, cnt);
    }
    if (reset_bytes > 0) {
        reset(coll, reset_bytes);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(1); /* a profiling tool (bench/pmpi_probe.so) counts these calls alone */
    const double t0 = MPI_Wtime();
    double alone = 0, prev = t0;
    long sw = stall_log ? thread_nivcsw() : 0;
    for (int i = 0; i < it; ++i) {
        const unsigned long long a_ns = stall_log ? mono_ns() : 0;
        /* back to back, a call starts where the one before ended: one clock read a call */
        const double a = osu_mode ? MPI_Wtime() : prev;
        fn(coll, cnt);
        prev = MPI_Wtime();
        call_s[i] = prev - a;
        if (osu_mode) {
            alone += call_s[i];
            if (stall_log) { /* outside the timed call, before the barrier */
                const long sw1 = thread_nivcsw();
                if (call_s[i] > 50e-6) {
                    fprintf(stall_log, "%s %s %zu %llu %.0f %d %ld\n", stall_side, stall_coll,
                            stall_bytes, a_ns, call_s[i] * 1e9, sched_getcpu(), sw1 - sw);
                }
                sw = sw1;
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    MPI_Pcontrol(0);
    qsort(call_s, (size_t) it, sizeof(double), cmp_double);
    return (osu_mode ? alone : prev - t0) / it;
}

/* median and slowest of the last timed() run's it calls (sorted), and how many took over
 * 50 us, into st[0..2] */
static void stall_stats(int it, double *st)
{
    int over = 0;
    for (int i = 0; i < it; ++i) {
        over += call_s[i] > 50e-6;
    }
    st[0] = call_s[it / 2];
    st[1] = call_s[it - 1];
    st[2] = over;
}

static void run(int coll, size_t minb, size_t maxb, int ndev)
{
    const int b = base_of(coll);
    const double bus = ALLREDUCE == b                               ? 2.0 * (n - 1) / n
                       : BCAST == b || REDUCE == b                  ? 1.0
                                                                    : (double) (n - 1) / n;
    if (0 == rank) {
        printf("\n# %s %s%s, %d ranks, %d GPUs, out of place, per-call sync%s\n", names[coll],
               is_char(coll)              ? "MPI_CHAR (NCCL int8)"
               : ALLREDUCE_MAXLOC == coll ? "MPI_2INT MAXLOC (NCCL: int64 max on the same bytes)"
               : is_dint(coll)
                   ? "MPI_DOUBLE_INT MAXLOC, a padded pair (NCCL: int64 max on the same bytes)"
                   : "float32",
               !is_loc(coll) && (ALLREDUCE == b || REDUCE == b || REDUCE_SCATTER == b) ? " sum"
                                                                                       : "",
               n, ndev,
               osu_mode ? ", each call alone between MPI_Barriers, mean over ranks (as OSU)" : "");
        printf("%12s %10s %10s %10s %10s %8s %8s %s%s\n", "bytes", "ours_us", "ours_busbw",
               "nccl_us", "nccl_busbw", "bw_ratio", "lat_ratio", "check",
               "  (a rank's calls: median/slowest us, calls over 50 us; ours | NCCL)");
    }
    for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
        const size_t cnt = count_for(coll, bytes);
        if (0 == cnt) {
            continue;
        }
        const int it = iters_for(bytes);
        /* the stall columns: each side's median and slowest call and calls over
         * 50 us, the largest over ranks */
        double st[6] = {0, 0, 0, 0, 0, 0}, stm[6];
        stall_side = "ours";
        stall_coll = names[coll];
        stall_bytes = bytes;
        const double t_ours = timed(ours, coll, cnt, it, bytes);
        stall_stats(it, st);
        int ok = check(coll, cnt);
        stall_side = "nccl";
        const double t_nccl = have_nccl ? timed(nccl, coll, cnt, it, 0) : NAN;
        if (have_nccl) {
            stall_stats(it, st + 3);
        }
        MPI_Reduce(st, stm, 6, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        double tt[2] = {t_ours, t_nccl}, tm[2];
        int okall;
        MPI_Reduce(tt, tm, 2, MPI_DOUBLE, osu_mode ? MPI_SUM : MPI_MAX, 0, MPI_COMM_WORLD);
        if (osu_mode) {
            tm[0] /= n;
            tm[1] /= n;
        }
        MPI_Reduce(&ok, &okall, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
        if (0 == rank) {
            const double sz =
                (double) cnt * (double) elem_size(coll) *
                (ALLTOALL == coll || ALLGATHER == coll || REDUCE_SCATTER == coll ? n : 1);
            double bo = sz / tm[0] / 1e9 * bus, bn = sz / tm[1] / 1e9 * bus;
            printf("%12.0f %10.2f %10.2f %10.2f %10.2f %8.3f %8.3f %s", sz, tm[0] * 1e6, bo,
                   tm[1] * 1e6, bn, bo / bn, tm[0] / tm[1], okall ? "ok" : "WRONG");
            printf("  %.2f/%.2f %.0f | %.2f/%.2f %.0f", stm[0] * 1e6, stm[1] * 1e6, stm[2],
                   stm[3] * 1e6, stm[4] * 1e6, stm[5]);
            printf("\n");
            fflush(stdout);
        }
    }
}

/* name is one of the comma-separated entries of list */
static int listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; NULL != p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (0 == strncmp(p, name, n) && (',' == p[n] || '\0' == p[n])) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* CGPU_BENCH_THREAD=multiple: MPI_THREAD_MULTIPLE, the level mpi4py asks for by
     * default, for the C figure that Python is set against */
    const char *th = getenv("CGPU_BENCH_THREAD");
    int provided = MPI_THREAD_SINGLE;
    if (NULL != th && 0 == strcmp(th, "multiple")) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    int ndev;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Pcontrol(0); /* profiling tools count the timed loops only (timed()) */
    if (0 == rank && NULL != th) {
        printf("# MPI_THREAD_%s (provided %d)\n",
               MPI_THREAD_MULTIPLE == provided ? "MULTIPLE" : "SINGLE", provided);
    }
    osu_mode = NULL != getenv("CGPU_BENCH_OSU") && 0 != atoi(getenv("CGPU_BENCH_OSU"));
    const char *slog = getenv("CGPU_BENCH_STALL_LOG");
    if (osu_mode && NULL != slog && '\0' != slog[0]) {
        char path[4096];
        snprintf(path, sizeof(path), "%s.%d", slog, rank);
        if (NULL == (stall_log = fopen(path, "w"))) {
            perror(path);
        }
    }
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    const char *which = argc > 1 ? argv[1] : "all";
    size_t maxb = argc > 2 ? strtoull(argv[2], NULL, 0) : ((size_t) 1 << 30);
    size_t minb = argc > 3 ? strtoull(argv[3], NULL, 0) : 8;

    have_nccl = n <= ndev;
    if (have_nccl) {
        ncclUniqueId id;
        if (0 == rank) {
            NK(ncclGetUniqueId(&id));
        }
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        NK(ncclCommInitRank(&nc, n, id, rank));
    } else if (0 == rank) {
        printf("# %d ranks on %d GPUs: NCCL not run (it takes one rank per GPU)\n", n, ndev);
    }
    CK(cudaStreamCreate(&st));
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
    int ran = 0;
    for (int c = 0; c < NCOLLS; ++c) {
        if ((0 == strcmp(which, "all") && c < NCOLLS_ALL) || listed(which, names[c])) {
            run(c, minb, maxb, ndev);
            ran++;
        }
    }
    if (0 == ran && 0 == rank) {
        fprintf(stderr, "bench_colls: unknown collective '%s'\n", which);
    }
    if (have_nccl) {
        ncclCommDestroy(nc);
    }
    cudaFree(sb);
    cudaFree(rb);
    if (stall_log) {
        fclose(stall_log);
    }
    MPI_Finalize();
    return 0 == ran;
}
