/*
 * coll/gpu engine, cuda backend: staging of the buffers a call's kernels cannot use as they
 * are, and the ordering of the call's stream after the caller's work.
 *
 * The kernels load from and store to memory of the communicator's device, aligned for the
 * elements; MPI hands any memory at any address. Host buffers pass through pinned memory
 * by the CPU, other memory through device scratch, both kept per communicator and grown to
 * the largest call (and the zeros a scatter's other ranks reduce with). Apart from the run
 * of a call (run.c) because the copy-engine and resident paths ask the same questions about
 * a buffer (cgpu_cuda_buf_kind) without staging.
 */
#include <stdlib.h>
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

cgpu_status_t cgpu_cuda_comm_zeros(cgpu_comm_t *comm, size_t bytes, const void **out)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    if (NULL == cc) {
        return CGPU_ERR_STATE;
    }
    if (cc->zeros_bytes < bytes) {
        const int prev = cgpu_cuda_current_device();
        if (prev != cc->device) {
            (void) cgpu_cuda_set_device(cc->device);
        }
        cgpu_cuda_free(cc->zeros); /* deferred while a kernel is in flight */
        cc->zeros_bytes = 0;
        /* zero-filled on our stream, which is then synchronized: nothing of ours is queued
         * on it between calls */
        cgpu_status_t st = cgpu_cuda_malloc(&cc->zeros, bytes, cc->stream);
        if (prev >= 0 && prev != cc->device) {
            (void) cgpu_cuda_set_device(prev);
        }
        if (CGPU_OK != st) {
            cc->zeros = NULL;
            return st;
        }
        cc->zeros_bytes = bytes;
    }
    *out = cc->zeros;
    return CGPU_OK;
}

cgpu_status_t cgpu_cuda_ensure_scratch(cgpu_cuda_comm_t *cc, size_t bytes)
{
    if (cc->scratch_bytes >= bytes) {
        return CGPU_OK;
    }
    cgpu_cuda_free(cc->scratch);
    cc->scratch = NULL;
    cc->scratch_bytes = 0;
    size_t want = bytes < (1u << 20) ? (1u << 20) : bytes;
    cgpu_status_t st = cgpu_cuda_malloc(&cc->scratch, want, NULL);
    if (CGPU_OK == st) {
        cc->scratch_bytes = want;
    }
    return st;
}

/* What a buffer is to this communicator's kernels: usable in place needs memory of its
 * device at an address aligned for the elements' loads (@p align; 0 or 1: bytes). MPI takes
 * any address, and a kernel's load off its alignment is a device fault that ends the
 * process's context; such a buffer is staged through aligned scratch instead. */
cgpu_cuda_buf_kind_t cgpu_cuda_buf_kind(const cgpu_cuda_comm_t *cc, const void *p, size_t align)
{
    int dev;
    cgpu_mem_kind_t k = cgpu_cuda_mem_kind(p, &dev);
    return (cgpu_cuda_buf_kind_t){.in_place = (CGPU_MEM_DEVICE == k || CGPU_MEM_MANAGED == k) &&
                                              dev == cc->device &&
                                              (align < 2 || 0 == (uintptr_t) p % align),
                                  .host = CGPU_MEM_HOST == k};
}

/* The alignment the kernels' loads of @p dt need: the largest power of two dividing its
 * size, up to 16 (a double complex is one 16-byte load; a pair, padded or not, is read field
 * by field or in 16-byte vectors only where aligned for them) */
size_t cgpu_cuda_dtype_align(cgpu_dtype_t dt)
{
    const size_t size = cgpu_dtype_size(dt), low = size & (~size + 1);
    return low < 16 ? low : 16;
}

static size_t round256(size_t x)
{
    return (x + 255) & ~(size_t) 255;
}

/* A copy from or to pageable memory is synchronous and serialized with such copies of
 * other threads; one of them waiting behind a kernel that waits for a peer would stall
 * this thread before it launches what that peer waits for. So host buffers are copied by
 * the CPU into pinned memory of ours, and only truly asynchronous copies are enqueued. */
