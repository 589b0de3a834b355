/*
 * coll/gpu: the entry points of the non-blocking collectives (MPI_Iallreduce, MPI_Ialltoall,
 * ...) and of the persistent ones (MPIX_*_init).
 *
 * Each non-blocking call takes the engine path where its blocking form would, decided from
 * arguments MPI requires to match and MCA params (decision 2), or the staged path; the
 * machinery both paths post to (requests, the workers, the set-up, the staged copies) is
 * declared in coll_gpu_nb.h. The persistent inits keep a call's arguments; each MPI_Start
 * posts the call through this module's own non-blocking form (coll_gpu_persist.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu_nb.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

#define M(module) ((mca_coll_gpu_module_t *) (module))

/* ---- entry points: the seven with an engine path ---- */

static int nb_iallreduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    /* Open MPI agrees on a new communicator's id with 1-2 int MAX/MIN Iallreduces on the
     * parent, posted from its progress loop by whichever thread progresses, possibly one
     * inside a call of the previous module (where plan_engine declines): the path of such
     * a call must not depend on that, so calls of this shape always take the previous
     * module (host buffers: directly; device buffers: staged), and never put an engine
     * communicator (GPU memory, on whatever device is current) behind every parent */
    const bool cid_shape =
        count <= 2 && MPI_INT == dtype && (MPI_MAX == op || MPI_MIN == op);
    if (!cid_shape && mca_coll_gpu_allreduce_engine_ok(count, dtype, op, &dt, &eop) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, CGPU_NB_ALLREDUCE, create, MPI_IN_PLACE == sbuf ? rbuf : sbuf,
                              rbuf, (size_t) count, dt, eop, 0, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                               m->prev.coll_iallreduce_module))
    void *hs = (void *) sbuf, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallreduce(hs, hr, count, dtype, op, comm, &r->inner,
                                                       m->prev.coll_iallreduce_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iallreduce");
}

static int nb_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    const bool is_root = ompi_comm_rank(comm) == root;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.reduce_algorithm && count > 0 &&
        mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, CGPU_NB_REDUCE, create, MPI_IN_PLACE == sbuf ? NULL : sbuf,
                              is_root ? rbuf : NULL, (size_t) count, dt, eop, root, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, is_root ? rbuf : NULL,
                       m->prev.coll_ireduce(sbuf, rbuf, count, dtype, op, root, comm, request,
                                            m->prev.coll_ireduce_module))
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce(hs, hr, count, dtype, op, root, comm,
                                                    &r->inner, m->prev.coll_ireduce_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ireduce");
}

/* Both reduce_scatter forms (with data): the engine (plan_engine) for what it reduces,
 * unless coll_gpu_reduce_scatter_algorithm is fallback */
static bool plan_reduce_scatter(mca_coll_gpu_module_t *m, struct ompi_datatype_t *dtype,
                                struct ompi_op_t *op, cgpu_dtype_t *dt, cgpu_op_t *eop,
                                bool *create)
{
    return CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.reduce_scatter_algorithm &&
           mca_coll_gpu_engine_reduction(dtype, op, dt, eop) && mca_coll_gpu_nb_plan_engine(m, create);
}

static int nb_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                    struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm, ompi_request_t **request,
                                    mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (rcount > 0 && plan_reduce_scatter(m, dtype, op, &dt, &eop, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, CGPU_NB_REDUCE_SCATTER_BLOCK, create,
                              MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t) rcount, dt, eop,
                              0, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ireduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm,
                                                          request,
                                                          m->prev.coll_ireduce_scatter_block_module))
    const size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    void *hs = (void *) sbuf, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, total, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, MPI_IN_PLACE == sbuf ? total : (size_t) rcount, dtype, true,
                       &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter_block(
            hs, hr, rcount, dtype, op, comm, &r->inner, m->prev.coll_ireduce_scatter_block_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ireduce_scatter_block");
}

static int nb_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                     struct ompi_communicator_t *comm, ompi_request_t **request,
                     mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.bcast_algorithm && count > 0 &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, buf);
        if (NULL == r) {
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        }
        size_t esize;
        ompi_datatype_type_size(dtype, &esize);
        const bool is_root = ompi_comm_rank(comm) == root;
        r->kind = CGPU_NB_BCAST;
        r->bytes = (size_t) count * esize;
        r->root = root;
        r->rc = mca_coll_gpu_nb_view_open(&r->v[0], buf, count, dtype, r->bytes, is_root, !is_root, &r->r);
        if (MPI_SUCCESS != r->rc) {
            if (!mca_coll_gpu_nb_use_scratch(r, r->bytes)) {
                return mca_coll_gpu_nb_engine_unpost(r, request);
            }
            r->r = r->scratch;
        }
        if (NULL != r->v[0].pack) {
            mca_coll_gpu_request_retain(r, dtype, NULL, NULL);
        }
        return mca_coll_gpu_nb_engine_post(r, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, buf, NULL,
                       m->prev.coll_ibcast(buf, count, dtype, root, comm, request,
                                           m->prev.coll_ibcast_module))
    void *h;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, buf, (size_t) count, dtype, ompi_comm_rank(comm) != root, &h);
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ibcast(h, count, dtype, root, comm, &r->inner,
                                                   m->prev.coll_ibcast_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ibcast");
}

