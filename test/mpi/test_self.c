/*
 * Communicators of one rank: MPI_COMM_SELF, a dup of it, a split of world that leaves each
 * rank alone, create_group of one rank, a cart of size 1. coll/gpu serves them (above
 * coll/self, whose memcpy would take a device pointer): every collective, blocking and
 * non-blocking, is a local copy from the send description to the receive description (or
 * nothing, in place). Checked against values computed here: contiguous and derived layouts
 * (gaps keep their bytes), in place, count 0.
 *
 * Buffers are host memory. Argument "staged" is the run with coll_gpu_stage_host_buffers=1,
 * where coll/gpu treats them as device buffers and copies them itself (engine_calls count
 * every call); without it coll/gpu passes them to the previous module (fallback_calls).
 * The GPU twin (test/gpu/test_cuda_colls.c "self") runs the same on device buffers.
 */
#include <stdlib.h>
#include <string.h>

#include "mt_twin.h"
#include "mpitest.h"

static int staged_run;

static int val(uint64_t salt, long i)
{
    return (int) (mt_hash(salt, (uint64_t) i, 3, 5) % 1000003);
}

#define N 97
#define GAP (-7)

/* Counts calls that reach the coll layer (Open MPI returns early from MPI_Bcast on one
 * rank, and from calls with no data, before any coll module). */
static long calls;

static void fill(int *b, long n, uint64_t salt)
{
    for (long i = 0; i < n; ++i) {
        b[i] = val(salt, i);
    }
}

static void clear(int *b, long n)
{
    for (long i = 0; i < n; ++i) {
        b[i] = GAP;
    }
}

static long diff(const int *b, long n, uint64_t salt)
{
    long bad = 0;
    for (long i = 0; i < n; ++i) {
        bad += b[i] != val(salt, i);
    }
    return bad;
}

