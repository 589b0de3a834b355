/*
 * coll/gpu: Open MPI glue (component, module, and what the MPI entry points share).
 *
 * Only files in coll_gpu/ (outside engine/) include Open MPI headers. They decide per
 * call whether the engine serves it or the previous coll module does (the fallback),
 * and they translate engine statuses into MPI error classes. The entry points themselves
 * are declared in coll_gpu_entry.h, the non-blocking machinery in coll_gpu_nb.h; this
 * header is what both build on.
 */
#ifndef MCA_COLL_GPU_H
#define MCA_COLL_GPU_H

#include "ompi_config.h"

#include <stdatomic.h>

#include "mpi.h"
#include "mpi-ext.h" /* MPIX_ERR_PROC_FAILED where Open MPI has ULFM */
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "opal/mca/base/mca_base_var.h"

#include "cgpu_engine.h"

BEGIN_C_DECLS

/** Component with its MCA parameter storage (registered in coll_gpu_component.c). */
typedef struct mca_coll_gpu_component_t {
    mca_coll_base_component_2_0_0_t super;
    int priority;
    int self_priority;  /* communicators of one rank (above coll/self's 75) */
    int nb_max_workers; /* worker threads for non-blocking engine collectives */
    int nb_engine;      /* non-blocking collectives on the engine: -1 auto, 1 on, 0 off */
    int host_rule;      /* mca_coll_gpu_host_rule_t */
    int verbose;
    char *verbose_subsystems; /* coll_gpu_verbose_subsystems */
    unsigned log_subsystems;  /* the bits it names (cgpu_subsys_t) */
    int output;               /* opal_output stream, verbosity = verbose */
    int backend;
    int allreduce_algorithm;
    int alltoall_algorithm;
    int bcast_algorithm;
    int reduce_algorithm;
    int reduce_scatter_algorithm;
    int allgather_algorithm; /* allgatherv too */
    int gather_algorithm;
    int scatter_algorithm;
    int scan_algorithm;                 /* MPI_Scan and MPI_Exscan, blocking and non-blocking */
    unsigned long gather_scratch_bytes; /* gather/scatter/allgatherv: whole message, at most */
    unsigned long allreduce_min_bytes;  /* below: fallback */
    unsigned long allreduce_max_bytes;  /* above: fallback (0 = no limit) */
    unsigned long alltoall_min_bytes;
    unsigned long alltoall_max_bytes;
    unsigned long slot_bytes;
    int slots;
    unsigned long stage_bytes;
    unsigned long shared_stage_bytes;
    int max_comms;
    int cuda_channels;
    int cuda_threads;
    unsigned long cuda_slot_bytes;
    int cuda_slots;
    unsigned long cuda_oneshot_bytes;
    int cuda_small_bytes; /* -1: the table of cgpu_cuda_small_limit */
    unsigned long cuda_oneshot_block_bytes;
    unsigned long cuda_oneshot_small_block_bytes;
    unsigned long cuda_ll_bytes;
    double cuda_timeout;
    int cuda_tree_channels;
    int cuda_a2a_channels;
    int cuda_inbox_pool;
    int shm_pool;
    int cuda_ipc_cache_size;
    unsigned long cuda_tree_max_bytes;
    unsigned long cuda_channel_min_bytes;
    unsigned long cuda_chain_chunk_bytes;
    int cuda_stream_order;
    int cuda_wait_polls;
    unsigned long cuda_ce_alltoall_min_bytes;
    unsigned long cuda_ce_bcast_min_bytes;
    unsigned long cuda_ce_reduce_min_bytes;
    unsigned long cuda_ce_allreduce_min_bytes;
    int cuda_resident;
    unsigned long cuda_resident_max_bytes;
    double cuda_resident_idle_us;
    double cuda_resident_life_us;
    int cuda_resident_max_kernels;
    int cuda_resident_cluster;
    bool cuda_resident_gate;
    bool cuda_setup_exclusive;
    int cuda_setup_wait_ms;
    bool cuda_time_sliced;
    int cuda_block_budget;
    int cuda_block_spare;
    char *profiler;                   /* path of a profiler plugin */
    char *ofi_provider;               /* inter-node proxy: libfabric provider ("" = best) */
    int proxy_max_peers;              /* ... peers one process connects to at most */
    int proxy_max_inflight;           /* ... operations posted at once */
    unsigned long proxy_bounce_bytes; /* ... pinned bounce chunk for device memory */
    int fake_nodes;                   /* testing: spread the ranks over this many fake nodes */
    bool stage_host_buffers;          /* testing: stage host buffers as if they were on a device */
    unsigned long stage_chunk_bytes;  /* staged allreduce: chunk of the pipeline */
    unsigned long stage_pipeline_min_bytes; /* ... from this many bytes (0 chunk: never) */
    bool stage_allreduce_engine;            /* ... data moved by the engine, host arithmetic */
    bool stage_allreduce_engine_shared;     /* ... also where ranks share a GPU (MPS) */
    unsigned long stage_pinned_bytes;       /* host mirrors: pinned memory kept, at most */
    unsigned long stage_direct_min_bytes;   /* staged allreduce in the stage areas from */
    double ras_timeout;
    bool ras_abort_on_timeout;
    bool check_calls; /* the ranks' calls compared before data moves (cgpu_call.c) */
    bool engine_up;   /* cgpu_engine_init succeeded */
} mca_coll_gpu_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_gpu_component_t mca_coll_gpu_component;

