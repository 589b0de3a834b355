/*
 * Every predefined datatype with every predefined op Open MPI accepts for it: MPI_CHAR (the
 * OSU benchmarks' default), MPI_WCHAR, MPI_CHARACTER, the C integers, the Fortran
 * INTEGER/REAL/DOUBLE PRECISION/LOGICAL kinds, C bool, byte, the complex types, and the
 * (value, index) pairs with MINLOC/MAXLOC (MPI_FLOAT_INT ... MPI_2DOUBLE_PRECISION; values
 * from a small range, so that equal values with different indices decide by the index; the
 * pairs with padding, MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_LONG_INT and MPI_LONG_DOUBLE_INT,
 * included: their padding is no part of the datatype, so the bytes of a receive buffer a call
 * may not write -- a pair's padding, and whatever lies after the elements it receives -- must
 * keep what they held).
 *
 * Which (type, op) pairs Open MPI accepts is asked of Open MPI itself (MPI_Reduce_local on
 * one element with errors returned); each accepted pair runs MPI_Allreduce at several counts,
 * MPI_Reduce to a root, MPI_Iallreduce, MPI_Reduce_scatter with unequal counts and
 * MPI_Ireduce_scatter in place, MPI_Scan, MPI_Iexscan, MPI_Iscan and MPI_Exscan (out of place
 * and in place), checked
 * against a reference this test computes:
 * integer SUM and PROD wrap like C's unsigned arithmetic (two's complement) -- the data is
 * chosen to overflow --, not the saturating sums an op component may compute on host memory;
 * floating data is integer-valued so any order of summation is exact; a pair's value and
 * index fields are compared, and its padding must be left as it was.
 * pvars: on 2+ ranks every pair of a type coll/gpu claims runs on the engine (all of them).
 *
 * Host buffers here; built with -DCGPU_TEST_CUDA (test/gpu/test_cuda_types) the same calls
 * run on device buffers.
 */
#include <complex.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "mt_twin.h"
#include "mpitest.h"

enum kind { SINT, UINT, FLT, LOGICAL, CPLX, PAIR };

/* a pair's field: an integer or floating number of @p size bytes at @p off */
typedef struct {
    bool flt;
    size_t size, off;
} field_t;

typedef struct {
    const char *name;
    MPI_Datatype dt;
    enum kind kind;
    size_t size; /* bytes of one element (a complex element: both parts; a pair: its extent) */
    bool engine; /* coll/gpu claims it (else: the previous module) */
    field_t val, idx; /* a pair's value and index */
} tdesc_t;

static const char *op_names[] = {"SUM",  "PROD", "MIN", "MAX",  "LAND",   "LOR",
                                 "LXOR", "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC"};
enum {
    O_SUM,
    O_PROD,
    O_MIN,
    O_MAX,
    O_LAND,
    O_LOR,
    O_LXOR,
    O_BAND,
    O_BOR,
    O_BXOR,
    O_MINLOC,
    O_MAXLOC,
    NOPS
};
static MPI_Op ops[NOPS];

static tdesc_t types[64];
static int ntypes;

static void add(const char *name, MPI_Datatype dt, enum kind k, bool engine)
{
    if (MPI_DATATYPE_NULL == dt) {
        return;
    }
    int size = 0;
    MPI_Type_size(dt, &size);
    if (size <= 0) {
        return; /* not available in this Open MPI build (e.g. no Fortran) */
    }
    types[ntypes++] = (tdesc_t){name, dt, k, (size_t) size, engine, {false, 0, 0}, {false, 0, 0}};
}

#define ADD(dt, k, engine) add(#dt, dt, k, engine)

/* a pair: the C struct {V v; I i;} the datatype describes (its extent is the struct's) */
static void add_pair(const char *name, MPI_Datatype dt, field_t v, field_t i, size_t extent,
                     bool engine)
{
    if (MPI_DATATYPE_NULL == dt) {
        return;
    }
    MPI_Aint lb = 0, ext = 0;
    int size = 0;
    MPI_Type_size(dt, &size);
    MPI_Type_get_extent(dt, &lb, &ext);
    if (size <= 0) {
        return; /* not in this build */
    }
    MT_CHECK(0 == lb && (size_t) ext == extent, "%s: extent %ld, expected %zu (C struct)", name,
             (long) ext, extent);
    types[ntypes++] = (tdesc_t){name, dt, PAIR, extent, engine, v, i};
}
#define PAIR_OF(dt, V, VF, I, IF, engine)                                                          \
    do {                                                                                           \
        struct p_ {                                                                                \
            V v;                                                                                   \
            I i;                                                                                   \
        };                                                                                         \
        add_pair(#dt, dt, (field_t){VF, sizeof(V), offsetof(struct p_, v)},                        \
                 (field_t){IF, sizeof(I), offsetof(struct p_, i)}, sizeof(struct p_), engine);     \
    } while (0)

