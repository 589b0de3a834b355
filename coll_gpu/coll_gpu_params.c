/*
 * coll/gpu: every MCA parameter in one table (params[] below), its help texts and its checks.
 *
 * The table registers them all in one place, so `ompi_info --param coll gpu --level 9` shows
 * them all, and at open each number is checked against its own row, so that a mistake is
 * explained once and by name. One rule for every number: a value outside the row's range, or
 * one that is not a number at all, is replaced by the parameter's default, and rank 0 prints
 * one line naming the parameter, the value given, what is accepted and the value used. The
 * job runs on: a wrong tuning value is no reason to stop a job the default serves, and every
 * rank replaces it alike. Enumerated values are checked by Open MPI as it reads them (its own
 * message lists the valid ones, and the default stays). A set-up that cannot work as asked (a
 * coll list without the components we pass calls to, a priority that loses to them, the cuda
 * backend without a GPU) gets one line too, at open, where every process knows about it.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_INIT
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"
#include "coll_gpu_params.h"

#include "opal/util/output.h"

/* ---- the values of the enumerated parameters (their help lists them from here) ---- */

static const mca_coll_gpu_value_t backend_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_BACKEND_AUTO, "auto",
                       "the cuda backend where this process sees a usable GPU, otherwise "
                       "the component declines"),
    MCA_COLL_GPU_VALUE(CGPU_BACKEND_CUDA, "cuda",
                       "require a GPU on every rank; where a node has none, one line says "
                       "so and its communicators use the other coll components"),
    MCA_COLL_GPU_VALUE(CGPU_BACKEND_HOST, "host",
                       "host memory, POSIX shared memory and C loops; device buffers are "
                       "staged through host memory; how the test suite exercises every "
                       "path without a GPU"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(backend_values) == CGPU_BACKEND_HOST + 1,
               "a cgpu_backend_t value without a row in backend_values");

static const mca_coll_gpu_value_t allreduce_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_ALLREDUCE_AUTO, "auto",
                       "cuda: oneshot up to coll_gpu_cuda_oneshot_bytes x 2 / ranks, then "
                       "tree up to coll_gpu_cuda_tree_max_bytes (default 0: none) with 3+ "
                       "ranks, ring above; host: ring"),
    MCA_COLL_GPU_VALUE(CGPU_ALLREDUCE_RING, "ring", "reduce-scatter + allgather, pipelined"),
    MCA_COLL_GPU_VALUE(CGPU_ALLREDUCE_FALLBACK, "fallback", "always the previous coll module"),
    MCA_COLL_GPU_VALUE(CGPU_ALLREDUCE_ONESHOT, "oneshot",
                       "cuda: every rank reads every contribution; ring above "
                       "coll_gpu_cuda_oneshot_bytes"),
    MCA_COLL_GPU_VALUE(CGPU_ALLREDUCE_TREE, "tree",
                       "cuda: reduce up and broadcast down a binary tree, pipelined"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(allreduce_values) == CGPU_ALLREDUCE_TREE + 1,
               "a cgpu_allreduce_alg_t value without a row in allreduce_values");

/* bcast, allgather, gather, reduce, reduce_scatter: the engine's one algorithm, or the previous
 * module (values of the allreduce enum, each collective saying what its ring is) */
#define RING_OR_FALLBACK(ring_help, fallback_help)                                                 \
    {                                                                                              \
        {CGPU_ALLREDUCE_AUTO, "auto", "as ring"}, {CGPU_ALLREDUCE_RING, "ring", ring_help},        \
            {CGPU_ALLREDUCE_FALLBACK, "fallback", fallback_help},                                  \
    }
static const mca_coll_gpu_value_t bcast_values[] = RING_OR_FALLBACK(
    "a pipelined chain along the ring from the root, host backend; device buffers are staged "
    "through host memory",
    "always the previous coll module, device buffers staged");
static const mca_coll_gpu_value_t allgather_values[] = RING_OR_FALLBACK(
    "the engine: our kernels on the cuda backend, a ring on the host backend; allgatherv pads "
    "every block to the largest count",
    "always the previous coll module, device buffers staged");
static const mca_coll_gpu_value_t gather_values[] = RING_OR_FALLBACK(
    "an allgather on the engine: the ranks other than the root receive the whole message too, "
    "into memory their communicator keeps; gatherv pads every block to the largest count, "
    "which the ranks first agree on",
    "always the previous coll module, device buffers staged");
static const mca_coll_gpu_value_t reduce_values[] = RING_OR_FALLBACK(
    "a pipelined chain along the ring ending at the root, host backend; device buffers staged "
    "through host memory",
    "the previous coll module, device buffers staged");
static const mca_coll_gpu_value_t reduce_scatter_values[] =
    RING_OR_FALLBACK("host backend; device buffers staged through host memory",
                     "the previous coll module, device buffers staged");

_Static_assert(((size_t) 4 << 20) == CGPU_SCATTER_RS_AUTO_MAX,
               "the help of coll_gpu_scatter_algorithm's auto says 4 MiB");
static const mca_coll_gpu_value_t scatter_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_SCATTER_AUTO, "auto",
                       "reduce_scatter for blocks up to 4 MiB, ring above"),
    MCA_COLL_GPU_VALUE(CGPU_SCATTER_BCAST, "ring",
                       "a broadcast of the root's whole message on the engine, into memory "
                       "their communicator keeps on the other ranks, of which each keeps "
                       "its block"),
    MCA_COLL_GPU_VALUE(CGPU_SCATTER_FALLBACK, "fallback",
                       "always the previous coll module, device buffers staged"),
    MCA_COLL_GPU_VALUE(CGPU_SCATTER_RS, "reduce_scatter",
                       "the engine's reduce-scatter of the root's message summed, as bytes, "
                       "with zeros the other ranks keep, as large as the whole message: each "
                       "block lands straight in its rank's buffer"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(scatter_values) == CGPU_SCATTER_RS + 1,
               "a cgpu_scatter_alg_t value without a row in scatter_values");

static const mca_coll_gpu_value_t scan_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_SCAN_AUTO, "auto",
                       "cuda backend inside a node: one oneshot call of our kernels up to "
                       "coll_gpu_cuda_small_bytes of input, in which each rank sends its input "
                       "to the ranks after it, larger a chain from rank 0 to the last rank; "
                       "else allgather"),
    MCA_COLL_GPU_VALUE(CGPU_SCAN_ALLGATHER, "allgather",
                       "the engine: every rank's input allgathered, in rounds of "
                       "coll_gpu_gather_scratch_bytes' share per rank, into host memory the "
                       "communicator keeps, then each rank reduces the inputs of the ranks "
                       "up to it in rank order, on the host"),
    MCA_COLL_GPU_VALUE(CGPU_SCAN_FALLBACK, "fallback",
                       "the previous coll module, device buffers staged"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(scan_values) == CGPU_SCAN_FALLBACK + 1,
               "a cgpu_scan_alg_t value without a row in scan_values");

static const mca_coll_gpu_value_t alltoall_values[] = {
    MCA_COLL_GPU_VALUE(CGPU_ALLTOALL_AUTO, "auto", "as direct"),
    MCA_COLL_GPU_VALUE(CGPU_ALLTOALL_DIRECT, "direct",
                       "every peer at once through each rank's staging area; alltoallv "
                       "pads every block to the largest count, which the ranks first "
                       "agree on"),
    MCA_COLL_GPU_VALUE(CGPU_ALLTOALL_FALLBACK, "fallback", "always the previous coll module"),
};
_Static_assert(MCA_COLL_GPU_NVALUES(alltoall_values) == CGPU_ALLTOALL_FALLBACK + 1,
               "a cgpu_alltoall_alg_t value without a row in alltoall_values");

