/*
 * coll/gpu engine, cuda backend: the collectives' entry points (cgpu_cuda_comm.h) other
 * than the alltoall's (alltoall.c).
 *
 * Each describes its call (buffers, sizes, what the profiler and RAS see) and picks its
 * algorithm, the same on every rank: a oneshot for small calls (launched, or resident where
 * this rank may: its own choice); the copy engines for large calls of two ranks (the reduce
 * and the allreduce: on two devices); the tree for mid-sized allreduces of 3 or more ranks;
 * else the ring, or the chain along it. The choice is kept apart from the launch paths so
 * that its rules read in one place.
 */
#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

cgpu_status_t cgpu_cuda_allreduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                  cgpu_dtype_t dt, cgpu_op_t op, cgpu_allreduce_alg_t alg,
                                  const cgpu_pairs_out_t *po)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t bytes = count * cgpu_dtype_size(dt);
    const size_t ce_min = cgpu_engine_config()->cuda_ce_allreduce_min_bytes;
    /* 2 ranks on two devices (stream3), auto, out of place, and both halves whole vectors
     * (the same answer on every rank: count, the settings and the devices are; the buffers
     * are agreed on in ce_prepare) */
    if (CGPU_ALLREDUCE_AUTO == alg && 0 != ce_min && bytes >= ce_min && NULL != cc->stream3 &&
        count >= 32) {
        cgpu_cuda_call_t k = {.kind = "allreduce",
                              .dtype = cgpu_dtype_name(dt),
                              .op = cgpu_op_name(op),
                              .count = count,
                              .bytes = bytes,
                              .sbuf = sbuf,
                              .in_bytes = bytes,
                              .rbuf = rbuf,
                              .out_bytes = bytes};
        bool done; /* a padded pair's call takes part in the agreement, and declines */
        cgpu_status_t st =
            cgpu_cuda_ce_try_allreduce(comm, &k, sbuf, rbuf, count, dt, op, NULL == po, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    /* oneshot moves (n-1) x bytes out of every rank, the ring 2(n-1)/n x bytes: with
     * auto, its size limit shrinks as ranks are added (2 ranks: the whole slice) */
    size_t oneshot_max = CGPU_ALLREDUCE_ONESHOT == alg
                             ? cc->oneshot_slice
                             : cc->oneshot_slice * 2 / (size_t) comm->size;
    bool oneshot =
        (CGPU_ALLREDUCE_ONESHOT == alg || CGPU_ALLREDUCE_AUTO == alg) && bytes <= oneshot_max;
    /* tree: forced, or auto for 3+ ranks between the oneshot limit and tree_max_bytes
     * (fewer steps than the ring's 2(n-1) where latency still matters) */
    bool tree = !oneshot && cc->tree_nch > 0 &&
                (CGPU_ALLREDUCE_TREE == alg ||
                 (CGPU_ALLREDUCE_AUTO == alg && comm->size >= 3 && bytes <= cc->tree_max_bytes));
    cgpu_cuda_ring_call_t rc = {
        .mode = CGPU_CUDA_RING_ALLREDUCE, .count = count, .dt = dt, .op = op};
    /* A padded pair's whole result by a oneshot, on buffers of this device aligned for the
     * type: the kernel reads the caller's input and writes the caller's output itself (its
     * result stores skip the gaps, and it reads the last element whole only in an aligned
     * 16-byte access, which cannot leave the allocation), so no copies around it and the
     * resident kernel may take it (its test of the buffers answers for both). This rank's
     * choice alone: the kernel and what it exchanges are the same. Else a padded pair's
     * staged copies need the stream, which the resident kernel has not. */
    const size_t align = cgpu_cuda_dtype_align(dt);
    const bool whole = NULL == po || (0 == po->first && count == po->n && po->out == rbuf);
    bool resident = oneshot && whole && cgpu_cuda_rk_takes(comm, sbuf, rbuf, bytes, align);
    if (NULL != po && oneshot && whole &&
        (resident || (cgpu_cuda_buf_kind(cc, sbuf, align).in_place &&
                      cgpu_cuda_buf_kind(cc, rbuf, align).in_place))) {
        po = NULL;
    }
    resident = resident && NULL == po;
    cgpu_cuda_call_t k = {.kind = "allreduce",
                          .dtype = cgpu_dtype_name(dt),
                          .op = cgpu_op_name(op),
                          .alg = resident  ? "resident"
                                 : oneshot ? "oneshot"
                                 : tree    ? "tree"
                                           : "ring",
                          .count = count,
                          .bytes = bytes,
                          .ras_alg = oneshot ? CGPU_RAS_ALG_ONESHOT
                                     : tree  ? CGPU_RAS_ALG_TREE
                                             : CGPU_RAS_ALG_RING,
                          .sbuf = sbuf,
                          .in_bytes = bytes,
                          .rbuf = rbuf,
                          .out_bytes = bytes,
                          .align = align,
                          .resident = resident,
                          .fn = resident  ? cgpu_cuda_launch_resident
                                : oneshot ? cgpu_cuda_launch_oneshot
                                : tree    ? cgpu_cuda_launch_tree
                                          : cgpu_cuda_launch_ring,
                          .args = &rc};
    if (NULL != po) {
        k.po = po;
        k.po_dt = dt;
        k.rbuf = NULL;
        k.in_bytes = cgpu_dtype_span(dt, count);
        k.force_copy_in = true;
    }
    return cgpu_cuda_run(comm, &k);
}

/* A reduction @p rc of @p bytes (for the profiler) on the ring kernels' launcher: the caller
 * adds the buffers */
static cgpu_cuda_call_t ring_reduction(const char *kind, const char *alg, cgpu_cuda_ring_call_t *rc,
                                       size_t bytes)
{
    return (cgpu_cuda_call_t){.kind = kind,
                              .dtype = cgpu_dtype_name(rc->dt),
                              .op = cgpu_op_name(rc->op),
                              .alg = alg,
                              .count = rc->count,
                              .bytes = bytes,
                              .ras_alg = CGPU_RAS_ALG_RING,
                              .align = cgpu_cuda_dtype_align(rc->dt),
                              .fn = cgpu_cuda_launch_ring,
                              .args = rc};
}

cgpu_status_t cgpu_cuda_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                             cgpu_dtype_t dt, cgpu_op_t op, bool exclusive)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool out = !exclusive || comm->rank > 0; /* an exscan's rank 0 gets nothing */
    cgpu_cuda_ring_call_t rc = {.mode =
                                    exclusive ? CGPU_CUDA_ONESHOT_EXSCAN : CGPU_CUDA_ONESHOT_SCAN,
                                .root = comm->size - 1,
                                .count = count,
                                .dt = dt,
                                .op = op};
    cgpu_cuda_call_t k = ring_reduction(exclusive ? "exscan" : "scan", "chain", &rc, bytes);
    k.sbuf = NULL != sbuf ? sbuf : rbuf;
    k.in_bytes = bytes;
    k.rbuf = out ? rbuf : NULL;
    k.out_bytes = out ? bytes : 0;
    return cgpu_cuda_small_call(comm, CGPU_CUDA_SMALL_SCAN, bytes)
               ? cgpu_cuda_run_small(comm, &k, &rc)
               : cgpu_cuda_run(comm, &k);
}

