/*
 * coll/gpu engine: creating and releasing internal communicators.
 *
 * Creation is collective and ends in agreement: every rank returns the same status,
 * because the glue turns a failure into "fallback for this communicator from now on"
 * and ranks that disagreed on that would wait on different protocols (decision 2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgpu_clock.h"
#include "cgpu_comm_internal.h"
#include "cgpu_conn.h"
#include "cgpu_path.h"
#include "cgpu_proc.h"
#include "cgpu_cuda_comm.h"
#include "cgpu_seg_pool.h"

#define CGPU_HOST_MAX 64
#define CGPU_BOOT_ID_MAX 40

/* What each rank tells the others at creation. Fixed size, no pointers. */
typedef struct cgpu_peer_info {
    char host[CGPU_HOST_MAX];
    char boot_id[CGPU_BOOT_ID_MAX];
    int32_t pid;
    int32_t status;  /* this rank's local result so far */
    int32_t cuda_ok; /* this process can run the cuda backend */
    int32_t device;
    cgpu_cuda_dev_rec_t dev; /* its device's bus id and MPS answer (ranks sharing a GPU) */
    uint64_t slot_bytes;
    uint64_t nslots;
    uint64_t stage_bytes;
    uint64_t direct_min;   /* coll_gpu_stage_direct_min_bytes (rank 0's counts) */
    uint64_t shared_stage; /* coll_gpu_shared_stage_bytes (rank 0's counts) */
    uint64_t start_time;   /* of this process, as /proc says (liveness; 0: unknown) */
    int32_t check_calls;   /* coll_gpu_check_calls on this rank */
    int32_t pad;
} cgpu_peer_info_t;

/* What each rank tells the others once it has tried to create its segment. */
typedef struct cgpu_seg_msg {
    int32_t status;
    int32_t pooled; /* the name is of a pooled segment: no longer in /dev/shm, every peer
                     * maps it already (cgpu_seg_pool.h) */
    char name[CGPU_SHM_NAME_MAX]; /* empty unless status is OK */
} cgpu_seg_msg_t;

static void read_node_identity(cgpu_peer_info_t *me, int rank)
{
    if (0 != gethostname(me->host, sizeof(me->host))) {
        snprintf(me->host, sizeof(me->host), "unknown");
    }
    me->host[sizeof(me->host) - 1] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (NULL != f) {
        if (NULL == fgets(me->boot_id, sizeof(me->boot_id), f)) {
            me->boot_id[0] = '\0';
        }
        fclose(f);
    }
    const cgpu_config_t *cfg = cgpu_engine_config();
    if (cfg->force_node_per_rank) {
        /* Tests of the inter-node paths on one machine: one fake node per rank. */
        snprintf(me->host, sizeof(me->host), "fake-node-%d", rank);
    } else if (cfg->fake_node >= 0) {
        /* coll_gpu_fake_nodes: this process's node, chosen by the glue from its world rank */
        snprintf(me->host, sizeof(me->host), "fake-node-%d", cfg->fake_node);
    }
}

static bool same_node(const cgpu_peer_info_t *a, const cgpu_peer_info_t *b)
{
    return 0 == strncmp(a->host, b->host, CGPU_HOST_MAX) &&
           0 == strncmp(a->boot_id, b->boot_id, CGPU_BOOT_ID_MAX);
}

/* The verdict every rank computes from the same allgathered table. */
static cgpu_status_t agree_on_table(const cgpu_peer_info_t *all, int size)
{
    for (int i = 0; i < size; ++i) {
        if (CGPU_OK != all[i].status) {
            cgpu_log(CGPU_LOG_INFO, "engine: rank %d could not set up (%s)", i,
                     cgpu_status_string((cgpu_status_t) all[i].status));
            return (cgpu_status_t) all[i].status;
        }
    }
    if (all[0].stage_bytes < 64 * (uint64_t) size) {
        cgpu_log(CGPU_LOG_WARN,
                 "engine: coll_gpu_alltoall_stage_bytes (%llu) is below 64 bytes per rank for %d "
                 "ranks; this communicator uses the fallback (raise the parameter)",
                 (unsigned long long) all[0].stage_bytes, size);
        return CGPU_ERR_NO_RESOURCE;
    }
    for (int i = 1; i < size; ++i) {
        if (all[i].slot_bytes != all[0].slot_bytes || all[i].nslots != all[0].nslots ||
            all[i].stage_bytes != all[0].stage_bytes) {
            cgpu_log(CGPU_LOG_WARN,
                     "engine: ranks 0 and %d run with different coll_gpu_slot_bytes/"
                     "coll_gpu_slots/coll_gpu_alltoall_stage_bytes; set them the same on "
                     "every rank. This communicator uses the fallback.",
                     i);
            return CGPU_ERR_INVALID_ARG;
        }
    }
    return CGPU_OK;
}

/* Number every rank's node by first appearance (the same table gives the same numbers on
 * every rank); returns the number of nodes, or -1 without memory. */
static int number_nodes(const cgpu_peer_info_t *all, int size, int *node_of)
{
    int nnodes = 0;
    for (int i = 0; i < size; ++i) {
        node_of[i] = -1;
        for (int j = 0; j < i && node_of[i] < 0; ++j) {
            if (same_node(&all[i], &all[j])) {
                node_of[i] = node_of[j];
            }
        }
        if (node_of[i] < 0) {
            node_of[i] = nnodes++;
        }
    }
    return nnodes;
}

/* HOST or CUDA for this communicator, from the same table on every rank. */
static cgpu_status_t agree_on_backend(const cgpu_peer_info_t *all, int size, cgpu_backend_t *out)
{
    cgpu_backend_t want = cgpu_engine_config()->backend;
    bool all_cuda = true;
    for (int i = 0; i < size; ++i) {
        all_cuda = all_cuda && 0 != all[i].cuda_ok;
    }
    if (CGPU_BACKEND_HOST == want) {
        *out = CGPU_BACKEND_HOST;
    } else if (all_cuda) {
        *out = CGPU_BACKEND_CUDA;
    } else if (CGPU_BACKEND_CUDA == want) {
        cgpu_log(CGPU_LOG_WARN, "engine: coll_gpu_backend=cuda but some rank has no usable "
                                "GPU; this communicator uses the fallback");
        return CGPU_ERR_NOT_SUPPORTED;
    } else {
        *out = CGPU_BACKEND_HOST;
    }
    return CGPU_OK;
}

