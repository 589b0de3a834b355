/*
 * coll/gpu engine: the process-wide configuration: backends, algorithm choices and every
 * tunable, filled from MCA parameters by the glue (or by tests).
 */
#ifndef CGPU_ENGINE_CONFIG_H
#define CGPU_ENGINE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_log.h"
#include "cgpu_thread.h"

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
    size_t slot_bytes;           /* ring pipeline chunk: one slot of a peer's receive queue */
    int nslots;                  /* ring queue depth per connection (>= 1) */
    size_t stage_bytes;          /* alltoall staging area per rank and communicator */
    size_t shared_stage_bytes;   /* ... at least this large where device buffers are staged
                                  * because ranks share a GPU (the allreduce's rounds there) */
    int max_comms;               /* cap on live internal communicators (0 = no cap) */
    int verbose;                 /* messages with level <= verbose are printed */
    cgpu_log_fn_t log;           /* may be NULL: messages go to stderr */
    unsigned log_subsystems;     /* cgpu_subsys_t bits whose messages above WARN print */
    cgpu_progress_fn_t progress; /* may be NULL: waits only wait */
    bool force_node_per_rank;    /* pretend every rank is on its own node (tests) */
    /* cuda backend */
    int cuda_channels;                     /* most ring channels (thread blocks) per call */
    int cuda_threads;                      /* threads per block */
    size_t cuda_slot_bytes;                /* ring slot per channel and step */
    int cuda_slots;                        /* ring pipeline depth per channel */
    size_t cuda_oneshot_bytes;             /* largest message of the oneshot algorithm (auto) */
    size_t cuda_oneshot_block_bytes;       /* a oneshot call takes a block per this many bytes */
    size_t cuda_oneshot_small_block_bytes; /* ... or per this many, while that is at most 8
                                            * blocks (0: never) */
    size_t cuda_ll_bytes;      /* oneshot calls up to this many bytes a block: LL lines (0: none) */
    long cuda_small_bytes;     /* bcast/reduce/allgather/alltoall/reduce_scatter_block blocks
                                * up to this go oneshot (0: never; -1: cgpu_cuda_small_limit's
                                * table) */
    double cuda_timeout_s;     /* a kernel waiting longer on a peer fails the call (0: never) */
    int cuda_tree_channels;    /* tree channels (two blocks each); 0 disables the tree */
    int cuda_a2a_channels;     /* alltoall channels shared by the peers; 0: host-staged alltoall */
    int cuda_inbox_pool;       /* released inboxes kept for reuse (0: free each one) */
    int shm_pool;              /* released node segments kept for reuse, and 8x as many idle
                                * peer mappings (0: unmap each one) */
    int cuda_ipc_cache_size;   /* unreferenced peer mappings kept (0: close each one) */
    const char *profiler;      /* path of a profiler plugin (NULL/"" = none) */
    double ras_timeout_s;      /* watchdog: report a collective stuck this long (0: off) */
    bool ras_abort_on_timeout; /* ... and fail it (and the communicator) instead of waiting */
    bool check_calls;          /* compare every call's signature with the peers' first */
    size_t cuda_tree_max_bytes;    /* auto: tree for 3+ ranks from the oneshot limit up to this */
    size_t cuda_channel_min_bytes; /* ring/chain: a channel more only while each piece has this */
    size_t cuda_chain_chunk_bytes; /* chains of 3+ ranks: steps at most this big (0: a slot) */
    int cuda_stream_order;         /* device-buffer calls start after the default stream's work:
                                    * CGPU_ORDER_* (auto resolved by cgpu_engine_set_threads) */
    int cuda_wait_polls;           /* completion polls before yielding (-1: never yields;
                                    * -2: auto, resolved by cgpu_engine_set_threads) */
    size_t cuda_ce_alltoall_min_bytes;  /* copy engines for alltoalls this large (0: never) */
    size_t cuda_ce_bcast_min_bytes;     /* ... and for 2-rank bcasts (0: never) */
    size_t cuda_ce_reduce_min_bytes;    /* ... and for 2-rank reduces (0: never) */
    size_t cuda_ce_allreduce_min_bytes; /* ... and for 2-rank allreduces (0: never) */
    int cuda_resident;                  /* resident small-allreduce kernels: 1 on, 0 off, -1 auto
                                         * (resolved by cgpu_engine_set_threads) */
    size_t cuda_resident_max_bytes;     /* allreduces up to this size take them */
    double cuda_resident_idle_us;       /* a resident kernel ends after this long without work */
    double cuda_resident_life_us;       /* ... and is ended between calls once it has run this
                                         * long (0: never) */
    int cuda_resident_max_kernels;      /* at most this many per process at once */
    int cuda_resident_cluster;          /* one thread block cluster where the device has them: 0
                                         * never, 1 when no other kernel of the process can be on the
                                         * device (cgpu_cuda_comm.c, rk_cluster_now), 2 always */
    bool cuda_resident_gate;            /* a resident call gets its descriptor before the host
                                         * waits for the default stream, and waits at a gate for
                                         * that wait's end before it reads a buffer (given back
                                         * past the idle time) */
    bool cuda_setup_exclusive;          /* a communicator's CUDA set-up waits until no collective
                                         * kernel of the process is in flight (cgpu_cuda_setup_begin) */
    int cuda_setup_wait_ms; /* ... for at most this long, then goes ahead (-1: for ever) */
    bool cuda_time_sliced;  /* run the kernels also where ranks share a device without
                             * MPS (else such a communicator, where the backend is auto,
                             * takes the host backend) */
    int cuda_block_budget;  /* thread blocks of this process's collective kernels in
                             * flight on a device at once (-1: what the device holds at
                             * once, shared by the ranks on it; 0: no budget) */
    int cuda_block_spare;   /* of those, blocks kept for calls that find the rest taken,
                             * one block (or pair) each (-1: one for every other
                             * communicator on the device, cgpu_blocks_spare) */
    /* inter-node proxy (libfabric; cgpu_proxy.h) */
    const char *ofi_provider;  /* provider name; NULL or "": the best found, tcp as fallback */
    int proxy_max_peers;       /* peers one process connects to at most (0: no cap) */
    int proxy_max_inflight;    /* operations the proxy keeps posted at once (>= 1) */
    size_t proxy_bounce_bytes; /* pinned bounce buffer per device-memory chunk (x2 per op) */
    int fake_node;             /* >= 0: this process claims node "fake-node-<n>" (tests) */
    size_t stage_pinned_bytes; /* pinned host memory kept for the host copies of device
                                * buffers, at most (cgpu_host_pool.h) */
    bool stage_host_buffers;   /* tests: stage host memory like device memory where the
                                * engine stages (inter-node reductions) */
    size_t stage_direct_min;   /* staged allreduce through the stage areas from this many
                                * bytes (cgpu_allreduce_direct.c; 0: never); rank 0's counts */
} cgpu_config_t;

/** How a device-buffer call is ordered after the work the caller queued on the default
 * stream (cuda backend). */
enum {
    CGPU_ORDER_AUTO = -1,           /* EVENT (cgpu_engine_set_threads) */
    CGPU_ORDER_NONE = 0,            /* the application synchronizes its buffers itself */
    CGPU_ORDER_EVENT = 1,           /* an event on the legacy stream, waited for by our stream */
    CGPU_ORDER_BLOCKING_STREAM = 2, /* our stream is a blocking one: implicit ordering after
                                     * the legacy stream (not after other blocking streams) */
};

/** Fill @p cfg with the documented defaults. */
void cgpu_config_default(cgpu_config_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_ENGINE_CONFIG_H */