static const mca_coll_gpu_value_t stream_order_values[] = {
    {CGPU_ORDER_AUTO, "auto", "event"},
    {CGPU_ORDER_NONE, "none", "the application synchronizes its buffers itself"},
    {CGPU_ORDER_EVENT, "event",
     "an event on the legacy default stream that our non-blocking stream waits for (about 1 us "
     "per call)"},
    {CGPU_ORDER_BLOCKING_STREAM, "stream",
     "our stream is a blocking one (no cost, but ordered only after the legacy stream, not "
     "after the application's own blocking streams; a default-stream call made by another "
     "thread may wait for our collective)"},
};
_Static_assert(MCA_COLL_GPU_NVALUES(stream_order_values) ==
                   CGPU_ORDER_BLOCKING_STREAM - CGPU_ORDER_AUTO + 1,
               "a CGPU_ORDER_* value without a row in stream_order_values");

/* the non-blocking collectives of MCA_COLL_GPU_NB_ENGINE_OPS, as one string literal */
#define NB_OP_NAME(slot, mpi) mpi ", "
static const mca_coll_gpu_value_t nb_engine_values[] = {
    {-1, "auto",
     "on, at every thread level (as with NCCL, no thread may make a device-wide CUDA call, "
     "cudaFree or cudaDeviceSynchronize, between a post on device buffers and its wait: it "
     "would wait for our kernel, which waits for peers whose launches their own such calls may "
     "hold; see README, Limits)"},
    {1, "on", "always"},
    {0, "off", "staged through the previous module's non-blocking collectives on host copies"},
};

static const mca_coll_gpu_value_t resident_values[] = {
    {-1, "auto", "on"},
    {1, "on", NULL},
    {0, "off", "a kernel launched per call"},
};

static const mca_coll_gpu_value_t host_rule_values[] = {
    {MCA_COLL_GPU_HOST_RULE_MEASURED, "measured",
     "MPI_Allreduce, MPI_Alltoall, MPI_Bcast and MPI_Allgather (blocking) go to the previous "
     "module wherever it measured faster (docs/performance.md): on one node, at 2 ranks below "
     "512 bytes (the allreduce below 2 KiB; alltoall and allgather blocks from 1 MiB too), at more "
     "ranks every size"},
    {MCA_COLL_GPU_HOST_RULE_ENGINE, "engine", "the engine takes them all (the test suite)"},
};

/* ---- the table of every parameter ---- */

typedef struct param {
    const char *name; /* after "coll_gpu_" */
    mca_base_var_type_t type;
    mca_base_var_info_lvl_t lvl;
    size_t off; /* its storage: offsetof(mca_coll_gpu_component_t, ...) */
    const char *help;
    /* enumerated (type INT): the values, listed after the help, and a text after the list */
    const mca_coll_gpu_value_t *values;
    size_t nvalues;
    const char *outro;
    /* numbers: accepted from min to max (ranged; else the type's whole range), 0 too where
     * zero_ok (an "off" below min), a multiple of align where > 1 (the engine rounds down) */
    bool ranged;
    double min, max;
    bool zero_ok;
    unsigned long align;
    bool local; /* a per-process path: scope READONLY (else ALL_EQ: the same on every rank) */
} param_t;

#define OFF(field) offsetof(mca_coll_gpu_component_t, field)
#define P_INT(n, f, l)                                                                             \
    .name = (n), .type = MCA_BASE_VAR_TYPE_INT, .lvl = OPAL_INFO_LVL_##l, .off = OFF(f)
#define P_ULONG(n, f)                                                                              \
    .name = (n), .type = MCA_BASE_VAR_TYPE_UNSIGNED_LONG, .lvl = OPAL_INFO_LVL_6, .off = OFF(f)
#define P_DOUBLE(n, f, l)                                                                          \
    .name = (n), .type = MCA_BASE_VAR_TYPE_DOUBLE, .lvl = OPAL_INFO_LVL_##l, .off = OFF(f)
#define P_BOOL(n, f, l)                                                                            \
    .name = (n), .type = MCA_BASE_VAR_TYPE_BOOL, .lvl = OPAL_INFO_LVL_##l, .off = OFF(f)
#define P_STRING(n, f, l)                                                                          \
    .name = (n), .type = MCA_BASE_VAR_TYPE_STRING, .lvl = OPAL_INFO_LVL_##l, .off = OFF(f)
#define P_ENUM(n, f, vals)                                                                         \
    .name = (n), .type = MCA_BASE_VAR_TYPE_INT, .lvl = OPAL_INFO_LVL_5, .off = OFF(f),             \
    .values = (vals), .nvalues = MCA_COLL_GPU_NVALUES(vals)
#define RANGE(lo, hi) .ranged = true, .min = (lo), .max = (hi)
#define AT_LEAST(lo) RANGE((lo), HUGE_VAL)

