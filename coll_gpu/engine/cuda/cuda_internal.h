/*
 * coll/gpu engine, cuda backend: what the files of coll_gpu/engine/cuda/ share and nothing
 * else includes. The rest of the engine calls the backend through cgpu_cuda_comm.h (and
 * cgpu_cuda_pool.h); this header holds the communicator's device state and the pieces one
 * call goes through: the block budget (budget.c), the staging of buffers (stage.c), the run
 * of one call (run.c), the launch paths of each algorithm family (ring.c, tree.c, oneshot.c,
 * resident.c, alltoall.c, copy_engine.c) and their entry points (dispatch.c). Builds without
 * CUDA see only the public headers; stubs.c answers for them.
 */
#ifndef CGPU_CUDA_INTERNAL_H
#define CGPU_CUDA_INTERNAL_H

#ifndef CGPU_LOG_SUBSYS
#define CGPU_LOG_SUBSYS CGPU_SUB_CUDA
#endif

#include "cgpu_config.h"
#include "cgpu_cuda_comm.h"

#ifdef CGPU_HAVE_CUDA

#include "cgpu_cuda_kernels.h"

/* ---- a communicator's device state (comm->cuda; setup.c makes and frees it) ---- */

typedef struct cgpu_cuda_comm {
    int device;
    size_t ch_min;      /* coll_gpu_cuda_channel_min_bytes */
    size_t chain_chunk; /* coll_gpu_cuda_chain_chunk_bytes */
    void *stream;
    void *stream2;  /* copy-engine reduce/allreduce (2 ranks, enabled): the copies, ahead
                     * of stream */
    void *ev2;      /* orders stream and stream2 */
    void *stream3;  /* copy-engine allreduce: the flags after stream2's copies, so neither
                     * the copies nor stream's reduction wait behind them */
    void *ev3;      /* orders stream3 after stream2, and stream after stream3 */
    void *order_ev; /* recorded on the legacy default stream (NULL: no ordering) */
    bool blocking;  /* stream is a blocking one: ordered after the default stream already */
    size_t inbox_bytes;
    char **peer_inbox;    /* [size]; own entry is inbox */
    size_t *peer_release; /* [size]: offset of each peer's release word in its inbox */
    cgpu_inbox_t ib;      /* this rank's inbox, from the pool */
    size_t ring_off;
    size_t oneshot_off;
    size_t ll_off;  /* the LL area (classes 0..ll_classes-1), zeroed with the flags */
    int ll_classes; /* LL size classes this communicator has (ll_class) */
    size_t oneshot_slice;
    size_t tree_off;
    int tree_nch;
    size_t tree_max_bytes;
    uint64_t tree_base[CGPU_CUDA_MAX_CHANNELS];
    int nch_max;
    int threads;
    int block_cap;        /* coll_gpu_cuda_block_budget for this communicator's device (0: none) */
    int sms;              /* the device's multiprocessors (0: unknown), asked once at connect */
    bool block_counted;   /* counted in its device's budget's comms (connect to destroy) */
    bool block_over_said; /* a launch past the cap was reported (once a communicator) */
    int blocks_held;      /* blocks the call in progress took (given back when it ends) */
    int nslots;
    size_t slot_bytes;
    uint64_t ring_sbase[CGPU_CUDA_MAX_CHANNELS]; /* items sent right per channel */
    uint64_t ring_rbase[CGPU_CUDA_MAX_CHANNELS]; /* items received from the left */
    uint64_t oneshot_seq;
    uint64_t ll_seq[CGPU_CUDA_LL_CLASSES]; /* each class numbers its calls (cgpu_cuda_kernels.h) */
    size_t a2a_off;
    int a2a_cpd_max; /* alltoall channels per peer distance (0: no device alltoall) */
    uint64_t a2a_base[CGPU_CUDA_MAX_CHANNELS];
    uint64_t ce_seq; /* copy-engine calls so far (same on every rank) */
    void *scratch;   /* staging for buffers the kernels cannot use in place */
    size_t scratch_bytes;
    void *zeros; /* cgpu_cuda_comm_zeros */
    size_t zeros_bytes;
    char *pinned; /* host buffers pass through here, so no copy of ours is pageable */
    size_t pinned_bytes;
    bool shared_device;                    /* two ranks of the communicator run on one device */
    volatile unsigned long long *err_host; /* kernels' error record, host view */
    unsigned long long *err_dev;           /* the same, device view */
    unsigned long long timeout_ns;
    /* the resident oneshot kernel (resident.c) */
    void *rk_stream;      /* non-blocking: the default stream never waits for it */
    void *rk_ev;          /* recorded after each launch: whether the kernel has ended */
    uint64_t *rk_ctl;     /* control block, host view: RK_DESC.., RK_DONE.., RK_EXITED */
    uint64_t *rk_ctl_dev; /* the same, device view */
    uint64_t *rk_state;   /* device memory the kernel's blocks share */
    uint64_t rk_k;        /* descriptors written */
    bool rk_running;      /* launched, and not seen ending */
    bool rk_listed;       /* counted in rk_count, on the rk_head list */
    cgpu_dtype_t rk_dt;   /* the running (or last) kernel's reduction */
    cgpu_op_t rk_op;
    int rk_blocks;
    bool rk_cluster;      /* the kernel may be one thread block cluster (rk_cluster_now) */
    bool rk_placing;      /* this communicator holds a count of budget placing (rk_claim) */
    uint64_t rk_claim_ns; /* ... since then */
    uint64_t rk_launch_ns; /* the running kernel's launch (coll_gpu_cuda_resident_life_us) */
    struct cgpu_cuda_comm *rk_next;
    uint64_t rk_calls, rk_launches, rk_cluster_launches, rk_wait_ns; /* reported at destroy */
} cgpu_cuda_comm_t;

