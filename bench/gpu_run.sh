#!/usr/bin/env bash
# On the GPU machine (2x H200): build with CUDA + NCCL, run the GPU test suite, the
# host-backend suite (proves the plugin loads into that Open MPI), and the benchmark.
# Logs go to $OUT (or ./gpu-logs). Usage: source .devkit/env.sh && bash bench/gpu_run.sh [steps]
#   steps: any of build smoke test test_min nb inter nb_mt nodes mt_conn mt_trace bench_proxy bench_nb floor staged colls_full prof ce ce_ar rk osu mt_excl order hog chmin mps
#   conn maxloc ce_shared staged_mps ring_tree progress osu_bind nb_busy osu_all vcolls scatter_rs
#   lat pending goals osu_long noise shared osu_gap scan ab (AB_PATCH=file: this tree against it with the patch reversed)
#   abso (ABSO="name=build.tgz ...": carried builds of the plugin against each other)
#   rktrace (RKT_VARIANTS="name=--mca%param%value ...": settings' device phases; "name=@b.tgz": a carried build) nb_rep
#   suite_cuda bench
#   bench_tree variants sanitize
#   grids crossed (the block budget: ranks on different grids; sixteen communicators crossed)
#   freerule (a cudaFree between posts and waits: engine control, staged run)
#   mt_stacks (threaded engine runs until one hangs, then every thread's stack)
#   unpack (instead of build: the tests' programs packed by bench/carry_build.sh, carried as .carry)
#   (default: build smoke test bench)
set -uo pipefail
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
steps=${*:-build smoke test bench}
case " $steps " in *" pending "*) steps="$steps prof" ;; esac # pending includes the profiler test
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
pkglib=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
# ranks that share a GPU without MPS take no engine by default (coll_gpu_cuda_time_sliced):
# the suite runs our kernels there anyway (more ranks than GPUs); MPIRUN_BASE keeps the default
MPIRUN_BASE=(mpirun --allow-run-as-root --oversubscribe --mca mca_base_component_path "$PWD/.libs:$pkglib"
        --mca coll gpu,tuned,libnbc,basic,self ${CGPU_MPIRUN_EXTRA:-})
MPIRUN=("${MPIRUN_BASE[@]}" --mca coll_gpu_cuda_time_sliced 1)
pass=0; fail=0
# a plugin build into directory $1: "." this tree's, else a carried gzipped tar of one
# mca_coll_gpu.so (abso, rktrace's @build.tgz variants)
plugin_into() {
    rm -rf "$1"; mkdir -p "$1"
    if [ "$2" = . ]; then cp .libs/mca_coll_gpu.so "$1/"; else tar xzf "$2" -C "$1"; fi
}
run() { run_one "$@"; }
launch() { # name timeout np args...: the job, its output in $out/name.log, its status in rc
    local name=$1 t=$2 np=$3; shift 3
    rc=0
    timeout -k 5 "$t" "${MPIRUN[@]}" -np "$np" "$@" > "$out/$name.log" 2>&1 || rc=$?
}
run_one() { # name timeout np args...
    local name=$1 t0=$SECONDS rc
    launch "$@"
    if [ "$rc" -eq 0 ]; then
        pass=$((pass+1)); echo "PASS $name ($((SECONDS-t0)) s)"
    else
        fail=$((fail+1)); echo "FAIL $name rc=$rc ($((SECONDS-t0)) s)"; tail -25 "$out/$name.log"
        cp "$out/$name.log" "$out/$name.fail$fail.log"
    fi
}
control() { # name timeout np args...: a negative control, expected to fail; not counted
    local name=$1 t0=$SECONDS rc
    launch "$@"
    echo "CONTROL $name rc=$rc ($((SECONDS-t0)) s; expected to fail)"
}

if has build; then
    # the kit's libfabric (prepare.sh) is found through its pkg-config file
    export PKG_CONFIG_PATH="$PWD/.devkit/root/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    { nvidia-smi -L; nvidia-smi topo -m; ompi_info --version | head -2; } > "$out/machine.txt" 2>&1
    ( ./autogen.sh && ./configure --enable-werror --with-cuda-arch="-gencode arch=compute_90,code=sm_90" \
          --with-nccl="$NCCL_HOME" && make -j16 && make -j16 check-programs && make bench bench/bench_ras_poll && make bench-proxy ) \
        > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; echo "BUILD FAILED"; exit 1; }
    grep "libfabric:" "$out/build.log" | tail -1
    echo "build ok"
fi
if has unpack; then # instead of build: the plugin and GPU tests packed here by bench/carry_build.sh
    { nvidia-smi -L; nvidia-smi topo -m; ompi_info --version | head -2; } > "$out/machine.txt" 2>&1
    tar xzf .carry/build.tgz || { echo "UNPACK FAILED (carry .carry)"; exit 1; }
    sha1sum --quiet -c .carry/sources.sha1 ||
        { echo "UNPACK REFUSED: the sources differ from those of the packed build"; exit 1; }
    cat .carry/manifest.txt | tee -a "$out/machine.txt"
    echo "unpack ok"
    # the NCCL benchmark (goals, bench steps): only its one file, against the machine's NCCL
    if [ -n "${NCCL_HOME:-}" ] && { [ ! -x bench/bench_colls ] || [ bench/bench_colls.c -nt bench/bench_colls ]; }; then
        if mpicc -O2 -std=gnu11 -I/usr/local/cuda/include -I"$NCCL_HOME/include" bench/bench_colls.c \
            -o bench/bench_colls -L"$NCCL_HOME/lib" -lnccl -L/usr/local/cuda/lib64 -lcudart -lm -lpthread \
            > "$out/bench_build.log" 2>&1; then
            echo "bench_colls built against $NCCL_HOME"
        else
            echo "bench_colls: build failed (bench_build.log)"
        fi
    fi
fi
if has smoke; then
    run host_demo 60 2 --mca coll_gpu_backend host examples/demo
    run gpu_demo 60 2 --mca coll_gpu_verbose 100 --mca coll_gpu_cuda_timeout 5 examples/demo_gpu
    if [ "$fail" -gt 0 ]; then echo "smoke failed: stopping"; exit 1; fi
fi
progress_runs() { # a peer blocked in MPI_Recv on us while we wait in a collective
    run progress_np2 150 2 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_progress
    run progress_np4 200 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_progress
}
ring_tree_runs() { # the allreduce forced onto the ring and the tree
    run gpu_np2_ring 60 2 --mca coll_gpu_allreduce_algorithm ring test/gpu/test_cuda_allreduce quick
    run gpu_np2_tree 60 2 --mca coll_gpu_allreduce_algorithm tree test/gpu/test_cuda_allreduce quick
    run gpu_np3_tree 100 3 --mca coll_gpu_allreduce_algorithm tree test/gpu/test_cuda_allreduce quick
    run gpu_np4_tree 150 4 --mca coll_gpu_allreduce_algorithm tree test/gpu/test_cuda_allreduce quick
}
# gatherv, scatterv, alltoallv on device buffers (with 4 ranks on fewer GPUs, peers share one)
vcolls_runs() {
    run vcolls_np2 150 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_vcolls
    run vcolls_np3 150 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_vcolls quick
    run vcolls_np4 200 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_vcolls quick
    run vcolls_capped_np3 150 3 --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_gather_scratch_bytes 40000 \
        test/gpu/test_cuda_vcolls capped
}
if has vcolls; then
    vcolls_runs
fi
if has test; then
    run gpu_np2 180 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_allreduce
    run gpu_np4_quick 150 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_allreduce quick
    run gpu_np3_quick 100 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_allreduce quick
    ring_tree_runs
    progress_runs
    run gpu_torch_cupy_np2 120 2 --mca coll_gpu_verbose 100 python3 test/gpu/test_torch_cupy.py
    if grep -q "cuda: \(ring mode 0\|oneshot allreduce\)" "$out/gpu_torch_cupy_np2.log"; then
        echo "torch/cupy calls served by our kernels: $(grep -c 'cuda: \(ring mode 0\|oneshot allreduce\)' "$out/gpu_torch_cupy_np2.log") trace lines"
    fi
    grep -h "test_torch_cupy\|skipped" "$out/gpu_torch_cupy_np2.log" | head -3
    run gpu_colls_np2 240 2 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_verbose 100 test/gpu/test_cuda_colls
    echo "device kernel launches in gpu_colls_np2: ring-mode $(grep -c 'cuda: ring mode [1-4]' "$out/gpu_colls_np2.log"), alltoall $(grep -c 'cuda: alltoall rank' "$out/gpu_colls_np2.log")"
    run gpu_colls_np4_quick 240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
    run gpu_colls_np3_quick 200 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
    vcolls_runs
    run host_allreduce_np4 100 4 --mca coll_gpu_backend host test/mpi/test_allreduce
    run host_alltoall_np4 60 4 --mca coll_gpu_backend host test/mpi/test_alltoall
fi
if has ring_tree; then
    ring_tree_runs
fi
if has progress; then
    progress_runs
fi
if has test_min; then # the last additions only
    run gpu_np2_quick 100 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_allreduce quick
    run gpu_colls_np2 240 2 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_verbose 100 test/gpu/test_cuda_colls
    echo "device kernel launches in gpu_colls_np2: ring-mode $(grep -c 'cuda: ring mode [1-4]' "$out/gpu_colls_np2.log"), alltoall $(grep -c 'cuda: alltoall rank' "$out/gpu_colls_np2.log")"
    run gpu_colls_np4_quick 240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
fi
if has nb; then # every datatype, non-blocking collectives, one-rank communicators, device buffers
    run types_np2 200 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_types
    run types_np4 240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_types
    run nb_np2 200 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb
    run nb_np4 240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_nb
    run nb_np1 100 1 test/gpu/test_cuda_nb
    run nb_threads_np2 200 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb threads
    # the v-forms' large blocks in rounds of the scratch cap's share
    run nb_capped_np3 200 3 --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_gather_scratch_bytes 40000 test/gpu/test_cuda_nb
    run persist_np2 120 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_persist
    run persist_np4 180 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_persist
    run neighbor_np2 120 2 test/gpu/test_cuda_neighbor
    run neighbor_np4 180 4 test/gpu/test_cuda_neighbor
    run self_np1 60 1 test/gpu/test_cuda_self
    run self_np2 60 2 test/gpu/test_cuda_self
    run self_np4 90 4 test/gpu/test_cuda_self
    run torch_cupy_np1 120 1 --mca coll_gpu_verbose 100 python3 test/gpu/test_torch_cupy.py
    grep -h "test_torch_cupy\|skipped" "$out/torch_cupy_np1.log" | head -3
    echo "one-rank torch/cupy calls copied by coll/gpu: $(grep -c 'serving a single rank' "$out/torch_cupy_np1.log") communicators"
fi
if has nb || has inter; then # intercommunicators: every collective staged, device buffers
    run inter_np2 120 2 test/gpu/test_cuda_inter
    run inter_np5 180 5 test/gpu/test_cuda_inter
