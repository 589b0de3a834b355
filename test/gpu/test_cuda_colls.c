/*
 * GPU integration test: MPI_Bcast, MPI_Reduce, MPI_Allgather(v), MPI_Gather, MPI_Scatter,
 * MPI_Reduce_scatter_block and MPI_Alltoall on CUDA device buffers through coll/gpu's cuda backend,
 * each result checked against a reference every rank computes on the host from the same
 * deterministic inputs, and the pvars proving the engine served every call. With the
 * argument "shared" (ranks sharing a GPU without MPS, coll_gpu_cuda_time_sliced off: the
 * engine runs its host backend, device buffers staged through host copies) the same checks
 * at the quick sizes, without the inbox-cycle check of the cuda backend.
 *
 * Covers every root, MPI_IN_PLACE where MPI allows it, count 0, odd sizes and
 * offsets, host buffers on the cuda backend (on every rank: the host algorithms; on some
 * ranks only: staged through device scratch), a type
 * the kernels lack (long double: the host algorithm, on every rank alike), and a long
 * random mix of all of them with allreduce, so one collective's traffic on the shared
 * links is never mistaken for another's.
 *
 * Prints "skipped: no GPU" and exits 77 where no device is usable. Each rank uses
 * device (rank % device count). argv[1] = "quick" leaves out the largest sizes; "order",
 * "hog [ms]" and "sync [s]" run one check alone (their negative controls). The check of a
 * device-wide synchronize on another thread during back-to-back small calls runs first.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        MT_CHECK(cudaSuccess == e_, "%s: %s", #call, cudaGetErrorString(e_));                      \
    } while (0)

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_BXOR };

typedef struct {
    const char *name;
    MPI_Datatype dt;
    size_t size;
    int opk;
    MPI_Op op;
} rcase_t;

static rcase_t rcases[7];
static int nranks, rank;
static bool quick;

static void init_cases(void)
{
    rcase_t c[] = {
        {"int/SUM", MPI_INT, sizeof(int), O_SUM, MPI_SUM},
        {"float/SUM", MPI_FLOAT, sizeof(float), O_SUM, MPI_SUM},
        {"double/MAX", MPI_DOUBLE, sizeof(double), O_MAX, MPI_MAX},
        {"uchar/BXOR", MPI_UNSIGNED_CHAR, 1, O_BXOR, MPI_BXOR},
        {"int64/PROD", MPI_INT64_T, sizeof(int64_t), O_PROD, MPI_PROD},
        {"short/MIN", MPI_SHORT, sizeof(short), O_MIN, MPI_MIN},
        {"long double/SUM", MPI_LONG_DOUBLE, sizeof(long double), O_SUM, MPI_SUM},
    };
    memcpy(rcases, c, sizeof(c));
}

/* rank r's input element i (block blk) for an op: small integers, exact in floats */
static long long value(int r, size_t blk, size_t i, int opk)
{
    uint64_t h = mt_hash((uint64_t) r, blk, i, (uint64_t) opk);
    if (O_PROD == opk) {
        long long v = (long long) (h % 3);
        return 2 == v ? -1 : v + 1;
    }
    if (O_BXOR == opk) {
        return (long long) (h & 0xff);
    }
    return (long long) (h % 200) - 100;
}

static void put(void *buf, size_t i, const rcase_t *c, long long v)
{
    char *p = (char *) buf + i * c->size;
    if (MPI_INT == c->dt) {
        *(int *) p = (int) v;
    } else if (MPI_FLOAT == c->dt) {
        *(float *) p = (float) v;
    } else if (MPI_DOUBLE == c->dt) {
        *(double *) p = (double) v;
    } else if (MPI_UNSIGNED_CHAR == c->dt) {
        *(unsigned char *) p = (unsigned char) v;
    } else if (MPI_INT64_T == c->dt) {
        *(int64_t *) p = (int64_t) v;
    } else if (MPI_SHORT == c->dt) {
        *(short *) p = (short) v;
    } else {
        *(long double *) p = (long double) v;
    }
}

/* the reduction of all ranks' element i of block blk, on the host */
static long long reference(size_t blk, size_t i, int opk)
{
    long long acc = value(0, blk, i, opk);
    for (int r = 1; r < nranks; ++r) {
        long long v = value(r, blk, i, opk);
        switch (opk) {
        case O_SUM:
            acc += v;
            break;
        case O_PROD:
            acc *= v;
            break;
        case O_MAX:
            acc = v > acc ? v : acc;
            break;
        case O_MIN:
            acc = v < acc ? v : acc;
            break;
        default:
            acc ^= v;
            break;
        }
    }
    return acc;
}

static void *dev_alloc(size_t bytes)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes > 0 ? bytes : 1));
    return d;
}

static void to_dev(void *d, const void *h, size_t bytes)
{
    if (bytes > 0) {
        CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    }
}

static void from_dev(void *h, const void *d, size_t bytes)
{
    if (bytes > 0) {
        CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    }
}

/* bytes of a and b that differ, per element of size es */
static long diff(const void *a, const void *b, size_t n, size_t es)
{
    long bad = 0;
    for (size_t i = 0; i < n; ++i) {
        bad += 0 != memcmp((const char *) a + i * es, (const char *) b + i * es, es);
    }
    return bad;
}

/* elements of a reduction's type that differ: by value for long double, whose padding
 * bytes carry no value */
static long diff_typed(const void *a, const void *b, size_t n, const rcase_t *c)
{
    if (MPI_LONG_DOUBLE != c->dt) {
        return diff(a, b, n, c->size);
    }
    long bad = 0;
    for (size_t i = 0; i < n; ++i) {
        bad += ((const long double *) a)[i] != ((const long double *) b)[i];
    }
    return bad;
}

static unsigned char pattern(int r, size_t i)
{
    return (unsigned char) (mt_hash((uint64_t) r, i, 7, 11) & 0xff);
}

