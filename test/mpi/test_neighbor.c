/*
 * Neighborhood collectives through coll/gpu: MPI_Neighbor_allgather(v) and
 * MPI_Neighbor_alltoall(v,w), blocking, non-blocking (all five in flight, host work, one
 * MPI_Waitall) and persistent (MPIX_Neighbor_*_init, started three times with the send
 * buffer refilled between starts), on two topologies:
 *   graph  a distributed graph where rank q sends to the next 1 + q % 2 ranks (fewer on
 *          small worlds), so in- and out-degrees differ from rank to rank
 *   cart   a periodic 1-D Cartesian ring (3+ ranks: two distinct neighbors)
 * Every block received is checked against values computed here, from the rule that the
 * j-th block comes from the j-th in-neighbor, which sent it as the block for this rank;
 * unequal v-blocks lie in reverse order with gaps, whose elements must keep their values.
 * pvars: every call and every start counts once as a fallback call (coll/gpu stages these).
 * Built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_neighbor), the buffers are device memory.
 */
#include <stdbool.h>
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

enum { N = 500, FILL = -3, NCOLL = 5, MAXDEG = 4, STARTS = 3 };
enum { C_AG, C_AGV, C_A2A, C_A2AV, C_A2AW };
static const char *const cname[NCOLL] = {"allgather", "allgatherv", "alltoall", "alltoallv",
                                         "alltoallw"};

static int rank, size;

static int val(uint64_t salt, int src, long i)
{
    return (int) (mt_hash(salt, (uint64_t) src, (uint64_t) i, 53) % 2000003) - 1000000;
}

/* rank q's out-neighbors in order; their number */
static int dests(bool cart, int q, int *d)
{
    if (cart) {
        d[0] = (q + size - 1) % size;
        d[1] = (q + 1) % size;
        return 2;
    }
    int k = 1 + q % 2;
    k = k < size - 1 ? k : size - 1;
    for (int i = 0; i < k; ++i) {
        d[i] = (q + 1 + i) % size;
    }
    return k;
}

/* this rank's in-neighbors in the order MPI numbers them; their number */
static int sources(bool cart, int *s)
{
    if (cart) {
        s[0] = (rank + size - 1) % size;
        s[1] = (rank + 1) % size;
        return 2;
    }
    int n = 0, d[MAXDEG];
    for (int q = 0; q < size; ++q) {
        const int k = dests(false, q, d);
        for (int i = 0; i < k; ++i) {
            if (d[i] == rank) {
                s[n++] = q;
            }
        }
    }
    return n;
}

/* the index at which rank q sends its block for this rank */
static int slot_of(bool cart, int q)
{
    int d[MAXDEG];
    const int k = dests(cart, q, d);
    for (int i = 0; i < k; ++i) {
        if (d[i] == rank) {
            return i;
        }
    }
    return -1;
}

static int vcount(int q, int i) /* the v-block rank q sends at its index i */
{
    return N - (q + i) % 3;
}

typedef struct {
    bool cart;
    int in, out, src[MAXDEG], dst[MAXDEG];
    int *s, *r[NCOLL];
    long room;
    int agv_c[MAXDEG], agv_d[MAXDEG], sc[MAXDEG], sd[MAXDEG], rc[MAXDEG], rd[MAXDEG];
    MPI_Aint wsd[MAXDEG], wrd[MAXDEG];
    MPI_Datatype wt[MAXDEG];
} topo_t;

static void fill(topo_t *t, uint64_t salt)
{
    for (long i = 0; i < t->room; ++i) {
        t->s[i] = val(salt, rank, i);
        for (int k = 0; k < NCOLL; ++k) {
            t->r[k][i] = FILL;
        }
    }
    mt_push(t->s);
    for (int k = 0; k < NCOLL; ++k) {
        mt_push(t->r[k]);
    }
}

