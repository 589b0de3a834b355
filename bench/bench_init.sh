#!/usr/bin/env bash
# Start-up tax of coll/gpu: MPI_Init (and a first barrier, and MPI_Finalize) of a trivial
# program (bench/bench_init.c) with the stock coll list against the same list with gpu in
# it, backend auto and host. Each configuration runs N times (default 11), interleaved so
# that a change of machine load hits every configuration alike; the table shows medians,
# and the smallest MPI_Init seen (load only ever adds to it). The difference to stock is
# taken in each round (the runs next to each other) and its median is shown, beside the
# difference of the medians and of the smallest.
# The goal: gpu at most GOAL_MS (default 10) ms over stock (median of the rounds'
# differences of MPI_Init), at every np.
#
# Usage: bench/bench_init.sh [N] [np ...]          (default np: 2 8)
# Environment: CGPU_PLUGIN_DIR  folder holding mca_coll_gpu.so (default: ./.libs)
#              CGPU_PLUGIN_DIR_BASE  another build's folder to compare against in the same
#                               run (rows base-auto, base-host), e.g. a copy of the plugin
#                               before a change
#              BENCH_INIT_BIN   the program (default: ./bench/bench_init; `make bench/bench_init`)
#              GOAL_MS          the allowed difference in ms (default 10)
#              MPIRUN_ARGS      more arguments for mpirun
# Run from the build directory. Prints the load average before and after: on a shared
# machine a difference below the noise of the runs is not a finding (the CPU time column,
# the most CPU time a rank had used when MPI_Init returned, wanders least with the load).
set -uo pipefail
# shellcheck source=bench/stats.sh
. "$(dirname "$0")/stats.sh"
n=${1:-11}
shift || true
nps=("$@")
[ ${#nps[@]} -gt 0 ] || nps=(2 8)
plugdir=${CGPU_PLUGIN_DIR:-$PWD/.libs}
bin=${BENCH_INIT_BIN:-$PWD/bench/bench_init}
goal=${GOAL_MS:-10}
[ -x "$bin" ] || { echo "bench_init.sh: $bin not built (make bench/bench_init)" >&2; exit 2; }
basedir=${CGPU_PLUGIN_DIR_BASE:-}
for d in "$plugdir" ${basedir:+"$basedir"}; do
    [ -e "$d/mca_coll_gpu.so" ] ||
        { echo "bench_init.sh: no mca_coll_gpu.so in $d (set CGPU_PLUGIN_DIR)" >&2; exit 2; }
done
ompidir=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)

names=(stock gpu-auto gpu-host)
declare -A args dirs
args[stock]="--mca coll tuned,libnbc,basic,self"
args[gpu-auto]="--mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend auto"
args[gpu-host]="--mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host"
dirs[stock]=$plugdir dirs[gpu-auto]=$plugdir dirs[gpu-host]=$plugdir
if [ -n "$basedir" ]; then
    names+=(base-auto base-host)
    args[base-auto]=${args[gpu-auto]} args[base-host]=${args[gpu-host]}
    dirs[base-auto]=$basedir dirs[base-host]=$basedir
fi


tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# bench_init: $n runs per cell, plugin $plugdir/mca_coll_gpu.so${basedir:+, base $basedir/mca_coll_gpu.so}"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
for np in "${nps[@]}"; do
    for ((i = 0; i < n; ++i)); do
        for c in "${names[@]}"; do
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            line=$(mpirun --allow-run-as-root --oversubscribe -np "$np" ${args[$c]} \
                --mca mca_base_component_path "${dirs[$c]}:$ompidir" ${MPIRUN_ARGS:-} "$bin" 2>"$tmp/err")
            rc=$?
            t1=$(date +%s.%N)
            if [ 0 -ne $rc ] || [ -z "$line" ]; then
                echo "bench_init.sh: np $np $c failed (rc $rc):" >&2
                head -20 "$tmp/err" >&2
                exit 1
            fi
            set -- $line
            echo "$2" >> "$tmp/$np.$c.init"
            echo "$4" >> "$tmp/$np.$c.barrier"
            echo "$6" >> "$tmp/$np.$c.fini"
            echo "$8" >> "$tmp/$np.$c.cpu"
            echo "$t1 $t0" | awk '{print $1 - $2}' >> "$tmp/$np.$c.wall"
        done
    done
done
echo "# load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians in ms (min: the smallest); init, barrier, cpu: slowest rank; finalize: rank 0;"
echo "# mpirun: the whole job; vs stock: median of the rounds' differences of init, then"
echo "# (the difference of the medians, of the smallest)"
printf "%-4s %-9s %8s %8s %8s %8s %8s %8s  %-24s %s\n" np config init "min" cpu barrier finalize \
    mpirun "vs stock" ""
fail=0
for np in "${nps[@]}"; do
    base=$(median < "$tmp/$np.stock.init")
    basemin=$(least < "$tmp/$np.stock.init")
    for c in "${names[@]}"; do
        i=$(median < "$tmp/$np.$c.init")
        m=$(least < "$tmp/$np.$c.init")
        u=$(median < "$tmp/$np.$c.cpu")
        b=$(median < "$tmp/$np.$c.barrier")
        f=$(median < "$tmp/$np.$c.fini")
        w=$(median < "$tmp/$np.$c.wall")
        d=$(paste "$tmp/$np.$c.init" "$tmp/$np.stock.init" | awk '{print $1 - $2}' | median |
            awk '{printf "%+.1f", $1 * 1e3}')
        dd=$(awk -v a="$i" -v s="$base" 'BEGIN {printf "%+.1f", (a - s) * 1e3}')
        dm=$(awk -v a="$m" -v s="$basemin" 'BEGIN {printf "%+.1f", (a - s) * 1e3}')
        verdict=""
        if [ stock != "$c" ]; then
            if awk -v d="$d" -v g="$goal" 'BEGIN {exit !(d + 0 <= g + 0)}'; then
                verdict="ok (goal <= $goal ms)"
            else
                verdict="OVER the $goal ms goal"
                case "$c" in gpu-*) fail=1 ;; esac
            fi
        fi
        awk -v np="$np" -v c="$c" -v i="$i" -v m="$m" -v u="$u" -v b="$b" -v f="$f" -v w="$w" \
            -v d="$d ($dd, $dm)" -v v="$verdict" \
            'BEGIN {printf "%-4s %-9s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %-24s %s\n", np, c,
                    i * 1e3, m * 1e3, u * 1e3, b * 1e3, f * 1e3, w * 1e3,
                    (c == "stock" ? "-" : d), v}'
    done
done
exit $fail
