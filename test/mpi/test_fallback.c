/*
 * test_fallback.c - MPI_Allreduce calls that coll/gpu must hand to the previous coll module:
 * user-defined ops (commutative and not), a derived datatype (with a user op: MPI forbids
 * predefined ops on derived types). Results are checked against a local reference; the
 * counters must show every call on the fallback path and none on the engine (2+ ranks).
 * MPI_MINLOC on MPI_2INT and MPI_MAXLOC on MPI_DOUBLE_INT (a padded pair) run here too,
 * against the same kind of reference, and must be on the engine (which has every pair type).
 *
 * Erroneous calls (a predefined op on a type MPI does not define it for) with
 * MPI_ERRORS_RETURN set must return an error code, not crash, not reach the engine, and
 * leave the communicator usable.
 */
#include "mpitest.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    MPI_Comm comm;
    const char *label;
    int rank;
    int size;
    uint64_t salt;
    mt_pvars_t pv;
} ctx_t;

static const int counts[] = {0, 1, 7, 1031, 65537};
#define NCOUNTS ((int) (sizeof(counts) / sizeof(counts[0])))

/* ---- user op 1: commutative, on MPI_UNSIGNED: c = a + b + 1 (mod 2^32) ---- */

static void op_sum_plus_one(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const unsigned *a = in;
    unsigned *b = inout;

    (void) dt;
    for (int i = 0; i < *len; ++i) {
        b[i] = a[i] + b[i] + 1u;
    }
}

static unsigned gen_u(int rank, size_t i, uint64_t salt)
{
    return (unsigned) mt_hash((uint64_t) rank, i, 1, salt);
}

/* ---- user op 2: non-commutative, on contiguous(4 x MPI_UNSIGNED) = 2x2 matrices ----
 * inout = in x inout (MPI passes the lower ranks' partial result in "in"), so the result
 * is M_0 x M_1 x ... x M_{n-1}, which differs from other orders. */

static MPI_Datatype mat_type = MPI_DATATYPE_NULL;
static int mat_wrong_type; /* set when the op sees another datatype */

static void mat_mul(const unsigned *x, const unsigned *y, unsigned *r)
{
    unsigned t[4];

    t[0] = x[0] * y[0] + x[1] * y[2];
    t[1] = x[0] * y[1] + x[1] * y[3];
    t[2] = x[2] * y[0] + x[3] * y[2];
    t[3] = x[2] * y[1] + x[3] * y[3];
    memcpy(r, t, sizeof(t));
}

static void op_matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const unsigned *a = in;
    unsigned *b = inout;

    if (*dt != mat_type) {
        mat_wrong_type = 1;
    }
    for (int i = 0; i < *len; ++i) {
        mat_mul(a + 4 * i, b + 4 * i, b + 4 * i);
    }
}

static void gen_mat(int rank, size_t i, uint64_t salt, unsigned *m)
{
    uint64_t h = mt_hash((uint64_t) rank, i, 2, salt);

    m[0] = 1;
    m[1] = (unsigned) (h & 0xffff);
    m[2] = (unsigned) ((h >> 16) & 0xffff);
    m[3] = 1 + (unsigned) ((h >> 32) & 0xff);
}

/* ---- user op 3: commutative, on contiguous(2 x MPI_INT): (a0 + b0, max(a1, b1)) ---- */

static void op_pair(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;

    (void) dt;
    for (int i = 0; i < *len; ++i) {
        b[2 * i] = b[2 * i] + a[2 * i];
        b[2 * i + 1] = a[2 * i + 1] > b[2 * i + 1] ? a[2 * i + 1] : b[2 * i + 1];
    }
}

static void gen_pair(int rank, int size, size_t i, uint64_t salt, int *p)
{
    uint64_t h = mt_hash((uint64_t) rank, i, 3, salt);

    p[0] = (int) (h % 2000001) - 1000000; /* the sum stays in range for any sane np */
    p[1] = (int) (uint32_t) (h >> 32);
    (void) size;
}

