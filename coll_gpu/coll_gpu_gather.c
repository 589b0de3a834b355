/*
 * coll/gpu: MPI_Allgather, MPI_Allgatherv, MPI_Gather and MPI_Scatter on the engine. Each
 * runs as one engine collective whose size every rank knows from arguments MPI requires to
 * match: allgatherv as an allgather of blocks padded to the largest count, gather as an
 * allgather, scatter as a broadcast of the root's whole message (the engine keeps the
 * whole message on the ranks that only need a part of it, coll_gpu_gather_scratch_bytes at
 * most). The path depends on those sizes and MCA params alone (decision 2); a layout that
 * is not one gap-free run is packed on the host around the engine call, whatever the other
 * ranks' layouts. The non-blocking forms (MPI_Iallgather, ...) decide alike and post the same
 * engine call to the communicator's worker; the persistent ones (MPIX_Allgather_init, ...)
 * start the non-blocking ones.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include "ompi/datatype/ompi_datatype.h"

/* One side of an engine call: the user's count x dtype at buf as contiguous bytes (run),
 * directly when they are one gap-free run, else packed on the host (pack), from a host
 * mirror when buf is device memory. */
typedef struct gather_side {
    mca_coll_gpu_mirror_t mirror;
    void *host; /* buf, or its host mirror */
    char *pack; /* malloc'd packed bytes, or NULL */
    const char *run;
    size_t count;
    struct ompi_datatype_t *dt;
} gather_side_t;

/* fill: pack the user's bytes (a send side, or an in-place receive side) */
static int side_open(gather_side_t *sd, const void *buf, size_t count, struct ompi_datatype_t *dt,
                     bool fill)
{
    memset(sd, 0, sizeof(*sd));
    sd->host = (void *) buf;
    sd->count = count;
    sd->dt = dt;
    if (count <= (size_t) INT_MAX && mca_coll_gpu_contiguous_run(buf, (int) count, dt, &sd->run)) {
        return MPI_SUCCESS;
    }
    size_t es;
    ompi_datatype_type_size(dt, &es);
    int rc = MPI_SUCCESS;
    if (mca_coll_gpu_on_device_at(buf, count, dt)) { /* the whole span: gaps keep their bytes */
        rc = mca_coll_gpu_mirror_in(&sd->mirror, buf, count, dt, &sd->host);
    }
    if (MPI_SUCCESS == rc) {
        sd->pack = malloc(count * es > 0 ? count * es : 1);
        rc = NULL == sd->pack ? MPI_ERR_NO_MEM : MPI_SUCCESS;
    }
    if (MPI_SUCCESS == rc && fill) {
        rc = mca_coll_gpu_typed_copy(sd->host, sd->pack, count, dt, true);
    }
    sd->run = sd->pack;
    return rc;
}

/* back: unpack into the user's buffer (a receive side) when rc is success */
static int side_close(gather_side_t *sd, int rc, bool back)
{
    if (back && MPI_SUCCESS == rc && NULL != sd->pack) {
        rc = mca_coll_gpu_typed_copy(sd->pack, sd->host, sd->count, sd->dt, false);
    }
    free(sd->pack);
    sd->pack = NULL;
    if (back) {
        return mca_coll_gpu_mirror_out(&sd->mirror, rc);
    }
    mca_coll_gpu_mirror_drop(&sd->mirror);
    return rc;
}

cgpu_comm_t *mca_coll_gpu_padded_engine(mca_coll_gpu_module_t *m, bool off, size_t bytes,
                                        const void *buf, int n)
{
    if (mca_coll_gpu_nested() || off || 0 == bytes || bytes > mca_coll_gpu_padded_max(n)) {
        return NULL;
    }
    mca_coll_gpu_lazy_init(m, buf);
    return CGPU_MODULE_READY == m->state ? m->ecomm : NULL;
}

