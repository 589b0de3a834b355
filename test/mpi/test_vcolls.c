/*
 * MPI_Gatherv, MPI_Scatterv, MPI_Alltoallv, MPI_Alltoallw and MPI_Ialltoallw (the
 * alltoallv's blocks, a type per block: in the pairs mode ints and pairs mixed in one call;
 * the non-blocking one waited for after a stretch of host work), the collectives whose
 * counts no rank sees whole, against a reference computed here: every element of every block and
 * every element outside the blocks (gaps keep their values), at 3 sizes, every root, in 6 layouts:
 *   packed    equal counts back to back (the engine reads and writes the user's buffers)
 *   spread    unequal counts (some zero on 3+ ranks), blocks in reverse rank order with gaps
 *   in_place  spread, in place (alltoallv: symmetric counts, sent from the receive buffer)
 *   pairs     even counts, some ranks describing their side in pairs of ints
 *   gappy     spread, but the last rank's elements have gaps (a strided type): that rank
 *             vetoes the engine, so every rank takes the previous module (MPI_Ialltoallw:
 *             that rank packs its blocks on the host around the engine's call)
 *   zero      every count zero
 * The pvars check each call's path: the engine for the first four, the previous module for
 * gappy and zero and, in the "capped" run (coll_gpu_gather_scratch_bytes 40000), for calls
 * whose padded message (ranks x the largest block) is over the cap; MPI_Ialltoallw takes the
 * engine in every mode (in rounds over the cap) unless coll_gpu_nb_engine is off.
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_vcolls), the buffers are device memory.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

enum { PACKED, SPREAD, IN_PLACE, PAIRS, GAPPY, ZERO, NMODES };
static const char *const mode_name[NMODES] = {"packed", "spread", "in_place", "pairs", "gappy", "zero"};

enum { GAP = 2, FILL = -9, UNSENT = -1 };
enum { FORM_V, FORM_W, FORM_IW, NFORMS }; /* alltoallv, alltoallw, ialltoallw */
static const char *const form_name[NFORMS] = {"alltoallv", "alltoallw", "ialltoallw"};

static int rank, size;
static long cap_bytes; /* 0: no cap */
static long want_engine, want_fallback;
static MPI_Datatype t_pair, t_strided;

/* element i of the block rank src sends to rank dst */
static int val(int src, int dst, long i)
{
    return (src * 131 + dst * 17) * 100000 + (int) i;
}

/* the ints rank src sends rank dst */
static int vcnt(int mode, long base, int src, int dst)
{
    const int lo = src < dst ? src : dst, hi = src < dst ? dst : src;
    switch (mode) {
    case PACKED: return (int) base;
    case ZERO: return 0;
    case IN_PLACE: return size > 2 && 3 == (lo + hi) % 4 ? 0 : (int) base + (lo * 37 + hi * 11) % 101;
    case PAIRS: return 2 * ((int) base + (src * 37 + dst * 11) % 101);
    case GAPPY: return (int) base + 2 + (src * 37 + dst * 11) % 101;
    default: return size > 2 && 3 == (src + 2 * dst) % 5 ? 0 : (int) base + (src * 37 + dst * 11) % 101;
    }
}

/* block p at displs[p] (ints), in reverse rank order with gaps but when packed; the span */
static long layout(int mode, const int *counts, int *displs)
{
    long at = 0;
    for (int q = 0; q < size; ++q) {
        const int p = PACKED == mode ? q : size - 1 - q;
        displs[p] = (int) at;
        at += counts[p] + (PACKED == mode ? 0 : GAP);
    }
    return at;
}

/* How a rank describes one side: ints, pairs of ints (counts and displs halved), or ints
 * with a gap after each (element i of a block at displs + i lies at int 2 (displs + i)). */
typedef enum { T_INT, T_PAIR, T_STRIDED } tkind_t;

static MPI_Datatype tk_type(tkind_t k)
{
    return T_PAIR == k ? t_pair : T_STRIDED == k ? t_strided : MPI_INT;
}

static int tk_div(tkind_t k)
{
    return T_PAIR == k ? 2 : 1;
}

static int tk_stride(tkind_t k)
{
    return T_STRIDED == k ? 2 : 1;
}

/* the kind of a rank's side: pairs on even ranks' send sides and odd ranks' receive sides,
 * gaps on the last rank's sides (both of an alltoallv's, a scatterv's receive side, a
 * gatherv's send side) */
