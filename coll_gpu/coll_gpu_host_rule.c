/*
 * coll/gpu: which host-backend calls the previous coll module serves better.
 *
 * On the host backend the engine moves data through POSIX shared memory with two copies a
 * message (into the segment, out of it) and waits with flags; Open MPI's tuned component over
 * its shared-memory BTL answers small calls faster and, with single-copy transfers, large
 * alltoalls and allgathers too. A call in a window where the previous module measured faster
 * (bench/bench_host.sh, docs/performance.md) goes to it, host or device buffers alike (device
 * buffers staged, as on every fallback). Only configurations that were measured keep the
 * engine: anything else (more ranks, other sizes) goes to the previous module, so that a
 * host-backend job is never slower than a stock one by our choice.
 *
 * The rule reads the collective, its byte count (equal on every rank by MPI's rules), the
 * communicator's size and whether it spans nodes (the same answer on every rank), and MCA
 * parameters: every rank of a call decides alike (DESIGN decision 2). Communicators across
 * nodes keep the engine: their proxy path was not measured against tuned over the network.
 * coll_gpu_host_rule=engine turns the rule off (the test suite runs the engine that way).
 */
#include "coll_gpu.h"

/* The previous module serves [min_bytes, max_bytes) of a collective at nranks ranks;
 * max_bytes 0: no upper end. */
typedef struct host_window {
    mca_coll_gpu_host_coll_t coll;
    int nranks;
    size_t min_bytes, max_bytes;
} host_window_t;

static const host_window_t windows[] = {
    /* 2 ranks (bench/results/2026-11-28_host.md): the engine's flags cost more than tuned's
     * whole call below 512 B; the large alltoall and allgather, where tuned copies once
     * (single-copy transfers) and the engine twice, measured slower in one of three runs; the
     * allreduce up to 2 KiB, slower in one of three too */
    {MCA_COLL_GPU_HOST_ALLREDUCE, 2, 0, 2048},
    {MCA_COLL_GPU_HOST_ALLTOALL, 2, 0, 512},
    {MCA_COLL_GPU_HOST_ALLTOALL, 2, (size_t) 1 << 20, 0},
    {MCA_COLL_GPU_HOST_BCAST, 2, 0, 512},
    {MCA_COLL_GPU_HOST_ALLGATHER, 2, 0, 512},
    {MCA_COLL_GPU_HOST_ALLGATHER, 2, (size_t) 1 << 20, 0},
};
/* More ranks than this were not measured (no machine with a core a rank): every size of
 * the four collectives goes to the previous module there. */
#define MEASURED_MAX_RANKS 2

bool mca_coll_gpu_spans_nodes(mca_coll_gpu_module_t *m)
{
    int spans = __atomic_load_n(&m->spans_nodes, __ATOMIC_RELAXED);
    if (spans < 0) { /* a function of the communicator alone: any thread may fill it in */
        spans = !mca_coll_gpu_one_node(m->comm);
        __atomic_store_n(&m->spans_nodes, spans, __ATOMIC_RELAXED);
    }
    return 0 != spans;
}

bool mca_coll_gpu_host_leaves(mca_coll_gpu_module_t *m, mca_coll_gpu_host_coll_t coll, size_t bytes)
{
    const mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    if (CGPU_BACKEND_HOST != c->backend || MCA_COLL_GPU_HOST_RULE_ENGINE == c->host_rule) {
        return false;
    }
    const int n = ompi_comm_size(m->comm);
    if (n > MEASURED_MAX_RANKS) {
        return !mca_coll_gpu_spans_nodes(m);
    }
    for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); ++i) {
        const host_window_t *w = &windows[i];
        if (w->coll == coll && n == w->nranks && bytes >= w->min_bytes &&
            (0 == w->max_bytes || bytes < w->max_bytes)) {
            return !mca_coll_gpu_spans_nodes(
                m); /* asked last: the first call of a communicator pays it */
        }
    }
    return false;
}