static int nb_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const int n = ompi_comm_size(comm);
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.allgather_algorithm && rcount > 0 &&
        (in_place || scount >= 0) && mca_coll_gpu_nb_plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, in_place ? rbuf : sbuf);
        if (NULL == r) {
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        }
        size_t rsize;
        ompi_datatype_type_size(rdt, &rsize);
        r->kind = CGPU_NB_ALLGATHER;
        r->bytes = (size_t) rcount * rsize;
        void *s = NULL;
        r->rc = mca_coll_gpu_nb_view_open(&r->v[1], rbuf, rcount * n, rdt, r->bytes * (size_t) n, in_place, true,
                          &r->r);
        if (MPI_SUCCESS == r->rc && !in_place) {
            r->rc = mca_coll_gpu_nb_view_open(&r->v[0], (void *) sbuf, scount, sdt, r->bytes, true, false, &s);
        }
        r->s = s;
        if (MPI_SUCCESS != r->rc) {
            if (!mca_coll_gpu_nb_use_scratch(r, r->bytes * (size_t) n)) {
                mca_coll_gpu_nb_view_close(&r->v[0], MPI_ERR_NO_MEM);
                mca_coll_gpu_nb_view_close(&r->v[1], MPI_ERR_NO_MEM);
                return mca_coll_gpu_nb_engine_unpost(r, request);
            }
            r->s = NULL;
            r->r = r->scratch;
        }
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        return mca_coll_gpu_nb_engine_post(r, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_iallgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm,
                                               request, m->prev.coll_iallgather_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) rcount * (size_t) n, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallgather(hs, scount, sdt, hr, rcount, rdt, comm,
                                                       &r->inner, m->prev.coll_iallgather_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iallgather");
}

static int nb_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const int n = ompi_comm_size(comm);
    size_t bytes;
    if (mca_coll_gpu_alltoall_engine_ok(in_place ? rcount : scount, rcount, rdt, &bytes) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, in_place ? rbuf : sbuf);
        if (NULL == r) {
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        }
        const size_t total = bytes * (size_t) n;
        r->kind = CGPU_NB_ALLTOALL;
        r->bytes = bytes;
        void *s = NULL;
        r->rc = mca_coll_gpu_nb_view_open(&r->v[1], rbuf, rcount * n, rdt, total, in_place, true, &r->r);
        if (MPI_SUCCESS == r->rc) {
            if (in_place) {
                s = r->r;
            } else {
                r->rc = mca_coll_gpu_nb_view_open(&r->v[0], (void *) sbuf, scount * n, sdt, total, true, false,
                                  &s);
            }
        }
        r->s = s;
        if (MPI_SUCCESS != r->rc) {
            if (!mca_coll_gpu_nb_use_scratch(r, total)) {
                mca_coll_gpu_nb_view_close(&r->v[0], MPI_ERR_NO_MEM);
                mca_coll_gpu_nb_view_close(&r->v[1], MPI_ERR_NO_MEM);
                return mca_coll_gpu_nb_engine_unpost(r, request);
            }
            r->s = r->r = r->scratch;
        }
        mca_coll_gpu_request_retain(r, in_place ? NULL : sdt, rdt, NULL);
        return mca_coll_gpu_nb_engine_post(r, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ialltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm, request,
                                              m->prev.coll_ialltoall_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, in_place ? 0 : (size_t) scount * (size_t) n, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) rcount * (size_t) n, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, in_place ? NULL : sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ialltoall(hs, scount, sdt, hr, rcount, rdt, comm,
                                                      &r->inner, m->prev.coll_ialltoall_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ialltoall");
}

/* ---- gather, scatter, allgatherv: the engine when every rank can tell ---- */

/* MPI_Igather (gather) and MPI_Iscatter on the engine, decided as the blocking calls decide
 * (rooted() in coll_gpu_gather.c): the bytes per rank come from the root's count of the
 * whole message and everyone else's own block, which MPI requires to match. The root's
 * whole message is all_count x all_dt at all_buf, each rank's block one_count x one_dt at
 * one_buf (MPI_IN_PLACE at the root). false: the engine does not take the call (the same on
 * every rank); true: it was posted, *rc is the post's answer. */