// clang-format off
static const param_t params[] = {
    {P_INT("priority", priority, 6),
     .help = "Priority of coll/gpu on communicators it can serve (higher wins); it must be "
             "above the priorities of the components coll/gpu passes calls on to (tuned 30, "
             "basic and libnbc 10, where the coll list has them): a value from 0 up to theirs "
             "gives one warning and the default (or one above theirs). Negative: disables the "
             "component"},
    {P_INT("self_priority", self_priority, 6),
     .help = "Priority of coll/gpu on communicators of one rank (MPI_COMM_SELF, -np 1, splits "
             "of size 1): it must stay above coll/self's (75), whose memcpy would take device "
             "pointers (and above basic's and libnbc's); coll/gpu copies device buffers itself "
             "and passes host-only calls on to the previous module. A value from 0 up to "
             "theirs gives one warning and the default. Negative: leave one-rank "
             "communicators to the other components"},
    {P_ENUM("nb_engine", nb_engine, nb_engine_values),
     .help = "Non-blocking collectives on the engine: " MCA_COLL_GPU_NB_ENGINE_OPS(NB_OP_NAME)
             "on communicators of two or more ranks, each run by a worker thread of its "
             "communicator."},
    {P_INT("nb_max_workers", nb_max_workers, 5), AT_LEAST(0),
     .help = "Most worker threads per process for non-blocking collectives on the engine path, "
             "lent to the communicators that post them (one whose every call was completed "
             "and freed gives its thread back when another needs one); a post while every "
             "thread is held by a communicator with calls outstanding fails with MPI_ERR_OTHER "
             "and a message"},
    {P_INT("verbose", verbose, 9),
     .help = "Verbosity of coll/gpu messages (0: warnings only, 10: decisions and set-up, "
             "50: per-communicator details, 100: per-call trace)"},
    {P_STRING("verbose_subsystems", verbose_subsystems, 9), .local = true,
     .help = "Which parts' messages above warnings print (a comma-separated list of "
             CGPU_SUBSYS_NAMES ", or all); warnings always print. An unknown name gives one "
             "line and all"},
    {P_ENUM("backend", backend, backend_values),
     .help = "Engine backend.", .outro = "Must be the same on every rank"},
    {P_ENUM("host_rule", host_rule, host_rule_values),
     .help = "Host backend: which calls the previous coll module takes because it is faster.",
     .outro = "Must be the same on every rank"},
    {P_ENUM("allreduce_algorithm", allreduce_algorithm, allreduce_values),
     .help = "MPI_Allreduce algorithm.",
     .outro = "The host backend runs ring for every choice but fallback"},
    {P_ENUM("bcast_algorithm", bcast_algorithm, bcast_values),
     .help = "MPI_Bcast algorithm."},
    {P_ENUM("allgather_algorithm", allgather_algorithm, allgather_values),
     .help = "MPI_Allgather and MPI_Allgatherv (blocking and non-blocking) algorithm."},
    {P_ENUM("gather_algorithm", gather_algorithm, gather_values),
     .help = "MPI_Gather, MPI_Gatherv and MPI_Igather algorithm."},
    {P_ENUM("scatter_algorithm", scatter_algorithm, scatter_values),
     .help = "MPI_Scatter, MPI_Scatterv and MPI_Iscatter algorithm.",
     .outro = "Scatterv pads every block to the largest count, which the ranks first agree on"},
    {P_ENUM("scan_algorithm", scan_algorithm, scan_values),
     .help = "MPI_Scan and MPI_Exscan (blocking and non-blocking) algorithm."},
    {P_ULONG("gather_scratch_bytes", gather_scratch_bytes),
     .help = "MPI_Gather(v), MPI_Scatter(v), MPI_Allgatherv and MPI_Alltoallv on the engine: "
             "the most bytes of a whole message (ranks x bytes per rank; for the v forms "
             "ranks x the largest block) a rank keeps for them per communicator, on the "
             "device for device buffers (alltoallv: up to twice that, one for each side "
             "whose layout is not already padded; a scatter run as a reduce-scatter: the "
             "ranks other than the root keep zeros of that size too); larger calls go to the "
             "previous coll module (device buffers staged), except MPI_Igatherv, "
             "MPI_Iscatterv and MPI_Ialltoallv, whose blocks then move in rounds of this "
             "cap's share. Must be the same on every rank"},
    {P_ENUM("reduce_algorithm", reduce_algorithm, reduce_values),
     .help = "MPI_Reduce algorithm."},
    {P_ENUM("reduce_scatter_algorithm", reduce_scatter_algorithm, reduce_scatter_values),
     .help = "MPI_Reduce_scatter_block algorithm."},
    {P_ENUM("alltoall_algorithm", alltoall_algorithm, alltoall_values),
     .help = "MPI_Alltoall and MPI_Alltoallv algorithm."},
    {P_ULONG("allreduce_min_bytes", allreduce_min_bytes),
     .help = "MPI_Allreduce messages smaller than this many bytes go to the previous coll "
             "module"},
    {P_ULONG("allreduce_max_bytes", allreduce_max_bytes),
     .help = "MPI_Allreduce messages larger than this many bytes go to the previous coll "
             "module (0: no limit)"},
    {P_ULONG("alltoall_min_bytes", alltoall_min_bytes),
     .help = "MPI_Alltoall calls whose per-peer block is smaller than this many bytes go to "
             "the previous coll module"},
    {P_ULONG("alltoall_max_bytes", alltoall_max_bytes),
     .help = "MPI_Alltoall calls whose per-peer block is larger than this many bytes go to "
             "the previous coll module (0: no limit)"},
    {P_ULONG("slot_bytes", slot_bytes), AT_LEAST(64), .align = 64,
     .help = "Bytes per pipeline slot of the ring (the chunk one ring step moves); memory per "
             "rank and communicator is slots x slot_bytes + alltoall_stage_bytes"},
    {P_INT("slots", slots, 6), AT_LEAST(2),
     .help = "Pipeline depth of the ring: slots per connection (a rank holds the slot it "
             "received while it waits for room at its right neighbour, so one slot deadlocks "
             "from 3 ranks on)"},
    {P_ULONG("alltoall_stage_bytes", stage_bytes), AT_LEAST(64), .align = 64,
     .help = "Bytes of each rank's alltoall staging area per communicator (split evenly "
             "among the peers each round)"},
    {P_ULONG("shared_stage_bytes", shared_stage_bytes), .align = 64,
     .help = "Communicators whose ranks share a GPU without MPS (device buffers staged through "
             "host memory): each rank's staging area is at least this large, since a large "
             "allreduce goes through it in rounds of a third of it and every round costs the "
             "CUDA calls that queue and wait for its copies. Memory per rank and such "
             "communicator in /dev/shm; 0: coll_gpu_alltoall_stage_bytes. Rank 0's value "
             "counts"},
    {P_INT("shm_pool", shm_pool, 6), AT_LEAST(0),
     .help = "Shared segments of released communicators each process keeps for the next "
             "ones of the same processes (a split/dup loop then makes and maps none), and "
             "eight times as many idle mappings of its peers' segments; each kept segment "
             "holds its size of /dev/shm, without a name there. 0 unmaps each at release"},
    {P_INT("max_comms", max_comms, 6), AT_LEAST(0),
     .help = "Most internal communicators alive per process (each holds one shared segment); "
             "communicators beyond it use the previous coll module (0: no cap)"},
    {P_INT("cuda_channels", cuda_channels, 6), RANGE(1, 64),
     .help = "cuda backend: most ring channels (thread blocks, each its own pipeline) per "
             "allreduce"},
    {P_INT("cuda_threads", cuda_threads, 6), RANGE(64, 1024),
     .help = "cuda backend: threads per block of the collective kernels"},
    {P_ULONG("cuda_slot_bytes", cuda_slot_bytes), AT_LEAST(4096),
     .help = "cuda backend: bytes per ring slot (one step of one channel); device memory per "
             "rank is about cuda_channels x cuda_slots x cuda_slot_bytes"},
    {P_INT("cuda_slots", cuda_slots, 6), AT_LEAST(2),
     .help = "cuda backend: ring pipeline depth per channel"},
    {P_ULONG("cuda_oneshot_bytes", cuda_oneshot_bytes),
     .help = "cuda backend: largest allreduce (bytes) the oneshot algorithm takes; also its "
             "buffer per peer (two of them per peer and rank)"},
    {P_INT("cuda_small_bytes", cuda_small_bytes, 6), AT_LEAST(-1),
     .help = "cuda backend: MPI_Bcast, MPI_Reduce (the buffer), MPI_Allgather, MPI_Alltoall and "
             "MPI_Reduce_scatter_block (a rank's block), and MPI_Scan and MPI_Exscan (the "
             "input), up to this many bytes go oneshot: each rank writes straight into its "
             "peers' inboxes and every rank builds its result after one exchange of flags "
             "(resident, like the small allreduce, up to coll_gpu_cuda_resident_max_bytes); at "
             "most coll_gpu_cuda_oneshot_bytes x 2 / ranks; 0: never (the chains, the ring and "
             "the alltoall kernel); -1: by collective and ranks as measured on 2-4 H200s "
             "(2 ranks: 64 KiB each; 3: bcast and reduce 1 MiB, a rank's block of allgather and "
             "reduce_scatter_block 256 KiB, an alltoall block 1 MiB; 4 and more: 512 KiB, "
             "256 KiB and 64 KiB; scans 64 KiB)"},
    {P_ULONG("cuda_oneshot_block_bytes", cuda_oneshot_block_bytes), AT_LEAST(1024),
     .help = "cuda backend: a oneshot call (launched or resident) runs one thread block per "
             "this many bytes of its message (a rank's block for the block-wise collectives), "
             "at most 32; the same on every rank"},
    {P_ULONG("cuda_oneshot_small_block_bytes", cuda_oneshot_small_block_bytes), AT_LEAST(1024),
     .zero_ok = true,
     .help = "cuda backend: a oneshot call takes one thread block per this many bytes instead "
             "of coll_gpu_cuda_oneshot_block_bytes while that makes at most 8 blocks (one "
             "cluster of the resident kernel), never fewer blocks than the other rule; 0 (or at "
             "least coll_gpu_cuda_oneshot_block_bytes): never; the same on every rank"},
    {P_ULONG("cuda_ll_bytes", cuda_ll_bytes), RANGE(0, CGPU_CUDA_LL_BYTES_MAX),
     .help = "cuda backend: oneshot calls (launched or resident) of at most this many bytes a "
             "block, on elements of at most 8 bytes, send LL lines: each 8 bytes of data travel "
             "with the call's number in one 16-byte store, so no fence and no separate flag "
             "(in size classes of 1 KiB to 64 KiB, up to 512 KiB / ranks); 0: never; the same "
             "on every rank"},
    {P_DOUBLE("cuda_timeout", cuda_timeout, 5), AT_LEAST(0),
     .help = "cuda backend: seconds a kernel waits for a peer before the collective fails with "
             "an MPI error instead of hanging (0: wait forever)"},
    {P_INT("cuda_tree_channels", cuda_tree_channels, 6), RANGE(0, 64),
     .help = "cuda backend: channels of the tree algorithm (two blocks each); 0 disables it. "
             "Device memory: tree_channels x 3 x cuda_slots x cuda_slot_bytes per rank"},
    {P_INT("cuda_a2a_channels", cuda_a2a_channels, 6), RANGE(0, 64),
     .help = "cuda backend: alltoall channels, shared out among the peers (each peer gets "
             "a2a_channels / (ranks - 1), at least 1, or the alltoall is host-staged); 0 "
             "host-stages every alltoall. Device memory: a2a_channels x cuda_slots x "
             "cuda_slot_bytes per rank"},
    {P_INT("cuda_inbox_pool", cuda_inbox_pool, 6), AT_LEAST(0),
     .help = "cuda backend: inboxes of released communicators kept for the next ones (each is "
             "reused once every peer of its last communicator has released it; split/dup "
             "loops then allocate and map nothing new), and as many sets of their staging "
             "buffers (device and pinned, up to 4 MiB each). 0 frees each at release"},
    {P_INT("cuda_ipc_cache_size", cuda_ipc_cache_size, 6), AT_LEAST(0),
     .help = "cuda backend: peers' inbox mappings no communicator uses that stay open for reuse "
             "(least recently used closed first); mappings in use are never closed"},
    {P_ULONG("cuda_channel_min_bytes", cuda_channel_min_bytes), AT_LEAST(1),
     .help = "cuda backend: ring and chain collectives use one more channel (thread block "
             "pair) only while each channel's piece of the buffer (of each rank's block) "
             "keeps at least this many bytes, up to coll_gpu_cuda_channels"},
    {P_ULONG("cuda_chain_chunk_bytes", cuda_chain_chunk_bytes),
     .help = "cuda backend: the chains of 3 or more ranks (MPI_Bcast, MPI_Reduce, and the scans "
             "past the oneshot sizes) move each channel's piece in up to 16 steps, so that the "
             "hops along the chain overlap, each step at least this many bytes and at most a "
             "ring slot (coll_gpu_cuda_slot_bytes); 0: steps of a whole slot"},
    {P_ULONG("cuda_tree_max_bytes", cuda_tree_max_bytes),
     .help = "cuda backend, auto algorithm: largest allreduce (bytes) given to the tree with 3 "
             "or more ranks; 0: auto never takes the tree (on 4 GPUs on one NVSwitch the ring "
             "was faster at every size)"},
    {P_DOUBLE("ras_timeout", ras_timeout, 4), AT_LEAST(0),
     .help = "RAS watchdog: seconds without progress after which a running collective is "
             "reported (once, with the communicator, operation, sequence number and the ranks "
             "that have not arrived); 0 disables the watchdog thread"},
    {P_ULONG("cuda_ce_alltoall_min_bytes", cuda_ce_alltoall_min_bytes),
     .help = "cuda backend: alltoalls of at least this many bytes (whole send buffer) run on "
             "the copy engines, straight into the peers' receive buffers (mapped through CUDA "
             "IPC, cached like inboxes), when every rank's buffers allow it; 0: never"},
    {P_ULONG("cuda_ce_bcast_min_bytes", cuda_ce_bcast_min_bytes),
     .help = "cuda backend: 2-rank bcasts of at least this many bytes run on the root's copy "
             "engines, straight into the other rank's buffer; 0: never"},
    {P_INT("cuda_wait_polls", cuda_wait_polls, 6), AT_LEAST(-2),
     .help = "cuda backend: how the calling thread waits for a collective to complete: it polls "
             "this many times, then gives the core away between polls (other threads of the "
             "process, such as those driving other communicators, can run); -1 polls without "
             "yielding (lowest latency, but it starves other threads sharing the core); a wait "
             "for a collective that lasts runs Open MPI's progress every 8th poll either way; "
             "-2 (auto): 32 under MPI_THREAD_MULTIPLE, else -1"},
    {P_ULONG("cuda_ce_reduce_min_bytes", cuda_ce_reduce_min_bytes),
     .help = "cuda backend: 2-rank reduces of at least this many bytes: the other rank's "
             "copy engines push its input in flagged pieces straight into the root's output "
             "(mapped through CUDA IPC), and the root's SMs reduce each piece as it lands; "
             "0: never"},
    {P_ULONG("cuda_ce_allreduce_min_bytes", cuda_ce_allreduce_min_bytes),
     .help = "cuda backend: 2-rank allreduces (out of place) of at least this many bytes: each "
             "rank's copy engines push the half of its input the other rank reduces straight "
             "into that rank's output (mapped through CUDA IPC), in flagged pieces; each rank's "
             "SMs reduce its half as the pieces land and store the result in both outputs; "
             "0: never"},
    {P_ENUM("cuda_resident", cuda_resident, resident_values),
     .help = "cuda backend: small allreduces and the other oneshot collectives (up to "
             "coll_gpu_cuda_resident_max_bytes a block, device buffers) run in a kernel that "
             "stays on the device between calls: the host hands it each call through mapped "
             "host memory and polls for its end (no launch, no stream synchronize). It ends "
             "after coll_gpu_cuda_resident_idle_us without work, and before any set-up of ours; "
             "a cudaDeviceSynchronize or cudaFree made meanwhile waits for that."},
    {P_ULONG("cuda_resident_max_bytes", cuda_resident_max_bytes),
     .help = "cuda backend: largest allreduce (bytes), or block of another oneshot collective, "
             "the resident kernel takes (at most 256 KiB and the oneshot limits); its blocks: "
             "those of a oneshot call of this size, at most 8 on compute capability 9.0 and "
             "later (one thread block cluster); 0: none"},
    {P_DOUBLE("cuda_resident_idle_us", cuda_resident_idle_us, 6), AT_LEAST(0),
     .help = "cuda backend: a resident kernel ends after this many microseconds without a call "
             "(the next call launches it again)"},
    {P_DOUBLE("cuda_resident_life_us", cuda_resident_life_us, 6), AT_LEAST(0),
     .help = "cuda backend: a resident kernel that has run this many microseconds is ended "
             "before the next call, which launches it again (one launch per this long), so "
             "another thread's cudaDeviceSynchronize or cudaFree waits at most about this long "
             "while calls follow each other closer than coll_gpu_cuda_resident_idle_us; 0: no "
             "bound"},
    {P_INT("cuda_resident_max_kernels", cuda_resident_max_kernels, 6), AT_LEAST(0),
     .help = "cuda backend: most resident kernels (communicators) per process at once; past it "
             "a communicator launches a kernel per call"},
    {P_INT("cuda_resident_cluster", cuda_resident_cluster, 9), RANGE(0, 2),
     .help = "cuda backend: on compute capability 9.0 and later, launch the resident kernel as "
             "thread block clusters: one of at most 8 blocks, or two of 8 (block 0 hands each "
             "call to the others' shared memory, a call of more than 8 blocks through device "
             "memory to the second cluster's first block), which the GPU must place each "
             "within one GPC: 1 only where no launched kernel of the process is on the device "
             "at the launch, no other process shares the device, and the process's other "
             "resident kernels hold at most a quarter of its multiprocessors (otherwise a "
             "mailbox in device memory, as 0); 0 never, as on older devices; 2 always "
             "(placement can then wait behind kernels that wait for peers: a hang)"},
    {P_BOOL("cuda_resident_gate", cuda_resident_gate, 9),
     .help = "cuda backend: a resident call gets its descriptor before the host waits for the "
             "default stream's earlier work (coll_gpu_cuda_stream_order); the kernel takes it, "
             "hands it on and waits at a gate, before it reads any buffer, until that wait is "
             "over (block 0 reads the gate and tells the call's other blocks). A gate shut past "
             "coll_gpu_cuda_resident_idle_us gives the call back and ends the kernel, as an idle "
             "one ends, so default-stream work that needs its multiprocessors gets them. false: "
             "the descriptor after the wait"},
    {P_BOOL("cuda_setup_exclusive", cuda_setup_exclusive, 9),
     .help = "cuda backend: a communicator's CUDA set-up (allocations, IPC export and open) "
             "first waits, for at most coll_gpu_cuda_setup_wait_ms, until no collective kernel "
             "of the process is in flight, in case the CUDA runtime makes such calls wait for "
             "running kernels; false: it never waits (set-up runs beside kernels in flight)"},
    {P_INT("cuda_setup_wait_ms", cuda_setup_wait_ms, 9), AT_LEAST(-1),
     .help = "cuda backend: how long a set-up waits for the process's collectives in flight to "
             "end (coll_gpu_cuda_setup_exclusive) before it goes ahead beside them; -1: for "
             "ever, which deadlocks threads of different ranks that set communicators up while "
             "others run collectives (see README)"},
    {P_BOOL("cuda_time_sliced", cuda_time_sliced, 6),
     .help = "cuda backend: where ranks of a communicator share a GPU and not all of them are "
             "MPS clients, the GPU runs their kernels in turn, a time slice each, and a "
             "collective (whose kernels wait for each other) takes milliseconds; so by default "
             "(with coll_gpu_backend auto) such a communicator runs the host backend, device "
             "buffers staged through host copies. true: run our kernels there anyway (tests of "
             "the kernels with more ranks than GPUs)"},
    {P_INT("cuda_block_budget", cuda_block_budget, 6), AT_LEAST(-1),
     .help = "cuda backend: most thread blocks of this process's collective kernels in flight "
             "on a GPU at once. Our kernels wait on the GPU for their peers' kernels, so calls "
             "in flight on several communicators must all fit on the GPU at once, or ranks that "
             "posted them in different orders wait for each other for ever; past the budget a "
             "call runs its parts on fewer blocks, one after another (its peers may use any "
             "number: the decision is each rank's own). -1: what the GPU holds at once "
             "(multiprocessors x blocks each, divided among the ranks on it); 0: no budget, "
             "every call all its blocks (a call the GPU cannot hold beside the others can "
             "hang)"},
    {P_INT("cuda_block_spare", cuda_block_spare, 6), AT_LEAST(-1),
     .help = "cuda backend: of coll_gpu_cuda_block_budget, the blocks kept for calls that find "
             "the others taken, one block (or pair) each, so that that many more calls in "
             "flight at once still each have a block on the GPU (past them a call takes a "
             "block over the budget, which the GPU may not hold beside the others). -1: one "
             "for every other communicator of the process on the GPU (each has at most one "
             "call's kernel at a time), at most half the budget"},
    {P_ENUM("cuda_stream_order", cuda_stream_order, stream_order_values),
     .help = "cuda backend: how a collective on device memory starts on the GPU only after the "
             "work already queued on the default stream and on every blocking stream (a "
             "cudaMemcpy from pageable memory or a cudaMemset that filled the buffer may still "
             "be running when it returns)."},
    {P_BOOL("ras_abort_on_timeout", ras_abort_on_timeout, 4),
     .help = "RAS watchdog: also fail the stuck collective (host backend) with an MPI error "
             "instead of waiting forever; the communicator is then failed (free it and make a "
             "new one)"},
    {P_BOOL("check_calls", check_calls, 5),
     .help = "Before a collective on the engine path moves any data, every rank compares what "
             "it calls (the collective, its byte count, the element type and op of a "
             "reduction, the root) with what every other rank calls; where two differ, the "
             "call fails on every rank (MPI_ERR_TRUNCATE for sizes, MPI_ERR_ROOT, MPI_ERR_OP, "
             "MPI_ERR_TYPE, else MPI_ERR_ARG), naming both ranks' values, and nothing is "
             "exchanged. false: no comparison (no rank then starts a call before all entered "
             "it); a mismatched call then returns wrong data or hangs. Where ranks differ, "
             "the communicator runs without it"},
    {P_ULONG("stage_chunk_bytes", stage_chunk_bytes),
     .help = "Staged allreduce (datatypes, ops or sizes the engine does not serve, on device "
             "buffers): chunk size of the pipeline that copies chunk i+1 to pinned host "
             "memory and chunk i-1 back while the previous coll module reduces chunk i; "
             "every rank must use the same value; 0: no pipeline (one host copy of the "
             "whole buffer)"},
    {P_ULONG("stage_pinned_bytes", stage_pinned_bytes),
     .help = "Host copies of device buffers for the collectives handed to the previous coll "
             "module: pinned host memory kept between calls, at most this many bytes per "
             "process (a copy that finds none free gets unpinned memory, which the GPU copies "
             "at a fraction of the speed); 0: never pinned"},
    {P_ULONG("stage_direct_min_bytes", stage_direct_min_bytes),
     .help = "MPI_Allreduce of device buffers staged through host memory (ranks that share a "
             "GPU without MPS): messages of at least this many bytes reduce in the ranks' "
             "shared stage areas, each rank's input copied there and the result back by the "
             "GPU's copy engines, in rounds of a third of a stage (coll_gpu_shared_stage_bytes); "
             "smaller ones run the host ring on host copies. 0: always the ring. Rank 0's "
             "value counts"},
    {P_ULONG("stage_pipeline_min_bytes", stage_pipeline_min_bytes),
     .help = "Staged allreduce: contiguous messages of at least this many bytes go through "
             "the pipeline (host buffers too: reduced chunk by chunk, with no copy), smaller "
             "ones through one host copy"},
    {P_BOOL("stage_allreduce_engine", stage_allreduce_engine, 5),
     .help = "Staged allreduce, pipelined sizes: the engine moves the data (an alltoall of each "
             "chunk's blocks, then an allgather of the results) and the host only reduces, with "
             "Open MPI's op (user functions and derived datatypes included), while the next "
             "chunk's copies run; false: the previous coll module's allreduce on each chunk's "
             "pinned host copy. Taken where the communicator's engine is set up and no two of "
             "its ranks share a GPU; every rank must use the same value"},
    {P_BOOL("stage_allreduce_engine_shared", stage_allreduce_engine_shared, 5),
     .help = "Staged allreduce: let the engine move the data also where ranks of the "
             "communicator share a GPU. Worth it under MPS, where their kernels run at once; "
             "without MPS each engine call waits for a time slice and the previous coll module "
             "is faster. Every rank must use the same value"},
    {P_BOOL("stage_host_buffers", stage_host_buffers, 9),
     .help = "Testing only: treat host buffers like device buffers on the staged paths (copy "
             "them through host mirrors before the previous coll module sees them, and through "
             "the pinned pieces of the inter-node reduction), so the staging code is exercised "
             "on machines without a GPU"},
    {P_STRING("profiler", profiler, 4), .local = true,
     .help = "Path of a profiler plugin (a shared object exporting cgpuProfiler_v1, see "
             "include/coll_gpu_profiler_v1.h); empty: no profiler. A missing or broken plugin "
             "gives one warning and coll/gpu runs without it"},
    {P_STRING("ofi_provider", ofi_provider, 4),
     .help = "Inter-node proxy: the libfabric provider (e.g. tcp, shm, verbs, efa, cxi); empty: "
             "the best one available, tcp as the fallback. Every rank must name the same one"},
    {P_INT("proxy_max_peers", proxy_max_peers, 5), AT_LEAST(0),
     .help = "Inter-node proxy: peers one process connects to at most (only peers an algorithm "
             "uses are connected); past it the collective fails with a message. 0: no cap"},
    {P_INT("proxy_max_inflight", proxy_max_inflight, 5), AT_LEAST(1),
     .help = "Inter-node proxy: operations posted to libfabric at once per process (the rest "
             "wait in its queue); an alltoall keeps half as many peers in flight"},
    {P_ULONG("proxy_bounce_bytes", proxy_bounce_bytes), AT_LEAST(4096),
     .help = "Inter-node proxy: pinned host bounce buffer per chunk of device memory (two per "
             "operation, so copies overlap transfers), unless the provider reads device "
             "memory itself (FI_HMEM)"},
    {P_INT("fake_nodes", fake_nodes, 9), AT_LEAST(0),
     .help = "Testing: place the job's ranks on this many fake nodes (world rank r on node "
             "r * N / size), so one machine runs the inter-node path for real. 0: real nodes"},
};
// clang-format on
#define NPARAMS (sizeof(params) / sizeof(params[0]))