cgpu_status_t cgpu_cuda_ensure_pinned(cgpu_cuda_comm_t *cc, size_t bytes)
{
    if (cc->pinned_bytes >= bytes) {
        return CGPU_OK;
    }
    cgpu_cuda_host_free(cc->pinned);
    cc->pinned = NULL;
    cc->pinned_bytes = 0;
    size_t want = bytes < (1u << 20) ? (1u << 20) : bytes;
    void *h = NULL, *d = NULL;
    cgpu_status_t st = cgpu_cuda_host_alloc_mapped(&h, &d, want);
    if (CGPU_OK == st) {
        cc->pinned = h;
        cc->pinned_bytes = want;
    }
    return st;
}

/* dst (device) <- src (any memory), through `bounce` (pinned) when src is host memory */
static cgpu_status_t stage_copy_in(cgpu_cuda_comm_t *cc, void *dst, const void *src, size_t n,
                                   bool src_host, char *bounce)
{
    if (src_host) {
        memcpy(bounce, src, n);
        src = bounce;
    }
    return cgpu_cuda_copy_async(dst, src, n, cc->stream);
}

cgpu_status_t cgpu_cuda_stage(cgpu_cuda_comm_t *cc, const cgpu_cuda_call_t *k,
                              cgpu_cuda_staged_t *sg)
{
    const char *sp = k->sbuf, *rp = k->rbuf;
    const bool aliased = NULL != sp && NULL != rp && k->out_bytes > 0 && sp >= rp &&
                         sp + k->in_bytes <= rp + k->out_bytes;
    /* a padded pair's output (device memory) is always staged, its runs copied out after */
    const cgpu_cuda_buf_kind_t rk = k->out_bytes > 0 && NULL == k->po
                                        ? cgpu_cuda_buf_kind(cc, rp, k->align)
                                        : (cgpu_cuda_buf_kind_t){.in_place = true};
    const cgpu_cuda_buf_kind_t sk = k->in_bytes > 0
                                        ? (aliased ? rk : cgpu_cuda_buf_kind(cc, sp, k->align))
                                        : (cgpu_cuda_buf_kind_t){.in_place = true};
    const bool out_stage = k->out_bytes > 0 && (NULL != k->po || !rk.in_place);
    const bool in_copy = k->in_bytes > 0 && (k->force_copy_in || (!aliased && !sk.in_place));
    sg->in = sp;
    sg->out = (void *) rp;
    sg->copy_out = false;
    sg->host_out = NULL;
    cgpu_status_t st = CGPU_OK;
    /* device memory the caller filled through the default stream (or a blocking stream)
     * may not be written yet: an event on the legacy stream (a legacy-stream operation
     * waits for every blocking stream); in `stream` mode our blocking stream is ordered
     * after the legacy stream only (an event there would also wait for our other
     * communicators' blocking streams: one would wait for another's kernel, which waits
     * for a peer) */
    if (NULL != cc->order_ev && !cc->blocking &&
        ((k->out_bytes > 0 && !rk.host) || (k->in_bytes > 0 && !sk.host))) {
        st = cgpu_cuda_stream_after_default(cc->stream, cc->order_ev);
    }
    if (CGPU_OK != st || (!out_stage && !in_copy)) {
        return st;
    }
    /* the input's room rounded up too: a padded pair's kernel reads its last element whole
     * (its size divides 256, so the round-up holds it) */
    const size_t total =
        (out_stage ? round256(k->out_bytes) : 0) + (in_copy ? round256(k->in_bytes) : 0);
    st = cgpu_cuda_ensure_scratch(cc, total);
    if (CGPU_OK == st && ((out_stage && rk.host) || (in_copy && sk.host))) {
        st = cgpu_cuda_ensure_pinned(cc, total);
    }
    char *p = cc->scratch, *q = cc->pinned; /* the same layout in both */
    if (CGPU_OK == st && out_stage) {
        sg->out = p;
        sg->copy_out = NULL == k->po;
        sg->host_out = rk.host ? q : NULL;
        if (aliased && !in_copy) { /* the input is part of the output: bring it along */
            st = stage_copy_in(cc, p, rp, k->out_bytes, rk.host, q);
            sg->in = p + (sp - rp);
        }
        p += round256(k->out_bytes);
        q = NULL != q ? q + round256(k->out_bytes) : NULL;
    }
    if (CGPU_OK == st && in_copy) {
        st = stage_copy_in(cc, p, sp, k->in_bytes, sk.host, q);
        sg->in = p;
    }
    return st;
}

#endif /* CGPU_HAVE_CUDA */