static void blocking(MPI_Comm comm, const char *label, uint64_t salt)
{
    int *s = mt_twin_alloc(sizeof(int) * 2 * N), *r = mt_twin_alloc(sizeof(int) * (2 * N + 8));
    int *ds = MT_D(s), *dr = MT_D(r);
    int zero = 0, n = N;
    long bad;
    MPI_Datatype t = MPI_INT;

#define COPY_CHECK(what, call)                                                                     \
    do {                                                                                           \
        fill(s, N, salt);                                                                          \
        clear(r, 2 * N + 8);                                                                       \
        mt_push(s), mt_push(r);                                                                    \
        MT_CHECK_MPI(call);                                                                        \
        mt_pull(r);                                                                                \
        ++calls;                                                                                   \
        bad = diff(r, N, salt);                                                                    \
        MT_CHECK(0 == bad && GAP == r[N], "comm %s: %s: %ld wrong", label, what, bad);          \
    } while (0)

    COPY_CHECK("allreduce", MPI_Allreduce(ds, dr, n, t, MPI_SUM, comm));
    COPY_CHECK("reduce", MPI_Reduce(ds, dr, n, t, MPI_MAX, 0, comm));
    COPY_CHECK("allgather", MPI_Allgather(ds, n, t, dr, n, t, comm));
    COPY_CHECK("alltoall", MPI_Alltoall(ds, n, t, dr, n, t, comm));
    COPY_CHECK("gather", MPI_Gather(ds, n, t, dr, n, t, 0, comm));
    COPY_CHECK("scatter", MPI_Scatter(ds, n, t, dr, n, t, 0, comm));
    COPY_CHECK("scan", MPI_Scan(ds, dr, n, t, MPI_PROD, comm));
    COPY_CHECK("reduce_scatter_block", MPI_Reduce_scatter_block(ds, dr, n, t, MPI_BOR, comm));
    COPY_CHECK("reduce_scatter", MPI_Reduce_scatter(ds, dr, &n, t, MPI_SUM, comm));
    COPY_CHECK("allgatherv", MPI_Allgatherv(ds, n, t, dr, &n, &zero, t, comm));
    COPY_CHECK("gatherv", MPI_Gatherv(ds, n, t, dr, &n, &zero, t, 0, comm));
    COPY_CHECK("scatterv", MPI_Scatterv(ds, &n, &zero, t, dr, n, t, 0, comm));
    COPY_CHECK("alltoallv", MPI_Alltoallv(ds, &n, &zero, t, dr, &n, &zero, t, comm));
    COPY_CHECK("alltoallw", MPI_Alltoallw(ds, &n, &zero, &t, dr, &n, &zero, &t, comm));

    /* displacements: the block lands 3 elements in */
    int three = 3;
    fill(s, N, salt + 1);
    clear(r, 2 * N + 8);
    mt_push(s), mt_push(r);
    MT_CHECK_MPI(MPI_Allgatherv(ds, n, t, dr, &n, &three, t, comm));
    mt_pull(r);
    ++calls;
    bad = diff(r + 3, N, salt + 1);
    MT_CHECK(0 == bad && GAP == r[2] && GAP == r[N + 3], "comm %s: allgatherv at 3: %ld wrong",
             label, bad);

    /* in place: nothing moves */
    fill(r, N, salt + 2);
    mt_push(r);
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, dr, n, t, MPI_SUM, comm));
    MT_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dr, n, t, comm));
    MT_CHECK_MPI(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, dr, n, t, comm));
    MT_CHECK_MPI(MPI_Reduce(MPI_IN_PLACE, dr, n, t, MPI_SUM, 0, comm));
    MT_CHECK_MPI(MPI_Bcast(dr, n, t, 0, comm)); /* Open MPI returns early on one rank */
    calls += 4;
    mt_pull(r);
    MT_CHECK(0 == diff(r, N, salt + 2), "comm %s: in place changed the buffer", label);

    /* derived layouts: a strided send into a contiguous receive, and back */
    MPI_Datatype every_other;
    MPI_Type_vector(N, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (long i = 0; i < 2 * N; ++i) {
        s[i] = i % 2 ? -5 : val(salt + 3, i / 2);
    }
    clear(r, 2 * N + 8);
    mt_push(s), mt_push(r);
    MT_CHECK_MPI(MPI_Allgather(ds, 1, every_other, dr, n, t, comm));
    mt_pull(r);
    ++calls;
    bad = diff(r, N, salt + 3);
    MT_CHECK(0 == bad && GAP == r[N], "comm %s: strided to contiguous: %ld wrong", label, bad);
    fill(s, N, salt + 4);
    clear(r, 2 * N + 8);
    mt_push(s), mt_push(r);
    MT_CHECK_MPI(MPI_Alltoall(ds, n, t, dr, 1, every_other, comm));
    mt_pull(r);
    ++calls;
    bad = 0;
    for (long i = 0; i < 2 * N - 1; ++i) {
        bad += r[i] != (i % 2 ? GAP : val(salt + 4, i / 2));
    }
    MT_CHECK(0 == bad, "comm %s: contiguous to strided (gaps kept): %ld wrong", label, bad);
    /* a too-short receive description is an error, not an overrun */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rc = MPI_Allgather(ds, n, t, dr, n - 1, t, comm);
    ++calls;
    MT_CHECK(MPI_SUCCESS != rc, "comm %s: a receive shorter than the send succeeded", label);
    MPI_Type_free(&every_other);
    MT_CHECK_MPI(MPI_Barrier(comm));
    mt_twin_free(s);
    mt_twin_free(r);
#undef COPY_CHECK
}