fi
if has nb_mt; then # the threaded non-blocking engine path (coll_gpu_nb_engine forced on), then under compute-sanitizer
    for i in 1 2; do
        run nb_mt_engine_np2_$i 60 2 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_nb_engine on test/gpu/test_cuda_nb threads
    done
    run nb_mt_auto_np2 60 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb threads
    if command -v compute-sanitizer > /dev/null; then
        # the tool runs a process's kernels one at a time, so threads' communicators whose
        # kernels wait for each other across the ranks time out (sessions 6 and 34): not a
        # pass/fail test (that is the step sanitize), only memcheck's report on what ran
        control nb_mt_sanitizer_np2 90 2 --mca coll_gpu_cuda_timeout 30 --mca coll_gpu_nb_engine on \
            compute-sanitizer --tool memcheck --print-limit 20 --log-file "$out/sanitizer.%p.txt" test/gpu/test_cuda_nb threads
        cat "$out"/sanitizer.*.txt 2>/dev/null | head -120 > "$out/sanitizer_summary.txt"; rm -f "$out"/sanitizer.*.txt
        echo "nb_mt_sanitizer: memcheck $(grep -h 'ERROR SUMMARY' "$out/sanitizer_summary.txt" | tr '\n' ' ')"
    fi
fi
if has nodes; then # across fake nodes on device buffers: 2 nodes x 1 GPU, 2 x 2 ranks, then the threaded path
    run nodes_2x1_np2 200 2 --mca coll_gpu_ofi_provider tcp --mca coll_gpu_fake_nodes 2 --mca coll_gpu_verbose 10 test/gpu/test_cuda_nodes
    run nodes_2x2_np4 240 4 --mca coll_gpu_ofi_provider tcp --mca coll_gpu_fake_nodes 2 test/gpu/test_cuda_nodes
    run nodes_shm_2x1_np2 200 2 --mca coll_gpu_ofi_provider shm --mca coll_gpu_fake_nodes 2 test/gpu/test_cuda_nodes
fi
if has mt_conn; then # the threaded engine path at np 4 with and without 32 hardware queues (CONN_REP times)
    for i in $(seq 1 "${CONN_REP:-2}"); do
        run mt4_default_$i 45 4 --mca coll_gpu_cuda_timeout 15 --mca coll_gpu_nb_engine on test/gpu/test_cuda_nb threads
        run mt4_conn32_$i 45 4 -x CUDA_DEVICE_MAX_CONNECTIONS=32 --mca coll_gpu_cuda_timeout 15 --mca coll_gpu_nb_engine on test/gpu/test_cuda_nb threads
        run mt4_auto_$i 45 4 --mca coll_gpu_cuda_timeout 15 test/gpu/test_cuda_nb threads
    done
fi
if has mt_excl; then # the threaded defect: 4 ranks, 4 threads each splitting its dup and posting
    # negative controls, the set-up's old unbounded wait: threads with the engine forced (failed
    # every run in sessions 6-8), and one thread (test_nb's request beside a new communicator)
    control mtx_forever 40 4 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_nb_engine on \
        --mca coll_gpu_cuda_setup_wait_ms -1 test/gpu/test_cuda_nb threads
    control nb_forever 60 2 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_cuda_setup_wait_ms -1 test/gpu/test_cuda_nb
    # the engine forced, MT_REP times: the set-up's wait bounded (default) against none
    # (MT_REP_MCA: more settings for both, e.g. --mca coll_gpu_verbose 10, which counts the
    # set-ups that went ahead past the wait)
    for i in $(seq 1 "${MT_REP:-3}"); do
        run mtx_bounded_$i 60 4 --mca coll_gpu_cuda_timeout 15 --mca coll_gpu_nb_engine on \
            ${MT_REP_MCA:-} test/gpu/test_cuda_nb threads
        run mtx_off_$i 60 4 --mca coll_gpu_cuda_timeout 15 --mca coll_gpu_nb_engine on ${MT_REP_MCA:-} \
            --mca coll_gpu_cuda_setup_exclusive false test/gpu/test_cuda_nb threads
    done
    echo "set-ups that went ahead past the wait: $(cat "$out"/mtx_bounded_*.log 2>/dev/null | grep -c 'set-up goes ahead')"
    for i in $(seq 1 "${MT_AUTO_REP:-1}"); do # auto: staged under MPI_THREAD_MULTIPLE (cuda backend)
        run mtx_auto_$i 90 4 --mca coll_gpu_cuda_timeout 15 test/gpu/test_cuda_nb threads
    done
fi
if has conn; then # every stream on one CUDA hardware queue, and 32 queues (the threaded lead: mt_conn)
    for c in 1 32; do
        run conn${c}_nb_np2 120 2 -x CUDA_DEVICE_MAX_CONNECTIONS=$c --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb
        run conn${c}_colls_np2 120 2 -x CUDA_DEVICE_MAX_CONNECTIONS=$c --mca coll_gpu_cuda_timeout 10 \
            test/gpu/test_cuda_colls quick
    done
