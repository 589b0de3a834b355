/*
 * Persistent collectives (MPIX_*_init, Open MPI's pcollreq extension) through coll/gpu.
 *
 * On MPI_COMM_WORLD, a dup and an odd/even split: the sixteen persistent collectives with a
 * buffer (allreduce, reduce, bcast, allgather, alltoall, reduce_scatter_block, gather,
 * scatter, allgatherv, gatherv, scatterv, alltoallv, alltoallw, reduce_scatter, scan,
 * exscan), an allreduce in place and a persistent barrier, each created once and started three
 * times together (MPI_Startall, host work, MPI_Waitall), the send buffers refilled between the
 * starts: every result is checked against values computed here, on every start (unequal v-blocks
 * out of rank order, exscan's rank 0 left untouched). pvars: on 2+ ranks each start counts once as
 * its non-blocking form does (the engine unless coll_gpu_nb_engine or the algorithm is off).
 * Then: a persistent alltoall whose derived datatype is freed right after the init still
 * runs; MPI_Start on an active request and MPI_Request_free of an active request fail with
 * an error (MPI_ERRORS_RETURN) and the request completes and frees normally after.
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_persist), the buffers are device memory.
 */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

#include <mpi-ext.h>

#if !defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) || !OMPI_HAVE_MPI_EXT_PCOLLREQ
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    printf("skipped: this Open MPI has no pcollreq extension (MPIX_*_init)\n");
    MPI_Finalize();
    return 77;
}
#else

enum { N = 1000, FILL = -7, ROUNDS = 3, NCOLL = 17 };

enum {
    C_ALLREDUCE,
    C_REDUCE,
    C_BCAST,
    C_ALLGATHER,
    C_ALLTOALL,
    C_RSB,
    C_GATHER,
    C_SCATTER,
    C_ALLGATHERV,
    C_GATHERV,
    C_SCATTERV,
    C_ALLTOALLV,
    C_ALLTOALLW,
    C_RS,
    C_SCAN,
    C_EXSCAN,
    C_ALLREDUCE_IP
};
static const char *const cname[NCOLL] = {"allreduce",
                                         "reduce",
                                         "bcast",
                                         "allgather",
                                         "alltoall",
                                         "reduce_scatter_block",
                                         "gather",
                                         "scatter",
                                         "allgatherv",
                                         "gatherv",
                                         "scatterv",
                                         "alltoallv",
                                         "alltoallw",
                                         "reduce_scatter",
                                         "scan",
                                         "exscan",
                                         "allreduce in place"};
/* the algorithm parameter whose "fallback" sends each to the previous module */
static const char *const calg[NCOLL] = {"allreduce_algorithm",
                                        NULL,
                                        NULL,
                                        "allgather_algorithm",
                                        "alltoall_algorithm",
                                        NULL,
                                        "gather_algorithm",
                                        "scatter_algorithm",
                                        "allgather_algorithm",
                                        "gather_algorithm",
                                        "scatter_algorithm",
                                        "alltoall_algorithm",
                                        "alltoall_algorithm",
                                        NULL,
                                        "scan_algorithm",
                                        "scan_algorithm",
                                        "allreduce_algorithm"};

static int val(uint64_t salt, int src, long i)
{
    return (int) (mt_hash(salt, (uint64_t) src, (uint64_t) i, 41) % 2000003) - 1000000;
}

static int wsum(int a, int b) /* MPI_SUM on int, wrapping */
{
    return (int) ((unsigned) a + (unsigned) b);
}

static double busy(long n)
{
    volatile double acc = 0;
    for (long i = 0; i < n; ++i) {
        acc += (double) i * 1e-9;
    }
    return acc;
}

/* the block rank q sends rank p in the alltoallv (and the counts of the v-forms) */
static int pcount(int q, int p)
{
    return N - (q + p) % 3;
}

typedef struct {
    int rank, size, root;
    int *s, *b, *r[NCOLL]; /* send buffer, bcast buffer, one receive buffer per collective */
    long room;             /* ints in each */
    int *vc, *vd, *sc, *sd, *rc, *rd, *wsd, *wrd, *rsc;
    MPI_Datatype *wt;
} bufs_t;

static void fill(bufs_t *b, uint64_t salt)
{
    for (long i = 0; i < b->room; ++i) {
        b->s[i] = val(salt, b->rank, i);
        b->b[i] = b->rank == b->root ? val(salt, b->root, i) : FILL;
        for (int k = 0; k < NCOLL; ++k) {
            b->r[k][i] = FILL;
        }
        b->r[C_ALLREDUCE_IP][i] = val(salt, b->rank, i); /* its input, in place */
    }
    mt_push(b->s);
    mt_push(b->b);
    for (int k = 0; k < NCOLL; ++k) {
        mt_push(b->r[k]);
    }
}

