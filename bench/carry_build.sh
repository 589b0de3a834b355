#!/usr/bin/env bash
# Packs this machine's build of the plugin and the GPU test programs into .carry/build.tgz,
# so a GPU-machine run can skip its cold build (about 5 minutes of the session's device
# time): pass `carry: [".devkit", ".carry"]` and run `bash bench/gpu_run.sh unpack <steps>`.
# The tarball records a checksum of every tracked source file; `unpack` refuses it when the
# tree it lands in differs (an edit after packing). NCCL is only on the GPU machine, so
# `unpack` compiles bench/bench_colls there (one file); the other benchmarks need `build`.
# Usage, from the repository root of a tree configured with CUDA (sm_90 among its arches):
#   bash bench/carry_build.sh       (it brings the plugin and the test programs up to date)
set -euo pipefail
cd "$(dirname "$0")/.."
grep -q 'code=sm_90' Makefile || { echo "carry_build: the build has no sm_90 code (H200)"; exit 1; }
make -s -j"$(nproc)" mca_coll_gpu.la check-programs >/dev/null # up to date with the sources
progs=(.libs/mca_coll_gpu.so examples/demo_gpu)
for p in test/gpu/test_cuda_* test/mpi/test_*; do # the host-backend MPI tests too (gpu_run.sh test)
    case "$p" in *.c | *.o | *.py) ;; *) progs+=("$p") ;; esac
done
for p in "${progs[@]}"; do
    [ -x "$p" ] || { echo "carry_build: $p is not built"; exit 1; }
done
mkdir -p .carry
git ls-files -z | grep -z -E '\.(c|h|cu|cuh|am|ac|m4)$' | xargs -0 sha1sum > .carry/sources.sha1
{ echo "packed: $(date -u +%FT%TZ) on $(hostname)"; echo "commit: $(git rev-parse --short HEAD)";
  git status --short | sed 's/^/changed: /'; nvcc --version | tail -1;
  ompi_info --version | head -1; } > .carry/manifest.txt
tar czf .carry/build.tgz "${progs[@]}" .carry/sources.sha1 .carry/manifest.txt
echo "carry_build: $(du -h .carry/build.tgz | cut -f1) in .carry/build.tgz, ${#progs[@]} programs"
cat .carry/manifest.txt
