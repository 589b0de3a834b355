/*
 * coll/gpu: MPI_Reduce, MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Scan and
 * MPI_Exscan entry points. As for allreduce, the
 * path depends only on (datatype, op, count, MCA params), which MPI requires to match on
 * every rank (decision 2); everything else goes to the staged previous module.
 */
#include "coll_gpu.h"

#include <stdlib.h>

#include "opal/util/output.h"

int mca_coll_gpu_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_nested() || CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.reduce_algorithm ||
        count <= 0 || !mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
        return mca_coll_gpu_staged_reduce(sbuf, rbuf, count, dtype, op, root, comm, module);
    }
    const bool is_root = ompi_comm_rank(comm) == root;
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_reduce(sbuf, rbuf, count, dtype, op, root, comm, module);
    }
    cgpu_status_t st = MCA_COLL_GPU_ENGINE(
        m, cgpu_reduce(m->ecomm, MPI_IN_PLACE == sbuf ? NULL : sbuf, is_root ? rbuf : NULL,
                       (size_t) count, dt, eop, root));
    return mca_coll_gpu_engine_rc(st, "MPI_Reduce", comm);
}

int mca_coll_gpu_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_nested() ||
        CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.reduce_scatter_algorithm ||
        rcount <= 0 || !mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
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

size_t *mca_coll_gpu_engine_counts(const int *rcounts, int n)
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
    const int n = ompi_comm_size(comm);
    size_t total = 0;
    for (int p = 0; p < n; ++p) {
        total += (size_t) rcounts[p];
    }
    cgpu_dtype_t dt;
    cgpu_op_t eop;
    if (mca_coll_gpu_nested() ||
        CGPU_ALLREDUCE_FALLBACK == mca_coll_gpu_component.reduce_scatter_algorithm ||
        0 == total || !mca_coll_gpu_engine_reduction(dtype, op, &dt, &eop)) {
        return mca_coll_gpu_staged_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, module);
    }
    mca_coll_gpu_lazy_init(m, MPI_IN_PLACE == sbuf ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, module);
    }
    size_t *counts = mca_coll_gpu_engine_counts(rcounts, n);
    if (NULL == counts) { /* a local failure before any exchange: peers then time out */
        opal_output(0, "coll/gpu: MPI_Reduce_scatter on %s: no memory for %d counts",
                    comm->c_name, n);
        return MPI_ERR_NO_MEM;
    }
    cgpu_status_t st = MCA_COLL_GPU_ENGINE(
        m, cgpu_reduce_scatter(m->ecomm, MPI_IN_PLACE == sbuf ? NULL : sbuf, rbuf, counts, dt,
                               eop));
    free(counts);
    return mca_coll_gpu_engine_rc(st, "MPI_Reduce_scatter", comm);
}

bool mca_coll_gpu_scan_engine_ok(int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 int n, cgpu_dtype_t *dt, cgpu_op_t *eop)
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
    if (mca_coll_gpu_nested() || !mca_coll_gpu_scan_engine_ok(count, dtype, op, n, &dt, &eop)) {
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
    return scan_like(false, sbuf, rbuf, count, dt, op, comm, module);
}

int mca_coll_gpu_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    return scan_like(true, sbuf, rbuf, count, dt, op, comm, module);
}
