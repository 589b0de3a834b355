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
    # host backend only: the CUDA runtime is not instrumented and not needed here
    sed '/CGPU_HAVE_CUDA/d' "$build/cgpu_config.h" > "$out/cgpu_config.h"
    srcs=("$repo"/coll_gpu/engine/*.c "$repo"/ras/*.c "$repo"/btl_glue/*.c "$repo"/kernels/cgpu_reduce_host.c "$repo"/prof/cgpu_prof.c)
    flags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
           -fno-sanitize-recover=all -I"$out" -I"$repo" -I"$repo/coll_gpu/engine")
    rc=0
    for t in "${tests[@]}"; do
        if ! $cc "${flags[@]}" "${srcs[@]}" "$repo/test/unit/$t.c" -lcunit -lpthread -lrt -ldl \
            -o "$out/$t" 2>"$out/$t.build.log"; then
            echo "asan: cannot build $t"; cat "$out/$t.build.log"; rc=1; continue
        fi
        if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 UBSAN_OPTIONS=print_stacktrace=1 \
            "$out/$t" > "$out/$t.log" 2>&1; then
            echo "asan: $t clean ($(tail -n 1 "$out/$t.log"))"
        else
            echo "asan: $t FAILED"; tail -n 40 "$out/$t.log"; rc=1
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
    for t in "${tests[@]}"; do
        log=$(mktemp /tmp/cgpu-vg.XXXXXX)
        # x87 long double arithmetic is emulated in 64 bits by valgrind: skip that type
        if CGPU_TEST_NO_LONG_DOUBLE=1 valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect "$build/test/unit/$t" > "$log" 2>&1; then
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
         --mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host
         --mca mca_base_component_path "${CGPU_PLUGIN_DIR:-$build/.libs}:$pkglibdir")
    [ "$(id -u)" -eq 0 ] && run+=(--allow-run-as-root)
    vg=(valgrind --keep-debuginfo=yes --leak-check=full --show-leak-kinds=definite
        --errors-for-leak-kinds=definite --num-callers=40 $supp --log-file="$out/vg.%p.log")
    export CGPU_TEST_SPLITS=20 CGPU_TEST_SEQ_REPS=5 CGPU_TEST_NO_LONG_DOUBLE=1
    rc=0
    for t in examples/demo test/mpi/test_alltoall test/mpi/test_bcast_allgather \
             test/mpi/test_reduce_rs test/mpi/test_comms; do
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
*)
    echo "usage: sanitize.sh asan|valgrind|mpi-valgrind"; exit 2 ;;
esac
