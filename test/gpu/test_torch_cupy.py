"""GPU test through a real framework: MPI_Allreduce via mpi4py on PyTorch tensors (caching
allocator, views into the middle of a block) and CuPy arrays (memory pool), checked against
a host reference. Prints "skipped: ..." and exits 77 where torch/cupy/mpi4py or a GPU is
missing. Run under mpirun with coll/gpu selected and coll_gpu_verbose=100: the driver also
checks the trace shows our kernels served the calls.
"""
import sys

try:
    from mpi4py import MPI
except ImportError as e:  # pragma: no cover
    print(f"skipped: no mpi4py ({e})")
    sys.exit(77)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
try:
    import torch
    import cupy
except ImportError as e:
    if rank == 0:
        print(f"skipped: no torch/cupy ({e})")
    sys.exit(77)
if not torch.cuda.is_available():
    if rank == 0:
        print("skipped: no GPU")
    sys.exit(77)

dev = rank % torch.cuda.device_count()
torch.cuda.set_device(dev)
failures = 0


def check(name, got, expected):
    global failures
    if not torch.equal(got.cpu(), expected.cpu()):
        failures += 1
        bad = (got.cpu() != expected.cpu()).sum().item()
        print(f"rank {rank}: FAIL {name}: {bad} wrong elements", flush=True)


for n in (1, 1000, 1_000_003, 16 * 1024 * 1024 + 5):
    base = torch.arange(n, dtype=torch.float32, device="cuda") % 97
    t = base + rank
    torch.cuda.synchronize()
    comm.Allreduce(MPI.IN_PLACE, [t, MPI.FLOAT], op=MPI.SUM)
    check(f"torch float32 sum n={n}", t, base * size + size * (size - 1) / 2)

    # a view into the middle of a caching-allocator block, out of place
    big = torch.zeros(n + 7, dtype=torch.int64, device="cuda")
    src = big[3:3 + n]
    src.copy_(torch.arange(n, device="cuda") % 1000 * (rank + 1))
    dst = torch.empty(n, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    comm.Allreduce([src, MPI.INT64_T], [dst, MPI.INT64_T], op=MPI.MAX)
    check(f"torch int64 max view n={n}", dst, torch.arange(n, device="cuda") % 1000 * size)

    c = cupy.arange(n, dtype=cupy.float64) % 31 + rank
    r = cupy.empty_like(c)
    cupy.cuda.get_current_stream().synchronize()
    comm.Allreduce([c, MPI.DOUBLE], [r, MPI.DOUBLE], op=MPI.SUM)
    expected = cupy.arange(n, dtype=cupy.float64) % 31 * size + size * (size - 1) / 2
    if not bool(cupy.all(r == expected)):
        failures += 1
        print(f"rank {rank}: FAIL cupy float64 sum n={n}", flush=True)

total = comm.allreduce(failures, op=MPI.SUM)
if rank == 0:
    print(f"test_torch_cupy: np={size}: {total} failures: {'PASSED' if total == 0 else 'FAILED'}")
sys.exit(0 if total == 0 else 1)
