/*
 * Example coll/gpu profiler plugin: writes a Chrome / Perfetto trace (JSON) per process.
 *
 *   mpirun ... --mca coll_gpu_profiler $PREFIX/lib/coll-gpu/libcgpu_prof_trace.so ./app
 *
 * One file per process, $CGPU_TRACE_DIR/cgpu-trace-<pid>.json (default directory: the
 * current one; created new, never overwritten: where that name exists, a file of an earlier
 * process with the same pid or anything else, the next free cgpu-trace-<pid>-<k>.json, k up to
 * 99, is written instead and a message names both), one track per communicator for its collectives
 * and one per communicator and channel for its steps, kernels and lifecycle events; transport
 * operations, which overlap one another (several items in flight in a queue), as async events
 * ("b"/"e", category "transport") on the communicator's track. Open the files in
 * https://ui.perfetto.dev or chrome://tracing. Events are written when they end, so memory
 * stays bounded whatever the run length.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_gpu_profiler_v1.h"

#define TRACE_MAX_TRACKS 4096
#define TRACE_NAME_TRIES 100 /* cgpu-trace-<pid>.json, then -1 .. -99 */

typedef struct trace_ctx {
    uint64_t comm_id;
    int rank;
    int size;
    char name[64];
} trace_ctx_t;

typedef struct trace_ev {
    trace_ctx_t *ctx;
    cgpu_prof_event_type_v1_t type;
    uint64_t t0_ns;
    uint64_t wait_end_ns; /* steps: when the peer was ready (0: not recorded) */
    int channel;
    char label[48];
    char args[160];
} trace_ev_t;

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *trace_out;
static int trace_contexts;
static int trace_first_event = 1;
static int trace_open_tried; /* once per process: a failure is said once, not per communicator */
static int trace_rank = -1;
static unsigned long long trace_async_id;
static uint64_t trace_tracks[TRACE_MAX_TRACKS];
static int trace_ntracks;
static cgpu_prof_log_v1_t trace_log;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* Called with trace_lock held. */
static void emit(const char *json)
{
    if (NULL == trace_out) {
        return;
    }
    fprintf(trace_out, "%s\n%s", trace_first_event ? "" : ",", json);
    trace_first_event = 0;
}

/* Name a track the first time it is used. Called with trace_lock held. */
static void name_track(uint64_t tid, const trace_ctx_t *c, int channel)
{
    for (int i = 0; i < trace_ntracks; ++i) {
        if (trace_tracks[i] == tid) {
            return;
        }
    }
    if (trace_ntracks == TRACE_MAX_TRACKS) {
        return; /* bounded: later tracks stay unnamed */
    }
    trace_tracks[trace_ntracks++] = tid;
    char buf[256];
    if (channel < 0) {
        snprintf(buf, sizeof(buf),
                 "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%llu,"
                 "\"args\":{\"name\":\"%s (id %llu) collectives\"}}",
                 trace_rank, (unsigned long long) tid, c->name, (unsigned long long) c->comm_id);
    } else {
        snprintf(buf, sizeof(buf),
                 "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%llu,"
                 "\"args\":{\"name\":\"%s (id %llu) channel %d\"}}",
                 trace_rank, (unsigned long long) tid, c->name, (unsigned long long) c->comm_id,
                 channel);
    }
    emit(buf);
}

static void close_trace(void)
{
    pthread_mutex_lock(&trace_lock);
    if (NULL != trace_out) {
        fprintf(trace_out, "\n],\"displayTimeUnit\":\"ns\"}\n");
        fclose(trace_out);
        trace_out = NULL;
    }
    pthread_mutex_unlock(&trace_lock);
}

