/*
 * test_alltoall.c - MPI_Alltoall through coll/gpu with predefined, contiguous derived,
 * strided (vector) derived and rank-dependent (but signature-equal) datatypes, for counts
 * 0, 1, 3, 1000 and one large count per peer (bigger than a 1 MiB staging area split
 * between the ranks), in place and not, on MPI_COMM_WORLD, a duplicate of it and the two
 * halves of a split by rank parity.
 *
 * Element j of the block that rank s sends to rank d is f(s, d, j), so every rank checks
 * what it received exactly and locally. Checked per call: the data, that the send buffer
 * (including the holes of the strided layout) is untouched, that guard bytes around the
 * receive buffer are untouched; per case: the coll/gpu counters say every call was
 * served by the engine (2+ ranks) or that coll/gpu stayed out (1 rank).
 */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 64
#define GUARD_BYTE 0xa5
#define HOLE_BYTE 0xee

/* The large case: this many bytes per peer at least, and more than 1 MiB / size. */
#define LARGE_BYTES_MIN 300000
#define STAGING_BYTES (1024 * 1024)

enum { B_INT, B_DOUBLE, B_BYTE, B_LDOUBLE };

enum {
    L_PLAIN,  /* the base type on both sides */
    L_CONTIG, /* MPI_Type_contiguous(k, base) on both sides */
    L_VECTOR, /* send: MPI_Type_vector(k, 1, 2, base); recv: MPI_Type_contiguous(k, base) */
    L_MIXED,  /* even ranks send k x base and receive 1 x contiguous(k);
               * odd ranks send 1 x contiguous(k) and receive k x base */
};

typedef struct {
    const char *name;
    int base;
    int layout;
    int k; /* base elements per unit (1 for L_PLAIN) */
} acase_t;

static const acase_t cases[] = {
    {"MPI_INT", B_INT, L_PLAIN, 1},
    {"MPI_DOUBLE", B_DOUBLE, L_PLAIN, 1},
    {"MPI_BYTE", B_BYTE, L_PLAIN, 1},
    {"MPI_LONG_DOUBLE", B_LDOUBLE, L_PLAIN, 1},
    {"contiguous(3 x MPI_DOUBLE)", B_DOUBLE, L_CONTIG, 3},
    {"send vector(4 x MPI_INT, stride 2), recv contiguous(4 x MPI_INT)", B_INT, L_VECTOR, 4},
    {"even ranks 5 x MPI_INT, odd ranks contiguous(5 x MPI_INT)", B_INT, L_MIXED, 5},
};

static MPI_Datatype base_dt(int base)
{
    switch (base) {
    case B_INT:
        return MPI_INT;
    case B_DOUBLE:
        return MPI_DOUBLE;
    case B_BYTE:
        return MPI_BYTE;
    default:
        return MPI_LONG_DOUBLE;
    }
}

static size_t base_size(int base)
{
    switch (base) {
    case B_INT:
        return sizeof(int);
    case B_DOUBLE:
        return sizeof(double);
    case B_BYTE:
        return 1;
    default:
        return sizeof(long double);
    }
}

/* Element j of the block rank src sends to rank dst, stored at p. */
static void put_value(void *p, int base, int src, int dst, size_t j, uint64_t salt)
{
    uint64_t h = mt_hash((uint64_t) src, (uint64_t) dst, j, salt);

    switch (base) {
    case B_INT: {
        int v = (int) (uint32_t) h;
        memcpy(p, &v, sizeof(v));
        break;
    }
    case B_DOUBLE: {
        double v = (double) (int32_t) h + 0.25; /* exact */
        memcpy(p, &v, sizeof(v));
        break;
    }
    case B_BYTE: {
        unsigned char v = (unsigned char) h;
        memcpy(p, &v, 1);
        break;
    }
    default: {
        long double v = (long double) (int64_t) (h >> 11) + 0.5L; /* exact: 53+1 bits */
        memcpy(p, &v, sizeof(v));
        break;
    }
    }
}

/* 1 when the element at got equals the one at want (values for floating point, since
 * long double has padding bytes; bytes otherwise). */
