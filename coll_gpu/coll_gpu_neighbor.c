/*
 * coll/gpu: the neighborhood collectives (MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v,w)
 * on cartesian, graph and distributed-graph communicators) made safe for device buffers.
 *
 * No engine path: as for the other staged collectives, each device buffer is replaced by a
 * host copy of the bytes its layout touches (the received ones copied back), and the
 * previous module runs the call on the copies; host buffers pass straight through. A side's
 * blocks are counted by the communicator's topology: a rank receives a block from each of
 * its in-neighbors and sends one to each of its out-neighbors. The non-blocking forms
 * stage through the same spans (coll_gpu_nb_staged.c), and the persistent ones start
 * through them.
 */
#include "coll_gpu.h"
#include "coll_gpu_entry.h"
#include "coll_gpu_nb.h"

/* The spans of neighborhood call @p a for this rank: a block received from each
 * in-neighbor, one sent to each out-neighbor. */
static void neighbor_spans(const mca_coll_gpu_args_t *a, struct ompi_communicator_t *comm,
                           mca_coll_gpu_spans_t *sp)
{
    int in, out;
    mca_coll_gpu_degrees(comm, &in, &out);
    *sp = (mca_coll_gpu_spans_t){.rback = true};
    switch (a->kind) {
    case CGPU_K_NALLGATHER:
        mca_coll_gpu_count_span((size_t) a->sc, a->sdt, &sp->slo, &sp->shi);
        mca_coll_gpu_count_span((size_t) a->rc * (size_t) in, a->rdt, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_NALLGATHERV:
        mca_coll_gpu_count_span((size_t) a->sc, a->sdt, &sp->slo, &sp->shi);
        mca_coll_gpu_v_bytes(a->rcs, a->rds, a->rdt, in, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_NALLTOALL:
        mca_coll_gpu_count_span((size_t) a->sc * (size_t) out, a->sdt, &sp->slo, &sp->shi);
        mca_coll_gpu_count_span((size_t) a->rc * (size_t) in, a->rdt, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_NALLTOALLV:
        mca_coll_gpu_v_bytes(a->scs, a->sds, a->sdt, out, &sp->slo, &sp->shi);
        mca_coll_gpu_v_bytes(a->rcs, a->rds, a->rdt, in, &sp->rlo, &sp->rhi);
        break;
    case CGPU_K_NALLTOALLW:
        mca_coll_gpu_w_bytes(a->scs, NULL, a->sad, a->sdts, out, &sp->slo, &sp->shi);
        mca_coll_gpu_w_bytes(a->rcs, NULL, a->rad, a->rdts, in, &sp->rlo, &sp->rhi);
        break;
    default:
        break;
    }
}

/* the entry points, blocking and not (nb_neighbor_allgather, nb_ineighbor_allgather, ...) */
#define CGPU_NEIGHBOR_ENTRIES(name, PARAMS, INIT)                                                  \
    CGPU_STAGED_ENTRIES(nb, name, PARAMS, INIT, neighbor_spans)

CGPU_NEIGHBOR_ENTRIES(neighbor_allgather,
                      (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdt),
                      (.kind = CGPU_K_NALLGATHER, .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf,
                       .rc = rcount, .rdt = rdt))
CGPU_NEIGHBOR_ENTRIES(neighbor_alltoall,
                      (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       int rcount, struct ompi_datatype_t *rdt),
                      (.kind = CGPU_K_NALLTOALL, .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf,
                       .rc = rcount, .rdt = rdt))
CGPU_NEIGHBOR_ENTRIES(neighbor_allgatherv,
                      (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                       const int *rcounts, const int *displs, struct ompi_datatype_t *rdt),
                      (.kind = CGPU_K_NALLGATHERV, .s = sbuf, .sc = scount, .sdt = sdt, .r = rbuf,
                       .rcs = rcounts, .rds = displs, .rdt = rdt))
CGPU_NEIGHBOR_ENTRIES(neighbor_alltoallv,
                      (const void *sbuf, const int *scounts, const int *sdispls,
                       struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts,
                       const int *rdispls, struct ompi_datatype_t *rdt),
                      (.kind = CGPU_K_NALLTOALLV, .s = sbuf, .scs = scounts, .sds = sdispls,
                       .sdt = sdt, .r = rbuf, .rcs = rcounts, .rds = rdispls, .rdt = rdt))
CGPU_NEIGHBOR_ENTRIES(neighbor_alltoallw,
                      (const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                       struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                       const MPI_Aint *rdispls, struct ompi_datatype_t *const *rdts),
                      (.kind = CGPU_K_NALLTOALLW, .s = sbuf, .scs = scounts, .sad = sdispls,
                       .sdts = sdts, .r = rbuf, .rcs = rcounts, .rad = rdispls, .rdts = rdts))

void mca_coll_gpu_neighbor_install(mca_coll_gpu_module_t *m)
{
    mca_coll_base_module_t *s = &m->super;
#define CGPU_NEIGHBOR(name)                                                                        \
    s->coll_##name = nb_##name;                                                                    \
    s->coll_i##name = nb_i##name;
    CGPU_NEIGHBOR(neighbor_allgather)
    CGPU_NEIGHBOR(neighbor_allgatherv)
    CGPU_NEIGHBOR(neighbor_alltoall)
    CGPU_NEIGHBOR(neighbor_alltoallv)
    CGPU_NEIGHBOR(neighbor_alltoallw)
#undef CGPU_NEIGHBOR
}

/* ---- persistent ---- */

CGPU_PERSIST_INIT(mca_coll_gpu_neighbor_allgather_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_NALLGATHER, .s = sbuf, .sc = scount,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rc = rcount, .rdt = rdt))
CGPU_PERSIST_INIT(mca_coll_gpu_neighbor_alltoall_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   int rcount, struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_NALLTOALL, .s = sbuf, .sc = scount,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rc = rcount, .rdt = rdt))
CGPU_PERSIST_INIT(mca_coll_gpu_neighbor_allgatherv_init,
                  (const void *sbuf, int scount, struct ompi_datatype_t *sdt, void *rbuf,
                   const int *rcounts, const int *displs, struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_NALLGATHERV, .s = sbuf, .sc = scount,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rcs = rcounts, .rds = displs,
                   .rdt = rdt))
CGPU_PERSIST_INIT(mca_coll_gpu_neighbor_alltoallv_init,
                  (const void *sbuf, const int *scounts, const int *sdispls,
                   struct ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                   struct ompi_datatype_t *rdt),
                  (.kind = CGPU_K_NALLTOALLV, .s = sbuf, .scs = scounts, .sds = sdispls,
                   .sdt = CGPU_SEND_DT(sbuf, sdt), .r = rbuf, .rcs = rcounts, .rds = rdispls,
                   .rdt = rdt))
CGPU_PERSIST_INIT(mca_coll_gpu_neighbor_alltoallw_init,
                  (const void *sbuf, const int *scounts, const MPI_Aint *sdispls,
                   struct ompi_datatype_t *const *sdts, void *rbuf, const int *rcounts,
                   const MPI_Aint *rdispls, struct ompi_datatype_t *const *rdts),
                  (.kind = CGPU_K_NALLTOALLW, .s = sbuf, .scs = scounts, .sad = sdispls,
                   .sdts = sdts, .r = rbuf, .rcs = rcounts, .rad = rdispls, .rdts = rdts))
