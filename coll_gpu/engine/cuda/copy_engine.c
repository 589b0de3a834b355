/*
 * coll/gpu engine, cuda backend: the copy-engine paths (bcast and alltoall; reduce and
 * allreduce of 2 ranks).
 *
 * Each rank's copy engines write straight into the peers' user buffers, mapped through
 * CUDA IPC for the call (and cached), then set a flag in each peer's inbox; a rank's call
 * completes when every peer's flag for it has arrived. The 2-rank reduce and allreduce
 * also need ranks on two devices (setup.c makes their streams only then): on one device
 * the copies cross no NVLink, and both ranks' reduce kernels (up to 128 blocks each,
 * spinning for the peer's pieces) beside the resident kernels leave no room under MPS for
 * what raises a piece's flag, so the 64 MiB allreduce times out there.
 *
 * Whether a call goes this way is agreed on by every rank at the call (ce_prepare: the
 * buffers must suit on every rank), so a call that cannot falls back to the kernels; only
 * a blocking call's thread can agree (a non-blocking collective's worker cannot bootstrap).
 */
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

typedef struct ce_rec {
    int32_t ok;       /* this rank can take part (its buffers suit, its target exported) */
    int32_t exported; /* handle/offset are valid */
    uint64_t offset;  /* of the target in its allocation */
    uint64_t id;      /* the allocation's unique id (a freed one's handle can come back) */
    char handle[CGPU_CUDA_IPC_HANDLE_BYTES];
} ce_rec_t;

enum { CE_ALLTOALL, CE_BCAST, CE_REDUCE, CE_ALLREDUCE };

typedef struct ce_call {
    int kind;
    int root;
    size_t bytes; /* bcast, reduce: the buffer; alltoall: per peer */
    size_t count; /* reduce: elements */
    cgpu_dtype_t dt;
    cgpu_op_t op;
    void *map[CGPU_CUDA_MAX_RANKS]; /* peers' mapped allocations (NULL: not mapped) */
    char *dst[CGPU_CUDA_MAX_RANKS]; /* peers' target buffers through them */
} ce_call_t;

/* whether @p p serves a copy-engine call as it is (a reduction's kernel loads ce's type) */
static bool usable_as_is(const cgpu_cuda_comm_t *cc, const void *p, const ce_call_t *ce)
{
    const bool reduces = CE_REDUCE == ce->kind || CE_ALLREDUCE == ce->kind;
    return cgpu_cuda_buf_kind(cc, p, reduces ? cgpu_cuda_dtype_align(ce->dt) : 0).in_place;
}

/* two buffers of `bytes` that do not overlap */
static bool apart(const void *a, const void *b, size_t bytes)
{
    const char *x = a, *y = b;
    return x + bytes <= y || y + bytes <= x;
}

static void ce_unmap(ce_call_t *ce, int n)
{
    for (int p = 0; p < n; ++p) {
        if (NULL != ce->map[p]) {
            cgpu_ipc_cache_put(ce->map[p]);
            ce->map[p] = NULL;
        }
    }
}

/* Collective: whether every rank takes the copy-engine path for this call (the same
 * answer on every rank, from records every rank sees), and the mappings this rank needs.
 * `target` is what peers write into (NULL: nothing), `source` what this rank reads. */
