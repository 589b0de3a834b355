/*
 * bench/c_loop.so: bench_colls' timed loop as a function a Python process calls once
 * (ctypes), so that the same collective runs back to back from C inside a Python process.
 *
 * bench_python.py --colls --c-loop bench/c_loop.so times it next to mpi4py's loop on the
 * same buffers. Against bench_colls (a C process) and mpi4py's loop (the same process), it
 * splits Python's extra time into what the interpreter does at each call (mpi4py's loop
 * slower than this one) and what a Python process is (this loop slower than bench_colls:
 * the libraries it loaded, its threads, its memory), which no per-call probe can tell apart.
 *
 * With touch_bytes > 0 the loop also writes that many bytes of its own between two calls, a
 * cache line apart, as an interpreter's work between calls would evict what the call left
 * in the caches: whether that alone makes the calls as slow as mpi4py's loop.
 */
#include <mpi.h>
#include <stdlib.h>

/* The collectives in bench_python's order; float32, sum, root 0, counts as it passes them:
 * nsend and nrecv are the two buffers' floats. L_NONE: no call, the writes alone (their
 * own time, to subtract). */
enum { L_NONE = -1, L_ALLREDUCE, L_ALLTOALL, L_ALLGATHER, L_REDUCE_SCATTER, L_BCAST, L_REDUCE };

/* Writes @p bytes of a buffer kept for the process, a cache line apart. */
static void touch(size_t bytes)
{
    static volatile char *mem;
    static size_t have;
    if (bytes > have) {
        free((void *) mem);
        mem = calloc(bytes, 1);
        have = NULL == mem ? 0 : bytes;
    }
    for (size_t i = 0; i < bytes && i < have; i += 64) {
        mem[i]++;
    }
}

int cgpu_c_loop(int which, const void *s, void *r, int nsend, int nrecv, MPI_Fint fcomm, int iters,
                long touch_bytes)
{
    const MPI_Comm comm = MPI_Comm_f2c(fcomm);
    int size = 1;
    MPI_Comm_size(comm, &size);
    int rc = MPI_SUCCESS;
    for (int i = 0; i < iters && MPI_SUCCESS == rc; ++i) {
        if (touch_bytes > 0) {
            touch((size_t) touch_bytes);
        }
        switch (which) {
        case L_ALLREDUCE:
            rc = MPI_Allreduce(s, r, nsend, MPI_FLOAT, MPI_SUM, comm);
            break;
        case L_ALLTOALL:
            rc = MPI_Alltoall(s, nsend / size, MPI_FLOAT, r, nrecv / size, MPI_FLOAT, comm);
            break;
        case L_ALLGATHER:
            rc = MPI_Allgather(s, nsend, MPI_FLOAT, r, nrecv / size, MPI_FLOAT, comm);
            break;
        case L_REDUCE_SCATTER:
            rc = MPI_Reduce_scatter_block(s, r, nrecv, MPI_FLOAT, MPI_SUM, comm);
            break;
        case L_BCAST:
            rc = MPI_Bcast(r, nrecv, MPI_FLOAT, 0, comm);
            break;
        case L_REDUCE:
            rc = MPI_Reduce(s, r, nsend, MPI_FLOAT, MPI_SUM, 0, comm);
            break;
        case L_NONE:
            break;
        default:
            return MPI_ERR_ARG;
        }
    }
    return rc;
}
