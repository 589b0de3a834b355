"""Every collective through mpi4py, on numpy arrays (host) or on device arrays (CuPy, Numba,
PyTorch), checked against a numpy reference computed from every rank's input.

Each rank's input is a function of (case, rank, index), so every rank computes what every
other rank sent and the expected result with numpy alone: the reference never goes through
MPI. Integers, bools and the values of the float and complex sums and products are exact
(small integers, halves and quarters), so only the summation order differs; floats are still
compared with a tolerance, integers and bools exactly.

Covers: Allreduce, Reduce, Bcast, Allgather(v), Alltoall(v), Gather(v), Scatter(v),
Reduce_scatter(_block), Scan, Exscan and their non-blocking forms; int8..int64, uint8..uint64,
float32/64, complex64/128 and bool (MPI_C_BOOL); SUM, PROD, MIN, MAX, BAND, BOR, BXOR on
integers, SUM, PROD, MIN, MAX on floats, SUM and PROD on complex, LAND, LOR, LXOR on bool;
MPI_IN_PLACE wherever MPI defines it; counts 0, 1, a small prime and one above the engine's
131072-byte slot; roots that move from call to call. On intercommunicators (from 2 ranks):
Scatter(v), Gather(v), Bcast, Reduce and their non-blocking forms with root=MPI.ROOT,
MPI.PROC_NULL and the root's rank, None for each unused buffer, groups of unequal size both
ways round, each call the first on a fresh intercommunicator.

Usage (under mpirun): test_mpi4py.py [--arrays numpy|cupy|numba|torch]
    [--thread multiple|single] [--sizes 0,1,13,large] [--quick] [--only NAME,...]
--thread is mpi4py.rc.thread_level, set before MPI is imported (process-wide, hence a run a
level). --quick: the largest size only with SUM (and LXOR on bool) and without the
non-blocking forms, for a fast look; --only: these collectives only (comma-separated names:
allreduce, iscatterv...; inter_scatter, inter_ibcast..., or inter for all of the
intercommunicator section).

Device arrays: each rank chooses its GPU from its node-local rank, found with
MPI_Comm_split_type before any GPU is chosen, as most codes start.

Prints one summary line (rank 0) and the failing cases (collective, dtype, op, count,
in place, rank, what differed), exit status 1 on any failure. Device arrays where there is no
GPU, or no CuPy/Numba/PyTorch: "skipped: <reason>", exit status 77.
"""
import argparse
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--arrays", default="numpy", choices=("numpy", "cupy", "numba", "torch"))
ap.add_argument("--thread", default="multiple", choices=("multiple", "single", "funneled",
                                                         "serialized"))
ap.add_argument("--sizes", default="0,1,13,large")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--only", default="", help="comma-separated names, e.g. allreduce,iscatterv")
args = ap.parse_args()

try:
    import numpy as np
    import mpi4py
except ImportError as e:
    print(f"skipped: no mpi4py or numpy in {sys.executable} ({e})")
    sys.exit(77)
mpi4py.rc.thread_level = args.thread
from mpi4py import MPI  # noqa: E402 (after the thread level is set)

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()


def skip(reason):
    # every rank exits alike, so that mpirun reports the status all ranks gave
    if 0 == rank:
        print(f"skipped: {reason}", flush=True)
    sys.exit(77)


