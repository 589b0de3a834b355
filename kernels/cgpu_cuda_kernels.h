/*
 * coll/gpu kernels: C interface of the CUDA collective kernels (kernels/cgpu_cuda_*.cu, one
 * file per kernel family with its launchers).
 *
 * Everything crossing this boundary is plain C: pointers (device or peer-mapped through
 * CUDA IPC), sizes, and a stream passed as void * so that C files need no CUDA header.
 * A launcher only enqueues work; the caller synchronizes and checks the status.
 */
#ifndef CGPU_CUDA_KERNELS_H
#define CGPU_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cgpu_reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CGPU_CUDA_MAX_CHANNELS 64
#define CGPU_CUDA_MAX_RANKS 64
#define CGPU_CUDA_MAX_ONESHOT_BLOCKS 32
#define CGPU_CUDA_FLAG_STRIDE 16 /* uint64 words between flags: 128 bytes, one line each */

/*
 * Layout of every rank's inbox (one cudaMalloc, exported with CUDA IPC). Flags are
 * uint64 counters that only grow; each lives in the memory of the GPU that polls it and
 * is written by exactly one peer:
 *   ring_posted[c]   written by the left neighbour: items put in my ring slots of channel c
 *   ring_consumed[c] written by the right neighbour: my items it has finished with
 *   oneshot[p][b]    written by rank p: its block b of oneshot call `seq` is in my inbox
 */
#define CGPU_CUDA_FLAG_RING_POSTED(c) ((size_t) (c) * CGPU_CUDA_FLAG_STRIDE)
#define CGPU_CUDA_FLAG_RING_CONSUMED(c) \
    ((size_t) (CGPU_CUDA_MAX_CHANNELS + (c)) * CGPU_CUDA_FLAG_STRIDE)
#define CGPU_CUDA_FLAG_ONESHOT(p, b)                                                  \
    ((size_t) (2 * CGPU_CUDA_MAX_CHANNELS + (p) * CGPU_CUDA_MAX_ONESHOT_BLOCKS + (b)) * \
     CGPU_CUDA_FLAG_STRIDE)
/* tree ports: incoming 0/1 = from child 0/1 (reduce), 2 = from the parent (broadcast);
 * outgoing 0 = to the parent, 1/2 = to child 0/1. posted[c][in port] is written by the
 * sender, consumed[c][out port] by the receiver, each in the poller's own memory. */
#define CGPU_CUDA_TREE_PORTS 3
#define CGPU_CUDA_FLAG_TREE_BASE \
    ((size_t) 2 * CGPU_CUDA_MAX_CHANNELS + (size_t) CGPU_CUDA_MAX_RANKS * CGPU_CUDA_MAX_ONESHOT_BLOCKS)
#define CGPU_CUDA_FLAG_TREE_POSTED(c, p) \
    ((CGPU_CUDA_FLAG_TREE_BASE + (size_t) (c) * CGPU_CUDA_TREE_PORTS + (p)) * CGPU_CUDA_FLAG_STRIDE)
#define CGPU_CUDA_FLAG_TREE_CONSUMED(c, q)                                                    \
    ((CGPU_CUDA_FLAG_TREE_BASE + (size_t) (CGPU_CUDA_MAX_CHANNELS + (c)) * CGPU_CUDA_TREE_PORTS + \
      (q)) * CGPU_CUDA_FLAG_STRIDE)
/* alltoall: channel c of the alltoall area carries data between the ranks at distance
 * d(c) (sender = receiver + d). posted[c] lives in the receiver and is written by its
 * sender; consumed[c] lives in the sender and is written by its receiver. A distance
 * names exactly one peer in each direction, so every flag still has one writer. */
#define CGPU_CUDA_FLAG_A2A_BASE \
    (CGPU_CUDA_FLAG_TREE_BASE + 2 * (size_t) CGPU_CUDA_MAX_CHANNELS * CGPU_CUDA_TREE_PORTS)
