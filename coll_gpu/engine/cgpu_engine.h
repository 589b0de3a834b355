/*
 * coll/gpu engine: the MPI-agnostic interface the Open MPI glue calls.
 *
 * The engine includes no Open MPI header. It reaches the other ranks of a communicator
 * only through a bootstrap (allgather and barrier on host bytes) that the glue builds
 * from the previous coll module, so every piece below this header can be tested in one
 * process with forked ranks and no mpirun.
 *
 * Object model: one process-wide context (cgpu_engine_init/fini, owned by the
 * component), and one internal communicator (cgpu_comm_t) per MPI communicator that
 * took the engine path, owned by the glue module and created lazily and collectively.
 */
#ifndef CGPU_ENGINE_H
#define CGPU_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cgpu_clock.h"
#include "cgpu_dtype.h"
#include "cgpu_log.h"
#include "cgpu_status.h"
#include "cgpu_thread.h"
#include "cgpu_ras.h"
#include "cgpu_reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which memory and transports the engine uses. */
typedef enum cgpu_backend {
    CGPU_BACKEND_AUTO = 0, /* cuda where a device is usable, else the component stays out */
    CGPU_BACKEND_CUDA = 1,
    CGPU_BACKEND_HOST = 2, /* host memory, POSIX shared memory, C loops */
} cgpu_backend_t;

/** Allreduce algorithms (MCA coll_gpu_allreduce_algorithm). */
typedef enum cgpu_allreduce_alg {
    CGPU_ALLREDUCE_AUTO = 0,
    CGPU_ALLREDUCE_RING = 1,
    CGPU_ALLREDUCE_FALLBACK = 2, /* glue-level: always the previous module */
    CGPU_ALLREDUCE_ONESHOT = 3,  /* cuda: every rank reads every contribution (small) */
    CGPU_ALLREDUCE_TREE = 4,     /* cuda: reduce up / broadcast down a binary tree */
} cgpu_allreduce_alg_t;

/** Alltoall algorithms (MCA coll_gpu_alltoall_algorithm). */
typedef enum cgpu_alltoall_alg {
    CGPU_ALLTOALL_AUTO = 0,
    CGPU_ALLTOALL_DIRECT = 1,
    CGPU_ALLTOALL_FALLBACK = 2,
} cgpu_alltoall_alg_t;

/** Scatter algorithms (MCA coll_gpu_scatter_algorithm). */
typedef enum cgpu_scatter_alg {
    CGPU_SCATTER_AUTO = 0,
    CGPU_SCATTER_BCAST = 1,    /* "ring": a broadcast of the whole message; each rank keeps
                                * its block */
    CGPU_SCATTER_FALLBACK = 2, /* glue-level: always the previous module */
    CGPU_SCATTER_RS = 3,       /* a reduce-scatter (bytes, sum) of the root's message and zeros
                                * from every other rank: each block lands in its rank's buffer */
} cgpu_scatter_alg_t;

/** Scan algorithms (MCA coll_gpu_scan_algorithm: MPI_Scan, MPI_Exscan and their
 * non-blocking forms). */
typedef enum cgpu_scan_alg {
    CGPU_SCAN_AUTO = 0,      /* cuda in a node: oneshot if small, else a chain; else ALLGATHER */
    CGPU_SCAN_ALLGATHER = 1, /* every input allgathered, then each rank's fold on the host */
    CGPU_SCAN_FALLBACK = 2,  /* glue-level: always the previous module */
} cgpu_scan_alg_t;

/** CGPU_SCATTER_AUTO runs a scatter whose largest block is at most this many bytes as
 * CGPU_SCATTER_RS, a larger one as CGPU_SCATTER_BCAST (measured: bench/results/). */
#define CGPU_SCATTER_RS_AUTO_MAX ((size_t) 4 << 20)

/** The algorithm a scatter of blocks of at most @p maxb bytes runs as: @p alg, or for
 * CGPU_SCATTER_AUTO the choice above. Every rank passes the same @p maxb. */
cgpu_scatter_alg_t cgpu_scatter_choose(cgpu_scatter_alg_t alg, size_t maxb);

/** The largest coll_gpu_cuda_ll_bytes: the LL area's largest size class (a communicator of n
 * ranks keeps classes up to 512 KiB / n, so its area stays near 4 MiB an inbox). */
#define CGPU_CUDA_LL_BYTES_MAX 65536

