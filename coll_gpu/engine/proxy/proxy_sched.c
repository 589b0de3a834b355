/*
 * coll/gpu engine, inter-node proxy: which pending request starts when (progress thread).
 *
 * Bounds. At most proxy_max_inflight chunks are in progress at once (half for sends, half
 * for receives: receives waiting for a peer cannot starve this process's sends, which the
 * peer's receives need); the rest wait in the queue in submission order. One exception, so
 * that communicators never wait on each other: a group with nothing of a direction in
 * progress may always start one operation of that direction, past the window and, when
 * staged, with bounce buffers of its own if the pool is taken; and a group's only operation
 * of a direction may always move one chunk at a time (proxy_op.c). Without it, threads of
 * two communicators that submit in different orders on two processes could fill one
 * process's window with one group's operations and the other's with the other group's, each
 * waiting for what the other's window holds back, until the timeout. So the operations in
 * progress are at most the window plus one per group and direction. Bounce buffers come
 * from a small pool per direction (proxy_bounce.c). Peers are capped by proxy_max_peers
 * (proxy_group.c).
 *
 * Cancels asked by the application (a wait's timeout or abort) or by a group being
 * destroyed are acted on here too: a pending request ends at once, a started one is
 * cancelled (proxy_op.c).
 */
#include "cgpu_config.h"

#include "proxy_internal.h"

enum {
    PROXY_KEYS_WINDOW = 128, /* pending requests one scheduling pass looks at, at most */
};

static bool same_key(const cgpu_proxy_req_t *a, const cgpu_proxy_req_t *b)
{
    return a->group == b->group && a->peer == b->peer && a->tag == b->tag &&
           cgpu_proxy_req_kind(a) == cgpu_proxy_req_kind(b);
}

/* Take @p r (preceded by @p prev, NULL at the head) out of the pending list. */
static void pend_unlink(cgpu_proxy_req_t *prev, cgpu_proxy_req_t *r)
{
    if (NULL == prev) {
        cgpu_proxy.pend_head = r->next;
    } else {
        prev->next = r->next;
    }
    if (cgpu_proxy.pend_tail == r) {
        cgpu_proxy.pend_tail = prev;
    }
    r->next = NULL;
}

/*
 * Start what the caps allow from the pending list; returns true if anything changed.
 * Each direction starts in submission order: once one request of a direction waits for
 * room, the later ones of that direction wait too, except the first request of a group
 * that has nothing of that direction in progress, which starts anyway (with a bounce pair
 * of its own when staged and the pool is taken): see "Bounds" above. Within a group a
 * waiting request holds back the later ones of its direction. A request also waits while
 * one with the same group, peer, tag and direction is in progress (or waits before it),
 * and a staged one while no bounce pair is free.
 */
bool cgpu_proxy_schedule(void)
{
    static unsigned pass;
    const cgpu_proxy_req_t *skipped[PROXY_KEYS_WINDOW];
    int nskipped = 0;
    bool blocked[2] = {false, false}, stage_blocked[2] = {false, false};
    bool did = false;
    cgpu_proxy_req_t *prev = NULL, *r = cgpu_proxy.pend_head;

    if (0 == ++pass) {
        pass = 1; /* 0 is every group's initial mark */
    }
    for (; NULL != r && nskipped < PROXY_KEYS_WINDOW;) {
        cgpu_proxy_req_t *next = r->next;
        const int k = cgpu_proxy_req_kind(r);
        cgpu_proxy_group_t *g = r->group;
        const int state = atomic_load_explicit(&r->state, memory_order_relaxed);
        const bool destroying = 0 != atomic_load_explicit(&g->destroying, memory_order_relaxed);
        const bool held = pass == g->waiting_pass[k]; /* an earlier one of its group waits */
        const bool own_turn = !held && 0 == g->active[k];
        enum { WAIT, WAIT_BLOCKED, START, END } action = START;
        cgpu_status_t end_st = CGPU_OK;
        proxy_pair_t *pair = NULL;

        if (PROXY_CANCEL_REQUESTED == state || destroying) {
            action = END;
            end_st = destroying ? CGPU_ERR_STATE : CGPU_ERR_TIMEOUT;
        } else if (held || (!own_turn && (blocked[k] || cgpu_proxy.active[k] >= cgpu_proxy.cap[k] ||
                                          cgpu_proxy.busy[k] >= cgpu_proxy.cap[k]))) {
            blocked[k] = true;
            action = WAIT_BLOCKED;
        } else {
            for (int i = 0; i < nskipped && START == action; ++i) {
                action = same_key(skipped[i], r) ? WAIT : START;
            }
            for (int i = 0; i < cgpu_proxy.nops && START == action; ++i) {
                if (cgpu_proxy.ops[i]->in_use && NULL != cgpu_proxy.ops[i]->req &&
                    same_key(cgpu_proxy.ops[i]->req, r)) {
                    action = WAIT;
                }
            }
            if (START == action && 0 != (r->kind & PROXY_STAGED)) {
                if (0 == cgpu_proxy.npairs[k] && CGPU_OK != (end_st = cgpu_proxy_pairs_alloc(k))) {
                    action = END;
                } else if (!stage_blocked[k] && NULL != (pair = cgpu_proxy_pair_get(k))) {
                    /* from the pool */
                } else if (own_turn && NULL != (pair = cgpu_proxy_pair_temp(r->bytes))) {
                    /* the pool is taken (by other groups, maybe waiting on us): its own */
                } else {
                    stage_blocked[k] = stage_blocked[k] || !own_turn;
                    action = WAIT;
                }
            }
        }
        if (WAIT_BLOCKED == action) {
            g->waiting_pass[k] = pass; /* its group's later requests of the direction wait */
            prev = r; /* later requests of this direction wait too: no key to remember */
        } else if (WAIT == action) {
            skipped[nskipped++] = r;
            prev = r;
        } else {
            pend_unlink(prev, r);
            did = true;
            if (END == action) {
                cgpu_proxy_req_end(r, end_st);
            } else {
                (void) cgpu_proxy_op_start(r, pair);
            }
        }
        r = next;
    }
    return did;
}

/* Cancel requested by waitall (timeout, abort) or by a group being destroyed. */
void cgpu_proxy_scan_cancels(void)
{
    for (cgpu_proxy_req_t *prev = NULL, *r = cgpu_proxy.pend_head, *next; NULL != r; r = next) {
        next = r->next;
        const bool destroying =
            0 != atomic_load_explicit(&r->group->destroying, memory_order_relaxed);
        if (!destroying &&
            PROXY_CANCEL_REQUESTED != atomic_load_explicit(&r->state, memory_order_relaxed)) {
            prev = r;
            continue;
        }
        pend_unlink(prev, r);
        cgpu_proxy_req_end(r, destroying ? CGPU_ERR_STATE : CGPU_ERR_TIMEOUT);
    }
    for (int i = 0; i < cgpu_proxy.nops; ++i) {
        proxy_op_t *op = cgpu_proxy.ops[i];
        if (!op->in_use || NULL == op->req || op->cancelling) {
            continue;
        }
        if (0 != atomic_load_explicit(&op->group->destroying, memory_order_relaxed)) {
            cgpu_proxy_op_cancel(op, CGPU_ERR_STATE);
        } else if (PROXY_CANCEL_REQUESTED ==
                   atomic_load_explicit(&op->req->state, memory_order_relaxed)) {
            cgpu_proxy_op_cancel(op, CGPU_ERR_TIMEOUT);
        }
    }
}
