/*
 * RAS (health pvars and the watchdog), host backend.
 *   test_ras stress   a thread reads every coll_gpu pvar of two communicators as fast as
 *                     it can while the main thread runs CGPU_TEST_RAS_CALLS (default
 *                     10,000) collectives and splits/frees communicators; the main thread
 *                     makes sure the poller has read everything at least once in every
 *                     window of 500 collectives (no timing involved: it yields until the
 *                     poller has moved on); every result checked, then the counters must
 *                     equal exactly what was done (started = completed = calls, bytes,
 *                     last seq). The read rate is printed, not asserted.
 *   test_ras watchdog (run with --mca coll_gpu_ras_timeout 1) rank 1 enters a collective
 *                     2.5 s late: the others' pvars show it missing while they wait, their
 *                     watchdog fires, and the collective still completes correctly.
 *   test_ras abort    (also --mca coll_gpu_ras_abort_on_timeout 1) rank 1 enters 3 s late:
 *                     every rank gets an MPI error instead of hanging; the communicator is
 *                     then "failed" and refuses further calls; world keeps working.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpitest.h"

static int rank, size;

/* ---- a minimal MPI_T reader bound to one communicator ---- */
typedef struct reader {
    MPI_T_pvar_session session;
    int n;
    MPI_T_pvar_handle h[48];
    char names[48][64];
    int is_int[48];
} reader_t;

/* handles for every coll_gpu pvar bound to a communicator */
static void reader_open(reader_t *r, MPI_Comm comm)
{
    static const char *names[] = {"coll_gpu_state", "coll_gpu_allreduce_started",
                                  "coll_gpu_allreduce_completed", "coll_gpu_alltoall_started",
                                  "coll_gpu_alltoall_completed", "coll_gpu_bytes",
                                  "coll_gpu_bcast_started", "coll_gpu_bcast_completed",
                                  "coll_gpu_allgather_started", "coll_gpu_allgather_completed",
                                  "coll_gpu_reduce_scatter_started",
                                  "coll_gpu_reduce_scatter_completed", "coll_gpu_reduce_started",
                                  "coll_gpu_reduce_completed",
                                  "coll_gpu_last_seq", "coll_gpu_idle_us", "coll_gpu_peers_missing",
                                  "coll_gpu_peers_missing_mask", "coll_gpu_errors_timeout",
                                  "coll_gpu_errors_device", "coll_gpu_errors_other",
                                  "coll_gpu_algorithm", "coll_gpu_transport",
                                  "coll_gpu_engine_calls", "coll_gpu_fallback_calls"};
    /* the process-wide ones too (no object): the poller reads them as often */
    static const char *procs[] = {"coll_gpu_live_comms", "coll_gpu_shm_segments",
                                  "coll_gpu_shm_kept", "coll_gpu_watchdog_firings", "coll_gpu_open_fds",
                                  "coll_gpu_proxy_queue_depth", "coll_gpu_ipc_cache_hits",
                                  "coll_gpu_ipc_cache_misses", "coll_gpu_ipc_cache_evictions",
                                  "coll_gpu_inbox_reuses"};
    memset(r, 0, sizeof(*r));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&r->session));
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); ++i) {
        int is_int = 0, idx = mt_pvar_index(procs[i], &is_int), count = 0;
        MT_CHECK(idx >= 0, "pvar %s not found", procs[i]);
        if (idx < 0) {
            continue;
        }
        MT_CHECK_MPI(MPI_T_pvar_handle_alloc(r->session, idx, NULL, &r->h[r->n], &count));
        snprintf(r->names[r->n], sizeof(r->names[0]), "%s", procs[i]);
        r->is_int[r->n] = is_int;
        r->n++;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
        int is_int = 0, idx = mt_pvar_index(names[i], &is_int), count = 0;
        MT_CHECK(idx >= 0, "pvar %s not found", names[i]);
        if (idx < 0) {
            continue;
        }
        MT_CHECK_MPI(MPI_T_pvar_handle_alloc(r->session, idx, &comm, &r->h[r->n], &count));
        MPI_T_pvar_start(r->session, r->h[r->n]); /* continuous ones refuse: harmless */
        snprintf(r->names[r->n], sizeof(r->names[0]), "%s", names[i]);
        r->is_int[r->n] = is_int;
        r->n++;
    }
}