int mca_coll_gpu_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Allgather", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const bool in_place = MPI_IN_PLACE == sbuf;
    if (mca_coll_gpu_nested() ||
        CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.allgather_algorithm || rcount <= 0 ||
        (!in_place && scount < 0)) {
        return mca_coll_gpu_staged_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, module);
    }
    const size_t n = (size_t) ompi_comm_size(comm);
    size_t rsize;
    ompi_datatype_type_size(rdt, &rsize);
    const size_t bytes = (size_t) rcount * rsize; /* per rank, equal everywhere */
    if (mca_coll_gpu_host_leaves(m, MCA_COLL_GPU_HOST_ALLGATHER, bytes)) {
        return mca_coll_gpu_staged_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, module);
    }
    mca_coll_gpu_lazy_init(m, in_place ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, module);
    }
    gather_side_t s = {0}, r = {0};
    /* in place: this rank's own block is packed with the rest */
    int rc = side_open(&r, rbuf, (size_t) rcount * n, rdt, in_place);
    if (MPI_SUCCESS == rc && !in_place) {
        rc = side_open(&s, sbuf, (size_t) scount, sdt, true);
    }
    const void *src = in_place ? NULL : s.run;
    void *dst = (void *) r.run;
    char *scratch = NULL;
    if (MPI_SUCCESS != rc) { /* take part anyway, on zeroed scratch, so no peer waits */
        scratch = calloc(1, bytes * n);
        src = NULL;
        dst = scratch;
    }
    cgpu_status_t st = CGPU_ERR_NO_MEMORY;
    if (NULL != dst) {
        st = MCA_COLL_GPU_ENGINE(m, cgpu_allgather(m->ecomm, src, dst, bytes));
    }
    free(scratch);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_engine_rc(st, "MPI_Allgather", comm);
    }
    side_close(&s, MPI_SUCCESS, false);
    return side_close(&r, rc, true);
}

int mca_coll_gpu_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Allgatherv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const int n = ompi_comm_size(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    size_t rsize, maxb, total;
    const bool valid =
        mca_coll_gpu_allgatherv_sizes(in_place, scount, rcounts, rdt, n, &rsize, &maxb, &total);
    const bool off = CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.allgather_algorithm;
    cgpu_comm_t *ec =
        valid ? mca_coll_gpu_padded_engine(m, off, maxb, in_place ? rbuf : sbuf, n) : NULL;
    if (NULL == ec) {
        return mca_coll_gpu_staged_allgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm,
                                              module);
    }
    /* every rank's bytes, and where its block lies in one run over the blocks' span of
     * elements: the user's own when they are back to back, else packed on the host (from a
     * mirror of a device buffer) with the bytes between the blocks kept */
    size_t *bytes = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * (size_t) n);
    if (NULL == bytes) { /* a local failure before any exchange: peers then time out */
        return MPI_ERR_NO_MEM;
    }
    ptrdiff_t *offs = (ptrdiff_t *) (bytes + n), lo, hi, lb, ext;
    mca_coll_gpu_allgatherv_layout(rcounts, displs, n, rsize, bytes, offs, &lo, &hi);
    ompi_datatype_get_extent(rdt, &lb, &ext);
    gather_side_t r = {0}, s = {0};
    int rc = side_open(&r, (char *) rbuf + lo * ext, (size_t) (hi - lo), rdt, true);
    if (MPI_SUCCESS == rc && !in_place) {
        rc = side_open(&s, sbuf, (size_t) scount, sdt, true);
    }
    char *scratch = NULL;
    const void *src = in_place ? NULL : s.run;
    char *dst = (char *) r.run;
    if (MPI_SUCCESS != rc) { /* take part anyway: blocks back to back on zeroed scratch */
        scratch = calloc(1, total > 0 ? total : 1);
        src = NULL;
        dst = scratch;
        ptrdiff_t at = 0;
        for (int p = 0; p < n; ++p) {
            offs[p] = at;
            at += (ptrdiff_t) bytes[p];
        }
    }
    cgpu_status_t st = CGPU_ERR_NO_MEMORY;
    if (NULL != dst) {
        st = MCA_COLL_GPU_ENGINE(m, cgpu_allgatherv(ec, src, dst, bytes, offs));
    }
    free(scratch);
    free(bytes);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_engine_rc(st, "MPI_Allgatherv", comm);
    }
    side_close(&s, MPI_SUCCESS, false);
    return side_close(&r, rc, true);
}

/* MPI_Gather (gather) and MPI_Scatter: the root's whole message is all_count x all_dt at
 * all_buf (significant at the root only), each rank's block one_count x one_dt at one_buf
 * (MPI_IN_PLACE at the root: its block stays in the whole message). OMPI_ERR_NOT_AVAILABLE:
 * the engine does not take the call (the same answer on every rank). */