/* What registration found in each parameter's storage (its default), and its variable. */
typedef union param_value {
    int i;
    unsigned long ul;
    double d;
} param_value_t;
static param_value_t param_default[NPARAMS];
static int param_index[NPARAMS];

/* The defaults that come from the engine's (cgpu_config_default) or are 0. */
static void set_defaults(mca_coll_gpu_component_t *c)
{
    cgpu_config_t d;
    cgpu_config_default(&d);
    c->allreduce_min_bytes = 0;
    c->allreduce_max_bytes = 0;
    c->alltoall_min_bytes = 0;
    c->alltoall_max_bytes = 0;
    c->slot_bytes = (unsigned long) d.slot_bytes;
    c->slots = d.nslots;
    c->stage_bytes = (unsigned long) d.stage_bytes;
    c->shared_stage_bytes = (unsigned long) d.shared_stage_bytes;
    c->max_comms = d.max_comms;
    c->cuda_channels = d.cuda_channels;
    c->cuda_threads = d.cuda_threads;
    c->cuda_slot_bytes = (unsigned long) d.cuda_slot_bytes;
    c->cuda_slots = d.cuda_slots;
    c->cuda_oneshot_bytes = (unsigned long) d.cuda_oneshot_bytes;
    c->cuda_small_bytes = (int) d.cuda_small_bytes;
    c->cuda_oneshot_block_bytes = (unsigned long) d.cuda_oneshot_block_bytes;
    c->cuda_oneshot_small_block_bytes = (unsigned long) d.cuda_oneshot_small_block_bytes;
    c->cuda_ll_bytes = (unsigned long) d.cuda_ll_bytes;
    c->cuda_timeout = d.cuda_timeout_s;
    c->cuda_tree_channels = d.cuda_tree_channels;
    c->cuda_a2a_channels = d.cuda_a2a_channels;
    c->cuda_inbox_pool = d.cuda_inbox_pool;
    c->shm_pool = d.shm_pool;
    c->cuda_ipc_cache_size = d.cuda_ipc_cache_size;
    c->cuda_channel_min_bytes = (unsigned long) d.cuda_channel_min_bytes;
    c->cuda_chain_chunk_bytes = (unsigned long) d.cuda_chain_chunk_bytes;
    c->cuda_tree_max_bytes = (unsigned long) d.cuda_tree_max_bytes;
    c->ras_timeout = d.ras_timeout_s;
    c->cuda_ce_alltoall_min_bytes = (unsigned long) d.cuda_ce_alltoall_min_bytes;
    c->cuda_ce_bcast_min_bytes = (unsigned long) d.cuda_ce_bcast_min_bytes;
    c->cuda_wait_polls = d.cuda_wait_polls;
    c->cuda_ce_reduce_min_bytes = (unsigned long) d.cuda_ce_reduce_min_bytes;
    c->cuda_ce_allreduce_min_bytes = (unsigned long) d.cuda_ce_allreduce_min_bytes;
    c->cuda_resident = d.cuda_resident;
    c->cuda_resident_max_bytes = (unsigned long) d.cuda_resident_max_bytes;
    c->cuda_resident_idle_us = d.cuda_resident_idle_us;
    c->cuda_resident_life_us = d.cuda_resident_life_us;
    c->cuda_resident_max_kernels = d.cuda_resident_max_kernels;
    c->cuda_resident_cluster = d.cuda_resident_cluster;
    c->cuda_resident_gate = d.cuda_resident_gate;
    c->cuda_setup_exclusive = d.cuda_setup_exclusive;
    c->cuda_setup_wait_ms = d.cuda_setup_wait_ms;
    c->cuda_time_sliced = d.cuda_time_sliced;
    c->cuda_block_budget = d.cuda_block_budget;
    c->cuda_block_spare = d.cuda_block_spare;
    c->cuda_stream_order = d.cuda_stream_order;
    c->ras_abort_on_timeout = d.ras_abort_on_timeout;
    c->check_calls = d.check_calls;
    c->stage_allreduce_engine_shared = false;
    c->stage_host_buffers = false;
    c->host_rule = MCA_COLL_GPU_HOST_RULE_MEASURED;
    c->profiler = NULL;
    c->verbose_subsystems = NULL; /* all */
    c->ofi_provider = NULL;
    c->proxy_max_peers = d.proxy_max_peers;
    c->proxy_max_inflight = d.proxy_max_inflight;
    c->proxy_bounce_bytes = d.proxy_bounce_bytes;
    c->fake_nodes = 0;
}

