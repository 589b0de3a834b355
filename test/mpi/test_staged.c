/*
 * The collectives coll/gpu hands to the previous module (bcast, reduce, allgather(v),
 * gather(v), scatter(v), alltoallv, reduce_scatter(_block), scan, exscan) with their
 * buffers staged through host mirrors, as device buffers are. Run with
 * --mca coll_gpu_stage_host_buffers 1 so that the staging runs on host buffers too.
 * Every result is checked against a reference computed here; a strided receive type
 * checks that the gaps between its elements keep their bytes; pvars: every call counts
 * as a fallback call on 2+ ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int rank, size;

#define GAP_FILL (-7)

static int val(int src, int i)
{
    return src * 1000 + i;
}

static void test_rooted(mt_pvars_t *pv)
{
    const int n = 37;
    int *buf = mt_xmalloc(sizeof(int) * (size_t) n * (size_t) size);
    int *out = mt_xmalloc(sizeof(int) * (size_t) n * (size_t) size);
    long calls = 0;
    for (int root = 0; root < size; root += (size > 2 ? size - 1 : 1)) {
        /* bcast */
        for (int i = 0; i < n; ++i) {
            buf[i] = rank == root ? val(root, i) : -1;
        }
        MT_CHECK_MPI(MPI_Bcast(buf, n, MPI_INT, root, MPI_COMM_WORLD));
        ++calls;
        for (int i = 0; i < n; ++i) {
            MT_CHECK(buf[i] == val(root, i), "bcast root %d [%d] = %d", root, i, buf[i]);
        }
        /* reduce, then reduce in place at the root */
        for (int i = 0; i < n; ++i) {
            buf[i] = val(rank, i);
            out[i] = -1;
        }
        MT_CHECK_MPI(MPI_Reduce(buf, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        ++calls;
        if (rank == root) {
            for (int i = 0; i < n; ++i) {
                MT_CHECK(out[i] == 1000 * size * (size - 1) / 2 + size * i, "reduce [%d] = %d", i,
                         out[i]);
            }
        }
        MT_CHECK_MPI(MPI_Reduce(rank == root ? MPI_IN_PLACE : buf, buf, n, MPI_INT, MPI_MAX, root,
                                MPI_COMM_WORLD));
        ++calls;
        if (rank == root) {
            for (int i = 0; i < n; ++i) {
                MT_CHECK(buf[i] == val(size - 1, i), "reduce in place [%d] = %d", i, buf[i]);
            }
        }
        /* gather, gatherv (reversed blocks), scatter, scatterv */
        for (int i = 0; i < n; ++i) {
            buf[i] = val(rank, i);
        }
        memset(out, 0, sizeof(int) * (size_t) n * (size_t) size);
        MT_CHECK_MPI(MPI_Gather(buf, n, MPI_INT, out, n, MPI_INT, root, MPI_COMM_WORLD));
        ++calls;
        if (rank == root) {
            for (int p = 0; p < size; ++p) {
                MT_CHECK(out[p * n + 3] == val(p, 3), "gather block %d", p);
            }
        }
        int *counts = mt_xmalloc(sizeof(int) * (size_t) size), *displs = mt_xmalloc(sizeof(int) * (size_t) size);
        for (int p = 0; p < size; ++p) {
            counts[p] = n - p % 5;
            displs[p] = (size - 1 - p) * n;
        }
        MT_CHECK_MPI(MPI_Gatherv(buf, counts[rank], MPI_INT, out, counts, displs, MPI_INT, root,
                                 MPI_COMM_WORLD));
        ++calls;
        if (rank == root) {
            for (int p = 0; p < size; ++p) {
                MT_CHECK(out[displs[p] + counts[p] - 1] == val(p, counts[p] - 1), "gatherv block %d", p);
            }
        }
        for (int p = 0; p < size; ++p) {
            for (int i = 0; i < n; ++i) {
                out[p * n + i] = rank == root ? val(p, i) : -1;
            }
        }
        MT_CHECK_MPI(MPI_Scatter(out, n, MPI_INT, buf, n, MPI_INT, root, MPI_COMM_WORLD));
        ++calls;
        MT_CHECK(buf[0] == val(rank, 0) && buf[n - 1] == val(rank, n - 1), "scatter got %d..%d",
                 buf[0], buf[n - 1]);
        memset(buf, 0, sizeof(int) * (size_t) n);
        MT_CHECK_MPI(MPI_Scatterv(out, counts, displs, MPI_INT, buf, counts[rank], MPI_INT, root,
                                  MPI_COMM_WORLD));
        ++calls;
        /* block p of out holds val(p, .) at p*n; scatterv sends displs[rank] = block size-1-rank */
        MT_CHECK(buf[0] == val(size - 1 - rank, 0), "scatterv got %d", buf[0]);
        free(counts);
        free(displs);
    }
    MT_EXPECT_PATH(pv, calls, MT_PATH_FALLBACK, "rooted collectives, staged");
    free(buf);
    free(out);
}

