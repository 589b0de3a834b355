/*
 * coll/gpu: the fallback, with device buffers staged through host memory.
 *
 * Decision 1: the previous coll module never sees a device pointer. When a buffer lives
 * on a GPU, the span its datatype touches is copied to a host buffer (the receive span
 * too, so gaps of a derived type keep their bytes), the previous module runs on the host
 * copies, and the receive span is copied back.
 */
#include <stdlib.h>

#include "coll_gpu.h"
#include "cgpu_host_pool.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

/* Bytes from the first to the last byte count elements of dtype touch, and the offset
 * of the first from the buffer pointer. */
static size_t span_of(size_t count, struct ompi_datatype_t *dtype, ptrdiff_t *first)
{
    ptrdiff_t lb, extent, tlb, textent;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &tlb, &textent);
    *first = tlb;
    return 0 == count ? 0 : (count - 1) * (size_t) extent + (size_t) textent;
}

__thread int mca_coll_gpu_depth;

bool mca_coll_gpu_on_device(const void *p)
{
    int dev;
    if (NULL == p || MPI_IN_PLACE == p) {
        return false;
    }
    /* testing: coll_gpu_stage_host_buffers sends host buffers through the staging code */
    return mca_coll_gpu_component.stage_host_buffers || CGPU_BUF_HOST != cgpu_buf_kind(p, &dev);
}

const void *mca_coll_gpu_first_byte(const void *buf, size_t count, struct ompi_datatype_t *dtype)
{
    ptrdiff_t lo, hi;
    size_t size = 0;
    if (MPI_IN_PLACE == buf || 0 == count || NULL == dtype) {
        return buf;
    }
    ompi_datatype_type_size(dtype, &size);
    if (0 == size) { /* no byte addressed: its lower bound means nothing */
        return buf;
    }
    mca_coll_gpu_count_span(count, dtype, &lo, &hi);
    return (const char *) buf + lo;
}

bool mca_coll_gpu_on_device_at(const void *buf, size_t count, struct ompi_datatype_t *dtype)
{
    return mca_coll_gpu_on_device(mca_coll_gpu_first_byte(buf, count, dtype));
}

void mca_coll_gpu_mirror_drop(mca_coll_gpu_mirror_t *m)
{
    if (NULL != m->mem) {
        cgpu_host_pool_put(m->mem);
        m->mem = NULL;
    }
}

int mca_coll_gpu_mirror_in(mca_coll_gpu_mirror_t *m, const void *buf, size_t count,
                           struct ompi_datatype_t *dtype, void **host)
{
    m->dev = (void *) buf;
    m->span = span_of(count, dtype, &m->first);
    m->mem = cgpu_host_pool_get(m->span);
    if (NULL == m->mem) {
        return MPI_ERR_NO_MEM;
    }
    if (CGPU_OK != cgpu_engine_copy(m->mem, (const char *) buf + m->first, m->span)) {
        mca_coll_gpu_mirror_drop(m);
        return MPI_ERR_BUFFER;
    }
    *host = m->mem - m->first;
    return MPI_SUCCESS;
}

int mca_coll_gpu_mirror_out(mca_coll_gpu_mirror_t *m, int rc)
{
    if (NULL == m->mem) {
        return rc;
    }
    if (MPI_SUCCESS == rc &&
        CGPU_OK != cgpu_engine_copy((char *) m->dev + m->first, m->mem, m->span)) {
        rc = MPI_ERR_BUFFER;
    }
    mca_coll_gpu_mirror_drop(m);
    return rc;
}

/*
 * A large contiguous allreduce handed to the previous module, in chunks: chunk i+1 is copied
 * to pinned host memory while the previous module reduces chunk i there, and chunk i-1 is
 * copied back meanwhile (three slots, one copy stream). Reductions are element by element,
 * so the chunks' results are the call's. Every rank cuts the same chunks: the choice and
 * the chunk size depend on the count, the datatype and MCA params only, not on where the
 * buffers live (host buffers are reduced chunk by chunk in place, with no copy).
 */
enum { STAGE_CHUNK_FLOOR = 262144 };