/* ---- texts built from the tables ---- */

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

static bool is_number(const param_t *p)
{
    return NULL == p->values &&
           (MCA_BASE_VAR_TYPE_INT == p->type || MCA_BASE_VAR_TYPE_UNSIGNED_LONG == p->type ||
            MCA_BASE_VAR_TYPE_DOUBLE == p->type);
}

static void *storage(const param_t *p)
{
    return (char *) &mca_coll_gpu_component + p->off;
}

/* The accepted range of a number: its row's, else its type's. */
static void bounds(const param_t *p, double *lo, double *hi)
{
    if (p->ranged) {
        *lo = p->min;
        *hi = p->max;
    } else if (MCA_BASE_VAR_TYPE_INT == p->type) {
        *lo = INT_MIN;
        *hi = INT_MAX;
    } else if (MCA_BASE_VAR_TYPE_UNSIGNED_LONG == p->type) {
        *lo = 0;
        *hi = HUGE_VAL;
    } else {
        *lo = -HUGE_VAL;
        *hi = HUGE_VAL;
    }
}

static void text_number(text_t *t, const param_t *p, double v)
{
    if (MCA_BASE_VAR_TYPE_DOUBLE == p->type) {
        text_add(t, "%g", v);
    } else {
        text_add(t, "%.0f", v);
    }
}