static cgpu_status_t ce_prepare(cgpu_comm_t *comm, const void *source, const void *target,
                                bool needs_map, bool local_ok, ce_call_t *ce, bool *use)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const int n = comm->size;
    *use = false;
    ce_rec_t mine;
    memset(&mine, 0, sizeof(mine));
    mine.ok = local_ok && usable_as_is(cc, source, ce) &&
              (NULL == target || usable_as_is(cc, target, ce));
    if (mine.ok && NULL != target) {
        size_t off = 0;
        uint64_t id = 0;
        mine.ok = CGPU_OK == cgpu_cuda_ipc_export_range(target, mine.handle, &off, &id);
        mine.id = id;
        mine.exported = mine.ok;
        mine.offset = off;
        /* peers write into it without our stream's ordering: what the caller queued on the
         * default stream must be finished first */
        if (mine.ok && NULL != cc->order_ev &&
            CGPU_OK != cgpu_cuda_default_stream_wait_host(cc->order_ev)) {
            mine.ok = 0;
        }
    }
    ce_rec_t all[CGPU_CUDA_MAX_RANKS]; /* on the stack: no rank can miss the exchange */
    cgpu_status_t st = comm->bs.allgather(comm->bs.ctx, &mine, all, sizeof(ce_rec_t));
    bool every = CGPU_OK == st;
    for (int p = 0; every && p < n; ++p) {
        every = 0 != all[p].ok;
    }
    int32_t mapped = 1;
    if (every && needs_map) {
        const bool held = cgpu_cuda_setup_begin(); /* opening a handle might wait for kernels */
        for (int p = 0; p < n && mapped; ++p) {
            if (p == comm->rank || !all[p].exported) {
                continue;
            }
            mapped = CGPU_OK == cgpu_ipc_cache_get_id(all[p].handle, all[p].id, &ce->map[p]);
            ce->dst[p] = mapped ? (char *) ce->map[p] + all[p].offset : NULL;
        }
        cgpu_cuda_setup_end(held);
    }
    if (CGPU_OK != st) {
        return st;
    }
    if (!every) {
        return CGPU_OK;
    }
    /* a rank that could not map a peer: every rank learns it, and all take the kernels */
    int32_t oks[CGPU_CUDA_MAX_RANKS];
    st = comm->bs.allgather(comm->bs.ctx, &mapped, oks, sizeof(int32_t));
    bool all_mapped = CGPU_OK == st;
    for (int p = 0; all_mapped && p < n; ++p) {
        all_mapped = 0 != oks[p];
    }
    if (!all_mapped) {
        ce_unmap(ce, n);
    }
    *use = all_mapped;
    return st;
}

/* The copy-engine pieces of `count` elements of `es` bytes (cgpu_cuda_ce_start, npieces of
 * them) from src to dst on stream2, each followed by s->signal raised to base + i + 1 from
 * flag_stream once it has landed (flag_ev orders the flag after the copy). */
static cgpu_status_t ce_push_pieces(cgpu_cuda_comm_t *cc, char *dst, const char *src,
                                    size_t count, size_t es, size_t lo, size_t hi, int npieces,
                                    uint64_t base, cgpu_cuda_ce_sync_args_t *s,
                                    void *flag_stream, void *flag_ev)
{
    cgpu_status_t st = CGPU_OK;
    for (int i = 0; i < npieces && CGPU_OK == st; ++i) {
        const size_t a = cgpu_cuda_ce_start(count, lo, hi, npieces, i);
        const size_t b = cgpu_cuda_ce_start(count, lo, hi, npieces, i + 1);
        if (b > a) { /* an allreduce's smaller half may start with empty pieces */
            st = cgpu_cuda_copy_async(dst + a * es, src + a * es, (b - a) * es, cc->stream2);
        }
        if (CGPU_OK == st) {
            st = cgpu_cuda_stream_after(flag_stream, flag_ev, cc->stream2);
        }
        if (CGPU_OK == st) {
            s->seq = base + (uint64_t) i + 1;
            int err = cgpu_cuda_ce_sync(s, flag_stream);
            st = 0 != err ? cgpu_cuda_check(err, "copy-engine flags") : CGPU_OK;
        }
    }
    return st;
}

/* A copy-engine reduction's blocks: one per 128 KiB of its largest piece, so the reduction
 * keeps ahead of NVLink (2 MiB pieces on 2 blocks measured 73 GB/s), within
 * the block budget (the kernel splits each piece among whatever blocks it has). Its
 * flag kernels (cgpu_cuda_ce_sync: one block of a few threads) are not counted. */
static int ce_blocks(cgpu_cuda_comm_t *cc, size_t piece_bytes)
{
    const int want = (int) cgpu_clamp1(cgpu_div_up(piece_bytes, 128 << 10), 128);
    const int got = cgpu_cuda_blocks_take(cc, want, 1);
    return got > 0 ? got : want;
}

/* 2-rank reduce: the other rank's copy engines push its input into the root's output in
 * pieces (on a second stream, so the copies run back to back), each followed by a flag;
 * the root's kernel reduces every piece as it lands. Both ranks advance ce_seq alike. */