/* The call check (cgpu_call.c) runs where every rank has it on: a rank that checks waits for
 * every peer's record, which a rank without it never writes. */
static bool agree_on_check(const cgpu_peer_info_t *all, int size, int rank)
{
    int on = 0;
    for (int i = 0; i < size; ++i) {
        on += 0 != all[i].check_calls;
    }
    if (on > 0 && on < size && 0 == rank) {
        cgpu_log(CGPU_LOG_WARN,
                 "engine: coll_gpu_check_calls is off on some ranks of a communicator and on on "
                 "others; the ranks' calls are not compared on it (set it the same everywhere)");
    }
    return on == size;
}

/* The liveness looks of this communicator's waits (cgpu_liveness.c): every peer's process
 * as the table names it. Without memory for the two arrays the waits only time out. */
static void set_up_liveness(cgpu_comm_t *comm, const cgpu_peer_info_t *all)
{
    int32_t *pids = calloc((size_t) comm->size, sizeof(*pids));
    uint64_t *starts = calloc((size_t) comm->size, sizeof(*starts));
    if (NULL != pids && NULL != starts) {
        for (int i = 0; i < comm->size; ++i) {
            pids[i] = all[i].pid;
            starts[i] = all[i].start_time;
        }
        cgpu_liveness_setup(comm, pids, starts);
    }
    free(pids);
    free(starts);
}

/* Allgather one status per rank; every rank returns the first failure, or OK. */
static cgpu_status_t agree_status(const cgpu_bootstrap_t *bs, cgpu_status_t mine, int32_t *tmp)
{
    int32_t v = (int32_t) mine;
    if (CGPU_OK != bs->allgather(bs->ctx, &v, tmp, sizeof(v))) {
        return CGPU_ERR_BOOTSTRAP;
    }
    for (int i = 0; i < bs->size; ++i) {
        if (CGPU_OK != tmp[i]) {
            return (cgpu_status_t) tmp[i];
        }
    }
    return CGPU_OK;
}

/* Whether every rank's device record says its GPU is chosen (the process works on it). */
static bool all_chosen(const cgpu_cuda_dev_rec_t *first, size_t stride, int n)
{
    for (int i = 0; i < n; ++i) {
        if (0 ==
            ((const cgpu_cuda_dev_rec_t *) ((const char *) first + (size_t) i * stride))->chosen) {
            return false;
        }
    }
    return true;
}

cgpu_backend_t cgpu_comm_plan_devices(cgpu_comm_t *comm, const cgpu_cuda_dev_rec_t *first,
                                      size_t stride)
{
    /* Where a rank has not chosen its GPU yet, the devices in the table say nothing
     * (cudaGetDevice names device 0 on every such rank): the host backend until every rank
     * has (cgpu_comm_settle asks again) */
    const cgpu_config_t *cfg = cgpu_engine_config();
    if (CGPU_BACKEND_AUTO == cfg->backend && !all_chosen(first, stride, comm->size)) {
        __atomic_store_n(&comm->unsettled, true, __ATOMIC_RELEASE);
        return CGPU_BACKEND_HOST;
    }
    __atomic_store_n(&comm->unsettled, false, __ATOMIC_RELEASE);
    /* How many ranks share a device, from the same table on every rank. Ranks sharing a
     * GPU without MPS would run their kernels in turn, a time slice each (milliseconds a
     * call), so where auto chose the cuda backend the communicator takes the host backend
     * instead (device buffers staged through host copies), unless
     * coll_gpu_cuda_time_sliced */
    bool sliced, mine;
    comm->dev_share = cgpu_cuda_share_plan(first, stride, comm->size, &sliced, comm->rank, &mine);
    if (mine) {
        cgpu_cuda_set_time_sliced(); /* this process's later communicators say so */
    }
    if (sliced && CGPU_BACKEND_AUTO == cfg->backend && !cfg->cuda_time_sliced) {
        static atomic_bool told;
        if (0 == comm->rank) {
            cgpu_log(atomic_exchange(&told, true) ? CGPU_LOG_INFO : CGPU_LOG_WARN,
                     "engine: a GPU of this communicator would run its ranks' kernels in "
                     "turn with another process's, a time slice each (milliseconds a "
                     "call): up to %d of its ranks share one and not all are MPS clients, "
                     "or a rank's GPU is shared with a rank of another communicator. So "
                     "this communicator runs the host backend, device buffers staged "
                     "through host copies (start an MPS daemon for our kernels, or set "
                     "coll_gpu_cuda_time_sliced to run them anyway)",
                     comm->dev_share);
        }
        return CGPU_BACKEND_HOST;
    }
    return CGPU_BACKEND_CUDA;
}

cgpu_status_t cgpu_comm_connect_cuda(cgpu_comm_t *comm, const cgpu_bootstrap_t *bs,
                                     int32_t *verdicts)
{
    /* every rank's inbox, exported and mapped by every peer */
    char *handles = calloc((size_t) bs->size, sizeof(cgpu_cuda_inbox_rec_t));
    cgpu_cuda_inbox_rec_t mine;
    memset(&mine, 0, sizeof(mine));
    cgpu_status_t local =
        (NULL == handles) ? CGPU_ERR_NO_MEMORY : cgpu_cuda_comm_setup(comm, &mine);
    cgpu_status_t st = agree_status(bs, local, verdicts);
    if (CGPU_OK == st && CGPU_OK != bs->allgather(bs->ctx, &mine, handles, sizeof(mine))) {
        st = CGPU_ERR_BOOTSTRAP;
    }
    if (CGPU_OK == st) {
        st = agree_status(bs, cgpu_cuda_comm_connect(comm, handles), verdicts);
    }
    free(handles);
    return st;
}

