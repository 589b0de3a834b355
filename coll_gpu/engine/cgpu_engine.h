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
#include "cgpu_blocks.h"
#include "cgpu_engine_config.h"
#include "cgpu_stager.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/**
 * A one-node communicator set up before some rank chose its GPU (its first call came
 * first: Open MPI's own allgather inside MPI_Comm_split_type, say) runs the host backend.
 * Every rank asks cgpu_comm_settle_due at the same calls, before running them (blocking
 * calls on the application's thread, non-blocking ones on the worker, in call order): true
 * at the 1st, 2nd, 4th, 8th... call after set-up while unsettled. Where it is, every rank
 * then calls cgpu_comm_settle (collective over @p bs): the ranks tell each other whether
 * they have chosen; once all have, the devices are planned as at set-up and the
 * communicator takes the cuda backend where that plan allows. A failure to set the cuda
 * backend up leaves it on the host backend, settled: every rank returns OK.
 */
bool cgpu_comm_settle_due(cgpu_comm_t *comm);
cgpu_status_t cgpu_comm_settle(cgpu_comm_t *comm, const cgpu_bootstrap_t *bs);

/** Whether cgpu_comm_settle has anything to ask (an atomic load: a post may ask while the
 * worker settles the communicator). */
bool cgpu_comm_unsettled(const cgpu_comm_t *comm);

/** Memory kinds as the engine sees them (per call, per rank). */
typedef enum cgpu_buf_kind {
    CGPU_BUF_HOST = 0,
    CGPU_BUF_DEVICE = 1,
    CGPU_BUF_MANAGED = 2
} cgpu_buf_kind_t;

/** Kind of memory @p ptr points into; HOST when CUDA is not built or not usable. */
cgpu_buf_kind_t cgpu_buf_kind(const void *ptr, int *device);

/** True when this process can use the cuda backend (runtime works, a device is seen). */
bool cgpu_engine_cuda_usable(void);

/** Whether this node may have a GPU for the cuda backend, without initializing CUDA where the
 * driver's device files answer (cgpu_cuda_present): what communicator selection in MPI_Init
 * asks; the set-up at the first collective then asks cgpu_engine_cuda_usable. */
bool cgpu_engine_gpu_present(void);

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
/** Communicators whose own segment came from the pool (coll_gpu_shm_pool), and the segments
 * mapped for the pool alone (kept own ones, idle copies of peers'). */
uint64_t cgpu_engine_shm_reuses(void);
int cgpu_engine_shm_kept(void);

/**
 * The peer whose process died while this rank waited on it in a collective of @p comm, or
 * -1 while none did. Once a peer is found dead the communicator fails for good: every later
 * collective returns CGPU_ERR_PEER_DEAD at once (a dead process never takes part again), and
 * this answer stays. An atomic load: any thread may ask.
 *
 * @param comm  the internal communicator (NULL: -1)
 * @param pid   if not NULL, set to the dead process's id (0 when unknown) when one died
 * @return      its rank in @p comm, or -1
 */
int cgpu_comm_dead_peer(const cgpu_comm_t *comm, long *pid);

/**
 * The peer a failed collective of @p comm waited for in vain, or -1 when none is known. A
 * wait that gives up (past coll_gpu_ras_timeout, or stopped by the watchdog) records the
 * peer it was waiting for; where that peer had itself given up on another (a node-mate
 * whose wait across nodes failed), the one it named. The peer may be dead or only
 * unreachable: unlike cgpu_comm_dead_peer nobody saw its process gone. Across nodes the
 * node-local part's answer counts too. An atomic load: any thread may ask.
 *
 * @param comm  the internal communicator (NULL: -1)
 * @return      its rank in @p comm, or -1
 */
int cgpu_comm_unanswered(const cgpu_comm_t *comm);

/** What a communicator that failed answers every later call with, at once: CGPU_ERR_PEER_DEAD
 * once a peer died, CGPU_ERR_PEER once a collective timed out, hit a device error or, across
 * nodes, did not match; CGPU_OK while it is usable (or NULL). Atomics only. */
cgpu_status_t cgpu_comm_refusal(const cgpu_comm_t *comm);

/** What two ranks' calls differ in (the first that differs, in this order). */
typedef enum cgpu_mismatch_field {
    CGPU_MISMATCH_NONE = 0,
    CGPU_MISMATCH_CALL,  /* different collectives */
    CGPU_MISMATCH_ROOT,  /* different roots */
    CGPU_MISMATCH_OP,    /* different reduction ops */
    CGPU_MISMATCH_DTYPE, /* different element types of a reduction */
    CGPU_MISMATCH_SIZE,  /* different byte counts */
} cgpu_mismatch_field_t;

/** A call whose ranks disagreed (every rank finds the same one). */
typedef struct cgpu_mismatch {
    cgpu_mismatch_field_t field;
    int rank_a, rank_b; /* rank 0 (as the communicator's reports name it; across nodes, of
                         * the first node whose ranks differ, else of node 0), and the first
                         * that differs from it */
    uint64_t a, b;      /* their values of the field (bytes, root, cgpu_op_t, ...) */
    char text[192];     /* both sides in words: "rank 0 passes 8388608 bytes (1048576 x
                         * float64), rank 1 passes 4194304 bytes (524288 x float64)" */
} cgpu_mismatch_t;

/**
 * Why the last collective of @p comm that returned CGPU_ERR_MISMATCH failed: before any data
 * moved, every rank compared its call's signature (kind, bytes, element type and op of
 * reductions, root) with every peer's, and found the same difference. The communicator stays
 * usable: nothing was exchanged, so a later call that matches runs as usual. Across nodes
 * too: each node's ranks compare their calls, then the nodes compare theirs, before any data
 * crosses a node. Ask on the thread that made the call, right after it.
 *
 * @return false when no call failed so (@p out untouched)
 */
bool cgpu_comm_mismatch(const cgpu_comm_t *comm, cgpu_mismatch_t *out);

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
