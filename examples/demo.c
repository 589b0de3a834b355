/*
 * demo.c - what coll/gpu does for an ordinary MPI program.
 *
 * Four collectives (meant for 4 ranks, works with any number):
 *   1. MPI_Allreduce of one int (MPI_SUM),
 *   2. MPI_Allreduce of a large float array (MPI_SUM),
 *   3. MPI_Alltoall of ints,
 *   4. MPI_Allreduce with a user-defined op (MPI_Op_create).
 * After each, rank 0 prints which path served it, read from the coll/gpu MPI_T performance
 * variables of MPI_COMM_WORLD, and whether the result matched a host reference on all ranks.
 *
 * Build and run (host backend, so no GPU is needed):
 *   mpicc -std=gnu11 -O2 -o demo examples/demo.c
 *   mpirun -np 4 --mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host \
 *       --mca mca_base_component_path "$PWD/.libs:$(ompi_info --path pkglibdir --parsable | cut -d:
 * -f3)" \
 *       ./demo
 * Exit status: 0 when every result matched.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading the coll/gpu counters of a communicator through MPI_T ---- */

static const char *const pvar_names[2] = {"coll_gpu_engine_calls", "coll_gpu_fallback_calls"};

typedef struct {
    int inited; /* MPI_T initialized and a session created */
    int ok;     /* both counters found and bound to the communicator */
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle[2];
    unsigned long long last[2];
} counters_t;

/* Looks a pvar up by name: indices differ from run to run. Return: index or -1. */
static int find_pvar(const char *want)
{
    int num = 0;

    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num; ++i) {
        char name[256], desc[256];
        int name_len = sizeof(name), desc_len = sizeof(desc);
        int verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype dtype;
        MPI_T_enum enumtype;

        if (MPI_SUCCESS == MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &dtype,
                                               &enumtype, desc, &desc_len, &bind, &readonly,
                                               &continuous, &atomic) &&
            0 == strcmp(name, want)) {
            return i;
        }
    }
    return -1;
}

static void counters_open(counters_t *c, MPI_Comm *comm)
{
    int provided, count;

    memset(c, 0, sizeof(*c));
    if (MPI_SUCCESS != MPI_T_init_thread(MPI_THREAD_SINGLE, &provided)) {
        return;
    }
    if (MPI_SUCCESS != MPI_T_pvar_session_create(&c->session)) {
        MPI_T_finalize();
        return;
    }
    c->inited = 1;
    c->ok = 1;
    for (int w = 0; w < 2; ++w) {
        int idx = find_pvar(pvar_names[w]);

        if (idx < 0 ||
            MPI_SUCCESS != MPI_T_pvar_handle_alloc(c->session, idx, comm, &c->handle[w], &count)) {
            c->ok = 0;
            continue;
        }
        MPI_T_pvar_start(c->session, c->handle[w]); /* fails harmlessly if continuous */
        MPI_T_pvar_read(c->session, c->handle[w], &c->last[w]);
    }
}

/* Counter growth since the previous call: [0] engine, [1] fallback. */
static void counters_delta(counters_t *c, unsigned long long delta[2])
{
    for (int w = 0; w < 2; ++w) {
        unsigned long long now = c->last[w];

        delta[w] = 0;
        if (c->ok && MPI_SUCCESS == MPI_T_pvar_read(c->session, c->handle[w], &now)) {
            delta[w] = now - c->last[w];
            c->last[w] = now;
        }
    }
}

static void counters_close(counters_t *c)
{
    if (!c->inited) {
        return;
    }
    for (int w = 0; w < 2 && c->ok; ++w) {
        MPI_T_pvar_stop(c->session, c->handle[w]);
        MPI_T_pvar_handle_free(c->session, &c->handle[w]);
    }
    MPI_T_pvar_session_free(&c->session);
    MPI_T_finalize(); /* before MPI_Finalize: the other order crashes Open MPI 4.1 */
}

/* ---- reporting ---- */

static int all_ok = 1;

/*
 * Reads which path served the call just made (before anything else runs on the
 * communicator), has all ranks agree on the result, and lets rank 0 say what happened.
 * The agreement is a collective too: its counts are dropped by re-reading the counters.
 */
