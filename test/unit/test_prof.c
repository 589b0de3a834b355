/*
 * Unit tests of the profiler loader (prof/cgpu_prof.c) and of the checking plugin used by
 * the MPI profiler test: the plugin must actually catch a context handed to the wrong
 * communicator, otherwise a "0 mismatches" result would prove nothing.
 * The trace plugin's file handling is checked in child processes (it opens its file once per
 * process): a link or a file at its path is left alone, a path too long or impossible is
 * refused with a message naming it.
 * The plugin paths come from the environment (set by test/run_all.sh):
 *   CGPU_PROF_CHECK_PLUGIN  the checking plugin (.so)
 *   CGPU_PROF_TRACE_PLUGIN  the trace plugin (.so), loaded to check it exports v1
 */
#include <CUnit/Basic.h>

#include "cunit_run.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgpu_engine.h"
#include "cgpu_prof.h"

typedef void (*report_fn)(unsigned long long *, unsigned long long *, unsigned long long *,
                          unsigned long long *);

static const char *env_or_skip(const char *name)
{
    const char *p = getenv(name);
    if (NULL == p || '\0' == p[0]) {
        CU_FAIL_FATAL("plugin path not set in the environment (run through test/run_all.sh)");
    }
    return p;
}

static void test_missing_plugin_leaves_profiling_off(void)
{
    cgpu_prof_load("/nonexistent/libnothing.so");
    CU_ASSERT_PTR_NULL(cgpu_prof_active);
    cgpu_prof_load(NULL);
    CU_ASSERT_PTR_NULL(cgpu_prof_active);
    cgpu_prof_unload();
}

static void test_library_without_the_symbol_is_refused(void)
{
    /* libc is a shared object that certainly exports no cgpuProfiler_v1 */
    cgpu_prof_load("libc.so.6");
    CU_ASSERT_PTR_NULL(cgpu_prof_active);
    cgpu_prof_unload();
}

