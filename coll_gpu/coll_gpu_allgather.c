/*
 * coll/gpu: MPI_Allgather entry point. As for alltoall and bcast, the path depends only
 * on the per-rank byte count and MCA params (decision 2); layouts that are not one
 * gap-free run are packed and unpacked around the engine.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

int mca_coll_gpu_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdt, struct ompi_communicator_t *comm,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const bool in_place = (MPI_IN_PLACE == sbuf);
    if (mca_coll_gpu_nested() || CGPU_ALLREDUCE_FALLBACK == c->allgather_algorithm ||
        rcount <= 0 || (!in_place && scount < 0)) {
        return mca_coll_gpu_staged_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, module);
    }
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    size_t rsize;
    ompi_datatype_type_size(rdt, &rsize);
    const size_t bytes = (size_t) rcount * rsize; /* per rank, equal everywhere */
    mca_coll_gpu_lazy_init(m, in_place ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        return mca_coll_gpu_staged_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, module);
    }
    const size_t total = bytes * (size_t) n;
    const char *rstart, *sstart = NULL;
    const bool r_contig = mca_coll_gpu_contiguous_run(rbuf, rcount * n, rdt, &rstart);
    const bool s_contig = in_place || mca_coll_gpu_contiguous_run(sbuf, scount, sdt, &sstart);
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    void *hs = (void *) sbuf, *hr = rbuf;
    char *spack = NULL, *rpack = NULL;
    int rc = MPI_SUCCESS;

    /* packing runs on the CPU: non-contiguous device buffers are mirrored first */
    if (!s_contig && mca_coll_gpu_on_device(sbuf)) {
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) scount, sdt, &hs);
    }
    if (MPI_SUCCESS == rc && !r_contig && mca_coll_gpu_on_device(rbuf)) {
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) rcount * (size_t) n, rdt, &hr);
    }
    if (MPI_SUCCESS == rc && !r_contig) {
        rpack = malloc(total);
        rc = NULL == rpack ? MPI_ERR_NO_MEM : MPI_SUCCESS;
        /* this rank's own part goes into its block of the packed buffer */
        if (MPI_SUCCESS == rc && in_place) {
            ptrdiff_t lb, ext;
            ompi_datatype_get_extent(rdt, &lb, &ext);
            rc = mca_coll_gpu_typed_copy((char *) hr + (size_t) me * rcount * (size_t) ext,
                                         rpack + (size_t) me * bytes, (size_t) rcount, rdt, true);
        }
    }
    if (MPI_SUCCESS == rc && !in_place && !s_contig) {
        spack = malloc(bytes);
        rc = NULL == spack ? MPI_ERR_NO_MEM
                           : mca_coll_gpu_typed_copy(hs, spack, (size_t) scount, sdt, true);
    }
    const void *src = in_place ? NULL : (NULL != spack ? spack : (const void *) sstart);
    void *dst = NULL != rpack ? rpack : (void *) rstart;
    char *scratch = NULL;
    if (MPI_SUCCESS != rc) { /* take part anyway, on scratch, so no peer waits forever */
        scratch = calloc(1, total);
        src = NULL;
        dst = scratch;
    }
    cgpu_status_t st = CGPU_ERR_NO_MEMORY;
    if (NULL != dst) {
        OBJ_RETAIN(m);
        st = cgpu_allgather(m->ecomm, src, dst, bytes);
        atomic_fetch_add_explicit(&m->engine_calls, 1, memory_order_relaxed);
        OBJ_RELEASE(m);
    }
    free(scratch);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_engine_rc(st, "MPI_Allgather", comm);
    }
    if (MPI_SUCCESS == rc && NULL != rpack) {
        rc = mca_coll_gpu_typed_copy(rpack, hr, (size_t) rcount * (size_t) n, rdt, false);
    }
    free(spack);
    free(rpack);
    mca_coll_gpu_mirror_drop(&ms);
    return mca_coll_gpu_mirror_out(&mr, rc);
}
