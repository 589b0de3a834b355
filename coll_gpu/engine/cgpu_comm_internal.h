/*
 * coll/gpu engine: the internal communicator's insides (engine files only).
 */
#ifndef CGPU_COMM_INTERNAL_H
#define CGPU_COMM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "cgpu_cuda.h"
#include "cgpu_shm.h"
#include "cgpu_engine.h"
#include "cgpu_prof.h"

#define CGPU_CACHELINE 64
#define CGPU_SEG_MAGIC 0x63677075u /* "cgpu" */
#define CGPU_SEG_CTRL_BYTES 4096   /* control block; slots start page-aligned after it */

/* One cache line per counter: each has exactly one writer (named below), so no two
 * writers ever share a line. Counters only grow, so they never need a reset between
 * collectives. */
typedef struct cgpu_counter {
    _Atomic uint64_t v;
    char pad[CGPU_CACHELINE - sizeof(uint64_t)];
} cgpu_counter_t;

/* The calls (cgpu_call.c): what a rank says it is calling, compared with every peer's before
 * any data moves. Kinds of call, names in cgpu_call.c. */
typedef enum cgpu_call_kind {
    CGPU_CALL_ALLREDUCE = 1,
    CGPU_CALL_ALLTOALL,
    CGPU_CALL_BCAST,
    CGPU_CALL_ALLGATHER,
    CGPU_CALL_REDUCE_SCATTER, /* block: bytes per rank */
    CGPU_CALL_REDUCE,
    CGPU_CALL_SCAN,
    CGPU_CALL_EXSCAN,
    CGPU_CALL_KINDS
} cgpu_call_kind_t;

#define CGPU_SIG_NONE 0xff /* dt or op of a call that moves bytes only (no type, no op) */

/* A call's signature: the arguments MPI requires to match on every rank. Data-moving calls
 * compare bytes (MPI lets ranks use different datatypes of one type signature), reductions
 * the element type and the op too; root -1 where there is none. */
typedef struct cgpu_sig {
    int kind; /* cgpu_call_kind_t */
    int dt;   /* cgpu_dtype_t, or CGPU_SIG_NONE */
    int op;   /* cgpu_op_t, or CGPU_SIG_NONE */
    int root;
    uint64_t bytes; /* allreduce, bcast, reduce, scans: the buffer; alltoall, allgather: one
                     * block; reduce_scatter: one rank's block */
    bool host;      /* this rank's buffers are host memory (not compared: MPI lets ranks mix) */
} cgpu_sig_t;

/* The line where a rank says which collective it has entered (writer: owner). Two records,
 * by the call's parity: a rank writes the record of call s+2 only after every peer entered
 * s+1 (cgpu_call_check waits for that before it returns), i.e. after every peer has read
 * the record of call s, so a record is never overwritten while a peer reads it. */
typedef struct cgpu_call_line {
    _Atomic uint64_t entered; /* last collective it entered (RAS, the call check) */
    struct {
        uint64_t seq;  /* the call this record describes */
        uint64_t w[2]; /* its signature, packed (cgpu_call.c) */
    } rec[2];
    char pad[CGPU_CACHELINE - 7 * sizeof(uint64_t)];
} cgpu_call_line_t;

_Static_assert(sizeof(cgpu_call_line_t) == CGPU_CACHELINE, "call line is one cache line");

