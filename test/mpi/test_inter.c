/*
 * Intercommunicator collectives through coll/gpu: every collective with a buffer
 * (allgather(v), allreduce, alltoall(v,w), bcast both ways, gather(v), scatter(v), reduce,
 * reduce_scatter(_block)), blocking, non-blocking (all in flight, host work, one
 * MPI_Waitall) and persistent (MPIX_*_init, started three times with the buffers refilled
 * between starts), on an intercommunicator between two groups of unequal sizes (world
 * ranks below (size + 2) / 3, and the rest) and on a dup of it.
 * Every receive buffer is checked whole against values computed here from the
 * intercommunicator rules: blocks come from the remote group's ranks in order (one bcast of
 * a derived type whose ints lie apart, a gap first); a rooted
 * call's root (MPI_ROOT) only sends or only receives, the rest of its group
 * (MPI_PROC_NULL) touches nothing; the remote group's reduction of reduce_scatter(_block)
 * is scattered over the local group by the local counts. Gaps and untouched buffers must
 * keep their fill. pvars: every call and start counts once as a fallback (staged) call.
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_inter), the buffers are device memory.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define HAVE_PCOLL 1
#else
#define HAVE_PCOLL 0
#endif

enum { N = 300, GAP = 7, FILL = -3, STARTS = 3, KRS = 20 };
enum {
    C_AG,
    C_AGV,
    C_AR,
    C_A2A,
    C_A2AV,
    C_A2AW,
    C_BC0,
    C_BC1,
    C_GA,
    C_GAV,
    C_SC,
    C_SCV,
    C_RED,
    C_RSB,
    C_RS,
    C_BCX, /* a bcast of one element of a derived type: odd ints, a gap first */
    NCOLL
};
static const char *const cname[NCOLL] = {"allgather",      "allgatherv",
                                         "allreduce",      "alltoall",
                                         "alltoallv",      "alltoallw",
                                         "bcast(0)",       "bcast(1)",
                                         "gather",         "gatherv",
                                         "scatter",        "scatterv",
                                         "reduce",         "reduce_scatter_block",
                                         "reduce_scatter", "bcast(gaps)"};

/* this rank in the intercommunicator: group g (0 or 1), local rank lr of L, R remote */
static int g, lr, L, R, gsize[2];
/* C_BCX's datatype: ints 1, 3, 5, ... (N / 2 - 1 of them) */
static MPI_Datatype odd_ints;

static int val(uint64_t salt, int grp, int src, long i)
{
    return (int) (mt_hash(salt, (uint64_t) grp, (uint64_t) src, (uint64_t) i) % 2000003) - 1000000;
}

/* a rooted call's root: local rank rr of group rg, as this rank names it */
static int root_arg(int rg, int rr)
{
    return g == rg ? (lr == rr ? MPI_ROOT : MPI_PROC_NULL) : rr;
}

static int vc(int a, int b) /* a v-block's count, from the ranks it joins */
{
    return N - (a + b) % 3;
}

/* reduce_scatter_block: group x's count per rank (both groups reduce T ints) */
static int rsb_count(int x)
{
    return gsize[0] * gsize[1] * KRS / gsize[x];
}

/* reduce_scatter: group x's counts (T + 1 ints, unequal) and local rank p's offset */
static int rs_count(int x, int p)
{
    const int t = gsize[0] * gsize[1] * KRS + 1, n = gsize[x];
    return t / n + (p < t % n ? 1 : 0);
}

static int rs_displ(int x, int p)
{
    int d = 0;
    for (int q = 0; q < p; ++q) {
        d += rs_count(x, q);
    }
    return d;
}

typedef struct {
    int *s, *r[NCOLL];
    long room;
    int agv_c[64], agv_d[64], sc[64], sd[64], rc[64], rd[64], rs_c[64], scv_d[64];
    int wsd[64], wrd[64];
    MPI_Datatype wt[64];
} bufs_t;

static void fill(bufs_t *b, uint64_t salt)
{
    for (long i = 0; i < b->room; ++i) {
        b->s[i] = val(salt, g, lr, i);
        for (int k = 0; k < NCOLL; ++k) {
            b->r[k][i] = FILL;
        }
    }
    /* the roots of the broadcasts hold their message in the buffer they pass */
    if (0 == g && 0 == lr) {
        for (long i = 0; i < N; ++i) {
            b->r[C_BC0][i] = val(salt, 0, 0, i);
        }
    }
    if (1 == g && L - 1 == lr) {
        for (long i = 0; i < N / 2; ++i) {
            b->r[C_BC1][i] = val(salt, 1, lr, i);
        }
    }
    if (1 == g && 0 == lr) { /* C_BCX's root: its whole buffer, gaps too */
        for (long i = 0; i < N; ++i) {
            b->r[C_BCX][i] = val(salt, 1, 0, i);
        }
    }
    mt_push(b->s);
    for (int k = 0; k < NCOLL; ++k) {
        mt_push(b->r[k]);
    }
}

