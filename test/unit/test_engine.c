/*
 * Unit test of the coll/gpu engine (coll_gpu/engine/, btl_glue/cgpu_shm.c) on the host
 * backend, with in-process ranks made by fork().
 *
 * The engine reaches its peers only through a bootstrap (allgather and barrier), so the
 * test gives every group of forked ranks one here: an anonymous MAP_SHARED mapping made
 * before fork(), a slot of bytes per rank and a generation-counter barrier on C11
 * atomics. Each child starts the engine, creates a communicator, runs one scenario and
 * exits with a non-zero status if any of its checks failed; the parent waits for all of
 * them with a deadline, kills what is left after a failure or a hang, and turns every
 * rank's exit status into a CUnit assertion.
 *
 * CUnit's assertions must not be used inside a child: they would only change the
 * child's copy of the registry. Children use CHILD_CHECK / CHILD_CHECKF, which print
 * file:line with the rank and count the failure; the count becomes the exit status.
 * A failed check never skips a collective by itself, so the ranks stay in lockstep and
 * every mismatch of a run is reported, not only the first rank's.
 *
 * Every reference result is computed here with plain scalar code from the deterministic
 * inputs of all ranks; nothing calls cgpu_reduce_host() to produce an expected value.
 *
 * The engine runs with small slots (4 KiB, 2 per queue) and a small alltoall stage
 * (8 KiB), so that the ring pipeline loops and wraps its queue many times and an alltoall
 * of 100000 bytes per peer takes dozens of rounds.
 *
 * `make check` builds it against libcgpu_engine.la. By hand, from the repository root of
 * a tree configured without CUDA (cgpu_config.h without CGPU_HAVE_CUDA):
 *   gcc -std=gnu11 -O2 -g -Wall -Wextra -I. -Icoll_gpu/engine coll_gpu/engine/cgpu_*.c \
 *       btl_glue/cgpu_*.c kernels/cgpu_reduce_host.c test/unit/test_engine.c \
 *       -lcunit -lpthread -lrt -o /tmp/test_engine && /tmp/test_engine
 * CGPU_TEST_VERBOSE=1 prints every engine message with the rank that logged it.
 */

#include <CUnit/Basic.h>

#include "../proc_state.h"
#include "child_check.h"
#include "cunit_run.h"
#include "cgpu_comm_internal.h"
#include "cgpu_host_pool.h"
#include "cgpu_proxy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "cgpu_cuda.h"
#include "cgpu_clock.h"
#include "cgpu_proc.h"
#include "cgpu_shm.h"
#include "cgpu_engine.h"

enum {
    TEST_MAX_RANKS = 8,
    TEST_BOOT_SLOT_BYTES = 4096, /* largest allgather the bootstrap carries per rank */
    TEST_SLOT_BYTES = 4096,      /* engine ring slot */
    TEST_NSLOTS = 2,             /* engine ring queue depth */
    TEST_STAGE_BYTES = 8192,     /* engine alltoall stage */
    TEST_GUARD_BYTES = 64,       /* bytes after every receive buffer that must stay intact */
    TEST_RUN_TIMEOUT_S = 30,     /* one group of ranks, one scenario (see run_timeout_s) */
    TEST_FAIL_GRACE_MS = 1000,   /* after a rank failed, how long the others get to finish */
    TEST_DTYPE_COUNT = 1201,     /* elements per dtype x op allreduce (a prime) */
    TEST_LOCKSTEP_OPS = 2000,
};

/* Byte that fills every buffer region the engine must not write. */
#define TEST_GUARD_FILL 0xA5

#define TEST_ARRAY_LEN(arr) (sizeof(arr) / sizeof((arr)[0]))

/* Group sizes every multi-rank case runs with: even, odd, a power of two and a prime. */
static const int test_rank_counts[] = {2, 3, 4, 7};

/* Set from CGPU_TEST_VERBOSE: print every engine message. */
static bool test_verbose;

/* ------------------------------------------------------------------------------------- */
/* The bootstrap of forked ranks                                                          */
/* ------------------------------------------------------------------------------------- */

/* Shared by one group of ranks; mapped before fork(), so every child sees the same page. */
typedef struct boot_area {
    _Atomic unsigned int arrived;    /* ranks in the current barrier */
    _Atomic unsigned int generation; /* completed barriers */
    _Atomic int aborted;             /* set by the parent once a rank failed: stop waiting */
    int size;
    unsigned char slot[TEST_MAX_RANKS][TEST_BOOT_SLOT_BYTES];
} boot_area_t;

typedef struct boot_ctx {
    boot_area_t *area;
    int rank;
} boot_ctx_t;

/*
 * Generation-counter barrier. The generation is read before arriving, and only the last
 * rank to arrive moves it on (after resetting the arrival count), so it cannot change
 * between a rank's read and its arrival.
 */