/* Control block at the start of every rank's segment. */
typedef struct cgpu_seg_ctrl {
    cgpu_counter_t ring_posted;   /* writer: left neighbour; items put in my ring queue */
    cgpu_counter_t ring_consumed; /* writer: owner; items of my ring queue I am done with */
    cgpu_counter_t a2a_posted;    /* writer: owner; alltoall rounds staged in my segment */
    cgpu_counter_t a2a_readers;   /* writers: all peers (fetch_add); reads of my stage */
    cgpu_counter_t seq;           /* writer: owner; last completed collective */
    cgpu_counter_t ar_reduced;    /* writer: owner; direct allreduce rounds whose owner's part
                                   * is reduced in its stage (a2a_round's numbering) */
    cgpu_call_line_t call;        /* writer: owner; the collective it entered, and its record */
    uint32_t magic;
    /* writer: owner, once; on a node-local communicator, that the call across nodes whose
     * steps it runs failed on the owner for good: 1 + the rank (as report_ranks name it) the
     * owner's failed wait was for or found dead, CGPU_GAVE_UP_NOBODY when it knows none; 0
     * while it has not. A peer waiting on the owner then names that rank, not the owner (the
     * owner is alive, or left after its own failed call, and is no cause) */
    _Atomic int32_t gave_up;
    /* writer: owner; the number of the last call that failed on it other than by a mismatch
     * (a timeout, the watchdog's abort, a dead peer, a device error): a peer that finished
     * that call without waiting for anyone (the one-shot allreduce) fails it too */
    _Atomic uint64_t failed_seq;

    /* The segment pool's words (cgpu_seg_pool.c): never reset when a pooled segment is
     * taken again, so they come last. released: writers all peers (fetch_add), one each
     * time a peer releases a communicator that used the segment; released_expect: writer
     * the owner, the count that says every peer so far is done; retired: writer the owner,
     * once, when it will not offer the segment again (the peers' copies go first) */
    cgpu_counter_t released;
    uint64_t released_expect;
    _Atomic uint32_t retired;
} cgpu_seg_ctrl_t;

/* the part of the control block a pooled segment's next communicator starts from zero */
#define CGPU_SEG_CTRL_RESET_BYTES offsetof(cgpu_seg_ctrl_t, released)

/* The small allreduce's inputs (cgpu_allreduce_oneshot.c), in the control block's room past
 * the struct: two areas, by the call number's parity, each written by the owner alone
 * before it publishes the call, so that the call check's wait is also the wait for the data */
#define CGPU_SEG_EARLY_OFF 2048
#define CGPU_SEG_EARLY_BYTES 1024
_Static_assert(sizeof(cgpu_seg_ctrl_t) <= CGPU_SEG_EARLY_OFF, "control block too large");
_Static_assert(CGPU_SEG_EARLY_OFF + 2 * CGPU_SEG_EARLY_BYTES <= CGPU_SEG_CTRL_BYTES,
               "the early areas must lie in the control block's page");

#define CGPU_GAVE_UP_NOBODY (-1)

enum { CGPU_COMM_ALIVE = 0x414c4956, CGPU_COMM_DEAD = 0x44454144 };

struct cgpu_cuda_comm;
typedef struct cgpu_net cgpu_net_t;

/* A peer's process, for the liveness looks of long waits (cgpu_liveness.c). */
typedef struct cgpu_peer_proc {
    int32_t pid;
    uint64_t start_time; /* as the peer read it for itself (/proc); 0: unknown */
    bool watched;        /* this process sees that same process under that id */
} cgpu_peer_proc_t;

/* the largest round of input a padded pair reduction copies at once (cgpu_coll.c): the pair
 * copies a communicator keeps are at most twice that */
#define CGPU_PAIRS_ROUND_BYTES ((size_t) 16 << 20)

/* memory a communicator keeps for the collectives built on others: one call's at a time, grown
 * to the largest call, on the device (device) or the host */
typedef struct cgpu_scratch {
    void *buf;
    size_t bytes;
    bool device;
} cgpu_scratch_t;

struct cgpu_comm {
    int magic;                   /* CGPU_COMM_ALIVE while usable */
    cgpu_backend_t backend;      /* HOST or CUDA, agreed at create; a settling communicator
                                  * turns HOST into CUDA once, after its inboxes are made
                                  * (release store, cgpu_settle.c), so readers that may run
                                  * beside it (pvars) load it acquire: cgpu_backend_now */
    int dev_share;               /* most ranks on one device (cuda, one node), from the
                                  * first exchange: the same on every rank */
    bool unsettled;              /* HOST only because a rank had not chosen its GPU at
                                  * set-up: cgpu_comm_settle asks again */
    uint64_t settle_calls;       /* calls that reached cgpu_comm_settle (unsettled) */
    struct cgpu_cuda_comm *cuda; /* cuda backend state (NULL for HOST) */
    cgpu_net_t *net;             /* ranks on several nodes (cgpu_net.c); else NULL */
    int rank;
    int size;
    cgpu_bootstrap_t bs;