/* "2 or more", "1 to 64", "0, or 1024 or more", "any number", with the alignment (and, for
 * the help, what becomes of a value off it). */
static void text_range(text_t *t, const param_t *p, bool help)
{
    double lo, hi;
    bounds(p, &lo, &hi);
    const bool no_hi = hi >= (MCA_BASE_VAR_TYPE_INT == p->type ? (double) INT_MAX : HUGE_VAL);
    const bool no_lo = lo <= (MCA_BASE_VAR_TYPE_INT == p->type ? (double) INT_MIN : -HUGE_VAL);
    if (p->zero_ok) {
        text_add(t, "0, or ");
    }
    if (no_lo && no_hi) {
        text_add(t, "any %s", MCA_BASE_VAR_TYPE_DOUBLE == p->type ? "number" : "integer");
    } else if (no_hi) {
        text_number(t, p, lo);
        text_add(t, " or more");
    } else if (no_lo) {
        text_add(t, "at most ");
        text_number(t, p, hi);
    } else {
        text_number(t, p, lo);
        text_add(t, " to ");
        text_number(t, p, hi);
    }
    if (p->align > 1) {
        text_add(t, ", a multiple of %lu%s", p->align,
                 help ? " (another is rounded down, with a warning)" : "");
    }
}

static double stored_number(const param_t *p)
{
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_INT:
        return *(int *) storage(p);
    case MCA_BASE_VAR_TYPE_UNSIGNED_LONG:
        return (double) *(unsigned long *) storage(p);
    default:
        return *(double *) storage(p);
    }
}