/* the five results against the reference, whole buffers (gaps keep FILL) */
static void check(topo_t *t, uint64_t salt, const char *form)
{
    int *want = mt_xmalloc(sizeof(int) * (size_t) t->room);
    for (int k = 0; k < NCOLL; ++k) {
        mt_pull(t->r[k]);
        for (long i = 0; i < t->room; ++i) {
            want[i] = FILL;
        }
        for (int j = 0; j < t->in; ++j) {
            const int q = t->src[j], at = slot_of(t->cart, q);
            switch (k) {
            case C_AG:
                for (long i = 0; i < N; ++i) {
                    want[(long) j * N + i] = val(salt, q, i);
                }
                break;
            case C_AGV:
                for (long i = 0; i < N - q % 3; ++i) {
                    want[t->agv_d[j] + i] = val(salt, q, i);
                }
                break;
            case C_A2A:
                for (long i = 0; i < N; ++i) {
                    want[(long) j * N + i] = val(salt, q, (long) at * N + i);
                }
                break;
            default: /* v and w: q's block at its index at, sent from at x N */
                for (long i = 0; i < vcount(q, at); ++i) {
                    want[t->rd[j] + i] = val(salt, q, (long) at * N + i);
                }
                break;
            }
        }
        long bad = 0;
        for (long i = 0; i < t->room; ++i) {
            bad += t->r[k][i] != want[i];
        }
        MT_CHECK(0 == bad, "%s %s %s: %ld of %ld ints wrong", t->cart ? "cart" : "graph", form,
                 cname[k], bad, t->room);
    }
    free(want);
}

static void blocking(topo_t *t, MPI_Comm c)
{
    int *s = MT_D(t->s);
    MT_CHECK_MPI(MPI_Neighbor_allgather(s, N, MPI_INT, MT_D(t->r[C_AG]), N, MPI_INT, c));
    MT_CHECK_MPI(MPI_Neighbor_allgatherv(s, N - rank % 3, MPI_INT, MT_D(t->r[C_AGV]), t->agv_c,
                                         t->agv_d, MPI_INT, c));
    MT_CHECK_MPI(MPI_Neighbor_alltoall(s, N, MPI_INT, MT_D(t->r[C_A2A]), N, MPI_INT, c));
    MT_CHECK_MPI(MPI_Neighbor_alltoallv(s, t->sc, t->sd, MPI_INT, MT_D(t->r[C_A2AV]), t->rc, t->rd,
                                        MPI_INT, c));
    MT_CHECK_MPI(MPI_Neighbor_alltoallw(s, t->sc, t->wsd, t->wt, MT_D(t->r[C_A2AW]), t->rc, t->wrd,
                                        t->wt, c));
}

static void nonblocking(topo_t *t, MPI_Comm c)
{
    int *s = MT_D(t->s);
    MPI_Request q[NCOLL];
    MT_CHECK_MPI(MPI_Ineighbor_allgather(s, N, MPI_INT, MT_D(t->r[C_AG]), N, MPI_INT, c, &q[0]));
    MT_CHECK_MPI(MPI_Ineighbor_allgatherv(s, N - rank % 3, MPI_INT, MT_D(t->r[C_AGV]), t->agv_c,
                                          t->agv_d, MPI_INT, c, &q[1]));
    MT_CHECK_MPI(MPI_Ineighbor_alltoall(s, N, MPI_INT, MT_D(t->r[C_A2A]), N, MPI_INT, c, &q[2]));
    MT_CHECK_MPI(MPI_Ineighbor_alltoallv(s, t->sc, t->sd, MPI_INT, MT_D(t->r[C_A2AV]), t->rc, t->rd,
                                         MPI_INT, c, &q[3]));
    MT_CHECK_MPI(MPI_Ineighbor_alltoallw(s, t->sc, t->wsd, t->wt, MT_D(t->r[C_A2AW]), t->rc, t->wrd,
                                         t->wt, c, &q[4]));
    volatile double acc = 0;
    for (int i = 0; i < 50000; ++i) {
        acc += i * 1e-9;
    }
    MT_CHECK_MPI(MPI_Waitall(NCOLL, q, MPI_STATUSES_IGNORE));
}