static bool rooted_post(bool gather, const void *one_buf, int one_count,
                        struct ompi_datatype_t *one_dt, const void *all_buf, int all_count,
                        struct ompi_datatype_t *all_dt, int root, struct ompi_communicator_t *comm,
                        mca_coll_gpu_module_t *m, ompi_request_t **request, int *rc)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const int n = ompi_comm_size(comm);
    const bool is_root = ompi_comm_rank(comm) == root;
    const bool in_place = is_root && MPI_IN_PLACE == one_buf;
    const int count = is_root ? all_count : one_count;
    size_t es;
    ompi_datatype_type_size(is_root ? all_dt : one_dt, &es);
    const size_t bytes = count > 0 ? (size_t) count * es : 0;
    bool create;
    if (CGPU_ALLREDUCE_FALLBACK == (gather ? c->gather_algorithm : c->scatter_algorithm) ||
        0 == bytes || bytes > mca_coll_gpu_padded_max(n) || bytes * (size_t) n > (size_t) INT_MAX ||
        !mca_coll_gpu_nb_plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, is_root ? all_buf : one_buf);
    if (NULL == r) {
        *rc = mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        return true;
    }
    r->kind = gather ? CGPU_NB_GATHER : CGPU_NB_SCATTER;
    r->bytes = bytes;
    r->root = root;
    void *one = NULL, *all = NULL;
    /* the root's own block disagreeing with its whole message is its error alone: it still
     * takes part (on scratch) so that no peer waits */
    r->rc = is_root && !in_place && one_count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS;
    if (MPI_SUCCESS == r->rc && is_root) { /* gather in place: the root's block packed too */
        r->rc = mca_coll_gpu_nb_view_open(&r->v[1], (void *) all_buf, all_count * n, all_dt, bytes * (size_t) n,
                          !gather || in_place, gather, &all);
    }
    if (MPI_SUCCESS == r->rc && !in_place) { /* a scatter's block: gaps keep their bytes */
        r->rc =
            mca_coll_gpu_nb_view_open(&r->v[0], (void *) one_buf, one_count, one_dt, bytes, gather, !gather, &one);
    }
    if (MPI_SUCCESS != r->rc) {
        if (!mca_coll_gpu_nb_use_scratch(r, bytes * (size_t) (is_root ? n : 1))) {
            mca_coll_gpu_nb_view_close(&r->v[0], MPI_ERR_NO_MEM);
            mca_coll_gpu_nb_view_close(&r->v[1], MPI_ERR_NO_MEM);
            *rc = mca_coll_gpu_nb_engine_unpost(r, request);
            return true;
        }
        one = is_root ? NULL : r->scratch;
        all = is_root ? r->scratch : NULL;
    }
    r->s = one;
    r->r = all;
    mca_coll_gpu_request_retain(r, in_place ? NULL : one_dt, is_root ? all_dt : NULL, NULL);
    *rc = mca_coll_gpu_nb_engine_post(r, request);
    return true;
}

/* MPI_Iallgatherv on the engine, decided as the blocking call decides: every rank knows
 * every count. The receive side is one view over the blocks' whole span (packed on the host
 * when its elements have gaps, the bytes between blocks kept), block p at offs[p] in it. */
static bool allgatherv_post(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                            ompi_request_t **request, int *rc)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    size_t rsize, maxb, total;
    const bool valid = mca_coll_gpu_allgatherv_sizes(in_place, scount, rcounts, rdt, n, &rsize,
                                                     &maxb, &total);
    bool create;
    if (!valid || CGPU_ALLREDUCE_FALLBACK == c->allgather_algorithm || 0 == maxb ||
        maxb > mca_coll_gpu_padded_max(n) || !mca_coll_gpu_nb_plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, in_place ? rbuf : sbuf);
    if (NULL == r) {
        *rc = mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        return true;
    }
    r->kind = CGPU_NB_ALLGATHERV;
    r->counts = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * (size_t) n);
    if (NULL == r->counts) {
        *rc = mca_coll_gpu_nb_engine_unpost(r, request);
        return true;
    }
    r->offs = (ptrdiff_t *) (r->counts + n);
    void *s = NULL, *rv = NULL;
    r->rc = mca_coll_gpu_nb_span_view(&r->v[1], rbuf, rcounts, displs, rdt, n, true, true, r->counts, r->offs,
                      &maxb, &rv);
    if (MPI_SUCCESS == r->rc && !in_place) {
        size_t ssize;
        ompi_datatype_type_size(sdt, &ssize);
        r->rc =
            (size_t) scount * ssize != r->counts[me]
                ? MPI_ERR_TRUNCATE
                : mca_coll_gpu_nb_view_open(&r->v[0], (void *) sbuf, scount, sdt, r->counts[me], true, false, &s);
    }
    if (MPI_SUCCESS != r->rc) { /* take part on zeroed scratch, blocks back to back */
        if (!mca_coll_gpu_nb_use_scratch(r, total)) {
            mca_coll_gpu_nb_view_close(&r->v[0], MPI_ERR_NO_MEM);
            mca_coll_gpu_nb_view_close(&r->v[1], MPI_ERR_NO_MEM);
            *rc = mca_coll_gpu_nb_engine_unpost(r, request);
            return true;
        }
        ptrdiff_t at = 0;
        for (int p = 0; p < n; ++p) {
            r->offs[p] = at;
            at += (ptrdiff_t) r->counts[p];
        }
        s = NULL;
        rv = r->scratch;
    }
    r->s = s;
    r->r = rv;
    mca_coll_gpu_request_retain(r, in_place ? NULL : sdt, rdt, NULL);
    *rc = mca_coll_gpu_nb_engine_post(r, request);
    return true;
}

