/*
 * test_staged_allreduce.c - the staged allreduce's pipeline, on the reductions the engine
 * does not run: a user op that does not commute (2x2 unsigned matrix product on a contiguous
 * derived type), a commuting user op on MPI_INT, MPI_MINLOC on MPI_FLOAT_INT and MPI_MAXLOC
 * on MPI_2INT. Counts leave a short last chunk and fewer than `size` elements over; in place
 * and out of place; on the world, a dup and the halves of a split. Every result is checked
 * against a reference computed here from every rank's inputs.
 *
 * Run with small coll_gpu_stage_chunk_bytes (65536) and coll_gpu_stage_pipeline_min_bytes
 * (131072) so that each call is cut into many chunks, and coll_gpu_allreduce_algorithm
 * fallback: the engine reduces the pair types itself otherwise. argv[1]:
 *   engine   - (the default) the engine must move the data (its alltoall counter on the
 *              communicator grows), except where two ranks share a GPU: there it must not
 *   previous - it must not (run with coll_gpu_stage_allreduce_engine false)
 *   engine_shared - the engine must move the data everywhere (run with
 *              coll_gpu_stage_allreduce_engine_shared true, under MPS on one GPU)
 * Host buffers here (staged like device buffers with coll_gpu_stage_host_buffers 1); built
 * with -DCGPU_TEST_CUDA (test/gpu/test_cuda_staged) the buffers are on the device, and one
 * call per case has the odd ranks pass host buffers while the even ones pass device buffers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "mt_twin.h"

static int want_engine = -1; /* 1: engine, 0: previous */
static int engine_shared = 0; /* the engine moves the data where ranks share a GPU too */

/* ---- the ops ---- */

typedef struct {
    unsigned a, b, c, d; /* [a b; c d] */
} mat_t;

/* inout = in x inout: MPI applies the op as (earlier ranks) op (later ranks) */
static void op_matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void) dt;
    const mat_t *x = in;
    mat_t *y = inout;
    for (int i = 0; i < *len; ++i) {
        const mat_t p = x[i], q = y[i];
        y[i] = (mat_t){p.a * q.a + p.b * q.c, p.a * q.b + p.b * q.d, p.c * q.a + p.d * q.c,
                       p.c * q.b + p.d * q.d};
    }
}

static void op_sum_plus_one(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void) dt;
    const int *x = in;
    int *y = inout;
    for (int i = 0; i < *len; ++i) {
        y[i] = (int) ((unsigned) x[i] + (unsigned) y[i] + 1u);
    }
}

typedef struct {
    float v;
    int loc;
} float_int_t;

typedef struct {
    int v, loc;
} int2_t;

enum { K_MATMUL, K_SUM1, K_MINLOC, K_MAXLOC, K_NUM };
static const char *const knames[K_NUM] = {"user matmul (not commuting), 2x2 MPI_UNSIGNED",
                                          "user a+b+1 (commuting), MPI_INT",
                                          "MPI_MINLOC, MPI_FLOAT_INT", "MPI_MAXLOC, MPI_2INT"};
static const size_t ksize[K_NUM] = {sizeof(mat_t), sizeof(int), sizeof(float_int_t),
                                    sizeof(int2_t)};

/* rank r's element i of case k, in place at p */
static void input(int k, uint64_t salt, int r, size_t i, void *p)
{
    const uint64_t h = mt_hash(salt, (uint64_t) k, (uint64_t) r, i);
    switch (k) {
    case K_MATMUL:
        *(mat_t *) p = (mat_t){(unsigned) (h & 0xffff), (unsigned) ((h >> 16) & 7),
                               (unsigned) ((h >> 24) & 7), (unsigned) ((h >> 32) & 0xffff) | 1u};
        break;
    case K_SUM1: *(int *) p = (int) (h & 0xfffffff) - 0x8000000; break;
    case K_MINLOC:
        /* few distinct values: ties, where the lowest location must win */
        *(float_int_t *) p = (float_int_t){(float) (h % 5) - 2.0f, (int) ((h >> 8) % 1000)};
        break;
    case K_MAXLOC: *(int2_t *) p = (int2_t){(int) (h % 7), (int) ((h >> 8) % 1000)}; break;
    }
}

