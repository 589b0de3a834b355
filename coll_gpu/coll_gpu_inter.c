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
 * non-blocking forms stage the same spans (coll_gpu_nb.c), and the persistent ones start
 * through them. Barriers have no buffer and stay with the previous module.
 */
#include "coll_gpu.h"

#include "opal/util/output.h"

#define M(module) ((mca_coll_gpu_module_t *) (module))

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

/* The previous module's blocking form of @p a. */
static int prev_call(mca_coll_gpu_module_t *m, const mca_coll_gpu_args_t *a,
                     struct ompi_communicator_t *c)
{
    const mca_coll_base_comm_coll_t *p = &m->prev;
    switch (a->kind) {
    case CGPU_K_ALLGATHER:
        return p->coll_allgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c,
                                 p->coll_allgather_module);
    case CGPU_K_ALLGATHERV:
        return p->coll_allgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                  p->coll_allgatherv_module);
    case CGPU_K_ALLREDUCE:
        return p->coll_allreduce(a->s, a->r, a->rc, a->rdt, a->op, c, p->coll_allreduce_module);
    case CGPU_K_ALLTOALL:
        return p->coll_alltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c,
                                p->coll_alltoall_module);
    case CGPU_K_ALLTOALLV:
        return p->coll_alltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds, a->rdt, c,
                                 p->coll_alltoallv_module);
    case CGPU_K_ALLTOALLW:
        return p->coll_alltoallw(a->s, a->scs, a->sds, a->sdts, a->r, a->rcs, a->rds, a->rdts, c,
                                 p->coll_alltoallw_module);
    case CGPU_K_BCAST:
        return p->coll_bcast(a->r, a->rc, a->rdt, a->root, c, p->coll_bcast_module);
    case CGPU_K_GATHER:
        return p->coll_gather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                              p->coll_gather_module);
    case CGPU_K_GATHERV:
        return p->coll_gatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, a->root, c,
                               p->coll_gatherv_module);
    case CGPU_K_REDUCE:
        return p->coll_reduce(a->s, a->r, a->rc, a->rdt, a->op, a->root, c, p->coll_reduce_module);
    case CGPU_K_REDUCE_SCATTER:
        return p->coll_reduce_scatter(a->s, a->r, a->rcs, a->rdt, a->op, c,
                                      p->coll_reduce_scatter_module);
    case CGPU_K_REDUCE_SCATTER_BLOCK:
        return p->coll_reduce_scatter_block(a->s, a->r, a->rc, a->rdt, a->op, c,
                                            p->coll_reduce_scatter_block_module);
    case CGPU_K_SCATTER:
        return p->coll_scatter(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                               p->coll_scatter_module);
    case CGPU_K_SCATTERV:
        return p->coll_scatterv(a->s, a->scs, a->sds, a->sdt, a->r, a->rc, a->rdt, a->root, c,
                                p->coll_scatterv_module);
    default:
        return MPI_ERR_INTERN;
    }
}

/* The previous module's non-blocking form of @p a (an mca_coll_gpu_post_fn_t). */
static int prev_post(mca_coll_gpu_module_t *m, const mca_coll_gpu_args_t *a,
                     struct ompi_communicator_t *c, ompi_request_t **q)
{
    const mca_coll_base_comm_coll_t *p = &m->prev;
    switch (a->kind) {
    case CGPU_K_ALLGATHER:
        return p->coll_iallgather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, q,
                                  p->coll_iallgather_module);
    case CGPU_K_ALLGATHERV:
        return p->coll_iallgatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, c, q,
                                   p->coll_iallgatherv_module);
    case CGPU_K_ALLREDUCE:
        return p->coll_iallreduce(a->s, a->r, a->rc, a->rdt, a->op, c, q,
                                  p->coll_iallreduce_module);
    case CGPU_K_ALLTOALL:
        return p->coll_ialltoall(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, c, q,
                                 p->coll_ialltoall_module);
    case CGPU_K_ALLTOALLV:
        return p->coll_ialltoallv(a->s, a->scs, a->sds, a->sdt, a->r, a->rcs, a->rds, a->rdt, c, q,
                                  p->coll_ialltoallv_module);
    case CGPU_K_ALLTOALLW:
        return p->coll_ialltoallw(a->s, a->scs, a->sds, a->sdts, a->r, a->rcs, a->rds, a->rdts, c,
                                  q, p->coll_ialltoallw_module);
    case CGPU_K_BCAST:
        return p->coll_ibcast(a->r, a->rc, a->rdt, a->root, c, q, p->coll_ibcast_module);
    case CGPU_K_GATHER:
        return p->coll_igather(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c, q,
                               p->coll_igather_module);
    case CGPU_K_GATHERV:
        return p->coll_igatherv(a->s, a->sc, a->sdt, a->r, a->rcs, a->rds, a->rdt, a->root, c, q,
                                p->coll_igatherv_module);
    case CGPU_K_REDUCE:
        return p->coll_ireduce(a->s, a->r, a->rc, a->rdt, a->op, a->root, c, q,
                               p->coll_ireduce_module);
    case CGPU_K_REDUCE_SCATTER:
        return p->coll_ireduce_scatter(a->s, a->r, a->rcs, a->rdt, a->op, c, q,
                                       p->coll_ireduce_scatter_module);
    case CGPU_K_REDUCE_SCATTER_BLOCK:
        return p->coll_ireduce_scatter_block(a->s, a->r, a->rc, a->rdt, a->op, c, q,
                                             p->coll_ireduce_scatter_block_module);
    case CGPU_K_SCATTER:
        return p->coll_iscatter(a->s, a->sc, a->sdt, a->r, a->rc, a->rdt, a->root, c, q,
                                p->coll_iscatter_module);
    case CGPU_K_SCATTERV:
        return p->coll_iscatterv(a->s, a->scs, a->sds, a->sdt, a->r, a->rc, a->rdt, a->root, c, q,
                                 p->coll_iscatterv_module);
    default:
        return MPI_ERR_INTERN;
    }
}