/* the sum over the remote group's ranks of their element i */
static int remote_sum(uint64_t salt, long i)
{
    unsigned s = 0;
    for (int j = 0; j < R; ++j) {
        s += (unsigned) val(salt, 1 - g, j, i);
    }
    return (int) s;
}

/* what buffer k must hold after the call */
static void expect(int k, uint64_t salt, const bufs_t *b, int *w)
{
    for (long i = 0; i < b->room; ++i) {
        w[i] = FILL;
    }
    const int o = 1 - g;
    switch (k) {
    case C_AG:
        for (int j = 0; j < R; ++j) {
            for (long i = 0; i < N; ++i) {
                w[(long) j * N + i] = val(salt, o, j, i);
            }
        }
        break;
    case C_AGV:
        for (int j = 0; j < R; ++j) {
            for (long i = 0; i < N - j % 3; ++i) {
                w[b->agv_d[j] + i] = val(salt, o, j, i);
            }
        }
        break;
    case C_AR:
        for (long i = 0; i < N; ++i) {
            w[i] = remote_sum(salt, i);
        }
        break;
    case C_A2A:
        for (int j = 0; j < R; ++j) {
            for (long i = 0; i < N; ++i) {
                w[(long) j * N + i] = val(salt, o, j, (long) lr * N + i);
            }
        }
        break;
    case C_A2AV:
    case C_A2AW:
        for (int j = 0; j < R; ++j) {
            for (long i = 0; i < vc(j, lr); ++i) {
                w[b->rd[j] + i] = val(salt, o, j, (long) lr * N + i);
            }
        }
        break;
    case C_BC0: /* from group 0's rank 0: its own buffer keeps its message */
        for (long i = 0; i < N && (1 == g || 0 == lr); ++i) {
            w[i] = val(salt, 0, 0, i);
        }
        break;
    case C_BCX: /* from group 1's rank 0: the odd ints reach group 0, the gaps keep FILL */
        for (long i = 0; i < N; ++i) {
            const bool odd = 1 == i % 2 && i < N - 2;
            w[i] = 1 == g && 0 == lr ? val(salt, 1, 0, i)
                   : 0 == g && odd   ? val(salt, 1, 0, i)
                                     : FILL;
        }
        break;
    case C_BC1: /* from group 1's last rank */
        for (long i = 0; i < N / 2 && (0 == g || L - 1 == lr); ++i) {
            w[i] = val(salt, 1, gsize[1] - 1, i);
        }
        break;
    case C_GA: /* group 0's rank 0 gathers N from each rank of group 1 */
        for (int j = 0; j < R && 0 == g && 0 == lr; ++j) {
            for (long i = 0; i < N; ++i) {
                w[(long) j * N + i] = val(salt, 1, j, i);
            }
        }
        break;
    case C_GAV: /* group 1's rank 0 gathers N - j % 3 from rank j of group 0, reversed */
        for (int j = 0; j < R && 1 == g && 0 == lr; ++j) {
            for (long i = 0; i < N - j % 3; ++i) {
                w[b->agv_d[j] + i] = val(salt, 0, j, i);
            }
        }
        break;
    case C_SC: /* group 1's rank 0 scatters N to each rank of group 0 */
        for (long i = 0; i < N && 0 == g; ++i) {
            w[i] = val(salt, 1, 0, (long) lr * N + i);
        }
        break;
    case C_SCV: /* group 0's rank 0 scatters N - j % 3 from j x (N + GAP) to group 1 */
        for (long i = 0; i < N - lr % 3 && 1 == g; ++i) {
            w[i] = val(salt, 0, 0, (long) lr * (N + GAP) + i);
        }
        break;
    case C_RED: /* group 1's rank 0 gets the sum of group 0's */
        for (long i = 0; i < N && 1 == g && 0 == lr; ++i) {
            w[i] = remote_sum(salt, i);
        }
        break;
    case C_RSB:
        for (long i = 0; i < rsb_count(g); ++i) {
            w[i] = remote_sum(salt, (long) lr * rsb_count(g) + i);
        }
        break;
    case C_RS:
        for (long i = 0; i < rs_count(g, lr); ++i) {
            w[i] = remote_sum(salt, rs_displ(g, lr) + i);
        }
        break;
    }
}