    /* layout, identical on every rank (checked at create) */
    size_t slot_bytes;
    int nslots;
    size_t stage_bytes;
    size_t seg_bytes;
    size_t direct_min;  /* staged allreduces of at least this many bytes run in the stage
                         * areas (cgpu_allreduce_direct.c; 0: never); rank 0's value */
    bool stages_pinned; /* every rank's segment pinned here (tried once) */

    cgpu_shm_seg_t self_seg;
    cgpu_shm_seg_t *peer_segs; /* [size]; peer_segs[rank] aliases self_seg's mapping */
    bool resources_freed;
    bool seg_reusable; /* set up to the end: its segments may go to the pool at release */
    bool registered;   /* in the engine's list of live communicators */

    /* private progress counters (one thread at a time uses a communicator) */
    uint64_t ring_sent;
    uint64_t ring_recvd;
    uint64_t a2a_round;
    uint64_t seq;

    atomic_int busy; /* 1 while a collective runs on it */
    /* the call check (cgpu_call.c): whether every rank publishes its calls' signatures and
     * checks its peers' (coll_gpu_check_calls on every rank, agreed at create); the last call
     * that failed it; on a node-local communicator, the signature of the call across nodes
     * whose steps it runs (they publish it instead of their own, so that the user's calls
     * are compared), NULL when none */
    bool check_calls;
    bool call_all_host; /* the call checked last: every rank's buffers in host memory */
    bool early_written; /* this call's input is in its early area (cgpu_comm_enter_early) */
    cgpu_mismatch_t mismatch;
    const cgpu_sig_t *outer_sig;
    const int *report_ranks; /* node-local communicator: its ranks in the one across nodes
                              * (what RAS reports name); NULL: its own ranks */
    bool abort_on_timeout;   /* the watchdog fails a stuck collective even without
                              * coll_gpu_ras_abort_on_timeout (communicators across nodes and
                              * their node-local ones: a dead peer must not hang the others) */

    /* scratch of the collectives built on others (cgpu_reduce_scatter's allreduce result,
     * the padded blocks of cgpu_allgatherv, cgpu_gather's and cgpu_scatter's whole message
     * on the ranks that are not the root): one call's at a time, grown to the largest
     * call, on the device (scratch_device) or the host, freed with the communicator's
     * resources */
    cgpu_scratch_t scratch;
    /* the copies through which the padded pairs reduce (their input and result, by rounds
     * of at most CGPU_PAIRS_ROUND_BYTES each), the same way */
    cgpu_scratch_t pairs;
    /* host memory that stays zero: the input of the ranks other than the root to a scatter
     * run as a reduce-scatter (the cuda backend keeps its own on the device), grown to the
     * largest such call, freed with the communicator's resources */
    void *zeros;
    size_t zeros_bytes;

    /* liveness (cgpu_liveness.c): the peers' processes ([size], NULL: not looked at), the
     * looks so far, and the first peer found dead (-1: none; set once, read by any thread) */
    cgpu_peer_proc_t *procs;
    unsigned live_looks;
    atomic_int dead_rank;
    /* 1 + the peer (as report_ranks name it) that the first wait which gave up was waiting
     * for (a proxy request past coll_gpu_ras_timeout, a node-local wait the watchdog stopped,
     * or the peer a node-mate that gave up named); 0: none. Set once, read by any thread */
    atomic_int unanswered;

    cgpu_prof_comm_t prof; /* profiler context of this communicator (by value) */
    cgpu_ras_t ras;        /* health, for pvars and the watchdog */
    uint64_t prof_step;    /* step counter within the current collective */
    /* transport events (profiler only): ring item k is in flight from its post until the
     * sender sees it consumed; at most nslots at once, so a ring of nslots handles */
    cgpu_prof_ev_t *xfer;
    uint64_t xfer_started, xfer_stopped; /* absolute item numbers (ring_sent's count) */

    struct cgpu_comm *next, *prev; /* engine's list of live communicators */
};

