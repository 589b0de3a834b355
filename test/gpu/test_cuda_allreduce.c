/*
 * GPU integration test: MPI_Allreduce (and MPI_Alltoall) on CUDA device buffers through
 * coll/gpu's cuda backend, checked against a reference each rank computes on the host,
 * with the pvars proving which path served every call.
 *
 * Prints "skipped: no GPU" and exits 77 where no device is usable (the driver counts
 * that as a skip, never as a pass). Each rank uses device (rank % device count), so 4
 * ranks on 2 GPUs share them. Run with --mca coll_gpu_backend auto (default) or cuda.
 * argv[1] = "quick" runs the type x op matrix at small sizes only.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#define CUDA_OK(call)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        MT_CHECK(cudaSuccess == e_, "%s: %s", #call, cudaGetErrorString(e_));             \
    } while (0)

typedef enum { K_INT, K_UINT, K_FLOAT, K_BOOL, K_BYTE } kind_t;

typedef struct {
    const char *name;
    MPI_Datatype dt;
    size_t size;
    kind_t kind;
} tdesc_t;

static const char *op_names[] = {"SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"};
static MPI_Op ops[10];

/* whether MPI defines op (index) on a kind */
static bool op_valid(kind_t k, int o)
{
    switch (k) {
    case K_INT:
    case K_UINT:
        return true;
    case K_FLOAT:
        return o <= 3;
    case K_BOOL:
        return o >= 4 && o <= 6;
    case K_BYTE:
        return o >= 7;
    }
    return false;
}

/* Deterministic inputs, small enough that float sums/products stay exact. */
static long double input(int rank, size_t i, int o, kind_t k)
{
    unsigned h = (unsigned) (i * 2654435761u) ^ (unsigned) (rank * 40503u) ^ (unsigned) o;
    if (K_BOOL == k || 4 == o || 5 == o || 6 == o) {
        return (h >> 7) & 1;
    }
    if (1 == o) { /* PROD: 1, 2 or -1 (0..2 unsigned) */
        int v = (int) ((h >> 5) % 3);
        return K_UINT == k || K_BYTE == k ? v : (v == 2 ? -1 : v + 1);
    }
    int v = (int) ((h >> 3) % 200);
    return K_UINT == k || K_BYTE == k ? v : v - 100;
}

/* store/load one element of any of our types as long double (integers wrap like C) */
static void put(void *buf, size_t i, const tdesc_t *t, long double v)
{
    char *p = (char *) buf + i * t->size;
    if (K_FLOAT == t->kind) {
        if (4 == t->size) {
            *(float *) p = (float) v;
        } else if (8 == t->size) {
            *(double *) p = (double) v;
        } else {
            *(long double *) p = v;
        }
        return;
    }
    long long x = (long long) v;
    memcpy(p, &x, t->size); /* little-endian: low bytes */
}

static long double get(const void *buf, size_t i, const tdesc_t *t)
{
    const char *p = (const char *) buf + i * t->size;
    if (K_FLOAT == t->kind) {
        return 4 == t->size ? *(const float *) p : 8 == t->size ? *(const double *) p
                                                                 : *(const long double *) p;
    }
    unsigned long long u = 0;
    memcpy(&u, p, t->size);
    if (K_INT == t->kind && t->size < 8 && (u >> (8 * t->size - 1)) & 1) {
        u |= ~0ull << (8 * t->size); /* sign-extend */
    }
    return K_INT == t->kind ? (long double) (long long) u : (long double) u;
}

/* wrap an integer to the type's width (two's complement) */
static long double wrap(long double v, const tdesc_t *t)
{
    if (K_FLOAT == t->kind) {
        return v;
    }
    char tmp[16];
    put(tmp, 0, t, v);
    return get(tmp, 0, t);
}

