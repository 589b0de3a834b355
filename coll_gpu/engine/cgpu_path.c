/*
 * coll/gpu engine: the declining stubs of the path tables (cgpu_path.h), in one place.
 *
 * A path that has no algorithm of its own for an entry names one of these, so a table
 * never holds NULL and a new entry cannot be called through a hole.
 */
#include "cgpu_path.h"

bool cgpu_path_no_reduce(const cgpu_comm_t *comm, cgpu_dtype_t dt, cgpu_op_t op)
{
    (void) comm;
    (void) dt;
    (void) op;
    return false;
}

cgpu_status_t cgpu_path_no_scan(cgpu_comm_t *comm, const void *sbuf, void *rbuf, size_t count,
                                cgpu_dtype_t dt, cgpu_op_t op, bool exclusive)
{
    (void) comm;
    (void) sbuf;
    (void) rbuf;
    (void) count;
    (void) dt;
    (void) op;
    (void) exclusive;
    return CGPU_DECLINED;
}