static tkind_t kind(int mode, int who, bool send, bool gappy_side)
{
    if (PAIRS == mode && (send ? 0 : 1) == who % 2) {
        return T_PAIR;
    }
    return GAPPY == mode && gappy_side && who == size - 1 ? T_STRIDED : T_INT;
}

static void expect_path(int mode, long max_ints)
{
    const long bytes = max_ints * (long) sizeof(int);
    if (GAPPY == mode || 0 == bytes || (cap_bytes > 0 && bytes * size > cap_bytes)) {
        ++want_fallback;
    } else {
        ++want_engine;
    }
}

/* the largest block any rank sends any rank */
static long largest(int mode, long base)
{
    long m = 0;
    for (int s = 0; s < size; ++s) {
        for (int d = 0; d < size; ++d) {
            const long c = vcnt(mode, base, s, d);
            m = c > m ? c : m;
        }
    }
    return m;
}

/* host element counts and displacements as a side of kind k passes them */
static void describe(tkind_t k, const int *counts, const int *displs, int *mc, int *md)
{
    for (int p = 0; p < size; ++p) {
        mc[p] = counts[p] / tk_div(k);
        md[p] = displs[p] / tk_div(k);
    }
}

/* compares a whole buffer with its reference; the number of ints that differ */
static long diff(const int *got, const int *want, long n)
{
    long bad = 0;
    for (long i = 0; i < n; ++i) {
        bad += got[i] != want[i];
    }
    return bad;
}

typedef struct {
    int *s, *r, *want;   /* twin send and receive buffers, host reference */
    long room;           /* ints in each */
    int *sc, *sd, *rc, *rd, *mc, *md, *mc2, *md2;
    MPI_Datatype *st, *rt; /* alltoallw: a type per block */
} bufs_t;

/* MPI_Alltoallw's description of a side of kind k (the same blocks as the alltoallv's): a
 * type per block, displacements in bytes; in the pairs mode every other peer's block is
 * described in ints instead, so that one call mixes types */
static void describe_w(tkind_t k, int mode, const int *counts, const int *displs, int *mc, int *md,
                       MPI_Datatype *mt)
{
    for (int p = 0; p < size; ++p) {
        const tkind_t kp = PAIRS == mode && T_PAIR == k && 1 == (p + rank) % 2 ? T_INT : k;
        mc[p] = counts[p] / tk_div(kp);
        md[p] = displs[p] * tk_stride(kp) * (int) sizeof(int);
        mt[p] = tk_type(kp);
    }
}

/* host work while a non-blocking call runs */
static volatile double sink;
static void busy(void)
{
    double x = 0;
    for (int i = 0; i < 20000; ++i) {
        x += (double) i * 1e-9;
    }
    sink = x;
}

/* MPI_Alltoallv, MPI_Alltoallw or MPI_Ialltoallw of the same blocks */
static void check_alltoallv(bufs_t *b, int mode, long base, int form)
{
    const tkind_t sk = kind(mode, rank, true, true), rk = kind(mode, rank, false, true);
    for (int p = 0; p < size; ++p) {
        b->sc[p] = vcnt(mode, base, rank, p);
        b->rc[p] = vcnt(mode, base, p, rank);
    }
    const long sspan = layout(mode, b->sc, b->sd), rspan = layout(mode, b->rc, b->rd);
    const int sst = tk_stride(sk), rst = tk_stride(rk);
    const bool in_place = IN_PLACE == mode;
    for (long i = 0; i < b->room; ++i) {
        b->s[i] = UNSENT;
        b->r[i] = b->want[i] = FILL;
    }
    for (int p = 0; p < size; ++p) {
        for (long i = 0; i < b->sc[p]; ++i) {
            b->s[(long) sst * (b->sd[p] + i)] = val(rank, p, i);
            if (in_place) { /* symmetric counts: what goes to p leaves from p's receive block */
                b->r[(long) rst * (b->rd[p] + i)] = val(rank, p, i);
            }
        }
        for (long i = 0; i < b->rc[p]; ++i) {
            b->want[(long) rst * (b->rd[p] + i)] = val(p, rank, i);
        }
    }
    mt_push(b->s);
    mt_push(b->r);
    if (FORM_W == form) {
        describe_w(sk, mode, b->sc, b->sd, b->mc, b->md, b->st);
        describe_w(rk, mode, b->rc, b->rd, b->mc2, b->md2, b->rt);
        MT_CHECK_MPI(MPI_Alltoallw(in_place ? MPI_IN_PLACE : MT_D(b->s), b->mc, b->md, b->st,
                                   MT_D(b->r), b->mc2, b->md2, b->rt, MPI_COMM_WORLD));
    } else if (FORM_IW == form) {
        MPI_Request req;
        describe_w(sk, mode, b->sc, b->sd, b->mc, b->md, b->st);
        describe_w(rk, mode, b->rc, b->rd, b->mc2, b->md2, b->rt);
        MT_CHECK_MPI(MPI_Ialltoallw(in_place ? MPI_IN_PLACE : MT_D(b->s), b->mc, b->md, b->st,
                                    MT_D(b->r), b->mc2, b->md2, b->rt, MPI_COMM_WORLD, &req));
        busy();
        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    } else {
        describe(sk, b->sc, b->sd, b->mc, b->md);
        describe(rk, b->rc, b->rd, b->mc2, b->md2);
        MT_CHECK_MPI(MPI_Alltoallv(in_place ? MPI_IN_PLACE : MT_D(b->s), b->mc, b->md, tk_type(sk),
                                   MT_D(b->r), b->mc2, b->md2, tk_type(rk), MPI_COMM_WORLD));
    }
    if (FORM_IW != form) {
        expect_path(mode, largest(mode, base));
    } else if (mt_mca_is("nb_engine", "off")) {
        ++want_fallback;
    } else {
        ++want_engine;
    }
    mt_pull(b->r);
    const long span = (long) rst * (rspan + 1), bad = diff(b->r, b->want, span);
    MT_CHECK(0 == bad, "%s %s base %ld: %ld of %ld ints wrong", form_name[form], mode_name[mode],
             base, bad, span);
    (void) sspan;
}