/** Process-wide tunables, filled from MCA params by the glue (or by tests). */
typedef struct cgpu_config {
    cgpu_backend_t backend;
    size_t slot_bytes;        /* ring pipeline chunk: one slot of a peer's receive queue */
    int nslots;               /* ring queue depth per connection (>= 1) */
    size_t stage_bytes;       /* alltoall staging area per rank and communicator */
    int max_comms;            /* cap on live internal communicators (0 = no cap) */
    int verbose;              /* messages with level <= verbose are printed */
    cgpu_log_fn_t log;        /* may be NULL: messages go to stderr */
    unsigned log_subsystems;  /* cgpu_subsys_t bits whose messages above WARN print */
    cgpu_progress_fn_t progress; /* may be NULL: waits only wait */
    bool force_node_per_rank; /* pretend every rank is on its own node (tests) */
    /* cuda backend */
    int cuda_channels;          /* most ring channels (thread blocks) per call */
    int cuda_threads;           /* threads per block */
    size_t cuda_slot_bytes;     /* ring slot per channel and step */
    int cuda_slots;             /* ring pipeline depth per channel */
    size_t cuda_oneshot_bytes;  /* largest message of the oneshot algorithm (auto) */
    size_t cuda_oneshot_block_bytes; /* a oneshot call takes a block per this many bytes */
    size_t cuda_oneshot_small_block_bytes; /* ... or per this many, while that is at most 8
                                            * blocks (0: never) */
    size_t cuda_ll_bytes;       /* oneshot calls up to this many bytes a block: LL lines (0: none) */
    size_t cuda_small_bytes;    /* bcast/reduce/allgather/alltoall/reduce_scatter_block blocks
                                 * up to this go oneshot (0: never) */
    double cuda_timeout_s;      /* a kernel waiting longer on a peer fails the call (0: never) */
    int cuda_tree_channels;     /* tree channels (two blocks each); 0 disables the tree */
    int cuda_a2a_channels;      /* alltoall channels shared by the peers; 0: host-staged alltoall */
    int cuda_inbox_pool;        /* released inboxes kept for reuse (0: free each one) */
    int cuda_ipc_cache_size;    /* unreferenced peer mappings kept (0: close each one) */
    const char *profiler;       /* path of a profiler plugin (NULL/"" = none) */
    double ras_timeout_s;       /* watchdog: report a collective stuck this long (0: off) */
    bool ras_abort_on_timeout;  /* ... and fail it (and the communicator) instead of waiting */
    size_t cuda_tree_max_bytes; /* auto: tree for 3+ ranks from the oneshot limit up to this */
    size_t cuda_channel_min_bytes; /* ring/chain: a channel more only while each piece has this */
    int cuda_stream_order;      /* device-buffer calls start after the default stream's work:
                                 * CGPU_ORDER_* (auto resolved by cgpu_engine_set_threads) */
    int cuda_wait_polls;        /* completion polls before yielding (-1: never yields;
                                 * -2: auto, resolved by cgpu_engine_set_threads) */
    size_t cuda_ce_alltoall_min_bytes; /* copy engines for alltoalls this large (0: never) */
    size_t cuda_ce_bcast_min_bytes;    /* ... and for 2-rank bcasts (0: never) */
    size_t cuda_ce_reduce_min_bytes;   /* ... and for 2-rank reduces (0: never) */
    size_t cuda_ce_allreduce_min_bytes; /* ... and for 2-rank allreduces (0: never) */
    int cuda_resident;          /* resident small-allreduce kernels: 1 on, 0 off, -1 auto
                                 * (resolved by cgpu_engine_set_threads) */
    size_t cuda_resident_max_bytes; /* allreduces up to this size take them */
    double cuda_resident_idle_us;   /* a resident kernel ends after this long without work */
    int cuda_resident_max_kernels;  /* at most this many per process at once */
    int cuda_resident_cluster;  /* one thread block cluster where the device has them: 0
                                 * never, 1 when no other kernel of the process can be on the
                                 * device (cgpu_cuda_comm.c, rk_cluster_now), 2 always */
    bool cuda_resident_gate;    /* a resident call gets its descriptor before the host
                                 * waits for the default stream, and waits at a gate for
                                 * that wait's end before it reads a buffer (given back
                                 * past the idle time) */
    bool cuda_setup_exclusive;  /* a communicator's CUDA set-up waits until no collective
                                 * kernel of the process is in flight (cgpu_cuda_setup_begin) */
    int cuda_setup_wait_ms;     /* ... for at most this long, then goes ahead (-1: for ever) */
    bool cuda_time_sliced;      /* run the kernels also where ranks share a device without
                                 * MPS (else such a communicator, where the backend is auto,
                                 * takes the host backend) */
    int cuda_block_budget;      /* thread blocks of this process's collective kernels in
                                 * flight on a device at once (-1: what the device holds at
                                 * once, shared by the ranks on it; 0: no budget) */
    int cuda_block_spare;       /* of those, blocks kept for calls that find the rest taken,
                                 * one block (or pair) each (-1: one for every other
                                 * communicator on the device, cgpu_blocks_spare) */
    /* inter-node proxy (libfabric; cgpu_proxy.h) */
    const char *ofi_provider;   /* provider name; NULL or "": the best found, tcp as fallback */
    int proxy_max_peers;        /* peers one process connects to at most (0: no cap) */
    int proxy_max_inflight;     /* operations the proxy keeps posted at once (>= 1) */
    size_t proxy_bounce_bytes;  /* pinned bounce buffer per device-memory chunk (x2 per op) */
    int fake_node;              /* >= 0: this process claims node "fake-node-<n>" (tests) */
    bool stage_host_buffers;    /* tests: stage host memory like device memory where the
                                 * engine stages (inter-node reductions) */
} cgpu_config_t;

