/*
 * Profiler plugin test: run with --mca coll_gpu_profiler <check plugin> and the same path
 * as argv[1]. Four threads (MPI_THREAD_MULTIPLE) each drive their own duplicate of
 * MPI_COMM_WORLD, named "check-K", with allreduce and alltoall whose counts carry K, so
 * the checking plugin can tell if an event reaches the wrong communicator's context.
 * Every result is checked against a host reference; at the end the plugin must report
 * at least CGPU_PROF_MIN_EVENTS events (default 100,000), no mismatch, and every started
 * event stopped. Exit 0 on success on every rank.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

#define NTHREADS 4

typedef void (*report_fn)(unsigned long long *, unsigned long long *, unsigned long long *,
                          unsigned long long *);

static int size, iters;

typedef struct {
    MPI_Comm comm;
    int tag;
    int rank;  /* in comm */
    int iters;
    long failures;
} thread_arg_t;

static void *worker(void *p)
{
    thread_arg_t *t = p;
    const int K = t->tag, rank = t->rank;
    for (int it = 0; it < t->iters; ++it) {
        int count = K + 1000 * (it % 3); /* count % 1000 == K on this communicator */
        int *a = malloc(sizeof(int) * (size_t) count), *b = malloc(sizeof(int) * (size_t) count);
        for (int i = 0; i < count; ++i) {
            a[i] = rank + i + it;
        }
        if (MPI_SUCCESS != MPI_Allreduce(a, b, count, MPI_INT, MPI_SUM, t->comm)) {
            t->failures++;
        }
        for (int i = 0; i < count; ++i) {
            if (b[i] != size * (i + it) + size * (size - 1) / 2) {
                t->failures++;
                break;
            }
        }
        free(a);
        free(b);
        /* alltoall: K (+1000 j) bytes per peer */
        size_t per = (size_t) count;
        unsigned char *s = malloc(per * (size_t) size), *r = malloc(per * (size_t) size);
        for (int q = 0; q < size; ++q) {
            memset(s + (size_t) q * per, (rank * 7 + q * 3 + it) & 0xff, per);
        }
        if (MPI_SUCCESS != MPI_Alltoall(s, (int) per, MPI_BYTE, r, (int) per, MPI_BYTE, t->comm)) {
            t->failures++;
        }
        for (int q = 0; q < size; ++q) {
            unsigned char e = (unsigned char) ((q * 7 + rank * 3 + it) & 0xff);
            if (r[(size_t) q * per] != e || r[(size_t) q * per + per - 1] != e) {
                t->failures++;
                break;
            }
        }
        free(s);
        free(r);
    }
    return NULL;
}