static unsigned long long reader_get(reader_t *r, const char *name)
{
    for (int i = 0; i < r->n; ++i) {
        if (0 == strcmp(r->names[i], name)) {
            if (r->is_int[i]) {
                int v = 0;
                MPI_T_pvar_read(r->session, r->h[i], &v);
                return (unsigned long long) v;
            }
            unsigned long long v = 0;
            MPI_T_pvar_read(r->session, r->h[i], &v);
            return v;
        }
    }
    MT_CHECK(0, "no handle for %s", name);
    return 0;
}

static void reader_close(reader_t *r)
{
    for (int i = 0; i < r->n; ++i) {
        MPI_T_pvar_handle_free(r->session, &r->h[i]);
    }
    MPI_T_pvar_session_free(&r->session);
}

/* ---- stress ---- */
typedef struct poll_arg {
    reader_t *readers[2];
    atomic_int stop;
    atomic_ullong passes; /* full passes over both readers' pvars */
    unsigned long long reads, failed;
    double seconds;
} poll_arg_t;

static void *poller(void *p)
{
    poll_arg_t *a = p;
    double t0 = MPI_Wtime();
    while (!atomic_load(&a->stop)) {
        for (int k = 0; k < 2; ++k) {
            reader_t *r = a->readers[k];
            for (int i = 0; i < r->n; ++i) {
                unsigned long long v[2] = {0, 0};
                a->failed += (MPI_SUCCESS != MPI_T_pvar_read(r->session, r->h[i], v));
                a->reads++;
            }
        }
        atomic_fetch_add(&a->passes, 1);
        /* let the ranks' collective threads run too on an oversubscribed machine */
        sched_yield();
    }
    a->seconds = MPI_Wtime() - t0;
    return NULL;
}

