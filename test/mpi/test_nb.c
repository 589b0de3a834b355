/*
 * Non-blocking collectives through coll/gpu (host backend in CI; `CGPU_TEST_BACKEND=auto`
 * on a GPU machine).
 *
 * - The six with an engine path (Iallreduce, Ireduce, Ireduce_scatter_block, Ibcast,
 *   Iallgather, Ialltoall) all in flight at once with point-to-point requests, host work
 *   between the posts and the wait, one MPI_Waitall over the mixed requests; in place;
 *   strided (packed) layouts; 24 requests in flight on one communicator completed in
 *   reverse order; an MPI_Test loop; a blocking engine call right after posts (it must
 *   run after them).
 * - Two communicators with requests in flight, posted in opposite orders on even and odd
 *   ranks (MPI allows it: one queue per process would deadlock); then 12 at once, more than
 *   CUDA's default 8 hardware queues, small and ring-sized calls alternating.
 * - A request in flight on one communicator while a new one makes its first call, in
 *   opposite orders on even and odd ranks (its set-up must not wait for that request).
 * - The others (Iallgatherv, Igather(v), Iscatter(v), Ialltoallv, Ireduce_scatter, Iscan,
 *   Iexscan, Ibarrier, Ialltoallw) at once, then a blocking Alltoallw: all but Ibarrier on
 *   the engine, Ibarrier to the previous module (which stages device buffers, or host ones
 *   with coll_gpu_stage_host_buffers=1, which the driver runs as a second variant, when the
 *   engine is off).
 * - Igather, Iscatter and Iallgatherv at every root, nine in flight at once: contiguous, in
 *   place, strided receive types (gaps keep their bytes), unequal blocks (zero among them)
 *   out of order with gaps between them, elements with a gap each; every buffer compared
 *   whole.
 * - Igatherv, Iscatterv and Ialltoallv at every root, nine in flight (unequal blocks with
 *   zeros out of order with gaps, in place, a gappy element type with one block of 12,000);
 *   and an Ialltoallv whose receive blocks on rank 0 lie 2^31 elements apart: rank 0 gets
 *   MPI_ERR_COUNT, the others their blocks, no one hangs.
 * Every result is checked against values computed here. pvars: each call counts on the path
 * said above on 2+ ranks; on one rank every call is counted once.
 * Argument "staged": the run where host buffers are staged as device ones would be.
 * Argument "cap" (with --mca coll_gpu_nb_max_workers 1): the one worker lent to communicators in
 * turn; a post while every worker is busy fails cleanly.
 * Argument "freerule": a cudaFree between posts and their waits (README's rule; see freerule).
 * Argument "threads": 4 threads under MPI_THREAD_MULTIPLE, each on its own communicator
 * and splits of it (non-blocking calls as the first calls on fresh communicators); then 4
 * threads taking turns to post on one communicator, each waiting for its own requests.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mt_twin.h"
#include "mpitest.h"

static int wrank;
static int staged_run;

static int val(uint64_t salt, int src, long i)
{
    return (int) (mt_hash(salt, (uint64_t) src, (uint64_t) i, 17) % 2000003) - 1000000;
}

/* element i of an MPI_SUM of val(salt, p, i) over ranks 0..size-1, wrapping as C does */
static int sum_of(uint64_t salt, int size, long i)
{
    unsigned sum = 0;
    for (int p = 0; p < size; ++p) {
        sum += (unsigned) val(salt, p, i);
    }
    return (int) sum;
}

static double dval(uint64_t salt, int src, long i)
{
    return (double) (mt_hash(salt, (uint64_t) src, (uint64_t) i, 29) % 1000003) * 0.25;
}

/* Host work between the posts and the waits: the calls must not need it to progress. */
static double busy(long n)
{
    volatile double acc = 0;
    for (long i = 0; i < n; ++i) {
        acc += (double) i * 1e-9;
    }
    return acc;
}

/* @p calls non-blocking calls of the collective whose algorithm param is coll_gpu_<@p alg>
 * (NULL: none) on the engine, or none when non-blocking calls or that algorithm are set to
 * the previous module */
static long nb_engine_calls(const char *alg, long calls)
{
    return mt_mca_is("nb_engine", "off") || (NULL != alg && mt_mca_is(alg, "fallback")) ? 0 : calls;
}

static long mismatches(const int *got, const int *want, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; ++i) {
        bad += got[i] != want[i];
    }
    return bad;
}

/* Expected path bookkeeping for one communicator; @p bcasts of the calls are MPI_Ibcast,
 * which Open MPI answers itself on one rank. */
/* Whether @p comm spans several of coll_gpu_fake_nodes' nodes (world rank r is on node
 * r * nodes / world size): a non-blocking call there takes the staged path, as on a cluster. */
static int spans_fake_nodes(MPI_Comm comm)
{
    const char *fn = getenv("OMPI_MCA_coll_gpu_fake_nodes");
    const long nodes = NULL != fn ? atol(fn) : 0;
    if (nodes <= 0) {
        return 0;
    }
    int size;
    MPI_Comm_size(comm, &size);
    const long wsize = mt_world_size();
    int *w = mt_world_ranks(comm), spans = 0;
    for (int i = 1; i < size; ++i) {
        spans = spans || (long) w[i] * nodes / wsize != (long) w[0] * nodes / wsize;
    }
    free(w);
    return spans;
}

static void expect(mt_pvars_t *pv, long nb_engine, long blocking_engine, long fallback, long bcasts,
                   const char *what)
{
    /* coll_gpu_nb_engine=off, or a communicator across (fake) nodes not yet set up by a
     * blocking call (each section's only blocking call is its last): the non-blocking engine
     * collectives take the previous module */
    const int nb_off = mt_mca_is("nb_engine", "off") || spans_fake_nodes(pv->comm);
    const long engine = (nb_off ? 0 : nb_engine) + blocking_engine;
    fallback += nb_off ? nb_engine : 0;
    unsigned long long e = 0, f = 0;
    if (!mt_pvars_available()) {
        return;
    }
    if (0 != mt_pvars_delta(pv, &e, &f)) {
        MT_CHECK(pv->size < 2, "comm %s: %s: cannot read the pvars", pv->label, what);
        mt_pvars_mark(pv);
        return;
    }
    if (pv->size >= 2) {
        MT_CHECK(e == (unsigned long long) engine && f == (unsigned long long) fallback,
                 "comm %s: %s: engine_calls +%llu (expected %ld), fallback_calls +%llu "
                 "(expected %ld)",
                 pv->label, what, e, engine, f, fallback);
    } else {
        /* one rank: every call counted once, on the engine counter when coll/gpu copied it
         * itself (device buffers, or host ones staged as such), else on the fallback one */
        const int copied = staged_run || MT_ON_DEVICE;
        MT_CHECK(e + f == (unsigned long long) (engine + fallback - bcasts) &&
                     (copied ? 0 == f : 0 == e),
                 "comm %s (one rank): %s: engine_calls +%llu, fallback_calls +%llu, expected "
                 "%ld calls in all%s",
                 pv->label, what, e, f, engine + fallback - bcasts,
                 copied ? ", all on the engine" : ", none on the engine");
    }
    mt_pvars_mark(pv);
}

