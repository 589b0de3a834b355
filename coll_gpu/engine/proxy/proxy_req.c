/*
 * coll/gpu engine, inter-node proxy: the application's side of a request.
 *
 * An application thread checks and fills in a request (cgpu_proxy_isend/irecv), reserves
 * its peer, and hands it to the progress thread's queue; it then reads the request's state
 * with atomic loads (cgpu_proxy_test) or waits for several (cgpu_proxy_waitall), which on a
 * timeout or an abort marks them PROXY_CANCEL_REQUESTED and lets the thread cancel them.
 * cgpu_proxy_req_end is the progress thread's last touch of a request.
 *
 * Profiler. A request's CGPU_PROF_EVENT_PROXY_V1 event is started by the submitting thread
 * in the group's own context and stopped by the thread that sees the request complete
 * (cgpu_proxy_test/waitall, the application's), so the plugin is only ever called from
 * the communicator's threads and with the communicator's context; the progress thread
 * never calls it.
 */
#include "cgpu_config.h"

#include <sched.h>

#include "cgpu_cuda.h"
#include "proxy_internal.h"

/* Requests submitted and not yet ended, and requests ended, since the proxy started. */
atomic_uint_fast64_t cgpu_proxy_nqueued;
atomic_uint_fast64_t cgpu_proxy_ncompleted;

uint64_t cgpu_proxy_queue_depth(void)
{
    return atomic_load_explicit(&cgpu_proxy_nqueued, memory_order_relaxed);
}

uint64_t cgpu_proxy_ops_completed(void)
{
    return atomic_load_explicit(&cgpu_proxy_ncompleted, memory_order_relaxed);
}

/* End the application's view of a request (the thread may keep the op if abandoned). */
void cgpu_proxy_req_end(cgpu_proxy_req_t *r, cgpu_status_t st)
{
    cgpu_proxy_group_t *g = r->group;
    r->priv = NULL;
    atomic_fetch_sub_explicit(&cgpu_proxy_nqueued, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&cgpu_proxy_ncompleted, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&g->inflight, 1, memory_order_release);
    /* last touch: after this store the request belongs to its owner again */
    atomic_store_explicit(&r->state, (int) st, memory_order_release);
}

static cgpu_status_t proxy_submit(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                                  uint32_t tag, cgpu_proxy_req_t *req, int kind)
{
    cgpu_status_t st;

    if (NULL == req) {
        return CGPU_ERR_INVALID_ARG;
    }
    if (NULL == g || peer < 0 || peer >= g->size || peer == g->rank || (bytes > 0 && NULL == buf)) {
        cgpu_log(CGPU_LOG_WARN, "proxy: %s to/from rank %d refused: invalid arguments",
                 cgpu_proxy_kind_name(kind), peer);
        return CGPU_ERR_INVALID_ARG;
    }
    if (!atomic_load(&cgpu_proxy.up) || 0 != atomic_load(&g->destroying)) {
        return CGPU_ERR_STATE;
    }
    if (tag > cgpu_proxy_max_tag()) {
        cgpu_log(CGPU_LOG_WARN, "proxy: %s with tag %u refused: provider %s carries tags up to %u",
                 cgpu_proxy_kind_name(kind), tag, cgpu_proxy.provider, cgpu_proxy_max_tag());
        return CGPU_ERR_INVALID_ARG;
    }
    st = cgpu_proxy_peer_reserve(g, peer);
    if (CGPU_OK != st) {
        return st;
    }
    if (bytes > 0) {
        int dev = -1;
        cgpu_mem_kind_t mk = cgpu_cuda_mem_kind(buf, &dev);
        if (CGPU_MEM_HOST != mk) {
            kind |= cgpu_proxy.hmem ? PROXY_DEVICE | ((dev + 1) << PROXY_DEV_SHIFT)
                                    : PROXY_STAGED | PROXY_CUDA_COPY;
        } else if (0 != (cgpu_proxy.flags & CGPU_PROXY_TEST_STAGE_HOST)) {
            kind |= PROXY_STAGED;
        }
    }
    req->next = NULL;
    req->group = g;
    req->peer = peer;
    req->kind = kind;
    req->buf = buf;
    req->bytes = bytes;
    req->tag = tag;
    req->posted_ns = cgpu_proxy_now_ns();
    req->priv = NULL;
    req->ev.on = false;
    if (NULL != g->prof) {
        cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_PROXY_V1,
                                   .parent = g->prof->coll_on ? g->prof->coll : NULL};
        ev.u.proxy = (cgpu_prof_proxy_v1_t){
            .what = cgpu_proxy_kind_name(kind), .peer = peer, .bytes = bytes};
        cgpu_prof_start(g->prof, &ev, &req->ev);
    }
    atomic_store_explicit(&req->state, CGPU_IN_PROGRESS, memory_order_relaxed);
    atomic_fetch_add_explicit(&cgpu_proxy_nqueued, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g->inflight, 1, memory_order_relaxed);

    cgpu_proxy_enqueue(req);
    return CGPU_OK;
}

