/*
 * Unit test of the inter-node proxy (coll_gpu/engine/cgpu_proxy.c, btl_glue/cgpu_ofi.c)
 * with forked processes on one machine, over libfabric's tcp provider and its shm one.
 *
 * Every case forks a group of ranks. Each rank starts the engine (for the configuration
 * and the log) and the proxy, publishes its endpoint name in an anonymous shared mapping
 * made before fork(), waits for the others (a generation-counter barrier on C11 atomics),
 * makes a proxy group from the names and runs one scenario. Data is checked byte for byte
 * against a pattern computed from (source, destination, tag, offset), so a message
 * delivered to the wrong receive, group or offset is caught.
 *
 * CUnit's assertions are not used in children (they would change the child's registry
 * only): children count failed checks (CHILD_CHECK) and exit with a non-zero status; the
 * parent waits with a deadline, kills what hangs, and turns each rank's exit into an
 * assertion. A case may declare a rank that dies of SIGKILL on purpose (the dead-peer case).
 *
 * A provider fi_getinfo does not offer here is not run: its cases print
 * "skipped: provider X unavailable" and are not registered (not counted as passed).
 * CGPU_TEST_VERBOSE=1 prints every engine message (verbose 100) with the rank;
 * CGPU_TEST_ONLY=<text> runs only the cases whose name contains <text>.
 * CGPU_PROF_CHECK_PLUGIN (set by test/run_all.sh): the profiler case loads the checking
 * plugin and verifies that proxy events stay in their group's context; unset: skipped.
 */
#include <CUnit/Basic.h>

#include "child_check.h"
#include "cunit_run.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgpu_config.h"
#include "cgpu_cuda.h"
#ifdef CGPU_HAVE_LIBFABRIC
#include "cgpu_ofi.h"
#endif
#include "cgpu_engine.h"
#include "cgpu_proxy.h"
#include "cgpu_prof.h"

enum {
    T_MAX_RANKS = 8,
    T_RUN_TIMEOUT_S = 120,  /* one group of ranks, one scenario */
    T_FAIL_GRACE_MS = 3000, /* after a rank failed, how long the others get to finish */
    T_CONTEXT_ID = 7,
};
static const double t_wait_s = 30.0; /* waitall limit of operations that must succeed */

#define T_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static bool t_verbose;

/* ------------------------------------------------------------------------------------ */
/* Shared area and barrier                                                              */
/* ------------------------------------------------------------------------------------ */

typedef struct area {
    _Atomic unsigned arrived;
    _Atomic unsigned generation;
    _Atomic int aborted;
    int size;
    unsigned char name[T_MAX_RANKS][CGPU_PROXY_ADDR_BYTES];
    char provider[T_MAX_RANKS][64];
} area_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static bool barrier(area_t *a)
{
    const unsigned gen = atomic_load(&a->generation);
    unsigned spins = 0;
    if ((unsigned) a->size - 1 == atomic_fetch_add(&a->arrived, 1)) {
        atomic_store(&a->arrived, 0);
        atomic_fetch_add(&a->generation, 1);
        return true;
    }
    while (gen == atomic_load(&a->generation)) {
        if (0 != atomic_load(&a->aborted)) {
            return false;
        }
        if (++spins < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return true;
}

/* ------------------------------------------------------------------------------------ */
/* Inside a child                                                                        */
/* ------------------------------------------------------------------------------------ */

static int child_warnings;
static char child_warning_log[4096]; /* every warning of the scenario, concatenated */

#define CHILD_ST(call, want)                                                                       \
    do {                                                                                           \
        cgpu_status_t st_ = (call);                                                                \
        CHILD_CHECKF((want) == st_, "%s returned %s, expected %s", #call, cgpu_status_string(st_), \
                     cgpu_status_string(want));                                                    \
    } while (0)

static void t_log(int level, const char *msg)
{
    if (CGPU_LOG_WARN == level) {
        ++child_warnings;
        size_t len = strlen(child_warning_log);
        snprintf(child_warning_log + len, sizeof(child_warning_log) - len, "%s\n", msg);
    }
    if (t_verbose) {
        fprintf(stderr, "    [rank %d of %d] coll/gpu (%d): %s\n", child_rank, child_size, level,
                msg);
    }
}

static bool warned(const char *needle)
{
    return NULL != strstr(child_warning_log, needle);
}

/* What a scenario sees. */
typedef struct trank {
    int rank, size;
    area_t *area;
    const char *provider;
    cgpu_proxy_group_t *g; /* context id T_CONTEXT_ID, made before the scenario */
} trank_t;

typedef struct scenario {
    const char *name;
    int size;
    void (*fn)(trank_t *t);
    /* changes the configuration and returns the proxy test flags (may be NULL) */
    unsigned (*config)(cgpu_config_t *cfg, int rank);
    int dies; /* the rank that kills itself (-1: none) */
    bool warnings_expected;
} scenario_t;

/* Byte @p i of the message from @p src to @p dst with @p tag (and group salt). */
static inline unsigned char pat(int src, int dst, uint32_t tag, size_t i)
{
    return (unsigned char) (i * 131u + (i >> 9) * 7u + (unsigned) src * 17u + (unsigned) dst * 71u +
                            tag * 29u + 1u);
}

static void fill(unsigned char *b, size_t n, int src, int dst, uint32_t tag)
{
    for (size_t i = 0; i < n; ++i) {
        b[i] = pat(src, dst, tag, i);
    }
}

static bool check_data(const unsigned char *b, size_t n, int src, int dst, uint32_t tag,
                       const char *what)
{
    for (size_t i = 0; i < n; ++i) {
        if (b[i] != pat(src, dst, tag, i)) {
            return CHILD_CHECKF(false,
                                "%s: %zu bytes from rank %d tag %u: byte %zu is %u, expected %u",
                                what, n, src, tag, i, b[i], pat(src, dst, tag, i));
        }
    }
    return true;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);
    if (NULL == p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(3);
    }
    return p;
}

static void child_main(area_t *area, int rank, const scenario_t *sc, const char *provider)
    __attribute__((noreturn));

static void child_main(area_t *area, int rank, const scenario_t *sc, const char *provider)
{
    trank_t t = {.rank = rank, .size = sc->size, .area = area, .provider = provider};
    cgpu_config_t cfg;
    cgpu_prof_comm_t prof_off = {0};
    unsigned flags = 0;

    child_rank = rank;
    child_size = sc->size;
    cgpu_config_default(&cfg);
    cfg.backend = CGPU_BACKEND_HOST;
    cfg.log = t_log;
    cfg.verbose = t_verbose ? 100 : 0;
    cfg.ofi_provider = provider;
    if (NULL != sc->config) {
        flags = sc->config(&cfg, rank);
    }
    CHILD_ST(cgpu_engine_init(&cfg), CGPU_OK);
    cgpu_proxy_set_test_flags(flags);
    CHILD_CHECK(cgpu_proxy_built());
    cgpu_status_t st = cgpu_proxy_acquire();
    if (!CHILD_CHECKF(CGPU_OK == st, "cgpu_proxy_acquire: %s", cgpu_status_string(st))) {
        atomic_store(&area->aborted, 1);
        exit(EXIT_FAILURE);
    }
    CHILD_ST(cgpu_proxy_addr(area->name[rank]), CGPU_OK);
    snprintf(area->provider[rank], sizeof(area->provider[rank]), "%s", cgpu_proxy_provider());
    if (barrier(area)) {
        st = cgpu_proxy_group_create(rank, sc->size, area->name, T_CONTEXT_ID, &prof_off, &t.g);
        CHILD_CHECKF(CGPU_OK == st, "cgpu_proxy_group_create: %s", cgpu_status_string(st));
        if (CGPU_OK == st) {
            sc->fn(&t);
        }
    } else {
        CHILD_CHECKF(false, "the name exchange was aborted");
    }
    cgpu_proxy_group_destroy(&t.g);
    CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu after the scenario",
                 (unsigned long long) cgpu_proxy_queue_depth());
    cgpu_proxy_release();
    cgpu_engine_fini();
    CHILD_CHECKF(0 == child_warnings || sc->warnings_expected, "%d unexpected warning(s):\n%s",
                 child_warnings, child_warning_log);
    exit(0 == child_failures ? EXIT_SUCCESS : EXIT_FAILURE);
}