/* ---- one checked call of each collective; host: 0 device buffers, 1 malloc'ed buffers, 2
 * malloc'ed on odd ranks and device on even ones (a communicator may mix them in one call) */
#define HOST_MIXED 2
static bool mine_host(int host)
{
    return HOST_MIXED == host ? 1 == (rank & 1) : 0 != host;
}

static void check_bcast(size_t bytes, int root, int mode)
{
    const bool host = mine_host(mode);
    unsigned char *h = mt_xmalloc(bytes + 1), *want = mt_xmalloc(bytes + 1);
    for (size_t i = 0; i < bytes; ++i) {
        want[i] = pattern(root, i);
        h[i] = rank == root ? want[i] : 0xee;
    }
    void *b = host ? h : dev_alloc(bytes);
    if (!host) {
        to_dev(b, h, bytes);
    }
    MT_CHECK_MPI(MPI_Bcast(b, (int) bytes, MPI_BYTE, root, MPI_COMM_WORLD));
    if (!host) {
        from_dev(h, b, bytes);
        cudaFree(b);
    }
    long bad = diff(h, want, bytes, 1);
    MT_CHECK(0 == bad, "bcast %zu bytes root %d%s: %ld wrong", bytes, root, host ? " (host)" : "",
             bad);
    free(h);
    free(want);
}

static void check_allgather(size_t per, bool in_place, int mode)
{
    const bool host = mine_host(mode);
    const size_t total = per * (size_t) nranks;
    int *h = mt_xmalloc(total * sizeof(int) + 4), *want = mt_xmalloc(total * sizeof(int) + 4);
    for (int r = 0; r < nranks; ++r) {
        for (size_t i = 0; i < per; ++i) {
            want[(size_t) r * per + i] = (int) value(r, 0, i, O_SUM);
        }
    }
    for (size_t i = 0; i < total; ++i) {
        h[i] = in_place && i / per == (size_t) rank ? want[i] : -7;
    }
    int *mine = mt_xmalloc(per * sizeof(int) + 4);
    memcpy(mine, want + (size_t) rank * per, per * sizeof(int));
    void *r = host ? (void *) h : dev_alloc(total * sizeof(int));
    void *s = host ? (void *) mine : dev_alloc(per * sizeof(int));
    if (!host) {
        to_dev(r, h, total * sizeof(int));
        to_dev(s, mine, per * sizeof(int));
    }
    MT_CHECK_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : s, (int) per, MPI_INT, r, (int) per,
                               MPI_INT, MPI_COMM_WORLD));
    if (!host) {
        from_dev(h, r, total * sizeof(int));
        cudaFree(r);
        cudaFree(s);
    }
    long bad = diff(h, want, total, sizeof(int));
    MT_CHECK(0 == bad, "allgather %zu ints%s%s: %ld wrong", per, in_place ? " in place" : "",
             host ? " (host)" : "", bad);
    free(h);
    free(want);
    free(mine);
}

/* MPI_Allgatherv (mode 0: equal counts back to back; 1: unequal counts, blocks in reverse
 * rank order with gaps; 2: the same in place), MPI_Gather and MPI_Scatter (in place at the
 * root in mode 2) on device buffers: 3 calls, each checked whole (gaps included) against
 * the host's reference */
static void check_vgathers(size_t per, int root, int mode)
{
    const int n = nranks;
    int *counts = mt_xmalloc(sizeof(int) * (size_t) n),
        *displs = mt_xmalloc(sizeof(int) * (size_t) n);
    size_t at = 0;
    for (int q = 0; q < n; ++q) {
        const int p = 0 == mode ? q : n - 1 - q;
        counts[p] = (int) per + (0 == mode ? 0 : 3 * p);
        displs[p] = (int) at;
        at += (size_t) counts[p] + (0 == mode ? 0 : 2);
    }
    const size_t span = at + 1, whole = per * (size_t) n;
    const size_t cap = (span > whole ? span : whole) + 1;
    int *h = mt_xmalloc(cap * sizeof(int)), *want = mt_xmalloc(cap * sizeof(int));
    int *mine = mt_xmalloc(((size_t) counts[rank] + per + 1) * sizeof(int));
    void *r = dev_alloc(cap * sizeof(int)),
         *sd = dev_alloc(((size_t) counts[rank] + per + 1) * sizeof(int));
    /* allgatherv */
    for (size_t i = 0; i < span; ++i) {
        want[i] = h[i] = -7;
    }
    for (int p = 0; p < n; ++p) {
        for (int i = 0; i < counts[p]; ++i) {
            want[displs[p] + i] = (int) value(p, 1, (size_t) i, O_SUM);
        }
    }
    for (int i = 0; i < counts[rank]; ++i) {
        mine[i] = want[displs[rank] + i];
        if (2 == mode) {
            h[displs[rank] + i] = mine[i];
        }
    }
    to_dev(r, h, span * sizeof(int));
    to_dev(sd, mine, (size_t) counts[rank] * sizeof(int));
    MT_CHECK_MPI(MPI_Allgatherv(2 == mode ? MPI_IN_PLACE : sd, counts[rank], MPI_INT, r, counts,
                                displs, MPI_INT, MPI_COMM_WORLD));
    from_dev(h, r, span * sizeof(int));
    long bad = diff(h, want, span, sizeof(int));
    MT_CHECK(0 == bad, "allgatherv %zu ints mode %d: %ld wrong", per, mode, bad);
    /* gather to root */
    for (size_t i = 0; i < whole + 1; ++i) {
        h[i] = -7;
        want[i] = i < whole ? (int) value((int) (i / per), 2, i % per, O_SUM) : -7;
    }
    for (size_t i = 0; i < per; ++i) {
        mine[i] = want[(size_t) rank * per + i];
    }
    const bool in_place = 2 == mode && rank == root;
    if (in_place) {
        memcpy(h + (size_t) rank * per, mine, per * sizeof(int));
    }
    to_dev(r, h, (whole + 1) * sizeof(int));
    to_dev(sd, mine, per * sizeof(int));
    MT_CHECK_MPI(MPI_Gather(in_place ? MPI_IN_PLACE : sd, (int) per, MPI_INT, r, (int) per, MPI_INT,
                            root, MPI_COMM_WORLD));
    if (rank == root) {
        from_dev(h, r, (whole + 1) * sizeof(int));
        bad = diff(h, want, whole + 1, sizeof(int));
        MT_CHECK(0 == bad, "gather %zu ints root %d mode %d: %ld wrong", per, root, mode, bad);
    }
    /* scatter from root: want holds the whole message */
    to_dev(r, want, whole * sizeof(int)); /* read at the root only */
    for (size_t i = 0; i < per + 1; ++i) {
        mine[i] = -7;
    }
    to_dev(sd, mine, (per + 1) * sizeof(int));
    MT_CHECK_MPI(MPI_Scatter(r, (int) per, MPI_INT, in_place ? MPI_IN_PLACE : sd, (int) per,
                             MPI_INT, root, MPI_COMM_WORLD));
    from_dev(mine, sd, (per + 1) * sizeof(int));
    bad = mine[per] != -7;
    for (size_t i = 0; i < per && !in_place; ++i) {
        bad += mine[i] != want[(size_t) rank * per + i];
    }
    MT_CHECK(0 == bad, "scatter %zu ints root %d mode %d: %ld wrong", per, root, mode, bad);
    cudaFree(r);
    cudaFree(sd);
    free(h);
    free(want);
    free(mine);
    free(counts);
    free(displs);
}

