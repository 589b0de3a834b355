/*
 * MPI_Reduce and MPI_Reduce_scatter_block through the engine (host backend): every root,
 * counts 1 to more than a ring slot, in place, several types and ops (references computed
 * here from the values every rank can derive); MAXLOC on MPI_FLOAT_INT and on
 * MPI_LONG_DOUBLE_INT (a padded pair, long double arithmetic on the host) runs there too.
 */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int rank, size;

static long v(int r, long i)
{
    return (r * 31 + i * 7) % 1000 - 500;
}

static void reduces(mt_pvars_t *pv)
{
    const long counts[] = {1, 3, 1031, 70001};
    long calls = 0;
    long *s = mt_xmalloc(sizeof(long) * 70001), *r = mt_xmalloc(sizeof(long) * 70001);
    double *ds = mt_xmalloc(sizeof(double) * 70001), *dr = mt_xmalloc(sizeof(double) * 70001);
    for (int root = 0; root < size; ++root) {
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
            long n = counts[k];
            for (long i = 0; i < n; ++i) {
                s[i] = v(rank, i);
                r[i] = -1;
                ds[i] = (double) v(rank, i) / 4;
            }
            MT_CHECK_MPI(MPI_Reduce(s, r, (int) n, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD));
            ++calls;
            if (rank == root) {
                for (long i = 0; i < n; i += (n > 100 ? 53 : 1)) {
                    long e = 0;
                    for (int p = 0; p < size; ++p) {
                        e += v(p, i);
                    }
                    MT_CHECK(r[i] == e, "reduce sum root %d count %ld [%ld] = %ld, expected %ld",
                             root, n, i, r[i], e);
                }
            }
            /* in place at the root, MAX on doubles */
            MT_CHECK_MPI(MPI_Reduce(rank == root ? MPI_IN_PLACE : ds, ds, (int) n, MPI_DOUBLE,
                                    MPI_MAX, root, MPI_COMM_WORLD));
            ++calls;
            if (rank == root) {
                long i = n - 1;
                double e = -1e300;
                for (int p = 0; p < size; ++p) {
                    e = (double) v(p, i) / 4 > e ? (double) v(p, i) / 4 : e;
                }
                MT_CHECK(ds[i] == e, "reduce max in place root %d count %ld: %g, expected %g",
                         root, n, ds[i], e);
            }
        }
    }
    MT_EXPECT_PATH(pv, calls, MT_PATH_ENGINE, "reduce");
    /* MAXLOC on MPI_FLOAT_INT and MPI_LONG_DOUBLE_INT (a padded pair), both on the engine:
     * the largest value, on the lowest rank holding it */
    struct {
        float val;
        int loc;
    } in = {(float) (rank % 3), rank}, out = {0, -1};
    MT_CHECK_MPI(MPI_Reduce(&in, &out, 1, MPI_FLOAT_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD));
    const int top = size > 2 ? 2 : size - 1;
    if (0 == rank) {
        MT_CHECK(out.val == (float) top && out.loc == top, "maxloc (%g, %d), expected (%d, %d)",
                 (double) out.val, out.loc, top, top);
    }
    MT_EXPECT_PATH(pv, 1, MT_PATH_ENGINE, "reduce maxloc (MPI_FLOAT_INT)");
    struct {
        long double val;
        int loc;
    } lin = {(long double) (rank % 3), rank}, lout = {0, -1};
    MT_CHECK_MPI(MPI_Reduce(&lin, &lout, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, 0, MPI_COMM_WORLD));
    if (0 == rank) {
        MT_CHECK(lout.val == (long double) top && lout.loc == top,
                 "maxloc long double (%Lg, %d), expected (%d, %d)", lout.val, lout.loc, top, top);
    }
    MT_EXPECT_PATH(pv, 1, MT_PATH_ENGINE, "reduce maxloc (MPI_LONG_DOUBLE_INT)");
    free(s);
    free(r);
    free(ds);
    free(dr);
}

static void reduce_scatters(mt_pvars_t *pv)
{
    const long counts[] = {1, 7, 40001};
    long calls = 0;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        long n = counts[k];
        unsigned char *s = mt_xmalloc((size_t) n * (size_t) size), *r = mt_xmalloc((size_t) n);
        int *is = mt_xmalloc(sizeof(int) * (size_t) n * (size_t) size);
        for (long i = 0; i < n * size; ++i) {
            s[i] = (unsigned char) (1u << ((rank + i) % 8));
            is[i] = (int) v(rank, i);
        }
        MT_CHECK_MPI(MPI_Reduce_scatter_block(s, r, (int) n, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD));
        ++calls;
        for (long i = 0; i < n; i += (n > 100 ? 41 : 1)) {
            unsigned e = 0;
            for (int p = 0; p < size; ++p) {
                e |= 1u << ((p + rank * n + i) % 8);
            }
            MT_CHECK(r[i] == (unsigned char) e, "reduce_scatter_block bor count %ld [%ld]", n, i);
        }
        /* in place, int sum: the result lands at the front of the buffer */
        MT_CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, is, (int) n, MPI_INT, MPI_SUM,
                                              MPI_COMM_WORLD));
        ++calls;
        for (long i = 0; i < n; i += (n > 100 ? 37 : 1)) {
            long e = 0;
            for (int p = 0; p < size; ++p) {
                e += v(p, rank * n + i);
            }
            MT_CHECK(is[i] == e, "reduce_scatter_block in place count %ld [%ld] = %d, expected %ld",
                     n, i, is[i], e);
        }
        free(s);
        free(r);
        free(is);
    }
    MT_EXPECT_PATH(pv, calls, MT_PATH_ENGINE, "reduce_scatter_block");
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_reduce_rs");
    rank = mt_world_rank();
    size = mt_world_size();
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    mt_pvars_mark(&pv);
    reduces(&pv);
    reduce_scatters(&pv);
    mt_pvars_close(&pv);
    return mt_finalize();
}
