#!/usr/bin/env bash
# test/run_all.sh - the coll/gpu test driver.
#
# Runs, each counted as one test:
#   - every executable test/unit/test_* (CUnit programs; pass = exit status 0),
#   - every MPI test program in test/mpi/ under mpirun, once per np in the np list,
#     with coll/gpu selected (host backend) from the plugin directory,
#   - examples/demo at np 4, when it has been built,
#   - every collective x type x op x in place through mpi4py on numpy arrays
#     (test/python/test_mpi4py.py) at np 2 and 3, MPI_THREAD_MULTIPLE and SINGLE, and the
#     same on CuPy, Numba and PyTorch device arrays (skipped where no GPU or no package),
#   - the commands of README.md and docs/*.md (test/docs/check_docs.py), one test per block,
#     and `make install` / `make uninstall` into a DESTDIR (test/install/check_uninstall.sh),
#   - a check that the MPI runs left nothing named cgpu* in /dev/shm.
# Prints "PASS <name>" / "FAIL <name>" per test (and the log of each failed test), then
# exactly one line "N passed, M failed". Exit status 0 only when M == 0 and N > 0.
#
# Environment:
#   CGPU_PLUGIN_DIR     directory holding mca_coll_gpu.so (default: <repo>/.libs)
#   CGPU_TEST_BIN       directory holding unit/ and mpi/ test binaries (default: <repo>/test)
#   CGPU_TEST_NPS       np list, spaces or commas (default: "1 2 3 4 5 8")
#   CGPU_TEST_BACKEND   coll_gpu_backend of the MPI tests (default: host; "auto" on a GPU
#                       machine runs them on the cuda backend, host buffers staged)
#   CGPU_TEST_TIMEOUT   seconds per test before it is killed (default: 300 on 4 or more
#                       cores, 600 below: the tests oversubscribe up to 16 ranks)
#   CGPU_TEST_SANITIZE_TIMEOUT  the same for each sanitizer run (default: 3 x the above)
#   CGPU_TEST_LOGDIR    where each test's output is kept (default: a new /tmp/cgpu-test-logs.*)
#   CGPU_MPIRUN_EXTRA   extra mpirun arguments (word-split), e.g. "--mca coll_gpu_verbose 10"
#   CGPU_DEMO_BIN       the demo program (default: <repo>/examples/demo)
#   CGPU_DOCS_CHECK_TIMEOUT  seconds for the whole docs check (default 1800; each block has
#                       its own limit inside it, CGPU_DOCS_TIMEOUT)