static void run_stress(void)
{
    const long calls = getenv("CGPU_TEST_RAS_CALLS") ? atol(getenv("CGPU_TEST_RAS_CALLS")) : 10000;
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    reader_t rw, rd;
    reader_open(&rw, MPI_COMM_WORLD);
    reader_open(&rd, dup);
    poll_arg_t pa = {.readers = {&rw, &rd}, .reads = 0};
    atomic_init(&pa.stop, 0);
    atomic_init(&pa.passes, 0);
    pthread_t th;
    pthread_create(&th, NULL, poller, &pa);
    /* the collectives start only once the poller is reading, and every window of 500 calls
     * ends only once it has made another full pass: reads and collectives overlap however
     * the machine schedules the threads (a busy CI machine once gave the poller no time at
     * all before the loop ended) */
    unsigned long long seen = 0, windows = 0;
    while (0 == (seen = atomic_load(&pa.passes))) {
        sched_yield();
    }

    long n_ar = 0, n_a2a = 0, n_other[4] = {0, 0, 0, 0}; /* bcast allgather rs reduce */
    unsigned long long bytes = 0;
    int *a = mt_xmalloc(sizeof(int) * 64 * (size_t) size), *b = mt_xmalloc(sizeof(int) * 64 * (size_t) size);
    for (long i = 0; i < calls; ++i) {
        int cnt = 1 + (int) (i % 64);
        const int kind = (int) (i % 6);
        if (kind >= 2) { /* the other four kinds, one call each in turn */
            const int root = (int) (i % size);
            for (int k = 0; k < cnt * size; ++k) {
                a[k] = rank + k;
            }
            if (2 == kind) {
                MT_CHECK_MPI(MPI_Bcast(a, cnt, MPI_INT, root, dup));
                MT_CHECK(a[cnt - 1] == root + cnt - 1, "bcast %ld wrong", i);
                bytes += (unsigned long long) cnt * sizeof(int);
            } else if (3 == kind) {
                MT_CHECK_MPI(MPI_Allgather(a, cnt, MPI_INT, b, cnt, MPI_INT, dup));
                MT_CHECK(b[(size - 1) * cnt] == size - 1, "allgather %ld wrong", i);
                bytes += (unsigned long long) cnt * sizeof(int);
            } else if (4 == kind) {
                MT_CHECK_MPI(MPI_Reduce_scatter_block(a, b, cnt, MPI_INT, MPI_SUM, dup));
                MT_CHECK(b[0] == size * rank * cnt + size * (size - 1) / 2, "reduce_scatter %ld wrong",
                         i);
                bytes += (unsigned long long) cnt * sizeof(int) * (unsigned long long) size;
            } else {
                MT_CHECK_MPI(MPI_Reduce(a, b, cnt, MPI_INT, MPI_SUM, root, dup));
                MT_CHECK(rank != root || b[0] == size * (size - 1) / 2, "reduce %ld wrong", i);
                bytes += (unsigned long long) cnt * sizeof(int);
            }
            n_other[kind - 2]++;
        } else if (0 == kind) {
            for (int k = 0; k < cnt; ++k) {
                a[k] = rank + k + (int) i;
            }
            MT_CHECK_MPI(MPI_Allreduce(a, b, cnt, MPI_INT, MPI_SUM, dup));
            MT_CHECK(b[cnt - 1] == size * (cnt - 1 + (int) i) + size * (size - 1) / 2,
                     "allreduce %ld wrong", i);
            ++n_ar;
            bytes += (unsigned long long) cnt * sizeof(int);
        } else {
            for (int p = 0; p < size; ++p) {
                for (int k = 0; k < cnt; ++k) {
                    a[p * cnt + k] = rank * 1000 + p;
                }
            }
            MT_CHECK_MPI(MPI_Alltoall(a, cnt, MPI_INT, b, cnt, MPI_INT, dup));
            MT_CHECK(b[(size - 1) * cnt] == (size - 1) * 1000 + rank, "alltoall %ld wrong", i);
            ++n_a2a;
            bytes += (unsigned long long) cnt * sizeof(int) * (unsigned long long) size;
        }
        if (499 == i % 500) {
            while (atomic_load(&pa.passes) == seen) {
                sched_yield();
            }
            seen = atomic_load(&pa.passes);
            ++windows;
        }
        if (0 == i % 500) { /* communicators come and go meanwhile */
            MPI_Comm sp;
            MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sp);
            int one = 1, s = 0;
            MT_CHECK_MPI(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, sp));
            MPI_Comm_free(&sp);
        }
    }
    atomic_store(&pa.stop, 1);
    pthread_join(th, NULL);
    free(a);
    free(b);

    if (size > 1) {
        const unsigned long long passes = atomic_load(&pa.passes);
        MT_CHECK(passes > windows && pa.reads >= passes * (unsigned long long) (rw.n + rd.n),
                 "the poller made %llu passes (%llu reads) over %llu windows of collectives",
                 passes, pa.reads, windows);
        MT_CHECK(0 == pa.failed, "%llu of %llu pvar reads failed", pa.failed, pa.reads);
        MT_CHECK(reader_get(&rd, "coll_gpu_allreduce_started") == (unsigned long long) n_ar &&
                     reader_get(&rd, "coll_gpu_allreduce_completed") == (unsigned long long) n_ar,
                 "allreduce started %llu completed %llu, made %ld",
                 reader_get(&rd, "coll_gpu_allreduce_started"),
                 reader_get(&rd, "coll_gpu_allreduce_completed"), n_ar);
        MT_CHECK(reader_get(&rd, "coll_gpu_alltoall_started") == (unsigned long long) n_a2a &&
                     reader_get(&rd, "coll_gpu_alltoall_completed") == (unsigned long long) n_a2a,
                 "alltoall started %llu completed %llu, made %ld",
                 reader_get(&rd, "coll_gpu_alltoall_started"),
                 reader_get(&rd, "coll_gpu_alltoall_completed"), n_a2a);
        static const char *kinds[4] = {"bcast", "allgather", "reduce_scatter", "reduce"};
        for (int k = 0; k < 4; ++k) {
            char s1[64], s2[64];
            snprintf(s1, sizeof(s1), "coll_gpu_%s_started", kinds[k]);
            snprintf(s2, sizeof(s2), "coll_gpu_%s_completed", kinds[k]);
            MT_CHECK(reader_get(&rd, s1) == (unsigned long long) n_other[k] &&
                         reader_get(&rd, s2) == (unsigned long long) n_other[k],
                     "%s started %llu completed %llu, made %ld", kinds[k], reader_get(&rd, s1),
                     reader_get(&rd, s2), n_other[k]);
        }
        MT_CHECK(reader_get(&rd, "coll_gpu_bytes") == bytes, "bytes %llu, expected %llu",
                 reader_get(&rd, "coll_gpu_bytes"), bytes);
        MT_CHECK(reader_get(&rd, "coll_gpu_last_seq") == (unsigned long long) calls,
                 "last_seq %llu after %ld collectives", reader_get(&rd, "coll_gpu_last_seq"), calls);
        MT_CHECK(1 == reader_get(&rd, "coll_gpu_state"), "state %llu, expected ready (1)",
                 reader_get(&rd, "coll_gpu_state"));
        MT_CHECK(0 == reader_get(&rd, "coll_gpu_errors_timeout") +
                          reader_get(&rd, "coll_gpu_errors_device") +
                          reader_get(&rd, "coll_gpu_errors_other"), "errors counted");
        MT_CHECK(0 == reader_get(&rd, "coll_gpu_peers_missing") &&
                     0 == reader_get(&rd, "coll_gpu_idle_us"), "a finished communicator shows "
                 "missing peers or idle time");
        /* process-wide: world and the dup are the live internal communicators, each rank
         * maps its own segment and every peer's of each; no descriptor stays open; no
         * proxy; on the host backend nothing went through the cuda pool or IPC cache */
        const unsigned long long live = reader_get(&rd, "coll_gpu_live_comms");
        MT_CHECK(2 == live, "live_comms %llu with world and one dup alive", live);
        /* and the pool's (coll_gpu_shm_pool): what released communicators left for the next */
        const unsigned long long kept = reader_get(&rd, "coll_gpu_shm_kept");
        MT_CHECK(reader_get(&rd, "coll_gpu_shm_segments") == live * (unsigned long long) size + kept,
                 "shm_segments %llu, expected %llu (live) + %llu (kept)",
                 reader_get(&rd, "coll_gpu_shm_segments"), live * (unsigned long long) size, kept);
        MT_CHECK(0 == reader_get(&rd, "coll_gpu_open_fds"), "open_fds %llu after set-up",
                 reader_get(&rd, "coll_gpu_open_fds"));
        MT_CHECK(0 == reader_get(&rd, "coll_gpu_proxy_queue_depth"), "proxy queue not empty");
        if (0 == reader_get(&rd, "coll_gpu_transport")) { /* shm */
            MT_CHECK(0 == reader_get(&rd, "coll_gpu_ipc_cache_hits") +
                              reader_get(&rd, "coll_gpu_ipc_cache_misses") +
                              reader_get(&rd, "coll_gpu_inbox_reuses"),
                     "host backend, but the IPC cache or inbox pool counted something");
        }
        if (0 == rank) {
            printf("stress: %ld collectives checked while polling %d pvars: %llu reads, %.0f/s\n",
                   calls, rw.n + rd.n, pa.reads, (double) pa.reads / (pa.seconds > 0 ? pa.seconds : 1));
        }
    }
    reader_close(&rd);
    reader_close(&rw);
    MPI_Comm_free(&dup);
}