static bool pipelined(int count, struct ompi_datatype_t *dtype, size_t *per)
{
    const mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    size_t size;
    ptrdiff_t lb, ext;
    ompi_datatype_type_size(dtype, &size);
    ompi_datatype_get_extent(dtype, &lb, &ext);
    if (0 == c->stage_chunk_bytes || count <= 0 || 0 == size || (size_t) ext != size ||
        !ompi_datatype_is_contiguous_memory_layout(dtype, 2) ||
        (size_t) count * size < c->stage_pipeline_min_bytes) {
        return false;
    }
    /* at least four chunks where the message allows: the chunk is halved down to
     * STAGE_CHUNK_FLOOR (powers-of-two fractions of the parameter, so the pinned buffers of
     * a few sizes are pooled and reused) */
    const size_t bytes = (size_t) count * size;
    size_t chunk = c->stage_chunk_bytes;
    while (chunk / 2 >= STAGE_CHUNK_FLOOR && bytes < 4 * chunk) {
        chunk /= 2;
    }
    *per = chunk / size > 0 ? chunk / size : 1;
    return (size_t) count > *per;
}

static int pipe_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf, int count,
                          struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                          struct ompi_communicator_t *comm, size_t per)
{
    size_t size;
    ptrdiff_t tlb, text;
    ompi_datatype_type_size(dtype, &size);
    ompi_datatype_get_true_extent(dtype, &tlb, &text);
    const bool in_place = MPI_IN_PLACE == sbuf;
    char *r0 = (char *) rbuf + tlb;
    const char *s0 = in_place ? r0 : (const char *) sbuf + tlb;
    const bool rdev = mca_coll_gpu_on_device(r0);
    const bool sdev = in_place ? rdev : mca_coll_gpu_on_device(s0);
    const size_t nch = ((size_t) count + per - 1) / per, chunk = per * size;
    cgpu_stager_t *stg = NULL;
    if ((sdev || rdev) && CGPU_OK != cgpu_stager_get(chunk, 3, &stg)) {
        cgpu_log(CGPU_LOG_WARN, "MPI_Allreduce on %s: no pinned staging buffers (%zu bytes)",
                 comm->c_name, 3 * chunk);
        return MPI_ERR_NO_MEM; /* before any chunk: every rank's choice is the same, but
                                * this rank's peers then wait in the first chunk */
    }
    int rc = MPI_SUCCESS;
    cgpu_status_t st = CGPU_OK;
    if (sdev) { /* chunk 0 on its way (a whole chunk: the pipeline has at least two) */
        st = cgpu_stager_copy(stg, cgpu_stager_slot(stg, 0), s0, chunk);
        st = CGPU_OK == st ? cgpu_stager_mark(stg, 0) : st;
    }
    for (size_t i = 0; i < nch; ++i) {
        const size_t off = i * chunk, n = i + 1 < nch ? per : (size_t) count - i * per;
        const int k = (int) (i % 3);
        char *slot = NULL != stg ? cgpu_stager_slot(stg, k) : NULL;
        if (sdev && i + 1 < nch && CGPU_OK == st) { /* the next chunk's copy in */
            const size_t n1 = i + 2 < nch ? per : (size_t) count - (i + 1) * per;
            const int k1 = (int) ((i + 1) % 3);
            st = cgpu_stager_copy(stg, cgpu_stager_slot(stg, k1), s0 + off + chunk, n1 * size);
            st = CGPU_OK == st ? cgpu_stager_mark(stg, k1) : st;
        }
        if (NULL != stg && CGPU_OK == st) {
            st = cgpu_stager_wait(stg, k); /* its copy in, or its last use, is done */
        }
        const void *hs;
        void *hr;
        if (sdev) {
            hs = rdev ? MPI_IN_PLACE : (const void *) slot;
            hr = rdev ? (void *) slot : (void *) (r0 + off);
        } else {
            hs = in_place && !rdev ? MPI_IN_PLACE : (const void *) (s0 + off);
            hr = rdev ? (void *) slot : (void *) (r0 + off);
        }
        /* a local copy failure still takes part (on whatever the slot holds), so no peer
         * waits forever; the call then returns the error */
        int crc = MCA_COLL_GPU_PREV(m->prev.coll_allreduce(hs, hr, (int) n, dtype, op, comm,
                                                           m->prev.coll_allreduce_module));
        rc = MPI_SUCCESS == rc ? crc : rc;
        if (rdev && CGPU_OK == st) {
            st = cgpu_stager_copy(stg, r0 + off, slot, n * size);
            st = CGPU_OK == st ? cgpu_stager_mark(stg, k) : st;
        }
    }
    if (NULL != stg) {
        st = CGPU_OK == st ? cgpu_stager_finish(stg) : st;
        cgpu_stager_put(&stg);
    }
    if (CGPU_OK != st) {
        cgpu_log(CGPU_LOG_WARN, "MPI_Allreduce on %s: staging copies failed: %s", comm->c_name,
                 cgpu_status_string(st));
        rc = MPI_SUCCESS == rc ? MPI_ERR_BUFFER : rc;
    }
    return rc;
}