/*
 * Runs one user-op allreduce test over all counts, in place and not.
 * @elem:  bytes per datatype element; gen fills one element of one rank; fold combines
 *         acc (lower ranks) with the next rank's element: acc = acc op next.
 * Return: number of calls made.
 */
typedef void (*gen_fn)(ctx_t *c, int rank, size_t i, void *elem);
typedef void (*fold_fn)(void *acc, const void *next);

static void g_sum1(ctx_t *c, int rank, size_t i, void *e)
{
    unsigned v = gen_u(rank, i, c->salt);
    memcpy(e, &v, sizeof(v));
}

static void f_sum1(void *acc, const void *next)
{
    unsigned a, b;
    memcpy(&a, acc, sizeof(a));
    memcpy(&b, next, sizeof(b));
    a = a + b + 1u;
    memcpy(acc, &a, sizeof(a));
}

static void g_mat(ctx_t *c, int rank, size_t i, void *e)
{
    gen_mat(rank, i, c->salt, e);
}

static void f_mat(void *acc, const void *next)
{
    mat_mul(acc, next, acc); /* acc holds M_0..M_r-1: multiply on the right */
}

static void g_pair(ctx_t *c, int rank, size_t i, void *e)
{
    gen_pair(rank, c->size, i, c->salt, e);
}

static void f_pair(void *acc, const void *next)
{
    int a[2], b[2];
    memcpy(a, acc, sizeof(a));
    memcpy(b, next, sizeof(b));
    a[0] += b[0];
    a[1] = a[1] > b[1] ? a[1] : b[1];
    memcpy(acc, a, sizeof(a));
}

/* MINLOC on MPI_2INT: ties on the value pick the smaller index. */
static void g_minloc(ctx_t *c, int rank, size_t i, void *e)
{
    uint64_t h = mt_hash((uint64_t) rank, i, 4, c->salt);
    int v[2] = {(int) (h % 5) - 2, (int) ((h >> 8) % 1000)}; /* small range: many ties */
    memcpy(e, v, sizeof(v));
}

static void f_minloc(void *acc, const void *next)
{
    int a[2], b[2];
    memcpy(a, acc, sizeof(a));
    memcpy(b, next, sizeof(b));
    if (b[0] < a[0] || (b[0] == a[0] && b[1] < a[1])) {
        memcpy(acc, b, sizeof(b));
    }
}

/* MAXLOC on MPI_DOUBLE_INT. */
typedef struct {
    double v;
    int i;
} double_int_t;

static void g_maxloc(ctx_t *c, int rank, size_t i, void *e)
{
    uint64_t h = mt_hash((uint64_t) rank, i, 5, c->salt);
    double_int_t x;

    memset(&x, 0, sizeof(x));
    x.v = (double) ((int) (h % 7) - 3) * 0.5;
    x.i = (int) ((h >> 8) % 1000);
    memcpy(e, &x, sizeof(x));
}

static void f_maxloc(void *acc, const void *next)
{
    double_int_t a, b;
    memcpy(&a, acc, sizeof(a));
    memcpy(&b, next, sizeof(b));
    if (b.v > a.v || (b.v == a.v && b.i < a.i)) {
        memcpy(acc, &b, sizeof(b));
    }
}

/* Compares one element: double_int_t by fields (padding), everything else by bytes. */
static int same(const void *a, const void *b, size_t n, int is_double_int)
{
    if (is_double_int) {
        double_int_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x.v == y.v && x.i == y.i;
    }
    return 0 == memcmp(a, b, n);
}

