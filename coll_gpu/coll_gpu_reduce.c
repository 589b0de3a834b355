/*
 * coll/gpu: MPI_Reduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Scan and
 * MPI_Exscan entry points, blocking, non-blocking (MPI_Ireduce, ...) and persistent
 * (MPIX_Reduce_init, ...). As for allreduce, the path depends only on (datatype, op, count,
 * MCA params), which MPI requires to match on every rank (decision 2); everything else goes
 * to the staged previous module.
 */
#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include <stdlib.h>

#include "opal/util/output.h"

int mca_coll_gpu_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Reduce", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_nested() ||
        CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.reduce_algorithm || count <= 0 ||
        !mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
        return mca_coll_gpu_staged_reduce(sbuf, rbuf, count, dtype, op, root, comm, module);
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_reduce(sbuf, rbuf, count, dtype, op, root, comm, module);
    }
    cgpu_status_t st =
        MCA_COLL_GPU_ENGINE(m, cgpu_reduce(m->ecomm, MPI_IN_PLACE == sbuf ? NULL : sbuf,
                                           is_root ? rbuf : NULL, (size_t) count, dt, eop, root));
    return mca_coll_gpu_engine_rc(st, "MPI_Reduce", comm);
}

int mca_coll_gpu_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Reduce_scatter_block", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_nested() ||
        CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.reduce_scatter_algorithm || rcount <= 0 ||
        !mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
        return mca_coll_gpu_staged_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm,
                                                        module);
    }
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm,
                                                        module);
    }
    cgpu_status_t st = MCA_COLL_GPU_ENGINE(
        m, cgpu_reduce_scatter_block(m->ecomm, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
                                     (size_t) rcount, dt, eop));
    return mca_coll_gpu_engine_rc(st, "MPI_Reduce_scatter_block", comm);
}

/* rcounts as the engine takes them (malloc'd; NULL without memory) */
static size_t *engine_counts(const int *rcounts, int n)
{
    size_t *c = malloc(sizeof(size_t) * (size_t) (n > 0 ? n : 1));
    for (int p = 0; NULL != c && p < n; ++p) {
        c[p] = (size_t) rcounts[p];
    }
    return c;
}

/* MPI_Reduce_scatter: the engine for what it reduces (coll_gpu_reduce_scatter_algorithm, as
 * for the block form), with the counts MPI requires to match on every rank; else staged */
int mca_coll_gpu_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Reduce_scatter", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    const int n = ompi_comm_size(comm);
    size_t total = 0;
    for (int p = 0; p < n; ++p) {
        total += (size_t) rcounts[p];
    }
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_nested() ||
        CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.reduce_scatter_algorithm || 0 == total ||
        !mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
        return mca_coll_gpu_staged_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, module);
    }
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, module);
    }
    size_t *counts = engine_counts(rcounts, n);
    if (NULL == counts) { /* a local failure before any exchange: peers then time out */
        cgpu_log(CGPU_LOG_WARN, "MPI_Reduce_scatter on %s: no memory for %d counts", comm->c_name,
                 n);
        return MPI_ERR_NO_MEM;
    }
    cgpu_status_t st =
        MCA_COLL_GPU_ENGINE(m, cgpu_reduce_scatter(m->ecomm, MPI_IN_PLACE == sbuf ? NULL : sbuf,
                                                   rbuf, counts, dt, eop));
    free(counts);
    return mca_coll_gpu_engine_rc(st, "MPI_Reduce_scatter", comm);
}

/* Whether a scan (either form) of count x dtype with op on n ranks runs on the engine, from
 * arguments MPI requires to match and MCA params alone (coll_gpu_scan_algorithm, a round of
 * mca_coll_gpu_padded_max(n) bytes per rank holding one element); sets the engine's (dt, op).
 * Shared by the blocking and non-blocking calls. */
static bool scan_engine_ok(int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op, int n,
                           cgpu_dtype_t *dt, cgpu_op_t *eop)
{
    return CGPU_SCAN_FALLBACK != mca_coll_gpu_component.scan_algorithm && count > 0 &&
           mca_coll_gpu_engine_reduction(dtype, op, dt, eop) &&
           mca_coll_gpu_padded_max(n) >= cgpu_dtype_size(*dt);
}