static int nb_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    int prc;
    if (allgatherv_post(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_iallgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt,
                                                comm, request, m->prev.coll_iallgatherv_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallgatherv(hs, scount, sdt, hr, rcounts, displs, rdt,
                                                        comm, &r->inner,
                                                        m->prev.coll_iallgatherv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iallgatherv");
}

static int nb_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                      int rcount, struct ompi_datatype_t *rdt, int root,
                      struct ompi_communicator_t *comm, ompi_request_t **request,
                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (rooted_post(true, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, is_root ? rbuf : NULL,
                       m->prev.coll_igather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                                            request, m->prev.coll_igather_module))
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt, true,
                       &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_igather(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                                    &r->inner, m->prev.coll_igather_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Igather");
}

/* ---- the v-forms on the engine: igatherv, iscatterv, ialltoallv, ialltoallw ---- */

/* Side @p i of a v-form (span_view): its blocks in vb[i], its largest in vmax. */
static int v_side(mca_coll_gpu_request_t *r, int i, void *buf, const int *counts, const int *displs,
                  struct ompi_datatype_t *dt, bool in, bool out)
{
    size_t largest = 0;
    void *base = NULL;
    r->vb[i] = (cgpu_blocks_t){.bytes = mca_coll_gpu_nb_v_bytes(r, i, 0), .offs = mca_coll_gpu_nb_v_offs(r, i, 0)};
    int rc = mca_coll_gpu_nb_span_view(&r->v[i], buf, counts, displs, dt, ompi_comm_size(r->m->comm), in, out,
                       mca_coll_gpu_nb_v_bytes(r, i, 0), mca_coll_gpu_nb_v_offs(r, i, 0), &largest, &base);
    r->vb[i].base = base;
    r->vmax = largest > r->vmax ? largest : r->vmax;
    return rc;
}

/* Side @p i of an MPI_Ialltoallw (mca_coll_gpu_a2a_blocks' layout). Where every block is a
 * gap-free run the engine reads or writes the user's buffer, else every block is packed on
 * the host, back to back (view_open_w). */
static int w_side(mca_coll_gpu_request_t *r, int i, const mca_coll_gpu_a2a_side_t *x, bool out)
{
    const int n = ompi_comm_size(r->m->comm);
    size_t *bytes = mca_coll_gpu_nb_v_bytes(r, i, 0), largest;
    ptrdiff_t *offs = mca_coll_gpu_nb_v_offs(r, i, 0);
    void *base = (void *) x->buf;
    bool gaps;
    r->vb[i] = (cgpu_blocks_t){.base = base, .bytes = bytes, .offs = offs};
    int rc = mca_coll_gpu_a2a_blocks(x, n, bytes, offs, &largest, &gaps);
    r->vmax = largest > r->vmax ? largest : r->vmax;
    if (MPI_SUCCESS != rc || !gaps) {
        return rc;
    }
    ptrdiff_t at = 0;
    for (int p = 0; p < n; ++p) {
        offs[p] = at;
        at += (ptrdiff_t) bytes[p];
    }
    rc =
        mca_coll_gpu_nb_view_open_w(&r->v[i], base, x->counts, x->displs, x->dts, n, (size_t) at, true, out, &base);
    r->vb[i].base = base;
    return rc;
}

/* A v-form's request, when the engine takes the call: as the blocking forms, unless the
 * algorithm is fallback (@p off) or the engine is not planned (the same on every rank).
 * false: not taken; true: *out is the request to fill in, or NULL with *rc the post's
 * answer (no memory). */
static bool v_begin(mca_coll_gpu_nb_kind_t kind, bool off, int root, const void *buf,
                    struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                    mca_coll_gpu_request_t **out, ompi_request_t **request, int *rc)
{
    bool create;
    *out = NULL;
    if (off || !mca_coll_gpu_nb_plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r = mca_coll_gpu_nb_engine_request(m, comm, create, buf);
    if (NULL == r) {
        *rc = mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        return true;
    }
    r->kind = kind;
    r->root = root;
    r->s = NULL; /* no block of its own (yet), or a root in place */
    r->bytes = 0;
    const size_t n = (size_t) ompi_comm_size(comm);
    r->counts = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * 4 * n); /* v_bytes, v_offs */
    if (NULL == r->counts) {
        *rc = mca_coll_gpu_nb_engine_unpost(r, request);
        return true;
    }
    r->offs = (ptrdiff_t *) (r->counts + 4 * n);
    *out = r;
    return true;
}

/* The v-form's post, its sides opened: a rank whose sides failed (r->rc) takes part with no
 * bytes, so that no peer waits, and gets its error back with the request. */
static int v_post(mca_coll_gpu_request_t *r, struct ompi_datatype_t *a, struct ompi_datatype_t *b,
                  ompi_request_t **request)
{
    if (MPI_SUCCESS != r->rc) {
        for (int i = 0; i < 2; ++i) { /* the sides v_side began: every block empty */
            if (NULL != r->vb[i].bytes) {
                const size_t n = (size_t) ompi_comm_size(r->m->comm);
                memset(mca_coll_gpu_nb_v_bytes(r, i, 0), 0, sizeof(size_t) * n);
                memset(mca_coll_gpu_nb_v_offs(r, i, 0), 0, sizeof(ptrdiff_t) * n);
                r->vb[i].base = (char *) r->counts; /* any host memory: no byte is moved */
            }
        }
        r->s = NULL;
        r->bytes = 0;
        r->vmax = 0;
    }
    mca_coll_gpu_request_retain(r, a, b, NULL);
    return mca_coll_gpu_nb_engine_post(r, request);
}

/* MPI_Igatherv (gather) and MPI_Iscatterv on the engine: the root's whole message is
 * all_counts x all_dt at all_buf (block p at displs[p]), each rank's block one_count x one_dt
 * at one_buf (MPI_IN_PLACE at the root). */
static bool v_rooted_post(bool gather, const void *one_buf, int one_count,
                          struct ompi_datatype_t *one_dt, const void *all_buf,
                          const int *all_counts, const int *displs, struct ompi_datatype_t *all_dt,
                          int root, struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                          ompi_request_t **request, int *rc)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const bool is_root = ompi_comm_rank(comm) == root;
    const bool in_place = is_root && MPI_IN_PLACE == one_buf;
    mca_coll_gpu_request_t *r;
    if (!v_begin(gather ? CGPU_NB_GATHERV : CGPU_NB_SCATTERV,
                 CGPU_ALLREDUCE_FALLBACK == (gather ? c->gather_algorithm : c->scatter_algorithm),
                 root, is_root ? all_buf : one_buf, comm, m, &r, request, rc)) {
        return false;
    }
    if (NULL == r) {
        return true;
    }
    if (is_root) { /* a gatherv's receive side keeps the bytes between its blocks */
        r->rc = v_side(r, 1, (void *) all_buf, all_counts, displs, all_dt, true, gather);
    }
    if (MPI_SUCCESS == r->rc && !in_place) {
        size_t es;
        ompi_datatype_type_size(one_dt, &es);
        r->bytes = one_count > 0 ? (size_t) one_count * es : 0;
        r->vmax = r->bytes > r->vmax ? r->bytes : r->vmax;
        void *one = NULL;
        r->rc = one_count < 0 ? MPI_ERR_COUNT
                              : mca_coll_gpu_nb_view_open(&r->v[0], (void *) one_buf, one_count, one_dt, r->bytes,
                                          gather, !gather, &one);
        r->s = one;
    }
    *rc = v_post(r, in_place ? NULL : one_dt, is_root ? all_dt : NULL, request);
    return true;
}

static int a2a_side(mca_coll_gpu_request_t *r, int i, const mca_coll_gpu_a2a_side_t *x, bool out)
{
    return NULL != x->dts ? w_side(r, i, x, out)
                          : v_side(r, i, (void *) x->buf, x->counts, x->displs, x->dt, true, out);
}

/* MPI_Ialltoallv and MPI_Ialltoallw (the same engine call, blocks of any sizes and types) */
static bool alltoall_post(mca_coll_gpu_nb_kind_t kind, const mca_coll_gpu_a2a_side_t *s,
                          const mca_coll_gpu_a2a_side_t *rv, struct ompi_communicator_t *comm,
                          mca_coll_gpu_module_t *m, ompi_request_t **request, int *rc)
{
    const bool in_place = MPI_IN_PLACE == s->buf; /* sent from the receive layout */
    mca_coll_gpu_request_t *r;
    if (!v_begin(kind, CGPU_ALLTOALL_FALLBACK == mca_coll_gpu_component.alltoall_algorithm, -1,
                 in_place ? rv->buf : s->buf, comm, m, &r, request, rc)) {
        return false;
    }
    if (NULL == r) {
        return true;
    }
    r->rc = a2a_side(r, 1, rv, true);
    if (MPI_SUCCESS == r->rc && !in_place) {
        r->rc = a2a_side(r, 0, s, false);
    }
    /* an alltoallw's types: the binding keeps the caller's arrays' (retain_datatypes_w) */
    *rc = v_post(r, in_place ? NULL : s->dt, rv->dt, request);
    return true;
}

/* ---- the others: staged only ---- */

static int nb_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                       int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (v_rooted_post(true, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm, m, request,
                      &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, is_root ? rbuf : NULL,
                       m->prev.coll_igatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root,
                                             comm, request, m->prev.coll_igatherv_module))
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_igatherv(hs, scount, sdt, hr, rcounts, displs, rdt,
                                                     root, comm, &r->inner,
                                                     m->prev.coll_igatherv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Igatherv");
}

static int nb_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdt, int root,
                       struct ompi_communicator_t *comm, ompi_request_t **request,
                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (rooted_post(false, rbuf, rcount, rdt, sbuf, scount, sdt, root, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, is_root ? sbuf : NULL, rbuf,
                       m->prev.coll_iscatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                                             request, m->prev.coll_iscatter_module))
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount * (size_t) ompi_comm_size(comm), sdt, false,
                       &hs);
    }
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) rcount, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iscatter(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                                     &r->inner, m->prev.coll_iscatter_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iscatter");
}