static void run_reduce(ctx_t *c, const char *name, MPI_Datatype dt, MPI_Op op, size_t elem,
                       gen_fn gen, fold_fn fold, int is_double_int, mt_path_t path)
{
    long calls = 0;
    char what[160];

    for (int k = 0; k < NCOUNTS; ++k) {
        size_t n = (size_t) counts[k];
        unsigned char *send = mt_xmalloc(n * elem + 1);
        unsigned char *send_copy = mt_xmalloc(n * elem + 1);
        unsigned char *recv = mt_xmalloc(n * elem + 1);
        unsigned char *want = mt_xmalloc(n * elem + 1);
        unsigned char *tmp = mt_xmalloc(elem);

        memset(send, 0, n * elem + 1);
        memset(want, 0, n * elem + 1);
        for (size_t i = 0; i < n; ++i) {
            gen(c, c->rank, i, send + i * elem);
            gen(c, 0, i, want + i * elem);
            for (int r = 1; r < c->size; ++r) {
                gen(c, r, i, tmp);
                fold(want + i * elem, tmp);
            }
        }
        memcpy(send_copy, send, n * elem + 1);
        for (int inplace = 0; inplace < 2; ++inplace) {
            long bad = -1;
            int rc;

            memset(recv, 0x5a, n * elem + 1);
            if (inplace) {
                memcpy(recv, send, n * elem);
            }
            rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int) n, dt, op, c->comm);
            calls += n > 0; /* Open MPI returns before the coll modules when count is 0 */
            MT_CHECK(MPI_SUCCESS == rc, "comm %s: MPI_Allreduce(%s, count %zu%s) returned %d (%s)",
                     c->label, name, n, inplace ? ", in place" : "", rc, mt_mpi_errstr(rc));
            for (size_t i = 0; i < n && bad < 0; ++i) {
                if (!same(recv + i * elem, want + i * elem, elem, is_double_int)) {
                    bad = (long) i;
                }
            }
            MT_CHECK(bad < 0, "comm %s size %d: MPI_Allreduce(%s, count %zu%s): element %ld wrong",
                     c->label, c->size, name, n, inplace ? ", in place" : "", bad);
            MT_CHECK(0x5a == recv[n * elem],
                     "comm %s: MPI_Allreduce(%s, count %zu%s) wrote past "
                     "recvbuf[count - 1]",
                     c->label, name, n, inplace ? ", in place" : "");
            MT_CHECK(0 == memcmp(send, send_copy, n * elem + 1),
                     "comm %s: MPI_Allreduce(%s, count %zu) modified sendbuf", c->label, name, n);
        }
        free(tmp);
        free(want);
        free(recv);
        free(send_copy);
        free(send);
    }
    snprintf(what, sizeof(what), "MPI_Allreduce(%s)", name);
    MT_EXPECT_PATH(&c->pv, calls, path, what);
}

/*
 * Calls that MPI defines as erroneous. With MPI_ERRORS_RETURN they must return an error
 * (Open MPI's parameter check catches them before any coll module), must not touch the
 * engine, and the communicator must stay usable. (MPI_BYTE with MPI_SUM is not listed:
 * Open MPI 4.1 accepts it as an extension.)
 */