/* The six engine collectives at once, with point-to-point, one Waitall. */
static void six_at_once(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt, long n)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const int root = (int) (salt % (uint64_t) size);
    int *ar_s = mt_twin_alloc(sizeof(int) * (size_t) n),
        *ar_r = mt_twin_alloc(sizeof(int) * (size_t) n);
    double *rd_s = mt_twin_alloc(sizeof(double) * (size_t) n);
    double *rd_r = mt_twin_alloc(sizeof(double) * (size_t) n);
    int *rs_s = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size);
    int *rs_r = mt_twin_alloc(sizeof(int) * (size_t) n);
    int *bc = mt_twin_alloc(sizeof(int) * (size_t) n);
    int *ag_s = mt_twin_alloc(sizeof(int) * (size_t) n);
    int *ag_r = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size);
    int *aa_s = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size);
    int *aa_r = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size);
    int p2p_s = val(salt, rank, -1), p2p_r = 0;
    for (long i = 0; i < n; ++i) {
        ar_s[i] = val(salt, rank, i);
        rd_s[i] = dval(salt, rank, i);
        bc[i] = rank == root ? val(salt + 1, root, i) : -1;
        ag_s[i] = val(salt + 2, rank, i);
    }
    for (long i = 0; i < n * size; ++i) {
        rs_s[i] = val(salt + 3, rank, i);
        aa_s[i] = val(salt + 4, rank, i);
    }
    const void *ins[] = {ar_s, ar_r, rd_s, rd_r, rs_s, rs_r, bc, ag_s, ag_r, aa_s, aa_r};
    for (size_t k = 0; k < sizeof(ins) / sizeof(ins[0]); ++k) {
        mt_push(ins[k]);
    }
    MPI_Request req[8];
    MT_CHECK_MPI(MPI_Iallreduce(MT_D(ar_s), MT_D(ar_r), (int) n, MPI_INT, MPI_SUM, comm, &req[0]));
    MT_CHECK_MPI(
        MPI_Ireduce(MT_D(rd_s), MT_D(rd_r), (int) n, MPI_DOUBLE, MPI_MAX, root, comm, &req[1]));
    MT_CHECK_MPI(MPI_Irecv(&p2p_r, 1, MPI_INT, (rank + size - 1) % size, 7, comm, &req[2]));
    MT_CHECK_MPI(MPI_Ireduce_scatter_block(MT_D(rs_s), MT_D(rs_r), (int) n, MPI_INT, MPI_SUM, comm,
                                           &req[3]));
    MT_CHECK_MPI(MPI_Ibcast(MT_D(bc), (int) n, MPI_INT, root, comm, &req[4]));
    MT_CHECK_MPI(MPI_Isend(&p2p_s, 1, MPI_INT, (rank + 1) % size, 7, comm, &req[5]));
    MT_CHECK_MPI(
        MPI_Iallgather(MT_D(ag_s), (int) n, MPI_INT, MT_D(ag_r), (int) n, MPI_INT, comm, &req[6]));
    MT_CHECK_MPI(
        MPI_Ialltoall(MT_D(aa_s), (int) n, MPI_INT, MT_D(aa_r), (int) n, MPI_INT, comm, &req[7]));
    busy(200000);
    MPI_Status st[8];
    MT_CHECK_MPI(MPI_Waitall(8, req, st));
    mt_pull(ar_r), mt_pull(rd_r), mt_pull(rs_r), mt_pull(bc), mt_pull(ag_r), mt_pull(aa_r);
    long bad = 0;
    for (long i = 0; i < n; ++i) {
        const int sum = sum_of(salt, size, i), rs = sum_of(salt + 3, size, (long) rank * n + i);
        double mx = dval(salt, 0, i);
        for (int p = 0; p < size; ++p) {
            mx = dval(salt, p, i) > mx ? dval(salt, p, i) : mx;
        }
        bad += ar_r[i] != sum;
        bad += rank == root && rd_r[i] != mx;
        bad += rs_r[i] != rs;
        bad += bc[i] != val(salt + 1, root, i);
        for (int p = 0; p < size; ++p) {
            bad += ag_r[p * n + i] != val(salt + 2, p, i);
            bad += aa_r[p * n + i] != val(salt + 4, p, (long) rank * n + i);
        }
    }
    MT_CHECK(0 == bad, "comm %s: six at once, count %ld: %ld wrong elements", pv->label, n, bad);
    MT_CHECK(p2p_r == val(salt, (rank + size - 1) % size, -1), "comm %s: point-to-point value",
             pv->label);
    expect(pv, 6, 0, 0, 1, "six non-blocking collectives at once");
    mt_twin_free(ar_s), mt_twin_free(ar_r), mt_twin_free(rd_s), mt_twin_free(rd_r);
    mt_twin_free(rs_s), mt_twin_free(rs_r), mt_twin_free(bc), mt_twin_free(ag_s);
    mt_twin_free(ag_r), mt_twin_free(aa_s), mt_twin_free(aa_r);
}

/* In place, and layouts the engine path must pack and unpack. */
static void in_place_and_strided(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const long n = 1031;
    const int root = size - 1;
    int *a = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size * 2);
    int *b = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size * 2);
    int *c = mt_twin_alloc(sizeof(int) * (size_t) n * (size_t) size);
    MPI_Request req[4];
    for (long i = 0; i < n; ++i) {
        a[i] = val(salt, rank, i);
    }
    for (long i = 0; i < n * size; ++i) {
        b[i] = i / n == rank ? val(salt + 1, rank, i % n) : -9;
        c[i] = val(salt + 2, rank, i);
    }
    mt_push(a), mt_push(b), mt_push(c);
    MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(a), (int) n, MPI_INT, MPI_BXOR, comm, &req[0]));
    MT_CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, MT_D(b), (int) n, MPI_INT, comm,
                                &req[1]));
    MT_CHECK_MPI(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, MT_D(c), (int) n, MPI_INT, comm,
                               &req[2]));
    MT_CHECK_MPI(MPI_Waitall(3, req, MPI_STATUSES_IGNORE));
    mt_pull(a), mt_pull(b), mt_pull(c);
    long bad = 0;
    for (long i = 0; i < n; ++i) {
        int x = 0;
        for (int p = 0; p < size; ++p) {
            x ^= val(salt, p, i);
            bad += b[p * n + i] != val(salt + 1, p, i);
            bad += c[p * n + i] != val(salt + 2, p, (long) rank * n + i);
        }
        bad += a[i] != x;
    }
    MT_CHECK(0 == bad, "comm %s: in place: %ld wrong elements", pv->label, bad);

    /* strided: the root's bcast layout, every other receive slot of allgather */
    MPI_Datatype every_other;
    MPI_Type_vector((int) n, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (long i = 0; i < 2 * n; ++i) {
        a[i] = rank == root ? (i % 2 ? -5 : val(salt + 3, root, i / 2)) : -1;
    }
    for (long i = 0; i < 2 * n * size; ++i) {
        b[i] = -7; /* gaps must keep this */
    }
    for (long i = 0; i < n; ++i) {
        c[i] = val(salt + 4, rank, i);
    }
    mt_push(a), mt_push(b), mt_push(c);
    if (rank == root) {
        MT_CHECK_MPI(MPI_Ibcast(MT_D(a), 1, every_other, root, comm, &req[0]));
    } else {
        MT_CHECK_MPI(MPI_Ibcast(MT_D(a), (int) n, MPI_INT, root, comm, &req[0]));
    }
    MT_CHECK_MPI(MPI_Iallgather(MT_D(c), (int) n, MPI_INT, MT_D(b), 1, every_other, comm, &req[1]));
    MT_CHECK_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    mt_pull(a), mt_pull(b);
    bad = 0;
    for (long i = 0; i < n; ++i) {
        if (rank != root) {
            bad += a[i] != val(salt + 3, root, i);
        }
        for (int p = 0; p < size; ++p) {
            /* block p starts at p extents of the vector type, (2n - 1) ints each */
            const long base = (long) p * (2 * n - 1);
            bad += b[base + 2 * i] != val(salt + 4, p, i);
            if (i + 1 < n) {
                bad += b[base + 2 * i + 1] != -7; /* a gap keeps its bytes */
            }
        }
    }
    MT_CHECK(0 == bad, "comm %s: strided layouts: %ld wrong elements", pv->label, bad);
    MPI_Type_free(&every_other);
    expect(pv, 5, 0, 0, 1, "in place and strided");
    mt_twin_free(a), mt_twin_free(b), mt_twin_free(c);
}

/* Many requests in flight on one communicator, completed in reverse order; then MPI_Test
 * polling; then a blocking engine call right behind a post. */