static int nb_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                        struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                        struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (v_rooted_post(false, rbuf, rcount, rdt, sbuf, scounts, displs, sdt, root, comm, m, request,
                      &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, is_root ? sbuf : NULL, rbuf,
                       m->prev.coll_iscatterv(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root,
                                              comm, request, m->prev.coll_iscatterv_module))
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, mca_coll_gpu_v_span(scounts, displs, ompi_comm_size(comm)), sdt, false, &hs);
    }
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) rcount, rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iscatterv(hs, scounts, displs, sdt, hr, rcount, rdt,
                                                      root, comm, &r->inner,
                                                      m->prev.coll_iscatterv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iscatterv");
}

static int nb_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                         struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                         const int *rdispls, struct ompi_datatype_t *rdt,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    const int n = ompi_comm_size(comm);
    int prc;
    const mca_coll_gpu_a2a_side_t sv = {sbuf, scounts, sdispls, sdt, NULL};
    const mca_coll_gpu_a2a_side_t rv = {rbuf, rcounts, rdispls, rdt, NULL};
    if (alltoall_post(CGPU_NB_ALLTOALLV, &sv, &rv, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ialltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts,
                                               rdispls, rdt, comm, request,
                                               m->prev.coll_ialltoallv_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, MPI_IN_PLACE == sbuf ? 0 : mca_coll_gpu_v_span(scounts, sdispls, n), sdt,
                       false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, rdispls, n), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, MPI_IN_PLACE == sbuf ? NULL : sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ialltoallv(hs, scounts, sdispls, sdt, hr, rcounts,
                                                       rdispls, rdt, comm, &r->inner,
                                                       m->prev.coll_ialltoallv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ialltoallv");
}

static int nb_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                         struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                         const int *rdispls, struct ompi_datatype_t *const *rdts,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    int prc;
    const mca_coll_gpu_a2a_side_t sv = {sbuf, scounts, sdispls, NULL, sdts};
    const mca_coll_gpu_a2a_side_t rv = {rbuf, rcounts, rdispls, NULL, rdts};
    if (alltoall_post(CGPU_NB_ALLTOALLW, &sv, &rv, comm, m, request, &prc)) {
        return prc;
    }
    const mca_coll_gpu_args_t a =
        mca_coll_gpu_alltoallw_args(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts);
    return mca_coll_gpu_nb_staged_call(m, comm, &a, mca_coll_gpu_alltoallw_spans, request);
}

