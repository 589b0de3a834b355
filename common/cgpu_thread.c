/*
 * coll/gpu base: thread roles and the progress hook.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>

#include "cgpu_thread.h"

static _Atomic(cgpu_progress_fn_t) progress_fn;
static atomic_int progress_on;
static __thread bool is_worker;

void cgpu_progress_setup(cgpu_progress_fn_t fn, bool on)
{
    atomic_store(&progress_fn, fn);
    atomic_store(&progress_on, on ? 1 : 0);
}

void cgpu_progress(void)
{
    static __thread bool inside; /* the progress function may finish requests that wait */
    cgpu_progress_fn_t fn = atomic_load_explicit(&progress_fn, memory_order_relaxed);
    if (NULL == fn || is_worker || inside ||
        0 == atomic_load_explicit(&progress_on, memory_order_relaxed)) {
        return;
    }
    inside = true;
    fn();
    inside = false;
}

void cgpu_thread_set_worker(bool worker)
{
    is_worker = worker;
}

bool cgpu_thread_may_call_mpi(void)
{
    return !is_worker;
}

bool cgpu_thread_one_cpu(void)
{
    static __thread int known; /* 0: not asked yet, 1: one CPU, 2: more */
    if (0 == known) {
        cpu_set_t set;
        CPU_ZERO(&set);
        known = 0 == sched_getaffinity(0, sizeof(set), &set) && 1 == CPU_COUNT(&set) ? 1 : 2;
    }
    return 1 == known;
}

bool cgpu_thread_worker_shares_cpu(void)
{
    return is_worker && cgpu_thread_one_cpu();
}