/* the reduction of every rank's element i, in rank order */
static void reference(int k, uint64_t salt, const int *wr, int n, size_t i, void *out)
{
    char acc[sizeof(mat_t)], x[sizeof(mat_t)];
    input(k, salt, wr[0], i, acc);
    for (int r = 1; r < n; ++r) {
        input(k, salt, wr[r], i, x);
        switch (k) {
        case K_MATMUL: {
            const mat_t p = *(mat_t *) acc, q = *(mat_t *) x;
            *(mat_t *) acc = (mat_t){p.a * q.a + p.b * q.c, p.a * q.b + p.b * q.d,
                                     p.c * q.a + p.d * q.c, p.c * q.b + p.d * q.d};
            break;
        }
        case K_SUM1:
            *(int *) acc = (int) ((unsigned) *(int *) acc + (unsigned) *(int *) x + 1u);
            break;
        case K_MINLOC: {
            float_int_t *a = (float_int_t *) acc, *b = (float_int_t *) x;
            if (b->v < a->v || (b->v == a->v && b->loc < a->loc)) {
                *a = *b;
            }
            break;
        }
        case K_MAXLOC: {
            int2_t *a = (int2_t *) acc, *b = (int2_t *) x;
            if (b->v > a->v || (b->v == a->v && b->loc < a->loc)) {
                *a = *b;
            }
            break;
        }
        }
    }
    memcpy(out, acc, ksize[k]);
}

/* Whether two ranks of comm run on one device (node name and PCI bus id): coll/gpu then
 * leaves the data to the previous module, as the engine's kernels would wait for each other
 * one GPU time slice at a time. Never on the host build. */
static int ranks_share_device(MPI_Comm comm)
{
#ifdef CGPU_TEST_CUDA
    int n;
    MPI_Comm_size(comm, &n);
    char me[MPI_MAX_PROCESSOR_NAME + 40] = {0};
    int len = 0;
    MPI_Get_processor_name(me, &len);
    me[len] = '/';
    cudaDeviceGetPCIBusId(me + len + 1, 32, mt_twin_device);
    char *all = mt_xmalloc(sizeof(me) * (size_t) n);
    MT_CHECK_MPI(MPI_Allgather(me, (int) sizeof(me), MPI_CHAR, all, (int) sizeof(me), MPI_CHAR, comm));
    int shared = 0;
    for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
            shared |= 0 == strcmp(all + (size_t) i * sizeof(me), all + (size_t) j * sizeof(me));
        }
    }
    free(all);
    return shared;
#else
    (void) comm;
    return 0;
#endif
}

/* ---- the suite ---- */

