/*
 * Unit tests of the profiler loader (prof/cgpu_prof.c) and of the checking plugin used by
 * the MPI profiler test: the plugin must actually catch a context handed to the wrong
 * communicator, otherwise a "0 mismatches" result would prove nothing.
 * The plugin paths come from the environment (set by test/run_all.sh):
 *   CGPU_PROF_CHECK_PLUGIN  the checking plugin (.so)
 *   CGPU_PROF_TRACE_PLUGIN  the trace plugin (.so), loaded to check it exports v1
 */
#include <CUnit/Basic.h>

#include "cunit_run.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    ev.u.coll = (cgpu_prof_coll_v1_t){.kind = "allreduce", .count = count, .datatype = "int32",
                                      .op = "sum", .root = -1, .bytes = 4 * count,
                                      .algorithm = "ring", .seq = seq};
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
    cgpu_prof_comm_info_v1_t ia = {.name = "check-1", .comm_id = 11, .size = 2, .rank = 0,
                                   .pid = (int64_t) getpid(), .backend = "host"};
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

static const cgpu_unit_case_t test_cases[] = {
    {"a missing plugin leaves profiling off", test_missing_plugin_leaves_profiling_off},
    {"a library without the v1 symbol is refused", test_library_without_the_symbol_is_refused},
    {"the trace plugin loads as v1", test_trace_plugin_loads_as_v1},
    {"the check plugin catches a context from another communicator",
     test_check_plugin_catches_a_context_from_another_communicator},
};

int main(void)
{
    return cgpu_unit_run("test_prof", test_cases, sizeof(test_cases) / sizeof(test_cases[0]));
}
