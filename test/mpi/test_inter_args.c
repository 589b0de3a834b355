/*
 * The rooted collectives of intercommunicators called with the arguments mpi4py passes:
 * scatter(v), gather(v), bcast and reduce, blocking and non-blocking, each the first call
 * on a fresh communicator (a dup of the intercommunicator). mpi4py hands a side a rank does
 * not use to MPI as (NULL, 0, MPI_BYTE): the root (MPI_ROOT) passes it for the side it does
 * not receive or send, the rest of the root's group (MPI_PROC_NULL) for both sides, the
 * remote group for the side it does not use. Each collective runs once from each group,
 * the root its group's last rank. argv[1]: the size of group 0 (default: a third of the
 * ranks, rounded up), so that runs cover groups of unequal size both ways round. Blocks
 * are large enough (12 KB) to go by rendezvous. Received buffers are checked whole against
 * values computed here (gaps keep their fill).
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_inter_args), the buffers are device memory.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

enum { N = 3000, GAP = 5, FILL = -7 };
enum { C_SC, C_SCV, C_GA, C_GAV, C_BC, C_RED, NCOLL };
static const char *const cname[NCOLL] = {"scatter", "scatterv", "gather",
                                         "gatherv", "bcast",    "reduce"};

/* this rank: group g, local rank lr of L, R ranks in the remote group */
static int g, lr, L, R, gsize[2];

static int val(int grp, int rank, long i)
{
    return (grp + 1) * 1000000 + rank * 10000 + (int) (i % 9973);
}

static int vcount(int j) /* a v-call's block count for remote rank j */
{
    return N - j % 3;
}

static int vdispl(int j, int n) /* and its displacement: reversed, a gap each */
{
    return (n - 1 - j) * (N + GAP);
}

typedef struct {
    int *buf; /* what this rank passes for the side it uses (or the root's whole buffer) */
    long room;
    int counts[64], displs[64];
} side_t;

/* Calls collective k from group rg (its last rank the root) in form nb; fills b->buf first
 * with what this rank sends, FILL elsewhere. */