/* ---- the block budget (budget.c) ---- */

/* The block budget (coll_gpu_cuda_block_budget). Our kernels spin on the GPU until their
 * peers' kernels deliver; calls in flight on several communicators at once (non-blocking
 * calls' workers, application threads) whose blocks the GPU cannot all hold leave some
 * blocks undispatched behind spinning ones, and where ranks posted the calls in different
 * orders each waits for the other for ever (twelve communicators with 4 MB
 * allreduces crossed, 32 ring blocks of 512 threads each, one block per multiprocessor at
 * 80-108 registers a thread). So every launch takes its blocks from a count per device
 * shared by the process's threads, and past the budget runs its parts on fewer blocks
 * (cgpu_cuda_kernels.h, CGPU_CUDA_GRID_DOC): each rank's own choice. */
typedef struct {
    int used;     /* blocks taken and not given back (cgpu_blocks_take) */
    int comms;    /* this process's connected communicators on the device */
    int launched; /* its calls with launched kernels in flight there (rk_cluster_now) */
    int placing;  /* resident clusters launched and not yet seen running (rk_claim) */
    int held;     /* calls that waited for one (reported at verbose 10) */
} cgpu_cuda_block_budget_t;

/** The budget of @p cc's device (NULL: a device past the ones counted). */
cgpu_cuda_block_budget_t *cgpu_cuda_budget_of(const cgpu_cuda_comm_t *cc);
/** The blocks this rank's kernels may hold on the device at once, @p share ranks on it
 * (0: no budget). */
int cgpu_cuda_block_cap(const cgpu_cuda_comm_t *cc, int share);
/** Of the cap, the blocks kept for launches that find the others taken. */
int cgpu_cuda_spare_now(const cgpu_cuda_comm_t *cc, const cgpu_cuda_block_budget_t *b);
/** A launch's grid for @p want parts taken in multiples of @p pair (0: every part a block,
 * where there is no budget); held until cgpu_cuda_blocks_give. */
int cgpu_cuda_blocks_take(cgpu_cuda_comm_t *cc, int want, int pair);
/** The call's kernels have ended: give back what it took. */
void cgpu_cuda_blocks_give(cgpu_cuda_comm_t *cc);
/** A call with launched kernels (not the resident kernel's) begins: counted, and held while
 * a resident cluster is being placed. */
void cgpu_cuda_launched_begin(cgpu_cuda_comm_t *cc);
/** ... and its kernels have ended. */
void cgpu_cuda_launched_end(cgpu_cuda_comm_t *cc);

/* ---- one call on the device: staging (stage.c) and its run (run.c) ---- */

