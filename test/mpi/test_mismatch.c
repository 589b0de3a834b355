/*
 * Mismatched collective calls: every rank must get an error back (no hang, no success with
 * wrong data), of the class of what differs, with a string that names both sides' values.
 *
 *   test_mismatch        one node: allreduce counts bigger and smaller on rank 0, 64 against
 *                        32 elements on the last rank, bcast roots, allreduce ops and element
 *                        types, an allreduce against a bcast; after each, a call that matches
 *                        must give the right result on the same communicator (the check
 *                        exchanges nothing, so the communicator stays usable). And a bcast
 *                        whose ranks describe the same bytes with different datatypes (legal)
 *                        must succeed.
 *   test_mismatch nodes  across nodes (coll_gpu_fake_nodes 2): the differences every node
 *                        sees (even and odd ranks differ), allreduce counts and ops.
 *   test_mismatch xnodes K
 *                        across K nodes (coll_gpu_fake_nodes K, the same K): the ranks of each
 *                        node agree, the last node's calls differ from the others' (allreduce
 *                        counts bigger and smaller, bcast roots, allreduce ops, a bcast
 *                        against an allreduce); nothing a node checks by itself can see it.
 * Across nodes as on one node, after each mismatch a call that matches must give the right
 * result on the same communicator: no rank consumed a later call's data.
 *
 * Each case runs on a fresh dup of MPI_COMM_WORLD with MPI_ERRORS_RETURN; the expected
 * results are computed on the host from the inputs. "quick" (the driver's argument at 4
 * ranks) runs the one-node cases.
 *
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_mismatch), every buffer handed to MPI is
 * device memory (mt_twin.h: filled and checked on the host); without a GPU it prints
 * "skipped: no GPU" and exits 77.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

static int rank, size;
static int nodes_mode;
static int xnodes; /* the fake nodes of xnodes mode; 0: another mode */

/* every rank: rc failed, with class @p cls, and its string holds @p a and @p b */
static void expect_error(int rc, int cls, const char *what, const char *a, const char *b)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0, got = MPI_SUCCESS;
    if (MPI_SUCCESS != rc) {
        MPI_Error_class(rc, &got);
        MPI_Error_string(rc, s, &len);
    }
    MT_CHECK(MPI_SUCCESS != rc, "%s: returned MPI_SUCCESS on rank %d", what, rank);
    MT_CHECK(got == cls, "%s: error class %d, expected %d (%s)", what, got, cls, s);
    MT_CHECK(NULL != strstr(s, a) && NULL != strstr(s, b),
             "%s: the error string does not name both sides (\"%s\" and \"%s\"): %s", what, a, b,
             s);
    if (0 == rank) {
        mt_note("%s: %s", what, s);
    }
}

/* a matching allreduce on @p comm: right values */
static void expect_usable(MPI_Comm comm, const char *what)
{
    enum { N = 4099 };
    double *v = mt_twin_alloc(sizeof(double) * N);
    for (int i = 0; i < N; ++i) {
        v[i] = (double) (rank + 1) * (double) (i % 7 + 1);
    }
    mt_push(v);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, MT_D(v), N, MPI_DOUBLE, MPI_SUM, comm);
    mt_pull(v);
    MT_CHECK(MPI_SUCCESS == rc, "%s: the next, matching call failed (%s)", what, mt_mpi_errstr(rc));
    const double ranks = (double) size * (double) (size + 1) / 2.0;
    int bad = 0;
    for (int i = 0; i < N && MPI_SUCCESS == rc; ++i) {
        bad += v[i] != ranks * (double) (i % 7 + 1);
    }
    MT_CHECK(0 == bad, "%s: the next call gave %d wrong elements of %d", what, bad, N);
    mt_twin_free(v);
}

static MPI_Comm fresh(void)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    /* one matching call first: the engine's communicator is set up on every rank */
    int *x = mt_twin_alloc(sizeof(int));
    *x = 1;
    mt_push(x);
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, MT_D(x), 1, MPI_INT, MPI_SUM, c));
    mt_twin_free(x);
    return c;
}

/* allreduce of @p mine doubles, whose first rank that differs from rank 0 (which has @p r0)
 * is @p other with @p theirs: every rank names that pair, across nodes too (the first node
 * whose ranks differ) */
static void case_counts(const char *what, int mine, int r0, int other, int theirs)
{
    MPI_Comm c = fresh();
    double *v = mt_twin_alloc((size_t) mine * sizeof(double));
    const int rc = MPI_Allreduce(MPI_IN_PLACE, MT_D(v), mine, MPI_DOUBLE, MPI_SUM, c);
    char a[64], b[64];
    snprintf(a, sizeof(a), "rank 0 passes %zu bytes", (size_t) r0 * sizeof(double));
    snprintf(b, sizeof(b), "rank %d passes %zu bytes", other, (size_t) theirs * sizeof(double));
    expect_error(rc, MPI_ERR_TRUNCATE, what, a, b);
    mt_twin_free(v);
    expect_usable(c, what);
    MPI_Comm_free(&c);
}

