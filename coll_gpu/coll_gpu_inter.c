/*
 * coll/gpu: the collectives of intercommunicators, made safe for device buffers.
 *
 * No engine path: the previous module (coll/inter, coll/basic, libnbc) runs every call, on
 * host copies of the bytes this rank's buffers take part with, and the received bytes are
 * copied back, as for the other staged collectives. What a rank sends and receives follows
 * the intercommunicator rules: blocks come from (or go to) each rank of the remote group;
 * in a rooted call the root passes MPI_ROOT and only sends (bcast, scatter) or only
 * receives (gather, reduce), the other ranks of its group pass MPI_PROC_NULL and touch no
 * buffer, and the remote group passes the root's rank. Reduce_scatter(_block) take Open
 * MPI's reading of the standard: a rank sends the sum of its own group's counts. The
 * non-blocking forms stage the same spans (coll_gpu_nb_staged.c), and the persistent ones
 * start through them. Barriers have no buffer and stay with the previous module.
 */
#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

#include <stdlib.h>

#include "ompi/datatype/ompi_datatype.h"
#include "opal/util/output.h"

/* The spans of call @p a on intercommunicator @p comm, for this rank. */
static void inter_spans(const mca_coll_gpu_args_t *a, struct ompi_communicator_t *comm,
                        mca_coll_gpu_spans_t *sp)
{
    const int rsize = ompi_comm_remote_size(comm), lsize = ompi_comm_size(comm);
    const bool root = MPI_ROOT == a->root, member = a->root >= 0;
    size_t total = 0;
    *sp = (mca_coll_gpu_spans_t){.rback = true};
    switch (a->kind) {
    case CGPU_K_ALLGATHER:
        mca_coll_gpu_count_span((size_t) a->sc, a->sdt, &sp->slo, &sp->shi);
        mca_coll_gpu_count_span((size_t) a->rc * (size_t) rsize, a->rdt, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_ALLGATHERV:
        mca_coll_gpu_count_span((size_t) a->sc, a->sdt, &sp->slo, &sp->shi);
        mca_coll_gpu_v_bytes(a->rcs, a->rds, a->rdt, rsize, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_ALLREDUCE:
        mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->slo, &sp->shi);
        mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_ALLTOALL:
        mca_coll_gpu_count_span((size_t) a->sc * (size_t) rsize, a->sdt, &sp->slo, &sp->shi);
        mca_coll_gpu_count_span((size_t) a->rc * (size_t) rsize, a->rdt, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_ALLTOALLV:
        mca_coll_gpu_v_bytes(a->scs, a->sds, a->sdt, rsize, &sp->slo, &sp->shi);
        mca_coll_gpu_v_bytes(a->rcs, a->rds, a->rdt, rsize, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_ALLTOALLW:
        mca_coll_gpu_w_bytes(a->scs, a->sds, NULL, a->sdts, rsize, &sp->slo, &sp->shi);
        mca_coll_gpu_w_bytes(a->rcs, a->rds, NULL, a->rdts, rsize, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_BCAST: /* one buffer, in r: the root only reads it */
        if (root || member) {
            mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->rlo, &sp->rhi);
        }
        sp->rback = member;
        break;
    case CGPU_K_GATHER:
        if (root) {
            mca_coll_gpu_count_span((size_t) a->rc * (size_t) rsize, a->rdt, &sp->rlo, &sp->rhi);
        } else if (member) {
            mca_coll_gpu_count_span((size_t) a->sc, a->sdt, &sp->slo, &sp->shi);
        }
        break;
    case CGPU_K_GATHERV:
        if (root) {
            mca_coll_gpu_v_bytes(a->rcs, a->rds, a->rdt, rsize, &sp->rlo, &sp->rhi);
        } else if (member) {
            mca_coll_gpu_count_span((size_t) a->sc, a->sdt, &sp->slo, &sp->shi);
        }
        break;
    case CGPU_K_SCATTER:
        if (root) {
            mca_coll_gpu_count_span((size_t) a->sc * (size_t) rsize, a->sdt, &sp->slo, &sp->shi);
        } else if (member) {
            mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->rlo, &sp->rhi);
        }
        break;
    case CGPU_K_SCATTERV:
        if (root) {
            mca_coll_gpu_v_bytes(a->scs, a->sds, a->sdt, rsize, &sp->slo, &sp->shi);
        } else if (member) {
            mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->rlo, &sp->rhi);
        }
        break;
    case CGPU_K_REDUCE:
        if (root) {
            mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->rlo, &sp->rhi);
        } else if (member) {
            mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->slo, &sp->shi);
        }
        break;
    case CGPU_K_REDUCE_SCATTER_BLOCK:
        mca_coll_gpu_count_span((size_t) a->rc * (size_t) lsize, a->rdt, &sp->slo, &sp->shi);
        mca_coll_gpu_count_span((size_t) a->rc, a->rdt, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_REDUCE_SCATTER:
        for (int p = 0; p < lsize; ++p) {
            total += a->rcs[p] > 0 ? (size_t) a->rcs[p] : 0;
        }
        mca_coll_gpu_count_span(total, a->rdt, &sp->slo, &sp->shi);
        {
            const int mine = a->rcs[ompi_comm_rank(comm)];
            mca_coll_gpu_count_span(mine > 0 ? (size_t) mine : 0, a->rdt, &sp->rlo, &sp->rhi);
        }
        break;
    default: /* scans and the neighborhood forms: not defined on intercommunicators */
        break;
    }
}