fi
# Ranks with different block budgets (coll_gpu_cuda_block_budget, each rank's own): their
# kernels run the same parts on different grids, a block taking several parts in turn.
# One application context a rank, its settings in its environment (verbose 100 logs the
# launches on fewer blocks than parts)
budget_run() { # name timeout budgets(comma-separated, one rank each) program args...
    local name=$1 t=$2 b=$3; shift 3
    local ctx=() x
    for x in ${b//,/ }; do
        ctx+=(: -np 1 env OMPI_MCA_coll_gpu_cuda_block_budget="$x" OMPI_MCA_coll_gpu_verbose=100
              OMPI_MCA_coll_gpu_cuda_timeout=20 "$@")
    done
    run "$name" "$t" "${ctx[@]:2}"
    local fewer
    fewer=$(grep -c "cuda: a launch of .* parts on .* blocks" "$out/$name.log")
    echo "  $name: launches on fewer blocks than parts: $fewer"
    if [ "$fewer" -eq 0 ]; then fail=$((fail+1)); echo "FAIL $name: no launch ran on a reduced grid"; fi
    gzip -f "$out/$name.log"
}
if has grids; then
    budget_run grids_colls_np2 200 1,3 test/gpu/test_cuda_colls quick
    budget_run grids_allreduce_np2 200 2,5 test/gpu/test_cuda_allreduce quick
    budget_run grids_nb_np2 200 1,64 test/gpu/test_cuda_nb
    budget_run grids_allreduce_np4 240 1,2,5,64 test/gpu/test_cuda_allreduce quick
    budget_run grids_colls_np4 240 3,1,64,2 test/gpu/test_cuda_colls quick
fi
if has crossed; then # sixteen communicators' large calls in flight, crossed (test_nb crossed)
    for i in $(seq 1 "${CROSS_REP:-3}"); do
        run crossed_np2_$i 90 2 --mca coll_gpu_cuda_timeout 15 test/gpu/test_cuda_nb crossed
    done
    run crossed_np4 120 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_nb crossed
    for i in $(seq 1 "${CROSS_REP:-3}"); do # the old behaviour: every call all its blocks
        control crossed_nobudget_$i 60 2 --mca coll_gpu_cuda_block_budget 0 --mca coll_gpu_cuda_timeout 15 \
            test/gpu/test_cuda_nb crossed
    done
    # session 32's budget without spare blocks: the calls past it take blocks over the cap,
    # which one rank per GPU cannot hold (hung 2 of 2 on 2x H200, session 34)
    control crossed_nospare 60 2 --mca coll_gpu_cuda_block_spare 0 --mca coll_gpu_cuda_timeout 15 \
        test/gpu/test_cuda_nb crossed
fi
if has freerule; then # README's rule: a cudaFree between non-blocking posts and their waits
    # on the engine every rank's cudaFree waits for a kernel whose peer is held the same way:
    # the negative control, failing at the timeout with the message that names the cause
    control freerule_engine_np2 60 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb freerule
    echo "freerule: timeout messages naming the cause: $(grep -c 'device-wide CUDA call' "$out/freerule_engine_np2.log")"
    run freerule_staged_np2 60 2 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_nb_engine off \
        test/gpu/test_cuda_nb freerule
fi
if has mt_stacks; then # the threaded engine path (forced) until a run hangs, then every thread's
    # stack in every rank (test programs dump them on SIGUSR2 with CGPU_TEST_STACKS=1);
    # STACK_REP runs at most, a run that lasts STACK_AFTER s counted as hung
    for i in $(seq 1 "${STACK_REP:-16}"); do
        t0=$SECONDS
        timeout -k 5 120 "${MPIRUN[@]}" -np 4 -x CGPU_TEST_STACKS=1 --mca coll_gpu_cuda_timeout 90 \
            --mca coll_gpu_nb_engine on test/gpu/test_cuda_nb threads > "$out/mts_$i.log" 2>&1 &
        job=$!
        while kill -0 "$job" 2>/dev/null && [ $((SECONDS-t0)) -lt "${STACK_AFTER:-25}" ]; do sleep 1; done
        if kill -0 "$job" 2>/dev/null; then
            echo "HANG in run $i after $((SECONDS-t0)) s: every thread's stack in mt_stacks_hang.log"
            pkill -USR2 -x test_cuda_nb; sleep 5
            pkill -9 -x test_cuda_nb; wait "$job"
            cp "$out/mts_$i.log" "$out/mt_stacks_hang.log"
            break
        fi
        wait "$job"; echo "mt_stacks run $i rc=$? ($((SECONDS-t0)) s)"
    done
fi
if has mt_trace; then # one failing threaded run with every call traced (verbose 100), for diagnosis
    run mt4_trace 45 4 --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_nb_engine on --mca coll_gpu_verbose 100 \
        test/gpu/test_cuda_nb threads
    gzip -f "$out/mt4_trace.log"
fi
if has bench_proxy; then # the proxy against raw libfabric, same provider, host and device memory
    for prov in tcp shm; do
        [ -x bench/bench_proxy ] && timeout -k 5 120 bench/bench_proxy "$prov" 2>&1 | tee -a "$out/bench_proxy.txt"
    done
    timeout -k 5 200 "${MPIRUN[@]}" -np 2 --mca coll_gpu_ofi_provider tcp --mca coll_gpu_fake_nodes 2 \
        bench/bench_colls allreduce,alltoall ${BENCH_NODES_MAX:-67108864} 2>&1 | tee "$out/bench_nodes.txt"
fi
if has bench_nb; then # MPI_CHAR (the OSU default) and MPI_Iallreduce against NCCL
    timeout -k 5 300 "${MPIRUN[@]}" -np 2 bench/bench_colls allreduce_char,reduce_char,iallreduce \
        ${BENCH_NB_MAX:-536870912} 2>&1 | tee "$out/bench_nb.txt"
fi
if has floor; then # the launch-and-wait floor of one small call on this machine (no MPI)
    nvcc -O2 -gencode arch=compute_90,code=sm_90 -o bench/bench_floor bench/bench_floor.cu -lcuda &&
        bench/bench_floor 20000 2>&1 | tee "$out/floor.txt"
fi
# one GPU shared through an MPS daemon of our own (its pipe and log dirs under /tmp, quit at the
# end): the ranks' kernels run at once instead of time-slicing, so the small-call protocol can be
# looked at on a one-GPU machine. A development view only, never the 2-GPU figure.
mps_start() {
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/cgpu_mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/cgpu_mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    command -v nvidia-cuda-mps-control > /dev/null && nvidia-cuda-mps-control -d || return 1
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
    MPS=("${MPIRUN[@]}" -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY)
}
mps_stop() {
    echo quit | nvidia-cuda-mps-control; trap - EXIT
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
if has mps; then
    if mps_start; then
        for v in ${MPS_VARIANTS:-on off}; do # resident on/off, then :LL bytes (coll_gpu_cuda_ll_bytes)
            IFS=: read -r rk llb <<<"$v"
            L=(); [ -n "$llb" ] && L=(--mca coll_gpu_cuda_ll_bytes "$llb")
            echo "## MPS, coll_gpu_cuda_resident $v" >> "$out/mps_lat.txt"
            timeout -k 5 90 "${MPS[@]}" -np 2 --mca coll_gpu_cuda_resident $rk "${L[@]}" \
                bench/bench_colls ${MPS_COLLS:-allreduce,allgather,alltoall,bcast,reduce} ${MPS_MAX:-65536} 8 >> "$out/mps_lat.txt" 2>&1
        done
        awk '/^##/{v=$4} /^# /{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s", $1, $2}' "$out/mps_lat.txt"; echo
        # bytes per thread block of a oneshot call (coll_gpu_cuda_oneshot_block_bytes), resident
        for b in ${MPS_BLOCKS:-}; do
            timeout -k 5 90 "${MPS[@]}" -np 2 --mca coll_gpu_cuda_resident on --mca coll_gpu_cuda_oneshot_block_bytes "$b" \
                bench/bench_colls ${MPS_BLOCK_COLLS:-allreduce,allgather,bcast} 65536 4096 > "$out/mps_blocks_$b.txt" 2>&1
            awk -v b="$b" '/^# /{c=$2; printf "\nblock %s %s:", b, c} /^ +[0-9]/{printf " %s:%s", $1, $2}' "$out/mps_blocks_$b.txt"; echo
        done
        # which path served the small calls of each collective (one trace line per call)
        timeout -k 5 60 "${MPS[@]}" -np 2 --mca coll_gpu_cuda_resident on --mca coll_gpu_verbose 100 \
            bench/bench_colls allgather,alltoall,bcast,reduce,reduce_scatter 1024 1024 > "$out/mps_paths.log" 2>&1
        for c in allgather alltoall bcast reduce reduce_scatter_block; do
            echo "MPS $c 1 KiB: resident calls $(grep -c "cuda: resident $c rank" "$out/mps_paths.log"), launched oneshot $(grep -c "cuda: oneshot $c rank" "$out/mps_paths.log")"
        done
        gzip -f "$out/mps_paths.log"
        for o in stream none none:0; do # where a resident call's time goes, host and device (verbose 10); :0 = no LL lines
            IFS=: read -r so llb <<<"$o"
            timeout -k 5 60 "${MPS[@]}" -np 2 --mca coll_gpu_cuda_resident on --mca coll_gpu_verbose 10 --mca coll_gpu_cuda_stream_order $so \
                --mca coll_gpu_cuda_ll_bytes "${llb:-1024}" bench/bench_colls allreduce 8 8 > "$out/mps_split_$so$llb.log" 2>&1
            echo "MPS stream_order $o: $(grep -h ' 8  *[0-9]' "$out/mps_split_$so$llb.log" | head -1)"
            grep -h "resident oneshot[: ]" "$out/mps_split_$so$llb.log" | sed 's/.*coll.gpu: //'
        done
        for s in ${MPS_SPLIT_SIZES:-}; do # the same at larger sizes (several blocks a call)
            timeout -k 5 60 "${MPS[@]}" -np 2 --mca coll_gpu_cuda_resident on --mca coll_gpu_verbose 10 \
                bench/bench_colls allreduce "$s" "$s" > "$out/mps_split_$s.log" 2>&1
            echo "MPS $s B: $(grep -h " $s  *[0-9]" "$out/mps_split_$s.log" | head -1)"
            grep -h "resident oneshot on the device" "$out/mps_split_$s.log" | sed 's/.*coll.gpu: //'
        done
        if [ "${MPS_TESTS:-0}" = 1 ]; then # the resident kernel checked with the ranks' kernels running at once
            RKON=(--mca coll_gpu_cuda_resident on)
            run() { # a failed client can leave the MPS server refusing the next ones: a fresh one after a failure
                local f0=$fail; run_one "$@"
                if [ "$fail" -gt "$f0" ]; then echo quit | nvidia-cuda-mps-control; sleep 1; nvidia-cuda-mps-control -d; fi
            }
            for t in allreduce colls; do # resident, launched, one of each, 4 ranks
                T=(test/gpu/test_cuda_$t quick)
                run mps_rk_${t}_np2 120 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 "${T[@]}"
                run mps_launched_${t}_np2 120 2 --mca coll_gpu_cuda_resident off --mca coll_gpu_cuda_timeout 10 "${T[@]}"
                run mps_rk_${t}_mixed_np2 120 1 --mca coll_gpu_cuda_timeout 10 -x OMPI_MCA_coll_gpu_cuda_resident=1 "${T[@]}" : \
                    -np 1 -x OMPI_MCA_coll_gpu_cuda_resident=0 "${T[@]}"
                run mps_rk_${t}_np4 150 4 "${RKON[@]}" --mca coll_gpu_cuda_timeout 20 "${T[@]}"
            done
            run mps_rk_idle_np2 120 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_cuda_resident_idle_us 20 test/gpu/test_cuda_allreduce quick
            run mps_small_off_colls_np2 120 2 "${RKON[@]}" --mca coll_gpu_cuda_small_bytes 0 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls quick
            run mps_ll_off_colls_np2 120 2 "${RKON[@]}" --mca coll_gpu_cuda_ll_bytes 0 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls quick
            run mps_rk_colls_np3 150 3 "${RKON[@]}" --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
            run mps_rk_types_np2 150 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_types
            run mps_rk_nb_np2 150 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb
            run mps_rk_nb_np4 200 4 "${RKON[@]}" --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_nb
            run mps_nb_threads_np2 150 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb threads
            run mps_rk_order_np4 120 4 "${RKON[@]}" test/gpu/test_cuda_colls order
            run mps_rk_order_np2 120 2 "${RKON[@]}" test/gpu/test_cuda_colls order
        fi
        run() { run_one "$@"; }
        mps_stop
    else
        echo "mps: no MPS daemon here"
    fi
fi
if has maxloc; then # MPI_2INT and MPI_DOUBLE_INT MAXLOC in our kernels, against the same calls forced through the
    # staged path and a float sum of the same bytes; one rank per GPU (NCCL's int64 max
    # beside it) where there are two GPUs, else 2 ranks on one GPU under MPS (ours only)
    R=("${MPIRUN[@]}"); started=0
    if [ "$(nvidia-smi -L | wc -l)" -lt 2 ] && mps_start; then R=("${MPS[@]}"); started=1; fi
    # MPI_2INT, and MPI_DOUBLE_INT (a padded pair) allreduce and reduce
    for b in allreduce_maxloc allreduce_dint reduce_dint; do
    f=allreduce; [ $b = reduce_dint ] && f=reduce # the staged path: that collective's fallback
    for v in "kernels:" "staged:--mca coll_gpu_${f}_algorithm fallback"; do
        IFS=: read -r how args <<<"$v"
        # shellcheck disable=SC2086
        echo "## $b, $how${args:+ ($args)}$([ $started = 1 ] && echo ', under MPS, 2 ranks on one GPU')" | tee -a "$out/maxloc.txt"
        timeout -k 5 150 "${R[@]}" -np 2 $args bench/bench_colls $b ${MAXLOC_MAX:-67108864} 8 2>&1 | tee -a "$out/maxloc.txt" | grep -v "^#"
    done
    done
    echo "## allreduce float32 sum, the same bytes" | tee -a "$out/maxloc.txt"
    timeout -k 5 150 "${R[@]}" -np 2 bench/bench_colls allreduce ${MAXLOC_MAX:-67108864} 8 2>&1 | tee -a "$out/maxloc.txt" | grep -v "^#"
    [ $started = 1 ] && mps_stop
fi
if has ce_shared; then # 2 ranks on one GPU under MPS: the allreduce and reduce sizes where ranks on
    # two devices take the copy engines (they take the ring or chain there since session 29;
    # before, the 64 MiB allreduce timed out there after other jobs, session 28)
    if [ "$(nvidia-smi -L | wc -l)" -lt 2 ] && mps_start; then
        run ce_shared_np2 240 2 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY \
            --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_allreduce
        for b in allreduce reduce allreduce_maxloc; do
            echo "## $b, under MPS, 2 ranks on one GPU" | tee -a "$out/ce_shared.txt"
            timeout -k 5 150 "${MPS[@]}" -np 2 --mca coll_gpu_cuda_timeout 10 bench/bench_colls $b \
                ${CE_SHARED_MAX:-268435456} 67108864 2>&1 | tee -a "$out/ce_shared.txt" | grep -v "^#"
        done
        mps_stop
    fi
fi
if has staged_mps; then # the staged allreduce with the engine moving the data, 2 ranks on one GPU under MPS
    if mps_start; then
        SH=(--mca coll_gpu_stage_allreduce_engine_shared 1)
        SMALL=(--mca coll_gpu_stage_chunk_bytes 65536 --mca coll_gpu_stage_pipeline_min_bytes 131072 --mca coll_gpu_allreduce_algorithm fallback)
        run staged_mps_np2 120 2 "${SH[@]}" "${SMALL[@]}" test/gpu/test_cuda_staged engine_shared
        run staged_mps_np3 150 3 "${SH[@]}" "${SMALL[@]}" test/gpu/test_cuda_staged engine_shared
        for v in ${STAGED_VARIANTS:-engine:4194304 engine:16777216 previous:4194304}; do
            IFS=: read -r how chunk pmin <<<"$v" # pmin: coll_gpu_stage_pipeline_min_bytes (default if empty)
            e=1; [ "$how" = previous ] && e=0
            P=(); [ -n "$pmin" ] && P=(--mca coll_gpu_stage_pipeline_min_bytes "$pmin")
            echo "## MPS: staged allreduce forced ($how moves the data, coll_gpu_stage_chunk_bytes $chunk, pipeline from ${pmin:-default})" | tee -a "$out/staged_mps.txt"
            timeout -k 5 150 "${MPS[@]}" -np 2 "${SH[@]}" "${P[@]}" --mca coll_gpu_allreduce_algorithm fallback \
                --mca coll_gpu_stage_allreduce_engine $e --mca coll_gpu_stage_chunk_bytes "$chunk" \
                bench/bench_colls allreduce ${STAGED_MAX:-268435456} ${STAGED_MIN:-1048576} 2>&1 | tee -a "$out/staged_mps.txt" | grep -v "^#"
        done
        for b in ${STAGED_TRACE:-}; do # where a staged call's time goes (verbose 10), engine moving
            timeout -k 5 60 "${MPS[@]}" -np 2 "${SH[@]}" --mca coll_gpu_allreduce_algorithm fallback --mca coll_gpu_verbose 10 \
                bench/bench_colls allreduce "$b" "$b" > "$out/staged_trace_$b.log" 2>&1
            grep -h "staged allreduce on" "$out/staged_trace_$b.log" | sed 's/.*coll.gpu: //' | sort | uniq -c | sort -rn | head -4
            grep -h "staged allreduce on" "$out/staged_trace_$b.log" | tail -2 | sed 's/.*coll.gpu: //'
        done
        mps_stop
    fi
fi
if has staged; then # the staged allreduce: user ops and pair types on device buffers, then speed
    SMALL=(--mca coll_gpu_stage_chunk_bytes 65536 --mca coll_gpu_stage_pipeline_min_bytes 131072 --mca coll_gpu_allreduce_algorithm fallback)
    run staged_gpu_np2 120 2 "${SMALL[@]}" test/gpu/test_cuda_staged engine
    run staged_gpu_np3 150 3 "${SMALL[@]}" test/gpu/test_cuda_staged engine
    run staged_gpu_np4 150 4 "${SMALL[@]}" test/gpu/test_cuda_staged engine
    run staged_gpu_prev_np2 150 2 "${SMALL[@]}" --mca coll_gpu_stage_allreduce_engine 0 test/gpu/test_cuda_staged previous
    for v in ${STAGED_VARIANTS:-engine:4194304 engine:16777216 previous:4194304}; do
        IFS=: read -r how chunk <<<"$v"
        e=1; [ "$how" = previous ] && e=0
        echo "## staged allreduce forced ($how moves the data, coll_gpu_stage_chunk_bytes $chunk)"
        timeout -k 5 150 "${MPIRUN[@]}" -np 2 --mca coll_gpu_allreduce_algorithm fallback \
            --mca coll_gpu_stage_allreduce_engine $e --mca coll_gpu_stage_chunk_bytes "$chunk" \
            bench/bench_colls allreduce ${STAGED_MAX:-268435456} 1048576 2>&1 | tee -a "$out/staged.txt"
    done
fi
if has colls_full; then # every collective, full sizes, at 3 and 4 ranks on 2 GPUs
    run gpu_colls_np4 300 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls
    run gpu_colls_np3 300 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls
fi
if has prof; then # the threaded profiler test on the cuda backend (default binding)
    chk=$PWD/test/prof/.libs/libcgpu_prof_check.so
    export CGPU_PROF_CHECK_PLUGIN=$chk
    run prof_np2 120 2 --mca coll_gpu_cuda_timeout 15 --mca coll_gpu_profiler "$chk" -x CGPU_PROF_CHECK_PLUGIN test/mpi/test_profiler
    run prof_np4 240 4 --mca coll_gpu_cuda_timeout 15 --mca coll_gpu_profiler "$chk" -x CGPU_PROF_CHECK_PLUGIN test/mpi/test_profiler
    grep -h "events\|transport\|PASSED\|FAILED" "$out"/prof_np*.log | head -12
fi
if has ce; then # the copy-engine path forced on every alltoall and 2-rank bcast and reduce, then measured
    CE=(--mca coll_gpu_cuda_ce_alltoall_min_bytes 1 --mca coll_gpu_cuda_ce_bcast_min_bytes 1
        --mca coll_gpu_cuda_ce_reduce_min_bytes 1)
    run ce_colls_np2 200 2 "${CE[@]}" --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_verbose 100 test/gpu/test_cuda_colls
    echo "copy-engine calls in ce_colls_np2: $(grep -c 'cuda: copy-engine' "$out/ce_colls_np2.log")"
    run ce_colls_np4 200 4 "${CE[@]}" --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_verbose 100 test/gpu/test_cuda_colls quick
    echo "copy-engine calls in ce_colls_np4: $(grep -c 'cuda: copy-engine' "$out/ce_colls_np4.log")"
    timeout -k 5 200 "${MPIRUN[@]}" -np 2 "${CE[@]}" bench/bench_colls ${CE_COLLS:-alltoall,bcast,reduce} 1073741824 1048576 2>&1 | tee "$out/bench_ce.txt"
fi
if has rk; then # the resident small-allreduce kernel: checked by default, with relaunches, against a launched peer; then latency
  if [ "${RK_TESTS:-1}" = 1 ]; then
    RKON=(--mca coll_gpu_cuda_resident on) # forced (auto is off under MPI_THREAD_MULTIPLE)
    run rk_np2 200 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_verbose 100 test/gpu/test_cuda_allreduce quick
    echo "rk_np2: resident calls $(grep -c 'cuda: resident allreduce rank' "$out/rk_np2.log"), kernel launches $(grep -c 'resident kernel launched' "$out/rk_np2.log")"
    gzip -f "$out/rk_np2.log"
    run rk_idle_np2 200 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_cuda_resident_idle_us 20 --mca coll_gpu_verbose 100 test/gpu/test_cuda_allreduce quick
    echo "rk_idle_np2 (20 us idle): resident calls $(grep -c 'cuda: resident allreduce rank' "$out/rk_idle_np2.log"), kernel launches $(grep -c 'resident kernel launched' "$out/rk_idle_np2.log")"
    gzip -f "$out/rk_idle_np2.log"
    run rk_mixed_np2 200 1 --mca coll_gpu_cuda_timeout 10 -x OMPI_MCA_coll_gpu_cuda_resident=1 test/gpu/test_cuda_allreduce quick : \
        -np 1 -x OMPI_MCA_coll_gpu_cuda_resident=0 test/gpu/test_cuda_allreduce quick
    run rk_np4 200 4 "${RKON[@]}" --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_allreduce quick
    run rk_colls_np2 200 2 "${RKON[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls quick
    run rk_order_np4 120 4 "${RKON[@]}" test/gpu/test_cuda_colls order
    # the mailbox in device memory (devices before compute capability 9.0), up to 32 blocks
    NOCL=(--mca coll_gpu_cuda_resident_cluster 0 --mca coll_gpu_cuda_oneshot_block_bytes 2048)
    run rk_nocluster_idle_np2 200 2 "${RKON[@]}" "${NOCL[@]}" --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_cuda_resident_idle_us 20 test/gpu/test_cuda_allreduce quick
    run rk_nocluster_colls_np2 200 2 "${RKON[@]}" "${NOCL[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls quick
  fi
  if [ "${RK_LAT:-1}" = 1 ]; then
    for v in on off; do
        echo "## coll_gpu_cuda_resident $v" >> "$out/rk_lat.txt"
        timeout -k 5 60 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_resident $v \
            bench/bench_colls ${RK_COLLS:-allreduce,allreduce_char} ${RK_MAX:-65536} 8 >> "$out/rk_lat.txt" 2>&1
    done
    awk '/^##/{v=$3} /^# /{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s/%s", $1, $2, $4}' "$out/rk_lat.txt"; echo
    timeout -k 5 60 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_resident on --mca coll_gpu_verbose 100 bench/bench_colls allreduce 64 8 > "$out/rk_lat_trace.log" 2>&1
    echo "bench trace: resident calls $(grep -c 'cuda: resident allreduce rank' "$out/rk_lat_trace.log"), kernel launches $(grep -c 'resident kernel launched' "$out/rk_lat_trace.log")"
    gzip -f "$out/rk_lat_trace.log"
    for o in stream none; do # where a resident call's time goes (reported at MPI_Finalize, verbose 10)
        timeout -k 5 60 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_resident on --mca coll_gpu_verbose 10 --mca coll_gpu_cuda_stream_order $o \
            bench/bench_colls allreduce 8 8 > "$out/rk_split_$o.log" 2>&1
        echo "stream_order $o: $(grep -h ' 8  *[0-9]' "$out/rk_split_$o.log" | head -1)"
        grep -h "resident oneshot[: ]" "$out/rk_split_$o.log" | sed 's/.*coll.gpu: //'
    done
  fi
fi
osu_build() { # the OSU tree carried in .osu, the collective directories named (blocking, non_blocking)
    ( top=$PWD && cd .osu && touch aclocal.m4 && sleep 1 && touch configure Makefile.in && find . -name Makefile.in -exec touch {} + &&
      ./configure CC=mpicc CXX=mpicxx --enable-cuda --with-cuda-include=/usr/local/cuda/include \
          --with-cuda-libpath=/usr/local/cuda/lib64 &&
      for d in "$@"; do # the compat header at build time only (configure's link tests declare cudaFree their way)
          make -j16 -C c/mpi/collective/$d CFLAGS="-O2 -I/usr/local/cuda/include -include $top/bench/osu_cuda13_compat.h" || exit 1
      done ) > "$out/osu_build.log" 2>&1 || tail -20 "$out/osu_build.log"
}
runner_start() { # R: the mpirun line; with OSU_MPS=1 under MPS (a header line in file $1)
    R=("${MPIRUN[@]}")
    if [ "${OSU_MPS:-0}" = 1 ] && mps_start; then R=("${MPS[@]}"); echo "## under MPS, 2 ranks on one GPU" >> "$1"; fi
}
runner_stop() {
    if [ "${OSU_MPS:-0}" = 1 ] && [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then mps_stop; fi
}
if has osu; then # OSU micro-benchmarks 7.4 as a user runs them (-d cuda, their defaults: MPI_CHAR for
    # the reductions); the OSU tree is a fetched copy carried in .osu (git-ignored, never committed)
    if [ -x .osu/configure ]; then
        osu_build blocking non_blocking
        O=.osu/c/mpi/collective
        runner_start "$out/osu.txt"
        for b in ${OSU_BLOCKING:-osu_allreduce osu_reduce osu_bcast osu_allgather osu_alltoall osu_reduce_scatter_block}; do
            echo "## $b -d cuda" >> "$out/osu.txt"
            timeout -k 5 90 "${R[@]}" -np 2 $O/blocking/$b -d cuda >> "$out/osu.txt" 2>&1
        done
        for b in ${OSU_NB:-osu_iallreduce osu_ialltoall}; do
            echo "## $b -d cuda" >> "$out/osu.txt"
            timeout -k 5 120 "${R[@]}" -np 2 $O/non_blocking/$b -d cuda >> "$out/osu.txt" 2>&1
        done
        echo "## osu_allreduce -d cuda, coll_gpu_cuda_resident off" >> "$out/osu.txt"
        timeout -k 5 90 "${R[@]}" -np 2 --mca coll_gpu_cuda_resident off $O/blocking/osu_allreduce -d cuda >> "$out/osu.txt" 2>&1
        for b in allreduce bcast alltoall; do # which path served OSU's calls (one trace line per call)
            timeout -k 5 60 "${R[@]}" -np 2 --mca coll_gpu_verbose 100 $O/blocking/osu_$b -d cuda -m 4:4 -i 100 -x 10 > "$out/osu_paths.log" 2>&1
            echo "osu_$b -d cuda, 4 B: resident calls $(grep -c "cuda: resident $b rank" "$out/osu_paths.log"), launched oneshot $(grep -c "cuda: oneshot $b rank" "$out/osu_paths.log")"
        done
        runner_stop
        grep -c "^[0-9]" "$out/osu.txt"
    else
        echo "osu: no .osu tree carried"
    fi
fi
if has osu_bind; then # non-blocking overlap under Open MPI's default binding (a core per rank, the worker
    # shares it) and with --bind-to none (OSU_MPS=1: 2 ranks on one GPU under MPS)
    if [ -x .osu/configure ]; then
        [ -x .osu/c/mpi/collective/non_blocking/osu_iallreduce ] || osu_build non_blocking
        O=.osu/c/mpi/collective
        runner_start "$out/osu_bind.txt"
        for b in ${OSU_NB:-osu_iallreduce osu_ialltoall osu_ibcast}; do
            for bind in default none; do
                B=(); [ "$bind" = none ] && B=(--bind-to none)
                echo "## $b -d cuda, binding $bind" >> "$out/osu_bind.txt"
                timeout -k 5 120 "${R[@]}" -np 2 --report-bindings "${B[@]}" $O/non_blocking/$b -d cuda \
                    -m 1:${OSU_NB_MAX:-65536} >> "$out/osu_bind.txt" 2>&1
            done
        done
        runner_stop
        awk '/^## /{c=$2" "$6} /^[0-9]/{printf "%s %s B: overall %s us, overlap %s %%\n", c, $1, $2, $5}' "$out/osu_bind.txt" |
            awk '$3==8 || $3==4096 || $3==65536'
    else
        echo "osu_bind: no .osu tree carried"
    fi
fi
if has osu_all; then # every OSU collective benchmark as a user tries it on device buffers, with OSU's own
    # check of the results (-c, MPI_CHAR, MPI_INT and MPI_FLOAT), at OSU_ALL_NP ranks (OSU_MPS=1: on one
    # GPU under MPS); then bcast, alltoall and allgather with a vector datatype (-D, the staged path;
    # OSU checks nothing there): a run passes when it exits 0 and no line says Fail; OSU_ALL_ONLY: a regex
    # of the benchmark names to run (then no -D runs)
    if [ -x .osu/configure ]; then
        [ -x .osu/c/mpi/collective/non_blocking/osu_ireduce ] && [ -x .osu/c/mpi/collective/blocking/osu_gatherv ] ||
            osu_build blocking non_blocking
        O=.osu/c/mpi/collective
        runner_start "$out/osu_all.txt"
        osu_one() { # name np args...
            local name=$1 np=$2; shift 2
            local t0=$SECONDS rc=0
            timeout -k 5 ${OSU_ALL_T:-120} "${R[@]}" -np "$np" "$@" > "$out/osu_all_cur.log" 2>&1 || rc=$?
            local ok=$(grep -c "Pass" "$out/osu_all_cur.log") bad=$(grep -c "Fail" "$out/osu_all_cur.log")
            { echo "## $name np $np: rc $rc, $ok lines Pass, $bad Fail ($((SECONDS-t0)) s)"; cat "$out/osu_all_cur.log"; } >> "$out/osu_all.txt"
            if [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ]; then
                pass=$((pass+1)); echo "PASS osu $name np $np ($ok checked lines, $((SECONDS-t0)) s)"
            else
                fail=$((fail+1)); echo "FAIL osu $name np $np rc=$rc fail lines $bad"; tail -8 "$out/osu_all_cur.log"
            fi
        }
        for np in ${OSU_ALL_NP:-2 3}; do
            for b in $O/blocking/osu_* $O/non_blocking/osu_*; do
                n=$(basename "$b"); [ -x "$b" ] && [ "${n%.*}" = "$n" ] || continue
                [[ -z "${OSU_ALL_ONLY:-}" || "$n" =~ ${OSU_ALL_ONLY:-} ]] || continue # a regex
                C=(-c -T all -m 1:${OSU_ALL_MAX:-1048576}); case $n in *barrier) C=() ;; esac # no data
                osu_one "$n" "$np" "$b" -d cuda "${C[@]}" -i ${OSU_ALL_I:-5} -x 1
            done
        done
        for b in blocking/osu_bcast blocking/osu_alltoall blocking/osu_allgather; do # OSU takes -D with -d only there
            [ -z "${OSU_ALL_ONLY:-}" ] || break
            osu_one "$(basename "$b") -D vect:8:4" 2 "$O/$b" -d cuda -D vect:8:4 -m 1:${OSU_ALL_MAX:-1048576} -i ${OSU_ALL_I:-5} -x 1
        done
        rm -f "$out/osu_all_cur.log"
        runner_stop
    else
        echo "osu_all: no .osu tree carried"
    fi
fi
if has scatter_rs; then # MPI_Scatter(v) and MPI_Iscatter forced onto the broadcast (coll_gpu_scatter_algorithm
    # ring; auto takes the reduce-scatter up to 4 MiB blocks) on device buffers, checked; then OSU's
    # scatters -d cuda with ring, reduce_scatter and auto in one job
    SRING=(--mca coll_gpu_scatter_algorithm ring)
    run sring_vcolls_np2 150 2 "${SRING[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_vcolls
    run sring_vcolls_np3 150 3 "${SRING[@]}" --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_vcolls quick
    run sring_colls_np2 240 2 "${SRING[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls quick
    run sring_colls_np4 240 4 "${SRING[@]}" --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
    run sring_nb_np2 200 2 "${SRING[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb
    if [ -x .osu/configure ]; then
        [ -x .osu/c/mpi/collective/non_blocking/osu_iscatter ] && [ -x .osu/c/mpi/collective/blocking/osu_scatterv ] ||
            osu_build blocking non_blocking
        O=.osu/c/mpi/collective
        runner_start "$out/scatter_rs.txt"
        for b in blocking/osu_scatter blocking/osu_scatterv non_blocking/osu_iscatter; do
            for a in ${SRS_ALGS:-ring reduce_scatter auto}; do
                echo "## $(basename $b) -d cuda, coll_gpu_scatter_algorithm $a" >> "$out/scatter_rs.txt"
                timeout -k 5 120 "${R[@]}" -np ${SRS_NP:-2} --mca coll_gpu_scatter_algorithm $a $O/$b -d cuda \
                    -m 1:${SRS_MAX:-1048576} -i ${SRS_I:-200} >> "$out/scatter_rs.txt" 2>&1
            done
        done
        runner_stop
        awk '/^## /{c=$2" "$NF} /^[0-9]/ && ($1==8 || $1==65536 || $1==1048576){printf "%s %s B: %s us\n", c, $1, $2}' "$out/scatter_rs.txt"
    else
        echo "scatter_rs: no .osu tree carried"
    fi
fi
if has nb_busy; then # a post right behind long GPU work of the application: the caller's CPU taken
    # by the non-blocking worker (bench/nb_busy_probe.c); OSU_MPS=1: 2 ranks on one GPU under MPS
    mpicc -O2 -I/usr/local/cuda/include bench/nb_busy_probe.c -L/usr/local/cuda/lib64 -lcudart \
        -o bench/nb_busy_probe || echo "nb_busy: build failed"
    runner_start "$out/nb_busy.txt"
    for bind in default none; do
        B=(); [ "$bind" = none ] && B=(--bind-to none)
        echo "## binding $bind" >> "$out/nb_busy.txt"
        timeout -k 5 60 "${R[@]}" -np 2 "${B[@]}" bench/nb_busy_probe ${BUSY_MIB:-4096} 200 >> "$out/nb_busy.txt" 2>&1
    done
    runner_stop
    grep -E "^##|^rank" "$out/nb_busy.txt"
fi
if has scan; then # MPI_Scan/Exscan/Iscan on the engine: every datatype through the allgather and
    # the host fold in rounds (3 ranks x 4 KiB of scratch), and through the chain, at 3
    # ranks (the default runs of test_cuda_types take the oneshot calls up to 64 KiB); then
    # bench/bench_scan with auto (oneshot up to 64 KiB, the chain above),
    # allgather, and the previous module's on host copies (fallback) one after the other;
    # OSU_MPS=1: 2 ranks on one GPU under MPS
    run types_scan_rounds_np3 240 3 --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_gather_scratch_bytes 12288 \
        --mca coll_gpu_scan_algorithm allgather test/gpu/test_cuda_types
    # ... and every scan (and every other call) on the chains instead of oneshot calls
    run types_scan_chain_np3 240 3 --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_cuda_small_bytes 0 \
        test/gpu/test_cuda_types
    mpicc -O2 -I/usr/local/cuda/include bench/bench_scan.c -L/usr/local/cuda/lib64 -lcudart \
        -o bench/bench_scan || echo "scan: build failed"
    runner_start "$out/scan.txt"
    for alg in auto allgather fallback; do
        echo "## coll_gpu_scan_algorithm $alg" >> "$out/scan.txt"
        timeout -k 5 150 "${R[@]}" -np ${SCAN_NP:-2} --mca coll_gpu_scan_algorithm $alg \
            bench/bench_scan ${SCAN_MAX:-67108864} >> "$out/scan.txt" 2>&1 || echo "bench_scan $alg: rc $?"
    done
    runner_stop
    grep -v "^\[" "$out/scan.txt"
fi
if has ce_ar; then # the 2-rank copy-engine allreduce forced on every size (checked against the host), then measured
    CEA=(--mca coll_gpu_cuda_ce_allreduce_min_bytes 1)
    run ce_ar_np2 200 2 "${CEA[@]}" --mca coll_gpu_cuda_timeout 10 --mca coll_gpu_verbose 100 test/gpu/test_cuda_allreduce quick
    echo "copy-engine allreduces in ce_ar_np2: $(grep -c 'cuda: copy-engine allreduce' "$out/ce_ar_np2.log")"
    run ce_ar_colls_np2 200 2 "${CEA[@]}" --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls quick
    gzip -f "$out/ce_ar_np2.log"
    for v in ${CE_AR_VARIANTS:-0 1048576}; do
        echo "## coll_gpu_cuda_ce_allreduce_min_bytes $v" >> "$out/ce_ar.txt"
        timeout -k 5 150 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_ce_allreduce_min_bytes "$v" \
            bench/bench_colls ${CE_AR_COLLS:-allreduce} ${CE_AR_MAX:-1073741824} ${CE_AR_MIN:-1048576} >> "$out/ce_ar.txt" 2>&1
    done
    awk '/^##/{v=$3} /^# /{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s/%s", $1, $3, $5}' "$out/ce_ar.txt"; echo
fi
if has order; then # default-stream ordering in each mode, and the negative control
    # auto is event (session 17); `stream` is left out: a blocking stream is not ordered
    # after the test's own blocking stream, which this test fills on
    run order_auto_np4 120 4 --mca coll_gpu_cuda_stream_order auto test/gpu/test_cuda_colls order
    # one rank per GPU (on 2 GPUs): every call resident (its report at verbose 10)
    run order_auto_np2 120 2 --mca coll_gpu_verbose 10 test/gpu/test_cuda_colls order
    grep -h "resident oneshot:" "$out/order_auto_np2.log" | sed 's/.*coll.gpu: //'
    timeout -k 5 120 "${MPIRUN[@]}" -np 4 --mca coll_gpu_cuda_stream_order none test/gpu/test_cuda_colls order \
        > "$out/order_none_np4.log" 2>&1
    echo "negative control (stream_order none, np 4): rc=$? $(grep -h 'rounds wrong' "$out/order_none_np4.log" | tr '\n' ' ')"
fi
if has hog; then # a kernel that needs every multiprocessor, on the default stream, just ahead
    # of a (gated) resident call: no block of it may wait for ours; the negative control keeps
    # the resident kernel (and its gate) far past the kernel's 300 ms patience
    run hog_np2 60 2 test/gpu/test_cuda_colls hog 1000
    grep -h "whole-device" "$out/hog_np2.log"
    run hog_nogate_np2 60 2 --mca coll_gpu_cuda_resident_gate 0 test/gpu/test_cuda_colls hog 1000
    grep -h "whole-device" "$out/hog_nogate_np2.log"
    control hog_idle5s_np2 90 2 --mca coll_gpu_cuda_resident_idle_us 5000000 test/gpu/test_cuda_colls hog 300
    grep -h "whole-device\|rounds failed" "$out/hog_idle5s_np2.log" | head -4
fi
if has chmin; then # channel minimum per piece: small and middle sizes of the ring and chain
    for v in ${CHMIN_VARIANTS:-131072 65536 32768 16384 8192}; do
        echo "## channel_min_bytes $v" >> "$out/chmin.txt"
        timeout -k 5 90 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_channel_min_bytes "$v" \
            bench/bench_colls ${CHMIN_COLLS:-allgather,reduce_scatter,bcast,reduce,allreduce} ${CHMIN_MAX:-8388608} ${CHMIN_MIN:-16384} >> "$out/chmin.txt" 2>&1
    done
    awk '/^##/{v=$3} /^# /{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s/%s", $1, $2, $4}' "$out/chmin.txt"; echo
fi
if has lat; then # small-message latency: stream ordering and the completion wait, each way
    for v in ${LAT_VARIANTS:-stream,-1 event,-1 none,-1}; do
        IFS=, read -r o p <<< "$v"
        echo "## stream_order $o wait_polls $p" >> "$out/lat.txt"
        timeout -k 5 60 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_stream_order "$o" --mca coll_gpu_cuda_wait_polls "$p" \
            bench/bench_colls ${LAT_COLLS:-allreduce,allgather,reduce_scatter,bcast} ${LAT_MAX:-64} 8 >> "$out/lat.txt" 2>&1
    done
    # one line per variant and collective: ours/NCCL us at each size
    awk '/^##/{v=$3"/"$5} /^# /{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s/%s", $1, $2, $4}' "$out/lat.txt"; echo
fi
if has osu_gap; then # back to back against OSU's pattern (each call alone between two MPI_Barriers), alternating
    runner_start "$out/osu_gap.txt"
    for m in 0 1 0 1; do
        echo "## CGPU_BENCH_OSU $m" >> "$out/osu_gap.txt"
        CGPU_BENCH_OSU=$m timeout -k 5 60 "${R[@]}" -np 2 -x CGPU_BENCH_OSU ${GAP_MCA:-} \
            bench/bench_colls ${GAP_COLLS:-allreduce,allreduce_char,alltoall} ${GAP_MAX:-65536} 8 >> "$out/osu_gap.txt" 2>&1
    done
    runner_stop
    awk '/^## CGPU/{v=$3} /^# /{c=$2; printf "\nosu %s %s:", v, c} /^ +[0-9]/{printf " %s:%s", $1, $2}' "$out/osu_gap.txt"; echo
fi
if has ab; then # A/B: this tree ("new") against it with AB_PATCH reversed ("old"), calls alternating
    # in one session (AB_MPS=1: 2 ranks on one GPU under MPS); back to back and OSU's pattern
    # the old build in a copy of the tree: a run cut short leaves this tree's sources and
    # objects as they were (patched in place, a later build here mixed old and new objects)
    ab=/tmp/cgpu_ab; rm -rf "$ab"; mkdir -p "$ab/new" "$ab/old"
    cp .libs/mca_coll_gpu.so "$ab/new/"
    patch_file=$(realpath "$AB_PATCH")
    if cp -a . "$ab/src" && ( cd "$ab/src" && patch -R -p1 < "$patch_file" && make -j16 ) > "$out/ab_build.log" 2>&1; then
        cp "$ab/src/.libs/mca_coll_gpu.so" "$ab/old/"
    else
        tail -20 "$out/ab_build.log"; echo "ab: the old build failed"
    fi
    X=()
    if [ "${AB_MPS:-1}" = 1 ] && mps_start; then X=(-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY); echo "## under MPS, 2 ranks on one GPU" >> "$out/ab.txt"; fi
    for round in 1 2; do
        for v in old new; do
            for m in 0 1; do
                echo "## $v CGPU_BENCH_OSU $m round $round" >> "$out/ab.txt"
                CGPU_BENCH_OSU=$m timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe --mca mca_base_component_path "$ab/$v:$pkglib" \
                    --mca coll gpu,tuned,libnbc,basic,self ${CGPU_MPIRUN_EXTRA:-} "${X[@]}" -np 2 -x CGPU_BENCH_OSU \
                    ${AB_MCA:-} bench/bench_colls ${AB_COLLS:-allreduce,alltoall,allgather} ${AB_MAX:-65536} 8 >> "$out/ab.txt" 2>&1
            done
        done
    done
    if [ "${AB_MPS:-1}" = 1 ] && [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then mps_stop; fi
    awk '/^## (old|new)/{v=$2" osu"$4} /^# /{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s", $1, $2}' "$out/ab.txt"; echo
fi
if has abso; then # A/B of builds made elsewhere and carried (ABSO="name=dir.tgz ..." each a gzipped
    # tar of one mca_coll_gpu.so; "name=." this tree's own .libs), alternating in one session, one
    # rank per GPU: bench_colls in OSU's pattern (the stall columns) and back to back, then OSU
    # -d cuda up to 64 KiB (ABSO_OSU=0: none); ABSO_EXTRA: more mpirun arguments for every run
    # (a build given twice runs twice: "a=x.tgz b=x.tgz%..." compares settings)
    # a build may carry its own mpirun arguments after a %, % for each space:
    # "ll64=.%--mca%coll_gpu_cuda_ll_bytes%65536"
    abd=/tmp/cgpu_abso; rm -rf "$abd"; names=(); declare -A vargs=()
    for v in ${ABSO:-}; do
        nm=${v%%=*}; src=${v#*=}; names+=("$nm")
        case "$src" in *%*) vargs[$nm]=${src#*%}; vargs[$nm]=${vargs[$nm]//%/ }; src=${src%%%*} ;; esac
        plugin_into "$abd/$nm" "$src"
    done
    if [ "${ABSO_OSU:-1}" = 1 ] && [ -x .osu/configure ] && [ ! -x .osu/c/mpi/collective/blocking/osu_allreduce ]; then
        osu_build blocking
    fi
    for round in $(seq "${ABSO_ROUNDS:-2}"); do
        for nm in "${names[@]}"; do
            A=(mpirun --allow-run-as-root --oversubscribe --mca mca_base_component_path "$abd/$nm:$pkglib"
               --mca coll gpu,tuned,libnbc,basic,self ${CGPU_MPIRUN_EXTRA:-} ${ABSO_EXTRA:-} ${vargs[$nm]:-})
            for m in 1 0; do
                echo "## $nm osu$m round $round" >> "$out/abso.txt"
                CGPU_BENCH_OSU=$m timeout -k 5 90 "${A[@]}" -np 2 -x CGPU_BENCH_OSU bench/bench_colls \
                    ${ABSO_COLLS:-allreduce,allreduce_char,alltoall,allgather,reduce_scatter,bcast,reduce} ${ABSO_MAX:-65536} 8 >> "$out/abso.txt" 2>&1
            done
            [ "${ABSO_OSU:-1}" = 1 ] || continue
            for b in osu_allreduce osu_allgather osu_alltoall osu_reduce_scatter_block osu_bcast osu_reduce; do
                [ -x .osu/c/mpi/collective/blocking/$b ] || continue
                echo "## $nm $b round $round" >> "$out/abso_osu.txt"
                timeout -k 5 60 "${A[@]}" -np 2 .osu/c/mpi/collective/blocking/$b -d cuda -m 1:65536 >> "$out/abso_osu.txt" 2>&1
            done
        done
    done
    # per build and run: the slowest size up to ABSO_MAX and the sizes over 10 us
    awk '/^## /{v=$2" "$3" r"$5} /^# [a-z]/{c=$2} /^ +[0-9]/{k=v; if ($2>mx[k]) {mx[k]=$2; at[k]=c" "$1} if ($2>10) over[k]++; n[k]++; s[k]+=$2; if (NF>=13) {st[k]+=$10; sn[k]+=$13}}
        END{for (k in mx) printf "abso %s: mean %.2f us, slowest %.2f (%s), %d of %d sizes over 10 us; calls over 50 us: %d (NCCL %d)\n", k, s[k]/n[k], mx[k], at[k], over[k], n[k], st[k], sn[k]}' "$out/abso.txt" | sort
    [ -f "$out/abso_osu.txt" ] && awk '/^## /{v=$2" osu r"$5; c=$3} /^[0-9]/{k=v; if ($2>mx[k]) {mx[k]=$2; at[k]=c" "$1} if ($2>10) over[k]++; n[k]++; s[k]+=$2}
        END{for (k in mx) printf "abso %s: mean %.2f us, slowest %.2f (%s), %d of %d sizes over 10 us\n", k, s[k]/n[k], mx[k], at[k], over[k], n[k]}' "$out/abso_osu.txt" | sort
fi
if has nb_rep; then # test_cuda_nb at np 2, NB_REP times per setting (session 35: 5 of 21 default runs
    # timed out in its twelve crossed dups, a ring waiting for a peer; NB_REP_VARIANTS names
    # settings: default, nocluster (coll_gpu_cuda_resident_cluster 0), cluster2 (2: always a
    # cluster, session 35's rule), maxk16 (16 resident kernels), spare33, noidle); each line adds the resident kernels'
    # launches and those as a cluster over the runs (verbose 10 reports)
    for v in ${NB_REP_VARIANTS:-default nocluster spare33}; do
        case $v in
            nocluster) X=(--mca coll_gpu_cuda_resident_cluster 0) ;;
            cluster2) X=(--mca coll_gpu_cuda_resident_cluster 2) ;;
            maxk16) X=(--mca coll_gpu_cuda_resident_max_kernels 16) ;; # a resident kernel each dup
            spare33) X=(--mca coll_gpu_cuda_block_spare 33) ;;
            noidle) X=(--mca coll_gpu_cuda_resident_idle_us 100000) ;;
            *) X=() ;;
        esac
        f=0
        for i in $(seq "${NB_REP:-16}"); do
            rc=0
            timeout -k 5 40 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_timeout 5 --mca coll_gpu_verbose 10 "${X[@]}" \
                test/gpu/test_cuda_nb > "$out/nb_rep_${v}_$i.log" 2>&1 || rc=$?
            grep -o "[0-9]* kernel launches ([0-9]* as a cluster)" "$out/nb_rep_${v}_$i.log" |
                tr -d '(' >> "$out/nb_rep_${v}_launches.txt"
            # the most calls any report of the run saw held back for a cluster to run
            grep -o "[0-9]* calls so far waited for a resident cluster" "$out/nb_rep_${v}_$i.log" |
                sort -n | tail -1 | cut -d' ' -f1 >> "$out/nb_rep_${v}_held.txt"
            if [ "$rc" = 0 ]; then rm -f "$out/nb_rep_${v}_$i.log"; else f=$((f+1)); fi
        done
        echo "nb_rep $v: $f of ${NB_REP:-16} failed; resident launches, as a cluster:" \
            "$(awk '{l+=$1; c+=$4} END {print l+0, c+0}' "$out/nb_rep_${v}_launches.txt" 2>/dev/null);" \
            "calls held for a cluster (a rank's most per run, summed): $(awk '{h+=$1} END {print h+0}' "$out/nb_rep_${v}_held.txt" 2>/dev/null)"
    done