/*
 * The staged allreduce with the engine moving the data (coll_gpu_stage_allreduce_engine):
 * for each chunk of n x q elements, an engine alltoall gives this rank block `rank` of every
 * rank's chunk (device scratch), the copy stream brings those n blocks to pinned host
 * memory, the host reduces them with Open MPI's op (user functions, derived datatypes and
 * the pair types included, in rank order for ops that do not commute), the copy stream takes
 * the result to this rank's block of the receive buffer, and an engine allgather in place
 * spreads the blocks. Only the arithmetic runs on the host; the copies of chunk i+1 and the
 * result of chunk i-1 move while the host reduces chunk i. Fewer than n elements left at
 * the end are allgathered whole and reduced by every rank.
 *
 * Every rank takes this path or none: the choice depends on the datatype, op, count, MCA
 * params and the communicator's engine state, which the lazy set-up agrees on.
 */
/* acc = x_0 op x_1 op ... op x_(n-1), n blocks of q elements laid out one after another in
 * h; the result lands in the last block. */
static char *reduce_blocks(char *h, size_t q, int n, size_t size, struct ompi_op_t *op,
                           struct ompi_datatype_t *dtype)
{
    char *acc = h + (size_t) (n - 1) * q * size;
    for (int k = n - 2; k >= 0; --k) {
        ompi_op_reduce(op, h + (size_t) k * q * size, acc, q, dtype);
    }
    return acc;
}

/* where a staged call's time goes (coll_gpu_verbose >= 10): ns in the engine's alltoalls,
 * waiting for the copies, the host's arithmetic, the engine's allgathers */
enum { MV_ALLTOALL, MV_WAIT, MV_REDUCE, MV_ALLGATHER, MV_PARTS };
/* adds the time since *t0 to part k (when timing) and restarts the clock */
static void mv_mark(uint64_t *t, uint64_t *t0, int k)
{
    if (NULL != t) {
        const uint64_t t1 = cgpu_now_ns();
        t[k] += t1 - *t0;
        *t0 = t1;
    }
}