static int same_value(const void *got, const void *want, int base)
{
    if (B_DOUBLE == base) {
        double a, b;
        memcpy(&a, got, sizeof(a));
        memcpy(&b, want, sizeof(b));
        return a == b;
    }
    if (B_LDOUBLE == base) {
        long double a, b;
        memcpy(&a, got, sizeof(a));
        memcpy(&b, want, sizeof(b));
        return a == b;
    }
    return 0 == memcmp(got, want, base_size(base));
}

typedef struct {
    MPI_Comm comm;
    const char *label;
    int rank;
    int size;
    uint64_t salt;
    mt_pvars_t pv;
} ctx_t;

/* The datatypes one rank uses for a case. Units: base elements per datatype element. */
typedef struct {
    MPI_Datatype send, recv;
    int send_units, recv_units; /* base elements per send/recv datatype element */
    int send_vector;            /* send datatype is the strided vector */
    MPI_Aint send_extent, recv_extent;
    MPI_Datatype to_free[2];
    int nfree;
} types_t;

static void make_types(const acase_t *ac, int rank, types_t *t)
{
    MPI_Datatype b = base_dt(ac->base), contig = MPI_DATATYPE_NULL, vec = MPI_DATATYPE_NULL;
    MPI_Aint lb;

    memset(t, 0, sizeof(*t));
    if (ac->layout != L_PLAIN) {
        MPI_Type_contiguous(ac->k, b, &contig);
        MPI_Type_commit(&contig);
        t->to_free[t->nfree++] = contig;
    }
    switch (ac->layout) {
    case L_PLAIN:
        t->send = t->recv = b;
        t->send_units = t->recv_units = 1;
        break;
    case L_CONTIG:
        t->send = t->recv = contig;
        t->send_units = t->recv_units = ac->k;
        break;
    case L_VECTOR:
        MPI_Type_vector(ac->k, 1, 2, b, &vec);
        MPI_Type_commit(&vec);
        t->to_free[t->nfree++] = vec;
        t->send = vec;
        t->recv = contig;
        t->send_units = t->recv_units = ac->k;
        t->send_vector = 1;
        break;
    default: /* L_MIXED */
        if (0 == rank % 2) {
            t->send = b;
            t->send_units = 1;
            t->recv = contig;
            t->recv_units = ac->k;
        } else {
            t->send = contig;
            t->send_units = ac->k;
            t->recv = b;
            t->recv_units = 1;
        }
        break;
    }
    MPI_Type_get_extent(t->send, &lb, &t->send_extent);
    MPI_Type_get_extent(t->recv, &lb, &t->recv_extent);
}

static void free_types(types_t *t)
{
    for (int i = 0; i < t->nfree; ++i) {
        MPI_Type_free(&t->to_free[i]);
    }
}

