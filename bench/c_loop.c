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
 *
 * With wait_ns > 0 it also spins between two calls for a time drawn evenly from
 * wait_ns +- spread_ns (the same draws at every call of the function), as an interpreter's
 * time between calls varies from call to call: a rank that comes late makes the other
 * wait inside the collective, so uneven gaps alone lengthen every rank's calls.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

/* The collectives in bench_python's order; float32, sum, root 0, counts as it passes them:
 * nsend and nrecv are the two buffers' floats. L_NONE: no call, the writes and waits alone
 * (their own time, to subtract). */
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

/* Spins for a time drawn evenly from [wait - spread, wait + spread] ns (@p seed: the draws) */
static void spin(long wait, long spread, uint64_t *seed)
{
    *seed = *seed * 6364136223846793005u + 1442695040888963407u;
    const long span = 2 * spread + 1;
    const long ns = wait - spread + (spread > 0 ? (long) ((*seed >> 33) % (uint64_t) span) : 0);
    const double end = MPI_Wtime() + (ns > 0 ? (double) ns * 1e-9 : 0.0);
    while (MPI_Wtime() < end) {
    }
}

int cgpu_c_loop(int which, const void *s, void *r, int nsend, int nrecv, MPI_Fint fcomm, int iters,
                long touch_bytes, long wait_ns, long spread_ns)
{
    const MPI_Comm comm = MPI_Comm_f2c(fcomm);
    int size = 1, rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    uint64_t seed = 0x9e3779b97f4a7c15u * (uint64_t) (rank + 1); /* each rank its own draws */
    int rc = MPI_SUCCESS;
    for (int i = 0; i < iters && MPI_SUCCESS == rc; ++i) {
        if (touch_bytes > 0) {
            touch((size_t) touch_bytes);
        }
        if (wait_ns > 0) {
            spin(wait_ns, spread_ns, &seed);
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
