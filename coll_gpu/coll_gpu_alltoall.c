/*
 * coll/gpu: MPI_Alltoall, MPI_Ialltoall and MPIX_Alltoall_init entry points.
 *
 * MPI lets each rank describe its blocks with its own datatypes as long as the type
 * signatures match, so a rank-local property such as "my send type is contiguous"
 * must not decide the path (decision 2). The decision uses only the per-peer byte
 * count (equal on every rank) and MCA params; a non-contiguous layout is packed into
 * a contiguous host buffer here and unpacked afterwards, so the engine sees bytes.
 */
#include <stdlib.h>

#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

/* The engine-path decision shared by the blocking and non-blocking calls: a function of
 * arguments MPI requires to match on every rank and of MCA params (decision 2). */
static bool alltoall_engine_ok(int scount, int rcount, struct ompi_datatype_t *rdtype,
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
    const int refused = mca_coll_gpu_refused(m, "MPI_Alltoall", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
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
    if (!alltoall_engine_ok(scount, rcount, rdtype, &bytes) ||
        mca_coll_gpu_host_leaves(m, MCA_COLL_GPU_HOST_ALLTOALL, bytes)) {
        goto fallback;
    }
    mca_coll_gpu_lazy_init(m, in_place ? rbuf : sbuf);
    if (CGPU_MODULE_READY != m->state) {
        goto fallback;
    }

    const char *sstart = NULL, *rstart = NULL;
    const size_t total = (size_t) n * bytes;
    bool r_contig = mca_coll_gpu_contiguous_run(rbuf, rcount, rdtype, &rstart);
    bool s_contig =
        in_place ? r_contig : mca_coll_gpu_contiguous_run(sbuf, scount, sdtype, &sstart);
    /* packing runs on the CPU: a non-contiguous device buffer is mirrored to host first */
    if (!in_place && !s_contig &&
        mca_coll_gpu_on_device_at(sbuf, (size_t) scount * (size_t) n, sdtype)) {
        void *h;
        rc = mca_coll_gpu_mirror_in(&ms, sbuf, (size_t) scount * (size_t) n, sdtype, &h);
        sbuf = h;
    }
    if (MPI_SUCCESS == rc && !r_contig &&
        mca_coll_gpu_on_device_at(rbuf, (size_t) rcount * (size_t) n, rdtype)) {
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
                rc = NULL == spack ? MPI_ERR_NO_MEM
                                   : mca_coll_gpu_typed_copy(
                                         sbuf, spack, (size_t) scount * (size_t) n, sdtype, true);
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
            cgpu_log(CGPU_LOG_WARN, "MPI_Alltoall on %s: out of memory before the exchange",
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

int mca_coll_gpu_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdt,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    const int refused = mca_coll_gpu_refused(m, "MPI_Ialltoall", comm);
    if (MPI_SUCCESS != refused) {
        return refused;
    }
    bool create;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const int n = ompi_comm_size(comm);
    size_t bytes;
    if (alltoall_engine_ok(in_place ? rcount : scount, rcount, rdt, &bytes) &&
        mca_coll_gpu_nb_plan_engine(m, &create)) {
        mca_coll_gpu_request_t *r =
            mca_coll_gpu_nb_engine_request(m, comm, create, in_place ? rbuf : sbuf);
        if (NULL == r) {
            return mca_coll_gpu_nb_post_failed(request, MPI_ERR_NO_MEM);
        }
        const size_t total = bytes * (size_t) n;
        r->kind = CGPU_NB_ALLTOALL;
        r->bytes = bytes;
        void *s = NULL;
        r->rc = mca_coll_gpu_nb_view_open(&r->v[1], rbuf, rcount * n, rdt, total, in_place, true,
                                          &r->r);
        if (MPI_SUCCESS == r->rc) {
            if (in_place) {
                s = r->r;
            } else {
                r->rc = mca_coll_gpu_nb_view_open(&r->v[0], (void *) sbuf, scount * n, sdt, total,
                                                  true, false, &s);
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
    CGPU_NB_STAGED_NEW_OR_PASS(
        r,
        mca_coll_gpu_on_device_at(sbuf, (size_t) scount * (size_t) n, sdt) ||
            mca_coll_gpu_on_device_at(rbuf, (size_t) rcount * (size_t) n, rdt),
        m->prev.coll_ialltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm, request,
                               m->prev.coll_ialltoall_module))
    void *hs, *hr;
    int rc = mca_coll_gpu_nb_staged_in(r, 0, sbuf, in_place ? 0 : (size_t) scount * (size_t) n, sdt,
                                       false, &hs);
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

CGPU_PERSIST_INIT(mca_coll_gpu_alltoall_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_ALLTOALL, .s = sbuf, .sc = scount, .sdt = CGPU_SEND_DT(sbuf, sdt),
                   .r = rbuf, .rc = rcount, .rdt = rdt))