/** How a device-buffer call is ordered after the work the caller queued on the default
 * stream (cuda backend). */
enum {
    CGPU_ORDER_AUTO = -1,  /* EVENT (cgpu_engine_set_threads) */
    CGPU_ORDER_NONE = 0,   /* the application synchronizes its buffers itself */
    CGPU_ORDER_EVENT = 1,  /* an event on the legacy stream, waited for by our stream */
    CGPU_ORDER_BLOCKING_STREAM = 2, /* our stream is a blocking one: implicit ordering after
                                     * the legacy stream (not after other blocking streams) */
};

/** Fill @p cfg with the documented defaults. */
void cgpu_config_default(cgpu_config_t *cfg);

/**
 * Out-of-band exchange among the ranks of one communicator. Both functions are
 * collective over the bootstrap's ranks; the engine calls them only from inside an
 * operation that every rank entered (lazy init, teardown agreement).
 */
typedef struct cgpu_bootstrap {
    void *ctx;
    int rank;
    int size;
    uint32_t context_id; /* equal on every rank, unique among this process's live
                          * communicators (Open MPI's CID): tags the inter-node proxy */
    /** rbuf[i*bytes .. ] receives rank i's sbuf; bytes is the same on every rank. */
    cgpu_status_t (*allgather)(void *ctx, const void *sbuf, void *rbuf, size_t bytes);
    cgpu_status_t (*barrier)(void *ctx);
} cgpu_bootstrap_t;

/**
 * Start the process-wide engine. Idempotent per init/fini pair; a second init without
 * fini only updates nothing and returns CGPU_ERR_STATE.
 */
cgpu_status_t cgpu_engine_init(const cgpu_config_t *cfg);

/**
 * Stop the engine. Internal communicators still alive are reported (verbose) and
 * released here, so nothing stays mapped after MPI_Finalize. Idempotent.
 */
void cgpu_engine_fini(void);

/** Resolve the thread-dependent auto settings (cuda_wait_polls < -1, cuda_stream_order
 * auto) for a process whose threads may call MPI at once (@p multiple) or not; before any
 * communicator. */
void cgpu_engine_set_threads(bool multiple);

/**
 * A launch's thread blocks out of a budget of @p cap blocks (@p used: those taken and not
 * given back, shared by the threads of the process), of which @p spare are kept for
 * launches that find the others taken: @p want (one per part of the call) or as many of
 * the cap - spare as are left, a multiple of @p pair; where fewer than @p pair of those
 * are left, one @p pair (out of the spare blocks while they last, then over the cap: a
 * call is never held back, since a rank waiting for blocks that its peers' calls hold
 * could wait for ever; cgpu_cuda_kernels.h, CGPU_CUDA_GRID_DOC). The spare blocks are what
 * lets calls in flight on many communicators at once each have a block on the GPU: every
 * block a rank's kernels take must be one the GPU holds beside the others, or a block left
 * undispatched behind spinning ones can wait for a peer's call that waits for it.
 * cap <= 0: no budget, @p want. Give the result back with cgpu_blocks_give once the
 * launch's kernel has ended.
 */