cgpu_status_t cgpu_cuda_reduce_scatter(cgpu_comm_t *comm, const void *sbuf, void *rbuf,
                                       size_t count, cgpu_dtype_t dt, cgpu_op_t op)
{
    const size_t bytes = count * cgpu_dtype_size(dt), total = bytes * (size_t) comm->size;
    cgpu_cuda_ring_call_t rc = {
        .mode = CGPU_CUDA_RING_REDUCE_SCATTER, .count = count, .dt = dt, .op = op};
    cgpu_cuda_call_t k = ring_reduction("reduce_scatter_block", "ring", &rc, total);
    k.sbuf = NULL != sbuf ? sbuf : rbuf;
    k.in_bytes = total;
    k.rbuf = rbuf;
    k.out_bytes = NULL != sbuf ? bytes : total;
    return cgpu_cuda_small_call(comm, CGPU_CUDA_SMALL_BLOCK, bytes)
               ? cgpu_cuda_run_small(comm, &k, &rc)
               : cgpu_cuda_run(comm, &k);
}

cgpu_status_t cgpu_cuda_reduce(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                               cgpu_dtype_t dt, cgpu_op_t op, int root)
{
    const size_t bytes = count * cgpu_dtype_size(dt);
    const bool is_root = comm->rank == root;
    cgpu_cuda_ring_call_t rc = {
        .mode = CGPU_CUDA_RING_REDUCE, .root = root, .count = count, .dt = dt, .op = op};
    cgpu_cuda_call_t k = ring_reduction("reduce", "chain", &rc, bytes);
    k.sbuf = NULL != sbuf ? sbuf : rbuf;
    k.in_bytes = bytes;
    k.rbuf = is_root ? rbuf : NULL;
    k.out_bytes = is_root ? bytes : 0;
    if (cgpu_cuda_small_call(comm, CGPU_CUDA_SMALL_CHAIN, bytes)) {
        return cgpu_cuda_run_small(comm, &k, &rc);
    }
    const size_t ce_min = cgpu_engine_config()->cuda_ce_reduce_min_bytes;
    if (0 != ce_min && bytes >= ce_min && NULL != comm->cuda->stream2) { /* 2 ranks, 2 devices */
        bool done;
        cgpu_status_t st =
            cgpu_cuda_ce_try_reduce(comm, &k, sbuf, rbuf, count, dt, op, root, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    return cgpu_cuda_run(comm, &k);
}

cgpu_status_t cgpu_cuda_bcast(cgpu_comm_t *comm, void *buf, size_t bytes, int root, void *part,
                              size_t part_off, size_t part_bytes)
{
    cgpu_cuda_ring_call_t rc = {
        .mode = CGPU_CUDA_RING_BCAST, .root = root, .count = bytes, .copy = true};
    cgpu_cuda_call_t k = {.kind = "bcast",
                          .dtype = "byte",
                          .op = "",
                          .alg = "chain",
                          .count = bytes,
                          .bytes = bytes,
                          .ras_alg = CGPU_RAS_ALG_RING,
                          .sbuf = buf,
                          .in_bytes = bytes,
                          .rbuf = buf,
                          .out_bytes = bytes,
                          .fn = cgpu_cuda_launch_ring,
                          .args = &rc,
                          .tail = part,
                          .tail_off = part_off,
                          .tail_bytes = NULL != part ? part_bytes : 0};
    if (cgpu_cuda_small_call(comm, CGPU_CUDA_SMALL_CHAIN, bytes)) {
        return cgpu_cuda_run_small(comm, &k, &rc);
    }
    const size_t ce_min = cgpu_engine_config()->cuda_ce_bcast_min_bytes;
    /* the root writes to each peer in turn: with more than 2 ranks the chain is faster */
    if (0 != ce_min && bytes >= ce_min && 2 == comm->size) {
        bool done;
        cgpu_status_t st = cgpu_cuda_ce_try_bcast(comm, &k, buf, bytes, root, &done);
        if (CGPU_OK != st || done) {
            return st;
        }
    }
    return cgpu_cuda_run(comm, &k);
}

cgpu_status_t cgpu_cuda_allgather(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t bytes)
{
    const size_t total = bytes * (size_t) comm->size;
    cgpu_cuda_ring_call_t rc = {.mode = CGPU_CUDA_RING_ALLGATHER, .count = bytes, .copy = true};
    cgpu_cuda_call_t k = {.kind = "allgather",
                          .dtype = "byte",
                          .op = "",
                          .alg = "ring",
                          .count = bytes,
                          .bytes = total,
                          .ras_alg = CGPU_RAS_ALG_RING,
                          .sbuf = NULL != sbuf ? sbuf : (char *) rbuf + (size_t) comm->rank * bytes,
                          .in_bytes = bytes,
                          .rbuf = rbuf,
                          .out_bytes = total,
                          .fn = cgpu_cuda_launch_ring,
                          .args = &rc};
    return cgpu_cuda_small_call(comm, CGPU_CUDA_SMALL_BLOCK, bytes)
               ? cgpu_cuda_run_small(comm, &k, &rc)
               : cgpu_cuda_run(comm, &k);
}

#endif /* CGPU_HAVE_CUDA */
