/*
 * coll/gpu: MPI_Alltoall entry point.
 *
 * MPI lets each rank describe its blocks with its own datatypes as long as the type
 * signatures match, so a rank-local property such as "my send type is contiguous"
 * must not decide the path (decision 2). The decision uses only the per-peer byte
 * count (equal on every rank) and MCA params; a non-contiguous layout is packed into
 * a contiguous host buffer here and unpacked afterwards, so the engine sees bytes.
 */
#include <stdlib.h>

#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

bool mca_coll_gpu_alltoall_engine_ok(int scount, int rcount, struct ompi_datatype_t *rdtype,
                                     size_t *bytes)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    if (CGPU_ALLTOALL_FALLBACK == c->alltoall_algorithm || rcount < 0 || scount < 0) {
        return false;
    }
    size_t rsize;
    ompi_datatype_type_size(rdtype, &rsize);
    *bytes = (size_t) rcount * rsize;
    return *bytes >= c->alltoall_min_bytes &&
           (0 == c->alltoall_max_bytes || *bytes <= c->alltoall_max_bytes);
}

int mca_coll_gpu_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    const bool in_place = (MPI_IN_PLACE == sbuf);
    const int n = ompi_comm_size(comm);
    char *spack = NULL, *rpack = NULL;
    mca_coll_gpu_mirror_t ms = {0}, mr = {0};
    int rc = MPI_SUCCESS;

    if (mca_coll_gpu_nested()) { /* a previous module's own building block */
        return MCA_COLL_GPU_PREV(m->prev.coll_alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                                       comm, m->prev.coll_alltoall_module));
    }
    size_t bytes; /* per peer, equal on every rank */
    if (!mca_coll_gpu_alltoall_engine_ok(scount, rcount, rdtype, &bytes)) {
        goto fallback;
    }
    mca_coll_gpu_lazy_init(m, in_place ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        goto fallback;
    }

    const char *sstart = NULL, *rstart = NULL;
    const size_t total = (size_t) n * bytes;
    bool r_contig = mca_coll_gpu_contiguous_run(rbuf, rcount, rdtype, &rstart);
    bool s_contig = in_place ? r_contig : mca_coll_gpu_contiguous_run(sbuf, scount, sdtype, &sstart);
    /* packing runs on the CPU: a non-contiguous device buffer is mirrored to host first */
    if (!in_place && !s_contig && mca_coll_gpu_on_device(sbuf)) {
        void *h;
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) scount * (size_t) n, sdtype, &h);
        sbuf = h;
    }
    if (MPI_SUCCESS == rc && !r_contig && mca_coll_gpu_on_device(rbuf)) {
        void *h;
        rc = mca_coll_gpu_mirror_in(&mr, rbuf, (size_t) rcount * (size_t) n, rdtype, &h);
        rbuf = h;
    }
    if (MPI_SUCCESS != rc) {
        goto out_agree;
    }
    if (in_place) {
        sstart = rstart;
    }
    if (total > 0 && (!s_contig || !r_contig)) {
        /* pack what is not a gap-free run; in place shares one packed buffer */
        if (in_place) {
            spack = rpack = malloc(total);
            if (NULL == spack) {
                rc = MPI_ERR_NO_MEM;
                goto out_agree;
            }
            rc = mca_coll_gpu_typed_copy(rbuf, spack, (size_t) rcount * (size_t) n, rdtype, true);
        } else {
            if (!s_contig) {
                spack = malloc(total);
                rc = NULL == spack
                         ? MPI_ERR_NO_MEM
                         : mca_coll_gpu_typed_copy(sbuf, spack, (size_t) scount * (size_t) n, sdtype, true);
            }
            if (MPI_SUCCESS == rc && !r_contig) {
                rpack = malloc(total);
                rc = NULL == rpack ? MPI_ERR_NO_MEM : MPI_SUCCESS;
            }
        }
    }

out_agree:
    /* A local failure to pack must not leave the other ranks waiting in the engine:
     * run the exchange anyway (on scratch data) and report the error afterwards. */
    {
        char dummy;
        const void *src = NULL != spack ? spack : sstart;
        void *dst = NULL != rpack ? rpack : (void *) rstart;
        char *scratch = NULL;
        if (MPI_SUCCESS != rc && total > 0) {
            scratch = malloc(total);
            src = dst = (NULL != scratch) ? scratch : NULL;
        }
        cgpu_status_t st = CGPU_OK;
        if (NULL == src && total > 0) {
            /* Not even scratch memory: every rank will see this call fail or hang; say so. */
            opal_output(0, "coll/gpu: MPI_Alltoall on %s: out of memory before the exchange",
                        comm->c_name);
            free(spack != rpack ? spack : NULL);
            free(rpack);
            mca_coll_gpu_mirror_drop(&ms);
            return mca_coll_gpu_mirror_out(&mr, MPI_ERR_NO_MEM);
        }
        st = MCA_COLL_GPU_ENGINE(m, cgpu_alltoall(m->ecomm, total > 0 ? src : &dummy,
                                                  total > 0 ? dst : &dummy, bytes,
                                                  (cgpu_alltoall_alg_t) c->alltoall_algorithm));
        free(scratch);
        if (MPI_SUCCESS == rc) {
            rc = mca_coll_gpu_engine_rc(st, "MPI_Alltoall", comm);
        }
    }
    if (MPI_SUCCESS == rc && NULL != rpack) {
        rc = mca_coll_gpu_typed_copy(rpack, rbuf, (size_t) rcount * (size_t) n, rdtype, false);
    }
    if (spack != rpack) {
        free(spack);
    }
    free(rpack);
    mca_coll_gpu_mirror_drop(&ms);
    return mca_coll_gpu_mirror_out(&mr, rc);

fallback:
    return mca_coll_gpu_fallback_alltoall(m, sbuf, scount, sdtype, rbuf, rcount, rdtype, comm);
}