/* engine-internal helpers (cgpu_engine.c, cgpu_comm.c) */
bool cgpu_engine_is_up(void);
cgpu_status_t cgpu_engine_register_comm(cgpu_comm_t *comm);
void cgpu_engine_unregister_comm(cgpu_comm_t *comm);
void cgpu_comm_free_resources(cgpu_comm_t *comm);
/* frees the communicator's scratch and pair copies (cgpu_coll.c) */
void cgpu_comm_scratch_release(cgpu_comm_t *comm);
/* the copies of @p c (btl_glue/cgpu_cuda.h), all between the same two memories (say, a
 * user layout's blocks and a padded copy of them): by memmove when both are host memory,
 * else on the device with one wait */
cgpu_status_t cgpu_engine_copy_many(const cgpu_copy_t *c, int n);

/* Every rank's status through the bootstrap: all return the first failure, or OK. */
cgpu_status_t cgpu_comm_agree(const cgpu_bootstrap_t *bs, cgpu_status_t mine);

/* The backend a one-node communicator agreed on cuda can run, from every rank's device
 * record (@p stride bytes apart, the same table on every rank): host and `unsettled` where
 * a rank has not chosen its GPU (under auto), host where the ranks' kernels would run in
 * turn; else cuda. Sets dev_share and the process's time-sliced flag (cgpu_comm.c). */
struct cgpu_cuda_dev_rec;
cgpu_backend_t cgpu_comm_plan_devices(cgpu_comm_t *comm, const struct cgpu_cuda_dev_rec *first,
                                      size_t stride);
/* The cuda backend's inboxes, made, exchanged and mapped by every rank (collective over
 * @p bs; @p verdicts holds a status per rank): the same status on every rank. */
cgpu_status_t cgpu_comm_connect_cuda(cgpu_comm_t *comm, const cgpu_bootstrap_t *bs,
                                     int32_t *verdicts);

/* Communicators over several nodes (cgpu_net.c). cgpu_net_create is collective over
 * comm->bs (node_of: every rank's node, numbered 0..nnodes-1 alike on every rank); on
 * success comm->net is set. The collectives run inside the caller's enter/leave. */
cgpu_status_t cgpu_net_create(cgpu_comm_t *comm, const int *node_of, int nnodes);
void cgpu_net_destroy(cgpu_comm_t *comm);
void cgpu_net_shutdown(void); /* engine fini: drop the engine's reference on the proxy */
void cgpu_net_describe(cgpu_comm_t *comm); /* names the node-local communicator after it */
/* the node-local communicator of one across nodes and its bootstrap (NULL: none) */
cgpu_comm_t *cgpu_net_local(const cgpu_comm_t *comm, const cgpu_bootstrap_t **bs);
int cgpu_net_transport(const cgpu_comm_t *comm);
cgpu_status_t cgpu_net_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                 cgpu_dtype_t dt, cgpu_op_t op);
cgpu_status_t cgpu_net_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);
cgpu_status_t cgpu_net_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root);
cgpu_status_t cgpu_net_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);
cgpu_status_t cgpu_net_reduce_scatter_block(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                            size_t count, cgpu_dtype_t dt, cgpu_op_t op);
cgpu_status_t cgpu_net_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                              cgpu_dtype_t dt, cgpu_op_t op, int root);

/* Host ring allreduce on host memory (cgpu_allreduce_ring.c). */
cgpu_status_t cgpu_host_ring_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op);

/* Allreduce in the ranks' stage areas (cgpu_allreduce_direct.c): @p sbuf and @p rbuf of
 * any memory, copied straight into and out of the shared stages (a GPU's copy engines for
 * device memory, while the host reduces); the same choice on every rank of a call. */
cgpu_status_t cgpu_host_direct_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                         size_t count, cgpu_dtype_t dt, cgpu_op_t op, bool in_dev,
                                         bool out_dev);

/* Host direct alltoall on host memory (cgpu_alltoall_direct.c). */
cgpu_status_t cgpu_host_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/* Profiler: a collective's event (steps nest in it) and one step's event. */
void cgpu_coll_prof_begin(cgpu_comm_t *comm, const char *kind, size_t count, const char *dtype,
                          const char *op, size_t bytes, const char *algorithm);
void cgpu_coll_prof_end(cgpu_comm_t *comm);
/* Transport events: wait (profiling only) until the right neighbour consumed every item
 * this rank posted, then stop their events, so they end inside their collective. */
