/*
 * coll/gpu: MPI_Gatherv, MPI_Scatterv, MPI_Alltoallv and MPI_Alltoallw on the engine.
 *
 * No rank sees every count of these (a gatherv's non-root ranks know their own block
 * only, an alltoallv's ranks their own row and column), so no rank can pick the path
 * alone (decision 2). The ranks first agree: one allreduce (MAX) on the previous module,
 * over host memory, of each rank's largest block and its veto. The engine then runs the
 * uniform collective of blocks padded to the largest (cgpu_gatherv, cgpu_scatterv,
 * cgpu_alltoallv); a veto, the algorithm "fallback" or a padded message above
 * coll_gpu_gather_scratch_bytes sends the call to the previous module on every rank,
 * staged. A rank vetoes when its counts are negative, its elements are not back to back
 * (a derived datatype with gaps: the staged path packs those), or it has no memory for
 * the layout: all before any exchange, so no peer is left waiting. MPI_Alltoallw is an
 * alltoallv whose blocks each have their own datatype and a displacement in bytes.
 *
 * The non-blocking forms (MPI_Igatherv, MPI_Iscatterv, MPI_Ialltoallv, MPI_Ialltoallw) cannot
 * wait for that agreement at the post: the engine takes them on the algorithm param and the
 * module's state alone, and the ranks agree on the largest block on the communicator's
 * worker (coll_gpu_worker.c); the persistent forms start the non-blocking ones.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include "ompi/datatype/ompi_datatype.h"

/* One rank's layout of counts x dt at buf, block p at displs[p] elements, as the engine
 * takes it. */
typedef struct v_side {
    cgpu_blocks_t b;
    size_t largest; /* bytes of its largest block */
} v_side_t;

/* An alltoallv or alltoallw side as the caller passed it: one type for every block (dt,
 * displacements in elements), or one per block (dts, displacements in bytes). */
typedef struct a2a_side {
    const void *buf;
    const int *counts, *displs;
    struct ompi_datatype_t *dt;
    struct ompi_datatype_t *const *dts;
} a2a_side_t;

/* Its n blocks as the engine takes them: block p is bytes[p] at buf + offs[p]; *largest the
 * largest; *gaps: some block's elements are not back to back (its offs then not a run).
 * MPI_ERR_COUNT: a negative count. */
static int a2a_blocks(const a2a_side_t *x, int n, size_t *bytes, ptrdiff_t *offs, size_t *largest,
                      bool *gaps)
{
    const char *buf = x->buf;
    ptrdiff_t lb, ext = 0;
    if (NULL == x->dts) {
        ompi_datatype_get_extent(x->dt, &lb, &ext);
    }
    *largest = 0;
    *gaps = false;
    for (int p = 0; p < n; ++p) {
        struct ompi_datatype_t *dt = NULL != x->dts ? x->dts[p] : x->dt;
        const char *run =
            buf + (NULL != x->dts ? (ptrdiff_t) x->displs[p] : (ptrdiff_t) x->displs[p] * ext);
        size_t es = 0;
        if (x->counts[p] < 0) {
            return MPI_ERR_COUNT;
        }
        if (x->counts[p] > 0) { /* an empty block's type is not looked at */
            ompi_datatype_type_size(dt, &es);
            /* elements back to back: two of them form one run (a block of one too) */
            *gaps = !mca_coll_gpu_contiguous_run(run, 2, dt, &run) || *gaps;
        }
        bytes[p] = (size_t) x->counts[p] * es;
        offs[p] = run - buf;
        *largest = bytes[p] > *largest ? bytes[p] : *largest;
    }
    return MPI_SUCCESS;
}

