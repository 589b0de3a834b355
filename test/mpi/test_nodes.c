/*
 * Communicators over several nodes: every collective of the engine through the inter-node
 * proxy, checked against references computed here from the values every rank can derive.
 *
 * Run with --mca coll_gpu_fake_nodes N (mpirun exports it as OMPI_MCA_coll_gpu_fake_nodes):
 * world rank r sits on fake node r * N / size. The test derives the layout of each
 * communicator the same way and checks
 *   - every result (allreduce on both of its plans: counts divisible by the ranks per node
 *     and not; reduce to every root; reduce_scatter_block; bcast from every root;
 *     allgather and alltoall, in place too; int wrapping, double and float),
 *   - that the engine served every call (engine_calls grew by the number of calls,
 *     fallback_calls did not move),
 *   - the transport pvar of each communicator (proxy, proxy+shm or proxy+cuda_ipc when it
 *     spans nodes; shm or cuda_ipc when not),
 *   - that the process's proxy completed operations exactly when some communicator spanned
 *     nodes (coll_gpu_proxy_ops), and that its queue is empty between collectives.
 * Without the parameter (N = 0) the same calls run on one node and no proxy operation may
 * happen. Built with -DCGPU_TEST_CUDA it is test_cuda_nodes: the same on device buffers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

static int fake_nodes;

/* node of world rank r */
static int node_of_world(int r)
{
    const int n = mt_world_size();
    return fake_nodes > 0 ? (int) ((long) r * fake_nodes / n) : 0;
}

/* nodes spanned by comm and whether every node holds as many of its ranks */
static int comm_nodes(MPI_Comm comm, int *local_here)
{
    int size, me;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &me);
    int *wr = mt_world_ranks(comm);
    int seen[64] = {0}, nn = 0;
    *local_here = 0;
    for (int i = 0; i < size; ++i) {
        const int k = node_of_world(wr[i]);
        if (k < 64 && !seen[k]) {
            seen[k] = 1;
            ++nn;
        }
        *local_here += node_of_world(wr[i]) == node_of_world(wr[me]);
    }
    free(wr);
    return nn;
}

static int vi(uint64_t salt, int r, long i)
{
    return (int) (mt_hash(salt, (uint64_t) r, (uint64_t) i, 1) & 0x7fffffff) - 0x3fffffff;
}

static double vd(uint64_t salt, int r, long i)
{
    return (double) ((long) (mt_hash(salt, (uint64_t) r, (uint64_t) i, 2) % 100000) - 50000) / 8.0;
}

static unsigned char vb(uint64_t salt, int r, long i)
{
    return (unsigned char) mt_hash(salt, (uint64_t) r, (uint64_t) i, 3);
}

static int spanned_any; /* some communicator of 2+ ranks spanned nodes */