/* A message through coll/gpu's log (stderr without one): what went wrong with the file. */
static void say(cgpu_prof_log_v1_t log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(cgpu_prof_log_v1_t log, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (NULL != log) {
        log(0, msg);
    } else {
        fprintf(stderr, "coll/gpu profiler plugin: %s\n", msg);
    }
}

/*
 * Create this process's trace file in @p dir. The file is always a new one (O_EXCL): a link
 * planted under the name is not followed and nothing that exists is overwritten; the next
 * suffixed name is tried instead. A path that does not fit is refused rather than cut, as a
 * cut path would send every rank to one name. NULL (after saying why) when no file is made.
 */
static FILE *open_trace_file(const char *dir, long long pid, cgpu_prof_log_v1_t log)
{
    char path[PATH_MAX], first[PATH_MAX];
    for (int k = 0; k < TRACE_NAME_TRIES; ++k) {
        const int n = 0 == k
                          ? snprintf(path, sizeof(path), "%s/cgpu-trace-%lld.json", dir, pid)
                          : snprintf(path, sizeof(path), "%s/cgpu-trace-%lld-%d.json", dir, pid, k);
        if (n < 0 || (size_t) n >= sizeof(path)) {
            say(log,
                "trace: the trace directory (CGPU_TRACE_DIR, %zu bytes) is too long: the trace "
                "file's path would not fit in %zu bytes; no trace is written. Directory: "
                "\"%.512s%s\"",
                strlen(dir), sizeof(path) - 1, dir, strlen(dir) > 512 ? "..." : "");
            return NULL;
        }
        if (0 == k) {
            memcpy(first, path, (size_t) n + 1);
        }
        const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && EEXIST == errno) {
            continue;
        }
        if (fd < 0) {
            say(log, "trace: cannot create %s: %s; no trace is written", path, strerror(errno));
            return NULL;
        }
        FILE *f = fdopen(fd, "w");
        if (NULL == f) {
            say(log, "trace: cannot write %s: %s; no trace is written", path, strerror(errno));
            close(fd);
            unlink(path);
            return NULL;
        }
        if (k > 0) {
            say(log,
                "trace: %s exists already (left as it is: not overwritten, not followed); "
                "this process's trace goes to %s",
                first, path);
        }
        return f;
    }
    say(log,
        "trace: %s and the %d names after it exist already (left as they are); no trace is "
        "written. Remove old traces or set CGPU_TRACE_DIR to another directory",
        first, TRACE_NAME_TRIES - 1);
    return NULL;
}

static void json_safe(char *dst, size_t n, const char *src)
{
    size_t j = 0;
    for (size_t i = 0; NULL != src && '\0' != src[i] && j + 1 < n; ++i) {
        char ch = src[i];
        dst[j++] = ('"' == ch || '\\' == ch || (unsigned char) ch < 0x20) ? '_' : ch;
    }
    dst[j] = '\0';
}

static int trace_init(void **context, const cgpu_prof_comm_info_v1_t *info, cgpu_prof_log_v1_t log)
{
    trace_ctx_t *c = calloc(1, sizeof(*c));
    if (NULL == c) {
        return 1;
    }
    c->comm_id = info->comm_id;
    c->rank = info->rank;
    c->size = info->size;
    json_safe(c->name, sizeof(c->name), info->name);
    pthread_mutex_lock(&trace_lock);
    trace_log = log;
    if (!trace_open_tried) {
        trace_open_tried = 1;
        const char *dir = getenv("CGPU_TRACE_DIR");
        trace_out =
            open_trace_file(NULL != dir && '\0' != dir[0] ? dir : ".", (long long) info->pid, log);
        if (NULL != trace_out) {
            trace_rank = info->rank; /* the first communicator's rank labels the process */
            fprintf(trace_out, "{\"traceEvents\":[");
            char buf[160];
            snprintf(buf, sizeof(buf),
                     "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,"
                     "\"args\":{\"name\":\"rank %d (pid %lld)\"}}",
                     trace_rank, trace_rank, (long long) info->pid);
            emit(buf);
            atexit(close_trace);
        }
    }
    trace_contexts++;
    pthread_mutex_unlock(&trace_lock);
    *context = c;
    return 0;
}

