/*
 * bench/c_loop.so: bench_colls' timed loop as a function a Python process calls once
 * (ctypes), so that the same collective runs back to back from C inside a Python process.
 *
 * bench_python.py --colls --c-loop bench/c_loop.so times it next to mpi4py's loop on the
 * same buffers. Against bench_colls (a C process) and mpi4py's loop (the same process), it
 * splits Python's extra time into what the interpreter does at each call (mpi4py's loop
 * slower than this one) and what a Python process is (this loop slower than bench_colls:
 * the libraries it loaded, its threads, its memory), which no per-call probe can tell apart.
 */
#include <mpi.h>

/* The collectives in bench_python's order; float32, sum, root 0, counts as it passes them:
 * nsend and nrecv are the two buffers' floats. */
enum { L_ALLREDUCE, L_ALLTOALL, L_ALLGATHER, L_REDUCE_SCATTER, L_BCAST, L_REDUCE };

int cgpu_c_loop(int which, const void *s, void *r, int nsend, int nrecv, MPI_Fint fcomm, int iters)
{
    const MPI_Comm comm = MPI_Comm_f2c(fcomm);
    int size = 1;
    MPI_Comm_size(comm, &size);
    int rc = MPI_SUCCESS;
    for (int i = 0; i < iters && MPI_SUCCESS == rc; ++i) {
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
        default:
            return MPI_ERR_ARG;
        }
    }
    return rc;
}