/* false: a veto (a negative count, elements with gaps, no memory) */
static bool side_layout(v_side_t *v, const a2a_side_t *x, int n)
{
    memset(v, 0, sizeof(*v));
    size_t *bytes = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * (size_t) n);
    if (NULL == bytes) {
        return false;
    }
    ptrdiff_t *offs = (ptrdiff_t *) (bytes + n);
    bool gaps;
    const int rc = a2a_blocks(x, n, bytes, offs, &v->largest, &gaps);
    /* the base is the first byte a block addresses, so that the engine reads the memory's
     * kind there: an MPI_BOTTOM buffer's blocks sit at absolute displacements */
    ptrdiff_t first = 0;
    bool any = false;
    for (int p = 0; MPI_SUCCESS == rc && p < n; ++p) {
        if (bytes[p] > 0) {
            first = any && first < offs[p] ? first : offs[p];
            any = true;
        }
    }
    for (int p = 0; MPI_SUCCESS == rc && p < n; ++p) {
        offs[p] = bytes[p] > 0 ? offs[p] - first : 0;
    }
    v->b = (cgpu_blocks_t){.base = (char *) x->buf + first, .bytes = bytes, .offs = offs};
    return MPI_SUCCESS == rc && !gaps;
}

static void side_free(v_side_t *v)
{
    free((void *) v->b.bytes); /* offs live in the same allocation */
    v->b.bytes = NULL;
}

/* One block (count x dt at buf) as a run of bytes; false: a veto. */
static bool one_block(const void *buf, int count, struct ompi_datatype_t *dt, const char **run,
                      size_t *bytes)
{
    size_t es;
    ompi_datatype_type_size(dt, &es);
    *bytes = count > 0 ? (size_t) count * es : 0;
    return count >= 0 && mca_coll_gpu_contiguous_run(buf, count, dt, run);
}

/* Whether the engine may take the call at all: not a nested call, not the algorithm
 * "fallback" (@p off), not a module whose set-up failed (all alike on every rank). Asked
 * first, so a call the engine cannot take costs no layout and no agreement. */
static bool v_wanted(const mca_coll_gpu_module_t *m, bool off)
{
    return !mca_coll_gpu_nested() && !off && CGPU_MODULE_FALLBACK != m->state;
}

/* The agreement: the engine communicator and every rank's largest block (*maxb), or NULL
 * (staged, on every rank; *rc then holds an error of the agreement itself, if any). */
static cgpu_comm_t *v_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm, size_t mine,
                            bool veto, const void *buf, size_t *maxb, int *rc)
{
    long long in[2] = {mine > (size_t) LLONG_MAX ? LLONG_MAX : (long long) mine, veto ? 1 : 0};
    long long out[2] = {0, 1};
    *rc = MCA_COLL_GPU_PREV(m->prev.coll_allreduce(in, out, 2, MPI_LONG_LONG, MPI_MAX, comm,
                                                   m->prev.coll_allreduce_module));
    if (MPI_SUCCESS != *rc || 0 != out[1]) {
        return NULL;
    }
    *maxb = (size_t) out[0];
    return mca_coll_gpu_padded_engine(m, false, *maxb, buf, ompi_comm_size(comm));
}

/* MPI_Gatherv (gather) and MPI_Scatterv: the root's whole message is all_counts x all_dt at
 * all_buf, block p at displs[p] (significant at the root only), each rank's block one_count
 * x one_dt at one_buf (MPI_IN_PLACE at the root: its block stays in the whole message).
 * OMPI_ERR_NOT_AVAILABLE: the staged path takes the call (the same answer on every rank). */