/* every collective's result on this rank against the reference; the number wrong */
static long check(bufs_t *b, uint64_t salt, long *per)
{
    const int me = b->rank, n = b->size, root = b->root;
    long bad = 0;
    mt_pull(b->b);
    for (int k = 0; k < NCOLL; ++k) {
        mt_pull(b->r[k]);
        per[k] = 0;
    }
#define BAD(k, cond) (per[k] += (cond) ? 1 : 0)
    for (long i = 0; i < (long) n * N; ++i) { /* the full reductions of n x N ints */
        int sum = 0;
        for (int q = 0; q < n; ++q) {
            sum = wsum(sum, val(salt, q, i));
        }
        BAD(C_ALLREDUCE, b->r[C_ALLREDUCE][i] != sum);
        if (me == root) {
            BAD(C_REDUCE, b->r[C_REDUCE][i] != sum);
        }
    }
    for (long i = 0; i < N; ++i) {
        BAD(C_BCAST, b->b[i] != val(salt, root, i));
        int rsb = 0, pre = 0;
        for (int q = 0; q < n; ++q) {
            rsb = wsum(rsb, val(salt, q, (long) me * N + i));
            if (q == me && me > 0) {
                BAD(C_EXSCAN, b->r[C_EXSCAN][i] != pre);
            }
            if (q <= me) {
                pre = wsum(pre, val(salt, q, i));
            }
        }
        BAD(C_RSB, b->r[C_RSB][i] != rsb);
        int all = 0;
        for (int q = 0; q < n; ++q) {
            all = wsum(all, val(salt, q, i));
        }
        BAD(C_ALLREDUCE_IP, b->r[C_ALLREDUCE_IP][i] != all);
        BAD(C_SCAN, b->r[C_SCAN][i] != pre);
        BAD(C_EXSCAN, 0 == me && b->r[C_EXSCAN][i] != FILL);
        BAD(C_SCATTER, b->r[C_SCATTER][i] != val(salt, root, (long) me * N + i));
        for (int q = 0; q < n; ++q) {
            BAD(C_ALLGATHER, b->r[C_ALLGATHER][(long) q * N + i] != val(salt, q, i));
            BAD(C_ALLTOALL, b->r[C_ALLTOALL][(long) q * N + i] != val(salt, q, (long) me * N + i));
            if (me == root) {
                BAD(C_GATHER, b->r[C_GATHER][(long) q * N + i] != val(salt, q, i));
            }
        }
    }
    for (int q = 0; q < n; ++q) {
        for (long i = 0; i < b->vc[q]; ++i) { /* v-blocks: rank q's vc[q] at vd[q] */
            BAD(C_ALLGATHERV, b->r[C_ALLGATHERV][b->vd[q] + i] != val(salt, q, i));
            if (me == root) {
                BAD(C_GATHERV, b->r[C_GATHERV][b->vd[q] + i] != val(salt, q, i));
            }
        }
        for (long i = 0; i < pcount(q, me); ++i) { /* q sent its elements at sd[me] */
            const int want = val(salt, q, (long) b->sd[me] + i);
            BAD(C_ALLTOALLV, b->r[C_ALLTOALLV][b->rd[q] + i] != want);
            BAD(C_ALLTOALLW, b->r[C_ALLTOALLW][b->rd[q] + i] != want);
        }
    }
    for (long i = 0; i < b->vc[me]; ++i) {
        BAD(C_SCATTERV, b->r[C_SCATTERV][i] != val(salt, root, (long) b->vd[me] + i));
    }
    long off = 0;
    for (int q = 0; q < me; ++q) {
        off += b->rsc[q];
    }
    for (long i = 0; i < b->rsc[me]; ++i) {
        int sum = 0;
        for (int q = 0; q < n; ++q) {
            sum = wsum(sum, val(salt, q, off + i));
        }
        BAD(C_RS, b->r[C_RS][i] != sum);
    }
#undef BAD
    for (int k = 0; k < NCOLL; ++k) {
        bad += per[k];
    }
    return bad;
}