fi
if has rktrace; then # where a resident call's time goes, per collective and size (verbose 10: the
    # kernel's trace and its launches, reported at the communicator's end), in OSU's pattern.
    # RKT_VARIANTS="name=args ..." compares settings in one job: each variant's runs in turn
    # (RKT_ROUNDS times), args its mpirun arguments with % for each space (a bare name: none),
    # a "#### name" line before each, then bench/rktrace_cmp.py's table of the device phases
    # (session 37: the phases vary about 0.2 us from job to job, the host's latency about 1 us)
    # a variant's args may start with @build.tgz: a carried plugin (a gzipped tar of one
    # mca_coll_gpu.so, as abso takes) instead of this tree's, e.g. "old=@.carry/base.tgz"
    rkt_one() { # the runs of one variant: [@build.tgz] extra mpirun arguments
        local M=("${MPIRUN[@]}")
        if [ -n "${1:-}" ] && [ "${1#@}" != "$1" ]; then
            local d="/tmp/cgpu_rkt/$nm" here="$PWD/.libs:"
            plugin_into "$d" "${1#@}" || return
            M=("${M[@]/"$here"/"$d:"}"); shift
        fi
        for sz in ${RKT_SIZES:-8 65536}; do
            for c in ${RKT_COLLS:-allreduce alltoall allgather}; do
                echo "## $c $sz" >> "$out/rktrace.txt"
                CGPU_BENCH_OSU=1 timeout -k 5 60 "${M[@]}" -np 2 -x CGPU_BENCH_OSU --mca coll_gpu_verbose 10 \
                    "$@" bench/bench_colls "$c" "$sz" "$sz" 2>&1 | grep -E "resident oneshot|^ +[0-9]" >> "$out/rktrace.txt"
            done
        done
    }
    if [ -z "${RKT_VARIANTS:-}" ]; then
        rkt_one
        grep -E "^##|on the device|^ +[0-9]" "$out/rktrace.txt" | sed 's/.*resident oneshot on the device, //'
    else
        for round in $(seq "${RKT_ROUNDS:-2}"); do
            for v in $RKT_VARIANTS; do
                nm=${v%%=*}; va=(); case "$v" in *=*) a=${v#*=}; read -r -a va <<< "${a//%/ }" ;; esac
                echo "#### $nm" >> "$out/rktrace.txt"
                rkt_one "${va[@]}"
            done
        done
        python3 bench/rktrace_cmp.py "$out/rktrace.txt" | tee "$out/rktrace_cmp.txt"
    fi
fi
if has goals; then # issue 13's latency and bandwidth goals in one run (2x H200, one rank per GPU):
    # bench_colls back to back and in OSU's pattern (ours and NCCL), OSU 7.4 -d cuda up to 64 KiB,
    # the 512 MiB allreduce; then one line per goal
    G=(allreduce,allreduce_char,alltoall,allgather,reduce_scatter,bcast,reduce 65536 8)
    for m in 0 1; do
        CGPU_BENCH_OSU=$m timeout -k 5 120 "${MPIRUN[@]}" -np 2 -x CGPU_BENCH_OSU ${GOALS_MCA:-} bench/bench_colls "${G[@]}" > "$out/goals_bench_osu$m.txt" 2>&1
    done
    timeout -k 5 120 "${MPIRUN[@]}" -np 2 ${GOALS_MCA:-} bench/bench_colls allreduce 536870912 536870912 > "$out/goals_512m.txt" 2>&1
    if [ -x .osu/configure ] && [ ! -x .osu/c/mpi/collective/blocking/osu_allreduce ]; then
        osu_build blocking
    fi
    for b in osu_allreduce osu_reduce osu_bcast osu_allgather osu_alltoall osu_reduce_scatter_block; do
        [ -x .osu/c/mpi/collective/blocking/$b ] || continue
        echo "## $b" >> "$out/goals_osu.txt"
        timeout -k 5 90 "${MPIRUN[@]}" -np 2 ${GOALS_MCA:-} .osu/c/mpi/collective/blocking/$b -d cuda -m 1:65536 >> "$out/goals_osu.txt" 2>&1
    done
    # bench rows: bytes ours_us ours_busbw nccl_us ...; OSU rows: bytes us
    for f in goals_bench_osu0 goals_bench_osu1; do
        awk -v f="$f" '/^# [a-z]/{c=$2} /^ +[0-9]/{if ($1==8 && c=="allreduce") a8=$2; if ($2>mx) {mx=$2; mc=c" "$1} if ($4>nx) nx=$4}
            END{printf "%s: 8 B allreduce %.2f us (goal <= 8); slowest up to 64 KiB %.2f us (%s B, goal <= 10); NCCL up to %.2f\n", f, a8, mx, mc, nx}' "$out/$f.txt"
    done
    # a rank's median call, back to back and in OSU's pattern (the means above count every
    # stalled call)
    for f in goals_bench_osu0 goals_bench_osu1; do
        awk -v f="$f" '/^# [a-z]/{c=$2} /^ +[0-9]/ && split($9, m, "/") == 2 {if ($1==8 && c=="allreduce") a8=m[1]; if (m[1]>mx) {mx=m[1]; mc=c" "$1}}
            END{if (mc != "") printf "%s medians: 8 B allreduce %.2f us; slowest up to 64 KiB %.2f us (%s B)\n", f, a8, mx, mc}' "$out/$f.txt"
    done
    awk '/^## /{c=$2} /^[0-9]/{if ($1==8 && c=="osu_allreduce") a8=$2; if ($1<=65536 && $2>mx) {mx=$2; mc=c" "$1}}
        END{printf "OSU -d cuda: 8 B osu_allreduce %.2f us (goal <= 8); slowest up to 64 KiB %.2f us (%s B, goal <= 10)\n", a8, mx, mc}' "$out/goals_osu.txt"
    awk '/^ +[0-9]/{printf "allreduce 512 MiB: busbw %.2f GB/s (goal >= 360), NCCL %.2f\n", $3, $5}' "$out/goals_512m.txt"
    # the goals are set on 2x H200; the device tool may lend H100s for the same kind
    echo "goals measured on: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
fi
if has osu_long; then # OSU's six blocking programs (OSU_LONG_PROGS) -d cuda to 64 KiB (OSU_LONG_SIZES)
    # with OSU_LONG_ITERS calls a size
    # (default 20000; OSU's own 1000 up to 8 KiB and 100 above let one stalled call of 1 ms
    # lift a size's mean by 1-10 us): the mean over many calls, stalls included
    if [ -x .osu/configure ] && [ ! -x .osu/c/mpi/collective/blocking/osu_allreduce ]; then
        osu_build blocking
    fi
    for b in ${OSU_LONG_PROGS:-osu_allreduce osu_reduce osu_bcast osu_allgather osu_alltoall osu_reduce_scatter_block}; do
        [ -x .osu/c/mpi/collective/blocking/$b ] || continue
        echo "## $b" >> "$out/osu_long.txt"
        timeout -k 5 90 "${MPIRUN[@]}" -np 2 ${GOALS_MCA:-} .osu/c/mpi/collective/blocking/$b -d cuda -m "${OSU_LONG_SIZES:-1:65536}" \
            -i "${OSU_LONG_ITERS:-20000}" -x 200 >> "$out/osu_long.txt" 2>&1
    done
    awk -v it="${OSU_LONG_ITERS:-20000}" '/^## /{c=$2} /^[0-9]/{if ($1==8 && c=="osu_allreduce") a8=$2; if ($1<=65536 && $2>mx) {mx=$2; mc=c" "$1}; n++}
        END{printf "OSU -d cuda, %d calls a size: 8 B osu_allreduce %.2f us; slowest up to 64 KiB %.2f us (%s B); %d rows\n", it, a8, mx, mc, n}' "$out/osu_long.txt"
    awk '/^## /{c=$2; printf "\n%s:", c} /^[0-9]/{printf " %s:%s", $1, $2} END{print ""}' "$out/osu_long.txt"
fi
if has noise; then # where the stalls come from: every CPU spun alone (a quiet machine), then the
    # goals' OSU-pattern bench with a stall log while probe threads spin on CPUs the ranks
    # are not bound to (bench/noise_probe.c, bench/stall_corr.py)
    gcc -O2 -std=gnu11 -pthread bench/noise_probe.c -o bench/noise_probe || echo "noise_probe: build failed"
    ncpu=$(nproc)
    { lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|Model name|Hypervisor)"; } > "$out/noise.txt" 2>&1
    cat /proc/interrupts /proc/softirqs > "$out/irq_before0.txt" 2>/dev/null
    bench/noise_probe "${NOISE_QUIET_S:-10}" 5 all >> "$out/noise.txt" 2>&1
    cat /proc/interrupts /proc/softirqs > "$out/irq_after0.txt" 2>/dev/null
    echo "## interrupts while the quiet probe ran (CPUs 0-3)"
    python3 bench/irq_diff.py "$out/irq_before0.txt" "$out/irq_after0.txt" 0,1,2,3 | tee -a "$out/noise.txt" | head -10
    rm -f "$out/irq_before0.txt" "$out/irq_after0.txt"
    # the probe's CPUs: the last NOISE_NPROBE (default 4) that share no core with CPUs 0-3
    # (where Open MPI binds the two ranks)
    near=$(cat /sys/devices/system/cpu/cpu[0-3]/topology/thread_siblings_list 2>/dev/null | tr ',' '\n' |
        awk -F- '{for (c = $1; c <= ($2 == "" ? $1 : $2); ++c) print c}' | sort -un | paste -sd' ')
    pc=$(for c in $(seq $((ncpu - 1)) -1 4); do case " $near " in *" $c "*) ;; *) echo "$c" ;; esac; done |
        head -"${NOISE_NPROBE:-4}" | paste -sd,)
    for j in $(seq 1 "${NOISE_JOBS:-1}"); do
        bench/noise_probe 300 5 "$pc" "$out/noise_gaps$j.log" > "$out/noise_during$j.txt" 2>&1 &
        np=$!
        sleep 1
        cat /proc/interrupts /proc/softirqs > "$out/irq_before$j.txt" 2>/dev/null
        # each thread's wakeups while the bench runs, second by second
        bash bench/thread_wakeups.sh bench_colls 1 8 > "$out/wakeups$j.txt" 2>&1 &
        CGPU_BENCH_OSU=1 CGPU_BENCH_STALL_LOG="$out/stalls$j" timeout -k 5 120 "${MPIRUN[@]}" -np 2 --report-bindings \
            -x CGPU_BENCH_OSU -x CGPU_BENCH_STALL_LOG ${GOALS_MCA:-} bench/bench_colls \
            ${NOISE_COLLS:-allreduce,allreduce_char,alltoall,allgather,reduce_scatter,bcast,reduce} 65536 8 > "$out/noise_bench$j.txt" 2>&1
        cat /proc/interrupts /proc/softirqs > "$out/irq_after$j.txt" 2>/dev/null
        kill -TERM "$np"; wait "$np"
        wait; cat "$out/wakeups$j.txt" >> "$out/noise.txt"
        awk '/^#/{w=$0; k=0} !/^#/ && k++ < 6 {print w " | " $0}' "$out/wakeups$j.txt" | head -48
        # the interrupts the ranks' CPUs (0, 1) and the probe's took meanwhile
        python3 bench/irq_diff.py "$out/irq_before$j.txt" "$out/irq_after$j.txt" "0,1,$pc" > "$out/irq$j.txt"
        head -14 "$out/irq$j.txt"; cat "$out/irq$j.txt" >> "$out/noise.txt"; rm -f "$out/irq_before$j.txt" "$out/irq_after$j.txt"
        echo "## noise job $j: probe CPUs $pc; $(grep -o "MCW rank [0-9] bound to [^:]*: \[[^]]*\]" "$out/noise_bench$j.txt" | head -2 | paste -sd' ')"
        python3 bench/stall_corr.py "$out/noise_gaps$j.log" "$out"/stalls$j.* | tee -a "$out/noise.txt"
        cat "$out/noise_during$j.txt" >> "$out/noise.txt"
        awk '/^# [a-z]/{c=$2} /^ +[0-9]/ && split($9, m, "/") == 2 {if (m[1]>mx) {mx=m[1]; mc=c" "$1}; if ($2>mm) {mm=$2; mmc=c" "$1}}
            END{printf "noise job bench (OSU pattern): slowest mean %.2f us (%s), slowest median %.2f us (%s)\n", mm, mmc, mx, mc}' "$out/noise_bench$j.txt"
    done
    # the threads of a plain OSU job (no NCCL in the process): osu_allreduce -d cuda to 64 KiB
    osu=.osu/c/mpi/collective/blocking/osu_allreduce
    if [ -x .osu/configure ] && [ ! -x "$osu" ]; then
        osu_build blocking
    fi
    if [ -x "$osu" ]; then
        bash bench/thread_wakeups.sh osu_allreduce 1 6 > "$out/wakeups_osu.txt" 2>&1 &
        cat /proc/interrupts /proc/softirqs > "$out/irq_before_osu.txt" 2>/dev/null
        timeout -k 5 90 "${MPIRUN[@]}" -np 2 ${GOALS_MCA:-} "$osu" -d cuda -m 1:65536 -i 20000 -x 200 > "$out/noise_osu.txt" 2>&1
        cat /proc/interrupts /proc/softirqs > "$out/irq_after_osu.txt" 2>/dev/null
        wait
        echo "## osu_allreduce -d cuda -i 20000 (no NCCL in the process): interrupts on CPUs 0, 1"
        python3 bench/irq_diff.py "$out/irq_before_osu.txt" "$out/irq_after_osu.txt" 0,1 | tee -a "$out/noise.txt" | head -10
        rm -f "$out/irq_before_osu.txt" "$out/irq_after_osu.txt"
        cat "$out/wakeups_osu.txt" >> "$out/noise.txt"
        awk '/^#/{w=$0; k=0} !/^#/ && k++ < 8 {print w " | " $0}' "$out/wakeups_osu.txt" | head -48
        grep -E "^[0-9]" "$out/noise_osu.txt" | awk '{printf "%s:%s ", $1, $2} END{print ""}'
    fi
    # each probe's CPUs (the quiet one: CPUs 0-3 and the mean of all)
    awk '/^# noise_probe/{h=$0; k++} /^ +[0-9]+ +(yes|NO)/{
            if (k == 1) {n++; for (i = 3; i <= 7; ++i) s[i] += $i}
            if (k > 1 || $1 < 4) printf "%s | cpu %s: %s <20us, %s 20-50, %s 50-200, %s 200-1000, %s >1ms, longest %s us, steal %s ms\n", h, $1, $3, $4, $5, $6, $7, $8, $10}
        END{if (n) printf "quiet probe, mean of %d CPUs: %.0f <20us, %.0f 20-50, %.0f 50-200, %.0f 200-1000, %.1f >1ms\n", n, s[3]/n, s[4]/n, s[5]/n, s[6]/n, s[7]/n}' "$out/noise.txt"