static void build(void)
{
    const MPI_Op o[NOPS] = {MPI_SUM,  MPI_PROD, MPI_MIN, MPI_MAX,  MPI_LAND,   MPI_LOR,
                            MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC};
    memcpy(ops, o, sizeof(o));
    ADD(MPI_CHAR, (char) -1 < 0 ? SINT : UINT, true);
    ADD(MPI_SIGNED_CHAR, SINT, true);
    ADD(MPI_UNSIGNED_CHAR, UINT, true);
    ADD(MPI_WCHAR, (wchar_t) -1 < 0 ? SINT : UINT, true);
    ADD(MPI_SHORT, SINT, true);
    ADD(MPI_UNSIGNED_SHORT, UINT, true);
    ADD(MPI_INT, SINT, true);
    ADD(MPI_LONG, SINT, true);
    ADD(MPI_UNSIGNED_LONG, UINT, true);
    ADD(MPI_LONG_LONG, SINT, true);
    ADD(MPI_INT8_T, SINT, true);
    ADD(MPI_UINT16_T, UINT, true);
    ADD(MPI_UINT64_T, UINT, true);
    ADD(MPI_BYTE, UINT, true);
    ADD(MPI_C_BOOL, LOGICAL, true);
    ADD(MPI_FLOAT, FLT, true);
    ADD(MPI_DOUBLE, FLT, true);
    ADD(MPI_C_COMPLEX, CPLX, true);
    ADD(MPI_C_FLOAT_COMPLEX, CPLX, true);
    ADD(MPI_C_DOUBLE_COMPLEX, CPLX, true);
    ADD(MPI_CHARACTER, UINT, true);
    ADD(MPI_INTEGER, SINT, true);
    ADD(MPI_INTEGER1, SINT, true);
    ADD(MPI_INTEGER2, SINT, true);
    ADD(MPI_INTEGER4, SINT, true);
    ADD(MPI_INTEGER8, SINT, true);
    ADD(MPI_REAL, FLT, true);
    ADD(MPI_REAL4, FLT, true);
    ADD(MPI_REAL8, FLT, true);
    ADD(MPI_DOUBLE_PRECISION, FLT, true);
    ADD(MPI_LOGICAL, LOGICAL, true);
    ADD(MPI_COMPLEX, CPLX, true);
    ADD(MPI_DOUBLE_COMPLEX, CPLX, true);
    ADD(MPI_C_LONG_DOUBLE_COMPLEX, CPLX, true);
    PAIR_OF(MPI_FLOAT_INT, float, true, int, false, true);
    PAIR_OF(MPI_DOUBLE_INT, double, true, int, false, true);
    PAIR_OF(MPI_LONG_INT, long, false, int, false, true);
    PAIR_OF(MPI_2INT, int, false, int, false, true);
    PAIR_OF(MPI_SHORT_INT, short, false, int, false, true);
    PAIR_OF(MPI_LONG_DOUBLE_INT, long double, true, int, false, true);
    PAIR_OF(MPI_2REAL, float, true, float, true, true);
    PAIR_OF(MPI_2DOUBLE_PRECISION, double, true, double, true, true);
    PAIR_OF(MPI_2INTEGER, int, false, int, false, true);
}

/* Whether Open MPI accepts op on dt (asked of Open MPI, errors returned). */
static bool accepted(MPI_Datatype dt, MPI_Op op)
{
    long double a[4] = {0}, b[4] = {0}; /* room for one element of any type */
    return MPI_SUCCESS == MPI_Reduce_local(a, b, 1, dt, op);
}

/* ---- values and the reference ---- */

static uint64_t raw(uint64_t salt, int r, long i)
{
    return mt_hash(salt, (uint64_t) r, (uint64_t) i, 99);
}

/* Integer value of rank r's element i as a 64-bit pattern: any bits (SUM/PROD overflow and
 * must wrap), small for PROD so the product keeps some set bits. */
static uint64_t ival(const tdesc_t *t, int op, uint64_t salt, int r, long i)
{
    uint64_t v = raw(salt, r, i);
    if (O_PROD == op) {
        v = (v % 7) + 1 + ((v >> 8) % 2 ? (uint64_t) -8 : 0); /* 1..7 or negative */
    }
    if (LOGICAL == t->kind) {
        v = (v >> 5) % 3 ? 1 : 0;
    }
    return v;
}

