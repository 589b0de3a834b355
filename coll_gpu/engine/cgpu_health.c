/*
 * coll/gpu engine: what the watchdog reports about a stalled communicator.
 *
 * The watchdog (ras/) wakes on its own thread and calls cgpu_health_scan; this file knows
 * the communicator's insides: the collective in progress, when it last progressed, and which
 * peers have not entered it (each rank publishes the collective it entered in its shared
 * segment). A collective is reported once. With coll_gpu_ras_abort_on_timeout (or on a
 * communicator that spans nodes) it also sets the communicator's abort flag: its waits give
 * up and the collective returns an error instead of hanging.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_RAS
#include <stdio.h>

#include "cgpu_comm_internal.h"
#include "cgpu_seg_pool.h"

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
    cgpu_ras_watchdog_fired();

    char missing[256] = "";
    size_t len = 0;
    int nmiss = 0;
    for (int p = 0; p < c->size && NULL != c->peer_segs && !c->resources_freed; ++p) {
        if (p != c->rank &&
            atomic_load_explicit(&cgpu_ctrl(c, p)->call.entered, memory_order_acquire) < cur) {
            ++nmiss;
            if (len + 16 < sizeof(missing)) {
                len += (size_t) snprintf(missing + len, sizeof(missing) - len, "%s%d",
                                         nmiss > 1 ? ", " : "",
                                         NULL != c->report_ranks ? c->report_ranks[p] : p);
            }
        }
    }
    /* the peer this rank's wait needs: one that entered and stalls inside the call (a
     * stopped or starved process) is "arrived", so the count alone would blame nobody */
    char waiting[48] = "";
    const int w = atomic_load_explicit(&r->waiting_on, memory_order_relaxed);
    if (w >= 0 && w < c->size) {
        snprintf(waiting, sizeof(waiting), "; waiting on rank %d",
                 NULL != c->report_ranks ? c->report_ranks[w] : w);
    }
    const bool abort_it = cfg->ras_abort_on_timeout || c->abort_on_timeout;
    cgpu_log(CGPU_LOG_WARN,
             "RAS: %s #%llu on communicator %s (rank %d of %d) has made no progress for %.1f s; "
             "%d rank(s) not arrived%s%s%s%s",
             cgpu_ras_kind_name(r->kind), (unsigned long long) cur, r->name, c->rank, c->size,
             (double) (now - last) / 1e9, nmiss, nmiss > 0 ? ": " : "", missing, waiting,
             abort_it ? (cfg->ras_abort_on_timeout ? "; failing it (coll_gpu_ras_abort_on_timeout)"
                                                   : "; failing it (it spans nodes)")
                      : "; still waiting (set coll_gpu_ras_abort_on_timeout=1 to fail instead)");
    if (abort_it) {
        atomic_store(&r->abort, 1);
    }
}

void cgpu_health_scan(uint64_t now_ns, void *arg)
{
    (void) arg;
    cgpu_engine_for_each_comm(check_comm, &now_ns);
}

uint64_t cgpu_engine_watchdog_firings(void)
{
    return cgpu_ras_watchdog_firings();
}

int cgpu_engine_shm_segments(void)
{
    return cgpu_shm_mapped_count();
}

uint64_t cgpu_engine_shm_reuses(void)
{
    return cgpu_seg_pool_reuses();
}

int cgpu_engine_shm_kept(void)
{
    return cgpu_seg_pool_kept();
}