static void nonblocking(MPI_Comm comm, const char *label, uint64_t salt)
{
    enum { K = 8 };
    int *s = mt_twin_alloc(sizeof(int) * N), *rr = mt_twin_alloc(sizeof(int) * K * (N + 1));
    int *r[K], *d[K], *ds = MT_D(s);
    int n = N, zero = 0;
    MPI_Request req[K + 1];
    fill(s, N, salt);
    for (int k = 0; k < K; ++k) {
        r[k] = rr + k * (N + 1);
        d[k] = MT_D(r[k]);
        clear(r[k], N + 1);
    }
    mt_push(s), mt_push(rr);
    MT_CHECK_MPI(MPI_Iallreduce(ds, d[0], n, MPI_INT, MPI_SUM, comm, &req[0]));
    MT_CHECK_MPI(MPI_Ireduce(ds, d[1], n, MPI_INT, MPI_MIN, 0, comm, &req[1]));
    MT_CHECK_MPI(MPI_Iallgather(ds, n, MPI_INT, d[2], n, MPI_INT, comm, &req[2]));
    MT_CHECK_MPI(MPI_Ialltoall(ds, n, MPI_INT, d[3], n, MPI_INT, comm, &req[3]));
    MT_CHECK_MPI(MPI_Iscan(ds, d[4], n, MPI_INT, MPI_SUM, comm, &req[4]));
    MT_CHECK_MPI(MPI_Ireduce_scatter_block(ds, d[5], n, MPI_INT, MPI_SUM, comm, &req[5]));
    MT_CHECK_MPI(MPI_Igatherv(ds, n, MPI_INT, d[6], &n, &zero, MPI_INT, 0, comm, &req[6]));
    MT_CHECK_MPI(MPI_Iscatter(ds, n, MPI_INT, d[7], n, MPI_INT, 0, comm, &req[7]));
    MT_CHECK_MPI(MPI_Ibarrier(comm, &req[K]));
    calls += K;
    MT_CHECK_MPI(MPI_Waitall(K + 1, req, MPI_STATUSES_IGNORE));
    mt_pull(rr);
    for (int k = 0; k < K; ++k) {
        long bad = diff(r[k], N, salt);
        MT_CHECK(0 == bad && GAP == r[k][N], "comm %s: non-blocking call %d: %ld wrong", label, k,
                 bad);
    }
    /* in place */
    fill(r[0], N, salt + 1);
    mt_push(rr);
    MT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, d[0], n, MPI_INT, MPI_SUM, comm, &req[0]));
    MT_CHECK_MPI(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d[0], n, MPI_INT, comm,
                               &req[1]));
    MT_CHECK_MPI(MPI_Ibcast(d[0], n, MPI_INT, 0, comm, &req[2]));
    calls += 2; /* Open MPI answers MPI_Ibcast on one rank itself */
    MT_CHECK_MPI(MPI_Waitall(3, req, MPI_STATUSES_IGNORE));
    mt_pull(rr);
    MT_CHECK(0 == diff(r[0], N, salt + 1), "comm %s: non-blocking in place", label);
    mt_twin_free(s);
    mt_twin_free(rr);
}

static void one_rank(MPI_Comm comm, const char *label, uint64_t salt)
{
    int size;
    MPI_Comm_size(comm, &size);
    MT_CHECK(1 == size, "comm %s has %d ranks", label, size);
    mt_pvars_t pv;
    mt_pvars_open(&pv, comm, label);
    calls = 0;
    blocking(comm, label, salt);
    nonblocking(comm, label, salt + 10);
    unsigned long long e = 0, f = 0;
    if (mt_pvars_available()) {
        MT_CHECK(0 == mt_pvars_delta(&pv, &e, &f) && pv.have[0] && pv.have[1],
                 "comm %s: coll/gpu pvars not bound: coll/gpu does not serve it", label);
        /* every call that reached the coll layer counted once, on the engine counter when
         * coll/gpu copied it itself (staged: as for device buffers) */
        const unsigned long long want = (unsigned long long) calls;
        const int copied = staged_run || MT_ON_DEVICE;
        MT_CHECK(copied ? (e == want && 0 == f) : (0 == e && f == want),
                 "comm %s: engine_calls +%llu, fallback_calls +%llu, expected %llu on the %s "
                 "counter",
                 label, e, f, want, copied ? "engine" : "fallback");
    }
    mt_pvars_close(&pv);
}

int main(int argc, char **argv)
{
    staged_run = argc > 1 && 0 == strcmp(argv[1], "staged");
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_self" : "test_self");
    mt_twin_init();
    const int rank = mt_world_rank();
    one_rank(MPI_COMM_SELF, "self", 1);
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_SELF, &c);
    one_rank(c, "dup(self)", 2);
    MPI_Comm_free(&c);
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &c);
    one_rank(c, "split(world, rank)", 3);
    MPI_Comm_free(&c);
    MPI_Group wg, g;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, 1, &rank, &g);
    MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &c);
    one_rank(c, "create_group(one)", 4);
    MPI_Comm_free(&c);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    int dims = 1, periods = 0;
    MPI_Cart_create(MPI_COMM_SELF, 1, &dims, &periods, 0, &c);
    one_rank(c, "cart(self)", 5);
    MPI_Comm_free(&c);
    return mt_finalize();
}