set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PLUGIN_DIR=${CGPU_PLUGIN_DIR:-$REPO/.libs}
BIN=${CGPU_TEST_BIN:-$REPO/test}
NPS=${CGPU_TEST_NPS:-1 2 3 4 5 8}
NPS=${NPS//,/ }
cores=$(nproc 2>/dev/null || echo 1)
TIMEOUT=${CGPU_TEST_TIMEOUT:-$([ "$cores" -ge 4 ] && echo 300 || echo 600)}
SANITIZE_TIMEOUT=${CGPU_TEST_SANITIZE_TIMEOUT:-$((3 * TIMEOUT))}
DEMO=${CGPU_DEMO_BIN:-$REPO/examples/demo}
if [ -n "${CGPU_TEST_LOGDIR:-}" ]; then
    LOGDIR=$CGPU_TEST_LOGDIR
    mkdir -p "$LOGDIR" || exit 2
else
    LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/cgpu-test-logs.XXXXXX") || exit 2
fi

# MPI test programs that must exist; any other test/mpi/test_* executable runs too.
MPI_TESTS=(test_allreduce test_alltoall test_fallback test_forced_fallback)
# MCA arguments a program needs on top of the common ones.
# profiler plugins: the checking one (test_profiler, test_prof) and the trace example
export CGPU_PROF_CHECK_PLUGIN=${CGPU_PROF_CHECK_PLUGIN:-$BIN/prof/.libs/libcgpu_prof_check.so}
export CGPU_PROF_TRACE_PLUGIN=${CGPU_PROF_TRACE_PLUGIN:-$PLUGIN_DIR/libcgpu_prof_trace.so}
declare -A MPI_TEST_ARGS=(
    [test_forced_fallback]="--mca coll_gpu_allreduce_algorithm fallback --mca coll_gpu_alltoall_algorithm fallback"
    [test_staged]="--mca coll_gpu_stage_host_buffers 1 --mca coll_gpu_bcast_algorithm fallback --mca coll_gpu_allgather_algorithm fallback --mca coll_gpu_gather_algorithm fallback --mca coll_gpu_scatter_algorithm fallback --mca coll_gpu_alltoall_algorithm fallback --mca coll_gpu_reduce_algorithm fallback --mca coll_gpu_reduce_scatter_algorithm fallback --mca coll_gpu_scan_algorithm fallback"
    [test_bottom]="--mca coll_gpu_stage_host_buffers 1 --mca coll_gpu_alltoall_algorithm fallback"
    [test_staged_allreduce]="--mca coll_gpu_stage_chunk_bytes 65536 --mca coll_gpu_stage_pipeline_min_bytes 131072 --mca coll_gpu_allreduce_algorithm fallback"
    [test_profiler]="--mca coll_gpu_profiler $CGPU_PROF_CHECK_PLUGIN -x CGPU_PROF_CHECK_PLUGIN"
)

passed=0
failed=0
skipped=0

# The lines of a log that say what went wrong, printed first: a CI excerpt around "FAIL"
# then shows them even when the whole log is cut.
show_failures() {
    echo "---- what failed (lines of the log naming a failure, an error or a timeout) ----"
    grep -n -i -E 'fail|error|timed out|timeout|assert|abort|signal|killed|segmentation|^ +[0-9]+\. [^ ]+:[0-9]+' "$1" |
        grep -v -E '\.\.\.passed$|asserts run, 0 failed|^[0-9]+:Run Summary' | head -n 25 |
        sed 's/^/    ! /'
}

# Prints the log of a failed test, indented; long logs are cut, the file stays whole.
show_log() {
    local log=$1 max=200 lines
    lines=$(wc -l <"$log")
    show_failures "$log"
    echo "---- log: $log ($lines lines) ----"
    if [ "$lines" -gt "$max" ]; then
        head -n 60 "$log" | sed 's/^/    | /'
        echo "    | ... ($((lines - 120)) lines cut, see the file) ..."
        tail -n 60 "$log" | sed 's/^/    | /'
    else
        sed 's/^/    | /' "$log"
    fi
    echo "---- end of log ----"
}

record() { # name status(0 = pass, 77 = skipped with a printed reason) log
    if [ "$2" -eq 0 ]; then
        echo "PASS $1"
        passed=$((passed + 1))
    elif [ "$2" -eq 77 ]; then
        # a skip is never a pass: counted apart, with the reason the test printed
        echo "SKIP $1 ($(grep -m1 -o 'skipped: .*' "${3:-/dev/null}" 2>/dev/null || echo 'no reason given'))"
        skipped=$((skipped + 1))
    else
        echo "FAIL $1"
        failed=$((failed + 1))
        [ -n "${3:-}" ] && [ -f "$3" ] && show_log "$3"
    fi
}

# run_logged NAME COMMAND... : runs it under $TIMEOUT, output to its log ($log), status in $rc.
run_logged() {
    local name=$1 start
    shift
    log="$LOGDIR/${name//[^A-Za-z0-9_.=-]/_}.log"
    start=$SECONDS
    {
        echo "+ $*"
        echo "+ started $(date '+%F %T')"
    } >"$log"
    timeout -k 10 "$TIMEOUT" "$@" </dev/null >>"$log" 2>&1
    rc=$?
    {
        echo "+ exit status $rc after $((SECONDS - start)) s"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "+ TIMED OUT: killed after ${TIMEOUT} s"
        fi
    } >>"$log"
}

# run_test NAME COMMAND... : runs it under the timeout, output to its log.
run_test() {
    local log rc
    run_logged "$@"
    record "$1" "$rc" "$log"
}

# run_test, and once more where the first run timed out (only the runs that hit Open MPI's
# own hang under MPI_THREAD_MULTIPLE: about 1 run in 40-150 of `test_nb threads` across 2
# fake nodes, every thread of every rank inside Open MPI's coll/tuned allgather and ob1,
# none of ours holding a lock; bench/results/2026-11-23_host.md and
# 2026-11-27_host.md). The first run's log is kept beside the second's; a second
# timeout, or any other failure, fails the test.
run_test_hang_once() {
    local log rc
    TIMEOUT=${CGPU_TEST_HANG_ONCE_S:-120} run_logged "$@"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        mv "$log" "$log.first"
        echo "  ($1: the first run hung past ${CGPU_TEST_HANG_ONCE_S:-120} s, killed; once more, log $log.first)"
        run_logged "$@"
    fi
    record "$1" "$rc" "$log"
}

# run_test, and then the warning matching PATTERN must have printed at least once and at
# most MAX times (a cause that recurs, a cap every new communicator hits, is reported once
# per process: at most one line a rank)
run_test_warn_once() {
    local name=$1 pattern=$2 max=$3 log rc n
    shift 3
    run_logged "$name" "$@"
    if [ "$rc" -eq 0 ]; then
        n=$(grep -v '^+ ' "$log" | grep -c -- "$pattern") # not the logged command line
        if [ "$n" -lt 1 ] || [ "$n" -gt "$max" ]; then
            echo "FAILED: the warning '$pattern' printed $n times, expected 1 to $max" >> "$log"
            rc=1
        fi
    fi
    record "$name" "$rc" "$log"
}

cgpu_shm_entries() {
    find /dev/shm -maxdepth 1 -name 'cgpu*' -printf '%f\n' 2>/dev/null | sort
}

echo "coll/gpu tests: repo $REPO"
echo "  plugin dir: $PLUGIN_DIR"
echo "  test binaries: $BIN"
echo "  np list: $NPS; timeout ${TIMEOUT} s per test"
echo "  logs: $LOGDIR"

# ---- unit tests ----
shopt -s nullglob
for t in "$BIN"/unit/test_*; do
    case "$t" in
    *.c | *.h | *.o | *.lo | *.la | *.sh | *.log | *.trs | *.d) continue ;;
    esac
    if [ ! -f "$t" ] || [ ! -x "$t" ]; then
        continue
    fi
    if [ "$(basename "$t")" = test_proxy ]; then
        # once more only where the first run's one failure is the shm provider's killed-peer
        # case hanging past the case's deadline (about 1 run in 10 on a loaded 2-core
        # machine: the survivor's wait inside libfabric's shm provider does not return; an
        # open fault of the proxy, issue 55). The first log is kept beside the second.
        run_logged "unit.test_proxy" "$t"
        if [ "$rc" -ne 0 ] && grep -q "killed peer over shm: deadline passed" "$log" &&
            [ "$(grep -c "CU_ASSERT" "$log")" -eq 1 ]; then
            mv "$log" "$log.first"
            echo "  (unit.test_proxy: the shm killed-peer case hung; once more, log $log.first)"
            run_logged "unit.test_proxy" "$t"
        fi
        record "unit.test_proxy" "$rc" "$log"
        continue
    fi
    run_test "unit.$(basename "$t")" "$t"
done

# ---- the plugin itself carries no device code and no C++ runtime: those are the kernels'
# object, opened at the first cuda set-up (each costs every job's MPI_Init milliseconds) ----
run_test "plugin.kernels_apart" bash -c '
    dir=$1
    if [ ! -e "$dir/libcgpu_cuda_kernels.so" ]; then
        echo "skipped: host-only build (no kernels object)"; exit 77
    fi
    bad=0
    if readelf -SW "$dir/mca_coll_gpu.so" | grep -q "\.nv_fatbin"; then
        echo "mca_coll_gpu.so holds device code (.nv_fatbin)"; bad=1
    fi
    if readelf -dW "$dir/mca_coll_gpu.so" | grep -q "NEEDED.*libstdc++"; then
        echo "mca_coll_gpu.so needs libstdc++"; bad=1
    fi
    readelf -SW "$dir/libcgpu_cuda_kernels.so" | grep -q "\.nv_fatbin" ||
        { echo "libcgpu_cuda_kernels.so holds no device code"; bad=1; }
    ls -l "$dir/mca_coll_gpu.so" "$dir/libcgpu_cuda_kernels.so"
    exit $bad
' _ "$PLUGIN_DIR"

# ---- memory checking of the engine: ASan/LSan/UBSan build and valgrind memcheck ----
# (valgrind runs each program 20-50 times slower: one test each, under a longer limit)
TIMEOUT=$SANITIZE_TIMEOUT run_test "sanitize.asan_unit_tests" bash "$REPO/test/sanitize.sh" asan
for t in test_reduce test_engine test_prof; do
    TIMEOUT=$SANITIZE_TIMEOUT run_test "sanitize.valgrind_unit.$t" \
        bash "$REPO/test/sanitize.sh" valgrind "$t"
