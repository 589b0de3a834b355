/*
 * MPI_Bcast and MPI_Allgather through the engine (host backend): every root, counts 0, 1,
 * odd and larger than a ring slot, in place (allgather), contiguous and strided layouts,
 * and ranks that describe the same message with different layouts; each result checked
 * against the values every rank can compute; pvars: each call with data is an engine call.
 */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static int rank, size;

static int val(int src, long i)
{
    return (int) (src * 1000003L + i * 7 + 1);
}

static void bcasts(mt_pvars_t *pv)
{
    const long counts[] = {1, 3, 1031, 100003};
    long calls = 0;
    MPI_Datatype every_other;
    MPI_Type_vector(100003, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int *buf = mt_xmalloc(sizeof(int) * 2 * 100003);
    for (int root = 0; root < size; ++root) {
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
            long n = counts[k];
            for (long i = 0; i < n; ++i) {
                buf[i] = rank == root ? val(root, i) : -1;
            }
            MT_CHECK_MPI(MPI_Bcast(buf, (int) n, MPI_INT, root, MPI_COMM_WORLD));
            ++calls;
            for (long i = 0; i < n; i += (n > 100 ? 97 : 1)) {
                MT_CHECK(buf[i] == val(root, i), "bcast root %d count %ld [%ld] = %d", root, n, i,
                         buf[i]);
            }
            MT_CHECK(buf[n - 1] == val(root, n - 1), "bcast root %d count %ld: last element", root,
                     n);
        }
        /* the root sends a strided layout, the others receive contiguous ints */
        for (long i = 0; i < 2 * 100003; ++i) {
            buf[i] = rank == root ? (i % 2 ? -5 : val(root, i / 2)) : -1;
        }
        if (rank == root) {
            MT_CHECK_MPI(MPI_Bcast(buf, 1, every_other, root, MPI_COMM_WORLD));
        } else {
            MT_CHECK_MPI(MPI_Bcast(buf, 100003, MPI_INT, root, MPI_COMM_WORLD));
            MT_CHECK(buf[0] == val(root, 0) && buf[100002] == val(root, 100002) &&
                         buf[5000] == val(root, 5000),
                     "bcast from a strided root layout: %d %d", buf[0], buf[100002]);
        }
        ++calls;
    }
    MT_EXPECT_PATH(pv, calls, MT_PATH_ENGINE, "bcast");
    MPI_Type_free(&every_other);
    free(buf);
}

static void allgathers(mt_pvars_t *pv)
{
    const long counts[] = {1, 5, 777, 70001};
    long calls = 0;
    int *s = mt_xmalloc(sizeof(int) * 70001);
    int *r = mt_xmalloc(sizeof(int) * 70001 * (size_t) size * 2);
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        long n = counts[k];
        for (long i = 0; i < n; ++i) {
            s[i] = val(rank, i);
        }
        memset(r, 0xff, sizeof(int) * (size_t) n * (size_t) size);
        MT_CHECK_MPI(MPI_Allgather(s, (int) n, MPI_INT, r, (int) n, MPI_INT, MPI_COMM_WORLD));
        ++calls;
        for (int p = 0; p < size; ++p) {
            MT_CHECK(r[p * n] == val(p, 0) && r[p * n + n - 1] == val(p, n - 1),
                     "allgather count %ld block %d", n, p);
        }
        /* in place */
        memset(r, 0xff, sizeof(int) * (size_t) n * (size_t) size);
        memcpy(r + rank * n, s, sizeof(int) * (size_t) n);
        MT_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int) n, MPI_INT,
                                   MPI_COMM_WORLD));
        ++calls;
        for (int p = 0; p < size; ++p) {
            MT_CHECK(r[p * n + n / 2] == val(p, n / 2), "allgather in place count %ld block %d",
                     n, p);
        }
    }
    /* strided receive blocks (gaps must survive) and rank-dependent send layouts */
    const int n = 301;
    MPI_Datatype vec, blk, cont;
    MPI_Type_vector(n, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint) (2 * n * sizeof(int)), &blk);
    MPI_Type_commit(&blk);
    MPI_Type_contiguous(n, MPI_INT, &cont);
    MPI_Type_commit(&cont);
    for (int i = 0; i < n; ++i) {
        s[i] = val(rank, i);
    }
    for (long i = 0; i < 2L * n * size; ++i) {
        r[i] = -9;
    }
    if (0 == rank % 2) {
        MT_CHECK_MPI(MPI_Allgather(s, n, MPI_INT, r, 1, blk, MPI_COMM_WORLD));
    } else {
        MT_CHECK_MPI(MPI_Allgather(s, 1, cont, r, 1, blk, MPI_COMM_WORLD));
    }
    ++calls;
    for (int p = 0; p < size; ++p) {
        for (int i = 0; i < n; i += 50) {
            MT_CHECK(r[p * 2 * n + 2 * i] == val(p, i) && r[p * 2 * n + 2 * i + 1] == -9,
                     "allgather strided blocks: block %d element %d", p, i);
        }
    }
    MPI_Type_free(&blk);
    MPI_Type_free(&vec);
    MPI_Type_free(&cont);
    MT_EXPECT_PATH(pv, calls, MT_PATH_ENGINE, "allgather");
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_bcast_allgather");
    rank = mt_world_rank();
    size = mt_world_size();
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    mt_pvars_mark(&pv);
    bcasts(&pv);
    allgathers(&pv);
    mt_pvars_close(&pv);
    return mt_finalize();
}