#define CGPU_CUDA_FLAG_A2A_POSTED(c) ((CGPU_CUDA_FLAG_A2A_BASE + (size_t) (c)) * CGPU_CUDA_FLAG_STRIDE)
#define CGPU_CUDA_FLAG_A2A_CONSUMED(c) \
    ((CGPU_CUDA_FLAG_A2A_BASE + (size_t) CGPU_CUDA_MAX_CHANNELS + (c)) * CGPU_CUDA_FLAG_STRIDE)
/* copy-engine path: rank p sets its word here to the call's number once its copies into
 * this rank's buffer have completed */
#define CGPU_CUDA_FLAG_CE_BASE (CGPU_CUDA_FLAG_A2A_BASE + 2 * (size_t) CGPU_CUDA_MAX_CHANNELS)
#define CGPU_CUDA_FLAG_CE(p) ((CGPU_CUDA_FLAG_CE_BASE + (size_t) (p)) * CGPU_CUDA_FLAG_STRIDE)
#define CGPU_CUDA_FLAG_WORDS \
    ((CGPU_CUDA_FLAG_CE_BASE + (size_t) CGPU_CUDA_MAX_RANKS) * CGPU_CUDA_FLAG_STRIDE)
#define CGPU_CUDA_FLAG_BYTES (CGPU_CUDA_FLAG_WORDS * sizeof(uint64_t))

/*
 * What a kernel reports when a wait outlasts timeout_ns (written to host-mapped memory
 * the caller zeroes before the launch): err[0] = kind (0 none), err[1] = channel or
 * peer, err[2] = value waited for, err[3] = value seen.
 */
enum { CGPU_CUDA_ERR_NONE = 0, CGPU_CUDA_ERR_RING_POSTED = 1, CGPU_CUDA_ERR_RING_CONSUMED = 2,
       CGPU_CUDA_ERR_ONESHOT = 3, CGPU_CUDA_ERR_TREE_POSTED = 4, CGPU_CUDA_ERR_TREE_CONSUMED = 5,
       CGPU_CUDA_ERR_A2A_POSTED = 6, CGPU_CUDA_ERR_A2A_CONSUMED = 7, CGPU_CUDA_ERR_CE = 8 };

/*
 * What a launch on the ring (link r -> r+1, slots in the right neighbour's inbox) does.
 * Every mode counts its items on the same per-channel link counters, so any sequence of
 * them on one communicator is flow-controlled across calls. Counts are per block:
 *   ALLREDUCE       count elements, in -> out
 *   REDUCE_SCATTER  in holds nranks blocks of count; out gets block `rank` reduced
 *   ALLGATHER       in is this rank's block of count (may be out's block `rank`)
 *   BCAST           chain root -> root+1 -> ... -> root-1; in == out
 *   REDUCE          chain root+1 -> ... -> root; out is written at the root only
 */
enum { CGPU_CUDA_RING_ALLREDUCE = 0, CGPU_CUDA_RING_REDUCE_SCATTER = 1, CGPU_CUDA_RING_ALLGATHER = 2,
       CGPU_CUDA_RING_BCAST = 3, CGPU_CUDA_RING_REDUCE = 4 };

/* CGPU_CUDA_GRID_DOC: a launch has parts (the ring's and the tree's channels, the
 * alltoall's send and receive channels, a oneshot call's blocks of data), each of which
 * waits only for the same part on its peers. A rank may launch fewer blocks than parts
 * (`grid`, its own choice: the block budget, cgpu_cuda_comm.c): block b then runs parts b,
 * b + grid, b + 2 grid, ... one after the other. Every rank taking its parts in increasing
 * order, the lowest part not yet done always has every rank's block on it, so no choice of
 * grids can deadlock. The tree and the alltoall pair their parts (a channel's reduce and
 * broadcast, its send and receive: one waits for slots the other frees), so their grids are
 * even and blocks 2k and 2k+1 run a pair at once. */

