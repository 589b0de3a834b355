/*
 * coll/gpu engine: noticing that a peer process of a communicator died.
 *
 * The shared-memory waits (cgpu_conn.c) watch counters that a dead peer never bumps again,
 * and the watchdog cannot tell a dead peer from a slow one: a peer killed inside a
 * collective has "entered" it like everyone else. So a wait that has lasted a while asks,
 * every CGPU_LIVE_PERIOD_NS of waiting, whether every peer process still exists (one
 * kill(pid, 0) each), and every CGPU_LIVE_FULL_EVERY-th time also whether it is still the
 * same process (its /proc start time: ids are reused) and not a zombie that its parent has
 * not reaped yet (kill() still finds those). A peer found dead fails the communicator for
 * good (cgpu_comm_enter refuses every later call), naming the peer; a peer that left after
 * completing the collective in progress is no failure of it (see cgpu_liveness_look). On the
 * node-local part of a communicator across nodes, a peer whose call across nodes failed says
 * so in its segment (gave_up) with the rank it blames: waits on it fail at once and name that
 * rank, and its process leaving afterwards (its program ending after its own failed call) is
 * no death to report. A wait that gives up otherwise names the peer it waited for
 * (cgpu_liveness_blame, cgpu_comm_unanswered).
 *
 * Which peers are watched is settled at creation: a peer whose process id this process
 * does not see with the start time the peer read for itself (another pid namespace: a
 * container sharing /dev/shm; /proc not mounted) is not watched, since a kill() on its id
 * would ask about some other process. Slowness is never an error here; only a process
 * that is gone is.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_RAS
#include <stdlib.h>
#include <time.h>

#include "cgpu_comm_internal.h"
#include "cgpu_proc.h"

/* 5 ms of waiting between looks: a dead peer is found within a few of them, and a look
 * (one system call per peer, microseconds for a node's ranks) costs a wait that has already
 * lasted 5 ms well under 1 % of it */
#define CGPU_LIVE_PERIOD_NS (5u * 1000u * 1000u)
/* every 20th look (100 ms) reads /proc as well: zombies and reused ids */
#define CGPU_LIVE_FULL_EVERY 20u

void cgpu_liveness_setup(cgpu_comm_t *comm, const int32_t *pids, const uint64_t *starts)
{
    atomic_store(&comm->dead_rank, -1);
    comm->procs = calloc((size_t) comm->size, sizeof(*comm->procs));
    if (NULL == comm->procs) {
        return; /* no liveness check: the watchdog's timeout still applies */
    }
    int unwatched = 0;
    for (int p = 0; p < comm->size; ++p) {
        cgpu_peer_proc_t *pp = &comm->procs[p];
        pp->pid = pids[p];
        pp->start_time = starts[p];
        pp->watched =
            p != comm->rank && 0 != starts[p] && cgpu_proc_start_time((pid_t) pids[p]) == starts[p];
        unwatched += p != comm->rank && !pp->watched;
    }
    if (unwatched > 0) {
        cgpu_log(CGPU_LOG_INFO,
                 "engine: rank %d of %d cannot see %d peer process(es) of its communicator in "
                 "/proc (another pid namespace?); a death of those is found only by "
                 "coll_gpu_ras_timeout",
                 comm->rank, comm->size, unwatched);
    }
}

void cgpu_liveness_fini(cgpu_comm_t *comm)
{
    free(comm->procs);
    comm->procs = NULL;
}

static void found_dead(cgpu_comm_t *comm, int p)
{
    int none = -1;
    if (!atomic_compare_exchange_strong(&comm->dead_rank, &none, p)) {
        return; /* the first one found is the one reported */
    }
    const int shown = NULL != comm->report_ranks ? comm->report_ranks[p] : p;
    cgpu_log(CGPU_LOG_WARN,
             "RAS: rank %d (process %ld) of communicator %s died; %s #%llu fails on rank %d, "
             "and so does every later collective on this communicator (free it; the job "
             "cannot go on with that process)",
             shown, (long) comm->procs[p].pid, comm->ras.name, cgpu_ras_kind_name(comm->ras.kind),
             (unsigned long long) atomic_load(&comm->ras.cur_seq),
             NULL != comm->report_ranks ? comm->report_ranks[comm->rank] : comm->rank);
    atomic_store(&comm->ras.state, CGPU_RAS_FAILED);
}

/* Rank @p p as this communicator's reports name it. */
static int shown_rank(const cgpu_comm_t *comm, int p)
{
    return NULL != comm->report_ranks ? comm->report_ranks[p] : p;
}

/* Peer @p p gave up on the collective in progress (its call across nodes failed for good, and
 * it said so in its segment): it never completes this one, so the wait fails now, and the
 * rank it named is the one to blame, not @p p. */
static void found_gave_up(cgpu_comm_t *comm, int p, int32_t g)
{
    const int blamed = g > 0 ? (int) g - 1 : shown_rank(comm, p);
    cgpu_comm_note_unanswered(comm, blamed);
    cgpu_log(CGPU_LOG_INFO,
             "RAS: rank %d of communicator %s gave up on %s #%llu (blaming rank %d); so does "
             "rank %d",
             shown_rank(comm, p), comm->ras.name, cgpu_ras_kind_name(comm->ras.kind),
             (unsigned long long) atomic_load(&comm->ras.cur_seq), blamed,
             shown_rank(comm, comm->rank));
    atomic_store(&comm->ras.state, CGPU_RAS_FAILED);
}

