/*
 * coll/gpu engine: the inter-node proxy (libfabric), seen from the algorithms.
 *
 * One proxy per process, shared by every communicator (refcounted: the first acquire
 * opens the provider, one RDM endpoint and starts the progress thread; the last release
 * stops them). Only the progress thread calls libfabric. A communicator's ranks on other
 * nodes are reached through a group: their endpoint names (exchanged by the communicator's
 * bootstrap) and a context id equal on every rank of the group. A peer's address is
 * inserted into the address vector at the first operation that names it, so a process
 * connects only to the peers an algorithm actually uses, and at most
 * coll_gpu_proxy_max_peers of them (CGPU_ERR_NO_RESOURCE past the cap, with a message).
 *
 * Operations are tagged sends and receives of contiguous memory: host memory, or device
 * memory (staged by the proxy through pinned bounce buffers, double-buffered, unless the
 * provider does FI_HMEM for CUDA: then direct). A receive matches the send of the same
 * group, peer and 32-bit tag. Requests are owned by the caller (stack or array), complete
 * exactly once, and are reusable after their test/wait returned something other than
 * CGPU_IN_PROGRESS.
 */
#ifndef CGPU_PROXY_H
#define CGPU_PROXY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgpu_status.h"
#include "cgpu_prof.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of an endpoint name as exchanged through the bootstrap (zero padded). */
#define CGPU_PROXY_ADDR_BYTES 128

typedef struct cgpu_proxy_group cgpu_proxy_group_t;

/** A send or receive in flight. Fields are the proxy's; the caller only owns the memory. */
typedef struct cgpu_proxy_req {
    _Atomic int state;         /* proxy-private: CGPU_IN_PROGRESS, CGPU_OK or an error */
    struct cgpu_proxy_req *next; /* proxy-private: submission / pending lists */
    cgpu_proxy_group_t *group;
    int peer;                  /* rank in the group */
    int kind;                  /* proxy-private: send or receive */
    void *buf;
    size_t bytes;
    uint32_t tag;
    uint64_t posted_ns;        /* when it was submitted (for the timeout message) */
    cgpu_prof_ev_t ev;         /* its CGPU_PROF_EVENT_PROXY_V1 event, in the group's context */
    void *priv;                /* proxy-private: the operation carrying it */
} cgpu_proxy_req_t;

/** True when this build has the proxy (libfabric found at configure time). */
bool cgpu_proxy_built(void);

/**
 * Take a reference on the process-wide proxy, starting it at the first one: provider
 * (coll_gpu_ofi_provider; "" = the best one found, tcp as the fallback), endpoint,
 * completion queue, address vector, progress thread (pinned near this process's GPU or,
 * without one, left where the process is bound). Thread-safe. A failure is reported once
 * (verbose 0) and returned again by later calls without retrying.
 */
cgpu_status_t cgpu_proxy_acquire(void);

/** Drop a reference; the last one stops the thread and closes everything. */
void cgpu_proxy_release(void);

/** This process's endpoint name, CGPU_PROXY_ADDR_BYTES bytes (after a successful acquire). */
cgpu_status_t cgpu_proxy_addr(void *addr);

/** The provider in use ("tcp", "shm", "verbs;ofi_rxm", ...), or "none". */
const char *cgpu_proxy_provider(void);

/** True when device memory goes to the provider directly (FI_HMEM with CUDA). */
bool cgpu_proxy_hmem(void);

/**
 * A communicator's view of the proxy. @p addrs holds size x CGPU_PROXY_ADDR_BYTES names
 * (rank order; this rank's own is not used). @p context_id must be equal on every rank
 * of the group and differ from every other live group that shares two processes with it.
 * @p prof is the communicator's profiler context: every operation of the group is a
 * CGPU_PROF_EVENT_PROXY_V1 event in it (parent: the collective in progress, if any).
 * The group keeps the pointer, so @p prof must outlive it.
 */
cgpu_status_t cgpu_proxy_group_create(int rank, int size, const void *addrs, uint32_t context_id,
                                      cgpu_prof_comm_t *prof, cgpu_proxy_group_t **out);

/**
 * Destroy a group (sets *g to NULL; NULL is a no-op). Requests still in flight are
 * cancelled and waited for first (reported at verbose 0 as a misuse).
 */