static long double apply(int o, long double a, long double b, const tdesc_t *t)
{
    unsigned long long ua = (unsigned long long) (long long) a, ub = (unsigned long long) (long long) b;
    switch (o) {
    case 0: return wrap(a + b, t);
    case 1: return K_FLOAT == t->kind ? a * b : wrap((long double) (long long) (ua * ub), t);
    case 2: return a < b ? a : b;
    case 3: return a > b ? a : b;
    case 4: return (a != 0) && (b != 0);
    case 5: return (a != 0) || (b != 0);
    case 6: return (a != 0) != (b != 0);
    case 7: return wrap((long double) (long long) (ua & ub), t);
    case 8: return wrap((long double) (long long) (ua | ub), t);
    default: return wrap((long double) (long long) (ua ^ ub), t);
    }
}

static int rank, nranks;

/* user op on pairs of ints: elementwise sum (runs on host copies: staged fallback) */
static void pair_add(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void) dt;
    const int *a = in;
    int *b = inout;
    for (int i = 0; i < 2 * *len; ++i) {
        b[i] += a[i];
    }
}

/* One allreduce on device buffers, checked; returns 1 if the call reached coll. The
 * buffers start offset_elems elements and @p skew bytes into their allocations (a skew
 * below the type's size: not aligned for its loads). */
static int one_case(const tdesc_t *t, int o, size_t count, bool in_place, mt_pvars_t *pv,
                    size_t offset_elems, size_t skew)
{
    size_t bytes = (count + offset_elems + 1) * t->size;
    char *hin = malloc(bytes), *hout = malloc(bytes);
    void *dbuf_s = NULL, *dbuf_r = NULL;
    CUDA_OK(cudaMalloc(&dbuf_s, bytes + skew));
    CUDA_OK(cudaMalloc(&dbuf_r, bytes + skew));
    for (size_t i = 0; i < count; ++i) {
        put(hin, i + offset_elems, t, wrap(input(rank, i, o, t->kind), t));
    }
    memset(hout, 0xA5, bytes); /* poison, guard included */
    char *base_r = (char *) dbuf_r + skew;
    char *ds = (char *) dbuf_s + skew + offset_elems * t->size,
         *dr = base_r + offset_elems * t->size;
    CUDA_OK(cudaMemcpy(base_r, hout, bytes, cudaMemcpyHostToDevice));
    if (in_place) {
        CUDA_OK(cudaMemcpy(dr, hin + offset_elems * t->size, count * t->size, cudaMemcpyHostToDevice));
    } else {
        CUDA_OK(cudaMemcpy(ds, hin + offset_elems * t->size, count * t->size, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaDeviceSynchronize());
    int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : ds, dr, (int) count, t->dt, ops[o], pv->comm);
    MT_CHECK(MPI_SUCCESS == rc, "%s %s count %zu in_place %d skew %zu: rc %d", t->name, op_names[o],
             count, in_place, skew, rc);
    CUDA_OK(cudaMemcpy(hout, base_r, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < count && bad < 3; ++i) {
        long double e = wrap(input(0, i, o, t->kind), t);
        for (int r = 1; r < nranks; ++r) {
            e = apply(o, e, wrap(input(r, i, o, t->kind), t), t);
        }
        long double g = get(hout, i + offset_elems, t);
        if (!(g == e)) {
            ++bad;
            MT_CHECK(0, "%s %s count %zu in_place %d: [%zu] got %Lg expected %Lg", t->name,
                     op_names[o], count, in_place, i, g, e);
        }
    }
    /* nothing written past count */
    unsigned char guard[16];
    memset(guard, 0xA5, sizeof(guard));
    MT_CHECK(0 == memcmp(hout + (count + offset_elems) * t->size, guard, t->size),
             "%s %s count %zu: wrote past the end", t->name, op_names[o], count);
    cudaFree(dbuf_s);
    cudaFree(dbuf_r);
    free(hin);
    free(hout);
    return count > 0 ? 1 : 0;
}

/* Right after a 2-rank out-of-place float sum of 1 GiB: the copy-engine allreduce served it
 * where the two ranks run on two devices, and never where they share one (both ranks'
 * spinning reduce kernels left no room for the copies' flags under MPS). Only with the
 * default algorithm and copy-engine threshold. Returns the collectives it made. */
static int check_ce_choice(void)
{
    if (2 != nranks || NULL != getenv("OMPI_MCA_coll_gpu_allreduce_algorithm") ||
        NULL != getenv("OMPI_MCA_coll_gpu_cuda_ce_allreduce_min_bytes") ||
        NULL != getenv("OMPI_MCA_coll_gpu_backend")) {
        return 0;
    }
    /* the allreduce's algorithm, read before the allgather below replaces it */
    mt_proc_pvar_t alg;
    mt_comm_pvar_open(&alg, "coll_gpu_algorithm", MPI_COMM_WORLD);
    const unsigned long long a = mt_proc_pvar_read(&alg);
    mt_proc_pvar_close(&alg);
    char bus[2][32];
    memset(bus, 0, sizeof(bus));
    int dev = -1;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetPCIBusId(bus[rank], (int) sizeof(bus[0]) - 1, dev));
    MT_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, bus, 32, MPI_CHAR,
                               MPI_COMM_WORLD));
    const bool shared = 0 == strcmp(bus[0], bus[1]);
    enum { ALG_COPY_ENGINE = 5 }; /* the pvar's value for copy_engine */
    if (shared) {
        MT_CHECK(ALG_COPY_ENGINE != a,
                 "1 GiB allreduce, 2 ranks on one device: algorithm %llu "
                 "(copy_engine must not be taken there)",
                 a);
    } else {
        MT_CHECK(ALG_COPY_ENGINE == a,
                 "1 GiB allreduce, 2 ranks on two devices: algorithm %llu, "
                 "not copy_engine",
                 a);
    }
    if (0 == mt_world_rank()) {
        printf("1 GiB allreduce, 2 ranks on %s: algorithm %llu\n",
               shared ? "one shared device" : "two devices", a);
    }
    return 1; /* the allgather, an engine call */
}