static void store_number(const param_t *p, double v)
{
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_INT:
        *(int *) storage(p) = (int) v;
        break;
    case MCA_BASE_VAR_TYPE_UNSIGNED_LONG:
        *(unsigned long *) storage(p) = (unsigned long) v;
        break;
    default:
        *(double *) storage(p) = v;
        break;
    }
}

static double default_number(const param_t *p, size_t i)
{
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_INT:
        return param_default[i].i;
    case MCA_BASE_VAR_TYPE_UNSIGNED_LONG:
        return (double) param_default[i].ul;
    default:
        return param_default[i].d;
    }
}

static void restore_default(const param_t *p, size_t i)
{
    switch (p->type) {
    case MCA_BASE_VAR_TYPE_INT:
        *(int *) storage(p) = param_default[i].i;
        break;
    case MCA_BASE_VAR_TYPE_UNSIGNED_LONG:
        *(unsigned long *) storage(p) = param_default[i].ul;
        break;
    default:
        *(double *) storage(p) = param_default[i].d;
        break;
    }
}

/* The help as registered: the row's, its values, and for a number what is accepted. */
static char *param_help(const param_t *p, size_t i)
{
    if (NULL != p->values) {
        return mca_coll_gpu_values_text(p->help, p->values, p->nvalues, false, p->outro);
    }
    text_t t = {0};
    text_add(&t, "%s", p->help);
    if (is_number(p)) {
        text_add(&t, ". Accepted: ");
        text_range(&t, p, true);
        text_add(&t, "; a value out of range, or not a number, gives a warning and the "
                     "default, ");
        text_number(&t, p, default_number(p, i));
    }
    return t.s;
}

int mca_coll_gpu_params_register(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    set_defaults(c);
    for (size_t i = 0; i < NPARAMS; ++i) {
        const param_t *p = &params[i];
        if (is_number(p)) {
            switch (p->type) {
            case MCA_BASE_VAR_TYPE_INT:
                param_default[i].i = *(int *) storage(p);
                break;
            case MCA_BASE_VAR_TYPE_UNSIGNED_LONG:
                param_default[i].ul = *(unsigned long *) storage(p);
                break;
            default:
                param_default[i].d = *(double *) storage(p);
                break;
            }
        }
        mca_base_var_enum_t *en = NULL;
        if (NULL != p->values) {
            char ename[64];
            snprintf(ename, sizeof(ename), "coll_gpu_%s", p->name);
            (void) mca_coll_gpu_values_enum(ename, p->values, p->nvalues, &en);
        }
        char *help = param_help(p, i);
        /* every parameter is settable; all but the local ones must be the same on all ranks
         * (path decisions use them) */
        param_index[i] = mca_base_component_var_register(
            &c->super.collm_version, p->name, NULL != help ? help : p->help, p->type, en, 0,
            MCA_BASE_VAR_FLAG_SETTABLE, p->lvl,
            p->local ? MCA_BASE_VAR_SCOPE_READONLY : MCA_BASE_VAR_SCOPE_ALL_EQ, storage(p));
        free(help); /* Open MPI keeps its own copy */
        if (NULL != en) {
            OBJ_RELEASE(en);
        }
    }
    return mca_coll_gpu_pvars_register();
}

/* ---- the checks at open ---- */

/* The default registration found for the int parameter @p name. */
static int int_default(const char *name)
{
    for (size_t i = 0; i < NPARAMS; ++i) {
        if (0 == strcmp(params[i].name, name)) {
            return param_default[i].i;
        }
    }
    return 0;
}

/* Rank 0 of the job speaks for what every rank shares (the MCA values, the coll list); the
 * launcher's environment tells which one this is (the world communicator does not exist at
 * open). A process started without mpirun is a job of its own, so it speaks. */
static bool job_speaker(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    return NULL == r || 0 == atoi(r);
}

/* The first rank of each node speaks for what differs between nodes (a usable GPU). */
bool mca_coll_gpu_node_speaker(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    return NULL == r || 0 == atoi(r);
}

/* A value as Open MPI reads one: an integer in C notation with an optional k, m or g suffix
 * (x 1024 each), or for a double what strtod takes. Open MPI itself takes "abc" as 0 and
 * "1.5" as 1, so the string is read again here. False where it is not a number. */
static bool parse_number(const char *s, mca_base_var_type_t type, double *out)
{
    char *end = NULL;
    while (isspace((unsigned char) *s)) {
        ++s;
    }
    const char *digits = '-' == *s || '+' == *s ? s + 1 : s;
    if (!isdigit((unsigned char) *digits) &&
        !(MCA_BASE_VAR_TYPE_DOUBLE == type && '.' == *digits)) {
        return false;
    }
    double v;
    if (MCA_BASE_VAR_TYPE_DOUBLE == type) {
        v = strtod(s, &end);
    } else {
        v = (double) strtoull(digits, &end, 0);
        switch (*end) {
        case 'k':
        case 'K':
            v *= 1024.0;
            ++end;
            break;
        case 'm':
        case 'M':
            v *= 1024.0 * 1024.0;
            ++end;
            break;
        case 'g':
        case 'G':
            v *= 1024.0 * 1024.0 * 1024.0;
            ++end;
            break;
        default:
            break;
        }
        if ('-' == *s) {
            v = -v;
        }
    }
    while (isspace((unsigned char) *end)) {
        ++end;
    }
    if ('\0' != *end || isnan(v)) {
        return false;
    }
    *out = v;
    return true;
}