static double fval(int op, uint64_t salt, int r, long i)
{
    uint64_t v = raw(salt, r, i);
    if (O_PROD == op) {
        static const double f[] = {1, 2, 0.5, -1, -2, 1, 4, -0.5};
        return f[v % 8];
    }
    return (double) ((int64_t) (v % 2001) - 1000); /* exact in any summation order */
}

static uint64_t trunc_bits(uint64_t v, size_t size)
{
    return 8 == size ? v : v & ((1ull << (8 * size)) - 1);
}

static int64_t sext(uint64_t v, size_t size)
{
    if (8 == size) {
        return (int64_t) v;
    }
    const uint64_t sign = 1ull << (8 * size - 1);
    v = trunc_bits(v, size);
    return (int64_t) ((v ^ sign) - sign);
}

static uint64_t iop(const tdesc_t *t, int op, uint64_t a, uint64_t b)
{
    const bool s = SINT == t->kind;
    switch (op) {
    case O_SUM: return a + b;
    case O_PROD: return a * b;
    case O_MIN:
        return s ? (sext(a, t->size) < sext(b, t->size) ? a : b)
                 : (trunc_bits(a, t->size) < trunc_bits(b, t->size) ? a : b);
    case O_MAX:
        return s ? (sext(a, t->size) > sext(b, t->size) ? a : b)
                 : (trunc_bits(a, t->size) > trunc_bits(b, t->size) ? a : b);
    case O_LAND: return 0 != trunc_bits(a, t->size) && 0 != trunc_bits(b, t->size);
    case O_LOR: return 0 != trunc_bits(a, t->size) || 0 != trunc_bits(b, t->size);
    case O_LXOR: return (0 != trunc_bits(a, t->size)) != (0 != trunc_bits(b, t->size));
    case O_BAND: return a & b;
    case O_BOR: return a | b;
    case O_BXOR: return a ^ b;
    }
    return 0;
}

/* a pair's field at e, as a long double (integers and floats of the sizes above) */
static long double get_field(const field_t *f, const char *e)
{
    e += f->off;
    if (f->flt) {
        if (4 == f->size) {
            float x;
            memcpy(&x, e, 4);
            return x;
        }
        if (8 == f->size) {
            double x;
            memcpy(&x, e, 8);
            return x;
        }
        long double x;
        memcpy(&x, e, sizeof(x));
        return x;
    }
    int64_t x = 0;
    memcpy(&x, e, f->size);
    return (long double) sext((uint64_t) x, f->size);
}

static void put_field(const field_t *f, char *e, long x)
{
    e += f->off;
    if (f->flt && 4 == f->size) {
        const float y = (float) x;
        memcpy(e, &y, 4);
    } else if (f->flt && 8 == f->size) {
        const double y = (double) x;
        memcpy(e, &y, 8);
    } else if (f->flt) {
        const long double y = (long double) x;
        memcpy(e, &y, sizeof(y));
    } else {
        const int64_t y = x;
        memcpy(e, &y, f->size); /* little endian: the low bytes */
    }
}

/* rank r's pair i: a value in -2..2 (ties are common) and an index in 0..6 */
static long pair_val(uint64_t salt, int r, long i)
{
    return (long) (raw(salt, r, i) % 5) - 2;
}

static long pair_idx(uint64_t salt, int r, long i)
{
    return (long) ((raw(salt, r, i) >> 16) % 7);
}

/* Writes rank r's element i into buf. */
static void put(const tdesc_t *t, int op, char *buf, uint64_t salt, int r, long i)
{
    char *e = buf + (size_t) i * t->size;
    if (PAIR == t->kind) {
        put_field(&t->val, e, pair_val(salt, r, i));
        put_field(&t->idx, e, pair_idx(salt, r, i));
    } else if (SINT == t->kind || UINT == t->kind || LOGICAL == t->kind) {
        uint64_t v = ival(t, op, salt, r, i);
        memcpy(e, &v, t->size); /* little endian: the low bytes */
    } else if (FLT == t->kind) {
        const double v = fval(op, salt, r, i);
        if (4 == t->size) {
            float f = (float) v;
            memcpy(e, &f, 4);
        } else {
            memcpy(e, &v, 8);
        }
    } else { /* complex: (re, im) */
        const double re = fval(op, salt, r, 2 * i), im = fval(op, salt + 1, r, 2 * i + 1);
        if (8 == t->size) {
            float _Complex c = CMPLXF((float) re, (float) im);
            memcpy(e, &c, 8);
        } else if (16 == t->size) {
            double _Complex c = CMPLX(re, im);
            memcpy(e, &c, 16);
        } else {
            long double _Complex c = CMPLXL(re, im);
            memcpy(e, &c, sizeof(c));
        }
    }
}

