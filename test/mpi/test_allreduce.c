/*
 * test_allreduce.c - MPI_Allreduce through coll/gpu: every (predefined type, predefined op)
 * pair that MPI defines and the engine serves, for several counts, in place and not, on
 * MPI_COMM_WORLD, a duplicate of it and the two halves of a split by rank parity.
 *
 * Each rank generates the input of every rank from (rank, index, type, op, salt) with a
 * hash, so it computes the expected result of the whole reduction locally with scalar
 * code that shares nothing with the component. Checked per call: the result, that the
 * send buffer is untouched, that guard elements around the receive buffer are untouched;
 * per (type, op): the coll/gpu counters say every call was served by the engine (2+
 * ranks) or that coll/gpu stayed out (1 rank).
 *
 * Data is chosen so that MPI semantics pin the result exactly: signed SUM/PROD stay in
 * range (no signed overflow, which MPI leaves undefined), unsigned SUM/PROD wrap modulo
 * 2^bits, floating-point data is integer- or dyadic-valued so every order of summation
 * is exact; one extra case checks non-integer doubles with a relative tolerance.
 */
#include "mpitest.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_SINT, K_UINT, K_FLT, K_BOOL };
enum { F_FLOAT, F_DOUBLE, F_LDOUBLE };
enum { O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_NUM };

#define OPS_INT 0x3ffu /* all ten */
#define OPS_FLT ((1u << O_SUM) | (1u << O_PROD) | (1u << O_MIN) | (1u << O_MAX))
#define OPS_BOOL ((1u << O_LAND) | (1u << O_LOR) | (1u << O_LXOR))
#define OPS_BYTE ((1u << O_BAND) | (1u << O_BOR) | (1u << O_BXOR))

/* Guard elements on each side of the receive buffer. */
#define GUARD 3
#define GUARD_BYTE 0xa5

/* The large count: prime, and big enough to cross any staging/chunk size. */
#define LARGE_COUNT 262147

typedef struct {
    const char *name;
    MPI_Datatype dt;
    size_t size;
    int kind;
    int fkind;
    unsigned ops;
} tinfo_t;

typedef struct {
    const char *name;
    MPI_Op op;
} opinfo_t;

static tinfo_t types[32];
static int ntypes;
static opinfo_t ops[O_NUM];

static void add_type(const char *name, MPI_Datatype dt, size_t size, int kind, int fkind,
                     unsigned opmask)
{
    types[ntypes++] = (tinfo_t){
        .name = name, .dt = dt, .size = size, .kind = kind, .fkind = fkind, .ops = opmask};
}