int cgpu_blocks_take(int *used, int cap, int spare, int want, int pair);
/** @p n blocks of the budget's cap - @p spare if they are left (or there is no budget:
 *  cap <= 0): true; else none taken, false. */
bool cgpu_blocks_reserve(int *used, int cap, int spare, int n);
void cgpu_blocks_give(int *used, int n);
/** The spare blocks of a cap of @p cap for @p comms communicators of this process on the
 *  device: @p setting (coll_gpu_cuda_block_spare) where >= 0, at most cap - 1; -1: comms - 1
 *  (a block under the cap for every other communicator's call in flight), at most half the
 *  cap (a 64-channel ring still whole on an H200). cap <= 1: none. */
int cgpu_blocks_spare(int cap, int setting, int comms);
/** Whether a resident kernel's launch is one thread block cluster, on a device that has
 *  them: @p setting (coll_gpu_cuda_resident_cluster) 0 never, 2 always; 1 only where no
 *  other rank shares the device (@p shared), @p launched (the process's calls with
 *  launched kernels in flight on the device) is 0, and the other resident kernels' blocks
 *  (@p resident_blocks) are at most a quarter of the device's @p sms. A cluster must be
 *  placed within one GPC, which blocks elsewhere can leave too full while the block
 *  budget, counted over the whole device, says there is room (cgpu_cuda_comm.c,
 *  rk_cluster_now). */
bool cgpu_resident_as_cluster(int setting, bool shared, int launched, int resident_blocks,
                              int sms);

/** How many LL size classes (1 KiB << c of data, kernels/cgpu_cuda_kernels.h) a
 *  communicator of @p nranks keeps for @p ll_bytes (coll_gpu_cuda_ll_bytes): those up to
 *  ll_bytes and 512 KiB / nranks, at least one unless ll_bytes is 0, at most
 *  CGPU_CUDA_LL_CLASSES. The same on every rank (sizes and settings). */
int cgpu_ll_classes(size_t ll_bytes, int nranks);

/** The LL size class of a oneshot call whose rank's unit is @p unit bytes of elements of
 *  @p elem_size bytes (1 for the copying collectives), or -1 where it sends no LL lines: an
 *  empty unit, one past @p ll_bytes, elements of more than 8 bytes other than 16, or a
 *  class past the communicator's @p classes (cgpu_ll_classes). The same on every rank. */
int cgpu_ll_class(size_t unit, size_t elem_size, size_t ll_bytes, int classes);

/** The thread blocks of a oneshot call whose rank's unit is @p unit bytes: one per
 *  @p block_bytes (coll_gpu_cuda_oneshot_block_bytes, > 0), or one per @p small_block_bytes
 *  (coll_gpu_cuda_oneshot_small_block_bytes; 0: never) while that makes at most
 *  CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS, never fewer than the first rule gives; at least 1,
 *  at most CGPU_CUDA_MAX_ONESHOT_BLOCKS (the flag slots). The same on every rank, and
 *  non-decreasing in the unit: the resident kernel's largest call bounds every call it
 *  takes. */
size_t cgpu_oneshot_blocks(size_t unit, size_t block_bytes, size_t small_block_bytes);

/** The resident kernel's blocks, for a largest call of @p blocks (cgpu_oneshot_blocks):
 *  as clusters (@p cluster), that many up to CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS (one
 *  cluster), else whole clusters of that size, at most CGPU_CUDA_RESIDENT_CLUSTERS (calls
 *  of more blocks are launched); without, at most CGPU_CUDA_MAX_ONESHOT_BLOCKS. At least 1. */
int cgpu_resident_blocks(size_t blocks, bool cluster);
/** The clusters of a resident kernel of @p blocks launched as clusters (cgpu_resident_blocks). */
int cgpu_resident_clusters(int blocks);

/**
 * Stagers: pinned host slots and a copy stream for pipelining a collective through host
 * memory (the glue's staged path). cgpu_stager_get takes one (from a small pool) whose
 * stream starts after the work queued on the default stream; copies are queued in order;
 * mark(i) remembers how far the queue reached, wait(i) blocks until there; finish waits for
 * everything; put gives it back. Without a usable GPU, slots are malloc'd and copies happen
 * at once. cgpu_engine_fini drains the pool.
 */
