/*
 * coll/gpu engine: the allreduce in the ranks' stage areas, for device buffers staged through
 * host memory (ranks that share a GPU without MPS, where every kernel and device-to-device
 * copy waits for the other processes' time slices, but the copy engines do not).
 *
 * The host ring would copy a device input to private host memory, pass it around in slot
 * steps (two copies and a reduction a step) and copy the result back. Here the copy engine
 * writes each rank's input range straight into its own stage (shared memory, pinned for the
 * GPU: cgpu_shm_pin), each rank reduces its 1/n part of the range from every rank's stage in
 * rank order, into its own stage, and the copy engine takes every part of the result from
 * the stage that holds it straight into the output. So every element is reduced once, by one
 * rank, and every rank gets the same bits.
 *
 * The message goes in rounds of a third of a stage each (such communicators have larger
 * stages, coll_gpu_shared_stage_bytes, since each round costs some 25 us of CUDA calls that
 * queue and wait for its copies), the thirds taken in turn by round number, so that while
 * the host reduces a round, the next round's input is on its way up and the last round's
 * result on its way down (two copy streams, one per direction).
 *
 * The counters (cgpu_seg_ctrl_t), with the alltoall's round numbers (a2a_round), so that the
 * two share the stage: a2a_posted, the owner's input of a round is in its stage; ar_reduced,
 * the owner's part of that round is reduced there; a2a_readers, one from each peer once it
 * has copied out all it reads of the owner's stage in a round. A round's input goes into its
 * third once every peer is done with the round that used it last (a call's first round waits
 * for every round before: an alltoall's round fills the whole stage).
 *
 * A copy that fails on this rank leaves zeros in its place, so that no peer waits; the rank
 * returns the error.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_SHM
#include <string.h>

#include "cgpu_blocks.h"
#include "cgpu_conn.h"
#include "cgpu_reduce.h"
#include "cgpu_stager.h"

typedef struct direct {
    cgpu_comm_t *comm;
    const char *in;
    char *out;
    size_t esize;
    size_t per; /* elements a round holds: a third of a stage */
    cgpu_dtype_t dt;
    cgpu_op_t op;
    bool in_dev, out_dev;
    /* the copy streams from the input and to the output (device memory; NULL: copies at
     * once, or no stager could be had) */
    cgpu_stager_t *up, *down;
    cgpu_status_t st; /* the first failure on this rank */
} direct_t;

enum { DIRECT_BUFS = 3 };

/* where round @p round lives in rank @p p's stage */
static char *buf_of(direct_t *d, int p, uint64_t round)
{
    return cgpu_stage_area(d->comm, p) + (size_t) (round % DIRECT_BUFS) * d->per * d->esize;
}

static int slot_of(uint64_t round)
{
    return (int) (round % DIRECT_BUFS);
}

/* Part @p p of a round of @p len elements: [*first, *first + *cnt). */
static void part_of(size_t len, int n, int p, size_t *first, size_t *cnt)
{
    const size_t per = cgpu_div_up(len, (size_t) n);
    size_t a = (size_t) p * per, b = a + per;
    a = a < len ? a : len;
    b = b < len ? b : len;
    *first = a;
    *cnt = b - a;
}

static void note(direct_t *d, cgpu_status_t st)
{
    if (CGPU_OK == d->st && CGPU_OK != st) {
        d->st = st;
    }
}

/* A copy between the caller's buffer and a stage: on @p s (queued), else at once. */
static cgpu_status_t copy(cgpu_stager_t *s, bool dev, void *dst, const void *src, size_t bytes)
{
    if (NULL != s) {
        return cgpu_stager_copy(s, dst, src, bytes);
    }
    if (dev) {
        return cgpu_engine_copy(dst, src, bytes);
    }
    memcpy(dst, src, bytes);
    return CGPU_OK;
}

/* Queue round @p round's input ([off, off + len) of the input) into this rank's stage. */
static void input_up(direct_t *d, uint64_t round, size_t off, size_t len)
{
    char *dst = buf_of(d, d->comm->rank, round);
    cgpu_status_t st = copy(d->up, d->in_dev, dst, d->in + off * d->esize, len * d->esize);
    if (CGPU_OK == st && NULL != d->up) {
        st = cgpu_stager_mark(d->up, slot_of(round));
    }
    if (CGPU_OK != st) {
        note(d, st);
        memset(dst, 0, len * d->esize);
    }
}