static void init_all(bufs_t *b, MPI_Comm comm, MPI_Request *req)
{
    const int n = b->size, root = b->root;
    int *s = MT_D(b->s), **r = b->r;
    MPI_Info info = MPI_INFO_NULL;
    int *d[NCOLL];
    for (int k = 0; k < NCOLL; ++k) {
        d[k] = MT_D(r[k]);
    }
    MT_CHECK_MPI(MPIX_Allreduce_init(s, d[C_ALLREDUCE], n * N, MPI_INT, MPI_SUM, comm, info,
                                     &req[C_ALLREDUCE]));
    MT_CHECK_MPI(MPIX_Reduce_init(s, d[C_REDUCE], n * N, MPI_INT, MPI_SUM, root, comm, info,
                                  &req[C_REDUCE]));
    MT_CHECK_MPI(MPIX_Bcast_init(MT_D(b->b), N, MPI_INT, root, comm, info, &req[C_BCAST]));
    MT_CHECK_MPI(MPIX_Allgather_init(s, N, MPI_INT, d[C_ALLGATHER], N, MPI_INT, comm, info,
                                     &req[C_ALLGATHER]));
    MT_CHECK_MPI(
        MPIX_Alltoall_init(s, N, MPI_INT, d[C_ALLTOALL], N, MPI_INT, comm, info, &req[C_ALLTOALL]));
    MT_CHECK_MPI(
        MPIX_Reduce_scatter_block_init(s, d[C_RSB], N, MPI_INT, MPI_SUM, comm, info, &req[C_RSB]));
    MT_CHECK_MPI(
        MPIX_Gather_init(s, N, MPI_INT, d[C_GATHER], N, MPI_INT, root, comm, info, &req[C_GATHER]));
    MT_CHECK_MPI(MPIX_Scatter_init(s, N, MPI_INT, d[C_SCATTER], N, MPI_INT, root, comm, info,
                                   &req[C_SCATTER]));
    MT_CHECK_MPI(MPIX_Allgatherv_init(s, b->vc[b->rank], MPI_INT, d[C_ALLGATHERV], b->vc, b->vd,
                                      MPI_INT, comm, info, &req[C_ALLGATHERV]));
    MT_CHECK_MPI(MPIX_Gatherv_init(s, b->vc[b->rank], MPI_INT, d[C_GATHERV], b->vc, b->vd, MPI_INT,
                                   root, comm, info, &req[C_GATHERV]));
    MT_CHECK_MPI(MPIX_Scatterv_init(s, b->vc, b->vd, MPI_INT, d[C_SCATTERV], b->vc[b->rank],
                                    MPI_INT, root, comm, info, &req[C_SCATTERV]));
    MT_CHECK_MPI(MPIX_Alltoallv_init(s, b->sc, b->sd, MPI_INT, d[C_ALLTOALLV], b->rc, b->rd,
                                     MPI_INT, comm, info, &req[C_ALLTOALLV]));
    MT_CHECK_MPI(MPIX_Alltoallw_init(s, b->sc, b->wsd, b->wt, d[C_ALLTOALLW], b->rc, b->wrd, b->wt,
                                     comm, info, &req[C_ALLTOALLW]));
    MT_CHECK_MPI(
        MPIX_Reduce_scatter_init(s, d[C_RS], b->rsc, MPI_INT, MPI_SUM, comm, info, &req[C_RS]));
    MT_CHECK_MPI(MPIX_Scan_init(s, d[C_SCAN], N, MPI_INT, MPI_SUM, comm, info, &req[C_SCAN]));
    MT_CHECK_MPI(MPIX_Exscan_init(s, d[C_EXSCAN], N, MPI_INT, MPI_SUM, comm, info, &req[C_EXSCAN]));
    MT_CHECK_MPI(MPIX_Allreduce_init(MPI_IN_PLACE, d[C_ALLREDUCE_IP], N, MPI_INT, MPI_SUM, comm,
                                     info, &req[C_ALLREDUCE_IP]));
    MT_CHECK_MPI(MPIX_Barrier_init(comm, info, &req[NCOLL]));
}

/* a derived type freed right after the init, and the erroneous calls on an active request */
static void misuse(bufs_t *b, MPI_Comm comm, uint64_t salt)
{
    const int n = b->size;
    MPI_Datatype pair;
    MPI_Request req;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    fill(b, salt);
    MT_CHECK_MPI(MPIX_Alltoall_init(MT_D(b->s), N / 2, pair, MT_D(b->r[0]), N / 2, pair, comm,
                                    MPI_INFO_NULL, &req));
    MPI_Type_free(&pair); /* the request keeps its own reference */
    MT_CHECK_MPI(MPI_Start(&req));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const int again = MPI_Start(&req);
    const int early = MPI_Request_free(&req);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MT_CHECK(MPI_SUCCESS != again, "MPI_Start on an active persistent request succeeded");
    MT_CHECK(MPI_SUCCESS != early && MPI_REQUEST_NULL != req,
             "MPI_Request_free of an active persistent request: rc %d, request %s", early,
             MPI_REQUEST_NULL == req ? "freed" : "kept");
    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    mt_pull(b->r[0]);
    long bad = 0;
    for (int q = 0; q < n; ++q) {
        for (long i = 0; i < N; ++i) {
            bad += b->r[0][(long) q * N + i] != val(salt, q, (long) b->rank * N + i);
        }
    }
    MT_CHECK(0 == bad, "alltoall of a freed derived type: %ld of %d ints wrong", bad, n * N);
    MT_CHECK_MPI(MPI_Request_free(&req));
}