/** Where a module's engine communicator stands. */
typedef enum cgpu_module_state {
    CGPU_MODULE_UNINIT = 0, /* engine communicator not created yet (lazy) */
    CGPU_MODULE_READY,      /* engine communicator usable */
    CGPU_MODULE_FALLBACK,   /* creation failed on some rank: every call falls back */
    CGPU_MODULE_CREATING,   /* being created by the worker of a non-blocking collective */
} cgpu_module_state_t;

/** The per-communicator module. */
typedef struct mca_coll_gpu_module_t {
    mca_coll_base_module_t super;

    struct ompi_communicator_t *comm; /* not retained: the comm owns us */

    /* the previous modules' functions (a copy of the communicator's table at enable);
     * the modules of the slots listed in coll_gpu_module.c are retained there and
     * released exactly once */
    mca_coll_base_comm_coll_t prev;
    bool prev_saved;
    bool misuse_reported;

    /* engine side */
    cgpu_bootstrap_t bootstrap;
    cgpu_comm_t *ecomm;
    cgpu_module_state_t state;

    /* non-blocking engine collectives: run in order by this communicator's worker thread
     * (coll_gpu_worker.c); a blocking engine call first waits until done == posted */
    struct mca_coll_gpu_nbq *nbq;
    int spans_nodes; /* -1 until the first post asks (mca_coll_gpu_one_node), then 0 or 1 */
    _Atomic unsigned long long nb_posted;
    _Atomic unsigned long long nb_done;
    _Atomic unsigned long long nb_released; /* posted engine requests destroyed: freed by the
                                             * application after they completed */

    /* the MPI error code made for the communicator's failure (coll_gpu_error.c: a peer that
     * died, or one that did not answer): 0 none yet, -1 being made, else the code every
     * later failed call returns */
    _Atomic int dead_code;
    /* mca_coll_gpu_dead_gen when this communicator was last found to have lost no process */
    _Atomic unsigned dead_gen_seen;
    /* the last MPI error code made for a mismatched call, and its text (a repeat reuses it) */
    int mismatch_code;
    char mismatch_msg[MPI_MAX_ERROR_STRING];
    bool mismatch_told; /* rank 0 warned about one */

    /* read by pvars from any thread: atomics only (DESIGN decision 5) */
    _Atomic unsigned long long engine_calls;
    _Atomic unsigned long long fallback_calls;
} mca_coll_gpu_module_t;

OBJ_CLASS_DECLARATION(mca_coll_gpu_module_t);

/* component / module (coll_gpu_component.c, coll_gpu_module.c) */
int mca_coll_gpu_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_gpu_comm_query(struct ompi_communicator_t *comm, int *priority);

/* coll_gpu_fake_nodes' node of world rank @p rank of @p size (tests of the paths across
 * nodes on one machine); the engine's node of this process comes from it too
 * (coll_gpu_bootstrap.c) */
