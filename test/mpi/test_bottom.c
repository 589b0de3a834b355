/*
 * MPI_BOTTOM layouts: MPI_Neighbor_alltoallw with absolute byte displacements
 * (MPI_Get_address) and MPI_Alltoallw with absolute-address struct datatypes, blocking,
 * non-blocking and persistent, on a 1-rank periodic cart communicator and on a periodic
 * 1-D ring of the job's ranks. The buffer argument is NULL there: coll/gpu must read the
 * memory's kind at the addressed bytes. Run with --mca coll_gpu_stage_host_buffers 1 (host
 * memory then counts as device memory) and coll_gpu_alltoall_algorithm fallback.
 *
 * Every received block is checked against the previous module's answer to the same
 * exchange on plain contiguous buffers (MPI_Neighbor_alltoall, MPI_Alltoall); the element
 * between two received blocks (a gap of the layout) must keep its fill. Staging is proved:
 *   - a staged non-blocking or persistent call copies its whole receive span back at
 *     completion, so a gap element overwritten while the call is in flight gets its fill
 *     back; a call handed to the previous module unstaged leaves the overwrite;
 *   - on one rank coll/gpu copies an MPI_BOTTOM MPI_Alltoallw itself (engine_calls grows),
 *     instead of passing it to coll/self (fallback_calls).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define HAVE_PCOLL 1
#else
#define HAVE_PCOLL 0
#endif

enum { B = 7, GAP = -5, PROBE = -99 };
enum { F_BLOCKING, F_NONBLOCKING, F_PERSISTENT, NFORMS };
static const char *const fname[NFORMS] = {"blocking", "non-blocking", "persistent"};

static int wrank;

static int val(int src, int blk, int i)
{
    return src * 100000 + blk * 100 + i + 1;
}

/* nblk blocks of B ints, one gap element after each */
static int *layout(int nblk, int fill)
{
    int *p = mt_xmalloc(sizeof(int) * (size_t) nblk * (B + 1));
    for (int i = 0; i < nblk * (B + 1); ++i) {
        p[i] = fill;
    }
    return p;
}

/* Waits for @p req; a staged call copies the receive span back at completion: the gaps
 * between rb's blocks overwritten now must come back with their fill. */
static void probe_and_wait(MPI_Request *req, int *rb, int nblk)
{
    for (int j = 0; j + 1 < nblk; ++j) {
        rb[j * (B + 1) + B] = PROBE;
    }
    MT_CHECK_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
}

static void check(const char *what, const char *form, const int *rb, const int *ref, int nblk)
{
    for (int j = 0; j < nblk; ++j) {
        for (int i = 0; i < B; ++i) {
            MT_CHECK(rb[j * (B + 1) + i] == ref[j * B + i], "%s %s: block %d [%d] = %d, want %d",
                     what, form, j, i, rb[j * (B + 1) + i], ref[j * B + i]);
        }
        if (j + 1 < nblk) { /* inside the receive span */
            MT_CHECK(rb[j * (B + 1) + B] == GAP,
                     "%s %s: the gap after block %d holds %d, want %d (%s)", what, form, j,
                     rb[j * (B + 1) + B], GAP,
                     PROBE == rb[j * (B + 1) + B] ? "the call was not staged" : "overwritten");
        }
    }
}

