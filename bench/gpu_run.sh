#!/usr/bin/env bash
# bench/gpu_run.sh: build, test and measure coll/gpu on a GPU machine, in one command.
#
#   source .devkit/env.sh && bash bench/gpu_run.sh [STEP...]        (default: build test bench)
#
# Run from the repository root. .devkit/env.sh (carried, not in git) sets NCCL_HOME and the
# paths of the machine's toolkit; its libfabric is found through .devkit/root's pkg-config.
#
# Steps, in the order given:
#   build  ./autogen.sh (autoreconf), configure with CUDA (CUDA_ARCH) and NCCL ($NCCL_HOME),
#          make: the plugin, every test program, the benchmarks
#   test   the GPU test suite: the two demos, test/gpu/test_cuda_* at 1 to 5 ranks (3 and 4
#          ranks share 2 GPUs), torch/CuPy through mpi4py, the host collectives on the cuda
#          backend, mismatched calls and a rank killed mid-allreduce on device buffers; one
#          PASS/FAIL line a test, the count at the end, exit status 1 on a failure
#   bench  bench/bench_colls: our collectives and NCCL's side by side in one job (and the
#          other benchmarks named in BENCH_PROGS)
#   python mpi4py: test/python/test_mpi4py.py on CuPy, Numba and PyTorch device arrays (np 2,
#          MULTIPLE and SINGLE; a missing package skips with its reason), then
#          bench/bench_python.py at both levels and, without coll/gpu, --host-only (stock's
#          figure for the numpy column)
#   probe  where Python's microseconds go: at each level (single, multiple), bench_colls and
#          bench_python.py --colls --libs cupy (8 B-64 KiB, 2 ranks) under bench/pmpi_probe.so,
#          then bench/probe_split.py: per collective and size the C and Python figures, their
#          time inside MPI, the difference, and bench_colls' loop run from C inside the Python
#          process (bench/c_loop.so) (REPEAT rounds)
#   osu    OSU micro-benchmarks 7.4, -d cuda with their own defaults, with coll/gpu and
#          without it (Open MPI's own collectives, no NCCL anywhere); built on first use from
#          the OSU source tree carried in OSU_DIR (the GPU machine has no network)
#
# Parameters (environment variables):
#   LOG_DIR      logs, one file a run (default: $OUT if set, else ./gpu-logs)
#   MPIRUN_ARGS  more mpirun arguments for every run: MCA settings, binding
#                (e.g. "--mca coll_gpu_cuda_ll_bytes 65536 --bind-to none")
#   MPS          1: an MPS daemon started for the run and stopped at its end, every rank its
#                client (one GPU: the 2-rank rows then run our kernels, not the staging of
#                ranks time-sliced on a GPU; the tests that expect a transport know MPS)
#   VARIANTS     bench, osu: settings compared in one job, "name=ARGS" with % for each space
#                in ARGS, a bare name for none: "base ll64=--mca%coll_gpu_cuda_ll_bytes%65536"
#                (default "default": no extra arguments)
#   REPEAT       bench, osu: rounds over VARIANTS, which alternate within a round; probe: rounds;
#                test: runs of each test (default 1)
#   PROBE_ARGS   probe: more bench_python.py arguments (e.g. "--c-loop-touch 1048576")
#   PROBE_LEVELS probe: the thread levels (default "single multiple")
#   build:  CUDA_ARCH   nvcc arch flags (default "-gencode arch=compute_90,code=sm_90", H100/H200)
#           MAKE_JOBS   (default: the machine's cores)
#   test:   TEST_ONLY   an extended regex of the test names to run (default: all; the names
#                       are in the table below)
#   bench:  BENCH_NP    ranks, one per GPU for NCCL (default 2)
#           BENCH_COLLS all, or a comma-separated list of allreduce alltoall allgather
#                       reduce_scatter bcast reduce allreduce_char reduce_char iallreduce
#                       allreduce_maxloc allreduce_dint reduce_dint (default all)
#           BENCH_MIN, BENCH_MAX  bytes (default 8 and 2147483648)
#           BENCH_OSU   1: each call timed alone between two MPI_Barriers, the mean over
#                       ranks, as OSU times it; 0: back to back, the slowest rank (default 0)
#           BENCH_PROGS colls, and any of scan (bench_scan, ours and then
#                       coll_gpu_scan_algorithm=fallback), ras_poll (bench_ras_poll on device
#                       buffers), proxy (bench_proxy over tcp and shm), ceiling (bench_ceiling:
#                       the node's copy ceilings, one process on every GPU), sliced
#                       (bench_sliced_copies: which copies wait for a time slice where 2
#                       and 4 processes share GPU 0 without MPS), order (bench_order:
#                       the host's cost of ordering a call after the default stream)
#                       (default colls)
#   osu:    OSU_PROGS   programs (default: osu_allreduce osu_reduce osu_bcast osu_allgather
#                       osu_alltoall osu_reduce_scatter_block osu_iallreduce osu_ialltoall)
#           OSU_NP      ranks (default 2)
#           OSU_SIZES   OSU's -m, e.g. 1:65536 (default: OSU's own)
#           OSU_ITERS   OSU's -i, e.g. 20000 (default: OSU's own, 1000 calls a size up to
#                       8 KiB and 100 above, so one 1 ms stall moves a mean by 1-10 us)
#           OSU_BASE    1: each program also without coll/gpu (default 1); that run uses
#                       device buffers where Open MPI was built with CUDA, host buffers
#                       elsewhere (a non-CUDA-aware Open MPI cannot take device pointers)
#           OSU_DIR     the OSU 7.4 source tree (default .osu, git-ignored: unpack the
#                       release tarball there and carry it with .devkit)
#
# Examples:
#   bash bench/gpu_run.sh build test bench osu
#   BENCH_COLLS=allreduce,alltoall BENCH_MAX=65536 BENCH_OSU=1 REPEAT=3 bash bench/gpu_run.sh bench
#   VARIANTS="base ll64=--mca%coll_gpu_cuda_ll_bytes%65536" OSU_SIZES=1:65536 \
#       OSU_ITERS=20000 REPEAT=2 bash bench/gpu_run.sh osu
#   MPS=1 TEST_ONLY='(_np[12]$|demo|^host_|settle)' bash bench/gpu_run.sh build test probe
set -uo pipefail

