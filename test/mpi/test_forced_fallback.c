/*
 * test_forced_fallback.c - run with
 *     --mca coll_gpu_allreduce_algorithm fallback --mca coll_gpu_alltoall_algorithm fallback
 * or on the host backend at 6 ranks (every communicator here, the halves of the split too, of
 * 3 ranks or more) with its default coll_gpu_host_rule (measured), which leaves every
 * allreduce and alltoall there to the previous module.
 * Calls that the engine would normally serve must then all go to the previous coll module:
 * results correct, engine_calls unchanged, fallback_calls grown by the number of calls
 * (2+ ranks). Runs on MPI_COMM_WORLD, a duplicate and the two halves of a parity split.
 *
 * The reductions avoid the combinations that stock Open MPI 4.1.4 computes wrongly (its
 * op framework treats MPI_UNSIGNED_LONG as signed and MPI_OFFSET as unsigned for MIN/MAX,
 * and op/avx saturates 8/16-bit unsigned SUM), since here the stock module does the work.
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

enum {
    C_INT_SUM,
    C_INT_PROD,
    C_DOUBLE_SUM,
    C_FLOAT_MAX,
    C_U8_BXOR,
    C_BOOL_LOR,
    C_LL_MIN,
    C_U_BAND,
    C_NUM
};

static const char *const case_names[C_NUM] = {"MPI_INT, MPI_SUM",       "MPI_INT, MPI_PROD",
                                              "MPI_DOUBLE, MPI_SUM",    "MPI_FLOAT, MPI_MAX",
                                              "MPI_UINT8_T, MPI_BXOR",  "MPI_C_BOOL, MPI_LOR",
                                              "MPI_LONG_LONG, MPI_MIN", "MPI_UNSIGNED, MPI_BAND"};

static size_t elem_size(int k)
{
    switch (k) {
    case C_INT_SUM:
    case C_INT_PROD:
        return sizeof(int);
    case C_DOUBLE_SUM:
        return sizeof(double);
    case C_FLOAT_MAX:
        return sizeof(float);
    case C_U8_BXOR:
        return 1;
    case C_BOOL_LOR:
        return sizeof(bool);
    case C_LL_MIN:
        return sizeof(long long);
    default:
        return sizeof(unsigned);
    }
}

static void mpi_args(int k, MPI_Datatype *dt, MPI_Op *op)
{
    switch (k) {
    case C_INT_SUM:
        *dt = MPI_INT, *op = MPI_SUM;
        break;
    case C_INT_PROD:
        *dt = MPI_INT, *op = MPI_PROD;
        break;
    case C_DOUBLE_SUM:
        *dt = MPI_DOUBLE, *op = MPI_SUM;
        break;
    case C_FLOAT_MAX:
        *dt = MPI_FLOAT, *op = MPI_MAX;
        break;
    case C_U8_BXOR:
        *dt = MPI_UINT8_T, *op = MPI_BXOR;
        break;
    case C_BOOL_LOR:
        *dt = MPI_C_BOOL, *op = MPI_LOR;
        break;
    case C_LL_MIN:
        *dt = MPI_LONG_LONG, *op = MPI_MIN;
        break;
    default:
        *dt = MPI_UNSIGNED, *op = MPI_BAND;
        break;
    }
}

/* Writes element i of rank r for case k at p. */
static void gen(int k, int r, int size, size_t i, uint64_t salt, void *p)
{
    uint64_t h = mt_hash((uint64_t) r, i, (uint64_t) k, salt);

    switch (k) {
    case C_INT_SUM: {
        int v = (int) (h % 2000001) - 1000000;
        memcpy(p, &v, sizeof(v));
        break;
    }
    case C_INT_PROD: { /* +-1, one rank per index +-2: in range */
        int v = (h & 1) ? -1 : 1;
        if ((size_t) r == i % (size_t) size) {
            v *= 2;
        }
        memcpy(p, &v, sizeof(v));
        break;
    }
    case C_DOUBLE_SUM: {
        double v = (double) ((int) (h % 201) - 100);
        memcpy(p, &v, sizeof(v));
        break;
    }
    case C_FLOAT_MAX: {
        float v = (float) ((int) (h % 20001) - 10000) / 8.0f;
        memcpy(p, &v, sizeof(v));
        break;
    }
    case C_U8_BXOR: {
        uint8_t v = (uint8_t) h;
        memcpy(p, &v, 1);
        break;
    }
    case C_BOOL_LOR: {
        bool v = 0 == h % 5;
        memcpy(p, &v, sizeof(v));
        break;
    }
    case C_LL_MIN: {
        long long v = (long long) h;
        memcpy(p, &v, sizeof(v));
        break;
    }
    default: {
        unsigned v = ~(1u << (h % 32));
        memcpy(p, &v, sizeof(v));
        break;
    }
    }
}