static cgpu_status_t boot_barrier(void *ctx)
{
    boot_area_t *area = ((boot_ctx_t *) ctx)->area;
    const unsigned int gen = atomic_load(&area->generation);
    unsigned int spins = 0;

    if ((unsigned int) area->size - 1 == atomic_fetch_add(&area->arrived, 1)) {
        atomic_store(&area->arrived, 0);
        atomic_fetch_add(&area->generation, 1);
        return CGPU_OK;
    }
    while (gen == atomic_load(&area->generation)) {
        if (0 != atomic_load(&area->aborted)) {
            return CGPU_ERR_BOOTSTRAP;
        }
        /* More ranks than cores: give the CPU away, and stop polling hard after a while. */
        if (++spins < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return CGPU_OK;
}

/* Publish into our slot, wait for everyone, read every slot, wait until all have read. */
static cgpu_status_t boot_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    boot_ctx_t *bc = ctx;
    boot_area_t *area = bc->area;
    cgpu_status_t st;

    if (bytes > TEST_BOOT_SLOT_BYTES) {
        /* bytes is the same on every rank, so every rank refuses alike */
        return CGPU_ERR_INVALID_ARG;
    }
    memcpy(area->slot[bc->rank], sbuf, bytes);
    st = boot_barrier(ctx);
    if (CGPU_OK != st) {
        return st;
    }
    for (int i = 0; i < area->size; ++i) {
        memcpy((unsigned char *) rbuf + (size_t) i * bytes, area->slot[i], bytes);
    }
    return boot_barrier(ctx);
}

/* ------------------------------------------------------------------------------------- */
/* Inside a child: checks, engine log capture, common set-up                              */
/* ------------------------------------------------------------------------------------- */

/* What a scenario sees of its rank. */
typedef struct test_rank {
    int rank;
    int size;
    cgpu_bootstrap_t bs;
    boot_ctx_t boot;
    pid_t pids[TEST_MAX_RANKS]; /* every rank's process, for the /dev/shm checks */
    const void *arg;            /* scenario parameter from the case */
} test_rank_t;

typedef void (*test_scenario_fn_t)(test_rank_t *t);

static int child_warnings;
static bool child_warnings_expected; /* the scenario provokes engine warnings on purpose */
static char child_last_warning[512];

/* The engine's log sink in children: warnings are counted, everything printed on demand. */
static void test_log(int level, const char *msg)
{
    if (CGPU_LOG_WARN == level) {
        ++child_warnings;
        snprintf(child_last_warning, sizeof(child_last_warning), "%s", msg);
    }
    if (test_verbose) {
        fprintf(stderr, "    [rank %d of %d] coll/gpu (%d): %s\n", child_rank, child_size, level,
                msg);
    }
}

/* The configuration every scenario starts from. */
static void child_config(cgpu_config_t *cfg)
{
    cgpu_config_default(cfg);
    cfg->backend = CGPU_BACKEND_HOST;
    cfg->slot_bytes = TEST_SLOT_BYTES;
    cfg->nslots = TEST_NSLOTS;
    cfg->stage_bytes = TEST_STAGE_BYTES;
    /* segments unmapped at each release, as the scenarios' counts expect; the pool's own
     * scenarios turn it on */
    cfg->shm_pool = 0;
    cfg->log = test_log;
}

/* Start the engine with @p cfg and create a communicator; false after reporting why not. */
static bool child_start(test_rank_t *t, const cgpu_config_t *cfg, cgpu_comm_t **comm)
{
    cgpu_status_t st = cgpu_engine_init(cfg);

    if (!CHILD_CHECKF(CGPU_OK == st, "cgpu_engine_init: %s", cgpu_status_string(st))) {
        return false;
    }
    st = cgpu_comm_create(&t->bs, comm);
    if (!CHILD_CHECKF(CGPU_OK == st, "cgpu_comm_create: %s", cgpu_status_string(st))) {
        return false;
    }
    return CHILD_CHECK(NULL != *comm) && CHILD_CHECK(t->rank == cgpu_comm_rank(*comm)) &&
           CHILD_CHECK(t->size == cgpu_comm_size(*comm));
}

/* Number of names /dev/shm holds for segments of process @p pid (named
 * "cgpu-<uid>-<pid>-<random part>", docs/troubleshooting.md); removes them if asked. */
static int shm_names_of(pid_t pid, bool remove)
{
    char prefix[48];
    size_t len;
    struct dirent *e;
    int n = 0;
    DIR *dir = opendir("/dev/shm");

    if (NULL == dir) {
        return 0;
    }
    snprintf(prefix, sizeof(prefix), "cgpu-%u-%d-", (unsigned) geteuid(), (int) pid);
    len = strlen(prefix);
    while (NULL != (e = readdir(dir))) {
        if (0 == strncmp(e->d_name, prefix, len)) {
            ++n;
            if (remove) {
                char name[300];

                snprintf(name, sizeof(name), "/%s", e->d_name);
                shm_unlink(name);
            }
        }
    }
    closedir(dir);
    return n;
}

/*
 * No rank of the group has a segment name in /dev/shm. Collective: the first barrier
 * lets every rank finish what it was doing, the second keeps a fast rank from creating
 * its next segment while a slow one is still looking.
 */
static void check_no_shm_names(test_rank_t *t, const char *when)
{
    CHILD_CHECKF(CGPU_OK == t->bs.barrier(t->bs.ctx), "barrier before the /dev/shm check");
    for (int r = 0; r < t->size; ++r) {
        int n = shm_names_of(t->pids[r], false);

        CHILD_CHECKF(0 == n, "%s: rank %d (pid %d) has %d segment name(s) in /dev/shm", when, r,
                     (int) t->pids[r], n);
    }
    CHILD_CHECKF(CGPU_OK == t->bs.barrier(t->bs.ctx), "barrier after the /dev/shm check");
}

/* Every rank's @p st is the same; returns false (after reporting) if not. */
static bool check_same_status(test_rank_t *t, cgpu_status_t st, const char *what)
{
    int32_t mine = (int32_t) st, all[TEST_MAX_RANKS];
    bool same = true;

    if (!CHILD_CHECKF(CGPU_OK == t->bs.allgather(t->bs.ctx, &mine, all, sizeof(mine)),
                      "allgather of the %s status", what)) {
        return false;
    }
    for (int r = 0; r < t->size; ++r) {
        same = CHILD_CHECKF(all[r] == mine, "%s: rank %d got %s, this rank got %s", what, r,
                            cgpu_status_string((cgpu_status_t) all[r]), cgpu_status_string(st)) &&
               same;
    }
    return same;
}

/* The child: run the scenario, then the checks every scenario must pass, then exit. */
static void child_main(boot_area_t *area, int rank, int size, test_scenario_fn_t fn,
                       const void *arg) __attribute__((noreturn));

static void child_main(boot_area_t *area, int rank, int size, test_scenario_fn_t fn,
                       const void *arg)
{
    test_rank_t t;
    int32_t pid = (int32_t) getpid(), pids[TEST_MAX_RANKS];

    /* Names carrying our pid now are not ours: a process killed before it unlinked them
     * (an aborted MPI job) had this pid before. The checks below count our pid's names. */
    (void) shm_names_of(pid, true);
    child_rank = rank;
    child_size = size;
    memset(&t, 0, sizeof(t));
    t.rank = rank;
    t.size = size;
    t.arg = arg;
    t.boot.area = area;
    t.boot.rank = rank;
    t.bs.ctx = &t.boot;
    t.bs.rank = rank;
    t.bs.size = size;
    t.bs.allgather = boot_allgather;
    t.bs.barrier = boot_barrier;

    if (CHILD_CHECK(CGPU_OK == boot_allgather(&t.boot, &pid, pids, sizeof(pid)))) {
        for (int r = 0; r < size; ++r) {
            t.pids[r] = (pid_t) pids[r];
        }
        fn(&t);
    }

    CHILD_CHECKF(0 == cgpu_shm_mapped_count(), "%d segment(s) still mapped after the scenario",
                 cgpu_shm_mapped_count());
    cgpu_engine_fini();
    CHILD_CHECKF(0 == child_warnings || child_warnings_expected,
                 "%d unexpected engine warning(s), the last: \"%s\"", child_warnings,
                 child_last_warning);
    /*
     * exit(), not _exit(): stdout was flushed before fork() so nothing is printed twice,
     * and under -fsanitize=address the leak check then runs in every rank too.
     */
    exit(0 == child_failures ? EXIT_SUCCESS : EXIT_FAILURE);
}

/* The deadline of one scenario: TEST_RUN_TIMEOUT_S, or CGPU_TEST_RUN_TIMEOUT_S seconds where
 * the environment sets it (under valgrind 7 spinning ranks on 2 cores run ~50x slower). */
static int run_timeout_s(void)
{
    const char *e = getenv("CGPU_TEST_RUN_TIMEOUT_S");
    const int v = NULL != e ? atoi(e) : 0;
    return v > 0 ? v : TEST_RUN_TIMEOUT_S;
}

/* ------------------------------------------------------------------------------------- */
/* In the parent: fork a group, wait with a deadline, judge the exit statuses             */
/* ------------------------------------------------------------------------------------- */

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L};
    while (0 != nanosleep(&ts, &ts) && EINTR == errno) {
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* SIGKILL the ranks still running and reap them. */
static void kill_remaining(const pid_t *pids, bool *done, int *status, bool *killed, int n)
{
    for (int r = 0; r < n; ++r) {
        if (!done[r]) {
            kill(pids[r], SIGKILL);
            killed[r] = true;
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

/* The rank whose death by SIGKILL is the point of the next run_ranks (-1: none). */
static int run_victim = -1;

/*
 * Run @p fn in @p size forked ranks. Returns true when every rank exited with status 0
 * within TEST_RUN_TIMEOUT_S (the rank run_victim: died of SIGKILL) and no rank left a
 * segment name in /dev/shm; otherwise says on stderr which rank did what, and removes
 * whatever the ranks left in /dev/shm.
 */
static bool run_ranks(const char *what, int size, test_scenario_fn_t fn, const void *arg)
{
    pid_t pids[TEST_MAX_RANKS];
    int status[TEST_MAX_RANKS] = {0};
    bool done[TEST_MAX_RANKS] = {false}, killed[TEST_MAX_RANKS] = {false};
    int started = 0, remaining;
    int64_t deadline, give_up_at = -1;
    bool ok = true, timed_out = false;
    boot_area_t *area;

    if (size < 1 || size > TEST_MAX_RANKS) {
        fprintf(stderr, "\n    %s: %d ranks is outside 1..%d\n", what, size, TEST_MAX_RANKS);
        return false;
    }
    area = mmap(NULL, sizeof(*area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == area) {
        fprintf(stderr, "\n    %s: cannot map the bootstrap area: %s\n", what, strerror(errno));
        return false;
    }
    area->size = size;

    fflush(stdout);
    fflush(stderr);
    for (started = 0; started < size; ++started) {
        pid_t pid = fork();

        if (0 == pid) {
            child_main(area, started, size, fn, arg);
        }
        if (pid < 0) {
            fprintf(stderr, "\n    %s: fork of rank %d failed: %s\n", what, started,
                    strerror(errno));
            atomic_store(&area->aborted, 1);
            kill_remaining(pids, done, status, killed, started);
            munmap(area, sizeof(*area));
            return false;
        }
        pids[started] = pid;
    }

    deadline = now_ms() + (int64_t) run_timeout_s() * 1000;
    remaining = size;
    while (remaining > 0) {
        for (int r = 0; r < size; ++r) {
            if (done[r] || pids[r] != waitpid(pids[r], &status[r], WNOHANG)) {
                continue;
            }
            done[r] = true;
            --remaining;
            if ((!WIFEXITED(status[r]) || 0 != WEXITSTATUS(status[r])) && give_up_at < 0) {
                /* Its peers may now wait forever on it: give them a moment, then stop (a
                 * death that is the scenario's point: the whole deadline, as the peers
                 * still run their checks, slowly under valgrind). */
                atomic_store(&area->aborted, 1);
                if (r != run_victim) {
                    give_up_at = now_ms() + TEST_FAIL_GRACE_MS;
                }
            }
        }
        if (0 == remaining) {
            break;
        }
        if (now_ms() >= deadline) {
            timed_out = true;
            kill_remaining(pids, done, status, killed, size);
            break;
        }
        if (give_up_at >= 0 && now_ms() >= give_up_at) {
            kill_remaining(pids, done, status, killed, size);
            break;
        }
        sleep_ms(1);
    }

    for (int r = 0; r < size; ++r) {
        int left = shm_names_of(pids[r], true);

        if (killed[r]) {
            fprintf(stderr, "\n    %s, %d ranks: rank %d killed %s\n", what, size, r,
                    timed_out ? "after the deadline (hang?)" : "after another rank failed");
            ok = false;
        } else if (r == run_victim) {
            if (!WIFSIGNALED(status[r]) || SIGKILL != WTERMSIG(status[r])) {
                fprintf(stderr, "\n    %s, %d ranks: rank %d was to die of SIGKILL, it did not\n",
                        what, size, r);
                ok = false;
            }
        } else if (WIFSIGNALED(status[r])) {
            fprintf(stderr, "\n    %s, %d ranks: rank %d died of signal %d\n", what, size, r,
                    WTERMSIG(status[r]));
            ok = false;
        } else if (!WIFEXITED(status[r]) || 0 != WEXITSTATUS(status[r])) {
            fprintf(stderr, "\n    %s, %d ranks: rank %d exited with status %d\n", what, size, r,
                    WEXITSTATUS(status[r]));
            ok = false;
        }
        if (0 != left) {
            fprintf(stderr, "\n    %s, %d ranks: rank %d left %d segment name(s) in /dev/shm\n",
                    what, size, r, left);
            ok = false;
        }
    }
    munmap(area, sizeof(*area));
    return ok;
}

/* CU_ASSERT one run per group size of test_rank_counts. */
static void run_for_each_size(const char *what, test_scenario_fn_t fn, const void *arg)
{
    for (size_t k = 0; k < TEST_ARRAY_LEN(test_rank_counts); ++k) {
        CU_ASSERT_TRUE(run_ranks(what, test_rank_counts[k], fn, arg));
    }
}

/* ------------------------------------------------------------------------------------- */
/* Element types, deterministic inputs and the scalar reference                           */
/* ------------------------------------------------------------------------------------- */

typedef enum test_kind {
    TEST_KIND_SIGNED,
    TEST_KIND_UNSIGNED,
    TEST_KIND_FLOAT,
    TEST_KIND_BOOL,
} test_kind_t;

/* What the test knows about each element type, independently of the engine. */
static const struct {
    size_t size;
    test_kind_t kind;
    unsigned int bits; /* value bits of the integer and bool types */
} test_types[CGPU_DT_COUNT] = {
    [CGPU_DT_INT8] = {sizeof(int8_t), TEST_KIND_SIGNED, 8},
    [CGPU_DT_UINT8] = {sizeof(uint8_t), TEST_KIND_UNSIGNED, 8},
    [CGPU_DT_INT16] = {sizeof(int16_t), TEST_KIND_SIGNED, 16},
    [CGPU_DT_UINT16] = {sizeof(uint16_t), TEST_KIND_UNSIGNED, 16},
    [CGPU_DT_INT32] = {sizeof(int32_t), TEST_KIND_SIGNED, 32},
    [CGPU_DT_UINT32] = {sizeof(uint32_t), TEST_KIND_UNSIGNED, 32},
    [CGPU_DT_INT64] = {sizeof(int64_t), TEST_KIND_SIGNED, 64},
    [CGPU_DT_UINT64] = {sizeof(uint64_t), TEST_KIND_UNSIGNED, 64},
    [CGPU_DT_FLOAT32] = {sizeof(float), TEST_KIND_FLOAT, 0},
    [CGPU_DT_FLOAT64] = {sizeof(double), TEST_KIND_FLOAT, 0},
    [CGPU_DT_LONG_DOUBLE] = {sizeof(long double), TEST_KIND_FLOAT, 0},
    [CGPU_DT_BOOL] = {sizeof(_Bool), TEST_KIND_BOOL, 8},
};

/* valgrind emulates x87 arithmetic in 64-bit precision, so long double results differ
 * from the reference there; its runner sets CGPU_TEST_NO_LONG_DOUBLE=1 (the ASan and
 * plain runs keep long double). */
static bool skip_dtype(cgpu_dtype_t dt)
{
    if (CGPU_DT_COMPLEX64 == dt || CGPU_DT_COMPLEX128 == dt || dt >= CGPU_DT_FLOAT_INT) {
        /* complex SUM/PROD and the pairs' MINLOC/MAXLOC: no scalar twin here; test_reduce
         * checks their loops against C99 complex arithmetic and MPI's MINLOC/MAXLOC rule,
         * and test_types runs them through the engine under MPI */
        return true;
    }
    const char *e = getenv("CGPU_TEST_NO_LONG_DOUBLE");
    return CGPU_DT_LONG_DOUBLE == dt && NULL != e && '1' == e[0];
}

/*
 * Floating inputs: small dyadic values, so that any sum or product of up to
 * TEST_MAX_RANKS of them is exact in float and the order in which the ring folds the
 * contributions cannot change the result. No -0.0: MIN/MAX of zeros stays unambiguous.
 */
static const long double float_pool[8] = {-2.0L, -1.0L, -0.5L, 0.0L, 0.5L, 1.0L, 2.0L, 3.0L};

/* One element: the bit pattern of an integer or bool, or a floating value. */
typedef struct test_value {
    uint64_t bits;
    long double f;
} test_value_t;

/* splitmix64's finalizer: deterministic, so a failure reproduces. */
static uint64_t mix64(uint64_t x)
{
    x += UINT64_C(0x9E3779B97F4A7C15);
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static uint64_t width_mask(unsigned int bits)
{
    return (64 == bits) ? UINT64_MAX : ((UINT64_C(1) << bits) - 1);
}

/* Two's complement value of the low @p bits bits of @p pattern, computed without UB. */
static int64_t sign_extend(uint64_t pattern, unsigned int bits)
{
    const uint64_t mask = width_mask(bits);
    const uint64_t sign = UINT64_C(1) << (bits - 1);

    pattern &= mask;
    if (0 == (pattern & sign)) {
        return (int64_t) pattern;
    }
    return -(int64_t) (~pattern & mask) - 1;
}

/*
 * Element @p i of rank @p rank's contribution. Integers are 0, all ones (-1), 1 or a
 * random pattern, so that the logical operators see both truth values and the bitwise
 * ones see mixed bits; bools are true seven times in eight, so LAND is not always 0.
 */
static test_value_t input_value(cgpu_dtype_t dt, uint64_t seed, int rank, size_t i)
{
    const uint64_t h = mix64(mix64(seed ^ ((uint64_t) rank << 56)) ^ (uint64_t) i);
    test_value_t v = {0, 0.0L};

    switch (test_types[dt].kind) {
    case TEST_KIND_SIGNED:
    case TEST_KIND_UNSIGNED:
        switch (h & 7) {
        case 0:
            v.bits = 0;
            break;
        case 1:
            v.bits = UINT64_MAX;
            break;
        case 2:
            v.bits = 1;
            break;
        default:
            v.bits = h >> 8;
            break;
        }
        v.bits &= width_mask(test_types[dt].bits);
        break;
    case TEST_KIND_FLOAT:
        v.f = float_pool[h & 7];
        break;
    case TEST_KIND_BOOL:
        v.bits = (0 != (h & 7)) ? 1 : 0;
        break;
    }
    return v;
}

/* Store element @p i of a buffer of @p dt (memcpy: no alignment assumed). */
static void store_value(cgpu_dtype_t dt, void *buf, size_t i, test_value_t v)
{
    unsigned char *p = (unsigned char *) buf + i * test_types[dt].size;

    switch (dt) {
    case CGPU_DT_INT8:
    case CGPU_DT_UINT8:
    case CGPU_DT_BOOL: {
        uint8_t x = (uint8_t) v.bits;
        memcpy(p, &x, sizeof(x));
        break;
    }
    case CGPU_DT_INT16:
    case CGPU_DT_UINT16: {
        uint16_t x = (uint16_t) v.bits;
        memcpy(p, &x, sizeof(x));
        break;
    }
    case CGPU_DT_INT32:
    case CGPU_DT_UINT32: {
        uint32_t x = (uint32_t) v.bits;
        memcpy(p, &x, sizeof(x));
        break;
    }
    case CGPU_DT_INT64:
    case CGPU_DT_UINT64:
        memcpy(p, &v.bits, sizeof(v.bits));
        break;
    case CGPU_DT_FLOAT32: {
        float x = (float) v.f;
        memcpy(p, &x, sizeof(x));
        break;
    }
    case CGPU_DT_FLOAT64: {
        double x = (double) v.f;
        memcpy(p, &x, sizeof(x));
        break;
    }
    case CGPU_DT_LONG_DOUBLE:
        memcpy(p, &v.f, sizeof(v.f));
        break;
    default:
        break;
    }
}

/* Load element @p i of a buffer of @p dt. */
static test_value_t load_value(cgpu_dtype_t dt, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *) buf + i * test_types[dt].size;
    test_value_t v = {0, 0.0L};

    switch (dt) {
    case CGPU_DT_INT8:
    case CGPU_DT_UINT8:
    case CGPU_DT_BOOL: {
        uint8_t x;
        memcpy(&x, p, sizeof(x));
        v.bits = x;
        break;
    }
    case CGPU_DT_INT16:
    case CGPU_DT_UINT16: {
        uint16_t x;
        memcpy(&x, p, sizeof(x));
        v.bits = x;
        break;
    }
    case CGPU_DT_INT32:
    case CGPU_DT_UINT32: {
        uint32_t x;
        memcpy(&x, p, sizeof(x));
        v.bits = x;
        break;
    }
    case CGPU_DT_INT64:
    case CGPU_DT_UINT64:
        memcpy(&v.bits, p, sizeof(v.bits));
        break;
    case CGPU_DT_FLOAT32: {
        float x;
        memcpy(&x, p, sizeof(x));
        v.f = x;
        break;
    }
    case CGPU_DT_FLOAT64: {
        double x;
        memcpy(&x, p, sizeof(x));
        v.f = x;
        break;
    }
    case CGPU_DT_LONG_DOUBLE:
        memcpy(&v.f, p, sizeof(v.f));
        break;
    default:
        break;
    }
    return v;
}

/* a op b, in plain scalar code: wrap-around modulo 2^bits, signed MIN/MAX, 0/1 logicals. */
static test_value_t combine(cgpu_dtype_t dt, cgpu_op_t op, test_value_t a, test_value_t b)
{
    const unsigned int bits = test_types[dt].bits;
    const bool ta = (0 != a.bits), tb = (0 != b.bits);
    test_value_t r = {0, 0.0L};
    bool a_less;

    if (TEST_KIND_FLOAT == test_types[dt].kind) {
        switch (op) {
        case CGPU_OP_SUM:
            r.f = a.f + b.f;
            break;
        case CGPU_OP_PROD:
            r.f = a.f * b.f;
            break;
        case CGPU_OP_MIN:
            r.f = (a.f < b.f) ? a.f : b.f;
            break;
        case CGPU_OP_MAX:
            r.f = (a.f > b.f) ? a.f : b.f;
            break;
        default:
            break;
        }
        return r;
    }
    if (TEST_KIND_SIGNED == test_types[dt].kind) {
        a_less = sign_extend(a.bits, bits) < sign_extend(b.bits, bits);
    } else {
        a_less = a.bits < b.bits;
    }
    switch (op) {
    case CGPU_OP_SUM:
        r.bits = a.bits + b.bits;
        break;
    case CGPU_OP_PROD:
        r.bits = a.bits * b.bits;
        break;
    case CGPU_OP_MIN:
        r.bits = a_less ? a.bits : b.bits;
        break;
    case CGPU_OP_MAX:
        r.bits = a_less ? b.bits : a.bits;
        break;
    case CGPU_OP_LAND:
        r.bits = (ta && tb) ? 1 : 0;
        break;
    case CGPU_OP_LOR:
        r.bits = (ta || tb) ? 1 : 0;
        break;
    case CGPU_OP_LXOR:
        r.bits = (ta != tb) ? 1 : 0;
        break;
    case CGPU_OP_BAND:
        r.bits = a.bits & b.bits;
        break;
    case CGPU_OP_BOR:
        r.bits = a.bits | b.bits;
        break;
    case CGPU_OP_BXOR:
        r.bits = a.bits ^ b.bits;
        break;
    default:
        break;
    }
    r.bits &= width_mask(bits);
    return r;
}

/* Element @p i of the allreduce result over @p size ranks. */
static test_value_t reference_value(cgpu_dtype_t dt, cgpu_op_t op, uint64_t seed, int size,
                                    size_t i)
{
    test_value_t acc = input_value(dt, seed, 0, i);

    for (int r = 1; r < size; ++r) {
        acc = combine(dt, op, acc, input_value(dt, seed, r, i));
    }
    return acc;
}

static bool same_value(cgpu_dtype_t dt, test_value_t expected, test_value_t got)
{
    if (TEST_KIND_FLOAT == test_types[dt].kind) {
        return expected.f == got.f;
    }
    return expected.bits == got.bits;
}

static const char *format_value(cgpu_dtype_t dt, test_value_t v, char *buf, size_t len)
{
    if (TEST_KIND_FLOAT == test_types[dt].kind) {
        snprintf(buf, len, "%Lg", v.f);
    } else {
        snprintf(buf, len, "0x%llx", (unsigned long long) v.bits);
    }
    return buf;
}

/* ------------------------------------------------------------------------------------- */
/* Checked collectives (inside a child)                                                   */
/* ------------------------------------------------------------------------------------- */

/* The guard bytes after @p buf + @p bytes are untouched. */
static bool check_guard(const unsigned char *buf, size_t bytes, const char *what)
{
    for (size_t k = 0; k < TEST_GUARD_BYTES; ++k) {
        if (TEST_GUARD_FILL != buf[bytes + k]) {
            return CHILD_CHECKF(false, "%s: byte %zu past the end of the receive buffer written",
                                what, k);
        }
    }
    return true;
}

/*
 * One allreduce of @p count elements on @p comm, checked element by element against the
 * scalar reference, plus: nothing written past the end, sbuf untouched when not in place.
 */
static bool check_allreduce(cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op, size_t count,
                            bool in_place, uint64_t seed)
{
    const int me = cgpu_comm_rank(comm), size = cgpu_comm_size(comm);
    const size_t bytes = count * test_types[dt].size, total = bytes + TEST_GUARD_BYTES;
    unsigned char *sbuf = malloc(total), *rbuf = malloc(total), *orig = malloc(total);
    char what[96], e[64], g[64];
    cgpu_status_t st;
    bool ok = true;

    snprintf(what, sizeof(what), "allreduce %s %s of %zu%s", cgpu_dtype_name(dt), cgpu_op_name(op),
             count, in_place ? " in place" : "");
    /* A rank that cannot allocate a few kilobytes cannot stay in lockstep either. */
    if (NULL == sbuf || NULL == rbuf || NULL == orig) {
        fprintf(stderr, "    rank %d: out of memory in %s\n", me, what);
        exit(EXIT_FAILURE);
    }
    memset(sbuf, TEST_GUARD_FILL, total);
    for (size_t i = 0; i < count; ++i) {
        store_value(dt, sbuf, i, input_value(dt, seed, me, i));
    }
    memcpy(orig, sbuf, total);
    if (in_place) {
        memcpy(rbuf, sbuf, total);
    } else {
        memset(rbuf, TEST_GUARD_FILL, total);
    }

    st = cgpu_allreduce(comm, in_place ? rbuf : sbuf, rbuf, count, dt, op, CGPU_ALLREDUCE_AUTO);
    ok = CHILD_CHECKF(CGPU_OK == st, "%s returned %s", what, cgpu_status_string(st));
    for (size_t i = 0; ok && i < count; ++i) {
        const test_value_t expected = reference_value(dt, op, seed, size, i);
        const test_value_t got = load_value(dt, rbuf, i);

        ok = CHILD_CHECKF(same_value(dt, expected, got), "%s: element %zu is %s, expected %s", what,
                          i, format_value(dt, got, g, sizeof(g)),
                          format_value(dt, expected, e, sizeof(e)));
    }
    ok = check_guard(rbuf, bytes, what) && ok;
    if (!in_place) {
        ok = CHILD_CHECKF(0 == memcmp(sbuf, orig, total), "%s: the send buffer was modified",
                          what) &&
             ok;
    }
    free(orig);
    free(rbuf);
    free(sbuf);
    return ok;
}

/* Byte @p k of the block rank @p src sends to rank @p dst. */
static unsigned char a2a_byte(uint64_t seed, int src, int dst, size_t k)
{
    return (unsigned char) mix64(seed ^ ((uint64_t) src << 56) ^ ((uint64_t) dst << 48) ^
                                 (uint64_t) k);
}

/* One alltoall of @p bytes per peer, checked byte by byte against a2a_byte(src, dst, k). */
static bool check_alltoall(cgpu_comm_t *comm, size_t bytes, bool in_place, uint64_t seed)
{
    const int me = cgpu_comm_rank(comm), size = cgpu_comm_size(comm);
    const size_t all = (size_t) size * bytes, total = all + TEST_GUARD_BYTES;
    unsigned char *sbuf = malloc(total), *rbuf = malloc(total), *orig = malloc(total);
    char what[96];
    cgpu_status_t st;
    bool ok;

    snprintf(what, sizeof(what), "alltoall of %zu bytes per peer%s", bytes,
             in_place ? " in place" : "");
    if (NULL == sbuf || NULL == rbuf || NULL == orig) {
        fprintf(stderr, "    rank %d: out of memory in %s\n", me, what);
        exit(EXIT_FAILURE);
    }
    memset(sbuf, TEST_GUARD_FILL, total);
    for (int p = 0; p < size; ++p) {
        for (size_t k = 0; k < bytes; ++k) {
            sbuf[(size_t) p * bytes + k] = a2a_byte(seed, me, p, k);
        }
    }
    memcpy(orig, sbuf, total);
    if (in_place) {
        memcpy(rbuf, sbuf, total);
    } else {
        memset(rbuf, TEST_GUARD_FILL, total);
    }

    st = cgpu_alltoall(comm, in_place ? rbuf : sbuf, rbuf, bytes, CGPU_ALLTOALL_AUTO);
    ok = CHILD_CHECKF(CGPU_OK == st, "%s returned %s", what, cgpu_status_string(st));
    for (int p = 0; ok && p < size; ++p) {
        for (size_t k = 0; ok && k < bytes; ++k) {
            const unsigned char got = rbuf[(size_t) p * bytes + k];
            const unsigned char expected = a2a_byte(seed, p, me, k);

            ok = CHILD_CHECKF(expected == got, "%s: byte %zu from rank %d is 0x%02x, not 0x%02x",
                              what, k, p, got, expected);
        }
    }
    ok = check_guard(rbuf, all, what) && ok;
    if (!in_place) {
        ok = CHILD_CHECKF(0 == memcmp(sbuf, orig, total), "%s: the send buffer was modified",
                          what) &&
             ok;
    }
    free(orig);
    free(rbuf);
    free(sbuf);
    return ok;
}

/* ------------------------------------------------------------------------------------- */
/* Scenarios (each runs in every rank of a group)                                         */
/* ------------------------------------------------------------------------------------- */

/*
 * int32 SUM over counts that hit every edge of the ring's chunking: empty, one element,
 * fewer elements than ranks (empty chunks), primes, and one slot loop (size * slot
 * elements) and its neighbours, then several loops so the two-slot queue wraps.
 */
static void scenario_allreduce_int32_counts(test_rank_t *t)
{
    const size_t loop = (size_t) t->size * (TEST_SLOT_BYTES / sizeof(int32_t));
    const size_t fewer_than_ranks = (size_t) t->size - 1;
    /* (clang-format would column-align this list into something unreadable) */
    /* clang-format off */
    const size_t counts[] = {
        0, 1, fewer_than_ranks, 2, 3, 5, 13, 97, 1021, 4099, loop - 1, loop, loop + 1,
        3 * loop + 17,
    };
    /* clang-format on */
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    cgpu_status_t st;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    for (size_t k = 0; k < TEST_ARRAY_LEN(counts); ++k) {
        check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, counts[k], false, 100 + k);
        check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, counts[k], true, 200 + k);
    }
    st = cgpu_allreduce(comm, NULL, NULL, 0, CGPU_DT_INT32, CGPU_OP_SUM, CGPU_ALLREDUCE_RING);
    CHILD_CHECKF(CGPU_OK == st, "allreduce of 0 elements with NULL buffers: %s",
                 cgpu_status_string(st));
    /* one more after the empty ones, so a desynchronised queue would show */
    check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, loop + 3, false, 300);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* Every supported (dtype, op) pair, out of place and in place. */
static void scenario_allreduce_every_dtype_and_op(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    int pairs = 0;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        if (skip_dtype((cgpu_dtype_t) dt)) {
            continue;
        }
        for (int op = 0; op < CGPU_OP_COUNT; ++op) {
            const uint64_t seed = (uint64_t) (dt * CGPU_OP_COUNT + op) << 8;

            if (!cgpu_reduce_supported((cgpu_dtype_t) dt, (cgpu_op_t) op)) {
                continue;
            }
            ++pairs;
            check_allreduce(comm, (cgpu_dtype_t) dt, (cgpu_op_t) op, TEST_DTYPE_COUNT, false, seed);
            check_allreduce(comm, (cgpu_dtype_t) dt, (cgpu_op_t) op, TEST_DTYPE_COUNT, true,
                            seed + 1);
        }
    }
    /* 8 integer types x 10 ops, 3 floating x 4, bool x 3: nothing silently skipped (but
     * long double's 4 under valgrind, announced by its runner) */
    const int expected_pairs = skip_dtype(CGPU_DT_LONG_DOUBLE) ? 91 : 95;
    CHILD_CHECKF(expected_pairs == pairs, "%d supported pairs, expected %d", pairs, expected_pairs);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* Alltoall of 0, 1, 3, 1000 and 100000 bytes per peer, out of place and in place. */
static void scenario_alltoall_sizes(test_rank_t *t)
{
    static const size_t sizes[] = {0, 1, 3, 1000, 100000};
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    cgpu_status_t st;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    for (size_t k = 0; k < TEST_ARRAY_LEN(sizes); ++k) {
        check_alltoall(comm, sizes[k], false, 10 + k);
        check_alltoall(comm, sizes[k], true, 20 + k);
    }
    st = cgpu_alltoall(comm, NULL, NULL, 0, CGPU_ALLTOALL_DIRECT);
    CHILD_CHECKF(CGPU_OK == st, "alltoall of 0 bytes with NULL buffers: %s",
                 cgpu_status_string(st));
    check_alltoall(comm, 4097, false, 30);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* How one rank is made to fail creation. */
typedef enum fault_kind {
    FAULT_SLOT_BYTES,   /* a different slot size */
    FAULT_NSLOTS,       /* a different queue depth */
    FAULT_STAGE_BYTES,  /* a different alltoall stage */
    FAULT_ENGINE_DOWN,  /* its engine is not started */
    FAULT_AT_MAX_COMMS, /* it already holds max_comms communicators, the others do not */
} fault_kind_t;

typedef struct fault_arg {
    const char *label;
    fault_kind_t kind;
    bool last_rank; /* the faulty rank is the last one (else rank 0) */
    cgpu_status_t expected;
} fault_arg_t;

/*
 * One rank cannot take part; every rank must return the same failure, hold nothing and
 * leave nothing in /dev/shm. Afterwards the group must still be able to build a working
 * communicator, so the failure did not leave anything half set up.
 */
static void scenario_create_agrees_on_failure(test_rank_t *t)
{
    const fault_arg_t *fault = t->arg;
    const int faulty = fault->last_rank ? t->size - 1 : 0;
    const bool me_faulty = (faulty == t->rank);
    cgpu_config_t cfg;
    cgpu_comm_t *held = NULL, *comm = (cgpu_comm_t *) &cfg; /* must be overwritten */
    cgpu_status_t st;
    int held_count = 0;

    child_warnings_expected = true; /* layout mismatches and caps are warnings */
    child_config(&cfg);
    if (me_faulty) {
        switch (fault->kind) {
        case FAULT_SLOT_BYTES:
            cfg.slot_bytes *= 2;
            break;
        case FAULT_NSLOTS:
            cfg.nslots += 1;
            break;
        case FAULT_STAGE_BYTES:
            cfg.stage_bytes += 64;
            break;
        case FAULT_AT_MAX_COMMS:
            cfg.max_comms = 1;
            break;
        case FAULT_ENGINE_DOWN:
            break;
        }
    }
    if (!me_faulty || FAULT_ENGINE_DOWN != fault->kind) {
        st = cgpu_engine_init(&cfg);
        CHILD_CHECKF(CGPU_OK == st, "cgpu_engine_init: %s", cgpu_status_string(st));
    }
    if (FAULT_AT_MAX_COMMS == fault->kind) {
        st = cgpu_comm_create(&t->bs, &held);
        CHILD_CHECKF(CGPU_OK == st, "first create: %s", cgpu_status_string(st));
        held_count = 1;
    }

    st = cgpu_comm_create(&t->bs, &comm);
    CHILD_CHECKF(fault->expected == st, "create returned %s, expected %s", cgpu_status_string(st),
                 cgpu_status_string(fault->expected));
    check_same_status(t, st, "create");
    CHILD_CHECK(NULL == comm);
    CHILD_CHECKF(held_count == cgpu_engine_live_comms(), "%d live communicators, expected %d",
                 cgpu_engine_live_comms(), held_count);
    CHILD_CHECKF(held_count * t->size == cgpu_shm_mapped_count(), "%d segments mapped, expected %d",
                 cgpu_shm_mapped_count(), held_count * t->size);
    check_no_shm_names(t, "after the failed create");

    /* Recovery: the faulty rank comes back with the common configuration. */
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&held));
    if (me_faulty) {
        cgpu_engine_fini();
        child_config(&cfg);
        st = cgpu_engine_init(&cfg);
        CHILD_CHECKF(CGPU_OK == st, "cgpu_engine_init after the fault: %s", cgpu_status_string(st));
    }
    st = cgpu_comm_create(&t->bs, &comm);
    if (CHILD_CHECKF(CGPU_OK == st, "create after recovery: %s", cgpu_status_string(st))) {
        check_allreduce(comm, CGPU_DT_INT64, CGPU_OP_SUM, 3001, false, 7);
        check_alltoall(comm, 5000, false, 7);
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    }
}

/* ---- segment names: taken names, set-ups that fail or lose a rank ---- */

enum { SQUAT_BYTES = 16 };
static const char squat_data[SQUAT_BYTES] = "not coll/gpu's";

/* Tokens handed out in a row from TEST_TOKEN_BASE, or always the same one. */
#define TEST_TOKEN_BASE 0x5ca77e4ed0000001ull
static uint64_t next_token = TEST_TOKEN_BASE;
static bool token_repeats;
static uint64_t test_token(void)
{
    return token_repeats ? TEST_TOKEN_BASE : next_token++;
}

/* The name this process gives a segment with random part @p token, as the docs describe it
 * (written out here, not asked from the code under test). */
static void expected_name(char *buf, size_t n, uint64_t token)
{
    snprintf(buf, n, "/cgpu-%u-%d-%016llx", (unsigned) geteuid(), (int) getpid(),
             (unsigned long long) token);
}

/* Another user's object under @p name: some bytes, mode 0644. */
static bool squat(const char *name)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0644);
    bool ok = fd >= 0 && SQUAT_BYTES == write(fd, squat_data, SQUAT_BYTES);
    if (fd >= 0) {
        close(fd);
    }
    return CHILD_CHECKF(ok, "cannot occupy %s: %s", name, strerror(errno));
}