int main(int argc, char **argv)
{
    int ndev = 0;
    if (cudaSuccess != cudaGetDeviceCount(&ndev) || 0 == ndev) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (0 == rank) {
            printf("skipped: no GPU\n");
        }
        MPI_Finalize();
        return 77;
    }
    mt_init(&argc, &argv, "test_cuda_allreduce");
    rank = mt_world_rank();
    nranks = mt_world_size();
    CUDA_OK(cudaSetDevice(rank % ndev));
    bool quick = argc > 1 && 0 == strcmp(argv[1], "quick");
    MPI_Op all_ops[10] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR,
                          MPI_BAND, MPI_BOR, MPI_BXOR};
    memcpy(ops, all_ops, sizeof(ops));
    const tdesc_t types[] = {
        {"int8", MPI_INT8_T, 1, K_INT},          {"uint8", MPI_UINT8_T, 1, K_UINT},
        {"signed char", MPI_SIGNED_CHAR, 1, K_INT}, {"unsigned char", MPI_UNSIGNED_CHAR, 1, K_UINT},
        {"short", MPI_SHORT, 2, K_INT},          {"unsigned short", MPI_UNSIGNED_SHORT, 2, K_UINT},
        {"int", MPI_INT, 4, K_INT},              {"unsigned", MPI_UNSIGNED, 4, K_UINT},
        {"long", MPI_LONG, 8, K_INT},            {"unsigned long", MPI_UNSIGNED_LONG, 8, K_UINT},
        {"long long", MPI_LONG_LONG, 8, K_INT},  {"uint64", MPI_UINT64_T, 8, K_UINT},
        {"int16", MPI_INT16_T, 2, K_INT},        {"uint16", MPI_UINT16_T, 2, K_UINT},
        {"int32", MPI_INT32_T, 4, K_INT},        {"uint32", MPI_UINT32_T, 4, K_UINT},
        {"int64", MPI_INT64_T, 8, K_INT},        {"aint", MPI_AINT, sizeof(MPI_Aint), K_INT},
        {"float", MPI_FLOAT, 4, K_FLOAT},        {"double", MPI_DOUBLE, 8, K_FLOAT},
        {"long double", MPI_LONG_DOUBLE, sizeof(long double), K_FLOAT},
        {"bool", MPI_C_BOOL, 1, K_BOOL},         {"byte", MPI_BYTE, 1, K_BYTE},
    };
    const size_t ntypes = sizeof(types) / sizeof(types[0]);

    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    mt_pvars_mark(&pv);
    int calls = 0;

    /* every type x op, sizes around the oneshot/ring switch and odd counts */
    size_t small_counts[] = {0, 1, 3, (size_t) nranks - 1 > 0 ? (size_t) nranks - 1 : 2, 1031, 7777,
                             70001};
    for (size_t ti = 0; ti < ntypes; ++ti) {
        for (int o = 0; o < 10; ++o) {
            if (!op_valid(types[ti].kind, o)) {
                continue;
            }
            for (size_t ci = 0; ci < sizeof(small_counts) / sizeof(small_counts[0]); ++ci) {
                if (quick && ci > 5) { /* up to 7777: every block count of the oneshot */
                    continue;
                }
                for (int ip = 0; ip < 2; ++ip) {
                    calls += one_case(&types[ti], o, small_counts[ci], ip, &pv, 0, 0);
                }
            }
        }
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "type x op matrix");
    calls = 0;

    /* pointers into the middle of an allocation (1 element in: unaligned for vectors) */
    calls += one_case(&types[6], 0, 100003, false, &pv, 1, 0);
    calls += one_case(&types[19], 3, 100003, true, &pv, 3, 0);
    /* pointers a few bytes into an allocation, not aligned for the type's own loads (MPI
     * takes any address): staged on the ranks where they are, through oneshot (resident or
     * launched) and ring sizes, in and out of place */
    calls += one_case(&types[19], 0, 5, false, &pv, 0, 4); /* double +4 */
    calls += one_case(&types[19], 0, 1031, true, &pv, 0, 4);
    calls += one_case(&types[16], 3, 100003, false, &pv, 0, 4); /* int64 +4 */
    calls += one_case(&types[18], 0, 7777, false, &pv, 1, 2);   /* float +2 */
    calls += one_case(&types[14], 0, 300007, true, &pv, 0, 1);  /* int32 +1 */
    /* large, both algorithms' chunking and all channels */
    if (!quick) {
        size_t big[] = {(size_t) 4 << 20, ((size_t) 64 << 20) + 5};
        for (size_t b = 0; b < 2; ++b) {
            calls += one_case(&types[18], 0, big[b], b, &pv, 0, 0);
            calls += one_case(&types[6], 3, big[b] / 2 + 1, !b, &pv, 0, 0);
        }
        /* 1 GiB of floats */
        calls += one_case(&types[18], 0, (size_t) 256 << 20, false, &pv, 0, 0);
        calls += check_ce_choice();
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "offsets and large sizes");

    /* mixed memory kinds across ranks: odd ranks pass host buffers */
    {
        const size_t n = 300007;
        int *h = malloc(n * sizeof(int)), *r = malloc(n * sizeof(int));
        int *d = NULL;
        CUDA_OK(cudaMalloc((void **) &d, n * sizeof(int)));
        for (size_t i = 0; i < n; ++i) {
            h[i] = (int) (i % 1000) + rank;
        }
        int *sb = h, *rb = r;
        if (0 == rank % 2) {
            CUDA_OK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
            sb = rb = d;
        }
        MT_CHECK_MPI(MPI_Allreduce(0 == rank % 2 ? MPI_IN_PLACE : sb, rb, (int) n, MPI_INT,
                                   MPI_SUM, MPI_COMM_WORLD));
        if (0 == rank % 2) {
            CUDA_OK(cudaMemcpy(r, d, n * sizeof(int), cudaMemcpyDeviceToHost));
        }
        long bad = 0;
        for (size_t i = 0; i < n; ++i) {
            int e = (int) (i % 1000) * nranks + nranks * (nranks - 1) / 2;
            bad += r[i] != e;
        }
        MT_CHECK(0 == bad, "mixed host/device ranks: %ld wrong elements", bad);
        cudaFree(d);
        free(h);
        free(r);
        MT_EXPECT_PATH(&pv, 1, MT_PATH_ENGINE, "mixed host/device ranks");
    }

    /* the scans with mixed memory kinds across ranks (even ranks: device, in place; odd
     * ranks: host), a oneshot size and a chain size: rank r gets the sum over ranks up to it
     * (exscan: before it; rank 0's buffer keeps what it held) */
    for (int k = 0; k < 4; ++k) {
        const size_t n = k < 2 ? 1000 : 300007;
        const bool ex = 1 == k % 2;
        int *h = malloc(n * sizeof(int)), *r = malloc(n * sizeof(int));
        int *d = NULL;
        CUDA_OK(cudaMalloc((void **) &d, n * sizeof(int)));
        for (size_t i = 0; i < n; ++i) {
            h[i] = (int) (i % 1000) + rank;
            r[i] = -7;
        }
        int *rb = r;
        if (0 == rank % 2) {
            CUDA_OK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
            rb = d;
        }
        const void *sb = 0 == rank % 2 ? MPI_IN_PLACE : (const void *) h;
        if (ex) {
            MT_CHECK_MPI(MPI_Exscan(sb, rb, (int) n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        } else {
            MT_CHECK_MPI(MPI_Scan(sb, rb, (int) n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        }
        if (0 == rank % 2) {
            CUDA_OK(cudaMemcpy(r, d, n * sizeof(int), cudaMemcpyDeviceToHost));
        }
        const int upto = ex ? rank : rank + 1;
        long bad = 0;
        for (size_t i = 0; i < n; ++i) {
            const int e = 0 == upto ? (int) (i % 1000) /* rank 0's exscan: its input kept */
                                    : (int) (i % 1000) * upto + upto * (upto - 1) / 2;
            bad += r[i] != e;
        }
        MT_CHECK(0 == bad, "%s of %zu ints, mixed host/device ranks: %ld wrong elements",
                 ex ? "exscan" : "scan", n, bad);
        cudaFree(d);
        free(h);
        free(r);
    }
    MT_EXPECT_PATH(&pv, 4, MT_PATH_ENGINE, "scans, mixed host/device ranks");

    /* cudaMallocAsync pool memory, and managed memory */
    {
        const size_t n = 200003;
        cudaStream_t s;
        CUDA_OK(cudaStreamCreate(&s));
        float *a = NULL, *m = NULL;
        CUDA_OK(cudaMallocAsync((void **) &a, n * sizeof(float), s));
        CUDA_OK(cudaMallocManaged((void **) &m, n * sizeof(float), cudaMemAttachGlobal));
        float *h = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) {
            h[i] = (float) ((i % 7) + rank);
            m[i] = h[i];
        }
        CUDA_OK(cudaMemcpyAsync(a, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
        CUDA_OK(cudaStreamSynchronize(s));
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, a, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, m, (int) n, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD));
        CUDA_OK(cudaMemcpy(h, a, n * sizeof(float), cudaMemcpyDeviceToHost));
        long bad = 0, badm = 0;
        for (size_t i = 0; i < n; ++i) {
            bad += h[i] != (float) ((i % 7) * nranks + nranks * (nranks - 1) / 2);
            badm += m[i] != (float) ((i % 7) + nranks - 1);
        }
        MT_CHECK(0 == bad, "cudaMallocAsync buffer: %ld wrong", bad);
        MT_CHECK(0 == badm, "managed buffer: %ld wrong", badm);
        CUDA_OK(cudaFreeAsync(a, s));
        CUDA_OK(cudaStreamSynchronize(s));
        cudaStreamDestroy(s);
        cudaFree(m);
        free(h);
        MT_EXPECT_PATH(&pv, 2, MT_PATH_ENGINE, "cudaMallocAsync and managed");
    }

    /* small calls on managed memory (the resident kernel's sizes, whose completion is
     * released at GPU scope): written and read by the CPU right around each call, no
     * synchronize; the values change every call so a late result shows */
    {
        const size_t n = 1001;
        const int rounds = 200;
        int *m = NULL;
        CUDA_OK(cudaMallocManaged((void **) &m, n * sizeof(int), cudaMemAttachGlobal));
        long bad = 0;
        for (int it = 0; it < rounds; ++it) {
            for (size_t i = 0; i < n; ++i) {
                m[i] = (int) (i % 11) + rank + it;
            }
            MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, m, (int) n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            for (size_t i = 0; i < n; ++i) {
                bad += m[i] != ((int) (i % 11) + it) * nranks + nranks * (nranks - 1) / 2;
            }
        }
        MT_CHECK(0 == bad, "small managed allreduce read by the CPU: %ld wrong in %d calls", bad,
                 rounds);
        cudaFree(m);
        MT_EXPECT_PATH(&pv, rounds, MT_PATH_ENGINE, "small managed calls");
    }

    /* pinned host memory (cudaMallocHost) is host memory: on every rank, so the host
     * algorithms take the call */
    {
        const size_t n = 150001;
        double *p = NULL;
        CUDA_OK(cudaMallocHost((void **) &p, n * sizeof(double)));
        for (size_t i = 0; i < n; ++i) {
            p[i] = (double) (i % 13) + rank;
        }
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, p, (int) n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        long bad = 0;
        for (size_t i = 0; i < n; ++i) {
            bad += p[i] != (double) ((i % 13) * nranks + nranks * (nranks - 1) / 2);
        }
        MT_CHECK(0 == bad, "pinned host buffer: %ld wrong", bad);
        cudaFreeHost(p);
        MT_EXPECT_PATH(&pv, 1, MT_PATH_ENGINE, "pinned host memory");
    }

    /* derived datatype with a user op on device memory: staged fallback, correct result
     * (Open MPI itself rejects predefined ops on derived types) */
    {
        MPI_Datatype pair;
        MPI_Op pair_sum;
        MPI_Type_contiguous(2, MPI_INT, &pair);
        MPI_Type_commit(&pair);
        MPI_Op_create(pair_add, 1, &pair_sum);
        const int n = 5001;
        int *h = malloc(2 * n * sizeof(int)), *d = NULL;
        CUDA_OK(cudaMalloc((void **) &d, 2 * n * sizeof(int)));
        for (int i = 0; i < 2 * n; ++i) {
            h[i] = i + rank;
        }
        CUDA_OK(cudaMemcpy(d, h, 2 * n * sizeof(int), cudaMemcpyHostToDevice));
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, d, n, pair, pair_sum, MPI_COMM_WORLD));
        CUDA_OK(cudaMemcpy(h, d, 2 * n * sizeof(int), cudaMemcpyDeviceToHost));
        long bad = 0;
        for (int i = 0; i < 2 * n; ++i) {
            bad += h[i] != i * nranks + nranks * (nranks - 1) / 2;
        }
        MT_CHECK(0 == bad, "derived type on device (staged fallback): %ld wrong", bad);
        MPI_Op_free(&pair_sum);
        MPI_Type_free(&pair);
        cudaFree(d);
        free(h);
        MT_EXPECT_PATH(&pv, 1, MT_PATH_FALLBACK, "derived type on device");
    }

    /* alltoall on device buffers (staged through the host engine today) */
    {
        const int per = 4099;
        size_t n = (size_t) per * nranks;
        int *h = malloc(n * sizeof(int)), *d = NULL, *e = NULL;
        CUDA_OK(cudaMalloc((void **) &d, n * sizeof(int)));
        CUDA_OK(cudaMalloc((void **) &e, n * sizeof(int)));
        for (int p = 0; p < nranks; ++p) {
            for (int i = 0; i < per; ++i) {
                h[(size_t) p * per + i] = rank * 1000000 + p * 10000 + i;
            }
        }
        CUDA_OK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
        MT_CHECK_MPI(MPI_Alltoall(d, per, MPI_INT, e, per, MPI_INT, MPI_COMM_WORLD));
        CUDA_OK(cudaMemcpy(h, e, n * sizeof(int), cudaMemcpyDeviceToHost));
        long bad = 0;
        for (int p = 0; p < nranks; ++p) {
            for (int i = 0; i < per; ++i) {
                bad += h[(size_t) p * per + i] != p * 1000000 + rank * 10000 + i;
            }
        }
        MT_CHECK(0 == bad, "alltoall on device buffers: %ld wrong", bad);
        cudaFree(d);
        cudaFree(e);
        free(h);
        MT_EXPECT_PATH(&pv, 1, MT_PATH_ENGINE, "alltoall on device");
    }

    mt_pvars_close(&pv);
    return mt_finalize();
}