static void suite(MPI_Comm comm, const char *label, uint64_t salt)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *wr = mt_world_ranks(comm);
    const int shared = ranks_share_device(comm); /* before the counters: it is a collective */
    mt_pvars_t pv;
    mt_pvars_open(&pv, comm, label);

    MPI_Datatype mat, types[K_NUM];
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mat);
    MPI_Type_commit(&mat);
    MPI_Op matmul, sum1, ops[K_NUM];
    MPI_Op_create(op_matmul, 0, &matmul);
    MPI_Op_create(op_sum_plus_one, 1, &sum1);
    types[K_MATMUL] = mat;
    ops[K_MATMUL] = matmul;
    types[K_SUM1] = MPI_INT;
    ops[K_SUM1] = sum1;
    types[K_MINLOC] = MPI_FLOAT_INT;
    ops[K_MINLOC] = MPI_MINLOC;
    types[K_MAXLOC] = MPI_2INT;
    ops[K_MAXLOC] = MPI_MAXLOC;

    /* element counts: a little over the pipeline's minimum, several chunks with a short
     * last one, and ones that leave 1 .. size-1 elements over */
    const size_t counts[] = {8193, 20000, 24577, 40961};
    const size_t maxc = 40961, maxb = maxc * sizeof(mat_t);
    char *s = mt_twin_alloc(maxb), *r = mt_twin_alloc(maxb), *ref = mt_xmalloc(maxb);
    mt_proc_pvar_t a2a = {.ok = 0}; /* the engine's alltoalls on comm (2+ ranks: ours) */
    if (n > 1) {
        mt_comm_pvar_open(&a2a, "coll_gpu_alltoall_completed", comm);
    }
    long calls = 0;
    for (int k = 0; k < K_NUM; ++k) {
        const size_t es = ksize[k];
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ++ci) {
            const size_t cnt = counts[ci] * (sizeof(mat_t) / es); /* the same bytes */
            if (cnt * es > maxb) {
                continue;
            }
            const uint64_t cs = salt * 131 + ci;
            for (size_t i = 0; i < cnt; ++i) {
                reference(k, cs, wr, n, i, ref + i * es);
            }
            for (int variant = 0; variant < 2 + MT_ON_DEVICE; ++variant) {
                const int in_place = 1 == variant;
                /* variant 2 (device build): odd ranks hand host buffers, out of place */
                const int host_here = 2 == variant && 1 == rank % 2;
                for (size_t i = 0; i < cnt; ++i) {
                    input(k, cs, wr[rank], i, (in_place ? r : s) + i * es);
                }
                if (!in_place) {
                    memset(r, 0x5a, cnt * es);
                }
                char *sd = host_here ? s : MT_D(s), *rd = host_here ? r : MT_D(r);
                if (!host_here) {
                    mt_push(s);
                    mt_push(r);
                }
                MT_CHECK_MPI(MPI_Allreduce(in_place ? MPI_IN_PLACE : sd, rd, (int) cnt,
                                           types[k], ops[k], comm));
                ++calls;
                if (!host_here) {
                    mt_pull(r);
                }
                size_t bad = 0, first = cnt;
                for (size_t i = 0; i < cnt; ++i) {
                    if (0 != memcmp(r + i * es, ref + i * es, es)) {
                        first = 0 == bad ? i : first;
                        ++bad;
                    }
                }
                MT_CHECK(0 == bad,
                         "comm %s: %s, %zu elements, %s%s: %zu wrong, first at %zu (chunk edges "
                         "and the last size-1 elements are the likely places)",
                         label, knames[k], cnt, in_place ? "in place" : "out of place",
                         host_here ? " (host buffers on this rank)" : "", bad, first);
            }
        }
    }
    if (n > 1) { /* one rank: coll/gpu's own local copies, counted as engine calls */
        MT_EXPECT_PATH(&pv, calls, MT_PATH_FALLBACK, "staged allreduce (user ops, pair types)");
    }
    if (n > 1 && a2a.ok) {
        const unsigned long long moved = mt_proc_pvar_read(&a2a);
        if (1 == want_engine && shared && !engine_shared) {
            MT_CHECK(0 == moved,
                     "comm %s: ranks share a GPU, yet the engine ran %llu alltoalls for the "
                     "staged allreduces (each waits for a GPU time slice there)",
                     label, moved);
        } else if (1 == want_engine) {
            MT_CHECK(moved >= (unsigned long long) calls,
                     "comm %s: the engine ran %llu alltoalls for %ld staged allreduces (at least "
                     "one each when it moves their data)",
                     label, moved, calls);
        } else {
            MT_CHECK(0 == moved,
                     "comm %s: the engine ran %llu alltoalls although "
                     "coll_gpu_stage_allreduce_engine is false",
                     label, moved);
        }
    }
    mt_proc_pvar_close(&a2a);
    mt_twin_free(s);
    mt_twin_free(r);
    free(ref);
    free(wr);
    MPI_Op_free(&matmul);
    MPI_Op_free(&sum1);
    MPI_Type_free(&mat);
    mt_pvars_close(&pv);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_staged_allreduce");
    mt_twin_init();
    if (argc < 2 || 0 == strcmp(argv[1], "engine")) {
        want_engine = 1;
    } else if (0 == strcmp(argv[1], "engine_shared")) {
        want_engine = 1;
        engine_shared = 1;
    } else if (argc > 1 && 0 == strcmp(argv[1], "previous")) {
        want_engine = 0;
    } else {
        MT_CHECK(0, "usage: test_staged_allreduce engine|engine_shared|previous");
        return mt_finalize();
    }
    mt_run_world_dup_split(suite, 0x5a6e);
    return mt_finalize();
}