static void suite(MPI_Comm comm, const char *label, uint64_t salt)
{
    int me, n, here;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    const int nn = comm_nodes(comm, &here);
    spanned_any |= (nn > 1 && n > 1);
    mt_pvars_t pv;
    mt_pvars_open(&pv, comm, label);
    mt_pvars_mark(&pv);
    long calls = 0;

    /* allreduce: counts divisible by every ranks-per-node value in these runs and not */
    const long counts[] = {1, 7, 12, 1000, 1001, 98304, 1048577};
    const long maxc = 1048577;
    int *a = mt_twin_alloc(sizeof(int) * (size_t) maxc),
        *b = mt_twin_alloc(sizeof(int) * (size_t) maxc);
    double *d = mt_twin_alloc(sizeof(double) * 4096);
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
        const long c = counts[k];
        for (long i = 0; i < c; ++i) {
            a[i] = vi(salt + (uint64_t) k, me, i);
            b[i] = -1;
        }
        mt_push(a), mt_push(b);
        MT_CHECK_MPI(MPI_Allreduce(MT_D(a), MT_D(b), (int) c, MPI_INT, MPI_SUM, comm));
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, MT_D(a), (int) c, MPI_INT, MPI_SUM, comm));
        calls += 2;
        mt_pull(a), mt_pull(b);
        long bad = 0;
        for (long i = 0; i < c; ++i) {
            unsigned e = 0;
            for (int p = 0; p < n; ++p) {
                e += (unsigned) vi(salt + (uint64_t) k, p, i);
            }
            bad += b[i] != (int) e || a[i] != (int) e;
        }
        MT_CHECK(0 == bad, "%s: allreduce int sum count %ld: %ld wrong", label, c, bad);
    }
    for (long i = 0; i < 4096; ++i) {
        d[i] = vd(salt, me, i);
    }
    mt_push(d);
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, MT_D(d), 4096, MPI_DOUBLE, MPI_MAX, comm));
    ++calls;
    mt_pull(d);
    long bad = 0;
    for (long i = 0; i < 4096; ++i) {
        double e = vd(salt, 0, i);
        for (int p = 1; p < n; ++p) {
            e = vd(salt, p, i) > e ? vd(salt, p, i) : e;
        }
        bad += d[i] != e;
    }
    MT_CHECK(0 == bad, "%s: allreduce double max: %ld wrong", label, bad);

    /* reduce to every root; reduce_scatter_block */
    for (int root = 0; root < n; ++root) {
        const long c = 777 + root;
        for (long i = 0; i < c; ++i) {
            a[i] = vi(salt + 100 + (uint64_t) root, me, i);
            b[i] = -1;
        }
        mt_push(a), mt_push(b);
        MT_CHECK_MPI(MPI_Reduce(MT_D(a), MT_D(b), (int) c, MPI_INT, MPI_SUM, root, comm));
        ++calls;
        mt_pull(b);
        if (me == root) {
            bad = 0;
            for (long i = 0; i < c; ++i) {
                unsigned e = 0;
                for (int p = 0; p < n; ++p) {
                    e += (unsigned) vi(salt + 100 + (uint64_t) root, p, i);
                }
                bad += b[i] != (int) e;
            }
            MT_CHECK(0 == bad, "%s: reduce to %d: %ld wrong", label, root, bad);
        }
    }
    {
        const long per = 513;
        for (long i = 0; i < per * n; ++i) {
            a[i] = vi(salt + 200, me, i);
        }
        mt_push(a);
        MT_CHECK_MPI(MPI_Reduce_scatter_block(MT_D(a), MT_D(b), (int) per, MPI_INT, MPI_SUM, comm));
        ++calls;
        mt_pull(b);
        bad = 0;
        for (long i = 0; i < per; ++i) {
            unsigned e = 0;
            for (int p = 0; p < n; ++p) {
                e += (unsigned) vi(salt + 200, p, (long) me * per + i);
            }
            bad += b[i] != (int) e;
        }
        MT_CHECK(0 == bad, "%s: reduce_scatter_block: %ld wrong", label, bad);
    }

    /* bcast from every root (bytes, and a large one) */
    unsigned char *x = mt_twin_alloc((size_t) 3 << 20);
    for (int root = 0; root < n; ++root) {
        const long c = root == n - 1 ? (3L << 20) - 5 : 1000 + root;
        for (long i = 0; i < c; ++i) {
            x[i] = me == root ? vb(salt + 300 + (uint64_t) root, root, i) : 0;
        }
        mt_push(x);
        MT_CHECK_MPI(MPI_Bcast(MT_D(x), (int) c, MPI_BYTE, root, comm));
        ++calls;
        mt_pull(x);
        bad = 0;
        for (long i = 0; i < c; ++i) {
            bad += x[i] != vb(salt + 300 + (uint64_t) root, root, i);
        }
        MT_CHECK(0 == bad, "%s: bcast from %d (%ld bytes): %ld wrong", label, root, c, bad);
    }

    /* allgather (and in place), alltoall (and in place) */
    const long blk = 4099;
    unsigned char *s = mt_twin_alloc((size_t) blk * (size_t) n),
                  *r = mt_twin_alloc((size_t) blk * (size_t) n);
    for (int inplace = 0; inplace < 2; ++inplace) {
        for (long i = 0; i < blk * n; ++i) {
            s[i] = vb(salt + 400, me, i);
            r[i] = inplace && i / blk == me ? vb(salt + 401, me, i % blk) : 0;
        }
        for (long i = 0; i < blk; ++i) {
            s[i] = vb(salt + 401, me, i);
        }
        mt_push(s), mt_push(r);
        MT_CHECK_MPI(MPI_Allgather(inplace ? MPI_IN_PLACE : MT_D(s), (int) blk, MPI_BYTE, MT_D(r),
                                   (int) blk, MPI_BYTE, comm));
        ++calls;
        mt_pull(r);
        bad = 0;
        for (long i = 0; i < blk * n; ++i) {
            bad += r[i] != vb(salt + 401, (int) (i / blk), i % blk);
        }
        MT_CHECK(0 == bad, "%s: allgather%s: %ld wrong", label, inplace ? " in place" : "", bad);

        for (long i = 0; i < blk * n; ++i) {
            s[i] = vb(salt + 402, me, i);
            r[i] = inplace ? s[i] : 0;
        }
        mt_push(s), mt_push(r);
        MT_CHECK_MPI(MPI_Alltoall(inplace ? MPI_IN_PLACE : MT_D(s), (int) blk, MPI_BYTE, MT_D(r),
                                  (int) blk, MPI_BYTE, comm));
        ++calls;
        mt_pull(r);
        bad = 0;
        for (long i = 0; i < blk * n; ++i) {
            const int from = (int) (i / blk);
            bad += r[i] != vb(salt + 402, from, (long) me * blk + i % blk);
        }
        MT_CHECK(0 == bad, "%s: alltoall%s: %ld wrong", label, inplace ? " in place" : "", bad);
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, label);
    mt_pvars_close(&pv);

    if (n > 1) {
        const int t = mt_comm_int_pvar(comm, "coll_gpu_transport");
        /* 0 shm, 1 cuda_ipc, 2 proxy+shm, 3 proxy+cuda_ipc, 4 proxy */
        const int want = nn < 2 ? (MT_ON_DEVICE ? 1 : 0) : here < 2 ? 4 : (MT_ON_DEVICE ? 3 : 2);
        MT_CHECK(t == want,
                 "%s (%d ranks over %d node(s), %d here): coll_gpu_transport is %d, "
                 "expected %d",
                 label, n, nn, here, t, want);
    }
    mt_twin_free(a), mt_twin_free(b), mt_twin_free(d), mt_twin_free(x);
    mt_twin_free(s), mt_twin_free(r);
}