static void run_erroneous(ctx_t *c, MPI_Datatype pair)
{
    static const struct {
        const char *name;
        int which; /* index into dts */
        int op;    /* index into opl */
    } bad[] = {
        {"MPI_FLOAT with MPI_BAND", 0, 0}, {"MPI_DOUBLE with MPI_LXOR", 1, 1},
        {"MPI_C_BOOL with MPI_SUM", 2, 2}, {"contiguous(2 x MPI_INT) with MPI_SUM", 4, 2},
        {"MPI_INT with MPI_MINLOC", 5, 3},
    };
    MPI_Datatype dts[6] = {MPI_FLOAT, MPI_DOUBLE, MPI_C_BOOL, MPI_BYTE, pair, MPI_INT};
    MPI_Op opl[4] = {MPI_BAND, MPI_LXOR, MPI_SUM, MPI_MINLOC};
    MPI_Comm ecomm;
    mt_pvars_t epv;
    char lbl[80];
    long double sendbuf[8], recvbuf[8];
    int v = c->rank + 1, w = 0;

    memset(sendbuf, 0, sizeof(sendbuf));
    /* A duplicate, so that the error handler does not leak into other tests. */
    MPI_Comm_dup(c->comm, &ecomm);
    MPI_Comm_set_errhandler(ecomm, MPI_ERRORS_RETURN);
    snprintf(lbl, sizeof(lbl), "dup(%s) with MPI_ERRORS_RETURN", c->label);
    mt_pvars_open(&epv, ecomm, lbl);
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); ++k) {
        int rc = MPI_Allreduce(sendbuf, recvbuf, 2, dts[bad[k].which], opl[bad[k].op], ecomm);
        int cls = MPI_SUCCESS;

        MPI_Error_class(rc, &cls);
        MT_CHECK(MPI_SUCCESS != rc,
                 "comm %s: erroneous MPI_Allreduce(%s) returned MPI_SUCCESS; expected an error "
                 "(MPI_ERR_OP)",
                 lbl, bad[k].name);
        MT_CHECK(MPI_SUCCESS == rc || MPI_ERR_OP == cls || MPI_ERR_TYPE == cls,
                 "comm %s: erroneous MPI_Allreduce(%s) returned error class %d (%s), expected "
                 "MPI_ERR_OP or MPI_ERR_TYPE",
                 lbl, bad[k].name, cls, mt_mpi_errstr(rc));
    }
    /* nothing erroneous may reach the engine (nor, with parameter checking, any module) */
    MT_EXPECT_PATH(&epv, 0, MT_PATH_ENGINE, "erroneous MPI_Allreduce calls");

    /* the communicator still works */
    MT_CHECK_MPI(MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, ecomm));
    MT_CHECK(w == c->size * (c->size + 1) / 2,
             "comm %s: MPI_Allreduce after the erroneous calls gave %d, expected %d", lbl, w,
             c->size * (c->size + 1) / 2);
    MT_EXPECT_PATH(&epv, 1, MT_PATH_ENGINE, "MPI_Allreduce(MPI_INT, MPI_SUM) after errors");
    mt_pvars_close(&epv);
    MPI_Comm_free(&ecomm);
}

static void run_suite(MPI_Comm comm, const char *label, uint64_t salt)
{
    ctx_t c = {.comm = comm, .label = label, .salt = salt};
    MPI_Op sum1, matmul, pairop;
    MPI_Datatype pair;

    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    mt_pvars_open(&c.pv, comm, label);

    MPI_Op_create(op_sum_plus_one, 1, &sum1);
    MPI_Op_create(op_matmul, 0, &matmul);
    MPI_Op_create(op_pair, 1, &pairop);
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mat_type);
    MPI_Type_commit(&mat_type);
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    mat_wrong_type = 0;

    run_reduce(&c, "MPI_UNSIGNED, user op a+b+1 (commutative)", MPI_UNSIGNED, sum1,
               sizeof(unsigned), g_sum1, f_sum1, 0, MT_PATH_FALLBACK);
    run_reduce(&c, "contiguous(4 x MPI_UNSIGNED), user op 2x2 matrix product (non-commutative)",
               mat_type, matmul, 4 * sizeof(unsigned), g_mat, f_mat, 0, MT_PATH_FALLBACK);
    MT_CHECK(!mat_wrong_type,
             "comm %s: the matrix user op was called with another datatype than "
             "the one passed to MPI_Allreduce",
             label);
    run_reduce(&c, "contiguous(2 x MPI_INT), user op (sum, max)", pair, pairop, 2 * sizeof(int),
               g_pair, f_pair, 0, MT_PATH_FALLBACK);
    run_reduce(&c, "MPI_2INT, MPI_MINLOC", MPI_2INT, MPI_MINLOC, 2 * sizeof(int), g_minloc,
               f_minloc, 0, MT_PATH_ENGINE);
    run_reduce(&c, "MPI_DOUBLE_INT, MPI_MAXLOC", MPI_DOUBLE_INT, MPI_MAXLOC, sizeof(double_int_t),
               g_maxloc, f_maxloc, 1, MT_PATH_ENGINE);

    mt_pvars_close(&c.pv);
    run_erroneous(&c, pair);

    MPI_Type_free(&pair);
    MPI_Type_free(&mat_type);
    MPI_Op_free(&pairop);
    MPI_Op_free(&matmul);
    MPI_Op_free(&sum1);
    mt_note("comm %s (size %d) done", label, c.size);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_fallback");
    mt_run_world_dup_split(run_suite, 20);

    return mt_finalize();
}