static void many_in_flight(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    enum { K = 24 };
    const long n = 257;
    int *s = mt_twin_alloc(sizeof(int) * (size_t) n * K),
        *r = mt_twin_alloc(sizeof(int) * (size_t) n * K);
    MPI_Request req[K];
    for (int k = 0; k < K; ++k) {
        for (long i = 0; i < n; ++i) {
            s[k * n + i] = val(salt + (uint64_t) k, rank, i);
            r[k * n + i] = 0;
        }
    }
    mt_push(s), mt_push(r);
    for (int k = 0; k < K; ++k) {
        MT_CHECK_MPI(MPI_Iallreduce(MT_D(s + k * n), MT_D(r + k * n), (int) n, MPI_INT,
                                    k % 2 ? MPI_MAX : MPI_SUM, comm, &req[k]));
    }
    for (int k = K - 1; k >= 0; --k) {
        MT_CHECK_MPI(MPI_Wait(&req[k], MPI_STATUS_IGNORE));
    }
    mt_pull(r);
    long bad = 0;
    for (int k = 0; k < K; ++k) {
        for (long i = 0; i < n; ++i) {
            int e = k % 2 ? val(salt + (uint64_t) k, 0, i) : 0;
            for (int p = 0; p < size; ++p) {
                const int v = val(salt + (uint64_t) k, p, i);
                e = k % 2 ? (v > e ? v : e) : (int) ((unsigned) e + (unsigned) v);
            }
            bad += r[k * n + i] != e;
        }
    }
    MT_CHECK(0 == bad, "comm %s: %d in flight: %ld wrong elements", pv->label, K, bad);

    /* MPI_Test until done */
    int flag = 0;
    long polls = 0;
    MT_CHECK_MPI(MPI_Ibcast(MT_D(r), (int) n, MPI_INT, 0, comm, &req[0]));
    while (!flag) {
        MT_CHECK_MPI(MPI_Test(&req[0], &flag, MPI_STATUS_IGNORE));
        ++polls;
        busy(100);
    }
    MT_CHECK(MPI_REQUEST_NULL == req[0], "comm %s: MPI_Test left the request", pv->label);

    /* a blocking engine call right after a post: it runs after the queued one */
    for (long i = 0; i < n; ++i) {
        s[i] = val(salt, rank, i);
    }
    mt_push(s);
    MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(s), (int) n, MPI_INT, MPI_SUM, comm, &req[0]));
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, MT_D(s + n), (int) n, MPI_INT, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Wait(&req[0], MPI_STATUS_IGNORE));
    mt_pull(s);
    bad = 0;
    for (long i = 0; i < n; ++i) {
        bad += s[i] != sum_of(salt, size, i);
    }
    MT_CHECK(0 == bad, "comm %s: post then blocking call: %ld wrong", pv->label, bad);
    expect(pv, K + 2, 1, 0, 1, "many in flight, MPI_Test, post + blocking");
    mt_twin_free(s), mt_twin_free(r);
}

/* One allreduce in flight on each of @p k communicators (of world's ranks), posted in
 * opposite orders on even and odd ranks, one Waitall a round: communicator j sums cnt[j]
 * ints. */
static void comms_crossed(const MPI_Comm *c, int k, const long *cnt, int rounds, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(c[0], &rank);
    MPI_Comm_size(c[0], &size);
    int **buf = malloc(sizeof(int *) * (size_t) k);
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t) k);
    for (int j = 0; j < k; ++j) {
        buf[j] = mt_twin_alloc(sizeof(int) * (size_t) cnt[j]);
    }
    for (int round = 0; round < rounds; ++round) {
        for (int j = 0; j < k; ++j) {
            for (long i = 0; i < cnt[j]; ++i) {
                buf[j][i] = val(salt + (uint64_t) (round * k + j), rank, i);
            }
            mt_push(buf[j]);
        }
        for (int o = 0; o < k; ++o) {
            const int j = 0 == rank % 2 ? o : k - 1 - o;
            MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(buf[j]), (int) cnt[j], MPI_INT, MPI_SUM,
                                        c[j], &req[j]));
        }
        MT_CHECK_MPI(MPI_Waitall(k, req, MPI_STATUSES_IGNORE));
        for (int j = 0; j < k; ++j) {
            mt_pull(buf[j]);
            long bad = 0;
            for (long i = 0; i < cnt[j]; i += 7) {
                bad += buf[j][i] != sum_of(salt + (uint64_t) (round * k + j), size, i);
            }
            MT_CHECK(0 == bad, "%d communicators crossed, round %d, communicator %d: %ld wrong", k,
                     round, j, bad);
        }
    }
    for (int j = 0; j < k; ++j) {
        mt_twin_free(buf[j]);
    }
    free(buf), free(req);
}

/* @p k dups of world with one allreduce each in flight, crossed (comms_crossed): dup j sums
 * size[j % nsizes] ints */
static void dups_crossed(int k, const long *size, int nsizes, int rounds, uint64_t salt)
{
    MPI_Comm *c = calloc((size_t) k, sizeof(MPI_Comm));
    long *cnt = calloc((size_t) k, sizeof(long));
    if (NULL == c || NULL == cnt) {
        MT_CHECK(false, "out of memory for %d communicators", k);
        free(c), free(cnt);
        return;
    }
    for (int j = 0; j < k; ++j) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c[j]);
        cnt[j] = size[j % nsizes];
    }
    comms_crossed(c, k, cnt, rounds, salt);
    for (int j = 0; j < k; ++j) {
        MPI_Comm_free(&c[j]);
    }
    free(c), free(cnt);
}

/* Twelve communicators with calls in flight at once, each on its own stream, sizes
 * alternating between a small call and a ring-sized one (4 KB, and 4 MB past the oneshot
 * sizes), posted in opposite orders: no rank's call may wait for another call that its
 * peer posts later (through the GPU's blocks: the block budget; CUDA's hardware queues,
 * which twelve streams outnumber, showed no such wait). */
static void many_comms_crossed(uint64_t salt)
{
    const long size[] = {1000, 1000000};
    dups_crossed(12, size, 2, 4, salt);
}

/* `crossed` (GPU runs): sixteen communicators with a large allreduce each in flight at
 * once (ring sizes of 4 and 16 MB, and 256 KB oneshot calls), posted in opposite orders on
 * even and odd ranks: far more thread blocks than a GPU holds at once (32 ring channels of
 * 512 threads a call where two ranks share a device, one block per multiprocessor). Calls
 * that do not fit beside those a rank's GPU holds must still finish (the block budget). */
static void crossed_stress(void)
{
    const long size[] = {1000000, 64000, 4000000};
    dups_crossed(16, size, 3, 6, 7000);
}

/* A request in flight on one communicator while a new communicator makes its first call:
 * even ranks post on `a` first, odd ranks make the new communicator first. The new
 * communicator's set-up on an even rank runs while its request on `a` waits for the odd
 * ranks, which reach `a` only after that set-up: a set-up that waited for every kernel in
 * flight without bound deadlocked here (coll_gpu_cuda_setup_wait_ms -1). */
static void request_beside_new_comm(uint64_t salt)
{
    const int rank = mt_world_rank(), size = mt_world_size();
    const long nmax = 1000000, m = 3000;
    MPI_Comm a;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    int *x = mt_twin_alloc(sizeof(int) * (size_t) nmax);
    int *y = mt_twin_alloc(sizeof(int) * (size_t) m);
    for (int round = 0; round < 4; ++round) {
        /* a ring-sized request, then one the resident kernel may take (device buffers) */
        const long n = 0 == round % 2 ? nmax : 1000;
        const uint64_t sx = salt + 2 * (uint64_t) round, sy = sx + 1;
        for (long i = 0; i < n; ++i) {
            x[i] = val(sx, rank, i);
        }
        for (long i = 0; i < m; ++i) {
            y[i] = val(sy, rank, i);
        }
        mt_push(x), mt_push(y);
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_Comm d;
        if (0 == rank % 2) {
            MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(x), (int) n, MPI_INT, MPI_SUM, a, &req));
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, MT_D(y), (int) m, MPI_INT, MPI_SUM, d));
        if (0 != rank % 2) {
            MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(x), (int) n, MPI_INT, MPI_SUM, a, &req));
        }
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        mt_pull(x), mt_pull(y);
        long bad = 0;
        for (long i = 0; i < n; i += 11) {
            bad += x[i] != sum_of(sx, size, i);
        }
        for (long i = 0; i < m; ++i) {
            bad += y[i] != sum_of(sy, size, i);
        }
        MT_CHECK(0 == bad, "a request beside a new communicator's first call, round %d: %ld wrong",
                 round, bad);
        MPI_Comm_free(&d);
    }
    mt_twin_free(x), mt_twin_free(y);
    MPI_Comm_free(&a);
}

