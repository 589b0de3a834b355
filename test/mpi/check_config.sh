#!/usr/bin/env bash
# test/mpi/check_config.sh - every misconfiguration of coll/gpu explained once, and help texts
# that list every value the code has.
#
# 1. Runs config_probe.c (built here with mpicc) at np 2 under each wrong setting below, and
#    checks the exit status, that exactly one line of coll/gpu's ("coll/gpu:") appears and
#    that it holds the words given (the parameter, the value), and whether coll/gpu still
#    served the job (a wrong number takes its default; the probe reads coll_gpu_engine_calls).
#    A correct run must print no line of ours.
# 2. Checks that `ompi_info --param coll gpu --level 9` lists every control and performance
#    variable the component registers (as MPI_T lists them), that each description of an
#    enumerated variable names every value of its enumerator (config_probe texts), and that
#    coll_gpu_nb_engine's help names every non-blocking entry point the module installs.
# 3. Checks the reference pages against the same lists (test/docs/check_tables.py):
#    docs/mca-parameters.md lists every parameter `ompi_info --parsable` reports and no other,
#    with its default and the values of its enumerator; docs/pvars.md every pvar MPI_T lists
#    and no other, under its binding, with its class and the values of its enumerator.
#
# Prints "ok <case>" / "FAIL <case>: why" (with the run's output) per case, then
# "N checks, M failed"; exit status 0 only when nothing failed.
# Environment: CGPU_PLUGIN_DIR (default <repo>/.libs), CGPU_CONFIG_TIMEOUT (s per run, 120).

set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PLUGIN_DIR=${CGPU_PLUGIN_DIR:-$REPO/.libs}
TMO=${CGPU_CONFIG_TIMEOUT:-120}
work=$(mktemp -d "${TMPDIR:-/tmp}/cgpu-config.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

if ! mpicc -O1 -o "$work/probe" "$REPO/test/mpi/config_probe.c" >"$work/mpicc.log" 2>&1; then
    echo "FAIL build: mpicc test/mpi/config_probe.c"
    cat "$work/mpicc.log"
    exit 1
fi
pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | cut -d: -f3)
MPIRUN=(mpirun --oversubscribe --bind-to none --mca btl self,vader,tcp
    --mca mca_base_component_path "$PLUGIN_DIR:$pkglibdir")
if [ "$(id -u)" -eq 0 ]; then
    MPIRUN+=(--allow-run-as-root)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
FULL=gpu,tuned,libnbc,basic,self # the list the hint recommends

checks=0
failed=0
fail() { # case why [log]
    echo "FAIL $1: $2"
    failed=$((failed + 1))
    [ -n "${3:-}" ] && sed 's/^/    | /' "$3"
}

# expect CASE RC SERVED WORDS -- MPIRUN_ARGS...
#   RC: 0 or "nonzero"; SERVED: yes (coll/gpu served the allreduce), no, or - (not asked);
#   WORDS: "|"-separated strings the one line must hold, or "" for a run that must print none
expect() {
    local name=$1 want_rc=$2 want_served=$3 words=$4 log rc n line calls w
    shift 5
    checks=$((checks + 1))
    log="$work/$name.log"
    timeout -k 10 "$TMO" "${MPIRUN[@]}" -np 2 "$@" "$work/probe" >"$log" 2>&1 </dev/null
    rc=$?
    n=$(grep -c 'coll/gpu:' "$log")
    if [ "$want_rc" = 0 ] && [ "$rc" -ne 0 ]; then
        fail "$name" "exit status $rc, expected 0" "$log"
        return
    fi
    if [ "$want_rc" = nonzero ] && [ "$rc" -eq 0 ]; then
        fail "$name" "exit status 0, expected a failed MPI_Init" "$log"
        return
    fi
    if [ -z "$words" ]; then
        if [ "$n" -ne 0 ]; then
            fail "$name" "$n lines of coll/gpu's, expected none" "$log"
            return
        fi
    else
        if [ "$n" -ne 1 ]; then
            fail "$name" "$n lines of coll/gpu's, expected exactly one" "$log"
            return
        fi
        line=$(grep 'coll/gpu:' "$log")
        IFS='|' read -r -a ws <<<"$words"
        for w in "${ws[@]}"; do
            if [[ "$line" != *"$w"* ]]; then
                fail "$name" "the line does not say \"$w\"" "$log"
                return
            fi
        done
    fi
    calls=$(sed -n 's/^probe: engine_calls \(-\{0,1\}[0-9]*\)$/\1/p' "$log")
    if [ "$want_served" = yes ] && ! [ "${calls:-0}" -gt 0 ] 2>/dev/null; then
        fail "$name" "coll/gpu did not serve the job (engine_calls ${calls:-unread}), expected the default to" "$log"
        return
    fi
    if [ "$want_served" = no ] && [ "${calls:-0}" -gt 0 ] 2>/dev/null; then
        fail "$name" "coll/gpu served the job (engine_calls $calls), expected the other components to" "$log"
        return
    fi
    echo "ok $name${line:+: $line}" | sed 's/\[[^]]*\] //'
}

