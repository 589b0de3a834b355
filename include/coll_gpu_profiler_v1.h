/*
 * coll/gpu profiler plugin ABI, version 1. FROZEN: once released this header never
 * changes; a later version adds coll_gpu_profiler_v2.h and a new symbol, and the loader
 * keeps accepting plugins that export only this one.
 *
 * A plugin is a shared object that exports
 *
 *     const cgpu_profiler_v1_t cgpuProfiler_v1 = { ... };
 *
 * and is named by the MCA parameter coll_gpu_profiler (a path). coll/gpu calls:
 *   - init() once per internal communicator per process, when the communicator is
 *     created; what it returns in *context is handed back, by value, with every event of
 *     that communicator and of no other;
 *   - start_event() / record_event_state() / stop_event() around what happens on it;
 *     every start whose return was 0 is matched by exactly one stop;
 *   - finalize(context) when the communicator is released.
 * Calls for one communicator come from the thread running its collective; calls for
 * different communicators may come from different threads at once. A plugin must not
 * call MPI from a callback. Strings passed in are valid only during the call.
 */
#ifndef COLL_GPU_PROFILER_V1_H
#define COLL_GPU_PROFILER_V1_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CGPU_PROFILER_V1_SYMBOL "cgpuProfiler_v1"

/** What an event describes. */
typedef enum cgpu_prof_event_type_v1 {
    CGPU_PROF_EVENT_COLL_V1 = 1,   /* one collective call served by the engine */
    CGPU_PROF_EVENT_STEP_V1 = 2,   /* one chunk moved to / from a peer on a channel */
    CGPU_PROF_EVENT_KERNEL_V1 = 3, /* one GPU kernel launch, start to completion */
    CGPU_PROF_EVENT_PROXY_V1 = 4,  /* one transport/proxy operation (inter-node) */
    CGPU_PROF_EVENT_COMM_V1 = 5,   /* communicator lifecycle: init, free */
} cgpu_prof_event_type_v1_t;

/** States recorded with record_event_state (steps: waiting, then moving data). */
typedef enum cgpu_prof_state_v1 {
    CGPU_PROF_STATE_WAIT_PEER_V1 = 1, /* waiting for the peer's data or room */
    CGPU_PROF_STATE_DATA_V1 = 2,      /* peer ready: copying / reducing */
} cgpu_prof_state_v1_t;

/** What init learns about a communicator. */
typedef struct cgpu_prof_comm_info_v1 {
    const char *name;  /* the MPI communicator's name (may be "") */
    uint64_t comm_id;  /* unique in this process, the same as MPI's context id on it */
    int size;
    int rank;
    int64_t pid;       /* the calling process */
    const char *backend; /* "host" or "cuda" */
} cgpu_prof_comm_info_v1_t;

typedef struct cgpu_prof_coll_v1 {
    const char *kind;      /* "allreduce", "alltoall" */
    size_t count;          /* elements (allreduce) or bytes per peer (alltoall) */
    const char *datatype;  /* engine type name, e.g. "float32"; "byte" for alltoall */
    const char *op;        /* "sum" ...; "" where none */
    int root;              /* -1 where none */
    size_t bytes;          /* bytes this rank contributes */
    const char *algorithm; /* "ring", "oneshot", "tree", "direct" */
    uint64_t seq;          /* collective number on this communicator, from 1 */
} cgpu_prof_coll_v1_t;

typedef struct cgpu_prof_step_v1 {
    const char *what; /* "send", "recv", "recv_reduce_send", "recv_copy_send" */
    int peer;         /* rank the chunk goes to (send) or comes from (recv) */
    int channel;
    size_t bytes;
    uint64_t step;    /* step number within the collective */
} cgpu_prof_step_v1_t;

typedef struct cgpu_prof_kernel_v1 {
    const char *name; /* "ring_allreduce", ... */
    int blocks;
    int threads;
} cgpu_prof_kernel_v1_t;

typedef struct cgpu_prof_proxy_v1 {
    const char *what;
    int peer;
    size_t bytes;
} cgpu_prof_proxy_v1_t;

typedef struct cgpu_prof_comm_v1 {
    const char *what; /* "init", "free" */
} cgpu_prof_comm_v1_t;

/** One event. parent is the handle of the enclosing event (a step's collective) or NULL. */
typedef struct cgpu_prof_event_v1 {
    cgpu_prof_event_type_v1_t type;
    void *parent;
    union {
        cgpu_prof_coll_v1_t coll;
        cgpu_prof_step_v1_t step;
        cgpu_prof_kernel_v1_t kernel;
        cgpu_prof_proxy_v1_t proxy;
        cgpu_prof_comm_v1_t comm;
    } u;
} cgpu_prof_event_v1_t;

/** Logging function coll/gpu gives the plugin (goes to Open MPI's output stream). */
typedef void (*cgpu_prof_log_v1_t)(int level, const char *msg);

/** The plugin. Every function returns 0 on success; non-zero is logged and ignored. */
typedef struct cgpu_profiler_v1 {
    const char *name;
    int (*init)(void **context, const cgpu_prof_comm_info_v1_t *info, cgpu_prof_log_v1_t log);
    int (*start_event)(void *context, void **handle, const cgpu_prof_event_v1_t *event);
    int (*stop_event)(void *handle);
    int (*record_event_state)(void *handle, cgpu_prof_state_v1_t state);
    int (*finalize)(void *context);
} cgpu_profiler_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* COLL_GPU_PROFILER_V1_H */