/* The non-blocking collectives without an engine path, and MPI_Ireduce_scatter. */
static void the_others(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const int n = 53, root = 0;
    const size_t big = (size_t) n * (size_t) size;
    int *s = mt_twin_alloc(sizeof(int) * big), *r[11];
    int *counts = mt_xmalloc(sizeof(int) * (size_t) size);
    int *displs = mt_xmalloc(sizeof(int) * (size_t) size);
    int *mine = mt_xmalloc(sizeof(int) * (size_t) size); /* alltoallv: counts[rank] from each */
    for (int k = 0; k < 11; ++k) {
        r[k] = mt_twin_alloc(sizeof(int) * big);
        for (size_t i = 0; i < big; ++i) {
            r[k][i] = -3;
        }
    }
    for (size_t i = 0; i < big; ++i) {
        s[i] = val(salt, rank, (long) i);
    }
    for (int p = 0; p < size; ++p) {
        counts[p] = n - p % 3;
        displs[p] = (size - 1 - p) * n; /* reversed blocks */
    }
    for (int p = 0; p < size; ++p) {
        mine[p] = counts[rank];
    }
    /* alltoallw: the alltoallv layout in bytes, one type per peer */
    int *wsd = mt_xmalloc(sizeof(int) * (size_t) size),
        *wrd = mt_xmalloc(sizeof(int) * (size_t) size);
    MPI_Datatype *wt = mt_xmalloc(sizeof(MPI_Datatype) * (size_t) size);
    for (int p = 0; p < size; ++p) {
        wsd[p] = displs[p] * (int) sizeof(int);
        wrd[p] = displs[p] * (int) sizeof(int);
        wt[p] = MPI_INT;
    }
    MPI_Request req[11];
    mt_push(s);
    int *d[11];
    for (int k = 0; k < 11; ++k) {
        mt_push(r[k]);
        d[k] = MT_D(r[k]);
    }
    int *ds = MT_D(s);
    MT_CHECK_MPI(
        MPI_Iallgatherv(ds, counts[rank], MPI_INT, d[0], counts, displs, MPI_INT, comm, &req[0]));
    MT_CHECK_MPI(MPI_Igather(ds, n, MPI_INT, d[1], n, MPI_INT, root, comm, &req[1]));
    MT_CHECK_MPI(MPI_Igatherv(ds, counts[rank], MPI_INT, d[2], counts, displs, MPI_INT, root, comm,
                              &req[2]));
    MT_CHECK_MPI(MPI_Iscatter(ds, n, MPI_INT, d[3], n, MPI_INT, root, comm, &req[3]));
    MT_CHECK_MPI(MPI_Iscatterv(ds, counts, displs, MPI_INT, d[4], counts[rank], MPI_INT, root, comm,
                               &req[4]));
    MT_CHECK_MPI(
        MPI_Ialltoallv(ds, counts, displs, MPI_INT, d[5], mine, displs, MPI_INT, comm, &req[5]));
    MT_CHECK_MPI(MPI_Ireduce_scatter(ds, d[6], counts, MPI_INT, MPI_SUM, comm, &req[6]));
    MT_CHECK_MPI(MPI_Iscan(ds, d[7], n, MPI_INT, MPI_SUM, comm, &req[7]));
    MT_CHECK_MPI(MPI_Iexscan(ds, d[8], n, MPI_INT, MPI_SUM, comm, &req[8]));
    MT_CHECK_MPI(MPI_Ibarrier(comm, &req[9]));
    MT_CHECK_MPI(MPI_Ialltoallw(ds, counts, wsd, wt, d[9], mine, wrd, wt, comm, &req[10]));
    busy(100000);
    MT_CHECK_MPI(MPI_Waitall(11, req, MPI_STATUSES_IGNORE));
    MT_CHECK_MPI(MPI_Alltoallw(ds, counts, wsd, wt, d[10], mine, wrd, wt, comm));
    for (int k = 0; k < 11; ++k) {
        mt_pull(r[k]);
    }
    long bad = 0;
    for (int p = 0; p < size; ++p) {
        for (int i = 0; i < counts[p]; ++i) {
            bad += r[0][displs[p] + i] != val(salt, p, i);
            if (rank == root) {
                bad += r[2][displs[p] + i] != val(salt, p, i);
            }
        }
        if (rank == root) {
            for (int i = 0; i < n; ++i) {
                bad += r[1][p * n + i] != val(salt, p, i);
            }
        }
        for (int i = 0; i < counts[rank]; ++i) {
            bad += r[5][displs[p] + i] != val(salt, p, displs[rank] + i);
            bad += r[9][displs[p] + i] != val(salt, p, displs[rank] + i);
            bad += r[10][displs[p] + i] != val(salt, p, displs[rank] + i);
        }
    }
    for (int i = 0; i < n; ++i) {
        bad += r[3][i] != val(salt, root, (long) rank * n + i);
    }
    for (int i = 0; i < counts[rank]; ++i) {
        bad += r[4][i] != val(salt, root, displs[rank] + i);
    }
    int off = 0;
    for (int p = 0; p < rank; ++p) {
        off += counts[p];
    }
    for (int i = 0; i < counts[rank]; ++i) {
        bad += r[6][i] != sum_of(salt, size, off + i);
    }
    for (int i = 0; i < n; ++i) {
        int e = 0;
        for (int p = 0; p <= rank; ++p) {
            if (p == rank && rank > 0) {
                bad += r[8][i] != e; /* exscan: the ranks before mine */
            }
            e = (int) ((unsigned) e + (unsigned) val(salt, p, i));
        }
        bad += r[7][i] != e;
    }
    MT_CHECK(0 == bad, "comm %s: the other non-blocking collectives: %ld wrong", pv->label, bad);
    /* MPI_Ireduce_scatter (unequal counts), MPI_Iallgatherv, MPI_Igather(v), MPI_Iscatter(v),
     * MPI_Ialltoallv, MPI_Iscan, MPI_Iexscan and MPI_Ialltoallw run on the engine unless
     * coll_gpu_nb_engine (or the algorithm) is off -- across fake nodes too: many_in_flight's
     * blocking call set the communicator up --, and so does the blocking MPI_Alltoallw unless its
     * algorithm is off; the rest take the previous module */
    const long on =
        nb_engine_calls(NULL, 1) + nb_engine_calls("allgather_algorithm", 1) +
        nb_engine_calls("gather_algorithm", 2) + nb_engine_calls("scatter_algorithm", 2) +
        nb_engine_calls("alltoall_algorithm", 2) + nb_engine_calls("scan_algorithm", 2) +
        !mt_mca_is("alltoall_algorithm", "fallback"); /* the blocking alltoallw */
    expect(pv, 0, on, 11 - on, 0, "the other non-blocking collectives, and MPI_Alltoallw");
    for (int k = 0; k < 11; ++k) {
        mt_twin_free(r[k]);
    }
    free(wsd), free(wrd), free(wt);
    mt_twin_free(s);
    free(counts), free(displs), free(mine);
}

/* MPI_Igather, MPI_Iscatter and MPI_Iallgatherv (engine path) at every root, all in flight
 * at once: contiguous, in place, a strided receive type (gaps keep their bytes), blocks of
 * unequal sizes (zero among them) out of order with gaps between them, and elements with a
 * gap each. Every buffer is compared whole against what is computed here. */
