#!/usr/bin/env bash
# On the GPU machine (2x H200): build with CUDA + NCCL, run the GPU test suite, the
# host-backend suite (proves the plugin loads into that Open MPI), and the benchmark.
# Logs go to $OUT (or ./gpu-logs). Usage: source .devkit/env.sh && bash bench/gpu_run.sh [what]
#   what: all (default) | build | test | bench | sanitize
set -uo pipefail
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
what=${1:-all}
pkglib=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca mca_base_component_path "$PWD/.libs:$pkglib"
        --mca coll gpu,tuned,libnbc,basic,self --mca btl self,vader,tcp)

if [ "$what" = all ] || [ "$what" = build ]; then
    { nvidia-smi -L; nvidia-smi topo -m; ompi_info --version | head -2; } > "$out/machine.txt" 2>&1
    ( ./autogen.sh && ./configure --enable-werror --with-cuda-arch="-gencode arch=compute_90,code=sm_90" \
          --with-nccl="$NCCL_HOME" && make -j16 && make -j16 check-programs && make bench ) \
        > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; echo "BUILD FAILED"; exit 1; }
    echo "build ok: $(grep -c warning "$out/build.log") warnings"
fi

if [ "$what" = all ] || [ "$what" = test ]; then
    pass=0; fail=0
    run() { # name np args...
        local name=$1 np=$2; shift 2
        if timeout 300 "${MPIRUN[@]}" -np "$np" "$@" > "$out/$name.log" 2>&1; then
            pass=$((pass+1)); echo "PASS $name"
        else
            fail=$((fail+1)); echo "FAIL $name"; tail -15 "$out/$name.log"
        fi
    }
    run gpu_np2 2 test/gpu/test_cuda_allreduce
    run gpu_np3_quick 3 test/gpu/test_cuda_allreduce quick
    run gpu_np4_quick 4 test/gpu/test_cuda_allreduce quick
    run gpu_np2_ring 2 --mca coll_gpu_allreduce_algorithm ring test/gpu/test_cuda_allreduce quick
    run host_allreduce_np4 4 --mca coll_gpu_backend host test/mpi/test_allreduce
    run host_alltoall_np4 4 --mca coll_gpu_backend host test/mpi/test_alltoall
    echo "gpu machine tests: $pass passed, $fail failed"
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
    timeout 400 "${MPIRUN[@]}" -np 2 bench/bench_allreduce ${BENCH_MAX:-2147483648} 2>&1 | tee "$out/bench_allreduce.txt"
fi

if [ "$what" = sanitize ]; then
    timeout 400 "${MPIRUN[@]}" -np 2 compute-sanitizer --tool memcheck --print-limit 20 \
        test/gpu/test_cuda_allreduce quick > "$out/sanitize.log" 2>&1; echo "sanitizer rc=$?"
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitize.log" | head
fi