/* ------------------------------------------------------------------------------------ */
/* In the parent                                                                         */
/* ------------------------------------------------------------------------------------ */

/* Before a hung rank is killed: every thread's stack, where gdb is installed (CI installs
 * it), so that a hang that shows once in many runs leaves its cause in the log. */
static void print_stacks(const pid_t *pids, const bool *done, int n)
{
    if (0 != access("/usr/bin/gdb", X_OK)) {
        fprintf(stderr, "    (no /usr/bin/gdb: no stacks of the hung ranks)\n");
        return;
    }
    for (int r = 0; r < n; ++r) {
        if (done[r]) {
            continue;
        }
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "timeout 60 /usr/bin/gdb -q -batch -p %d -ex 'thread apply all bt' 2>&1 | "
                 "grep -E '^(Thread|#)' | head -120 >&2",
                 (int) pids[r]);
        fprintf(stderr, "    ---- rank %d (pid %d), every thread's stack ----\n", r, (int) pids[r]);
        fflush(stderr);
        if (0 != system(cmd)) {
            fprintf(stderr, "    (gdb could not attach)\n");
        }
    }
}

static void kill_rest(const pid_t *pids, bool *done, int *status, int n)
{
    for (int r = 0; r < n; ++r) {
        if (!done[r]) {
            kill(pids[r], SIGKILL);
        }
    }
    for (int r = 0; r < n; ++r) {
        if (!done[r]) {
            while (waitpid(pids[r], &status[r], 0) < 0 && EINTR == errno) {
            }
            done[r] = true;
        }
    }
}

