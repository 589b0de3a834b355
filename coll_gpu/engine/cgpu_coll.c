/*
 * coll/gpu engine: collective entry points. Validate, enter the communicator, pick the
 * backend's algorithm, stage buffers the backend cannot use in place, leave.
 */
#include <stdlib.h>
#include <string.h>

#include "cgpu_path.h"

/* The signatures the entry points publish (cgpu_call.c): what MPI requires to match. */
static cgpu_sig_t reduction_sig(cgpu_call_kind_t kind, size_t bytes, cgpu_dtype_t dt, cgpu_op_t op,
                                int root)
{
    return (cgpu_sig_t){.kind = kind, .dt = (int) dt, .op = (int) op, .root = root, .bytes = bytes};
}

static cgpu_sig_t bytes_sig(cgpu_call_kind_t kind, size_t bytes, int root)
{
    return (cgpu_sig_t){
        .kind = kind, .dt = CGPU_SIG_NONE, .op = CGPU_SIG_NONE, .root = root, .bytes = bytes};
}

/* Whether this rank's buffers of a call (NULL: none) are all host memory, where that can
 * change the call's path or algorithm: on a cuda communicator whose ranks check their calls
 * (the check tells every rank whether all of them pass host memory; cgpu_call_path), on one
 * whose ranks share a GPU (its host path stages device buffers, and a large allreduce of
 * them runs in the stage areas, which host buffers do not gain from), and for a call small
 * enough for the one-shot allreduce (@p small) on any communicator that checks. Elsewhere
 * false, without asking the driver. */
static bool host_bufs(const cgpu_comm_t *comm, const void *a, const void *b, bool small)
{
    if (!comm->check_calls ||
        (&cgpu_path_cuda != cgpu_path_of(comm) && comm->dev_share <= 1 && !small)) {
        return false;
    }
    int dev;
    return (NULL == a || CGPU_BUF_HOST == cgpu_buf_kind(a, &dev)) &&
           (NULL == b || CGPU_BUF_HOST == cgpu_buf_kind(b, &dev));
}

/* whether a reduction (allreduce_run, reduce_run, scan_run, the reduce-scatter) may go to
 * the communicator's own kernels: a path that has them, a (dt, op) they do, and not @p host */
static bool kernels_take(const cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op, bool host)
{
    return !host && cgpu_path_of(comm)->reduces(comm, dt, op);
}

/* An allreduce by the network across nodes, else the device kernels (unless @p host: a few
 * words of host memory on every rank), else the host ring. @p po (not NULL): a padded
 * pair's call the kernels take, its result where @p po says (cgpu_cuda_allreduce). */
static cgpu_status_t allreduce_run(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                   cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                   bool host, const cgpu_pairs_out_t *po)
{
    if (NULL == comm || (count > 0 && ((NULL == rbuf && NULL == po) || NULL == sbuf)) ||
        !cgpu_reduce_supported(dt, op) || CGPU_ALLREDUCE_FALLBACK == alg ||
        (NULL != po && !kernels_take(comm, dt, op, host))) {
        return CGPU_ERR_INVALID_ARG;
    }
    const size_t bytes = count * cgpu_dtype_size(dt);
    /* up to 1 KiB of host memory on every rank: each writes its input where its peers read
     * it before it publishes the call, so the call check's one wait is the whole exchange
     * (the same on every rank: the bytes are compared, the rest is the communicator's) */
    const bool small = NULL == po && count > 0 && bytes <= CGPU_SEG_EARLY_BYTES && comm->size > 1 &&
                       NULL == comm->net;
    cgpu_sig_t sig = reduction_sig(CGPU_CALL_ALLREDUCE, bytes, dt, op, -1);
    sig.host = NULL == po && host_bufs(comm, sbuf, rbuf, small);
    cgpu_status_t st =
        cgpu_comm_enter_early(comm, "allreduce", CGPU_KIND_ALLREDUCE, &sig,
                              small && sig.host ? sbuf : NULL, small && sig.host ? bytes : 0);
    if (CGPU_OK != st) {
        return st;
    }
    if (comm->early_written && comm->call_all_host) {
        st = cgpu_host_oneshot_allreduce(comm, rbuf, count, dt, op);
    } else if (count > 0) {
        st = cgpu_call_path(comm)->allreduce(comm, sbuf, rbuf, count, dt, op, alg, host, po);
        if (CGPU_DECLINED == st) {
            st = cgpu_path_host.allreduce(comm, sbuf, rbuf, count, dt, op, alg, host, NULL);
        }
    }
    cgpu_comm_leave(comm, st, bytes);
    return st;
}

static void scratch_drop(cgpu_scratch_t *s)
{
    if (s->device) {
        cgpu_cuda_free(s->buf); /* deferred while a kernel is in flight */
    } else {
        free(s->buf);
    }
    s->buf = NULL;
    s->bytes = 0;
}

void cgpu_comm_scratch_release(cgpu_comm_t *comm)
{
    scratch_drop(&comm->scratch);
    scratch_drop(&comm->pairs);
}

/* Scratch @p s of at least @p bytes, on the device when @p device (a failed device allocation
 * falls back on host memory, which the collectives stage). */