/* ---- the entry points: each names its call's arguments, blocking and not ---- */

#define CGPU_INTER_ENTRIES(name, PARAMS, INIT)                                                     \
    CGPU_STAGED_ENTRIES(inter, name, PARAMS, INIT, inter_spans)

/* the argument lists the coll interface gives each shape of call */
#define P_BLOCKS                                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,            \
     struct ompi_datatype_t *rdt)
#define P_ROOTED                                                                                   \
    (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf, int rcount,            \
     struct ompi_datatype_t *rdt, int root)
#define P_REDUCE                                                                                   \
    (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt, struct ompi_op_t *op)
#define A_BLOCKS(k)                                                                                \
    (.kind = (k), .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf, .rc = rcount, .rdt = rdt)
#define A_ROOTED(k)                                                                                \
    (.kind = (k), .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf, .rc = rcount, .rdt = rdt,        \
     .root = root)
#define A_REDUCE(k) (.kind = (k), .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op)

CGPU_INTER_ENTRIES(allgather, P_BLOCKS, A_BLOCKS(CGPU_K_ALLGATHER))
CGPU_INTER_ENTRIES(alltoall, P_BLOCKS, A_BLOCKS(CGPU_K_ALLTOALL))
CGPU_INTER_ENTRIES(gather, P_ROOTED, A_ROOTED(CGPU_K_GATHER))
CGPU_STAGED_NB_ENTRY(inter, scatter, P_ROOTED, A_ROOTED(CGPU_K_SCATTER), inter_spans)
CGPU_INTER_ENTRIES(allreduce, P_REDUCE, A_REDUCE(CGPU_K_ALLREDUCE))
CGPU_INTER_ENTRIES(reduce_scatter_block, P_REDUCE, A_REDUCE(CGPU_K_REDUCE_SCATTER_BLOCK))
CGPU_INTER_ENTRIES(reduce,
                   (const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dt,
                    struct ompi_op_t *op, int root),
                   (.kind = CGPU_K_REDUCE, .s = sbuf, .r = rbuf, .rc = count, .rdt = dt, .op = op,
                    .root = root))
CGPU_INTER_ENTRIES(reduce_scatter,
                   (const void *sbuf, void *rbuf, const int *rcounts, struct ompi_datatype_t *dt,
                    struct ompi_op_t *op),
                   (.kind = CGPU_K_REDUCE_SCATTER, .s = sbuf, .r = rbuf, .rcs = rcounts, .rdt = dt,
                    .op = op))
CGPU_INTER_ENTRIES(bcast, (void *buf, int count, struct ompi_datatype_t *dt, int root),
                   (.kind = CGPU_K_BCAST, .r = buf, .rc = count, .rdt = dt, .root = root))
CGPU_INTER_ENTRIES(allgatherv,
                   (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                    const int *rcounts, const int *displs, struct ompi_datatype_t *rdt),
                   (.kind = CGPU_K_ALLGATHERV, .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf,
                    .rcs = rcounts, .rds = displs, .rdt = rdt))
CGPU_INTER_ENTRIES(gatherv,
                   (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                    const int *rcounts, const int *displs, struct ompi_datatype_t *rdt, int root),
                   (.kind = CGPU_K_GATHERV, .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf,
                    .rcs = rcounts, .rds = displs, .rdt = rdt, .root = root))
CGPU_INTER_ENTRIES(scatterv,
                   (const void *sbuf, const int *scounts, const int *displs,
                    struct ompi_datatype_t *sdt, void *rbuf, int rcount,
                    struct ompi_datatype_t *rdt, int root),
                   (.kind = CGPU_K_SCATTERV, .s = sbuf, .scs = scounts, .sds = displs, .sdt = sdt,
                    .r = rbuf, .rc = rcount, .rdt = rdt, .root = root))