cgpu_status_t cgpu_comm_agree(const cgpu_bootstrap_t *bs, cgpu_status_t mine)
{
    int32_t *tmp = calloc((size_t) bs->size, sizeof(*tmp));
    if (NULL == tmp) {
        return CGPU_ERR_NO_MEMORY; /* cannot take part: the process is out of memory */
    }
    cgpu_status_t st = agree_status(bs, mine, tmp);
    free(tmp);
    return st;
}

/*
 * Remove the names of every peer's new segment, for a set-up that failed after the names
 * were exchanged: a peer killed inside the set-up cannot remove its own, and every such name
 * in the table was created by a peer of this set-up (a rank publishes only a name it created).
 * A pooled segment has no name any more.
 */
static void unlink_peer_names(cgpu_seg_msg_t *segs, int size, int rank)
{
    for (int i = 0; NULL != segs && i < size; ++i) {
        if (i != rank && CGPU_OK == segs[i].status && !segs[i].pooled) {
            cgpu_shm_unlink_name(segs[i].name);
        }
        segs[i].name[0] = '\0';
    }
}

/* This rank's segment: one from the pool that every peer maps already, else a new one. */
static void own_segment(cgpu_comm_t *comm, bool may_reuse, cgpu_seg_msg_t *mine)
{
    cgpu_status_t local = CGPU_OK;
    memset(mine, 0, sizeof(*mine));
    if (may_reuse && cgpu_seg_pool_take(comm, comm->seg_bytes, &comm->self_seg)) {
        mine->pooled = 1;
    } else {
        local = cgpu_shm_create(&comm->self_seg, comm->seg_bytes);
        if (CGPU_OK == local) {
            ((cgpu_seg_ctrl_t *) comm->self_seg.base)->magic = CGPU_SEG_MAGIC;
        }
    }
    if (CGPU_OK == local) {
        snprintf(mine->name, sizeof(mine->name), "%s", comm->self_seg.name);
    }
    mine->status = (int32_t) local;
}

/* Map the segments of the ranks in @p which (bit r, or every rank with @p which 0) that are
 * new; a pooled one from the cache, or bit r in @p unheld where this process does not map it
 * any more. */
static cgpu_status_t map_peers(cgpu_comm_t *comm, const cgpu_seg_msg_t *segs, uint64_t which,
                               uint64_t *unheld)
{
    cgpu_status_t local = CGPU_OK;
    for (int i = 0; CGPU_OK == local && i < comm->size; ++i) {
        if (i == comm->rank || (0 != which && 0 == (which >> i & 1u))) {
            continue;
        }
        if (segs[i].pooled) {
            if (!cgpu_seg_peer_cached(segs[i].name, comm->seg_bytes, &comm->peer_segs[i])) {
                *unheld |= (uint64_t) 1 << i;
                continue;
            }
        } else {
            local = cgpu_seg_peer_attach(segs[i].name, comm->seg_bytes, &comm->peer_segs[i]);
        }
        if (CGPU_OK == local &&
            CGPU_SEG_MAGIC != ((cgpu_seg_ctrl_t *) comm->peer_segs[i].base)->magic) {
            local = CGPU_ERR_SYSTEM;
        }
    }
    return local;
}

/* What each rank says once it has mapped its peers' segments. */
typedef struct cgpu_seg_verdict {
    int32_t status;
    int32_t pad;
    uint64_t unheld; /* bit r: rank r offered a pooled segment this process maps no more */
} cgpu_seg_verdict_t;

/* Allgather the verdicts: the first failure, or OK with the union of the unheld bits. */
static cgpu_status_t agree_on_maps(const cgpu_bootstrap_t *bs, cgpu_status_t local, uint64_t unheld,
                                   cgpu_seg_verdict_t *all, uint64_t *any)
{
    cgpu_seg_verdict_t mine = {.status = (int32_t) local, .unheld = unheld};
    *any = 0;
    if (CGPU_OK != bs->allgather(bs->ctx, &mine, all, sizeof(mine))) {
        return CGPU_ERR_BOOTSTRAP;
    }
    for (int i = 0; i < bs->size; ++i) {
        if (CGPU_OK != all[i].status) {
            return (cgpu_status_t) all[i].status;
        }
        *any |= all[i].unheld;
    }
    return CGPU_OK;
}

/*
 * Step 2 of the creation on one node: every rank takes its segment (from the pool, where
 * every peer maps it already: cgpu_seg_pool.h; else a new one), the names are exchanged,
 * every rank maps every peer's, and all agree that every mapping worked; then each rank
 * removes its name. Where a peer no longer maps a pooled segment (its cache dropped it), the
 * owners of such segments retire them and make new ones, and the exchange runs once more.
 *
 * A new segment is created only here, after the first exchange showed every rank inside the
 * set-up: a name exists in /dev/shm only while every rank is a few steps from mapping it,
 * never while a rank waits for a peer that may never come (killed before its first
 * collective, or stuck in other work), where a kill of the waiting job would leave it. A
 * rank killed inside these steps can still leave its name; the names carry the uid and pid
 * to tell such a left-over apart (docs/troubleshooting.md). A rank whose step fails or whose
 * bootstrap reports an error removes every name it learned, since the rank that made one
 * may be gone. No deadline removes a name while the bootstrap is blocked: the bootstrap is
 * the previous module's collective, which gives no control back until it completes.
 */