def local_rank():
    """This rank's place on its node, found the way most GPU codes find it before choosing
    their GPU: MPI_Comm_split_type, whose allgather is the world communicator's first
    collective. coll/gpu sets the world up there, before any GPU is chosen, and must still
    take its GPU path for the device calls that follow."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    r = node.Get_rank()
    node.Free()
    return r


# ---- array kinds: where the buffers handed to MPI live ----

class HostArrays:
    """numpy arrays: host memory."""
    name = "numpy"

    def put(self, a):
        return a.copy()

    def get(self, d):
        return np.array(d, copy=True)

    def sync(self):
        pass

    def supports(self, dt):
        return True


class CupyArrays:
    name = "cupy"

    def __init__(self):
        try:
            import cupy
        except ImportError as e:
            skip(f"no cupy ({e})")
        try:
            ndev = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # CUDA driver missing or no device
            skip(f"no GPU ({e})")
        if 0 == ndev:
            skip("no GPU")
        cupy.cuda.Device(local_rank() % ndev).use()
        self.cp = cupy

    def put(self, a):
        return self.cp.asarray(a)

    def get(self, d):
        return self.cp.asnumpy(d)

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def supports(self, dt):
        return True


class NumbaArrays:
    name = "numba"

    def __init__(self):
        try:
            from numba import cuda
        except ImportError as e:
            skip(f"no numba ({e})")
        if not cuda.is_available():
            skip("no GPU")
        cuda.select_device(local_rank() % len(cuda.gpus))
        self.cuda = cuda

    def put(self, a):
        return self.cuda.to_device(a)

    def get(self, d):
        return d.copy_to_host()

    def sync(self):
        self.cuda.synchronize()

    def supports(self, dt):
        return True


class TorchArrays:
    name = "torch"

    def __init__(self):
        try:
            import torch
        except ImportError as e:
            skip(f"no torch ({e})")
        if not torch.cuda.is_available():
            skip("no GPU")
        torch.cuda.set_device(local_rank() % torch.cuda.device_count())
        self.torch = torch

    def put(self, a):
        return self.torch.from_numpy(a.copy()).cuda()

    def get(self, d):
        return d.cpu().numpy()

    def sync(self):
        self.torch.cuda.synchronize()

    def supports(self, dt):
        # torch has no unsigned type wider than 8 bits in every version
        try:
            self.torch.from_numpy(np.zeros(1, dt)).cuda()
            return True
        except (TypeError, RuntimeError):
            return False


ARRAYS = {"numpy": HostArrays, "cupy": CupyArrays, "numba": NumbaArrays, "torch": TorchArrays}
arrays = ARRAYS[args.arrays]()

# ---- types, ops and inputs ----

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = INTS + ("float32", "float64", "complex64", "complex128", "bool")
MPITYPE = {
    "int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T, "int64": MPI.INT64_T,
    "uint8": MPI.UINT8_T, "uint16": MPI.UINT16_T, "uint32": MPI.UINT32_T,
    "uint64": MPI.UINT64_T, "float32": MPI.FLOAT, "float64": MPI.DOUBLE,
    "complex64": MPI.C_FLOAT_COMPLEX, "complex128": MPI.C_DOUBLE_COMPLEX, "bool": MPI.C_BOOL,
}
# the MPI op and the numpy ufunc that is its reference
OPS = {
    "SUM": (MPI.SUM, np.add), "PROD": (MPI.PROD, np.multiply), "MIN": (MPI.MIN, np.minimum),
    "MAX": (MPI.MAX, np.maximum), "BAND": (MPI.BAND, np.bitwise_and),
    "BOR": (MPI.BOR, np.bitwise_or), "BXOR": (MPI.BXOR, np.bitwise_xor),
    "LAND": (MPI.LAND, np.logical_and), "LOR": (MPI.LOR, np.logical_or),
    "LXOR": (MPI.LXOR, np.logical_xor),
}


def ops_of(dt):
    if dt in INTS:
        return ("SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR")
    if dt.startswith("float"):
        return ("SUM", "PROD", "MIN", "MAX")
    if dt.startswith("complex"):
        return ("SUM", "PROD")
    return ("LAND", "LOR", "LXOR")


def mix(idx, r, seed):
    """A well-spread uint64 of (index, rank, seed): a hash, so that a block sent to the wrong
    place or a rank's data taken for another's shows."""
    with np.errstate(over="ignore"):
        h = (idx.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             + np.uint64((r * 1000003 + seed * 7919 + 1) & 0xFFFFFFFFFFFFFFFF))
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return h


# the values a sum or product draws from: its result over up to 8 ranks stays exact and in
# range (no wraparound, no rounding); min, max, bitwise ops and the data movers take any value
SMALL = {
    ("int", "SUM"): np.arange(-8, 8), ("int", "PROD"): np.array([-2, -1, 1, 1, 2, -1]),
    ("uint", "SUM"): np.arange(0, 16), ("uint", "PROD"): np.array([1, 2, 1, 1]),
    ("float", "SUM"): np.arange(-64, 64) / 4.0,
    ("float", "PROD"): np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0]),
    ("complex", "SUM"): (np.arange(-8, 8) / 2.0)[:, None] + 1j * (np.arange(-4, 4) / 2.0)[None, :],
    ("complex", "PROD"): np.array([1, -1, 1j, -1j, 1 + 1j, 1 - 1j, 2, 0.5j]),
}


def data(dt, op, r, seed, n):
    """Rank r's input of the case `seed` for the op named `op` (None: a data mover's, any
    value): n elements."""
    idx = np.arange(n, dtype=np.uint64)
    h = mix(idx, r, seed)
    kind = "uint" if dt.startswith("uint") else "int" if dt in INTS else dt.rstrip("0123456789")
    if dt == "bool":
        # mostly true for LAND, mostly false for LOR, so that the result is not constant
        if "LAND" == op:
            return (h % np.uint64(8)) != 0
        if "LOR" == op:
            return (h % np.uint64(8)) == 0
        return (h & np.uint64(1)) == 1
    if (kind, op) in SMALL:
        table = SMALL[(kind, op)].ravel()
        return table[(h % np.uint64(table.size)).astype(np.int64)].astype(dt)
    if kind in ("int", "uint"):
        return h.astype(dt)  # any bits: wraps to the type's width, as C's conversion does
    vals = (h % np.uint64(1 << 20)).astype(np.float64) / 16.0 - 32768.0
    if kind == "complex":
        vals = vals + 1j * ((mix(idx, r, seed + 1) % np.uint64(1 << 20)).astype(np.float64) / 8.0)
    return vals.astype(dt)


def sentinel(dt, n):
    """What a receive buffer holds before the call: a value no input takes where possible."""
    if dt == "bool":
        return np.ones(n, bool)
    if dt.startswith("uint"):
        return np.full(n, np.iinfo(dt).max - 3, dt)
    if dt in INTS:
        return np.full(n, np.iinfo(dt).min + 3, dt)
    return np.full(n, -12345.75, dt)


# ---- checking ----

failures = []   # (case, rank, what) of this rank
checks = 0


def wrong(dt, got, want):
    """Where got differs from want: exactly for integers and bools, within a relative
    tolerance for floats and complex (their sums' order differs from numpy's)."""
    if dt.startswith("float") or dt.startswith("complex"):
        tol = 1e-5 if dt in ("float32", "complex64") else 1e-12
        return ~np.isclose(got, want, rtol=tol, atol=tol)
    return got != want


def check(case, dt, got, want):
    """got: the device or host array as returned; want: the numpy reference."""
    global checks
    checks += 1
    g = np.asarray(arrays.get(got) if not isinstance(got, np.ndarray) else got).reshape(-1)
    if g.shape != want.shape:
        failures.append((case, rank, f"{g.size} elements, expected {want.size}"))
        return
    bad = np.flatnonzero(wrong(dt, g, want))
    if bad.size:
        i = int(bad[0])
        failures.append((case, rank, f"{bad.size} of {want.size} elements wrong, first at {i}: "
                                     f"{g[i]!r} != {want[i]!r}"))


# ---- the collectives: each posts one call and checks this rank's result ----

def call(nb, fn, *a, **kw):
    """The blocking call, or its non-blocking form and a wait."""
    if nb:
        getattr(comm, "I" + fn[0].lower() + fn[1:])(*a, **kw).Wait()
    else:
        getattr(comm, fn)(*a, **kw)


def stack(dt, op, seed, n):
    """Every rank's input, one row a rank."""
    return np.stack([data(dt, op, r, seed, n) for r in range(nranks)])