int mca_coll_gpu_fake_node(long rank, long size);
/* whether every rank of @p comm is on this node (Open MPI's locality, and the fake nodes':
 * the same answer on every rank; asked once per communicator by the non-blocking path) */
bool mca_coll_gpu_one_node(struct ompi_communicator_t *comm);

/* coll_gpu_host_rule.c: the host backend's calls the previous module serves better */
typedef enum mca_coll_gpu_host_rule {
    MCA_COLL_GPU_HOST_RULE_MEASURED = 0, /* the windows measured faster go to it */
    MCA_COLL_GPU_HOST_RULE_ENGINE = 1,   /* every call the engine takes (tests) */
} mca_coll_gpu_host_rule_t;
typedef enum mca_coll_gpu_host_coll {
    MCA_COLL_GPU_HOST_ALLREDUCE,
    MCA_COLL_GPU_HOST_ALLTOALL,
    MCA_COLL_GPU_HOST_BCAST,
    MCA_COLL_GPU_HOST_ALLGATHER,
} mca_coll_gpu_host_coll_t;
/* whether a blocking call of @p coll moving @p bytes (the allreduce's and bcast's buffer, one
 * block of the alltoall and allgather) goes to the previous module; equal on every rank */
bool mca_coll_gpu_host_leaves(mca_coll_gpu_module_t *m, mca_coll_gpu_host_coll_t coll,
                              size_t bytes);
/* whether @p m's communicator spans nodes (mca_coll_gpu_one_node, asked once) */
bool mca_coll_gpu_spans_nodes(mca_coll_gpu_module_t *m);

/* whether @p module (may be NULL) is one of ours, of any communicator size */
bool mca_coll_gpu_is_ours(const mca_coll_base_module_t *module);
/* our module on @p comm, found through the slots we serve; NULL when we serve none */
mca_coll_gpu_module_t *mca_coll_gpu_module_of(struct ompi_communicator_t *comm);

/* the engine communicator, created at the first engine-path call (collective), after the
 * communicator's queued non-blocking engine collectives are done: a blocking engine call
 * follows them (coll_gpu_worker.c) */
int mca_coll_gpu_lazy_init(mca_coll_gpu_module_t *m, const void *buf);
/* create the engine communicator through @p bs (collective; on the device of @p buf when
 * that is device memory): state READY or FALLBACK afterwards, the same on every rank
 * (coll_gpu_bootstrap.c) */
void mca_coll_gpu_create(mca_coll_gpu_module_t *m, const void *buf, const cgpu_bootstrap_t *bs);
/* a communicator set up before its ranks chose GPUs: ask again through @p bs, maybe take the
 * cuda backend (collective: called at every engine call of a ready module, in call order;
 * returns at once once the communicator is settled; cgpu_comm_settle) */
void mca_coll_gpu_settle(mca_coll_gpu_module_t *m, const void *buf, const cgpu_bootstrap_t *bs);

/* bootstrap over the previous module (coll_gpu_bootstrap.c) */
void mca_coll_gpu_bootstrap_setup(mca_coll_gpu_module_t *m);

/* the non-blocking machinery's life (coll_gpu_request.c, coll_gpu_worker.c): the progress
 * callback, registered at open and unregistered at close; a communicator's worker, stopped
 * by the module destructor */
void mca_coll_gpu_nb_open(void);
void mca_coll_gpu_nb_close(void);
void mca_coll_gpu_nb_module_fini(mca_coll_gpu_module_t *m);
/* frees the worker queues kept for reuse (component close, every communicator freed) */
void mca_coll_gpu_nb_workers_close(void);

/* MPI -> engine translation (coll_gpu_types.c) */
bool mca_coll_gpu_map_op(struct ompi_op_t *op, cgpu_op_t *out);
int mca_coll_gpu_status_to_mpi(cgpu_status_t st);
/* the MPI code for an engine call's status; a failure is reported with the operation
 * (@p what) and the communicator's name, and a dead peer gets a code of its own whose
 * string names it (coll_gpu_error.c) */