static int rooted(bool gather, const void *one_buf, int one_count, struct ompi_datatype_t *one_dt,
                  const void *all_buf, int all_count, struct ompi_datatype_t *all_dt, int root,
                  struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    const int n = ompi_comm_size(comm);
    const bool is_root = ompi_comm_rank(comm) == root, in_place = MPI_IN_PLACE == one_buf;
    /* the bytes per rank: the root's count of the whole message, everyone else's own */
    size_t es;
    ompi_datatype_type_size(is_root ? all_dt : one_dt, &es);
    const int count = is_root ? all_count : one_count;
    if (count < 0) {
        return OMPI_ERR_NOT_AVAILABLE;
    }
    const size_t bytes = (size_t) count * es;
    const int algorithm =
        gather ? mca_coll_gpu_component.gather_algorithm : mca_coll_gpu_component.scatter_algorithm;
    cgpu_comm_t *ec = mca_coll_gpu_padded_engine(m, CGPU_ALLREDUCE_FALLBACK == algorithm, bytes,
                                                 is_root ? all_buf : one_buf, n);
    if (NULL == ec) {
        return OMPI_ERR_NOT_AVAILABLE;
    }
    gather_side_t one = {0}, all = {0};
    /* the root's own block disagreeing with its whole message is its error alone: it still
     * takes part (on scratch) so that no peer waits */
    int rc = is_root && !in_place && one_count < 0 ? MPI_ERR_COUNT : MPI_SUCCESS;
    if (MPI_SUCCESS == rc && is_root) { /* gather in place: the root's block packed too */
        rc = side_open(&all, all_buf, (size_t) all_count * (size_t) n, all_dt, !gather || in_place);
    }
    if (MPI_SUCCESS == rc && !in_place) { /* a scatter's receive side: gaps keep their bytes */
        rc = side_open(&one, one_buf, (size_t) one_count, one_dt, gather);
    }
    const char *one_run = in_place ? NULL : one.run, *all_run = is_root ? all.run : NULL;
    char *scratch = NULL;
    if (MPI_SUCCESS != rc) { /* take part anyway, on zeroed scratch */
        scratch = calloc(1, bytes * (size_t) (is_root ? n : 1));
        one_run = is_root ? NULL : scratch;
        all_run = is_root ? scratch : NULL;
    }
    cgpu_status_t st = CGPU_ERR_NO_MEMORY;
    if (NULL != (is_root ? all_run : one_run)) {
        st = gather
                 ? MCA_COLL_GPU_ENGINE(m, cgpu_gather(ec, one_run, (void *) all_run, bytes, root))
                 : MCA_COLL_GPU_ENGINE(m, cgpu_scatter(ec, all_run, (void *) one_run, bytes, root,
                                                       (cgpu_scatter_alg_t) algorithm));
    }
    free(scratch);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_engine_rc(st, gather ? "MPI_Gather" : "MPI_Scatter", comm);
    }
    /* what was received goes back: the root's whole message, or a scatter's block */
    rc = in_place ? rc : side_close(&one, rc, !gather);
    return is_root ? side_close(&all, rc, gather) : rc;
}

int mca_coll_gpu_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdt, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Gather", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    int rc = rooted(true, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                    (mca_coll_gpu_module_t *) module);
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_gather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                                            module);
}

int mca_coll_gpu_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Scatter", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    int rc = rooted(false, rbuf, rcount, rdt, sbuf, scount, sdt, root, comm,
                    (mca_coll_gpu_module_t *) module);
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                                             module);
}

/* ---- non-blocking: the engine when every rank can tell, decided as the blocking calls ---- */

int mca_coll_gpu_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                            int rcount, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Iallgather", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    bool create;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const int n = ompi_comm_size(comm);
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.allgather_algorithm && rcount > 0 &&
        (in_place || scount >= 0) && mca_coll_gpu_nb_plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r =
            mca_coll_gpu_nb_engine_request(m, comm, create, in_place ? rbuf : sbuf);
        if (NULL == r) {
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        }
        size_t rsize;
        ompi_datatype_type_size(rdt, &rsize);
        r->kind = CGPU_NB_ALLGATHER;
        r->bytes = (size_t) rcount * rsize;
        void *s = NULL;
        r->rc = mca_coll_gpu_nb_view_open(&r->v[1], rbuf, rcount * n, rdt, r->bytes * (size_t) n,
                                          in_place, true, &r->r);
        if (MPI_SUCCESS == r->rc && !in_place) {
            r->rc = mca_coll_gpu_nb_view_open(&r->v[0], (void *) sbuf, scount, sdt, r->bytes, true,
                                              false, &s);
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
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, (size_t) scount, sdt) ||
            mca_coll_gpu_on_device_at(rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt),
        m->prev.coll_iallgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, request,
                                m->prev.coll_iallgather_module))
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