static void test_all(mt_pvars_t *pv)
{
    const int n = 11;
    long calls = 0;
    int *s = mt_xmalloc(sizeof(int) * (size_t) n * (size_t) size);
    int *r = mt_xmalloc(sizeof(int) * (size_t) n * (size_t) size * 2);
    for (int i = 0; i < n; ++i) {
        s[i] = val(rank, i);
    }
    /* allgather into a strided receive type: every other int, the gaps must survive */
    MPI_Datatype every_other;
    MPI_Type_vector(n, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    MPI_Datatype block;
    MPI_Type_create_resized(every_other, 0, (MPI_Aint) (2 * n * sizeof(int)), &block);
    MPI_Type_commit(&block);
    for (int i = 0; i < 2 * n * size; ++i) {
        r[i] = GAP_FILL;
    }
    MT_CHECK_MPI(MPI_Allgather(s, n, MPI_INT, r, 1, block, MPI_COMM_WORLD));
    ++calls;
    for (int p = 0; p < size; ++p) {
        for (int i = 0; i < n; ++i) {
            MT_CHECK(r[p * 2 * n + 2 * i] == val(p, i), "allgather strided [%d][%d]", p, i);
            MT_CHECK(r[p * 2 * n + 2 * i + 1] == GAP_FILL, "allgather strided: gap [%d][%d] "
                     "overwritten", p, i);
        }
    }
    MPI_Type_free(&block);
    MPI_Type_free(&every_other);
    /* allgatherv */
    int *counts = mt_xmalloc(sizeof(int) * (size_t) size), *displs = mt_xmalloc(sizeof(int) * (size_t) size);
    for (int p = 0; p < size; ++p) {
        counts[p] = 1 + p % n;
        displs[p] = p * n;
    }
    MT_CHECK_MPI(MPI_Allgatherv(s, counts[rank], MPI_INT, r, counts, displs, MPI_INT, MPI_COMM_WORLD));
    ++calls;
    for (int p = 0; p < size; ++p) {
        MT_CHECK(r[displs[p] + counts[p] - 1] == val(p, counts[p] - 1), "allgatherv block %d", p);
    }
    /* alltoallv: counts[p] ints to p */
    int *sc = mt_xmalloc(sizeof(int) * (size_t) size), *sd = mt_xmalloc(sizeof(int) * (size_t) size);
    int *rc = mt_xmalloc(sizeof(int) * (size_t) size), *rd = mt_xmalloc(sizeof(int) * (size_t) size);
    for (int p = 0; p < size; ++p) {
        sc[p] = 1 + (rank + p) % 3;
        sd[p] = p * 4;
        rc[p] = 1 + (rank + p) % 3;
        rd[p] = p * 4;
        for (int i = 0; i < sc[p]; ++i) {
            s[sd[p] + i] = rank * 100 + p * 10 + i;
        }
    }
    MT_CHECK_MPI(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD));
    ++calls;
    for (int p = 0; p < size; ++p) {
        for (int i = 0; i < rc[p]; ++i) {
            MT_CHECK(r[rd[p] + i] == p * 100 + rank * 10 + i, "alltoallv from %d [%d]", p, i);
        }
    }
    /* reduce_scatter_block and reduce_scatter, out of place and in place */
    for (int i = 0; i < n * size; ++i) {
        s[i] = rank + i;
    }
    MT_CHECK_MPI(MPI_Reduce_scatter_block(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    ++calls;
    for (int i = 0; i < n; ++i) {
        MT_CHECK(r[i] == size * (rank * n + i) + size * (size - 1) / 2, "reduce_scatter_block [%d]", i);
    }
    for (int i = 0; i < n * size; ++i) {
        r[i] = rank + i;
    }
    MT_CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    ++calls;
    MT_CHECK(r[0] == size * (rank * n) + size * (size - 1) / 2, "reduce_scatter_block in place");
    for (int p = 0; p < size; ++p) {
        counts[p] = n;
    }
    MT_CHECK_MPI(MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    ++calls;
    MT_CHECK(r[n - 1] == size * (rank * n + n - 1) + size * (size - 1) / 2, "reduce_scatter");
    /* scan, exscan */
    for (int i = 0; i < n; ++i) {
        s[i] = rank + 1;
    }
    MT_CHECK_MPI(MPI_Scan(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    ++calls;
    MT_CHECK(r[0] == (rank + 1) * (rank + 2) / 2, "scan gave %d", r[0]);
    r[0] = -5;
    MT_CHECK_MPI(MPI_Exscan(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    ++calls;
    if (rank > 0) {
        MT_CHECK(r[0] == rank * (rank + 1) / 2, "exscan gave %d", r[0]);
    }
    /* exactly one fallback call each: collectives the previous module builds out of
     * others on the same communicator are its own business and are not counted */
    MT_EXPECT_PATH(pv, calls, MT_PATH_FALLBACK, "all-to-all shaped collectives, staged");
    free(counts);
    free(displs);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_staged");
    rank = mt_world_rank();
    size = mt_world_size();
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    mt_pvars_mark(&pv);
    test_rooted(&pv);
    test_all(&pv);
    mt_pvars_close(&pv);
    return mt_finalize();
}