static void rooted_and_v(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const int n = 37;
    const size_t whole = (size_t) n * (size_t) size,
                 strided = (size_t) (2 * n - 1) * (size_t) size + 1;
    int *counts = mt_xmalloc(sizeof(int) * (size_t) size),
        *displs = mt_xmalloc(sizeof(int) * (size_t) size);
    int span = 0;
    for (int p = size - 1; p >= 0; --p) { /* reversed blocks, two ints apart */
        counts[p] = 1 == p % 3 ? 0 : n - p % n;
        displs[p] = span;
        span += counts[p] + 2;
    }
    MPI_Datatype vec, gappy; /* n ints two apart; one int of extent two */
    MPI_Type_vector(n, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint) sizeof(int), &gappy);
    MPI_Type_commit(&gappy);
    enum { NB = 11 };
    /* 0 gather send, 1 gather recv, 2 gather in place, 3 scatter send, 4 scatter recv,
     * 5 scatter in place, 6 strided gather recv, 7 strided scatter recv, 8 allgatherv,
     * 9 allgatherv in place, 10 allgatherv of gappy elements */
    const size_t len[NB] = {(size_t) n,
                            whole,
                            whole,
                            whole,
                            (size_t) n,
                            whole,
                            strided,
                            (size_t) (2 * n),
                            (size_t) span,
                            (size_t) span,
                            (size_t) (2 * span)};
    int *b[NB], *want[NB], *d[NB];
    for (int k = 0; k < NB; ++k) {
        b[k] = mt_twin_alloc(sizeof(int) * len[k]);
        want[k] = mt_xmalloc(sizeof(int) * len[k]);
    }
    for (int root = 0; root < size; ++root) {
        const uint64_t x = salt + 16 * (uint64_t) root;
        const int me_root = rank == root;
        for (int k = 0; k < NB; ++k) {
            for (size_t i = 0; i < len[k]; ++i) {
                b[k][i] = -7;
            }
        }
        for (int i = 0; i < n; ++i) {
            b[0][i] = val(x, rank, i);
            b[2][(me_root ? (size_t) root * n : 0) + (size_t) i] = val(x + 1, rank, i);
        }
        for (size_t i = 0; i < whole; ++i) {
            b[3][i] = me_root ? val(x + 2, root, (long) i) : -7;
            b[5][i] = me_root ? val(x + 3, root, (long) i) : b[5][i];
        }
        for (int i = 0; i < counts[rank]; ++i) {
            b[9][displs[rank] + i] = val(x + 7, rank, i);
        }
        for (int k = 0; k < NB; ++k) {
            memcpy(want[k], b[k], sizeof(int) * len[k]);
        }
        for (int p = 0; p < size; ++p) {
            for (int i = 0; i < n; ++i) {
                if (me_root) {
                    want[1][p * n + i] = val(x, p, i);
                    want[2][p * n + i] = val(x + 1, p, i);
                    want[6][p * (2 * n - 1) + 2 * i] = val(x + 4, p, i);
                }
            }
            for (int i = 0; i < counts[p]; ++i) {
                want[8][displs[p] + i] = val(x + 6, p, i);
                want[9][displs[p] + i] = val(x + 7, p, i);
                want[10][2 * (displs[p] + i)] = val(x + 8, p, i);
            }
        }
        for (int i = 0; i < n; ++i) {
            want[4][i] = val(x + 2, root, (long) rank * n + i);
            if (!me_root) {
                want[5][i] = val(x + 3, root, (long) rank * n + i);
            }
            want[7][2 * i] = val(x + 5, root, (long) rank * n + i);
        }
        /* the sends of the strided and v calls come from blocks computed here */
        int *vs = mt_twin_alloc(sizeof(int) * (size_t) (n + whole));
        for (int i = 0; i < n; ++i) {
            vs[i] = i < counts[rank] ? val(x + 6, rank, i) : -1;
            vs[n + i] = val(x + 4, rank, i);
        }
        int *vs8 = mt_twin_alloc(sizeof(int) * (size_t) n),
            *vss = mt_twin_alloc(sizeof(int) * whole);
        for (int i = 0; i < n; ++i) {
            vs8[i] = i < counts[rank] ? val(x + 8, rank, i) : -1;
        }
        for (size_t i = 0; i < whole; ++i) {
            vss[i] = me_root ? val(x + 5, root, (long) i) : -1;
        }
        mt_push(vs), mt_push(vs8), mt_push(vss);
        for (int k = 0; k < NB; ++k) {
            mt_push(b[k]);
            d[k] = MT_D(b[k]);
        }
        MPI_Request req[NB - 2];
        MT_CHECK_MPI(MPI_Igather(d[0], n, MPI_INT, d[1], n, MPI_INT, root, comm, &req[0]));
        MT_CHECK_MPI(MPI_Igather(me_root ? MPI_IN_PLACE : d[2], n, MPI_INT, d[2], n, MPI_INT, root,
                                 comm, &req[1]));
        MT_CHECK_MPI(MPI_Iscatter(d[3], n, MPI_INT, d[4], n, MPI_INT, root, comm, &req[2]));
        MT_CHECK_MPI(MPI_Iscatter(d[5], n, MPI_INT, me_root ? MPI_IN_PLACE : d[5], n, MPI_INT, root,
                                  comm, &req[3]));
        MT_CHECK_MPI(
            MPI_Igather((int *) MT_D(vs) + n, n, MPI_INT, d[6], 1, vec, root, comm, &req[4]));
        MT_CHECK_MPI(MPI_Iscatter(MT_D(vss), n, MPI_INT, d[7], 1, vec, root, comm, &req[5]));
        MT_CHECK_MPI(MPI_Iallgatherv(MT_D(vs), counts[rank], MPI_INT, d[8], counts, displs, MPI_INT,
                                     comm, &req[6]));
        MT_CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d[9], counts, displs,
                                     MPI_INT, comm, &req[7]));
        MT_CHECK_MPI(MPI_Iallgatherv(MT_D(vs8), counts[rank], MPI_INT, d[10], counts, displs, gappy,
                                     comm, &req[8]));
        busy(50000);
        MT_CHECK_MPI(MPI_Waitall(NB - 2, req, MPI_STATUSES_IGNORE));
        static const char *const what[NB] = {"gather's send",
                                             "gather",
                                             "gather in place",
                                             "scatter's send",
                                             "scatter",
                                             "scatter in place",
                                             "gather into a strided type",
                                             "scatter into a strided type",
                                             "allgatherv",
                                             "allgatherv in place",
                                             "allgatherv of gappy elements"};
        for (int k = 0; k < NB; ++k) {
            mt_pull(b[k]);
            const long bad = mismatches(b[k], want[k], len[k]);
            MT_CHECK(0 == bad, "comm %s: root %d: %s: %ld of %zu ints wrong", pv->label, root,
                     what[k], bad, len[k]);
        }
        mt_twin_free(vs), mt_twin_free(vs8), mt_twin_free(vss);
    }
    /* three gathers, three scatters and three allgathervs per root, on the engine unless
     * non-blocking calls or that collective's algorithm are set to the previous module */
    const long on = nb_engine_calls("gather_algorithm", 3) +
                    nb_engine_calls("scatter_algorithm", 3) +
                    nb_engine_calls("allgather_algorithm", 3);
    expect(pv, 0, on * size, (9 - on) * size, 0,
           "MPI_Igather, MPI_Iscatter, MPI_Iallgatherv at every root");
    for (int k = 0; k < NB; ++k) {
        mt_twin_free(b[k]);
        free(want[k]);
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&gappy);
    free(counts), free(displs);
}

/* Blocks of counts[p] elements, rank size-1's first, @p gap elements apart; the span. */
static int reversed(const int *counts, int size, int gap, int *displs)
{
    int span = 0;
    for (int p = size - 1; p >= 0; --p) {
        displs[p] = span;
        span += counts[p] + gap;
    }
    return span;
}

enum { VN = 29, VBIG = 12000 };

/* alltoallv's count from rank a to rank b in variant v: unequal with zeros; symmetric (in
 * place); one peer VBIG elements (rounds under a small coll_gpu_gather_scratch_bytes) */
static int a2a_count(int v, int a, int b, int size)
{
    switch (v) {
    case 0:
        return 0 == (a + 2 * b) % 5 ? 0 : 7 + (3 * a + b) % 11;
    case 1:
        return 1 == (a + b) % 4 ? 0 : 5 + (a * b + a + b) % 9;
    default:
        return a == (b + 1) % size ? VBIG : 3 + (a + b) % 4;
    }
}

/* Call k's buffers: send slen ints (-9) and receive rlen ints (-7) on the device twin's
 * side, and what each must hold afterwards (filled in by the caller) */
static void v_buffers(int k, size_t slen, size_t rlen, int **sb, int **rb, int **want_s,
                      int **want_r)
{
    sb[k] = mt_twin_alloc(sizeof(int) * slen);
    rb[k] = mt_twin_alloc(sizeof(int) * rlen);
    want_s[k] = mt_xmalloc(sizeof(int) * slen);
    want_r[k] = mt_xmalloc(sizeof(int) * rlen);
    for (size_t i = 0; i < slen; ++i) {
        sb[k][i] = -9;
    }
    for (size_t i = 0; i < rlen; ++i) {
        rb[k][i] = -7;
    }
}

/* MPI_Igatherv, MPI_Iscatterv and MPI_Ialltoallv (engine path) at every root, nine in flight
 * at once, three variants each: blocks of unequal sizes (zero among them) out of order with
 * gaps between them; in place; one rank's block of VBIG ints with elements of a gappy type
 * (more than a round when coll_gpu_gather_scratch_bytes is small). Every buffer is compared
 * whole (the gaps keep their bytes) against what is computed here. */