/* coll_gpu_transport of a communicator: 0 shared memory, 1 CUDA IPC, -1 unreadable */
static int transport_kind(MPI_Comm comm)
{
    int provided, v = -1, is_int = 0, cnt;
    MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided);
    const int i = mt_pvar_index("coll_gpu_transport", &is_int);
    if (i >= 0) {
        MPI_T_pvar_session ses;
        MPI_T_pvar_handle h;
        MPI_T_pvar_session_create(&ses);
        if (MPI_SUCCESS == MPI_T_pvar_handle_alloc(ses, i, &comm, &h, &cnt)) {
            MPI_T_pvar_read(ses, h, &v);
            MPI_T_pvar_handle_free(ses, &h);
        }
        MPI_T_pvar_session_free(&ses);
    }
    MPI_T_finalize();
    return v;
}

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long failures = 0;
    unsigned long long min_events = getenv("CGPU_PROF_MIN_EVENTS")
                                        ? strtoull(getenv("CGPU_PROF_MIN_EVENTS"), NULL, 10)
                                        : 100000ull;
    const char *plugin = argc > 1 ? argv[1] : getenv("CGPU_PROF_CHECK_PLUGIN");
    if (provided < MPI_THREAD_MULTIPLE || NULL == plugin) {
        if (0 == rank) {
            printf("test_profiler: %s\n", NULL == plugin
                                               ? "usage: test_profiler <check plugin path> (or "
                                                 "CGPU_PROF_CHECK_PLUGIN)"
                                               : "MPI_THREAD_MULTIPLE not provided");
        }
        MPI_Finalize();
        return 1;
    }
    void *dl = dlopen(plugin, RTLD_NOW | RTLD_NOLOAD);
    report_fn report = NULL != dl ? (report_fn) dlsym(dl, "cgpu_check_plugin_report") : NULL;
    typedef void (*transport_fn)(unsigned long long *, unsigned long long *);
    transport_fn transport =
        NULL != dl ? (transport_fn) dlsym(dl, "cgpu_check_plugin_transport") : NULL;

    thread_arg_t args[NTHREADS];
    pthread_t th[NTHREADS];
    for (int k = 0; k < NTHREADS; ++k) {
        char name[32];
        MPI_Comm_dup(MPI_COMM_WORLD, &args[k].comm);
        snprintf(name, sizeof(name), "check-%d", k + 1);
        MPI_Comm_set_name(args[k].comm, name);
        args[k].tag = k + 1;
        args[k].rank = rank;
        args[k].failures = 0;
    }
    /* one collective sets the communicators' transport up; the host backend moves ring
     * items through shared-memory queues (transport events), the cuda backend runs kernels */
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, args[0].comm);
    /* 0 shm, 2-4 through the inter-node proxy: transport events; 1 (CUDA IPC): kernels */
    const int kind = transport_kind(args[0].comm);
    const int host_transport = 0 == kind || kind >= 2;
    /* size the run from the target: events per iteration (allreduce + alltoall) are the two
     * collective events plus, on the host, ring and alltoall steps, on the cuda backend a
     * kernel launch each */
    const int per_iter = host_transport ? 2 + 2 * (size - 1) + (size - 1) : 4;
    iters = (int) (min_events / (unsigned long long) (NTHREADS * per_iter)) + 50;
    /* CGPU_PROF_MIN_TRANSPORT: at least this many transport (proxy) operations; each
     * iteration's alltoall alone makes 2 (size - 1) per rank */
    const unsigned long long min_transport = getenv("CGPU_PROF_MIN_TRANSPORT")
        ? strtoull(getenv("CGPU_PROF_MIN_TRANSPORT"), NULL, 10) : 0;
    if (size > 1 && min_transport > 0) {
        const int t = (int) (min_transport / (unsigned long long) (NTHREADS * 2 * (size - 1))) + 50;
        iters = t > iters ? t : iters;
    }
    if (size < 2) {
        iters = 10; /* coll/gpu declines single-rank communicators: nothing to profile */
    }
    for (int k = 0; k < NTHREADS; ++k) {
        args[k].iters = iters;
    }
    /* a split communicator, driven by the main thread while the 4 workers run */
    thread_arg_t split = {.tag = NTHREADS + 1, .iters = iters / 4 + 1, .failures = 0};
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &split.comm); /* reversed ranks */
    MPI_Comm_set_name(split.comm, "check-5");
    MPI_Comm_rank(split.comm, &split.rank);
    for (int k = 0; k < NTHREADS; ++k) {
        pthread_create(&th[k], NULL, worker, &args[k]);
    }
    worker(&split);
    failures += split.failures;
    MPI_Comm_free(&split.comm);
    for (int k = 0; k < NTHREADS; ++k) {
        pthread_join(th[k], NULL);
        failures += args[k].failures;
        MPI_Comm_free(&args[k].comm);
    }
    if (failures) {
        printf("rank %d: %ld wrong results\n", rank, failures);
    }

    if (size >= 2) {
        unsigned long long ev = 0, mis = 0, unm = 0, live = 0;
        if (NULL == report) {
            printf("rank %d: the check plugin %s is not loaded in this process (coll/gpu did not "
                   "load coll_gpu_profiler?)\n", rank, plugin);
            failures++;
        } else {
            report(&ev, &mis, &unm, &live);
            if (ev < min_events || 0 != mis || 0 != unm) {
                failures++;
            }
            printf("rank %d: %llu events, %llu mismatches, %llu unmatched starts, %llu live "
                   "contexts%s\n", rank, ev, mis, unm, live,
                   (ev < min_events || mis || unm) ? "  <- FAIL" : "");
            unsigned long long xs = 0, xmax = 0;
            if (NULL != transport) {
                transport(&xs, &xmax);
            }
            /* several items in one queue at once: more than one transport event open */
            const int bad = (host_transport && (NULL == transport || 0 == xs || xmax < 2)) ||
                            xs < min_transport;
            failures += bad;
            printf("rank %d: %llu transport operations, at most %llu in flight at once on one "
                   "communicator%s\n", rank, xs, xmax, bad ? "  <- FAIL" : "");
        }
    }
    fflush(stdout);
    long all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("test_profiler: np=%d: %s\n", size, 0 == all ? "PASSED" : "FAILED");
    }
    MPI_Finalize();
    return 0 == all ? 0 : 1;
}