static void check_gatherv(bufs_t *b, int mode, long base, int root)
{
    const bool is_root = rank == root, in_place = IN_PLACE == mode && is_root;
    const tkind_t sk = kind(mode, rank, true, true), rk = kind(mode, root, false, false);
    const int scount = vcnt(mode, base, rank, root), sst = tk_stride(sk), rst = tk_stride(rk);
    for (int p = 0; p < size; ++p) {
        b->rc[p] = vcnt(mode, base, p, root);
    }
    const long rspan = layout(mode, b->rc, b->rd);
    for (long i = 0; i < b->room; ++i) {
        b->s[i] = UNSENT;
        b->r[i] = b->want[i] = FILL;
    }
    for (long i = 0; i < scount; ++i) {
        b->s[(long) sst * i] = val(rank, root, i);
        if (in_place) {
            b->r[(long) rst * (b->rd[rank] + i)] = val(rank, root, i);
        }
    }
    for (int p = 0; p < size; ++p) {
        for (long i = 0; i < b->rc[p]; ++i) {
            b->want[(long) rst * (b->rd[p] + i)] = val(p, root, i);
        }
    }
    mt_push(b->s);
    mt_push(b->r);
    describe(rk, b->rc, b->rd, b->mc, b->md);
    /* rcounts, displs and rtype mean something at the root only: the others pass garbage */
    MT_CHECK_MPI(MPI_Gatherv(in_place ? MPI_IN_PLACE : MT_D(b->s), scount / tk_div(sk), tk_type(sk),
                             is_root ? MT_D(b->r) : NULL, is_root ? b->mc : NULL,
                             is_root ? b->md : NULL, is_root ? tk_type(rk) : MPI_DATATYPE_NULL,
                             root, MPI_COMM_WORLD));
    long m = 0;
    for (int p = 0; p < size; ++p) {
        m = b->rc[p] > m ? b->rc[p] : m;
    }
    expect_path(mode, m);
    if (is_root) {
        mt_pull(b->r);
        const long span = (long) rst * (rspan + 1), bad = diff(b->r, b->want, span);
        MT_CHECK(0 == bad, "gatherv %s base %ld root %d: %ld of %ld ints wrong", mode_name[mode],
                 base, root, bad, span);
    }
}