/* Wait until round @p round's input is in this rank's stage. */
static void input_wait(direct_t *d, uint64_t round, size_t len)
{
    if (NULL != d->up) {
        cgpu_prof_ev_t ev;
        cgpu_step_prof_begin(d->comm, &ev, "copy_in", -1, 0, len * d->esize);
        cgpu_status_t st = cgpu_stager_wait(d->up, slot_of(round));
        cgpu_prof_stop(&ev);
        if (CGPU_OK != st) {
            note(d, st);
            memset(buf_of(d, d->comm->rank, round), 0, len * d->esize);
        }
    }
}

/* This rank's part of a round: every rank's input reduced in rank order, into its stage.
 * Rank 0's and 1's own input is the first or second operand, which the result may replace;
 * another rank's would be lost before its turn, so it reduces piece by piece through a
 * buffer that stays in cache. */
static void reduce_part(direct_t *d, uint64_t round, size_t len)
{
    cgpu_comm_t *comm = d->comm;
    size_t first, cnt;
    part_of(len, comm->size, comm->rank, &first, &cnt);
    const size_t at = first * d->esize;
    char *mine = buf_of(d, comm->rank, round) + at;
    _Alignas(64) char tmp[8192];
    const size_t piece = comm->rank < 2 ? cnt : sizeof(tmp) / d->esize;
    for (size_t i = 0; i < cnt; i += piece) {
        const size_t k = cnt - i < piece ? cnt - i : piece, o = at + i * d->esize;
        char *acc = comm->rank < 2 ? mine + i * d->esize : tmp;
        cgpu_reduce_host(d->dt, d->op, acc, buf_of(d, 0, round) + o, buf_of(d, 1, round) + o, k);
        for (int p = 2; p < comm->size; ++p) {
            cgpu_reduce_host(d->dt, d->op, acc, acc, buf_of(d, p, round) + o, k);
        }
        if (acc == tmp) {
            memcpy(mine + i * d->esize, tmp, k * d->esize);
        }
    }
}

/* Round @p round's result is out of every peer's stage: each is told. */
static void done_reading(direct_t *d, uint64_t round)
{
    cgpu_comm_t *comm = d->comm;
    if (NULL != d->down) {
        cgpu_prof_ev_t ev;
        cgpu_step_prof_begin(comm, &ev, "copy_out", -1, 0, 0);
        note(d, cgpu_stager_wait(d->down, slot_of(round)));
        cgpu_prof_stop(&ev);
    }
    for (int k = 1; k < comm->size; ++k) {
        atomic_fetch_add_explicit(&cgpu_ctrl(comm, (comm->rank + k) % comm->size)->a2a_readers.v, 1,
                                  memory_order_acq_rel);
    }
}

/* One round ([off, off + len) of the message; the next one has @p next_len elements, 0 when
 * there is none): false when a wait gave up (the communicator's state is then unusable). */
static bool run_round(direct_t *d, uint64_t round, size_t off, size_t len, size_t next_len,
                      bool first)
{
    cgpu_comm_t *comm = d->comm;
    const int n = comm->size, me = comm->rank;
    cgpu_seg_ctrl_t *mine = cgpu_ctrl(comm, me);
    cgpu_prof_ev_t ev;

    input_wait(d, round, len);
    atomic_store_explicit(&mine->a2a_posted.v, round, memory_order_release);
    if (next_len > 0) {
        /* the next round's third is free once every peer is done with the round that used
         * it last, which it was two rounds ago */
        const uint64_t before = round > 2 ? round - 2 : 0;
        if (!cgpu_wait_ge(comm, &mine->a2a_readers.v, before * (uint64_t) (n - 1), -1)) {
            return false;
        }
        input_up(d, round + 1, off + len, next_len);
    }

    cgpu_step_prof_begin(comm, &ev, "reduce", -1, 0, len * d->esize);
    for (int k = 1; k < n; ++k) {
        const int p = (me + k) % n;
        if (!cgpu_wait_ge(comm, &cgpu_ctrl(comm, p)->a2a_posted.v, round, p)) {
            goto out_abort;
        }
    }
    cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
    reduce_part(d, round, len);
    atomic_store_explicit(&mine->ar_reduced.v, round, memory_order_release);
    cgpu_prof_stop(&ev);

    for (int k = 0; k < n; ++k) {
        const int p = (me + k) % n;
        size_t at, cnt;
        part_of(len, n, p, &at, &cnt);
        cgpu_step_prof_begin(comm, &ev, "recv", p, 0, cnt * d->esize);
        if (p != me && !cgpu_wait_ge(comm, &cgpu_ctrl(comm, p)->ar_reduced.v, round, p)) {
            goto out_abort;
        }
        cgpu_prof_state(&ev, CGPU_PROF_STATE_DATA_V1);
        note(d, copy(d->down, d->out_dev, d->out + (off + at) * d->esize,
                     buf_of(d, p, round) + at * d->esize, cnt * d->esize));
        cgpu_prof_stop(&ev);
    }
    if (NULL != d->down) {
        note(d, cgpu_stager_mark(d->down, slot_of(round)));
    }
    if (!first) {
        /* the last round's copies ran while this one reduced; this one's are queued behind
         * them, so the copy engine does not idle while the host waits */
        done_reading(d, round - 1);
    }
    cgpu_ras_progress(comm);
    return true;

out_abort:
    cgpu_prof_stop(&ev);
    return false;
}

