#!/usr/bin/env bash
# Memory checking of the engine (host backend) through its unit tests, which run the
# real engine with forked ranks (ring allreduce, alltoall, create/release, failures):
#   sanitize.sh asan      build them with AddressSanitizer + LeakSanitizer + UBSan and run
#   sanitize.sh valgrind  run the normal builds under valgrind memcheck (leaks included)
#   sanitize.sh mpi-valgrind  MPI integration tests (plugin loaded into Open MPI) under
#                         valgrind; reports in our code fail, Open MPI's own are counted
# Exit 0 = clean, 77 = tool missing (printed as "skipped: ..."), anything else = errors.
# The unit tests need no suppressions: the engine and the tests include no Open MPI code.
set -uo pipefail
mode=${1:?asan or valgrind}
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${CGPU_BUILD_DIR:-$repo}
tests=(test_reduce test_engine test_prof)
# libraries the engine sources need when built by hand: hwloc always, libfabric when
# configure found it (btl_glue/cgpu_ofi.c and the proxy are then compiled in)
eng_libs=(-lhwloc)
asan_tests=()
if grep -q '^#define CGPU_HAVE_LIBFABRIC' "$build/common/cgpu_config.h" 2>/dev/null; then
    # shellcheck disable=SC2207 # one word per flag
    eng_libs+=($(pkg-config --libs libfabric 2>/dev/null || echo -lfabric))
    asan_tests=(test_proxy) # not under valgrind: it checks wall-clock timeouts and idle CPU
