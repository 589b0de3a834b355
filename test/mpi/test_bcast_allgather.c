/*
 * MPI_Bcast, MPI_Allgather, MPI_Allgatherv, MPI_Gather and MPI_Scatter through the engine
 * (host backend): every root, counts 0, 1, odd and larger than a ring slot, in place,
 * contiguous and strided layouts, and ranks that describe the same message with different
 * layouts; each result checked against the values every rank can compute; pvars: each call
 * with data is an engine call. With the argument "capped" (run with
 * --mca coll_gpu_gather_scratch_bytes 40000), allgatherv, gather and scatter whose whole
 * message (ranks x largest bytes per rank) is larger go to the previous module instead.
 */
#include <stdbool.h>
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

/* allgatherv, gather, scatter: which path each call must take */
static long cap_bytes; /* 0: no cap */
static long vg_engine, vg_fallback;

static void vg_count(long per_rank_max_bytes)
{
    if (per_rank_max_bytes > 0 && cap_bytes > 0 && per_rank_max_bytes * size > cap_bytes) {
        ++vg_fallback;
    } else if (per_rank_max_bytes > 0) {
        ++vg_engine;
    }
}

/* the count of rank p in allgatherv call k: unequal, one rank with none on 3+ ranks */
static int vcount(int p, long base)
{
    return size > 2 && 1 == p ? 0 : (int) (base + (p * 37) % 101);
}

static void allgathervs(void)
{
    const long bases[] = {1, 777, 40001};
    const int gap = 3;
    long room = 0;
    for (int p = 0; p < size; ++p) {
        room += vcount(p, 40001) + gap;
    }
    int *s = mt_xmalloc(sizeof(int) * 40200);
    int *r = mt_xmalloc(sizeof(int) * (size_t) (2 * room + 2));
    int *counts = mt_xmalloc(sizeof(int) * (size_t) size), *displs = mt_xmalloc(sizeof(int) * (size_t) size);
    MPI_Datatype every_other;
    MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint) (2 * sizeof(int)), &every_other);
    MPI_Type_commit(&every_other);
    for (size_t k = 0; k < sizeof(bases) / sizeof(bases[0]); ++k) {
        for (int mode = 0; mode < 4; ++mode) {
            /* mode 0: equal counts back to back (the allgather itself); 1: unequal counts,
             * blocks in reverse rank order with gaps; 2: the same in place; 3: strided
             * receive elements on even ranks, contiguous on odd ones */
            long maxc = 0, at = 0;
            for (int p = size - 1; p >= 0; --p) {
                counts[p] = 0 == mode ? (int) bases[k] : vcount(p, bases[k]);
                maxc = counts[p] > maxc ? counts[p] : maxc;
            }
            for (int q = 0; q < size; ++q) {
                const int p = 0 == mode ? q : size - 1 - q;
                displs[p] = (int) at;
                at += counts[p] + (0 == mode ? 0 : gap);
            }
            const bool strided = 3 == mode && 0 == rank % 2;
            const long span = strided ? 2 * at : at;
            for (long i = 0; i < span; ++i) {
                r[i] = -9;
            }
            for (int i = 0; i < counts[rank]; ++i) {
                s[i] = val(rank, i);
                if (2 == mode) {
                    r[displs[rank] + i] = val(rank, i);
                }
            }
            MT_CHECK_MPI(MPI_Allgatherv(2 == mode ? MPI_IN_PLACE : s, counts[rank], MPI_INT, r,
                                        counts, displs, strided ? every_other : MPI_INT,
                                        MPI_COMM_WORLD));
            vg_count(maxc * (long) sizeof(int));
            long bad = 0, gaps = 0;
            const int st = strided ? 2 : 1;
            for (int p = 0; p < size; ++p) {
                for (int i = 0; i < counts[p]; ++i) {
                    bad += r[(long) st * (displs[p] + i)] != val(p, i);
                }
            }
            for (long i = 0; i < span; ++i) { /* everything outside the blocks: untouched */
                bool inside = false;
                for (int p = 0; p < size && !inside; ++p) {
                    inside = i % st == 0 && i / st >= displs[p] && i / st < displs[p] + counts[p];
                }
                gaps += !inside && r[i] != -9;
            }
            MT_CHECK(0 == bad && 0 == gaps,
                     "allgatherv base %ld mode %d: %ld elements wrong, %ld gap bytes overwritten",
                     bases[k], mode, bad, gaps);
        }
    }
    MPI_Type_free(&every_other);
    free(counts);
    free(displs);
    free(s);
    free(r);
}