/* acc = acc op next for case k. */
static void fold(int k, void *acc, const void *next)
{
    switch (k) {
    case C_INT_SUM:
    case C_INT_PROD: {
        int a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a = C_INT_SUM == k ? a + b : a * b;
        memcpy(acc, &a, sizeof(a));
        break;
    }
    case C_DOUBLE_SUM: {
        double a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a += b;
        memcpy(acc, &a, sizeof(a));
        break;
    }
    case C_FLOAT_MAX: {
        float a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a = b > a ? b : a;
        memcpy(acc, &a, sizeof(a));
        break;
    }
    case C_U8_BXOR:
        *(uint8_t *) acc ^= *(const uint8_t *) next;
        break;
    case C_BOOL_LOR: {
        bool a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a = a || b;
        memcpy(acc, &a, sizeof(a));
        break;
    }
    case C_LL_MIN: {
        long long a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a = b < a ? b : a;
        memcpy(acc, &a, sizeof(a));
        break;
    }
    default: {
        unsigned a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a &= b;
        memcpy(acc, &a, sizeof(a));
        break;
    }
    }
}

static void run_allreduce(ctx_t *c)
{
    size_t counts[6] = {0, 1, (size_t) c->size - 1, 13, 1031, 65537};

    for (int k = 0; k < C_NUM; ++k) {
        size_t es = elem_size(k);
        MPI_Datatype dt;
        MPI_Op op;
        long calls = 0;
        char what[96];

        mpi_args(k, &dt, &op);
        for (int ci = 0; ci < 6; ++ci) {
            size_t n = counts[ci];
            unsigned char *send = mt_xmalloc(n * es + 1), *recv = mt_xmalloc(n * es + 1);
            unsigned char *want = mt_xmalloc(n * es + 1), *copy = mt_xmalloc(n * es + 1);
            unsigned char tmp[16];

            memset(send, 0, n * es + 1);
            memset(want, 0, n * es + 1);
            for (size_t i = 0; i < n; ++i) {
                gen(k, c->rank, c->size, i, c->salt, send + i * es);
                gen(k, 0, c->size, i, c->salt, want + i * es);
                for (int r = 1; r < c->size; ++r) {
                    gen(k, r, c->size, i, c->salt, tmp);
                    fold(k, want + i * es, tmp);
                }
            }
            memcpy(copy, send, n * es + 1);
            for (int inplace = 0; inplace < 2; ++inplace) {
                memset(recv, 0x5a, n * es + 1);
                if (inplace) {
                    memcpy(recv, send, n * es);
                }
                MT_CHECK_MPI(
                    MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int) n, dt, op, c->comm));
                calls += n > 0; /* Open MPI returns before the coll modules when count is 0 */
                MT_CHECK(0 == memcmp(recv, want, n * es),
                         "comm %s size %d: MPI_Allreduce(%s, count %zu%s): wrong result", c->label,
                         c->size, case_names[k], n, inplace ? ", in place" : "");
                MT_CHECK(0x5a == recv[n * es],
                         "comm %s: MPI_Allreduce(%s, count %zu%s) wrote past recvbuf[count - 1]",
                         c->label, case_names[k], n, inplace ? ", in place" : "");
                MT_CHECK(0 == memcmp(send, copy, n * es + 1),
                         "comm %s: MPI_Allreduce(%s, count %zu) modified sendbuf", c->label,
                         case_names[k], n);
            }
            free(copy);
            free(want);
            free(recv);
            free(send);
        }
        snprintf(what, sizeof(what), "MPI_Allreduce(%s) with the fallback forced", case_names[k]);
        MT_EXPECT_PATH(&c->pv, calls, MT_PATH_FALLBACK, what);
    }
}