fi
if has shared; then # ranks sharing a GPU, default settings: without MPS the engine's host backend
    # (device buffers staged through host copies, every result checked), under MPS our kernels;
    # then the latency each way
    KEEP=("${MPIRUN[@]}"); MPIRUN=("${MPIRUN_BASE[@]}")
    run shared_colls_np2 200 2 --mca coll_gpu_verbose 100 test/gpu/test_cuda_colls shared
    echo "shared_colls_np2 (no MPS): $(grep -c 'share a GPU and not all are MPS' "$out/shared_colls_np2.log") notices, kernel calls $(grep -c 'cuda: \(ring mode\|resident\|oneshot\|alltoall rank\)' "$out/shared_colls_np2.log")"
    run shared_colls_np4 240 4 test/gpu/test_cuda_colls shared
    run shared_nb_np2 150 2 test/gpu/test_cuda_nb
    run shared_nb_threads_np2 150 2 test/gpu/test_cuda_nb threads
    run shared_types_np2 150 2 test/gpu/test_cuda_types
    for v in 0 1; do
        echo "## no MPS, coll_gpu_cuda_time_sliced $v" >> "$out/shared_lat.txt"
        timeout -k 5 120 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_time_sliced $v bench/bench_colls \
            ${SHARED_COLLS:-allreduce,alltoall} ${SHARED_MAX:-65536} 8 >> "$out/shared_lat.txt" 2>&1
    done
    if mps_start; then
        run shared_mps_colls_np2 200 2 --mca coll_gpu_verbose 100 -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY test/gpu/test_cuda_colls quick
        echo "shared_mps_colls_np2 (MPS): $(grep -c 'share a GPU and not all are MPS' "$out/shared_mps_colls_np2.log") notices, kernel calls $(grep -c 'cuda: \(ring mode\|resident\|oneshot\|alltoall rank\)' "$out/shared_mps_colls_np2.log")"
        gzip -f "$out/shared_mps_colls_np2.log"
        echo "## MPS, defaults" >> "$out/shared_lat.txt"
        timeout -k 5 120 "${MPS[@]}" -np 2 bench/bench_colls ${SHARED_COLLS:-allreduce,alltoall} ${SHARED_MAX:-65536} 8 >> "$out/shared_lat.txt" 2>&1
        mps_stop
    fi
    gzip -f "$out/shared_colls_np2.log"
    awk '/^##/{v=$0} /^# [a-z]/{c=$2; printf "\n%s %s:", v, c} /^ +[0-9]/{printf " %s:%s", $1, $2}' "$out/shared_lat.txt"; echo
    MPIRUN=("${KEEP[@]}")