static int nb_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, ompi_request_t **request,
                              mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    size_t total = 0;
    for (int i = 0; i < ompi_comm_size(comm); ++i) {
        total += (size_t) rcounts[i];
    }
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (total > 0 && plan_reduce_scatter(m, dtype, op, &dt, &eop, &create)) {
        return mca_coll_gpu_nb_post_reduction_counts(m, comm, CGPU_NB_REDUCE_SCATTER, create,
                                     MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, total, dt, eop, 0,
                                     mca_coll_gpu_engine_counts(rcounts, ompi_comm_size(comm)),
                                     request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf,
                       m->prev.coll_ireduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, request,
                                                    m->prev.coll_ireduce_scatter_module))
    const size_t mine = (size_t) rcounts[ompi_comm_rank(comm)];
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, total, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, MPI_IN_PLACE == sbuf ? total : mine, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter(hs, hr, rcounts, dtype, op, comm,
                                                            &r->inner,
                                                            m->prev.coll_ireduce_scatter_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ireduce_scatter");
}

static int nb_iscan_like(bool ex, const void *sbuf, void *rbuf, int count,
                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = M(module);
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_scan_engine_ok(count, dtype, op, ompi_comm_size(comm), &dt, &eop) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, ex ? CGPU_NB_EXSCAN : CGPU_NB_SCAN, create,
                              MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t) count, dt, eop, 0,
                              request);
    }
    mca_coll_base_module_iscan_fn_t fn = ex ? m->prev.coll_iexscan : m->prev.coll_iscan;
    mca_coll_base_module_t *pm = ex ? m->prev.coll_iexscan_module : m->prev.coll_iscan_module;
    op = mca_coll_gpu_prev_op(dtype, op); /* on every rank alike, host buffers too */
    CGPU_NB_STAGED_NEW_OR_PASS(r, sbuf, rbuf, fn(sbuf, rbuf, count, dtype, op, comm, request, pm))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(fn(hs, hr, count, dtype, op, comm, &r->inner, pm));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, ex ? "MPI_Iexscan" : "MPI_Iscan");
}

static int nb_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                    struct ompi_op_t *op, struct ompi_communicator_t *comm,
                    ompi_request_t **request, mca_coll_base_module_t *module)
{
    return nb_iscan_like(false, sbuf, rbuf, count, dtype, op, comm, request, module);
}