static int v_rooted(bool gather, const void *one_buf, int one_count, struct ompi_datatype_t *one_dt,
                    const void *all_buf, const int *all_counts, const int *displs,
                    struct ompi_datatype_t *all_dt, int root, struct ompi_communicator_t *comm,
                    mca_coll_gpu_module_t *m)
{
    const int algorithm =
        gather ? mca_coll_gpu_component.gather_algorithm : mca_coll_gpu_component.scatter_algorithm;
    if (!v_wanted(m, CGPU_ALLREDUCE_FALLBACK == algorithm)) {
        return OMPI_ERR_NOT_AVAILABLE;
    }
    const bool is_root = ompi_comm_rank(comm) == root,
               in_place = is_root && MPI_IN_PLACE == one_buf;
    const char *one_run = NULL;
    size_t one_bytes = 0, maxb = 0;
    bool ok = in_place || one_block(one_buf, one_count, one_dt, &one_run, &one_bytes);
    v_side_t all = {0};
    if (is_root) { /* the counts, displs and type of the whole message: the root's only */
        const a2a_side_t x = {all_buf, all_counts, displs, all_dt, NULL};
        ok = side_layout(&all, &x, ompi_comm_size(comm)) && ok;
    }
    int rc;
    cgpu_comm_t *ec = v_agree(m, comm, one_bytes > all.largest ? one_bytes : all.largest, !ok,
                              is_root ? (const void *) all.b.base : one_buf, &maxb, &rc);
    if (NULL == ec) {
        side_free(&all);
        return MPI_SUCCESS != rc ? rc : OMPI_ERR_NOT_AVAILABLE;
    }
    const cgpu_blocks_t *b = is_root ? &all.b : NULL;
    void *one = in_place ? NULL : (void *) one_run;
    cgpu_status_t st = gather
                           ? MCA_COLL_GPU_ENGINE(m, cgpu_gatherv(ec, one, one_bytes, b, maxb, root))
                           : MCA_COLL_GPU_ENGINE(m, cgpu_scatterv(ec, b, one, one_bytes, maxb, root,
                                                                  (cgpu_scatter_alg_t) algorithm));
    side_free(&all);
    return mca_coll_gpu_engine_rc(st, gather ? "MPI_Gatherv" : "MPI_Scatterv", comm);
}

int mca_coll_gpu_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                         int root, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Gatherv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    int rc = v_rooted(true, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm,
                      (mca_coll_gpu_module_t *) module);
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_gatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root,
                                             comm, module);
}

int mca_coll_gpu_scatterv(const void *sbuf, const int *scounts, const int *displs,
                          struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module)
{
    const int refused =
        mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Scatterv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    int rc = v_rooted(false, rbuf, rcount, rdt, sbuf, scounts, displs, sdt, root, comm,
                      (mca_coll_gpu_module_t *) module);
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_scatterv(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root,
                                              comm, module);
}

/* An alltoallv or alltoallw: the layouts, the agreement, then the engine's padded alltoall;
 * OMPI_ERR_NOT_AVAILABLE: the staged path takes the call (the same answer on every rank). */
static int alltoall_any(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                        const a2a_side_t *sx, const a2a_side_t *rx, const char *name)
{
    if (!v_wanted(m, CGPU_ALLTOALL_FALLBACK == mca_coll_gpu_component.alltoall_algorithm)) {
        return OMPI_ERR_NOT_AVAILABLE;
    }
    const int n = ompi_comm_size(comm);
    const bool in_place = MPI_IN_PLACE == sx->buf; /* sent from the receive layout */
    v_side_t s = {0}, r = {0};
    bool ok = side_layout(&r, rx, n);
    if (!in_place) {
        ok = side_layout(&s, sx, n) && ok;
    }
    size_t maxb = 0;
    int rc;
    cgpu_comm_t *ec = v_agree(m, comm, s.largest > r.largest ? s.largest : r.largest, !ok,
                              in_place ? r.b.base : s.b.base, &maxb, &rc);
    if (NULL != ec) {
        cgpu_status_t st = MCA_COLL_GPU_ENGINE(
            m, cgpu_alltoallv(ec, in_place ? NULL : &s.b, &r.b, maxb,
                              (cgpu_alltoall_alg_t) mca_coll_gpu_component.alltoall_algorithm));
        rc = mca_coll_gpu_engine_rc(st, name, comm);
    } else if (MPI_SUCCESS == rc) {
        rc = OMPI_ERR_NOT_AVAILABLE;
    }
    side_free(&s);
    side_free(&r);
    return rc;
}

int mca_coll_gpu_alltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                           struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                           const int *rdispls, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    const int refused =
        mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Alltoallv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const a2a_side_t s = {sbuf, scounts, sdispls, sdt, NULL};
    const a2a_side_t r = {rbuf, rcounts, rdispls, rdt, NULL};
    const int rc = alltoall_any((mca_coll_gpu_module_t *) module, comm, &s, &r, "MPI_Alltoallv");
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_alltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls,
                                               rdt, comm, module);
}

