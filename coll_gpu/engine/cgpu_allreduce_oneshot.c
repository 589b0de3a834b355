/*
 * coll/gpu engine: the one-shot allreduce of small host inputs.
 *
 * Up to CGPU_SEG_EARLY_BYTES of host memory on every rank of a one-node communicator that
 * checks its calls: each rank wrote its input to its early area before it published the
 * call (cgpu_comm_enter_early), so once the call check has seen every peer's record, every
 * peer's input is there to read too. The ring would move the data in two more rounds of
 * waiting; here there are none. Every rank reduces the inputs in rank order, so all get the
 * same bits. An early area is written again two calls later, once every peer has entered
 * the call in between (cgpu_comm_enter_early waits for that), so nobody reads it then.
 *
 * No rank waits for another after the check, so a rank that arrives after its peers gave the
 * call up (the watchdog's abort) would find their inputs and succeed where they failed: it
 * looks at their failed_seq words once it has reduced, and fails the call as they did.
 */
#include "cgpu_comm_internal.h"
#include "cgpu_reduce.h"

cgpu_status_t cgpu_host_oneshot_allreduce(cgpu_comm_t *comm, void *rbuf, size_t count,
                                          cgpu_dtype_t dt, cgpu_op_t op)
{
    const uint64_t s = comm->seq + 1; /* the call now entered */
    atomic_store_explicit(&comm->ras.alg, CGPU_RAS_ALG_ONESHOT, memory_order_relaxed);
    cgpu_coll_prof_begin(comm, "allreduce", count, cgpu_dtype_name(dt), cgpu_op_name(op),
                         count * cgpu_dtype_size(dt), "oneshot");
    cgpu_status_t st = CGPU_OK;
    if (0 != cgpu_reduce_host(dt, op, rbuf, cgpu_seg_early(comm, 0, s),
                              cgpu_seg_early(comm, 1, s), count)) {
        st = CGPU_ERR_INVALID_ARG; /* checked by the caller: cgpu_reduce_supported */
    }
    for (int p = 2; CGPU_OK == st && p < comm->size; ++p) {
        cgpu_reduce_host(dt, op, rbuf, rbuf, cgpu_seg_early(comm, p, s), count);
    }
    for (int p = 0; CGPU_OK == st && p < comm->size; ++p) {
        if (p != comm->rank &&
            s == atomic_load_explicit(&cgpu_ctrl(comm, p)->failed_seq, memory_order_acquire)) {
            cgpu_log(CGPU_LOG_INFO,
                     "engine: allreduce #%llu on communicator %s failed on rank %d before this "
                     "rank arrived; it fails here too",
                     (unsigned long long) s, comm->ras.name, p);
            st = CGPU_ERR_TIMEOUT;
        }
    }
    cgpu_coll_prof_end(comm);
    return st;
}