static int nb_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      ompi_request_t **request, mca_coll_base_module_t *module)
{
    return nb_iscan_like(true, sbuf, rbuf, count, dtype, op, comm, request, module);
}

void mca_coll_gpu_nb_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
    s->coll_iallreduce = nb_iallreduce;
    s->coll_ireduce = nb_ireduce;
    s->coll_ireduce_scatter_block = nb_ireduce_scatter_block;
    s->coll_ibcast = nb_ibcast;
    s->coll_iallgather = nb_iallgather;
    s->coll_ialltoall = nb_ialltoall;
    s->coll_iallgatherv = nb_iallgatherv;
    s->coll_igather = nb_igather;
    s->coll_igatherv = nb_igatherv;
    s->coll_iscatter = nb_iscatter;
    s->coll_iscatterv = nb_iscatterv;
    s->coll_ialltoallv = nb_ialltoallv;
    s->coll_ialltoallw = nb_ialltoallw;
    s->coll_ireduce_scatter = nb_ireduce_scatter;
    s->coll_iscan = nb_iscan;
    s->coll_iexscan = nb_iexscan;
}

/* The datatypes a rank's call names and may use: none for a buffer it does not pass (in
 * place), nor for a side a rooted call does not use on this rank: the root's whole
 * message elsewhere, and on an intercommunicator anything at MPI_PROC_NULL. */
#define SEND_DT(buf, dt) (MPI_IN_PLACE == (buf) ? NULL : (dt))
#define IS_ROOT mca_coll_gpu_is_root(comm, root)
#define MEMBER (!OMPI_COMM_IS_INTER(comm) || root >= 0) /* sends (gather) or receives */

/* one persistent init: a new request keeping the arguments INIT names (PARAMS: the coll
 * interface's list before the communicator) */
#define CGPU_PERSIST_INIT(name, PARAMS, INIT)                                                      \
    static int p_##name(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm,                     \
                        struct ompi_info_t *info, ompi_request_t **request,                        \
                        mca_coll_base_module_t *module)                                            \
    {                                                                                              \
        (void) info;                                                                               \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return mca_coll_gpu_persist_new(module, comm, &a, request);                                \
    }
#define P_BLOCKS                                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,            \
     struct ompi_datatype_t *rdt)
#define A_BLOCKS(k)                                                                                \
    (.kind = (k), .s = sbuf, .sc = scount, .sdt = SEND_DT(sbuf, sdt), .r = rbuf, .rc = rcount,     \
     .rdt = rdt)
#define P_GATHERV_ALL                                                                              \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,    \
     const int *displs, struct ompi_datatype_t *rdt)
#define A_GATHERV_ALL(k)                                                                           \
    (.kind = (k), .s = sbuf, .sc = scount, .sdt = SEND_DT(sbuf, sdt), .r = rbuf, .rcs = rcounts,   \
     .rds = displs, .rdt = rdt)
#define P_REDUCTION                                                                                \
    (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt, struct ompi_op_t *op)
#define A_REDUCTION(k)                                                                             \
    (.kind = (k), .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op, .root = -1)
#define P_V                                                                                        \
    (const void *sbuf, const int *scounts, const int *sdispls, struct ompi_datatype_t *sdt,        \
     void *rbuf, const int *rcounts, const int *rdispls, struct ompi_datatype_t *rdt)
#define A_V(k)                                                                                     \
    (.kind = (k), .s = sbuf, .scs = scounts, .sds = sdispls, .sdt = SEND_DT(sbuf, sdt), .r = rbuf, \
     .rcs = rcounts, .rds = rdispls, .rdt = rdt)
#define P_ROOTED                                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,            \
     struct ompi_datatype_t *rdt, int root)

CGPU_PERSIST_INIT(allgather, P_BLOCKS, A_BLOCKS(CGPU_K_ALLGATHER))
CGPU_PERSIST_INIT(alltoall, P_BLOCKS, A_BLOCKS(CGPU_K_ALLTOALL))
CGPU_PERSIST_INIT(nallgather, P_BLOCKS, A_BLOCKS(CGPU_K_NALLGATHER))
CGPU_PERSIST_INIT(nalltoall, P_BLOCKS, A_BLOCKS(CGPU_K_NALLTOALL))
CGPU_PERSIST_INIT(allgatherv, P_GATHERV_ALL, A_GATHERV_ALL(CGPU_K_ALLGATHERV))
CGPU_PERSIST_INIT(nallgatherv, P_GATHERV_ALL, A_GATHERV_ALL(CGPU_K_NALLGATHERV))
CGPU_PERSIST_INIT(allreduce, P_REDUCTION, A_REDUCTION(CGPU_K_ALLREDUCE))
CGPU_PERSIST_INIT(scan, P_REDUCTION, A_REDUCTION(CGPU_K_SCAN))
CGPU_PERSIST_INIT(exscan, P_REDUCTION, A_REDUCTION(CGPU_K_EXSCAN))
CGPU_PERSIST_INIT(reduce_scatter_block, P_REDUCTION, A_REDUCTION(CGPU_K_REDUCE_SCATTER_BLOCK))
CGPU_PERSIST_INIT(reduce,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op, int root),
                  (.kind = CGPU_K_REDUCE, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                   .root = root))