static int call(int k, int rg, bool nb, MPI_Comm c, side_t *b)
{
    const bool in_root_group = g == rg, is_root = in_root_group && L - 1 == lr;
    const int root = in_root_group ? (is_root ? MPI_ROOT : MPI_PROC_NULL) : gsize[rg] - 1;
    int *p = MT_D(b->buf);
    void *none = NULL;
    const MPI_Datatype T = MPI_INT, B = MPI_BYTE;
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Request *qp = nb ? &q : NULL;
    for (long i = 0; i < b->room; ++i) {
        b->buf[i] = FILL;
    }
    const int n = in_root_group ? R : L; /* the receiving (or sending) group's size */
    for (int j = 0; j < n; ++j) {
        b->counts[j] = vcount(j);
        b->displs[j] = vdispl(j, n);
    }
    /* what this rank sends */
    if (is_root && (C_SC == k || C_BC == k)) {
        for (long i = 0; i < (C_SC == k ? (long) R * N : N); ++i) {
            b->buf[i] = val(g, lr, i);
        }
    } else if (is_root && C_SCV == k) {
        for (int j = 0; j < R; ++j) {
            for (long i = 0; i < vcount(j); ++i) {
                b->buf[b->displs[j] + i] = val(g, lr, (long) j * N + i);
            }
        }
    } else if (!in_root_group && (C_GA == k || C_GAV == k || C_RED == k)) {
        for (long i = 0; i < (C_GAV == k ? vcount(lr) : N); ++i) {
            b->buf[i] = val(g, lr, i);
        }
    }
    mt_push(b->buf);
    int rc = MPI_ERR_OTHER;
#define CALL(name, low, ...) (nb ? MPI_I##low(__VA_ARGS__, qp) : MPI_##name(__VA_ARGS__))
    if (in_root_group && !is_root) { /* MPI_PROC_NULL: nothing anywhere */
        switch (k) {
        case C_SC:
            rc = CALL(Scatter, scatter, none, 0, B, none, 0, B, root, c);
            break;
        case C_SCV:
            rc = CALL(Scatterv, scatterv, none, NULL, NULL, B, none, 0, B, root, c);
            break;
        case C_GA:
            rc = CALL(Gather, gather, none, 0, B, none, 0, B, root, c);
            break;
        case C_GAV:
            rc = CALL(Gatherv, gatherv, none, 0, B, none, NULL, NULL, B, root, c);
            break;
        case C_BC:
            rc = CALL(Bcast, bcast, none, 0, B, root, c);
            break;
        case C_RED:
            rc = CALL(Reduce, reduce, none, none, 0, B, MPI_SUM, root, c);
            break;
        }
    } else if (is_root) { /* MPI_ROOT: the side it does not use is (NULL, 0, MPI_BYTE) */
        switch (k) {
        case C_SC:
            rc = CALL(Scatter, scatter, p, N, T, none, 0, B, root, c);
            break;
        case C_SCV:
            rc = CALL(Scatterv, scatterv, p, b->counts, b->displs, T, none, 0, B, root, c);
            break;
        case C_GA:
            rc = CALL(Gather, gather, none, 0, B, p, N, T, root, c);
            break;
        case C_GAV:
            rc = CALL(Gatherv, gatherv, none, 0, B, p, b->counts, b->displs, T, root, c);
            break;
        case C_BC:
            rc = CALL(Bcast, bcast, p, N, T, root, c);
            break;
        case C_RED: /* mpi4py: no send buffer at the root, the count from the receive one */
            rc = CALL(Reduce, reduce, none, p, N, T, MPI_SUM, root, c);
            break;
        }
    } else { /* the remote group: the root's rank; the unused side (NULL, 0, MPI_BYTE) */
        switch (k) {
        case C_SC:
            rc = CALL(Scatter, scatter, none, 0, B, p, N, T, root, c);
            break;
        case C_SCV:
            rc = CALL(Scatterv, scatterv, none, NULL, NULL, B, p, vcount(lr), T, root, c);
            break;
        case C_GA:
            rc = CALL(Gather, gather, p, N, T, none, 0, B, root, c);
            break;
        case C_GAV:
            rc = CALL(Gatherv, gatherv, p, vcount(lr), T, none, NULL, NULL, B, root, c);
            break;
        case C_BC:
            rc = CALL(Bcast, bcast, p, N, T, root, c);
            break;
        case C_RED: /* mpi4py: no receive buffer off the root */
            rc = CALL(Reduce, reduce, p, none, N, T, MPI_SUM, root, c);
            break;
        }
    }
#undef CALL
    if (MPI_SUCCESS == rc && nb) {
        rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
    mt_pull(b->buf);
    return rc;
}

/* what b->buf must hold after collective k from group rg */
static void expect(int k, int rg, const side_t *b, int *w)
{
    const bool in_root_group = g == rg, is_root = in_root_group && L - 1 == lr;
    const int rr = gsize[rg] - 1;
    for (long i = 0; i < b->room; ++i) {
        w[i] = FILL;
    }
    switch (k) {
    case C_SC: /* the root keeps its message; remote rank lr gets block lr */
        for (long i = 0; is_root && i < (long) R * N; ++i) {
            w[i] = val(g, lr, i);
        }
        for (long i = 0; !in_root_group && i < N; ++i) {
            w[i] = val(rg, rr, (long) lr * N + i);
        }
        break;
    case C_SCV:
        for (int j = 0; is_root && j < R; ++j) {
            for (long i = 0; i < vcount(j); ++i) {
                w[vdispl(j, R) + i] = val(g, lr, (long) j * N + i);
            }
        }
        for (long i = 0; !in_root_group && i < vcount(lr); ++i) {
            w[i] = val(rg, rr, (long) lr * N + i);
        }
        break;
    case C_GA:
        for (int j = 0; is_root && j < R; ++j) {
            for (long i = 0; i < N; ++i) {
                w[(long) j * N + i] = val(1 - g, j, i);
            }
        }
        for (long i = 0; !in_root_group && i < N; ++i) {
            w[i] = val(g, lr, i);
        }
        break;
    case C_GAV:
        for (int j = 0; is_root && j < R; ++j) {
            for (long i = 0; i < vcount(j); ++i) {
                w[vdispl(j, R) + i] = val(1 - g, j, i);
            }
        }
        for (long i = 0; !in_root_group && i < vcount(lr); ++i) {
            w[i] = val(g, lr, i);
        }
        break;
    case C_BC:
        for (long i = 0; (is_root || !in_root_group) && i < N; ++i) {
            w[i] = val(rg, rr, i);
        }
        break;
    case C_RED:
        for (long i = 0; is_root && i < N; ++i) {
            int s = 0;
            for (int j = 0; j < R; ++j) {
                s += val(1 - g, j, i);
            }
            w[i] = s;
        }
        for (long i = 0; !in_root_group && i < N; ++i) {
            w[i] = val(g, lr, i);
        }
        break;
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_inter_args" : "test_inter_args");
    mt_twin_init();
    const int rank = mt_world_rank(), size = mt_world_size();
    if (size < 2) { /* a skip, not a pass: the driver counts exit code 77 as one */
        printf("skipped: an intercommunicator joins two groups, so 2 or more ranks\n");
        (void) mt_finalize();
        return 77;
    }
    gsize[0] = argc > 1 ? atoi(argv[1]) : (size + 2) / 3;
    if (gsize[0] < 1 || gsize[0] >= size || size - gsize[0] > 64 || gsize[0] > 64) {
        MT_CHECK(0, "group 0 of %d ranks out of 1..%d (or a group above 64)", gsize[0], size - 1);
        return mt_finalize();
    }
    gsize[1] = size - gsize[0];
    g = rank < gsize[0] ? 0 : 1;
    MPI_Comm local, inter;
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, g, rank, &local));
    MT_CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 0 == g ? gsize[0] : 0, 78, &inter));
    MPI_Comm_rank(inter, &lr);
    MPI_Comm_size(inter, &L);
    MPI_Comm_remote_size(inter, &R);
    MT_CHECK(L == gsize[g] && R == gsize[1 - g], "group sizes %d and %d, expected %d and %d", L, R,
             gsize[g], gsize[1 - g]);
    side_t b;
    memset(&b, 0, sizeof(b));
    b.room = 64L * (N + GAP);
    b.buf = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    int *w = mt_xmalloc(sizeof(int) * (size_t) b.room);
    for (int nb = 0; nb < 2; ++nb) {
        for (int k = 0; k < NCOLL; ++k) {
            for (int rg = 0; rg < 2; ++rg) {
                MPI_Comm c; /* fresh: nothing cached by an earlier call on it */
                MT_CHECK_MPI(MPI_Comm_dup(inter, &c));
                const int rc = call(k, rg, nb, c, &b);
                MT_CHECK(MPI_SUCCESS == rc, "%s%s from group %d returned %d (%s)", nb ? "i" : "",
                         cname[k], rg, rc, mt_mpi_errstr(rc));
                expect(k, rg, &b, w);
                long bad = 0, first = -1;
                for (long i = 0; i < b.room; ++i) {
                    if (b.buf[i] != w[i]) {
                        first = first < 0 ? i : first;
                        ++bad;
                    }
                }
                MT_CHECK(0 == bad,
                         "%s%s from group %d (group %d rank %d): %ld ints wrong, first at %ld "
                         "(%d, expected %d)",
                         nb ? "i" : "", cname[k], rg, g, lr, bad, first,
                         first >= 0 ? b.buf[first] : 0, first >= 0 ? w[first] : 0);
                MPI_Comm_free(&c);
            }
        }
    }
    free(w);
    mt_twin_free(b.buf);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    return mt_finalize();
}
