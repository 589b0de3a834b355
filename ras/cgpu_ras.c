/*
 * coll/gpu RAS: the watchdog thread.
 *
 * One thread per process, started with the first internal communicator when
 * coll_gpu_ras_timeout > 0. It never calls MPI, never progresses anything and holds its own
 * lock only around its sleep; the scan it runs (the engine's) takes only the engine's list
 * lock, which no data path holds.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_RAS
#include <pthread.h>

#include "cgpu_clock.h"
#include "cgpu_log.h"
#include "cgpu_ras.h"

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;
static pthread_t wd_thread;
static int wd_running; /* under wd_lock */
static double wd_timeout_s;
static cgpu_ras_scan_fn_t wd_scan;
static void *wd_arg;
static atomic_ullong wd_firings;

static const char *const kind_names[CGPU_KINDS] = {
    [CGPU_KIND_ALLREDUCE] = "allreduce",
    [CGPU_KIND_ALLTOALL] = "alltoall",
    [CGPU_KIND_BCAST] = "bcast",
    [CGPU_KIND_ALLGATHER] = "allgather",
    [CGPU_KIND_REDUCE_SCATTER] = "reduce_scatter",
    [CGPU_KIND_REDUCE] = "reduce",
};

const char *cgpu_ras_kind_name(int kind)
{
    return kind >= 0 && kind < CGPU_KINDS ? kind_names[kind] : "collective";
}

void cgpu_ras_watchdog_fired(void)
{
    atomic_fetch_add_explicit(&wd_firings, 1, memory_order_relaxed);
}

uint64_t cgpu_ras_watchdog_firings(void)
{
    return atomic_load_explicit(&wd_firings, memory_order_relaxed);
}

static void *wd_main(void *arg)
{
    (void) arg;
    const double t = wd_timeout_s;
    const double period = t / 4 < 1.0 ? t / 4 : 1.0;
    pthread_mutex_lock(&wd_lock);
    while (wd_running) {
        const struct timespec until = cgpu_deadline_after_ns((uint64_t) (period * 1e9));
        pthread_cond_timedwait(&wd_cond, &wd_lock, &until);
        if (!wd_running) {
            break;
        }
        pthread_mutex_unlock(&wd_lock);
        wd_scan(cgpu_now_ns(), wd_arg);
        pthread_mutex_lock(&wd_lock);
    }
    pthread_mutex_unlock(&wd_lock);
    return NULL;
}

void cgpu_ras_watchdog_start(double timeout_s, cgpu_ras_scan_fn_t scan, void *arg)
{
    if (timeout_s <= 0 || NULL == scan) {
        return;
    }
    pthread_mutex_lock(&wd_lock);
    if (!wd_running) {
        wd_running = 1;
        wd_timeout_s = timeout_s;
        wd_scan = scan;
        wd_arg = arg;
        if (0 != pthread_create(&wd_thread, NULL, wd_main, NULL)) {
            wd_running = 0;
            cgpu_log(CGPU_LOG_WARN, "RAS: cannot start the watchdog thread; no timeout reports");
        }
    }
    pthread_mutex_unlock(&wd_lock);
}

void cgpu_ras_watchdog_stop(void)
{
    pthread_mutex_lock(&wd_lock);
    int was = wd_running;
    wd_running = 0;
    pthread_cond_signal(&wd_cond);
    pthread_mutex_unlock(&wd_lock);
    if (was) {
        pthread_join(wd_thread, NULL);
    }
}