static cgpu_status_t scratch_get(cgpu_scratch_t *s, bool device, size_t bytes, const char *what,
                                 void **out)
{
    if (NULL != s->buf && s->bytes >= bytes && s->device == device) {
        *out = s->buf;
        return CGPU_OK;
    }
    scratch_drop(s);
    s->device = device && CGPU_OK == cgpu_cuda_malloc(&s->buf, bytes, NULL);
    if (!s->device) {
        s->buf = malloc(bytes);
        if (NULL == s->buf) {
            cgpu_log(CGPU_LOG_WARN, "%s: no memory for its %zu bytes of scratch", what, bytes);
            return CGPU_ERR_NO_MEMORY;
        }
    }
    s->bytes = bytes;
    *out = s->buf;
    return CGPU_OK;
}

/* The communicator's scratch, at least @p bytes, on the device when @p device. */
static cgpu_status_t comm_scratch(cgpu_comm_t *comm, bool device, size_t bytes, const char *what,
                                  void **out)
{
    return scratch_get(&comm->scratch, device, bytes, what, out);
}

/* scratch on the device when @p like is device memory on the cuda backend */
static bool scratch_on_device(const cgpu_comm_t *comm, const void *like)
{
    int dev;
    return CGPU_BACKEND_CUDA == cgpu_comm_backend(comm) && NULL != like &&
           CGPU_BUF_HOST != cgpu_buf_kind(like, &dev);
}

/* ---- the padded pairs ----
 * MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_LONG_INT and MPI_LONG_DOUBLE_INT are C structs whose
 * padding is no part of the datatype: a receive buffer's gaps belong to the caller, and a
 * buffer may end right after the last pair's index. The algorithms move whole elements, so
 * these reductions run on copies the communicator keeps (comm->pairs), by rounds of at most
 * CGPU_PAIRS_ROUND_BYTES of input: each round's input is copied in from its first byte to its
 * last data byte (the gaps are read, never written), reduced by the ordinary algorithm into
 * the result copy, and only the data runs of the elements this rank receives are copied out
 * (a strided copy per run). A reduce-scatter runs as allreduce rounds, each rank copying out
 * what falls in its block. A round writes the caller's buffer only where the rounds before
 * it and itself read, so in-place calls are safe. Rounds and their count depend on the count
 * and type only, the same on every rank. */

typedef enum { PAIRS_ALLREDUCE, PAIRS_REDUCE, PAIRS_SCAN, PAIRS_EXSCAN } pairs_kind_t;

typedef struct pairs_call {
    pairs_kind_t kind;
    const char *in; /* the caller's input, total elements */
    size_t total;
    char *out; /* this rank's result: elements [first, first + n) of the total */
    size_t first, n;
    cgpu_dtype_t dt;
    cgpu_op_t op;
    int root;
    cgpu_allreduce_alg_t alg;
    cgpu_scan_alg_t scan_alg;
    size_t scan_round_bytes;
} pairs_call_t;

static bool dtype_padded(cgpu_dtype_t dt)
{
    size_t off[2], len[2];
    const int runs = cgpu_dtype_runs(dt, off, len);
    return runs > 1 || (1 == runs && len[0] != cgpu_dtype_size(dt));
}

static cgpu_status_t reduce_run(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                cgpu_dtype_t dt, cgpu_op_t op, int root);
static cgpu_status_t scan_run(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                              cgpu_dtype_t dt, cgpu_op_t op, bool exclusive, cgpu_scan_alg_t alg,
                              size_t round_bytes);

/* one round: @p k elements from @p in into @p res */
static cgpu_status_t pairs_round(cgpu_comm_t *comm, const pairs_call_t *c, const void *in,
                                 void *res, size_t k)
{
    switch (c->kind) {
    case PAIRS_ALLREDUCE:
        return allreduce_run(comm, in, res, k, c->dt, c->op, c->alg, false, NULL);
    case PAIRS_REDUCE:
        return reduce_run(comm, in, comm->rank == c->root ? res : NULL, k, c->dt, c->op, c->root);
    case PAIRS_SCAN:
    case PAIRS_EXSCAN:
        return scan_run(comm, in, res, k, c->dt, c->op, PAIRS_EXSCAN == c->kind, c->scan_alg,
                        c->scan_round_bytes);
    }
    return CGPU_ERR_INVALID_ARG;
}

/* whether reduce_run or scan_run gives call @p c to the kernels' oneshot, with its buffers
 * (this rank's: the input, and the output where it gets one) usable as they are */
static bool pairs_small(cgpu_comm_t *comm, const pairs_call_t *c)
{
    const bool scan = PAIRS_SCAN == c->kind || PAIRS_EXSCAN == c->kind;
    return comm->size > 1 && kernels_take(comm, c->dt, c->op, false) &&
           (!scan || CGPU_SCAN_AUTO == c->scan_alg) &&
           cgpu_cuda_small_in_place(comm, scan ? CGPU_CUDA_SMALL_SCAN : CGPU_CUDA_SMALL_CHAIN,
                                    c->in, c->n > 0 ? c->out : NULL,
                                    c->total * cgpu_dtype_size(c->dt), c->dt);
}