static void check(bufs_t *b, uint64_t salt, const char *label, const char *form)
{
    int *w = mt_xmalloc(sizeof(int) * (size_t) b->room);
    for (int k = 0; k < NCOLL; ++k) {
        mt_pull(b->r[k]);
        expect(k, salt, b, w);
        long bad = 0, first = -1;
        for (long i = 0; i < b->room; ++i) {
            if (b->r[k][i] != w[i]) {
                first = first < 0 ? i : first;
                ++bad;
            }
        }
        MT_CHECK(0 == bad, "%s %s %s (group %d rank %d): %ld of %ld ints wrong, first at %ld",
                 label, form, cname[k], g, lr, bad, b->room, first);
    }
    free(w);
}

enum { F_BLOCKING, F_NONBLOCKING, F_INIT };

/* collective k in form f; q: its request (non-blocking and persistent forms) */
static int call(bufs_t *b, int k, int f, MPI_Comm c, MPI_Request *q)
{
    int *s = MT_D(b->s), *r = MT_D(b->r[k]);
    const MPI_Datatype T = MPI_INT;
#if HAVE_PCOLL
    const MPI_Info I = MPI_INFO_NULL;
#define PICK(name, low, ...)                                                                       \
    (F_BLOCKING == f      ? MPI_##name(__VA_ARGS__)                                                \
     : F_NONBLOCKING == f ? MPI_I##low(__VA_ARGS__, q)                                             \
                          : MPIX_##name##_init(__VA_ARGS__, I, q))
#else
#define PICK(name, low, ...)                                                                       \
    (F_BLOCKING == f ? MPI_##name(__VA_ARGS__) : MPI_I##low(__VA_ARGS__, q))
#endif
    const int rsb = rsb_count(g), bc1 = root_arg(1, gsize[1] - 1);
    switch (k) {
    case C_AG:
        return PICK(Allgather, allgather, s, N, T, r, N, T, c);
    case C_AGV:
        return PICK(Allgatherv, allgatherv, s, N - lr % 3, T, r, b->agv_c, b->agv_d, T, c);
    case C_AR:
        return PICK(Allreduce, allreduce, s, r, N, T, MPI_SUM, c);
    case C_A2A:
        return PICK(Alltoall, alltoall, s, N, T, r, N, T, c);
    case C_A2AV:
        return PICK(Alltoallv, alltoallv, s, b->sc, b->sd, T, r, b->rc, b->rd, T, c);
    case C_A2AW:
        return PICK(Alltoallw, alltoallw, s, b->sc, b->wsd, b->wt, r, b->rc, b->wrd, b->wt, c);
    case C_BC0:
        return PICK(Bcast, bcast, r, N, T, root_arg(0, 0), c);
    case C_BC1:
        return PICK(Bcast, bcast, r, N / 2, T, bc1, c);
    case C_BCX:
        return PICK(Bcast, bcast, r, 1, odd_ints, root_arg(1, 0), c);
    case C_GA:
        return PICK(Gather, gather, s, N, T, r, N, T, root_arg(0, 0), c);
    case C_GAV:
        return PICK(Gatherv, gatherv, s, N - lr % 3, T, r, b->agv_c, b->agv_d, T, root_arg(1, 0),
                    c);
    case C_SC:
        return PICK(Scatter, scatter, s, N, T, r, N, T, root_arg(1, 0), c);
    case C_SCV:
        return PICK(Scatterv, scatterv, s, b->agv_c, b->scv_d, T, r, N - lr % 3, T, root_arg(0, 0),
                    c);
    case C_RED:
        return PICK(Reduce, reduce, s, r, N, T, MPI_SUM, root_arg(1, 0), c);
    case C_RSB:
        return PICK(Reduce_scatter_block, reduce_scatter_block, s, r, rsb, T, MPI_SUM, c);
    case C_RS:
        return PICK(Reduce_scatter, reduce_scatter, s, r, b->rs_c, T, MPI_SUM, c);
    }
#undef PICK
    return MPI_ERR_OTHER;
}

static void run(MPI_Comm c, const char *label)
{
    bufs_t b;
    memset(&b, 0, sizeof(b));
    for (int j = 0; j < R; ++j) { /* blocks from remote rank j: reversed, a gap each */
        b.agv_c[j] = N - j % 3;
        b.agv_d[j] = (R - 1 - j) * (N + GAP);
        b.rc[j] = vc(j, lr);
        b.rd[j] = b.agv_d[j];
        b.wrd[j] = b.rd[j] * (int) sizeof(int);
        b.sc[j] = vc(lr, j);
        b.sd[j] = j * N;
        b.wsd[j] = b.sd[j] * (int) sizeof(int);
        b.wt[j] = MPI_INT;
    }
    for (int j = 0; j < R; ++j) { /* the scatterv root's: N - j % 3 from j x (N + GAP) */
        b.scv_d[j] = j * (N + GAP);
    }
    for (int p = 0; p < L; ++p) {
        b.rs_c[p] = rs_count(g, p);
    }
    const long big = gsize[0] > gsize[1] ? gsize[0] : gsize[1];
    b.room = big * (N + GAP) + (long) gsize[0] * gsize[1] * KRS + 1;
    b.s = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    for (int k = 0; k < NCOLL; ++k) {
        b.r[k] = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    }
    mt_pvars_t pv;
    mt_pvars_open(&pv, c, label);
    mt_pvars_mark(&pv);

    fill(&b, 11);
    for (int k = 0; k < NCOLL; ++k) {
        int rc = call(&b, k, F_BLOCKING, c, NULL);
        MT_CHECK(MPI_SUCCESS == rc, "%s blocking %s returned %d (%s)", label, cname[k], rc,
                 mt_mpi_errstr(rc));
    }
    check(&b, 11, label, "blocking");

    MPI_Request q[NCOLL];
    fill(&b, 12);
    for (int k = 0; k < NCOLL; ++k) {
        int rc = call(&b, k, F_NONBLOCKING, c, &q[k]);
        MT_CHECK(MPI_SUCCESS == rc, "%s non-blocking %s returned %d (%s)", label, cname[k], rc,
                 mt_mpi_errstr(rc));
    }
    volatile double acc = 0;
    for (int i = 0; i < 50000; ++i) {
        acc += i * 1e-9;
    }
    MT_CHECK_MPI(MPI_Waitall(NCOLL, q, MPI_STATUSES_IGNORE));
    check(&b, 12, label, "non-blocking");
#if HAVE_PCOLL
    for (int k = 0; k < NCOLL; ++k) {
        int rc = call(&b, k, F_INIT, c, &q[k]);
        MT_CHECK(MPI_SUCCESS == rc, "%s persistent %s returned %d (%s)", label, cname[k], rc,
                 mt_mpi_errstr(rc));
    }
    for (int t = 0; t < STARTS; ++t) {
        fill(&b, 20 + (uint64_t) t);
        MT_CHECK_MPI(MPI_Startall(NCOLL, q));
        MT_CHECK_MPI(MPI_Waitall(NCOLL, q, MPI_STATUSES_IGNORE));
        check(&b, 20 + (uint64_t) t, label, "persistent");
    }
    for (int k = 0; k < NCOLL; ++k) {
        MT_CHECK_MPI(MPI_Request_free(&q[k]));
    }
    const long want = NCOLL * (2 + STARTS);
#else
    const long want = NCOLL * 2;
#endif
    unsigned long long e = 0, f = 0;
    if (0 == mt_pvars_delta(&pv, &e, &f)) {
        MT_CHECK(0 == e && (long) f == want,
                 "%s: %llu engine and %llu fallback calls, expected 0 and %ld", label, e, f, want);
    } else { /* missing pvars are reported by mt_init (or skipped on purpose) */
        MT_CHECK(!mt_pvars_available(), "%s: pvars unreadable on the intercommunicator", label);
    }
    mt_pvars_close(&pv);
    mt_twin_free(b.s);
    for (int k = 0; k < NCOLL; ++k) {
        mt_twin_free(b.r[k]);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_inter" : "test_inter");
    mt_twin_init();
    const int rank = mt_world_rank(), size = mt_world_size();
    if (size < 2) { /* a skip, not a pass: the driver counts exit code 77 as one */
        printf("skipped: an intercommunicator joins two groups, so 2 or more ranks\n");
        (void) mt_finalize();
        return 77;
    }
    gsize[0] = (size + 2) / 3;
    gsize[1] = size - gsize[0];
    g = rank < gsize[0] ? 0 : 1;
    MPI_Comm local, inter, dup;
    int odd[N / 2 - 1];
    for (int j = 0; j < N / 2 - 1; ++j) {
        odd[j] = 2 * j + 1;
    }
    MT_CHECK_MPI(MPI_Type_create_indexed_block(N / 2 - 1, 1, odd, MPI_INT, &odd_ints));
    MT_CHECK_MPI(MPI_Type_commit(&odd_ints));
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, g, rank, &local));
    MT_CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 0 == g ? gsize[0] : 0, 77, &inter));
    MPI_Comm_rank(inter, &lr);
    MPI_Comm_size(inter, &L);
    MPI_Comm_remote_size(inter, &R);
    MT_CHECK(L == gsize[g] && R == gsize[1 - g], "group sizes %d and %d, expected %d and %d", L, R,
             gsize[g], gsize[1 - g]);
    run(inter, "inter");
    MT_CHECK_MPI(MPI_Comm_dup(inter, &dup));
    run(dup, "inter-dup");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    MPI_Type_free(&odd_ints);
    return mt_finalize();
}