static int trace_start(void *context, void **handle, const cgpu_prof_event_v1_t *ev)
{
    trace_ctx_t *c = context;
    trace_ev_t *e = calloc(1, sizeof(*e));
    if (NULL == e) {
        return 1;
    }
    e->ctx = c;
    e->type = ev->type;
    e->t0_ns = now_ns();
    e->channel = -1;
    switch (ev->type) {
    case CGPU_PROF_EVENT_COLL_V1:
        snprintf(e->label, sizeof(e->label), "%s %s", ev->u.coll.kind, ev->u.coll.algorithm);
        snprintf(e->args, sizeof(e->args),
                 "\"count\":%zu,\"dtype\":\"%s\",\"op\":\"%s\",\"bytes\":%zu,\"seq\":%llu",
                 ev->u.coll.count, ev->u.coll.datatype, ev->u.coll.op, ev->u.coll.bytes,
                 (unsigned long long) ev->u.coll.seq);
        break;
    case CGPU_PROF_EVENT_STEP_V1:
        e->channel = ev->u.step.channel;
        snprintf(e->label, sizeof(e->label), "%s", ev->u.step.what);
        snprintf(e->args, sizeof(e->args), "\"peer\":%d,\"bytes\":%zu,\"step\":%llu",
                 ev->u.step.peer, ev->u.step.bytes, (unsigned long long) ev->u.step.step);
        break;
    case CGPU_PROF_EVENT_KERNEL_V1:
        e->channel = 0;
        snprintf(e->label, sizeof(e->label), "kernel %s", ev->u.kernel.name);
        snprintf(e->args, sizeof(e->args), "\"threads\":%d", ev->u.kernel.threads);
        break;
    case CGPU_PROF_EVENT_PROXY_V1:
        e->channel = 0;
        snprintf(e->label, sizeof(e->label), "transport %s", ev->u.proxy.what);
        snprintf(e->args, sizeof(e->args), "\"peer\":%d,\"bytes\":%zu", ev->u.proxy.peer,
                 ev->u.proxy.bytes);
        break;
    case CGPU_PROF_EVENT_COMM_V1:
        snprintf(e->label, sizeof(e->label), "comm %s", ev->u.comm.what);
        snprintf(e->args, sizeof(e->args), "\"size\":%d,\"rank\":%d", c->size, c->rank);
        break;
    }
    *handle = e;
    return 0;
}

static int trace_state(void *handle, cgpu_prof_state_v1_t st)
{
    trace_ev_t *e = handle;
    if (CGPU_PROF_STATE_DATA_V1 == st) {
        e->wait_end_ns = now_ns();
    }
    return 0;
}

static int trace_stop(void *handle)
{
    trace_ev_t *e = handle;
    uint64_t t1 = now_ns();
    /* track: collectives on the communicator's own track, the rest per channel */
    uint64_t tid = e->ctx->comm_id * 100 + (e->channel < 0 ? 0 : 1 + (uint64_t) e->channel % 99);
    char buf[1024];
    if (CGPU_PROF_EVENT_PROXY_V1 == e->type) {
        tid = e->ctx->comm_id * 100;
        pthread_mutex_lock(&trace_lock);
        const unsigned long long id = ++trace_async_id;
        snprintf(buf, sizeof(buf),
                 "{\"ph\":\"b\",\"cat\":\"transport\",\"id\":%llu,\"name\":\"%s\",\"pid\":%d,"
                 "\"tid\":%llu,\"ts\":%.3f,\"args\":{%s}},\n"
                 "{\"ph\":\"e\",\"cat\":\"transport\",\"id\":%llu,\"name\":\"%s\",\"pid\":%d,"
                 "\"tid\":%llu,\"ts\":%.3f}",
                 id, e->label, trace_rank, (unsigned long long) tid, (double) e->t0_ns / 1e3,
                 e->args, id, e->label, trace_rank, (unsigned long long) tid, (double) t1 / 1e3);
        name_track(tid, e->ctx, -1);
        emit(buf);
        pthread_mutex_unlock(&trace_lock);
        free(e);
        return 0;
    }
    snprintf(buf, sizeof(buf),
             "{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f,"
             "\"args\":{%s%s%.3f}}",
             e->label, trace_rank, (unsigned long long) tid, (double) e->t0_ns / 1e3,
             (double) (t1 - e->t0_ns) / 1e3, e->args,
             ",\"wait_us\":", e->wait_end_ns ? (double) (e->wait_end_ns - e->t0_ns) / 1e3 : 0.0);
    pthread_mutex_lock(&trace_lock);
    name_track(tid, e->ctx, e->channel < 0 ? -1 : e->channel);
    emit(buf);
    pthread_mutex_unlock(&trace_lock);
    free(e);
    return 0;
}

static int trace_finalize(void *context)
{
    free(context);
    pthread_mutex_lock(&trace_lock);
    int last = (0 == --trace_contexts);
    pthread_mutex_unlock(&trace_lock);
    if (last) {
        close_trace();
    }
    return 0;
}

__attribute__((visibility("default"))) const cgpu_profiler_v1_t cgpuProfiler_v1 = {
    .name = "cgpu-trace",
    .init = trace_init,
    .start_event = trace_start,
    .stop_event = trace_stop,
    .record_event_state = trace_state,
    .finalize = trace_finalize,
};