log=${LOG_DIR:-${OUT:-$PWD/gpu-logs}}
mkdir -p "$log"
steps=${*:-build test bench}
pkglib=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
read -r -a extra <<< "${MPIRUN_ARGS:-}"
# MPS=1: an MPS daemon for this run, its pipe directory passed to every rank, stopped at the end
if [ "${MPS:-0}" = 1 ]; then
    export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/cgpu-mps}
    export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/cgpu-mps-log}
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT
    extra+=(-x CUDA_MPS_PIPE_DIRECTORY)
fi
# every run loads this tree's plugin; the previous coll modules serve what we decline
# shellcheck disable=SC2054 # the commas are in an MCA value
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca mca_base_component_path "$PWD/.libs:$pkglib"
        --mca coll gpu,tuned,libnbc,basic,self "${extra[@]}")
pass=0
fail=0

has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
for s in $steps; do
    case $s in build | test | bench | python | probe | osu) ;; *) echo "gpu_run.sh: unknown step '$s' (build test bench python probe osu)"; exit 2 ;; esac
done

# what ran, where: the header every result file quotes
{
    echo "date: $(date -u +%FT%TZ)"
    if git rev-parse --short HEAD > /dev/null 2>&1; then
        echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (+ local changes)')"
    else
        echo "commit: unknown (no git here)"
    fi
    echo "command: $(for v in LOG_DIR MPIRUN_ARGS MPS VARIANTS REPEAT CUDA_ARCH TEST_ONLY BENCH_NP BENCH_COLLS BENCH_MIN \
        BENCH_MAX BENCH_OSU BENCH_PROGS OSU_PROGS OSU_NP OSU_SIZES OSU_ITERS OSU_BASE OSU_DIR; do
            [ -n "${!v:-}" ] && printf '%s=%q ' "$v" "${!v}"; done)bash bench/gpu_run.sh $steps"
    nvidia-smi -L
    nvidia-smi topo -m
    ompi_info --version | head -1
    nvcc --version | tail -1
    echo "NCCL_HOME: ${NCCL_HOME:-none}"
} > "$log/machine.txt" 2>&1