/* MPI_Neighbor_alltoallw(MPI_BOTTOM, absolute displacements) on cart communicator @p c */
static void neighbor_bottom(MPI_Comm c, const char *label)
{
    const int in = 2, out = 2; /* a 1-D cart: the two directions */
    int cr;
    MPI_Comm_rank(c, &cr);
    int *plain = mt_xmalloc(sizeof(int) * out * B), *ref = mt_xmalloc(sizeof(int) * in * B);
    for (int j = 0; j < out; ++j) {
        for (int i = 0; i < B; ++i) {
            plain[j * B + i] = val(cr, j, i);
        }
    }
    /* the non-blocking forms' reference is the previous module's non-blocking answer: on
     * rings of 1 and 2 ranks, where both neighbors are one rank, Open MPI's blocking and
     * non-blocking neighborhood collectives pair the two blocks differently */
    int *nbref = mt_xmalloc(sizeof(int) * in * B);
    MPI_Request rq;
    MT_CHECK_MPI(MPI_Neighbor_alltoall(plain, B, MPI_INT, ref, B, MPI_INT, c));
    MT_CHECK_MPI(MPI_Ineighbor_alltoall(plain, B, MPI_INT, nbref, B, MPI_INT, c, &rq));
    MT_CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));

    int scounts[2], rcounts[2];
    MPI_Aint sd[2], rd[2];
    MPI_Datatype st[2] = {MPI_INT, MPI_INT}, rt[2] = {MPI_INT, MPI_INT};
    for (int form = 0; form < NFORMS; ++form) {
        int *sb = layout(out, GAP), *rb = layout(in, GAP);
        for (int j = 0; j < out; ++j) {
            for (int i = 0; i < B; ++i) {
                sb[j * (B + 1) + i] = val(cr, j, i);
            }
            scounts[j] = B;
            MPI_Get_address(&sb[j * (B + 1)], &sd[j]);
        }
        for (int j = 0; j < in; ++j) {
            rcounts[j] = B;
            MPI_Get_address(&rb[j * (B + 1)], &rd[j]);
        }
        MPI_Request req = MPI_REQUEST_NULL;
        if (F_BLOCKING == form) {
            MT_CHECK_MPI(MPI_Neighbor_alltoallw(MPI_BOTTOM, scounts, sd, st, MPI_BOTTOM, rcounts,
                                                rd, rt, c));
        } else if (F_NONBLOCKING == form) {
            MT_CHECK_MPI(MPI_Ineighbor_alltoallw(MPI_BOTTOM, scounts, sd, st, MPI_BOTTOM, rcounts,
                                                 rd, rt, c, &req));
            probe_and_wait(&req, rb, in);
        } else {
#if HAVE_PCOLL
            MT_CHECK_MPI(MPIX_Neighbor_alltoallw_init(MPI_BOTTOM, scounts, sd, st, MPI_BOTTOM,
                                                      rcounts, rd, rt, c, MPI_INFO_NULL, &req));
            for (int k = 0; k < 2; ++k) { /* two starts */
                MT_CHECK_MPI(MPI_Start(&req));
                probe_and_wait(&req, rb, in);
            }
            MT_CHECK_MPI(MPI_Request_free(&req));
#else
            mt_note("%s: persistent neighborhood collectives not in this Open MPI", label);
#endif
        }
        if (F_PERSISTENT != form || HAVE_PCOLL) {
            char what[64];
            snprintf(what, sizeof(what), "%s neighbor_alltoallw", label);
            check(what, fname[form], rb, F_BLOCKING == form ? ref : nbref, in);
        }
        free(sb);
        free(rb);
    }
    free(plain);
    free(ref);
    free(nbref);
}