/** Arguments of one launch on the ring (one channel a part). */
typedef struct cgpu_cuda_ring_args {
    unsigned long long timeout_ns; /* give up a wait after this long (0: never) */
    unsigned long long *err;       /* device view of the host-mapped error record */
    const void *in;      /* this rank's contribution (device, local) */
    void *out;           /* result (device, local; may equal in) */
    size_t count;        /* elements */
    size_t chunk;        /* elements per ring chunk in this call (same on every rank) */
    int nloops;          /* loops every channel runs (same on every rank) */
    int nch;             /* channels in this call (same on every rank) */
    int grid;            /* blocks this rank launches (CGPU_CUDA_GRID_DOC; 0: nch) */
    int rank, nranks;
    int nslots;
    size_t slot_bytes;
    char *my_inbox;      /* this rank's inbox (flags at 0, ring slots at ring_off) */
    char *right_inbox;   /* right neighbour's inbox, peer-mapped */
    char *left_inbox;    /* left neighbour's inbox, peer-mapped */
    size_t ring_off;     /* byte offset of the ring slots in an inbox */
    int mode;            /* CGPU_CUDA_RING_* */
    int root;            /* BCAST, REDUCE */
    uint64_t sbase[CGPU_CUDA_MAX_CHANNELS]; /* items each channel sent right before this call */
    uint64_t rbase[CGPU_CUDA_MAX_CHANNELS]; /* items each channel received from the left */
} cgpu_cuda_ring_args_t;

/** Arguments of one alltoall launch: for each distance d in 1..nranks-1, cpd send blocks
 * (to rank - d) and cpd receive blocks (from rank + d), plus nself blocks copying this
 * rank's own block. A peer's block is cut into cpd regions, one per channel, moved in
 * chunks through that channel's slots in the receiver's alltoall area. */
typedef struct cgpu_cuda_a2a_args {
    unsigned long long timeout_ns;
    unsigned long long *err;
    const void *in;
    void *out;
    size_t bytes;        /* per peer */
    size_t region;       /* bytes per channel of a peer's block (multiple of 16) */
    size_t chunk;        /* bytes per slot (multiple of 16) */
    int nchunks;         /* chunks every channel moves (same on every rank) */
    int cpd;             /* channels per distance in this call */
    int cpd_max;         /* channels per distance in the area's layout */
    int nself;
    int grid; /* blocks this rank launches, even (CGPU_CUDA_GRID_DOC; 0: all) */
    int rank, nranks;
    int nslots;
    size_t slot_bytes;
    size_t a2a_off;      /* byte offset of the alltoall area in an inbox */
    char *inbox[CGPU_CUDA_MAX_RANKS];
    uint64_t base[CGPU_CUDA_MAX_CHANNELS]; /* items each channel moved before this call */
} cgpu_cuda_a2a_args_t;

/** Arguments of one tree allreduce launch (two blocks per channel: reduce up, broadcast
 * down a binary tree rooted at rank 0, pipelined in chunks). */
typedef struct cgpu_cuda_tree_args {
    unsigned long long timeout_ns;
    unsigned long long *err;
    const void *in;
    void *out;
    size_t count;
    size_t region;       /* elements per channel */
    size_t chunk;        /* elements per pipeline step */
    int nchunks;         /* steps every channel runs (same on every rank) */
    int nch;
    int grid; /* blocks this rank launches, even (CGPU_CUDA_GRID_DOC; 0: 2 nch) */
    int rank, nranks;
    int nslots;
    size_t slot_bytes;
    size_t tree_off;     /* byte offset of the tree slots in an inbox */
    char *my_inbox;
    char *parent_inbox;  /* NULL at the root */
    char *child_inbox[2];/* NULL where there is no such child */
    uint64_t base[CGPU_CUDA_MAX_CHANNELS];
} cgpu_cuda_tree_args_t;