# the VARIANTS list: names in vnames, mpirun arguments (% for spaces) in vargs
vnames=()
declare -A vargs=()
for v in ${VARIANTS:-default}; do
    nm=${v%%=*}
    vnames+=("$nm")
    vargs[$nm]=""
    case "$v" in *=*) a=${v#*=}; vargs[$nm]=${a//%/ } ;; esac
done

if has build; then
    export PKG_CONFIG_PATH="$PWD/.devkit/root/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    nccl=()
    [ -n "${NCCL_HOME:-}" ] && nccl=(--with-nccl="$NCCL_HOME")
    jobs=${MAKE_JOBS:-$(nproc)}
    ( ./autogen.sh &&
      ./configure --enable-werror --with-cuda-arch="${CUDA_ARCH:--gencode arch=compute_90,code=sm_90}" "${nccl[@]}" &&
      make -j"$jobs" && make -j"$jobs" check-programs && make -j"$jobs" bench bench/bench_ras_poll ) \
        > "$log/build.log" 2>&1 || { tail -40 "$log/build.log"; echo "BUILD FAILED (build.log)"; exit 1; }
    # the proxy benchmark needs libfabric (the kit's); its absence is no failure
    make bench-proxy >> "$log/build.log" 2>&1 || echo "bench_proxy not built (no libfabric)"
    grep -E "^configure: +(CUDA|NCCL|libfabric)" "$log/build.log" | sed 's/^configure: *//'
    echo "build ok"
fi

if has test; then
    # ranks sharing a GPU without MPS take no engine by default (coll_gpu_cuda_time_sliced):
    # the suite runs our kernels there anyway
    T=("${MPIRUN[@]}" --mca coll_gpu_cuda_time_sliced 1)
    ran_cmd() { # name timeout command...: one PASS/FAIL line, the log in $log/name.log
        local name=$1 t=$2 t0=$SECONDS rc=0
        shift 2
        timeout -k 5 "$t" "$@" < /dev/null > "$log/$name.log" 2>&1 || rc=$?
        if [ "$rc" -eq 0 ]; then
            pass=$((pass + 1))
            echo "PASS $name ($((SECONDS - t0)) s)"
        else
            fail=$((fail + 1))
            echo "FAIL $name rc=$rc ($((SECONDS - t0)) s)"
            tail -25 "$log/$name.log"
        fi
    }
    ran_test() { # name timeout np args...: mpirun at np ranks (the *_shared_* rows without
        # coll_gpu_cuda_time_sliced: ranks sharing a GPU then take the staged path)
        local name=$1 t=$2 np=$3
        shift 3
        if [[ $name == *_shared_* ]]; then
            ran_cmd "$name" "$t" "${MPIRUN[@]}" -np "$np" "$@"
        else
            ran_cmd "$name" "$t" "${T[@]}" -np "$np" "$@"
        fi
    }
    # name                timeout ranks  mpirun arguments and program
    while read -r name t np args; do
        [[ -z "${TEST_ONLY:-}" || "$name" =~ ${TEST_ONLY:-} ]] || continue
        read -r -a a <<< "$args"
        for r in $(seq "${REPEAT:-1}"); do
            ran_test "$name$([ "${REPEAT:-1}" -gt 1 ] && echo "_r$r")" "$t" "$np" "${a[@]}"
        done
    done <<'EOF'
host_demo               60  2 --mca coll_gpu_backend host examples/demo
gpu_demo                60  2 --mca coll_gpu_verbose 100 --mca coll_gpu_cuda_timeout 5 examples/demo_gpu
allreduce_np2           180 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_allreduce
allreduce_np3           100 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_allreduce quick
allreduce_np4           150 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_allreduce quick
allreduce_ring_np2      60  2 --mca coll_gpu_allreduce_algorithm ring test/gpu/test_cuda_allreduce quick
allreduce_tree_np2      60  2 --mca coll_gpu_allreduce_algorithm tree test/gpu/test_cuda_allreduce quick
allreduce_tree_np3      100 3 --mca coll_gpu_allreduce_algorithm tree test/gpu/test_cuda_allreduce quick
allreduce_tree_np4      150 4 --mca coll_gpu_allreduce_algorithm tree test/gpu/test_cuda_allreduce quick
progress_np2            150 2 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_progress
progress_np4            200 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_progress
colls_np2               240 2 --mca coll_gpu_verbose 100 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_colls
colls_np3               200 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
colls_np4               240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_colls quick
vcolls_np2              150 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_vcolls
vcolls_np3              150 3 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_vcolls quick
vcolls_np4              200 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_vcolls quick
vcolls_capped_np3       150 3 --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_gather_scratch_bytes 40000 test/gpu/test_cuda_vcolls capped
types_np2               200 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_types
types_np4               240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_types
nb_np1                  100 1 test/gpu/test_cuda_nb
nb_np2                  200 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb
nb_np4                  240 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_nb
nb_threads_np2          200 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_nb threads
nb_capped_np3           200 3 --mca coll_gpu_cuda_timeout 20 --mca coll_gpu_gather_scratch_bytes 40000 test/gpu/test_cuda_nb
persist_np2             120 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_persist
persist_np4             180 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_persist
neighbor_np2            120 2 test/gpu/test_cuda_neighbor
neighbor_np4            180 4 test/gpu/test_cuda_neighbor
self_np1                60  1 test/gpu/test_cuda_self
self_np2                60  2 test/gpu/test_cuda_self
self_np4                90  4 test/gpu/test_cuda_self
inter_np2               120 2 test/gpu/test_cuda_inter
inter_np5               180 5 test/gpu/test_cuda_inter
inter_args_np3          120 3 test/gpu/test_cuda_inter_args 1
inter_args_np5          150 5 test/gpu/test_cuda_inter_args 2
torch_cupy_np1          120 1 --mca coll_gpu_verbose 100 python3 test/gpu/test_torch_cupy.py
torch_cupy_np2          120 2 --mca coll_gpu_verbose 100 python3 test/gpu/test_torch_cupy.py
settle_np2              60  2 test/gpu/test_cuda_settle cuda
settle_threads_np2      90  2 test/gpu/test_cuda_settle threads
settle_shared_np2       60  2 -x CUDA_VISIBLE_DEVICES=0 test/gpu/test_cuda_settle
settle_shared_np4       60  4 -x CUDA_VISIBLE_DEVICES=0,1 test/gpu/test_cuda_settle
colls_shared_np2        150 2 -x CUDA_VISIBLE_DEVICES=0 test/gpu/test_cuda_colls shared
colls_shared_np4        200 4 -x CUDA_VISIBLE_DEVICES=0,1 test/gpu/test_cuda_colls shared
allreduce_shared_np2    150 2 -x CUDA_VISIBLE_DEVICES=0 test/gpu/test_cuda_allreduce quick
allreduce_shared_np3    150 3 -x CUDA_VISIBLE_DEVICES=0 --mca coll_gpu_stage_direct_min_bytes 1 test/gpu/test_cuda_allreduce quick
host_allreduce_np4      100 4 --mca coll_gpu_backend host --mca coll_gpu_host_rule engine test/mpi/test_allreduce
host_alltoall_np4       60  4 --mca coll_gpu_backend host --mca coll_gpu_host_rule engine test/mpi/test_alltoall
mismatch_np2            120 2 --mca coll_gpu_cuda_timeout 10 test/gpu/test_cuda_mismatch
mismatch_np4            180 4 --mca coll_gpu_cuda_timeout 20 test/gpu/test_cuda_mismatch
EOF
    # a rank killed mid-allreduce on device buffers, 4 ranks (test/run_all.sh runs the host
    # version, test_fault.kill_rank1.shm.np4, the same way): test/mpi/fault_kill.sh checks that
    # every survivor's allreduce fails within 6 s (a kernel waiting for the dead rank ends at
    # coll_gpu_cuda_timeout, 3 s here, then the error names it), that the failed communicator
    # refuses the next call with the same class, and MPI_Barrier on it, on MPI_COMM_WORLD and
    # on a dup, each naming rank 1
    for r in $(seq "${REPEAT:-1}"); do
        [[ -z "${TEST_ONLY:-}" || fault_kill_np4 =~ ${TEST_ONLY:-} ]] || continue
        ran_cmd "fault_kill_np4$([ "${REPEAT:-1}" -gt 1 ] && echo "_r$r")" 120 \
            bash test/mpi/fault_kill.sh test/gpu/test_cuda_fault 6 1 world "${T[@]}" \
            --mca coll_gpu_cuda_timeout 3
    done
    # the verbose runs' trace: our kernels served the calls (a skipped Python test says why)
    for f in "$log"/colls_np2*.log; do
        [ -f "$f" ] && echo "$(basename "$f" .log): kernel launches: ring-mode" \
            "$(grep -c 'cuda: ring mode [1-4]' "$f"), alltoall $(grep -c 'cuda: alltoall rank' "$f")"
    done
    for f in "$log"/torch_cupy_np*.log; do
        [ -f "$f" ] && echo "$(basename "$f" .log): $(grep -h 'test_torch_cupy\|skipped' "$f" | head -1)"
    done
    echo "tests: $pass passed, $fail failed"
fi

if has bench; then
    for r in $(seq "${REPEAT:-1}"); do
        for v in "${vnames[@]}"; do
            read -r -a va <<< "${vargs[$v]}"
            B=("${MPIRUN[@]}" -np "${BENCH_NP:-2}" "${va[@]}")
            sfx=${v}_r$r
            for p in ${BENCH_PROGS:-colls}; do
                echo "## $p, variant $v (${vargs[$v]:-no extra arguments}), round $r"
                case $p in
                colls)
                    CGPU_BENCH_OSU=${BENCH_OSU:-0} timeout -k 5 600 "${B[@]}" -x CGPU_BENCH_OSU \
                        bench/bench_colls "${BENCH_COLLS:-all}" "${BENCH_MAX:-2147483648}" "${BENCH_MIN:-8}" \
                        2>&1 | tee "$log/bench_colls_$sfx.txt"
                    ;;
                scan)
                    for alg in auto fallback; do
                        echo "# coll_gpu_scan_algorithm $alg"
                        timeout -k 5 150 "${B[@]}" --mca coll_gpu_scan_algorithm $alg bench/bench_scan
                    done 2>&1 | tee "$log/bench_scan_$sfx.txt"
                    ;;
                ras_poll)
                    timeout -k 5 120 "${B[@]}" bench/bench_ras_poll device 2>&1 | tee "$log/bench_ras_poll_$sfx.txt"
                    ;;
                proxy)
                    for prov in tcp shm; do
                        timeout -k 5 120 bench/bench_proxy $prov
                    done 2>&1 | tee "$log/bench_proxy_$sfx.txt"
                    ;;
                ceiling)
                    # no MPI: one process drives every GPU, so VARIANTS do not apply
                    timeout -k 5 300 bench/bench_ceiling 2>&1 | tee "$log/bench_ceiling_$sfx.txt"
                    ;;
                sliced)
                    # no MPI: 2 and 4 processes forked on device 0, without MPS
                    for np in 2 4; do
                        timeout -k 5 120 bench/bench_sliced_copies $np
                    done 2>&1 | tee "$log/bench_sliced_copies_$sfx.txt"
                    ;;
                order)
                    timeout -k 5 120 bench/bench_order 2>&1 | tee "$log/bench_order_$sfx.txt"
                    ;;
                *) echo "bench: unknown program '$p' (colls scan ras_poll proxy ceiling sliced order)" ;;
                esac
            done
        done
    done