/* The object under @p name is still the squatter's, whole; removes it. */
static void check_squat_untouched(const char *name)
{
    char back[SQUAT_BYTES + 8] = {0};
    struct stat sb;
    int fd = shm_open(name, O_RDONLY, 0);
    if (!CHILD_CHECKF(fd >= 0, "the squatter's %s is gone: %s", name, strerror(errno))) {
        return;
    }
    CHILD_CHECK(0 == fstat(fd, &sb) && SQUAT_BYTES == sb.st_size && 0644 == (sb.st_mode & 0777));
    CHILD_CHECK(SQUAT_BYTES == read(fd, back, sizeof(back)) &&
                0 == memcmp(back, squat_data, SQUAT_BYTES));
    close(fd);
    shm_unlink(name);
}

/*
 * cgpu_shm_create on its own: the name carries the uid, the pid and the random part, the
 * object is 0600; a name that exists is left alone and the next one drawn; when every name
 * drawn exists, the error names the last one and nothing of the squatter's changed.
 */
static void scenario_segment_names(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_shm_seg_t seg;
    char taken[64], want[64];
    struct stat sb;
    (void) t;

    child_warnings_expected = true; /* all names taken is a warning */
    child_config(&cfg);
    CHILD_CHECK(CGPU_OK == cgpu_engine_init(&cfg));
    cgpu_shm_set_token_source(test_token);

    expected_name(taken, sizeof(taken), TEST_TOKEN_BASE);
    expected_name(want, sizeof(want), TEST_TOKEN_BASE + 1);
    if (squat(taken)) {
        CHILD_CHECK(CGPU_OK == cgpu_shm_create(&seg, 8192));
        CHILD_CHECKF(0 == strcmp(seg.name, want), "segment named %s, expected %s", seg.name, want);
        int fd = shm_open(seg.name, O_RDONLY, 0);
        CHILD_CHECKF(fd >= 0 && 0 == fstat(fd, &sb) && 0600 == (sb.st_mode & 0777) &&
                         geteuid() == sb.st_uid,
                     "%s: not a 0600 object of this user", seg.name);
        if (fd >= 0) {
            close(fd);
        }
        cgpu_shm_detach(&seg);
        CHILD_CHECK(shm_open(want, O_RDONLY, 0) < 0 && ENOENT == errno);
        check_squat_untouched(taken);
    }

    token_repeats = true; /* every name drawn is the squatted one */
    if (squat(taken)) {
        child_warnings = 0;
        CHILD_CHECK(CGPU_ERR_SYSTEM == cgpu_shm_create(&seg, 8192));
        CHILD_CHECK(NULL == seg.base && 0 == cgpu_shm_mapped_count());
        CHILD_CHECKF(1 == child_warnings && NULL != strstr(child_last_warning, taken) &&
                         NULL != strstr(child_last_warning, "taken"),
                     "warning \"%s\" does not say that %s was taken", child_last_warning, taken);
        cgpu_shm_detach(&seg); /* a failed create holds nothing: detach is a no-op */
        check_squat_untouched(taken);
    }
    token_repeats = false;
    cgpu_shm_set_token_source(NULL);
}

/* Every rank's first name is squatted: the communicator is built on the next names and
 * runs the engine's collectives correctly; the squatters' objects are untouched. */
static void scenario_squatted_name_is_skipped(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    char taken[64];

    expected_name(taken, sizeof(taken), TEST_TOKEN_BASE);
    cgpu_shm_set_token_source(test_token);
    if (squat(taken)) {
        child_config(&cfg);
        if (child_start(t, &cfg, &comm)) {
            check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, 3001, false, 5);
            check_alltoall(comm, 5000, false, 5);
            CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
        }
        check_squat_untouched(taken);
    }
    cgpu_shm_set_token_source(NULL);
}

/* How the last rank leaves a set-up: its bootstrap fails, or the process is killed, on
 * entering the set-up's allgather number at. */
typedef struct lost_rank_arg {
    int at;    /* 1: the table, 2: the segment names, 3: the agreement on the mappings */
    bool kill; /* SIGKILL (the driver expects it), else an error from the bootstrap */
} lost_rank_arg_t;

typedef struct lost_boot {
    test_rank_t *t;
    const lost_rank_arg_t *arg;
    int calls;
} lost_boot_t;

static cgpu_status_t lost_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    lost_boot_t *lb = ctx;
    if (lb->t->rank == lb->t->size - 1 && ++lb->calls == lb->arg->at) {
        if (lb->arg->kill) {
            raise(SIGKILL);
        }
        /* what a bootstrap that saw a peer die would do: fail, and make the others fail */
        atomic_store(&lb->t->boot.area->aborted, 1);
        return CGPU_ERR_BOOTSTRAP;
    }
    return boot_allgather(&lb->t->boot, sbuf, rbuf, bytes);
}

static cgpu_status_t lost_barrier(void *ctx)
{
    return boot_barrier(&((lost_boot_t *) ctx)->t->boot);
}

/*
 * The last rank is lost inside cgpu_comm_create: every other rank returns an error, holds
 * no mapping and leaves no name, and neither does the lost rank (the driver counts every
 * rank's names after all exited, a killed one's included).
 */