def reduction(ufunc, dt, rows):
    # in the type itself, as MPI reduces (numpy would widen small integers)
    return ufunc.reduce(rows, axis=0, dtype=np.dtype(dt))


def vlayout(counts, gap=1):
    """Displacements that place the blocks in reverse rank order with a gap between them (a
    block written one past its end, or at another's place, shows); and the buffer length."""
    displs, at = [0] * len(counts), 0
    for r in reversed(range(len(counts))):
        displs[r] = at
        at += counts[r] + gap
    return displs, at


def c_allreduce(dt, opn, n, inplace, nb, seed, root):
    mop, uf = OPS[opn]
    t = MPITYPE[dt]
    rows = stack(dt, opn, seed, n)
    want = reduction(uf, dt, rows)
    if inplace:
        buf = arrays.put(rows[rank])
        arrays.sync()
        call(nb, "Allreduce", MPI.IN_PLACE, [buf, t], op=mop)
    else:
        src, buf = arrays.put(rows[rank]), arrays.put(sentinel(dt, n))
        arrays.sync()
        call(nb, "Allreduce", [src, t], [buf, t], op=mop)
    return buf, want


def c_reduce(dt, opn, n, inplace, nb, seed, root):
    mop, uf = OPS[opn]
    t = MPITYPE[dt]
    rows = stack(dt, opn, seed, n)
    want = reduction(uf, dt, rows)
    if inplace and rank == root:
        buf = arrays.put(rows[rank])
        arrays.sync()
        call(nb, "Reduce", MPI.IN_PLACE, [buf, t], op=mop, root=root)
    else:
        src, buf = arrays.put(rows[rank]), arrays.put(sentinel(dt, n))
        arrays.sync()
        call(nb, "Reduce", [src, t], [buf, t], op=mop, root=root)
    if rank != root:
        return buf, sentinel(dt, n)  # a non-root's receive buffer is not written
    return buf, want