static void test_trace_plugin_loads_as_v1(void)
{
    cgpu_prof_load(env_or_skip("CGPU_PROF_TRACE_PLUGIN"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(cgpu_prof_active);
    CU_ASSERT_STRING_EQUAL(cgpu_prof_active->name, "cgpu-trace");
    cgpu_prof_unload();
    CU_ASSERT_PTR_NULL(cgpu_prof_active);
}

static void emit_coll(cgpu_prof_comm_t *pc, size_t count, uint64_t seq, cgpu_prof_ev_t *e)
{
    cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_COLL_V1};
    ev.u.coll = (cgpu_prof_coll_v1_t){.kind = "allreduce",
                                      .count = count,
                                      .datatype = "int32",
                                      .op = "sum",
                                      .root = -1,
                                      .bytes = 4 * count,
                                      .algorithm = "ring",
                                      .seq = seq};
    cgpu_prof_start(pc, &ev, e);
}

static void test_check_plugin_catches_a_context_from_another_communicator(void)
{
    const char *path = env_or_skip("CGPU_PROF_CHECK_PLUGIN");
    cgpu_prof_load(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cgpu_prof_active);
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    report_fn report = NULL != dl ? (report_fn) dlsym(dl, "cgpu_check_plugin_report") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(report);
    unsigned long long ev0, mis0, unm0, live0, ev, mis, unm, live;
    report(&ev0, &mis0, &unm0, &live0);

    cgpu_prof_comm_t a, b;
    cgpu_prof_comm_info_v1_t ia = {.name = "check-1",
                                   .comm_id = 11,
                                   .size = 2,
                                   .rank = 0,
                                   .pid = (int64_t) getpid(),
                                   .backend = "host"};
    cgpu_prof_comm_info_v1_t ib = ia;
    ib.name = "check-2";
    ib.comm_id = 12;
    cgpu_prof_comm_init(&a, &ia);
    cgpu_prof_comm_init(&b, &ib);
    CU_ASSERT_TRUE_FATAL(a.on && b.on);

    /* correct use: no mismatch */
    cgpu_prof_ev_t e;
    emit_coll(&a, 1001, 1, &e);
    CU_ASSERT_TRUE(e.on);
    cgpu_prof_stop(&e);
    emit_coll(&b, 2, 1, &e);
    cgpu_prof_stop(&e);
    report(&ev, &mis, &unm, &live);
    CU_ASSERT_EQUAL(mis, mis0);
    CU_ASSERT_EQUAL(ev, ev0 + 2 + 2); /* two comm "init" events and two collectives */

    /* communicator 2's collective handed to communicator 1's context: the tag (count %
     * 1000) and the sequence number both give it away */
    emit_coll(&a, 2, 2, &e);
    cgpu_prof_stop(&e);
    report(&ev, &mis, &unm, &live);
    CU_ASSERT_TRUE(mis > mis0);

    /* a step whose parent is another context's collective */
    unsigned long long before = mis;
    cgpu_prof_ev_t parent;
    emit_coll(&b, 1002, 2, &parent);
    cgpu_prof_event_v1_t st = {.type = CGPU_PROF_EVENT_STEP_V1, .parent = parent.handle};
    st.u.step = (cgpu_prof_step_v1_t){.what = "send", .peer = 1, .channel = 0, .bytes = 8};
    cgpu_prof_start(&a, &st, &e);
    cgpu_prof_stop(&e);
    cgpu_prof_stop(&parent);
    report(&ev, &mis, &unm, &live);
    CU_ASSERT_TRUE(mis > before);

    /* a start never stopped is reported at finalize */
    emit_coll(&b, 1002, 3, &e);
    cgpu_prof_comm_fini(&a);
    cgpu_prof_comm_fini(&b);
    cgpu_prof_comm_fini(&b); /* idempotent */
    report(&ev, &mis, &unm, &live);
    CU_ASSERT_TRUE(unm > unm0);
    CU_ASSERT_EQUAL(live, live0);
    free(e.handle); /* the deliberately unstopped event's record (the plugin's malloc) */
    cgpu_prof_unload();
}

/* ---- the trace plugin's file: created new, never through a link, never cut ---- */

/* What the trace plugin logged in a child, kept in memory shared with the parent. */
typedef struct trace_said {
    char text[8192];
    size_t len;
} trace_said_t;

static trace_said_t *trace_said;

static void capture_log(int level, const char *msg)
{
    (void) level;
    const int n = snprintf(trace_said->text + trace_said->len,
                           sizeof(trace_said->text) - trace_said->len, "%s\n", msg);
    if (n > 0) {
        trace_said->len += (size_t) n;
        if (trace_said->len >= sizeof(trace_said->text)) {
            trace_said->len = sizeof(trace_said->text) - 1;
        }
    }
}

/*
 * Load the trace plugin in a child process (its file is opened once per process) with
 * CGPU_TRACE_DIR=@p dir, run one communicator with one collective as process @p pid, and
 * finalize. Returns what the plugin logged (empty string: nothing), NULL if the child failed.
 */
static const char *run_trace_plugin(const char *dir, long long pid)
{
    const char *path = env_or_skip("CGPU_PROF_TRACE_PLUGIN");
    memset(trace_said, 0, sizeof(*trace_said));
    fflush(stdout);
    fflush(stderr);
    const pid_t child = fork();
    if (0 == child) {
        setenv("CGPU_TRACE_DIR", dir, 1);
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        const cgpu_profiler_v1_t *p = NULL != dl ? dlsym(dl, "cgpuProfiler_v1") : NULL;
        if (NULL == p) {
            _exit(2);
        }
        cgpu_prof_comm_info_v1_t info = {.name = "trace-file",
                                         .comm_id = 1,
                                         .size = 1,
                                         .rank = 0,
                                         .pid = pid,
                                         .backend = "host"};
        cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_COLL_V1};
        ev.u.coll = (cgpu_prof_coll_v1_t){.kind = "allreduce",
                                          .count = 1,
                                          .datatype = "int32",
                                          .op = "sum",
                                          .root = -1,
                                          .bytes = 4,
                                          .algorithm = "ring",
                                          .seq = 1};
        void *ctx = NULL, *h = NULL;
        if (0 != p->init(&ctx, &info, capture_log) || 0 != p->start_event(ctx, &h, &ev) ||
            0 != p->stop_event(h) || 0 != p->finalize(ctx)) {
            _exit(3);
        }
        _exit(0);
    }
    int status = -1;
    if (child < 0 || child != waitpid(child, &status, 0) || !WIFEXITED(status) ||
        0 != WEXITSTATUS(status)) {
        return NULL;
    }
    return trace_said->text;
}

static bool file_holds(const char *path, const char *want)
{
    char got[256] = {0};
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        return false;
    }
    const size_t n = fread(got, 1, sizeof(got) - 1, f);
    fclose(f);
    return n == strlen(want) && 0 == memcmp(got, want, n);
}

static bool is_trace(const char *path)
{
    char head[32] = {0};
    struct stat sb;
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        return false;
    }
    const size_t n = fread(head, 1, sizeof(head) - 1, f);
    fclose(f);
    return 0 == lstat(path, &sb) && S_ISREG(sb.st_mode) && n > 0 &&
           0 == strncmp(head, "{\"traceEvents\":[", 16);
}

