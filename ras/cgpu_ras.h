/*
 * coll/gpu RAS: the health state of a communicator and the watchdog thread.
 *
 * Health is a set of atomics (cgpu_ras_t) that the collective's thread writes and that
 * pvar reads, monitors and the watchdog read with plain atomic loads (DESIGN decision 5):
 * polling at any rate cannot change what the collectives do. The watchdog is one thread per
 * process that wakes a few times per timeout and asks its owner (the engine, through a
 * scan callback) to look at every live communicator; what a stalled communicator means
 * (which ranks have not arrived) is the engine's to say, since only it knows the peers.
 */
#ifndef CGPU_RAS_H
#define CGPU_RAS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cgpu_ras_item {
    CGPU_RAS_STATE = 0, /* cgpu_ras_state_t */
    CGPU_RAS_ALLREDUCE_STARTED,
    CGPU_RAS_ALLREDUCE_COMPLETED,
    CGPU_RAS_ALLTOALL_STARTED,
    CGPU_RAS_ALLTOALL_COMPLETED,
    CGPU_RAS_BYTES,              /* bytes this rank contributed to completed collectives */
    CGPU_RAS_LAST_SEQ,           /* sequence number of the last completed collective */
    CGPU_RAS_IDLE_US,            /* time since the running collective last progressed (0: none) */
    CGPU_RAS_PEERS_MISSING,      /* peers not yet in the running collective */
    CGPU_RAS_PEERS_MISSING_MASK, /* which (bit r = rank r, ranks 0-63) */
    CGPU_RAS_ERR_TIMEOUT,
    CGPU_RAS_ERR_DEVICE,
    CGPU_RAS_ERR_OTHER,
    CGPU_RAS_ALGORITHM,     /* cgpu_ras_alg_t of the running or last collective */
    CGPU_RAS_TRANSPORT,     /* cgpu_ras_transport_t */
    CGPU_RAS_BCAST_STARTED, /* the other kinds, in CGPU_KIND_* order from bcast */
    CGPU_RAS_BCAST_COMPLETED,
    CGPU_RAS_ALLGATHER_STARTED,
    CGPU_RAS_ALLGATHER_COMPLETED,
    CGPU_RAS_REDUCE_SCATTER_STARTED,
    CGPU_RAS_REDUCE_SCATTER_COMPLETED,
    CGPU_RAS_REDUCE_STARTED,
    CGPU_RAS_REDUCE_COMPLETED,
    CGPU_RAS_ITEMS
} cgpu_ras_item_t;

typedef enum cgpu_ras_state {
    CGPU_RAS_INITIALIZING = 0, /* (glue) no engine communicator yet */
    CGPU_RAS_READY = 1,
    CGPU_RAS_DEGRADED = 2, /* (glue) set-up failed: every call uses the fallback */
    CGPU_RAS_FAILED = 3,   /* a collective failed or was aborted: calls return errors */
} cgpu_ras_state_t;

typedef enum cgpu_ras_alg {
    CGPU_RAS_ALG_NONE = 0,
    CGPU_RAS_ALG_RING,
    CGPU_RAS_ALG_ONESHOT,
    CGPU_RAS_ALG_TREE,
    CGPU_RAS_ALG_DIRECT,
    CGPU_RAS_ALG_COPY_ENGINE,
    CGPU_RAS_ALG_HIERARCHICAL, /* nodes: local steps + proxy */
    CGPU_RAS_ALG_PROXY
} cgpu_ras_alg_t; /* nodes: proxy only */
typedef enum cgpu_ras_transport {
    CGPU_RAS_TRANSPORT_SHM = 0,
    CGPU_RAS_TRANSPORT_CUDA_IPC = 1,
    CGPU_RAS_TRANSPORT_PROXY_SHM = 2,      /* nodes: proxy + shm */
    CGPU_RAS_TRANSPORT_PROXY_CUDA_IPC = 3, /* proxy + IPC */
    CGPU_RAS_TRANSPORT_PROXY = 4
} /* one rank per node */
cgpu_ras_transport_t;

/* Health of a communicator: written by the collective's thread (and the watchdog), read by
 * pvars and the watchdog with plain atomic loads (DESIGN decision 5). */
enum {
    CGPU_KIND_ALLREDUCE = 0,
    CGPU_KIND_ALLTOALL = 1,
    CGPU_KIND_BCAST = 2,
    CGPU_KIND_ALLGATHER = 3,
    CGPU_KIND_REDUCE_SCATTER = 4,
    CGPU_KIND_REDUCE = 5,
    CGPU_KINDS = 6
};
typedef struct cgpu_ras {
    atomic_int state; /* cgpu_ras_state_t */
    atomic_ullong started[CGPU_KINDS];
    atomic_ullong completed[CGPU_KINDS];
    atomic_ullong bytes;
    atomic_ullong cur_seq; /* collective in progress (0: none) */
    atomic_ullong last_progress_ns;
    atomic_ullong err_timeout, err_device, err_other;
    atomic_int alg;             /* cgpu_ras_alg_t */
    atomic_int abort;           /* set by the watchdog: give up waiting */
    atomic_ullong reported_seq; /* the watchdog reported this collective */
    atomic_int waiting_on;      /* the peer a wait past its spins waits for (-1: none, or
                                 * any of several) */
    int kind;                   /* kind of the collective in progress */
    char name[64];              /* MPI name, for reports */
} cgpu_ras_t;

/** Names of the collective kinds (CGPU_KIND_*), for reports; "collective" out of range. */
const char *cgpu_ras_kind_name(int kind);

/** The watchdog's periodic look at every communicator (@p now_ns: CLOCK_MONOTONIC). */
typedef void (*cgpu_ras_scan_fn_t)(uint64_t now_ns, void *arg);

/**
 * Start the watchdog (once; later calls while it runs do nothing): every min(timeout/4, 1 s)
 * it calls @p scan. Nothing starts when @p timeout_s <= 0.
 */
void cgpu_ras_watchdog_start(double timeout_s, cgpu_ras_scan_fn_t scan, void *arg);

/** Stop and join the watchdog. Idempotent. */
void cgpu_ras_watchdog_stop(void);

/** Count one report of a stalled collective (the scan's, when it reports). */
void cgpu_ras_watchdog_fired(void);

/** Reports of stalled collectives so far in this process. */
uint64_t cgpu_ras_watchdog_firings(void);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_RAS_H */