static cgpu_status_t map_node_segments(cgpu_comm_t *comm, const cgpu_bootstrap_t *bs,
                                       cgpu_seg_msg_t *segs)
{
    cgpu_seg_msg_t mine;
    cgpu_status_t local, st;
    uint64_t unheld = 0, redo = 0;
    /* the same on every rank: the verdicts' masks name at most 64 ranks */
    const bool may_reuse = bs->size <= 64;

    cgpu_seg_verdict_t *verdicts = calloc((size_t) bs->size, sizeof(*verdicts));
    comm->peer_segs = calloc((size_t) bs->size, sizeof(*comm->peer_segs));
    if (NULL != verdicts && NULL != comm->peer_segs) {
        own_segment(comm, may_reuse, &mine);
    } else { /* said in the first exchange: every rank fails there */
        memset(&mine, 0, sizeof(mine));
        mine.status = CGPU_ERR_NO_MEMORY;
    }
    for (int round = 0;; ++round) {
        if (CGPU_OK != bs->allgather(bs->ctx, &mine, segs, sizeof(mine))) {
            free(verdicts);
            return CGPU_ERR_BOOTSTRAP; /* the table may be partial: only our own name is known */
        }
        for (int i = 0; i < bs->size; ++i) {
            segs[i].name[CGPU_SHM_NAME_MAX - 1] = '\0';
            if (CGPU_OK != segs[i].status) {
                cgpu_log(CGPU_LOG_INFO, "engine: rank %d could not create its segment (%s)", i,
                         cgpu_status_string((cgpu_status_t) segs[i].status));
                unlink_peer_names(segs, bs->size, bs->rank);
                free(verdicts);
                return (cgpu_status_t) segs[i].status;
            }
        }
        unheld = 0;
        local = map_peers(comm, segs, redo, &unheld);
        st = agree_on_maps(bs, local, unheld, verdicts, &redo);
        if (CGPU_OK != st) {
            unlink_peer_names(segs, bs->size, bs->rank);
            free(verdicts);
            return st;
        }
        if (0 == redo || round > 0) {
            break; /* a second round maps only new segments: nothing can be unheld */
        }
        /* some pooled segments are not mapped everywhere: their owners make new ones, and
         * every rank drops its copy of those it did map */
        for (int i = 0; i < bs->size; ++i) {
            if (i != bs->rank && (redo >> i & 1u)) {
                cgpu_seg_peer_put(&comm->peer_segs[i], false);
            }
        }
        /* the others send what they sent: the second round maps none of theirs */
        if (redo >> bs->rank & 1u) {
            cgpu_seg_pool_put(comm, &comm->self_seg, false);
            own_segment(comm, false, &mine);
        }
    }
    free(verdicts);
    /* Every peer has mapped our segment: the name is no longer needed. */
    cgpu_shm_unlink(&comm->self_seg);
    for (int i = 0; i < bs->size; ++i) {
        segs[i].name[0] = '\0'; /* each owner removed its own */
    }
    comm->peer_segs[bs->rank] = comm->self_seg;
    comm->peer_segs[bs->rank].owner = false; /* alias: self_seg does the cleanup */
    return CGPU_OK;
}

/* The stage area's size, and with it the segment's (control block, ring slots, stage). */
static void set_stage_bytes(cgpu_comm_t *comm, size_t bytes)
{
    comm->stage_bytes = bytes;
    comm->seg_bytes = CGPU_SEG_CTRL_BYTES + (size_t) comm->nslots * comm->slot_bytes + bytes;
}

/* Every peer's mapping given back (@p done: each owner told, cgpu_seg_peer_put) and this
 * rank's segment, kept for the next communicator where @p reuse. */
static void release_segments(cgpu_comm_t *comm, bool done, bool reuse)
{
    if (NULL != comm->peer_segs) {
        for (int i = 0; i < comm->size; ++i) {
            if (i != comm->rank) {
                cgpu_seg_peer_put(&comm->peer_segs[i], done);
            }
        }
        free(comm->peer_segs);
        comm->peer_segs = NULL;
    }
    cgpu_seg_pool_put(comm, &comm->self_seg, reuse);
}

void cgpu_comm_free_resources(cgpu_comm_t *comm)
{
    if (comm->resources_freed) {
        return;
    }
    comm->resources_freed = true;
    cgpu_comm_scratch_release(comm);
    free(comm->zeros);
    comm->zeros = NULL;
    comm->zeros_bytes = 0;
    if (NULL != comm->net) {
        cgpu_net_destroy(comm);
    }
    cgpu_cuda_comm_destroy(comm);
    /* a communicator that worked to the end gives its segment back for the next one of the
     * same processes, and tells each peer that it is done with theirs */
    release_segments(comm, true,
                     comm->seg_reusable && atomic_load(&comm->dead_rank) < 0 &&
                         CGPU_RAS_FAILED != atomic_load(&comm->ras.state));
}