/* scan and exscan: every rank's input allgathered on the engine, each rank folding the
 * inputs of the ranks before it (and its own, for scan) in rank order (cgpu_scan) */
static int scan_like(bool ex, const void *sbuf, void *rbuf, int count,
                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                     struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    const int n = ompi_comm_size(comm);
    if (mca_coll_gpu_nested() || !scan_engine_ok(count, dtype, op, n, &dt, &eop)) {
        return mca_coll_gpu_staged_scan(ex, sbuf, rbuf, count, dtype, op, comm, module);
    }
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_scan(ex, sbuf, rbuf, count, dtype, op, comm, module);
    }
    cgpu_status_t st = MCA_COLL_GPU_ENGINE(
        m, cgpu_scan(m->ecomm, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, (size_t) count, dt, eop,
                     ex, (cgpu_scan_alg_t) mca_coll_gpu_component.scan_algorithm,
                     mca_coll_gpu_padded_max(n)));
    return mca_coll_gpu_engine_rc(st, ex ? "MPI_Exscan" : "MPI_Scan", comm);
}

int mca_coll_gpu_scan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Scan", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    return scan_like(false, sbuf, rbuf, count, dt, op, comm, module);
}

int mca_coll_gpu_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Exscan", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    return scan_like(true, sbuf, rbuf, count, dt, op, comm, module);
}

/* ---- non-blocking ---- */

int mca_coll_gpu_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ireduce", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    bool create;
    const bool is_root = ompi_comm_rank(comm) == root;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.reduce_algorithm && count > 0 &&
        mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        return mca_coll_gpu_nb_post_reduction(
            m, comm, CGPU_NB_REDUCE, create, MPI_IN_PLACE == sbuf ? NULL : sbuf,
            is_root ? rbuf : NULL, (size_t) count, dt, eop, root, request);
    }
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, (size_t) count, dtype) ||
            (is_root && mca_coll_gpu_on_device_at(rbuf, (size_t) count, dtype)),
        m->prev.coll_ireduce(sbuf, rbuf, count, dtype, op, root, comm, request,
                             m->prev.coll_ireduce_module))
    void *hs = (void *) sbuf, *hr = rbuf;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, (size_t) count, dtype, false, &hs);
    if (MPI_SUCCESS == rc && is_root) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, (size_t) count, dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce(hs, hr, count, dtype, op, root, comm, &r->inner,
                                                    m->prev.coll_ireduce_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ireduce");
}

/* Both reduce_scatter forms (with data): the engine (mca_coll_gpu_nb_plan_engine) for what
 * it reduces, unless coll_gpu_reduce_scatter_algorithm is fallback */
static bool plan_reduce_scatter(mca_coll_gpu_module_t *m, struct ompi_datatype_t *dtype,
                                struct ompi_op_t *op, cgpu_dtype_t *dt, cgpu_op_t *eop,
                                bool *create)
{
    return CGPU_ALLREDUCE_FALLBACK != mca_coll_gpu_component.reduce_scatter_algorithm &&
           mca_coll_gpu_engine_reduction(dtype, op, dt, eop) &&
           mca_coll_gpu_nb_plan_engine(m, create);
}

int mca_coll_gpu_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm, ompi_request_t **request,
                                       mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ireduce_scatter_block", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (rcount > 0 && plan_reduce_scatter(m, dtype, op, &dt, &eop, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, CGPU_NB_REDUCE_SCATTER_BLOCK, create,
                                              MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
                                              (size_t) rcount, dt, eop, 0, request);
    }
    const size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, total, dtype) ||
            mca_coll_gpu_on_device_at(rbuf, MPI_IN_PLACE == sbuf ? total : (size_t) rcount, dtype),
        m->prev.coll_ireduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, request,
                                           m->prev.coll_ireduce_scatter_block_module))
    void *hs = (void *) sbuf, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, total, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, MPI_IN_PLACE == sbuf ? total : (size_t) rcount,
                                       dtype, true, &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter_block(
            hs, hr, rcount, dtype, op, comm, &r->inner, m->prev.coll_ireduce_scatter_block_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ireduce_scatter_block");
}