bool cgpu_liveness_look(cgpu_comm_t *comm)
{
    if (-1 != atomic_load_explicit(&comm->dead_rank, memory_order_relaxed)) {
        return false;
    }
    if (NULL == comm->procs) {
        return true;
    }
    const bool full = 0 == ++comm->live_looks % CGPU_LIVE_FULL_EVERY;
    const uint64_t cur = comm->seq + 1; /* the collective this rank is in */
    int gave = -1;
    int32_t gave_g = 0;
    for (int p = 0; p < comm->size && NULL != comm->peer_segs; ++p) {
        const cgpu_peer_proc_t *pp = &comm->procs[p];
        /* a peer that completed this collective and then left (its last call done, the
         * program ending) fails nothing: what it sent lies in its receivers' segments, and
         * its own segment stays mapped here. Only one that left before completing it does;
         * a later collective finds it so, since it never completes that one */
        if (p == comm->rank ||
            atomic_load_explicit(&cgpu_ctrl(comm, p)->seq.v, memory_order_acquire) >= cur) {
            continue;
        }
        /* one that gave up first (its call failed on a peer it names) and may have left since
         * is no death: the one it names is the cause. A death found is named before it */
        const int32_t g = atomic_load_explicit(&cgpu_ctrl(comm, p)->gave_up, memory_order_acquire);
        if (0 != g) {
            if (gave < 0) {
                gave = p;
                gave_g = g;
            }
            continue;
        }
        if (pp->watched &&
            CGPU_PROC_GONE == cgpu_proc_check((pid_t) pp->pid, pp->start_time, full)) {
            found_dead(comm, p);
            return false;
        }
    }
    if (gave >= 0) {
        found_gave_up(comm, gave, gave_g);
        return false;
    }
    return true;
}

void cgpu_comm_note_unanswered(cgpu_comm_t *comm, int peer)
{
    int none = 0;
    if (peer >= 0) {
        atomic_compare_exchange_strong(&comm->unanswered, &none, peer + 1);
    }
}

void cgpu_liveness_blame(cgpu_comm_t *comm, int peer)
{
    if (peer < 0 || peer >= comm->size || peer == comm->rank || NULL == comm->peer_segs ||
        comm->resources_freed || -1 != atomic_load(&comm->dead_rank) ||
        0 != atomic_load(&comm->unanswered)) {
        return; /* nobody to name, or a death or a rank is named already */
    }
    const cgpu_seg_ctrl_t *pc = cgpu_ctrl(comm, peer);
    int32_t g = atomic_load_explicit(&pc->gave_up, memory_order_acquire);
    if (0 == g && NULL != comm->report_ranks && NULL != comm->procs) {
        /* the node-local part of a communicator across nodes, stopped by the watchdog while
         * waiting on a node-mate: that one is most likely stuck in a wait across nodes on the
         * same timeout and says whom it waited for once its own wait gives up (the proxy's
         * cancel grace, a quarter of the timeout, later). Wait that long for its word, not
         * longer: a peer that never says is named itself */
        const double t = cgpu_engine_config()->ras_timeout_s;
        const uint64_t until = cgpu_now_ns() + (uint64_t) ((t / 4 + 0.25) * 1e9);
        const cgpu_peer_proc_t *pp = &comm->procs[peer];
        while (0 == (g = atomic_load_explicit(&pc->gave_up, memory_order_acquire)) &&
               cgpu_now_ns() < until &&
               !(pp->watched &&
                 CGPU_PROC_GONE == cgpu_proc_check((pid_t) pp->pid, pp->start_time, true))) {
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    cgpu_comm_note_unanswered(comm, g > 0 ? (int) g - 1 : shown_rank(comm, peer));
}

int cgpu_comm_unanswered(const cgpu_comm_t *comm)
{
    if (NULL == comm) {
        return -1;
    }
    const int u = atomic_load(&((cgpu_comm_t *) comm)->unanswered) - 1; /* atomics only */
    if (u >= 0) {
        return u;
    }
    /* across nodes: a node-local wait that gave up names a rank of this communicator */
    return NULL != comm->net ? cgpu_net_unanswered(comm) : -1;
}

bool cgpu_liveness_due(uint64_t *next_ns)
{
    const uint64_t now = cgpu_now_ns();
    if (0 == *next_ns) {
        /* the wait's first question: the first look one period from now, so that waits
         * shorter than that never pay for one */
        *next_ns = now + CGPU_LIVE_PERIOD_NS;
        return false;
    }
    if (now < *next_ns) {
        return false;
    }
    *next_ns = now + CGPU_LIVE_PERIOD_NS;
    return true;
}

int cgpu_comm_dead_peer(const cgpu_comm_t *comm, long *pid)
{
    if (NULL == comm) {
        return -1;
    }
    cgpu_comm_t *c = (cgpu_comm_t *) comm; /* atomics only */
    int p = atomic_load(&c->dead_rank);
    if (p >= 0) {
        if (NULL != pid) {
            *pid = NULL != c->procs ? (long) c->procs[p].pid : 0;
        }
        return NULL != c->report_ranks ? c->report_ranks[p] : p;
    }
    /* across nodes: a death on this node is found by the node-local communicator, whose
     * report_ranks are ranks of this one */
    return NULL != c->net ? cgpu_net_dead_peer(c, pid) : -1;
}

cgpu_status_t cgpu_comm_wait_failed(const cgpu_comm_t *comm)
{
    return -1 != atomic_load(&((cgpu_comm_t *) comm)->dead_rank) ? CGPU_ERR_PEER_DEAD
                                                                 : CGPU_ERR_TIMEOUT;
}