static void scenario_rank_lost_in_setup(test_rank_t *t)
{
    lost_boot_t lb = {.t = t, .arg = t->arg};
    cgpu_bootstrap_t bs = t->bs;
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_warnings_expected = true;
    bs.ctx = &lb;
    bs.allgather = lost_allgather;
    bs.barrier = lost_barrier;
    child_config(&cfg);
    CHILD_CHECK(CGPU_OK == cgpu_engine_init(&cfg));
    const cgpu_status_t st = cgpu_comm_create(&bs, &comm);
    CHILD_CHECKF(CGPU_OK != st && NULL == comm, "create returned %s with a rank lost",
                 cgpu_status_string(st));
    CHILD_CHECK(0 == cgpu_engine_live_comms());
    CHILD_CHECKF(0 == cgpu_shm_mapped_count(), "%d segments mapped", cgpu_shm_mapped_count());
    CHILD_CHECKF(0 == shm_names_of(getpid(), false), "own segment name left in /dev/shm");
}

/* Every rank pretends to be on its own node, and the inter-node proxy cannot start (a
 * provider that does not exist): all refuse alike, and nothing is left behind. */
static void scenario_different_nodes_are_refused(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    cgpu_status_t st;

    child_warnings_expected = true; /* the proxy's start-up failure is a warning */
    child_config(&cfg);
    cfg.force_node_per_rank = true;
    cfg.ofi_provider = "no-such-provider";
    st = cgpu_engine_init(&cfg);
    CHILD_CHECKF(CGPU_OK == st, "cgpu_engine_init: %s", cgpu_status_string(st));
    st = cgpu_comm_create(&t->bs, &comm);
    if (t->size > 1) {
        CHILD_CHECKF(CGPU_OK != st, "create over nodes without a proxy returned %s",
                     cgpu_status_string(st));
    }
    check_same_status(t, st, "create");
    if (CGPU_OK == st) {
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    }
    CHILD_CHECK(NULL == comm);
    CHILD_CHECK(0 == cgpu_engine_live_comms());
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
    check_no_shm_names(t, "after the refused create");
}

/* Every rank on its own node, over the proxy's tcp provider: the collectives work and give
 * the reference results; release leaves nothing mapped or named. */
static void scenario_different_nodes_over_proxy(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    cfg.force_node_per_rank = true;
    cfg.ofi_provider = "tcp";
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    check_allreduce(comm, CGPU_DT_INT64, CGPU_OP_SUM, 3001, false, 11);
    check_allreduce(comm, CGPU_DT_FLOAT32, CGPU_OP_MAX, 1, true, 12);
    check_alltoall(comm, 5000, false, 13);
    check_alltoall(comm, 333, true, 14);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    CHILD_CHECK(0 == cgpu_engine_live_comms());
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
    check_no_shm_names(t, "after release over the proxy");
}

/* Release and fini may be repeated; fini releases what the owner forgot; init works again. */
/* A communicator whose set-up found a rank that had not chosen its GPU (marked so by hand:
 * this build has no GPU to choose): cgpu_comm_settle asks the ranks at its 1st, 2nd, 4th,
 * 8th and 16th call only, each time one allgather through the communicator's bootstrap,
 * and while no rank can answer "chosen" (no CUDA here) the communicator stays unsettled on
 * the host backend, its collectives correct between the questions. */
typedef struct counted_boot {
    cgpu_bootstrap_t inner;
    int allgathers;
} counted_boot_t;

static cgpu_status_t counted_allgather(void *ctx, const void *sbuf, void *rbuf, size_t bytes)
{
    counted_boot_t *cb = ctx;
    cb->allgathers++;
    return cb->inner.allgather(cb->inner.ctx, sbuf, rbuf, bytes);
}

static void scenario_settle_asks_rarely(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    child_config(&cfg);
    cfg.backend = CGPU_BACKEND_AUTO; /* the only setting under which a set-up is unsettled */
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    counted_boot_t cb = {.inner = comm->bs, .allgathers = 0};
    comm->bs.ctx = &cb;
    comm->bs.allgather = counted_allgather;
    comm->unsettled = true;
    int asked_at[8], nasked = 0;
    for (int call = 1; call <= 20; ++call) {
        const int before = cb.allgathers;
        cgpu_status_t st = cgpu_comm_settle_due(comm) ? cgpu_comm_settle(comm, &comm->bs) : CGPU_OK;
        CHILD_CHECKF(CGPU_OK == st, "settle at call %d: %s", call, cgpu_status_string(st));
        if (cb.allgathers != before && nasked < 8) {
            asked_at[nasked++] = call;
        }
        int64_t x = t->rank + call, y = -1;
        const int64_t want = (int64_t) t->size * (t->size - 1) / 2 + (int64_t) t->size * call;
        st = cgpu_allreduce(comm, &x, &y, 1, CGPU_DT_INT64, CGPU_OP_SUM, CGPU_ALLREDUCE_AUTO);
        CHILD_CHECKF(CGPU_OK == st && y == want,
                     "allreduce after settle call %d: %s, %lld "
                     "(expected %lld)",
                     call, cgpu_status_string(st), (long long) y, (long long) want);
    }
    const int expect[] = {1, 2, 4, 8, 16};
    CHILD_CHECKF(5 == nasked, "settle asked %d times in 20 calls, expected 5", nasked);
    for (int i = 0; i < nasked && i < 5; ++i) {
        CHILD_CHECKF(expect[i] == asked_at[i],
                     "settle's question %d came at call %d, "
                     "expected %d",
                     i + 1, asked_at[i], expect[i]);
    }
    CHILD_CHECK(cgpu_comm_unsettled(comm));
    CHILD_CHECK(CGPU_BACKEND_HOST == cgpu_comm_backend(comm));
    comm->bs = cb.inner;
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    cgpu_engine_fini();
}

static void scenario_release_is_idempotent(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    cgpu_status_t st;
    int64_t x = 1, y = 0;

    child_warnings_expected = true; /* the collective on a finalized engine is a warning */
    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    st = cgpu_engine_init(&cfg);
    CHILD_CHECKF(CGPU_ERR_STATE == st, "second cgpu_engine_init returned %s, expected %s",
                 cgpu_status_string(st), cgpu_status_string(CGPU_ERR_STATE));

    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    CHILD_CHECK(NULL == comm);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    CHILD_CHECK(NULL == comm);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(NULL));
    CHILD_CHECK(0 == cgpu_engine_live_comms());
    CHILD_CHECK(0 == cgpu_shm_mapped_count());

    /* fini with a communicator still alive unmaps it; the glue releases it later */
    st = cgpu_comm_create(&t->bs, &comm);
    CHILD_CHECKF(CGPU_OK == st, "create: %s", cgpu_status_string(st));
    CHILD_CHECK(CGPU_OK == t->bs.barrier(t->bs.ctx)); /* nobody finis while others create */
    cgpu_engine_fini();
    CHILD_CHECKF(0 == cgpu_shm_mapped_count(), "%d segment(s) mapped after fini",
                 cgpu_shm_mapped_count());
    st = cgpu_allreduce(comm, &x, &y, 1, CGPU_DT_INT64, CGPU_OP_SUM, CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_ERR_STATE == st, "allreduce after fini returned %s, expected %s",
                 cgpu_status_string(st), cgpu_status_string(CGPU_ERR_STATE));
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    CHILD_CHECK(NULL == comm);
    CHILD_CHECK(0 == cgpu_engine_live_comms());
    cgpu_engine_fini();
    cgpu_engine_fini();

    /* and the engine starts again from scratch */
    if (child_start(t, &cfg, &comm)) {
        check_allreduce(comm, CGPU_DT_FLOAT64, CGPU_OP_SUM, 777, true, 11);
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    }
    cgpu_engine_fini();
    cgpu_engine_fini();
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
}

/* Once create has returned on every rank, no rank's segment has a name any more. */
static void scenario_no_segment_name_left(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    check_no_shm_names(t, "with the communicator alive");
    /* the unlinked segments still carry data */
    check_allreduce(comm, CGPU_DT_UINT16, CGPU_OP_BXOR, 5000, false, 3);
    check_alltoall(comm, 3000, true, 3);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* Each live communicator maps size segments (its own and every peer's); release unmaps. */
static void scenario_mapped_count_returns_to_zero(test_rank_t *t)
{
    const int per_comm = (t->size > 1) ? t->size : 0;
    cgpu_config_t cfg;
    cgpu_comm_t *a = NULL, *b = NULL;
    cgpu_status_t st;

    child_config(&cfg);
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
    if (!child_start(t, &cfg, &a)) {
        return;
    }
    CHILD_CHECKF(per_comm == cgpu_shm_mapped_count(), "%d mapped with one communicator, not %d",
                 cgpu_shm_mapped_count(), per_comm);
    st = cgpu_comm_create(&t->bs, &b);
    CHILD_CHECKF(CGPU_OK == st, "second create: %s", cgpu_status_string(st));
    CHILD_CHECKF(2 * per_comm == cgpu_shm_mapped_count(), "%d mapped with two, not %d",
                 cgpu_shm_mapped_count(), 2 * per_comm);
    check_allreduce(a, CGPU_DT_INT8, CGPU_OP_MAX, 100, false, 1);
    check_allreduce(b, CGPU_DT_INT8, CGPU_OP_MIN, 100, false, 2);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&a));
    CHILD_CHECKF(per_comm == cgpu_shm_mapped_count(), "%d mapped after one release, expected %d",
                 cgpu_shm_mapped_count(), per_comm);
    check_alltoall(b, 100, false, 3);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&b));
    CHILD_CHECKF(0 == cgpu_shm_mapped_count(), "%d mapped after releasing all",
                 cgpu_shm_mapped_count());
    CHILD_CHECK(0 == cgpu_engine_live_comms());
}

/* The segment pool (coll_gpu_shm_pool 2): a communicator made after another of the same
 * ranks was released takes its segment back on every rank (no name in /dev/shm at any point,
 * results right), two alive at once each get one, what stays mapped is bounded by the
 * pool's size, and fini unmaps it all. */
static void scenario_pool_reuses_segments(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *a = NULL, *b = NULL;
    cgpu_status_t st;

    child_config(&cfg);
    cfg.shm_pool = 2;
    if (!child_start(t, &cfg, &a)) {
        return;
    }
    check_allreduce(a, CGPU_DT_INT32, CGPU_OP_SUM, 3000, false, 1);
    check_alltoall(a, 700, false, 2);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&a));
    /* kept: its own segment and every peer's */
    CHILD_CHECKF(t->size == cgpu_shm_mapped_count(), "%d mapped after the release, not %d",
                 cgpu_shm_mapped_count(), t->size);
    for (int cycle = 0; cycle < 5; ++cycle) {
        const uint64_t before = cgpu_engine_shm_reuses();
        st = cgpu_comm_create(&t->bs, &a);
        CHILD_CHECKF(CGPU_OK == st, "create %d: %s", cycle, cgpu_status_string(st));
        CHILD_CHECKF(before + 1 == cgpu_engine_shm_reuses(),
                     "create %d took %llu segments from the pool, not 1", cycle,
                     (unsigned long long) (cgpu_engine_shm_reuses() - before));
        CHILD_CHECKF(t->size == cgpu_shm_mapped_count(), "%d mapped in cycle %d, not %d",
                     cgpu_shm_mapped_count(), cycle, t->size);
        check_no_shm_names(t, "with a communicator on a pooled segment");
        /* what the last one left in the segment is not read as this one's */
        check_allreduce(a, CGPU_DT_FLOAT64, CGPU_OP_SUM, 5000 + cycle, true, 3 + cycle);
        check_alltoall(a, 900, true, 9 + cycle);
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&a));
    }
    /* two at once: one from the pool, one new */
    st = cgpu_comm_create(&t->bs, &a);
    CHILD_CHECKF(CGPU_OK == st, "first of two: %s", cgpu_status_string(st));
    st = cgpu_comm_create(&t->bs, &b);
    CHILD_CHECKF(CGPU_OK == st, "second of two: %s", cgpu_status_string(st));
    check_allreduce(a, CGPU_DT_INT64, CGPU_OP_MAX, 1000, false, 21);
    check_allreduce(b, CGPU_DT_INT64, CGPU_OP_MIN, 1000, false, 22);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&a));
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&b));
    CHILD_CHECKF(2 * t->size == cgpu_shm_mapped_count(), "%d mapped with two pooled, not %d",
                 cgpu_shm_mapped_count(), 2 * t->size);
    check_no_shm_names(t, "after the releases");
    CHILD_CHECK(CGPU_OK == t->bs.barrier(t->bs.ctx)); /* nobody finis while others create */
    cgpu_engine_fini();
    CHILD_CHECKF(0 == cgpu_shm_mapped_count(), "%d mapped after fini", cgpu_shm_mapped_count());
}

/* A peer that no longer maps a pooled segment (here the last rank, which runs without a
 * pool: it unmaps every peer's segment at release): the owners retire what they offered and
 * make new segments in a second exchange, on every rank alike, and the results are right. */
static void scenario_pool_offer_refused(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *a = NULL;
    cgpu_status_t st;

    child_config(&cfg);
    cfg.shm_pool = t->rank == t->size - 1 ? 0 : 2;
    if (!child_start(t, &cfg, &a)) {
        return;
    }
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&a));
    for (int cycle = 0; cycle < 3; ++cycle) {
        st = cgpu_comm_create(&t->bs, &a);
        CHILD_CHECKF(CGPU_OK == st, "create %d: %s", cycle, cgpu_status_string(st));
        check_same_status(t, st, "create after a refused offer");
        check_no_shm_names(t, "after a refused offer");
        check_allreduce(a, CGPU_DT_UINT32, CGPU_OP_BXOR, 4000, false, 30 + cycle);
        check_alltoall(a, 500, false, 40 + cycle);
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&a));
    }
    /* the refused ones went for good: at most the pool's two own and its peers' copies */
    CHILD_CHECKF(cgpu_shm_mapped_count() <= (t->rank == t->size - 1 ? 0 : 2 * t->size),
                 "%d mapped after the cycles", cgpu_shm_mapped_count());
    CHILD_CHECK(CGPU_OK == t->bs.barrier(t->bs.ctx));
    cgpu_engine_fini();
    CHILD_CHECKF(0 == cgpu_shm_mapped_count(), "%d mapped after fini", cgpu_shm_mapped_count());
    check_no_shm_names(t, "after fini");
}

/* max_comms = 2: the third create fails on every rank, and works once one is released. */
static void scenario_max_comms_caps_live_communicators(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *c[3] = {NULL, NULL, NULL};
    cgpu_status_t st;

    child_warnings_expected = true; /* hitting the cap is a warning */
    child_config(&cfg);
    cfg.max_comms = 2;
    if (!child_start(t, &cfg, &c[0])) {
        return;
    }
    st = cgpu_comm_create(&t->bs, &c[1]);
    CHILD_CHECKF(CGPU_OK == st, "second create: %s", cgpu_status_string(st));
    CHILD_CHECK(2 == cgpu_engine_live_comms());

    st = cgpu_comm_create(&t->bs, &c[2]);
    CHILD_CHECKF(CGPU_ERR_NO_RESOURCE == st, "third create returned %s, expected %s",
                 cgpu_status_string(st), cgpu_status_string(CGPU_ERR_NO_RESOURCE));
    check_same_status(t, st, "third create");
    CHILD_CHECK(NULL == c[2]);
    CHILD_CHECK(2 == cgpu_engine_live_comms());
    CHILD_CHECK(child_warnings > 0);

    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&c[0]));
    CHILD_CHECK(1 == cgpu_engine_live_comms());
    st = cgpu_comm_create(&t->bs, &c[2]);
    CHILD_CHECKF(CGPU_OK == st, "create after a release: %s", cgpu_status_string(st));
    CHILD_CHECK(2 == cgpu_engine_live_comms());
    if (NULL != c[2]) {
        check_allreduce(c[2], CGPU_DT_UINT32, CGPU_OP_PROD, 2000, false, 5);
        check_allreduce(c[1], CGPU_DT_UINT32, CGPU_OP_BOR, 2000, true, 6);
    }
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&c[1]));
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&c[2]));
    CHILD_CHECK(0 == cgpu_engine_live_comms());
}