static void case_root(void)
{
    enum { N = 1000 };
    MPI_Comm c = fresh();
    int *v = mt_twin_alloc(N * sizeof(int));
    const int root = 0 == rank ? 0 : 1; /* at 2 ranks: both think they are the root */
    const int rc = MPI_Bcast(MT_D(v), N, MPI_INT, root, c);
    expect_error(rc, MPI_ERR_ROOT, "bcast roots 0 and 1", "rank 0 names root 0",
                 "rank 1 names root 1");
    mt_twin_free(v);
    expect_usable(c, "bcast roots 0 and 1");
    MPI_Comm_free(&c);
}

static void case_op(int other)
{
    enum { N = 4096 };
    MPI_Comm c = fresh();
    int *v = mt_twin_alloc(N * sizeof(int));
    const int differs = nodes_mode ? 1 == rank % 2 : 0 != rank;
    const int rc = MPI_Allreduce(MPI_IN_PLACE, MT_D(v), N, MPI_INT, differs ? MPI_MAX : MPI_SUM, c);
    char b[64];
    snprintf(b, sizeof(b), "rank %d with max", other);
    expect_error(rc, MPI_ERR_OP, "allreduce ops sum and max", "rank 0 reduces with sum", b);
    mt_twin_free(v);
    expect_usable(c, "allreduce ops sum and max");
    MPI_Comm_free(&c);
}

static void case_type(void)
{
    enum { N = 4096 };
    MPI_Comm c = fresh();
    float *v = mt_twin_alloc(N * sizeof(float)); /* as many bytes as N ints */
    const int rc =
        MPI_Allreduce(MPI_IN_PLACE, MT_D(v), N, 0 == rank ? MPI_INT : MPI_FLOAT, MPI_SUM, c);
    expect_error(rc, MPI_ERR_TYPE, "allreduce of int and float", "rank 0 reduces int32",
                 "rank 1 float32");
    mt_twin_free(v);
    expect_usable(c, "allreduce of int and float");
    MPI_Comm_free(&c);
}

static void case_kind(void)
{
    enum { N = 512 };
    MPI_Comm c = fresh();
    double *v = mt_twin_alloc(N * sizeof(double));
    const int rc = 0 == rank ? MPI_Bcast(MT_D(v), N, MPI_DOUBLE, 0, c)
                             : MPI_Allreduce(MPI_IN_PLACE, MT_D(v), N, MPI_DOUBLE, MPI_SUM, c);
    expect_error(rc, MPI_ERR_ARG, "bcast against allreduce", "rank 0 calls bcast",
                 "rank 1 calls allreduce");
    mt_twin_free(v);
    expect_usable(c, "bcast against allreduce");
    MPI_Comm_free(&c);
}

/* the same bytes, described as 2N ints at the root and N pairs of ints elsewhere: legal */
static void case_same_signature(void)
{
    enum { N = 3000 };
    MPI_Comm c = fresh();
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    int *v = mt_twin_alloc(sizeof(int) * 2 * N);
    for (int i = 0; i < 2 * N; ++i) {
        v[i] = 0 == rank ? 3 * i + 1 : -1;
    }
    mt_push(v);
    const int rc =
        0 == rank ? MPI_Bcast(MT_D(v), 2 * N, MPI_INT, 0, c) : MPI_Bcast(MT_D(v), N, pair, 0, c);
    mt_pull(v);
    MT_CHECK(MPI_SUCCESS == rc, "bcast of one signature in two datatypes failed: %s",
             mt_mpi_errstr(rc));
    int bad = 0;
    for (int i = 0; i < 2 * N; ++i) {
        bad += v[i] != 3 * i + 1;
    }
    MT_CHECK(0 == bad, "bcast of one signature in two datatypes: %d wrong elements", bad);
    mt_twin_free(v);
    MPI_Type_free(&pair);
    MPI_Comm_free(&c);
}

/* ---- xnodes: the last node differs from the others, whose ranks all agree ---- */

/* fake node k's first world rank (world rank r is on node r * K / size) */
static int node_first(int k)
{
    return (k * size + xnodes - 1) / xnodes;
}

/* whether this rank is on the last node */
static int on_last_node(void)
{
    return rank * xnodes / size == xnodes - 1;
}

static void xcase_counts(const char *what, int others, int last)
{
    MPI_Comm c = fresh();
    const int mine = on_last_node() ? last : others;
    double *v = mt_twin_alloc((size_t) mine * sizeof(double));
    const int rc = MPI_Allreduce(MPI_IN_PLACE, MT_D(v), mine, MPI_DOUBLE, MPI_SUM, c);
    char a[64], b[64];
    snprintf(a, sizeof(a), "rank 0 passes %zu bytes", (size_t) others * sizeof(double));
    snprintf(b, sizeof(b), "rank %d passes %zu bytes", node_first(xnodes - 1),
             (size_t) last * sizeof(double));
    expect_error(rc, MPI_ERR_TRUNCATE, what, a, b);
    mt_twin_free(v);
    expect_usable(c, what);
    MPI_Comm_free(&c);
}