/* Whether the element at e equals the reduction of every rank's element i. */
static bool right_el(const tdesc_t *t, int op, const char *e, uint64_t salt, int n, long i)
{
    if (PAIR == t->kind) { /* MPI's rule, folded over the ranks */
        long v = pair_val(salt, 0, i), k = pair_idx(salt, 0, i);
        for (int r = 1; r < n; ++r) {
            const long w = pair_val(salt, r, i), j = pair_idx(salt, r, i);
            if (w == v) {
                k = j < k ? j : k;
            } else if (O_MINLOC == op ? w < v : w > v) {
                v = w;
                k = j;
            }
        }
        return get_field(&t->val, e) == (long double) v && get_field(&t->idx, e) == (long double) k;
    }
    if (SINT == t->kind || UINT == t->kind || LOGICAL == t->kind) {
        uint64_t acc = ival(t, op, salt, 0, i);
        for (int r = 1; r < n; ++r) {
            acc = iop(t, op, acc, ival(t, op, salt, r, i));
        }
        uint64_t g = 0;
        memcpy(&g, e, t->size);
        return trunc_bits(g, t->size) == trunc_bits(acc, t->size);
    }
    if (FLT == t->kind) {
        double acc = fval(op, salt, 0, i);
        for (int r = 1; r < n; ++r) {
            const double v = fval(op, salt, r, i);
            acc = O_SUM == op ? acc + v : O_PROD == op ? acc * v : O_MIN == op ? (v < acc ? v : acc)
                                                                              : (v > acc ? v : acc);
        }
        if (4 == t->size) {
            float f;
            memcpy(&f, e, 4);
            return f == (float) acc;
        }
        double d;
        memcpy(&d, e, 8);
        return d == acc;
    }
    long double _Complex acc = CMPLXL(fval(op, salt, 0, 2 * i), fval(op, salt + 1, 0, 2 * i + 1));
    for (int r = 1; r < n; ++r) {
        const long double _Complex v =
            CMPLXL(fval(op, salt, r, 2 * i), fval(op, salt + 1, r, 2 * i + 1));
        acc = O_SUM == op ? acc + v : acc * v; /* small values: exact */
    }
    if (8 == t->size) {
        float _Complex c;
        memcpy(&c, e, 8);
        return crealf(c) == (float) creall(acc) && cimagf(c) == (float) cimagl(acc);
    }
    if (16 == t->size) {
        double _Complex c;
        memcpy(&c, e, 16);
        return creal(c) == (double) creall(acc) && cimag(c) == (double) cimagl(acc);
    }
    long double _Complex c;
    memcpy(&c, e, sizeof(c));
    return creall(c) == creall(acc) && cimagl(c) == cimagl(acc);
}

/* How many bytes of the first @p n elements of @p r the call changed though it may not write
 * them: a pair's padding in the @p got elements it received, and with @p tail every byte of
 * the elements after those. @p was holds what r held before the call. */
static long kept_changed(const tdesc_t *t, const char *r, const char *was, long got, long n,
                         bool tail)
{
    long bad = 0;
    for (size_t b = 0; b < (size_t) n * t->size; ++b) {
        const size_t o = b % t->size;
        const bool mine = (long) (b / t->size) < got;
        const bool data =
            PAIR != t->kind || o < t->val.size || (o >= t->idx.off && o < t->idx.off + t->idx.size);
        bad += (mine ? !data : tail) && r[b] != was[b];
    }
    return bad;
}

/* Whether element i of got equals the reduction of every rank's element i. */
static bool right(const tdesc_t *t, int op, const char *got, uint64_t salt, int n, long i)
{
    return right_el(t, op, got + (size_t) i * t->size, salt, n, i);
}

/* Twin buffers of @p n pairs of @p t for one call, pushed to the device: *s holds every
 * element's input for @p op (its gaps 0xa0 + rank), *r and @p pat the fill pattern. */