cgpu_status_t cgpu_proxy_isend(cgpu_proxy_group_t *g, int peer, const void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    return proxy_submit(g, peer, (void *) buf, bytes, tag, req, PROXY_KIND_SEND);
}

cgpu_status_t cgpu_proxy_irecv(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req)
{
    return proxy_submit(g, peer, buf, bytes, tag, req, PROXY_KIND_RECV);
}

cgpu_status_t cgpu_proxy_test(cgpu_proxy_req_t *req)
{
    const int s = atomic_load_explicit(&req->state, memory_order_acquire);
    if (CGPU_IN_PROGRESS == s || PROXY_CANCEL_REQUESTED == s) {
        return CGPU_IN_PROGRESS;
    }
    if (req->ev.on) { /* the completing thread ends the event, in the group's context */
        cgpu_prof_stop(&req->ev);
        req->ev.on = false;
    }
    return (cgpu_status_t) s;
}

/* waitall, with the messages about requests it stops unless @p quiet */
static cgpu_status_t wait_all(cgpu_proxy_req_t *reqs, int n, double timeout_s,
                              const _Atomic int *abort, bool quiet)
{
    const uint64_t start = cgpu_proxy_now_ns();
    const uint64_t limit = timeout_s > 0 ? (uint64_t) (timeout_s * 1e9) : 0;
    bool stopped = false, aborted = false;
    unsigned spins = 0;

    for (;;) {
        bool all = true;
        for (int i = 0; i < n; ++i) {
            all = CGPU_IN_PROGRESS != cgpu_proxy_test(&reqs[i]) && all;
        }
        if (all) {
            break;
        }
        if (!stopped) {
            aborted = NULL != abort && 0 != atomic_load_explicit(abort, memory_order_relaxed);
            const uint64_t waited = cgpu_proxy_now_ns() - start;
            if (aborted || (limit > 0 && waited > limit)) {
                stopped = true;
                int told = 0, more = 0;
                for (int i = 0; i < n; ++i) {
                    int expect = CGPU_IN_PROGRESS;
                    if (!atomic_compare_exchange_strong(&reqs[i].state, &expect,
                                                        PROXY_CANCEL_REQUESTED)) {
                        continue;
                    }
                    if (quiet || told++ >= 8) {
                        ++more;
                        continue;
                    }
                    const cgpu_proxy_req_t *r = &reqs[i];
                    if (aborted) {
                        cgpu_log(CGPU_LOG_WARN,
                                 "proxy: %s of %zu bytes %s rank %d of group %u stopped by an "
                                 "abort after %.1f s",
                                 cgpu_proxy_kind_name(r->kind), r->bytes,
                                 cgpu_proxy_kind_dir(r->kind), r->peer, r->group->context_id,
                                 (double) waited / 1e9);
                    } else {
                        cgpu_log(CGPU_LOG_WARN,
                                 "proxy: %s of %zu bytes %s rank %d of group %u did not complete "
                                 "within %.1f s (peer unreachable or dead)",
                                 cgpu_proxy_kind_name(r->kind), r->bytes,
                                 cgpu_proxy_kind_dir(r->kind), r->peer, r->group->context_id,
                                 timeout_s);
                    }
                }
                if (!quiet && more > 0) {
                    cgpu_log(CGPU_LOG_WARN, "proxy: ... and %d more operation(s) of that wait",
                             more);
                }
                atomic_fetch_add(&cgpu_proxy.cancel_gen, 1);
                cgpu_proxy_wake();
            }
        }
        cgpu_progress_poll(++spins, 100); /* a peer may wait in MPI for us */
        if (spins < 100) {
            cgpu_cpu_relax();
        } else if (spins < 2000) {
            sched_yield();
        } else {
            cgpu_proxy_nap_ns(20000);
        }
    }
    if (stopped) {
        return CGPU_ERR_TIMEOUT;
    }
    for (int i = 0; i < n; ++i) {
        const int s = atomic_load_explicit(&reqs[i].state, memory_order_relaxed);
        if (CGPU_OK != s) {
            return (cgpu_status_t) s;
        }
    }
    return CGPU_OK;
}

cgpu_status_t cgpu_proxy_waitall(cgpu_proxy_req_t *reqs, int n, double timeout_s,
                                 const _Atomic int *abort)
{
    return wait_all(reqs, n, timeout_s, abort, false);
}

cgpu_status_t cgpu_proxy_waitall_quiet(cgpu_proxy_req_t *reqs, int n, double timeout_s)
{
    return wait_all(reqs, n, timeout_s, NULL, true);
}