/*
 * Oneshot calls (small messages): every rank writes its part straight into its peers'
 * inboxes (slice [seq & 1][sender]), flags each peer, waits for every peer's flag, then
 * builds its result from its own inbox. Every rank flags and waits for every peer in every
 * mode (a rank that sends no data still says it has finished with the slices of call
 * seq - 2), so no slice is written while its reader is still on it. The modes are the
 * ring's numbers, plus the alltoall:
 *   ALLREDUCE       count elements, in -> out on every rank
 *   REDUCE_SCATTER  in holds nranks blocks of count; out gets block `rank` reduced
 *   REDUCE          count elements, out written at the root only
 *   ALLGATHER       count bytes from every rank into out's block of that rank
 *   BCAST           count bytes, the root's in into every other rank's out
 *   ALLTOALL        in's block p (count bytes) into rank p's out block `rank`
 *   SCAN            count elements, out = in of ranks 0..rank reduced in rank order
 *   EXSCAN          the same over ranks 0..rank-1; rank 0's out is not written
 * A block b of every rank works on the same share of each count (16-byte grid).
 */
#define CGPU_CUDA_ONESHOT_ALLTOALL 5
#define CGPU_CUDA_ONESHOT_SCAN 6
#define CGPU_CUDA_ONESHOT_EXSCAN 7
/* the ranks whose contributions rank `me` of n reduces in mode m (its base mode): ranks
 * 0 .. folds-1 */
#define CGPU_CUDA_ONESHOT_FOLDS(m, me, n)                                                          \
    (CGPU_CUDA_ONESHOT_SCAN == (m) ? (me) + 1 : CGPU_CUDA_ONESHOT_EXSCAN == (m) ? (me) : (n))
#define CGPU_CUDA_ONESHOT_COPIES(m) \
    (CGPU_CUDA_RING_ALLGATHER == (m) || CGPU_CUDA_RING_BCAST == (m) || CGPU_CUDA_ONESHOT_ALLTOALL == (m))
/*
 * LL calls (mode | CGPU_CUDA_ONESHOT_LL | class << CGPU_CUDA_LL_CLASS_SHIFT): a oneshot
 * call of elements of at most 8 bytes whose block fits size class c (1 KiB << c of data,
 * CGPU_CUDA_LL_LINES << c lines). Rank p's data for rank r travel in r's LL area of that
 * class as 16-byte lines {data lo, n, data hi, n}, n the low 32 bits of the call's number,
 * written with one 16-byte store (each 8-byte half arrives whole): a reader takes a line
 * once both halves carry n, so there is no fence and no separate flag. Every rank writes
 * all the class's lines to every peer in every LL call of that class (zeros past its data)
 * and reads all of them from every peer, and each class numbers its calls apart (seq counts
 * that class's LL calls only), so a line holds this call's number or the number of the
 * class's call two before (areas alternate with the number's parity): never a stale match.
 * Thread block b of a call takes its share of the lines. The area is zeroed with the flags
 * when an inbox is taken.
 */
#define CGPU_CUDA_ONESHOT_LL 0x80
#define CGPU_CUDA_LL_CLASS_SHIFT 3
#define CGPU_CUDA_ONESHOT_BASE(m) ((m) & 7) /* the mode without the LL bits */
#define CGPU_CUDA_LL_CLASS(m) (((m) >> CGPU_CUDA_LL_CLASS_SHIFT) & 15)
#define CGPU_CUDA_LL_LINES 128 /* lines of class 0 */
#define CGPU_CUDA_LL_CLASSES 7 /* 1 KiB .. 64 KiB */
#define CGPU_CUDA_LL_LINE_BYTES 16
/* data bytes class c carries from one rank to one peer (8 a line) */
#define CGPU_CUDA_LL_CLASS_DATA(c) (((size_t) CGPU_CUDA_LL_LINES * 8) << (c))
/* byte offset of class c in the LL area of an inbox of n ranks (two parities x n senders x
 * the class's lines for each class before it); CGPU_CUDA_LL_CLASS_OFF(n, k): the area of
 * classes 0..k-1 */
#define CGPU_CUDA_LL_CLASS_OFF(n, c)                                                  \
    ((size_t) 2 * (size_t) (n) * CGPU_CUDA_LL_LINE_BYTES * CGPU_CUDA_LL_LINES * \
     (((size_t) 1 << (c)) - 1))

