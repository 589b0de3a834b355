/*
 * coll/gpu engine: the helper thread (cgpu_helper.h).
 *
 * A caller owns the helper from cgpu_helper_start to cgpu_helper_join (the busy flag), so
 * the task's function and argument are written by one thread while the helper waits for
 * the next task number. Between tasks the helper spins for a while, giving the core away at
 * each poll (a call's rounds come tens of microseconds apart, and oversubscribed ranks need
 * the CPU), then sleeps on a condition variable until the next task.
 */
#include "cgpu_helper.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cgpu_clock.h"
#include "cgpu_engine.h"
#include "cgpu_log.h"
#include "cgpu_thread.h"

enum { SPIN_NS = 500 * 1000 }; /* how long an idle helper polls before it sleeps */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static bool started, stopping, sleeping, failed; /* under lock */
static atomic_bool busy;                         /* a caller owns the helper */
static _Atomic uint64_t posted, done;            /* task numbers handed over, returned */
static atomic_ulong tasks;
static cgpu_helper_fn_t task_fn; /* written by the owner before posted moves */
static void *task_arg;

static void *helper_main(void *unused)
{
    (void) unused;
    cgpu_thread_set_worker(true);
    uint64_t seen = 0;
    for (;;) {
        uint64_t p = atomic_load_explicit(&posted, memory_order_acquire);
        const uint64_t t0 = cgpu_now_ns();
        for (unsigned i = 1; p == seen; ++i) {
            if (0 == (i & 63) && cgpu_now_ns() - t0 > SPIN_NS) {
                break;
            }
            sched_yield();
            p = atomic_load_explicit(&posted, memory_order_acquire);
        }
        if (p == seen) {
            pthread_mutex_lock(&lock);
            while (!stopping && (p = atomic_load_explicit(&posted, memory_order_acquire)) == seen) {
                sleeping = true;
                pthread_cond_wait(&cv, &lock);
                sleeping = false;
            }
            const bool stop = stopping && p == seen;
            pthread_mutex_unlock(&lock);
            if (stop) {
                return NULL;
            }
        }
        task_fn(task_arg);
        seen = p;
        atomic_store_explicit(&done, p, memory_order_release);
    }
}

/* The thread, made at the first use; false if it cannot be (then never tried again). */
static bool ensure_thread(void)
{
    bool ok;
    pthread_mutex_lock(&lock);
    if (!started && !failed) {
        stopping = false;
        if (0 == pthread_create(&thread, NULL, helper_main, NULL)) {
            started = true;
        } else {
            failed = true;
            cgpu_log(CGPU_LOG_INFO, "engine: the helper thread could not be started; the "
                                    "calling thread reduces alone");
        }
    }
    ok = started;
    pthread_mutex_unlock(&lock);
    return ok;
}

bool cgpu_helper_start(cgpu_helper_fn_t fn, void *arg)
{
    if (!cgpu_engine_config()->stage_reduce_helper ||
        atomic_exchange_explicit(&busy, true, memory_order_acquire)) {
        return false;
    }
    if (!ensure_thread()) {
        atomic_store_explicit(&busy, false, memory_order_release);
        return false;
    }
    task_fn = fn;
    task_arg = arg;
    atomic_fetch_add_explicit(&tasks, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&posted, 1, memory_order_release);
    pthread_mutex_lock(&lock);
    if (sleeping) {
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&lock);
    return true;
}

void cgpu_helper_join(void)
{
    const uint64_t want = atomic_load_explicit(&posted, memory_order_relaxed);
    for (unsigned i = 0; atomic_load_explicit(&done, memory_order_acquire) < want; ++i) {
        if (i < 256) {
            cgpu_cpu_relax();
        } else {
            sched_yield();
        }
    }
    atomic_store_explicit(&busy, false, memory_order_release);
}

unsigned long cgpu_helper_tasks(void)
{
    return atomic_load_explicit(&tasks, memory_order_relaxed);
}

void cgpu_helper_fini(void)
{
    pthread_mutex_lock(&lock);
    const bool join = started;
    stopping = true;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&lock);
    if (join) {
        pthread_join(thread, NULL);
    }
    pthread_mutex_lock(&lock);
    started = false;
    pthread_mutex_unlock(&lock);
}