fi
if has pending; then # threads, RAS, scale and trace on the cuda backend (with 'prof' for the profiler)
    run pend_comms_np4 150 4 --mca coll_gpu_cuda_timeout 15 test/mpi/test_comms
    run pend_ras_np4 200 4 --mca coll_gpu_cuda_timeout 15 test/mpi/test_ras
    run pend_a2a_scale_np4 60 4 test/mpi/test_a2a_scale
    run pend_colls_np4 200 4 --mca coll_gpu_cuda_timeout 15 test/gpu/test_cuda_colls
    tdir=$out/traces; mkdir -p "$tdir"
    CGPU_TRACE_DIR=$tdir run pend_trace_gpu 60 2 -x CGPU_TRACE_DIR --mca coll_gpu_profiler "$PWD/.libs/libcgpu_prof_trace.so" examples/demo_gpu
    python3 test/prof/check_trace.py "$tdir"/cgpu-trace-*.json 2>&1 | tail -3
    grep -h "kernel" "$tdir"/cgpu-trace-*.json | head -2 | cut -c1-200
    timeout -k 5 120 "${MPIRUN[@]}" -np 2 bench/bench_ras_poll device 2>&1 | tee "$out/ras_poll_device.txt"
fi
if has suite_cuda; then # the whole MPI suite (host buffers) on the cuda backend, 2 and 4 ranks
    CGPU_TEST_BACKEND=auto CGPU_TEST_NPS="${SUITE_NPS:-2 4}" CGPU_TEST_LOGDIR="$out/suite_cuda" \
        CGPU_TEST_TIMEOUT=120 bash test/run_all.sh > "$out/suite_cuda.txt" 2>&1
    grep -E "^(PASS|FAIL|SKIP)|passed" "$out/suite_cuda.txt" | grep -v "^PASS" | tail -30
    timeout -k 5 120 "${MPIRUN[@]}" -np 2 bench/bench_ras_poll device 2>&1 | tee "$out/ras_poll_device.txt"