#define ADD_INT(dt, ctype, issigned)                                                               \
    add_type(#dt, dt, sizeof(ctype), (issigned) ? K_SINT : K_UINT, 0, OPS_INT)

static void build_tables(void)
{
    ADD_INT(MPI_SIGNED_CHAR, signed char, 1);
    ADD_INT(MPI_UNSIGNED_CHAR, unsigned char, 0);
    ADD_INT(MPI_SHORT, short, 1);
    ADD_INT(MPI_UNSIGNED_SHORT, unsigned short, 0);
    ADD_INT(MPI_INT, int, 1);
    ADD_INT(MPI_UNSIGNED, unsigned, 0);
    ADD_INT(MPI_LONG, long, 1);
    ADD_INT(MPI_UNSIGNED_LONG, unsigned long, 0);
    ADD_INT(MPI_LONG_LONG, long long, 1);
    ADD_INT(MPI_UNSIGNED_LONG_LONG, unsigned long long, 0);
    ADD_INT(MPI_INT8_T, int8_t, 1);
    ADD_INT(MPI_UINT8_T, uint8_t, 0);
    ADD_INT(MPI_INT16_T, int16_t, 1);
    ADD_INT(MPI_UINT16_T, uint16_t, 0);
    ADD_INT(MPI_INT32_T, int32_t, 1);
    ADD_INT(MPI_UINT32_T, uint32_t, 0);
    ADD_INT(MPI_INT64_T, int64_t, 1);
    ADD_INT(MPI_UINT64_T, uint64_t, 0);
    ADD_INT(MPI_AINT, MPI_Aint, 1);
    ADD_INT(MPI_OFFSET, MPI_Offset, 1);
    ADD_INT(MPI_COUNT, MPI_Count, 1);
    add_type("MPI_FLOAT", MPI_FLOAT, sizeof(float), K_FLT, F_FLOAT, OPS_FLT);
    add_type("MPI_DOUBLE", MPI_DOUBLE, sizeof(double), K_FLT, F_DOUBLE, OPS_FLT);
    add_type("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, sizeof(long double), K_FLT, F_LDOUBLE, OPS_FLT);
    add_type("MPI_C_BOOL", MPI_C_BOOL, sizeof(bool), K_BOOL, 0, OPS_BOOL);
    add_type("MPI_BYTE", MPI_BYTE, 1, K_UINT, 0, OPS_BYTE);

    ops[O_SUM] = (opinfo_t){"MPI_SUM", MPI_SUM};
    ops[O_PROD] = (opinfo_t){"MPI_PROD", MPI_PROD};
    ops[O_MIN] = (opinfo_t){"MPI_MIN", MPI_MIN};
    ops[O_MAX] = (opinfo_t){"MPI_MAX", MPI_MAX};
    ops[O_LAND] = (opinfo_t){"MPI_LAND", MPI_LAND};
    ops[O_LOR] = (opinfo_t){"MPI_LOR", MPI_LOR};
    ops[O_LXOR] = (opinfo_t){"MPI_LXOR", MPI_LXOR};
    ops[O_BAND] = (opinfo_t){"MPI_BAND", MPI_BAND};
    ops[O_BOR] = (opinfo_t){"MPI_BOR", MPI_BOR};
    ops[O_BXOR] = (opinfo_t){"MPI_BXOR", MPI_BXOR};
}

static const tinfo_t *find_type(MPI_Datatype dt)
{
    for (int i = 0; i < ntypes; ++i) {
        if (types[i].dt == dt) {
            return &types[i];
        }
    }
    return NULL;
}

/* ---- element access: integers travel as uint64_t, floating point as long double ---- */

static unsigned bits_of(const tinfo_t *t)
{
    return (unsigned) (t->size * 8);
}

static uint64_t width_mask(const tinfo_t *t)
{
    return 64 == bits_of(t) ? ~0ULL : ((1ULL << bits_of(t)) - 1);
}

/* Truncates to the type's width, then sign-extends for signed types. */
static uint64_t norm_int(const tinfo_t *t, uint64_t v)
{
    unsigned b = bits_of(t);

    v &= width_mask(t);
    if (K_SINT == t->kind && b < 64 && (v >> (b - 1)) & 1) {
        v |= ~width_mask(t);
    }
    return v;
}

static void store_int(void *buf, size_t i, const tinfo_t *t, uint64_t v)
{
    unsigned char *p = (unsigned char *) buf + i * t->size;

    switch (t->size) {
    case 1: {
        uint8_t x = (uint8_t) v;
        memcpy(p, &x, 1);
        break;
    }
    case 2: {
        uint16_t x = (uint16_t) v;
        memcpy(p, &x, 2);
        break;
    }
    case 4: {
        uint32_t x = (uint32_t) v;
        memcpy(p, &x, 4);
        break;
    }
    default: {
        uint64_t x = v;
        memcpy(p, &x, 8);
        break;
    }
    }
}

static uint64_t load_int(const void *buf, size_t i, const tinfo_t *t)
{
    const unsigned char *p = (const unsigned char *) buf + i * t->size;
    uint64_t v = 0;

    switch (t->size) {
    case 1: {
        uint8_t x;
        memcpy(&x, p, 1);
        v = x;
        break;
    }
    case 2: {
        uint16_t x;
        memcpy(&x, p, 2);
        v = x;
        break;
    }
    case 4: {
        uint32_t x;
        memcpy(&x, p, 4);
        v = x;
        break;
    }
    default:
        memcpy(&v, p, 8);
        break;
    }
    return norm_int(t, v);
}

static void store_flt(void *buf, size_t i, const tinfo_t *t, long double v)
{
    unsigned char *p = (unsigned char *) buf + i * t->size;

    if (F_FLOAT == t->fkind) {
        float x = (float) v;
        memcpy(p, &x, sizeof(x));
    } else if (F_DOUBLE == t->fkind) {
        double x = (double) v;
        memcpy(p, &x, sizeof(x));
    } else {
        memcpy(p, &v, sizeof(v));
    }
}

static long double load_flt(const void *buf, size_t i, const tinfo_t *t)
{
    const unsigned char *p = (const unsigned char *) buf + i * t->size;

    if (F_FLOAT == t->fkind) {
        float x;
        memcpy(&x, p, sizeof(x));
        return x;
    }
    if (F_DOUBLE == t->fkind) {
        double x;
        memcpy(&x, p, sizeof(x));
        return x;
    }
    long double x;
    memcpy(&x, p, sizeof(x));
    return x;
}

/* Rounds v to what the type can hold. */
static long double round_flt(const tinfo_t *t, long double v)
{
    if (F_FLOAT == t->fkind) {
        return (float) v;
    }
    if (F_DOUBLE == t->fkind) {
        return (double) v;
    }
    return v;
}

/* ---- data generation ---- */

typedef struct {
    uint64_t i; /* integers and bool, normalized (sign-extended for signed types) */
    long double f;
} val_t;

/* The input element @idx of rank @rank, for (type, op); salt distinguishes cases. */
static val_t gen(const tinfo_t *t, int op, int rank, int size, size_t idx, uint64_t salt)
{
    uint64_t tag = ((uint64_t) (t - types) << 8) | (uint64_t) op;
    uint64_t h = mt_hash((uint64_t) rank, idx, tag, salt);
    uint64_t hi = mt_hash(0x5eedULL, idx, tag, salt); /* same on all ranks */
    unsigned b = bits_of(t);
    val_t v = {0, 0};

    if (K_FLT == t->kind) {
        switch (op) {
        case O_SUM: /* small integers: every summation order is exact */
            v.f = (long double) ((int64_t) (h % 101) - 50);
            break;
        case O_PROD: { /* dyadic factors of magnitude <= 2: exact products */
            static const long double f[] = {1.0L, -1.0L, 2.0L, 0.5L, -2.0L, -0.5L, 1.0L};
            v.f = f[h % 7];
            if (0 == hi % 23 && (uint64_t) rank == (hi >> 16) % (uint64_t) size) {
                v.f = 0.0L;
            }
            break;
        }
        default: /* MIN/MAX: exact in float (20 significant bits) */
            v.f = (long double) ((int64_t) (h % 2000001) - 1000000) / 64.0L;
            break;
        }
        v.f = round_flt(t, v.f);
        return v;
    }

    if (O_LAND == op || O_LOR == op || O_LXOR == op) {
        /* per index: all nonzero, all zero, or mixed, so every outcome occurs */
        int cls = (int) (hi % 3);
        int nonzero = (0 == cls) || (2 == cls && (h & 1));

        if (K_BOOL == t->kind) {
            v.i = nonzero ? 1 : 0;
        } else {
            /* a single random bit, often not bit 0: logical means "!= 0" */
            v.i = nonzero ? (1ULL << ((h >> 8) % b)) : 0;
        }
        v.i = norm_int(t, v.i);
        return v;
    }

    switch (op) {
    case O_SUM:
        if (K_SINT == t->kind) {
            /* |v| <= max / size: the exact sum is in range */
            uint64_t maxpos = width_mask(t) >> 1;
            uint64_t r = maxpos / (uint64_t) size;
            v.i = (uint64_t) ((int64_t) (h % (2 * r + 1)) - (int64_t) r);
        } else {
            v.i = h; /* wraps modulo 2^bits: defined for unsigned */
        }
        break;
    case O_PROD:
        if (K_SINT == t->kind) {
            /* +-1 everywhere, one rank per index contributes +-2 or +-3: in range */
            int64_t s = (0 == h % 3) ? -1 : 1;
            if ((uint64_t) rank == idx % (uint64_t) size) {
                s *= 2 + (int64_t) ((h >> 8) % 2);
            }
            v.i = (uint64_t) s;
        } else {
            v.i = (0 == h % 5) ? (h >> 3) : (h | 1);
        }
        if (0 == hi % 23 && (uint64_t) rank == (hi >> 16) % (uint64_t) size) {
            v.i = 0;
        }
        break;
    case O_BAND: /* most bits set, so the AND of all ranks is not always 0 */
        v.i = ~((1ULL << (h % b)) | (1ULL << ((h >> 8) % b)));
        break;
    case O_BOR: /* few bits set, so the OR of all ranks is not always all-ones */
        v.i = (1ULL << (h % b)) | (1ULL << ((h >> 8) % b));
        break;
    default: /* MIN, MAX, BXOR: full-width random */
        v.i = h;
        break;
    }
    v.i = norm_int(t, v.i);
    return v;
}

/* a op b, with MPI semantics for the type. */
static val_t apply(const tinfo_t *t, int op, val_t a, val_t b)
{
    val_t r = {0, 0};

    if (K_FLT == t->kind) {
        switch (op) {
        case O_SUM:
            r.f = a.f + b.f;
            break;
        case O_PROD:
            r.f = a.f * b.f;
            break;
        case O_MIN:
            r.f = a.f < b.f ? a.f : b.f;
            break;
        default:
            r.f = a.f > b.f ? a.f : b.f;
            break;
        }
        r.f = round_flt(t, r.f);
        return r;
    }
    switch (op) {
    case O_SUM:
        r.i = a.i + b.i; /* uint64_t: wraps; truncation below gives the 2's complement sum */
        break;
    case O_PROD:
        r.i = a.i * b.i;
        break;
    case O_MIN:
        if (K_SINT == t->kind) {
            r.i = (int64_t) a.i < (int64_t) b.i ? a.i : b.i;
        } else {
            r.i = a.i < b.i ? a.i : b.i;
        }
        break;
    case O_MAX:
        if (K_SINT == t->kind) {
            r.i = (int64_t) a.i > (int64_t) b.i ? a.i : b.i;
        } else {
            r.i = a.i > b.i ? a.i : b.i;
        }
        break;
    case O_LAND:
        r.i = (0 != a.i) && (0 != b.i);
        break;
    case O_LOR:
        r.i = (0 != a.i) || (0 != b.i);
        break;
    case O_LXOR:
        r.i = (0 != a.i) != (0 != b.i);
        break;
    case O_BAND:
        r.i = a.i & b.i;
        break;
    case O_BOR:
        r.i = a.i | b.i;
        break;
    default:
        r.i = a.i ^ b.i;
        break;
    }
    r.i = norm_int(t, r.i);
    return r;
}

static void put(void *buf, size_t i, const tinfo_t *t, val_t v)
{
    if (K_FLT == t->kind) {
        store_flt(buf, i, t, v.f);
    } else {
        store_int(buf, i, t, v.i);
    }
}

/* Fills buf[0..count) with this rank's input. */
static void fill_input(void *buf, const tinfo_t *t, int op, int rank, int size, size_t count,
                       uint64_t salt)
{
    for (size_t i = 0; i < count; ++i) {
        put(buf, i, t, gen(t, op, rank, size, i, salt));
    }
}

/*
 * The expected result: the reduction over ranks 0..size-1 in rank order. With one rank
 * this is the input itself (no operation is applied), which is what MPI specifies.
 */
static void fill_expected(void *buf, const tinfo_t *t, int op, int size, size_t count,
                          uint64_t salt)
{
    for (size_t i = 0; i < count; ++i) {
        val_t acc = gen(t, op, 0, size, i, salt);
        for (int r = 1; r < size; ++r) {
            acc = apply(t, op, acc, gen(t, op, r, size, i, salt));
        }
        put(buf, i, t, acc);
    }
}

/* Index of the first element that differs, or -1. Floating point compares values
 * (long double has padding bytes), everything else compares bytes. */
static long first_mismatch(const void *got, const void *want, const tinfo_t *t, size_t count)
{
    if (K_FLT != t->kind) {
        if (0 == memcmp(got, want, count * t->size)) {
            return -1;
        }
        for (size_t i = 0; i < count; ++i) {
            if (0 != memcmp((const char *) got + i * t->size, (const char *) want + i * t->size,
                            t->size)) {
                return (long) i;
            }
        }
        return -1;
    }
    for (size_t i = 0; i < count; ++i) {
        if (load_flt(got, i, t) != load_flt(want, i, t)) {
            return (long) i;
        }
    }
    return -1;
}

static void describe(char *s, size_t n, const void *buf, size_t i, const tinfo_t *t)
{
    if (K_FLT == t->kind) {
        snprintf(s, n, "%.21Lg", load_flt(buf, i, t));
    } else if (K_SINT == t->kind) {
        snprintf(s, n, "%lld", (long long) (int64_t) load_int(buf, i, t));
    } else {
        snprintf(s, n, "%llu (0x%llx)", (unsigned long long) load_int(buf, i, t),
                 (unsigned long long) load_int(buf, i, t));
    }
}

static int guards_intact(const unsigned char *g, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (GUARD_BYTE != g[i]) {
            return 0;
        }
    }
    return 1;
}

typedef struct {
    MPI_Comm comm;
    const char *label;
    int rank;
    int size;
    uint64_t salt;
    mt_pvars_t pv;
} ctx_t;

/*
 * One MPI_Allreduce of (t, op, count), in place or not, checked. The expected result is
 * passed in (computed once for both modes).
 * Return: the number of calls that reach the coll modules: Open MPI's MPI_Allreduce
 * returns before calling any coll module when count is 0, so those are not counted.
 */
static int one_call(ctx_t *c, const tinfo_t *t, int op, size_t count, int inplace,
                    const void *expected, uint64_t salt)
{
    size_t es = t->size, total = (count + 2 * GUARD) * es;
    unsigned char *recv = mt_xmalloc(total);
    unsigned char *recvp = recv + GUARD * es;
    unsigned char *send = mt_xmalloc(count * es + 1);
    unsigned char *send_copy = mt_xmalloc(count * es + 1);
    char want_s[96], got_s[96];
    long bad;
    int rc;

    memset(recv, GUARD_BYTE, total);
    memset(send, 0, count * es + 1);
    fill_input(inplace ? recvp : send, t, op, c->rank, c->size, count, salt);
    memcpy(send_copy, send, count * es + 1);

    rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recvp, (int) count, t->dt, ops[op].op,
                       c->comm);
    MT_CHECK(MPI_SUCCESS == rc, "comm %s: MPI_Allreduce(%s, %s, count %zu%s) returned %d (%s)",
             c->label, t->name, ops[op].name, count, inplace ? ", in place" : "", rc,
             mt_mpi_errstr(rc));

    bad = first_mismatch(recvp, expected, t, count);
    if (bad >= 0) {
        describe(want_s, sizeof(want_s), expected, (size_t) bad, t);
        describe(got_s, sizeof(got_s), recvp, (size_t) bad, t);
    }
    MT_CHECK(bad < 0,
             "comm %s size %d: MPI_Allreduce(%s, %s, count %zu%s): element %ld is %s, "
             "expected %s",
             c->label, c->size, t->name, ops[op].name, count, inplace ? ", in place" : "", bad,
             bad >= 0 ? got_s : "", bad >= 0 ? want_s : "");
    MT_CHECK(guards_intact(recv, GUARD * es) && guards_intact(recvp + count * es, GUARD * es),
             "comm %s: MPI_Allreduce(%s, %s, count %zu%s) wrote outside recvbuf[0..count)",
             c->label, t->name, ops[op].name, count, inplace ? ", in place" : "");
    if (!inplace) {
        MT_CHECK(0 == memcmp(send, send_copy, count * es + 1),
                 "comm %s: MPI_Allreduce(%s, %s, count %zu) modified sendbuf", c->label, t->name,
                 ops[op].name, count);
    }
    free(send_copy);
    free(send);
    free(recv);
    return count > 0;
}

