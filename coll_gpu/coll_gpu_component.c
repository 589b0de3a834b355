/*
 * coll/gpu: component definition and every MCA parameter (registered here, in one
 * place, so `ompi_info --param coll gpu --level 9` shows them all).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_gpu.h"
#include "coll_gpu_params.h"

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

static int gpu_register(void);
static int gpu_open(void);
static int gpu_close(void);

mca_coll_gpu_component_t mca_coll_gpu_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "gpu",
            MCA_BASE_MAKE_VERSION(component, 0, 1, 0),
            .mca_open_component = gpu_open,
            .mca_close_component = gpu_close,
            .mca_register_component_params = gpu_register,
        },
        .collm_data = {
            MCA_BASE_METADATA_PARAM_CHECKPOINT
        },
        .collm_init_query = mca_coll_gpu_init_query,
        .collm_comm_query = mca_coll_gpu_comm_query,
    },
    .priority = 40,
    .self_priority = 90,
    .nb_max_workers = 256,
    .nb_engine = -1,
    .stage_chunk_bytes = 4194304,
    .stage_pipeline_min_bytes = 524288,
    .stage_pinned_bytes = 134217728,
    .gather_scratch_bytes = 268435456,
    .stage_allreduce_engine = true,
    .verbose = 0,
    .output = -1,
    .backend = CGPU_BACKEND_AUTO,
    .allreduce_algorithm = CGPU_ALLREDUCE_AUTO,
    .alltoall_algorithm = CGPU_ALLTOALL_AUTO,
};

static const mca_base_var_enum_value_t backend_values[] = {
    {CGPU_BACKEND_AUTO, "auto"},
    {CGPU_BACKEND_CUDA, "cuda"},
    {CGPU_BACKEND_HOST, "host"},
    {0, NULL},
};

static const mca_base_var_enum_value_t allreduce_values[] = {
    {CGPU_ALLREDUCE_AUTO, "auto"},
    {CGPU_ALLREDUCE_RING, "ring"},
    {CGPU_ALLREDUCE_ONESHOT, "oneshot"},
    {CGPU_ALLREDUCE_TREE, "tree"},
    {CGPU_ALLREDUCE_FALLBACK, "fallback"},
    {0, NULL},
};

static const mca_base_var_enum_value_t stream_order_values[] = {
    {CGPU_ORDER_AUTO, "auto"},
    {CGPU_ORDER_NONE, "none"},
    {CGPU_ORDER_EVENT, "event"},
    {CGPU_ORDER_BLOCKING_STREAM, "stream"},
    {0, NULL},
};

/* bcast / allgather: ring (chain) or the previous module; values shared with allreduce's */
static const mca_base_var_enum_value_t ring_or_fallback_values[] = {
    {CGPU_ALLREDUCE_AUTO, "auto"},
    {CGPU_ALLREDUCE_RING, "ring"},
    {CGPU_ALLREDUCE_FALLBACK, "fallback"},
    {0, NULL},
};

static const mca_base_var_enum_value_t scan_values[] = {
    {CGPU_SCAN_AUTO, "auto"},
    {CGPU_SCAN_ALLGATHER, "allgather"},
    {CGPU_SCAN_FALLBACK, "fallback"},
    {0, NULL},
};

static const mca_base_var_enum_value_t scatter_values[] = {
    {CGPU_SCATTER_AUTO, "auto"},
    {CGPU_SCATTER_BCAST, "ring"},
    {CGPU_SCATTER_FALLBACK, "fallback"},
    {CGPU_SCATTER_RS, "reduce_scatter"},
    {0, NULL},
};

static const mca_base_var_enum_value_t alltoall_values[] = {
    {CGPU_ALLTOALL_AUTO, "auto"},
    {CGPU_ALLTOALL_DIRECT, "direct"},
    {CGPU_ALLTOALL_FALLBACK, "fallback"},
    {0, NULL},
};

/* non-blocking collectives on the engine: auto (see coll_gpu_nb_engine's help), on, off */
static const mca_base_var_enum_value_t nb_engine_values[] = {
    {-1, "auto"},
    {1, "on"},
    {0, "off"},
    {0, NULL},
};

/* ---- texts built from value tables (the pvars' descriptions) ---- */

/* A growing string; on a failed allocation it stays NULL and takes nothing more. */
typedef struct text {
    char *s;
    size_t len, cap;
} text_t;