static void report(counters_t *c, const char *what, int local_ok)
{
    unsigned long long d[2], ignored[2];
    int ok = 0, rank;
    const char *path;

    counters_delta(c, d);
    MPI_Allreduce(&local_ok, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    counters_delta(c, ignored);
    all_ok = all_ok && ok;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (0 != rank) {
        return;
    }
    if (!c->ok) {
        path = "unknown (coll/gpu pvars not found: is the component loaded?)";
    } else if (d[0] > 0 && 0 == d[1]) {
        path = "engine";
    } else if (d[1] > 0 && 0 == d[0]) {
        path = "fallback (previous coll module)";
    } else if (0 == d[0] && 0 == d[1]) {
        path = "another coll module (coll/gpu does not serve this communicator)";
    } else {
        path = "engine and fallback (?)";
    }
    printf("%-44s served by: %-32s result %s\n", what, path,
           ok ? "matches the host reference" : "DOES NOT MATCH the host reference");
    fflush(stdout);
}

/* User op: elementwise maximum of absolute values (commutative). */
static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *a = in;
    int *b = inout;

    (void) dt;
    for (int i = 0; i < *len; ++i) {
        int x = abs(a[i]), y = abs(b[i]);
        b[i] = x > y ? x : y;
    }
}

static int user_value(int rank, int i)
{
    return ((rank * 7919 + i * 104729) % 2001) - 1000;
}

int main(int argc, char **argv)
{
    MPI_Comm world = MPI_COMM_WORLD;
    counters_t ctr;
    int rank, size, ok;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    counters_open(&ctr, &world);
    if (0 == rank) {
        printf("coll/gpu demo on %d rank%s%s\n", size, 1 == size ? "" : "s",
               1 == size ? " (coll/gpu declines single-rank communicators)" : "");
    }

    /* 1. one int */
    {
        int v = rank + 1, sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, world);
        report(&ctr, "MPI_Allreduce(1 x MPI_INT, MPI_SUM)", sum == size * (size + 1) / 2);
    }

    /* 2. a large float array: small integers, so the sum is exact in any order */
    {
        const int n = 1 << 20;
        float *x = malloc((size_t) n * sizeof(float)), *y = malloc((size_t) n * sizeof(float));
        float tri = (float) (size * (size + 1) / 2);

        for (int i = 0; i < n; ++i) {
            x[i] = (float) ((rank + 1) * (i % 7));
        }
        MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, world);
        ok = 1;
        for (int i = 0; i < n && ok; ++i) {
            ok = y[i] == tri * (float) (i % 7);
        }
        report(&ctr, "MPI_Allreduce(1M x MPI_FLOAT, MPI_SUM)", ok);
        free(y);
        free(x);
    }

    /* 3. alltoall: block for rank d from rank s holds s * 1000000 + d * 1000 + j */
    {
        const int n = 1024;
        int *s = malloc((size_t) n * size * sizeof(int)),
            *r = malloc((size_t) n * size * sizeof(int));

        for (int d = 0; d < size; ++d) {
            for (int j = 0; j < n; ++j) {
                s[d * n + j] = rank * 1000000 + d * 1000 + j % 1000;
            }
        }
        MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, world);
        ok = 1;
        for (int src = 0; src < size && ok; ++src) {
            for (int j = 0; j < n && ok; ++j) {
                ok = r[src * n + j] == src * 1000000 + rank * 1000 + j % 1000;
            }
        }
        report(&ctr, "MPI_Alltoall(1024 x MPI_INT per peer)", ok);
        free(r);
        free(s);
    }

    /* 4. a user-defined op: coll/gpu hands it to the previous coll module */
    {
        const int n = 1000;
        int x[1000], y[1000];
        MPI_Op op;

        for (int i = 0; i < n; ++i) {
            x[i] = user_value(rank, i);
        }
        MPI_Op_create(absmax, 1, &op);
        MPI_Allreduce(x, y, n, MPI_INT, op, world);
        ok = 1;
        for (int i = 0; i < n && ok; ++i) {
            int want = user_value(0, i);
            /* with one rank MPI applies no operation: the result is the input itself */
            if (size > 1) {
                want = abs(want);
                for (int r = 1; r < size; ++r) {
                    want = abs(user_value(r, i)) > want ? abs(user_value(r, i)) : want;
                }
            }
            ok = y[i] == want;
        }
        report(&ctr, "MPI_Allreduce(1000 x MPI_INT, user op)", ok);
        MPI_Op_free(&op);
    }

    counters_close(&ctr);
    if (0 == rank) {
        printf("demo: %s\n", all_ok ? "all results matched" : "SOME RESULTS DID NOT MATCH");
    }
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
