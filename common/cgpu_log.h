/*
 * coll/gpu base: logging with levels and a subsystem mask, and the check macros.
 *
 * Every layer logs through cgpu_log(level, fmt, ...). A file says which subsystem it speaks
 * for by defining CGPU_LOG_SUBSYS before its first #include (the default is COLL); a
 * message prints when its level is at most coll_gpu_verbose and its subsystem is in
 * coll_gpu_verbose_subsystems. Warnings always print, whatever the mask, because each one
 * tells the user something to act on. The sink (Open MPI's output stream, in the plugin)
 * is set once by the glue; before that, messages go to stderr.
 *
 * Check macros leave a trail: a failing call logs "file:line: <call> -> <status>" at DEBUG
 * level and jumps to a cleanup label named after what it undoes. No macro here hides a
 * return.
 */
#ifndef CGPU_LOG_H
#define CGPU_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "cgpu_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Log levels, compared against coll_gpu_verbose. Warnings always print. */
enum { CGPU_LOG_WARN = 0, CGPU_LOG_INFO = 10, CGPU_LOG_DEBUG = 50, CGPU_LOG_TRACE = 100 };

/** Subsystems, one bit each (coll_gpu_verbose_subsystems names them). */
typedef enum cgpu_subsys {
    CGPU_SUB_INIT = 1u << 0, /* component, engine and communicator set-up */
    CGPU_SUB_COLL = 1u << 1, /* collectives: path decisions, algorithms, fallback */
    CGPU_SUB_SHM = 1u << 2,  /* host shared-memory transport */
    CGPU_SUB_CUDA = 1u << 3, /* CUDA runtime, IPC, kernels */
    CGPU_SUB_NET = 1u << 4,  /* inter-node path: proxy and libfabric */
    CGPU_SUB_RAS = 1u << 5,  /* health state and the watchdog */
    CGPU_SUB_PROF = 1u << 6, /* profiler plugins */
    CGPU_SUB_NB = 1u << 7,   /* non-blocking and persistent collectives, workers */
    CGPU_SUB_ALL = 0xffu,
} cgpu_subsys_t;

#define CGPU_SUBSYS_NAMES "init,coll,shm,cuda,net,ras,prof,nb"

/** Where messages go (the glue routes them to Open MPI's output stream). */
typedef void (*cgpu_log_fn_t)(int level, const char *msg);

/**
 * Set the sink, the verbosity and the subsystem mask. Called by whoever owns the process's
 * configuration (the component at open, tests), before or after messages start.
 *
 * @param fn       sink; NULL sends messages to stderr
 * @param verbose  messages with level <= verbose print
 * @param mask     bits of cgpu_subsys_t whose messages above WARN print
 */
void cgpu_log_setup(cgpu_log_fn_t fn, int verbose, unsigned mask);

/**
 * Parse a comma-separated list of subsystem names ("all", "init,cuda", ...).
 *
 * @param text  the list; NULL or "" means all
 * @param mask  the bits, on success
 * @return      CGPU_OK, or CGPU_ERR_INVALID_ARG naming nothing known (mask untouched)
 */
cgpu_status_t cgpu_log_parse_mask(const char *text, unsigned *mask);

/** Whether a message of @p level from @p subsys would print (cheap: two relaxed loads). */
bool cgpu_log_enabled(unsigned subsys, int level);

/** The logger behind cgpu_log(); use the macro. */
void cgpu_log_at(unsigned subsys, int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#ifndef CGPU_LOG_SUBSYS
#define CGPU_LOG_SUBSYS CGPU_SUB_COLL
#endif

/** Log a message of @p level for this file's subsystem (printf format). */
#define cgpu_log(level, ...) cgpu_log_at(CGPU_LOG_SUBSYS, (level), __FILE__, __LINE__, __VA_ARGS__)

/** Log a message whose cause may recur (a cap reached, a resource refused) the first time
 * this call site runs in the process only: a cap hit by every new communicator must not
 * print a line each. The text should say that further cases are not reported. */
#define cgpu_log_once(level, ...)                                                                  \
    do {                                                                                           \
        static atomic_flag cgpu_log_once_ = ATOMIC_FLAG_INIT;                                      \
        if (!atomic_flag_test_and_set_explicit(&cgpu_log_once_, memory_order_relaxed)) {           \
            cgpu_log(level, __VA_ARGS__);                                                          \
        }                                                                                          \
    } while (0)

/** Log the failure of @p expr (a cgpu_status_t) at file:line, for the trail. */
void cgpu_log_failure(unsigned subsys, const char *file, int line, const char *expr,
                      cgpu_status_t st);

/**
 * Evaluate @p call (a cgpu_status_t); on an error store it in @p st, log the trail and jump
 * to @p label, the cleanup that undoes what the function holds so far.
 */
#define CGPU_CHECK_GOTO(call, st, label)                                                           \
    do {                                                                                           \
        cgpu_status_t cgpu_check_rc_ = (call);                                                     \
        if (cgpu_check_rc_ < 0) {                                                                  \
            (st) = cgpu_check_rc_;                                                                 \
            cgpu_log_failure(CGPU_LOG_SUBSYS, __FILE__, __LINE__, #call, cgpu_check_rc_);          \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/** Like CGPU_CHECK_GOTO for a condition: when @p cond is false, @p st = @p err, jump. */
#define CGPU_REQUIRE_GOTO(cond, err, st, label)                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            (st) = (err);                                                                          \
            cgpu_log_failure(CGPU_LOG_SUBSYS, __FILE__, __LINE__, #cond, (err));                   \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/** Evaluate @p call; on an error log the trail. The value is the status (no jump). */
#define CGPU_TRAIL(call) cgpu_log_trail((call), CGPU_LOG_SUBSYS, __FILE__, __LINE__, #call)

static inline cgpu_status_t cgpu_log_trail(cgpu_status_t st, unsigned subsys, const char *file,
                                           int line, const char *expr)
{
    if (st < 0) {
        cgpu_log_failure(subsys, file, line, expr, st);
    }
    return st;
}

#ifdef __cplusplus
}
#endif

#endif /* CGPU_LOG_H */