static const char *const kind_name[] = {
    [CGPU_K_ALLGATHER] = "allgather",
    [CGPU_K_ALLGATHERV] = "allgatherv",
    [CGPU_K_ALLREDUCE] = "allreduce",
    [CGPU_K_ALLTOALL] = "alltoall",
    [CGPU_K_ALLTOALLV] = "alltoallv",
    [CGPU_K_ALLTOALLW] = "alltoallw",
    [CGPU_K_BCAST] = "bcast",
    [CGPU_K_GATHER] = "gather",
    [CGPU_K_GATHERV] = "gatherv",
    [CGPU_K_REDUCE] = "reduce",
    [CGPU_K_REDUCE_SCATTER] = "reduce_scatter",
    [CGPU_K_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
    [CGPU_K_SCATTER] = "scatter",
    [CGPU_K_SCATTERV] = "scatterv",
};

/* A blocking call: host buffers straight through, device ones staged. */
static int inter_run(mca_coll_base_module_t *module, struct ompi_communicator_t *comm,
                     const mca_coll_gpu_args_t *a)
{
    mca_coll_gpu_module_t *m = M(module);
    if (mca_coll_gpu_staged_passthrough(m, a->s, a->r)) {
        return MCA_COLL_GPU_PREV(prev_call(m, a, comm));
    }
    mca_coll_gpu_spans_t sp;
    mca_coll_gpu_staged_buf_t s = {.used = false}, r = {.used = false};
    mca_coll_gpu_args_t h = *a;
    void *hs, *hr;
    inter_spans(a, comm, &sp);
    int rc = mca_coll_gpu_stage_side(&s, a->s, sp.slo, sp.shi, &hs);
    if (MPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage_side(&r, a->r, sp.rlo, sp.rhi, &hr);
    }
    if (MPI_SUCCESS != rc) {
        mca_coll_gpu_unstage(&s, rc, false);
        opal_output(0,
                    "coll/gpu: MPI_%s on intercommunicator %s: cannot stage device buffers "
                    "through host memory (%d)",
                    kind_name[a->kind], comm->c_name, rc);
        return rc;
    }
    h.s = hs;
    h.r = hr;
    rc = MCA_COLL_GPU_PREV(prev_call(m, &h, comm));
    mca_coll_gpu_unstage(&s, rc, false);
    return mca_coll_gpu_unstage(&r, rc, sp.rback);
}

/* A non-blocking call: posted on host copies, copied back when it completes. */
static int inter_post(mca_coll_base_module_t *module, struct ompi_communicator_t *comm,
                      const mca_coll_gpu_args_t *a, ompi_request_t **request)
{
    mca_coll_gpu_spans_t sp;
    inter_spans(a, comm, &sp);
    return mca_coll_gpu_nb_staged_call(M(module), comm, a, &sp, prev_post, request,
                                       kind_name[a->kind]);
}

/* ---- the entry points: each names its call's arguments, blocking and not ---- */

#define CGPU_UNPAREN(...) __VA_ARGS__
#define CGPU_INTER_ENTRIES(name, PARAMS, INIT)                                                     \
    static int i_##name(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm,                     \
                        mca_coll_base_module_t *module)                                            \
    {                                                                                              \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return inter_run(module, comm, &a);                                                        \
    }                                                                                              \
    static int ii_##name(CGPU_UNPAREN PARAMS, struct ompi_communicator_t *comm,                    \
                         ompi_request_t **request, mca_coll_base_module_t *module)                 \
    {                                                                                              \
        const mca_coll_gpu_args_t a = {CGPU_UNPAREN INIT};                                         \
        return inter_post(module, comm, &a, request);                                              \
    }

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
CGPU_INTER_ENTRIES(scatter, P_ROOTED, A_ROOTED(CGPU_K_SCATTER))
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

void mca_coll_gpu_inter_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
#define CGPU_INTER(name)                                                                           \
    s->coll_##name = i_##name;                                                                     \
    s->coll_i##name = ii_##name;
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