static cgpu_status_t pairs_run(cgpu_comm_t *comm, const pairs_call_t *c)
{
    if (NULL == c->in || (c->n > 0 && NULL == c->out)) {
        return CGPU_ERR_INVALID_ARG; /* the rounds' own entry checks the rest */
    }
    const size_t es = cgpu_dtype_size(c->dt);
    size_t off[2], len[2];
    const int runs = cgpu_dtype_runs(c->dt, off, len);
    const size_t per = CGPU_PAIRS_ROUND_BYTES / es > 0 ? CGPU_PAIRS_ROUND_BYTES / es : 1;
    const size_t round = c->total < per ? c->total : per;
    /* an allreduce of one round on the kernels, device buffers: the copies ride the
     * collective's stream, one wait for the call instead of three (either way one round
     * of one allreduce, so ranks that differ here still meet) */
    if (PAIRS_ALLREDUCE == c->kind && c->total <= per && kernels_take(comm, c->dt, c->op, false) &&
        scratch_on_device(comm, c->in) && (0 == c->n || scratch_on_device(comm, c->out))) {
        const cgpu_pairs_out_t po = {.out = c->out, .first = c->first, .n = c->n};
        return allreduce_run(comm, c->in, c->out, c->total, c->dt, c->op, c->alg, false, &po);
    }
    /* a reduce or scan our kernels run as one oneshot call, on buffers of this device
     * aligned for the type: on the caller's buffers (the oneshot's result stores skip the
     * gaps). Either way one call of the same count, so ranks that differ here still meet. */
    if (PAIRS_ALLREDUCE != c->kind && c->total <= per && pairs_small(comm, c)) {
        return PAIRS_REDUCE == c->kind
                   ? reduce_run(comm, c->in, c->n > 0 ? c->out : NULL, c->total, c->dt, c->op,
                                c->root)
                   : scan_run(comm, c->in, c->out, c->total, c->dt, c->op, PAIRS_EXSCAN == c->kind,
                              c->scan_alg, c->scan_round_bytes);
    }
    char *buf = NULL;
    cgpu_status_t st =
        scratch_get(&comm->pairs, scratch_on_device(comm, c->n > 0 ? (const void *) c->out : c->in),
                    2 * round * es, "padded pairs", (void **) &buf);
    for (size_t o = 0; CGPU_OK == st && o < c->total; o += round) {
        const size_t k = c->total - o < round ? c->total - o : round;
        char *in = buf, *res = buf + round * es;
        st = cgpu_engine_copy(in, c->in + o * es, cgpu_dtype_span(c->dt, k));
        if (CGPU_OK == st) {
            st = pairs_round(comm, c, in, res, k);
        }
        /* what of this round is this rank's: [lo, hi) of the total */
        const size_t lo = o > c->first ? o : c->first;
        const size_t hi = o + k < c->first + c->n ? o + k : c->first + c->n;
        if (CGPU_OK == st && lo < hi) {
            cgpu_copy_t cp[2];
            for (int r = 0; r < runs; ++r) {
                cp[r] = (cgpu_copy_t){.dst = c->out + (lo - c->first) * es + off[r],
                                      .src = res + (lo - o) * es + off[r],
                                      .bytes = len[r],
                                      .rows = hi - lo,
                                      .pitch = es};
            }
            st = cgpu_engine_copy_many(cp, runs);
        }
    }
    return st;
}

/* whether a reduction of @p total elements goes through pairs_run */
static bool pairs_take(const cgpu_comm_t *comm, size_t total, cgpu_dtype_t dt, cgpu_op_t op)
{
    return NULL != comm && total > 0 && dtype_padded(dt) && cgpu_reduce_supported(dt, op);
}

cgpu_status_t cgpu_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg)
{
    if (pairs_take(comm, count, dt, op)) {
        const pairs_call_t c = {.kind = PAIRS_ALLREDUCE,
                                .in = sbuf,
                                .total = count,
                                .out = rbuf,
                                .n = count,
                                .dt = dt,
                                .op = op,
                                .alg = alg};
        return pairs_run(comm, &c);
    }
    return allreduce_run(comm, sbuf, rbuf, count, dt, op, alg, false, NULL);
}

cgpu_status_t cgpu_allreduce_host(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op)
{
    return allreduce_run(comm, sbuf, rbuf, count, dt, op, CGPU_ALLREDUCE_AUTO, true, NULL);
}

cgpu_status_t cgpu_alltoall(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes,
                            cgpu_alltoall_alg_t alg)
{
    if (NULL == comm || (bytes > 0 && (NULL == sbuf || NULL == rbuf)) ||
        CGPU_ALLTOALL_FALLBACK == alg) {
        return CGPU_ERR_INVALID_ARG;
    }
    cgpu_sig_t sig = bytes_sig(CGPU_CALL_ALLTOALL, bytes, -1);
    sig.host = host_bufs(comm, sbuf, rbuf, false);
    cgpu_status_t st = cgpu_comm_enter(comm, "alltoall", CGPU_KIND_ALLTOALL, &sig);
    if (CGPU_OK != st) {
        return st;
    }
    if (bytes > 0) {
        st = cgpu_call_path(comm)->alltoall(comm, sbuf, rbuf, bytes);
        if (CGPU_DECLINED == st) {
            st = cgpu_path_host.alltoall(comm, sbuf, rbuf, bytes);
        }
    }
    cgpu_comm_leave(comm, st, bytes * (size_t) comm->size);
    return st;
}

/* A broadcast of which this rank also keeps part_bytes from part_off in @p part (a scatter's
 * own block; NULL: none). On the cuda backend a device part is copied on the kernel's stream,
 * with no wait of its own. */