/** Arguments of one oneshot launch. */
typedef struct cgpu_cuda_oneshot_args {
    unsigned long long timeout_ns;
    unsigned long long *err;
    const void *in;
    void *out;
    size_t count;        /* elements of one block (copies: bytes) */
    int mode;            /* CGPU_CUDA_RING_* or CGPU_CUDA_ONESHOT_{ALLTOALL,SCAN,EXSCAN} */
    int root;            /* BCAST, REDUCE */
    int rank, nranks;
    int nblocks;         /* parts of the call (same on every rank) */
    int grid;            /* blocks this rank launches (CGPU_CUDA_GRID_DOC; 0: nblocks) */
    uint64_t seq;        /* this call's number (same on every rank), from 1; LL calls have
                          * their own numbers */
    size_t slice_bytes;  /* capacity of one rank's contribution in an inbox buffer */
    size_t oneshot_off;  /* byte offset of the oneshot area in an inbox */
    size_t ll_off;       /* byte offset of the LL area in an inbox */
    /* NULL, or a word in mapped host memory the call waits for (at least gate_val) before
     * it reads the caller's buffers: a resident call whose descriptor the host wrote before
     * the default stream's work it must follow was done (cgpu_cuda_resident_args_t.gate) */
    const uint64_t *gate;
    uint64_t gate_val;
    /* device memory: block 0's verdict on a gated call of several blocks for the others
     * (gate_val: go; with bit 63 set: given back) */
    uint64_t *verdict;
    unsigned long long gate_ns; /* how long the call waits at its gate before it gives itself
                                 * back (the resident kernel's idle time) */
    char *inbox[CGPU_CUDA_MAX_RANKS]; /* every rank's inbox (own one local) */
} cgpu_cuda_oneshot_args_t;

/** Resident oneshot kernel (cgpu_cuda_resident.cu). The host writes a descriptor of four 16-byte
 * parts {tag, field}, fields in, out, count | mode << 40 | blocks << 48 | root << 56 | exit
 * bit, oneshot call number, with tag = number ^ cgpu_cuda_resident_mix(field), field first:
 * a part read half old, half new fails its check (or holds the same field, so is right
 * anyway). A kernel runs the reductions of its own (dt, op) and every copying mode. */
#define CGPU_CUDA_RESIDENT_EXIT (1ull << 63)
#define CGPU_CUDA_RESIDENT_MODE_SHIFT 40
#define CGPU_CUDA_RESIDENT_BLOCKS_SHIFT 48
#define CGPU_CUDA_RESIDENT_ROOT_SHIFT 56
#define CGPU_CUDA_RESIDENT_COUNT_MASK ((1ull << 39) - 1)
/* the call waits at its gate (cgpu_cuda_resident_args_t.gate) before it reads any buffer */
#define CGPU_CUDA_RESIDENT_GATED (1ull << 39)
#define CGPU_CUDA_RESIDENT_VERDICT 8
#define CGPU_CUDA_RESIDENT_STATE_WORDS 16
typedef struct cgpu_cuda_resident_args {
    const uint64_t *desc;  /* 8 words, host-mapped, 16-byte aligned */
    uint64_t *completed;   /* host-mapped, one word per block: the number of the last
                            * descriptor that block worked on (published when its part is done) */
    uint64_t *exited;      /* host-mapped: set to the next number when the kernel ends */
    uint64_t *placed;      /* host-mapped, zeroed before the launch, or NULL: one word per
                            * cluster (CGPU_CUDA_RESIDENT_CLUSTERS), where its first block
                            * stores start once it runs (a cluster's blocks all run by then:
                            * the GPU places a cluster whole) */
    /* host-mapped: the number of the last descriptor the host let through its gate (a
     * descriptor with CGPU_CUDA_RESIDENT_GATED waits here for its own number before the call
     * reads a buffer; block 0 polls it for a call of any number of blocks) */
    const uint64_t *gate;
    uint64_t *state;       /* device memory, CGPU_CUDA_RESIDENT_STATE_WORDS, 16-byte
                            * aligned, zeroed before each launch: words 0-7 the blocks'
                            * mailbox where the kernel is no cluster, the other clusters'
                            * first blocks' where it is several; word
                            * CGPU_CUDA_RESIDENT_VERDICT (a line of its own) block 0's
                            * verdict on a gated call of several blocks */
    uint64_t start;        /* the first descriptor number this launch takes */
    int cluster;           /* launch as thread block clusters (cgpu_cuda_resident_cluster) */
    unsigned long long idle_ns;
    /* NULL, or CGPU_CUDA_RK_TRACE_WORDS words of device memory, zeroed: block 0 adds up
     * where each call's time goes on the device (globaltimer ns; see cgpu_cuda_resident.cu) */
    unsigned long long *trace;
    cgpu_cuda_oneshot_args_t o; /* the communicator's part (in/out/count/seq/nblocks unset) */
} cgpu_cuda_resident_args_t;
/* trace words: calls, descriptor polls, then summed ns of: waiting for the descriptor,
 * handing the call on to the other working blocks, the writes to the peers and their fence,
 * waiting for the peers' flags, the reduction, the completion's release */