typedef struct cgpu_stager cgpu_stager_t;
cgpu_status_t cgpu_stager_get(size_t slot_bytes, int nslots, cgpu_stager_t **out);
void *cgpu_stager_slot(const cgpu_stager_t *s, int i);
/* Memory of at least @p bytes on the stager's device (malloc'd without a GPU), kept with
 * the stager while it is pooled; a larger request replaces it once the queue is drained. */
cgpu_status_t cgpu_stager_scratch(cgpu_stager_t *s, size_t bytes, void **out);
cgpu_status_t cgpu_stager_copy(cgpu_stager_t *s, void *dst, const void *src, size_t bytes);
cgpu_status_t cgpu_stager_mark(cgpu_stager_t *s, int i);
cgpu_status_t cgpu_stager_wait(cgpu_stager_t *s, int i);
cgpu_status_t cgpu_stager_finish(cgpu_stager_t *s);
/* gives s back to the pool, which keeps the most recently given back stagers (a few) */
void cgpu_stager_put(cgpu_stager_t **s);
void cgpu_stager_pool_drain(void);
/* how many stagers were made so far (tests: whether the pool reused one) */
unsigned long cgpu_stager_created(void);

/* Host memory that copies to and from device memory run fastest with: pinned (*pinned set)
 * when a GPU is usable, else malloc'd. cgpu_engine_host_free takes the same flag; a pinned
 * release waits for no collective kernel (deferred while one is in flight). */
cgpu_status_t cgpu_engine_host_alloc(size_t bytes, void **out, bool *pinned);
void cgpu_engine_host_free(void *p, bool pinned);

/** The configuration the engine runs with (valid between init and fini). */
const cgpu_config_t *cgpu_engine_config(void);

/** Number of live internal communicators (an atomic load; safe from any thread). */
int cgpu_engine_live_comms(void);

typedef struct cgpu_comm cgpu_comm_t;

/**
 * Build an internal communicator over the bootstrap's ranks. Collective.
 *
 * Every rank returns the same status: a failure on any rank (no memory, shared memory
 * refused, ranks on different nodes without an inter-node transport) is agreed on
 * through the bootstrap, and all ranks then return that failure and hold nothing.
 * The bootstrap must stay valid for the life of the communicator.
 *
 * @param bs    exchange over the MPI communicator
 * @param out   receives the communicator on success, NULL otherwise
 */
cgpu_status_t cgpu_comm_create(const cgpu_bootstrap_t *bs, cgpu_comm_t **out);

/**
 * Release an internal communicator. Local (no communication): peers may still read
 * this rank's shared segment through their own mappings, which stay valid until they
 * unmap. Sets *comm to NULL; NULL or an already released pointer is a no-op.
 *
 * @return CGPU_OK, or CGPU_ERR_STATE if a collective is running on it (released
 *         nothing; the caller reports the misuse).
 */
cgpu_status_t cgpu_comm_release(cgpu_comm_t **comm);

/** True while a collective runs on the communicator (an atomic load). */
bool cgpu_comm_busy(const cgpu_comm_t *comm);

/** Backend an internal communicator runs on (HOST or CUDA). */
cgpu_backend_t cgpu_comm_backend(const cgpu_comm_t *comm);

/**
 * True on a one-node cuda communicator where two ranks run on one device (without MPS the
 * device then runs one process's kernels at a time, and every collective whose kernels wait
 * for each other costs a time slice). The same answer on every rank; false across nodes.
 */
bool cgpu_comm_shares_device(const cgpu_comm_t *comm);

/** Memory kinds as the engine sees them (per call, per rank). */
typedef enum cgpu_buf_kind { CGPU_BUF_HOST = 0, CGPU_BUF_DEVICE = 1, CGPU_BUF_MANAGED = 2 } cgpu_buf_kind_t;

/** Kind of memory @p ptr points into; HOST when CUDA is not built or not usable. */
cgpu_buf_kind_t cgpu_buf_kind(const void *ptr, int *device);

/** True when this process can use the cuda backend (runtime works, a device is seen). */
bool cgpu_engine_cuda_usable(void);

/** Synchronous copy between any two addresses (host or device). */
cgpu_status_t cgpu_engine_copy(void *dst, const void *src, size_t bytes);

/** The calling thread's current CUDA device (-1 without CUDA) and how to set it. */
int cgpu_engine_current_device(void);
cgpu_status_t cgpu_engine_set_device(int device);

/**
 * Give a new communicator its MPI name and a process-unique id: the name appears in RAS
 * reports, and a loaded profiler plugin gets both through its init, whose context then
 * travels with every event of this communicator. Call once, right after cgpu_comm_create.
 */
