/*
 * coll/gpu engine, cuda backend: oneshot calls, every mode (cgpu_cuda_kernels.h), and the
 * choice of a oneshot for the small calls of every collective.
 *
 * In a oneshot call each rank writes its part straight into its peers' inboxes (their LL
 * areas, for the smallest calls), flags each peer, and builds its result from its own inbox:
 * one step, for calls up to coll_gpu_cuda_small_bytes. A call's mode, number and blocks are
 * computed here for both ways it runs, launched (below) or handed to the resident kernel
 * (resident.c), since peers that run the same call the other way must agree on them.
 */
#include <string.h>

#include "cgpu_config.h"
#include "cuda_internal.h"

#ifdef CGPU_HAVE_CUDA

const char *cgpu_cuda_oneshot_name(int mode)
{
    static const char *names[] = {
        "allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce", "alltoall", "scan",
        "exscan"};
    return mode >= 0 && mode <= CGPU_CUDA_ONESHOT_EXSCAN ? names[mode] : "?";
}

/* bytes of one block of the call (the unit the kernel splits among its blocks) */
size_t cgpu_cuda_oneshot_unit(const cgpu_cuda_ring_call_t *rc)
{
    return rc->count * (rc->copy ? 1 : cgpu_dtype_size(rc->dt));
}

/* The LL size class of a oneshot call (cgpu_cuda_kernels.h), or -1 where it sends no LL
 * lines: a unit of at most coll_gpu_cuda_ll_bytes within the communicator's classes,
 * elements of at most 8 bytes, or of 16 (two lines each: ll_body_wide). The same on every
 * rank (sizes and settings), launched or resident. */
static int ll_class(const cgpu_cuda_comm_t *cc, const cgpu_cuda_ring_call_t *rc)
{
    return cgpu_ll_class(cgpu_cuda_oneshot_unit(rc), rc->copy ? 1 : cgpu_dtype_size(rc->dt),
                         cgpu_engine_config()->cuda_ll_bytes, cc->ll_classes);
}

_Static_assert(CGPU_CUDA_LL_CLASS_DATA(CGPU_CUDA_LL_CLASSES - 1) == CGPU_CUDA_LL_BYTES_MAX,
               "coll_gpu_cuda_ll_bytes' cap is the largest LL size class");

/* The kernel's mode for oneshot call rc and the call's number: LL calls are numbered per
 * size class, the others together. One place for both launched and resident calls, which
 * must agree on every rank. */
uint64_t cgpu_cuda_oneshot_number(cgpu_cuda_comm_t *cc, const cgpu_cuda_ring_call_t *rc, int *mode)
{
    const int c = ll_class(cc, rc);
    *mode = rc->mode | (c >= 0 ? CGPU_CUDA_ONESHOT_LL | c << CGPU_CUDA_LL_CLASS_SHIFT : 0);
    return c >= 0 ? ++cc->ll_seq[c] : ++cc->oneshot_seq;
}

/* A oneshot call's blocks: cgpu_oneshot_blocks (cgpu_engine.h, tested in test_engine) with
 * this process's settings. The same on every rank (sizes and settings): a block flags and
 * waits for the same block of its peers. Smaller blocks for small calls (2 ranks under
 * MPS: 8-64 KiB calls 0.4-1.1 us faster with 4 KiB blocks than with 8 KiB; each of 512
 * threads has one LL line, or one 16-byte vector). */
size_t cgpu_cuda_oneshot_blocks(size_t unit)
{
    return cgpu_oneshot_blocks(unit, cgpu_engine_config()->cuda_oneshot_block_bytes,
                               cgpu_engine_config()->cuda_oneshot_small_block_bytes);
}