void cgpu_ring_prof_drain(cgpu_comm_t *comm);
void cgpu_step_prof_begin(cgpu_comm_t *comm, cgpu_prof_ev_t *e, const char *what, int peer,
                          int channel, size_t bytes);

/* Host broadcast and allgather (cgpu_bcast_allgather_ring.c); allgather works in place
 * on rbuf, whose block `rank` already holds this rank's contribution. */
cgpu_status_t cgpu_host_ring_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root);
cgpu_status_t cgpu_host_ring_allgather(cgpu_comm_t *comm, void *rbuf, size_t bytes);

/* Host reduce_scatter_block (count = elements per rank) and reduce (cgpu_reduce_ring.c). */
cgpu_status_t cgpu_host_ring_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                            size_t count, cgpu_dtype_t dt, cgpu_op_t op);
cgpu_status_t cgpu_host_ring_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                    cgpu_dtype_t dt, cgpu_op_t op, int root);

/* Enter/leave a collective: detects a released or failed communicator and concurrent
 * use; keeps the health counters (kind: CGPU_KIND_*; leave: bytes this rank contributed).
 * With @p sig (NULL: none) and the call check on, enter publishes the call's signature and
 * compares it with every peer's before the call moves any data: a mismatch leaves the
 * communicator again and returns CGPU_ERR_MISMATCH on every rank, as does a peer's. */
cgpu_status_t cgpu_comm_enter(cgpu_comm_t *comm, const char *what, int kind, const cgpu_sig_t *sig);
/* The same, and, on a one-node communicator that checks its calls, @p early_bytes (at most
 * CGPU_SEG_EARLY_BYTES) of @p early written to this rank's early area before the call is
 * published (early_written says whether they were): the small allreduce's input. */
cgpu_status_t cgpu_comm_enter_early(cgpu_comm_t *comm, const char *what, int kind,
                                    const cgpu_sig_t *sig, const void *early, size_t early_bytes);
void cgpu_comm_leave(cgpu_comm_t *comm, cgpu_status_t st, size_t bytes);

/* Note progress (a step completed) for the watchdog. */
void cgpu_ras_progress(cgpu_comm_t *comm);
/* Engine-internal: the watchdog thread (cgpu_ras.c). */
/* Call fn on every live internal communicator, under the engine's list lock (not a data
 * path lock: only create, release and the watchdog take it). */
void cgpu_engine_for_each_comm(void (*fn)(cgpu_comm_t *comm, void *arg), void *arg);

/* Liveness of the peers' processes (cgpu_liveness.c). Setup: every rank's pid and start
 * time, from the creation's table; fini frees what setup kept. */
void cgpu_liveness_setup(cgpu_comm_t *comm, const int32_t *pids, const uint64_t *starts);
void cgpu_liveness_fini(cgpu_comm_t *comm);
/* A wait's clock of looks (*next_ns 0 at the wait's start): true once every few ms of
 * waiting, from the second call on; one clock read per call. */
bool cgpu_liveness_due(uint64_t *next_ns);
/* Look at every watched peer now: false when one is gone (the communicator is then failed,
 * the peer named in the log and by cgpu_comm_dead_peer) or was found gone before. */
bool cgpu_liveness_look(cgpu_comm_t *comm);
/* What a wait that gave up returns: CGPU_ERR_PEER_DEAD when a peer was found dead, else
 * CGPU_ERR_TIMEOUT (the watchdog aborted it). */
cgpu_status_t cgpu_comm_wait_failed(const cgpu_comm_t *comm);
/* Across nodes: the dead peer the node-local communicator found, as a rank of @p comm. */
int cgpu_net_dead_peer(const cgpu_comm_t *comm, long *pid);
/* A wait of @p comm gave up on @p peer (as report_ranks name it): the first one is kept for
 * cgpu_comm_unanswered. */
void cgpu_comm_note_unanswered(cgpu_comm_t *comm, int peer);
/* A shared-memory wait of @p comm on its rank @p peer (-1: unknown) gave up: notes the rank to
 * blame, which is the rank @p peer named if it gave up itself (on a node-local communicator,
 * after waiting a little for it to say so: it gives up on the same timeout), else @p peer. */
