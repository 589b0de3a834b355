/*
 * coll/gpu engine: the cuda backend of an internal communicator.
 *
 * Each rank owns one device "inbox" (flags, ring slots, oneshot buffers) that its peers
 * map through CUDA IPC; kernels move data by storing into peers' inboxes and signal
 * with counters there, with no host round trip per chunk.
 *
 * This is what the rest of the engine calls; the code is in coll_gpu/engine/cuda/, one file
 * per concern (cuda/cuda_internal.h says which), and builds without CUDA get the entries of
 * cuda/stubs.c.
 */
#ifndef CGPU_CUDA_COMM_H
#define CGPU_CUDA_COMM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cgpu_cuda.h"
#include "cgpu_comm_internal.h"
#include "cgpu_cuda_pool.h"

/** A rank's device as its peers see it: the PCI bus id (ranks of one node that share a
 * device find each other by it; "?rank" when unknown, which shares nothing) and whether its
 * context there is an MPS client (cgpu_cuda_mps_enabled: 1, 0, or -1 unknown). */
typedef struct cgpu_cuda_dev_rec {
    char bus[32];
    int32_t mps;
    /* 1: this process's GPU is already known to run another process's kernels in turn with
     * its own (an earlier communicator's ranks shared it without MPS). The GPU does that for
     * every communicator of the process, also one whose ranks each have a GPU of their own:
     * two pairs of ranks on GPUs 0 and 1, say, from np 4 on 2 GPUs. */
    int32_t sliced;
    /* 1: the process already works on this device (cgpu_cuda_device_in_use), so it is the
     * one the application chose. A set-up on host buffers before the application chose
     * (Open MPI's own allgather inside MPI_Comm_split_type, say) names device 0 on every
     * rank; a process learns `sliced` only from records that are chosen. */
    int32_t chosen;
    int32_t reserved;
} cgpu_cuda_dev_rec_t;

/** Fill @p rec for @p device (the current one), @p rank naming an unknown bus. */
void cgpu_cuda_dev_rec(cgpu_cuda_dev_rec_t *rec, int device, int rank);

/** What each rank publishes at set-up: its inbox's IPC handle and release word offset (its
 * device travelled in the communicator's first exchange). */
typedef struct cgpu_cuda_inbox_rec {
    char handle[CGPU_CUDA_IPC_HANDLE_BYTES];
    uint64_t release_off;
} cgpu_cuda_inbox_rec_t;

/** From n ranks' device records, `stride` bytes apart (the same table on every rank, so
 * every rank answers the same): the most ranks on one device, and in *time_sliced whether
 * some rank's device runs its kernels in turn with another process's, a time slice each
 * (kernels that wait for each other then take milliseconds a call): a device shared by
 * ranks that are not all MPS clients there, or one a rank already knows to be (its
 * `sliced`). Where @p me_sliced is not NULL, it says whether rank @p me may learn that of
 * its own device: the same rule over the `chosen` records alone, its own one of them. */
static inline int cgpu_cuda_share_plan(const cgpu_cuda_dev_rec_t *first, size_t stride, int n,
                                       bool *time_sliced, int me, bool *me_sliced)
{
    const char *base = (const char *) first;
    int share = 1;
    *time_sliced = false;
    if (NULL != me_sliced) {
        *me_sliced = false;
    }
    for (int i = 0; i < n; ++i) {
        const cgpu_cuda_dev_rec_t *a = (const cgpu_cuda_dev_rec_t *) (base + (size_t) i * stride);
        int on_i = 0, chosen_on_i = 0;
        bool all_mps = true, known = false, chosen_mps = true;
        for (int j = 0; j < n; ++j) {
            const cgpu_cuda_dev_rec_t *b =
                (const cgpu_cuda_dev_rec_t *) (base + (size_t) j * stride);
            if (0 == strncmp(a->bus, b->bus, sizeof(a->bus))) {
                on_i++;
                all_mps = all_mps && 1 == b->mps;
                known = known || 0 != b->sliced;
                if (0 != b->chosen) {
                    chosen_on_i++;
                    chosen_mps = chosen_mps && 1 == b->mps;
                }
            }
        }
        share = on_i > share ? on_i : share;
        *time_sliced = *time_sliced || (on_i > 1 && !all_mps) || known;
        if (i == me && NULL != me_sliced) {
            /* `sliced` is only ever set on chosen records (cgpu_cuda_dev_rec) */
            *me_sliced = 0 != a->chosen && ((chosen_on_i > 1 && !chosen_mps) || known);
        }
    }
    return share;
}