cgpu_status_t cgpu_comm_create(const cgpu_bootstrap_t *bs, cgpu_comm_t **out)
{
    cgpu_status_t st = CGPU_OK, local;
    cgpu_peer_info_t me, *all = NULL;
    cgpu_seg_msg_t *segs = NULL;
    int32_t *verdicts = NULL;

    if (NULL == out) {
        return CGPU_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (NULL == bs || bs->size < 1 || bs->rank < 0 || bs->rank >= bs->size ||
        NULL == bs->allgather || NULL == bs->barrier) {
        return CGPU_ERR_INVALID_ARG;
    }
    const cgpu_config_t *cfg = cgpu_engine_config();

    cgpu_comm_t *comm = calloc(1, sizeof(*comm));
    all = calloc((size_t) bs->size, sizeof(*all));
    verdicts = calloc((size_t) bs->size, sizeof(*verdicts));
    segs = calloc((size_t) bs->size, sizeof(*segs));
    memset(&me, 0, sizeof(me));
    local = (NULL == comm || NULL == all || NULL == verdicts || NULL == segs) ? CGPU_ERR_NO_MEMORY
                                                                              : CGPU_OK;
    if (CGPU_OK == local && !cgpu_engine_is_up()) {
        local = CGPU_ERR_STATE;
    }

    if (NULL != comm) {
        atomic_store(&comm->dead_rank, -1);
    }
    if (CGPU_OK == local) {
        comm->magic = CGPU_COMM_DEAD; /* alive only once everything below worked */
        comm->rank = bs->rank;
        comm->size = bs->size;
        comm->bs = *bs;
        comm->slot_bytes = cfg->slot_bytes;
        comm->nslots = cfg->nslots;
        set_stage_bytes(comm, cfg->stage_bytes);
        comm->resources_freed = true; /* nothing to free yet */
        local = cgpu_engine_register_comm(comm);
        comm->registered = (CGPU_OK == local);
        if (CGPU_ERR_NO_RESOURCE == local) {
            cgpu_log_once(CGPU_LOG_WARN,
                          "engine: %d internal communicators are alive, the cap set by "
                          "coll_gpu_max_comms; this communicator and further ones past the cap "
                          "use the fallback (raise coll_gpu_max_comms or free communicators; "
                          "shown once per process)",
                          cfg->max_comms);
            free(comm);
            comm = NULL;
        }
    }

    /* where a creation's time goes (verbose 50: split/dup cycles cost milliseconds) */
    uint64_t t_phase[4] = {cgpu_now_ns(), 0, 0, 0};
    /* Step 1: everyone learns everyone's node, layout and status. */
    read_node_identity(&me, bs->rank);
    me.pid = (int32_t) getpid();
    me.start_time = cgpu_proc_start_time(getpid());
    me.status = (int32_t) local;
    me.slot_bytes = cfg->slot_bytes; /* as the engine rounded them */
    me.nslots = (uint64_t) cfg->nslots;
    me.stage_bytes = cfg->stage_bytes;
    me.direct_min = cfg->stage_direct_min;
    me.shared_stage = cfg->shared_stage_bytes;
    me.check_calls = cfg->check_calls ? 1 : 0;
    me.cuda_ok = (CGPU_BACKEND_HOST != cfg->backend && cgpu_cuda_available()) ? 1 : 0;
    me.device = cgpu_cuda_current_device();
    cgpu_cuda_dev_rec(&me.dev, me.cuda_ok ? me.device : -1, bs->rank);
    if (NULL == all) {
        /* A few hundred bytes per rank could not be had: the process is about to die
         * anyway, and without the table it cannot take part in the exchange. */
        cgpu_log(CGPU_LOG_WARN, "engine: out of memory creating a communicator");
        st = CGPU_ERR_NO_MEMORY;
        goto out_release;
    }
    if (CGPU_OK != bs->allgather(bs->ctx, &me, all, sizeof(me))) {
        st = CGPU_ERR_BOOTSTRAP;
        goto out_release;
    }
    CGPU_CHECK_GOTO(agree_on_table(all, bs->size), st, out_release);
    CGPU_CHECK_GOTO(agree_on_backend(all, bs->size, &comm->backend), st, out_release);
    comm->check_calls = agree_on_check(all, bs->size, bs->rank);
    comm->direct_min = (size_t) all[0].direct_min; /* one algorithm choice on every rank */
    if (bs->size > 1) {
        comm->resources_freed = false; /* from here on, whatever is made is freed with them */
        int *node_of = malloc(sizeof(int) * (size_t) bs->size);
        const int nnodes = NULL == node_of ? -1 : number_nodes(all, bs->size, node_of);
        if (nnodes > 1) {
            /* Several nodes: this communicator has no segment; the node-local
             * communicator and the proxy carry everything (cgpu_net.c). */
            st = cgpu_net_create(comm, node_of, nnodes);
            free(node_of);
            if (CGPU_OK != st) {
                goto out_release;
            }
            goto out_ready;
        }
        free(node_of);
        if (nnodes < 0) {
            st = CGPU_ERR_NO_MEMORY; /* tables of a few ints per rank: the process is dying */
            goto out_release;
        }
    }

    /* One node, the cuda backend: what the ranks' devices allow */
    comm->dev_share = 1;
    if (CGPU_BACKEND_CUDA == comm->backend) {
        comm->backend = cgpu_comm_plan_devices(comm, &all[0].dev, sizeof(all[0]));
    }

    /* Ranks that stage device buffers because they share a GPU: a large allreduce goes
     * through the stage areas in rounds of a third of one, and each round costs some 25 us
     * of CUDA calls that queue and wait for its copies, so these stages are larger (fewer,
     * larger rounds). The test switch that stages host buffers takes the same size. */
    const size_t shared_stage = (size_t) (all[0].shared_stage & ~(uint64_t) 63);
    if (CGPU_BACKEND_HOST == comm->backend && (comm->dev_share > 1 || cfg->stage_host_buffers) &&
        shared_stage > comm->stage_bytes) {
        set_stage_bytes(comm, shared_stage);
    }

    /* Step 2: every rank's segment, made, exchanged and mapped by every peer. */
    t_phase[1] = cgpu_now_ns();
    if (bs->size > 1) {
        set_up_liveness(comm, all);
        st = map_node_segments(comm, bs, segs);
        if (CGPU_OK != st && CGPU_ERR_BOOTSTRAP != st && comm->stage_bytes > cfg->stage_bytes) {
            /* Some rank could not make or map the larger segments (a container's small
             * /dev/shm): every rank saw the same agreed failure, so all drop what they made
             * and try once more with the alltoall's stage, slower but served. */
            cgpu_log(0 == bs->rank ? CGPU_LOG_WARN : CGPU_LOG_INFO,
                     "engine: the %zu-byte stages of ranks sharing a GPU could not be set up "
                     "(%s); this communicator takes %zu-byte ones (lower "
                     "coll_gpu_shared_stage_bytes or enlarge /dev/shm)",
                     comm->stage_bytes, cgpu_status_string(st), cfg->stage_bytes);
            release_segments(comm, false, false); /* a failed set-up: nothing kept */
            set_stage_bytes(comm, cfg->stage_bytes);
            st = map_node_segments(comm, bs, segs);
        }
        CGPU_CHECK_GOTO(st, st, out_release);
    }

    /* Step 3 (cuda): every rank's inbox, exported and mapped by every peer. */
    t_phase[2] = cgpu_now_ns();
    if (CGPU_BACKEND_CUDA == comm->backend) {
        CGPU_CHECK_GOTO(cgpu_comm_connect_cuda(comm, bs, verdicts), st, out_release);
    }

out_ready:
    comm->magic = CGPU_COMM_ALIVE;
    comm->seg_reusable = true; /* its segments may serve the next communicator */
    atomic_store(&comm->busy, 0);
    atomic_store(&comm->ras.state, CGPU_RAS_READY);
    atomic_store(&comm->ras.waiting_on, -1);
    snprintf(comm->ras.name, sizeof(comm->ras.name), "(rank %d of %d)", comm->rank, comm->size);
    cgpu_ras_watchdog_start(cgpu_engine_config()->ras_timeout_s, cgpu_health_scan, NULL);
    t_phase[3] = cgpu_now_ns();
    if (0 == t_phase[1]) { /* across nodes: steps 2 and 3 are the net layer's */
        t_phase[1] = t_phase[2] = t_phase[3];
    }
    cgpu_log(CGPU_LOG_DEBUG,
             "engine: communicator ready (rank %d of %d, backend %s, %zu-byte segment) in %.0f "
             "us: tables %.0f, segments %.0f, cuda %.0f",
             comm->rank, comm->size, CGPU_BACKEND_CUDA == comm->backend ? "cuda" : "host",
             comm->seg_bytes, (double) (t_phase[3] - t_phase[0]) / 1e3,
             (double) (t_phase[1] - t_phase[0]) / 1e3, (double) (t_phase[2] - t_phase[1]) / 1e3,
             (double) (t_phase[3] - t_phase[2]) / 1e3);
    *out = comm;
    free(all);
    free(segs);
    free(verdicts);
    return CGPU_OK;

out_release:
    if (NULL != comm) {
        if (NULL != comm->peer_segs) {
            /* peer_segs[rank] aliases self_seg: detach it only once, below */
            comm->peer_segs[bs->rank].base = NULL;
        }
        cgpu_comm_free_resources(comm);
        cgpu_cuda_comm_destroy(comm);
        cgpu_shm_detach(&comm->self_seg);
        if (comm->registered) {
            cgpu_engine_unregister_comm(comm);
        }
        cgpu_liveness_fini(comm);
    }
    free(comm);
    free(all);
    free(segs);
    free(verdicts);
    return st;
}

cgpu_status_t cgpu_comm_release(cgpu_comm_t **commp)
{
    if (NULL == commp || NULL == *commp) {
        return CGPU_OK;
    }
    cgpu_comm_t *comm = *commp;
    if (CGPU_COMM_ALIVE != comm->magic) {
        cgpu_log(CGPU_LOG_WARN, "engine: internal communicator released twice; ignored");
        *commp = NULL;
        return CGPU_ERR_STATE;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&comm->busy, &expected, 2)) {
        cgpu_log(CGPU_LOG_WARN,
                 "engine: communicator (rank %d of %d) released while a collective is "
                 "running on it; release refused",
                 comm->rank, comm->size);
        return CGPU_ERR_STATE;
    }
    comm->magic = CGPU_COMM_DEAD;
    free(comm->xfer); /* every transport event ended with its collective */
    comm->xfer = NULL;
    cgpu_prof_comm_fini(&comm->prof);
    if (NULL != comm->peer_segs) {
        comm->peer_segs[comm->rank].base = NULL; /* alias of self_seg */
    }
    cgpu_engine_unregister_comm(comm);
    const uint64_t t0 = cgpu_now_ns();
    cgpu_comm_free_resources(comm);
    const uint64_t t1 = cgpu_now_ns();
    cgpu_cuda_comm_destroy(comm); /* single-rank communicators have no shm resources */
    cgpu_liveness_fini(comm);
    cgpu_log(CGPU_LOG_DEBUG, "engine: communicator (rank %d of %d) released: %.0f us, cuda %.0f",
             comm->rank, comm->size, (double) (cgpu_now_ns() - t0) / 1e3,
             (double) (cgpu_now_ns() - t1) / 1e3);
    free(comm);
    *commp = NULL;
    return CGPU_OK;
}

