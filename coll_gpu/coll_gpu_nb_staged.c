/*
 * coll/gpu: the staged path of the non-blocking collectives.
 *
 * Every non-blocking call on device buffers that the engine declines (user ops, the
 * algorithms "fallback", coll_gpu_nb_engine off, a communicator not set up) runs on the
 * previous module: the device spans are copied to host memory at the post, the previous
 * module's non-blocking collective runs on the copies, and our request around its request
 * copies the received spans back when that request completes (coll_gpu_request.c). Calls
 * whose buffers are all in host memory, and nested calls, go to the previous module
 * untouched.
 *
 * Apart from coll_gpu_staged.c (the blocking staged calls, which copy back before they
 * return) because here the copies outlive the post, in a request of ours.
 */
#define CGPU_LOG_SUBSYS CGPU_SUB_NB
#include "coll_gpu_nb.h"

#include "opal/util/output.h"

int mca_coll_gpu_nb_staged_in(mca_coll_gpu_request_t *r, int i, const void *buf, size_t count,
                              struct ompi_datatype_t *dt, bool back, void **host)
{
    r->back[i] = back;
    return mca_coll_gpu_stage(&r->sb[i], buf, count, dt, host);
}

int mca_coll_gpu_nb_staged_post(mca_coll_gpu_request_t *r, int rc, ompi_request_t **request,
                                const char *what)
{
    if (MPI_SUCCESS != rc) {
        cgpu_log(CGPU_LOG_WARN, "%s on %s: cannot stage device buffers through host memory (%d)",
                 what, r->m->comm->c_name, rc);
        for (int i = 0; i < 2; ++i) {
            (void) mca_coll_gpu_unstage(&r->sb[i], rc, false);
        }
        mca_coll_gpu_request_destroy(r);
        return mca_coll_gpu_nb_post_failed(request, rc);
    }
    mca_coll_gpu_nb_pending_add(r);
    *request = &r->super.super;
    return MPI_SUCCESS;
}

mca_coll_gpu_request_t *mca_coll_gpu_nb_staged_begin(mca_coll_gpu_module_t *m,
                                                     struct ompi_communicator_t *comm, bool dev)
{
    if (mca_coll_gpu_nested()) {
        return NULL;
    }
    atomic_fetch_add_explicit(&m->fallback_calls, 1, memory_order_relaxed);
    if (!dev) {
        return NULL;
    }
    return mca_coll_gpu_request_new(m, comm, false);
}

/* ---- staged calls described by their arguments (intercommunicators, neighborhoods,
 * MPI_Ialltoallw) ---- */

int mca_coll_gpu_nb_staged_call(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                const mca_coll_gpu_args_t *a, mca_coll_gpu_spans_fn_t spans,
                                ompi_request_t **request)
{
    mca_coll_gpu_spans_t sp;
    spans(a, comm, &sp);
    /* the kind of the bytes addressed: with MPI_BOTTOM the buffer arguments tell nothing */
    const bool dev = mca_coll_gpu_span_on_device(a->s, sp.slo, sp.shi) ||
                     mca_coll_gpu_span_on_device(a->r, sp.rlo, sp.rhi);
    CGPU_NB_STAGED_NEW_OR_PASS(r, dev, mca_coll_gpu_prev_post(m, a, comm, request))
    mca_coll_gpu_args_t h = *a;
    void *hs, *hr;
    r->back[1] = sp.rback;
    int rc = mca_coll_gpu_stage_bytes(&r->sb[0], a->s, sp.slo, sp.shi, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage_bytes(&r->sb[1], a->r, sp.rlo, sp.rhi, &hr);
    }
    if (MPI_SUCCESS == rc) {
        h.s = hs;
        h.r = hr;
        /* only what this rank's call uses (the others need not be valid handles); the
         * type arrays of a w-call are the caller's, alive until completion */
        const bool s_used = sp.shi > sp.slo, r_used = sp.rhi > sp.rlo;
        mca_coll_gpu_request_retain(r, s_used ? a->sdt : NULL,
                                    r_used || (s_used && NULL != a->op) ? a->rdt
                                                                        : NULL, /* a reduction's */
                                    s_used || r_used ? a->op : NULL);
        rc = MCA_COLL_GPU_PREV(mca_coll_gpu_prev_post(m, &h, comm, &r->inner));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, mca_coll_gpu_kind_name(a->kind));
}