enum { CGPU_CUDA_RK_TRACE_CALLS, CGPU_CUDA_RK_TRACE_POLLS, CGPU_CUDA_RK_TRACE_IDLE,
       CGPU_CUDA_RK_TRACE_HANDOFF, CGPU_CUDA_RK_TRACE_WRITE, CGPU_CUDA_RK_TRACE_PEERS,
       CGPU_CUDA_RK_TRACE_REDUCE, CGPU_CUDA_RK_TRACE_DONE, CGPU_CUDA_RK_TRACE_WORDS };
int cgpu_cuda_resident_launch(const cgpu_cuda_resident_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                              int blocks, int threads, void *stream);
/** Whether the current device runs the resident kernel as thread block clusters (compute
 * capability 9.0 and later, where the kernel is built for it): then it has at most
 * CGPU_CUDA_RESIDENT_CLUSTERS clusters of CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS blocks (the
 * portable cluster size), or one smaller cluster; else up to CGPU_CUDA_MAX_ONESHOT_BLOCKS
 * blocks. Block 0 hands a call to its own cluster through distributed shared memory and, for
 * calls of more blocks, to the first block of each other cluster through the mailbox in
 * device memory, which hands it on in its cluster. Asked once per communicator. */
#define CGPU_CUDA_RESIDENT_CLUSTER_BLOCKS 8
#define CGPU_CUDA_RESIDENT_CLUSTERS 2
int cgpu_cuda_resident_cluster(void);

/** Whether the device kernels implement (dt, op): cgpu_reduce_supported on cgpu_dtype_on_device types. */
int cgpu_cuda_reduce_supported(cgpu_dtype_t dt, cgpu_op_t op);

/** Load every kernel now (cgpu_cuda_launch.cuh: load_kernel says why); once per process,
 * before the first launch. */
int cgpu_cuda_kernels_preload(void);

/** Enqueue a ring-mode launch whose mode reduces (ALLREDUCE, REDUCE_SCATTER, REDUCE). */
int cgpu_cuda_ring_reduce_launch(const cgpu_cuda_ring_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                                 int threads, void *stream);

/** Enqueue a ring-mode launch that only copies (ALLGATHER, BCAST); counts in bytes. */
int cgpu_cuda_ring_copy_launch(const cgpu_cuda_ring_args_t *a, int threads, void *stream);

/** Enqueue an alltoall. Returns 0 or a cudaError_t value. */
int cgpu_cuda_a2a_launch(const cgpu_cuda_a2a_args_t *a, int threads, void *stream);

/** Peers' release words (see cgpu_cuda_pool.h): one system-scope add on each. */
typedef struct cgpu_cuda_release_args {
    unsigned long long *word[CGPU_CUDA_MAX_RANKS];
    int n;
} cgpu_cuda_release_args_t;
int cgpu_cuda_release_signal(const cgpu_cuda_release_args_t *a, void *stream);