/* Small collectives back to back, varying type, size and placement on every call. */
static void scenario_many_collectives_in_lockstep(test_rank_t *t)
{
    static const struct {
        cgpu_dtype_t dt;
        cgpu_op_t op;
    } pairs[] = {
        {CGPU_DT_INT32, CGPU_OP_SUM},  {CGPU_DT_FLOAT64, CGPU_OP_MAX},
        {CGPU_DT_UINT8, CGPU_OP_BXOR}, {CGPU_DT_INT64, CGPU_OP_PROD},
        {CGPU_DT_BOOL, CGPU_OP_LXOR},  {CGPU_DT_FLOAT32, CGPU_OP_SUM},
        {CGPU_DT_INT16, CGPU_OP_MIN},
    };
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    for (int i = 0; i < TEST_LOCKSTEP_OPS; ++i) {
        const int k = i / 2;

        if (0 == i % 2) {
            const size_t pick = (size_t) k % TEST_ARRAY_LEN(pairs);

            check_allreduce(comm, pairs[pick].dt, pairs[pick].op, (size_t) (k * 7) % 61, 0 == k % 3,
                            (uint64_t) i);
        } else {
            check_alltoall(comm, (size_t) (k * 13) % 97, 0 == k % 2, (uint64_t) i);
        }
    }
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* What the progress function saw (cgpu_config_t.progress): calls, and the deepest nesting. */
static atomic_int progress_calls, progress_depth, progress_deepest;

static void count_progress(void)
{
    const int d = atomic_fetch_add(&progress_depth, 1) + 1;
    if (d > atomic_load(&progress_deepest)) {
        atomic_store(&progress_deepest, d);
    }
    atomic_fetch_add(&progress_calls, 1);
    cgpu_progress(); /* from inside the progress function: must return at once */
    atomic_fetch_sub(&progress_depth, 1);
}

typedef struct late_call {
    cgpu_comm_t *comm;
    int late_rank;
    bool worker; /* run on a thread marked as a non-blocking collective's worker */
} late_call_t;

/* An allreduce that rank late_rank enters 100 ms after the others. */
static void *late_allreduce(void *arg)
{
    late_call_t *c = arg;
    if (c->worker) {
        cgpu_thread_set_worker(true);
    }
    if (cgpu_comm_rank(c->comm) == c->late_rank) {
        sleep_ms(100);
    }
    check_allreduce(c->comm, CGPU_DT_INT32, CGPU_OP_SUM, 3000, false, 77);
    return NULL;
}

/* A rank that waits for a late peer in a collective runs the progress function (Open MPI's,
 * in the plugin: a peer blocked in MPI_Recv on this rank must not wait for ever), never
 * nested, and never on a worker's thread. */
static void scenario_waits_run_progress(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    cfg.progress = count_progress;
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    late_call_t c = {.comm = comm, .late_rank = t->size - 1, .worker = false};
    atomic_store(&progress_calls, 0);
    (void) late_allreduce(&c);
    if (t->rank != c.late_rank) {
        CHILD_CHECKF(atomic_load(&progress_calls) > 0,
                     "100 ms waiting for a late rank ran no progress");
    }
    CHILD_CHECKF(atomic_load(&progress_deepest) <= 1, "progress nested %d deep",
                 atomic_load(&progress_deepest));

    /* the same call on a worker's thread: no progress there */
    pthread_t th;
    c.worker = true;
    c.late_rank = 0;
    atomic_store(&progress_calls, 0);
    CHILD_CHECK(0 == pthread_create(&th, NULL, late_allreduce, &c));
    CHILD_CHECK(0 == pthread_join(th, NULL));
    CHILD_CHECKF(0 == atomic_load(&progress_calls), "a worker's wait ran progress %d times",
                 atomic_load(&progress_calls));
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* A communicator of one rank maps nothing and its collectives copy (or leave in place). */
static void scenario_single_rank_copies(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
    for (int dt = 0; dt < CGPU_DT_COUNT; ++dt) {
        if (skip_dtype((cgpu_dtype_t) dt)) {
            continue;
        }
        const cgpu_op_t op = (CGPU_DT_BOOL == dt) ? CGPU_OP_LOR : CGPU_OP_MAX;

        check_allreduce(comm, (cgpu_dtype_t) dt, op, 5000, false, (uint64_t) dt);
        check_allreduce(comm, (cgpu_dtype_t) dt, op, 5000, true, (uint64_t) dt + 100);
        check_allreduce(comm, (cgpu_dtype_t) dt, op, 0, false, (uint64_t) dt);
    }
    check_alltoall(comm, 0, false, 1);
    check_alltoall(comm, 100000, false, 2);
    check_alltoall(comm, 100000, true, 3);
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* cgpu_allreduce_host: the MAX and SUM of a few host words, checked against the values every
 * rank computes for every rank; in place; zero words; a bad op refused. */
static void scenario_allreduce_host_words(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    const int n = cgpu_comm_size(comm), me = cgpu_comm_rank(comm);
    for (int round = 0; round < 50; ++round) {
        uint64_t in[3], out[3] = {0, 0, 0}, want_max[3] = {0, 0, 0}, want_sum[3] = {0, 0, 0};
        for (int p = 0; p < n; ++p) {
            for (int k = 0; k < 3; ++k) {
                const uint64_t v =
                    ((uint64_t) (p + 1) * 2654435761u * (uint64_t) (round + k + 1)) % 100003;
                want_max[k] = v > want_max[k] ? v : want_max[k];
                want_sum[k] += v;
                if (p == me) {
                    in[k] = v;
                }
            }
        }
        CHILD_CHECK(CGPU_OK == cgpu_allreduce_host(comm, in, out, 3, CGPU_DT_UINT64, CGPU_OP_MAX));
        CHILD_CHECK(0 == memcmp(out, want_max, sizeof(out)));
        CHILD_CHECK(CGPU_OK == cgpu_allreduce_host(comm, in, in, 3, CGPU_DT_UINT64, CGPU_OP_SUM));
        CHILD_CHECK(0 == memcmp(in, want_sum, sizeof(in)));
    }
    CHILD_CHECK(CGPU_OK == cgpu_allreduce_host(comm, NULL, NULL, 0, CGPU_DT_UINT64, CGPU_OP_MAX));
    uint64_t w = 1;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG ==
                cgpu_allreduce_host(comm, &w, &w, 1, CGPU_DT_FLOAT64, CGPU_OP_BAND));
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

static void test_allreduce_host_words(void)
{
    run_for_each_size("allreduce_host words", scenario_allreduce_host_words, NULL);
}

/* Invalid calls are refused locally, before any communication, and leave the queue intact. */
static void scenario_invalid_arguments_are_refused(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL, *other = NULL;
    cgpu_bootstrap_t bad;
    float f[4] = {0};
    unsigned char b[64] = {0};
    cgpu_status_t st;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    st = cgpu_allreduce(comm, f, f, 4, CGPU_DT_FLOAT32, CGPU_OP_BAND, CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "float32 band: %s", cgpu_status_string(st));
    st = cgpu_allreduce(comm, f, f, 4, CGPU_DT_COUNT, CGPU_OP_SUM, CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "dtype out of range: %s", cgpu_status_string(st));
    st = cgpu_allreduce(comm, NULL, f, 4, CGPU_DT_FLOAT32, CGPU_OP_SUM, CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "NULL sbuf: %s", cgpu_status_string(st));
    st = cgpu_allreduce(NULL, f, f, 4, CGPU_DT_FLOAT32, CGPU_OP_SUM, CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "NULL comm: %s", cgpu_status_string(st));
    /* "fallback" is the glue's business: the engine refuses it (which error is its choice) */
    st = cgpu_allreduce(comm, f, f, 4, CGPU_DT_FLOAT32, CGPU_OP_SUM, CGPU_ALLREDUCE_FALLBACK);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st || CGPU_ERR_NOT_SUPPORTED == st,
                 "allreduce alg fallback: %s", cgpu_status_string(st));
    st = cgpu_alltoall(comm, b, b, 1, CGPU_ALLTOALL_FALLBACK);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st || CGPU_ERR_NOT_SUPPORTED == st,
                 "alltoall alg fallback: %s", cgpu_status_string(st));
    st = cgpu_alltoall(comm, b, NULL, 1, CGPU_ALLTOALL_AUTO);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "alltoall NULL rbuf: %s", cgpu_status_string(st));

    st = cgpu_comm_create(&t->bs, NULL);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "create with NULL out: %s", cgpu_status_string(st));
    st = cgpu_comm_create(NULL, &other);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "create with NULL bootstrap: %s",
                 cgpu_status_string(st));
    bad = t->bs;
    bad.rank = bad.size;
    st = cgpu_comm_create(&bad, &other);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "create with rank == size: %s",
                 cgpu_status_string(st));
    bad = t->bs;
    bad.barrier = NULL;
    st = cgpu_comm_create(&bad, &other);
    CHILD_CHECKF(CGPU_ERR_INVALID_ARG == st, "create without a barrier: %s",
                 cgpu_status_string(st));
    CHILD_CHECK(NULL == other);
    CHILD_CHECK(1 == cgpu_engine_live_comms());

    /* nothing was sent by the refused calls: the next real ones still line up */
    check_allreduce(comm, CGPU_DT_FLOAT32, CGPU_OP_SUM, 999, false, 9);
    check_alltoall(comm, 999, false, 9);
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

/* The thread-dependent auto settings resolve from the MPI thread level; values set by
 * the user stay as they are. */
static void scenario_thread_level_resolves_auto_settings(test_rank_t *t)
{
    static const struct {
        int order, polls;
        bool multiple;
        int want_order, want_polls;
    } cases[] = {
        {CGPU_ORDER_AUTO, -2, false, CGPU_ORDER_EVENT, -1},
        {CGPU_ORDER_AUTO, -2, true, CGPU_ORDER_EVENT, 32},
        {CGPU_ORDER_BLOCKING_STREAM, 5, true, CGPU_ORDER_BLOCKING_STREAM, 5},
        {CGPU_ORDER_NONE, -1, true, CGPU_ORDER_NONE, -1},
        {CGPU_ORDER_EVENT, 0, false, CGPU_ORDER_EVENT, 0},
    };
    (void) t;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        cgpu_config_t cfg;
        child_config(&cfg);
        cfg.cuda_stream_order = cases[i].order;
        cfg.cuda_wait_polls = cases[i].polls;
        cgpu_status_t st = cgpu_engine_init(&cfg);
        if (!CHILD_CHECKF(CGPU_OK == st, "case %zu: cgpu_engine_init: %s", i,
                          cgpu_status_string(st))) {
            continue;
        }
        cgpu_engine_set_threads(cases[i].multiple);
        const cgpu_config_t *got = cgpu_engine_config();
        CHILD_CHECKF(cases[i].want_order == got->cuda_stream_order,
                     "case %zu: stream order %d, expected %d", i, got->cuda_stream_order,
                     cases[i].want_order);
        CHILD_CHECKF(cases[i].want_polls == got->cuda_wait_polls,
                     "case %zu: wait polls %d, expected %d", i, got->cuda_wait_polls,
                     cases[i].want_polls);
        cgpu_engine_fini();
    }
}

/* cgpu_engine_init refuses configurations the engine cannot run with. */
static void scenario_init_refuses_bad_configurations(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_status_t st;

    (void) t;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(NULL));
    child_config(&cfg);
    cfg.slot_bytes = 0;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.nslots = 0;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.stage_bytes = 63;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    /* one ring slot deadlocks from 3 ranks on; a slot smaller than an element never
     * advances: both are refused up front */
    child_config(&cfg);
    cfg.nslots = 1;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.slot_bytes = 8;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_slots = 1;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_channel_min_bytes = 0; /* would divide by zero when sizing ring channels */
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_stream_order = CGPU_ORDER_BLOCKING_STREAM + 1;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_ll_bytes = CGPU_CUDA_LL_BYTES_MAX + 1; /* past the inbox's LL area */
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_setup_wait_ms = -2; /* -1 is "for ever", below it nothing */
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_block_budget = -2; /* -1 is "from the device", 0 "none" */
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_block_spare = -2; /* -1 is "one for every other communicator" */
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_resident_cluster = 3; /* 0 never, 1 when the device has room, 2 always */
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    child_config(&cfg);
    cfg.cuda_resident_cluster = -1;
    CHILD_CHECK(CGPU_ERR_INVALID_ARG == cgpu_engine_init(&cfg));
    /* odd sizes are rounded down to whole cache lines (aligned slots for every type) */
    child_config(&cfg);
    cfg.slot_bytes = TEST_SLOT_BYTES + 4;
    st = cgpu_engine_init(&cfg);
    CHILD_CHECKF(CGPU_OK == st, "odd slot size refused: %s", cgpu_status_string(st));
    CHILD_CHECK(TEST_SLOT_BYTES == cgpu_engine_config()->slot_bytes);
    cgpu_engine_fini();
    child_config(&cfg);
    st = cgpu_engine_init(&cfg);
    CHILD_CHECKF(CGPU_OK == st, "valid configuration refused: %s", cgpu_status_string(st));
    CHILD_CHECK(TEST_SLOT_BYTES == cgpu_engine_config()->slot_bytes);
    CHILD_CHECK(TEST_NSLOTS == cgpu_engine_config()->nslots);
    CHILD_CHECK(TEST_STAGE_BYTES == cgpu_engine_config()->stage_bytes);
    cgpu_engine_fini();
}

/* A thread standing for a collective in flight: it holds the set-up lock as a reader
 * (cgpu_cuda_inflight_begin) until told to end, or for hold_ms on its own. */
enum { FLIGHT_STARTING, FLIGHT_HOLDING, FLIGHT_END, FLIGHT_ENDED };
typedef struct flight {
    atomic_int state;
    int hold_ms; /* > 0: ends by itself after this long */
    pthread_t thread;
} flight_t;

static void *flight_main(void *arg)
{
    flight_t *f = arg;
    cgpu_cuda_inflight_begin();
    const int64_t until = now_ms() + f->hold_ms;
    atomic_store(&f->state, FLIGHT_HOLDING);
    while (FLIGHT_END != atomic_load(&f->state) && (f->hold_ms <= 0 || now_ms() < until)) {
        sleep_ms(1);
    }
    atomic_store(&f->state, FLIGHT_ENDED); /* before the release: a set-up it lets in sees it */
    cgpu_cuda_inflight_end();
    return NULL;
}

/* Starts a flight; with @p wait_holding, waits (at most 5 s) until it holds the lock. */
static bool flight_start(flight_t *f, int hold_ms, bool wait_holding)
{
    atomic_init(&f->state, FLIGHT_STARTING);
    f->hold_ms = hold_ms;
    if (0 != pthread_create(&f->thread, NULL, flight_main, f)) {
        return false;
    }
    for (int64_t until = now_ms() + 5000; wait_holding && now_ms() < until;) {
        if (FLIGHT_HOLDING == atomic_load(&f->state)) {
            return true;
        }
        sleep_ms(1);
    }
    return !wait_holding;
}

static void flight_end(flight_t *f)
{
    if (FLIGHT_ENDED != atomic_load(&f->state)) {
        int expected = FLIGHT_HOLDING;
        atomic_compare_exchange_strong(&f->state, &expected, FLIGHT_END);
    }
    pthread_join(f->thread, NULL);
}

/* A thread in cgpu_cuda_setup_begin, as a set-up on another thread. */
typedef struct setup_waiter {
    atomic_int done;
    bool held;
} setup_waiter_t;

static void *setup_waiter_main(void *arg)
{
    setup_waiter_t *w = arg;
    w->held = cgpu_cuda_setup_begin();
    cgpu_cuda_setup_end(w->held);
    atomic_store(&w->done, 1);
    return NULL;
}

static atomic_int setup_hook_calls;

static void count_setup_hook(void)
{
    atomic_fetch_add(&setup_hook_calls, 1);
}

/* A communicator's CUDA set-up waits for the process's collectives in flight to end, but
 * only for coll_gpu_cuda_setup_wait_ms: under MPI_THREAD_MULTIPLE an unbounded wait closed a
 * cycle between threads of different ranks. The lock is
 * plain threads, so this runs without a GPU. */