/* The buffers of check_reduce_scatter and check_reduce start @p skew bytes into their
 * allocations: below the element size, not aligned for the type's loads (MPI takes any
 * address; coll/gpu stages such a buffer on its rank). */
static void check_reduce_scatter(const rcase_t *c, size_t count, bool in_place, size_t skew)
{
    const size_t es = c->size, total = count * (size_t) nranks;
    char *in = mt_xmalloc(total * es + 16), *out = mt_xmalloc(total * es + 16);
    char *want = mt_xmalloc(count * es + 16);
    for (int b = 0; b < nranks; ++b) {
        for (size_t i = 0; i < count; ++i) {
            put(in, (size_t) b * count + i, c, value(rank, (size_t) b, i, c->opk));
        }
    }
    for (size_t i = 0; i < count; ++i) {
        put(want, i, c, reference((size_t) rank, i, c->opk));
    }
    char *s0 = dev_alloc(total * es + skew), *r0 = dev_alloc(total * es + skew);
    char *s = s0 + skew, *r = r0 + skew;
    to_dev(in_place ? r : s, in, total * es);
    MT_CHECK_MPI(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : s, r, (int) count, c->dt, c->op,
                                          MPI_COMM_WORLD));
    from_dev(out, r, count * es);
    long bad = diff_typed(out, want, count, c);
    MT_CHECK(0 == bad, "reduce_scatter_block %s count %zu%s skew %zu: %ld wrong", c->name, count,
             in_place ? " in place" : "", skew, bad);
    cudaFree(s0);
    cudaFree(r0);
    free(in);
    free(out);
    free(want);
}

static void check_reduce(const rcase_t *c, size_t count, int root, bool in_place, size_t skew)
{
    const size_t es = c->size;
    char *in = mt_xmalloc(count * es + 16), *out = mt_xmalloc(count * es + 16);
    char *want = mt_xmalloc(count * es + 16);
    for (size_t i = 0; i < count; ++i) {
        put(in, i, c, value(rank, 0, i, c->opk));
        put(want, i, c, reference(0, i, c->opk));
    }
    const bool ip = in_place && rank == root;
    char *s0 = dev_alloc(count * es + skew), *r0 = dev_alloc(count * es + skew);
    char *s = s0 + skew, *r = r0 + skew;
    to_dev(ip ? r : s, in, count * es);
    MT_CHECK_MPI(
        MPI_Reduce(ip ? MPI_IN_PLACE : s, r, (int) count, c->dt, c->op, root, MPI_COMM_WORLD));
    if (rank == root) {
        from_dev(out, r, count * es);
        long bad = diff_typed(out, want, count, c);
        MT_CHECK(0 == bad, "reduce %s count %zu root %d%s skew %zu: %ld wrong", c->name, count,
                 root, ip ? " in place" : "", skew, bad);
    }
    /* a non-root's input is left alone */
    from_dev(out, ip ? r : s, count * es);
    MT_CHECK(0 == diff_typed(out, in, count, c) || ip, "reduce %s: input of rank %d modified",
             c->name, rank);
    cudaFree(s0);
    cudaFree(r0);
    free(in);
    free(out);
    free(want);
}

static void check_alltoall(size_t per, bool in_place, int mode)
{
    const bool host = mine_host(mode);
    const size_t total = per * (size_t) nranks;
    int *h = mt_xmalloc(total * sizeof(int) + 4), *want = mt_xmalloc(total * sizeof(int) + 4);
    int *o = mt_xmalloc(total * sizeof(int) + 4);
    for (int p = 0; p < nranks; ++p) {
        for (size_t i = 0; i < per; ++i) {
            h[(size_t) p * per + i] = (int) mt_hash((uint64_t) rank, (uint64_t) p, i, 3);
            want[(size_t) p * per + i] = (int) mt_hash((uint64_t) p, (uint64_t) rank, i, 3);
            o[(size_t) p * per + i] = -3;
        }
    }
    void *s = host ? (void *) h : dev_alloc(total * sizeof(int));
    void *r = in_place ? s : host ? (void *) o : dev_alloc(total * sizeof(int));
    if (!host) {
        to_dev(s, h, total * sizeof(int));
        if (!in_place) {
            to_dev(r, o, total * sizeof(int));
        }
    }
    MT_CHECK_MPI(MPI_Alltoall(in_place ? MPI_IN_PLACE : s, (int) per, MPI_INT, r, (int) per,
                              MPI_INT, MPI_COMM_WORLD));
    int *got = in_place && host ? h : o;
    if (!host) {
        from_dev(o, r, total * sizeof(int));
        cudaFree(s);
        if (!in_place) {
            cudaFree(r);
        }
    }
    long bad = diff(got, want, total, sizeof(int));
    MT_CHECK(0 == bad, "alltoall %zu ints per peer%s%s: %ld wrong", per,
             in_place ? " in place" : "", host ? " (host)" : "", bad);
    free(h);
    free(want);
    free(o);
}

