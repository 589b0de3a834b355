/*
 * Checking profiler plugin for the tests: gives every communicator a distinct context
 * holding its own (communicator id, rank, pid, name) and checks on every callback that
 * what it receives is its own:
 *   - the context is one this plugin created, still alive, made in this process;
 *   - a collective's sequence number is exactly the previous one + 1 on that context
 *     (events of another communicator would break the sequence);
 *   - a collective's element count carries the communicator's tag (the test names each
 *     communicator "check-K" and uses counts with count % 1000 == K on it);
 *   - a step's parent is a collective handle of the same context;
 *   - every start is matched by one stop (per context, checked at finalize).
 * cgpu_check_plugin_report() (found by the test with dlopen(RTLD_NOLOAD)) returns totals.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_gpu_profiler_v1.h"

#define CTX_MAGIC 0x636f6e7465787421ull
#define EV_MAGIC 0x6576656e74212121ull

typedef struct check_ctx {
    uint64_t magic;
    uint64_t comm_id;
    int rank, size;
    int64_t pid;
    int tag; /* K from the name "check-K", -1 otherwise */
    uint64_t last_seq;
    atomic_ullong started, stopped;
    atomic_ullong transport_in_flight;
} check_ctx_t;

typedef struct check_ev {
    uint64_t magic;
    check_ctx_t *ctx;
    cgpu_prof_event_type_v1_t type;
} check_ev_t;

static atomic_ullong total_events, total_mismatches, total_unmatched, total_contexts;
/* transport operations: how many started, and the most in flight at once on one context */
static atomic_ullong total_transport, max_transport_in_flight;