def c_bcast(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    want = data(dt, opn, root, seed, n)
    buf = arrays.put(want if rank == root else sentinel(dt, n))
    arrays.sync()
    call(nb, "Bcast", [buf, t], root=root)
    return buf, want


def c_allgather(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    rows = stack(dt, opn, seed, n)
    want = rows.reshape(-1)
    if inplace:
        init = sentinel(dt, n * nranks)
        init[rank * n:(rank + 1) * n] = rows[rank]
        buf = arrays.put(init)
        arrays.sync()
        call(nb, "Allgather", MPI.IN_PLACE, [buf, t])
    else:
        src, buf = arrays.put(rows[rank]), arrays.put(sentinel(dt, n * nranks))
        arrays.sync()
        call(nb, "Allgather", [src, t], [buf, t])
    return buf, want


def gv_counts(n):
    # unequal counts, zero for some ranks at n = 1
    return [max(0, n - r) for r in range(nranks)]


def c_allgatherv(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    counts = gv_counts(n)
    displs, length = vlayout(counts)
    want = sentinel(dt, length)
    for r in range(nranks):
        want[displs[r]:displs[r] + counts[r]] = data(dt, opn, r, seed, counts[r])
    mine = want[displs[rank]:displs[rank] + counts[rank]].copy()
    if inplace:
        init = sentinel(dt, length)
        init[displs[rank]:displs[rank] + counts[rank]] = mine
        buf = arrays.put(init)
        arrays.sync()
        call(nb, "Allgatherv", MPI.IN_PLACE, [buf, counts, displs, t])
    else:
        src, buf = arrays.put(mine), arrays.put(sentinel(dt, length))
        arrays.sync()
        call(nb, "Allgatherv", [src, counts[rank], t], [buf, counts, displs, t])
    return buf, want


def c_alltoall(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    # rank r's send buffer: block j goes to rank j
    send = [data(dt, opn, r, seed, n * nranks) for r in range(nranks)]
    want = np.concatenate([send[j][rank * n:(rank + 1) * n] for j in range(nranks)])
    if inplace:
        buf = arrays.put(send[rank])
        arrays.sync()
        call(nb, "Alltoall", MPI.IN_PLACE, [buf, t])
    else:
        src, buf = arrays.put(send[rank]), arrays.put(sentinel(dt, n * nranks))
        arrays.sync()
        call(nb, "Alltoall", [src, t], [buf, t])
    return buf, want


def a2av_count(n, r, j):
    # symmetric in (r, j), which MPI_IN_PLACE requires of alltoallv; zero for some pairs
    return max(0, n - (r + j) % 3)


def c_alltoallv(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    cnt = [[a2av_count(n, r, j) for j in range(nranks)] for r in range(nranks)]
    lay = [vlayout(cnt[r]) for r in range(nranks)]  # the same layout sends and receives
    # rank r's block for rank j, at r's displacement for j
    def block(r, j):
        return data(dt, opn, r, seed * 64 + j, cnt[r][j])
    displs, length = lay[rank]
    want = sentinel(dt, length)
    for j in range(nranks):
        want[displs[j]:displs[j] + cnt[rank][j]] = block(j, rank)
    send = sentinel(dt, length)
    for j in range(nranks):
        send[displs[j]:displs[j] + cnt[rank][j]] = block(rank, j)
    if inplace:
        buf = arrays.put(send)
        arrays.sync()
        call(nb, "Alltoallv", MPI.IN_PLACE, [buf, cnt[rank], displs, t])
    else:
        src, buf = arrays.put(send), arrays.put(sentinel(dt, length))
        arrays.sync()
        call(nb, "Alltoallv", [src, cnt[rank], displs, t], [buf, cnt[rank], displs, t])
    return buf, want


def c_gather(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    rows = stack(dt, opn, seed, n)
    buf = None
    if rank == root:
        init = sentinel(dt, n * nranks)
        if inplace:
            init[rank * n:(rank + 1) * n] = rows[rank]
        buf = arrays.put(init)
    src = arrays.put(rows[rank])
    arrays.sync()
    s = MPI.IN_PLACE if inplace and rank == root else [src, t]
    call(nb, "Gather", s, [buf, t] if rank == root else None, root=root)
    return (buf, rows.reshape(-1)) if rank == root else None


def c_gatherv(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    counts = gv_counts(n)
    displs, length = vlayout(counts)
    want = sentinel(dt, length)
    for r in range(nranks):
        want[displs[r]:displs[r] + counts[r]] = data(dt, opn, r, seed, counts[r])
    mine = want[displs[rank]:displs[rank] + counts[rank]].copy()
    buf = None
    if rank == root:
        init = sentinel(dt, length)
        if inplace:
            init[displs[rank]:displs[rank] + counts[rank]] = mine
        buf = arrays.put(init)
    src = arrays.put(mine)
    arrays.sync()
    s = MPI.IN_PLACE if inplace and rank == root else [src, counts[rank], t]
    call(nb, "Gatherv", s, [buf, counts, displs, t] if rank == root else None, root=root)
    return (buf, want) if rank == root else None


def c_scatter(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    full = data(dt, opn, root, seed, n * nranks)
    want = full[rank * n:(rank + 1) * n]
    if rank == root:
        src = arrays.put(full)
        arrays.sync()
        if inplace:
            call(nb, "Scatter", [src, t], MPI.IN_PLACE, root=root)
            return src, full  # the root's block stays where it is, nothing else changes
        buf = arrays.put(sentinel(dt, n))
        arrays.sync()
        call(nb, "Scatter", [src, t], [buf, t], root=root)
        return buf, want
    buf = arrays.put(sentinel(dt, n))
    arrays.sync()
    call(nb, "Scatter", None, [buf, t], root=root)
    return buf, want


def c_scatterv(dt, opn, n, inplace, nb, seed, root):
    t = MPITYPE[dt]
    counts = gv_counts(n)
    displs, length = vlayout(counts)
    full = data(dt, opn, root, seed, length)
    want = full[displs[rank]:displs[rank] + counts[rank]]
    if rank == root:
        src = arrays.put(full)
        arrays.sync()
        if inplace:
            call(nb, "Scatterv", [src, counts, displs, t], MPI.IN_PLACE, root=root)
            return src, full
        buf = arrays.put(sentinel(dt, counts[rank]))
        arrays.sync()
        call(nb, "Scatterv", [src, counts, displs, t], [buf, counts[rank], t], root=root)
        return buf, want
    buf = arrays.put(sentinel(dt, counts[rank]))
    arrays.sync()
    call(nb, "Scatterv", None, [buf, counts[rank], t], root=root)
    return buf, want


def c_reduce_scatter_block(dt, opn, n, inplace, nb, seed, root):
    mop, uf = OPS[opn]
    t = MPITYPE[dt]
    rows = stack(dt, opn, seed, n * nranks)
    want = reduction(uf, dt, rows)[rank * n:(rank + 1) * n]
    if inplace:
        buf = arrays.put(rows[rank])
        arrays.sync()
        call(nb, "Reduce_scatter_block", MPI.IN_PLACE, [buf, n, t], op=mop)
        return arrays.get(buf)[:n], want  # the result is the buffer's first n elements
    src, buf = arrays.put(rows[rank]), arrays.put(sentinel(dt, n))
    arrays.sync()
    call(nb, "Reduce_scatter_block", [src, t], [buf, t], op=mop)
    return buf, want


def c_reduce_scatter(dt, opn, n, inplace, nb, seed, root):
    mop, uf = OPS[opn]
    t = MPITYPE[dt]
    counts = gv_counts(n)
    total = sum(counts)
    first = sum(counts[:rank])
    rows = stack(dt, opn, seed, total)
    want = reduction(uf, dt, rows)[first:first + counts[rank]]
    if inplace:
        buf = arrays.put(rows[rank])
        arrays.sync()
        call(nb, "Reduce_scatter", MPI.IN_PLACE, [buf, t], counts, op=mop)
        return arrays.get(buf)[:counts[rank]], want
    src, buf = arrays.put(rows[rank]), arrays.put(sentinel(dt, counts[rank]))
    arrays.sync()
    call(nb, "Reduce_scatter", [src, t], [buf, t], counts, op=mop)
    return buf, want


def c_scan(dt, opn, n, inplace, nb, seed, root, ex=False):
    mop, uf = OPS[opn]
    t = MPITYPE[dt]
    rows = stack(dt, opn, seed, n)
    fn = "Exscan" if ex else "Scan"
    upto = rank if ex else rank + 1
    if inplace:
        buf = arrays.put(rows[rank])
        arrays.sync()
        call(nb, fn, MPI.IN_PLACE, [buf, t], op=mop)
    else:
        src, buf = arrays.put(rows[rank]), arrays.put(sentinel(dt, n))
        arrays.sync()
        call(nb, fn, [src, t], [buf, t], op=mop)
    if 0 == upto:
        return None  # exscan's result at rank 0 is undefined
    return buf, reduction(uf, dt, rows[:upto])


def c_exscan(*a):
    return c_scan(*a, ex=True)


# name: (function, reduces, has the in-place form)
COLLECTIVES = {
    "allreduce": (c_allreduce, True, True),
    "reduce": (c_reduce, True, True),
    "reduce_scatter": (c_reduce_scatter, True, True),
    "reduce_scatter_block": (c_reduce_scatter_block, True, True),
    "scan": (c_scan, True, True),
    "exscan": (c_exscan, True, True),
    "bcast": (c_bcast, False, False),
    "allgather": (c_allgather, False, True),
    "allgatherv": (c_allgatherv, False, True),
    "alltoall": (c_alltoall, False, True),
    "alltoallv": (c_alltoallv, False, True),
    "gather": (c_gather, False, True),
    "gatherv": (c_gatherv, False, True),
    "scatter": (c_scatter, False, True),
    "scatterv": (c_scatterv, False, True),
}


def large_count(dt):
    """A prime count whose bytes pass the engine's 131072-byte slot."""
    return 131101 if 1 == np.dtype(dt).itemsize else 70001


def cases(sizes, skipped_types):
    """(name, collective function, reduces, non-blocking, dtype, op, count, in place) of
    every call the run makes, in a fixed order (every rank makes the same calls)."""
    only = args.only.split(",") if args.only else None
    for coll, (fn, reduces, has_inplace) in COLLECTIVES.items():
        for nb in (False, True):
            name = ("i" if nb else "") + coll
            if (nb and args.quick) or (only and name not in only):
                continue
            for dt in DTYPES:
                if dt in skipped_types:
                    continue
                # the data movers' inputs take any value (op None)
                for opn in ops_of(dt) if reduces else (None,):
                    for s in sizes:
                        if "large" == s and args.quick and opn not in ("SUM", "LXOR", None):
                            continue
                        n = large_count(dt) if "large" == s else s
                        for inplace in (False, True) if has_inplace else (False,):
                            yield name, fn, reduces, nb, dt, opn, n, inplace


# ---- intercommunicators: the rooted collectives as mpi4py users write them ----
# A fresh intercommunicator per call (Split, then Create_intercomm), so that each call is
# the first on its communicator. The root's group passes root=MPI.ROOT on its root and
# MPI.PROC_NULL elsewhere, with None for each buffer it does not use; the remote group
# passes the root's rank in the root's group and None for the side it does not use.

INTER = ("scatter", "scatterv", "gather", "gatherv", "bcast", "reduce")


def inter_data(grp, r, seed, n):
    """Rank r of group grp's int32 input (small enough that sums stay exact)."""
    return ((np.arange(n, dtype=np.int64) * 7 + r * 131 + grp * 1009 + seed) % 20011 - 10005
            ).astype(np.int32)


def inter_call(nb, ic, fn, *a, **kw):
    if nb:
        getattr(ic, "I" + fn[0].lower() + fn[1:])(*a, **kw).Wait()
    else:
        getattr(ic, fn)(*a, **kw)


def inter_case(coll, nb, n, n0, rg, seed):
    """collective coll from group rg (its last rank the root) on an intercommunicator of
    groups of n0 and nranks - n0 ranks; returns (got, want) or None where this rank keeps
    nothing to check."""
    grp = 0 if rank < n0 else 1
    local = comm.Split(grp, rank)
    ic = local.Create_intercomm(0, comm, n0 if 0 == grp else 0, tag=91)
    try:
        lr, lsize, rsize = ic.Get_rank(), ic.Get_size(), ic.Get_remote_size()
        rroot = (n0 if 0 == rg else nranks - n0) - 1  # the root's rank in its group
        in_rg, is_root = grp == rg, grp == rg and lr == rroot
        root = (MPI.ROOT if is_root else MPI.PROC_NULL) if in_rg else rroot
        t = MPI.INT32_T
        counts = [n - j % 3 for j in range(rsize if in_rg else lsize)]
        displs = [sum(counts[:j]) + j for j in range(len(counts))]  # a gap after each block
        span = (displs[-1] + counts[-1]) if counts else 0
        if "scatter" == coll or "scatterv" == coll:
            v = "scatterv" == coll
            if is_root:
                full = inter_data(grp, lr, seed, n * rsize)
                src = np.full(span, -1, np.int32) if v else full
                if v:
                    for j in range(rsize):
                        src[displs[j]:displs[j] + counts[j]] = full[j * n:j * n + counts[j]]
                d = arrays.put(src)
                arrays.sync()
                spec = [d, counts, displs, t] if v else [d, t]
                inter_call(nb, ic, "Scatterv" if v else "Scatter", spec, None, root=root)
                return d, src  # the root's message stays as it was
            if in_rg:
                inter_call(nb, ic, "Scatterv" if v else "Scatter", None, None, root=root)
                return None
            m = counts[lr] if v else n
            full = inter_data(rg, rroot, seed, n * lsize)
            buf = arrays.put(np.full(m, -1, np.int32))
            arrays.sync()
            inter_call(nb, ic, "Scatterv" if v else "Scatter", None, [buf, t], root=root)
            return buf, full[lr * n:lr * n + m]
        if "gather" == coll or "gatherv" == coll:
            v = "gatherv" == coll
            if is_root:
                want = np.full(span if v else n * rsize, -1, np.int32)
                for j in range(rsize):
                    blk = inter_data(1 - grp, j, seed, n)
                    if v:
                        want[displs[j]:displs[j] + counts[j]] = blk[:counts[j]]
                    else:
                        want[j * n:(j + 1) * n] = blk
                buf = arrays.put(np.full(want.size, -1, np.int32))
                arrays.sync()
                spec = [buf, counts, displs, t] if v else [buf, t]
                inter_call(nb, ic, "Gatherv" if v else "Gather", None, spec, root=root)
                return buf, want
            if in_rg:
                inter_call(nb, ic, "Gatherv" if v else "Gather", None, None, root=root)
                return None
            mine = inter_data(grp, lr, seed, n)[:counts[lr] if v else n]
            src = arrays.put(mine)
            arrays.sync()
            inter_call(nb, ic, "Gatherv" if v else "Gather", [src, t], None, root=root)
            return src, mine  # what a rank sends stays as it was
        if "bcast" == coll:
            msg = inter_data(rg, rroot, seed, n)
            if in_rg and not is_root:
                inter_call(nb, ic, "Bcast", None, root=root)
                return None
            buf = arrays.put(msg if is_root else np.full(n, -1, np.int32))
            arrays.sync()
            inter_call(nb, ic, "Bcast", [buf, t], root=root)
            return buf, msg
        # reduce: the root gets the sum over the remote group
        if is_root:
            want = np.zeros(n, np.int64)
            for j in range(rsize):
                want += inter_data(1 - grp, j, seed, n)
            buf = arrays.put(np.full(n, -1, np.int32))
            arrays.sync()
            inter_call(nb, ic, "Reduce", None, [buf, t], op=MPI.SUM, root=root)
            return buf, want.astype(np.int32)
        if in_rg:
            inter_call(nb, ic, "Reduce", None, None, op=MPI.SUM, root=root)
            return None
        mine = inter_data(grp, lr, seed, n)
        src = arrays.put(mine)
        arrays.sync()
        inter_call(nb, ic, "Reduce", [src, t], None, op=MPI.SUM, root=root)
        return src, mine
    finally:
        ic.Free()
        local.Free()


def inter_cases(sizes):
    """(name, collective, non-blocking, count, size of group 0, root's group) of every
    intercommunicator call: both ways round where the groups' sizes differ."""
    if nranks < 2:
        return
    only = args.only.split(",") if args.only else None
    splits = sorted({(nranks + 2) // 3, nranks - (nranks + 2) // 3})
    for coll in INTER:
        for nb in (False, True):
            name = "inter_" + ("i" if nb else "") + coll
            if (nb and args.quick) or (only and name not in only and "inter" not in only):
                continue
            for s in sizes:
                n = 70001 if "large" == s else s
                if 0 == n:  # a count of 0 has no block to tell the ranks apart
                    continue
                for n0 in splits:
                    for rg in (0, 1):
                        yield name, coll, nb, n, n0, rg


def run_case(name, dt, call):
    """One case: call() gives (got, want) or None; an exception is a failure of the case.
    Whether the call returned (and so counts as made)."""
    try:
        got = call()
    except MPI.Exception as e:
        failures.append((name, rank, f"MPI error: {e.Get_error_string()}"))
        return False
    except Exception as e:  # a wrong buffer spec is a failure too
        failures.append((name, rank, f"{type(e).__name__}: {e}"))
        return False
    if got is not None:
        check(name, dt, got[0], got[1])
    return True


def main():
    sizes = [s if "large" == s else int(s) for s in args.sizes.split(",")]
    skipped_types = [dt for dt in DTYPES if not arrays.supports(dt)]
    ncases = 0
    for seed, (coll, fn, reduces, nb, dt, opn, n, inplace) in \
            enumerate(cases(sizes, skipped_types), 1):
        root = seed % nranks
        name = (f"{coll} {dt} {opn if reduces else '-'} n={n} "
                f"{'in-place' if inplace else 'out-of-place'} root={root}")
        ncases += run_case(name, dt, lambda: fn(dt, opn, n, inplace, nb, seed, root))
    for seed, (name, coll, nb, n, n0, rg) in enumerate(inter_cases(sizes), 1):
        case = f"{name} int32 n={n} groups {n0}+{nranks - n0} root in group {rg}"
        ncases += run_case(case, "int32", lambda: inter_case(coll, nb, n, n0, rg, seed))
    level = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
             MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    provided = level[MPI.Query_thread()]
    if provided != args.thread:  # the level this run is meant to test was not the one run
        failures.append(("MPI_Init_thread", rank, f"asked for {args.thread}, got {provided}"))
    if 0 == ncases:
        failures.append(("the suite", rank, "no call made (--only names no collective?)"))
    everyone = comm.gather((failures, checks, ncases), root=0)
    if 0 == rank:
        allf = [f for fs, _, _ in everyone for f in fs]
        nchecks = sum(c for _, c, _ in everyone)
        bycase = {}  # the failing cases in the order they ran, each with its ranks
        for case, r, what in allf:
            bycase.setdefault(case, []).append(f"rank {r}: {what}")
        for case in list(bycase)[:60]:
            print(f"FAIL {case}: {'; '.join(bycase[case])}")
        if len(bycase) > 60:
            print(f"... and {len(bycase) - 60} more failing cases")
        note = f" (not run on {args.arrays}: {', '.join(skipped_types)})" if skipped_types else ""
        print(f"test_mpi4py: {args.arrays} np={nranks} thread={provided}: "
              f"{ncases} calls, {nchecks} checks, {len(allf)} failures{note}: "
              f"{'PASSED' if not allf else 'FAILED'}", flush=True)
        bad = bool(allf)
    else:
        bad = None
    bad = comm.bcast(bad, root=0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