HOST=(--mca coll "$FULL" --mca coll_gpu_backend host --mca coll_gpu_host_rule engine)

# ---- 1. one line per mistake, on rank 0 ----
expect correct 0 yes "" -- "${HOST[@]}"
expect coll_gpu_alone nonzero - "--mca coll gpu|gpu,tuned,libnbc,basic,self" -- --mca coll gpu
expect coll_gpu_alone_host nonzero - "--mca coll gpu|gpu,tuned,libnbc,basic,self" -- \
    --mca coll gpu --mca coll_gpu_backend host
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "ok backend_cuda_no_gpu (skipped: this machine has a GPU)"
else
    expect backend_cuda_no_gpu 0 no "coll_gpu_backend = cuda|no usable GPU|other coll components" -- \
        --mca coll "$FULL" --mca coll_gpu_backend cuda
fi
for v in 0 5 20; do
    expect "priority_$v" 0 yes "coll_gpu_priority = $v |tuned|above 30|uses 40" -- "${HOST[@]}" \
        --mca coll_gpu_priority "$v"
done
for pv in slots:abc slots:-5 slots:0 slot_bytes:0 slot_bytes:7 alltoall_stage_bytes:1 \
    ras_timeout:-7 max_comms:-1; do
    p=${pv%%:*} v=${pv#*:}
    expect "${p}_$v" 0 yes "coll_gpu_$p = |$v|default" -- "${HOST[@]}" --mca "coll_gpu_$p" "$v"
done
expect slot_bytes_100 0 yes "coll_gpu_slot_bytes = 100|multiple of 64|uses 64" -- "${HOST[@]}" \
    --mca coll_gpu_slot_bytes 100

# ---- 2. what ompi_info and MPI_T list, and the texts that enumerate values ----
checks=$((checks + 1))
timeout -k 10 "$TMO" "${MPIRUN[@]}" -np 1 "${HOST[@]}" "$work/probe" texts >"$work/texts.log" 2>&1 </dev/null
rc=$?
if [ "$rc" -ne 0 ] || grep -q '^BAD' "$work/texts.log" || ! grep -q '^enumerators checked: [1-9]' "$work/texts.log"; then
    fail texts_name_every_value "a description misses a value of its enumerator (or the probe failed, status $rc)" \
        "$work/texts.log"
else
    echo "ok texts_name_every_value: $(grep '^enumerators checked' "$work/texts.log")"
fi

checks=$((checks + 1))
if ! OMPI_MCA_mca_base_component_path="$PLUGIN_DIR:$pkglibdir" ompi_info --param coll gpu --level 9 \
    >"$work/ompi_info.txt" 2>&1; then
    fail ompi_info_lists_all "ompi_info failed" "$work/ompi_info.txt"
else
    missing=""
    nvars=0
    while read -r _ v _; do
        nvars=$((nvars + 1))
        grep -q "\"$v\"" "$work/ompi_info.txt" || missing="$missing $v"
    done < <(grep -E '^(cvar|pvar) ' "$work/texts.log" |
        grep -v -E '_(major|minor|release)_version$') # Open MPI's own, of every component
    if [ "$nvars" -eq 0 ] || [ -n "$missing" ]; then
        fail ompi_info_lists_all "MPI_T lists $nvars variables; ompi_info misses:${missing:- (none listed)}"
    else
        echo "ok ompi_info_lists_all: $nvars variables"
    fi
fi

# as ompi_info shows them: every quoted "Valid values" entry is an entry of the "Values: "
# list of the help line above it ("Values: v (", ", v,", ", v." ...)
checks=$((checks + 1))
bad=$(awk '/Valid values: .*"/ {
        rest = $0
        list = substr(prev, index(prev, "Values: "))
        while (match(rest, /"[^"]+"/)) {
            v = substr(rest, RSTART + 1, RLENGTH - 2)
            found = 0
            split("Values: |, ", pre, "|")
            split(" (|,|.", post, "|")
            for (a in pre) for (b in post) if (index(prev, "Values: ") && index(list, pre[a] v post[b])) found = 1
            if (!found) { print name ": " v }
            rest = substr(rest, RSTART + RLENGTH)
        }
    }
    /MCA coll gpu: parameter/ { name = $5 }
    { prev = $0 }' "$work/ompi_info.txt")
nenum=$(grep -c 'Valid values: .*"' "$work/ompi_info.txt")
if [ -n "$bad" ] || [ "$nenum" -eq 0 ]; then
    fail ompi_info_help_names_values "of $nenum enumerated parameters, help lines miss:$(echo; echo "$bad")"
else
    echo "ok ompi_info_help_names_values: $nenum enumerated parameters"
fi

# the non-blocking entry points the module installs (from MCA_COLL_GPU_NB_ENGINE_OPS, which
# coll_gpu_module.c expands into slot assignments) against the help
checks=$((checks + 1))
slots=""
# (MPI_Ibarrier is installed by name: it moves no data and is not an engine operation)
if grep -q 'MCA_COLL_GPU_NB_ENGINE_OPS(NB_INSTALL)' "$REPO/coll_gpu/coll_gpu_module.c" &&
    ! grep 's->coll_i[a-z_]* = mca_coll_gpu_' "$REPO/coll_gpu/coll_gpu_module.c" |
    grep -qv 's->coll_ibarrier = '; then
    slots=$(sed -n '/^#define MCA_COLL_GPU_NB_ENGINE_OPS/,/^\/\//p' "$REPO/coll_gpu/coll_gpu_params.h" |
        grep -o 'X(i[a-z_]*' | sed 's/X(//' | sort -u)
fi
help=$(grep -A1 '"coll_gpu_nb_engine"' "$work/ompi_info.txt" | tail -1)
if [ -z "$slots" ]; then
    fail nb_engine_help_lists_every_op "coll_gpu_module.c does not install the non-blocking forms from MCA_COLL_GPU_NB_ENGINE_OPS (update this test if they moved)"
else
    bad=""
    for s in $slots; do
        [[ "$help" == *"MPI_${s^}"* ]] || bad="$bad MPI_${s^}"
    done
    for m in $(grep -o 'MPI_I[a-z_]*' <<<"$help" | sort -u); do
        s=${m#MPI_}
        grep -qx "${s,}" <<<"$slots" || bad="$bad $m(not installed)"
    done
    if [ -n "$bad" ]; then
        fail nb_engine_help_lists_every_op "coll_gpu_nb_engine's help and the installed entry points differ:$bad"
    else
        echo "ok nb_engine_help_lists_every_op: $(wc -w <<<"$slots") operations"
    fi
fi

# ---- 3. the reference pages against what the component registers ----
checks=$((checks + 1))
# the defaults as registered: no setting of the caller's environment or HOME's mca-params.conf
mine=$(env | sed -n 's/^\(OMPI_MCA_coll_gpu_[A-Za-z0-9_]*\)=.*/-u \1/p')
# shellcheck disable=SC2086 # one "-u NAME" pair per variable
if ! env $mine OMPI_MCA_mca_base_component_path="$PLUGIN_DIR:$pkglibdir" HOME="$work" \
    ompi_info --param coll gpu --level 9 --parsable >"$work/ompi_info.parsable" 2>&1; then
    fail docs_mca_parameters "ompi_info --parsable failed" "$work/ompi_info.parsable"
elif python3 "$REPO/test/docs/check_tables.py" params "$work/ompi_info.parsable" \
    "$REPO/docs/mca-parameters.md" >"$work/params.diff" 2>&1; then
    echo "ok docs_mca_parameters: $(tail -n 1 "$work/params.diff")"
else
    fail docs_mca_parameters "docs/mca-parameters.md and ompi_info differ" "$work/params.diff"
fi
checks=$((checks + 1))
if python3 "$REPO/test/docs/check_tables.py" pvars "$work/texts.log" "$REPO/docs/pvars.md" \
    >"$work/pvars.diff" 2>&1; then
    echo "ok docs_pvars: $(tail -n 1 "$work/pvars.diff")"
else
    fail docs_pvars "docs/pvars.md and the pvars MPI_T lists differ" "$work/pvars.diff"
fi

echo "$checks checks, $failed failed"
[ "$failed" -eq 0 ]