/** Copy-engine path: after this stream's copies into peers' buffers, set each peer's word
 * (signal[i], through its mapping) to seq, then wait until each of this rank's words
 * (wait[i]) reaches seq. NULL entries are skipped. */
typedef struct cgpu_cuda_ce_sync_args {
    unsigned long long timeout_ns;
    unsigned long long *err;
    uint64_t *signal[CGPU_CUDA_MAX_RANKS];
    const uint64_t *wait[CGPU_CUDA_MAX_RANKS];
    uint64_t seq;
} cgpu_cuda_ce_sync_args_t;
int cgpu_cuda_ce_sync(const cgpu_cuda_ce_sync_args_t *a, void *stream);

#ifdef __CUDACC__
#define CGPU_CUDA_HD __host__ __device__
#else
#define CGPU_CUDA_HD
#endif

/** The resident descriptor's tag mix (a 64-bit finalizer: any change of the field changes
 * the tag in many bits). */
static inline CGPU_CUDA_HD uint64_t cgpu_cuda_resident_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    return x ^ (x >> 33);
}

/** The resident descriptor's third field (without the exit and gate bits): count (< 2^39), mode
 * (CGPU_CUDA_RING_* or CGPU_CUDA_ONESHOT_ALLTOALL), blocks (1-32), root (0-63); the kernel
 * reads each back with its shift and an 8-bit (root: 7-bit) mask. */
static inline CGPU_CUDA_HD uint64_t cgpu_cuda_resident_word(uint64_t count, int mode, int blocks,
                                                            int root)
{
    return count | (uint64_t) mode << CGPU_CUDA_RESIDENT_MODE_SHIFT |
           (uint64_t) blocks << CGPU_CUDA_RESIDENT_BLOCKS_SHIFT |
           (uint64_t) root << CGPU_CUDA_RESIDENT_ROOT_SHIFT;
}

/** Copy-engine reduce pieces, the same on host and device: counted back from the end they
 * are lo, 2 lo, 4 lo, ... elements, at most hi each, so the copies are few and large while
 * the reduction that trails the last copy is small; the first piece takes what is left.
 * Every boundary is a multiple of 16 elements from the start (whole vectors). */
static inline CGPU_CUDA_HD size_t cgpu_cuda_ce_tail(size_t lo, size_t hi, int m)
{
    size_t s = 0, sz = lo;
    for (int k = 0; k < m; ++k) {
        s += sz;
        sz = sz < hi / 2 ? 2 * sz : hi;
    }
    return s;
}
static inline CGPU_CUDA_HD int cgpu_cuda_ce_npieces(size_t count, size_t lo, size_t hi)
{
    int n = 1;
    while (cgpu_cuda_ce_tail(lo, hi, n) < count) {
        ++n;
    }
    return n;
}
/** First element of piece p of n (p == n: count). */
static inline CGPU_CUDA_HD size_t cgpu_cuda_ce_start(size_t count, size_t lo, size_t hi, int n,
                                                     int p)
{
    if (0 == p) {
        return 0;
    }
    const size_t t = cgpu_cuda_ce_tail(lo, hi, n - p);
    return p == n ? count : t >= count ? 0 : (count - t) / 16 * 16;
}

/** 2-rank copy-engine allreduce: rank 0 reduces elements [0, mid), rank 1 [mid, count); mid
 * is on the 16-element grid, so both halves start on whole vectors. */
static inline CGPU_CUDA_HD size_t cgpu_cuda_ce_half(size_t count)
{
    return count / 2 / 16 * 16;
}

/** Copy-engine reduce, root of 2 ranks: the other rank's copy engines write its input into
 * out in the pieces above, raising *flag to base + i + 1 after piece i; the kernel reduces
 * each piece with `in` into out as soon as it has landed, and also stores the result
 * through out2 (the other rank's output, mapped) unless that is NULL (the 2-rank
 * copy-engine allreduce: each rank does this for its half). */
