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
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"

/* One rank's layout of counts x dt at buf, block p at displs[p] elements, as the engine
 * takes it. */
typedef struct v_side {
    cgpu_blocks_t b;
    size_t largest; /* bytes of its largest block */
} v_side_t;

int mca_coll_gpu_a2a_blocks(const mca_coll_gpu_a2a_side_t *x, int n, size_t *bytes, ptrdiff_t *offs,
                            size_t *largest, bool *gaps)
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
static bool side_layout(v_side_t *v, const mca_coll_gpu_a2a_side_t *x, int n)
{
    memset(v, 0, sizeof(*v));
    size_t *bytes = malloc((sizeof(size_t) + sizeof(ptrdiff_t)) * (size_t) n);
    if (NULL == bytes) {
        return false;
    }
    ptrdiff_t *offs = (ptrdiff_t *) (bytes + n);
    bool gaps;
    const int rc = mca_coll_gpu_a2a_blocks(x, n, bytes, offs, &v->largest, &gaps);
    v->b = (cgpu_blocks_t){.base = (char *) x->buf, .bytes = bytes, .offs = offs};
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
static cgpu_comm_t *v_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            size_t mine, bool veto, const void *buf, size_t *maxb, int *rc)
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
static int v_rooted(bool gather, const void *one_buf, int one_count,
                    struct ompi_datatype_t *one_dt, const void *all_buf, const int *all_counts,
                    const int *displs, struct ompi_datatype_t *all_dt, int root,
                    struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    const int algorithm = gather ? mca_coll_gpu_component.gather_algorithm
                                 : mca_coll_gpu_component.scatter_algorithm;
    if (!v_wanted(m, CGPU_ALLREDUCE_FALLBACK == algorithm)) {
        return OMPI_ERR_NOT_AVAILABLE;
    }
    const bool is_root = ompi_comm_rank(comm) == root, in_place = is_root && MPI_IN_PLACE == one_buf;
    const char *one_run = NULL;
    size_t one_bytes = 0, maxb = 0;
    bool ok = in_place || one_block(one_buf, one_count, one_dt, &one_run, &one_bytes);
    v_side_t all = {0};
    if (is_root) { /* the counts, displs and type of the whole message: the root's only */
        const mca_coll_gpu_a2a_side_t x = {all_buf, all_counts, displs, all_dt, NULL};
        ok = side_layout(&all, &x, ompi_comm_size(comm)) && ok;
    }
    int rc;
    cgpu_comm_t *ec = v_agree(m, comm, one_bytes > all.largest ? one_bytes : all.largest, !ok,
                              is_root ? all_buf : one_buf, &maxb, &rc);
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
                         int root, struct ompi_communicator_t *comm,
                         mca_coll_base_module_t *module)
{
    int rc = v_rooted(true, sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm,
                      (mca_coll_gpu_module_t *) module);
    return OMPI_ERR_NOT_AVAILABLE != rc ? rc
                                        : mca_coll_gpu_staged_gatherv(sbuf, scount, sdt, rbuf,
                                                                      rcounts, displs, rdt, root,
                                                                      comm, module);
}

int mca_coll_gpu_scatterv(const void *sbuf, const int *scounts, const int *displs,
                          struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdt, int root, struct ompi_communicator_t *comm,
                          mca_coll_base_module_t *module)
{
    int rc = v_rooted(false, rbuf, rcount, rdt, sbuf, scounts, displs, sdt, root, comm,
                      (mca_coll_gpu_module_t *) module);
    return OMPI_ERR_NOT_AVAILABLE != rc ? rc
                                        : mca_coll_gpu_staged_scatterv(sbuf, scounts, displs, sdt,
                                                                       rbuf, rcount, rdt, root,
                                                                       comm, module);
}

/* An alltoallv or alltoallw: the layouts, the agreement, then the engine's padded alltoall;
 * OMPI_ERR_NOT_AVAILABLE: the staged path takes the call (the same answer on every rank). */
static int alltoall_any(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                        const mca_coll_gpu_a2a_side_t *sx, const mca_coll_gpu_a2a_side_t *rx,
                        const char *name)
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
                              in_place ? rx->buf : sx->buf, &maxb, &rc);
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
    const mca_coll_gpu_a2a_side_t s = {sbuf, scounts, sdispls, sdt, NULL};
    const mca_coll_gpu_a2a_side_t r = {rbuf, rcounts, rdispls, rdt, NULL};
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
    const mca_coll_gpu_a2a_side_t s = {sbuf, scounts, sdispls, NULL, sdts};
    const mca_coll_gpu_a2a_side_t r = {rbuf, rcounts, rdispls, NULL, rdts};
    const int rc = alltoall_any((mca_coll_gpu_module_t *) module, comm, &s, &r, "MPI_Alltoallw");
    return OMPI_ERR_NOT_AVAILABLE != rc
               ? rc
               : mca_coll_gpu_staged_alltoallw(sbuf, scounts, sdispls, sdts, rbuf, rcounts, rdispls,
                                               rdts, comm, module);
}