int mca_coll_gpu_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ireduce_scatter", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    size_t total = 0;
    for (int i = 0; i < ompi_comm_size(comm); ++i) {
        total += (size_t) rcounts[i];
    }
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (total > 0 && plan_reduce_scatter(m, dtype, op, &dt, &eop, &create)) {
        return mca_coll_gpu_nb_post_reduction_counts(
            m, comm, CGPU_NB_REDUCE_SCATTER, create, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
            total, dt, eop, 0, engine_counts(rcounts, ompi_comm_size(comm)), request);
    }
    const size_t mine = (size_t) rcounts[ompi_comm_rank(comm)];
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, total, dtype) ||
            mca_coll_gpu_on_device_at(rbuf, MPI_IN_PLACE == sbuf ? total : mine, dtype),
        m->prev.coll_ireduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, request,
                                     m->prev.coll_ireduce_scatter_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, total, dtype, false, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_nb_staged_in(r, 1, rbuf, MPI_IN_PLACE == sbuf ? total : mine, dtype, true,
                                       &hr);
    }
    if (MPI_SUCCESS == rc) {
        mca_coll_gpu_request_retain(r, dtype, NULL, op);
        rc = MCA_COLL_GPU_PREV(m->prev.coll_ireduce_scatter(
            hs, hr, rcounts, dtype, op, comm, &r->inner, m->prev.coll_ireduce_scatter_module));
    }
    return mca_coll_gpu_nb_staged_post(r, rc, request, "MPI_Ireduce_scatter");
}

static int iscan_like(bool ex, const void *sbuf, void *rbuf, int count,
                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                      struct ompi_communicator_t *comm, ompi_request_t **request,
                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool create;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (scan_engine_ok(count, dtype, op, ompi_comm_size(comm), &dt, &eop) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        return mca_coll_gpu_nb_post_reduction(m, comm, ex ? CGPU_NB_EXSCAN : CGPU_NB_SCAN, create,
                                              MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf,
                                              (size_t) count, dt, eop, 0, request);
    }
    mca_coll_base_module_iscan_fn_t fn = ex ? m->prev.coll_iexscan : m->prev.coll_iscan;
    mca_coll_base_module_t *pm = ex ? m->prev.coll_iexscan_module : m->prev.coll_iscan_module;
    op = mca_coll_gpu_prev_op(dtype, op); /* on every rank alike, host buffers too */
    CGPU_NB_STAGED_NEW_OR_PASS(r,
                               mca_coll_gpu_on_device_at(sbuf, (size_t) count, dtype) ||
                                   mca_coll_gpu_on_device_at(rbuf, (size_t) count, dtype),
                               fn(sbuf, rbuf, count, dtype, op, comm, request, pm))
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

int mca_coll_gpu_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, struct ompi_communicator_t *comm,
                       ompi_request_t **request, mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Iscan", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    return iscan_like(false, sbuf, rbuf, count, dtype, op, comm, request, module);
}

int mca_coll_gpu_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    const int refused = mca_coll_gpu_refused((mca_coll_gpu_module_t *) module, "MPI_Iexscan", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    return iscan_like(true, sbuf, rbuf, count, dtype, op, comm, request, module);
}

/* ---- persistent ---- */

CGPU_PERSIST_INIT(mca_coll_gpu_reduce_init,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op, int root),
                  (.kind = CGPU_K_REDUCE, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                   .root = root))
CGPU_PERSIST_INIT(mca_coll_gpu_reduce_scatter_block_init,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_REDUCE_SCATTER_BLOCK, .s = sbuf, .r = rbuf, .rc = count,
                   .rdt = dt, .op = op, .root = -1))
CGPU_PERSIST_INIT(mca_coll_gpu_reduce_scatter_init,
                  (const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_REDUCE_SCATTER, .s = sbuf, .r = rbuf, .rcs = rcounts, .rdt = dt,
                   .op = op))
CGPU_PERSIST_INIT(mca_coll_gpu_scan_init,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_SCAN, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                   .root = -1))
CGPU_PERSIST_INIT(mca_coll_gpu_exscan_init,
                  (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                   struct ompi_op_t *op),
                  (.kind = CGPU_K_EXSCAN, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                   .root = -1))