int mca_coll_gpu_alltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                           struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                           const int *rdispls, struct ompi_datatype_t *const *rdts,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    const int refused =
        mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Alltoallw", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const a2a_side_t s = {sbuf, scounts, sdispls, NULL, sdts};
    const a2a_side_t r = {rbuf, rcounts, rdispls, NULL, rdts};
    const int rc = alltoall_any((mca_coll_gpu_module_t *) module, comm, &s, &r, "MPI_Alltoallw");
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_alltoallw(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls,
                                               rdts, comm, module);
}

/* ---- non-blocking: the engine takes the call, the worker agrees on the largest block ---- */

/* Side @p i of a v-form (mca_coll_gpu_nb_span_view): its blocks in vb[i], its largest in
 * vmax. */
static int nb_v_side(mca_coll_gpu_request_t *r, int i, void *buf, const int *counts,
                     const int *displs, struct ompi_datatype_t *dt, bool in, bool out)
{
    size_t largest = 0;
    void *base = NULL;
    r->vb[i] = (cgpu_blocks_t){.bytes = mca_coll_gpu_nb_v_bytes(r, i, 0),
                               .offs = mca_coll_gpu_nb_v_offs(r, i, 0)};
    int rc = mca_coll_gpu_nb_span_view(
        &r->v[i], buf, counts, displs, dt, ompi_comm_size(r->m->comm), in, out,
        mca_coll_gpu_nb_v_bytes(r, i, 0), mca_coll_gpu_nb_v_offs(r, i, 0), &largest, &base);
    r->vb[i].base = base;
    r->vmax = largest > r->vmax ? largest : r->vmax;
    return rc;
}

/* Side @p i of an MPI_Ialltoallw (a2a_blocks' layout). Where every block is a gap-free run
 * the engine reads or writes the user's buffer, else every block is packed on the host,
 * back to back (mca_coll_gpu_nb_view_open_w). */
static int nb_w_side(mca_coll_gpu_request_t *r, int i, const a2a_side_t *x, bool out)
{
    const int n = ompi_comm_size(r->m->comm);
    size_t *bytes = mca_coll_gpu_nb_v_bytes(r, i, 0), largest;
    ptrdiff_t *offs = mca_coll_gpu_nb_v_offs(r, i, 0);
    void *base = (void *) x->buf;
    bool gaps;
    r->vb[i] = (cgpu_blocks_t){.base = base, .bytes = bytes, .offs = offs};
    int rc = a2a_blocks(x, n, bytes, offs, &largest, &gaps);
    r->vmax = largest > r->vmax ? largest : r->vmax;
    if (MPI_SUCCESS != rc || !gaps) {
        return rc;
    }
    ptrdiff_t at = 0;
    for (int p = 0; p < n; ++p) {
        offs[p] = at;
        at += (ptrdiff_t) bytes[p];
    }
    rc = mca_coll_gpu_nb_view_open_w(&r->v[i], base, x->counts, x->displs, x->dts, n, (size_t) at,
                                     true, out, &base);
    r->vb[i].base = base;
    return rc;
}

/* A v-form's request, when the engine takes the call: as the blocking forms, unless the
 * algorithm is fallback (@p off) or the engine is not planned (the same on every rank).
 * false: not taken; true: *out is the request to fill in, or NULL with *rc the post's
 * answer (no memory). */