cgpu_status_t cgpu_cuda_launch_oneshot(cgpu_comm_t *comm, const void *in, void *out,
                                       const void *args)
{
    const cgpu_cuda_ring_call_t *rc = args;
    cgpu_cuda_comm_t *cc = comm->cuda;
    cgpu_cuda_oneshot_args_t a;
    memset(&a, 0, sizeof(a));
    a.timeout_ns = cc->timeout_ns;
    a.err = cc->err_dev;
    a.in = in;
    a.out = out;
    a.count = rc->count;
    a.seq = cgpu_cuda_oneshot_number(cc, rc, &a.mode);
    const bool ll = 0 != (a.mode & CGPU_CUDA_ONESHOT_LL);
    a.root = rc->root;
    a.rank = comm->rank;
    a.nranks = comm->size;
    a.nblocks = (int) cgpu_cuda_oneshot_blocks(cgpu_cuda_oneshot_unit(rc));
    a.grid = cgpu_cuda_blocks_take(cc, a.nblocks, 1);
    a.slice_bytes = cc->oneshot_slice;
    a.oneshot_off = cc->oneshot_off;
    a.ll_off = cc->ll_off;
    for (int i = 0; i < comm->size; ++i) {
        a.inbox[i] = cc->peer_inbox[i];
    }
    cgpu_log(CGPU_LOG_TRACE, "cuda: oneshot %s rank %d count %zu %s/%s blocks %d seq %llu%s",
             cgpu_cuda_oneshot_name(rc->mode), comm->rank, rc->count,
             rc->copy ? "byte" : cgpu_dtype_name(rc->dt), rc->copy ? "-" : cgpu_op_name(rc->op),
             a.nblocks, (unsigned long long) a.seq, ll ? " LL" : "");
    int err = cgpu_cuda_oneshot_launch(&a, rc->dt, rc->op, cc->threads, cc->stream);
    return 0 != err ? cgpu_cuda_check(err, "oneshot launch") : CGPU_OK;
}

/* Whether a call of another collective than the allreduce, `unit` bytes as @p kind counts
 * them, goes oneshot: up to cgpu_cuda_small_limit, within an inbox slice, and shrinking as
 * ranks are added like the allreduce's (the same answer on every rank: sizes and settings
 * are) */
bool cgpu_cuda_small_call(const cgpu_comm_t *comm, cgpu_cuda_small_kind_t kind, size_t unit)
{
    return unit > 0 &&
           unit <=
               cgpu_cuda_small_limit(kind, comm->size, cgpu_engine_config()->cuda_small_bytes) &&
           unit <= comm->cuda->oneshot_slice * 2 / (size_t) comm->size;
}

/* k as a oneshot call of rc (k->args), handed to the resident kernel where this rank may */
cgpu_status_t cgpu_cuda_run_small(cgpu_comm_t *comm, cgpu_cuda_call_t *k, cgpu_cuda_ring_call_t *rc)
{
    k->resident = cgpu_cuda_rk_takes(comm, k->sbuf, k->rbuf, cgpu_cuda_oneshot_unit(rc), k->align);
    k->alg = k->resident ? "resident" : "oneshot";
    k->ras_alg = CGPU_RAS_ALG_ONESHOT;
    k->force_copy_in = false; /* a block reads its share of the input before it writes out */
    k->fn = k->resident ? cgpu_cuda_launch_resident : cgpu_cuda_launch_oneshot;
    k->args = rc;
    return cgpu_cuda_run(comm, k);
}

bool cgpu_cuda_small_in_place(cgpu_comm_t *comm, cgpu_cuda_small_kind_t kind, const void *sbuf,
                              const void *rbuf, size_t bytes, cgpu_dtype_t dt)
{
    cgpu_cuda_comm_t *cc = comm->cuda;
    const size_t align = cgpu_cuda_dtype_align(dt);
    return NULL != cc && cgpu_cuda_small_call(comm, kind, bytes) &&
           (NULL == sbuf || cgpu_cuda_buf_kind(cc, sbuf, align).in_place) &&
           (NULL == rbuf || cgpu_cuda_buf_kind(cc, rbuf, align).in_place);
}

#endif /* CGPU_HAVE_CUDA */
