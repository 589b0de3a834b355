/*
 * coll/gpu engine, inter-node proxy: the progress thread and its submission queue.
 *
 * Application threads append requests to the submission queue under sub_lock; the thread
 * moves them to its own pending list, schedules them (proxy_sched.c), advances the
 * operations in progress and reads completions (proxy_op.c). It spins while work is in
 * flight, then yields, then naps; idle, it still progresses the provider for a while (a
 * peer may be owed an acknowledgement), then sleeps on sub_cond until a submission, a
 * cancel or the stop wakes it. At the stop it drains: pending requests end, started ones
 * are cancelled and waited for (abandoned after the grace period), and everything is closed
 * (proxy_endpoint.c).
 */
#include "cgpu_config.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "proxy_internal.h"

enum {
    PROXY_IDLE_WAIT_MS = 20, /* an idle thread still progresses the provider this often */
};
static const uint64_t proxy_idle_poll_ns = 5000000ull;    /* polling after the last op */
static const uint64_t proxy_slow_poll_ns = 1000000000ull; /* waiting this long: 1 ms naps */

/* The submission queue (cgpu_proxy.sub_*) and the thread's sleep. */
static pthread_mutex_t sub_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sub_cond = PTHREAD_COND_INITIALIZER;

/* Wake the progress thread if it sleeps. */
void cgpu_proxy_wake(void)
{
    pthread_mutex_lock(&sub_lock);
    if (cgpu_proxy.sleeping) {
        pthread_cond_signal(&sub_cond);
    }
    pthread_mutex_unlock(&sub_lock);
}

/* Stop: pending requests end with CGPU_ERR_STATE, started ones are cancelled and waited for
 * (abandoned after the grace period). */
static void proxy_drain(void)
{
    for (cgpu_proxy_req_t *r = cgpu_proxy.pend_head, *next; NULL != r; r = next) {
        next = r->next;
        r->next = NULL;
        cgpu_proxy_req_end(r, CGPU_ERR_STATE);
    }
    cgpu_proxy.pend_head = cgpu_proxy.pend_tail = NULL;
    bool any = false;
    for (int i = 0; i < cgpu_proxy.nops; ++i) {
        if (cgpu_proxy.ops[i]->in_use) {
            any = true;
            cgpu_proxy_op_cancel(cgpu_proxy.ops[i], CGPU_ERR_STATE);
        }
    }
    if (any) {
        cgpu_log(CGPU_LOG_WARN, "proxy: stopping with operations in flight; they are cancelled");
    }
    const uint64_t until = cgpu_proxy_now_ns() + cgpu_proxy_cancel_grace_ns;
    while (any && cgpu_proxy_now_ns() < until) {
        any = false;
        (void) cgpu_proxy_poll();
        for (int i = 0; i < cgpu_proxy.nops; ++i) {
            if (cgpu_proxy.ops[i]->in_use) {
                (void) cgpu_proxy_op_advance(cgpu_proxy.ops[i]);
                any = any || cgpu_proxy.ops[i]->in_use;
            }
        }
        if (any) {
            cgpu_proxy_nap_ns(100000);
        }
    }
    for (int i = 0; i < cgpu_proxy.nops; ++i) {
        if (cgpu_proxy.ops[i]->in_use) {
            if (NULL != cgpu_proxy.ops[i]->req) {
                cgpu_proxy_req_end(cgpu_proxy.ops[i]->req, CGPU_ERR_STATE);
            }
            cgpu_proxy_op_release(cgpu_proxy.ops[i]);
        }
    }
}