/** How a ring or chain call of @p count elements of @p esize bytes is cut: into @p pieces a
 * channel (the allreduce: one per rank; the others: 1) over nch channels, each piece moved
 * in steps of chunk elements, nloops rounds. */
typedef struct cgpu_cuda_ring_plan {
    size_t nch, chunk, nloops;
} cgpu_cuda_ring_plan_t;

/** What the oneshot limit of a collective other than the allreduce counts: the whole
 * buffer of a chain collective (bcast, reduce) or of a scan, one rank's block of a ring
 * collective (allgather, reduce_scatter_block), one peer's block of an alltoall. */
typedef enum {
    CGPU_CUDA_SMALL_CHAIN,
    CGPU_CUDA_SMALL_SCAN,
    CGPU_CUDA_SMALL_BLOCK,
    CGPU_CUDA_SMALL_PEER
} cgpu_cuda_small_kind_t;

/** The largest unit (bytes) of a @p kind call at @p nranks that goes oneshot: @p setting
 * (coll_gpu_cuda_small_bytes) where it is 0 or more, else the measured table, the same on
 * every rank. With more ranks a chain has more hops and the ring more steps, each a flag
 * round trip, so the oneshot (one exchange whatever the ranks) wins up to larger sizes; on
 * 3 and 4 H200s (bench/results/2026-11-28_4xH200.md, each collective swept over the limit):
 * bcast and reduce to 512 KiB at 4 ranks (1 MiB at 3), a rank's block of allgather and
 * reduce_scatter_block to 256 KiB, the alltoall's peer block no further than at 2 ranks at
 * 4 (its kernel matches the oneshot there) but to 1 MiB at 3. Scans were not measured: the
 * 2-rank limit. */
static inline size_t cgpu_cuda_small_limit(cgpu_cuda_small_kind_t kind, int nranks, long setting)
{
    enum { KIB = 1024 };
    if (setting >= 0) {
        return (size_t) setting;
    }
    if (nranks <= 2 || CGPU_CUDA_SMALL_SCAN == kind) {
        return 64 * KIB;
    }
    switch (kind) {
    case CGPU_CUDA_SMALL_CHAIN:
        return 3 == nranks ? 1024 * KIB : 512 * KIB;
    case CGPU_CUDA_SMALL_BLOCK:
        return 256 * KIB;
    case CGPU_CUDA_SMALL_PEER:
        return 3 == nranks ? 1024 * KIB : 64 * KIB;
    default:
        return 64 * KIB;
    }
}

/** The plan, the same on every rank (count and the settings are): a channel more only while
 * each keeps @p ch_min bytes a piece (up to @p nch_max); steps of at most a slot, on the
 * 16-byte grid. A chain of 3 or more ranks (@p chain, @p nranks) moves its piece in up to
 * 16 steps of at least @p chain_chunk bytes (0: whole slots): a chain step waits for the one
 * before it on the left, so a piece moved in one step crosses the hops one after another,
 * while in smaller steps they overlap; each step costs a flag round trip, hence the floor
 * (on 4 H200s: 64 KiB steps from 8 to 64 MiB, whole slots from 256 MiB,
 * bench/results/2026-11-28_4xH200.md). */
static inline cgpu_cuda_ring_plan_t cgpu_cuda_ring_plan(size_t count, size_t esize, size_t pieces,
                                                        size_t ch_min, size_t nch_max,
                                                        size_t slot_bytes, bool chain,
                                                        size_t nranks, size_t chain_chunk)
{
    enum { CHAIN_STEPS = 16 };
    const size_t align = 16 / esize > 0 ? 16 / esize : 1;
    const size_t slot_elems = (slot_bytes / esize) / align * align;
    size_t nch = (count * esize + pieces * ch_min - 1) / (pieces * ch_min);
    nch = nch < 1 ? 1 : nch > nch_max ? nch_max : nch;
    const size_t per = ((count + nch * pieces - 1) / (nch * pieces) + align - 1) / align * align;
    size_t step = slot_elems;
    if (chain && nranks > 2 && chain_chunk > 0) {
        const size_t least = chain_chunk / esize;
        size_t want = per / CHAIN_STEPS > least ? per / CHAIN_STEPS : least;
        want = (want + align - 1) / align * align;
        step = want > 0 && want < slot_elems ? want : slot_elems;
    }
    cgpu_cuda_ring_plan_t p = {.nch = nch, .chunk = per < step ? per : step};
    p.nloops = 0 == p.chunk ? 0 : (count + nch * pieces * p.chunk - 1) / (nch * pieces * p.chunk);
    return p;
}