fi
if has sanitize; then
    run sanitize 300 2 compute-sanitizer --tool memcheck --print-limit 20 test/gpu/test_cuda_allreduce quick
    grep -E "ERROR SUMMARY" "$out/sanitize.log" | head -3
fi
echo "gpu machine: $pass passed, $fail failed"
if has bench; then
    timeout -k 5 400 "${MPIRUN[@]}" -np 2 bench/bench_colls ${BENCH_COLLS:-all} ${BENCH_MAX:-2147483648} 2>&1 | tee "$out/bench_colls.txt"
fi
if has bench_tree; then # the tree (forced) against NCCL, 2 ranks, up to 256 MB
    timeout -k 5 120 "${MPIRUN[@]}" -np 2 --mca coll_gpu_allreduce_algorithm tree \
        bench/bench_colls allreduce 268435456 2>&1 | tee "$out/bench_tree.txt"
fi
if has variants; then # tuning sweep: ring parameters at 1 MiB and above
    IFS=, read -r -a variants <<< "${VARIANTS:-32 512 524288,48 512 524288,64 512 262144,32 512 1048576,32 768 524288}"
    for v in "${variants[@]}"; do
        set -- $v
        echo "## channels $1 threads $2 slot $3"
        timeout -k 5 120 "${MPIRUN[@]}" -np 2 --mca coll_gpu_cuda_channels "$1" --mca coll_gpu_cuda_threads "$2" \
            --mca coll_gpu_cuda_slot_bytes "$3" bench/bench_colls ${VARIANT_COLL:-allreduce} ${VARIANT_MAX:-2147483648} ${VARIANT_MIN:-1048576} 2>&1 | tee -a "$out/variants.txt"
    done
fi