/* All counts, in place and not, for one (type, op); then the path check. */
static void test_pair(ctx_t *c, const tinfo_t *t, int op, const size_t *counts, int ncounts)
{
    char what[128];
    long calls = 0;

    for (int k = 0; k < ncounts; ++k) {
        size_t count = counts[k];
        uint64_t salt = c->salt * 1000003ULL + count;
        void *expected = mt_xmalloc(count * t->size + 1);

        memset(expected, 0, count * t->size + 1);
        fill_expected(expected, t, op, c->size, count, salt);
        for (int inplace = 0; inplace < 2; ++inplace) {
            calls += one_call(c, t, op, count, inplace, expected, salt);
        }
        free(expected);
    }
    snprintf(what, sizeof(what), "MPI_Allreduce(%s, %s)", t->name, ops[op].name);
    MT_EXPECT_PATH(&c->pv, calls, MT_PATH_ENGINE, what);
}

/* Non-integer doubles: the summation order is the implementation's, so compare with a
 * relative tolerance against a long double reference. */
static void test_double_tolerance(ctx_t *c, size_t count)
{
    double *send = mt_xmalloc(count * sizeof(double) + 1);
    double *recv = mt_xmalloc(count * sizeof(double) + 1);
    long bad = -1;
    double bad_got = 0, bad_want = 0;
    uint64_t salt = c->salt ^ 0xd0b1eULL;

    for (size_t i = 0; i < count; ++i) {
        uint64_t h = mt_hash((uint64_t) c->rank, i, 77, salt);
        send[i] = ((double) (h >> 11) / 9007199254740992.0 - 0.5) * 1000.0 * (1 + c->rank % 3);
    }
    MT_CHECK_MPI(MPI_Allreduce(send, recv, (int) count, MPI_DOUBLE, MPI_SUM, c->comm));
    for (size_t i = 0; i < count && bad < 0; ++i) {
        long double sum = 0, sumabs = 0;
        for (int r = 0; r < c->size; ++r) {
            uint64_t h = mt_hash((uint64_t) r, i, 77, salt);
            double v = ((double) (h >> 11) / 9007199254740992.0 - 0.5) * 1000.0 * (1 + r % 3);
            sum += v;
            sumabs += fabs(v);
        }
        /* each of the size-1 additions rounds once: bound (size) * eps * sum|v| */
        if (fabsl((long double) recv[i] - sum) > (long double) c->size * DBL_EPSILON * sumabs) {
            bad = (long) i;
            bad_got = recv[i];
            bad_want = (double) sum;
        }
    }
    MT_CHECK(bad < 0,
             "comm %s: MPI_Allreduce(non-integer MPI_DOUBLE, MPI_SUM, count %zu): element %ld is "
             "%.17g, expected %.17g within relative tolerance",
             c->label, count, bad, bad_got, bad_want);
    MT_EXPECT_PATH(&c->pv, 1, MT_PATH_ENGINE, "MPI_Allreduce(non-integer MPI_DOUBLE, MPI_SUM)");
    free(recv);
    free(send);
}