fi

if has python; then
    for a in "cupy multiple" "cupy single" "numba multiple" "numba single" "torch multiple" \
        "torch single"; do
        set -- $a
        echo "## test_mpi4py --arrays $1 --thread $2"
        timeout -k 5 300 "${MPIRUN[@]}" -np 2 python3 test/python/test_mpi4py.py --arrays "$1" \
            --thread "$2" < /dev/null 2>&1 | grep -E "^(test_mpi4py|FAIL|skipped)" | tail -20
    done 2>&1 | tee "$log/python_suite.txt"
    grep -q "^FAIL\|FAILED" "$log/python_suite.txt" && fail=$((fail + 1))
    for th in single multiple; do
        echo "## bench_python --thread $th"
        timeout -k 5 120 "${MPIRUN[@]}" -np 2 python3 bench/bench_python.py --thread $th < /dev/null
    done 2>&1 | tee "$log/bench_python.txt"
    echo "## bench_python, stock coll list, --host-only" | tee -a "$log/bench_python.txt"
    timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe --mca coll tuned,libnbc,basic,self \
        "${extra[@]}" -np 2 python3 bench/bench_python.py --host-only < /dev/null 2>&1 |
        tee -a "$log/bench_python.txt"
fi

if has probe; then
    make bench/pmpi_probe.so bench/c_loop.so > "$log/probe_build.log" 2>&1 || echo "probe: make failed"
    P=(-x LD_PRELOAD="$PWD/bench/pmpi_probe.so" -x CGPU_PROBE_OUT)
    for r in $(seq "${REPEAT:-1}"); do
        for th in ${PROBE_LEVELS:-single multiple}; do
            f=$log/probe_${th}_r$r
            echo "## probe: bench_colls, then bench_python.py --colls --libs cupy, MPI_THREAD_$th, round $r"
            CGPU_PROBE_OUT=$f.c CGPU_BENCH_THREAD=$th timeout -k 5 300 "${MPIRUN[@]}" -np 2 \
                -x CGPU_BENCH_THREAD "${P[@]}" bench/bench_colls \
                allreduce,alltoall,allgather,reduce_scatter,bcast,reduce 65536 8 > "$f.c.txt" 2>&1
            # shellcheck disable=SC2086 # PROBE_ARGS: one word an argument
            CGPU_PROBE_OUT=$f.py timeout -k 5 300 "${MPIRUN[@]}" -np 2 "${P[@]}" python3 \
                bench/bench_python.py --colls --libs cupy --c-loop bench/c_loop.so --thread $th \
                ${PROBE_ARGS:-} < /dev/null > "$f.py.txt" 2>&1
            python3 bench/probe_split.py "$f.c.txt" "$f.c" "$f.py.txt" "$f.py" || echo "probe: no split ($f.*)"
        done
    done 2>&1 | tee "$log/probe.txt"