int mca_coll_gpu_engine_rc(cgpu_status_t st, const char *what, struct ompi_communicator_t *comm);
/* the error class of a dead peer: ULFM's where Open MPI has it, else MPI_ERR_OTHER */
#if defined(MPIX_ERR_PROC_FAILED)
#define MCA_COLL_GPU_ERR_PEER_DEAD_CLASS MPIX_ERR_PROC_FAILED
#else
#define MCA_COLL_GPU_ERR_PEER_DEAD_CLASS MPI_ERR_OTHER
#endif

/* host mirrors of device buffers (coll_gpu_fallback.c): the span count elements of
 * dtype touch, copied in (receive spans too, so gaps keep their bytes) and back out */
typedef struct mca_coll_gpu_mirror_t {
    void *dev;       /* the user's pointer */
    char *mem;       /* host copy of the span (pooled pinned memory, or malloc'd) */
    ptrdiff_t first; /* offset of the span's first byte from dev */
    size_t span;
} mca_coll_gpu_mirror_t;
bool mca_coll_gpu_on_device(const void *p);
/* The first byte that count elements of dtype at buf address (buf + the layout's true lower
 * bound), buf itself where nothing is addressed (MPI_IN_PLACE, count 0, a type of no bytes);
 * and whether that byte is device memory. A call's memory kind is read there, never from the
 * buffer argument alone: with MPI_BOTTOM (NULL) as the buffer, the data lives at the absolute
 * addresses its displacements or its datatype hold. */
const void *mca_coll_gpu_first_byte(const void *buf, size_t count, struct ompi_datatype_t *dtype);
bool mca_coll_gpu_on_device_at(const void *buf, size_t count, struct ompi_datatype_t *dtype);
int mca_coll_gpu_mirror_in(mca_coll_gpu_mirror_t *m, const void *buf, size_t count,
                           struct ompi_datatype_t *dtype, void **host);
int mca_coll_gpu_mirror_out(mca_coll_gpu_mirror_t *m, int rc);
/* gives a mirror's host memory back without copying (NULL mem: nothing) */
void mca_coll_gpu_mirror_drop(mca_coll_gpu_mirror_t *m);

/*
 * Calls into the previous module, counted per thread: a previous module may build one
 * collective out of others on the same communicator (reduce_scatter out of reduce and
 * scatterv), which then reach our slots again. Such nested calls go straight through:
 * their buffers were staged by the outer call, and they are not the user's calls.
 */
extern __thread int mca_coll_gpu_depth;
#define MCA_COLL_GPU_PREV(call)                                                                    \
    __extension__({                                                                                \
        int prev_rc_;                                                                              \
        ++mca_coll_gpu_depth;                                                                      \
        prev_rc_ = (call);                                                                         \
        --mca_coll_gpu_depth;                                                                      \
        prev_rc_;                                                                                  \
    })
static inline bool mca_coll_gpu_nested(void)
{
    return mca_coll_gpu_depth > 0;
}

/* Whether a call on @p m's communicator is refused because the communicator lost a
 * process (found by its engine communicator, or by any other communicator of this process)
 * or failed: MPI_SUCCESS (go on), else the error code to return at once, whose string names
 * the dead rank where it is known. Every entry point asks first, so that no path (the engine
 * or the previous module, whose barrier would wait for the dead process for ever) waits on
 * a process known dead (a previous module's building block, nested in a call that was
 * asked, is not asked again). One atomic load until a death or a failure is known in the process
 * (coll_gpu_error.c). */
extern _Atomic unsigned mca_coll_gpu_dead_gen;
int mca_coll_gpu_refused_look(mca_coll_gpu_module_t *m, const char *what,
                              struct ompi_communicator_t *comm);
static inline int mca_coll_gpu_refused(mca_coll_gpu_module_t *m, const char *what,
                                       struct ompi_communicator_t *comm)
{
    if (mca_coll_gpu_nested() ||
        atomic_load_explicit(&mca_coll_gpu_dead_gen, memory_order_acquire) ==
            atomic_load_explicit(&m->dead_gen_seen, memory_order_relaxed)) {
        return MPI_SUCCESS;
    }
    return mca_coll_gpu_refused_look(m, what, comm);
}

/* A blocking engine call, counted in engine_calls: the module is held across it, so that
 * a communicator another thread frees meanwhile (erroneous, but it must not crash) keeps its
 * module until the call returns. Evaluates to the call's cgpu_status_t. */