static cgpu_status_t bcast_keeping(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                                   size_t part_off, size_t part_bytes)
{
    if (NULL == comm || (bytes > 0 && NULL == buf) || root < 0 || root >= comm->size ||
        (NULL != part && part_off + part_bytes > bytes)) {
        return CGPU_ERR_INVALID_ARG;
    }
    cgpu_sig_t sig = bytes_sig(CGPU_CALL_BCAST, bytes, root);
    sig.host = host_bufs(comm, buf, 0 != part_bytes ? part : NULL, false);
    cgpu_status_t st = cgpu_comm_enter(comm, "bcast", CGPU_KIND_BCAST, &sig);
    if (CGPU_OK != st) {
        return st;
    }
    if (0 == part_bytes) {
        part = NULL;
    }
    bool kept = NULL == part;
    if (bytes > 0 && comm->size > 1) {
        bool path_kept = false;
        st = cgpu_call_path(comm)->bcast(comm, buf, bytes, root, part, part_off, part_bytes,
                                         &path_kept);
        if (CGPU_DECLINED == st) {
            st = cgpu_path_host.bcast(comm, buf, bytes, root, part, part_off, part_bytes,
                                      &path_kept);
        }
        kept = kept || path_kept;
    }
    cgpu_comm_leave(comm, st, bytes);
    if (CGPU_OK == st && !kept) {
        st = cgpu_engine_copy(part, (const char *) buf + part_off, part_bytes);
    }
    return st;
}

cgpu_status_t cgpu_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root)
{
    return bcast_keeping(comm, buf, bytes, root, NULL, 0, 0);
}

cgpu_status_t cgpu_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    if (NULL == comm || (bytes > 0 && NULL == rbuf)) {
        return CGPU_ERR_INVALID_ARG;
    }
    cgpu_sig_t sig = bytes_sig(CGPU_CALL_ALLGATHER, bytes, -1);
    sig.host = host_bufs(comm, sbuf, rbuf, false);
    cgpu_status_t st = cgpu_comm_enter(comm, "allgather", CGPU_KIND_ALLGATHER, &sig);
    if (CGPU_OK != st) {
        return st;
    }
    if (bytes > 0) {
        st = cgpu_call_path(comm)->allgather(comm, sbuf, rbuf, bytes);
        if (CGPU_DECLINED == st) {
            st = cgpu_path_host.allgather(comm, sbuf, rbuf, bytes);
        }
    }
    cgpu_comm_leave(comm, st, bytes);
    return st;
}

cgpu_status_t cgpu_reduce_scatter_block(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                        size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    if (pairs_take(comm, count, dt, op)) {
        const pairs_call_t c = {.kind = PAIRS_ALLREDUCE,
                                .in = NULL != sbuf ? sbuf : rbuf,
                                .total = count * (size_t) comm->size,
                                .out = rbuf,
                                .first = count * (size_t) comm->rank,
                                .n = count,
                                .dt = dt,
                                .op = op,
                                .alg = CGPU_ALLREDUCE_AUTO};
        return pairs_run(comm, &c);
    }
    if (NULL == comm || (count > 0 && NULL == rbuf) || !cgpu_reduce_supported(dt, op)) {
        return CGPU_ERR_INVALID_ARG;
    }
    const size_t es = cgpu_dtype_size(dt), total = count * es * (size_t) comm->size;
    cgpu_sig_t sig = reduction_sig(CGPU_CALL_REDUCE_SCATTER, count * es, dt, op, -1);
    sig.host = host_bufs(comm, sbuf, rbuf, false);
    cgpu_status_t st =
        cgpu_comm_enter(comm, "reduce_scatter_block", CGPU_KIND_REDUCE_SCATTER, &sig);
    if (CGPU_OK != st || 0 == count) {
        if (CGPU_OK == st) {
            cgpu_comm_leave(comm, st, 0);
        }
        return st;
    }
    st = cgpu_call_path(comm)->reduce_scatter_block(comm, sbuf, rbuf, count, dt, op);
    if (CGPU_DECLINED == st) {
        st = cgpu_path_host.reduce_scatter_block(comm, sbuf, rbuf, count, dt, op);
    }
    cgpu_comm_leave(comm, st, total);
    return st;
}

/* Memory of at least @p bytes that stays zero, on the device when @p device (a failed device
 * allocation falls back on host memory, which the collectives stage); kept with the
 * communicator, grown to the largest call. */
static cgpu_status_t comm_zeros(cgpu_comm_t *comm, bool device, size_t bytes, const void **out)
{
    if (device && CGPU_OK == cgpu_cuda_comm_zeros(comm, bytes, out)) {
        return CGPU_OK;
    }
    if (comm->zeros_bytes < bytes) {
        free(comm->zeros);
        comm->zeros_bytes = 0;
        comm->zeros = calloc(1, bytes);
        if (NULL == comm->zeros) {
            cgpu_log(CGPU_LOG_WARN, "scatter: no memory for %zu bytes of zeros", bytes);
            return CGPU_ERR_NO_MEMORY;
        }
        comm->zeros_bytes = bytes;
    }
    *out = comm->zeros;
    return CGPU_OK;
}

/* A scatter of @p bytes per rank as a reduce-scatter: the root's whole message @p all (size
 * x bytes, significant at the root only) summed, as bytes, with zeros from every other rank,
 * so that each rank's block lands in @p out (bytes) with no copy after it: adding zeros
 * leaves every byte as the root sent it. */