#if HAVE_PCOLL
static void persistent_init(topo_t *t, MPI_Comm c, MPI_Request *q)
{
    int *s = MT_D(t->s);
    MPI_Info i = MPI_INFO_NULL;
    MT_CHECK_MPI(
        MPIX_Neighbor_allgather_init(s, N, MPI_INT, MT_D(t->r[C_AG]), N, MPI_INT, c, i, &q[0]));
    MT_CHECK_MPI(MPIX_Neighbor_allgatherv_init(s, N - rank % 3, MPI_INT, MT_D(t->r[C_AGV]),
                                               t->agv_c, t->agv_d, MPI_INT, c, i, &q[1]));
    MT_CHECK_MPI(
        MPIX_Neighbor_alltoall_init(s, N, MPI_INT, MT_D(t->r[C_A2A]), N, MPI_INT, c, i, &q[2]));
    MT_CHECK_MPI(MPIX_Neighbor_alltoallv_init(s, t->sc, t->sd, MPI_INT, MT_D(t->r[C_A2AV]), t->rc,
                                              t->rd, MPI_INT, c, i, &q[3]));
    MT_CHECK_MPI(MPIX_Neighbor_alltoallw_init(s, t->sc, t->wsd, t->wt, MT_D(t->r[C_A2AW]), t->rc,
                                              t->wrd, t->wt, c, i, &q[4]));
}
#endif

static void run_topology(bool cart)
{
    topo_t t = {.cart = cart};
    t.out = dests(cart, rank, t.dst);
    t.in = sources(cart, t.src);
    MPI_Comm c;
    if (cart) {
        int dims[1] = {size}, periods[1] = {1};
        MT_CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &c));
    } else {
        int ones[MAXDEG] = {1, 1, 1, 1}; /* weights (MPI_UNWEIGHTED trips gcc's checks) */
        MT_CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, t.in, t.src, ones, t.out, t.dst,
                                                    ones, MPI_INFO_NULL, 0, &c));
    }
    for (int j = 0; j < t.in; ++j) { /* receive blocks in reverse order, a gap of 7 each */
        t.agv_c[j] = N - t.src[j] % 3;
        t.agv_d[j] = (t.in - 1 - j) * (N + 7);
        t.rc[j] = vcount(t.src[j], slot_of(cart, t.src[j]));
        t.rd[j] = t.agv_d[j];
        t.wrd[j] = (MPI_Aint) t.rd[j] * (MPI_Aint) sizeof(int);
    }
    for (int i = 0; i < t.out; ++i) {
        t.sc[i] = vcount(rank, i);
        t.sd[i] = i * N;
        t.wsd[i] = (MPI_Aint) t.sd[i] * (MPI_Aint) sizeof(int);
    }
    for (int i = 0; i < MAXDEG; ++i) {
        t.wt[i] = MPI_INT; /* one array for both sides */
    }
    t.room = (long) MAXDEG * (N + 7);
    t.s = mt_twin_alloc(sizeof(int) * (size_t) t.room);
    for (int k = 0; k < NCOLL; ++k) {
        t.r[k] = mt_twin_alloc(sizeof(int) * (size_t) t.room);
    }
    const char *label = cart ? "cart" : "graph";
    mt_pvars_t pv;
    mt_pvars_open(&pv, c, label);
    mt_pvars_mark(&pv);
    fill(&t, 11);
    blocking(&t, c);
    check(&t, 11, "blocking");
    fill(&t, 12);
    nonblocking(&t, c);
    check(&t, 12, "non-blocking");
#if HAVE_PCOLL
    MPI_Request q[NCOLL];
    persistent_init(&t, c, q);
    for (int k = 0; k < STARTS; ++k) {
        fill(&t, 20 + (uint64_t) k);
        MT_CHECK_MPI(MPI_Startall(NCOLL, q));
        MT_CHECK_MPI(MPI_Waitall(NCOLL, q, MPI_STATUSES_IGNORE));
        check(&t, 20 + (uint64_t) k, "persistent");
    }
    for (int k = 0; k < NCOLL; ++k) {
        MT_CHECK_MPI(MPI_Request_free(&q[k]));
    }
    const long want = NCOLL * (2 + STARTS);
#else
    const long want = NCOLL * 2;
#endif
    unsigned long long e = 0, f = 0;
    if (size > 1 && 0 == mt_pvars_delta(&pv, &e, &f)) {
        MT_CHECK(0 == e && (long) f == want,
                 "%s: %llu engine and %llu fallback calls, expected 0 and %ld", label, e, f, want);
    }
    mt_pvars_close(&pv);
    mt_twin_free(t.s);
    for (int k = 0; k < NCOLL; ++k) {
        mt_twin_free(t.r[k]);
    }
    MPI_Comm_free(&c);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_neighbor" : "test_neighbor");
    mt_twin_init();
    rank = mt_world_rank();
    size = mt_world_size();
    run_topology(false);
    if (size >= 3) {
        run_topology(true);
    }
    return mt_finalize();
}