static void pair_bufs(const tdesc_t *t, int op, long n, uint64_t salt, int rank, char fill,
                      char **s, char **r, char *pat)
{
    const size_t bytes = (size_t) n * t->size;
    *s = mt_twin_alloc(bytes);
    *r = mt_twin_alloc(bytes);
    memset(*s, 0xa0 + rank % 16, bytes);
    for (long i = 0; i < n; ++i) {
        put(t, op, *s, salt, rank, i);
    }
    memset(*r, fill, bytes);
    memset(pat, fill, bytes);
    mt_push(*s);
    mt_push(*r);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MT_ON_DEVICE ? "test_cuda_types" : "test_types");
    mt_twin_init();
    build();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mt_pvars_t pv;
    mt_pvars_open(&pv, MPI_COMM_WORLD, "world");
    const long counts[] = {1, 5, 4099};
    const long maxn = 4099;
    char *s = mt_twin_alloc(maxn * 32), *r = mt_twin_alloc(maxn * 32);
    char *pat = mt_xmalloc(maxn * 32), *in = mt_xmalloc(maxn * 32); /* r's bytes before a call */
    /* r's pattern before an out-of-place call, one per rank: whole elements moved between
     * ranks show too */
    const char fill = (char) (0x50 + rank % 16);
    memset(pat, fill, maxn * 32);
    int pairs = 0, engine_pairs = 0;
    const bool scan_fallback = mt_mca_is("scan_algorithm", "fallback");
    for (int ti = 0; ti < ntypes; ++ti) {
        const tdesc_t *t = &types[ti];
        for (int op = 0; op < NOPS; ++op) {
            if (!accepted(t->dt, ops[op])) {
                continue;
            }
            if ((CPLX == t->kind && op > O_PROD) || ((PAIR == t->kind) != (op >= O_MINLOC))) {
                MT_CHECK(0, "Open MPI accepts %s on %s", op_names[op], t->name);
                continue;
            }
            ++pairs;
            engine_pairs += t->engine;
            mt_pvars_mark(&pv);
            long calls = 0, bad = 0, cid_shaped = 0, prev_calls = 0, kept = 0;
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
                const long n = counts[k];
                const uint64_t salt = (uint64_t) ti * 1000 + (uint64_t) op * 10 + k;
                /* the input's padding differs from rank to rank and from r's pattern, so
                 * that whole elements written anywhere show */
                memset(s, 0xa0 + rank % 16, (size_t) n * t->size);
                for (long i = 0; i < n; ++i) {
                    put(t, op, s, salt, rank, i);
                }
                memset(r, fill, (size_t) n * t->size);
                mt_push(s);
                mt_push(r);
                MT_CHECK_MPI(MPI_Allreduce(MT_D(s), MT_D(r), (int) n, t->dt, ops[op],
                                           MPI_COMM_WORLD));
                mt_pull(r);
                for (long i = 0; i < n; ++i) {
                    bad += !right(t, op, r, salt, size, i);
                }
                kept += kept_changed(t, r, pat, n, n, true);
                /* reduce to the last rank, in place there */
                const int root = size - 1;
                memcpy(r, s, (size_t) n * t->size);
                memcpy(in, s, (size_t) n * t->size);
                mt_push(r);
                MT_CHECK_MPI(MPI_Reduce(rank == root ? MPI_IN_PLACE : MT_D(s), MT_D(r), (int) n,
                                        t->dt, ops[op], root, MPI_COMM_WORLD));
                mt_pull(r);
                for (long i = 0; rank == root && i < n; ++i) {
                    bad += !right(t, op, r, salt, size, i);
                }
                kept += rank == root ? kept_changed(t, r, in, n, n, true) : 0;
                /* non-blocking */
                memset(r, fill, (size_t) n * t->size);
                mt_push(r);
                MPI_Request req = MPI_REQUEST_NULL;
                MT_CHECK_MPI(MPI_Iallreduce(MT_D(s), MT_D(r), (int) n, t->dt, ops[op],
                                            MPI_COMM_WORLD, &req));
                MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                mt_pull(r);
                for (long i = 0; i < n; ++i) {
                    bad += !right(t, op, r, salt, size, i);
                }
                kept += kept_changed(t, r, pat, n, n, true);
                /* reduce_scatter, n elements split as evenly as n allows (unequal counts
                 * unless size divides n): blocking, then non-blocking in place */
                int *rc = mt_xmalloc(sizeof(int) * (size_t) size);
                long displ = 0;
                for (int p = 0; p < size; ++p) {
                    rc[p] = (int) (n / size + (p < n % size));
                    displ += p < rank ? rc[p] : 0;
                }
                memset(r, fill, (size_t) n * t->size);
                mt_push(r);
                MT_CHECK_MPI(MPI_Reduce_scatter(MT_D(s), MT_D(r), rc, t->dt, ops[op],
                                                MPI_COMM_WORLD));
                mt_pull(r);
                for (long i = 0; i < rc[rank]; ++i) {
                    bad += !right_el(t, op, r + (size_t) i * t->size, salt, size, displ + i);
                }
                kept += kept_changed(t, r, pat, rc[rank], n, true);
                memcpy(r, s, (size_t) n * t->size);
                memcpy(in, s, (size_t) n * t->size);
                mt_push(r);
                MT_CHECK_MPI(MPI_Ireduce_scatter(MPI_IN_PLACE, MT_D(r), rc, t->dt, ops[op],
                                                 MPI_COMM_WORLD, &req));
                MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                mt_pull(r);
                for (long i = 0; i < rc[rank]; ++i) {
                    bad += !right_el(t, op, r + (size_t) i * t->size, salt, size, displ + i);
                }
                /* in place, what follows the result was the input: MPI leaves it undefined */
                kept += kept_changed(t, r, in, rc[rank], n, false);
                free(rc);
                calls += 5;
                /* reduce_scatter_block, n / size elements a rank (the oneshot's block mode,
                 * LL lines included, on device builds) */
                const long blk = n / size;
                if (blk > 0) {
                    memset(r, fill, (size_t) n * t->size);
                    mt_push(r);
                    MT_CHECK_MPI(MPI_Reduce_scatter_block(MT_D(s), MT_D(r), (int) blk, t->dt,
                                                          ops[op], MPI_COMM_WORLD));
                    mt_pull(r);
                    for (long i = 0; i < blk; ++i) {
                        bad += !right_el(t, op, r + (size_t) i * t->size, salt, size,
                                         rank * blk + i);
                    }
                    kept += kept_changed(t, r, pat, blk, n, true);
                    calls += 1;
                }
                /* the scans, blocking and not, out of place and in place: the engine for
                 * the pairs it reduces, else the previous module (whose 8- and 16-bit sums
                 * coll/gpu makes wrap as well); rank 0's exscan output is left as it was */
                for (int form = 0; form < 4; ++form) {
                    const bool ex = form & 1, in_place = form >= 2;
                    if (in_place) {
                        memcpy(r, s, (size_t) n * t->size);
                    } else {
                        memset(r, fill, (size_t) n * t->size);
                    }
                    memcpy(in, r, (size_t) n * t->size);
                    mt_push(r);
                    const void *sb = in_place ? MPI_IN_PLACE : MT_D(s);
                    if (0 == form) {
                        MT_CHECK_MPI(
                            MPI_Scan(sb, MT_D(r), (int) n, t->dt, ops[op], MPI_COMM_WORLD));
                    } else if (1 == form) {
                        MT_CHECK_MPI(MPI_Iexscan(sb, MT_D(r), (int) n, t->dt, ops[op],
                                                 MPI_COMM_WORLD, &req));
                        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                    } else if (2 == form) {
                        MT_CHECK_MPI(
                            MPI_Iscan(sb, MT_D(r), (int) n, t->dt, ops[op], MPI_COMM_WORLD, &req));
                        MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
                    } else {
                        MT_CHECK_MPI(
                            MPI_Exscan(sb, MT_D(r), (int) n, t->dt, ops[op], MPI_COMM_WORLD));
                    }
                    mt_pull(r);
                    for (long i = 0; i < n; ++i) {
                        if (ex && 0 == rank) { /* ours leaves it untouched: the fill
                                                * pattern, or the input (MPI: undefined) */
                            const char *was = in_place ? s + (size_t) i * t->size : NULL;
                            for (size_t b = 0; t->engine && !scan_fallback && b < t->size; ++b) {
                                const char g = r[(size_t) i * t->size + b];
                                bad += NULL != was ? g != was[b] : fill != g;
                            }
                            continue;
                        }
                        /* scan: ranks 0 to this one; exscan: the ranks before this one */
                        bad += !right(t, op, r, salt, ex ? rank : rank + 1, i);
                    }
                    kept += ex && 0 == rank ? 0 : kept_changed(t, r, in, n, n, true);
                }
                calls += 4;
                prev_calls += t->engine && !scan_fallback ? 0 : 4;
                /* documented exception: an MPI_Iallreduce of 1-2 MPI_INT with MAX/MIN (the
                 * shape of Open MPI's own communicator-id agreement) takes the previous module */
                cid_shaped += n <= 2 && MPI_INT == t->dt && (O_MAX == op || O_MIN == op);
            }
            MT_CHECK(0 == bad, "%s %s: %ld wrong elements", t->name, op_names[op], bad);
            MT_CHECK(0 == kept,
                     "%s %s: %ld bytes written that the calls may not write (padding, or after the "
                     "result)",
                     t->name, op_names[op], kept);
            unsigned long long e = 0, f = 0;
            if (mt_pvars_available() && size >= 2 && 0 == mt_pvars_delta(&pv, &e, &f)) {
                MT_CHECK(t->engine ? e == (unsigned long long) (calls - cid_shaped - prev_calls) &&
                                         f == (unsigned long long) (cid_shaped + prev_calls)
                                   : 0 == e && f == (unsigned long long) calls,
                         "%s %s: %ld calls, engine_calls +%llu, fallback_calls +%llu (expected "
                         "all on the %s)",
                         t->name, op_names[op], calls, e, f, t->engine ? "engine" : "fallback");
            }
        }
    }
    /* a padded pair past one round of the engine's copies (16 MiB of input): MAXLOC on
     * MPI_DOUBLE_INT, an allreduce out of place and a reduce_scatter_block in place, whose
     * results and untouched bytes are checked as above */
    for (int ti = 0; ti < ntypes; ++ti) {
        const tdesc_t *t = &types[ti];
        if (MPI_DOUBLE_INT != t->dt) {
            continue;
        }
        const long per = (1L << 20) / size + 3, n = per * size; /* 16 MiB + 48 B a rank at most */
        char *bin = mt_xmalloc((size_t) n * t->size), *bpat = mt_xmalloc((size_t) n * t->size);
        const uint64_t salt = 777;
        long bad = 0, kept = 0;
        char *bs, *br;
        pair_bufs(t, O_MAXLOC, n, salt, rank, fill, &bs, &br, bpat);
        MT_CHECK_MPI(MPI_Allreduce(MT_D(bs), MT_D(br), (int) n, t->dt, MPI_MAXLOC, MPI_COMM_WORLD));
        mt_pull(br);
        for (long i = 0; i < n; ++i) {
            bad += !right(t, O_MAXLOC, br, salt, size, i);
        }
        kept += kept_changed(t, br, bpat, n, n, true);
        memcpy(br, bs, (size_t) n * t->size);
        memcpy(bin, bs, (size_t) n * t->size);
        mt_push(br);
        MT_CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, MT_D(br), (int) per, t->dt, MPI_MAXLOC,
                                              MPI_COMM_WORLD));
        mt_pull(br);
        for (long i = 0; i < per; ++i) {
            bad += !right_el(t, O_MAXLOC, br + (size_t) i * t->size, salt, size, rank * per + i);
        }
        kept += kept_changed(t, br, bin, per, per, true);
        MT_CHECK(0 == bad && 0 == kept,
                 "%s MAXLOC on %ld elements: %ld wrong, %ld bytes written that may not be", t->name,
                 n, bad, kept);
        mt_twin_free(bs);
        mt_twin_free(br);
        free(bin);
        free(bpat);
    }
    /* padded pairs, device buffers on even ranks and host buffers on odd ones (on device
     * builds): within one allreduce the ranks copy in and out differently (on the
     * collective's stream, around it, or in the kernel itself): allreduce out of place and
     * in place, reduce and scan, counts of one element up to past a oneshot call */
    for (int ti = 0; ti < ntypes; ++ti) {
        const tdesc_t *t = &types[ti];
        if (MPI_DOUBLE_INT != t->dt && MPI_SHORT_INT != t->dt && MPI_LONG_INT != t->dt) {
            continue;
        }
        const long counts[] = {1, 3, 1001, 70001};
        for (int ci = 0; ci < 4; ++ci) {
            const long n = counts[ci];
            const bool dev = 0 == rank % 2;
            const uint64_t salt = 900 + (uint64_t) ci;
            char *bpat = mt_xmalloc((size_t) n * t->size);
            char *bs, *br;
            pair_bufs(t, O_MINLOC, n, salt, rank, fill, &bs, &br, bpat);
            MT_CHECK_MPI(MPI_Allreduce(dev ? MT_D(bs) : bs, dev ? MT_D(br) : br, (int) n, t->dt,
                                       MPI_MINLOC, MPI_COMM_WORLD));
            if (dev) {
                mt_pull(br);
            }
            long bad = 0;
            for (long i = 0; i < n; ++i) {
                bad += !right(t, O_MINLOC, br, salt, size, i);
            }
            long kept = kept_changed(t, br, bpat, n, n, true);
            /* in place: the result over the input, whose gaps stay the input's */
            memcpy(br, bs, (size_t) n * t->size);
            memcpy(bpat, bs, (size_t) n * t->size);
            if (dev) {
                mt_push(br);
            }
            MT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, dev ? MT_D(br) : br, (int) n, t->dt,
                                       MPI_MINLOC, MPI_COMM_WORLD));
            if (dev) {
                mt_pull(br);
            }
            for (long i = 0; i < n; ++i) {
                bad += !right(t, O_MINLOC, br, salt, size, i);
            }
            kept += kept_changed(t, br, bpat, n, n, true);
            /* a reduce to rank 0 (device buffers) and a scan, out of place */
            for (int call = 0; call < 2; ++call) {
                memset(br, fill, (size_t) n * t->size);
                memset(bpat, fill, (size_t) n * t->size);
                if (dev) {
                    mt_push(br);
                }
                void *sb = dev ? MT_D(bs) : bs, *rb = dev ? MT_D(br) : br;
                if (0 == call) {
                    MT_CHECK_MPI(MPI_Reduce(sb, rb, (int) n, t->dt, MPI_MINLOC, 0, MPI_COMM_WORLD));
                } else {
                    MT_CHECK_MPI(MPI_Scan(sb, rb, (int) n, t->dt, MPI_MINLOC, MPI_COMM_WORLD));
                }
                if (dev) {
                    mt_pull(br);
                }
                const int upto = 0 == call ? size : rank + 1; /* the ranks reduced here */
                const bool got = 1 == call || 0 == rank;
                for (long i = 0; got && i < n; ++i) {
                    bad += !right(t, O_MINLOC, br, salt, upto, i);
                }
                kept += kept_changed(t, br, bpat, got ? n : 0, n, true);
            }
            MT_CHECK(0 == bad && 0 == kept,
                     "%s MINLOC on %ld elements, %s buffers on this rank, allreduce out of place "
                     "and in place, reduce, scan: %ld wrong, %ld bytes written that may not be",
                     t->name, n, dev ? "device" : "host", bad, kept);
            mt_twin_free(bs);
            mt_twin_free(br);
            free(bpat);
        }
    }
    /* an exscan whose rank 0 passes no receive buffer (it receives nothing): an int sum and
     * a padded pair's MINLOC, the other ranks' results and untouched bytes checked */
    for (int ti = 0; ti < ntypes; ++ti) {
        const tdesc_t *t = &types[ti];
        if (MPI_INT != t->dt && MPI_DOUBLE_INT != t->dt) {
            continue;
        }
        const int op = MPI_INT == t->dt ? O_SUM : O_MINLOC;
        const long n = 1001;
        const uint64_t salt = 950 + (uint64_t) ti;
        char *bpat = mt_xmalloc((size_t) n * t->size);
        char *bs, *br;
        pair_bufs(t, op, n, salt, rank, fill, &bs, &br, bpat);
        long bad = 0, kept = 0;
        for (int nb = 0; nb < 2; ++nb) { /* MPI_Exscan, then MPI_Iexscan */
            void *rb = 0 == rank ? NULL : MT_D(br);
            if (0 == nb) {
                MT_CHECK_MPI(MPI_Exscan(MT_D(bs), rb, (int) n, t->dt, ops[op], MPI_COMM_WORLD));
            } else {
                MPI_Request req = MPI_REQUEST_NULL;
                MT_CHECK_MPI(
                    MPI_Iexscan(MT_D(bs), rb, (int) n, t->dt, ops[op], MPI_COMM_WORLD, &req));
                MT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            }
            if (rank > 0) {
                mt_pull(br);
                for (long i = 0; i < n; ++i) {
                    bad += !right(t, op, br, salt, rank, i);
                }
                kept += kept_changed(t, br, bpat, n, n, true);
                memset(br, fill, (size_t) n * t->size);
                mt_push(br);
            }
        }
        MT_CHECK(0 == bad && 0 == kept,
                 "%s %s exscan and iexscan, no receive buffer on rank 0: %ld wrong, %ld bytes "
                 "written that may not be",
                 t->name, op_names[op], bad, kept);
        mt_twin_free(bs);
        mt_twin_free(br);
        free(bpat);
    }
    if (0 == rank) {
        printf("%d (type, op) pairs Open MPI accepts over %d types, %d of them on the engine\n",
               pairs, ntypes, engine_pairs);
    }
    /* the OSU default must be among them */
    MT_CHECK(accepted(MPI_CHAR, MPI_SUM), "Open MPI does not accept MPI_CHAR with MPI_SUM");
    mt_pvars_close(&pv);
    mt_twin_free(s);
    mt_twin_free(r);
    free(pat);
    free(in);
    return mt_finalize();
}