static void run_suite(MPI_Comm comm, const char *label, uint64_t salt, int large)
{
    ctx_t c = {.comm = comm, .label = label, .salt = salt};
    size_t counts[6];

    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    counts[0] = 0;
    counts[1] = 1;
    counts[2] = (size_t) c.size - 1; /* fewer elements than ranks */
    counts[3] = 7;
    counts[4] = 13;
    counts[5] = 1031;
    mt_pvars_open(&c.pv, comm, label);

    for (int ti = 0; ti < ntypes; ++ti) {
        for (int op = 0; op < O_NUM; ++op) {
            if (types[ti].ops & (1u << op)) {
                test_pair(&c, &types[ti], op, counts, 6);
            }
        }
    }
    mt_note("comm %s (size %d): all type x op pairs done", label, c.size);

    if (large) {
        static const struct {
            int which; /* index into a list resolved below */
            int op;
        } big[] = {{0, O_SUM}, {1, O_SUM}, {2, O_MAX},  {3, O_BXOR},
                   {4, O_MIN}, {5, O_LOR}, {6, O_PROD}, {7, O_BAND}};
        const tinfo_t *bt[8] = {find_type(MPI_INT),           find_type(MPI_DOUBLE),
                                find_type(MPI_FLOAT),         find_type(MPI_UINT8_T),
                                find_type(MPI_LONG_LONG),     find_type(MPI_C_BOOL),
                                find_type(MPI_UNSIGNED_LONG), find_type(MPI_BYTE)};
        size_t lc = LARGE_COUNT;

        for (size_t k = 0; k < sizeof(big) / sizeof(big[0]); ++k) {
            test_pair(&c, bt[big[k].which], big[k].op, &lc, 1);
        }
        test_double_tolerance(&c, 100003);
        mt_note("comm %s (size %d): large counts done", label, c.size);
    }
    test_double_tolerance(&c, 1031);
    mt_pvars_close(&c.pv);
}