typedef struct cgpu_cuda_ce_reduce_args {
    unsigned long long timeout_ns;
    unsigned long long *err;
    void *out;
    void *out2;
    const void *in;
    size_t count;
    size_t lo, hi; /* piece sizes, elements */
    int npieces;
    int peer;
    const uint64_t *flag;
    uint64_t base;
} cgpu_cuda_ce_reduce_args_t;
int cgpu_cuda_ce_reduce(const cgpu_cuda_ce_reduce_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                        int blocks, int threads, void *stream);

/** Enqueue a tree allreduce (2 x nch blocks). Returns 0 or a cudaError_t value. */
int cgpu_cuda_tree_allreduce(const cgpu_cuda_tree_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int threads, void *stream);

/** Enqueue a oneshot call (a->mode; dt and op only for the reducing modes). Returns 0 or a
 * cudaError_t value. */
int cgpu_cuda_oneshot_launch(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                             int threads, void *stream);

/*
 * Where the kernels live. The device code and the CUDA runtime that registers it are a
 * shared object of their own, libcgpu_cuda_kernels.so, installed next to the plugin and
 * opened (cgpu_cuda_loader.c) when the cuda backend first sets a communicator up: loading
 * and registering several MB of kernels in every process's MPI_Init would tax jobs that
 * never touch a device buffer. Its one exported symbol, CGPU_CUDA_KERNELS_SYMBOL, is this
 * table; the launchers above are, in the plugin, calls through it. The args structs' sizes
 * travel with it, so an object built from other headers is refused, not called.
 */
#define CGPU_CUDA_KERNELS_LIB "libcgpu_cuda_kernels.so"
#define CGPU_CUDA_KERNELS_SYMBOL "mca_coll_gpu_cuda_kernels"
#define CGPU_CUDA_KERNELS_ABI 1
typedef struct cgpu_cuda_kernel_ops {
    int abi;      /* CGPU_CUDA_KERNELS_ABI */
    size_t sizes[9]; /* sizeof this table and of the args structs, in the order of
                        CGPU_CUDA_KERNELS_SIZES */
    int (*resident_launch)(const cgpu_cuda_resident_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                           int blocks, int threads, void *stream);
    int (*resident_cluster)(void);
    int (*preload)(void);
    int (*ring_reduce_launch)(const cgpu_cuda_ring_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                              int threads, void *stream);
    int (*ring_copy_launch)(const cgpu_cuda_ring_args_t *a, int threads, void *stream);
    int (*a2a_launch)(const cgpu_cuda_a2a_args_t *a, int threads, void *stream);
    int (*release_signal)(const cgpu_cuda_release_args_t *a, void *stream);
    int (*ce_sync)(const cgpu_cuda_ce_sync_args_t *a, void *stream);
    int (*ce_reduce)(const cgpu_cuda_ce_reduce_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                     int blocks, int threads, void *stream);
    int (*tree_allreduce)(const cgpu_cuda_tree_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                          int threads, void *stream);
    int (*oneshot_launch)(const cgpu_cuda_oneshot_args_t *a, cgpu_dtype_t dt, cgpu_op_t op,
                          int threads, void *stream);
} cgpu_cuda_kernel_ops_t;
/** Plugin side: the path the kernels were loaded from (loading them now if not yet), or
 * NULL where they cannot be (the reason is logged once). */
const char *cgpu_cuda_kernels_where(void);
#define CGPU_CUDA_KERNELS_SIZES                                                          \
    {sizeof(cgpu_cuda_kernel_ops_t),    sizeof(cgpu_cuda_resident_args_t),               \
     sizeof(cgpu_cuda_ring_args_t),     sizeof(cgpu_cuda_a2a_args_t),                    \
     sizeof(cgpu_cuda_release_args_t),  sizeof(cgpu_cuda_ce_sync_args_t),                \
     sizeof(cgpu_cuda_ce_reduce_args_t), sizeof(cgpu_cuda_tree_args_t),                  \
     sizeof(cgpu_cuda_oneshot_args_t)}

#ifdef __cplusplus
}
#endif

#endif /* CGPU_CUDA_KERNELS_H */