static cgpu_status_t launch_ce_reduce(cgpu_comm_t *comm, const void *in, void *out,
                                      const ce_call_t *ce)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const int me = comm->rank, peer = 1 - me;
    const size_t es = cgpu_dtype_size(ce->dt);
    /* pieces growing back from a 2 MiB last one to 64 MiB: each copy costs the copy engine
     * some microseconds besides the bytes (uniform 8 and 16 MiB pieces ran 4-5 us slower
     * each than NVLink), and only the last piece's reduction trails the copies */
    const size_t lo = ((size_t) 2 << 20) / es, hi = ((size_t) 64 << 20) / es;
    const int npieces = cgpu_cuda_ce_npieces(ce->count, lo, hi);
    const uint64_t base = cc->ce_seq;
    cc->ce_seq += npieces;
    cgpu_log(CGPU_LOG_TRACE, "cuda: copy-engine reduce rank %d root %d count %zu pieces %d",
             me, ce->root, ce->count, npieces);
    if (me == ce->root) {
        cgpu_cuda_ce_reduce_args_t a = {.timeout_ns = cc->timeout_ns, .err = cc->err_dev,
                                        .out = out, .in = in, .count = ce->count,
                                        .lo = lo, .hi = hi, .npieces = npieces, .peer = peer,
                                        .base = base};
        a.flag = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(peer));
        const size_t largest = ce->count < hi ? ce->count : hi;
        const int blocks = ce_blocks(cc, largest * es);
        int err = cgpu_cuda_ce_reduce(&a, ce->dt, ce->op, blocks, cc->threads, cc->stream);
        return 0 != err ? cgpu_cuda_check(err, "reduce launch") : CGPU_OK;
    }
    cgpu_cuda_ce_sync_args_t s;
    memset(&s, 0, sizeof(s));
    s.timeout_ns = cc->timeout_ns;
    s.err = cc->err_dev;
    s.signal[ce->root] = (uint64_t *) (cc->peer_inbox[ce->root] + CGPU_CUDA_FLAG_CE(me));
    cgpu_status_t st = cgpu_cuda_stream_after(cc->stream2, cc->ev2, cc->stream);
    if (CGPU_OK == st) {
        st = ce_push_pieces(cc, ce->dst[ce->root], in, ce->count, es, lo, hi, npieces, base, &s,
                            cc->stream, cc->ev2);
    }
    return st; /* on an error the root times out waiting: coll_gpu_cuda_timeout */
}

/* 2-rank allreduce: rank r reduces the half h_r of the elements (h_0 first, cut on the
 * 16-element grid). Its copy engines push the other half of its input, in pieces, into the
 * peer's output (stream2), each piece flagged from stream3 once copied; its kernel
 * (stream) reduces each piece of h_r as the peer's copies land in its output and stores the
 * result in both outputs (the peer's through its mapping, over NVLink). A last flag on
 * stream, after all of that, tells the peer its half of our output is written; the call
 * completes when the peer's last flag has arrived. Both ranks advance ce_seq alike. */