cgpu_scatter_alg_t cgpu_scatter_choose(cgpu_scatter_alg_t alg, size_t maxb)
{
    if (CGPU_SCATTER_AUTO != alg) {
        return alg;
    }
    return maxb <= CGPU_SCATTER_RS_AUTO_MAX ? CGPU_SCATTER_RS : CGPU_SCATTER_BCAST;
}

static cgpu_status_t scatter_by_rs(cgpu_comm_t *comm, const void *all, void *out, size_t bytes,
                                   int root)
{
    const void *in = all;
    cgpu_status_t st = CGPU_OK;
    if (comm->rank != root && bytes > 0) {
        st = comm_zeros(comm, scratch_on_device(comm, out), bytes * (size_t) comm->size, &in);
    }
    return CGPU_OK != st
               ? st
               : cgpu_reduce_scatter_block(comm, in, out, bytes, CGPU_DT_UINT8, CGPU_OP_SUM);
}

cgpu_status_t cgpu_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                  const size_t *counts, cgpu_dtype_t dt, cgpu_op_t op)
{
    if (NULL == comm || NULL == counts || !cgpu_reduce_supported(dt, op)) {
        return CGPU_ERR_INVALID_ARG;
    }
    size_t total = 0, before = 0;
    bool equal = true;
    int owner = -1, owners = 0; /* the ranks that receive something, and the last of them */
    for (int p = 0; p < comm->size; ++p) {
        total += counts[p];
        before += p < comm->rank ? counts[p] : 0;
        equal = equal && counts[p] == counts[0];
        owner = counts[p] > 0 ? p : owner;
        owners += counts[p] > 0;
    }
    const size_t mine = counts[comm->rank], es = cgpu_dtype_size(dt);
    if (pairs_take(comm, total, dt, op)) {
        const pairs_call_t c = {.kind = PAIRS_ALLREDUCE,
                                .in = NULL != sbuf ? sbuf : rbuf,
                                .total = total,
                                .out = rbuf,
                                .first = before,
                                .n = mine,
                                .dt = dt,
                                .op = op,
                                .alg = CGPU_ALLREDUCE_AUTO};
        return pairs_run(comm, &c);
    }
    if (equal) {
        return cgpu_reduce_scatter_block(comm, sbuf, rbuf, mine, dt, op);
    }
    if ((mine > 0 && NULL == rbuf) || (NULL == sbuf && NULL == rbuf)) {
        return CGPU_ERR_INVALID_ARG;
    }
    /* one rank receives the whole result (fewer elements than ranks, one each, can give
     * that: OSU's 1-element call on 2 ranks): a reduce to it, straight into its buffer
     * (its block starts the vector, so in place the result lands where MPI wants it),
     * instead of an allreduce into our memory and a copy. Every rank sees the counts. */
    if (1 == owners) {
        return cgpu_reduce(comm,
                           comm->rank == owner ? sbuf
                           : NULL != sbuf      ? sbuf
                                               : rbuf,
                           comm->rank == owner ? rbuf : NULL, total, dt, op, owner);
    }
    /* the result where this rank's block goes: device memory for a device rbuf (or, with
     * mine == 0, a device input) on the cuda backend */
    const void *in = NULL != sbuf ? sbuf : rbuf;
    void *res = NULL;
    cgpu_status_t st = comm_scratch(comm, scratch_on_device(comm, mine > 0 ? rbuf : in), total * es,
                                    "reduce_scatter", &res);
    if (CGPU_OK != st) {
        return st;
    }
    st = cgpu_allreduce(comm, in, res, total, dt, op, CGPU_ALLREDUCE_AUTO);
    if (CGPU_OK == st && mine > 0) {
        st = cgpu_engine_copy(rbuf, (char *) res + before * es, mine * es);
    }
    return st;
}

/* whether layout @p b is already padded to maxb: every block maxb bytes at p x maxb */
static bool blocks_padded(const cgpu_blocks_t *b, int n, size_t maxb)
{
    bool padded = true;
    for (int p = 0; p < n && padded; ++p) {
        padded = b->bytes[p] == maxb && b->offs[p] == (ptrdiff_t) ((size_t) p * maxb);
    }
    return padded;
}

/* copies every block of layout @p b but block @p skip into its place in @p pad (pack), or
 * back out of it, with one wait */
static cgpu_status_t blocks_copy(const cgpu_blocks_t *b, char *pad, size_t maxb, int n, int skip,
                                 bool pack)
{
    cgpu_copy_t *c = malloc(sizeof(*c) * (size_t) n);
    if (NULL == c) {
        return CGPU_ERR_NO_MEMORY;
    }
    int k = 0;
    for (int p = 0; p < n; ++p) {
        if (p == skip || 0 == b->bytes[p]) {
            continue;
        }
        char *user = b->base + b->offs[p], *slot = pad + (size_t) p * maxb;
        c[k++] = (cgpu_copy_t){
            .dst = pack ? slot : user, .src = pack ? user : slot, .bytes = b->bytes[p]};
    }
    cgpu_status_t st = cgpu_engine_copy_many(c, k);
    free(c);
    return st;
}

/* An allgather of blocks padded to maxb into @p pad (size x maxb): this rank's block
 * (own_bytes at @p own) is read in place when it is whole, else first copied into its slot;
 * then the blocks are copied out to @p out (NULL: none), all but block @p skip. */