static void v_forms(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Datatype gappy; /* one int of extent two */
    MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint) sizeof(int), &gappy);
    MPI_Type_commit(&gappy);
    const size_t sz = (size_t) size;
    int *cnt = mt_xmalloc(sizeof(int) * sz), *dsp = mt_xmalloc(sizeof(int) * sz);
    int *sc = mt_xmalloc(sizeof(int) * sz), *sd = mt_xmalloc(sizeof(int) * sz);
    int *rc = mt_xmalloc(sizeof(int) * sz), *rd = mt_xmalloc(sizeof(int) * sz);
    enum { NV = 9 };
    for (int root = 0; root < size; ++root) {
        const uint64_t x = salt + 32 * (uint64_t) root;
        const int me_root = rank == root;
        int *sb[NV], *rb[NV], *want_s[NV], *want_r[NV];
        size_t slen[NV], rlen[NV];
        MPI_Request req[NV];
        for (int v = 0; v < 3; ++v) {
            const int e = 2 == v ? 2 : 1; /* ints per element */
            MPI_Datatype t = 2 == v ? gappy : MPI_INT;
            for (int p = 0; p < size; ++p) {
                cnt[p] = 2 == v && p == (root + 1) % size ? VBIG : 1 == p % 3 ? 0 : VN - p % VN;
            }
            const int span = reversed(cnt, size, 2, dsp);
            /* gatherv v: the root's receive layout; every rank sends cnt[rank] ints */
            const int g = v, sv = 3 + v, av = 6 + v;
            slen[g] = (size_t) cnt[rank] + 1;
            rlen[g] = (size_t) e * (size_t) span + 1;
            /* scatterv v: the root's send layout; every rank receives cnt[rank] ints */
            slen[sv] = (size_t) e * (size_t) span + 1;
            rlen[sv] = (size_t) cnt[rank] + 2;
            v_buffers(g, slen[g], rlen[g], sb, rb, want_s, want_r);
            v_buffers(sv, slen[sv], rlen[sv], sb, rb, want_s, want_r);
            for (int i = 0; i < cnt[rank]; ++i) {
                sb[g][i] = val(x + (uint64_t) g, rank, i);
                if (1 == v && me_root) { /* in place: the root's block already there */
                    rb[g][(size_t) e * (size_t) (dsp[rank] + i)] = val(x + (uint64_t) g, rank, i);
                }
            }
            for (int p = 0; p < size && me_root; ++p) {
                for (int i = 0; i < cnt[p]; ++i) {
                    sb[sv][(size_t) e * (size_t) (dsp[p] + i)] = val(x + (uint64_t) sv, p, i);
                }
            }
            memcpy(want_s[g], sb[g], sizeof(int) * slen[g]);
            memcpy(want_r[g], rb[g], sizeof(int) * rlen[g]);
            memcpy(want_s[sv], sb[sv], sizeof(int) * slen[sv]);
            memcpy(want_r[sv], rb[sv], sizeof(int) * rlen[sv]);
            for (int p = 0; p < size && me_root; ++p) {
                for (int i = 0; i < cnt[p]; ++i) {
                    want_r[g][(size_t) e * (size_t) (dsp[p] + i)] = val(x + (uint64_t) g, p, i);
                }
            }
            for (int i = 0; i < cnt[rank] && !(1 == v && me_root); ++i) {
                want_r[sv][i] = val(x + (uint64_t) sv, rank, i); /* the root's block for us */
            }
            mt_push(sb[g]), mt_push(rb[g]), mt_push(sb[sv]), mt_push(rb[sv]);
            const int ip = 1 == v && me_root;
            MT_CHECK_MPI(MPI_Igatherv(ip ? MPI_IN_PLACE : MT_D(sb[g]), cnt[rank], MPI_INT,
                                      MT_D(rb[g]), cnt, dsp, t, root, comm, &req[g]));
            MT_CHECK_MPI(MPI_Iscatterv(MT_D(sb[sv]), cnt, dsp, t, ip ? MPI_IN_PLACE : MT_D(rb[sv]),
                                       cnt[rank], MPI_INT, root, comm, &req[sv]));
            /* alltoallv v: counts a2a_count(v, from, to); sends reversed two apart, receives
             * reversed three apart; the value of element i from a to b: val(x+av, a, b*1e5+i) */
            for (int p = 0; p < size; ++p) {
                sc[p] = a2a_count(v, rank, p, size);
                rc[p] = a2a_count(v, p, rank, size);
            }
            const int sspan = reversed(sc, size, 2, sd), rspan = reversed(rc, size, 3, rd);
            slen[av] = (size_t) e * (size_t) sspan + 1;
            rlen[av] = (size_t) e * (size_t) rspan + 1;
            v_buffers(av, slen[av], rlen[av], sb, rb, want_s, want_r);
            int *from = 1 == v ? rb[av] : sb[av]; /* in place: sent from the receive layout */
            const int *fd = 1 == v ? rd : sd;
            for (int p = 0; p < size; ++p) {
                for (int i = 0; i < sc[p]; ++i) {
                    from[(size_t) e * (size_t) (fd[p] + i)] =
                        val(x + (uint64_t) av, rank, (long) p * 100000 + i);
                }
            }
            memcpy(want_s[av], sb[av], sizeof(int) * slen[av]);
            memcpy(want_r[av], rb[av], sizeof(int) * rlen[av]);
            for (int p = 0; p < size; ++p) {
                for (int i = 0; i < rc[p]; ++i) {
                    want_r[av][(size_t) e * (size_t) (rd[p] + i)] =
                        val(x + (uint64_t) av, p, (long) rank * 100000 + i);
                }
            }
            mt_push(sb[av]), mt_push(rb[av]);
            MT_CHECK_MPI(MPI_Ialltoallv(1 == v ? MPI_IN_PLACE : MT_D(sb[av]), sc, sd, t,
                                        MT_D(rb[av]), rc, rd, t, comm, &req[av]));
        }
        busy(50000);
        MT_CHECK_MPI(MPI_Waitall(NV, req, MPI_STATUSES_IGNORE));
        static const char *const what[NV] = {
            "gatherv",   "gatherv in place",   "gatherv of gappy elements, one block large",
            "scatterv",  "scatterv in place",  "scatterv of gappy elements, one block large",
            "alltoallv", "alltoallv in place", "alltoallv of gappy elements, one block large"};
        for (int k = 0; k < NV; ++k) {
            mt_pull(sb[k]), mt_pull(rb[k]);
            const long bad = mismatches(rb[k], want_r[k], rlen[k]),
                       sbad = mismatches(sb[k], want_s[k], slen[k]);
            MT_CHECK(0 == bad && 0 == sbad,
                     "comm %s: root %d: %s: %ld of %zu received ints wrong, %ld of %zu sent "
                     "ints changed",
                     pv->label, root, what[k], bad, rlen[k], sbad, slen[k]);
            mt_twin_free(sb[k]), mt_twin_free(rb[k]);
            free(want_s[k]), free(want_r[k]);
        }
    }
    const long on = nb_engine_calls("gather_algorithm", 3) +
                    nb_engine_calls("scatter_algorithm", 3) +
                    nb_engine_calls("alltoall_algorithm", 3);
    expect(pv, 0, on * size, (9 - on) * size, 0,
           "MPI_Igatherv, MPI_Iscatterv, MPI_Ialltoallv at every root");
    MPI_Type_free(&gappy);
    free(cnt), free(dsp), free(sc), free(sd), free(rc), free(rd);
}

/* A rank whose v-form fails locally takes part with no bytes: rank 0 of a dup of @p comm
 * (MPI_ERRORS_RETURN) posts MPI_Ialltoallv with receive blocks 2^31 elements apart, beyond
 * what one packed view holds. Its request must return MPI_ERR_COUNT; no rank may hang; the
 * blocks between the other ranks must arrive intact. Only where the engine takes the call
 * (the previous module would write at those displacements). */
static void v_local_error(MPI_Comm comm, mt_pvars_t *pv, uint64_t salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2 || mt_mca_is("nb_engine", "off") || mt_mca_is("alltoall_algorithm", "fallback") ||
        spans_fake_nodes(comm)) {
        return;
    }
    MPI_Comm ec;
    MPI_Comm_dup(comm, &ec);
    MPI_Comm_set_errhandler(ec, MPI_ERRORS_RETURN);
    const size_t sz = (size_t) size;
    int *cnt = mt_xmalloc(sizeof(int) * sz), *sd = mt_xmalloc(sizeof(int) * sz);
    int *rd = mt_xmalloc(sizeof(int) * sz);
    for (int p = 0; p < size; ++p) {
        cnt[p] = 3;
        sd[p] = 3 * p;
        rd[p] = 0 == rank ? (0 == p ? -(1 << 30) : (1 << 30)) : 3 * p;
    }
    int *sb = mt_twin_alloc(sizeof(int) * 3 * sz), *rb = mt_twin_alloc(sizeof(int) * 3 * sz);
    for (size_t i = 0; i < 3 * sz; ++i) {
        sb[i] = val(salt, rank, (long) i);
        rb[i] = -7;
    }
    mt_push(sb), mt_push(rb);
    /* rank 0's receive buffer: a real one, addressed only through the engine's checks */
    /* Open MPI 4.1 reports a failed collective request on MPI_COMM_WORLD's handler */
    MPI_Errhandler world_eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request req;
    int rc = MPI_Ialltoallv(MT_D(sb), cnt, sd, MPI_INT, MT_D(rb), cnt, rd, MPI_INT, ec, &req);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, world_eh);
    MPI_Errhandler_free(&world_eh);
    int eclass = MPI_SUCCESS;
    MPI_Error_class(rc, &eclass);
    MT_CHECK(0 == rank ? MPI_ERR_COUNT == eclass : MPI_SUCCESS == rc,
             "comm %s: MPI_Ialltoallv with a local error on rank 0: rank %d got error class %d",
             pv->label, rank, eclass);
    mt_pull(rb);
    long bad = 0;
    for (int p = 1; p < size && 0 != rank; ++p) {
        for (int i = 0; i < 3; ++i) {
            bad += rb[3 * p + i] != val(salt, p, 3L * rank + i);
        }
    }
    MT_CHECK(0 == bad, "comm %s: MPI_Ialltoallv beside a local error: %ld ints wrong", pv->label,
             bad);
    mt_twin_free(sb), mt_twin_free(rb);
    free(cnt), free(sd), free(rd);
    MPI_Comm_free(&ec);
}