static void *proxy_main(void *arg)
{
    (void) arg;
    cgpu_thread_set_worker(true); /* never calls MPI: no bootstrap, no MPI progress */
    cgpu_status_t st = cgpu_proxy_setup();

    pthread_mutex_lock(&sub_lock);
    cgpu_proxy.setup_st = st;
    cgpu_proxy.setup_done = true;
    pthread_cond_broadcast(&sub_cond);
    pthread_mutex_unlock(&sub_lock);
    if (CGPU_OK != st) {
        cgpu_proxy_teardown();
        return NULL;
    }

    unsigned seen_gen = atomic_load(&cgpu_proxy.cancel_gen);
    unsigned spins = 0;
    uint64_t last_did = cgpu_proxy_now_ns();
    for (;;) {
        bool did = false;

        pthread_mutex_lock(&sub_lock);
        if (cgpu_proxy.stop) {
            pthread_mutex_unlock(&sub_lock);
            break;
        }
        if (NULL != cgpu_proxy.sub_head) {
            if (NULL == cgpu_proxy.pend_tail) {
                cgpu_proxy.pend_head = cgpu_proxy.sub_head;
            } else {
                cgpu_proxy.pend_tail->next = cgpu_proxy.sub_head;
            }
            cgpu_proxy.pend_tail = cgpu_proxy.sub_tail;
            cgpu_proxy.sub_head = cgpu_proxy.sub_tail = NULL;
            did = true;
        }
        pthread_mutex_unlock(&sub_lock);

        const unsigned gen = atomic_load(&cgpu_proxy.cancel_gen);
        if (gen != seen_gen) {
            seen_gen = gen;
            cgpu_proxy_scan_cancels();
            did = true;
        }
        if (NULL != cgpu_proxy.pend_head) {
            did = cgpu_proxy_schedule() || did;
        }
        int nactive = 0;
        for (int i = 0; i < cgpu_proxy.nops; ++i) {
            if (cgpu_proxy.ops[i]->in_use) {
                did = cgpu_proxy_op_advance(cgpu_proxy.ops[i]) || did;
                nactive += cgpu_proxy.ops[i]->in_use ? 1 : 0;
            }
        }
        did = cgpu_proxy_poll() > 0 || did;

        if (did) {
            spins = 0;
            last_did = cgpu_proxy_now_ns();
            continue;
        }
        const uint64_t idle = cgpu_proxy_now_ns() - last_did;
        if (nactive > 0 || NULL != cgpu_proxy.pend_head) {
            if (++spins < 64) {
                continue;
            } else if (spins < 2000) {
                sched_yield();
            } else {
                cgpu_proxy_nap_ns(idle > proxy_slow_poll_ns ? 1000000 : 20000);
            }
        } else if (idle < proxy_idle_poll_ns) {
            /* the provider may still owe a peer something (an acknowledgement) */
            cgpu_proxy_nap_ns(50000);
        } else {
            pthread_mutex_lock(&sub_lock);
            if (NULL == cgpu_proxy.sub_head && !cgpu_proxy.stop &&
                gen == atomic_load(&cgpu_proxy.cancel_gen)) {
                const struct timespec until =
                    cgpu_deadline_after_ns((uint64_t) PROXY_IDLE_WAIT_MS * 1000000ull);
                cgpu_proxy.sleeping = true;
                pthread_cond_timedwait(&sub_cond, &sub_lock, &until);
                cgpu_proxy.sleeping = false;
            }
            pthread_mutex_unlock(&sub_lock);
        }
    }
    proxy_drain();
    cgpu_proxy_teardown();
    return NULL;
}

cgpu_status_t cgpu_proxy_thread_start(void)
{
    int rc = pthread_create(&cgpu_proxy.thread, NULL, proxy_main, NULL);
    if (0 != rc) {
        cgpu_log(CGPU_LOG_WARN, "proxy: cannot start the progress thread: %s", strerror(rc));
        return CGPU_ERR_SYSTEM;
    }
    pthread_mutex_lock(&sub_lock);
    while (!cgpu_proxy.setup_done) {
        pthread_cond_wait(&sub_cond, &sub_lock);
    }
    cgpu_status_t st = cgpu_proxy.setup_st;
    pthread_mutex_unlock(&sub_lock);
    if (CGPU_OK != st) {
        pthread_join(cgpu_proxy.thread, NULL);
    }
    return st;
}

void cgpu_proxy_thread_stop(void)
{
    pthread_mutex_lock(&sub_lock);
    cgpu_proxy.stop = true;
    pthread_cond_broadcast(&sub_cond);
    pthread_mutex_unlock(&sub_lock);
    pthread_join(cgpu_proxy.thread, NULL);
}

void cgpu_proxy_enqueue(cgpu_proxy_req_t *req)
{
    pthread_mutex_lock(&sub_lock);
    if (NULL == cgpu_proxy.sub_tail) {
        cgpu_proxy.sub_head = req;
    } else {
        cgpu_proxy.sub_tail->next = req;
    }
    cgpu_proxy.sub_tail = req;
    if (cgpu_proxy.sleeping) {
        pthread_cond_signal(&sub_cond);
    }
    pthread_mutex_unlock(&sub_lock);
}