static cgpu_status_t padded_allgather(cgpu_comm_t *comm, const void *own, size_t own_bytes,
                                      char *pad, size_t maxb, const cgpu_blocks_t *out, int skip)
{
    char *slot = pad + (size_t) comm->rank * maxb;
    const void *src = NULL; /* in place at slot */
    cgpu_status_t st = CGPU_OK;
    if (own != slot && own_bytes == maxb) {
        src = own;
    } else if (own != slot) {
        st = cgpu_engine_copy(slot, own, own_bytes);
    }
    if (CGPU_OK == st) {
        st = cgpu_allgather(comm, src, pad, maxb);
    }
    if (CGPU_OK == st && NULL != out) {
        st = blocks_copy(out, pad, maxb, comm->size, skip, false);
    }
    return st;
}

cgpu_status_t cgpu_allgatherv(cgpu_comm_t *comm, const void *sbuf, void *rbuf, const size_t *bytes,
                              const ptrdiff_t *offs)
{
    if (NULL == comm || NULL == bytes || NULL == offs) {
        return CGPU_ERR_INVALID_ARG;
    }
    const int n = comm->size, me = comm->rank;
    size_t maxb = 0;
    for (int p = 0; p < n; ++p) {
        maxb = bytes[p] > maxb ? bytes[p] : maxb;
    }
    if ((maxb > 0 && NULL == rbuf) || (bytes[me] > 0 && NULL == sbuf && NULL == rbuf)) {
        return CGPU_ERR_INVALID_ARG;
    }
    const cgpu_blocks_t r = {.base = rbuf, .bytes = bytes, .offs = offs};
    if (0 == maxb || blocks_padded(&r, n, maxb)) { /* the allgather itself */
        return cgpu_allgather(comm, sbuf, rbuf, maxb);
    }
    char *pad = NULL;
    cgpu_status_t st = comm_scratch(comm, scratch_on_device(comm, rbuf), maxb * (size_t) n,
                                    "allgatherv", (void **) &pad);
    const void *own = NULL != sbuf ? sbuf : (const char *) rbuf + offs[me];
    return CGPU_OK != st
               ? st
               : padded_allgather(comm, own, bytes[me], pad, maxb, &r, NULL != sbuf ? -1 : me);
}

cgpu_status_t cgpu_gatherv(cgpu_comm_t *comm, const void *sbuf, size_t sbytes,
                           const cgpu_blocks_t *r, size_t maxb, int root)
{
    if (NULL == comm || root < 0 || root >= comm->size) {
        return CGPU_ERR_INVALID_ARG;
    }
    const int n = comm->size, me = comm->rank;
    const bool is_root = me == root;
    if (is_root &&
        (NULL == r || NULL == r->bytes || NULL == r->offs || (maxb > 0 && NULL == r->base))) {
        return CGPU_ERR_INVALID_ARG;
    }
    const void *own = NULL != sbuf || !is_root ? sbuf : r->base + r->offs[me];
    const size_t own_bytes = NULL != sbuf || !is_root ? sbytes : r->bytes[me];
    if (own_bytes > maxb || (own_bytes > 0 && NULL == own)) {
        return CGPU_ERR_INVALID_ARG;
    }
    if (0 == maxb) {
        return cgpu_allgather(comm, NULL, NULL, 0);
    }
    char *pad = NULL;
    cgpu_status_t st = CGPU_OK;
    const bool direct = is_root && blocks_padded(r, n, maxb); /* straight into the root's */
    if (direct) {
        pad = r->base;
    } else {
        st = comm_scratch(comm, scratch_on_device(comm, is_root ? r->base : own), maxb * (size_t) n,
                          "gatherv", (void **) &pad);
    }
    if (CGPU_OK != st) {
        return st;
    }
    return padded_allgather(comm, own, own_bytes, pad, maxb, is_root && !direct ? r : NULL,
                            NULL == sbuf ? me : -1);
}

cgpu_status_t cgpu_scatterv(cgpu_comm_t *comm, const cgpu_blocks_t *s, void *rbuf, size_t rbytes,
                            size_t maxb, int root, cgpu_scatter_alg_t alg)
{
    if (NULL == comm || root < 0 || root >= comm->size) {
        return CGPU_ERR_INVALID_ARG;
    }
    const int n = comm->size, me = comm->rank;
    const bool is_root = me == root;
    if ((is_root &&
         (NULL == s || NULL == s->bytes || NULL == s->offs || (maxb > 0 && NULL == s->base))) ||
        rbytes > maxb || (rbytes > 0 && NULL == rbuf && !is_root)) {
        return CGPU_ERR_INVALID_ARG;
    }
    const bool padded = is_root && blocks_padded(s, n, maxb);
    char *all = padded ? s->base : NULL; /* only read */
    cgpu_status_t st = CGPU_OK;
    if (CGPU_SCATTER_RS == cgpu_scatter_choose(alg, maxb) && maxb > 0) {
        /* memory of ours: the root's padded message (unless its layout is padded already),
         * and this rank's block when rbuf cannot take maxb bytes (an in-place root's goes
         * nowhere), in one piece so that one allocation serves both */
        const bool direct = NULL != rbuf && rbytes == maxb;
        const size_t whole = is_root && !padded ? maxb * (size_t) n : 0;
        char *mem = NULL;
        if (whole + (direct ? 0 : maxb) > 0) {
            st = comm_scratch(comm, scratch_on_device(comm, is_root ? s->base : rbuf),
                              whole + (direct ? 0 : maxb), "scatterv", (void **) &mem);
        }
        all = is_root && !padded ? mem : all;
        char *out = direct ? rbuf : NULL != mem ? mem + whole : NULL;
        if (CGPU_OK == st && is_root && !padded) {
            st = blocks_copy(s, all, maxb, n, NULL == rbuf ? me : -1, true);
        }
        if (CGPU_OK == st) {
            st = scatter_by_rs(comm, all, out, maxb, root);
        }
        if (CGPU_OK == st && !direct && NULL != rbuf && rbytes > 0) {
            st = cgpu_engine_copy(rbuf, out, rbytes);
        }
        return st;
    }
    if (padded) {
        /* the root's layout is the padded message */
    } else if (maxb > 0) {
        st = comm_scratch(comm, scratch_on_device(comm, is_root ? s->base : rbuf),
                          maxb * (size_t) n, "scatterv", (void **) &all);
        if (CGPU_OK == st && is_root) {
            st = blocks_copy(s, all, maxb, n, NULL == rbuf ? me : -1, true);
        }
    }
    return CGPU_OK != st ? st
                         : bcast_keeping(comm, all, maxb * (size_t) n, root, rbuf,
                                         (size_t) me * maxb, rbytes);
}

