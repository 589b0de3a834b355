"""MPI_Allreduce (float32, sum) from Python: the latency a mpi4py user sees, 8 B to 64 KiB.

Columns: numpy arrays through mpi4py (host memory: whatever coll module the run selected);
where CuPy and a GPU are present, CuPy arrays through mpi4py (device memory: coll/gpu's
kernels), the same device memory handed to mpi4py as buffers made once from its addresses
(`ptr_us`: the call without CuPy's __cuda_array_interface__ export, so cupy_us - ptr_us is
the export's share), the export alone (`cai_us`: reading the attribute of both arrays), and
the same arrays through CuPy's own NCCL binding (cupy.cuda.nccl.NcclCommunicator
.allReduce, then the stream synchronized), in the same processes. Then, where present, the
same call on PyTorch tensors (`torch_us`) and Numba device arrays (`numba_us`), and mpi4py's
acquisition of the two CuPy arrays' buffers alone (`mpibuf_us`: MPI.buffer(array), which
reads the export the way a call does). Each figure is the mean
of `iters` calls back to back after a warm-up, the slowest rank's; every size's result is
checked (exit status 1 on a wrong one).

Run under mpirun (see bench/README.md): once with coll/gpu in the coll list and once with
the stock list gives ours against stock on host arrays.

Usage: bench_python.py [--iters N] [--max-bytes B] [--thread multiple|single|funneled]
                       [--host-only] [--cycles N] [--colls [--libs numpy,cupy,...]]

--colls: instead, the six collectives bench/bench_colls times (allreduce, alltoall,
allgather, reduce_scatter as MPI_Reduce_scatter_block, bcast, reduce; float32, root 0, its
sizes: the whole buffer of each), 8 B to max-bytes, on numpy arrays and on every device array
library present (CuPy, PyTorch, Numba): the call
on the arrays (`<lib>_us`), on buffers made once from them with MPI.buffer (`<lib>_buf_us`;
mpi4py then takes no export at each call) and mpi4py's acquisition of the two buffers alone
(`<lib>_acq_us`). Set against bench_colls' `ours_us` of the same run, that says what Python
adds to the C call and which part of it the array library's export is. Every result checked.
Under bench/pmpi_probe.so only the `<lib>_buf_us` loops are counted (MPI_Pcontrol), as only
bench_colls' timed loops are: bench/probe_split.py sets the two runs' files side by side.
With --c-loop bench/c_loop.so (make bench/c_loop.so), also `<lib>_cloop_us`: the same calls
on the same buffers in a loop written in C, called once from this process (ctypes), so that
what the interpreter adds at each call and what a Python process costs come apart;
--c-loop-touch B: that loop writes B bytes of its own between two calls (caches evicted as
an interpreter's work would), and the column is its time less that of the writes alone;
--c-loop-wait NS:SPREAD: that loop spins NS +- SPREAD ns between two calls (uneven gaps, as an
interpreter's are), the column again less the spins' own time.

--cycles N: instead, N cycles of a new communicator (MPI_Comm_split into pairs of ranks, then
MPI_Comm_dup of the world), its first MPI_Allreduce of 8 bytes (a CuPy array where CuPy and
a GPU are present, else numpy) and MPI_Comm_free: the mean milliseconds a cycle, the
slowest rank's. With --world-first, one MPI_Allreduce on the world communicator on those
arrays before the cycles, as an application's first step would be (where ranks share GPUs,
that is where each process learns that its GPU is shared).

--host-only: the numpy column alone (a run without coll/gpu, whose collectives must never
see a device pointer, or one that must not touch the GPU).
"""
import argparse
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--iters", type=int, default=1000)
ap.add_argument("--max-bytes", type=int, default=65536)
ap.add_argument("--thread", default="multiple", choices=("multiple", "single", "funneled"))
ap.add_argument("--host-only", action="store_true")
ap.add_argument("--cycles", type=int, default=0)
ap.add_argument("--colls", action="store_true")
ap.add_argument("--world-first", action="store_true")
ap.add_argument("--libs", default="", help="--colls: only these libraries (comma-separated)")
ap.add_argument("--c-loop", default="", help="--colls: bench/c_loop.so, the loop in C as well")
ap.add_argument("--c-loop-touch", type=int, default=0,
                help="--c-loop: bytes the C loop writes between two calls (0: none)")
ap.add_argument("--c-loop-wait", default="0",
                help="--c-loop: NS[:SPREAD], the C loop spins between two calls for NS +- SPREAD "
                     "ns, drawn evenly at each call (0: none)")
args = ap.parse_args()

import numpy as np  # noqa: E402
import mpi4py  # noqa: E402