/* MPI_INT, and a strided send type (vector of 3 ints, stride 2) with a contiguous recv. */
static void run_alltoall(ctx_t *c)
{
    const int nper[4] = {0, 1, 1000, 70000}; /* ints per peer */
    MPI_Datatype vec, contig;
    MPI_Aint lb, vext;

    MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Type_contiguous(3, MPI_INT, &contig);
    MPI_Type_commit(&contig);
    MPI_Type_get_extent(vec, &lb, &vext);

    for (int strided = 0; strided < 2; ++strided) {
        const char *name =
            strided ? "send vector(3 x MPI_INT, stride 2), recv contiguous(3)" : "MPI_INT";
        long calls = 0;
        char what[128];

        for (int ni = 0; ni < 4; ++ni) {
            size_t n = (size_t) (strided ? (nper[ni] / 3) * 3 : nper[ni]);
            size_t units = strided ? n / 3 : n;
            size_t sblock = strided ? units * (size_t) vext : n * sizeof(int);
            size_t sbytes = sblock * (size_t) c->size, rbytes = n * sizeof(int) * (size_t) c->size;
            unsigned char *send = mt_xmalloc(sbytes + 1);
            int *recv = mt_xmalloc(rbytes + sizeof(int));
            long bad = -1;

            for (int inplace = 0; inplace < 2; ++inplace) {
                memset(send, 0xee, sbytes + 1);
                memset(recv, 0x5a, rbytes + sizeof(int));
                for (int p = 0; p < c->size; ++p) {
                    for (size_t j = 0; j < n; ++j) {
                        int v =
                            (int) (uint32_t) mt_hash((uint64_t) c->rank, (uint64_t) p, j, c->salt);
                        size_t off = strided ? (j / 3) * (size_t) vext + (j % 3) * 2 * sizeof(int)
                                             : j * sizeof(int);
                        if (inplace) {
                            recv[(size_t) p * n + j] = v;
                        } else {
                            memcpy(send + (size_t) p * sblock + off, &v, sizeof(v));
                        }
                    }
                }
                if (inplace) {
                    MT_CHECK_MPI(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int) units,
                                              strided ? contig : MPI_INT, c->comm));
                } else {
                    MT_CHECK_MPI(MPI_Alltoall(send, (int) units, strided ? vec : MPI_INT, recv,
                                              (int) units, strided ? contig : MPI_INT, c->comm));
                }
                calls += units > 0; /* 0 bytes per peer: Open MPI skips the coll modules */
                bad = -1;
                for (int p = 0; p < c->size && bad < 0; ++p) {
                    for (size_t j = 0; j < n; ++j) {
                        int v =
                            (int) (uint32_t) mt_hash((uint64_t) p, (uint64_t) c->rank, j, c->salt);
                        if (recv[(size_t) p * n + j] != v) {
                            bad = (long) ((size_t) p * n + j);
                            break;
                        }
                    }
                }
                MT_CHECK(bad < 0,
                         "comm %s size %d: MPI_Alltoall(%s, %zu ints per peer%s): int %ld wrong",
                         c->label, c->size, name, n, inplace ? ", in place" : "", bad);
                MT_CHECK(0x5a5a5a5a == recv[rbytes / sizeof(int)],
                         "comm %s: MPI_Alltoall(%s, %zu ints per peer%s) wrote past recvbuf",
                         c->label, name, n, inplace ? ", in place" : "");
            }
            free(recv);
            free(send);
        }
        snprintf(what, sizeof(what), "MPI_Alltoall(%s) with the fallback forced", name);
        MT_EXPECT_PATH(&c->pv, calls, MT_PATH_FALLBACK, what);
    }
    MPI_Type_free(&contig);
    MPI_Type_free(&vec);
}

static void run_suite(MPI_Comm comm, const char *label, uint64_t salt)
{
    ctx_t c = {.comm = comm, .label = label, .salt = salt};

    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    mt_pvars_open(&c.pv, comm, label);
    run_allreduce(&c);
    run_alltoall(&c);
    mt_pvars_close(&c.pv);
    mt_note("comm %s (size %d) done", label, c.size);
}

int main(int argc, char **argv)
{
    int rank;

    mt_init(&argc, &argv, "test_forced_fallback");
    rank = mt_world_rank();
    if (0 == rank) {
        printf("test_forced_fallback: expects every allreduce and alltoall on the previous "
               "module (coll_gpu_{allreduce,alltoall}_algorithm fallback, or the host backend's "
               "coll_gpu_host_rule at 3+ ranks)\n");
    }

    mt_run_world_dup_split(run_suite, 30);

    return mt_finalize();
}
