#!/usr/bin/env bash
# Host buffers on the host backend against the stock collectives, in one run: bench/bench_host
# (OSU's timing) under three coll configurations, interleaved round by round so that a change
# of machine load hits each alike; the table shows each size's median over the rounds.
#   stock   --mca coll tuned,libnbc,basic,self
#   gpu     coll/gpu first, host backend, its default coll_gpu_host_rule (measured): what a
#           user of the host backend gets
#   engine  the same with coll_gpu_host_rule engine: the engine at every size (what the rule's
#           windows are read from)
# Columns: us of each, then gpu/stock and engine/stock (below 1: faster than stock).
#
# Usage: bench/bench_host.sh [rounds] [np ...]      (default 5 rounds, np 2)
# Environment: CGPU_PLUGIN_DIR  folder holding mca_coll_gpu.so (default: ./.libs)
#              BENCH_HOST_BIN   the program (default: ./bench/bench_host; make bench/bench_host)
#              BENCH_HOST_ARGS  its arguments (default: all 4194304)
#              MPIRUN_ARGS      more arguments for mpirun (e.g. --bind-to core)
#              BENCH_HOST_PREFIX  a command mpirun runs under, e.g. "chrt -f 10": real-time
#                               priority (root or CAP_SYS_NICE), so that other load on a shared
#                               machine does not preempt the ranks; only with a core a rank
#                               (a FIFO rank that spins never lets another onto its core)
# Run from the build directory, on an otherwise idle machine with a core a rank: spinning
# ranks that share cores measure the scheduler, not the collectives.
set -uo pipefail
# shellcheck source=bench/stats.sh
. "$(dirname "$0")/stats.sh"
rounds=${1:-5}
shift || true
nps=("$@")
[ ${#nps[@]} -gt 0 ] || nps=(2)
plugdir=${CGPU_PLUGIN_DIR:-$PWD/.libs}
bin=${BENCH_HOST_BIN:-$PWD/bench/bench_host}
[ -x "$bin" ] || { echo "bench_host.sh: $bin not built (make bench/bench_host)" >&2; exit 2; }
[ -e "$plugdir/mca_coll_gpu.so" ] || { echo "bench_host.sh: no mca_coll_gpu.so in $plugdir" >&2; exit 2; }
ompidir=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
# shellcheck disable=SC2206 # one word per argument
progargs=(${BENCH_HOST_ARGS:-all 4194304})

names=(stock gpu engine)
declare -A args
args[stock]="--mca coll tuned,libnbc,basic,self"
args[gpu]="--mca coll gpu,tuned,libnbc,basic,self --mca coll_gpu_backend host"
args[engine]="${args[gpu]} --mca coll_gpu_host_rule engine"
# shellcheck disable=SC2206 # one word per argument
run=(${BENCH_HOST_PREFIX:-} mpirun --oversubscribe --mca btl self,vader,tcp --mca mca_base_component_path "$plugdir:$ompidir")
[ "$(id -u)" -eq 0 ] && run+=(--allow-run-as-root)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# bench_host: $rounds rounds, plugin $plugdir/mca_coll_gpu.so, $(nproc) cores${BENCH_HOST_PREFIX:+, under $BENCH_HOST_PREFIX}"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for np in "${nps[@]}"; do
    for ((i = 0; i < rounds; ++i)); do
        for c in "${names[@]}"; do
            # shellcheck disable=SC2086
            if ! "${run[@]}" -np "$np" ${args[$c]} ${MPIRUN_ARGS:-} "$bin" "${progargs[@]}" \
                > "$tmp/out" 2> "$tmp/err" < /dev/null; then
                echo "bench_host.sh: np $np $c failed:" >&2
                cat "$tmp/out" "$tmp/err" | tail -20 >&2
                exit 1
            fi
            # a wrong result fails the run: bench_host exits 1 on BAD
            grep -v '^#' "$tmp/out" | awk -v c="$c" -v np="$np" -v d="$tmp" \
                '{print $3 >> (d "/" np "." c "." $1 "." $2)}'
        done
    done
done
echo "# load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-3s %-10s %9s %9s %9s %9s %9s %10s\n" np coll bytes stock gpu engine gpu/stk eng/stk
for np in "${nps[@]}"; do
    for f in "$tmp/$np.stock."*; do
        key=${f#"$tmp/$np.stock."}
        coll=${key%.*} bytes=${key##*.}
        s=$(median < "$f")
        g=$(median < "$tmp/$np.gpu.$key")
        e=$(median < "$tmp/$np.engine.$key")
        echo "$np $coll $bytes $s $g $e"
    done | sort -k2,2 -k3,3n | awk '{printf "%-3s %-10s %9s %9.2f %9.2f %9.2f %9.2f %10.2f\n",
        $1, $2, $3, $4, $5, $6, $5 / $4, $6 / $4}'
done
