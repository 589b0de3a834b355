/*
 * coll/gpu base: the logger. The sink, level and mask are atomics because set-up may run
 * while other threads log (a communicator's worker, the watchdog); nothing here locks.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cgpu_log.h"

static _Atomic(cgpu_log_fn_t) log_sink;
static atomic_int log_verbose;
static atomic_uint log_mask = CGPU_SUB_ALL;

static const char *const subsys_names[] = {"init", "coll", "shm",  "cuda",
                                           "net",  "ras",  "prof", "nb"};
_Static_assert(sizeof(subsys_names) / sizeof(subsys_names[0]) == 8,
               "one name per cgpu_subsys_t bit");

void cgpu_log_setup(cgpu_log_fn_t fn, int verbose, unsigned mask)
{
    atomic_store(&log_sink, fn);
    atomic_store(&log_verbose, verbose);
    atomic_store(&log_mask, mask);
}

cgpu_status_t cgpu_log_parse_mask(const char *text, unsigned *mask)
{
    if (NULL == text || '\0' == text[0]) {
        *mask = CGPU_SUB_ALL;
        return CGPU_OK;
    }
    unsigned bits = 0;
    const char *p = text;
    while ('\0' != *p) {
        size_t n = strcspn(p, ", ");
        bool known = false;
        if (3 == n && 0 == strncmp(p, "all", 3)) {
            bits |= CGPU_SUB_ALL;
            known = true;
        }
        for (unsigned i = 0; !known && i < sizeof(subsys_names) / sizeof(subsys_names[0]); ++i) {
            if (strlen(subsys_names[i]) == n && 0 == strncmp(p, subsys_names[i], n)) {
                bits |= 1u << i;
                known = true;
            }
        }
        if (!known && n > 0) {
            return CGPU_ERR_INVALID_ARG;
        }
        p += n;
        p += strspn(p, ", ");
    }
    *mask = bits;
    return CGPU_OK;
}

bool cgpu_log_enabled(unsigned subsys, int level)
{
    if (level <= CGPU_LOG_WARN) {
        return true;
    }
    return level <= atomic_load_explicit(&log_verbose, memory_order_relaxed) &&
           0 != (subsys & atomic_load_explicit(&log_mask, memory_order_relaxed));
}

static void emit(int level, const char *msg)
{
    cgpu_log_fn_t fn = atomic_load_explicit(&log_sink, memory_order_acquire);
    if (NULL != fn) {
        fn(level, msg);
    } else {
        fprintf(stderr, "coll/gpu: %s\n", msg);
    }
}

void cgpu_log_at(unsigned subsys, int level, const char *file, int line, const char *fmt, ...)
{
    if (!cgpu_log_enabled(subsys, level)) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (level >= CGPU_LOG_DEBUG) {
        /* where a debug line comes from matters more than its length */
        char where[1100];
        const char *base = strrchr(file, '/');
        snprintf(where, sizeof(where), "%s (%s:%d)", msg, NULL != base ? base + 1 : file, line);
        emit(level, where);
        return;
    }
    emit(level, msg);
}

void cgpu_log_failure(unsigned subsys, const char *file, int line, const char *expr,
                      cgpu_status_t st)
{
    cgpu_log_at(subsys, CGPU_LOG_DEBUG, file, line, "%s -> %s", expr, cgpu_status_string(st));
}