static void gathers_scatters(void)
{
    const long counts[] = {1, 777, 20011};
    int *s = mt_xmalloc(sizeof(int) * 2 * 20011 * (size_t) size);
    int *r = mt_xmalloc(sizeof(int) * 2 * 20011 * (size_t) size);
    MPI_Datatype every_other;
    MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint) (2 * sizeof(int)), &every_other);
    MPI_Type_commit(&every_other);
    for (int root = 0; root < size; ++root) {
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
            const int n = (int) counts[k];
            for (int mode = 0; mode < 3; ++mode) {
                /* mode 0: contiguous; 1: in place at the root; 2: the root receives (gather)
                 * or sends (scatter) strided elements, rank 1 sends / receives strided */
                const bool in_place = 1 == mode && rank == root;
                const bool strided = 2 == mode && (rank == root || 1 == rank);
                const int st = strided ? 2 : 1;
                /* gather */
                for (long i = 0; i < 2L * n * size; ++i) {
                    s[i] = -9;
                    r[i] = -9;
                }
                for (int i = 0; i < n; ++i) {
                    s[(long) st * i] = val(rank, i);
                    if (in_place) {
                        r[(long) rank * n + i] = val(rank, i);
                    }
                }
                if (rank == root) {
                    MT_CHECK_MPI(MPI_Gather(in_place ? MPI_IN_PLACE : s, n,
                                            strided ? every_other : MPI_INT, r, n,
                                            strided ? every_other : MPI_INT, root, MPI_COMM_WORLD));
                } else {
                    MT_CHECK_MPI(MPI_Gather(s, n, strided ? every_other : MPI_INT, NULL, 0,
                                            MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
                }
                vg_count((long) n * (long) sizeof(int));
                if (rank == root) {
                    long bad = 0, gaps = 0;
                    for (long i = 0; i < (long) st * n * size; ++i) {
                        const long e = i / st;
                        bad += 0 == i % st && r[i] != val((int) (e / n), e % n);
                        gaps += 0 != i % st && r[i] != -9;
                    }
                    MT_CHECK(0 == bad && 0 == gaps, "gather root %d count %d mode %d: %ld wrong, "
                             "%ld gaps overwritten", root, n, mode, bad, gaps);
                }
                /* scatter: block p of the root's buffer to rank p */
                for (long i = 0; i < 2L * n * size; ++i) {
                    s[i] = -9;
                    r[i] = -9;
                }
                if (rank == root) {
                    for (long e = 0; e < (long) n * size; ++e) {
                        s[(long) st * e] = val((int) (e / n), e % n) + 5;
                    }
                }
                const bool scatter_in_place = 1 == mode && rank == root;
                MT_CHECK_MPI(MPI_Scatter(s, n, strided && rank == root ? every_other : MPI_INT,
                                         scatter_in_place ? MPI_IN_PLACE : r, n,
                                         strided && rank != root ? every_other : MPI_INT, root,
                                         MPI_COMM_WORLD));
                vg_count((long) n * (long) sizeof(int));
                const int rst = strided && rank != root ? 2 : 1;
                long bad = 0, gaps = 0;
                if (!scatter_in_place) {
                    for (long i = 0; i < (long) rst * n; ++i) {
                        bad += 0 == i % rst && r[i] != val(rank, i / rst) + 5;
                        gaps += 0 != i % rst && r[i] != -9;
                    }
                    gaps += r[(long) rst * n] != -9;
                } else { /* the root's own block stays where it is, unchanged */
                    bad += s[(long) st * rank * n] != val(rank, 0) + 5;
                }
                MT_CHECK(0 == bad && 0 == gaps, "scatter root %d count %d mode %d: %ld wrong, "
                         "%ld gaps overwritten", root, n, mode, bad, gaps);
            }
        }
    }
    MPI_Type_free(&every_other);
    free(s);
    free(r);
}

static void vgathers(mt_pvars_t *pv)
{
    vg_engine = vg_fallback = 0;
    mt_pvars_mark(pv);
    allgathervs();
    gathers_scatters();
    unsigned long long e = 0, f = 0;
    if (size > 1 && 0 == mt_pvars_delta(pv, &e, &f)) {
        MT_CHECK((long) e == vg_engine && (long) f == vg_fallback,
                 "allgatherv/gather/scatter: %llu engine and %llu fallback calls, expected %ld "
                 "and %ld", e, f, vg_engine, vg_fallback);
    }
    mt_pvars_mark(pv);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_bcast_allgather");
    rank = mt_world_rank();
    size = mt_world_size();
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    mt_pvars_mark(&pv);
    if (argc > 1 && 0 == strcmp(argv[1], "capped")) {
        cap_bytes = 40000; /* = coll_gpu_gather_scratch_bytes of that run */
    } else {
        bcasts(&pv);
        allgathers(&pv);
    }
    vgathers(&pv);
    mt_pvars_close(&pv);
    return mt_finalize();
}