cgpu_status_t cgpu_comm_refusal(const cgpu_comm_t *comm)
{
    if (NULL == comm) {
        return CGPU_OK;
    }
    if (cgpu_comm_dead_peer(comm, NULL) >= 0) {
        return CGPU_ERR_PEER_DEAD;
    }
    return CGPU_RAS_FAILED == atomic_load(&((cgpu_comm_t *) comm)->ras.state) ? CGPU_ERR_PEER
                                                                              : CGPU_OK;
}

cgpu_status_t cgpu_comm_enter(cgpu_comm_t *comm, const char *what, int kind, const cgpu_sig_t *sig)
{
    return cgpu_comm_enter_early(comm, what, kind, sig, NULL, 0);
}

cgpu_status_t cgpu_comm_enter_early(cgpu_comm_t *comm, const char *what, int kind,
                                    const cgpu_sig_t *sig, const void *early, size_t early_bytes)
{
    if (NULL == comm || CGPU_COMM_ALIVE != comm->magic ||
        (comm->size > 1 && comm->resources_freed)) {
        cgpu_log(CGPU_LOG_WARN, "engine: %s on a released internal communicator", what);
        return CGPU_ERR_STATE;
    }
    const cgpu_status_t refused = cgpu_comm_refusal(comm);
    if (CGPU_ERR_PEER_DEAD == refused) {
        /* found by an earlier wait (logged there): the process never takes part again */
        cgpu_log(CGPU_LOG_INFO, "engine: %s on communicator %s refused: its rank %d died", what,
                 comm->ras.name, cgpu_comm_dead_peer(comm, NULL));
        return CGPU_ERR_PEER_DEAD;
    }
    if (CGPU_OK != refused) {
        cgpu_log(CGPU_LOG_WARN,
                 "engine: %s on communicator %s, which failed earlier (a collective timed out, "
                 "hit a device error or, across nodes, failed midway); free it and create a "
                 "new one",
                 what, comm->ras.name);
        return CGPU_ERR_PEER;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&comm->busy, &expected, 1)) {
        cgpu_log(CGPU_LOG_WARN,
                 "engine: %s entered while another collective runs on the same "
                 "communicator (MPI forbids concurrent collectives on one communicator)",
                 what);
        return CGPU_ERR_STATE;
    }
    cgpu_ras_t *r = &comm->ras;
    r->kind = kind;
    atomic_store_explicit(&r->last_progress_ns, cgpu_now_ns(), memory_order_relaxed);
    atomic_fetch_add_explicit(&r->started[kind], 1, memory_order_relaxed);
    atomic_store_explicit(&r->cur_seq, comm->seq + 1, memory_order_release);
    comm->mismatch.field = CGPU_MISMATCH_NONE;
    comm->call_all_host = false; /* until this call's check finds otherwise */
    comm->early_written = false;
    if (NULL != comm->net) {
        /* the node-local steps of this call compare this call's signature, not theirs */
        cgpu_net_call_sig(comm, sig);
        if (!comm->check_calls || NULL == sig) {
            return CGPU_OK;
        }
        /* every node's ranks, then the nodes, compare their calls (net_check.c) */
        const cgpu_status_t st = cgpu_net_call_check(comm, sig);
        if (CGPU_OK != st) {
            cgpu_comm_leave(comm, st, 0); /* the same call fails on every rank */
        }
        return st;
    }
    if (comm->size < 2 || NULL == comm->peer_segs) {
        return CGPU_OK;
    }
    if (NULL != comm->outer_sig) {
        sig = comm->outer_sig;
    }
    if (!comm->check_calls || NULL == sig) {
        /* peers (and their watchdogs) see which collective this rank has reached */
        atomic_store_explicit(&cgpu_ctrl(comm, comm->rank)->call.entered, comm->seq + 1,
                              memory_order_release);
        return CGPU_OK;
    }
    /* a small allreduce's input, where the peers can read it once the call is published: no
     * peer still reads this area, which served call seq - 1 (every peer has entered the call
     * after it: one load each where they keep in step) */
    if (NULL != early && NULL == comm->outer_sig && early_bytes <= CGPU_SEG_EARLY_BYTES) {
        const uint64_t s = comm->seq + 1;
        bool ok = true;
        for (int p = 0; ok && p < comm->size && s > 1; ++p) {
            ok = p == comm->rank || cgpu_wait_ge(comm, &cgpu_ctrl(comm, p)->call.entered, s - 1, p);
        }
        if (!ok) {
            const cgpu_status_t st = cgpu_comm_wait_failed(comm);
            cgpu_comm_leave(comm, st, 0);
            return st;
        }
        memcpy(cgpu_seg_early(comm, comm->rank, s), early, early_bytes);
        comm->early_written = true;
    }
    /* every rank checks every call or none (agreed at create): a rank that skipped the check
     * here would leave its peers waiting for its record */
    cgpu_call_publish(comm, comm->seq + 1, sig);
    const cgpu_status_t st = cgpu_call_check(comm, comm->seq + 1);
    if (CGPU_OK != st) {
        cgpu_comm_leave(comm, st, 0); /* the same call fails on every rank: seq stays in step */
    }
    return st;
}