static void suite(MPI_Comm comm, const char *label, uint64_t salt)
{
    mt_pvars_t pv;
    mt_pvars_open(&pv, comm, label);
    const long counts[] = {1, 7, 1000, 65537};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        six_at_once(comm, &pv, salt * 31 + k, counts[k]);
    }
    in_place_and_strided(comm, &pv, salt * 37);
    many_in_flight(comm, &pv, salt * 41);
    the_others(comm, &pv, salt * 43);
    rooted_and_v(comm, &pv, salt * 47);
    v_forms(comm, &pv, salt * 53);
    v_local_error(comm, &pv, salt * 59);
    mt_pvars_close(&pv);
}

/* Threads (MPI_THREAD_MULTIPLE), each with its own communicator: non-blocking calls as the
 * first calls on fresh communicators (their engine set-up runs concurrently), splits of them,
 * several requests per thread in flight; NCCL's lazy non-blocking init + split failure. */
enum { NTHREADS = 4, TROUNDS = 25, TN = 3001 };

typedef struct {
    MPI_Comm comm;
    int t;
    int *a, *b, *c; /* TN, TN, TN x size */
    long bad;
    mt_pvars_t pv;              /* on comm, opened and closed by the main thread */
    unsigned long long eng, fb; /* the pvars' growth over this thread's posts on comm */
    int unread;                 /* rounds whose pvars could not be read */
} tctx_t;

static void *thread_main(void *arg)
{
    tctx_t *x = arg;
    mt_twin_thread_init();
    int rank, size;
    MPI_Comm_rank(x->comm, &rank);
    MPI_Comm_size(x->comm, &size);
    for (int round = 0; round < TROUNDS; ++round) {
        const uint64_t salt = 7000 + (uint64_t) x->t * 100 + (uint64_t) round;
        MPI_Comm sub;
        MPI_Comm_split(x->comm, rank % 2, -rank, &sub); /* a fresh communicator each round */
        int sr, ss;
        MPI_Comm_rank(sub, &sr);
        MPI_Comm_size(sub, &ss);
        for (long i = 0; i < TN; ++i) {
            x->a[i] = val(salt, rank, i);
            x->b[i] = val(salt + 1, sr, i);
        }
        for (long i = 0; i < (long) TN * size; ++i) {
            x->c[i] = val(salt + 2, rank, i);
        }
        mt_push(x->a), mt_push(x->b), mt_push(x->c);
        MPI_Request req[3];
        mt_pvars_mark(&x->pv); /* only this thread calls on comm: the two posts below */
        MT_CHECK_MPI(
            MPI_Iallreduce(MPI_IN_PLACE, MT_D(x->a), TN, MPI_INT, MPI_SUM, x->comm, &req[0]));
        MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(x->b), TN, MPI_INT, MPI_MAX, sub, &req[1]));
        MT_CHECK_MPI(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, MT_D(x->c), TN, MPI_INT,
                                   x->comm, &req[2]));
        MT_CHECK_MPI(MPI_Waitall(3, req, MPI_STATUSES_IGNORE));
        unsigned long long e = 0, f = 0;
        if (0 == mt_pvars_delta(&x->pv, &e, &f)) {
            x->eng += e, x->fb += f;
        } else {
            ++x->unread;
        }
        mt_pull(x->a), mt_pull(x->b), mt_pull(x->c);
        for (long i = 0; i < TN; ++i) {
            const int sum = sum_of(salt, size, i);
            int mx = val(salt + 1, 0, i);
            for (int p = 0; p < ss; ++p) {
                mx = val(salt + 1, p, i) > mx ? val(salt + 1, p, i) : mx;
            }
            x->bad += x->a[i] != sum || x->b[i] != mx;
            for (int p = 0; p < size; ++p) {
                x->bad += x->c[(long) p * TN + i] != val(salt + 2, p, (long) rank * TN + i);
            }
        }
        MPI_Comm_free(&sub);
    }
    return NULL;
}

static void threaded(void)
{
    tctx_t x[NTHREADS];
    pthread_t th[NTHREADS];
    const int size = mt_world_size();
    for (int t = 0; t < NTHREADS; ++t) { /* the main thread makes every buffer and comm */
        MPI_Comm_dup(MPI_COMM_WORLD, &x[t].comm);
        x[t].t = t;
        x[t].bad = 0;
        x[t].a = mt_twin_alloc(sizeof(int) * TN);
        x[t].b = mt_twin_alloc(sizeof(int) * TN);
        x[t].c = mt_twin_alloc(sizeof(int) * (size_t) TN * (size_t) size);
        x[t].eng = x[t].fb = 0;
        x[t].unread = 0;
        char label[32];
        snprintf(label, sizeof(label), "thread %d's dup", t);
        mt_pvars_open(&x[t].pv, x[t].comm, label);
    }
    /* Which path the posts must take: the engine at every thread level, unless
     * coll_gpu_nb_engine is off */
    const bool staged = mt_mca_is("nb_engine", "off");
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_create(&th[t], NULL, thread_main, &x[t]);
    }
    /* every thread joined before any buffer is freed: a cudaFree waits for every kernel of
     * the process, and one thread's freeing while the others' collectives wait on the GPU
     * for their peers can hang the ranks (README, Limits: threads and device-wide CUDA calls) */
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_join(th[t], NULL);
    }
    for (int t = 0; t < NTHREADS; ++t) {
        MT_CHECK(0 == x[t].bad, "thread %d: %ld wrong elements", t, x[t].bad);
        if (size >= 2 && mt_pvars_available()) {
            const unsigned long long want = 2ull * TROUNDS; /* Iallreduce and Ialltoall */
            MT_CHECK(0 == x[t].unread, "thread %d: pvars unreadable in %d rounds", t, x[t].unread);
            MT_CHECK(x[t].eng == (staged ? 0 : want) && x[t].fb == (staged ? want : 0),
                     "thread %d: its posts on its dup counted engine_calls +%llu, fallback_calls "
                     "+%llu; expected %llu on the %s",
                     t, x[t].eng, x[t].fb, want, staged ? "previous module" : "engine");
        }
        mt_pvars_close(&x[t].pv);
        MPI_Comm_free(&x[t].comm);
        mt_twin_free(x[t].a), mt_twin_free(x[t].b), mt_twin_free(x[t].c);
    }
}

/* Threads sharing one communicator: MPI orders the collectives of a communicator by their
 * posts, so the threads take turns to post (the same order on every rank: thread 0's first
 * call, thread 1's first, ..., thread 0's second), and each waits for its own request while
 * the others post and wait theirs. */
typedef struct {
    MPI_Comm comm;
    int t;
    int *a; /* TN */
    long bad;
} sctx_t;

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static int turn; /* posts made on the shared communicator so far */

static void *shared_thread(void *arg)
{
    sctx_t *x = arg;
    mt_twin_thread_init();
    int rank, size;
    MPI_Comm_rank(x->comm, &rank);
    MPI_Comm_size(x->comm, &size);
    for (int round = 0; round < TROUNDS; ++round) {
        const uint64_t salt = 9000 + (uint64_t) x->t * 100 + (uint64_t) round;
        for (long i = 0; i < TN; ++i) {
            x->a[i] = val(salt, rank, i);
        }
        mt_push(x->a);
        MPI_Request req;
        pthread_mutex_lock(&turn_lock);
        while (turn != round * NTHREADS + x->t) {
            pthread_cond_wait(&turn_cv, &turn_lock);
        }
        /* a post hands the call to the engine's worker and returns: no wait under the lock */
        MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(x->a), TN, MPI_INT, MPI_SUM, x->comm, &req));
        turn++;
        pthread_cond_broadcast(&turn_cv);
        pthread_mutex_unlock(&turn_lock);
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        mt_pull(x->a);
        for (long i = 0; i < TN; ++i) {
            x->bad += x->a[i] != sum_of(salt, size, i);
        }
    }
    return NULL;
}