static void check_scatterv(bufs_t *b, int mode, long base, int root)
{
    const bool is_root = rank == root, in_place = IN_PLACE == mode && is_root;
    const tkind_t sk = kind(mode, root, true, false), rk = kind(mode, rank, false, true);
    const int rcount = vcnt(mode, base, root, rank), sst = tk_stride(sk), rst = tk_stride(rk);
    for (int p = 0; p < size; ++p) {
        b->sc[p] = vcnt(mode, base, root, p);
    }
    const long sspan = layout(mode, b->sc, b->sd);
    for (long i = 0; i < b->room; ++i) {
        b->s[i] = UNSENT;
        b->r[i] = b->want[i] = FILL;
    }
    if (is_root) {
        for (int p = 0; p < size; ++p) {
            for (long i = 0; i < b->sc[p]; ++i) {
                b->s[(long) sst * (b->sd[p] + i)] = val(root, p, i);
            }
        }
    }
    for (long i = 0; i < rcount && !in_place; ++i) {
        b->want[(long) rst * i] = val(root, rank, i);
    }
    mt_push(b->s);
    mt_push(b->r);
    describe(sk, b->sc, b->sd, b->mc, b->md);
    MT_CHECK_MPI(MPI_Scatterv(is_root ? MT_D(b->s) : NULL, is_root ? b->mc : NULL,
                              is_root ? b->md : NULL, is_root ? tk_type(sk) : MPI_DATATYPE_NULL,
                              in_place ? MPI_IN_PLACE : MT_D(b->r), rcount / tk_div(rk),
                              tk_type(rk), root, MPI_COMM_WORLD));
    long m = 0;
    for (int p = 0; p < size; ++p) {
        m = b->sc[p] > m ? b->sc[p] : m;
    }
    expect_path(mode, m);
    mt_pull(b->r);
    const long span = (long) rst * (rcount + 1) + 1, bad = diff(b->r, b->want, span);
    MT_CHECK(0 == bad, "scatterv %s base %ld root %d: %ld of %ld ints wrong", mode_name[mode], base,
             root, bad, span);
    if (in_place) { /* the root's own block stays where it is */
        mt_pull(b->s);
        long kept = 0;
        for (long i = 0; i < b->sc[rank]; ++i) {
            kept += b->s[(long) sst * (b->sd[rank] + i)] == val(root, rank, i);
        }
        MT_CHECK(kept == b->sc[rank], "scatterv in place root %d: own block changed", root);
    }
    (void) sspan;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_vcolls" : "test_vcolls");
    mt_twin_init();
    rank = mt_world_rank();
    size = mt_world_size();
    const bool quick = argc > 1 && 0 == strcmp(argv[1], "quick");
    if (argc > 1 && 0 == strcmp(argv[1], "capped")) {
        cap_bytes = 40000; /* = coll_gpu_gather_scratch_bytes of that run */
    }
    MPI_Type_contiguous(2, MPI_INT, &t_pair);
    MPI_Type_commit(&t_pair);
    MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint) (2 * sizeof(int)), &t_strided);
    MPI_Type_commit(&t_strided);
    const long bases[] = {1, 333, 20011};
    const int nb = quick ? 2 : 3;
    bufs_t b;
    /* the largest block is 2 (base + 100) ints (pairs); each side spans size blocks + gaps,
     * twice that when strided */
    b.room = 2 * ((long) size * (2 * (bases[nb - 1] + 101) + GAP) + 2);
    b.s = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    b.r = mt_twin_alloc(sizeof(int) * (size_t) b.room);
    b.want = mt_xmalloc(sizeof(int) * (size_t) b.room);
    int **arrays[] = {&b.sc, &b.sd, &b.rc, &b.rd, &b.mc, &b.md, &b.mc2, &b.md2};
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); ++i) {
        *arrays[i] = mt_xmalloc(sizeof(int) * (size_t) size);
    }
    b.st = mt_xmalloc(sizeof(MPI_Datatype) * (size_t) size);
    b.rt = mt_xmalloc(sizeof(MPI_Datatype) * (size_t) size);
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    mt_pvars_mark(&pv);
    for (int k = 0; k < nb; ++k) {
        for (int mode = 0; mode < NMODES; ++mode) {
            for (int form = 0; form < NFORMS; ++form) {
                check_alltoallv(&b, mode, bases[k], form);
            }
            for (int root = 0; root < size; ++root) {
                check_gatherv(&b, mode, bases[k], root);
                check_scatterv(&b, mode, bases[k], root);
            }
        }
    }
    unsigned long long e = 0, f = 0;
    if (size > 1 && 0 == mt_pvars_delta(&pv, &e, &f)) {
        MT_CHECK(
            (long) e == want_engine && (long) f == want_fallback,
            "gatherv/scatterv/alltoallv/w/iw: %llu engine and %llu fallback calls, expected %ld "
            "and %ld",
            e, f, want_engine, want_fallback);
    }
    mt_pvars_close(&pv);
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); ++i) {
        free(*arrays[i]);
    }
    free(b.st);
    free(b.rt);
    mt_twin_free(b.s);
    mt_twin_free(b.r);
    free(b.want);
    MPI_Type_free(&t_pair);
    MPI_Type_free(&t_strided);
    return mt_finalize();
}