#define MCA_COLL_GPU_ENGINE(m, call)                                                               \
    __extension__({                                                                                \
        cgpu_status_t engine_st_;                                                                  \
        OBJ_RETAIN(m);                                                                             \
        engine_st_ = (call);                                                                       \
        atomic_fetch_add_explicit(&(m)->engine_calls, 1, memory_order_relaxed);                    \
        OBJ_RELEASE(m);                                                                            \
        engine_st_;                                                                                \
    })

/* the previous module, with device buffers staged through host memory (decision 1) */
int mca_coll_gpu_fallback_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf,
                                    int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm);
int mca_coll_gpu_fallback_alltoall(mca_coll_gpu_module_t *m, const void *sbuf, int scount,
                                   struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                   struct ompi_datatype_t *rdtype,
                                   struct ompi_communicator_t *comm);

/* layout helpers (coll_gpu_pack.c) */
bool mca_coll_gpu_contiguous_run(const void *buf, int count, struct ompi_datatype_t *dtype,
                                 const char **start);
int mca_coll_gpu_typed_copy(const char *typed, char *packed_or_typed, size_t count,
                            struct ompi_datatype_t *dtype, bool pack);

/* the staged fallbacks of the collectives that also have engine paths */
int mca_coll_gpu_staged_bcast(void *buf, int count, struct ompi_datatype_t *dt, int root,
                              struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                  void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                   void *rbuf, const int *rcounts, const int *displs,
                                   struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                                   mca_coll_base_module_t *module);
int mca_coll_gpu_staged_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdt, int root,
                               struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdt, int root,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt,
                                void *rbuf, const int *rcounts, const int *displs,
                                struct ompi_datatype_t *rdt, int root,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_scatterv(const void *sbuf, const int *scounts, const int *displs,
                                 struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                                 struct ompi_datatype_t *rdt, int root,
                                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                                  struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                                  const int *rdispls, struct ompi_datatype_t *rdt,
                                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                                  struct ompi_datatype_t *const *sdts, void *rbuf,
                                  const int *rcounts, const int *rdispls,
                                  struct ompi_datatype_t *const *rdts,
                                  struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
int mca_coll_gpu_staged_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                               struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                               mca_coll_base_module_t *module);
int mca_coll_gpu_staged_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                             struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                             struct ompi_communicator_t *comm,
                                             mca_coll_base_module_t *module);
int mca_coll_gpu_staged_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                       struct ompi_datatype_t *dt, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module);
/* MPI_Scan (ex false) and MPI_Exscan (ex true) on the previous module, device buffers
 * staged, with the engine's host arithmetic for the pairs it reduces */
int mca_coll_gpu_staged_scan(bool ex, const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dt, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, mca_coll_base_module_t *module);
/* the engine reduces (dtype, op) (predefined, defined by MPI; MPI_BYTE bitwise only) */
bool mca_coll_gpu_engine_reduction(struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                   cgpu_dtype_t *dt, cgpu_op_t *eop);
/* the op to hand the previous module for (dtype, op): for a pair the engine reduces, a
 * commutative user op running the engine's host arithmetic (Open MPI 4.1's own saturates
 * 8/16-bit sums and orders MPI_UNSIGNED_LONG as signed); else op; depends on (dtype, op)
 * alone */
struct ompi_op_t *mca_coll_gpu_prev_op(struct ompi_datatype_t *dtype, struct ompi_op_t *op);
/* the host can reduce (dtype, op) with Open MPI's op: a user function, or Open MPI's own
 * function for a predefined datatype */
bool mca_coll_gpu_host_reducible(struct ompi_datatype_t *dtype, struct ompi_op_t *op);

/* MPI_Allgatherv's sizes from arguments every rank passes alike: the receive type's size,
 * the largest block's bytes and all blocks' bytes; false when a count is negative
 * (coll_gpu_pack.c; allgatherv's calls, and the views of the non-blocking v-forms) */
bool mca_coll_gpu_allgatherv_sizes(bool in_place, int scount, const int *rcounts,
                                   struct ompi_datatype_t *rdt, int n, size_t *rsize, size_t *maxb,
                                   size_t *total);