fi

osu_build() { # OSU's collective programs, from the tree carried in OSU_DIR
    ( top=$PWD && cd "$osu" &&
      # the carried tree's timestamps are the copy's: make must not rerun autotools
      touch aclocal.m4 && sleep 1 && touch configure && find . -name Makefile.in -exec touch {} + &&
      ./configure CC=mpicc CXX=mpicxx --enable-cuda --with-cuda-include="$cuda/include" \
          --with-cuda-libpath="$cuda/lib64" &&
      for d in blocking non_blocking; do # the compat header at build time only: configure's
          # link tests declare the CUDA functions their own way
          make -j"$(nproc)" -C c/mpi/collective/$d \
              CFLAGS="-O2 -I$cuda/include -include $top/bench/osu_cuda13_compat.h" || exit 1
      done ) > "$log/osu_build.log" 2>&1
}

if has osu; then
    osu=${OSU_DIR:-.osu}
    cuda=${CUDA_HOME:-/usr/local/cuda}
    O=$osu/c/mpi/collective
    if [ ! -x "$osu/configure" ]; then
        echo "osu: no OSU source tree in $osu (unpack osu-micro-benchmarks-7.4 there and carry it)"
    elif [ ! -x "$O/blocking/osu_allreduce" ] && ! osu_build; then
        tail -20 "$log/osu_build.log"
        echo "osu: build failed (osu_build.log)"
    else
        oargs=()
        [ -n "${OSU_SIZES:-}" ] && oargs+=(-m "$OSU_SIZES")
        [ -n "${OSU_ITERS:-}" ] && oargs+=(-i "$OSU_ITERS")
        # Open MPI's own collectives take device pointers only where it was built with CUDA
        bdev=(-d cuda)
        bwhat="device buffers"
        if ! ompi_info --parsable --all 2>/dev/null | grep -q "mpi_built_with_cuda_support:value:true"; then
            bdev=()
            bwhat="host buffers: this Open MPI has no CUDA support"
        fi
        : > "$log/osu.txt"
        for r in $(seq "${REPEAT:-1}"); do
            for p in ${OSU_PROGS:-osu_allreduce osu_reduce osu_bcast osu_allgather osu_alltoall \
                osu_reduce_scatter_block osu_iallreduce osu_ialltoall}; do
                x=$O/blocking/$p
                [ -x "$x" ] || x=$O/non_blocking/$p
                [ -x "$x" ] || { echo "osu: no program $p"; continue; }
                for v in "${vnames[@]}"; do
                    read -r -a va <<< "${vargs[$v]}"
                    echo "## $p coll/gpu:$v round $r" >> "$log/osu.txt"
                    timeout -k 5 "${OSU_TIMEOUT:-300}" "${MPIRUN[@]}" -np "${OSU_NP:-2}" "${va[@]}" \
                        "$x" -d cuda "${oargs[@]}" >> "$log/osu.txt" 2>&1 || echo "osu: $p ($v) rc $?"
                done
                if [ "${OSU_BASE:-1}" = 1 ]; then # no coll/gpu: Open MPI's own collectives
                    echo "## $p base round $r ($bwhat)" >> "$log/osu.txt"
                    timeout -k 5 "${OSU_TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe \
                        --mca coll tuned,libnbc,basic,self "${extra[@]}" -np "${OSU_NP:-2}" \
                        "$x" "${bdev[@]}" "${oargs[@]}" >> "$log/osu.txt" 2>&1 || echo "osu: $p (base) rc $?"
                fi
            done
        done
        # one row a program and size, a column a setting and round: OSU's latency (the
        # non-blocking programs: their overall time), us
        awk '/^## /{p=$2; c=$3"/r"$5; if (!(c in seen)) {seen[c]=1; cols[++nc]=c}}
             /^[0-9]/ && p != "" {k=p" "$1; if (!(k in have)) {have[k]=1; rows[++nr]=k}; v[k,c]=$2}
             END{printf "%-28s %10s", "program", "bytes"; for (i=1; i<=nc; ++i) printf " %14s", cols[i]; print ""
                 for (j=1; j<=nr; ++j) {split(rows[j], a, " "); printf "%-28s %10s", a[1], a[2]
                     for (i=1; i<=nc; ++i) printf " %14s", ((rows[j], cols[i]) in v) ? v[rows[j], cols[i]] : "-"; print ""}}' \
            "$log/osu.txt" | tee "$log/osu_summary.txt"
    fi
fi

[ "$fail" -eq 0 ]