mpi4py.rc.thread_level = args.thread
from mpi4py import MPI  # noqa: E402 (after the thread level is set)

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
MPI.Pcontrol(0)  # a profiling tool counts the loops timed(probe=True) brackets alone
expected = nranks * (nranks + 1) / 2  # each rank contributes rank + 1


LEVELS = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
          MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}


def timed_runs(run, sync, iters, probe=False):
    """The slowest rank's mean latency of a call, in microseconds, where run(n) makes n calls
    (a warm-up of iters / 10, at least 10, then iters timed). With probe, a profiling tool
    (bench/pmpi_probe.so) counts the timed calls."""
    run(max(10, iters // 10))
    sync()
    comm.Barrier()
    MPI.Pcontrol(int(probe))
    t0 = time.perf_counter()
    run(iters)
    sync()
    us = (time.perf_counter() - t0) / iters * 1e6
    MPI.Pcontrol(0)
    return comm.allreduce(us, op=MPI.MAX)


def timed(step, sync, iters, probe=False):
    """timed_runs of step(), called from Python."""
    def run(n):
        for _ in range(n):
            step()
    return timed_runs(run, sync, iters, probe)


def gpu_setup(want_nccl=True):
    """(cupy, NCCL communicator or None, why not) where CuPy and a GPU are usable."""
    if args.host_only:
        return None, None, "skipped: --host-only"
    try:
        import cupy
    except ImportError:
        return None, None, "skipped: no cupy"
    try:
        ndev = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        ndev = 0
    if 0 == ndev:
        return None, None, "skipped: no GPU"
    cupy.cuda.Device(rank % ndev).use()
    if not want_nccl:
        return cupy, None, ""
    if nranks > ndev:  # NCCL takes one rank per GPU
        return cupy, None, f"NCCL column skipped: {nranks} ranks share {ndev} GPU(s)"
    try:
        from cupy.cuda import nccl
        if not getattr(nccl, "available", True):
            raise ImportError("built without NCCL")
    except ImportError as e:
        return cupy, None, f"NCCL column skipped: cupy.cuda.nccl not usable ({e})"
    uid = comm.bcast(nccl.get_unique_id() if 0 == rank else None, root=0)
    return cupy, nccl.NcclCommunicator(nranks, uid, rank), ""


def other_arrays():
    """{name: (put a numpy array on the device, get one back as numpy, synchronize)} for
    PyTorch and Numba, where installed and usable; each on the device CuPy uses."""
    out = {}
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.set_device(rank % torch.cuda.device_count())
            out["torch"] = (lambda a: torch.from_numpy(a).cuda(), lambda d: d.cpu().numpy(),
                            torch.cuda.synchronize)
    except ImportError:
        pass
    try:
        from numba import cuda
        if cuda.is_available():
            cuda.select_device(rank % len(cuda.gpus))
            out["numba"] = (cuda.to_device, lambda d: d.copy_to_host(), cuda.synchronize)
    except ImportError:
        pass
    return out


def main():
    cupy, nc, why = gpu_setup()
    others = other_arrays() if cupy is not None else {}
    level = LEVELS
    if 0 == rank:
        # mpirun hands its --mca arguments to the processes as OMPI_MCA_* variables
        coll = os.environ.get("OMPI_MCA_coll", "(default)")
        backend = os.environ.get("OMPI_MCA_coll_gpu_backend", "(default)")
        print(f"# bench_python: np={nranks} thread={level[MPI.Query_thread()]} coll={coll}"
              f"{f' backend={backend}' if 'gpu' in coll else ''} "
              f"mpi4py {mpi4py.__version__} numpy {np.__version__}")
        print("# MPI_Allreduce float32 sum, us a call (mean, slowest rank)")
        if why:
            print(f"# cupy: {why}")
        cols = ["bytes", "numpy_us"]
        if cupy is not None:
            cols += ["cupy_us", "ptr_us", "cai_us"] + (["nccl_us", "cupy/nccl"] if nc is not None else [])
            cols += [f"{k}_us" for k in others] + ["mpibuf_us"]
        print(" ".join(f"{c:>10}" for c in cols), flush=True)
    bad = 0
    nbytes = 8
    while nbytes <= args.max_bytes:
        n = nbytes // 4
        x = np.full(n, rank + 1, np.float32)
        y = np.empty_like(x)
        row = [timed(lambda: comm.Allreduce([x, MPI.FLOAT], [y, MPI.FLOAT], op=MPI.SUM),
                     lambda: None, args.iters)]
        bad += int(not np.all(y == expected))
        if cupy is not None:
            dx = cupy.full(n, rank + 1, cupy.float32)
            dy = cupy.empty_like(dx)
            null = cupy.cuda.Stream.null
            null.synchronize()
            row.append(timed(lambda: comm.Allreduce([dx, MPI.FLOAT], [dy, MPI.FLOAT], op=MPI.SUM),
                             null.synchronize, args.iters))
            bad += int(not bool(cupy.all(dy == expected)))
            mem = getattr(MPI, "buffer", None) or MPI.memory  # mpi4py 4 and 3
            bx = mem.fromaddress(dx.data.ptr, nbytes)
            by = mem.fromaddress(dy.data.ptr, nbytes)
            dy.fill(0)
            null.synchronize()
            row.append(timed(lambda: comm.Allreduce([bx, MPI.FLOAT], [by, MPI.FLOAT], op=MPI.SUM),
                             null.synchronize, args.iters))
            bad += int(not bool(cupy.all(dy == expected)))
            row.append(timed(lambda: (dx.__cuda_array_interface__, dy.__cuda_array_interface__),
                             lambda: None, args.iters))
            if nc is not None:
                from cupy.cuda import nccl

                def nccl_step():
                    nc.allReduce(dx.data.ptr, dy.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                                 null.ptr)
                    null.synchronize()  # as MPI returns with the result in place
                dy.fill(0)
                row.append(timed(nccl_step, null.synchronize, args.iters))
                bad += int(not bool(cupy.all(dy == expected)))
                row.append(row[1] / row[4])
            for put, get, sync in others.values():
                ox, oy = put(np.full(n, rank + 1, np.float32)), put(np.zeros(n, np.float32))
                sync()
                row.append(timed(lambda: comm.Allreduce([ox, MPI.FLOAT], [oy, MPI.FLOAT],
                                                        op=MPI.SUM), sync, args.iters))
                bad += int(not np.all(get(oy) == expected))
            try:
                mem(dx)
                row.append(timed(lambda: (mem(dx), mem(dy)), lambda: None, args.iters))
            except (TypeError, ValueError, BufferError):  # an mpi4py without device buffers
                row.append(float("nan"))
        if 0 == rank:
            print(f"{nbytes:>10} " + " ".join(f"{v:>10.2f}" for v in row), flush=True)
        nbytes *= 2
    bad = comm.allreduce(bad, op=MPI.SUM)
    if 0 == rank and bad:
        print(f"# {bad} wrong results", flush=True)
    return 1 if bad else 0


def coll_cases(nbytes):
    """{name: (send floats, recv floats, call(comm, send, recv), expected recv or None for
    a root-only result on other ranks)} with bench_colls' size conventions."""
    n, c = nbytes // 4, max(1, nbytes // 4 // nranks)
    fl = MPI.FLOAT
    ranks = np.arange(nranks, dtype=np.float32)
    return {
        "allreduce": (n, n, lambda s, r: comm.Allreduce([s, fl], [r, fl], op=MPI.SUM),
                      np.full(n, expected, np.float32)),
        "alltoall": (c * nranks, c * nranks, lambda s, r: comm.Alltoall([s, fl], [r, fl]),
                     np.repeat(ranks + 1, c)),
        "allgather": (c, c * nranks, lambda s, r: comm.Allgather([s, fl], [r, fl]),
                      np.repeat(ranks + 1, c)),
        "reduce_scatter": (c * nranks, c, lambda s, r: comm.Reduce_scatter_block(
            [s, fl], [r, fl], op=MPI.SUM), np.full(c, expected, np.float32)),
        "bcast": (n, n, lambda s, r: comm.Bcast([r, fl], root=0), np.full(n, 1, np.float32)),
        "reduce": (n, n, lambda s, r: comm.Reduce([s, fl], [r, fl], op=MPI.SUM, root=0),
                   np.full(n, expected, np.float32) if 0 == rank else None),
    }


def c_loop_timer(path):
    """timed_runs for the loop of bench/c_loop.so: (which, send, recv, nsend, nrecv, sync) -> us."""
    import ctypes
    f = ctypes.CDLL(path).cgpu_c_loop
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 4 + \
        [ctypes.c_long] * 3
    f.restype = ctypes.c_int
    fcomm = comm.py2f()
    wait, spread = (int(x or 0) for x in (args.c_loop_wait.split(":") + ["0"])[:2])

    def run(which, s, r, ns, nr, iters):
        rc = f(which, s.address, r.address, ns, nr, fcomm, iters, args.c_loop_touch, wait, spread)
        if rc != MPI.SUCCESS:
            raise RuntimeError(f"c_loop: MPI error {rc}")

    def loop_us(which, s, r, ns, nr, sync):
        return timed_runs(lambda n: run(which, s, r, ns, nr, n), sync, args.iters)

    def timer(which, s, r, ns, nr, sync):
        # with writes or waits between the calls, less their own time (which -1: those alone)
        alone = loop_us(-1, s, r, ns, nr, sync) if args.c_loop_touch > 0 or wait > 0 else 0.0
        return loop_us(which, s, r, ns, nr, sync) - alone
    return timer


def colls():
    """Six collectives on every device array library present: arrays, buffers made once,
    the acquisition alone (and the loop in C)."""
    cupy, _, why = gpu_setup(want_nccl=False)
    libs = {"numpy": (np.array, np.asarray, lambda: None)}
    if cupy is not None:
        libs["cupy"] = (cupy.asarray, cupy.asnumpy, cupy.cuda.Device().synchronize)
        libs.update(other_arrays())
    if args.libs:
        libs = {k: v for k, v in libs.items() if k in args.libs.split(",")}
    if 0 == rank:
        print(f"# bench_python --colls: np={nranks} thread={LEVELS[MPI.Query_thread()]} "
              f"coll={os.environ.get('OMPI_MCA_coll', '(default)')} mpi4py {mpi4py.__version__}"
              f"{'' if cupy is not None else ' (device arrays ' + why + ')'}")
        print("# us a call (mean, slowest rank); float32, bench_colls' sizes")
        kinds = ("us", "buf_us", "acq_us") + (("cloop_us",) if args.c_loop else ())
        cols = ["coll", "bytes"] + [f"{lib}_{k}" for lib in libs for k in kinds]
        print(" ".join(f"{c:>14}" for c in cols), flush=True)
    bad = 0
    mem = getattr(MPI, "buffer", None) or MPI.memory
    c_loop = c_loop_timer(args.c_loop) if args.c_loop else None
    for which, name in enumerate(coll_cases(8)):
        nbytes = 8
        while nbytes <= args.max_bytes:
            ns, nr, call, want = coll_cases(nbytes)[name]
            host_in = np.full(ns, rank + 1, np.float32)
            row = []
            # bcast's buffer holds each rank's own value before the call: the root's is
            # the expected one, the others' are not
            init = np.full(nr, rank + 1, np.float32) if "bcast" == name else np.zeros(nr, np.float32)
            for put, get, sync in libs.values():
                for made_once in (False, True):
                    s, r = put(host_in), put(init)
                    bs, br = (mem(s), mem(r)) if made_once else (s, r)
                    sync()
                    row.append(timed(lambda: call(bs, br), sync, args.iters, made_once))
                    bad += int(want is not None and not np.array_equal(get(r), want))
                row.append(timed(lambda: (mem(s), mem(r)), lambda: None, args.iters))
                if c_loop is not None:
                    row.append(c_loop(which, mem(s), mem(r), ns, nr, sync))
                    bad += int(want is not None and not np.array_equal(get(r), want))
            if 0 == rank:
                print(f"{name:>14} {nbytes:>14} " + " ".join(f"{v:>14.2f}" for v in row),
                      flush=True)
            nbytes *= 2
    bad = comm.allreduce(bad, op=MPI.SUM)
    if 0 == rank and bad:
        print(f"# {bad} wrong results", flush=True)
    return 1 if bad else 0


def cycles():
    """Communicator cycles: create (split or dup), first allreduce, free."""
    cupy, _, why = gpu_setup(want_nccl=False)
    xp = cupy if cupy is not None else np
    bad = 0
    if args.world_first:
        x = xp.full(2, rank + 1, xp.float32)
        y = xp.empty_like(x)
        comm.Allreduce([x, MPI.FLOAT], [y, MPI.FLOAT], op=MPI.SUM)
        bad += int(not bool((y == expected).all()))
    for name, make in (("split", lambda: comm.Split(rank // 2, rank)),
                       ("dup", lambda: comm.Dup())):
        x = xp.full(2, rank + 1, xp.float32)
        y = xp.empty_like(x)

        def cycle():
            c = make()
            c.Allreduce([x, MPI.FLOAT], [y, MPI.FLOAT], op=MPI.SUM)
            c.Free()
        cycle()  # the first one sets up what every later one reuses
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(args.cycles):
            cycle()
        ms = comm.allreduce((time.perf_counter() - t0) / args.cycles * 1e3, op=MPI.MAX)
        if "split" == name:
            peers = [r for r in range(nranks) if r // 2 == rank // 2]
            want = sum(r + 1 for r in peers)
        else:
            want = expected
        bad += int(not bool((y == want).all()))
        if 0 == rank:
            print(f"# {name} + first allreduce ({'cupy' if cupy is not None else 'numpy'}, "
                  f"8 B) + free: {ms:.3f} ms a cycle, {args.cycles} cycles, np={nranks}"
                  f"{', after a world allreduce' if args.world_first else ''}"
                  f"{' (' + why + ')' if why and cupy is None else ''}", flush=True)
    bad = comm.allreduce(bad, op=MPI.SUM)
    if 0 == rank and bad:
        print(f"# {bad} wrong results", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(cycles() if args.cycles > 0 else colls() if args.colls else main())