static void scenario_setup_wait_is_bounded(test_rank_t *t)
{
    enum { WAIT_MS = 40 };
    cgpu_config_t cfg;
    flight_t f;
    (void) t;
    child_config(&cfg);
    cfg.cuda_setup_wait_ms = WAIT_MS;
    cgpu_status_t st = cgpu_engine_init(&cfg);
    if (!CHILD_CHECKF(CGPU_OK == st, "cgpu_engine_init: %s", cgpu_status_string(st))) {
        return;
    }
    cgpu_cuda_set_setup_hook(count_setup_hook);

    /* nothing in flight: the set-up holds the lock (and runs the hook), and a collective
     * that starts meanwhile waits for its end */
    bool held = cgpu_cuda_setup_begin();
    CHILD_CHECKF(held, "set-up with nothing in flight did not take the lock");
    CHILD_CHECK(1 == atomic_load(&setup_hook_calls));
    if (CHILD_CHECK(flight_start(&f, 0, false))) {
        sleep_ms(50);
        CHILD_CHECKF(FLIGHT_STARTING == atomic_load(&f.state),
                     "a collective started during a set-up that held the lock");
        cgpu_cuda_setup_end(held);
        held = false;
        int64_t until = now_ms() + 5000;
        while (FLIGHT_HOLDING != atomic_load(&f.state) && now_ms() < until) {
            sleep_ms(1);
        }
        CHILD_CHECKF(FLIGHT_HOLDING == atomic_load(&f.state),
                     "the collective did not start after the set-up");

        /* a collective in flight that does not end: the set-up goes ahead after the bound,
         * without the lock and without the hook */
        const int64_t t0 = now_ms();
        held = cgpu_cuda_setup_begin();
        const int64_t waited = now_ms() - t0;
        CHILD_CHECKF(!held, "set-up took the lock while a collective held it");
        CHILD_CHECKF(waited >= WAIT_MS - 5, "set-up went ahead after %lld ms, before %d",
                     (long long) waited, WAIT_MS);
        CHILD_CHECK(1 == atomic_load(&setup_hook_calls));
        cgpu_cuda_setup_end(held);
        /* ... and a collective starts while another thread's set-up waits (readers first;
         * a long wait here, so that a loaded machine cannot end it first) */
        cgpu_cuda_set_setup_wait(3000);
        setup_waiter_t w = {.done = 0, .held = true};
        pthread_t wt;
        if (CHILD_CHECK(0 == pthread_create(&wt, NULL, setup_waiter_main, &w))) {
            sleep_ms(5);
            flight_t g;
            if (CHILD_CHECK(flight_start(&g, 0, true))) {
                CHILD_CHECKF(0 == atomic_load(&w.done),
                             "a collective started only after a waiting set-up gave up");
                flight_end(&g);
            }
            flight_end(&f); /* the last collective in flight ends: the set-up goes in */
            pthread_join(wt, NULL);
            CHILD_CHECKF(w.held, "a waiting set-up did not take the lock once nothing was "
                                 "in flight");
            CHILD_CHECK(2 == atomic_load(&setup_hook_calls));
        } else {
            flight_end(&f);
        }
        cgpu_cuda_set_setup_wait(WAIT_MS);
    }

    /* -1: the set-up waits for ever, here until a collective ends after 60 ms */
    cgpu_cuda_set_setup_wait(-1);
    if (CHILD_CHECK(flight_start(&f, 60, true))) {
        held = cgpu_cuda_setup_begin();
        CHILD_CHECKF(held, "set-up with the wait unbounded did not take the lock");
        CHILD_CHECKF(FLIGHT_ENDED == atomic_load(&f.state),
                     "set-up with the wait unbounded went ahead of a collective in flight");
        CHILD_CHECK(3 == atomic_load(&setup_hook_calls));
        cgpu_cuda_setup_end(held);
        flight_end(&f);
    }
    cgpu_engine_fini();

    /* coll_gpu_cuda_setup_exclusive false: never waits, never takes the lock */
    child_config(&cfg);
    cfg.cuda_setup_exclusive = false;
    cfg.cuda_setup_wait_ms = -1;
    st = cgpu_engine_init(&cfg);
    if (!CHILD_CHECKF(CGPU_OK == st, "cgpu_engine_init: %s", cgpu_status_string(st))) {
        return;
    }
    if (CHILD_CHECK(flight_start(&f, 0, true))) {
        held = cgpu_cuda_setup_begin();
        CHILD_CHECKF(!held, "set-up took the lock with the exclusion off");
        CHILD_CHECK(3 == atomic_load(&setup_hook_calls));
        cgpu_cuda_setup_end(held);
        flight_end(&f);
    }
    held = cgpu_cuda_setup_begin();
    CHILD_CHECKF(!held, "set-up took the lock with the exclusion off");
    cgpu_cuda_setup_end(held);
    cgpu_cuda_set_setup_hook(NULL);
    cgpu_engine_fini();
}

/* ------------------------------------------------------------------------------------- */
/* Cases                                                                                  */
/* ------------------------------------------------------------------------------------- */

static void test_allreduce_sums_int32_for_edge_counts(void)
{
    run_for_each_size("allreduce int32 sum counts", scenario_allreduce_int32_counts, NULL);
}

static void test_allreduce_matches_for_every_dtype_and_op(void)
{
    run_for_each_size("allreduce dtype x op", scenario_allreduce_every_dtype_and_op, NULL);
}

static void test_alltoall_delivers_every_byte(void)
{
    run_for_each_size("alltoall sizes", scenario_alltoall_sizes, NULL);
}

static void test_create_agrees_on_failure(void)
{
    static const fault_arg_t faults[] = {
        {"create, last rank with another slot_bytes", FAULT_SLOT_BYTES, true, CGPU_ERR_INVALID_ARG},
        {"create, rank 0 with another slot_bytes", FAULT_SLOT_BYTES, false, CGPU_ERR_INVALID_ARG},
        {"create, last rank with another nslots", FAULT_NSLOTS, true, CGPU_ERR_INVALID_ARG},
        {"create, rank 0 with another stage_bytes", FAULT_STAGE_BYTES, false, CGPU_ERR_INVALID_ARG},
        {"create, last rank's engine not started", FAULT_ENGINE_DOWN, true, CGPU_ERR_STATE},
        {"create, rank 0 at its max_comms", FAULT_AT_MAX_COMMS, false, CGPU_ERR_NO_RESOURCE},
        {"create, last rank at its max_comms", FAULT_AT_MAX_COMMS, true, CGPU_ERR_NO_RESOURCE},
    };

    for (size_t k = 0; k < TEST_ARRAY_LEN(faults); ++k) {
        run_for_each_size(faults[k].label, scenario_create_agrees_on_failure, &faults[k]);
    }
}

static void test_different_nodes_are_refused_uniformly(void)
{
    run_for_each_size("different nodes", scenario_different_nodes_are_refused, NULL);
}

/* Two ranks per fake node, so the communicator across nodes has node-local parts; the
 * owner forgets to release it and finalizes: fini releases everything, without waiting
 * on itself (the node-local communicators are on the engine's list too). */
static void scenario_fini_with_live_comm_across_nodes(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;

    child_config(&cfg);
    cfg.fake_node = t->rank / 2;
    cfg.ofi_provider = "tcp";
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, 5000, false, 21);
    check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, 4, true, 22);
    check_alltoall(comm, 700, false, 23);
    cgpu_engine_fini(); /* comm not released first */
    CHILD_CHECK(0 == cgpu_shm_mapped_count());
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm)); /* the owner's release comes later */
    CHILD_CHECKF(0 == cgpu_engine_live_comms(), "%d internal communicator(s) left",
                 cgpu_engine_live_comms());
    check_no_shm_names(t, "after fini with a live communicator across nodes");
}

static void test_different_nodes_over_proxy(void)
{
    if (!cgpu_proxy_built()) {
        printf("\n    skipped: built without libfabric\n");
        return;
    }
    run_for_each_size("different nodes over the proxy", scenario_different_nodes_over_proxy, NULL);
    run_for_each_size("fini with a live communicator across nodes",
                      scenario_fini_with_live_comm_across_nodes, NULL);
}

static void test_settle_asks_rarely(void)
{
    run_for_each_size("settle", scenario_settle_asks_rarely, NULL);
}

static void test_release_is_idempotent(void)
{
    run_for_each_size("release idempotent", scenario_release_is_idempotent, NULL);
}

static void test_no_segment_name_is_left_after_create(void)
{
    run_for_each_size("no segment name", scenario_no_segment_name_left, NULL);
}

static void test_segment_names(void)
{
    CU_ASSERT_TRUE(run_ranks("segment names", 1, scenario_segment_names, NULL));
}

static void test_squatted_name_is_skipped(void)
{
    run_for_each_size("squatted name", scenario_squatted_name_is_skipped, NULL);
}

static void test_rank_lost_in_setup_leaves_no_name(void)
{
    static const lost_rank_arg_t cases[] = {
        {1, false}, {2, false}, {3, false}, {1, true}, {3, true},
    };
    for (size_t k = 0; k < TEST_ARRAY_LEN(cases); ++k) {
        for (int size = 2; size <= 3; ++size) {
            char what[64];
            snprintf(what, sizeof(what), "rank %s at set-up exchange %d",
                     cases[k].kill ? "killed" : "failing", cases[k].at);
            run_victim = cases[k].kill ? size - 1 : -1;
            CU_ASSERT_TRUE(run_ranks(what, size, scenario_rank_lost_in_setup, &cases[k]));
            run_victim = -1;
        }
    }
}

static void test_mapped_segment_count_returns_to_zero(void)
{
    CU_ASSERT_TRUE(run_ranks("mapped count", 1, scenario_mapped_count_returns_to_zero, NULL));
    run_for_each_size("mapped count", scenario_mapped_count_returns_to_zero, NULL);
}

static void test_pool_reuses_segments(void)
{
    run_for_each_size("shm pool", scenario_pool_reuses_segments, NULL);
}

static void test_pool_offer_refused(void)
{
    run_for_each_size("shm pool, offer refused", scenario_pool_offer_refused, NULL);
}

static void test_max_comms_caps_live_communicators(void)
{
    run_for_each_size("max_comms", scenario_max_comms_caps_live_communicators, NULL);
}

static void test_many_collectives_stay_in_lockstep(void)
{
    run_for_each_size("lockstep", scenario_many_collectives_in_lockstep, NULL);
}

static void test_single_rank_communicator_copies(void)
{
    CU_ASSERT_TRUE(run_ranks("single rank", 1, scenario_single_rank_copies, NULL));
}

static void test_invalid_arguments_are_refused(void)
{
    CU_ASSERT_TRUE(run_ranks("invalid arguments", 2, scenario_invalid_arguments_are_refused, NULL));
    CU_ASSERT_TRUE(run_ranks("invalid arguments", 3, scenario_invalid_arguments_are_refused, NULL));
}

static void test_init_refuses_bad_configurations(void)
{
    CU_ASSERT_TRUE(
        run_ranks("bad configurations", 1, scenario_init_refuses_bad_configurations, NULL));
}

static void test_setup_wait_is_bounded(void)
{
    CU_ASSERT_TRUE(run_ranks("set-up wait", 1, scenario_setup_wait_is_bounded, NULL));
}

static void test_thread_level_resolves_auto_settings(void)
{
    CU_ASSERT_TRUE(
        run_ranks("thread level", 1, scenario_thread_level_resolves_auto_settings, NULL));
}

/* The block budget (cgpu_blocks_take): a launch gets what it wants while the budget
 * lasts, then what is left, then the least it can run on (never nothing: a rank waiting
 * for blocks its peers' calls hold could wait for ever), in whole pairs where its parts
 * pair; a reservation (the resident kernel's) is all or nothing. Threads taking and giving
 * at once leave the count where it started. */
enum { BUDGET_THREADS = 4, BUDGET_ROUNDS = 20000 };
static int budget_used;

static void *budget_thread(void *arg)
{
    const int want = 1 + (int) (intptr_t) arg;
    for (int i = 0; i < BUDGET_ROUNDS; ++i) {
        const int got = cgpu_blocks_take(&budget_used, 16, 0, want, 1);
        if (got < 1 || got > want) {
            return (void *) 1;
        }
        cgpu_blocks_give(&budget_used, got);
    }
    return NULL;
}

/* launches one after another out of one budget (cap, spare, pair): launch i wants want[i]
 * and must get got[i] */
static void takes_get(int *used, int cap, int spare, int pair, const int *want, const int *got,
                      int n)
{
    for (int i = 0; i < n; ++i) {
        CU_ASSERT_EQUAL(cgpu_blocks_take(used, cap, spare, want[i], pair), got[i]);
    }
}

static void test_block_budget(void)
{
    int used = 0;
    CU_ASSERT_EQUAL(cgpu_blocks_take(&used, 10, 0, 6, 1), 6);
    CU_ASSERT_EQUAL(used, 6);
    /* what is left; then none left: one, over budget */
    takes_get(&used, 10, 0, 1, (const int[]){6, 6}, (const int[]){4, 1}, 2);
    CU_ASSERT_EQUAL(used, 11);
    CU_ASSERT_FALSE(cgpu_blocks_reserve(&used, 10, 0, 1));
    CU_ASSERT_EQUAL(used, 11);
    cgpu_blocks_give(&used, 11);
    CU_ASSERT_EQUAL(used, 0);
    /* pairs: an odd want rounds down, the least is one pair */
    takes_get(&used, 10, 0, 2, (const int[]){7, 8, 8, 1}, (const int[]){6, 4, 2, 2}, 4);
    CU_ASSERT_EQUAL(used, 14);
    cgpu_blocks_give(&used, 14);
    /* reservations: all or nothing */
    CU_ASSERT_TRUE(cgpu_blocks_reserve(&used, 10, 0, 8));
    CU_ASSERT_FALSE(cgpu_blocks_reserve(&used, 10, 0, 3));
    CU_ASSERT_TRUE(cgpu_blocks_reserve(&used, 10, 0, 2));
    CU_ASSERT_EQUAL(cgpu_blocks_take(&used, 10, 0, 5, 1), 1);
    CU_ASSERT_EQUAL(used, 11);
    cgpu_blocks_give(&used, 11);
    /* no budget: every launch what it wants, every reservation granted */
    CU_ASSERT_EQUAL(cgpu_blocks_take(&used, 0, 0, 64, 1), 64);
    CU_ASSERT_TRUE(cgpu_blocks_reserve(&used, 0, 0, 1000));
    cgpu_blocks_give(&used, 1064);
    CU_ASSERT_EQUAL(used, 0);
    pthread_t th[BUDGET_THREADS];
    for (int i = 0; i < BUDGET_THREADS; ++i) {
        CU_ASSERT_EQUAL_FATAL(
            pthread_create(&th[i], NULL, budget_thread, (void *) (intptr_t) (3 * i)), 0);
    }
    for (int i = 0; i < BUDGET_THREADS; ++i) {
        void *bad = NULL;
        pthread_join(th[i], &bad);
        CU_ASSERT_PTR_NULL(bad);
    }
    CU_ASSERT_EQUAL(budget_used, 0);
}

/* Spare blocks (cgpu_blocks_take's spare): regular grids stop at cap - spare, and a launch
 * that finds fewer than a pair of those left takes one pair out of the spare ones, so that
 * many more calls in flight still fit under the cap; past them, over it. Reservations (the
 * resident kernel's) come out of the regular blocks only. The GPU case behind it: one
 * rank per H200 (132 blocks of 512 threads its budget) with sixteen communicators' calls
 * in flight (4 MB and 16 MB rings of 64 channels, 256 KB oneshots of 32 blocks): without
 * spare blocks the calls past the first three took 13 blocks over the cap, which the GPU
 * left undispatched behind the spinning ones, and the ranks (posting in opposite orders)
 * waited for each other; with one spare block for every other communicator every call
 * fits. */
static int crossed_blocks(int cap, int spare, int *least)
{
    static const int want[] = {64, 32, 64};
    int used = 0, most = 0;
    *least = 1 << 30;
    for (int j = 0; j < 16; ++j) {
        const int got = cgpu_blocks_take(&used, cap, spare, want[j % 3], 1);
        *least = got < *least ? got : *least;
        most = used > most ? used : most;
    }
    cgpu_blocks_give(&used, used);
    return most;
}

static void test_block_spare(void)
{
    int used = 0;
    /* 6 of the 7 regular blocks, the regular blocks' last, then the 3 spare ones */
    takes_get(&used, 10, 3, 1, (const int[]){6, 6, 6, 6, 6}, (const int[]){6, 1, 1, 1, 1}, 5);
    CU_ASSERT_EQUAL(used, 10);                                /* every call so far under the cap */
    CU_ASSERT_EQUAL(cgpu_blocks_take(&used, 10, 3, 6, 1), 1); /* past the spare: over it */
    CU_ASSERT_EQUAL(used, 11);
    cgpu_blocks_give(&used, 11);
    /* a reservation takes regular blocks only */
    CU_ASSERT_FALSE(cgpu_blocks_reserve(&used, 10, 3, 8));
    CU_ASSERT_TRUE(cgpu_blocks_reserve(&used, 10, 3, 7));
    CU_ASSERT_EQUAL(cgpu_blocks_take(&used, 10, 3, 4, 1), 1);
    CU_ASSERT_EQUAL(used, 8);
    cgpu_blocks_give(&used, 8);
    /* pairs: the spare blocks go a pair a launch */
    takes_get(&used, 12, 4, 2, (const int[]){9, 9, 9}, (const int[]){8, 2, 2}, 3);
    CU_ASSERT_EQUAL(used, 12);
    cgpu_blocks_give(&used, 12);
    CU_ASSERT_EQUAL(used, 0);
    /* the default: one spare block for every other communicator (sixteen dups and world),
     * at most half the cap; a setting as given, at most cap - 1 */
    CU_ASSERT_EQUAL(cgpu_blocks_spare(132, -1, 1), 0);
    CU_ASSERT_EQUAL(cgpu_blocks_spare(132, -1, 17), 16);
    CU_ASSERT_EQUAL(cgpu_blocks_spare(132, -1, 500), 66);
    CU_ASSERT_EQUAL(cgpu_blocks_spare(132, -1, 0), 0);
    CU_ASSERT_EQUAL(cgpu_blocks_spare(132, 8, 1), 8);
    CU_ASSERT_EQUAL(cgpu_blocks_spare(10, 20, 1), 9);
    CU_ASSERT_EQUAL(cgpu_blocks_spare(1, -1, 17), 0);
    int least = 0;
    CU_ASSERT_TRUE(crossed_blocks(132, cgpu_blocks_spare(132, -1, 17), &least) <= 132);
    CU_ASSERT_EQUAL(least, 1);
    CU_ASSERT_TRUE(crossed_blocks(132, 0, &least) > 132); /* the old rule: 145 */
}