/* MPI_Igather (gather) and MPI_Iscatter on the engine, decided as the blocking calls decide
 * (rooted()): the bytes per rank come from the root's count of the whole message and
 * everyone else's own block, which MPI requires to match. The root's whole message is
 * all_count x all_dt at all_buf, each rank's block one_count x one_dt at one_buf
 * (MPI_IN_PLACE at the root). false: the engine does not take the call (the same on every
 * rank); true: it was posted, *rc is the post's answer. */
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
    mca_coll_gpu_request_t *r =
        mca_coll_gpu_nb_engine_request(m, comm, create, is_root ? all_buf : one_buf);
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
        r->rc = mca_coll_gpu_nb_view_open(&r->v[1], (void *) all_buf, all_count * n, all_dt,
                                          bytes * (size_t) n, !gather || in_place, gather, &all);
    }
    if (MPI_SUCCESS == r->rc && !in_place) { /* a scatter's block: gaps keep their bytes */
        r->rc = mca_coll_gpu_nb_view_open(&r->v[0], (void *) one_buf, one_count, one_dt, bytes,
                                          gather, !gather, &one);
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
    const bool valid =
        mca_coll_gpu_allgatherv_sizes(in_place, scount, rcounts, rdt, n, &rsize, &maxb, &total);
    bool create;
    if (!valid || CGPU_ALLREDUCE_FALLBACK == c->allgather_algorithm || 0 == maxb ||
        maxb > mca_coll_gpu_padded_max(n) || !mca_coll_gpu_nb_plan_engine(m, &create)) {
        return false;
    }
    mca_coll_gpu_request_t *r =
        mca_coll_gpu_nb_engine_request(m, comm, create, in_place ? rbuf : sbuf);
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
    r->rc = mca_coll_gpu_nb_span_view(&r->v[1], rbuf, rcounts, displs, rdt, n, true, true,
                                      r->counts, r->offs, &maxb, &rv);
    if (MPI_SUCCESS == r->rc && !in_place) {
        size_t ssize;
        ompi_datatype_type_size(sdt, &ssize);
        r->rc = (size_t) scount * ssize != r->counts[me]
                    ? MPI_ERR_TRUNCATE
                    : mca_coll_gpu_nb_view_open(&r->v[0], (void *) sbuf, scount, sdt, r->counts[me],
                                                true, false, &s);
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

int mca_coll_gpu_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                             const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                             struct ompi_communicator_t *comm, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Iallgatherv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    int prc;
    if (allgatherv_post(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, (size_t) scount, sdt) ||
            mca_coll_gpu_v_on_device(rbuf, rcounts, displs, ompi_comm_size(comm), rdt),
        m->prev.coll_iallgatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm, request,
                                 m->prev.coll_iallgatherv_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(
            r, 1, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_iallgatherv(hs, scount, sdt, hr, rcounts, displs, rdt,
                                                        comm, &r->inner,
                                                        m->prev.coll_iallgatherv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Iallgatherv");
}

int mca_coll_gpu_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Igather", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (rooted_post(true, sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, (size_t) scount, sdt) ||
            (is_root &&
             mca_coll_gpu_on_device_at(rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm), rdt)),
        m->prev.coll_igather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, request,
                             m->prev.coll_igather_module))
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) rcount * (size_t) ompi_comm_size(comm),
                                       rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_igather(hs, scount, sdt, hr, rcount, rdt, root, comm,
                                                    &r->inner, m->prev.coll_igather_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Igather");
}

int mca_coll_gpu_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdt, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Iscatter", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (rooted_post(false, rbuf, rcount, rdt, sbuf, scount, sdt, root, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        (is_root &&
         mca_coll_gpu_on_device_at(sbuf, (size_t) scount * (size_t) ompi_comm_size(comm), sdt)) ||
            mca_coll_gpu_on_device_at(rbuf, (size_t) rcount, rdt),
        m->prev.coll_iscatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, request,
                              m->prev.coll_iscatter_module))
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount * (size_t) ompi_comm_size(comm),
                                       sdt, false, &hs);
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

/* ---- persistent ---- */

CGPU_PERSIST_INIT(mca_coll_gpu_allgather_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_ALLGATHER, .s = sbuf, .sc = scount,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rc = rcount, .rdt = rdt))
CGPU_PERSIST_INIT(mca_coll_gpu_allgatherv_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   const int *rcounts, const int *displs, struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_ALLGATHERV, .s = sbuf, .sc = scount,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rcs = rcounts, .rds = displs,
                   .rdt = rdt))
/* gather and scatter: the root's whole message, and each member's block */
CGPU_PERSIST_INIT(mca_coll_gpu_gather_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdt, int root),
                  (.kind = CGPU_K_GATHER, .s = sbuf, .sc = scount,
                   .sdt = MPI_IN_PLACE != sbuf && CGPU_MEMBER ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = MPI_IN_PLACE != rbuf && CGPU_IS_ROOT ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(mca_coll_gpu_scatter_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdt, int root),
                  (.kind = CGPU_K_SCATTER, .s = sbuf, .sc = scount,
                   .sdt = MPI_IN_PLACE != sbuf && CGPU_IS_ROOT ? sdt : NULL, .r = rbuf,
                   .rc = rcount, .rdt = MPI_IN_PLACE != rbuf && CGPU_MEMBER ? rdt : NULL,
                   .root = root))