cgpu_status_t cgpu_alltoallv(cgpu_comm_t *comm, const cgpu_blocks_t *s, const cgpu_blocks_t *r,
                             size_t maxb, cgpu_alltoall_alg_t alg)
{
    if (NULL == comm || NULL == r || NULL == r->bytes || NULL == r->offs ||
        (NULL != s && (NULL == s->bytes || NULL == s->offs))) {
        return CGPU_ERR_INVALID_ARG;
    }
    const int n = comm->size;
    const size_t whole = maxb * (size_t) n;
    if (0 == maxb) {
        return cgpu_alltoall(comm, NULL, NULL, 0, alg);
    }
    /* in place: the blocks leave from the receive layout, so they are always copied out */
    const bool s_direct = NULL != s && blocks_padded(s, n, maxb),
               r_direct = blocks_padded(r, n, maxb);
    const cgpu_blocks_t *from = NULL != s ? s : r;
    char *scratch = NULL;
    cgpu_status_t st = CGPU_OK;
    if (!s_direct || !r_direct) {
        st =
            comm_scratch(comm, scratch_on_device(comm, r->base),
                         whole * (size_t) (!s_direct + !r_direct), "alltoallv", (void **) &scratch);
    }
    char *spad = s_direct ? s->base : scratch;
    char *rpad = r_direct ? r->base : scratch + (s_direct ? 0 : whole);
    if (CGPU_OK == st && !s_direct) {
        st = blocks_copy(from, spad, maxb, n, -1, true);
    }
    if (CGPU_OK == st) {
        st = cgpu_alltoall(comm, spad, rpad, maxb, alg);
    }
    if (CGPU_OK == st && !r_direct) {
        st = blocks_copy(r, rpad, maxb, n, -1, false);
    }
    return st;
}

cgpu_status_t cgpu_gather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes, int root)
{
    if (NULL == comm || root < 0 || root >= comm->size ||
        (bytes > 0 && comm->rank == root && NULL == rbuf) ||
        (bytes > 0 && comm->rank != root && NULL == sbuf)) {
        return CGPU_ERR_INVALID_ARG;
    }
    void *all = rbuf;
    if (comm->rank != root && bytes > 0) { /* the whole message lands here too */
        cgpu_status_t st = comm_scratch(comm, scratch_on_device(comm, sbuf),
                                        bytes * (size_t) comm->size, "gather", &all);
        if (CGPU_OK != st) {
            return st;
        }
    }
    return cgpu_allgather(comm, sbuf, all, bytes);
}

cgpu_status_t cgpu_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes, int root,
                           cgpu_scatter_alg_t alg)
{
    if (NULL == comm || root < 0 || root >= comm->size ||
        (bytes > 0 && comm->rank == root && NULL == sbuf) ||
        (bytes > 0 && comm->rank != root && NULL == rbuf)) {
        return CGPU_ERR_INVALID_ARG;
    }
    const bool is_root = comm->rank == root;
    if (CGPU_SCATTER_RS == cgpu_scatter_choose(alg, bytes)) {
        void *out = rbuf; /* an in-place root's block goes to scratch, unread */
        cgpu_status_t st = CGPU_OK;
        if (NULL == out && bytes > 0) {
            st = comm_scratch(comm, scratch_on_device(comm, sbuf), bytes, "scatter", &out);
        }
        return CGPU_OK != st ? st : scatter_by_rs(comm, is_root ? sbuf : NULL, out, bytes, root);
    }
    void *all = (void *) sbuf; /* the root's is only read */
    cgpu_status_t st = CGPU_OK;
    if (!is_root && bytes > 0) {
        st = comm_scratch(comm, scratch_on_device(comm, rbuf), bytes * (size_t) comm->size,
                          "scatter", &all);
    }
    return CGPU_OK != st ? st
                         : bcast_keeping(comm, all, bytes * (size_t) comm->size, root, rbuf,
                                         (size_t) comm->rank * bytes, bytes);
}