void cgpu_comm_describe(cgpu_comm_t *comm, const char *name, uint64_t id);

/**
 * Replace the bootstrap a communicator keeps for later agreement rounds (one created through
 * a worker's bootstrap gets the application threads' one). Call before the communicator is
 * published to other threads.
 */
void cgpu_comm_set_bootstrap(cgpu_comm_t *comm, const cgpu_bootstrap_t *bs);

/** Health items of a communicator (RAS). Reading one loads atomics and nothing else. */

/** Read one health item (atomic loads only; safe from any thread at any rate). */
uint64_t cgpu_comm_ras(const cgpu_comm_t *comm, cgpu_ras_item_t item);

/** Process-wide health: watchdog reports so far, shared segments mapped. */
uint64_t cgpu_engine_watchdog_firings(void);
int cgpu_engine_shm_segments(void);

/** Rank and size of an internal communicator. */
int cgpu_comm_rank(const cgpu_comm_t *comm);
int cgpu_comm_size(const cgpu_comm_t *comm);

/**
 * Allreduce. Collective. sbuf == rbuf means in place; count may be 0; (dt, op) must
 * satisfy cgpu_reduce_supported(). Each rank's buffers may be host or device memory,
 * independently of the other ranks: what the communicator's backend cannot use in
 * place is staged through memory it can use.
 */
cgpu_status_t cgpu_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg);

/**
 * Allreduce of host memory on every rank, by the host algorithms whatever the backend (the
 * communicator's shared-memory ring, or the network across nodes): for a few words of
 * control, such as the largest block the ranks of a v-collective agree on, where a device
 * round trip would cost more than the exchange. Collective; (dt, op) as cgpu_allreduce.
 */
cgpu_status_t cgpu_allreduce_host(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op);

/**
 * Alltoall of contiguous bytes: block i of sbuf (bytes each) goes to rank i and block j
 * of rbuf comes from rank j. Collective. sbuf == rbuf means in place. Device buffers
 * are staged through host memory (the device alltoall is not written yet).
 */
cgpu_status_t cgpu_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes,
                            cgpu_alltoall_alg_t alg);

/**
 * Broadcast bytes from root. Collective. Host backend algorithm (a pipelined chain);
 * device buffers are staged through host memory for now.
 */
cgpu_status_t cgpu_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root);

/**
 * Allgather of contiguous bytes: rank i's sbuf (bytes) lands in block i of rbuf. Collective.
 * sbuf == NULL means in place (this rank's block of rbuf already holds its part).
 * Host backend algorithm (ring); device buffers are staged through host memory for now.
 */
cgpu_status_t cgpu_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/**
 * Reduce-scatter with equal blocks: rbuf (count elements) receives block `rank` of the
 * reduction of every rank's sbuf (size x count elements). sbuf == NULL means in place
 * (rbuf holds the size x count input). Host ring; device buffers staged for now.
 */
cgpu_status_t cgpu_reduce_scatter_block(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                        size_t count, cgpu_dtype_t dt, cgpu_op_t op);

/**
 * Reduce-scatter with any counts: rbuf (counts[rank] elements) receives this rank's block of
 * the reduction of every rank's sbuf (the sum of counts, blocks in rank order). sbuf == NULL
 * means in place (rbuf holds the whole input). Equal counts run as
 * cgpu_reduce_scatter_block; otherwise as an allreduce into memory the communicator keeps
 * (on the device when rbuf is device memory, grown to the largest call, freed with the
 * communicator), from which this rank's block is copied.
 */
cgpu_status_t cgpu_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                  const size_t *counts, cgpu_dtype_t dt, cgpu_op_t op);

/**
 * Allgather with a byte count per rank: rank p's sbuf (bytes[p]) lands at rbuf + offs[p]
 * (a signed byte offset).
 * sbuf == NULL means in place (this rank's block is already at rbuf + offs[rank]). Equal
 * counts laid back to back run as cgpu_allgather on rbuf; otherwise every block is padded
 * to the largest in memory the communicator keeps (size x largest bytes, on the device for
 * a device rbuf) and copied out. bytes must match on every rank; offs are this rank's.
 */
cgpu_status_t cgpu_allgatherv(cgpu_comm_t *comm, const void *sbuf, void *rbuf, const size_t *bytes,
                              const ptrdiff_t *offs);