static void test_trace_file_is_never_written_through_a_link_or_over_a_file(void)
{
    char dir[] = "/tmp/cgpu-test-trace.XXXXXX", target[64], at[128], next[128], msg[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(target, sizeof(target), "%s.target", dir);
    FILE *f = fopen(target, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("precious", f);
    fclose(f);

    /* a link planted where process 4242 writes: the target stays as it is */
    snprintf(at, sizeof(at), "%s/cgpu-trace-4242.json", dir);
    snprintf(next, sizeof(next), "%s/cgpu-trace-4242-1.json", dir);
    CU_ASSERT_EQUAL_FATAL(0, symlink(target, at));
    const char *said = run_trace_plugin(dir, 4242);
    CU_ASSERT_PTR_NOT_NULL_FATAL(said);
    CU_ASSERT_TRUE(file_holds(target, "precious"));
    struct stat sb;
    CU_ASSERT_TRUE(0 == lstat(at, &sb) && S_ISLNK(sb.st_mode));
    snprintf(msg, sizeof(msg), "%s exists already", at);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, msg));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, next));
    CU_ASSERT_TRUE(is_trace(next));

    /* a file of an earlier process 4343 (a rerun): kept, the trace goes beside it */
    snprintf(at, sizeof(at), "%s/cgpu-trace-4343.json", dir);
    f = fopen(at, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("earlier run", f);
    fclose(f);
    said = run_trace_plugin(dir, 4343);
    CU_ASSERT_PTR_NOT_NULL_FATAL(said);
    CU_ASSERT_TRUE(file_holds(at, "earlier run"));
    snprintf(next, sizeof(next), "%s/cgpu-trace-4343-1.json", dir);
    CU_ASSERT_TRUE(is_trace(next));

    /* no name there: written quietly under the plain name */
    snprintf(at, sizeof(at), "%s/cgpu-trace-4444.json", dir);
    said = run_trace_plugin(dir, 4444);
    CU_ASSERT_PTR_NOT_NULL_FATAL(said);
    CU_ASSERT_STRING_EQUAL(said, "");
    CU_ASSERT_TRUE(is_trace(at));

    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", dir, target);
    CU_ASSERT_EQUAL(0, system(cmd));
}

static void test_trace_file_errors_name_the_path(void)
{
    /* a directory too long for a path: refused with its name, not cut. Made of "/." after a
     * real directory, so that a cut path would still name a place that exists. */
    char base[] = "/tmp/cgpu-test-trace.XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(base));
    const size_t len = 5000;
    char *dir = malloc(len + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    size_t n = (size_t) snprintf(dir, len + 1, "%s", base);
    while (n + 2 <= len) {
        dir[n++] = '/';
        dir[n++] = '.';
    }
    dir[n] = '\0';
    const char *said = run_trace_plugin(dir, 4545);
    CU_ASSERT_PTR_NOT_NULL_FATAL(said);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "too long"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, base));
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rmdir '%s'", base); /* fails if anything was written there */
    CU_ASSERT_EQUAL(0, system(cmd));
    free(dir);

    /* a directory that does not exist: the path and the reason */
    said = run_trace_plugin("/nonexistent/cgpu-test-trace", 4646);
    CU_ASSERT_PTR_NOT_NULL_FATAL(said);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "/nonexistent/cgpu-test-trace/cgpu-trace-4646.json"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, strerror(ENOENT)));
}

static const cgpu_unit_case_t test_cases[] = {
    {"a missing plugin leaves profiling off", test_missing_plugin_leaves_profiling_off},
    {"a library without the v1 symbol is refused", test_library_without_the_symbol_is_refused},
    {"the trace plugin loads as v1", test_trace_plugin_loads_as_v1},
    {"the check plugin catches a context from another communicator",
     test_check_plugin_catches_a_context_from_another_communicator},
    {"the trace file is never written through a link or over a file",
     test_trace_file_is_never_written_through_a_link_or_over_a_file},
    {"the trace file's errors name the path: too long, cannot be created",
     test_trace_file_errors_name_the_path},
};

int main(void)
{
    trace_said =
        mmap(NULL, sizeof(*trace_said), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (MAP_FAILED == trace_said) {
        perror("test_prof: mmap");
        return EXIT_FAILURE;
    }
    return cgpu_unit_run("test_prof", test_cases, sizeof(test_cases) / sizeof(test_cases[0]));
}