#define MISMATCH(...)                                                                     \
    do {                                                                                  \
        if (atomic_fetch_add(&total_mismatches, 1) < 20) {                                \
            fprintf(stderr, "check_plugin: MISMATCH: " __VA_ARGS__);                      \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

static int ctx_ok(const check_ctx_t *c)
{
    if (NULL == c || CTX_MAGIC != c->magic) {
        MISMATCH("context %p is not a live context of this plugin", (const void *) c);
        return 0;
    }
    if (c->pid != (int64_t) getpid()) {
        MISMATCH("context of pid %lld used in pid %d", (long long) c->pid, (int) getpid());
        return 0;
    }
    return 1;
}

static int check_init(void **context, const cgpu_prof_comm_info_v1_t *info, cgpu_prof_log_v1_t log)
{
    (void) log;
    check_ctx_t *c = calloc(1, sizeof(*c));
    if (NULL == c) {
        return 1;
    }
    c->magic = CTX_MAGIC;
    c->comm_id = info->comm_id;
    c->rank = info->rank;
    c->size = info->size;
    c->pid = info->pid;
    c->tag = -1;
    if (NULL != info->name && 0 == strncmp(info->name, "check-", 6)) {
        c->tag = atoi(info->name + 6);
    }
    if (info->pid != (int64_t) getpid()) {
        MISMATCH("init told pid %lld in pid %d", (long long) info->pid, (int) getpid());
    }
    atomic_fetch_add(&total_contexts, 1);
    *context = c;
    return 0;
}

static int check_start(void *context, void **handle, const cgpu_prof_event_v1_t *ev)
{
    check_ctx_t *c = context;
    *handle = NULL;
    if (!ctx_ok(c)) {
        return 1;
    }
    if (CGPU_PROF_EVENT_COLL_V1 == ev->type) {
        if (ev->u.coll.seq != c->last_seq + 1) {
            MISMATCH("comm %llu rank %d: collective seq %llu after %llu", (unsigned long long) c->comm_id,
                     c->rank, (unsigned long long) ev->u.coll.seq, (unsigned long long) c->last_seq);
        }
        c->last_seq = ev->u.coll.seq;
        if (c->tag >= 0 && (int) (ev->u.coll.count % 1000) != c->tag) {
            MISMATCH("comm tagged %d received a collective of count %zu (tag %d)", c->tag,
                     ev->u.coll.count, (int) (ev->u.coll.count % 1000));
        }
    } else if (NULL != ev->parent) {
        const check_ev_t *p = ev->parent;
        if (EV_MAGIC != p->magic || p->ctx != c || CGPU_PROF_EVENT_COLL_V1 != p->type) {
            MISMATCH("comm %llu: an event's parent belongs to another context or is no collective",
                     (unsigned long long) c->comm_id);
        }
    }
    check_ev_t *e = malloc(sizeof(*e));
    if (NULL == e) {
        return 1;
    }
    e->magic = EV_MAGIC;
    e->ctx = c;
    e->type = ev->type;
    if (CGPU_PROF_EVENT_PROXY_V1 == ev->type) {
        unsigned long long now = atomic_fetch_add(&c->transport_in_flight, 1) + 1;
        unsigned long long m = atomic_load(&max_transport_in_flight);
        while (now > m && !atomic_compare_exchange_weak(&max_transport_in_flight, &m, now)) {
        }
        atomic_fetch_add(&total_transport, 1);
    }
    atomic_fetch_add(&c->started, 1);
    atomic_fetch_add(&total_events, 1);
    *handle = e;
    return 0;
}

static int check_state(void *handle, cgpu_prof_state_v1_t st)
{
    check_ev_t *e = handle;
    if (NULL == e || EV_MAGIC != e->magic || !ctx_ok(e->ctx) ||
        (CGPU_PROF_STATE_WAIT_PEER_V1 != st && CGPU_PROF_STATE_DATA_V1 != st)) {
        MISMATCH("record_event_state on a bad handle or state %d", (int) st);
        return 1;
    }
    return 0;
}

static int check_stop(void *handle)
{
    check_ev_t *e = handle;
    if (NULL == e || EV_MAGIC != e->magic) {
        MISMATCH("stop_event on a handle this plugin did not start (or stopped twice)");
        return 1;
    }
    if (ctx_ok(e->ctx)) {
        atomic_fetch_add(&e->ctx->stopped, 1);
        if (CGPU_PROF_EVENT_PROXY_V1 == e->type) {
            atomic_fetch_sub(&e->ctx->transport_in_flight, 1);
        }
    }
    e->magic = 0;
    free(e);
    return 0;
}

static int check_finalize(void *context)
{
    check_ctx_t *c = context;
    if (!ctx_ok(c)) {
        return 1;
    }
    unsigned long long s = atomic_load(&c->started), t = atomic_load(&c->stopped);
    if (s != t) {
        atomic_fetch_add(&total_unmatched, s > t ? s - t : t - s);
        MISMATCH("comm %llu rank %d: %llu events started, %llu stopped",
                 (unsigned long long) c->comm_id, c->rank, s, t);
    }
    c->magic = 0;
    free(c);
    atomic_fetch_sub(&total_contexts, 1);
    return 0;
}

__attribute__((visibility("default"))) const cgpu_profiler_v1_t cgpuProfiler_v1 = {
    .name = "cgpu-check",
    .init = check_init,
    .start_event = check_start,
    .stop_event = check_stop,
    .record_event_state = check_state,
    .finalize = check_finalize,
};

/* Transport operations started so far, and the most in flight at once on one context. */
__attribute__((visibility("default"))) void cgpu_check_plugin_transport(unsigned long long *started,
                                                                        unsigned long long *max_in_flight)
{
    *started = atomic_load(&total_transport);
    *max_in_flight = atomic_load(&max_transport_in_flight);
}

/* Totals so far: events started, mismatches, unmatched starts, live contexts. */
__attribute__((visibility("default"))) void cgpu_check_plugin_report(unsigned long long *events,
                                                                     unsigned long long *mismatches,
                                                                     unsigned long long *unmatched,
                                                                     unsigned long long *live)
{
    *events = atomic_load(&total_events);
    *mismatches = atomic_load(&total_mismatches);
    *unmatched = atomic_load(&total_unmatched);
    *live = atomic_load(&total_contexts);
}