static cgpu_status_t launch_ce_allreduce(cgpu_comm_t *comm, const void *in, void *out,
                                         const ce_call_t *ce)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const int me = comm->rank, peer = 1 - me;
    const size_t es = cgpu_dtype_size(ce->dt);
    const size_t mid = cgpu_cuda_ce_half(ce->count);
    const size_t first[2] = {0, mid}, cnt[2] = {mid, ce->count - mid};
    /* the reduce's pieces (see launch_ce_reduce); both halves counted as the larger one,
     * so both ranks number them alike (the smaller half's first piece may be empty) */
    const size_t lo = ((size_t) 2 << 20) / es, hi = ((size_t) 64 << 20) / es;
    const int npieces = cgpu_cuda_ce_npieces(cnt[1], lo, hi);
    const uint64_t base = cc->ce_seq;
    cc->ce_seq += (uint64_t) npieces + 1;
    cgpu_log(CGPU_LOG_TRACE, "cuda: copy-engine allreduce rank %d count %zu pieces %d", me,
             ce->count, npieces);
    /* stream2 and stream3 start after what stream holds (staging, the default stream) */
    cgpu_status_t st = cgpu_cuda_stream_after(cc->stream2, cc->ev2, cc->stream);
    cgpu_cuda_ce_sync_args_t s;
    memset(&s, 0, sizeof(s));
    s.timeout_ns = cc->timeout_ns;
    s.err = cc->err_dev;
    s.signal[peer] = (uint64_t *) (cc->peer_inbox[peer] + CGPU_CUDA_FLAG_CE(me));
    if (CGPU_OK == st) {
        const size_t poff = first[peer] * es;
        st = ce_push_pieces(cc, ce->dst[peer] + poff, (const char *) in + poff, cnt[peer], es, lo,
                            hi, npieces, base, &s, cc->stream3, cc->ev3);
    }
    if (CGPU_OK != st) { /* the peer times out waiting: coll_gpu_cuda_timeout; what this
                          * call queued on stream2 and stream3 ends before it returns */
        (void) cgpu_cuda_stream_after(cc->stream, cc->ev3, cc->stream3);
        (void) cgpu_cuda_stream_after(cc->stream, cc->ev2, cc->stream2);
        return st;
    }
    const size_t off = first[me] * es;
    cgpu_cuda_ce_reduce_args_t a = {.timeout_ns = cc->timeout_ns, .err = cc->err_dev,
                                    .out = (char *) out + off, .out2 = ce->dst[peer] + off,
                                    .in = (const char *) in + off, .count = cnt[me], .lo = lo,
                                    .hi = hi, .npieces = npieces, .peer = peer, .base = base};
    a.flag = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(peer));
    const size_t largest = cnt[me] < hi ? cnt[me] : hi;
    const int blocks = ce_blocks(cc, largest * es);
    int err = cgpu_cuda_ce_reduce(&a, ce->dt, ce->op, blocks, cc->threads, cc->stream);
    if (0 != err) {
        (void) cgpu_cuda_stream_after(cc->stream, cc->ev3, cc->stream3);
        return cgpu_cuda_check(err, "allreduce launch");
    }
    /* our last piece flag is raised before the final one (the same word) */
    st = cgpu_cuda_stream_after(cc->stream, cc->ev3, cc->stream3);
    if (CGPU_OK != st) {
        return st;
    }
    s.seq = base + (uint64_t) npieces + 1;
    s.wait[peer] = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(peer));
    err = cgpu_cuda_ce_sync(&s, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "copy-engine flags") : CGPU_OK;
}

static cgpu_status_t launch_ce(cgpu_comm_t *comm, const void *in, void *out, const void *args)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const ce_call_t *ce = args;
    if (CE_REDUCE == ce->kind) {
        return launch_ce_reduce(comm, in, out, ce);
    }
    if (CE_ALLREDUCE == ce->kind) {
        return launch_ce_allreduce(comm, in, out, ce);
    }
    const int n = comm->size, me = comm->rank;
    cgpu_cuda_ce_sync_args_t s;
    memset(&s, 0, sizeof(s));
    s.timeout_ns = cc->timeout_ns;
    s.err = cc->err_dev;
    s.seq = ++cc->ce_seq;
    cgpu_status_t st = CGPU_OK;
    if (CE_BCAST == ce->kind) {
        for (int p = 0; p < n && CGPU_OK == st; ++p) {
            if (me == ce->root && p != me) {
                st = cgpu_cuda_copy_async(ce->dst[p], in, ce->bytes, cc->stream);
                s.signal[p] = (uint64_t *) (cc->peer_inbox[p] + CGPU_CUDA_FLAG_CE(me));
            }
        }
        if (me != ce->root) {
            s.wait[ce->root] = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(ce->root));
        }
    } else {
        /* peers in order of distance, so not everyone writes to rank 0 first */
        for (int d = 1; d < n && CGPU_OK == st; ++d) {
            const int p = (me + d) % n;
            st = cgpu_cuda_copy_async(ce->dst[p] + (size_t) me * ce->bytes,
                                      (const char *) in + (size_t) p * ce->bytes, ce->bytes,
                                      cc->stream);
            s.signal[p] = (uint64_t *) (cc->peer_inbox[p] + CGPU_CUDA_FLAG_CE(me));
            s.wait[p] = (const uint64_t *) (cc->ib.ptr + CGPU_CUDA_FLAG_CE(p));
        }
        if (CGPU_OK == st) {
            st = cgpu_cuda_copy_async((char *) out + (size_t) me * ce->bytes,
                                      (const char *) in + (size_t) me * ce->bytes, ce->bytes,
                                      cc->stream);
        }
    }
    if (CGPU_OK != st) {
        return st; /* peers time out waiting for our flag: coll_gpu_cuda_timeout */
    }
    cgpu_log(CGPU_LOG_TRACE, "cuda: copy-engine %s rank %d bytes %zu seq %llu",
             CE_BCAST == ce->kind ? "bcast" : "alltoall", me,
             ce->bytes, (unsigned long long) s.seq);
    int err = cgpu_cuda_ce_sync(&s, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "copy-engine flags") : CGPU_OK;
}