/* Buffers carved out of one allocation at unaligned offsets (the copy-engine path maps a
 * peer's allocation and must add the buffer's offset in it), each used twice (the second
 * time through a cached mapping), with new contents each time. */
static void check_carved(size_t per)
{
    const size_t total = per * (size_t) nranks, tb = total * sizeof(int);
    char *base = dev_alloc(2 * tb + 3 * per + 8192);
    int *s = (int *) (base + 260), *r = (int *) (base + 260 + tb + 1028);
    unsigned char *b = (unsigned char *) (base + 2 * tb + 4096 + 13);
    int *h = mt_xmalloc(tb + 4), *want = mt_xmalloc(tb + 4);
    unsigned char *hb = mt_xmalloc(3 * per + 1), *wb = mt_xmalloc(3 * per + 1);
    for (int rep = 0; rep < 2; ++rep) {
        for (int p = 0; p < nranks; ++p) {
            for (size_t i = 0; i < per; ++i) {
                h[(size_t) p * per + i] = (int) mt_hash((uint64_t) rank, (uint64_t) p, i, 5 + rep);
                want[(size_t) p * per + i] =
                    (int) mt_hash((uint64_t) p, (uint64_t) rank, i, 5 + rep);
            }
        }
        to_dev(s, h, tb);
        CUDA_OK(cudaMemset(r, 0xfe, tb));
        MT_CHECK_MPI(MPI_Alltoall(s, (int) per, MPI_INT, r, (int) per, MPI_INT, MPI_COMM_WORLD));
        from_dev(h, r, tb);
        long bad = diff(h, want, total, sizeof(int));
        int later = h[0]; /* a wrong result: whether it was late, or lost */
        if (0 != bad) {
            CUDA_OK(cudaDeviceSynchronize());
            from_dev(&later, r, sizeof(int));
        }
        MT_CHECK(0 == bad,
                 "alltoall %zu ints per peer in a carved buffer (use %d): %ld wrong "
                 "(first element 0x%08x, want 0x%08x; after a device synchronize 0x%08x)",
                 per, rep + 1, bad, (unsigned) h[0], (unsigned) want[0], (unsigned) later);
        const int root = rep % nranks;
        for (size_t i = 0; i < 3 * per; ++i) {
            wb[i] = pattern(root + 10 * rep, i);
            hb[i] = rank == root ? wb[i] : 0xee;
        }
        to_dev(b, hb, 3 * per);
        MT_CHECK_MPI(MPI_Bcast(b, (int) (3 * per), MPI_BYTE, root, MPI_COMM_WORLD));
        from_dev(hb, b, 3 * per);
        bad = diff(hb, wb, 3 * per, 1);
        MT_CHECK(0 == bad, "bcast %zu bytes root %d in a carved buffer (use %d): %ld wrong",
                 3 * per, root, rep + 1, bad);
    }
    cudaFree(base);
    free(h);
    free(want);
    free(hb);
    free(wb);
}

static void check_allreduce(size_t count)
{
    const rcase_t *c = &rcases[0];
    int *in = mt_xmalloc(count * sizeof(int) + 4), *want = mt_xmalloc(count * sizeof(int) + 4);
    for (size_t i = 0; i < count; ++i) {
        in[i] = (int) value(rank, 0, i, O_SUM);
        want[i] = (int) reference(0, i, O_SUM);
    }
    void *d = dev_alloc(count * sizeof(int));
    to_dev(d, in, count * sizeof(int));
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, d, (int) count, c->dt, c->op, MPI_COMM_WORLD));
    from_dev(in, d, count * sizeof(int));
    long bad = diff(in, want, count, sizeof(int));
    MT_CHECK(0 == bad, "allreduce in the mix, count %zu: %ld wrong", count, bad);
    cudaFree(d);
    free(in);
    free(want);
}

/* Ordering after the default stream: each rank fills a large buffer with an asynchronous
 * cudaMemsetAsync on the legacy default stream, or in rounds 10-19 of every 20 on a blocking
 * stream of its own (it returns before the device has written anything), and at once runs
 * a collective on its last bytes: 64 KiB a rank, or in every other 5 rounds 256 bytes (the
 * resident kernel's smallest calls). Every result is what the fill
 * wrote (a byte per rank and round, combined on the host), never the previous round's: the
 * collective starts on the GPU after the fill (coll_gpu_cuda_stream_order). A bcast's
 * output is also filled, so a fill landing late would overwrite it. Returns the failures;
 * with coll_gpu_cuda_stream_order=none they are expected (the negative control). */
static unsigned char fill_byte(int r, int round)
{
    return (unsigned char) (1 + (r * 37 + round * 11) % 250);
}