static void suite(MPI_Comm comm, const char *label, uint64_t salt0)
{
    bufs_t b;
    MPI_Comm_rank(comm, &b.rank);
    MPI_Comm_size(comm, &b.size);
    const int n = b.size;
    b.root = n - 1;
    b.room = (long) n * N;
    b.s = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    b.b = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    for (int k = 0; k < NCOLL; ++k) {
        b.r[k] = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    }
    int **arrays[] = {&b.vc, &b.vd, &b.sc, &b.sd, &b.rc, &b.rd, &b.wsd, &b.wrd, &b.rsc};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); ++i) {
        *arrays[i] = mt_xmalloc(sizeof(int) * (size_t) n);
    }
    b.wt = mt_xmalloc(sizeof(MPI_Datatype) * (size_t) n);
    for (int p = 0; p < n; ++p) {
        b.vc[p] = N - p % 3;
        b.vd[p] = (n - 1 - p) * N; /* blocks in reverse rank order */
        b.sc[p] = pcount(b.rank, p);
        b.rc[p] = pcount(p, b.rank);
        b.sd[p] = p * N;
        b.rd[p] = (n - 1 - p) * N;
        b.wsd[p] = b.sd[p] * (int) sizeof(int);
        b.wrd[p] = b.rd[p] * (int) sizeof(int);
        b.wt[p] = MPI_INT;
        b.rsc[p] = N - p % 3;
    }
    /* a blocking call first: it sets a communicator across (fake) nodes up, whose
     * non-blocking calls take the staged path until then */
    MT_CHECK_MPI(MPI_Barrier(comm));
    int one = 1, all = 0;
    MT_CHECK_MPI(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, comm));
    MPI_Request req[NCOLL + 1];
    init_all(&b, comm, req);
    mt_pvars_t pv;
    mt_pvars_open(&pv, comm, label);
    mt_pvars_mark(&pv);
    long per[NCOLL];
    for (int round = 0; round < ROUNDS; ++round) {
        const uint64_t salt = salt0 * 100 + (uint64_t) round;
        fill(&b, salt);
        MT_CHECK_MPI(MPI_Startall(NCOLL + 1, req));
        busy(50000);
        MT_CHECK_MPI(MPI_Waitall(NCOLL + 1, req, MPI_STATUSES_IGNORE));
        const long bad = check(&b, salt, per);
        MT_CHECK(0 == bad, "comm %s start %d: %ld ints wrong", label, round + 1, bad);
        for (int k = 0; bad > 0 && k < NCOLL; ++k) {
            if (per[k] > 0) {
                mt_note("comm %s start %d: %s: %ld wrong", label, round + 1, cname[k], per[k]);
            }
        }
    }
    unsigned long long e = 0, f = 0;
    if (n > 1 && 0 == mt_pvars_delta(&pv, &e, &f)) {
        long on = 0;
        for (int k = 0; k < NCOLL; ++k) {
            on += !mt_mca_is("nb_engine", "off") &&
                  (NULL == calg[k] || !mt_mca_is(calg[k], "fallback"));
        }
        MT_CHECK((long) e == on * ROUNDS && (long) f == (NCOLL - on) * ROUNDS,
                 "comm %s: %llu engine and %llu fallback calls, expected %ld and %ld", label, e, f,
                 on * ROUNDS, (NCOLL - on) * ROUNDS);
    }
    mt_pvars_close(&pv);
    for (int k = 0; k <= NCOLL; ++k) {
        MT_CHECK_MPI(MPI_Request_free(&req[k]));
    }
    misuse(&b, comm, salt0 * 100 + 50);
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); ++i) {
        free(*arrays[i]);
    }
    free(b.wt);
    mt_twin_free(b.s);
    mt_twin_free(b.b);
    for (int k = 0; k < NCOLL; ++k) {
        mt_twin_free(b.r[k]);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_persist" : "test_persist");
    mt_twin_init();
    mt_run_world_dup_split(suite, 7);
    return mt_finalize();
}
#endif