/* ---- watchdog ---- */
typedef struct watch_arg {
    reader_t *r;
    atomic_int stop;
    unsigned long long max_missing, mask;
} watch_arg_t;

static void *watcher(void *p)
{
    watch_arg_t *w = p;
    while (!atomic_load(&w->stop)) {
        unsigned long long m = reader_get(w->r, "coll_gpu_peers_missing");
        if (m > w->max_missing) {
            w->max_missing = m;
            w->mask = reader_get(w->r, "coll_gpu_peers_missing_mask");
        }
        usleep(2000);
    }
    return NULL;
}

static void run_watchdog(bool abort_mode)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int one = 1, s = 0;
    MT_CHECK_MPI(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, c)); /* engine set up */
    reader_t r;
    reader_open(&r, c);
    watch_arg_t w = {.r = &r, .max_missing = 0, .mask = 0};
    atomic_init(&w.stop, 0);
    pthread_t th;
    pthread_create(&th, NULL, watcher, &w);
    mt_proc_pvar_t fr; /* one reader spans the late collective */
    mt_proc_pvar_open(&fr, "coll_gpu_watchdog_firings");
    unsigned long long f0 = mt_proc_pvar_read(&fr);
    if (1 == rank) {
        usleep(abort_mode ? 3000000 : 2500000);
    }
    int rc = MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, c);
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    unsigned long long f1 = mt_proc_pvar_read(&fr);
    mt_proc_pvar_close(&fr);
    if (!abort_mode) {
        MT_CHECK(MPI_SUCCESS == rc && s == size, "late collective: rc %d sum %d", rc, s);
        if (1 != rank) {
            MT_CHECK(w.max_missing >= 1 && (w.mask & 2ull), "while waiting the pvars showed %llu "
                     "missing (mask %#llx), expected rank 1", w.max_missing, w.mask);
            MT_CHECK(f1 > f0, "the watchdog did not fire (firings %llu -> %llu)", f0, f1);
        }
    } else {
        /* every rank gives up: the early ones on the watchdog, rank 1 when its peers are gone */
        MT_CHECK(MPI_SUCCESS != rc, "the stuck collective returned success on rank %d", rank);
        MT_CHECK(3 == reader_get(&r, "coll_gpu_state"), "state %llu after the abort, expected "
                 "failed (3)", reader_get(&r, "coll_gpu_state"));
        MT_CHECK(reader_get(&r, "coll_gpu_errors_timeout") >= 1, "no timeout error counted");
        /* rank 1 waits for nobody in a one-shot allreduce: it finds that its peers failed the
         * call, without a watchdog of its own */
        MT_CHECK(f1 > f0 || 1 == rank, "the watchdog did not fire (firings %llu -> %llu)", f0,
                 f1);
        rc = MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, c);
        MT_CHECK(MPI_SUCCESS != rc, "a failed communicator accepted another collective");
    }
    reader_close(&r);
    MPI_Comm_free(&c);
    /* world is untouched */
    MT_CHECK_MPI(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MT_CHECK(s == size, "world after the watchdog test: %d", s);
    if (0 == rank) {
        printf("watchdog (%s): rank 1 late; pvars saw %llu missing (mask %#llx) on rank 0, "
               "firings %llu -> %llu\n", abort_mode ? "abort" : "report", w.max_missing, w.mask,
               f0, f1);
    }
}

int main(int argc, char **argv)
{
    mt_init_thread(&argc, &argv, "test_ras", MPI_THREAD_MULTIPLE);
    rank = mt_world_rank();
    size = mt_world_size();
    const char *mode = argc > 1 ? argv[1] : "stress";
    if (0 == strcmp(mode, "stress")) {
        run_stress();
    } else if (size >= 2) {
        run_watchdog(0 == strcmp(mode, "abort"));
    }
    return mt_finalize();
}