void cgpu_proxy_group_destroy(cgpu_proxy_group_t **g);

/** Post a send of @p bytes at @p buf to group rank @p peer with @p tag. */
cgpu_status_t cgpu_proxy_isend(cgpu_proxy_group_t *g, int peer, const void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req);

/** Post a receive of exactly @p bytes into @p buf from group rank @p peer with @p tag. */
cgpu_status_t cgpu_proxy_irecv(cgpu_proxy_group_t *g, int peer, void *buf, size_t bytes,
                               uint32_t tag, cgpu_proxy_req_t *req);

/** CGPU_IN_PROGRESS, CGPU_OK, or the operation's error (an atomic load; never blocks). */
cgpu_status_t cgpu_proxy_test(cgpu_proxy_req_t *req);

/**
 * Wait for @p n requests. @p timeout_s > 0: a request not complete after that long is
 * cancelled, the peer it waited on is named in a message (verbose 0), and
 * CGPU_ERR_TIMEOUT is returned; *abort (may be NULL) becoming non-zero also stops the
 * wait (the watchdog's abort). Returns the first error, after every request has ended.
 */
cgpu_status_t cgpu_proxy_waitall(cgpu_proxy_req_t *reqs, int n, double timeout_s,
                                 const _Atomic int *abort);

/**
 * cgpu_proxy_waitall without the messages, for a wait whose giving up is an answer too (a
 * look for a message that may never have been sent); no abort.
 */
cgpu_status_t cgpu_proxy_waitall_quiet(cgpu_proxy_req_t *reqs, int n, double timeout_s);

/** Operations submitted and not yet completed, process-wide (an atomic load). */
uint64_t cgpu_proxy_queue_depth(void);

/** Operations completed since the proxy started, process-wide (an atomic load). */
uint64_t cgpu_proxy_ops_completed(void);

/** Peers connected (inserted in the address vector), process-wide (an atomic load). */
int cgpu_proxy_peers(void);

/*
 * Tags. An operation travels under a 64-bit libfabric tag built from the group's context
 * id, the caller's tag and a chunk number (messages longer than cgpu_proxy_chunk_bytes()
 * go as several chunks; both sides cut them alike from the byte count alone, whatever the
 * memory kind on either side). With directed receive (tcp, shm, verbs, efa, ...) the layout
 * is chunk:12 | context id:20 | tag:32; without it the source rank needs room too:
 * chunk:12 | context id:12 | source rank:16 | tag:24. So context ids and tags are limited
 * to what the two functions below return (after acquire: 2^20-1 and 2^32-1 with directed
 * receive, 4095 and 2^24-1 without); larger ones are refused with CGPU_ERR_INVALID_ARG and
 * a message. Operations of one group with the same peer, tag and
 * direction are carried out one after the other, in submission order (as MPI's
 * non-overtaking rule); give concurrent operations different tags.
 *
 * Window. The proxy keeps at most coll_gpu_proxy_max_inflight chunks posted at once,
 * half of them for sends and half for receives (at least one each), so receives waiting
 * for a peer never keep this process's own sends from being posted. Operations beyond
 * that wait in the proxy's queue, each kind in submission order. Receives and sends must
 * therefore be matched within that window: a receive posted more than max_inflight / 2
 * receives after one that waits for it may never be reached.
 */

/** Largest context id a group may use with the provider in use (0 before acquire). */
uint32_t cgpu_proxy_max_context_id(void);

/** Largest tag an operation may use with the provider in use (0 before acquire). */
uint32_t cgpu_proxy_max_tag(void);

/** Bytes of one chunk on the wire: min(coll_gpu_proxy_bounce_bytes, provider's largest
 * message). Must be equal on every process (same MCA value, same provider). */
size_t cgpu_proxy_chunk_bytes(void);

/** Test hooks: bits for cgpu_proxy_set_test_flags. */
enum {
    CGPU_PROXY_TEST_STAGE_HOST = 1,  /* stage host buffers through bounce buffers as if they
                                      * were device memory (covers the staged path anywhere) */
    CGPU_PROXY_TEST_NO_DIRECTED = 2, /* do not ask for FI_DIRECTED_RECV (the other tag layout) */
};

/** Set test hooks (tests and benchmarks only); takes effect at the next proxy start. */
void cgpu_proxy_set_test_flags(unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* CGPU_PROXY_H */