CGPU_INTER_ENTRIES(alltoallv,
                   (const void *sbuf, const int *scounts, const int *sdispls,
                    struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                    struct ompi_datatype_t *rdt),
                   (.kind = CGPU_K_ALLTOALLV, .s = sbuf, .scs = scounts, .sds = sdispls, .sdt = sdt,
                    .r = rbuf, .rcs = rcounts, .rds = rdispls, .rdt = rdt))
CGPU_INTER_ENTRIES(alltoallw,
                   (const void *sbuf, const int *scounts, const int *sdispls,
                    struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                    const int *rdispls, struct ompi_datatype_t *const *rdts),
                   (.kind = CGPU_K_ALLTOALLW, .s = sbuf, .scs = scounts, .sds = sdispls,
                    .sdts = sdts, .r = rbuf, .rcs = rcounts, .rds = rdispls, .rdts = rdts))

/*
 * MPI_Scatter runs as the previous module's MPI_Scatterv, on every rank of the call. Open
 * MPI 4.1's coll/basic (the previous module wherever coll/inter is not selected, as with
 * --mca coll gpu,tuned,libnbc,basic,self) posts the root's sends into its request array and
 * then waits on the entries after them: at the first scatter on a communicator the root
 * reads a request past the array's end and crashes in ompi_request_default_wait_all (fault
 * address 0x60), later ones return before their sends are complete, while this module frees
 * the staged copy they send from. Its scatterv waits on the requests it posted. Both ends
 * must take the same call (the two use different tags), so the choice depends on nothing
 * but the call being on an intercommunicator. The root's block i is one element of a
 * contiguous type of scount elements at displacement i: no displacement overflows an int
 * however large the message, and the bytes sent are the same.
 */
static int inter_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdt, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    mca_coll_gpu_args_t a = {.kind = CGPU_K_SCATTERV,
                             .s = sbuf,
                             .sdt = sdt,
                             .r = rbuf,
                             .rc = rcount,
                             .rdt = rdt,
                             .root = root};
    if (MPI_ROOT != root) { /* the counts, displacements and send type are the root's alone */
        return mca_coll_gpu_staged_call(m, comm, &a, inter_spans);
    }
    const int rsize = ompi_comm_remote_size(comm);
    struct ompi_datatype_t *block = NULL;
    int *cd = malloc(2 * (size_t) rsize * sizeof(int));
    int rc = NULL == cd ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
    if (OMPI_SUCCESS == rc && scount > 0) {
        rc = ompi_datatype_create_contiguous(scount, sdt, &block);
        if (OMPI_SUCCESS == rc) {
            rc = ompi_datatype_commit(&block);
        }
    }
    if (OMPI_SUCCESS != rc) { /* the remote group then waits in its receives: an MPI error */
        cgpu_log(CGPU_LOG_WARN, "MPI_Scatter on %s: no memory for the root's block layout (%d)",
                 comm->c_name, rc);
        rc = MPI_ERR_NO_MEM;
        goto out_free_layout;
    }
    for (int i = 0; i < rsize; ++i) {
        cd[i] = scount > 0 ? 1 : 0;
        cd[rsize + i] = scount > 0 ? i : 0;
    }
    a.sdt = NULL != block ? block : sdt;
    a.scs = cd;
    a.sds = cd + rsize;
    rc = mca_coll_gpu_staged_call(m, comm, &a, inter_spans);
out_free_layout:
    if (NULL != block) {
        ompi_datatype_destroy(&block);
    }
    free(cd);
    return rc;
}

void mca_coll_gpu_inter_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
#define CGPU_INTER(name)                                                                           \
    s->coll_##name = inter_##name;                                                                 \
    s->coll_i##name = inter_i##name;
    CGPU_INTER(allgather)
    CGPU_INTER(allgatherv)
    CGPU_INTER(allreduce)
    CGPU_INTER(alltoall)
    CGPU_INTER(alltoallv)
    CGPU_INTER(alltoallw)
    CGPU_INTER(bcast)
    CGPU_INTER(gather)
    CGPU_INTER(gatherv)
    CGPU_INTER(reduce)
    CGPU_INTER(reduce_scatter)
    CGPU_INTER(reduce_scatter_block)
    CGPU_INTER(scatter)
    CGPU_INTER(scatterv)
#undef CGPU_INTER
}