void cgpu_comm_leave(cgpu_comm_t *comm, cgpu_status_t st, size_t bytes)
{
    cgpu_ras_t *r = &comm->ras;
    comm->seq++;
    if (comm->size > 1 && NULL != comm->peer_segs) {
        if (CGPU_OK != st && CGPU_ERR_MISMATCH != st) {
            atomic_store_explicit(&cgpu_ctrl(comm, comm->rank)->failed_seq, comm->seq,
                                  memory_order_release);
        }
        atomic_store_explicit(&cgpu_ctrl(comm, comm->rank)->seq.v, comm->seq, memory_order_release);
    }
    if (CGPU_OK == st) {
        atomic_fetch_add_explicit(&r->bytes, bytes, memory_order_relaxed);
        atomic_fetch_add_explicit(&r->completed[r->kind], 1, memory_order_relaxed);
    } else {
        atomic_ullong *cls = CGPU_ERR_TIMEOUT == st  ? &r->err_timeout
                             : CGPU_ERR_DEVICE == st ? &r->err_device
                                                     : &r->err_other;
        atomic_fetch_add_explicit(cls, 1, memory_order_relaxed);
        if (CGPU_ERR_TIMEOUT == st || CGPU_ERR_DEVICE == st || CGPU_ERR_PEER_DEAD == st) {
            /* its pipelines stopped midway: this communicator cannot line up again */
            atomic_store(&r->state, CGPU_RAS_FAILED);
        }
    }
    if (NULL != comm->net) {
        cgpu_net_call_sig(comm, NULL);
    }
    atomic_store_explicit(&r->cur_seq, 0, memory_order_release);
    atomic_store(&comm->busy, 0);
}

void cgpu_ras_progress(cgpu_comm_t *comm)
{
    atomic_store_explicit(&comm->ras.last_progress_ns, cgpu_now_ns(), memory_order_relaxed);
}