static bool nb_v_begin(mca_coll_gpu_nb_kind_t kind, bool off, int root, const void *buf,
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
    /* mca_coll_gpu_nb_v_bytes, _v_offs */
    r->counts = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * 4 * n);
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
static int nb_v_post(mca_coll_gpu_request_t *r, struct ompi_datatype_t *a,
                     struct ompi_datatype_t *b, ompi_request_t **request)
{
    if (MPI_SUCCESS != r->rc) {
        for (int i = 0; i < 2; ++i) { /* the sides nb_v_side began: every block empty */
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
    if (!nb_v_begin(gather ? CGPU_NB_GATHERV : CGPU_NB_SCATTERV,
                    CGPU_ALLREDUCE_FALLBACK ==
                        (gather ? c->gather_algorithm : c->scatter_algorithm),
                    root, is_root ? all_buf : one_buf, comm, m, &r, request, rc)) {
        return false;
    }
    if (NULL == r) {
        return true;
    }
    if (is_root) { /* a gatherv's receive side keeps the bytes between its blocks */
        r->rc = nb_v_side(r, 1, (void *) all_buf, all_counts, displs, all_dt, true, gather);
    }
    if (MPI_SUCCESS == r->rc && !in_place) {
        size_t es;
        ompi_datatype_type_size(one_dt, &es);
        r->bytes = one_count > 0 ? (size_t) one_count * es : 0;
        r->vmax = r->bytes > r->vmax ? r->bytes : r->vmax;
        void *one = NULL;
        r->rc = one_count < 0 ? MPI_ERR_COUNT
                              : mca_coll_gpu_nb_view_open(&r->v[0], (void *) one_buf, one_count,
                                                          one_dt, r->bytes, gather, !gather, &one);
        r->s = one;
    }
    *rc = nb_v_post(r, in_place ? NULL : one_dt, is_root ? all_dt : NULL, request);
    return true;
}

static int nb_a2a_side(mca_coll_gpu_request_t *r, int i, const a2a_side_t *x, bool out)
{
    return NULL != x->dts
               ? nb_w_side(r, i, x, out)
               : nb_v_side(r, i, (void *) x->buf, x->counts, x->displs, x->dt, true, out);
}

/* MPI_Ialltoallv and MPI_Ialltoallw (the same engine call, blocks of any sizes and types) */
static bool alltoall_post(mca_coll_gpu_nb_kind_t kind, const a2a_side_t *s, const a2a_side_t *rv,
                          struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                          ompi_request_t **request, int *rc)
{
    const bool in_place = MPI_IN_PLACE == s->buf; /* sent from the receive layout */
    mca_coll_gpu_request_t *r;
    if (!nb_v_begin(kind, CGPU_ALLTOALL_FALLBACK == mca_coll_gpu_component.alltoall_algorithm, -1,
                    in_place ? rv->buf : s->buf, comm, m, &r, request, rc)) {
        return false;
    }
    if (NULL == r) {
        return true;
    }
    r->rc = nb_a2a_side(r, 1, rv, true);
    if (MPI_SUCCESS == r->rc && !in_place) {
        r->rc = nb_a2a_side(r, 0, s, false);
    }
    /* an alltoallw's types: the binding keeps the caller's arrays' (retain_datatypes_w) */
    *rc = nb_v_post(r, in_place ? NULL : s->dt, rv->dt, request);
    return true;
}

int mca_coll_gpu_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                          const int *rcounts, const int *displs, struct ompi_datatype_t *rdt,
                          int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Igatherv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (v_rooted_post(true, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm, m, request,
                      &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, (size_t) scount, sdt) ||
            (is_root && mca_coll_gpu_v_on_device(rbuf, rcounts, displs, ompi_comm_size(comm), rdt)),
        m->prev.coll_igatherv(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm, request,
                              m->prev.coll_igatherv_module))
    void *hs, *hr = rbuf;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) scount, sdt, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_nb_staged_in(
            r, 1, rbuf, mca_coll_gpu_v_span(rcounts, displs, ompi_comm_size(comm)), rdt, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, sdt, rdt, NULL);
        rc =
            MCA_COLL_GPU_PREV(m->prev.coll_igatherv(hs, scount, sdt, hr, rcounts, displs, rdt, root,
                                                    comm, &r->inner, m->prev.coll_igatherv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Igatherv");
}

int mca_coll_gpu_iscatterv(const void *sbuf, const int *scounts, const int *displs,
                           struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                           ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Iscatterv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    int prc;
    if (v_rooted_post(false, rbuf, rcount, rdt, sbuf, scounts, displs, sdt, root, comm, m, request,
                      &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        (is_root && mca_coll_gpu_v_on_device(sbuf, scounts, displs, ompi_comm_size(comm), sdt)) ||
            mca_coll_gpu_on_device_at(rbuf, (size_t) rcount, rdt),
        m->prev.coll_iscatterv(sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm, request,
                               m->prev.coll_iscatterv_module))
    void *hs = (void *) sbuf, *hr;
    int rc = MPI_SUCCESS;
    if (is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf,
                                       mca_coll_gpu_v_span(scounts, displs, ompi_comm_size(comm)),
                                       sdt, false, &hs);
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

int mca_coll_gpu_ialltoallv(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *rdt,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ialltoallv", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const int n = ompi_comm_size(comm);
    int prc;
    const a2a_side_t sv = {sbuf, scounts, sdispls, sdt, NULL};
    const a2a_side_t rv = {rbuf, rcounts, rdispls, rdt, NULL};
    if (alltoall_post(CGPU_NB_ALLTOALLV, &sv, &rv, comm, m, request, &prc)) {
        return prc;
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_v_on_device(sbuf, scounts, sdispls, ompi_comm_size(comm), sdt) ||
            mca_coll_gpu_v_on_device(rbuf, rcounts, rdispls, ompi_comm_size(comm), rdt),
        m->prev.coll_ialltoallv(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm,
                                request, m->prev.coll_ialltoallv_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(
        r, 0, sbuf, MPI_IN_PLACE == sbuf ? 0 : mca_coll_gpu_v_span(scounts, sdispls, n), sdt, false,
        &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, mca_coll_gpu_v_span(rcounts, rdispls, n), rdt,
                                       true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, MPI_IN_PLACE == sbuf ? NULL : sdt, rdt, NULL);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ialltoallv(hs, scounts, sdispls, sdt, hr, rcounts,
                                                       rdispls, rdt, comm, &r->inner,
                                                       m->prev.coll_ialltoallv_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ialltoallv");
}

int mca_coll_gpu_ialltoallw(const void *sbuf, const int *scounts, const int *sdispls,
                            struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                            const int *rdispls, struct ompi_datatype_t *const *rdts,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ialltoallw", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    int prc;
    const a2a_side_t sv = {sbuf, scounts, sdispls, NULL, sdts};
    const a2a_side_t rv = {rbuf, rcounts, rdispls, NULL, rdts};
    if (alltoall_post(CGPU_NB_ALLTOALLW, &sv, &rv, comm, m, request, &prc)) {
        return prc;
    }
    const mca_coll_gpu_args_t a =
        mca_coll_gpu_alltoallw_args(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls, rdts);
    return mca_coll_gpu_nb_staged_call(m, comm, &a, mca_coll_gpu_alltoallw_spans, request);
}

/* ---- persistent ---- */

CGPU_PERSIST_INIT(mca_coll_gpu_gatherv_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   const int *rcounts, const int *displs, struct ompi_datatype_t *rdt, int root),
                  (.kind = CGPU_K_GATHERV, .s = sbuf, .sc = scount,
                   .sdt = CGPU_MEMBER ? CGPU_SEND_DT(sbuf, sdt) : NULL, .r = rbuf, .rcs = rcounts,
                   .rds = displs, .rdt = CGPU_IS_ROOT ? rdt : NULL, .root = root))
CGPU_PERSIST_INIT(mca_coll_gpu_scatterv_init,
                  (const void *sbuf, const int *scounts, const int *displs,
                   struct ompi_datatype_t *sdt, void *rbuf, int rcount, struct ompi_datatype_t *rdt,
                   int root),
                  (.kind = CGPU_K_SCATTERV, .s = sbuf, .scs = scounts, .sds = displs,
                   .sdt = CGPU_IS_ROOT ? sdt : NULL, .r = rbuf, .rc = rcount,
                   .rdt = CGPU_MEMBER ? CGPU_SEND_DT(rbuf, rdt) : NULL, .root = root))
CGPU_PERSIST_INIT(mca_coll_gpu_alltoallv_init,
                  (const void *sbuf, const int *scounts, const int *sdispls,
                   struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                   struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_ALLTOALLV, .s = sbuf, .scs = scounts, .sds = sdispls,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rcs = rcounts, .rds = rdispls,
                   .rdt = rdt))
CGPU_PERSIST_INIT(mca_coll_gpu_alltoallw_init,
                  (const void *sbuf, const int *scounts, const int *sdispls,
                   struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                   const int *rdispls, struct ompi_datatype_t *const *rdts),
                  (.kind = CGPU_K_ALLTOALLW, .s = sbuf, .scs = scounts, .sds = sdispls,
                   .sdts = MPI_IN_PLACE == sbuf ? NULL : sdts, .r = rbuf, .rcs = rcounts,
                   .rds = rdispls, .rdts = rdts))