static int moved_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, size_t per)
{
    const int nr = cgpu_comm_size(m->ecomm), rank = cgpu_comm_rank(m->ecomm);
    size_t size;
    ptrdiff_t tlb, text;
    ompi_datatype_type_size(dtype, &size);
    ompi_datatype_get_true_extent(dtype, &tlb, &text);
    const size_t n = (size_t) nr, N = (size_t) count;
    char *r0 = (char *) rbuf + tlb;
    const char *s0 = MPI_IN_PLACE == sbuf ? r0 : (const char *) sbuf + tlb;
    /* chunks of n x q elements; the last one shorter; then fewer than n left over */
    const size_t q = per / n > 0 ? per / n : 1, full = N / (n * q), qt = (N - full * n * q) / n;
    const size_t nch = full + (qt > 0), rem = N - full * n * q - qt * n;
    const size_t chunk = n * q * size;
    cgpu_stager_t *stg = NULL;
    if (CGPU_OK != cgpu_stager_get(chunk, 3, &stg)) {
        cgpu_log(CGPU_LOG_WARN, "MPI_Allreduce on %s: no pinned staging buffers (%zu bytes)",
                 comm->c_name, 3 * chunk);
        return MPI_ERR_NO_MEM; /* every rank's choice is the same; peers then fail in the
                                * first engine call (its timeout) */
    }
    char *scr = NULL; /* two alltoall landing areas on the device */
    cgpu_status_t st = cgpu_stager_scratch(stg, 2 * chunk, (void **) &scr); /* local failures */
    cgpu_status_t est = CGPU_OK; /* the first engine failure: no engine call after it */
    uint64_t parts[MV_PARTS] = {0}, t0 = 0, tstart = 0;
    uint64_t *tm = opal_output_get_verbosity(mca_coll_gpu_component.output) >= 10 ? parts : NULL;
    if (NULL != tm) {
        tstart = t0 = cgpu_now_ns();
    }
    OBJ_RETAIN(m);
    /* iteration i: chunk i moved and brought to the host; chunk i-1 reduced and its result
     * sent down; chunk i-2 allgathered (its result copy had a whole iteration to land). A
     * local failure still takes part in the exchanges (on whatever the buffers hold), so no
     * peer waits for this rank; the call then returns the error. */
    for (size_t i = 0; i < nch + 2 && CGPU_OK == est; ++i) {
        if (i < nch) {
            const size_t bi = (i < full ? q : qt) * size;
            /* no scratch: land in the receive buffer, undefined on error anyway */
            char *d = NULL != scr ? scr + (i % 2) * chunk : r0 + i * chunk;
            est = cgpu_alltoall(m->ecomm, s0 + i * chunk, d, bi, CGPU_ALLTOALL_AUTO);
            mv_mark(tm, &t0, MV_ALLTOALL);
            if (CGPU_OK == est && CGPU_OK == st) {
                st = cgpu_stager_copy(stg, cgpu_stager_slot(stg, (int) (i % 3)), d, n * bi);
                st = CGPU_OK == st ? cgpu_stager_mark(stg, (int) (i % 3)) : st;
            }
        }
        if (i >= 1 && i - 1 < nch && CGPU_OK == est && CGPU_OK == st) {
            const size_t j = i - 1, qj = j < full ? q : qt;
            st = cgpu_stager_wait(stg, (int) (j % 3));
            mv_mark(tm, &t0, MV_WAIT);
            if (CGPU_OK == st) {
                char *res =
                    reduce_blocks(cgpu_stager_slot(stg, (int) (j % 3)), qj, nr, size, op, dtype);
                mv_mark(tm, &t0, MV_REDUCE);
                st = cgpu_stager_copy(stg, r0 + j * chunk + (size_t) rank * qj * size, res,
                                      qj * size);
                st = CGPU_OK == st ? cgpu_stager_mark(stg, (int) (j % 3)) : st;
            }
        }
        if (i >= 2 && i - 2 < nch && CGPU_OK == est) {
            const size_t j = i - 2, qj = j < full ? q : qt;
            st = CGPU_OK == st ? cgpu_stager_wait(stg, (int) (j % 3)) : st;
            mv_mark(tm, &t0, MV_WAIT);
            est = cgpu_allgather(m->ecomm, NULL, r0 + j * chunk, qj * size);
            mv_mark(tm, &t0, MV_ALLGATHER);
        }
    }
    if (rem > 0 && CGPU_OK == est) {          /* the last rem elements of every rank, everywhere */
        char *all = cgpu_stager_slot(stg, 0); /* n x rem < n x q elements */
        const size_t off = N - rem;
        st = CGPU_OK == st ? cgpu_stager_finish(stg) : st;
        est = cgpu_allgather(m->ecomm, s0 + off * size, all, rem * size);
        if (CGPU_OK == est && CGPU_OK == st) {
            char *res = reduce_blocks(all, rem, nr, size, op, dtype);
            st = cgpu_engine_copy(r0 + off * size, res, rem * size);
        }
    }
    OBJ_RELEASE(m);
    st = CGPU_OK == st ? cgpu_stager_finish(stg) : st;
    cgpu_stager_put(&stg);
    if (NULL != tm) {
        opal_output(mca_coll_gpu_component.output,
                    "coll/gpu: staged allreduce on %s, %zu bytes in %zu chunks: %.1f us; "
                    "alltoalls %.1f, copy waits %.1f, host reduction %.1f, allgathers %.1f",
                    comm->c_name, N * size, nch, 1e-3 * (double) (cgpu_now_ns() - tstart),
                    1e-3 * (double) tm[MV_ALLTOALL], 1e-3 * (double) tm[MV_WAIT],
                    1e-3 * (double) tm[MV_REDUCE], 1e-3 * (double) tm[MV_ALLGATHER]);
    }
    if (CGPU_OK != est) {
        return mca_coll_gpu_engine_rc(est, "MPI_Allreduce (staged)", comm);
    }
    if (CGPU_OK != st) {
        cgpu_log(CGPU_LOG_WARN, "MPI_Allreduce on %s: staging copies failed: %s", comm->c_name,
                 cgpu_status_string(st));
        return MPI_ERR_BUFFER;
    }
    return MPI_SUCCESS;
}