static long check_default_stream_order(int rounds)
{
    const size_t fill = 256u << 20, most = (64u << 10) * (size_t) nranks;
    char *big = dev_alloc(fill);
    char *out = dev_alloc(most);
    unsigned char *h = mt_xmalloc(most);
    cudaStream_t blocking;
    CUDA_OK(cudaStreamCreate(&blocking));
    long failed = 0;
    for (int it = 0; it < rounds; ++it) {
        const size_t per = (it / 5) % 2 ? 256 : 64u << 10, tail = per * (size_t) nranks;
        cudaStream_t on = (it / 10) % 2 ? blocking : 0;
        unsigned char x = 0, m = 0; /* the ranks' bytes this round: their xor and max */
        for (int r = 0; r < nranks; ++r) {
            x ^= fill_byte(r, it);
            m = fill_byte(r, it) > m ? fill_byte(r, it) : m;
        }
        char *src = big + fill - tail;
        const int kind = it % 5, root = it % nranks;
        const char *names[] = {"allreduce", "alltoall", "reduce", "bcast", "allgather"};
        CUDA_OK(cudaMemsetAsync(big, fill_byte(rank, it), fill, on));
        int rc = MPI_SUCCESS;
        switch (kind) {
        case 0:
            rc = MPI_Allreduce(src, out, (int) per, MPI_UNSIGNED_CHAR, MPI_BXOR, MPI_COMM_WORLD);
            break;
        case 1:
            rc = MPI_Alltoall(src, (int) per, MPI_BYTE, out, (int) per, MPI_BYTE, MPI_COMM_WORLD);
            break;
        case 2:
            rc = MPI_Reduce(src, out, (int) per, MPI_UNSIGNED_CHAR, MPI_MAX, root, MPI_COMM_WORLD);
            break;
        case 3:
            rc = MPI_Bcast(src, (int) per, MPI_BYTE, root, MPI_COMM_WORLD);
            break;
        default:
            rc = MPI_Allgather(src, (int) per, MPI_BYTE, out, (int) per, MPI_BYTE, MPI_COMM_WORLD);
            break;
        }
        MT_CHECK(MPI_SUCCESS == rc, "default-stream order: %s returned %d", names[kind], rc);
        const bool whole = 1 == kind || 4 == kind; /* the output has a block per rank */
        const size_t got = whole ? tail : per;
        if (2 == kind && rank != root) {
            continue; /* no output off the root */
        }
        from_dev(h, 3 == kind ? src : out, got);
        long bad = 0;
        for (size_t i = 0; i < got; ++i) {
            const unsigned char want = 0 == kind   ? x
                                       : 2 == kind ? m
                                       : 3 == kind ? fill_byte(root, it)
                                                   : fill_byte((int) (i / per), it);
            bad += h[i] != want;
        }
        failed += 0 != bad;
        MT_CHECK(0 == bad,
                 "default-stream order, round %d: %s of %zu bytes a rank (fill on "
                 "the %s stream) read or left %ld bytes the fill had not written yet",
                 it, names[kind], per, on ? "blocking" : "default", bad);
    }
    CUDA_OK(cudaStreamDestroy(blocking));
    free(h);
    cudaFree(out);
    cudaFree(big);
    return failed;
}

/* A kernel that needs the whole device, on the default stream, ahead of a collective.
 * Written in PTX (this test is C; the runtime compiles it for the device when loaded):
 * one block per multiprocessor (each asks for all the shared memory a block may have, so
 * no other block shares its multiprocessor, ours included), and each block's first thread
 * counts itself in, then waits until every block has (a grid-wide barrier without a
 * cooperative launch) or `timeout` ns have passed, when it counts itself in `late` too.
 * Block 0 then writes its n ints: buf[i] = val + i. So the kernel finishes only once every
 * multiprocessor has been free at once: a resident kernel of ours that keeps its
 * multiprocessors while its host waits for this kernel (the ordering wait of a gated call)
 * makes every block it shuts out late. */
