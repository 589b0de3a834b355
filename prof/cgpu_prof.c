/*
 * coll/gpu profiler: plugin loader and dispatch.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_PROF
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cgpu_log.h"
#include "cgpu_prof.h"

const cgpu_profiler_v1_t *cgpu_prof_active;
static void *prof_dl;

/* Newest first: a v2 loader adds its symbol (with a shim to v1) in front of this list. */
static const char *const prof_symbols[] = {CGPU_PROFILER_V1_SYMBOL};

static void prof_log(int level, const char *msg)
{
    cgpu_log(level, "profiler plugin: %s", msg);
}

void cgpu_prof_load(const char *path)
{
    if (NULL == path || '\0' == path[0] || NULL != cgpu_prof_active) {
        return;
    }
    prof_dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (NULL == prof_dl) {
        cgpu_log(CGPU_LOG_WARN,
                 "profiler: cannot load coll_gpu_profiler=%s (%s); continuing without a "
                 "profiler", path, dlerror());
        return;
    }
    const cgpu_profiler_v1_t *p = NULL;
    for (size_t i = 0; i < sizeof(prof_symbols) / sizeof(prof_symbols[0]) && NULL == p; ++i) {
        p = dlsym(prof_dl, prof_symbols[i]);
    }
    if (NULL == p || NULL == p->init || NULL == p->start_event || NULL == p->stop_event ||
        NULL == p->finalize) {
        cgpu_log(CGPU_LOG_WARN,
                 "profiler: %s exports no usable %s (missing symbol or NULL init/start_event/"
                 "stop_event/finalize); continuing without a profiler",
                 path, CGPU_PROFILER_V1_SYMBOL);
        dlclose(prof_dl);
        prof_dl = NULL;
        return;
    }
    cgpu_log(CGPU_LOG_INFO, "profiler: loaded %s from %s", NULL != p->name ? p->name : "?", path);
    cgpu_prof_active = p;
}

void cgpu_prof_unload(void)
{
    cgpu_prof_active = NULL;
    if (NULL != prof_dl) {
        dlclose(prof_dl);
        prof_dl = NULL;
    }
}

static void comm_event(cgpu_prof_comm_t *pc, const char *what)
{
    cgpu_prof_event_v1_t ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = CGPU_PROF_EVENT_COMM_V1;
    ev.u.comm.what = what;
    cgpu_prof_ev_t e;
    cgpu_prof_start(pc, &ev, &e);
    cgpu_prof_stop(&e);
}

void cgpu_prof_comm_init(cgpu_prof_comm_t *pc, const cgpu_prof_comm_info_v1_t *info)
{
    memset(pc, 0, sizeof(*pc));
    const cgpu_profiler_v1_t *p = cgpu_prof_active;
    if (NULL == p) {
        return;
    }
    void *ctx = NULL;
    int rc = p->init(&ctx, info, prof_log);
    if (0 != rc) {
        cgpu_log(CGPU_LOG_INFO, "profiler: init for communicator %s returned %d; no events "
                 "for it", NULL != info->name ? info->name : "?", rc);
        return;
    }
    pc->ctx = ctx;
    pc->on = true;
    comm_event(pc, "init");
}

void cgpu_prof_comm_fini(cgpu_prof_comm_t *pc)
{
    if (!pc->on || NULL == cgpu_prof_active) {
        pc->on = false;
        return;
    }
    comm_event(pc, "free");
    pc->on = false;
    (void) cgpu_prof_active->finalize(pc->ctx);
    pc->ctx = NULL;
}

void cgpu_prof_start_slow(cgpu_prof_comm_t *pc, const cgpu_prof_event_v1_t *ev, cgpu_prof_ev_t *out)
{
    out->handle = NULL;
    out->on = (0 == cgpu_prof_active->start_event(pc->ctx, &out->handle, ev));
}

void cgpu_prof_state_slow(cgpu_prof_ev_t *e, cgpu_prof_state_v1_t st)
{
    if (NULL != cgpu_prof_active->record_event_state) {
        (void) cgpu_prof_active->record_event_state(e->handle, st);
    }
}

void cgpu_prof_stop_slow(cgpu_prof_ev_t *e)
{
    (void) cgpu_prof_active->stop_event(e->handle);
    e->on = false;
}