/* Where a buffer lives, looked up once per call (a driver query each time). */
typedef struct cgpu_cuda_buf_kind {
    bool in_place; /* the kernels on cc->device can use it as it is */
    bool host;     /* host memory: staged by the CPU through pinned memory */
} cgpu_cuda_buf_kind_t;

/*
 * One collective on the device. The input (in_bytes at sbuf) may lie inside the output
 * (out_bytes at rbuf): the in-place forms. What the kernels cannot use in place (host
 * memory, another device's memory) is staged through scratch; with force_copy_in the
 * input is always copied first (an in-place alltoall reads what it overwrites).
 */
typedef cgpu_status_t (*cgpu_cuda_launch_fn)(cgpu_comm_t *comm, const void *in, void *out,
                                             const void *args);
typedef struct cgpu_cuda_call {
    const char *kind, *dtype, *op, *alg;
    size_t count, bytes; /* for the profiler */
    int ras_alg;
    const void *sbuf;
    size_t in_bytes;
    void *rbuf;
    size_t out_bytes;
    bool force_copy_in;
    size_t align;  /* of the elements the kernels load (cgpu_cuda_dtype_align; 0: bytes) */
    bool resident; /* fn hands the call to the resident kernel and waits for it itself; both
                    * buffers are usable in place */
    cgpu_cuda_launch_fn fn;
    const void *args;
    /* device memory that also gets tail_bytes of the result from tail_off (a scatter's own
     * block), copied on the stream before the wait, so with no wait of its own (a resident
     * call, which has no stream, copies it after) */
    void *tail;
    size_t tail_off, tail_bytes;
    /* a padded pair's result (cgpu_cuda_allreduce): the output goes to scratch, and only
     * the data runs of the elements po asks for go out of it, on the stream; in_bytes
     * ends at the input's last data byte, so the input is always copied in */
    const cgpu_pairs_out_t *po;
    cgpu_dtype_t po_dt;
} cgpu_cuda_call_t;

/* Where the kernels read and write, and what to copy back afterwards. */
typedef struct cgpu_cuda_staged {
    const void *in;
    void *out;
    bool copy_out;  /* out is scratch: copy it to rbuf after the kernel */
    char *host_out; /* rbuf is host memory: scratch -> here (pinned) -> rbuf by the CPU */
} cgpu_cuda_staged_t;

/** Scratch (device memory) of at least @p bytes, grown only where no kernel can wait. */
cgpu_status_t cgpu_cuda_ensure_scratch(cgpu_cuda_comm_t *cc, size_t bytes);
/** Pinned host memory of at least @p bytes, the host buffers' way through. */
cgpu_status_t cgpu_cuda_ensure_pinned(cgpu_cuda_comm_t *cc, size_t bytes);
/** What buffer @p p is to @p cc's kernels, which load elements aligned to @p align. */
cgpu_cuda_buf_kind_t cgpu_cuda_buf_kind(const cgpu_cuda_comm_t *cc, const void *p, size_t align);
/** The alignment the kernels' loads of @p dt need. */
size_t cgpu_cuda_dtype_align(cgpu_dtype_t dt);
/** Orders @p cc's stream after the caller's work and copies in what call @p k's kernels
 * cannot use in place; @p sg says where they read and write. */
cgpu_status_t cgpu_cuda_stage(cgpu_cuda_comm_t *cc, const cgpu_cuda_call_t *k,
                              cgpu_cuda_staged_t *sg);
/** Runs call @p k on the communicator's device: staged, launched (k->fn), waited for, copied
 * out; a kernel's timeout is reported and returned as CGPU_ERR_TIMEOUT. */
cgpu_status_t cgpu_cuda_run(cgpu_comm_t *comm, const cgpu_cuda_call_t *k);

/* ---- launch paths (a cgpu_cuda_launch_fn each; args a cgpu_cuda_ring_call_t) ---- */

/* A call of the ring, tree, oneshot and resident kernels. */
typedef struct cgpu_cuda_ring_call {
    int mode; /* CGPU_CUDA_RING_* */
    int root;
    size_t count; /* elements (per block where the mode has blocks); bytes when copying */
    cgpu_dtype_t dt;
    cgpu_op_t op;
    bool copy;
} cgpu_cuda_ring_call_t;