/* The resident kernel as a thread block cluster (coll_gpu_cuda_resident_cluster): by
 * default only with no launched kernel of the process in flight on the device, no other
 * rank on it, and the other resident kernels on at most a quarter of its multiprocessors
 * (a cluster always can wait for room in one GPC behind rings that wait for their peers,
 * which hung test_cuda_nb's crossed calls on 2x H200); 0 never, 2 always. An H200: 132
 * multiprocessors; the default 4 resident kernels of 8 blocks leave 24 to the others. */
static void test_resident_cluster_rule(void)
{
    static const struct {
        int setting;
        bool shared;
        int launched, resident_blocks;
        bool cluster;
    } rows[] = {
        {1, false, 0, 0, true},    {1, false, 0, 24, true},   {1, false, 0, 33, true},
        {1, false, 0, 34, false},  {1, false, 0, 120, false}, {1, false, 1, 0, false},
        {1, false, 12, 0, false},  {1, true, 0, 0, false},    {1, true, 3, 24, false},
        {0, false, 0, 0, false},   {0, true, 1, 0, false},    {2, false, 0, 0, true},
        {2, false, 12, 120, true}, {2, true, 3, 0, true},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); ++i) {
        CU_ASSERT_EQUAL(cgpu_resident_as_cluster(rows[i].setting, rows[i].shared, rows[i].launched,
                                                 rows[i].resident_blocks, 132),
                        rows[i].cluster);
    }
}

/* The LL size classes (coll_gpu_cuda_ll_bytes; every rank must agree, or one rank sends
 * lines where its peer waits for a flag): a communicator keeps the classes of 1 KiB << c up
 * to the setting and 512 KiB / ranks, at least one; a call takes the smallest class that
 * holds its unit, if it has it, the unit is at most the setting and its elements are of at
 * most 8 bytes or of 16. Expected values worked out by hand from that rule. */
static void test_ll_classes_rule(void)
{
    static const struct {
        size_t ll_bytes;
        int nranks, classes;
    } kept[] = {
        {32768, 2, 6},                                                /* the default: 1-32 KiB */
        {8192, 2, 4},    {65536, 2, 7}, {65536, 8, 7}, {65536, 9, 6}, /* 512 KiB / 9 < 64 KiB */
        {32768, 64, 4},                                               /* 8 KiB a rank */
        {32768, 600, 1}, {1000, 2, 1},  {2048, 2, 2},  {2047, 2, 1},  {0, 2, 0},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(kept); ++i) {
        CU_ASSERT_EQUAL(cgpu_ll_classes(kept[i].ll_bytes, kept[i].nranks), kept[i].classes);
    }
    static const struct {
        size_t unit, es, ll_bytes;
        int classes, cls;
    } calls[] = {
        {0, 4, 32768, 6, -1},     {1, 1, 32768, 6, 0},      {8, 4, 32768, 6, 0},
        {1024, 4, 32768, 6, 0},   {1025, 4, 32768, 6, 1},   {2048, 1, 32768, 6, 1},
        {4096, 4, 32768, 6, 2},   {4097, 8, 32768, 6, 3},   {16384, 16, 32768, 6, 4},
        {32768, 4, 32768, 6, 5},  {32769, 4, 32768, 6, -1}, {65536, 4, 32768, 6, -1},
        {65536, 4, 65536, 7, 6},  {1024, 12, 32768, 6, -1}, {1024, 32, 32768, 6, -1},
        {16384, 4, 32768, 4, -1}, /* 64 ranks: no 16 KiB class */
        {8192, 4, 32768, 4, 3},   {8192, 4, 8192, 4, 3},    {8193, 4, 8192, 4, -1},
        {1000, 4, 1000, 1, 0},    {1001, 4, 1000, 1, -1},   {8, 4, 0, 0, -1},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(calls); ++i) {
        CU_ASSERT_EQUAL(
            cgpu_ll_class(calls[i].unit, calls[i].es, calls[i].ll_bytes, calls[i].classes),
            calls[i].cls);
    }
}

/* A oneshot call's blocks (every rank must count the same: a block flags and waits for the
 * same block of its peers): one per block_bytes, or per small_block_bytes while that makes
 * at most 8, never fewer than the first rule, 1 to 32. Expected values worked out by hand;
 * then, for several settings, never decreasing with the unit (the resident kernel's
 * largest call bounds every call it takes) and within 1-32 up to 1 MiB. */
static void test_oneshot_blocks_rule(void)
{
    static const struct {
        size_t unit, block, small, blocks;
    } rows[] = {
        {0, 8192, 4096, 1},     {1, 8192, 4096, 1},       {4096, 8192, 4096, 1},
        {4097, 8192, 4096, 2},  {8192, 8192, 4096, 2},    {16384, 8192, 4096, 4},
        {32768, 8192, 4096, 8}, {32769, 8192, 4096, 8},   {65536, 8192, 4096, 8},
        {65537, 8192, 4096, 9}, {262144, 8192, 4096, 32}, {1u << 20, 8192, 4096, 32},
        {4096, 8192, 0, 1},     {8193, 8192, 0, 2},       {65536, 8192, 0, 8},
        {4096, 8192, 2048, 2},  {16384, 8192, 2048, 8},   {65536, 8192, 2048, 8},
        {65536, 1024, 0, 32},   {4096, 4096, 8192, 1},    {20000, 4096, 8192, 5},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(rows); ++i) {
        CU_ASSERT_EQUAL(cgpu_oneshot_blocks(rows[i].unit, rows[i].block, rows[i].small),
                        rows[i].blocks);
    }
    static const size_t settings[][2] = {{8192, 4096},  {8192, 0},    {8192, 2048}, {1024, 0},
                                         {16384, 4096}, {4096, 8192}, {1024, 1024}};
    for (size_t k = 0; k < TEST_ARRAY_LEN(settings); ++k) {
        size_t prev = 0;
        int bad = 0;
        for (size_t u = 0; u <= (1u << 20); u += u < 70000 ? 1 : 997) {
            const size_t b = cgpu_oneshot_blocks(u, settings[k][0], settings[k][1]);
            bad += b < prev || b < 1 || b > 32;
            prev = b;
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
}

/* The resident kernel's blocks for its largest call's: as clusters, up to 8 as one, else
 * whole clusters of 8, at most 2 (a 64 KiB call of 16 blocks of 4 KiB stays resident);
 * without, up to 32. Expected values worked out by hand. */
static void test_resident_blocks_rule(void)
{
    static const struct {
        size_t blocks;
        bool cluster;
        int kernel, clusters;
    } rows[] = {
        {0, true, 1, 1},    {1, true, 1, 1},    {5, true, 5, 1},    {8, true, 8, 1},
        {9, true, 16, 2},   {16, true, 16, 2},  {17, true, 16, 2},  {32, true, 16, 2},
        {0, false, 1, 1},   {1, false, 1, 1},   {16, false, 16, 2}, {32, false, 32, 4},
        {33, false, 32, 4}, {12, false, 12, 1},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(rows); ++i) {
        const int k = cgpu_resident_blocks(rows[i].blocks, rows[i].cluster);
        CU_ASSERT_EQUAL(k, rows[i].kernel);
        CU_ASSERT_EQUAL(cgpu_resident_clusters(k), rows[i].clusters);
    }
}

/* The scatter auto rule: blocks up to CGPU_SCATTER_RS_AUTO_MAX run as a reduce-scatter,
 * larger ones as a broadcast; an algorithm named explicitly is kept at every size. */
static void test_scatter_auto_rule(void)
{
    const size_t cap = CGPU_SCATTER_RS_AUTO_MAX;
    const size_t sizes[] = {0, 1, 4096, cap - 1, cap, cap + 1, cap * 64};
    for (size_t i = 0; i < TEST_ARRAY_LEN(sizes); ++i) {
        const size_t b = sizes[i];
        CU_ASSERT_EQUAL(cgpu_scatter_choose(CGPU_SCATTER_AUTO, b),
                        b > (size_t) 4194304 ? CGPU_SCATTER_BCAST : CGPU_SCATTER_RS);
        CU_ASSERT_EQUAL(cgpu_scatter_choose(CGPU_SCATTER_BCAST, b), CGPU_SCATTER_BCAST);
        CU_ASSERT_EQUAL(cgpu_scatter_choose(CGPU_SCATTER_RS, b), CGPU_SCATTER_RS);
        CU_ASSERT_EQUAL(cgpu_scatter_choose(CGPU_SCATTER_FALLBACK, b), CGPU_SCATTER_FALLBACK);
    }
}

/* More sizes in turn than the stager pool holds (a staged allreduce's chunk follows the
 * message size): the stager just given back must be the one reused, else every call of the
 * size in use would make pinned memory again (milliseconds each on a GPU). */
static void test_waits_run_progress(void)
{
    run_for_each_size("waits run progress", scenario_waits_run_progress, NULL);
}

static void test_stager_pool_reuses_the_size_in_use(void)
{
    const size_t sizes[] = {4096, 8192, 16384, 32768, 65536, 131072};
    const int nsizes = (int) TEST_ARRAY_LEN(sizes);
    cgpu_stager_t *s = NULL;
    for (int round = 0; round < 2; ++round) {
        for (int k = 0; k < nsizes; ++k) {
            CU_ASSERT_EQUAL_FATAL(CGPU_OK, cgpu_stager_get(sizes[k], 3, &s));
            memset(cgpu_stager_slot(s, 2), k, sizes[k]);
            cgpu_stager_put(&s);
            CU_ASSERT_PTR_NULL(s);
            const unsigned long made = cgpu_stager_created();
            CU_ASSERT_EQUAL_FATAL(CGPU_OK, cgpu_stager_get(sizes[k], 3, &s));
            CU_ASSERT_EQUAL(made, cgpu_stager_created());
            cgpu_stager_put(&s);
        }
    }
    /* bounded: six sizes went through a pool of fewer, so the first one is made again */
    const unsigned long made = cgpu_stager_created();
    CU_ASSERT_EQUAL_FATAL(CGPU_OK, cgpu_stager_get(sizes[0], 3, &s));
    CU_ASSERT_EQUAL(made + 1, cgpu_stager_created());
    cgpu_stager_put(&s);
    cgpu_stager_put(&s); /* a second put of the same handle is a no-op */
    cgpu_stager_pool_drain();
}

/* A segment pinned for the GPU: once per mapping, whichever copy of the segment asks, and
 * unpinned when it is unmapped; where no GPU is usable the pin fails, nothing is kept, and
 * the segment still maps and unmaps as before (the staged allreduce then copies from
 * pageable memory). */
static void test_shm_pin_once_per_mapping(void)
{
    cgpu_shm_seg_t seg;
    CU_ASSERT_EQUAL_FATAL(CGPU_OK, cgpu_shm_create(&seg, 1 << 20));
    const cgpu_shm_seg_t copy = seg;
    const int before = cgpu_shm_pinned_count();
    const cgpu_status_t st = cgpu_shm_pin(&seg);
    if (cgpu_cuda_available()) {
        CU_ASSERT_EQUAL(CGPU_OK, st);
        CU_ASSERT_EQUAL(CGPU_OK, cgpu_shm_pin(&copy)); /* the same mapping: no second pin */
        CU_ASSERT_EQUAL(before + 1, cgpu_shm_pinned_count());
    } else {
        CU_ASSERT_NOT_EQUAL(CGPU_OK, st);
        CU_ASSERT_EQUAL(before, cgpu_shm_pinned_count());
    }
    ((volatile char *) seg.base)[12345] = 7; /* still mapped and writable */
    cgpu_shm_detach(&seg);
    CU_ASSERT_EQUAL(before, cgpu_shm_pinned_count());
    CU_ASSERT_PTR_NULL(seg.base);
    const cgpu_shm_seg_t none = {0};
    CU_ASSERT_NOT_EQUAL(CGPU_OK, cgpu_shm_pin(&none)); /* nothing mapped: refused */
}

/* Bytes of this process's mappings of coll/gpu segments (/proc/self/maps). */
static size_t segment_mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    size_t sum = 0;
    while (NULL != f && NULL != fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (NULL != strstr(line, "/cgpu-") && 2 == sscanf(line, "%lx-%lx", &lo, &hi)) {
            sum += hi - lo;
        }
    }
    if (NULL != f) {
        fclose(f);
    }
    return sum;
}

/* coll_gpu_shared_stage_bytes: a communicator that stages device buffers (here through the
 * test switch that stages host ones) has stages of that size, every rank's segment larger
 * by the difference; without staging, or at 0, the alltoall's. Where the last rank cannot
 * make a segment that large (a file size limit, as a small /dev/shm would), every rank
 * falls back to the alltoall's size. Allreduces in each are checked. */
static void scenario_shared_stage_size(test_rank_t *t)
{
    enum { MORE = 64 * 1024, CASES = 4 };
    const size_t segs = (size_t) t->size; /* its own and each peer's */
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    size_t got[CASES] = {0};
    for (int k = 0; k < CASES; ++k) {
        child_config(&cfg);
        cfg.shared_stage_bytes = 2 == k   ? 0
                                 : 3 == k ? TEST_STAGE_BYTES + 16 * MORE
                                          : TEST_STAGE_BYTES + MORE;
        cfg.stage_host_buffers = k > 0;
        if (3 == k && t->rank == t->size - 1) {
            /* larger than the alltoall's segment, smaller than the shared one */
            const struct rlimit lim = {.rlim_cur = 8 * MORE, .rlim_max = RLIM_INFINITY};
            signal(SIGXFSZ, SIG_IGN);
            CHILD_CHECK(0 == setrlimit(RLIMIT_FSIZE, &lim));
        }
        const int warned = child_warnings;
        CHILD_CHECKF(3 != k || 0 == warned, "%d engine warning(s) before the fallback case: \"%s\"",
                     warned, child_last_warning);
        child_warnings_expected = 3 == k; /* the fallback is a warning, the failed size too */
        if (!child_start(t, &cfg, &comm)) {
            return;
        }
        CHILD_CHECKF(3 != k || 0 != t->rank || child_warnings > warned,
                     "rank 0 did not warn of the fallback");
        got[k] = segment_mapped_bytes();
        check_allreduce(comm, CGPU_DT_FLOAT32, CGPU_OP_SUM, 40000, false, (uint64_t) k);
        check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_MAX, 40000, true, (uint64_t) k + 10);
        check_alltoall(comm, 30000, false, (uint64_t) k);
        CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
        cgpu_engine_fini();
    }
    CHILD_CHECKF(got[0] > 0 && got[1] == got[0] + segs * MORE,
                 "mapped %zu bytes staged, %zu not, want %zu more", got[1], got[0], segs * MORE);
    CHILD_CHECKF(got[2] == got[0], "mapped %zu bytes at 0, want %zu", got[2], got[0]);
    CHILD_CHECKF(got[3] == got[0], "mapped %zu bytes after the fallback, want %zu", got[3], got[0]);
}

static void test_shared_stage_size(void)
{
    CU_ASSERT_TRUE(run_ranks("shared stage size", 2, scenario_shared_stage_size, NULL));
    CU_ASSERT_TRUE(run_ranks("shared stage size", 3, scenario_shared_stage_size, NULL));
}

/* The host pool: a block given back is handed out again, a busy one never twice, the cap
 * holds (beyond it malloc'd memory, which a put frees), and a block in use at the drain is
 * freed at its put. */
