/*
 * coll/gpu: the neighborhood collectives (MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v,w)
 * on cartesian, graph and distributed-graph communicators) made safe for device buffers.
 *
 * No engine path: as for the other staged collectives, each device buffer is replaced by a
 * host copy of the bytes its layout touches (the received ones copied back), and the
 * previous module runs the call on the copies; host buffers pass straight through. A side's
 * blocks are counted by the communicator's topology: a rank receives a block from each of
 * its in-neighbors and sends one to each of its out-neighbors. The non-blocking and
 * persistent forms (coll_gpu_nb.c) stage through the same spans.
 */
#include "coll_gpu.h"

#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/topo/base/base.h"
#include "opal/util/output.h"

void mca_coll_gpu_degrees(struct ompi_communicator_t *comm, int *in, int *out)
{
    *in = *out = 0;
    if (OMPI_SUCCESS != mca_topo_base_neighbor_count(comm, in, out)) {
        *in = *out = 0; /* not a topology: the previous module reports it */
    }
}

void mca_coll_gpu_count_span(size_t count, struct ompi_datatype_t *dt, ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t tlb, text, lb, ext;
    *lo = *hi = 0;
    if (0 == count) {
        return;
    }
    ompi_datatype_get_true_extent(dt, &tlb, &text);
    ompi_datatype_get_extent(dt, &lb, &ext);
    *lo = tlb;
    *hi = tlb + (ptrdiff_t) (count - 1) * ext + text;
}

void mca_coll_gpu_v_bytes(const int *counts, const int *displs, struct ompi_datatype_t *dt, int n,
                          ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t lb, ext;
    bool any = false;
    ompi_datatype_get_extent(dt, &lb, &ext);
    *lo = *hi = 0;
    for (int p = 0; p < n; ++p) {
        ptrdiff_t a, b;
        mca_coll_gpu_count_span(counts[p] > 0 ? (size_t) counts[p] : 0, dt, &a, &b);
        if (a == b) {
            continue;
        }
        a += (ptrdiff_t) displs[p] * ext;
        b += (ptrdiff_t) displs[p] * ext;
        *lo = any && *lo < a ? *lo : a;
        *hi = any && *hi > b ? *hi : b;
        any = true;
    }
}

void mca_coll_gpu_w_bytes(const int *counts, const int *idispls, const MPI_Aint *adispls,
                          struct ompi_datatype_t *const *types, int n, ptrdiff_t *lo, ptrdiff_t *hi)
{
    bool any = false;
    *lo = *hi = 0;
    for (int p = 0; p < n; ++p) {
        ptrdiff_t a, b;
        if (counts[p] <= 0) { /* an empty block's type is not looked at */
            continue;
        }
        const ptrdiff_t at = NULL != idispls ? (ptrdiff_t) idispls[p] : (ptrdiff_t) adispls[p];
        mca_coll_gpu_count_span((size_t) counts[p], types[p], &a, &b);
        a += at;
        b += at;
        *lo = any && *lo < a ? *lo : a;
        *hi = any && *hi > b ? *hi : b;
        any = true;
    }
}

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