/* The string a parameter was given as, where it came from the environment (mpirun --mca
 * and OMPI_MCA_* both arrive there); NULL otherwise (a file's value is checked as read). */
static const char *given_string(size_t i)
{
    const void *value = NULL;
    mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
    if (param_index[i] < 0 ||
        OPAL_SUCCESS != mca_base_var_get_value(param_index[i], &value, &source, NULL) ||
        (MCA_BASE_VAR_SOURCE_ENV != source && MCA_BASE_VAR_SOURCE_COMMAND_LINE != source)) {
        return NULL;
    }
    char env[128];
    snprintf(env, sizeof(env), "OMPI_MCA_coll_gpu_%s", params[i].name);
    return getenv(env);
}

/* One number against its row: a wrong one takes the default, with one line on rank 0. */
static void check_number(size_t i, bool speak)
{
    const param_t *p = &params[i];
    const char *given = given_string(i);
    double v = stored_number(p), lo, hi;
    bounds(p, &lo, &hi);
    const bool number = NULL == given || parse_number(given, p->type, &v);
    if (!number || !((v >= lo && v <= hi) || (p->zero_ok && 0 == v))) {
        restore_default(p, i);
        if (speak) {
            text_t t = {0};
            text_add(&t, "coll/gpu: coll_gpu_%s = ", p->name);
            if (NULL != given) {
                text_add(&t, number ? "%.40s" : "\"%.40s\"", given);
            } else {
                text_number(&t, p, v);
            }
            text_add(&t, " is %s (accepted: ", number ? "out of range" : "not a number");
            text_range(&t, p, false);
            text_add(&t, "): set an accepted value, or leave it unset; coll/gpu uses the "
                         "default, ");
            text_number(&t, p, default_number(p, i));
            if (NULL != t.s) {
                opal_output(0, "%s", t.s);
            }
            free(t.s);
        }
        return;
    }
    if (p->align > 1 && 0 != (unsigned long) v % p->align) {
        const unsigned long down = (unsigned long) v - (unsigned long) v % p->align;
        if ((double) down >= lo) {
            store_number(p, (double) down);
        } else {
            restore_default(p, i);
        }
        if (speak) {
            cgpu_log(CGPU_LOG_WARN,
                     "coll_gpu_%s = %lu is not a multiple of %lu: coll/gpu uses "
                     "%.0f; set a multiple of %lu to silence this",
                     p->name, (unsigned long) v, p->align, stored_number(p), p->align);
        }
    }
}

/* Priority of the coll component @p name where the coll list loaded it (its parameters are
 * registered before any component opens), else INT_MIN. */
static int coll_priority(const char *name)
{
    const int idx = mca_base_var_find("ompi", "coll", name, "priority");
    const int *v = NULL;
    if (idx < 0 || OPAL_SUCCESS != mca_base_var_get_value(idx, &v, NULL, NULL) || NULL == v) {
        return INT_MIN;
    }
    return *v;
}

/* The coll selection as given (--mca coll), for messages. */
static const char *coll_list(void)
{
    const int idx = mca_base_var_find("ompi", "coll", NULL, NULL);
    char **v = NULL;
    if (idx < 0 || OPAL_SUCCESS != mca_base_var_get_value(idx, &v, NULL, NULL) || NULL == v ||
        NULL == *v) {
        return NULL;
    }
    return *v;
}

/* coll/gpu passes host buffers, and whatever it does not run itself, to the components below
 * it; without basic (and libnbc) some collective has no component at all, MPI_Init fails,
 * and Open MPI's own message does not say why. False when they are missing. */
static bool check_coll_list(bool speak)
{
    const bool basic = INT_MIN != coll_priority("basic");
    const bool libnbc = INT_MIN != coll_priority("libnbc");
    if (basic && libnbc) {
        return true;
    }
    if (speak) {
        const char *list = coll_list();
        cgpu_log(CGPU_LOG_WARN,
                 "the coll list (--mca coll %s) lacks %s%s%s: coll/gpu hands host "
                 "buffers and the calls it does not run to the components below it, so the "
                 "list must also include the fallback components: --mca coll "
                 "gpu,tuned,libnbc,basic,self (or leave coll unset); coll/gpu stays out of "
                 "this job",
                 NULL != list ? list : "?", basic ? "" : "basic", basic || libnbc ? "" : " and ",
                 libnbc ? "" : "libnbc");
    }
    return false;
}

/* A priority of ours must be above those of the components it passes calls on to (@p comps,
 * where loaded): Open MPI enables modules lowest priority first, and a slot goes to the
 * highest, so below them coll/gpu either finds nothing to fall back on or loses its slots
 * to them (which then get device buffers). Such a value takes the default (or one above
 * theirs), with one line. */
static void check_priority(int *prio, int dflt, const char *param, const char *const *comps,
                           size_t ncomps, const char *what, bool speak)
{
    if (*prio < 0) {
        return; /* disabled, as documented */
    }
    int top = INT_MIN;
    const char *who = NULL;
    for (size_t k = 0; k < ncomps; ++k) {
        const int p = coll_priority(comps[k]);
        if (p > top) {
            top = p;
            who = comps[k];
        }
    }
    if (NULL == who || *prio > top) {
        return;
    }
    const int use = dflt > top ? dflt : top + 1;
    if (speak) {
        cgpu_log(CGPU_LOG_WARN,
                 "coll_gpu_%s = %d is not above coll/%s's priority (%d), so %s would "
                 "serve %s instead of coll/gpu (and take device buffers it cannot use): set it "
                 "above %d, or to -1 to leave them to the other components; coll/gpu uses %d",
                 param, *prio, who, top, who, what, top, use);
    }
    *prio = use;
}

bool mca_coll_gpu_params_check(void)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const bool speak = job_speaker();
    for (size_t i = 0; i < NPARAMS; ++i) {
        if (is_number(&params[i])) {
            check_number(i, speak);
        }
    }
    opal_output_set_verbosity(c->output, c->verbose);
    static const char *const below[] = {"tuned", "basic", "libnbc"};
    static const char *const below_self[] = {"self", "basic", "libnbc"};
    check_priority(&c->priority, int_default("priority"), "priority", below, 3, "the collectives",
                   speak);
    check_priority(&c->self_priority, int_default("self_priority"), "self_priority", below_self, 3,
                   "communicators of one rank", speak);
    if (CGPU_OK != cgpu_log_parse_mask(c->verbose_subsystems, &c->log_subsystems)) {
        if (speak) {
            cgpu_log(CGPU_LOG_WARN,
                     "coll_gpu_verbose_subsystems = \"%s\" names a part not in %s "
                     "(or all): coll/gpu uses all",
                     c->verbose_subsystems, CGPU_SUBSYS_NAMES);
        }
        c->log_subsystems = CGPU_SUB_ALL;
    }
    cgpu_log_setup(mca_coll_gpu_log, c->verbose, c->log_subsystems);
    return check_coll_list(speak);
}