CGPU_PERSIST_INIT(reduce_scatter,
                  (const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_REDUCE_SCATTER, .s = sbuf, .r = rbuf, .rcs = rcounts, .rdt = dt,
                   .op = op))
CGPU_PERSIST_INIT(alltoallv, P_V, A_V(CGPU_K_ALLTOALLV))
CGPU_PERSIST_INIT(nalltoallv, P_V, A_V(CGPU_K_NALLTOALLV))
CGPU_PERSIST_INIT(nalltoallw,
                  (const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                   struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                   const MPI_Aint *rdispls, struct ompi_datatype_t *const *rdts),
                  (.kind = CGPU_K_NALLTOALLW, .s = sbuf, .scs = scounts, .sad = sdispls,
                   .sdts = sdts, .r = rbuf, .rcs = rcounts, .rad = rdispls, .rdts = rdts))
CGPU_PERSIST_INIT(alltoallw,
                  (const void *sbuf, const int *scounts, const int *sdispls,
                   struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                   const int *rdispls, struct ompi_datatype_t *const *rdts),
                  (.kind = CGPU_K_ALLTOALLW, .s = sbuf, .scs = scounts, .sds = sdispls,
                   .sdts = MPI_IN_PLACE == sbuf ? NULL : sdts, .r = rbuf, .rcs = rcounts,
                   .rds = rdispls, .rdts = rdts))
CGPU_PERSIST_INIT(bcast, (void *buf, int count, struct ompi_datatype_t *dt, int root),
                  (.kind = CGPU_K_BCAST, .r = buf, .rc = count, .rdt = dt, .root = root))
/* gather and scatter: the root's whole message, and each member's block */
CGPU_PERSIST_INIT(gather, P_ROOTED,
                  (.kind = CGPU_K_GATHER, .s = sbuf, .sc = scount,
                   .sdt = MPI_IN_PLACE != sbuf && MEMBER ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MPI_IN_PLACE != rbuf && IS_ROOT ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(scatter, P_ROOTED,
                  (.kind = CGPU_K_SCATTER, .s = sbuf, .sc = scount,
                   .sdt = MPI_IN_PLACE != sbuf && IS_ROOT ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MPI_IN_PLACE != rbuf && MEMBER ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(gatherv,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   const int *rcounts, const int *displs, struct ompi_datatype_t *rdt, int root),
                  (.kind = CGPU_K_GATHERV, .s = sbuf, .sc = scount,
                   .sdt = MEMBER ? SEND_DT(sbuf, sdt) : NULL, .r = rbuf, .rcs = rcounts,
                   .rds = displs, .rdt = IS_ROOT ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(scatterv,
                  (const void *sbuf, const int *scounts, const int *displs,
                   struct ompi_datatype_t *sdt, void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                   int root),
                  (.kind = CGPU_K_SCATTERV, .s = sbuf, .scs = scounts, .sds = displs,
                   .sdt = IS_ROOT ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MEMBER ? SEND_DT(rbuf, rdt) : NULL, .root = root))

void mca_coll_gpu_persist_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
    /* each persistent form where this module has the non-blocking one it starts */
#define CGPU_PERSIST(name, fn) s->coll_##name##_init = NULL != s->coll_i##name ? (fn) : NULL;
    CGPU_PERSIST(allgather, p_allgather)
    CGPU_PERSIST(allgatherv, p_allgatherv)
    CGPU_PERSIST(allreduce, p_allreduce)
    CGPU_PERSIST(alltoall, p_alltoall)
    CGPU_PERSIST(alltoallv, p_alltoallv)
    CGPU_PERSIST(alltoallw, p_alltoallw)
    CGPU_PERSIST(bcast, p_bcast)
    CGPU_PERSIST(exscan, p_exscan)
    CGPU_PERSIST(gather, p_gather)
    CGPU_PERSIST(gatherv, p_gatherv)
    CGPU_PERSIST(reduce, p_reduce)
    CGPU_PERSIST(reduce_scatter, p_reduce_scatter)
    CGPU_PERSIST(reduce_scatter_block, p_reduce_scatter_block)
    CGPU_PERSIST(scan, p_scan)
    CGPU_PERSIST(scatter, p_scatter)
    CGPU_PERSIST(scatterv, p_scatterv)
    CGPU_PERSIST(neighbor_allgather, p_nallgather)
    CGPU_PERSIST(neighbor_allgatherv, p_nallgatherv)
    CGPU_PERSIST(neighbor_alltoall, p_nalltoall)
    CGPU_PERSIST(neighbor_alltoallv, p_nalltoallv)
    CGPU_PERSIST(neighbor_alltoallw, p_nalltoallw)
#undef CGPU_PERSIST
}