/* MPI_Alltoallw(MPI_BOTTOM) with one absolute-address struct type per block on @p c */
static void alltoallw_bottom(MPI_Comm c, const char *label)
{
    int n, cr;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &cr);
    int *plain = mt_xmalloc(sizeof(int) * n * B), *ref = mt_xmalloc(sizeof(int) * n * B);
    for (int p = 0; p < n; ++p) {
        for (int i = 0; i < B; ++i) {
            plain[p * B + i] = val(cr, p, i);
        }
    }
    MT_CHECK_MPI(MPI_Alltoall(plain, B, MPI_INT, ref, B, MPI_INT, c));

    int *ones = mt_xmalloc(sizeof(int) * n), *zeros = mt_xmalloc(sizeof(int) * n);
    MPI_Datatype *st = mt_xmalloc(sizeof(MPI_Datatype) * n);
    MPI_Datatype *rt = mt_xmalloc(sizeof(MPI_Datatype) * n);
    for (int form = 0; form < NFORMS; ++form) {
        int *sb = layout(n, GAP), *rb = layout(n, GAP);
        for (int p = 0; p < n; ++p) {
            int blen = B;
            MPI_Aint a;
            MPI_Datatype t = MPI_INT;
            for (int i = 0; i < B; ++i) {
                sb[p * (B + 1) + i] = val(cr, p, i);
            }
            ones[p] = 1;
            zeros[p] = 0;
            MPI_Get_address(&sb[p * (B + 1)], &a);
            MT_CHECK_MPI(MPI_Type_create_struct(1, &blen, &a, &t, &st[p]));
            MT_CHECK_MPI(MPI_Type_commit(&st[p]));
            MPI_Get_address(&rb[p * (B + 1)], &a);
            MT_CHECK_MPI(MPI_Type_create_struct(1, &blen, &a, &t, &rt[p]));
            MT_CHECK_MPI(MPI_Type_commit(&rt[p]));
        }
        MPI_Request req = MPI_REQUEST_NULL;
        /* on one rank coll/gpu copies the call itself: no request in flight to probe */
        const bool probe = n > 1;
        if (F_BLOCKING == form) {
            MT_CHECK_MPI(
                MPI_Alltoallw(MPI_BOTTOM, ones, zeros, st, MPI_BOTTOM, ones, zeros, rt, c));
        } else if (F_NONBLOCKING == form) {
            MT_CHECK_MPI(
                MPI_Ialltoallw(MPI_BOTTOM, ones, zeros, st, MPI_BOTTOM, ones, zeros, rt, c, &req));
            if (probe) {
                probe_and_wait(&req, rb, n);
            } else {
                MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            }
        } else {
#if HAVE_PCOLL
            MT_CHECK_MPI(MPIX_Alltoallw_init(MPI_BOTTOM, ones, zeros, st, MPI_BOTTOM, ones, zeros,
                                             rt, c, MPI_INFO_NULL, &req));
            for (int k = 0; k < 2; ++k) {
                MT_CHECK_MPI(MPI_Start(&req));
                if (probe) {
                    probe_and_wait(&req, rb, n);
                } else {
                    MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                }
            }
            MT_CHECK_MPI(MPI_Request_free(&req));
#endif
        }
        if (F_PERSISTENT != form || HAVE_PCOLL) {
            char what[64];
            snprintf(what, sizeof(what), "%s alltoallw(struct)", label);
            check(what, fname[form], rb, ref, n);
        }
        for (int p = 0; p < n; ++p) {
            MPI_Type_free(&st[p]);
            MPI_Type_free(&rt[p]);
        }
        free(sb);
        free(rb);
    }
    free(ones);
    free(zeros);
    free(st);
    free(rt);
    free(plain);
    free(ref);
}

/* One rank: every blocking MPI_BOTTOM call must be served by coll/gpu (engine_calls), which
 * reads the data where it lies; coll/self would be handed the call otherwise. */
static void self_path(MPI_Comm c)
{
    if (!mt_pvars_available()) {
        mt_note("coll/gpu pvars not available: the 1-rank path is checked by results only");
        alltoallw_bottom(c, "cart1");
        return;
    }
    mt_pvars_t pv;
    unsigned long long eng = 0, fb = 0;
    mt_pvars_open(&pv, c, "cart1");
    mt_pvars_mark(&pv);
    alltoallw_bottom(c, "cart1");
    mt_pvars_delta(&pv, &eng, &fb);
    /* the reference MPI_Alltoall on plain host buffers counts as one call of either kind;
     * the three MPI_BOTTOM forms (persistent: two starts) are coll/gpu's own copies */
    const unsigned long long want = HAVE_PCOLL ? 4 : 2;
    MT_CHECK(eng >= want,
             "cart1 alltoallw(MPI_BOTTOM): %llu calls served by coll/gpu, want %llu "
             "(fallback_calls %llu: handed to the previous module)",
             eng, want, fb);
    mt_pvars_close(&pv);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_bottom");
    int wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* a 1-rank periodic cart communicator on every rank */
    MPI_Comm self_cart, ring;
    int one = 1, period = 1;
    MT_CHECK_MPI(MPI_Cart_create(MPI_COMM_SELF, 1, &one, &period, 0, &self_cart));
    neighbor_bottom(self_cart, "cart1");
    self_path(self_cart);
    MPI_Comm_free(&self_cart);

    /* the periodic ring of all ranks */
    MT_CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, &wsize, &period, 0, &ring));
    neighbor_bottom(ring, "ring");
    alltoallw_bottom(ring, "ring");
    MPI_Comm_free(&ring);
    return mt_finalize();
}