static void xcase_root(void)
{
    enum { N = 100000 };
    MPI_Comm c = fresh();
    int *v = mt_twin_alloc(N * sizeof(int));
    const int lr = node_first(xnodes - 1), root = on_last_node() ? lr : 0;
    const int rc = MPI_Bcast(MT_D(v), N, MPI_INT, root, c);
    char b[64];
    snprintf(b, sizeof(b), "rank %d names root %d", lr, lr);
    expect_error(rc, MPI_ERR_ROOT, "bcast roots 0 and the last node's first", "rank 0 names root 0",
                 b);
    mt_twin_free(v);
    expect_usable(c, "bcast roots 0 and the last node's first");
    MPI_Comm_free(&c);
}

static void xcase_op(void)
{
    enum { N = 4096 };
    MPI_Comm c = fresh();
    int *v = mt_twin_alloc(N * sizeof(int));
    const int rc =
        MPI_Allreduce(MPI_IN_PLACE, MT_D(v), N, MPI_INT, on_last_node() ? MPI_MAX : MPI_SUM, c);
    char b[64];
    snprintf(b, sizeof(b), "rank %d with max", node_first(xnodes - 1));
    expect_error(rc, MPI_ERR_OP, "allreduce ops sum and max", "rank 0 reduces with sum", b);
    mt_twin_free(v);
    expect_usable(c, "allreduce ops sum and max");
    MPI_Comm_free(&c);
}

static void xcase_kind(void)
{
    enum { N = 512 };
    MPI_Comm c = fresh();
    double *v = mt_twin_alloc(N * sizeof(double));
    const int rc = on_last_node() ? MPI_Allreduce(MPI_IN_PLACE, MT_D(v), N, MPI_DOUBLE, MPI_SUM, c)
                                  : MPI_Bcast(MT_D(v), N, MPI_DOUBLE, 0, c);
    char b[64];
    snprintf(b, sizeof(b), "rank %d calls allreduce", node_first(xnodes - 1));
    expect_error(rc, MPI_ERR_ARG, "bcast against allreduce", "rank 0 calls bcast", b);
    mt_twin_free(v);
    expect_usable(c, "bcast against allreduce");
    MPI_Comm_free(&c);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_mismatch");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mt_twin_init(); /* the device build: this rank's GPU, or "skipped: no GPU" and exit 77 */
    nodes_mode = argc > 1 && 0 == strcmp(argv[1], "nodes");
    xnodes = argc > 2 && 0 == strcmp(argv[1], "xnodes") ? atoi(argv[2]) : 0;
    const bool quick = argc > 1 && 0 == strcmp(argv[1], "quick");
    if (argc > 1 && !nodes_mode && !quick && (xnodes < 2 || xnodes > size)) {
        if (0 == rank) {
            fprintf(stderr, "usage: test_mismatch [quick | nodes | xnodes K], 2 <= K <= ranks\n");
        }
        (void) mt_finalize();
        return 2;
    }
    if (size < 2 || (nodes_mode && (size < 4 || 0 != size % 2))) {
        if (0 == rank) {
            printf("skipped: needs 2 ranks (nodes: an even number, 4 or more)\n");
        }
        (void) mt_finalize();
        return 77;
    }
    enum { BIG = 1 << 20, SMALL = 1 << 19 };
    if (xnodes > 0) {
        xcase_counts("allreduce counts 1M, 512K on the last node", BIG, SMALL);
        xcase_counts("allreduce counts 512K, 1M on the last node", SMALL, BIG);
        xcase_counts("allreduce counts 64, 32 on the last node", 64, 32);
        xcase_root();
        xcase_op();
        xcase_kind();
    } else if (nodes_mode) {
        /* even ranks against odd ones: both ranks of every fake node differ */
        case_counts("allreduce counts 1M on even ranks, 512K on odd", 0 == rank % 2 ? BIG : SMALL,
                    BIG, 1, SMALL);
        case_op(1);
    } else {
        case_counts("allreduce counts 1M on rank 0, 512K elsewhere", 0 == rank ? BIG : SMALL, BIG,
                    1, SMALL);
        case_counts("allreduce counts 512K on rank 0, 1M elsewhere", 0 == rank ? SMALL : BIG, SMALL,
                    1, BIG);
        case_counts("allreduce counts 64, 32 on the last rank", size - 1 == rank ? 32 : 64, 64,
                    size - 1, 32);
        case_root();
        case_op(1);
        case_type();
        case_kind();
        case_same_signature();
    }
    return mt_finalize();
}