static const char hog_ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry cgpu_test_hog(.param .u64 p_count, .param .u64 p_late, .param .u64 p_buf,\n"
    "    .param .u32 p_n, .param .u32 p_val, .param .u64 p_timeout)\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<10>;\n"
    "    .reg .b64 %rd<12>;\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    setp.ne.u32 %p1, %r1, 0;\n"
    "    @%p1 bra DONE;\n"
    "    ld.param.u64 %rd1, [p_count];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    ld.param.u64 %rd2, [p_late];\n"
    "    cvta.to.global.u64 %rd2, %rd2;\n"
    "    ld.param.u64 %rd6, [p_timeout];\n"
    "    mov.u32 %r2, %nctaid.x;\n"
    "    atom.global.add.u32 %r3, [%rd1], 1;\n"
    "    mov.u64 %rd3, %globaltimer;\n"
    "WAIT:\n"
    "    ld.volatile.global.u32 %r4, [%rd1];\n"
    "    setp.ge.u32 %p2, %r4, %r2;\n"
    "    @%p2 bra ARRIVED;\n"
    "    mov.u64 %rd4, %globaltimer;\n"
    "    sub.u64 %rd5, %rd4, %rd3;\n"
    "    setp.le.u64 %p3, %rd5, %rd6;\n"
    "    @%p3 bra WAIT;\n"
    "    atom.global.add.u32 %r5, [%rd2], 1;\n"
    "ARRIVED:\n"
    "    mov.u32 %r6, %ctaid.x;\n"
    "    setp.ne.u32 %p1, %r6, 0;\n"
    "    @%p1 bra DONE;\n"
    "    ld.param.u64 %rd7, [p_buf];\n"
    "    cvta.to.global.u64 %rd7, %rd7;\n"
    "    ld.param.u32 %r7, [p_n];\n"
    "    ld.param.u32 %r8, [p_val];\n"
    "    mov.u32 %r6, 0;\n"
    "FILL:\n"
    "    setp.ge.u32 %p1, %r6, %r7;\n"
    "    @%p1 bra DONE;\n"
    "    mul.wide.u32 %rd8, %r6, 4;\n"
    "    add.u64 %rd9, %rd7, %rd8;\n"
    "    add.u32 %r9, %r8, %r6;\n"
    "    st.global.u32 [%rd9], %r9;\n"
    "    add.u32 %r6, %r6, 1;\n"
    "    bra FILL;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

/* Rounds of: a small allreduce (so our resident kernel runs), the whole-device kernel on
 * the legacy default stream writing the next allreduce's input, and at once that allreduce
 * (ints, SUM; 1 KiB: a resident call of one block; 64 KiB in every other round: several
 * blocks, whose block 0 alone polls the gate; both gated where the gate is on). Each result is the
 * sum of what the kernels wrote (computed here), and no block of the kernel may be late: a block
 * waiting past `timeout_ms` for the others means a multiprocessor was held while the host waited
 * for it (with coll_gpu_cuda_resident_idle_us far above the timeout: the negative control). Returns
 * the failed rounds. */
static long check_whole_device_kernel(int rounds, double timeout_ms)
{
    cudaLibrary_t lib;
    cudaKernel_t hog;
    CUDA_OK(cudaLibraryLoadData(&lib, hog_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUDA_OK(cudaLibraryGetKernel(&hog, lib, "cgpu_test_hog"));
    int dev = 0, sms = 0, smem = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_OK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CUDA_OK(cudaFuncSetAttribute((const void *) hog, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 smem));
    const size_t most = 16384; /* ints: 64 KiB */
    int *in = dev_alloc(most * sizeof(int)), *out = dev_alloc(most * sizeof(int));
    unsigned *ctl = dev_alloc(2 * sizeof(unsigned)); /* arrivals, late blocks */
    int *h = mt_xmalloc(most * sizeof(int));
    long failed = 0;
    double slowest = 0;
    for (int it = 0; it < rounds; ++it) {
        const size_t n = it % 2 ? most : 256;
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, out, 64, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CUDA_OK(cudaMemsetAsync(ctl, 0, 2 * sizeof(unsigned), 0));
        void *p_count = ctl, *p_late = ctl + 1, *p_buf = in;
        unsigned p_n = (unsigned) n, p_val = 1000u * (unsigned) (rank + 1) + (unsigned) it;
        unsigned long long p_timeout = (unsigned long long) (timeout_ms * 1e6);
        void *params[] = {&p_count, &p_late, &p_buf, &p_n, &p_val, &p_timeout};
        const double t0 = MPI_Wtime();
        CUDA_OK(cudaLaunchKernel((const void *) hog, (dim3){(unsigned) sms, 1, 1}, (dim3){32, 1, 1},
                                 params, (size_t) smem, 0));
        MT_CHECK_MPI(MPI_Allreduce(in, out, (int) n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        const double t = MPI_Wtime() - t0;
        slowest = t > slowest ? t : slowest;
        unsigned late[2];
        CUDA_OK(cudaMemcpy(late, ctl, sizeof(late), cudaMemcpyDeviceToHost));
        from_dev(h, out, n * sizeof(int));
        long bad = 0;
        for (size_t i = 0; i < n; ++i) {
            long long want = 0;
            for (int r = 0; r < nranks; ++r) {
                want += 1000ll * (r + 1) + it + (long long) i;
            }
            bad += h[i] != (int) want;
        }
        failed += 0 != bad || 0 != late[1];
        MT_CHECK(0 == late[1],
                 "whole-device kernel, round %d (%zu ints): %u of %d blocks "
                 "waited past %.0f ms for a multiprocessor (one was held while the host "
                 "waited)",
                 it, n, late[1], sms, timeout_ms);
        MT_CHECK(0 == bad,
                 "whole-device kernel, round %d: allreduce of %zu ints after it: "
                 "%ld wrong",
                 it, n, bad);
    }
    if (0 == rank) {
        printf("test_cuda_colls: whole-device kernel then allreduce: %d rounds, %d blocks, "
               "slowest %.1f us, %ld failed\n",
               rounds, sms, slowest * 1e6, failed);
    }
    free(h);
    cudaFree(ctl);
    cudaFree(out);
    cudaFree(in);
    CUDA_OK(cudaLibraryUnload(lib));
    return failed;
}

/* Split/dup loop: a released communicator's inbox and peer mappings serve the next one
 * (pool and IPC cache), so device memory, mappings and time per cycle stay flat. */
static void check_comm_cycles(int cycles)
{
    float *d = dev_alloc(1024 * sizeof(float));
    float h[1024];
    size_t free0 = 0, free1 = 0, total = 0;
    mt_proc_pvar_t miss, reuse; /* counters: growth since open */
    double t_first = 0, t_last = 0;
    const int window = cycles / 5;
    for (int it = 0; it < cycles; ++it) {
        if (window == it) { /* after warm-up: the pool holds what the loop needs */
            CUDA_OK(cudaMemGetInfo(&free0, &total));
            mt_proc_pvar_open(&miss, "coll_gpu_ipc_cache_misses");
            mt_proc_pvar_open(&reuse, "coll_gpu_inbox_reuses");
        }
        double t0 = MPI_Wtime();
        MPI_Comm c;
        if (it % 2) {
            MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        } else {
            MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, nranks - rank, &c)); /* reversed */
        }
        int crank;
        MPI_Comm_rank(c, &crank);
        for (int i = 0; i < 1024; ++i) {
            h[i] = (float) (crank + i % 7);
        }
        to_dev(d, h, sizeof(h));
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, d, 1024, MPI_FLOAT, MPI_SUM, c));
        from_dev(h, d, sizeof(h));
        long bad = 0;
        for (int i = 0; i < 1024; ++i) {
            bad += h[i] != (float) (nranks * (nranks - 1) / 2 + nranks * (i % 7));
        }
        MT_CHECK(0 == bad, "cycle %d: allreduce on a %s: %ld wrong", it, it % 2 ? "dup" : "split",
                 bad);
        MT_CHECK_MPI(MPI_Comm_free(&c));
        double dt = MPI_Wtime() - t0;
        if (it >= window && it < 2 * window) {
            t_first += dt;
        } else if (it >= cycles - window) {
            t_last += dt;
        }
    }
    CUDA_OK(cudaMemGetInfo(&free1, &total));
    const int readable = miss.ok && reuse.ok;
    const long long dmiss = (long long) mt_proc_pvar_read(&miss);
    const long long dreuse = (long long) mt_proc_pvar_read(&reuse);
    mt_proc_pvar_close(&miss);
    mt_proc_pvar_close(&reuse);
    const int measured = cycles - window;
    /* device memory: no growth beyond 64 MiB of noise (one inbox is larger than that) */
    MT_CHECK(free1 + (64u << 20) >= free0,
             "device memory fell from %zu to %zu free over %d "
             "communicator cycles",
             free0, free1, measured);
    if (readable) {
        MT_CHECK(0 == dmiss,
                 "%lld new peer mappings over %d cycles after warm-up (the IPC "
                 "cache should have served them)",
                 dmiss, measured);
        MT_CHECK(dreuse == measured, "%lld pooled inboxes reused over %d cycles", dreuse, measured);
    } else {
        MT_CHECK(0, "cannot read the coll_gpu_ipc_cache_misses / coll_gpu_inbox_reuses pvars");
    }
    if (0 == rank) {
        printf("comm cycles: %d (after %d warm-up): %.1f us per split/dup + allreduce + free "
               "(first %d: %.1f us, last %d: %.1f us), device memory free %zu -> %zu MiB, IPC "
               "misses +%lld, inbox reuses +%lld\n",
               measured, window, 1e6 * (t_first + t_last) / (2.0 * window), window,
               1e6 * t_first / window, window, 1e6 * t_last / window, free0 >> 20, free1 >> 20,
               dmiss, dreuse);
    }
    cudaFree(d);
}

/* The device-wide synchronize of another thread (no MPI there) while this one makes small
 * allreduces back to back, closer than the resident kernel's idle time: it must return while
 * the calls go on (the resident kernel is ended and launched again after
 * coll_gpu_cuda_resident_life_us), not only once they stop. Each round: a device allreduce
 * in place (ints, MAX: a resident call), then a host allreduce of two flags (SUM): how many
 * ranks' synchronizes have returned, how many ranks are past `deadline_s`. The rounds end when
 * every rank's has returned, or at the deadline: then a failure (with
 * coll_gpu_cuda_resident_life_us 0, the negative control, where the calls keep the kernel up).
 * Returns 1 on a failure. */
static atomic_int sync_done;
static double sync_us;

static void *device_sync_thread(void *arg)
{
    (void) arg;
    struct timespec ts = {0, 20 * 1000 * 1000}; /* the calls are under way by then */
    nanosleep(&ts, NULL);
    const double t0 = MPI_Wtime(); /* thread-safe in Open MPI: a clock read */
    cudaError_t e = cudaDeviceSynchronize();
    sync_us = (MPI_Wtime() - t0) * 1e6;
    atomic_store(&sync_done, cudaSuccess == e ? 1 : -1);
    return NULL;
}

static long check_sync_during_calls(double deadline_s)
{
    enum { N = 64 };
    int *d = dev_alloc(N * sizeof(int)), h[N];
    for (int i = 0; i < N; ++i) {
        h[i] = rank * 1000 + i;
    }
    CUDA_OK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
    MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, d, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    atomic_store(&sync_done, 0);
    pthread_t th;
    pthread_create(&th, NULL, device_sync_thread, NULL);
    const double t0 = MPI_Wtime();
    long rounds = 0;
    int flags[2], sum[2] = {0, 0};
    do {
        MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, d, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        flags[0] = 0 != atomic_load(&sync_done);
        flags[1] = MPI_Wtime() - t0 > deadline_s;
        MT_CHECK_MPI(MPI_Allreduce(flags, sum, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        ++rounds;
    } while (sum[0] < nranks && 0 == sum[1]);
    const double loop_s = MPI_Wtime() - t0;
    pthread_join(th, NULL);
    from_dev(h, d, sizeof(h));
    long bad = 0;
    for (int i = 0; i < N; ++i) {
        bad += h[i] != (nranks - 1) * 1000 + i;
    }
    MT_CHECK(atomic_load(&sync_done) > 0, "cudaDeviceSynchronize on the other thread failed");
    MT_CHECK(0 == bad, "allreduce MAX in place during the synchronize: %ld wrong", bad);
    MT_CHECK(sum[0] == nranks,
             "a device-wide synchronize on another thread waited for back-to-back small calls "
             "to stop: %d of %d ranks' returned within %.1f s (%ld rounds)",
             sum[0], nranks, deadline_s, rounds);
    if (0 == rank) {
        printf("test_cuda_colls: device-wide synchronize during back-to-back small calls: "
               "returned after %.0f us, %ld rounds in %.3f s\n",
               sync_us, rounds, loop_s);
    }
    cudaFree(d);
    return sum[0] == nranks && 0 == bad ? 0 : 1;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_cuda_colls");
    rank = mt_world_rank();
    nranks = mt_world_size();
    /* shared: ranks share a GPU without MPS and coll_gpu_cuda_time_sliced is off, so the
     * engine runs its host backend (quick sizes; no inbox pool nor IPC cache to check) */
    const bool shared = argc > 1 && 0 == strcmp(argv[1], "shared");
    quick = shared || (argc > 1 && 0 == strcmp(argv[1], "quick"));
    int ndev = 0;
    if (cudaSuccess != cudaGetDeviceCount(&ndev) || 0 == ndev) {
        if (0 == rank) {
            printf("test_cuda_colls: skipped: no GPU\n");
        }
        MPI_Finalize();
        return 77;
    }
    CUDA_OK(cudaSetDevice(rank % ndev));
    init_cases();
    if (argc > 1 && 0 == strcmp(argv[1], "order")) { /* this check alone (negative control) */
        long f = check_default_stream_order(50);
        printf("test_cuda_colls order: rank %d: %ld of 50 rounds wrong\n", rank, f);
        return mt_finalize();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "hog")) { /* this check alone (negative control) */
        const double ms = argc > 2 ? atof(argv[2]) : 1000;
        long f = check_whole_device_kernel(20, ms);
        printf("test_cuda_colls hog: rank %d: %ld of 20 rounds failed\n", rank, f);
        return mt_finalize();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "sync")) { /* this check alone (negative control) */
        const double s = argc > 2 ? atof(argv[2]) : 3;
        long f = check_sync_during_calls(s);
        printf("test_cuda_colls sync: rank %d: %ld failed\n", rank, f);
        return mt_finalize();
    }
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    check_sync_during_calls(3);

    /* count 0: every collective returns at once and writes nothing (which path serves
     * it is not the point here) */
    check_bcast(0, 0, false);
    check_allgather(0, false, false);
    check_reduce_scatter(&rcases[0], 0, false, 0);
    check_reduce(&rcases[1], 0, nranks - 1, true, 0);
    check_alltoall(0, false, false);
    mt_pvars_mark(&pv);

    /* bcast: every root, sizes across the pipelining thresholds */
    const size_t bsizes[] = {1, 13, 4096, 20000, 65537, (1u << 20) + 17, 64u << 20};
    const int nb = quick ? 6 : 7;
    long calls = 0;
    for (int root = 0; root < nranks; ++root) {
        for (int k = 0; k < nb; ++k) {
            check_bcast(bsizes[k], root, false);
            calls++;
        }
    }
    check_bcast(100003, nranks - 1, true);
    check_bcast(100003, 0, HOST_MIXED);
    check_bcast(77, nranks - 1, HOST_MIXED);
    calls += 3;
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "bcast");

    /* allgather */
    const size_t gsizes[] = {1, 1000, 8193, 262147, 4u << 20};
    const int ng = quick ? 4 : 5;
    calls = 0;
    for (int k = 0; k < ng; ++k) {
        check_allgather(gsizes[k], false, false);
        check_allgather(gsizes[k], true, false);
        calls += 2;
    }
    check_allgather(12345, false, true);
    check_allgather(12345, true, true);
    check_allgather(12345, false, HOST_MIXED);
    check_allgather(3, true, HOST_MIXED);
    calls += 4;
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "allgather");

    /* allgatherv, gather, scatter */
    const size_t vsizes[] = {1, 1000, 65537, 1u << 20};
    const int nv = quick ? 3 : 4;
    calls = 0;
    for (int k = 0; k < nv; ++k) {
        for (int mode = 0; mode < 3; ++mode) {
            check_vgathers(vsizes[k], (k + mode) % nranks, mode);
            calls += 3;
        }
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "allgatherv, gather and scatter");

    /* reduce_scatter_block and reduce: every case, every root */
    const size_t rsizes[] = {1, 1001, 3001, 262147, (3u << 20) + 7};
    const int nr = quick ? 4 : 5;
    calls = 0;
    for (size_t ci = 0; ci < sizeof(rcases) / sizeof(rcases[0]); ++ci) {
        for (int k = 0; k < nr; ++k) {
            if (4 == k && ci > 1) {
                continue; /* the largest size for two cases is enough */
            }
            check_reduce_scatter(&rcases[ci], rsizes[k], false, 0);
            check_reduce_scatter(&rcases[ci], rsizes[k], 0 == ci % 2, 0);
            calls += 2;
            for (int root = 0; root < nranks; ++root) {
                check_reduce(&rcases[ci], rsizes[k], root, 1 == (root + (int) ci) % 2, 0);
                calls++;
            }
        }
    }
    /* buffers a few bytes off their type's alignment (double, int64, int), oneshot and
     * chain or ring sizes */
    for (int k = 1; k < 4; k += 2) {
        check_reduce_scatter(&rcases[2], rsizes[k], false, 4);
        check_reduce_scatter(&rcases[4], rsizes[k], true, 4);
        check_reduce(&rcases[2], rsizes[k], 0, false, 4);
        check_reduce(&rcases[0], rsizes[k], nranks - 1, true, 2);
        calls += 4;
    }
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "reduce_scatter_block and reduce");

    /* alltoall */
    const size_t asizes[] = {1, 3, 1000, 20000, 65537, 1u << 20, 8u << 20};
    const int na = quick ? 6 : 7;
    calls = 0;
    for (int k = 0; k < na; ++k) {
        check_alltoall(asizes[k], false, false);
        check_alltoall(asizes[k], true, false);
        calls += 2;
    }
    check_alltoall(40000, false, true);
    check_alltoall(40000, true, true);
    check_alltoall(40000, false, HOST_MIXED);
    check_alltoall(5, true, HOST_MIXED);
    calls += 4;
    MT_EXPECT_PATH(&pv, calls, MT_PATH_ENGINE, "alltoall");
    check_carved(1);
    check_carved(70001);
    check_carved(quick ? 300000 : 3000000);
    MT_EXPECT_PATH(&pv, 12, MT_PATH_ENGINE, "carved buffers");

    /* a random mix (same sequence on every rank) */
    uint64_t seed = 12345;
    const int nmix = quick ? 150 : 400;
    for (int it = 0; it < nmix; ++it) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int which = (int) ((seed >> 33) % 6);
        const size_t sz = 1 + (size_t) ((seed >> 17) % 300000);
        const int root = (int) ((seed >> 40) % (uint64_t) nranks);
        switch (which) {
        case 0:
            check_bcast(sz, root, false);
            break;
        case 1:
            check_allgather(sz / 4 + 1, 0 == (it & 1), false);
            break;
        case 2:
            check_reduce_scatter(&rcases[it % 3], sz / 8 + 1, 0 == (it & 2), 0);
            break;
        case 3:
            check_reduce(&rcases[it % 3], sz / 4 + 1, root, 0 == (it & 4), 0);
            break;
        case 4:
            check_alltoall(sz / 16 + 1, 0 == (it & 8), false);
            break;
        default:
            check_allreduce(sz / 4 + 1);
            break;
        }
    }
    MT_EXPECT_PATH(&pv, nmix, MT_PATH_ENGINE, "random mix");

    check_default_stream_order(quick ? 20 : 50);
    check_whole_device_kernel(quick ? 6 : 20, 1000);
    mt_pvars_close(&pv);
    if (!shared) { /* the inbox pool and IPC cache of the cuda backend */
        check_comm_cycles(quick ? 100 : 500);
    }
    return mt_finalize();
}