int main(int argc, char **argv)
{
    const char *fn = getenv("OMPI_MCA_coll_gpu_fake_nodes");
    fake_nodes = NULL != fn ? atoi(fn) : 0;
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_nodes" : "test_nodes");
    mt_twin_init();
    mt_proc_pvar_t ops;
    mt_proc_pvar_open(&ops, "coll_gpu_proxy_ops");
    mt_run_world_dup_split(suite, 9000);
    const unsigned long long done = mt_proc_pvar_read(&ops);
    if (spanned_any) {
        MT_CHECK(done > 0,
                 "communicators spanned %d fake nodes but the proxy completed no "
                 "operation",
                 fake_nodes);
    } else {
        MT_CHECK(0 == done,
                 "no communicator spanned nodes, yet the proxy completed %llu "
                 "operations",
                 done);
    }
    int depth_idx, is_int;
    depth_idx = mt_pvar_index("coll_gpu_proxy_queue_depth", &is_int);
    MT_CHECK(depth_idx >= 0, "pvar coll_gpu_proxy_queue_depth missing");
    mt_proc_pvar_t depth;
    mt_proc_pvar_open(&depth, "coll_gpu_proxy_queue_depth");
    MT_CHECK(0 == mt_proc_pvar_read(&depth), "proxy queue not empty between collectives");
    mt_proc_pvar_close(&depth);
    mt_note("%d fake node(s); proxy operations completed by this rank: %llu", fake_nodes, done);
    mt_proc_pvar_close(&ops);
    return mt_finalize();
}