/* Every rank's segment pinned in this process, once per communicator, where a GPU copies
 * into and out of them (else the copies would run from pageable memory, a fraction of the
 * speed: correct, so a failure is only logged). */
static void pin_stages(cgpu_comm_t *comm)
{
    if (comm->stages_pinned) {
        return;
    }
    comm->stages_pinned = true;
    for (int p = 0; p < comm->size; ++p) {
        cgpu_status_t st = cgpu_shm_pin(&comm->peer_segs[p]);
        if (CGPU_OK != st) {
            cgpu_log_once(CGPU_LOG_INFO,
                          "engine: the stage areas could not be pinned for the GPU (%s); the "
                          "staged allreduce copies from pageable memory",
                          cgpu_status_string(st));
            return;
        }
    }
}

cgpu_status_t cgpu_host_direct_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                         size_t count, cgpu_dtype_t dt, cgpu_op_t op, bool in_dev,
                                         bool out_dev)
{
    direct_t d = {.comm = comm,
                  .in = sbuf,
                  .out = rbuf,
                  .esize = cgpu_dtype_size(dt),
                  .dt = dt,
                  .op = op,
                  .in_dev = in_dev,
                  .out_dev = out_dev,
                  .st = CGPU_OK};
    /* a third of the stage, cache-line aligned where that leaves room for an element */
    size_t third = comm->stage_bytes / DIRECT_BUFS;
    third = third >= 64 ? third & ~(size_t) 63 : third;
    d.per = third / d.esize;
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_DIRECT, memory_order_relaxed);
    /* a stager's stream starts after the work queued on the default stream; without one,
     * the copies run at once (cgpu_engine_copy) */
    if (in_dev && CGPU_OK != cgpu_stager_get(64, DIRECT_BUFS, &d.up)) {
        d.up = NULL;
    }
    if (out_dev && CGPU_OK != cgpu_stager_get(64, DIRECT_BUFS, &d.down)) {
        d.down = NULL;
    }
    if (cgpu_cuda_available() && (in_dev || out_dev)) {
        pin_stages(comm);
    }

    /* the rounds even: a last round of a few elements would cost a whole round's waits */
    size_t even = cgpu_div_up(count, cgpu_div_up(count, d.per));
    if (0 == 64 % d.esize) { /* whole cache lines, as the third is */
        even = cgpu_round_up(even, 64 / d.esize);
    }
    d.per = even < d.per ? even : d.per;
    const uint64_t n1 = (uint64_t) (comm->size - 1);
    size_t len = count < d.per ? count : d.per;
    uint64_t round = comm->a2a_round + 1;
    /* the whole stage is free once every peer is done with the last round (an alltoall's
     * fills all of it) */
    bool ok = cgpu_wait_ge(comm, &cgpu_ctrl(comm, comm->rank)->a2a_readers.v, (round - 1) * n1, -1);
    if (ok) {
        input_up(&d, round, 0, len);
    }
    for (size_t off = 0; ok && off < count; off += len) {
        round = ++comm->a2a_round;
        len = count - off < d.per ? count - off : d.per;
        const size_t rest = count - off - len;
        ok = run_round(&d, round, off, len, rest < d.per ? rest : d.per, 0 == off);
    }
    if (ok) {
        done_reading(&d, round);
    }
    if (NULL != d.up) {
        note(&d, cgpu_stager_finish(d.up));
    }
    cgpu_stager_put(&d.up);
    cgpu_stager_put(&d.down);
    return ok ? d.st : cgpu_comm_wait_failed(comm);
}