/* MPI_Allgatherv's blocks: each rank's bytes, and its offset in bytes in one run over the
 * span [lo, hi) of elements (displacements) that the blocks with data cover (0, 0: none)
 * (coll_gpu_pack.c) */
void mca_coll_gpu_allgatherv_layout(const int *rcounts, const int *displs, int n, size_t rsize,
                                    size_t *bytes, ptrdiff_t *offs, ptrdiff_t *lo, ptrdiff_t *hi);
/* The largest bytes per rank a padded call (gather(v), scatter(v), allgatherv, alltoallv)
 * keeps memory for on @p n ranks: coll_gpu_gather_scratch_bytes' share */
static inline size_t mca_coll_gpu_padded_max(int n)
{
    return mca_coll_gpu_component.gather_scratch_bytes / (size_t) n;
}

/* One buffer of a staged call: replaced by a host copy of its span when it lives on a
 * device (coll_gpu_staged.c). stage: the copy in (host = the buffer itself otherwise);
 * stage_bytes: the same for the bytes [lo, hi) of buf (host points at buf's place);
 * unstage: the copy back (copy_back) or only its release; returns rc or the copy's error. */
typedef struct mca_coll_gpu_staged_buf_t {
    mca_coll_gpu_mirror_t mirror;
    bool used;
} mca_coll_gpu_staged_buf_t;
int mca_coll_gpu_stage(mca_coll_gpu_staged_buf_t *s, const void *buf, size_t count,
                       struct ompi_datatype_t *dtype, void **host);
int mca_coll_gpu_stage_bytes(mca_coll_gpu_staged_buf_t *s, const void *buf, ptrdiff_t lo,
                             ptrdiff_t hi, void **host);
int mca_coll_gpu_unstage(mca_coll_gpu_staged_buf_t *s, int rc, bool copy_back);

/* whether the bytes [lo, hi) of buf (a staged call's span) hold device memory, read at both
 * ends (buf itself when the span is empty: a device pointer is still not passed on) */
bool mca_coll_gpu_span_on_device(const void *buf, ptrdiff_t lo, ptrdiff_t hi);

/* whether the first byte a (counts, displs) layout of dt at buf addresses, counted from
 * element 0 as its staging copies it, is device memory (MPI_IN_PLACE: no) */
bool mca_coll_gpu_v_on_device(const void *buf, const int *counts, const int *displs, int n,
                              struct ompi_datatype_t *dt);

/* the elements a (counts, displs) layout spans: the furthest displs[i] + counts[i] */
size_t mca_coll_gpu_v_span(const int *counts, const int *displs, int n);

/* more layout helpers (coll_gpu_pack.c): a topology's in- and out-degree (0 where it has
 * none), and the bytes [lo, hi) relative to the buffer that a side's layout touches: count x
 * dt; blocks counts[p] x dt at displs[p] elements; counts[p] x types[p] at idispls[p] or
 * adispls[p] bytes (an alltoallw's, a neighborhood alltoallw's) */
void mca_coll_gpu_degrees(struct ompi_communicator_t *comm, int *in, int *out);
void mca_coll_gpu_count_span(size_t count, struct ompi_datatype_t *dt, ptrdiff_t *lo,
                             ptrdiff_t *hi);
void mca_coll_gpu_v_bytes(const int *counts, const int *displs, struct ompi_datatype_t *dt, int n,
                          ptrdiff_t *lo, ptrdiff_t *hi);
void mca_coll_gpu_w_bytes(const int *counts, const int *idispls, const MPI_Aint *adispls,
                          struct ompi_datatype_t *const *types, int n, ptrdiff_t *lo,
                          ptrdiff_t *hi);

/* One collective call's arguments, as a persistent request keeps them and as the staged
 * intercommunicator paths pass them on: s sent (sc x sdt, or scs/sds x sdt, or sdts), r
 * received (rc x rdt, or rcs/rds x rdt, or rdts); a reduction's count and datatype are rc
 * and rdt; a neighborhood alltoallw's displacements sad/rad; sn, rn: how many blocks a
 * persistent call sends and receives (the type arrays it retains). */