static void text_add(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text_t *t, const char *fmt, ...)
{
    if (NULL == t->s && 0 != t->cap) {
        return; /* an earlier allocation failed */
    }
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if (t->len + (size_t) n + 1 > t->cap) {
        const size_t cap = 2 * (t->len + (size_t) n + 1);
        char *s = realloc(t->s, cap);
        if (NULL == s) {
            free(t->s);
            t->s = NULL;
            t->cap = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
    va_start(ap, fmt);
    (void) vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    t->len += (size_t) n;
}

char *mca_coll_gpu_values_text(const char *intro, const mca_coll_gpu_value_t *v, size_t n,
                               bool numbered, const char *outro)
{
    text_t t = {0};
    text_add(&t, "%s%sValues: ", NULL != intro ? intro : "",
             NULL != intro && '\0' != intro[0] ? " " : "");
    const char *sep = "";
    for (size_t i = 0; i < n; ++i) {
        if (NULL == v[i].name) {
            continue;
        }
        if (numbered) {
            text_add(&t, "%s%d %s", sep, v[i].value, v[i].name);
        } else {
            text_add(&t, "%s%s", sep, v[i].name);
        }
        if (NULL != v[i].help) {
            text_add(&t, " (%s)", v[i].help);
        }
        sep = ", ";
    }
    text_add(&t, ".%s%s", NULL != outro ? " " : "", NULL != outro ? outro : "");
    return t.s;
}

int mca_coll_gpu_values_enum(const char *name, const mca_coll_gpu_value_t *v, size_t n,
                             mca_base_var_enum_t **out)
{
    *out = NULL;
    mca_base_var_enum_value_t *ev = calloc(n + 1, sizeof(*ev)); /* {0, NULL} ends it */
    if (NULL == ev) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        if (NULL != v[i].name) {
            ev[k].value = v[i].value;
            ev[k].string = v[i].name;
            ++k;
        }
    }
    const int rc = mca_base_var_enum_create(name, ev, out); /* copies the values */
    free(ev);
    if (OPAL_SUCCESS != rc) {
        *out = NULL;
    }
    return rc;
}

/* every parameter is settable and must be the same on all ranks (path decisions use them) */
static void reg(const char *name, const char *help, mca_base_var_type_t type,
                mca_base_var_info_lvl_t lvl, void *storage)
{
    (void) mca_base_component_var_register(&mca_coll_gpu_component.super.collm_version, name,
                                           help, type, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, lvl,
                                           MCA_BASE_VAR_SCOPE_ALL_EQ, storage);
}

static void reg_int(const char *name, const char *help, mca_base_var_info_lvl_t lvl, int *storage)
{
    reg(name, help, MCA_BASE_VAR_TYPE_INT, lvl, storage);
}

static void reg_ulong(const char *name, const char *help, unsigned long *storage)
{
    reg(name, help, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, OPAL_INFO_LVL_6, storage);
}

static void reg_enum(const char *name, const char *help, const mca_base_var_enum_value_t *vals,
                     int *storage)
{
    mca_base_var_enum_t *en = NULL;
    char enum_name[64];
    snprintf(enum_name, sizeof(enum_name), "coll_gpu_%s", name);
    if (OPAL_SUCCESS != mca_base_var_enum_create(enum_name, vals, &en)) {
        en = NULL;
    }
    (void) mca_base_component_var_register(&mca_coll_gpu_component.super.collm_version, name,
                                           help, MCA_BASE_VAR_TYPE_INT, en, 0,
                                           MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_5,
                                           MCA_BASE_VAR_SCOPE_ALL_EQ, storage);
    if (NULL != en) {
        OBJ_RELEASE(en);
    }
}

static int gpu_register(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    cgpu_config_t d;
    cgpu_config_default(&d);

    reg_int("priority",
            "Priority of coll/gpu on communicators it can serve (tuned is 30; higher wins; "
            "negative disables the component)",
            OPAL_INFO_LVL_6, &c->priority);
    reg_int("self_priority",
            "Priority of coll/gpu on communicators of one rank (MPI_COMM_SELF, -np 1, splits "
            "of size 1): it must stay above coll/self's (75), whose memcpy would take device "
            "pointers; coll/gpu copies device buffers itself and passes host-only calls on to "
            "the previous module. Negative: leave one-rank communicators to the other "
            "components",
            OPAL_INFO_LVL_6, &c->self_priority);
    reg_enum("nb_engine",
             "Non-blocking collectives (MPI_Iallreduce, MPI_Ireduce, MPI_Ireduce_scatter_block, "
             "MPI_Ibcast, MPI_Iallgather, MPI_Ialltoall) on the engine (a worker thread per "
             "communicator; on: always, off: staged through the previous module's non-blocking "
             "collectives on host copies); auto: on, except on the cuda backend under "
             "MPI_THREAD_MULTIPLE, where a device-wide CUDA call on any thread (cudaFree, "
             "cudaDeviceSynchronize) between a post and its wait would wait for our kernel, "
             "which waits for peers whose launches their own such calls may hold (see README, "
             "Limits)",
             nb_engine_values, &c->nb_engine);
    reg_int("nb_max_workers",
            "Most worker threads per process for non-blocking collectives on the engine path "
            "(one per communicator that has posted one, ended when the communicator is freed); "
            "past the cap such a call fails with MPI_ERR_OTHER and a message",
            OPAL_INFO_LVL_5, &c->nb_max_workers);
    reg_int("verbose",
            "Verbosity of coll/gpu messages (0: warnings only, 10: decisions and set-up, "
            "50: per-communicator details, 100: per-call trace)",
            OPAL_INFO_LVL_9, &c->verbose);
    reg_enum("backend",
             "Engine backend: auto (the cuda backend where this process sees a usable GPU, "
             "otherwise the component declines), cuda (require a GPU on every rank; without "
             "one the communicator uses the fallback), host (host memory, POSIX shared memory "
             "and C loops; device buffers are staged through host memory; how the test suite "
             "exercises every path without a GPU). Must be the same on every rank",
             backend_values, &c->backend);
    reg_enum("allreduce_algorithm",
             "MPI_Allreduce algorithm: auto (cuda: oneshot up to coll_gpu_cuda_oneshot_bytes x 2 / "
             "ranks, then tree up to coll_gpu_cuda_tree_max_bytes with 3+ ranks, ring above; "
             "host: ring), ring (reduce-scatter + allgather, pipelined), oneshot (cuda: every "
             "rank reads every contribution; ring above coll_gpu_cuda_oneshot_bytes), tree "
             "(cuda: reduce up and broadcast down a binary tree, pipelined), fallback (always "
             "the previous coll module). The host backend runs ring for every choice but "
             "fallback",
             allreduce_values, &c->allreduce_algorithm);
    reg_enum("bcast_algorithm",
             "MPI_Bcast algorithm: auto and ring (a pipelined chain along the ring from the "
             "root, host backend; device buffers are staged through host memory), fallback "
             "(always the previous coll module, device buffers staged)",
             ring_or_fallback_values, &c->bcast_algorithm);
    reg_enum("allgather_algorithm",
             "MPI_Allgather and MPI_Allgatherv (blocking and non-blocking) algorithm: auto and ring (the engine: our "
             "kernels on the cuda backend, a ring on the host backend; allgatherv pads every "
             "block to the largest count), fallback (always the previous coll module, device "
             "buffers staged)",
             ring_or_fallback_values, &c->allgather_algorithm);
    reg_enum("gather_algorithm",
             "MPI_Gather, MPI_Gatherv and MPI_Igather algorithm: auto and ring (an allgather on the engine: "
             "the ranks other than the root receive the whole message too, into memory their "
             "communicator keeps; gatherv pads every block to the largest count, which the "
             "ranks first agree on), fallback (always the previous coll module, device "
             "buffers staged)",
             ring_or_fallback_values, &c->gather_algorithm);
    reg_enum("scatter_algorithm",
             "MPI_Scatter, MPI_Scatterv and MPI_Iscatter algorithm: auto (reduce_scatter for "
             "blocks up to 4 MiB, ring above), ring (a broadcast of the root's whole message on "
             "the engine, into memory their communicator keeps on the other ranks, of which "
             "each keeps its block), reduce_scatter (the engine's reduce-scatter of the root's "
             "message summed, as bytes, with zeros the other ranks keep, as large as the whole "
             "message: each block lands straight in its rank's buffer); scatterv pads every "
             "block to the largest count, which the ranks first agree on; fallback (always the "
             "previous coll module, device buffers staged)",
             scatter_values, &c->scatter_algorithm);
    reg_enum("scan_algorithm",
             "MPI_Scan and MPI_Exscan (blocking and non-blocking) algorithm: auto (cuda backend "
             "inside a node: one oneshot call of our kernels up to coll_gpu_cuda_small_bytes of "
             "input, in which each rank sends its input to the ranks after it, larger a chain "
             "from rank 0 to the last rank; else allgather), allgather (the engine: every "
             "rank's input allgathered, in rounds of coll_gpu_gather_scratch_bytes' share per "
             "rank, into host memory the communicator keeps, then each rank reduces the inputs "
             "of the ranks up to it in rank order, on the host), fallback (the previous coll "
             "module, device buffers staged)",
             scan_values, &c->scan_algorithm);
    reg_ulong("gather_scratch_bytes",
              "MPI_Gather(v), MPI_Scatter(v), MPI_Allgatherv and MPI_Alltoallv on the engine: "
              "the most bytes of a whole message (ranks x bytes per rank; for the v forms "
              "ranks x the largest block) a rank keeps for them per communicator, on the "
              "device for device buffers (alltoallv: up to twice that, one for each side "
              "whose layout is not already padded; a scatter run as a reduce-scatter: the "
              "ranks other than the root keep zeros of that size too); larger calls go to the "
              "previous coll module (device buffers staged), except MPI_Igatherv, "
              "MPI_Iscatterv and MPI_Ialltoallv, whose blocks then move in rounds of this "
              "cap's share. Must be the same on every rank",
              &c->gather_scratch_bytes);
    reg_enum("reduce_algorithm",
             "MPI_Reduce algorithm: auto and ring (a pipelined chain along the ring ending at the "
             "root, host backend; device buffers staged through host memory), fallback (the "
             "previous coll module, device buffers staged)",
             ring_or_fallback_values, &c->reduce_algorithm);
    reg_enum("reduce_scatter_algorithm",
             "MPI_Reduce_scatter_block algorithm: auto and ring (host backend; device buffers "
             "staged through host memory), fallback (the previous coll module, device buffers "
             "staged)",
             ring_or_fallback_values, &c->reduce_scatter_algorithm);
    reg_enum("alltoall_algorithm",
             "MPI_Alltoall and MPI_Alltoallv algorithm: auto, direct (every peer at once "
             "through each rank's staging area; alltoallv pads every block to the largest "
             "count, which the ranks first agree on), fallback (always the previous coll "
             "module)",
             alltoall_values, &c->alltoall_algorithm);
    c->allreduce_min_bytes = 0;
    reg_ulong("allreduce_min_bytes",
              "MPI_Allreduce messages smaller than this many bytes go to the previous coll "
              "module",
              &c->allreduce_min_bytes);
    c->allreduce_max_bytes = 0;
    reg_ulong("allreduce_max_bytes",
              "MPI_Allreduce messages larger than this many bytes go to the previous coll "
              "module (0: no limit)",
              &c->allreduce_max_bytes);
    c->alltoall_min_bytes = 0;
    reg_ulong("alltoall_min_bytes",
              "MPI_Alltoall calls whose per-peer block is smaller than this many bytes go to "
              "the previous coll module",
              &c->alltoall_min_bytes);
    c->alltoall_max_bytes = 0;
    reg_ulong("alltoall_max_bytes",
              "MPI_Alltoall calls whose per-peer block is larger than this many bytes go to "
              "the previous coll module (0: no limit)",
              &c->alltoall_max_bytes);
    c->slot_bytes = (unsigned long) d.slot_bytes;
    reg_ulong("slot_bytes",
              "Bytes per pipeline slot of the ring (the chunk one ring step moves); memory per "
              "rank and communicator is slots x slot_bytes + alltoall_stage_bytes",
              &c->slot_bytes);
    c->slots = d.nslots;
    reg_int("slots", "Pipeline depth of the ring: slots per connection (at least 2)",
            OPAL_INFO_LVL_6, &c->slots);
    c->stage_bytes = (unsigned long) d.stage_bytes;
    reg_ulong("alltoall_stage_bytes",
              "Bytes of each rank's alltoall staging area per communicator (split evenly "
              "among the peers each round)",
              &c->stage_bytes);
    c->max_comms = d.max_comms;
    reg_int("max_comms",
            "Most internal communicators alive per process (each holds one shared segment); "
            "communicators beyond it use the previous coll module (0: no cap)",
            OPAL_INFO_LVL_6, &c->max_comms);
    c->cuda_channels = d.cuda_channels;
    reg_int("cuda_channels",
            "cuda backend: most ring channels (thread blocks, each its own pipeline) per "
            "allreduce; 1 to 64",
            OPAL_INFO_LVL_6, &c->cuda_channels);
    c->cuda_threads = d.cuda_threads;
    reg_int("cuda_threads", "cuda backend: threads per block of the collective kernels (64-1024)",
            OPAL_INFO_LVL_6, &c->cuda_threads);
    c->cuda_slot_bytes = (unsigned long) d.cuda_slot_bytes;
    reg_ulong("cuda_slot_bytes",
              "cuda backend: bytes per ring slot (one step of one channel); device memory per "
              "rank is about cuda_channels x cuda_slots x cuda_slot_bytes",
              &c->cuda_slot_bytes);
    c->cuda_slots = d.cuda_slots;
    reg_int("cuda_slots", "cuda backend: ring pipeline depth per channel (at least 2)",
            OPAL_INFO_LVL_6,
            &c->cuda_slots);
    c->cuda_oneshot_bytes = (unsigned long) d.cuda_oneshot_bytes;
    reg_ulong("cuda_oneshot_bytes",
              "cuda backend: largest allreduce (bytes) the oneshot algorithm takes; also its "
              "buffer per peer (two of them per peer and rank)",
              &c->cuda_oneshot_bytes);
    c->cuda_small_bytes = (unsigned long) d.cuda_small_bytes;
    reg_ulong("cuda_small_bytes",
              "cuda backend: MPI_Bcast, MPI_Reduce (the buffer), MPI_Allgather, MPI_Alltoall and "
              "MPI_Reduce_scatter_block (a rank's block), and MPI_Scan and MPI_Exscan (the "
              "input), up to this many bytes go oneshot: each "
              "rank writes straight into its peers' inboxes and every rank builds its result "
              "after one exchange of flags (resident, like the small allreduce, up to "
              "coll_gpu_cuda_resident_max_bytes); at most coll_gpu_cuda_oneshot_bytes x 2 / "
              "ranks; 0: never (the chains, the ring and the alltoall kernel)",
              &c->cuda_small_bytes);
    c->cuda_oneshot_block_bytes = (unsigned long) d.cuda_oneshot_block_bytes;
    reg_ulong("cuda_oneshot_block_bytes",
              "cuda backend: a oneshot call (launched or resident) runs one thread block per "
              "this many bytes of its message (a rank's block for the block-wise collectives), "
              "at most 32; at least 1024; the same on every rank",
              &c->cuda_oneshot_block_bytes);
    c->cuda_oneshot_small_block_bytes = (unsigned long) d.cuda_oneshot_small_block_bytes;
    reg_ulong("cuda_oneshot_small_block_bytes",
              "cuda backend: a oneshot call takes one thread block per this many bytes instead "
              "of coll_gpu_cuda_oneshot_block_bytes while that makes at most 8 blocks (one "
              "cluster of the resident kernel), never fewer blocks than the other rule; 0 (or at "
              "least coll_gpu_cuda_oneshot_block_bytes): never; else at least 1024; the same "
              "on every rank",
              &c->cuda_oneshot_small_block_bytes);
    c->cuda_ll_bytes = (unsigned long) d.cuda_ll_bytes;
    reg_ulong("cuda_ll_bytes",
              "cuda backend: oneshot calls (launched or resident) of at most this many bytes a "
              "block, on elements of at most 8 bytes, send LL lines: each 8 bytes of data travel "
              "with the call's number in one 16-byte store, so no fence and no separate flag "
              "(in size classes of 1 KiB to 64 KiB, up to 512 KiB / ranks); at most 65536; "
              "0: never; the same on every rank",
              &c->cuda_ll_bytes);
    c->cuda_timeout = d.cuda_timeout_s;
    reg("cuda_timeout",
        "cuda backend: seconds a kernel waits for a peer before the collective fails with an "
        "MPI error instead of hanging (0: wait forever)",
        MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_5, &c->cuda_timeout);
    c->cuda_tree_channels = d.cuda_tree_channels;
    reg_int("cuda_tree_channels",
            "cuda backend: channels of the tree algorithm (two blocks each); 0 disables it. "
            "Device memory: tree_channels x 3 x cuda_slots x cuda_slot_bytes per rank",
            OPAL_INFO_LVL_6, &c->cuda_tree_channels);
    c->cuda_a2a_channels = d.cuda_a2a_channels;
    reg_int("cuda_a2a_channels",
            "cuda backend: alltoall channels, shared out among the peers (each peer gets "
            "a2a_channels / (ranks - 1), at least 1, or the alltoall is host-staged); 0 "
            "host-stages every alltoall. Device memory: a2a_channels x cuda_slots x "
            "cuda_slot_bytes per rank",
            OPAL_INFO_LVL_6, &c->cuda_a2a_channels);
    c->cuda_inbox_pool = d.cuda_inbox_pool;
    reg_int("cuda_inbox_pool",
            "cuda backend: inboxes of released communicators kept for the next ones (each is "
            "reused once every peer of its last communicator has released it; split/dup "
            "loops then allocate and map nothing new). 0 frees each at release",
            OPAL_INFO_LVL_6, &c->cuda_inbox_pool);
    c->cuda_ipc_cache_size = d.cuda_ipc_cache_size;
    reg_int("cuda_ipc_cache_size",
            "cuda backend: peers' inbox mappings no communicator uses that stay open for reuse "
            "(least recently used closed first); mappings in use are never closed",
            OPAL_INFO_LVL_6, &c->cuda_ipc_cache_size);
    c->cuda_channel_min_bytes = (unsigned long) d.cuda_channel_min_bytes;
    reg_ulong("cuda_channel_min_bytes",
              "cuda backend: ring and chain collectives use one more channel (thread block "
              "pair) only while each channel's piece of the buffer (of each rank's block) "
              "keeps at least this many bytes (>= 1), up to coll_gpu_cuda_channels",
              &c->cuda_channel_min_bytes);
    c->cuda_tree_max_bytes = (unsigned long) d.cuda_tree_max_bytes;
    reg_ulong("cuda_tree_max_bytes",
              "cuda backend, auto algorithm: largest allreduce (bytes) given to the tree with 3 "
              "or more ranks (not tuned: no machine with more than 2 GPUs was available)",
              &c->cuda_tree_max_bytes);
    c->ras_timeout = d.ras_timeout_s;
    reg("ras_timeout",
        "RAS watchdog: seconds without progress after which a running collective is reported "
        "(once, with the communicator, operation, sequence number and the ranks that have not "
        "arrived); 0 disables the watchdog thread",
        MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_4, &c->ras_timeout);
    c->cuda_ce_alltoall_min_bytes = (unsigned long) d.cuda_ce_alltoall_min_bytes;
    reg_ulong("cuda_ce_alltoall_min_bytes",
              "cuda backend: alltoalls of at least this many bytes (whole send buffer) run on "
              "the copy engines, straight into the peers' receive buffers (mapped through CUDA "
              "IPC, cached like inboxes), when every rank's buffers allow it; 0: never",
              &c->cuda_ce_alltoall_min_bytes);
    c->cuda_ce_bcast_min_bytes = (unsigned long) d.cuda_ce_bcast_min_bytes;
    reg_ulong("cuda_ce_bcast_min_bytes",
              "cuda backend: 2-rank bcasts of at least this many bytes run on the root's copy "
              "engines, straight into the other rank's buffer; 0: never",
              &c->cuda_ce_bcast_min_bytes);
    c->cuda_wait_polls = d.cuda_wait_polls;
    reg_int("cuda_wait_polls",
            "cuda backend: how the calling thread waits for a collective to complete: it polls "
            "this many times, then gives the core away between polls (other threads of the "
            "process, such as those driving other communicators, can run); -1 polls without "
            "yielding (lowest latency, but it starves other threads sharing the core); a wait "
            "for a collective that lasts runs Open MPI's progress every 8th poll either way; "
            "-2 (auto): 32 under MPI_THREAD_MULTIPLE, else -1",
            OPAL_INFO_LVL_6, &c->cuda_wait_polls);
    c->cuda_ce_reduce_min_bytes = (unsigned long) d.cuda_ce_reduce_min_bytes;
    reg_ulong("cuda_ce_reduce_min_bytes",
              "cuda backend: 2-rank reduces of at least this many bytes: the other rank's "
              "copy engines push its input in flagged pieces straight into the root's output "
              "(mapped through CUDA IPC), and the root's SMs reduce each piece as it lands; "
              "0: never",
              &c->cuda_ce_reduce_min_bytes);
    c->cuda_ce_allreduce_min_bytes = (unsigned long) d.cuda_ce_allreduce_min_bytes;
    reg_ulong("cuda_ce_allreduce_min_bytes",
              "cuda backend: 2-rank allreduces (out of place) of at least this many bytes: each "
              "rank's copy engines push the half of its input the other rank reduces straight "
              "into that rank's output (mapped through CUDA IPC), in flagged pieces; each rank's "
              "SMs reduce its half as the pieces land and store the result in both outputs; "
              "0: never",
              &c->cuda_ce_allreduce_min_bytes);
    c->cuda_resident = d.cuda_resident;
    reg_enum("cuda_resident",
             "cuda backend: small allreduces and the other oneshot collectives (up to "
             "coll_gpu_cuda_resident_max_bytes a block, device buffers) run in a kernel that "
             "stays on the device between calls: the host hands "
             "it each call through mapped host memory and polls for its end (no launch, no "
             "stream synchronize). It ends after coll_gpu_cuda_resident_idle_us without work, "
             "and before any set-up of ours; a cudaDeviceSynchronize or cudaFree made meanwhile "
             "waits for that. auto: on, except under MPI_THREAD_MULTIPLE",
             nb_engine_values, &c->cuda_resident);
    c->cuda_resident_max_bytes = (unsigned long) d.cuda_resident_max_bytes;
    reg_ulong("cuda_resident_max_bytes",
              "cuda backend: largest allreduce (bytes), or block of another oneshot collective, "
              "the resident kernel takes (at most 256 KiB and the oneshot limits); its blocks: "
              "those of a oneshot call of this size, at most 8 on compute capability 9.0 and "
              "later (one thread block cluster); 0: none",
              &c->cuda_resident_max_bytes);
    c->cuda_resident_idle_us = d.cuda_resident_idle_us;
    reg("cuda_resident_idle_us",
        "cuda backend: a resident kernel ends after this many microseconds without a call "
        "(the next call launches it again)",
        MCA_BASE_VAR_TYPE_DOUBLE, OPAL_INFO_LVL_6, &c->cuda_resident_idle_us);
    c->cuda_resident_max_kernels = d.cuda_resident_max_kernels;
    reg_int("cuda_resident_max_kernels",
            "cuda backend: most resident kernels (communicators) per process at once; past it "
            "a communicator launches a kernel per call",
            OPAL_INFO_LVL_6, &c->cuda_resident_max_kernels);
    c->cuda_resident_cluster = d.cuda_resident_cluster;
    reg_int("cuda_resident_cluster",
            "cuda backend: on compute capability 9.0 and later, launch the resident kernel as "
            "thread block clusters: one of at most 8 blocks, or two of 8 (block 0 hands each "
            "call to the others' shared memory, a call of more than 8 blocks through device "
            "memory to the second cluster's first block), which the GPU must place each "
            "within one GPC: 1 only where no "
            "launched kernel of the process is on the device at the launch, no other process "
            "shares the device, and the process's other resident kernels hold at most a "
            "quarter of its multiprocessors (otherwise a mailbox in device memory, as 0); 0 "
            "never, as on older devices; 2 always (placement can then wait behind kernels "
            "that wait for peers: a hang)",
            OPAL_INFO_LVL_9, &c->cuda_resident_cluster);
    c->cuda_resident_gate = d.cuda_resident_gate;
    reg("cuda_resident_gate",
        "cuda backend: a resident call gets its descriptor before the host waits for the "
        "default stream's earlier work (coll_gpu_cuda_stream_order); the kernel takes it, "
        "hands it on and waits at a gate, before it reads any buffer, until that wait is "
        "over (block 0 reads the gate and tells the call's other blocks). A gate shut past "
        "coll_gpu_cuda_resident_idle_us gives the call back and ends the kernel, as an idle "
        "one ends, so default-stream work that needs its multiprocessors gets them. false: "
        "the descriptor after the wait",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_9, &c->cuda_resident_gate);
    c->cuda_setup_exclusive = d.cuda_setup_exclusive;
    reg("cuda_setup_exclusive",
        "cuda backend: a communicator's CUDA set-up (allocations, IPC export and open) first "
        "waits, for at most coll_gpu_cuda_setup_wait_ms, until no collective kernel of the "
        "process is in flight, in case the CUDA runtime makes such calls wait for running "
        "kernels; false: it never waits (set-up runs beside kernels in flight)",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_9, &c->cuda_setup_exclusive);
    c->cuda_setup_wait_ms = d.cuda_setup_wait_ms;
    reg_int("cuda_setup_wait_ms",
            "cuda backend: how long a set-up waits for the process's collectives in flight to "
            "end (coll_gpu_cuda_setup_exclusive) before it goes ahead beside them; -1: for "
            "ever, which deadlocks threads of different ranks that set communicators up while "
            "others run collectives (see README)",
            OPAL_INFO_LVL_9, &c->cuda_setup_wait_ms);
    c->cuda_time_sliced = d.cuda_time_sliced;
    reg("cuda_time_sliced",
        "cuda backend: where ranks of a communicator share a GPU and not all of them are MPS "
        "clients, the GPU runs their kernels in turn, a time slice each, and a collective "
        "(whose kernels wait for each other) takes milliseconds; so by default (with "
        "coll_gpu_backend auto) such a communicator runs the host backend, device buffers "
        "staged through host copies. true: run our kernels there anyway (tests of the "
        "kernels with more ranks than GPUs)",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_6, &c->cuda_time_sliced);
    c->cuda_block_budget = d.cuda_block_budget;
    reg_int("cuda_block_budget",
            "cuda backend: most thread blocks of this process's collective kernels in flight on "
            "a GPU at once. Our kernels wait on the GPU for their peers' kernels, so calls in "
            "flight on several communicators must all fit on the GPU at once, or ranks that "
            "posted them in different orders wait for each other for ever; past the budget a "
            "call runs its parts on fewer blocks, one after another (its peers may use any "
            "number: the decision is each rank's own). -1: what the GPU holds at once "
            "(multiprocessors x blocks each, divided among the ranks on it); 0: no budget, "
            "every call all its blocks (a call the GPU cannot hold beside the others can hang)",
            OPAL_INFO_LVL_6, &c->cuda_block_budget);
    c->cuda_block_spare = d.cuda_block_spare;
    reg_int("cuda_block_spare",
            "cuda backend: of coll_gpu_cuda_block_budget, the blocks kept for calls that find "
            "the others taken, one block (or pair) each, so that that many more calls in "
            "flight at once still each have a block on the GPU (past them a call takes a "
            "block over the budget, which the GPU may not hold beside the others). -1: one "
            "for every other communicator of the process on the GPU (each has at most one "
            "call's kernel at a time), at most half the budget",
            OPAL_INFO_LVL_6, &c->cuda_block_spare);
    c->cuda_stream_order = d.cuda_stream_order;
    reg_enum("cuda_stream_order",
             "cuda backend: how a collective on device memory starts on the GPU only after the "
             "work already queued on the default stream and on every blocking stream (a "
             "cudaMemcpy from pageable memory or a cudaMemset that filled the buffer may still "
             "be running when it returns). event: an event on the legacy default stream that "
             "our non-blocking stream waits for (about 1 us per call), stream: our stream is a "
             "blocking one (no cost, but ordered only after the legacy stream, not after the "
             "application's own blocking streams; a default-stream call made by another thread "
             "may wait for our collective), none: the application synchronizes its buffers "
             "itself, auto: event",
             stream_order_values, &c->cuda_stream_order);
    c->ras_abort_on_timeout = d.ras_abort_on_timeout;
    reg("ras_abort_on_timeout",
        "RAS watchdog: also fail the stuck collective (host backend) with an MPI error instead "
        "of waiting forever; the communicator is then failed (free it and make a new one)",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_4, &c->ras_abort_on_timeout);
    reg_ulong("stage_chunk_bytes",
              "Staged allreduce (datatypes, ops or sizes the engine does not serve, on device "
              "buffers): chunk size of the pipeline that copies chunk i+1 to pinned host "
              "memory and chunk i-1 back while the previous coll module reduces chunk i; "
              "every rank must use the same value; 0: no pipeline (one host copy of the "
              "whole buffer)",
              &c->stage_chunk_bytes);
    reg_ulong("stage_pinned_bytes",
              "Host copies of device buffers for the collectives handed to the previous coll "
              "module: pinned host memory kept between calls, at most this many bytes per "
              "process (a copy that finds none free gets unpinned memory, which the GPU copies "
              "at a fraction of the speed); 0: never pinned",
              &c->stage_pinned_bytes);
    reg_ulong("stage_pipeline_min_bytes",
              "Staged allreduce: contiguous messages of at least this many bytes go through "
              "the pipeline (host buffers too: reduced chunk by chunk, with no copy), smaller "
              "ones through one host copy",
              &c->stage_pipeline_min_bytes);
    reg("stage_allreduce_engine",
        "Staged allreduce, pipelined sizes: the engine moves the data (an alltoall of each "
        "chunk's blocks, then an allgather of the results) and the host only reduces, with "
        "Open MPI's op (user functions and derived datatypes included), while the next "
        "chunk's copies run; false: the previous coll module's allreduce on each chunk's "
        "pinned host copy. Taken where the communicator's engine is set up and no two of its "
        "ranks share a GPU; every rank must use the same value",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, &c->stage_allreduce_engine);
    c->stage_allreduce_engine_shared = false;
    reg("stage_allreduce_engine_shared",
        "Staged allreduce: let the engine move the data also where ranks of the communicator "
        "share a GPU. Worth it under MPS, where their kernels run at once; without MPS each "
        "engine call waits for a time slice and the previous coll module is faster. Every "
        "rank must use the same value",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_5, &c->stage_allreduce_engine_shared);
    c->stage_host_buffers = false;
    reg("stage_host_buffers",
        "Testing only: treat host buffers like device buffers on the staged paths (copy them "
        "through host mirrors before the previous coll module sees them, and through the "
        "pinned pieces of the inter-node reduction), so the staging code is exercised on "
        "machines without a GPU",
        MCA_BASE_VAR_TYPE_BOOL, OPAL_INFO_LVL_9, &c->stage_host_buffers);
    c->profiler = NULL;
    (void) mca_base_component_var_register(
        &mca_coll_gpu_component.super.collm_version, "profiler",
        "Path of a profiler plugin (a shared object exporting cgpuProfiler_v1, see "
        "include/coll_gpu_profiler_v1.h); empty: no profiler. A missing or broken plugin gives "
        "one warning and coll/gpu runs without it",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &c->profiler);
    c->ofi_provider = NULL;
    (void) mca_base_component_var_register(
        &mca_coll_gpu_component.super.collm_version, "ofi_provider",
        "Inter-node proxy: the libfabric provider (e.g. tcp, shm, verbs, efa, cxi); empty: the "
        "best one available, tcp as the fallback. Every rank must name the same one",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_ALL_EQ, &c->ofi_provider);
    c->proxy_max_peers = d.proxy_max_peers;
    reg_int("proxy_max_peers",
            "Inter-node proxy: peers one process connects to at most (only peers an algorithm "
            "uses are connected); past it the collective fails with a message. 0: no cap",
            OPAL_INFO_LVL_5, &c->proxy_max_peers);
    c->proxy_max_inflight = d.proxy_max_inflight;
    reg_int("proxy_max_inflight",
            "Inter-node proxy: operations posted to libfabric at once per process (the rest "
            "wait in its queue); an alltoall keeps half as many peers in flight (>= 1)",
            OPAL_INFO_LVL_5, &c->proxy_max_inflight);
    c->proxy_bounce_bytes = d.proxy_bounce_bytes;
    reg_ulong("proxy_bounce_bytes",
              "Inter-node proxy: pinned host bounce buffer per chunk of device memory (two per "
              "operation, so copies overlap transfers), unless the provider reads device "
              "memory itself (FI_HMEM)",
              &c->proxy_bounce_bytes);
    c->fake_nodes = 0;
    reg_int("fake_nodes",
            "Testing: place the job's ranks on this many fake nodes (world rank r on node "
            "r * N / size), so one machine runs the inter-node path for real. 0: real nodes",
            OPAL_INFO_LVL_9, &c->fake_nodes);
    return mca_coll_gpu_pvars_register();
}

void mca_coll_gpu_log(int level, const char *msg)
{
    if (CGPU_LOG_WARN == level) {
        opal_output(0, "coll/gpu: %s", msg);
    } else {
        opal_output_verbose(level, mca_coll_gpu_component.output, "coll/gpu: %s", msg);
    }
}

/* The engine's long waits run Open MPI's progress, so that a peer blocked in a receive
 * from this rank (a rendezvous the sender must push) is not left waiting on us. */
static void engine_progress(void)
{
    (void) opal_progress();
}

static int gpu_open(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    c->output = opal_output_open(NULL);
    opal_output_set_verbosity(c->output, c->verbose);

    cgpu_config_t cfg;
    cgpu_config_default(&cfg);
    cfg.backend = (cgpu_backend_t) c->backend;
    cfg.slot_bytes = c->slot_bytes;
    cfg.nslots = c->slots;
    cfg.stage_bytes = c->stage_bytes;
    cfg.max_comms = c->max_comms;
    cfg.cuda_channels = c->cuda_channels;
    cfg.cuda_threads = c->cuda_threads;
    cfg.cuda_slot_bytes = c->cuda_slot_bytes;
    cfg.cuda_slots = c->cuda_slots;
    cfg.cuda_oneshot_bytes = c->cuda_oneshot_bytes;
    cfg.cuda_small_bytes = c->cuda_small_bytes;
    cfg.cuda_oneshot_block_bytes = c->cuda_oneshot_block_bytes;
    cfg.cuda_oneshot_small_block_bytes = c->cuda_oneshot_small_block_bytes;
    cfg.cuda_ll_bytes = c->cuda_ll_bytes;
    cfg.cuda_timeout_s = c->cuda_timeout;
    cfg.cuda_tree_channels = c->cuda_tree_channels;
    cfg.cuda_a2a_channels = c->cuda_a2a_channels;
    cfg.cuda_inbox_pool = c->cuda_inbox_pool;
    cfg.cuda_ipc_cache_size = c->cuda_ipc_cache_size;
    cfg.cuda_tree_max_bytes = c->cuda_tree_max_bytes;
    cfg.cuda_channel_min_bytes = c->cuda_channel_min_bytes;
    cfg.cuda_stream_order = c->cuda_stream_order; /* the autos: resolved in init_query */
    cfg.cuda_wait_polls = c->cuda_wait_polls;
    cfg.cuda_ce_alltoall_min_bytes = c->cuda_ce_alltoall_min_bytes;
    cfg.cuda_ce_bcast_min_bytes = c->cuda_ce_bcast_min_bytes;
    cfg.cuda_ce_reduce_min_bytes = c->cuda_ce_reduce_min_bytes;
    cfg.cuda_ce_allreduce_min_bytes = c->cuda_ce_allreduce_min_bytes;
    cfg.cuda_resident = c->cuda_resident;
    cfg.cuda_resident_max_bytes = c->cuda_resident_max_bytes;
    cfg.cuda_resident_idle_us = c->cuda_resident_idle_us;
    cfg.cuda_resident_max_kernels = c->cuda_resident_max_kernels;
    cfg.cuda_resident_cluster = c->cuda_resident_cluster;
    cfg.cuda_resident_gate = c->cuda_resident_gate;
    cfg.cuda_setup_exclusive = c->cuda_setup_exclusive;
    cfg.cuda_setup_wait_ms = c->cuda_setup_wait_ms;
    cfg.cuda_time_sliced = c->cuda_time_sliced;
    cfg.cuda_block_budget = c->cuda_block_budget;
    cfg.cuda_block_spare = c->cuda_block_spare;
    cfg.profiler = c->profiler;
    cfg.ofi_provider = c->ofi_provider;
    cfg.stage_host_buffers = c->stage_host_buffers;
    cfg.proxy_max_peers = c->proxy_max_peers;
    cfg.proxy_max_inflight = c->proxy_max_inflight;
    cfg.proxy_bounce_bytes = c->proxy_bounce_bytes;
    if (c->fake_nodes > 0) {
        /* the launcher's world rank and size (the world communicator does not exist yet) */
        const char *r = getenv("OMPI_COMM_WORLD_RANK"), *n = getenv("OMPI_COMM_WORLD_SIZE");
        const long rank = NULL != r ? atol(r) : 0, size = NULL != n ? atol(n) : 1;
        cfg.fake_node = mca_coll_gpu_fake_node(rank, size);
    }
    cfg.ras_timeout_s = c->ras_timeout;
    cfg.ras_abort_on_timeout = c->ras_abort_on_timeout;
    cfg.verbose = c->verbose;
    cfg.log = mca_coll_gpu_log;
    cfg.progress = engine_progress;
    cgpu_status_t st = cgpu_engine_init(&cfg);
    c->engine_up = (CGPU_OK == st);
    if (c->engine_up) {
        mca_coll_gpu_nb_open();
    }
    if (!c->engine_up) {
        opal_output(0,
                    "coll/gpu: engine not started (%s): check coll_gpu_slot_bytes (>= 64), "
                    "coll_gpu_slots (>= 2), coll_gpu_alltoall_stage_bytes (>= 64), "
                    "coll_gpu_cuda_channels (1-64), coll_gpu_cuda_threads (64-1024), "
                    "coll_gpu_cuda_slot_bytes (>= 4096), coll_gpu_cuda_slots (>= 2), "
                    "coll_gpu_cuda_tree_channels (0-64), coll_gpu_cuda_a2a_channels (0-64), "
                    "coll_gpu_cuda_inbox_pool and coll_gpu_cuda_ipc_cache_size (>= 0), "
                    "coll_gpu_cuda_channel_min_bytes (>= 1), coll_gpu_proxy_max_peers (>= 0), "
                    "coll_gpu_proxy_max_inflight (>= 1), coll_gpu_proxy_bounce_bytes (>= 4096); "
                    "coll/gpu stays out of the way",
                    cgpu_status_string(st));
    }
    return OMPI_SUCCESS;
}

static int gpu_close(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    mca_coll_gpu_nb_close();
    mca_coll_gpu_mirror_pool_drain();
    if (c->engine_up) {
        cgpu_engine_fini();
        c->engine_up = false;
    }
    if (c->output >= 0) {
        opal_output_close(c->output);
        c->output = -1;
    }
    return OMPI_SUCCESS;
}