static cgpu_status_t scan_run(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                              cgpu_dtype_t dt, cgpu_op_t op, bool exclusive, cgpu_scan_alg_t alg,
                              size_t round_bytes)
{
    const size_t es = cgpu_dtype_size(dt);
    /* an exscan's rank 0 receives nothing: its rbuf may be NULL (not in place) */
    if (NULL == comm || !cgpu_reduce_supported(dt, op) || round_bytes < es ||
        (count > 0 && NULL == rbuf && (NULL == sbuf || !(exclusive && 0 == comm->rank)))) {
        return CGPU_ERR_INVALID_ARG;
    }
    if (0 == count) {
        return CGPU_OK;
    }
    const int n = comm->size, k = exclusive ? comm->rank : comm->rank + 1;
    if (CGPU_SCAN_AUTO == alg && n > 1 && kernels_take(comm, dt, op, false)) {
        /* our kernels, oneshot or the chain; health counted as an allreduce's */
        const cgpu_sig_t sig =
            reduction_sig(exclusive ? CGPU_CALL_EXSCAN : CGPU_CALL_SCAN, count * es, dt, op, -1);
        cgpu_status_t st =
            cgpu_comm_enter(comm, exclusive ? "exscan" : "scan", CGPU_KIND_ALLREDUCE, &sig);
        if (CGPU_OK == st) {
            st = cgpu_path_of(comm)->scan(comm, sbuf, rbuf, count, dt, op, exclusive);
            cgpu_comm_leave(comm, st, count * es);
        }
        return st;
    }
    /* across nodes, on the host backend, or forced: every input gathered into host scratch,
     * and this rank's fold of the first k there (into block 0, then copied to rbuf, any
     * memory) */
    const size_t per = round_bytes / es, chunk = count < per ? count : per;
    char *all = NULL;
    cgpu_status_t st = comm_scratch(comm, false, chunk * es * (size_t) n,
                                    exclusive ? "exscan" : "scan", (void **) &all);
    const char *src = NULL != sbuf ? sbuf : rbuf;
    for (size_t off = 0; CGPU_OK == st && off < count; off += chunk) {
        const size_t c = count - off < chunk ? count - off : chunk, bytes = c * es;
        st = cgpu_allgather(comm, src + off * es, all, bytes);
        for (int r = 1; CGPU_OK == st && r < k; ++r) {
            (void) cgpu_reduce_host(dt, op, all, all, all + (size_t) r * bytes, c);
        }
        if (CGPU_OK == st && k > 0) {
            st = cgpu_engine_copy((char *) rbuf + off * es, all, bytes);
        }
    }
    return st;
}

static cgpu_status_t reduce_run(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    if (NULL == comm || root < 0 || root >= comm->size || !cgpu_reduce_supported(dt, op) ||
        (count > 0 &&
         ((comm->rank == root && NULL == rbuf) || (NULL == sbuf && comm->rank != root)))) {
        return CGPU_ERR_INVALID_ARG;
    }
    const size_t bytes = count * cgpu_dtype_size(dt);
    cgpu_sig_t sig = reduction_sig(CGPU_CALL_REDUCE, bytes, dt, op, root);
    sig.host = host_bufs(comm, comm->rank == root && NULL == sbuf ? rbuf : sbuf,
                         comm->rank == root ? rbuf : NULL, false);
    cgpu_status_t st = cgpu_comm_enter(comm, "reduce", CGPU_KIND_REDUCE, &sig);
    if (CGPU_OK != st || 0 == count) {
        if (CGPU_OK == st) {
            cgpu_comm_leave(comm, st, 0);
        }
        return st;
    }
    st = cgpu_call_path(comm)->reduce(comm, sbuf, rbuf, count, dt, op, root);
    if (CGPU_DECLINED == st) {
        st = cgpu_path_host.reduce(comm, sbuf, rbuf, count, dt, op, root);
    }
    cgpu_comm_leave(comm, st, bytes);
    return st;
}

cgpu_status_t cgpu_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                        cgpu_dtype_t dt, cgpu_op_t op, bool exclusive, cgpu_scan_alg_t alg,
                        size_t round_bytes)
{
    if (pairs_take(comm, count, dt, op)) {
        /* exscan: rank 0 receives nothing */
        const bool none = exclusive && 0 == comm->rank;
        const pairs_call_t c = {.kind = exclusive ? PAIRS_EXSCAN : PAIRS_SCAN,
                                .in = NULL != sbuf ? sbuf : rbuf,
                                .total = count,
                                .out = rbuf,
                                .n = none ? 0 : count,
                                .dt = dt,
                                .op = op,
                                .scan_alg = alg,
                                .scan_round_bytes = round_bytes};
        return pairs_run(comm, &c);
    }
    return scan_run(comm, sbuf, rbuf, count, dt, op, exclusive, alg, round_bytes);
}

cgpu_status_t cgpu_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                          cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    if (pairs_take(comm, count, dt, op)) {
        const bool is_root = comm->rank == root;
        const pairs_call_t c = {.kind = PAIRS_REDUCE,
                                .in = NULL != sbuf ? sbuf : rbuf,
                                .total = count,
                                .out = is_root ? rbuf : NULL,
                                .n = is_root ? count : 0,
                                .dt = dt,
                                .op = op,
                                .root = root};
        return pairs_run(comm, &c);
    }
    return reduce_run(comm, sbuf, rbuf, count, dt, op, root);
}