/* Byte offset of base element j of one send block (the strided layout has holes). */
static size_t send_offset(const types_t *t, int base, size_t j)
{
    if (t->send_vector) {
        size_t unit = j / (size_t) t->send_units, q = j % (size_t) t->send_units;
        return unit * (size_t) t->send_extent + q * 2 * base_size(base);
    }
    return j * base_size(base);
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

/*
 * One MPI_Alltoall with @elems base elements per peer, checked.
 * Return: the number of calls that reach the coll modules: Open MPI's MPI_Alltoall returns
 * before calling any coll module when there are 0 bytes per peer, so those are not counted.
 */
static int one_call(ctx_t *c, const acase_t *ac, const types_t *t, size_t elems, int inplace)
{
    size_t bs = base_size(ac->base);
    int scount = (int) (elems / (size_t) t->send_units);
    int rcount = (int) (elems / (size_t) t->recv_units);
    size_t sblock = (size_t) scount * (size_t) t->send_extent; /* bytes per peer */
    size_t rblock = (size_t) rcount * (size_t) t->recv_extent;
    size_t sbytes = sblock * (size_t) c->size, rbytes = rblock * (size_t) c->size;
    unsigned char *send = mt_xmalloc(sbytes + 1);
    unsigned char *send_copy = mt_xmalloc(sbytes + 1);
    unsigned char *rraw = mt_xmalloc(rbytes + 2 * GUARD_BYTES);
    unsigned char *recv = rraw + GUARD_BYTES;
    unsigned char want[sizeof(long double)];
    long bad_peer = -1, bad_elem = -1;
    int rc;

    memset(send, HOLE_BYTE, sbytes + 1);
    memset(rraw, GUARD_BYTE, rbytes + 2 * GUARD_BYTES);
    for (int p = 0; p < c->size; ++p) {
        for (size_t j = 0; j < elems; ++j) {
            if (inplace) { /* in place, the data to send is laid out by the recv type */
                put_value(recv + (size_t) p * rblock + j * bs, ac->base, c->rank, p, j, c->salt);
            } else {
                put_value(send + (size_t) p * sblock + send_offset(t, ac->base, j), ac->base,
                          c->rank, p, j, c->salt);
            }
        }
    }
    memcpy(send_copy, send, sbytes + 1);

    if (inplace) {
        rc = MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, rcount, t->recv, c->comm);
    } else {
        rc = MPI_Alltoall(send, scount, t->send, recv, rcount, t->recv, c->comm);
    }
    MT_CHECK(MPI_SUCCESS == rc,
             "comm %s: MPI_Alltoall(%s, %zu elements per peer%s) returned %d (%s)", c->label,
             ac->name, elems, inplace ? ", in place" : "", rc, mt_mpi_errstr(rc));

    for (int p = 0; p < c->size && bad_peer < 0; ++p) {
        for (size_t j = 0; j < elems; ++j) {
            put_value(want, ac->base, p, c->rank, j, c->salt);
            if (!same_value(recv + (size_t) p * rblock + j * bs, want, ac->base)) {
                bad_peer = p;
                bad_elem = (long) j;
                break;
            }
        }
    }
    MT_CHECK(bad_peer < 0,
             "comm %s size %d: MPI_Alltoall(%s, %zu elements per peer%s): element %ld of the "
             "block from rank %ld is wrong",
             c->label, c->size, ac->name, elems, inplace ? ", in place" : "", bad_elem, bad_peer);
    MT_CHECK(guards_intact(rraw, GUARD_BYTES) && guards_intact(recv + rbytes, GUARD_BYTES),
             "comm %s: MPI_Alltoall(%s, %zu elements per peer%s) wrote outside recvbuf", c->label,
             ac->name, elems, inplace ? ", in place" : "");
    if (!inplace) {
        MT_CHECK(0 == memcmp(send, send_copy, sbytes + 1),
                 "comm %s: MPI_Alltoall(%s, %zu elements per peer) modified sendbuf", c->label,
                 ac->name, elems);
    }
    free(rraw);
    free(send_copy);
    free(send);
    return elems > 0;
}

static void run_case(ctx_t *c, const acase_t *ac)
{
    size_t unit_bytes = (size_t) ac->k * base_size(ac->base);
    size_t big_bytes = STAGING_BYTES / (size_t) c->size + 64 * 1024;
    size_t units[5];
    types_t t;
    long calls = 0;
    char what[160];

    if (big_bytes < LARGE_BYTES_MIN) {
        big_bytes = LARGE_BYTES_MIN;
    }
    units[0] = 0;
    units[1] = 1;
    units[2] = 3;
    units[3] = 1000;
    units[4] = (big_bytes + unit_bytes - 1) / unit_bytes;

    make_types(ac, c->rank, &t);
    for (int i = 0; i < 5; ++i) {
        for (int inplace = 0; inplace < 2; ++inplace) {
            calls += one_call(c, ac, &t, units[i] * (size_t) ac->k, inplace);
        }
    }
    free_types(&t);
    snprintf(what, sizeof(what), "MPI_Alltoall(%s)", ac->name);
    MT_EXPECT_PATH(&c->pv, calls, MT_PATH_ENGINE, what);
}

static void run_suite(MPI_Comm comm, const char *label, uint64_t salt)
{
    ctx_t c = {.comm = comm, .label = label, .salt = salt};

    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    mt_pvars_open(&c.pv, comm, label);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        run_case(&c, &cases[i]);
    }
    mt_pvars_close(&c.pv);
    mt_note("comm %s (size %d) done", label, c.size);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "test_alltoall");
    mt_run_world_dup_split(run_suite, 10);

    return mt_finalize();
}