fi
# Every layer below the glue, built from source with the sanitizer (the CUDA parts compile
# as their no-device stubs: the sanitized config header drops CGPU_HAVE_CUDA).
engine_srcs=("$repo"/common/*.c "$repo"/kernels/cgpu_reduce_host.c "$repo"/btl_glue/*.c
             "$repo"/ras/*.c "$repo"/prof/cgpu_prof.c "$repo"/coll_gpu/engine/*.c)
for d in "$repo"/coll_gpu/engine/*/; do
    engine_srcs+=("$d"*.c)
done
# the proxy: its libfabric files, or the one file of stubs that stands in without libfabric
proxy_drop=proxy_stubs.c
grep -q '^#define CGPU_HAVE_LIBFABRIC' "$build/common/cgpu_config.h" 2>/dev/null || proxy_drop=proxy_
kept=()
for f in "${engine_srcs[@]}"; do
    case "$f" in
    */proxy/proxy_stubs.c) [ "$proxy_drop" = proxy_stubs.c ] || kept+=("$f") ;;
    */proxy/*) [ "$proxy_drop" = proxy_ ] || kept+=("$f") ;;
    *) kept+=("$f") ;;
    esac
done
engine_srcs=("${kept[@]}")
engine_incs=(-I"$repo/common" -I"$repo/kernels" -I"$repo/btl_glue" -I"$repo/ras" -I"$repo/prof"
             -I"$repo/include" -I"$repo/coll_gpu/engine" -I"$repo")
export CGPU_PROF_CHECK_PLUGIN=${CGPU_PROF_CHECK_PLUGIN:-$build/test/prof/.libs/libcgpu_prof_check.so}
export CGPU_PROF_TRACE_PLUGIN=${CGPU_PROF_TRACE_PLUGIN:-$build/.libs/libcgpu_prof_trace.so}

case "$mode" in
asan)
    cc=${CC:-gcc}
    if ! echo 'int main(void){return 0;}' | $cc -x c -fsanitize=address,undefined -o /dev/null - 2>/dev/null; then
        echo "skipped: $cc cannot build with -fsanitize=address,undefined"
        exit 77
    fi
    out=$(mktemp -d /tmp/cgpu-asan.XXXXXX)
    # host backend only: the CUDA runtime is not instrumented and not needed here. The copy
    # is forced in first with -include: its guard then keeps out common/cgpu_config.h, which
    # the sources in common/ would find before any -I directory.
    sed '/CGPU_HAVE_CUDA/d' "$build/common/cgpu_config.h" > "$out/cgpu_config.h"
    srcs=("${engine_srcs[@]}")
    flags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
           -fno-sanitize-recover=all -include "$out/cgpu_config.h" "${engine_incs[@]}")
    rc=0
    for t in "${tests[@]}" "${asan_tests[@]}"; do
        if ! $cc "${flags[@]}" "${srcs[@]}" "$repo/test/unit/$t.c" -lcunit "${eng_libs[@]}" -lpthread -lrt -ldl \
            -o "$out/$t" 2>"$out/$t.build.log"; then
            echo "asan: cannot build $t"; cat "$out/$t.build.log"; rc=1; continue
        fi
        # full malloc stacks, so that the hwloc leak suppression can match (lsan_hwloc.supp)
        if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86:fast_unwind_on_malloc=0 \
            LSAN_OPTIONS=suppressions="$repo/test/asan/lsan_hwloc.supp":print_suppressions=0 \
            UBSAN_OPTIONS=print_stacktrace=1 "$out/$t" > "$out/$t.log" 2>&1; then
            echo "asan: $t clean ($(tail -n 1 "$out/$t.log"))"
        else
            # the report itself (a child's report sits far above the summary's tail)
            echo "asan: $t FAILED"
            grep -n -m 3 -A 45 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$out/$t.log"
            tail -n 25 "$out/$t.log"; rc=1
        fi
    done
    rm -rf "$out"
    exit $rc
    ;;
valgrind)
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "skipped: valgrind is not installed"
        exit 77
    fi
    rc=0
    shift
    [ $# -gt 0 ] && tests=("$@") # one or a few named unit tests (the driver runs one each)
    for t in "${tests[@]}"; do
        log=$(mktemp /tmp/cgpu-vg.XXXXXX)
        # x87 long double arithmetic is emulated in 64 bits by valgrind: skip that type
        # a scenario's deadline 10x the native one: valgrind's slowdown on spinning ranks
        if CGPU_TEST_NO_LONG_DOUBLE=1 CGPU_TEST_RUN_TIMEOUT_S=${CGPU_TEST_RUN_TIMEOUT_S:-300} valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect \
            --suppressions="$repo/test/valgrind/hwloc.supp" "$build/test/unit/$t" > "$log" 2>&1; then
            echo "valgrind: $t clean ($(tail -n 1 "$log"))"
        else
            echo "valgrind: $t FAILED"; grep -E '^==|FAIL|rank' "$log" | head -60; rc=1
        fi
        rm -f "$log"
    done
    exit $rc
    ;;
mpi-valgrind)
    # MPI integration tests (host backend, 2 ranks) under valgrind memcheck, with Open MPI's
    # own suppression file; test/valgrind/attribute.py then fails on any report with a
    # frame of ours and counts the rest (Open MPI's, PMIx's: listed, not judged).
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "skipped: valgrind is not installed"
        exit 77
    fi
    supp=""
    for f in /usr/share/openmpi/openmpi-valgrind.supp "$(dirname "$(command -v mpicc)")/../share/openmpi/openmpi-valgrind.supp"; do
        [ -f "$f" ] && { supp="--suppressions=$f"; break; }
    done
    pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | cut -d: -f3)
    out=$(mktemp -d /tmp/cgpu-vgmpi.XXXXXX)
    run=(mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp
         --mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host --mca coll_gpu_host_rule engine
         --mca mca_base_component_path "${CGPU_PLUGIN_DIR:-$build/.libs}:$pkglibdir")
    [ "$(id -u)" -eq 0 ] && run+=(--allow-run-as-root)
    vg=(valgrind --keep-debuginfo=yes --leak-check=full --show-leak-kinds=definite
        --errors-for-leak-kinds=definite --num-callers=40 $supp --log-file="$out/vg.%p.log")
    export CGPU_TEST_SPLITS=20 CGPU_TEST_SEQ_REPS=5 CGPU_TEST_NO_LONG_DOUBLE=1
    rc=0
    for t in examples/demo test/mpi/test_alltoall test/mpi/test_bcast_allgather \
             test/mpi/test_reduce_rs test/mpi/test_comms test/mpi/test_vcolls; do
        if [ ! -x "$build/$t" ]; then
            echo "mpi-valgrind: $t is not built"; rc=1; continue
        fi
        if ! timeout 600 "${run[@]}" -np 2 "${vg[@]}" "$build/$t" > "$out/run.log" 2>&1; then
            echo "mpi-valgrind: $t FAILED under valgrind"; tail -20 "$out/run.log"; rc=1
        fi
        printf '%s: ' "$(basename "$t")"
        python3 "$repo/test/valgrind/attribute.py" "$out"/vg.*.log || rc=1
        rm -f "$out"/vg.*.log
    done
    rm -rf "$out"
    exit $rc
    ;;
mpi-asan)
    # The plugin (host backend) built with AddressSanitizer + LeakSanitizer, loaded into
    # Open MPI by the MPI tests at 2 ranks with the ASan runtime preloaded. Any ASan error
    # fails; test/asan/attribute.py fails on leaks our code allocated and counts those Open
    # MPI allocated itself (no suppression file: a module-wide one would also hide ours,
    # since every call into our plugin comes from libmpi).
    cc=${CC:-gcc}
    asanlib=$($cc -print-file-name=libasan.so)
    if [ ! -f "$asanlib" ] || ! command -v mpicc >/dev/null 2>&1; then
        echo "skipped: no libasan for $cc (or no mpicc)"
        exit 77
    fi
    out=$(mktemp -d /tmp/cgpu-asanmpi.XXXXXX)
    sed '/CGPU_HAVE_CUDA/d; /CGPU_HAVE_NCCL/d' "$build/common/cgpu_config.h" > "$out/cgpu_config.h"
    mkdir -p "$out/plugin"
    # shellcheck disable=SC2046 # Open MPI's include flags, one word each
    if ! $cc -std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=address -fPIC -shared \
        -include "$out/cgpu_config.h" "${engine_incs[@]}" -I"$repo/coll_gpu" $(mpicc --showme:compile | sed 's/-I/-isystem /g') \
        -idirafter "$repo/coll_gpu/compat" \
        "$repo"/coll_gpu/*.c "${engine_srcs[@]}" \
        -o "$out/plugin/mca_coll_gpu.so" $(mpicc --showme:link) "${eng_libs[@]}" -lrt -lpthread -ldl \
        > "$out/build.log" 2>&1; then
        echo "mpi-asan: cannot build the instrumented plugin"; tail -20 "$out/build.log"
        rm -rf "$out"; exit 1
    fi
    pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | cut -d: -f3)
    run=(mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp
         --mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host --mca coll_gpu_host_rule engine
         --mca mca_base_component_path "$out/plugin:$pkglibdir"
         -x LD_PRELOAD="$asanlib:$out/plugin/mca_coll_gpu.so" -x ASAN_OPTIONS)
    [ "$(id -u)" -eq 0 ] && run+=(--allow-run-as-root)
    export ASAN_OPTIONS="detect_leaks=1:exitcode=86:fast_unwind_on_malloc=0:log_path=$out/asan"
    export CGPU_TEST_SPLITS=100 CGPU_TEST_SEQ_REPS=20 CGPU_TEST_RAS_CALLS=1000 CGPU_PROF_MIN_EVENTS=5000
    rc=0
    for t in examples/demo test/mpi/test_allreduce test/mpi/test_alltoall \
             test/mpi/test_bcast_allgather test/mpi/test_reduce_rs test/mpi/test_comms \
             test/mpi/test_staged test/mpi/test_fallback test/mpi/test_ras test/mpi/test_profiler \
             test/mpi/test_vcolls test/mpi/test_nb test/mpi/test_types test/mpi/test_persist \
             test/mpi/test_neighbor test/mpi/test_inter; do
        extra=()
        case "$t" in *test_profiler) extra=(--mca coll_gpu_profiler "$CGPU_PROF_CHECK_PLUGIN"
                                            -x CGPU_PROF_CHECK_PLUGIN -x CGPU_PROF_MIN_EVENTS) ;; esac
        case "$t" in *test_comms | *test_ras) extra=(-x CGPU_TEST_SPLITS -x CGPU_TEST_SEQ_REPS -x CGPU_TEST_RAS_CALLS) ;; esac
        case "$t" in *test_inter) extra=(--mca coll_gpu_stage_host_buffers 1) ;; esac
        case "$t" in *test_staged) extra=(--mca coll_gpu_stage_host_buffers 1 --mca coll_gpu_bcast_algorithm fallback --mca coll_gpu_allgather_algorithm fallback --mca coll_gpu_gather_algorithm fallback --mca coll_gpu_scatter_algorithm fallback --mca coll_gpu_alltoall_algorithm fallback --mca coll_gpu_reduce_algorithm fallback --mca coll_gpu_reduce_scatter_algorithm fallback --mca coll_gpu_scan_algorithm fallback) ;; esac
        rm -f "$out"/asan.*
        # the plugin is preloaded too, so that Open MPI's dlclose at finalize does not unmap it
    # and leak reports still name its functions
    # the exit status is ASan's (86) whenever any leak was reported, ours or not
        timeout 600 "${run[@]}" "${extra[@]}" -np 2 "$build/$t" > "$out/run.log" 2>&1
        st=$?
        if [ "$st" -ne 0 ] && [ "$st" -ne 86 ] || grep -q "FAILED" "$out/run.log"; then
            echo "mpi-asan: $(basename "$t") FAILED (exit $st)"; tail -15 "$out/run.log"; rc=1
        fi
        printf '%s: ' "$(basename "$t")"
        python3 "$repo/test/asan/attribute.py" /dev/null "$out"/asan.* || rc=1
    done
    rm -rf "$out"
    exit $rc
    ;;
*)
    echo "usage: sanitize.sh asan|valgrind|mpi-valgrind|mpi-asan"; exit 2 ;;
esac
