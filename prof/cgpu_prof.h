/*
 * coll/gpu profiler: loader and event dispatch (engine side, no Open MPI header).
 *
 * With no plugin loaded every hook is one load and one branch on cgpu_prof_active.
 * With one loaded, events are plain synchronous calls into the plugin: nothing is
 * queued, so there is nothing to grow. A communicator's context lives in its own
 * process-private engine object and is passed by value to each call, so no other
 * communicator's (or process's) context can ever reach it (DESIGN decision 6).
 */
#ifndef CGPU_PROF_H
#define CGPU_PROF_H

#include <stdbool.h>
#include <stddef.h>

#include "cgpu_status.h"
#include "coll_gpu_profiler_v1.h"

/** The loaded plugin, or NULL. */
extern const cgpu_profiler_v1_t *cgpu_prof_active;

/**
 * Load the plugin at @p path (NULL or "" = none). Looks up the newest ABI symbol first,
 * so a later version keeps loading v1 plugins. A missing or broken plugin gives one
 * warning and leaves profiling off; it is never an error for the component.
 */
void cgpu_prof_load(const char *path);

/** Unload (after every communicator has been finalized). Idempotent. */
void cgpu_prof_unload(void);

/** Per-communicator profiler state, embedded in the engine communicator. */
typedef struct cgpu_prof_comm {
    void *ctx;        /* what the plugin's init returned */
    bool on;          /* init succeeded: events flow */
    void *coll;       /* handle of the collective in progress (parent of its steps) */
    bool coll_on;
} cgpu_prof_comm_t;

/** Call the plugin's init for a communicator and emit its "init" event. */
void cgpu_prof_comm_init(cgpu_prof_comm_t *pc, const cgpu_prof_comm_info_v1_t *info);

/** Emit the "free" event and call finalize. Idempotent. */
void cgpu_prof_comm_fini(cgpu_prof_comm_t *pc);

/** A started event (on = false when none was started: profiling off or start failed). */
typedef struct cgpu_prof_ev {
    void *handle;
    bool on;
} cgpu_prof_ev_t;

void cgpu_prof_start_slow(cgpu_prof_comm_t *pc, const cgpu_prof_event_v1_t *ev, cgpu_prof_ev_t *out);
void cgpu_prof_state_slow(cgpu_prof_ev_t *e, cgpu_prof_state_v1_t st);
void cgpu_prof_stop_slow(cgpu_prof_ev_t *e);

static inline bool cgpu_prof_enabled(const cgpu_prof_comm_t *pc)
{
    return NULL != cgpu_prof_active && pc->on;
}

static inline void cgpu_prof_start(cgpu_prof_comm_t *pc, const cgpu_prof_event_v1_t *ev,
                                   cgpu_prof_ev_t *out)
{
    out->on = false;
    if (cgpu_prof_enabled(pc)) {
        cgpu_prof_start_slow(pc, ev, out);
    }
}

static inline void cgpu_prof_state(cgpu_prof_ev_t *e, cgpu_prof_state_v1_t st)
{
    if (e->on) {
        cgpu_prof_state_slow(e, st);
    }
}

static inline void cgpu_prof_stop(cgpu_prof_ev_t *e)
{
    if (e->on) {
        cgpu_prof_stop_slow(e);
    }
}

#endif /* CGPU_PROF_H */