static void test_host_pool_reuses_and_caps(void)
{
    cgpu_host_pool_drain();
    cgpu_host_pool_set_cap((size_t) 256 << 10);
    CU_ASSERT_EQUAL(0, cgpu_host_pool_blocks());
    char *a = cgpu_host_pool_get(100000); /* a block of 128 KiB */
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    memset(a, 0x5a, 131072);
    CU_ASSERT_EQUAL(1, cgpu_host_pool_blocks());
    cgpu_host_pool_put(a);
    char *b = cgpu_host_pool_get(70000);
    CU_ASSERT_PTR_EQUAL(a, b);
    char *c = cgpu_host_pool_get(70000); /* a busy, so a second block */
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_EQUAL(b, c);
    CU_ASSERT_EQUAL(2, cgpu_host_pool_blocks());
    char *d = cgpu_host_pool_get(1000); /* the cap is reached: malloc'd */
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(2, cgpu_host_pool_blocks());
    memset(d, 1, 1000);
    cgpu_host_pool_put(d);
    char *big = cgpu_host_pool_get((size_t) 1 << 20); /* over the cap: malloc'd */
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memset(big, 2, (size_t) 1 << 20);
    cgpu_host_pool_put(big);
    CU_ASSERT_EQUAL(2, cgpu_host_pool_blocks());
    cgpu_host_pool_put(b);
    cgpu_host_pool_drain(); /* frees b's block; c's is still in use */
    CU_ASSERT_EQUAL(1, cgpu_host_pool_blocks());
    cgpu_host_pool_put(c);
    CU_ASSERT_EQUAL(0, cgpu_host_pool_blocks());
    cgpu_host_pool_put(NULL);
    cgpu_host_pool_set_cap(0); /* no pinned memory kept: every request malloc'd */
    char *e = cgpu_host_pool_get(4096);
    CU_ASSERT_PTR_NOT_NULL(e);
    CU_ASSERT_EQUAL(0, cgpu_host_pool_blocks());
    cgpu_host_pool_put(e);
    /* growing sizes, one call at a time: past the table's eight entries the smallest free
     * block makes room, so the largest sizes are still pooled, not malloc'd */
    cgpu_host_pool_set_cap((size_t) 64 << 20);
    size_t sum = 0;
    for (int k = 0; k <= CGPU_HOST_POOL_BLOCKS; ++k) {
        const size_t sz = (size_t) 65536 << k;
        char *p = cgpu_host_pool_get(sz);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        memset(p, k, sz);
        cgpu_host_pool_put(p);
        sum += sz;
    }
    CU_ASSERT_EQUAL(CGPU_HOST_POOL_BLOCKS, cgpu_host_pool_blocks());
    CU_ASSERT_EQUAL(sum - 65536, cgpu_host_pool_kept()); /* the 64 KiB block went */
    /* a size no eviction can make room for (over the cap) evicts nothing */
    char *huge = cgpu_host_pool_get((size_t) 65 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
    cgpu_host_pool_put(huge);
    CU_ASSERT_EQUAL(sum - 65536, cgpu_host_pool_kept());
    /* smaller requests are served by the large blocks: nothing new is made */
    char *s1 = cgpu_host_pool_get(1000), *s2 = cgpu_host_pool_get(70000);
    CU_ASSERT_EQUAL(sum - 65536, cgpu_host_pool_kept());
    cgpu_host_pool_put(s1);
    cgpu_host_pool_put(s2);
    cgpu_host_pool_drain();
    CU_ASSERT_EQUAL(0, cgpu_host_pool_kept());
    cgpu_host_pool_set_cap((size_t) 128 << 20);
}

/* ------------------------------------------------------------------------------------- */
/* A peer process that dies, a peer process that stops                                   */
/* ------------------------------------------------------------------------------------- */

/* Shared by one group (mapped before the fork): when the victim left, CLOCK_MONOTONIC. */
typedef struct death_area {
    _Atomic int64_t died_ns;
} death_area_t;

enum { TEST_VICTIM = 1, TEST_DEATH_BOUND_MS = 2000, TEST_DEATH_COUNT = 1 << 16 };

/* The victim's second thread: the process leaves while its main thread is inside a
 * collective, as a killed rank does (exit status 0, so the harness counts no failure). */
static void *leave_soon(void *arg)
{
    death_area_t *d = arg;
    sleep_ms(50);
    atomic_store(&d->died_ns, (int64_t) cgpu_now_ns());
    _exit(EXIT_SUCCESS);
    return NULL;
}

static void scenario_dead_peer_fails_every_survivor(test_rank_t *t)
{
    death_area_t *d = (death_area_t *) t->arg;
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    int32_t *buf = malloc(sizeof(int32_t) * TEST_DEATH_COUNT);

    child_config(&cfg);
    child_warnings_expected = true; /* every survivor warns about the dead peer */
    if (!CHILD_CHECK(NULL != buf) || !child_start(t, &cfg, &comm)) {
        free(buf);
        return;
    }
    for (int i = 0; i < TEST_DEATH_COUNT; ++i) {
        buf[i] = t->rank + i;
    }
    cgpu_status_t st = cgpu_allreduce(comm, buf, buf, TEST_DEATH_COUNT, CGPU_DT_INT32, CGPU_OP_SUM,
                                      CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_OK == st, "the first allreduce returned %s", cgpu_status_string(st));
    CHILD_CHECK(-1 == cgpu_comm_dead_peer(comm, NULL));
    CHILD_CHECK(CGPU_OK == t->bs.barrier(t->bs.ctx));
    if (TEST_VICTIM == t->rank) {
        pthread_t th;
        if (CHILD_CHECK(0 == pthread_create(&th, NULL, leave_soon, d))) {
            for (;;) { /* until the other thread ends the process */
                (void) cgpu_allreduce(comm, buf, buf, TEST_DEATH_COUNT, CGPU_DT_INT32, CGPU_OP_SUM,
                                      CGPU_ALLREDUCE_AUTO);
            }
        }
        free(buf);
        return;
    }
    const int64_t t0 = now_ms();
    do {
        st = cgpu_allreduce(comm, buf, buf, TEST_DEATH_COUNT, CGPU_DT_INT32, CGPU_OP_SUM,
                            CGPU_ALLREDUCE_AUTO);
    } while (CGPU_OK == st && now_ms() - t0 < 10000);
    const int64_t found_ns = (int64_t) cgpu_now_ns(), died_ns = atomic_load(&d->died_ns);
    CHILD_CHECKF(CGPU_ERR_PEER_DEAD == st, "the loop ended with %s, not \"%s\"",
                 cgpu_status_string(st), cgpu_status_string(CGPU_ERR_PEER_DEAD));
    CHILD_CHECKF(died_ns > 0 && found_ns - died_ns < (int64_t) TEST_DEATH_BOUND_MS * 1000000,
                 "the death was found %.3f s after it (bound %d ms)",
                 (double) (found_ns - died_ns) / 1e9, TEST_DEATH_BOUND_MS);
    long pid = 0;
    CHILD_CHECKF(TEST_VICTIM == cgpu_comm_dead_peer(comm, &pid) &&
                     pid == (long) t->pids[TEST_VICTIM],
                 "the dead peer is rank %d, process %ld (expected rank %d, process %ld)",
                 cgpu_comm_dead_peer(comm, NULL), pid, TEST_VICTIM, (long) t->pids[TEST_VICTIM]);
    CHILD_CHECK(CGPU_RAS_FAILED == cgpu_comm_ras(comm, CGPU_RAS_STATE));
    /* sticky: every later collective is refused with the same status, at once */
    const int64_t t1 = now_ms();
    st = cgpu_allreduce(comm, buf, buf, 16, CGPU_DT_INT32, CGPU_OP_SUM, CGPU_ALLREDUCE_AUTO);
    CHILD_CHECKF(CGPU_ERR_PEER_DEAD == st, "the next allreduce returned %s",
                 cgpu_status_string(st));
    st = cgpu_bcast(comm, buf, 64, 0);
    CHILD_CHECKF(CGPU_ERR_PEER_DEAD == st, "the next bcast returned %s", cgpu_status_string(st));
    CHILD_CHECKF(now_ms() - t1 < 500, "the refused calls took %lld ms",
                 (long long) (now_ms() - t1));
    /* and the teardown neither hangs nor fails */
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
    free(buf);
}

static void test_dead_peer_fails_every_survivor(void)
{
    const int sizes[] = {2, 4};
    for (size_t k = 0; k < TEST_ARRAY_LEN(sizes); ++k) {
        death_area_t *d =
            mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CU_ASSERT_FATAL(MAP_FAILED != d);
        atomic_store(&d->died_ns, 0);
        CU_ASSERT(run_ranks("dead peer", sizes[k], scenario_dead_peer_fails_every_survivor, d));
        munmap(d, sizeof(*d));
    }
}

/* Rank 0's second thread: once the victim has stopped itself, hold it 400 ms (80 liveness
 * periods, 4 of them full looks at /proc), then let it go on. */
static void *resume_later(void *arg)
{
    const pid_t pid = *(const pid_t *) arg;
    for (int i = 0; i < 5000 && 'T' != test_proc_state(pid); ++i) {
        sleep_ms(1);
    }
    sleep_ms(400);
    kill(pid, SIGCONT);
    return NULL;
}

static void scenario_stopped_peer_is_waited_for(test_rank_t *t)
{
    cgpu_config_t cfg;
    cgpu_comm_t *comm = NULL;
    pthread_t th;
    bool resumer = false;

    child_config(&cfg);
    if (!child_start(t, &cfg, &comm)) {
        return;
    }
    CHILD_CHECK(CGPU_OK == t->bs.barrier(t->bs.ctx));
    if (0 == t->rank) {
        resumer = CHILD_CHECK(0 == pthread_create(&th, NULL, resume_later, &t->pids[TEST_VICTIM]));
    }
    if (TEST_VICTIM == t->rank) {
        raise(SIGSTOP); /* slow, not dead: the others must wait and then succeed */
    }
    /* a stopped peer is slow, never dead: the call succeeds with the right sums */
    CHILD_CHECK(check_allreduce(comm, CGPU_DT_INT32, CGPU_OP_SUM, 20000, false, 7));
    CHILD_CHECK(-1 == cgpu_comm_dead_peer(comm, NULL));
    if (resumer) {
        pthread_join(th, NULL);
    }
    CHILD_CHECK(CGPU_OK == cgpu_comm_release(&comm));
}

static void test_stopped_peer_is_waited_for(void)
{
    CU_ASSERT(run_ranks("stopped peer", 4, scenario_stopped_peer_is_waited_for, NULL));
}

/* The base check itself: a zombie (exited, not reaped) and a reused id count as gone; a
 * running process, and one this process cannot look at, as alive. */
static void test_process_liveness_check(void)
{
    const pid_t me = getpid();
    const uint64_t start = cgpu_proc_start_time(me);
    CU_ASSERT(0 != start);
    CU_ASSERT_EQUAL(CGPU_PROC_ALIVE, cgpu_proc_check(me, start, true));
    CU_ASSERT_EQUAL(CGPU_PROC_GONE, cgpu_proc_check(me, start + 1, true));   /* another start */
    CU_ASSERT_EQUAL(CGPU_PROC_ALIVE, cgpu_proc_check(me, start + 1, false)); /* kill() only */
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (0 == child) {
        _exit(0);
    }
    CU_ASSERT_FATAL(child > 0);
    const uint64_t cstart = cgpu_proc_start_time(child); /* read before it may have exited */
    for (int i = 0; i < 5000 && 'Z' != test_proc_state(child); ++i) {
        sleep_ms(1);
    }
    CU_ASSERT_EQUAL('Z', test_proc_state(child));
    CU_ASSERT_EQUAL(CGPU_PROC_ALIVE, cgpu_proc_check(child, cstart, false)); /* kill() finds it */
    CU_ASSERT_EQUAL(CGPU_PROC_GONE, cgpu_proc_check(child, cstart, true));
    int status;
    CU_ASSERT_EQUAL(child, waitpid(child, &status, 0));
    CU_ASSERT_EQUAL(CGPU_PROC_GONE, cgpu_proc_check(child, cstart, false));
    CU_ASSERT_EQUAL(CGPU_PROC_ALIVE, cgpu_proc_check(0, 0, true)); /* not a process: no verdict */
}

/* ------------------------------------------------------------------------------------- */
/* Registration                                                                           */
/* ------------------------------------------------------------------------------------- */

static const cgpu_unit_case_t test_cases[] = {
    {"allreduce sums int32 across ranks for counts 0, 1, fewer than ranks, primes and more "
     "than a slot-loop",
     test_allreduce_sums_int32_for_edge_counts},
    {"allreduce matches a scalar reference for every dtype and supported op, in place or not",
     test_allreduce_matches_for_every_dtype_and_op},
    {"alltoall delivers every byte for 0, 1, 3, 1000 and 100000 bytes per peer, in place or "
     "not",
     test_alltoall_delivers_every_byte},
    {"create agrees on failure when one rank cannot take part", test_create_agrees_on_failure},
    {"different nodes are refused uniformly", test_different_nodes_are_refused_uniformly},
    {"different nodes work over the proxy", test_different_nodes_over_proxy},
    {"a communicator set up before its ranks chose GPUs asks at calls 1, 2, 4, 8, 16 and "
     "stays on the host backend while they have not",
     test_settle_asks_rarely},
    {"release is idempotent and fini releases what was forgotten", test_release_is_idempotent},
    {"no segment name is left in /dev/shm after create", test_no_segment_name_is_left_after_create},
    {"segment names carry uid, pid and a random part, 0600; a taken name is left alone",
     test_segment_names},
    {"a squatted segment name is skipped and the communicator still works",
     test_squatted_name_is_skipped},
    {"a rank failing or killed inside the set-up leaves no segment name of any rank",
     test_rank_lost_in_setup_leaves_no_name},
    {"mapped segment count returns to zero after release",
     test_mapped_segment_count_returns_to_zero},
    {"the shm pool gives a released segment to the next communicator", test_pool_reuses_segments},
    {"a pooled segment a peer no longer maps is replaced on every rank", test_pool_offer_refused},
    {"max_comms caps live communicators", test_max_comms_caps_live_communicators},
    {"many consecutive collectives stay in lockstep", test_many_collectives_stay_in_lockstep},
    {"single-rank communicator copies", test_single_rank_communicator_copies},
    {"invalid arguments are refused before any communication", test_invalid_arguments_are_refused},
    {"init refuses configurations the engine cannot run with",
     test_init_refuses_bad_configurations},
    {"the MPI thread level resolves the auto stream order and completion wait",
     test_thread_level_resolves_auto_settings},
    {"a CUDA set-up waits for collectives in flight at most coll_gpu_cuda_setup_wait_ms",
     test_setup_wait_is_bounded},
    {"a wait for a late rank runs the progress function, not nested, not on a worker",
     test_waits_run_progress},
    {"the stager pool reuses the size in use and stays bounded",
     test_stager_pool_reuses_the_size_in_use},
    {"host pool: a block given back is reused, the cap holds, a drain spares blocks in use",
     test_host_pool_reuses_and_caps},
    {"shm pin: once per mapping, undone at the unmap; refused without a GPU or a mapping",
     test_shm_pin_once_per_mapping},
    {"shared stage: staged communicators have stages of coll_gpu_shared_stage_bytes, else the "
     "alltoall's",
     test_shared_stage_size},
    {"allreduce_host: MAX and SUM of host words, in place, zero words, a bad op refused",
     test_allreduce_host_words},
    {"scatter auto: a reduce-scatter up to 4 MiB blocks, a broadcast above; explicit kept",
     test_scatter_auto_rule},
    {"the block budget: what is left, at least one (pair), reservations all or nothing",
     test_block_budget},
    {"spare blocks: one a communicator; sixteen crossed calls of one rank per GPU fit",
     test_block_spare},
    {"the resident kernel is a cluster only where no launched kernel can fill a GPC",
     test_resident_cluster_rule},
    {"LL size classes: kept up to the setting and 512 KiB / ranks; a call's class or none",
     test_ll_classes_rule},
    {"oneshot blocks: per block bytes or small block bytes up to 8, 1-32, never fewer with more",
     test_oneshot_blocks_rule},
    {"resident blocks: one cluster up to 8, else whole clusters of 8 (at most 2); 32 without",
     test_resident_blocks_rule},
    {"a process that is gone, a zombie or a reused id counts as gone; a live one as alive",
     test_process_liveness_check},
    {"a peer that dies inside a collective fails it on every survivor within 2 s, naming it, "
     "and every later call",
     test_dead_peer_fails_every_survivor},
    {"a stopped peer is waited for, never taken for dead", test_stopped_peer_is_waited_for},
};

int main(void)
{
    const char *verbose = getenv("CGPU_TEST_VERBOSE");

    test_verbose = (NULL != verbose && 0 != strcmp(verbose, "0") && '\0' != verbose[0]);
    return cgpu_unit_run("test_engine", test_cases, TEST_ARRAY_LEN(test_cases));
}