uint64_t cgpu_comm_ras(const cgpu_comm_t *comm, cgpu_ras_item_t item)
{
    cgpu_comm_t *c = (cgpu_comm_t *) comm; /* atomics only: no state changes */
    uint64_t cur, v = 0;
    switch (item) {
    case CGPU_RAS_STATE:
        return (uint64_t) atomic_load(&c->ras.state);
    case CGPU_RAS_ALLREDUCE_STARTED:
        return atomic_load_explicit(&c->ras.started[CGPU_KIND_ALLREDUCE], memory_order_relaxed);
    case CGPU_RAS_ALLREDUCE_COMPLETED:
        return atomic_load_explicit(&c->ras.completed[CGPU_KIND_ALLREDUCE], memory_order_relaxed);
    case CGPU_RAS_ALLTOALL_STARTED:
        return atomic_load_explicit(&c->ras.started[CGPU_KIND_ALLTOALL], memory_order_relaxed);
    case CGPU_RAS_ALLTOALL_COMPLETED:
        return atomic_load_explicit(&c->ras.completed[CGPU_KIND_ALLTOALL], memory_order_relaxed);
    case CGPU_RAS_BCAST_STARTED:
    case CGPU_RAS_BCAST_COMPLETED:
    case CGPU_RAS_ALLGATHER_STARTED:
    case CGPU_RAS_ALLGATHER_COMPLETED:
    case CGPU_RAS_REDUCE_SCATTER_STARTED:
    case CGPU_RAS_REDUCE_SCATTER_COMPLETED:
    case CGPU_RAS_REDUCE_STARTED:
    case CGPU_RAS_REDUCE_COMPLETED: {
        const int k = CGPU_KIND_BCAST + (int) (item - CGPU_RAS_BCAST_STARTED) / 2;
        const bool done = 1 == (item - CGPU_RAS_BCAST_STARTED) % 2;
        return atomic_load_explicit(done ? &c->ras.completed[k] : &c->ras.started[k],
                                    memory_order_relaxed);
    }
    case CGPU_RAS_BYTES:
        return atomic_load_explicit(&c->ras.bytes, memory_order_relaxed);
    case CGPU_RAS_LAST_SEQ:
        return c->size > 1 && NULL != c->peer_segs
                   ? atomic_load_explicit(&cgpu_ctrl(c, c->rank)->seq.v, memory_order_acquire)
                   : 0;
    case CGPU_RAS_IDLE_US:
        if (0 == atomic_load_explicit(&c->ras.cur_seq, memory_order_acquire)) {
            return 0;
        }
        v = cgpu_now_ns();
        cur = atomic_load_explicit(&c->ras.last_progress_ns, memory_order_relaxed);
        return v > cur ? (v - cur) / 1000 : 0;
    case CGPU_RAS_PEERS_MISSING:
    case CGPU_RAS_PEERS_MISSING_MASK:
        cur = atomic_load_explicit(&c->ras.cur_seq, memory_order_acquire);
        if (0 == cur || c->size < 2 || NULL == c->peer_segs || c->resources_freed) {
            return 0;
        }
        for (int p = 0; p < c->size; ++p) {
            if (p == c->rank ||
                atomic_load_explicit(&cgpu_ctrl(c, p)->call.entered, memory_order_acquire) >= cur) {
                continue;
            }
            if (CGPU_RAS_PEERS_MISSING == item) {
                ++v;
            } else if (p < 64) {
                v |= 1ull << p;
            }
        }
        return v;
    case CGPU_RAS_ERR_TIMEOUT:
        return atomic_load_explicit(&c->ras.err_timeout, memory_order_relaxed);
    case CGPU_RAS_ERR_DEVICE:
        return atomic_load_explicit(&c->ras.err_device, memory_order_relaxed);
    case CGPU_RAS_ERR_OTHER:
        return atomic_load_explicit(&c->ras.err_other, memory_order_relaxed);
    case CGPU_RAS_ALGORITHM:
        return (uint64_t) atomic_load_explicit(&c->ras.alg, memory_order_relaxed);
    case CGPU_RAS_TRANSPORT:
        return (uint64_t) cgpu_path_of(c)->transport(c);
    case CGPU_RAS_ITEMS:
        break;
    }
    return 0;
}

void cgpu_comm_set_bootstrap(cgpu_comm_t *comm, const cgpu_bootstrap_t *bs)
{
    if (NULL != comm && NULL != bs) {
        comm->bs = *bs;
    }
}

void cgpu_comm_describe(cgpu_comm_t *comm, const char *name, uint64_t id)
{
    if (NULL == comm) {
        return;
    }
    snprintf(comm->ras.name, sizeof(comm->ras.name), "%s", NULL != name ? name : "");
    if (NULL != comm->net) {
        cgpu_net_describe(comm);
    }
    if (NULL == cgpu_prof_active || comm->prof.on) {
        return;
    }
    cgpu_prof_comm_info_v1_t info = {
        .name = NULL != name ? name : "",
        .comm_id = id,
        .size = comm->size,
        .rank = comm->rank,
        .pid = (int64_t) getpid(),
        .backend = CGPU_BACKEND_CUDA == cgpu_comm_backend(comm) ? "cuda" : "host",
    };
    cgpu_prof_comm_init(&comm->prof, &info);
}

void cgpu_coll_prof_begin(cgpu_comm_t *comm, const char *kind, size_t count, const char *dtype,
                          const char *op, size_t bytes, const char *algorithm)
{
    comm->prof_step = 0;
    comm->prof.coll_on = false;
    if (!cgpu_prof_enabled(&comm->prof)) {
        return;
    }
    cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_COLL_V1, .parent = NULL};
    ev.u.coll = (cgpu_prof_coll_v1_t){.kind = kind,
                                      .count = count,
                                      .datatype = dtype,
                                      .op = op,
                                      .root = -1,
                                      .bytes = bytes,
                                      .algorithm = algorithm,
                                      .seq = comm->seq + 1};
    cgpu_prof_ev_t e;
    cgpu_prof_start(&comm->prof, &ev, &e);
    comm->prof.coll = e.handle;
    comm->prof.coll_on = e.on;
}

void cgpu_coll_prof_end(cgpu_comm_t *comm)
{
    cgpu_ring_prof_drain(comm);
    if (comm->prof.coll_on) {
        cgpu_prof_ev_t e = {.handle = comm->prof.coll, .on = true};
        cgpu_prof_stop(&e);
        comm->prof.coll_on = false;
    }
}

void cgpu_step_prof_begin(cgpu_comm_t *comm, cgpu_prof_ev_t *e, const char *what, int peer,
                          int channel, size_t bytes)
{
    e->on = false;
    if (!cgpu_prof_enabled(&comm->prof)) {
        return;
    }
    cgpu_prof_event_v1_t ev = {.type = CGPU_PROF_EVENT_STEP_V1,
                               .parent = comm->prof.coll_on ? comm->prof.coll : NULL};
    ev.u.step = (cgpu_prof_step_v1_t){
        .what = what, .peer = peer, .channel = channel, .bytes = bytes, .step = comm->prof_step++};
    cgpu_prof_start(&comm->prof, &ev, e);
    cgpu_prof_state(e, CGPU_PROF_STATE_WAIT_PEER_V1);
}

bool cgpu_comm_busy(const cgpu_comm_t *comm)
{
    return 0 != atomic_load(&((cgpu_comm_t *) comm)->busy);
}

cgpu_backend_t cgpu_comm_backend(const cgpu_comm_t *comm)
{
    return cgpu_backend_now(comm);
}

bool cgpu_comm_shares_device(const cgpu_comm_t *comm)
{
    /* across nodes each node's ranks know only their own devices: no answer all agree on */
    return CGPU_BACKEND_CUDA == cgpu_comm_backend(comm) && NULL == comm->net &&
           cgpu_cuda_comm_shares_device(comm);
}

int cgpu_comm_rank(const cgpu_comm_t *comm)
{
    return comm->rank;
}

int cgpu_comm_size(const cgpu_comm_t *comm)
{
    return comm->size;
}