/* Alltoalls between allreduces on one communicator, each checked against what the ranks'
 * inputs say it must be: the alltoall and the allreduce in the stage areas share each rank's
 * stage, so neither may overwrite what a peer still reads of the other's. */
static void test_beside_alltoall(MPI_Comm comm, const char *label)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const size_t block = 3001, count = 100003;
    unsigned char *a_in = mt_xmalloc(block * (size_t) size);
    unsigned char *a_out = mt_xmalloc(block * (size_t) size);
    int *r_in = mt_xmalloc(count * sizeof(int)), *r_out = mt_xmalloc(count * sizeof(int));
    for (int it = 0; it < 6; ++it) {
        for (int p = 0; p < size; ++p) {
            for (size_t j = 0; j < block; ++j) {
                a_in[(size_t) p * block + j] = (unsigned char) (rank * 31 + p * 7 + (int) j + it);
            }
        }
        for (size_t i = 0; i < count; ++i) {
            r_in[i] = rank + (int) (i % 1000) + it;
        }
        int rc = MPI_Alltoall(a_in, (int) block, MPI_BYTE, a_out, (int) block, MPI_BYTE, comm);
        MT_CHECK(MPI_SUCCESS == rc, "comm %s: MPI_Alltoall returned %d", label, rc);
        rc = MPI_Allreduce(r_in, r_out, (int) count, MPI_INT, MPI_SUM, comm);
        MT_CHECK(MPI_SUCCESS == rc, "comm %s: MPI_Allreduce returned %d", label, rc);
        long bad_a = -1, bad_r = -1;
        for (int p = 0; p < size && bad_a < 0; ++p) {
            for (size_t j = 0; j < block && bad_a < 0; ++j) {
                if (a_out[(size_t) p * block + j] !=
                    (unsigned char) (p * 31 + rank * 7 + (int) j + it)) {
                    bad_a = (long) ((size_t) p * block + j);
                }
            }
        }
        for (size_t i = 0; i < count && bad_r < 0; ++i) {
            if (r_out[i] != size * ((int) (i % 1000) + it) + size * (size - 1) / 2) {
                bad_r = (long) i;
            }
        }
        MT_CHECK(bad_a < 0, "comm %s: alltoall %d beside allreduces: byte %ld wrong", label, it,
                 bad_a);
        MT_CHECK(bad_r < 0, "comm %s: allreduce %d beside alltoalls: element %ld wrong", label,
                 it, bad_r);
    }
    free(a_in);
    free(a_out);
    free(r_in);
    free(r_out);
}

int main(int argc, char **argv)
{
    MPI_Comm dup, half;
    int rank, size;

    mt_init(&argc, &argv, "test_allreduce");
    build_tables();
    rank = mt_world_rank();
    size = mt_world_size();

    run_suite(MPI_COMM_WORLD, "world", 1, 1);
    test_beside_alltoall(MPI_COMM_WORLD, "world");

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    run_suite(dup, "dup(world)", 2, 0);
    MPI_Comm_free(&dup);

    /* with np 2 or 3 this gives single-rank communicators, which coll/gpu declines */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    run_suite(half, rank % 2 ? "split(odd)" : "split(even)", 3, 1);
    MPI_Comm_free(&half);

    (void) size;
    return mt_finalize();
}