/** Device memory on the communicator's device, at least @p bytes, that stays zero (the
 * input of the ranks other than the root to a scatter run as a reduce-scatter): kept and
 * grown to the largest call, freed with the communicator. */
cgpu_status_t cgpu_cuda_comm_zeros(cgpu_comm_t *comm, size_t bytes, const void **out);

/** Take this rank's inbox (pool or new) and stream on the current device; fill the
 * record (a cgpu_cuda_inbox_rec_t) its peers need. */
cgpu_status_t cgpu_cuda_comm_setup(cgpu_comm_t *comm, void *handle_out);

/** Map every peer's inbox from the allgathered records (size x cgpu_cuda_inbox_rec_t). */
cgpu_status_t cgpu_cuda_comm_connect(cgpu_comm_t *comm, const char *handles);

/** Unmap peers, free the inbox, stream and scratch. Idempotent. */
void cgpu_cuda_comm_destroy(cgpu_comm_t *comm);

/** Where a padded pair's allreduce puts its result (cgpu_coll.c, "the padded pairs"): only
 * the data runs (cgpu_dtype_runs) of elements [first, first + n) of it, into out (device
 * memory, n elements; NULL when n is 0). */
typedef struct cgpu_pairs_out {
    char *out;
    size_t first, n;
} cgpu_pairs_out_t;

/** Allreduce on the GPU (the caller has entered the communicator). With @p po (not NULL)
 * rbuf is unused: the input (device memory) is read only up to its last data byte, and the
 * result goes where @p po says, the copies in and out on the collective's stream. */
cgpu_status_t cgpu_cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                  const cgpu_pairs_out_t *po);

/** The other collectives on the GPU, same buffer conventions as the engine's entry points
 * (sbuf NULL: in place). bcast and allgather count bytes. */
cgpu_status_t cgpu_cuda_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op);
cgpu_status_t cgpu_cuda_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, int root);
/* part (device memory, or NULL): also gets part_bytes of the result from part_off, with no
 * wait of its own */
cgpu_status_t cgpu_cuda_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                              size_t part_off, size_t part_bytes);
cgpu_status_t cgpu_cuda_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/** Whether this communicator has a device alltoall (enough alltoall channels for its
 * peers); the same answer on every rank. */
bool cgpu_cuda_comm_alltoall_ok(const cgpu_comm_t *comm);

/** True when two ranks of this (node-local) communicator run on one device; the same answer
 * on every rank (it is read from the records every rank received). */
bool cgpu_cuda_comm_shares_device(const cgpu_comm_t *comm);
cgpu_status_t cgpu_cuda_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes);

/** Scan or exscan on the kernels (the caller has entered the communicator; sbuf NULL: in
 * place): up to cgpu_cuda_small_limit one oneshot call (launched or resident) in which
 * every rank sends its input to the ranks after it and each reduces ranks 0..itself
 * (exclusive: 0..itself - 1) in rank order; larger, the reduce's chain from rank 0 to rank
 * n-1, each rank keeping its prefix (exclusive: the prefix it received). */
cgpu_status_t cgpu_cuda_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, bool exclusive);

/** Whether a reduce or scan of @p bytes of @p dt runs as one oneshot call (the same answer on
 * every rank) on @p sbuf and @p rbuf as they are (NULL: none; this rank's memory of its
 * device, aligned for the type: this rank's answer alone). A padded pair's call may then run
 * on the caller's buffers: the oneshot's result stores leave the pairs' gaps alone. */
bool cgpu_cuda_small_in_place(cgpu_comm_t *comm, cgpu_cuda_small_kind_t kind, const void *sbuf,
                              const void *rbuf, size_t bytes, cgpu_dtype_t dt);

/** Whether the device kernels do (dt, op). */
bool cgpu_cuda_comm_supports(cgpu_dtype_t dt, cgpu_op_t op);

#endif /* CGPU_CUDA_COMM_H */