static void threads_one_comm(void)
{
    sctx_t x[NTHREADS];
    pthread_t th[NTHREADS];
    MPI_Comm shared;
    MPI_Comm_dup(MPI_COMM_WORLD, &shared);
    turn = 0;
    for (int t = 0; t < NTHREADS; ++t) {
        x[t].comm = shared;
        x[t].t = t;
        x[t].a = mt_twin_alloc(sizeof(int) * TN);
        x[t].bad = 0;
    }
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_create(&th[t], NULL, shared_thread, &x[t]);
    }
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_join(th[t], NULL);
    }
    for (int t = 0; t < NTHREADS; ++t) {
        MT_CHECK(0 == x[t].bad, "thread %d on the shared communicator: %ld wrong elements", t,
                 x[t].bad);
        mt_twin_free(x[t].a);
    }
    MPI_Comm_free(&shared);
}

/* README's rule (Limits, threads and device-wide CUDA calls): a device-wide synchronizing
 * CUDA call between a post and its wait waits for the call's kernel, which waits for its
 * peers. Even ranks post on one dup, free a device buffer (cudaFree), then post on another;
 * odd ranks the other way round. On the engine every rank's cudaFree waits for its kernel,
 * whose peers are held in their own cudaFree: the kernels time out (coll_gpu_cuda_timeout)
 * and the calls fail. Staged (coll_gpu_nb_engine off), the host copies wait for no peer and
 * every result is right. gpu_run.sh freerule runs both, the engine as the negative control. */
static void freerule(void)
{
    const int rank = mt_world_rank(), size = mt_world_size();
    const long n = 1L << 20; /* a launched ring kernel, not the resident one */
    MPI_Comm c[2];
    int *buf[2];
    for (int j = 0; j < 2; ++j) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c[j]);
        MPI_Comm_set_errhandler(c[j], MPI_ERRORS_RETURN);
        buf[j] = mt_twin_alloc(sizeof(int) * (size_t) n);
        for (long i = 0; i < n; ++i) {
            buf[j][i] = val(8000 + (uint64_t) j, rank, i);
        }
        mt_push(buf[j]);
    }
    /* both engine communicators set up first (a first post's set-up needs MPI progress,
     * which the sleep below would not give: its kernel would not be launched yet) */
    int *one = mt_twin_alloc(sizeof(int));
    for (int j = 0; j < 2; ++j) {
        one[0] = 1;
        mt_push(one);
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, MT_D(one), 1, MPI_INT, MPI_SUM, c[j]));
        mt_pull(one);
        MT_CHECK(size == one[0], "freerule: warm-up sum %d, expected %d", one[0], size);
    }
    mt_twin_free(one);
    void *spare = mt_twin_alloc(4096);
    const int first = rank % 2;
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    const int rc0 = MPI_Iallreduce(MPI_IN_PLACE, MT_D(buf[first]), (int) n, MPI_INT, MPI_SUM,
                                   c[first], &req[first]);
    usleep(200 * 1000);  /* the call's kernel is launched and waits for the other parity */
    mt_twin_free(spare); /* on the device build a cudaFree, between the post and its wait */
    const int rc1 = MPI_Iallreduce(MPI_IN_PLACE, MT_D(buf[1 - first]), (int) n, MPI_INT, MPI_SUM,
                                   c[1 - first], &req[1 - first]);
    const int rcw = MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    MT_CHECK(MPI_SUCCESS == rc0 && MPI_SUCCESS == rc1 && MPI_SUCCESS == rcw,
             "freerule: posts returned %d and %d, MPI_Waitall %d", rc0, rc1, rcw);
    long bad = 0;
    for (int j = 0; j < 2; ++j) {
        mt_pull(buf[j]);
        for (long i = 0; i < n; ++i) {
            bad += buf[j][i] != sum_of(8000 + (uint64_t) j, size, i);
        }
        mt_twin_free(buf[j]);
        MPI_Comm_free(&c[j]);
    }
    MT_CHECK(0 == bad, "freerule: %ld wrong elements", bad);
}

/* Run with --mca coll_gpu_nb_max_workers 1: one worker thread, lent to the communicators in
 * turn. Posts on 20 communicators, each waited before the next, all succeed with correct
 * results (the thread of an idle communicator is taken back); a post on a second
 * communicator while world's call is still outstanding (posted, not yet waited) fails with an
 * MPI error on every rank and hands back MPI_REQUEST_NULL (a wait on it returns at once),
 * nothing hangs, and both communicators keep working. */
static void cap(void)
{
    const int size = mt_world_size(), rank = mt_world_rank();
    enum { CN = 100, DUPS = 20 };
    int *x = mt_twin_alloc(sizeof(int) * CN);
    int *y = mt_twin_alloc(sizeof(int) * CN);
    MPI_Request req, req2;
    for (int round = 0; round < DUPS + 1; ++round) {
        MPI_Comm d = MPI_COMM_WORLD;
        if (round < DUPS) {
            MPI_Comm_dup(MPI_COMM_WORLD, &d);
        }
        for (int i = 0; i < CN; ++i) {
            x[i] = val(9000 + (uint64_t) round, rank, i);
        }
        mt_push(x);
        MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(x), CN, MPI_INT, MPI_SUM, d, &req));
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        mt_pull(x);
        long bad = 0;
        for (int i = 0; i < CN; ++i) {
            bad += x[i] != sum_of(9000 + (uint64_t) round, size, i);
        }
        MT_CHECK(0 == bad, "cap: communicator %d of %d, one at a time: %ld wrong", round, DUPS,
                 bad);
        if (MPI_COMM_WORLD != d) {
            MPI_Comm_free(&d);
        }
    }
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < CN; ++i) {
            x[i] = val(9100 + (uint64_t) round, rank, i);
        }
        mt_push(x);
        MT_CHECK_MPI(
            MPI_Iallreduce(MPI_IN_PLACE, MT_D(x), CN, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
        memset(&req2, 0xa5, sizeof(req2)); /* what an uninitialized handle may hold */
        int rc = MPI_Iallreduce(MPI_IN_PLACE, MT_D(y), CN, MPI_INT, MPI_SUM, d, &req2);
        MT_CHECK(MPI_SUCCESS != rc, "cap: a second communicator got a worker while world's "
                                    "call was outstanding");
        if (MPI_SUCCESS != rc) { /* the failed post handed back MPI_REQUEST_NULL */
            MT_CHECK(MPI_REQUEST_NULL == req2, "cap: a failed post left its request unset");
        }
        MT_CHECK_MPI(MPI_Wait(&req2, MPI_STATUS_IGNORE)); /* a no-op on MPI_REQUEST_NULL */
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        mt_pull(x);
        long bad = 0;
        for (int i = 0; i < CN; ++i) {
            bad += x[i] != sum_of(9100 + (uint64_t) round, size, i);
        }
        MT_CHECK(0 == bad, "cap: world round %d beside the failed post: %ld wrong", round, bad);
        /* and the dup works once world is idle */
        for (int i = 0; i < CN; ++i) {
            y[i] = val(9200 + (uint64_t) round, rank, i);
        }
        mt_push(y);
        MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, MT_D(y), CN, MPI_INT, MPI_SUM, d, &req2));
        MT_CHECK_MPI(MPI_Wait(&req2, MPI_STATUS_IGNORE));
        mt_pull(y);
        bad = 0;
        for (int i = 0; i < CN; ++i) {
            bad += y[i] != sum_of(9200 + (uint64_t) round, size, i);
        }
        MT_CHECK(0 == bad, "cap: the dup after world went idle, round %d: %ld wrong", round, bad);
        MPI_Comm_free(&d);
    }
    mt_twin_free(x);
    mt_twin_free(y);
}

int main(int argc, char **argv)
{
    staged_run = argc > 1 && 0 == strcmp(argv[1], "staged");
    if (argc > 1 && 0 == strcmp(argv[1], "cap")) {
        mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_nb" : "test_nb");
        mt_twin_init();
        cap();
        return mt_finalize();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "crossed")) {
        mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_nb" : "test_nb");
        mt_twin_init();
        crossed_stress();
        return mt_finalize();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "freerule")) {
        mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_nb" : "test_nb");
        mt_twin_init();
        freerule();
        return mt_finalize();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "threads")) {
        mt_init_thread(&argc, &argv, MT_ON_DEVICE ? "test_cuda_nb" : "test_nb",
                       MPI_THREAD_MULTIPLE);
        mt_twin_init();
        threaded();
        threads_one_comm();
        return mt_finalize();
    }
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_nb" : "test_nb");
    mt_twin_init();
    wrank = mt_world_rank();
    mt_run_world_dup_split(suite, 1000);
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    const MPI_Comm ab[2] = {a, b};
    const long n_ab[2] = {40000, 40000};
    comms_crossed(ab, 2, n_ab, 20, 5000); /* two communicators, opposite posting orders */
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    many_comms_crossed(6000);
    request_beside_new_comm(6500);
    return mt_finalize();
}