done

# ---- MPI tests ----
if ! command -v mpirun >/dev/null 2>&1; then
    echo "FAIL mpirun (not found in PATH)"
    failed=$((failed + 1))
else
    pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | cut -d: -f3)
    if [ ! -d "$PLUGIN_DIR" ]; then
        echo "WARNING: plugin dir $PLUGIN_DIR does not exist (run make, or set CGPU_PLUGIN_DIR);"
        echo "WARNING: mpirun fails on a missing mca_base_component_path entry, so will every MPI test."
    elif [ ! -f "$PLUGIN_DIR/mca_coll_gpu.so" ]; then
        echo "WARNING: $PLUGIN_DIR/mca_coll_gpu.so not found (run make, or set CGPU_PLUGIN_DIR);"
        echo "WARNING: MPI_Init fails when --mca coll names a component it cannot find."
    fi
    # shellcheck disable=SC2054 # the commas are part of MCA values, not separators
    MPIRUN=(mpirun --oversubscribe --bind-to none
        --mca btl self,vader,tcp
        --mca coll gpu,tuned,libnbc,basic,self
        --mca coll_gpu_backend "${CGPU_TEST_BACKEND:-host}"
        --mca mca_base_component_path "$PLUGIN_DIR:$pkglibdir")
    if [ "$(id -u)" -eq 0 ]; then
        MPIRUN+=(--allow-run-as-root)
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    # shellcheck disable=SC2206 # word splitting of the user's extra arguments is wanted
    [ -n "${CGPU_MPIRUN_EXTRA:-}" ] && MPIRUN+=(${CGPU_MPIRUN_EXTRA})
    # the tests exercise the engine at every size; the default rule (the previous module where
    # it measured faster, coll_gpu_host_rule.c) has its own rows, with MPIRUN_RULE
    MPIRUN_RULE=("${MPIRUN[@]}")
    MPIRUN+=(--mca coll_gpu_host_rule engine)
    # the GPU tests run the default backend (auto: cuda where a GPU is usable)
    MPIRUN_GPU=()
    skip_next=0
    for a in "${MPIRUN[@]}"; do
        if [ "$a" = coll_gpu_backend ]; then skip_next=1; unset 'MPIRUN_GPU[-1]'; continue; fi
        if [ "$skip_next" -eq 1 ]; then skip_next=0; continue; fi
        MPIRUN_GPU+=("$a")
    done

    programs=("${MPI_TESTS[@]}")
    for t in "$BIN"/mpi/test_*; do
        p=$(basename "$t")
        case "$p" in *.* | test_fault | test_mismatch) continue ;; esac # their own runs below
        if [ ! -f "$t" ] || [ ! -x "$t" ]; then
            continue
        fi
        case " ${programs[*]} " in *" $p "*) ;; *) programs+=("$p") ;; esac
    done

    shm_before=$(cgpu_shm_entries)
    if [ -n "$shm_before" ]; then
        echo "WARNING: /dev/shm already holds cgpu* entries before the MPI runs (not counted):"
        while IFS= read -r e; do echo "    $e"; done <<<"$shm_before"
    fi

    for p in "${programs[@]}"; do
        exe="$BIN/mpi/$p"
        # shellcheck disable=SC2206
        extra=(${MPI_TEST_ARGS[$p]:-})
        for np in $NPS; do
            name="$p.np$np"
            if [ ! -x "$exe" ]; then
                echo "FAIL $name"
                echo "    $exe is not built"
                failed=$((failed + 1))
                continue
            fi
            run_test "$name" "${MPIRUN[@]}" "${extra[@]}" -np "$np" "$exe"
        done
    done

    if [ -x "$DEMO" ]; then
        run_test "demo.np4" "${MPIRUN[@]}" -np 4 "$DEMO"
    fi
    # ompi_info lists every MCA param and pvar (and does not crash on them)
    run_test "ompi_info.lists_all" bash -c '
        OMPI_MCA_mca_base_component_path="$1" ompi_info --param coll gpu --level 9 > "$2" 2>&1 ||
            { echo "ompi_info failed"; tail -5 "$2"; exit 1; }
        for v in coll_gpu_backend coll_gpu_cuda_a2a_channels coll_gpu_cuda_inbox_pool \
                 coll_gpu_state coll_gpu_transport coll_gpu_watchdog_firings coll_gpu_ipc_cache_hits \
                 coll_gpu_inbox_reuses coll_gpu_open_fds coll_gpu_proxy_queue_depth \
                 coll_gpu_shm_pool coll_gpu_shm_reuses; do
            grep -q "\"$v\"" "$2" || { echo "ompi_info does not list $v"; exit 1; }
        done
        echo "ompi_info lists $(grep -c "MCA coll gpu: \(parameter\|performance\)" "$2") coll/gpu variables"
    ' _ "$PLUGIN_DIR:$pkglibdir" "$LOGDIR/ompi_info.txt"
    # each misconfiguration explained by exactly one line, and help texts listing every value
    run_test "config.every_mistake_once" env CGPU_PLUGIN_DIR="$PLUGIN_DIR" \
        bash "$REPO/test/mpi/check_config.sh"
    # make install puts every file where docs/building.md says, make uninstall removes them
    run_test "install.make_uninstall_removes_all" bash "$REPO/test/install/check_uninstall.sh"
    # the pages' commands, run as written (one test per block; a block that cannot run here is
    # marked in the page and reported as skipped, with its reason)
    if command -v python3 >/dev/null 2>&1; then
        docs_logs="$LOGDIR/docs"
        TIMEOUT=${CGPU_DOCS_CHECK_TIMEOUT:-1800} run_logged "docs.check" python3 \
            "$REPO/test/docs/check_docs.py" --repo "$REPO" --logdir "$docs_logs"
        docs_rc=$rc docs_log=$log docs_failed=0
        while read -r st name; do
            name=${name%%:[^0-9]*} # "docs.PAGE:LINE: why" -> "docs.PAGE:LINE"
            name=${name%% *}
            blog="$docs_logs/${name//[^A-Za-z0-9_.=-]/_}.log"
            case "$st" in
            PASS) record "$name" 0 "$blog" ;;
            SKIP) record "$name" 77 "$blog" ;;
            *) record "$name" 1 "$blog"; docs_failed=1 ;;
            esac
        done < <(grep -E '^(PASS|FAIL|SKIP) docs\.' "$docs_log")
        # the check itself failed (timed out, crashed) without naming a block
        [ "$docs_rc" -ne 0 ] && [ "$docs_failed" -eq 0 ] && record "docs.check" 1 "$docs_log"
    else
        echo "FAIL docs.check (python3 not found)"
        failed=$((failed + 1))
    fi
    # the plugin inside Open MPI under valgrind (2 ranks, host backend): no report in our code
    TIMEOUT=$SANITIZE_TIMEOUT run_test "sanitize.valgrind_mpi_tests" env CGPU_PLUGIN_DIR="$PLUGIN_DIR" \
        bash "$REPO/test/sanitize.sh" mpi-valgrind
    # and built with AddressSanitizer + LeakSanitizer: no error, no leak our code allocated
    TIMEOUT=$SANITIZE_TIMEOUT run_test "sanitize.asan_mpi_tests" env CGPU_PLUGIN_DIR="$PLUGIN_DIR" \
        bash "$REPO/test/sanitize.sh" mpi-asan

    # ---- alltoall at scale: 16 ranks (oversubscribed), bounded resources ----
    if [ -x "$BIN/mpi/test_a2a_scale" ]; then
        run_test "test_a2a_scale.np16" "${MPIRUN[@]}" -np 16 "$BIN/mpi/test_a2a_scale"
    fi

    # ---- staged variants: host buffers treated as device ones (copied by coll/gpu) ----
    for v in test_nb:3 test_self:1 test_self:3; do
        p=${v%:*} np=${v#*:}
        if [ -x "$BIN/mpi/$p" ]; then
            run_test "$p.staged.np$np" "${MPIRUN[@]}" --mca coll_gpu_stage_host_buffers 1 -np "$np" \
                "$BIN/mpi/$p" staged
        fi
    done
    # the host path's staging of device buffers, on host buffers staged as if they were:
    # every type, op, count and in place
    [ -x "$BIN/mpi/test_allreduce" ] && run_test "test_allreduce.staged.np3" "${MPIRUN[@]}" \
        --mca coll_gpu_stage_host_buffers 1 -np 3 "$BIN/mpi/test_allreduce"
    # the allreduce in the stage areas (cgpu_allreduce_direct.c) at every size, in rounds of
    # a third of a 4 KiB stage (hundreds of rounds, parts of a few elements, empty ones), and
    # beside the other collectives on the same communicators (the alltoall shares the stage)
    for p in test_allreduce test_comms; do
        [ -x "$BIN/mpi/$p" ] && run_test "$p.direct.np3" "${MPIRUN[@]}" \
            --mca coll_gpu_stage_host_buffers 1 --mca coll_gpu_stage_direct_min_bytes 1 \
            --mca coll_gpu_alltoall_stage_bytes 4096 --mca coll_gpu_shared_stage_bytes 0 \
            -np 3 "$BIN/mpi/$p"
    done
    # every datatype with host buffers staged: the staged reductions' mirrors (long double
    # complex) come from the pool
    [ -x "$BIN/mpi/test_types" ] && run_test "test_types.staged.np2" "${MPIRUN[@]}" \
        --mca coll_gpu_stage_host_buffers 1 -np 2 "$BIN/mpi/test_types"
    # the scans in rounds: 32 bytes per rank of coll_gpu_gather_scratch_bytes a round (a
    # 4099-element call takes up to 4099 rounds), and the previous module's scans
    [ -x "$BIN/mpi/test_types" ] && run_test "test_types.scan_rounds.np3" "${MPIRUN[@]}" \
        --mca coll_gpu_gather_scratch_bytes 96 --mca coll_gpu_scan_algorithm allgather -np 3 \
        "$BIN/mpi/test_types"
    [ -x "$BIN/mpi/test_types" ] && run_test "test_types.scan_fallback.np3" "${MPIRUN[@]}" \
        --mca coll_gpu_scan_algorithm fallback -np 3 "$BIN/mpi/test_types"
    # allgatherv, gather and scatter above coll_gpu_gather_scratch_bytes: the previous module
    [ -x "$BIN/mpi/test_bcast_allgather" ] && run_test "test_bcast_allgather.capped.np3" \
        "${MPIRUN[@]}" --mca coll_gpu_gather_scratch_bytes 40000 -np 3 \
        "$BIN/mpi/test_bcast_allgather" capped
    # gatherv, scatterv and alltoallv padded above the same cap: the previous module
    [ -x "$BIN/mpi/test_vcolls" ] && run_test "test_vcolls.capped.np3" \
        "${MPIRUN[@]}" --mca coll_gpu_gather_scratch_bytes 40000 -np 3 "$BIN/mpi/test_vcolls" capped
    # scatter, scatterv and iscatter as a broadcast of the root's message at every size
    # (coll_gpu_scatter_algorithm ring; auto runs blocks up to 4 MiB as a reduce-scatter), at 3
    # ranks and across 2 fake nodes
    SRING=(--mca coll_gpu_scatter_algorithm ring)
    for t in test_bcast_allgather test_vcolls test_nb; do
        [ -x "$BIN/mpi/$t" ] && run_test "$t.scatter_ring.np3" "${MPIRUN[@]}" "${SRING[@]}" -np 3 "$BIN/mpi/$t"
    done
    [ -x "$BIN/mpi/test_vcolls" ] && run_test "test_vcolls.scatter_ring.nodes2x2.np4" "${MPIRUN[@]}" \
        "${SRING[@]}" --mca coll_gpu_ofi_provider tcp --mca coll_gpu_fake_nodes 2 -np 4 "$BIN/mpi/test_vcolls" quick
    # the host mirrors' pool: room for two 64 KiB blocks only (larger mirrors unpooled), none
    if [ -x "$BIN/mpi/test_staged" ]; then
        run_test "test_staged.pinned_small.np3" "${MPIRUN[@]}" ${MPI_TEST_ARGS[test_staged]} \
            --mca coll_gpu_stage_pinned_bytes 131072 -np 3 "$BIN/mpi/test_staged"
    fi
    [ -x "$BIN/mpi/test_nb" ] && run_test "test_nb.staged_unpinned.np3" "${MPIRUN[@]}" \
        --mca coll_gpu_stage_host_buffers 1 --mca coll_gpu_stage_pinned_bytes 0 -np 3 \
        "$BIN/mpi/test_nb" staged

    # ---- non-blocking: 4 threads on their own communicators; and the worker cap (a post
    # past it fails on every rank, nothing hangs) ----
    if [ -x "$BIN/mpi/test_nb" ]; then
        run_test_hang_once "test_nb.threads.np3" "${MPIRUN[@]}" -np 3 "$BIN/mpi/test_nb" threads
        run_test_warn_once "test_nb.cap.np3" "coll_gpu_nb_max_workers = " 3 \
            "${MPIRUN[@]}" --mca coll_gpu_nb_max_workers 1 -np 3 "$BIN/mpi/test_nb" cap
        # the v-forms' large blocks in rounds of the scratch cap's share
        run_test "test_nb.capped.np3" "${MPIRUN[@]}" --mca coll_gpu_gather_scratch_bytes 40000 -np 3 \
            "$BIN/mpi/test_nb"
        run_test "test_nb.nb_engine_off.np3" "${MPIRUN[@]}" --mca coll_gpu_nb_engine off -np 3 \
            "$BIN/mpi/test_nb"
    fi
    # the communicator cap: 30 splits past a cap of 2, results checked, one warning a rank
    if [ -x "$BIN/mpi/test_comms" ]; then
        run_test_warn_once "test_comms.max_comms.np2" "coll_gpu_max_comms;" 2 \
            env CGPU_TEST_SPLITS=30 "${MPIRUN[@]}" -x CGPU_TEST_SPLITS --mca coll_gpu_max_comms 2 \
            -np 2 "$BIN/mpi/test_comms"
    fi
    # persistent collectives: each start staged (the engine off), and with host buffers
    # handled as device ones
    if [ -x "$BIN/mpi/test_persist" ]; then
        run_test "test_persist.nb_engine_off.np3" "${MPIRUN[@]}" --mca coll_gpu_nb_engine off -np 3 \
            "$BIN/mpi/test_persist"
        run_test "test_persist.staged.np3" "${MPIRUN[@]}" --mca coll_gpu_stage_host_buffers 1 -np 3 \
            "$BIN/mpi/test_persist"
    fi
    # neighborhood collectives with host buffers staged as device ones would be: the spans
    if [ -x "$BIN/mpi/test_neighbor" ]; then
        run_test "test_neighbor.staged.np5" "${MPIRUN[@]}" --mca coll_gpu_stage_host_buffers 1 -np 5 \
            "$BIN/mpi/test_neighbor"
    fi
    # intercommunicators' collectives with host buffers staged as device ones would be
    if [ -x "$BIN/mpi/test_inter" ]; then
        for np in 2 5; do
            run_test "test_inter.staged.np$np" "${MPIRUN[@]}" --mca coll_gpu_stage_host_buffers 1 \
                -np "$np" "$BIN/mpi/test_inter"
        done
    fi
    # the rooted ones with mpi4py's arguments, each first on its communicator, groups of
    # unequal size both ways round (np:size of group 0), host buffers as they are and staged
    if [ -x "$BIN/mpi/test_inter_args" ]; then
        for v in 3:1 3:2 5:2; do
            IFS=: read -r np g0 <<<"$v"
            for st in 0 1; do
                run_test "test_inter_args.stage$st.g$g0.np$np" "${MPIRUN[@]}" \
                    --mca coll_gpu_stage_host_buffers "$st" -np "$np" "$BIN/mpi/test_inter_args" "$g0"
            done
        done
    fi

    # ---- the staged allreduce's pipeline: 1000-byte chunks (odd element counts per chunk),
    # host buffers staged as device ones through the stager, then reduced chunk by chunk ----
    if [ -x "$BIN/mpi/test_forced_fallback" ]; then
        PIPE=(--mca coll_gpu_allreduce_algorithm fallback --mca coll_gpu_alltoall_algorithm fallback
            --mca coll_gpu_stage_pipeline_min_bytes 1 --mca coll_gpu_stage_chunk_bytes 1000)
        run_test "test_forced_fallback.pipelined_staged.np3" "${MPIRUN[@]}" "${PIPE[@]}" \
            --mca coll_gpu_stage_host_buffers 1 -np 3 "$BIN/mpi/test_forced_fallback"
        run_test "test_forced_fallback.pipelined_host.np2" "${MPIRUN[@]}" "${PIPE[@]}" \
            -np 2 "$BIN/mpi/test_forced_fallback"
        # the host backend's default rule: from 3 ranks every allreduce and alltoall goes to
        # the previous module (docs/performance.md), results checked as in the forced case;
        # 6 ranks, so that the test's parity split has 3 a half too
        run_test "test_forced_fallback.host_rule.np6" "${MPIRUN_RULE[@]}" -np 6 \
            "$BIN/mpi/test_forced_fallback"
        # the same through the previous module's allreduce on each chunk
        run_test "test_forced_fallback.pipelined_previous.np3" "${MPIRUN[@]}" "${PIPE[@]}" \
            --mca coll_gpu_stage_allreduce_engine 0 --mca coll_gpu_stage_host_buffers 1 -np 3 \
            "$BIN/mpi/test_forced_fallback"
    fi
    # user ops, pair types: the engine moving the data (host buffers staged as device ones),
    # then the previous module on each chunk
    if [ -x "$BIN/mpi/test_staged_allreduce" ]; then
        run_test "test_staged_allreduce.staged.np3" "${MPIRUN[@]}" \
            ${MPI_TEST_ARGS[test_staged_allreduce]} --mca coll_gpu_stage_host_buffers 1 -np 3 \
            "$BIN/mpi/test_staged_allreduce" engine
        run_test "test_staged_allreduce.previous.np3" "${MPIRUN[@]}" \
            ${MPI_TEST_ARGS[test_staged_allreduce]} --mca coll_gpu_stage_allreduce_engine 0 -np 3 \
            "$BIN/mpi/test_staged_allreduce" previous
    fi

    # ---- across nodes: fake nodes, every collective through the proxy's tcp provider
    # (2 nodes x 2 ranks, 4 x 1, 2 + 1), then the other collective tests at 2 x 2 ----
    if [ -x "$BIN/mpi/test_nodes" ]; then
        NODES=(--mca coll_gpu_ofi_provider tcp)
        for v in 2:4:2x2 4:4:4x1 2:3:2+1; do
            IFS=: read -r nn np lay <<<"$v"
            run_test "test_nodes.$lay.np$np" "${MPIRUN[@]}" "${NODES[@]}" --mca coll_gpu_fake_nodes "$nn" \
                -np "$np" "$BIN/mpi/test_nodes"
        done
        # the inter-node reduction's staging pipeline (device memory's path), host buffers
        # staged as device ones through 4 KiB pieces
        run_test "test_nodes.staged_pieces.2x2.np4" "${MPIRUN[@]}" "${NODES[@]}" \
            --mca coll_gpu_fake_nodes 2 --mca coll_gpu_stage_host_buffers 1 \
            --mca coll_gpu_proxy_bounce_bytes 4096 -np 4 "$BIN/mpi/test_nodes"
        # 100,000 proxy operations from 5 threads on 5 communicators: each event in its own
        # communicator's profiler context (the check plugin counts mismatches)
        [ -x "$BIN/mpi/test_profiler" ] && run_test "test_profiler.nodes2.np2" \
            env CGPU_PROF_MIN_TRANSPORT=100000 "${MPIRUN[@]}" "${NODES[@]}" \
            --mca coll_gpu_fake_nodes 2 ${MPI_TEST_ARGS[test_profiler]} -np 2 "$BIN/mpi/test_profiler"
        for p in test_allreduce test_alltoall test_bcast_allgather test_reduce_rs test_comms \
                 test_types test_nb test_progress test_vcolls test_persist test_neighbor test_inter; do
            [ -x "$BIN/mpi/$p" ] && run_test "$p.nodes2x2.np4" "${MPIRUN[@]}" "${NODES[@]}" \
                --mca coll_gpu_fake_nodes 2 -np 4 "$BIN/mpi/$p"
        done
        # non-blocking collectives from 4 threads, each on its own communicators across nodes
        [ -x "$BIN/mpi/test_nb" ] && run_test_hang_once "test_nb.threads.nodes2x2.np4" "${MPIRUN[@]}" \
            "${NODES[@]}" --mca coll_gpu_fake_nodes 2 -np 4 "$BIN/mpi/test_nb" threads
    fi
    # ---- a rank killed mid-allreduce: every survivor returns an error within a bound, the
    # failed communicator refuses the next call with the same class, and so does MPI_Barrier
    # on it (which coll/gpu leaves to the previous module, whose barrier would wait for the
    # dead rank for ever), nothing left in /dev/shm. On one node the barrier on
    # MPI_COMM_WORLD and on a dup made before the death fail too, naming the dead rank.
    # Across fake nodes (the proxy path) the bound is coll_gpu_ras_timeout (3 s) plus a quarter
    # of it (the watchdog's period, the proxy's cancel grace; or, on a rank stopped while it
    # waits on a node-mate, the time that one takes to say whom it waited for) plus scheduling
    # slack: 5 s; every survivor's error string names rank 1, as dead (its node) or as the
    # rank that did not answer (the other node: the wait's peer, a node-mate's, or the one a
    # failure notice named). On one node (the shm path) every wait looks at its peers'
    # processes every 5 ms: 2 s, plus 1 s of slack on a loaded box, and the error string
    # names the dead rank ----
    if [ -x "$BIN/mpi/test_fault" ]; then
        # test/mpi/fault_kill.sh checks every survivor's result (its header says what)
        # 1 Mi - 1 ints: a count the two ranks of a node do not divide, whose uneven parts
        # once let a partial sum through as a success after a death on the other node
        run_test "test_fault.kill_rank1.np4" env FAULT_COUNT=1048575 \
            bash "$REPO/test/mpi/fault_kill.sh" \
            "$BIN/mpi/test_fault" 5 1 comm "${MPIRUN[@]}" --mca coll_gpu_ofi_provider tcp \
            --mca coll_gpu_fake_nodes 2 --mca coll_gpu_ras_timeout 3
        run_test "test_fault.kill_rank1.shm.np4" bash "$REPO/test/mpi/fault_kill.sh" \
            "$BIN/mpi/test_fault" 3 1 world "${MPIRUN[@]}"
        # 100 ints: the one-shot allreduce, whose only wait is the call check's
        run_test "test_fault.kill_rank1.small.np4" env FAULT_COUNT=100 \
            bash "$REPO/test/mpi/fault_kill.sh" "$BIN/mpi/test_fault" 3 1 comm "${MPIRUN[@]}"
        # ---- a rank stopped (SIGSTOP) before a bcast for 2.5 s: every other rank's watchdog
        # names that bcast by its number and the stopped rank as the one not arrived; the
        # call then completes with the root's data (test_fault.c checks, per rank) ----
        run_test "test_fault.stall_rank1.np4" bash -c '
            exe=$1; shift
            dir=$(mktemp -d)
            "$@" --mca coll_gpu_ras_timeout 1 -np 4 "$exe" stall 1 "$dir" > "$dir/mpirun.log" 2>&1
            rc=$?
            bad=0
            [ "$rc" -eq 0 ] || { echo "mpirun exit status $rc"; cat "$dir/mpirun.log"; bad=1; }
            for r in 0 1 2 3; do
                f="$dir/stall.$r"
                if [ ! -s "$f" ]; then echo "rank $r wrote no result"; bad=1; continue; fi
                cat "$f"
                grep -q "^rank $r ok 1 " "$f" || { cat "$dir/stderr.$r" 2>/dev/null; bad=1; }
            done
            rm -rf "$dir"
            exit $bad
        ' _ "$BIN/mpi/test_fault" "${MPIRUN[@]}"
    fi

    # ---- a rank killed while the others wait in their first collective on a communicator
    # (inside the engine's set-up): the launcher kills the job, and no process of it leaves a
    # segment name in /dev/shm ----
    if [ -x "$BIN/mpi/test_fault" ]; then
        run_test "test_fault.killed_before_setup.np3" bash -c '
            exe=$1; shift
            dir=$(mktemp -d)
            "$@" -np 3 "$exe" setup 1 "$dir" > "$dir/mpirun.log" 2>&1
            echo "mpirun exit status $? (the killed rank makes it non-zero)"
            bad=0
            for r in 0 2; do
                [ -f "$dir/entered.$r" ] || { echo "rank $r did not reach its first collective"; bad=1; }
            done
            grep -q "rank 1 .*signal 9\|signal 9.*rank 1\|rank 1 with PID .* exited on signal 9" "$dir/mpirun.log" ||
                echo "(mpirun did not report rank 1 killed by signal 9; its log follows)"
            for r in 0 1 2; do
                [ -s "$dir/pid.$r" ] || { echo "rank $r wrote no pid"; bad=1; continue; }
                pid=$(cat "$dir/pid.$r")
                left=$(find /dev/shm -maxdepth 1 -name "cgpu-*" -name "*-$pid-*" -printf "%f\n" 2>/dev/null)
                if [ -n "$left" ]; then
                    echo "rank $r (pid $pid) left in /dev/shm:" $left
                    bad=1
                    for f in $left; do rm -f "/dev/shm/$f"; done
                fi
            done
            [ "$bad" -eq 0 ] && echo "no process of the job left a segment name" || cat "$dir/mpirun.log"
            rm -rf "$dir"
            exit $bad
        ' _ "$BIN/mpi/test_fault" "${MPIRUN[@]}"
    fi

    # ---- mismatched calls (sizes, roots, ops, types, kinds): every rank gets the error of
    # what differs, naming both values, no hang (the run's timeout), and the next matching call
    # on the communicator gives the host-computed result. Across fake nodes: differences every
    # node sees, and differences between nodes whose ranks agree (2 x 2, and 2 + 2 + 1 with the
    # lone rank's node differing); coll_gpu_ras_timeout bounds a wait that would hang ----
    if [ -x "$BIN/mpi/test_mismatch" ]; then
        for np in 2 4; do
            run_test "test_mismatch.np$np" "${MPIRUN[@]}" -np "$np" "$BIN/mpi/test_mismatch"
        done
        run_test "test_mismatch.nodes2x2.np4" "${MPIRUN[@]}" --mca coll_gpu_ofi_provider tcp \
            --mca coll_gpu_fake_nodes 2 --mca coll_gpu_ras_timeout 20 -np 4 \
            "$BIN/mpi/test_mismatch" nodes
        run_test "test_mismatch.xnodes2x2.np4" "${MPIRUN[@]}" --mca coll_gpu_ofi_provider tcp \
            --mca coll_gpu_fake_nodes 2 --mca coll_gpu_ras_timeout 20 -np 4 \
            "$BIN/mpi/test_mismatch" xnodes 2
        run_test "test_mismatch.xnodes2+2+1.np5" "${MPIRUN[@]}" --mca coll_gpu_ofi_provider tcp \
            --mca coll_gpu_fake_nodes 3 --mca coll_gpu_ras_timeout 20 -np 5 \
            "$BIN/mpi/test_mismatch" xnodes 3
    fi

    # ---- RAS watchdog: a rank enters 2.5-3 s late with a 1 s timeout ----
    if [ -x "$BIN/mpi/test_ras" ]; then
        run_test "test_ras.watchdog.np3" "${MPIRUN[@]}" --mca coll_gpu_ras_timeout 1 -np 3 \
            "$BIN/mpi/test_ras" watchdog
        run_test "test_ras.abort.np3" "${MPIRUN[@]}" --mca coll_gpu_ras_timeout 1 \
            --mca coll_gpu_ras_abort_on_timeout 1 -np 3 "$BIN/mpi/test_ras" abort
    fi

    # ---- the LD_PRELOAD health monitor on an unmodified program (the demo job) ----
    MONITOR=${CGPU_MONITOR_LIB:-$PLUGIN_DIR/libcgpu_monitor.so}
    if [ -x "$DEMO" ] && [ -f "$MONITOR" ]; then
        mdir=$(mktemp -d /tmp/cgpu-monitor.XXXXXX)
        CGPU_MONITOR_OUT="$mdir/health.%r" CGPU_MONITOR_HZ=50 run_test "monitor.demo.np4" \
            "${MPIRUN[@]}" -x LD_PRELOAD="$MONITOR" -x CGPU_MONITOR_OUT -x CGPU_MONITOR_HZ -np 4 "$DEMO"
        log="$LOGDIR/monitor.health_lines.log"
        bad=0
        for r in 0 1 2 3; do
            f="$mdir/health.$r"
            if ! grep -q 'cgpu-health .* state=1 .*allreduce_started=[1-9]' "$f" 2>/dev/null; then
                echo "rank $r: no health line showing a ready communicator that ran allreduces" >>"$log"
                bad=1
            fi
        done
        [ "$bad" -eq 0 ] && echo "every rank wrote health lines" >"$log"
        record "monitor.health_lines" "$bad" "$log"
        rm -rf "$mdir"
        # a link planted where rank 0 writes: not followed (its target unchanged), a message
        # names the path, rank 0's lines go to stderr; rank 1 writes its own new file
        mdir=$(mktemp -d /tmp/cgpu-monitor.XXXXXX)
        echo precious >"$mdir/target"
        ln -s "$mdir/target" "$mdir/health.0"
        CGPU_MONITOR_OUT="$mdir/health.%r" CGPU_MONITOR_HZ=50 run_logged "monitor.planted_link.np2" \
            "${MPIRUN[@]}" -x LD_PRELOAD="$MONITOR" -x CGPU_MONITOR_OUT -x CGPU_MONITOR_HZ -np 2 "$DEMO"
        bad=$rc
        {
            [ "$(cat "$mdir/target")" = precious ] || { echo "the link's target was written"; bad=1; }
            [ -L "$mdir/health.0" ] || { echo "the planted link is gone"; bad=1; }
            grep -q "cannot create $mdir/health.0: File exists" "$log" ||
                { echo "no message naming $mdir/health.0"; bad=1; }
            grep -q "cgpu-health .*rank=0" "$log" || { echo "rank 0's lines are not on stderr"; bad=1; }
            grep -q "cgpu-health .*rank=1" "$mdir/health.1" 2>/dev/null ||
                { echo "rank 1 wrote no health lines to $mdir/health.1"; bad=1; }
        } >>"$log"
        record "monitor.planted_link.np2" "$bad" "$log"
        rm -rf "$mdir"
    fi

    # ---- profiler: the trace plugin's output parses and nests (demo job, 4 ranks) ----
    if command -v python3 >/dev/null 2>&1; then
        run_test "profiler.check_trace_self_test" python3 "$REPO/test/prof/check_trace.py" --self-test
        tdir=$(mktemp -d /tmp/cgpu-trace.XXXXXX)
        if [ -x "$DEMO" ]; then
            CGPU_TRACE_DIR=$tdir run_test "profiler.trace_demo.np4" "${MPIRUN[@]}" -x CGPU_TRACE_DIR \
                --mca coll_gpu_profiler "$CGPU_PROF_TRACE_PLUGIN" -np 4 "$DEMO"
            # shellcheck disable=SC2046 # one argument per trace file
            run_test "profiler.trace_json_nests" python3 "$REPO/test/prof/check_trace.py" --transport \
                $(find "$tdir" -name 'cgpu-trace-*.json' | sort)
        fi
        rm -rf "$tdir"
    fi

    # ---- Python: every collective x type x op x in place through mpi4py on numpy arrays, the
    # engine forced, at two thread levels (mpi4py's default MULTIPLE, and SINGLE: a level is
    # process-wide, so a run each). The interpreter is the first python3 that imports mpi4py
    # and numpy (PATH's may be pyenv's, which has neither; Debian's /usr/bin/python3 has both).
    PY=$(bash "$REPO/test/find_python.sh")
    PYSUITE=$REPO/test/python/test_mpi4py.py
    NOPY="skipped: no python3 with mpi4py and numpy (neither python3 in PATH nor"
    NOPY+=" /usr/bin/python3; quickstart.sh installs python3-mpi4py python3-numpy)"
    for np in 2 3; do
        for level in multiple single; do
            name="python.host_suite.np$np.$level"
            if [ -z "$PY" ]; then
                log="$LOGDIR/$name.log"
                echo "$NOPY" >"$log"
                record "$name" 77 "$log"
                continue
            fi
            if [ ! -f "$MONITOR" ]; then
                run_logged "$name" "${MPIRUN[@]}" -np "$np" "$PY" "$PYSUITE" --thread "$level"
            else
                # the health monitor proves coll/gpu's engine served the calls; the suite fails
                # if the level it asked for is not the one MPI_Query_thread reports, so the
                # SINGLE rows also prove the monitor leaves the process's level alone
                hdir=$(mktemp -d /tmp/cgpu-pyhealth.XXXXXX)
                run_logged "$name" "${MPIRUN[@]}" -x LD_PRELOAD="$MONITOR" \
                    -x CGPU_MONITOR_OUT="$hdir/health.%r" -np "$np" "$PY" "$PYSUITE" --thread "$level"
                if [ "$rc" -eq 0 ]; then
                    h=$(tail -n 1 "$hdir/health.0" 2>/dev/null)
                    echo "+ rank 0's last health line: $h" >>"$log"
                    n=$(sed -n 's/.* engine_calls=\([0-9]*\) .*/\1/p' <<<"$h")
                    if [ -z "$n" ] || [ "$n" -lt 1000 ]; then
                        echo "FAILED: coll/gpu's engine served ${n:-no} calls (at least 1000 expected)" >>"$log"
                        rc=1
                    fi
                fi
                rm -rf "$hdir"
            fi
            # the summary names the rank count and level run: not singletons of another MPI
            if [ "$rc" -eq 0 ] && ! grep -q "^test_mpi4py: numpy np=$np thread=$level: .* 0 failures: PASSED$" "$log"; then
                echo "FAILED: no summary line for np=$np thread=$level" >>"$log"
                rc=1
            fi
            record "$name" "$rc" "$log"
        done
    done

    # the intercommunicator section alone with host buffers staged as device ones would be
    # (the host suite above runs it unstaged)
    for np in 2 3; do
        name="python.inter_staged.np$np"
        if [ -z "$PY" ]; then
            log="$LOGDIR/$name.log"
            echo "$NOPY" >"$log"
            record "$name" 77 "$log"
            continue
        fi
        run_logged "$name" "${MPIRUN[@]}" --mca coll_gpu_stage_host_buffers 1 -np "$np" "$PY" \
            "$PYSUITE" --only inter
        if [ "$rc" -eq 0 ] && ! grep -q "^test_mpi4py: numpy np=$np thread=multiple: .* 0 failures: PASSED$" "$log"; then
            echo "FAILED: no summary line for np=$np" >>"$log"
            rc=1
        fi
        record "$name" "$rc" "$log"
    done

    # ---- GPU tests (cuda backend, coll_gpu_backend=auto): skipped where no GPU ----
    for t in "$BIN"/gpu/test_*; do
        case "$t" in *.c | *.o | *"*"* | */test_cuda_fault) continue ;; esac # fault: below
        [ -x "$t" ] || continue
        run_test "gpu.$(basename "$t").np2" "${MPIRUN_GPU[@]}" -np 2 "$t"
        run_test "gpu.$(basename "$t").np4" "${MPIRUN_GPU[@]}" -np 4 "$t" quick
    done
    # a rank killed mid-allreduce on device buffers, as test_fault.kill_rank1.shm.np4 on host
    # ones; a kernel waiting for the dead rank ends at coll_gpu_cuda_timeout (3 s), then names
    # it (bench/gpu_run.sh's fault_kill_np4 is the same run)
    [ -x "$BIN/gpu/test_cuda_fault" ] && run_test "gpu.test_cuda_fault.kill_rank1.np4" \
        bash "$REPO/test/mpi/fault_kill.sh" "$BIN/gpu/test_cuda_fault" 6 1 world \
        "${MPIRUN_GPU[@]}" --mca coll_gpu_cuda_timeout 3
    # mpi4py on device arrays, the interpreter chosen as above
    for t in "gpu.test_torch_cupy.np2:$REPO/test/gpu/test_torch_cupy.py" \
        "python.gpu_suite.cupy.np2:$PYSUITE --arrays cupy" \
        "python.gpu_suite.cupy.np2.single:$PYSUITE --arrays cupy --thread single" \
        "python.gpu_suite.numba.np2:$PYSUITE --arrays numba" \
        "python.gpu_suite.torch.np2:$PYSUITE --arrays torch"; do
        name=${t%%:*}
        if [ -z "$PY" ]; then
            log="$LOGDIR/$name.log"
            echo "$NOPY" >"$log"
            record "$name" 77 "$log"
            continue
        fi
        # shellcheck disable=SC2086 # the script and its arguments
        run_test "$name" "${MPIRUN_GPU[@]}" -np 2 "$PY" ${t#*:}
    done
    if [ -x "$REPO/examples/demo_gpu" ] || [ -x "$BIN/../examples/demo_gpu" ]; then
        gdemo="$BIN/../examples/demo_gpu"
        [ -x "$gdemo" ] || gdemo="$REPO/examples/demo_gpu"
        run_test "gpu.demo_gpu.np2" "${MPIRUN_GPU[@]}" -np 2 "$gdemo"
    fi

    # ---- nothing of ours left in /dev/shm ----
    shm_after=$(cgpu_shm_entries)
    leaked=$(comm -13 <(echo "$shm_before") <(echo "$shm_after") | sed '/^$/d')
    log="$LOGDIR/shm.no_cgpu_leftovers.log"
    if [ -z "$leaked" ]; then
        echo "no new cgpu* entries in /dev/shm" >"$log"
        record "shm.no_cgpu_leftovers" 0
    else
        {
            echo "the MPI runs left these entries in /dev/shm:"
            echo "$leaked"
        } >"$log"
        record "shm.no_cgpu_leftovers" 1 "$log"
    fi
fi

echo "logs are in $LOGDIR"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