static bool run_ranks(const scenario_t *sc, const char *provider)
{
    const int size = sc->size;
    pid_t pids[T_MAX_RANKS];
    int status[T_MAX_RANKS] = {0};
    bool done[T_MAX_RANKS] = {false}, killed_by_us = false, ok = true;
    int64_t deadline, give_up = -1;
    area_t *area =
        mmap(NULL, sizeof(*area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (MAP_FAILED == area) {
        fprintf(stderr, "\n    cannot map the shared area: %s\n", strerror(errno));
        return false;
    }
    area->size = size;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < size; ++r) {
        pid_t pid = fork();
        if (0 == pid) {
            child_main(area, r, sc, provider);
        }
        if (pid < 0) {
            fprintf(stderr, "\n    fork failed: %s\n", strerror(errno));
            kill_rest(pids, done, status, r);
            munmap(area, sizeof(*area));
            return false;
        }
        pids[r] = pid;
    }
    deadline = now_ms() + (int64_t) T_RUN_TIMEOUT_S * 1000;
    for (int remaining = size; remaining > 0;) {
        for (int r = 0; r < size; ++r) {
            if (done[r] || pids[r] != waitpid(pids[r], &status[r], WNOHANG)) {
                continue;
            }
            done[r] = true;
            --remaining;
            const bool expected_death =
                r == sc->dies && WIFSIGNALED(status[r]) && SIGKILL == WTERMSIG(status[r]);
            if (!expected_death && (!WIFEXITED(status[r]) || 0 != WEXITSTATUS(status[r])) &&
                give_up < 0) {
                atomic_store(&area->aborted, 1);
                give_up = now_ms() + T_FAIL_GRACE_MS;
            }
        }
        if (0 == remaining) {
            break;
        }
        if (now_ms() >= deadline || (give_up >= 0 && now_ms() >= give_up)) {
            fprintf(stderr, "\n    %s over %s: %s; killing the ranks left\n", sc->name, provider,
                    give_up >= 0 ? "a rank failed" : "deadline passed (hang?)");
            if (give_up < 0) {
                print_stacks(pids, done, size);
            }
            killed_by_us = true;
            kill_rest(pids, done, status, size);
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    for (int r = 0; r < size; ++r) {
        if (r == sc->dies) {
            if (!(WIFSIGNALED(status[r]) && SIGKILL == WTERMSIG(status[r]))) {
                fprintf(stderr, "\n    %s: rank %d was to die of SIGKILL and did not\n", sc->name,
                        r);
                ok = false;
            }
        } else if (WIFSIGNALED(status[r])) {
            fprintf(stderr, "\n    %s over %s: rank %d died of signal %d%s\n", sc->name, provider,
                    r, WTERMSIG(status[r]), killed_by_us ? " (killed by the test)" : "");
            ok = false;
        } else if (!WIFEXITED(status[r]) || 0 != WEXITSTATUS(status[r])) {
            fprintf(stderr, "\n    %s over %s: rank %d exited with status %d\n", sc->name, provider,
                    r, WEXITSTATUS(status[r]));
            ok = false;
        }
    }
    /* a rank killed on purpose never closed its endpoint: shm's region of it stays in
     * /dev/shm (named as its endpoint, without the scheme), and a later process given the
     * same pid would meet it; the test removes what it made */
#ifdef CGPU_HAVE_LIBFABRIC
    char path[CGPU_PROXY_ADDR_BYTES + 16];
    if (sc->dies >= 0 && 0 == strncmp(area->provider[sc->dies], "shm", 3) &&
        cgpu_ofi_shm_region(area->name[sc->dies], path, sizeof(path))) {
        (void) unlink(path);
    }
#endif
    if (ok && t_verbose) {
        fprintf(stderr, "\n    (%s ran on provider %s)\n", sc->name, area->provider[0]);
    }
    munmap(area, sizeof(*area));
    return ok;
}

/* ------------------------------------------------------------------------------------ */
/* Scenarios                                                                             */
/* ------------------------------------------------------------------------------------ */

static const size_t ring_sizes[] = {0, 1, 4096, 1u << 20, 16u << 20};

/* Everyone sends to its right and receives from its left, for every size; returns false
 * when a wait failed (the ranks are then out of step). */
static bool ring_round(trank_t *t, cgpu_proxy_group_t *g, uint32_t tag_base)
{
    const int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    bool ok = true;
    for (size_t k = 0; k < T_ARRAY_LEN(ring_sizes) && ok; ++k) {
        const size_t n = ring_sizes[k];
        const uint32_t tag = tag_base + (uint32_t) k;
        unsigned char *sb = xmalloc(n), *rb = xmalloc(n + 64);
        cgpu_proxy_req_t req[2];
        const uint64_t done0 = cgpu_proxy_ops_completed();

        fill(sb, n, t->rank, right, tag);
        memset(rb, 0xA5, n + 64);
        CHILD_ST(cgpu_proxy_irecv(g, left, rb, n, tag, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_isend(g, right, sb, n, tag, &req[1]), CGPU_OK);
        cgpu_status_t st = cgpu_proxy_waitall(req, 2, t_wait_s, NULL);
        ok =
            CHILD_CHECKF(CGPU_OK == st, "ring of %zu bytes: waitall %s", n, cgpu_status_string(st));
        if (ok) {
            check_data(rb, n, left, t->rank, tag, "ring");
            for (size_t i = n; i < n + 64; ++i) {
                if (0xA5 != rb[i]) {
                    CHILD_CHECKF(false, "ring of %zu bytes: byte %zu past the end was written", n,
                                 i);
                    break;
                }
            }
            CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu after a ring wait",
                         (unsigned long long) cgpu_proxy_queue_depth());
            CHILD_CHECKF(cgpu_proxy_ops_completed() == done0 + 2,
                         "ops completed went from %llu to %llu (2 expected)",
                         (unsigned long long) done0,
                         (unsigned long long) cgpu_proxy_ops_completed());
        }
        free(sb);
        free(rb);
    }
    return ok;
}

static void sc_ring(trank_t *t)
{
    if (ring_round(t, t->g, 100)) {
        /* each rank has talked to its two neighbours (one in a 2-rank ring) */
        CHILD_CHECKF(cgpu_proxy_peers() == (t->size > 2 ? 2 : 1), "%d peers connected",
                     cgpu_proxy_peers());
    }
    barrier(t->area);
}

/* The proxy thread of an idle process sleeps: less than 5% of a core over 0.5 s. */
static void sc_idle(trank_t *t)
{
    if (ring_round(t, t->g, 200)) {
        struct timespec c0, c1, wait = {0, 500000000};
        nanosleep(&wait, NULL); /* past the thread's short polling after the last op */
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        nanosleep(&wait, NULL);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        const double cpu =
            (double) (c1.tv_sec - c0.tv_sec) + (double) (c1.tv_nsec - c0.tv_nsec) / 1e9;
        CHILD_CHECKF(cpu < 0.025, "idle process used %.3f s of CPU in 0.5 s", cpu);
    }
    barrier(t->area);
}

static unsigned cfg_staged_mixed(cgpu_config_t *cfg, int rank)
{
    /* 60000-byte chunks: 16 MiB is 280 chunks (past the 256 an 8-bit chunk number would
     * wrap at), the last one partial; even ranks stage their host buffers, odd ones send them
     * directly, so both sides must cut chunks alike whatever their memory */
    cfg->proxy_bounce_bytes = 60000;
    return 0 == rank % 2 ? CGPU_PROXY_TEST_STAGE_HOST : 0;
}

static void sc_staged(trank_t *t)
{
    CHILD_CHECKF(60000 == cgpu_proxy_chunk_bytes(), "chunk of %zu bytes", cgpu_proxy_chunk_bytes());
    (void) ring_round(t, t->g, 300);
    barrier(t->area);
}

static unsigned cfg_no_directed(cgpu_config_t *cfg, int rank)
{
    (void) cfg, (void) rank;
    return CGPU_PROXY_TEST_NO_DIRECTED;
}

static void sc_no_directed(trank_t *t)
{
    CHILD_CHECKF(0xffffffu == cgpu_proxy_max_tag() && 0xfffu == cgpu_proxy_max_context_id(),
                 "without directed receive: max tag %u, max context id %u", cgpu_proxy_max_tag(),
                 cgpu_proxy_max_context_id());
    /* every rank sends to every other with one tag: only the source in the tag tells
     * the messages apart */
    const size_t n = 3000;
    const int size = t->size;
    unsigned char *sb[T_MAX_RANKS], *rb[T_MAX_RANKS];
    cgpu_proxy_req_t req[2 * T_MAX_RANKS];
    int nr = 0;
    for (int p = 0; p < size; ++p) {
        sb[p] = xmalloc(n);
        rb[p] = xmalloc(n);
        if (p == t->rank) {
            continue;
        }
        fill(sb[p], n, t->rank, p, 9);
        CHILD_ST(cgpu_proxy_irecv(t->g, p, rb[p], n, 9, &req[nr++]), CGPU_OK);
    }
    for (int p = 0; p < size; ++p) {
        if (p != t->rank) {
            CHILD_ST(cgpu_proxy_isend(t->g, p, sb[p], n, 9, &req[nr++]), CGPU_OK);
        }
    }
    cgpu_status_t st = cgpu_proxy_waitall(req, nr, t_wait_s, NULL);
    if (CHILD_CHECKF(CGPU_OK == st, "all-to-all: waitall %s", cgpu_status_string(st))) {
        for (int p = 0; p < size; ++p) {
            if (p != t->rank) {
                check_data(rb[p], n, p, t->rank, 9, "all-to-all without directed receive");
            }
        }
        (void) ring_round(t, t->g, 400);
    }
    for (int p = 0; p < size; ++p) {
        free(sb[p]);
        free(rb[p]);
    }
    CHILD_ST(cgpu_proxy_isend(t->g, (t->rank + 1) % size, NULL, 0, 0x1000000u, &req[0]),
             CGPU_ERR_INVALID_ARG);
    barrier(t->area);
}

static unsigned cfg_small_window(cgpu_config_t *cfg, int rank)
{
    (void) rank;
    cfg->proxy_max_inflight = 4;
    return 0;
}

/* 100 receives posted before 100 sends, 4 chunks in flight at most: the queue holds the
 * rest, and receives waiting for the peer never keep the sends from going out. */
static void sc_many(trank_t *t)
{
    enum { N = 100 };
    const int peer = 1 - t->rank;
    unsigned char *sb[N], *rb[N];
    cgpu_proxy_req_t req[2 * N];
    const uint64_t done0 = cgpu_proxy_ops_completed();

    for (int i = 0; i < N; ++i) {
        const size_t n = 1000 + 997 * (size_t) i;
        sb[i] = xmalloc(n);
        rb[i] = xmalloc(n);
        fill(sb[i], n, t->rank, peer, (uint32_t) i);
        CHILD_ST(cgpu_proxy_irecv(t->g, peer, rb[i], n, (uint32_t) i, &req[i]), CGPU_OK);
    }
    for (int i = 0; i < N; ++i) {
        const size_t n = 1000 + 997 * (size_t) i;
        CHILD_ST(cgpu_proxy_isend(t->g, peer, sb[i], n, (uint32_t) i, &req[N + i]), CGPU_OK);
    }
    CHILD_CHECKF(cgpu_proxy_queue_depth() <= 2 * N, "queue depth %llu",
                 (unsigned long long) cgpu_proxy_queue_depth());
    cgpu_status_t st = cgpu_proxy_waitall(req, 2 * N, t_wait_s, NULL);
    if (CHILD_CHECKF(CGPU_OK == st, "waitall of %d operations: %s", 2 * N,
                     cgpu_status_string(st))) {
        for (int i = 0; i < N; ++i) {
            check_data(rb[i], 1000 + 997 * (size_t) i, peer, t->rank, (uint32_t) i, "many");
        }
    }
    CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu after the wait",
                 (unsigned long long) cgpu_proxy_queue_depth());
    CHILD_CHECKF(cgpu_proxy_ops_completed() == done0 + 2 * N, "ops completed %llu, expected %llu",
                 (unsigned long long) cgpu_proxy_ops_completed(),
                 (unsigned long long) (done0 + 2 * N));
    for (int i = 0; i < N; ++i) {
        free(sb[i]);
        free(rb[i]);
    }
    barrier(t->area);
}

/* Receives posted in the reverse order of the sends, sizes from eager to rendezvous. */
static void sc_out_of_order(trank_t *t)
{
    enum { N = 16 };
    unsigned char *b[N];
    cgpu_proxy_req_t req[N];
    const int peer = 1 - t->rank;
    for (int i = 0; i < N; ++i) {
        const size_t n = (size_t) (i + 1) * 40000;
        b[i] = xmalloc(n);
        if (0 == t->rank) {
            fill(b[i], n, 0, 1, 50 + (uint32_t) i);
        }
    }
    for (int j = 0; j < N; ++j) {
        const int i = 0 == t->rank ? j : N - 1 - j;
        const size_t n = (size_t) (i + 1) * 40000;
        if (0 == t->rank) {
            CHILD_ST(cgpu_proxy_isend(t->g, peer, b[i], n, 50 + (uint32_t) i, &req[j]), CGPU_OK);
        } else {
            CHILD_ST(cgpu_proxy_irecv(t->g, peer, b[i], n, 50 + (uint32_t) i, &req[j]), CGPU_OK);
        }
    }
    cgpu_status_t st = cgpu_proxy_waitall(req, N, t_wait_s, NULL);
    if (CHILD_CHECKF(CGPU_OK == st, "waitall: %s", cgpu_status_string(st)) && 1 == t->rank) {
        for (int i = 0; i < N; ++i) {
            check_data(b[i], (size_t) (i + 1) * 40000, 0, 1, 50 + (uint32_t) i, "out of order");
        }
    }
    for (int i = 0; i < N; ++i) {
        free(b[i]);
    }
    barrier(t->area);
}

/* Two groups between the same processes, same tags: nothing crosses over; and two
 * messages with the same tag arrive in the order they were sent. */
static void sc_two_groups(trank_t *t)
{
    cgpu_proxy_group_t *g2 = NULL;
    cgpu_prof_comm_t prof_off = {0};
    const int peer = 1 - t->rank;
    const size_t n = 200000;
    unsigned char *a = xmalloc(n), *b = xmalloc(n), *c = xmalloc(n);
    cgpu_proxy_req_t req[3];

    CHILD_ST(
        cgpu_proxy_group_create(t->rank, t->size, t->area->name, T_CONTEXT_ID + 1, &prof_off, &g2),
        CGPU_OK);
    if (0 == t->rank) {
        fill(a, n, 0, 1, 5);   /* group 1, tag 5 */
        fill(b, n, 0, 1, 105); /* group 2, tag 5 (different content) */
        fill(c, n, 0, 1, 205); /* group 1, tag 5 again */
        CHILD_ST(cgpu_proxy_isend(t->g, peer, a, n, 5, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_isend(g2, peer, b, n, 5, &req[1]), CGPU_OK);
        CHILD_ST(cgpu_proxy_isend(t->g, peer, c, n, 5, &req[2]), CGPU_OK);
    } else {
        CHILD_ST(cgpu_proxy_irecv(g2, peer, b, n, 5, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_irecv(t->g, peer, a, n, 5, &req[1]), CGPU_OK);
        CHILD_ST(cgpu_proxy_irecv(t->g, peer, c, n, 5, &req[2]), CGPU_OK);
    }
    cgpu_status_t st = cgpu_proxy_waitall(req, 3, t_wait_s, NULL);
    if (CHILD_CHECKF(CGPU_OK == st, "waitall: %s", cgpu_status_string(st)) && 1 == t->rank) {
        check_data(a, n, 0, 1, 5, "group 1, first message of tag 5");
        check_data(b, n, 0, 1, 105, "group 2, tag 5");
        check_data(c, n, 0, 1, 205, "group 1, second message of tag 5");
    }
    /* the peer was counted once for both groups */
    CHILD_CHECKF(1 == cgpu_proxy_peers(), "%d peers connected", cgpu_proxy_peers());
    cgpu_proxy_group_destroy(&g2);
    CHILD_CHECK(NULL == g2);
    free(a);
    free(b);
    free(c);
    barrier(t->area);
}

/*
 * Two groups posted in opposite orders past the window: rank 0 submits group 1's sends and
 * then group 2's; rank 1 submits group 2's receives and then group 1's. The messages are
 * large enough for the providers' rendezvous, so a send ends only once its receive is
 * posted. With one window shared in submission order, rank 0's window would hold group 1's
 * sends and rank 1's would hold group 2's receives, and nothing would move until the
 * timeout. Threads on two communicators do this (the order of their submissions differs
 * between processes). A group with nothing of a direction in progress may always start one
 * operation of it, so both groups move.
 */
static void sc_groups_crossed(trank_t *t)
{
    enum { N = 6 };
    cgpu_proxy_group_t *g2 = NULL;
    cgpu_prof_comm_t prof_off = {0};
    const int peer = 1 - t->rank;
    const size_t n = 300000;
    unsigned char *b[2][N];
    cgpu_proxy_req_t req[2 * N];

    CHILD_ST(
        cgpu_proxy_group_create(t->rank, t->size, t->area->name, T_CONTEXT_ID + 1, &prof_off, &g2),
        CGPU_OK);
    for (int j = 0; j < 2 * N; ++j) {
        const int grp = 0 == t->rank ? j / N : 1 - j / N, i = j % N;
        cgpu_proxy_group_t *g = 0 == grp ? t->g : g2;
        b[grp][i] = xmalloc(n);
        if (0 == t->rank) {
            fill(b[grp][i], n, 0, 1, (uint32_t) (100 * grp + i));
            CHILD_ST(cgpu_proxy_isend(g, peer, b[grp][i], n, (uint32_t) i, &req[j]), CGPU_OK);
        } else {
            CHILD_ST(cgpu_proxy_irecv(g, peer, b[grp][i], n, (uint32_t) i, &req[j]), CGPU_OK);
        }
    }
    cgpu_status_t st = cgpu_proxy_waitall(req, 2 * N, t_wait_s, NULL);
    if (CHILD_CHECKF(CGPU_OK == st, "waitall: %s", cgpu_status_string(st)) && 1 == t->rank) {
        for (int grp = 0; grp < 2; ++grp) {
            for (int i = 0; i < N; ++i) {
                check_data(b[grp][i], n, 0, 1, (uint32_t) (100 * grp + i), "crossed groups");
            }
        }
    }
    cgpu_proxy_group_destroy(&g2);
    for (int grp = 0; grp < 2; ++grp) {
        for (int i = 0; i < N; ++i) {
            free(b[grp][i]);
        }
    }
    barrier(t->area);
}

/* The window of 4 (2 per direction), and rank 1 stages its host buffers through bounce
 * buffers with 64 KiB chunks (the pool of 2 pairs is held by one group's receives). tcp
 * only: the shm provider completes a process's sends in the order they were posted, so a
 * send not yet matched holds back the completion of every later one, and a message of
 * several chunks (the next chunk waits for a slot) cannot pass one of another group posted
 * before it (README, Limits). */
static unsigned cfg_small_window_staged(cgpu_config_t *cfg, int rank)
{
    cfg->proxy_max_inflight = 4;
    cfg->proxy_bounce_bytes = 65536;
    return 1 == rank ? CGPU_PROXY_TEST_STAGE_HOST : 0;
}

static unsigned cfg_one_peer(cgpu_config_t *cfg, int rank)
{
    (void) rank;
    cfg->proxy_max_peers = 1;
    return 0;
}

/* max_peers 1 in a 3-rank group: rank 0 talks to rank 1, then rank 2 is refused. */
static void sc_peer_cap(trank_t *t)
{
    unsigned char x = 1, y = 0;
    cgpu_proxy_req_t req[2];
    if (t->rank < 2) {
        const int peer = 1 - t->rank;
        CHILD_ST(cgpu_proxy_irecv(t->g, peer, &y, 1, 1, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_isend(t->g, peer, &x, 1, 1, &req[1]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 2, t_wait_s, NULL), CGPU_OK);
        CHILD_CHECKF(1 == cgpu_proxy_peers(), "%d peers connected", cgpu_proxy_peers());
    }
    if (0 == t->rank) {
        CHILD_ST(cgpu_proxy_isend(t->g, 2, &x, 1, 1, &req[0]), CGPU_ERR_NO_RESOURCE);
        CHILD_ST(cgpu_proxy_irecv(t->g, 2, &y, 1, 1, &req[0]), CGPU_ERR_NO_RESOURCE);
        CHILD_CHECKF(warned("coll_gpu_proxy_max_peers (1) reached"),
                     "no message about the peer cap; warnings:\n%s", child_warning_log);
        CHILD_CHECKF(1 == cgpu_proxy_peers(), "%d peers connected", cgpu_proxy_peers());
        /* the peer already connected still works */
        CHILD_ST(cgpu_proxy_isend(t->g, 1, &x, 1, 2, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 1, t_wait_s, NULL), CGPU_OK);
    } else if (1 == t->rank) {
        CHILD_ST(cgpu_proxy_irecv(t->g, 0, &y, 1, 2, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 1, t_wait_s, NULL), CGPU_OK);
    } else {
        CHILD_CHECKF(0 == cgpu_proxy_peers(), "%d peers connected", cgpu_proxy_peers());
    }
    barrier(t->area);
}

/* A receive from a peer that never sends: the wait gives up after its timeout and names
 * the peer; an abort stops a wait the same way; the proxy still works afterwards. */
static void sc_timeout(trank_t *t)
{
    unsigned char b[4096];
    cgpu_proxy_req_t req[2];
    if (0 == t->rank) {
        double t0 = now_s();
        CHILD_ST(cgpu_proxy_irecv(t->g, 1, b, sizeof(b), 1, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 1, 1.0, NULL), CGPU_ERR_TIMEOUT);
        double dt = now_s() - t0;
        CHILD_CHECKF(dt >= 1.0 && dt < 4.0, "the 1 s wait took %.2f s", dt);
        CHILD_CHECKF(CGPU_IN_PROGRESS != cgpu_proxy_test(&req[0]), "request still in progress");
        CHILD_CHECKF(warned("proxy: recv of 4096 bytes from rank 1 of group 7 did not complete "
                            "within 1.0 s (peer unreachable or dead)"),
                     "no timeout message; warnings:\n%s", child_warning_log);
        CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu after the timeout",
                     (unsigned long long) cgpu_proxy_queue_depth());

        _Atomic int abort_flag = 1;
        t0 = now_s();
        CHILD_ST(cgpu_proxy_irecv(t->g, 1, b, sizeof(b), 2, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 1, 0, &abort_flag), CGPU_ERR_TIMEOUT);
        dt = now_s() - t0;
        CHILD_CHECKF(dt < 3.0, "the aborted wait took %.2f s", dt);
        CHILD_CHECKF(warned("stopped by an abort"), "no abort message");
    }
    barrier(t->area);
    /* still usable: a message with a fresh tag */
    if (0 == t->rank) {
        CHILD_ST(cgpu_proxy_irecv(t->g, 1, b, 100, 3, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 1, t_wait_s, NULL), CGPU_OK);
        check_data(b, 100, 1, 0, 3, "after a timeout");
    } else {
        fill(b, 100, 1, 0, 3);
        CHILD_ST(cgpu_proxy_isend(t->g, 0, b, 100, 3, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_waitall(req, 1, t_wait_s, NULL), CGPU_OK);
    }
    barrier(t->area);
}

/* Rank 1 is killed (SIGKILL) in the middle of a 16 MiB exchange: rank 0's wait ends with
 * an error or a timeout within its limit, and rank 0 stops its proxy without hanging. */
static void sc_killed_peer(trank_t *t)
{
    const size_t n = 16u << 20;
    unsigned char *sb = xmalloc(n), *rb = xmalloc(n), x = 0;
    cgpu_proxy_req_t req[2];
    const int peer = 1 - t->rank;

    /* connected first */
    CHILD_ST(cgpu_proxy_irecv(t->g, peer, &x, 1, 1, &req[0]), CGPU_OK);
    CHILD_ST(cgpu_proxy_isend(t->g, peer, &x, 1, 1, &req[1]), CGPU_OK);
    CHILD_ST(cgpu_proxy_waitall(req, 2, t_wait_s, NULL), CGPU_OK);
    barrier(t->area);
    memset(sb, 1, n);
    if (1 == t->rank) {
        CHILD_ST(cgpu_proxy_irecv(t->g, peer, rb, n, 2, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_isend(t->g, peer, sb, n / 2, 3, &req[1]), CGPU_OK);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        kill(getpid(), SIGKILL);
    }
    const double t0 = now_s();
    CHILD_ST(cgpu_proxy_isend(t->g, peer, sb, n, 2, &req[0]), CGPU_OK);
    CHILD_ST(cgpu_proxy_irecv(t->g, peer, rb, n, 3, &req[1]), CGPU_OK);
    cgpu_status_t st = cgpu_proxy_waitall(req, 2, 5.0, NULL);
    const double dt = now_s() - t0;
    CHILD_CHECKF(CGPU_OK != st, "the exchange with a killed peer succeeded");
    CHILD_CHECKF(dt < 9.0, "the wait took %.2f s (limit 5 s + 2 s cancel grace)", dt);
    free(sb);
    free(rb);
}

/* Destroying a group with a receive in flight cancels it, says so, and does not hang. */
static void sc_destroy_inflight(trank_t *t)
{
    unsigned char b[64];
    cgpu_proxy_req_t req;
    if (0 == t->rank) {
        CHILD_ST(cgpu_proxy_irecv(t->g, 1, b, sizeof(b), 1, &req), CGPU_OK);
        cgpu_proxy_group_destroy(&t->g);
        CHILD_CHECK(NULL == t->g);
        CHILD_ST(cgpu_proxy_test(&req), CGPU_ERR_STATE);
        CHILD_CHECKF(warned("destroyed with 1 operation(s) in flight"), "no misuse message");
        CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu",
                     (unsigned long long) cgpu_proxy_queue_depth());
    }
    barrier(t->area);
}

/* Invalid arguments are refused at once. */
static void sc_invalid(trank_t *t)
{
    unsigned char b[8] = {0};
    cgpu_proxy_req_t req;
    cgpu_proxy_group_t *g = NULL;
    cgpu_prof_comm_t prof_off = {0};
    CHILD_ST(cgpu_proxy_isend(t->g, t->rank, b, 8, 1, &req), CGPU_ERR_INVALID_ARG);
    CHILD_ST(cgpu_proxy_isend(t->g, t->size, b, 8, 1, &req), CGPU_ERR_INVALID_ARG);
    CHILD_ST(cgpu_proxy_irecv(t->g, -1, b, 8, 1, &req), CGPU_ERR_INVALID_ARG);
    CHILD_ST(cgpu_proxy_irecv(t->g, 1 - t->rank, NULL, 8, 1, &req), CGPU_ERR_INVALID_ARG);
    CHILD_ST(cgpu_proxy_isend(NULL, 0, b, 8, 1, &req), CGPU_ERR_INVALID_ARG);
    CHILD_ST(cgpu_proxy_group_create(t->rank, t->size, t->area->name, 0x100000u, &prof_off, &g),
             CGPU_ERR_INVALID_ARG);
    CHILD_CHECK(NULL == g);
    CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu",
                 (unsigned long long) cgpu_proxy_queue_depth());
    barrier(t->area);
}

/* ---- application threads submitting at once ---- */

typedef struct thread_arg {
    trank_t *t;
    cgpu_proxy_group_t *g;
    uint32_t salt;
    int failures;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *a = p;
    const int peer = 1 - a->t->rank;
    enum { ROUNDS = 300 };
    unsigned char sb[2048], rb[2048];
    for (int i = 0; i < ROUNDS && 0 == a->failures; ++i) {
        const size_t n = 1 + (size_t) (i * 7) % sizeof(sb);
        const uint32_t tag = a->salt + (uint32_t) i;
        cgpu_proxy_req_t req[2];
        fill(sb, n, a->t->rank, peer, tag);
        if (CGPU_OK != cgpu_proxy_irecv(a->g, peer, rb, n, (uint32_t) i, &req[0]) ||
            CGPU_OK != cgpu_proxy_isend(a->g, peer, sb, n, (uint32_t) i, &req[1]) ||
            CGPU_OK != cgpu_proxy_waitall(req, 2, t_wait_s, NULL)) {
            a->failures++;
            break;
        }
        for (size_t j = 0; j < n; ++j) {
            if (rb[j] != pat(peer, a->t->rank, tag, j)) {
                a->failures++;
                break;
            }
        }
    }
    return NULL;
}

/* Three threads per process, each on its own group, using the same tags at once. */
static void sc_threads(trank_t *t)
{
    enum { NT = 3 };
    thread_arg_t a[NT];
    pthread_t th[NT];
    cgpu_prof_comm_t prof_off = {0};
    for (int k = 0; k < NT; ++k) {
        a[k] = (thread_arg_t){.t = t, .g = NULL, .salt = 1000u * (uint32_t) (k + 1)};
        CHILD_ST(cgpu_proxy_group_create(t->rank, t->size, t->area->name, 40 + (uint32_t) k,
                                         &prof_off, &a[k].g),
                 CGPU_OK);
    }
    for (int k = 0; k < NT; ++k) {
        CHILD_CHECK(0 == pthread_create(&th[k], NULL, thread_main, &a[k]));
    }
    for (int k = 0; k < NT; ++k) {
        pthread_join(th[k], NULL);
        CHILD_CHECKF(0 == a[k].failures, "thread %d failed", k);
        cgpu_proxy_group_destroy(&a[k].g);
    }
    CHILD_CHECKF(0 == cgpu_proxy_queue_depth(), "queue depth %llu",
                 (unsigned long long) cgpu_proxy_queue_depth());
    barrier(t->area);
}

/* ---- device memory (where a GPU is usable) ---- */

static unsigned cfg_device(cgpu_config_t *cfg, int rank)
{
    (void) rank;
    cfg->proxy_bounce_bytes = 1u << 20; /* 16 MiB = 16 chunks through the double buffer */
    return 0;
}

/* Ring exchanges from and into cudaMalloc'd memory (odd ranks use host memory, so device
 * and host sides meet); staged through the bounce buffers or direct with FI_HMEM. */
static void sc_device(trank_t *t)
{
    const int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    const bool dev = 0 == t->rank % 2;
    if (!CHILD_CHECK(cgpu_cuda_available())) {
        barrier(t->area);
        return;
    }
    for (size_t k = 0; k < T_ARRAY_LEN(ring_sizes); ++k) {
        const size_t n = ring_sizes[k], alloc = n > 0 ? n : 1;
        const uint32_t tag = 500 + (uint32_t) k;
        unsigned char *hs = xmalloc(alloc), *hr = xmalloc(alloc);
        void *ds = NULL, *dr = NULL;
        cgpu_proxy_req_t req[2];
        fill(hs, n, t->rank, right, tag);
        memset(hr, 0xA5, alloc);
        if (dev) {
            CHILD_ST(cgpu_cuda_malloc(&ds, alloc, NULL), CGPU_OK);
            CHILD_ST(cgpu_cuda_malloc(&dr, alloc, NULL), CGPU_OK);
            CHILD_ST(cgpu_cuda_copy(ds, hs, alloc), CGPU_OK);
            CHILD_ST(cgpu_cuda_copy(dr, hr, alloc), CGPU_OK);
        }
        CHILD_ST(cgpu_proxy_irecv(t->g, left, dev ? dr : hr, n, tag, &req[0]), CGPU_OK);
        CHILD_ST(cgpu_proxy_isend(t->g, right, dev ? ds : hs, n, tag, &req[1]), CGPU_OK);
        cgpu_status_t st = cgpu_proxy_waitall(req, 2, t_wait_s, NULL);
        if (CHILD_CHECKF(CGPU_OK == st, "device ring of %zu bytes: %s", n,
                         cgpu_status_string(st))) {
            if (dev) {
                CHILD_ST(cgpu_cuda_copy(hr, dr, alloc), CGPU_OK);
            }
            check_data(hr, n, left, t->rank, tag,
                       dev ? "device ring (device side)" : "device ring (host side)");
        }
        if (dev) {
            cgpu_cuda_free(ds);
            cgpu_cuda_free(dr);
        }
        free(hs);
        free(hr);
        if (CGPU_OK != st) {
            break;
        }
    }
    barrier(t->area);
}

/* ---- profiler: events in the group's own context, started and stopped in pairs ---- */

typedef void (*report_fn)(unsigned long long *, unsigned long long *, unsigned long long *,
                          unsigned long long *);
typedef void (*transport_fn)(unsigned long long *, unsigned long long *);

static unsigned cfg_profiler(cgpu_config_t *cfg, int rank)
{
    (void) rank;
    cfg->profiler = getenv("CGPU_PROF_CHECK_PLUGIN");
    return 0;
}

/* Two groups with their own profiler contexts, 1,200 operations each (past the 1,024 at
 * which a seed bug handed another communicator's context to the plugin), with and without
 * a collective in progress as the parent. */
static void sc_profiler(trank_t *t)
{
    enum { OPS = 1200, BATCH = 40 };
    const char *path = getenv("CGPU_PROF_CHECK_PLUGIN");
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    report_fn report = NULL != dl ? (report_fn) dlsym(dl, "cgpu_check_plugin_report") : NULL;
    transport_fn transport =
        NULL != dl ? (transport_fn) dlsym(dl, "cgpu_check_plugin_transport") : NULL;
    if (!CHILD_CHECKF(NULL != report && NULL != transport, "the check plugin is not loaded")) {
        barrier(t->area);
        return;
    }
    cgpu_prof_comm_t pc[2];
    cgpu_proxy_group_t *g[2] = {NULL, NULL};
    for (int k = 0; k < 2; ++k) {
        char name[16];
        snprintf(name, sizeof(name), "check-%d", k + 1);
        cgpu_prof_comm_info_v1_t info = {.name = name,
                                         .comm_id = 100 + (uint64_t) k,
                                         .size = t->size,
                                         .rank = t->rank,
                                         .pid = (int64_t) getpid(),
                                         .backend = "host"};
        cgpu_prof_comm_init(&pc[k], &info);
        CHILD_CHECK(pc[k].on);
        CHILD_ST(cgpu_proxy_group_create(t->rank, t->size, t->area->name, 20 + (uint32_t) k, &pc[k],
                                         &g[k]),
                 CGPU_OK);
    }
    unsigned long long tr0, mx0, ev, mis, unm, live, tr1, mx1;
    transport(&tr0, &mx0);
    const int peer = 1 - t->rank;
    uint32_t seq[2] = {0, 0};
    unsigned char sb[BATCH][16], rb[BATCH][16];
    cgpu_proxy_req_t req[2 * BATCH];
    for (int round = 0; round < 2 * OPS / BATCH; ++round) {
        const int k = round % 2;
        cgpu_prof_ev_t coll = {.on = false};
        if (0 == round % 4) { /* a collective as the parent of this batch */
            cgpu_prof_event_v1_t ce = {.type = CGPU_PROF_EVENT_COLL_V1};
            ce.u.coll = (cgpu_prof_coll_v1_t){.kind = "allreduce",
                                              .count = 1000u + (size_t) k + 1,
                                              .datatype = "int32",
                                              .op = "sum",
                                              .root = -1,
                                              .algorithm = "ring",
                                              .seq = ++seq[k]};
            cgpu_prof_start(&pc[k], &ce, &coll);
            pc[k].coll = coll.handle;
            pc[k].coll_on = coll.on;
        }
        for (int i = 0; i < BATCH / 2; ++i) {
            memset(sb[i], round, sizeof(sb[i]));
            CHILD_ST(cgpu_proxy_irecv(g[k], peer, rb[i], 16, (uint32_t) i, &req[i]), CGPU_OK);
            CHILD_ST(cgpu_proxy_isend(g[k], peer, sb[i], 16, (uint32_t) i, &req[BATCH / 2 + i]),
                     CGPU_OK);
        }
        CHILD_ST(cgpu_proxy_waitall(req, BATCH, t_wait_s, NULL), CGPU_OK);
        if (pc[k].coll_on) {
            cgpu_prof_stop(&coll);
            pc[k].coll_on = false;
        }
    }
    transport(&tr1, &mx1);
    CHILD_CHECKF(tr1 - tr0 == 2 * OPS, "%llu proxy events started, %d expected", tr1 - tr0,
                 2 * OPS);
    for (int k = 0; k < 2; ++k) {
        cgpu_proxy_group_destroy(&g[k]);
        cgpu_prof_comm_fini(&pc[k]);
    }
    report(&ev, &mis, &unm, &live);
    CHILD_CHECKF(0 == mis && 0 == unm, "check plugin: %llu mismatches, %llu unmatched events", mis,
                 unm);
    barrier(t->area);
}

/* ---- a region left in /dev/shm under this process's shm name ---- */

/* the regions rank 0 made for itself, removed at its end: the provider's name for this pid
 * and the first name the proxy would take instead */
static char stale_path[2][64];

/* Rank 0 plays the process that gets the pid of one killed before it closed its shm
 * endpoint: a region under the name libfabric's shm gives this pid ("<pid>:0:0") exists,
 * and one under the first name the proxy tries next. */
static unsigned cfg_stale_name(cgpu_config_t *cfg, int rank)
{
    (void) cfg;
    for (int k = 0; 0 == rank && k < 2; ++k) {
        snprintf(stale_path[k], sizeof(stale_path[k]), "/dev/shm/%d:0:0%s", (int) getpid(),
                 0 == k ? "" : ":cgpu1");
        const int fd = open(stale_path[k], O_CREAT | O_EXCL | O_RDWR, 0600);
        if (!CHILD_CHECKF(fd >= 0, "cannot make %s: %s", stale_path[k], strerror(errno)) ||
            !CHILD_CHECKF(0 == ftruncate(fd, 4096), "ftruncate: %s", strerror(errno))) {
            stale_path[k][0] = '\0';
        }
        if (fd >= 0) {
            close(fd);
        }
    }
    return 0;
}

/* The proxy still starts (under a free name, which the peers use; without the check of the
 * replacement names it would take <pid>:0:0:cgpu1 and fail), the regions in the way are
 * untouched, and a ring works. */
static void sc_stale_name(trank_t *t)
{
    if (0 == t->rank) {
#ifdef CGPU_HAVE_LIBFABRIC
        /* the region of the name it ended with is its own, not one that was in the way
         * (with a GPU whose memory shm cannot register, the endpoint is opened a second
         * time, under the provider's next name) */
        char mine[CGPU_PROXY_ADDR_BYTES + 16];
        CHILD_CHECK(cgpu_ofi_shm_region(t->area->name[0], mine, sizeof(mine)));
        for (int k = 0; k < 2; ++k) {
            CHILD_CHECKF(0 != strcmp(mine, stale_path[k]), "the endpoint took the name of %s",
                         stale_path[k]);
        }
#endif
        for (int k = 0; k < 2; ++k) {
            CHILD_CHECKF(0 == access(stale_path[k], F_OK), "%s was removed", stale_path[k]);
        }
    }
    ring_round(t, t->g, 700);
    for (int k = 0; 0 == t->rank && k < 2; ++k) {
        if ('\0' != stale_path[k][0]) {
            (void) unlink(stale_path[k]);
        }
    }
    barrier(t->area);
}

/* ------------------------------------------------------------------------------------ */
/* Cases                                                                                 */
/* ------------------------------------------------------------------------------------ */

static const scenario_t S_RING2 = {"ring exchange, 2 ranks", 2, sc_ring, NULL, -1, false};
static const scenario_t S_RING4 = {"ring exchange, 4 ranks", 4, sc_ring, NULL, -1, false};
static const scenario_t S_IDLE = {"idle process", 2, sc_idle, NULL, -1, false};
static const scenario_t S_STAGED = {"staged ring", 2, sc_staged, cfg_staged_mixed, -1, false};
static const scenario_t S_STAGED3 = {"staged ring, 3 ranks", 3,  sc_staged,
                                     cfg_staged_mixed,       -1, false};
static const scenario_t S_NODIR = {"no directed receive", 3,  sc_no_directed,
                                   cfg_no_directed,       -1, true};
static const scenario_t S_MANY = {"many in flight", 2, sc_many, cfg_small_window, -1, false};
static const scenario_t S_OOO = {"out of order", 2, sc_out_of_order, NULL, -1, false};
static const scenario_t S_GROUPS = {"two groups", 2, sc_two_groups, NULL, -1, false};
static const scenario_t S_CROSSED = {"groups crossed", 2, sc_groups_crossed, cfg_small_window,
                                     -1, false};
static const scenario_t S_CROSSED_STAGED = {"groups crossed, staged", 2, sc_groups_crossed,
                                            cfg_small_window_staged, -1, false};
static const scenario_t S_CAP = {"peer cap", 3, sc_peer_cap, cfg_one_peer, -1, true};
static const scenario_t S_TIMEOUT = {"timeout", 2, sc_timeout, NULL, -1, true};
static const scenario_t S_KILLED = {"killed peer", 2, sc_killed_peer, NULL, 1, true};
static const scenario_t S_DESTROY = {"destroy in flight", 2, sc_destroy_inflight, NULL, -1, true};
static const scenario_t S_INVALID = {"invalid arguments", 2, sc_invalid, NULL, -1, true};
static const scenario_t S_THREADS = {"threads", 2, sc_threads, NULL, -1, false};
static const scenario_t S_DEVICE = {"device memory ring", 2, sc_device, cfg_device, -1, false};
static const scenario_t S_DEVICE3 = {
    "device memory ring, 3 ranks", 3, sc_device, cfg_device, -1, false};
static const scenario_t S_PROF = {"profiler contexts", 2, sc_profiler, cfg_profiler, -1, false};
static const scenario_t S_STALE = {"stale shm name", 2, sc_stale_name, cfg_stale_name, -1, false};

/* one line per case reads better than what clang-format makes of these tables */
/* clang-format off */
#define T_CASE(prov, id, sc)                                                                   \
    static void test_##prov##_##id(void)                                                       \
    {                                                                                          \
        CU_ASSERT_TRUE(run_ranks(&(sc), #prov));                                               \
    }

#define T_CASES(prov)                                                                          \
    T_CASE(prov, ring2, S_RING2)                                                               \
    T_CASE(prov, ring4, S_RING4)                                                               \
    T_CASE(prov, idle, S_IDLE)                                                                 \
    T_CASE(prov, staged, S_STAGED)                                                             \
    T_CASE(prov, staged3, S_STAGED3)                                                           \
    T_CASE(prov, nodir, S_NODIR)                                                               \
    T_CASE(prov, many, S_MANY)                                                                 \
    T_CASE(prov, ooo, S_OOO)                                                                   \
    T_CASE(prov, groups, S_GROUPS)                                                             \
    T_CASE(prov, crossed, S_CROSSED)                                                           \
    T_CASE(prov, cap, S_CAP)                                                                   \
    T_CASE(prov, timeout, S_TIMEOUT)                                                           \
    T_CASE(prov, killed, S_KILLED)                                                             \
    T_CASE(prov, destroy, S_DESTROY)                                                           \
    T_CASE(prov, invalid, S_INVALID)                                                           \
    T_CASE(prov, prof, S_PROF)                                                                 \
    T_CASE(prov, threads, S_THREADS)                                                           \
    T_CASE(prov, device, S_DEVICE)                                                             \
    T_CASE(prov, device3, S_DEVICE3)

T_CASES(tcp)
T_CASES(shm)
T_CASE(tcp, crossed_staged, S_CROSSED_STAGED)
T_CASE(shm, stale, S_STALE)

#define T_ENTRIES(prov)                                                                        \
    {#prov ": ring exchange of 0 B to 16 MiB between 2 ranks, data checked", test_##prov##_ring2}, \
    {#prov ": ring exchange of 0 B to 16 MiB between 4 ranks", test_##prov##_ring4},             \
    {#prov ": an idle process's proxy thread sleeps", test_##prov##_idle},                        \
    {#prov ": staged and direct ranks cut 280 chunks alike",                    \
     test_##prov##_staged},                                                                    \
    {#prov ": staged ring between 3 ranks", test_##prov##_staged3},                               \
    {#prov ": without directed receive the source rank in the tag keeps senders apart",           \
     test_##prov##_nodir},                                                                     \
    {#prov ": 200 operations through a window of 4 complete and the queue drains",                \
     test_##prov##_many},                                                                      \
    {#prov ": receives posted in reverse order of the sends match by tag", test_##prov##_ooo},    \
    {#prov ": two groups with the same tags do not mix", test_##prov##_groups},                   \
    {#prov ": two groups posted in opposite orders past a window of 4 both complete",             \
     test_##prov##_crossed},                                                                   \
    {#prov ": the peer cap refuses a second peer with NO_RESOURCE", test_##prov##_cap},           \
    {#prov ": a peer that never sends times out, an abort stops a wait", test_##prov##_timeout},  \
    {#prov ": a peer killed mid-exchange ends the wait within its limit", test_##prov##_killed},  \
    {#prov ": destroying a group cancels what is in flight", test_##prov##_destroy},              \
    {#prov ": invalid arguments are refused", test_##prov##_invalid},                             \
    {#prov ": profiler events stay in their group's context past 1,024 operations",               \
     test_##prov##_prof},                                                                      \
    {#prov ": three threads on three groups submit at once with the same tags",                   \
     test_##prov##_threads},                                                                   \
    {#prov ": GPU: device memory ring exchange with a host peer, 2 ranks", test_##prov##_device}, \
    {#prov ": GPU: device memory ring exchange, 3 ranks", test_##prov##_device3}

/* clang-format on */
static const cgpu_unit_case_t all_cases[] = {
    T_ENTRIES(tcp),
    {"tcp: two groups crossed past the window, one side staged through a pool of 2 bounce pairs",
     test_tcp_crossed_staged},
    T_ENTRIES(shm),
    {"shm: a region left in /dev/shm under this process's shm name does not stop the proxy",
     test_shm_stale}};

/* A build without libfabric: every entry point says "not supported", nothing crashes. */
static void test_not_built(void)
{
    cgpu_config_t cfg;
    cgpu_proxy_group_t *g = (cgpu_proxy_group_t *) &cfg;
    unsigned char names[2][CGPU_PROXY_ADDR_BYTES] = {{0}};
    cgpu_proxy_req_t req;
    cgpu_config_default(&cfg);
    cfg.log = t_log;
    CU_ASSERT_EQUAL(cgpu_engine_init(&cfg), CGPU_OK);
    CU_ASSERT_FALSE(cgpu_proxy_built());
    CU_ASSERT_EQUAL(cgpu_proxy_acquire(), CGPU_ERR_NOT_SUPPORTED);
    CU_ASSERT_STRING_EQUAL(cgpu_proxy_provider(), "none");
    CU_ASSERT_FALSE(cgpu_proxy_hmem());
    CU_ASSERT_EQUAL(cgpu_proxy_group_create(0, 2, names, 1, NULL, &g), CGPU_ERR_NOT_SUPPORTED);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_EQUAL(cgpu_proxy_isend(NULL, 1, names, 1, 0, &req), CGPU_ERR_NOT_SUPPORTED);
    CU_ASSERT_EQUAL(cgpu_proxy_queue_depth(), 0);
    cgpu_proxy_release();
    cgpu_engine_fini();
}

/* Whether the proxy starts on @p provider here (in a child: the parent stays free of
 * libfabric, so forks stay clean). */
static bool provider_works(const char *provider, char *why, size_t len)
{
    int fd[2];
    if (0 != pipe(fd)) {
        snprintf(why, len, "pipe failed");
        return false;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (0 == pid) {
        cgpu_config_t cfg;
        char out[200] = "";
        close(fd[0]);
        cgpu_config_default(&cfg);
        cfg.backend = CGPU_BACKEND_HOST;
        cfg.ofi_provider = provider;
        cfg.log = t_log;
        child_rank = 0;
        cgpu_engine_init(&cfg);
        cgpu_status_t st = cgpu_proxy_acquire();
        if (CGPU_OK == st) {
            snprintf(out, sizeof(out), "ok %s%s", cgpu_proxy_provider(),
                     cgpu_cuda_available()
                         ? (cgpu_proxy_hmem() ? " (GPU usable, FI_HMEM)" : " (GPU usable, staged)")
                         : "");
            cgpu_proxy_release();
        } else {
            snprintf(out, sizeof(out), "cgpu_proxy_acquire: %s", cgpu_status_string(st));
        }
        cgpu_engine_fini();
        ssize_t w = write(fd[1], out, strlen(out));
        _exit(w > 0 ? 0 : 1);
    }
    close(fd[1]);
    char buf[200] = "";
    ssize_t n = pid > 0 ? read(fd[0], buf, sizeof(buf) - 1) : -1;
    close(fd[0]);
    if (pid > 0) {
        waitpid(pid, NULL, 0);
    }
    buf[n > 0 ? n : 0] = '\0';
    snprintf(why, len, "%s", buf);
    return 0 == strncmp(buf, "ok ", 3);
}

int main(void)
{
    const char *v = getenv("CGPU_TEST_VERBOSE");
    const char *plugin = getenv("CGPU_PROF_CHECK_PLUGIN");
    const bool have_plugin = NULL != plugin && '\0' != plugin[0] && 0 == access(plugin, R_OK);
    cgpu_unit_case_t cases[T_ARRAY_LEN(all_cases)];
    size_t n = 0;
    bool ok[2];
    char why[2][200];
    const char *provs[2] = {"tcp", "shm"};

    t_verbose = NULL != v && '\0' != v[0] && 0 != strcmp(v, "0");
    if (!cgpu_proxy_built()) {
        static const cgpu_unit_case_t stub[] = {
            {"without libfabric every proxy call says not supported", test_not_built}};
        printf(
            "skipped: proxy not built (configure found no libfabric); only the stub is checked\n");
        return cgpu_unit_run("test_proxy", stub, 1);
    }
    /* the test chooses its providers itself */
    unsetenv("FI_PROVIDER");
    for (int p = 0; p < 2; ++p) {
        ok[p] = provider_works(provs[p], why[p], sizeof(why[p]));
        if (ok[p]) {
            printf("provider %s: %s\n", provs[p], why[p] + 3);
        } else {
            printf("skipped: provider %s unavailable (%s)\n", provs[p], why[p]);
        }
    }
    if (!have_plugin) {
        printf("skipped: profiler cases (CGPU_PROF_CHECK_PLUGIN not set or not readable)\n");
    }
    /* the probe ran in a child: the parent never touches CUDA, so forks stay clean */
    const bool gpu = (ok[0] && NULL != strstr(why[0], "GPU usable")) ||
                     (ok[1] && NULL != strstr(why[1], "GPU usable"));
    if (!gpu) {
        printf("skipped: GPU cases (no usable GPU)\n");
    }
    const char *only = getenv("CGPU_TEST_ONLY"); /* run the cases whose name holds this */
    for (size_t k = 0; k < T_ARRAY_LEN(all_cases); ++k) {
        const int p = 0 == strncmp(all_cases[k].name, "tcp:", 4) ? 0 : 1;
        if (NULL != only && '\0' != only[0] && NULL == strstr(all_cases[k].name, only)) {
            continue;
        }
        if (!ok[p] || (!have_plugin && NULL != strstr(all_cases[k].name, "profiler")) ||
            (!gpu && NULL != strstr(all_cases[k].name, ": GPU:"))) {
            continue;
        }
        cases[n++] = all_cases[k];
    }
    if (0 == n) {
        printf("skipped: no provider usable\n");
        return 77;
    }
    return cgpu_unit_run("test_proxy", cases, n);
}