/** The ring kernels, and the chains along the ring (ring.c). */
cgpu_status_t cgpu_cuda_launch_ring(cgpu_comm_t *comm, const void *in, void *out, const void *args);
/** The tree allreduce (tree.c). */
cgpu_status_t cgpu_cuda_launch_tree(cgpu_comm_t *comm, const void *in, void *out, const void *args);
/** A launched oneshot call (oneshot.c). */
cgpu_status_t cgpu_cuda_launch_oneshot(cgpu_comm_t *comm, const void *in, void *out,
                                       const void *args);
/** A oneshot call handed to the resident kernel, waited for on the host (resident.c). */
cgpu_status_t cgpu_cuda_launch_resident(cgpu_comm_t *comm, const void *in, void *out,
                                        const void *args);

/* ---- oneshot calls (oneshot.c) ---- */

/** The name of oneshot mode @p mode (for the trace). */
const char *cgpu_cuda_oneshot_name(int mode);
/** Bytes of one block of the call (the unit the kernel splits among its blocks). */
size_t cgpu_cuda_oneshot_unit(const cgpu_cuda_ring_call_t *rc);
/** The kernel's mode for oneshot call @p rc and the call's number (the same on every rank). */
uint64_t cgpu_cuda_oneshot_number(cgpu_cuda_comm_t *cc, const cgpu_cuda_ring_call_t *rc, int *mode);
/** A oneshot call's blocks for @p unit bytes a block (the same on every rank). */
size_t cgpu_cuda_oneshot_blocks(size_t unit);
/** Whether a call of another collective than the allreduce, @p unit bytes a block, goes
 * oneshot (the same answer on every rank). */
bool cgpu_cuda_small_call(const cgpu_comm_t *comm, cgpu_cuda_small_kind_t kind, size_t unit);
/** Runs @p k as a oneshot call of @p rc, resident where this rank may. */
cgpu_status_t cgpu_cuda_run_small(cgpu_comm_t *comm, cgpu_cuda_call_t *k,
                                  cgpu_cuda_ring_call_t *rc);

/* ---- the resident kernel (resident.c) ---- */

/** The resident kernel's streams, control block and state, where it is enabled for @p comm. */
cgpu_status_t cgpu_cuda_rk_setup(cgpu_comm_t *comm, cgpu_cuda_comm_t *cc);
/** Ends @p cc's resident kernel and takes it off the process's list, its blocks given back
 * (destroy, with no call of the communicator in progress). */
void cgpu_cuda_rk_unlist(cgpu_cuda_comm_t *cc);
/** The resident kernel's report (verbose 10), once it has ended. */
void cgpu_cuda_rk_report(const cgpu_comm_t *comm, cgpu_cuda_comm_t *cc);
/** Whether a resident call waits for the default stream after writing its descriptor. */
bool cgpu_cuda_rk_gated(const cgpu_cuda_comm_t *cc);
/** Whether this rank may hand a oneshot call of @p unit bytes a block on @p sbuf and
 * @p rbuf (NULL: none) to the resident kernel. */
bool cgpu_cuda_rk_takes(cgpu_comm_t *comm, const void *sbuf, const void *rbuf, size_t unit,
                        size_t align);

/* ---- the copy-engine paths (copy_engine.c): each runs call @p k on the copy engines when
 * every rank can, *done saying whether it did (if not, *k is as it was and the caller runs
 * its kernels); collective: every rank calls it for the same call ---- */

cgpu_status_t cgpu_cuda_ce_try_bcast(cgpu_comm_t *comm, cgpu_cuda_call_t *k, void *buf,
                                     size_t bytes, int root, bool *done);
cgpu_status_t cgpu_cuda_ce_try_reduce(cgpu_comm_t *comm, cgpu_cuda_call_t *k, const void *sbuf,
                                      void *rbuf, size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                      int root, bool *done);
cgpu_status_t cgpu_cuda_ce_try_allreduce(cgpu_comm_t *comm, cgpu_cuda_call_t *k, const void *sbuf,
                                         void *rbuf, size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                         bool may, bool *done);
cgpu_status_t cgpu_cuda_ce_try_alltoall(cgpu_comm_t *comm, cgpu_cuda_call_t *k, const void *sbuf,
                                        void *rbuf, size_t bytes, bool *done);

#endif /* CGPU_HAVE_CUDA */

#endif /* CGPU_CUDA_INTERNAL_H */