void cgpu_liveness_blame(cgpu_comm_t *comm, int peer);
/* Across nodes: the peer the node-local communicator's failed wait named, as a rank of
 * @p comm (-1: none); and, once a call across nodes failed on this rank for good, tell this
 * node's other ranks whom to blame (the node-local segment's gave_up). */
int cgpu_net_unanswered(const cgpu_comm_t *comm);
void cgpu_net_gave_up(cgpu_comm_t *comm);
/* Across nodes: the signature the node-local steps of the call now entered publish (NULL at
 * leave); it lives on the entry point's stack for the call. */
void cgpu_net_call_sig(cgpu_comm_t *comm, const cgpu_sig_t *sig);

/* The call check (cgpu_call.c): this rank's record of call @p s, then its entry (entered);
 * and, once every peer has entered @p s, the comparison of every rank's record, the same
 * verdict on every rank: OK, CGPU_ERR_MISMATCH (comm->mismatch says which ranks differ in
 * what), or what a wait that gave up returns. */
void cgpu_call_publish(cgpu_comm_t *comm, uint64_t s, const cgpu_sig_t *sig);
cgpu_status_t cgpu_call_check(cgpu_comm_t *comm, uint64_t s);
/* The first field in which @p b's call (rank @p rb's) differs from @p a's (rank @p ra's), in
 * the order the check looks at them: into @p m with both values and both sides in words;
 * CGPU_MISMATCH_NONE when the calls match. */
cgpu_mismatch_field_t cgpu_call_compare(const cgpu_sig_t *a, const cgpu_sig_t *b, int ra, int rb,
                                        cgpu_mismatch_t *m);
/* Across nodes (net_check.c): the call check of a communicator that spans nodes, inside its
 * cgpu_comm_enter. Each node's ranks compare their calls on the node-local communicator,
 * then every rank exchanges its call and its node's verdict with a few ranks of every other
 * node over the proxy; every rank reaches the same verdict (comm->mismatch names the first
 * node's difference) and the call's phase numbers stay in step whatever it is. A status
 * other than OK and CGPU_ERR_MISMATCH fails the communicator. */
cgpu_status_t cgpu_net_call_check(cgpu_comm_t *comm, const cgpu_sig_t *sig);

/* The watchdog's scan (cgpu_health.c): report every communicator stalled past the timeout. */
void cgpu_health_scan(uint64_t now_ns, void *arg);

static inline cgpu_seg_ctrl_t *cgpu_ctrl(cgpu_comm_t *comm, int rank)
{
    return (cgpu_seg_ctrl_t *) comm->peer_segs[rank].base;
}

/* Rank @p rank's stage area (after the control block and the ring slots). */
static inline char *cgpu_stage_area(cgpu_comm_t *comm, int rank)
{
    return (char *) comm->peer_segs[rank].base + CGPU_SEG_CTRL_BYTES +
           (size_t) comm->nslots * comm->slot_bytes;
}

/* Rank @p rank's early area for call @p s (CGPU_SEG_EARLY_OFF). */
static inline char *cgpu_seg_early(cgpu_comm_t *comm, int rank, uint64_t s)
{
    return (char *) comm->peer_segs[rank].base + CGPU_SEG_EARLY_OFF +
           (size_t) (s & 1) * CGPU_SEG_EARLY_BYTES;
}

/* The small allreduce (cgpu_allreduce_oneshot.c): every rank's input, written before the
 * call was published (early_written on every rank, as call_all_host says), reduced in rank
 * order into @p rbuf. */
cgpu_status_t cgpu_host_oneshot_allreduce(cgpu_comm_t *comm, void *rbuf, size_t count,
                                          cgpu_dtype_t dt, cgpu_op_t op);

/* The communicator's backend, loaded acquire (it may turn HOST into CUDA beside the reader,
 * see `backend`); inline for the path choice every call makes (cgpu_path_of) */
static inline cgpu_backend_t cgpu_backend_now(const cgpu_comm_t *comm)
{
    return __atomic_load_n(&comm->backend, __ATOMIC_ACQUIRE);
}

#endif /* CGPU_COMM_INTERNAL_H */