int mca_coll_gpu_fallback_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf,
                                    int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm)
{
    if (!mca_coll_gpu_nested()) {
        atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    }
    size_t per;
    if (!mca_coll_gpu_nested() && pipelined(count, dtype, &per)) {
        const size_t n = (size_t) ompi_comm_size(comm);
        if (mca_coll_gpu_component.stage_allreduce_engine && n > 1 && per >= n * n &&
            mca_coll_gpu_host_reducible(dtype, op)) {
            mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
            /* ranks sharing a device: each engine call waits for a time slice, the previous
             * module's pipeline is faster there (unless MPS runs their kernels at once) */
            if (CGPU_MODULE_READY == m->state &&
                (mca_coll_gpu_component.stage_allreduce_engine_shared ||
                 !cgpu_comm_shares_device(m->ecomm))) {
                return moved_allreduce(m, sbuf, rbuf, count, dtype, op, comm, per);
            }
        }
        return pipe_allreduce(m, sbuf, rbuf, count, dtype, op, comm, per);
    }
    const bool sdev = mca_coll_gpu_on_device_at(sbuf, (size_t) count, dtype);
    const bool rdev = mca_coll_gpu_on_device_at(rbuf, (size_t) count, dtype);
    if (mca_coll_gpu_nested() || (!sdev && !rdev)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_allreduce(sbuf, rbuf, count, dtype, op, comm,
                                                        m->prev.coll_allreduce_module));
    }
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = MPI_SUCCESS;
    if (sdev) {
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) count, dtype, &hs);
    }
    if (MPI_SUCCESS == rc && rdev) {
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) count, dtype, &hr);
    }
    /* a local staging failure must not strand the peers inside the previous module's
     * protocol: take part anyway on the (possibly unstaged) host copies is impossible,
     * so report and let the error handler decide */
    if (MPI_SUCCESS == rc) {
        rc = MCA_COLL_GPU_PREV(
            m->prev.coll_allreduce(hs, hr, count, dtype, op, comm, m->prev.coll_allreduce_module));
    } else {
        cgpu_log(CGPU_LOG_WARN,
                 "MPI_Allreduce on %s: cannot stage device buffers to host "
                 "for the fallback",
                 comm->c_name);
    }
    mca_coll_gpu_mirror_drop(&ms);
    return mca_coll_gpu_mirror_out(&mr, rc);
}

int mca_coll_gpu_fallback_alltoall(mca_coll_gpu_module_t *m, const void *sbuf, int scount,
                                   struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                   struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm)
{
    if (!mca_coll_gpu_nested()) {
        atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    }
    const size_t n = (size_t) ompi_comm_size(comm);
    const bool sdev = mca_coll_gpu_on_device_at(sbuf, (size_t) scount * n, sdtype);
    const bool rdev = mca_coll_gpu_on_device_at(rbuf, (size_t) rcount * n, rdtype);
    if (mca_coll_gpu_nested() || (!sdev && !rdev)) {
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                                       comm, m->prev.coll_alltoall_module));
    }
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = MPI_SUCCESS;
    if (sdev) {
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) scount * n, sdtype, &hs);
    }
    if (MPI_SUCCESS == rc && rdev) {
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) rcount * n, rdtype, &hr);
    }
    if (MPI_SUCCESS == rc) {
        rc = MCA_COLL_GPU_PREV(m->prev.coll_alltoall(hs, scount, sdtype, hr, rcount, rdtype, comm,
                                                     m->prev.coll_alltoall_module));
    } else {
        cgpu_log(CGPU_LOG_WARN,
                 "MPI_Alltoall on %s: cannot stage device buffers to host "
                 "for the fallback",
                 comm->c_name);
    }
    mca_coll_gpu_mirror_drop(&ms);
    return mca_coll_gpu_mirror_out(&mr, rc);
}