typedef enum {
    CGPU_K_ALLGATHER,
    CGPU_K_ALLGATHERV,
    CGPU_K_ALLREDUCE,
    CGPU_K_ALLTOALL,
    CGPU_K_ALLTOALLV,
    CGPU_K_ALLTOALLW,
    CGPU_K_BCAST,
    CGPU_K_EXSCAN,
    CGPU_K_GATHER,
    CGPU_K_GATHERV,
    CGPU_K_REDUCE,
    CGPU_K_REDUCE_SCATTER,
    CGPU_K_REDUCE_SCATTER_BLOCK,
    CGPU_K_SCAN,
    CGPU_K_SCATTER,
    CGPU_K_SCATTERV,
    CGPU_K_NALLGATHER, /* the neighborhood forms */
    CGPU_K_NALLGATHERV,
    CGPU_K_NALLTOALL,
    CGPU_K_NALLTOALLV,
    CGPU_K_NALLTOALLW
} mca_coll_gpu_kind_t;
typedef struct mca_coll_gpu_args {
    mca_coll_gpu_kind_t kind;
    const void *s;
    void *r;
    int sc, rc, root, sn, rn;
    const int *scs, *sds, *rcs, *rds;
    const MPI_Aint *sad, *rad;
    struct ompi_datatype_t *sdt, *rdt;
    struct ompi_datatype_t *const *sdts, *const *rdts;
    struct ompi_op_t *op;
} mca_coll_gpu_args_t;

/* The bytes a staged call copies: [slo, shi) of the send buffer, [rlo, rhi) of the receive
 * buffer, copied back after the call when rback (not where this rank only sends from it). */
typedef struct mca_coll_gpu_spans {
    ptrdiff_t slo, shi, rlo, rhi;
    bool rback;
} mca_coll_gpu_spans_t;

/* Fills the spans of call @p a on @p comm for this rank (a family of collectives' rules). */
typedef void (*mca_coll_gpu_spans_fn_t)(const mca_coll_gpu_args_t *a,
                                        struct ompi_communicator_t *comm, mca_coll_gpu_spans_t *sp);

/* An MPI_Alltoallw call's arguments (its blocking and non-blocking staged paths). */
static inline mca_coll_gpu_args_t
mca_coll_gpu_alltoallw_args(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *const *rdts)
{
    return (mca_coll_gpu_args_t){.kind = CGPU_K_ALLTOALLW,
                                 .s = sbuf,
                                 .scs = scounts,
                                 .sds = sdispls,
                                 .sdts = sdts,
                                 .r = rbuf,
                                 .rcs = rcounts,
                                 .rds = rdispls,
                                 .rdts = rdts};
}

/* Call @p a on the previous module, blocking or posted (coll_gpu_staged.c); its name for
 * messages; a blocking call staged over the spans @p spans gives (host buffers, or a nested
 * call, straight through, the spans not computed), counted as a fallback call. */
int mca_coll_gpu_prev_call(mca_coll_gpu_module_t *m, const mca_coll_gpu_args_t *a,
                           struct ompi_communicator_t *comm);
int mca_coll_gpu_prev_post(mca_coll_gpu_module_t *m, const mca_coll_gpu_args_t *a,
                           struct ompi_communicator_t *comm, ompi_request_t **inner);
const char *mca_coll_gpu_kind_name(mca_coll_gpu_kind_t k);
int mca_coll_gpu_staged_call(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const mca_coll_gpu_args_t *a, mca_coll_gpu_spans_fn_t spans);
/* an intracommunicator MPI_(I)alltoallw's spans (the send side none in place) */
void mca_coll_gpu_alltoallw_spans(const mca_coll_gpu_args_t *a, struct ompi_communicator_t *comm,
                                  mca_coll_gpu_spans_t *sp);

/* whether this rank is a call's root: MPI_ROOT on an intercommunicator */
static inline bool mca_coll_gpu_is_root(struct ompi_communicator_t *comm, int root)
{
    return OMPI_COMM_IS_INTER(comm) ? MPI_ROOT == root : ompi_comm_rank(comm) == root;
}

/* pvars (coll_gpu_pvars.c) */
int mca_coll_gpu_pvars_register(void);

/* log through opal_output at a coll_gpu_verbose level */
void mca_coll_gpu_log(int level, const char *msg);

END_C_DECLS

#endif /* MCA_COLL_GPU_H */