/* Runs the call on the copy engines when every rank can; *done says whether it did (if not,
 * *k is as it was: the caller runs its kernels). */
static cgpu_status_t ce_try(cgpu_comm_t *comm, cgpu_cuda_call_t *k, ce_call_t *ce,
                            const void *source, const void *target, bool needs_map, bool local_ok,
                            bool *done)
{
    *done = false;
    if (!cgpu_thread_may_call_mpi()) { /* a non-blocking collective's worker: no agreement */
        return CGPU_OK;
    }
    int prev = cgpu_cuda_current_device();
    cgpu_status_t st = prev != comm->cuda->device ? cgpu_cuda_set_device(comm->cuda->device)
                                                   : CGPU_OK;
    bool use = false;
    if (CGPU_OK == st) {
        st = ce_prepare(comm, source, target, needs_map, local_ok, ce, &use);
    }
    if (prev >= 0 && prev != comm->cuda->device) {
        (void) cgpu_cuda_set_device(prev);
    }
    if (CGPU_OK != st || !use) {
        return st;
    }
    *done = true;
    k->alg = "copy-engine";
    k->ras_alg = CGPU_RAS_ALG_COPY_ENGINE;
    k->fn = launch_ce;
    k->args = ce;
    st = cgpu_cuda_run(comm, k);
    ce_unmap(ce, comm->size);
    return st;
}

/* The root maps the other rank's buffer and writes it; the other rank exports it. */
cgpu_status_t cgpu_cuda_ce_try_bcast(cgpu_comm_t *comm, cgpu_cuda_call_t *k, void *buf,
                                     size_t bytes, int root, bool *done)
{
    ce_call_t ce = {.kind = CE_BCAST, .root = root, .bytes = bytes};
    const bool is_root = comm->rank == root;
    return ce_try(comm, k, &ce, buf, is_root ? NULL : buf, is_root, true, done);
}

/* The root exports its output; the other rank maps it and pushes its input there. */
cgpu_status_t cgpu_cuda_ce_try_reduce(cgpu_comm_t *comm, cgpu_cuda_call_t *k, const void *sbuf,
                                      void *rbuf, size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                      int root, bool *done)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    ce_call_t ce = {.kind = CE_REDUCE, .root = root, .bytes = bytes, .count = count, .dt = dt,
                    .op = op};
    const bool is_root = comm->rank == root;
    /* the root's output must be apart from its input and usable as it is */
    const bool ok =
        is_root ? NULL != sbuf && apart(sbuf, rbuf, bytes) && usable_as_is(comm->cuda, rbuf, &ce)
                : NULL != sbuf;
    return ce_try(comm, k, &ce, NULL != sbuf ? sbuf : rbuf, is_root ? rbuf : NULL, !is_root, ok,
                  done);
}

/* Every rank exports its output and maps the other's; both buffers usable as they are and
 * apart (an in-place allreduce would overwrite the input the peer has yet to push). */
cgpu_status_t cgpu_cuda_ce_try_allreduce(cgpu_comm_t *comm, cgpu_cuda_call_t *k, const void *sbuf,
                                         void *rbuf, size_t count, cgpu_dtype_t dt, cgpu_op_t op,
                                         bool may, bool *done)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    ce_call_t ce = {.kind = CE_ALLREDUCE, .bytes = bytes, .count = count, .dt = dt, .op = op};
    const bool ok = may && NULL != sbuf && NULL != rbuf && apart(sbuf, rbuf, bytes) &&
                    cgpu_cuda_reduce_supported(dt, op);
    return ce_try(comm, k, &ce, NULL != sbuf ? sbuf : rbuf, ok ? rbuf : NULL, true, ok, done);
}

/* Every rank exports its output and maps every peer's; separate buffers only (in place
 * needs the inbox). */
cgpu_status_t cgpu_cuda_ce_try_alltoall(cgpu_comm_t *comm, cgpu_cuda_call_t *k, const void *sbuf,
                                        void *rbuf, size_t bytes, bool *done)
{
    *done = false;
    if (!apart(sbuf, rbuf, bytes * (size_t) comm->size)) {
        return CGPU_OK;
    }
    ce_call_t ce = {.kind = CE_ALLTOALL, .bytes = bytes};
    return ce_try(comm, k, &ce, sbuf, rbuf, true, true, done);
}

#endif /* CGPU_HAVE_CUDA */