/**
 * Gather: rank p's sbuf (bytes) lands in block p of the root's rbuf (size x bytes). sbuf ==
 * NULL at the root means in place. Runs as an allgather: the other ranks receive the whole
 * message into memory the communicator keeps.
 */
cgpu_status_t cgpu_gather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes, int root);

/**
 * Scatter: block p of the root's sbuf (size x bytes) lands in rank p's rbuf (bytes). rbuf ==
 * NULL at the root means in place. @p alg as cgpu_scatter_choose() resolves it:
 * CGPU_SCATTER_RS: a reduce-scatter of the root's message
 * summed with zeros the other ranks keep (as large as the whole message), straight into
 * rbuf; otherwise a broadcast of the whole message (into memory the communicator keeps on
 * the other ranks) and a copy of the rank's block.
 */
cgpu_status_t cgpu_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes, int root,
                           cgpu_scatter_alg_t alg);

/**
 * One rank's layout of the blocks of a v-collective: block p is bytes[p] bytes at base +
 * offs[p] (a signed byte offset). The collectives below pad every block to maxb, the
 * largest block of any rank (which every rank must pass alike), so that they run as the
 * uniform collective of maxb bytes per rank; a layout that is not already padded (every
 * block maxb bytes at p x maxb) is copied through memory the communicator keeps (size x
 * maxb, twice for an alltoallv that needs both sides; on the device for device buffers).
 */
typedef struct cgpu_blocks {
    char *base;
    const size_t *bytes;
    const ptrdiff_t *offs;
} cgpu_blocks_t;

/**
 * Alltoallv: block p of this rank's send layout @p s lands as block `rank` of rank p's
 * receive layout @p r. s == NULL means in place (the blocks are sent from @p r). Runs as
 * cgpu_alltoall of maxb bytes per peer.
 */
cgpu_status_t cgpu_alltoallv(cgpu_comm_t *comm, const cgpu_blocks_t *s, const cgpu_blocks_t *r,
                             size_t maxb, cgpu_alltoall_alg_t alg);

/**
 * Gatherv: rank p's sbuf (sbytes) lands as block p of the root's layout @p r (significant at
 * the root only). sbuf == NULL at the root means in place (its block is already in @p r).
 * Runs as an allgather of maxb bytes per rank, as cgpu_gather does.
 */
cgpu_status_t cgpu_gatherv(cgpu_comm_t *comm, const void *sbuf, size_t sbytes,
                           const cgpu_blocks_t *r, size_t maxb, int root);

/**
 * Scatterv: block p of the root's layout @p s (significant at the root only) lands in rank
 * p's rbuf (rbytes). rbuf == NULL at the root means in place. Runs as cgpu_scatter of maxb
 * bytes per rank (a block shorter than maxb through memory the communicator keeps).
 */
cgpu_status_t cgpu_scatterv(cgpu_comm_t *comm, const cgpu_blocks_t *s, void *rbuf, size_t rbytes,
                            size_t maxb, int root, cgpu_scatter_alg_t alg);

/**
 * Reduce to root: rbuf (significant at the root only) receives the reduction of every
 * rank's sbuf. sbuf == NULL at the root means in place (rbuf holds its input). Host
 * chain; device buffers staged for now.
 */
cgpu_status_t cgpu_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                          cgpu_dtype_t dt, cgpu_op_t op, int root);

/**
 * Inclusive (exclusive: false) or exclusive prefix reduction, as MPI_Scan / MPI_Exscan:
 * rank r's rbuf receives sbuf of ranks 0..r (exclusive: 0..r-1; rank 0's rbuf is then not
 * written) reduced left to right, in rank order. sbuf == NULL means in place (rbuf holds
 * the input). Collective. With CGPU_SCAN_AUTO, on the cuda backend inside a node, our
 * kernels run it: a small call as one oneshot call (each rank sends its input to the ranks
 * after it), a larger one as a chain from rank 0 to rank n-1 (health counted as an
 * allreduce's). Otherwise every rank's input is gathered (an allgather, in rounds of at
 * most @p round_bytes per rank, into host scratch the communicator keeps: ranks x that at
 * most) and each rank folds what it needs there. round_bytes must be the same on every
 * rank.
 */
cgpu_status_t cgpu_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                        cgpu_dtype_t dt, cgpu_op_t op, bool exclusive, cgpu_scan_alg_t alg,
                        size_t round_bytes);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_ENGINE_H */
