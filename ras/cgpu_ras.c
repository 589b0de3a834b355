/*
 * coll/gpu engine RAS: the watchdog.
 *
 * One thread per process, started with the first internal communicator when
 * coll_gpu_ras_timeout > 0. It wakes a few times per timeout, looks at every live
 * communicator's health atomics, and reports (once per collective) one that has made no
 * progress for the timeout, naming the ranks that have not arrived (each rank publishes
 * the collective it entered in its shared segment). With coll_gpu_ras_abort_on_timeout
 * it also sets the communicator's abort flag: its waits give up and the collective
 * returns an error instead of hanging. It never calls MPI, never progresses anything and
 * takes only the engine's list lock, which no data path holds.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cgpu_comm_internal.h"

static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;
static pthread_t wd_thread;
static int wd_running; /* under wd_lock */
static atomic_ullong wd_firings;

uint64_t cgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

struct timespec cgpu_deadline_after_ns(uint64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    ns += (uint64_t) t.tv_nsec;
    t.tv_sec += (time_t) (ns / 1000000000ull);
    t.tv_nsec = (long) (ns % 1000000000ull);
    return t;
}

uint64_t cgpu_engine_watchdog_firings(void)
{
    return atomic_load_explicit(&wd_firings, memory_order_relaxed);
}

int cgpu_engine_shm_segments(void)
{
    return cgpu_shm_mapped_count();
}

static void check_comm(cgpu_comm_t *c, void *arg)
{
    const uint64_t now = *(const uint64_t *) arg;
    const cgpu_config_t *cfg = cgpu_engine_config();
    const uint64_t timeout_ns = (uint64_t) (cfg->ras_timeout_s * 1e9);
    cgpu_ras_t *r = &c->ras;
    uint64_t cur = atomic_load_explicit(&r->cur_seq, memory_order_acquire);
    uint64_t last = atomic_load_explicit(&r->last_progress_ns, memory_order_relaxed);
    if (0 == cur || now < last || now - last < timeout_ns ||
        cur == atomic_load_explicit(&r->reported_seq, memory_order_relaxed)) {
        return;
    }
    atomic_store_explicit(&r->reported_seq, cur, memory_order_relaxed);
    atomic_fetch_add_explicit(&wd_firings, 1, memory_order_relaxed);

    char missing[256] = "";
    size_t len = 0;
    int nmiss = 0;
    for (int p = 0; p < c->size && NULL != c->peer_segs && !c->resources_freed; ++p) {
        if (p != c->rank &&
            atomic_load_explicit(&cgpu_ctrl(c, p)->entered.v, memory_order_acquire) < cur) {
            ++nmiss;
            if (len + 16 < sizeof(missing)) {
                len += (size_t) snprintf(missing + len, sizeof(missing) - len, "%s%d",
                                         nmiss > 1 ? ", " : "",
                                         NULL != c->report_ranks ? c->report_ranks[p] : p);
            }
        }
    }
    const bool abort_it = cfg->ras_abort_on_timeout || c->abort_on_timeout;
    cgpu_log(CGPU_LOG_WARN,
             "RAS: %s #%llu on communicator %s (rank %d of %d) has made no progress for %.1f s; "
             "%d rank(s) not arrived%s%s%s",
             CGPU_KIND_ALLTOALL == r->kind ? "alltoall" : "allreduce", (unsigned long long) cur,
             r->name, c->rank, c->size, (double) (now - last) / 1e9, nmiss,
             nmiss > 0 ? ": " : "", missing,
             abort_it ? (cfg->ras_abort_on_timeout ? "; failing it (coll_gpu_ras_abort_on_timeout)"
                                                   : "; failing it (it spans nodes)")
                      : "; still waiting (set coll_gpu_ras_abort_on_timeout=1 to fail instead)");
    if (abort_it) {
        atomic_store(&r->abort, 1);
    }
}

static void *wd_main(void *arg)
{
    (void) arg;
    const double t = cgpu_engine_config()->ras_timeout_s;
    const double period = t / 4 < 1.0 ? t / 4 : 1.0;
    pthread_mutex_lock(&wd_lock);
    while (wd_running) {
        const struct timespec until = cgpu_deadline_after_ns((uint64_t) (period * 1e9));
        pthread_cond_timedwait(&wd_cond, &wd_lock, &until);
        if (!wd_running) {
            break;
        }
        pthread_mutex_unlock(&wd_lock);
        uint64_t now = cgpu_now_ns();
        cgpu_engine_for_each_comm(check_comm, &now);
        pthread_mutex_lock(&wd_lock);
    }
    pthread_mutex_unlock(&wd_lock);
    return NULL;
}

void cgpu_watchdog_start(void)
{
    if (cgpu_engine_config()->ras_timeout_s <= 0) {
        return;
    }
    pthread_mutex_lock(&wd_lock);
    if (!wd_running) {
        wd_running = 1;
        if (0 != pthread_create(&wd_thread, NULL, wd_main, NULL)) {
            wd_running = 0;
            cgpu_log(CGPU_LOG_WARN, "RAS: cannot start the watchdog thread; no timeout reports");
        }
    }
    pthread_mutex_unlock(&wd_lock);
}

void cgpu_watchdog_stop(void)
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
