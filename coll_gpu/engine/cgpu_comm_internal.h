/*
 * coll/gpu engine: the internal communicator's insides (engine files only).
 */
#ifndef CGPU_COMM_INTERNAL_H
#define CGPU_COMM_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "btl_glue/cgpu_shm.h"
#include "cgpu_engine.h"
#include "prof/cgpu_prof.h"

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

/* Control block at the start of every rank's segment. */
typedef struct cgpu_seg_ctrl {
    cgpu_counter_t ring_posted;   /* writer: left neighbour; items put in my ring queue */
    cgpu_counter_t ring_consumed; /* writer: owner; items of my ring queue I am done with */
    cgpu_counter_t a2a_posted;    /* writer: owner; alltoall rounds staged in my segment */
    cgpu_counter_t a2a_readers;   /* writers: all peers (fetch_add); reads of my stage */
    cgpu_counter_t seq;           /* writer: owner; last completed collective */
    uint32_t magic;
} cgpu_seg_ctrl_t;

_Static_assert(sizeof(cgpu_seg_ctrl_t) <= CGPU_SEG_CTRL_BYTES, "control block too large");

enum { CGPU_COMM_ALIVE = 0x414c4956, CGPU_COMM_DEAD = 0x44454144 };

struct cgpu_cuda_comm;

struct cgpu_comm {
    int magic; /* CGPU_COMM_ALIVE while usable */
    cgpu_backend_t backend;       /* HOST or CUDA, agreed at create */
    struct cgpu_cuda_comm *cuda;  /* cuda backend state (NULL for HOST) */
    int rank;
    int size;
    cgpu_bootstrap_t bs;

    /* layout, identical on every rank (checked at create) */
    size_t slot_bytes;
    int nslots;
    size_t stage_bytes;
    size_t seg_bytes;

    cgpu_shm_seg_t self_seg;
    cgpu_shm_seg_t *peer_segs; /* [size]; peer_segs[rank] aliases self_seg's mapping */
    bool resources_freed;
    bool registered; /* in the engine's list of live communicators */

    /* private progress counters (one thread at a time uses a communicator) */
    uint64_t ring_sent;
    uint64_t ring_recvd;
    uint64_t a2a_round;
    uint64_t seq;

    atomic_int busy; /* 1 while a collective runs on it */

    cgpu_prof_comm_t prof; /* profiler context of this communicator (by value) */
    uint64_t prof_step;    /* step counter within the current collective */

    struct cgpu_comm *next, *prev; /* engine's list of live communicators */
};

/* engine-internal helpers (cgpu_engine.c, cgpu_comm.c) */
bool cgpu_engine_is_up(void);
cgpu_status_t cgpu_engine_register_comm(cgpu_comm_t *comm);
void cgpu_engine_unregister_comm(cgpu_comm_t *comm);
void cgpu_comm_free_resources(cgpu_comm_t *comm);

/* Host ring allreduce on host memory (cgpu_allreduce_ring.c). */
void cgpu_host_ring_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                              cgpu_dtype_t dt, cgpu_op_t op);

/* Host direct alltoall on host memory (cgpu_alltoall_direct.c). */
void cgpu_host_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/* Profiler: a collective's event (steps nest in it) and one step's event. */
void cgpu_coll_prof_begin(cgpu_comm_t *comm, const char *kind, size_t count, const char *dtype,
                          const char *op, size_t bytes, const char *algorithm);
void cgpu_coll_prof_end(cgpu_comm_t *comm);
void cgpu_step_prof_begin(cgpu_comm_t *comm, cgpu_prof_ev_t *e, const char *what, int peer,
                          int channel, size_t bytes);

/* Enter/leave a collective: detects a released communicator and concurrent use. */
cgpu_status_t cgpu_comm_enter(cgpu_comm_t *comm, const char *what);
void cgpu_comm_leave(cgpu_comm_t *comm);

static inline cgpu_seg_ctrl_t *cgpu_ctrl(cgpu_comm_t *comm, int rank)
{
    return (cgpu_seg_ctrl_t *) comm->peer_segs[rank].base;
}

#endif /* CGPU_COMM_INTERNAL_H */
