#!/usr/bin/env bash
# test/mpi/fault_kill.sh - the kill case of test_fault (or its device twin test_cuda_fault):
#
#   bash test/mpi/fault_kill.sh EXE BOUND_S NAMES_RANK BARRIERS MPIRUN_ARGS...
#
# Runs EXE kill 1 at np 4 under MPIRUN_ARGS --enable-recovery (so that the launcher lets the
# survivors go on) and checks each survivor's result line (test/mpi/test_fault.c): the
# allreduce failed within BOUND_S seconds, the next call on the failed communicator failed
# with the same class, MPI_Barrier on it (and with BARRIERS "world" on MPI_COMM_WORLD and on
# a dup made before the death) failed within BOUND_S with that class, and with NAMES_RANK 1
# the error strings name rank 1 (MPI_COMM_WORLD's and the dup's always do): "rank 1
# (MPI_COMM_WORLD rank 1, ...) ... died" where its death was seen (its node), "... did not
# answer" where only its silence was (another node), and never the bare class's
# "known error not in list"; and no call returned MPI_SUCCESS with a wrong sum. FAULT_COUNT
# in the environment sets the allreduce's count (default 1 Mi ints). Exit status 0 when all
# hold, 1 otherwise, 77 when the program printed "skipped: <reason>" (no GPU).
# test/run_all.sh runs it on host buffers, bench/gpu_run.sh on device buffers.
set -u
exe=$1 bound=$2 names=$3 barriers=$4
shift 4
dir=$(mktemp -d)
"$@" --enable-recovery -np 4 "$exe" kill 1 "$dir" "$barriers" ${FAULT_COUNT:+"$FAULT_COUNT"} >"$dir/mpirun.log" 2>&1
echo "mpirun exit status $? (the killed rank makes it non-zero)"
if grep -q "^skipped: " "$dir/mpirun.log"; then
    grep -m1 "^skipped: " "$dir/mpirun.log"
    rm -rf "$dir"
    exit 77
fi
bad=0
for r in 0 2 3; do
    f="$dir/survivor.$r"
    if [ ! -s "$f" ]; then
        echo "rank $r wrote no result"
        bad=1
        continue
    fi
    cat "$f"
    # fields: rank R calls C failed F took T again_failed A again_took T2 same_class S, then
    # per barrier: barrier_<comm> failed took same_class names, then error ...
    awk -v b="$bound" '{ exit !($6 == 1 && $8 < b && $10 == 1 && $14 == 1) }' "$f" || {
        echo "rank $r: no error, or later than $bound s, or the failed communicator took a call or changed the class"
        bad=1
    }
    for c in comm $([ "$barriers" = world ] && echo world dup); do
        # MPI_COMM_WORLD and the dup name the rank wherever it is known
        need=$([ "$c" = comm ] && echo "$names" || echo 1)
        awk -v b="$bound" -v c="barrier_$c" -v need="$need" '{
            for (i = 1; i <= NF; ++i)
                if ($i == c)
                    exit !($(i + 1) == 1 && $(i + 2) < b && $(i + 3) == 1 && (need == 0 || $(i + 4) == 1))
            exit 1 }' "$f" || {
            echo "rank $r: MPI_Barrier on $c: no error, or later than $bound s, or another class, or its string does not name rank 1"
            bad=1
        }
    done
    # no call returned MPI_SUCCESS with a wrong sum (test_fault.c checks each against the host)
    if ! grep -q " wrong 0 first_call " "$f"; then
        echo "rank $r: a call succeeded with a wrong result"
        bad=1
    fi
    # every survivor's error says what happened in coll/gpu's words, never the bare class's
    # "known error not in list"
    if ! grep -q " error coll/gpu: " "$f" || grep -q "known error not in list" "$f"; then
        echo "rank $r: the error string is not coll/gpu's"
        bad=1
    fi
    if [ "$names" = 1 ] && ! grep -Eq "error coll/gpu: rank 1 \(MPI_COMM_WORLD rank 1, .*(died|did not answer)" "$f"; then
        echo "rank $r: the error string does not name rank 1 as dead or not answering"
        bad=1
    fi
done
grep -h "coll/gpu" "$dir/mpirun.log" | head -8
# the proxy names the rank it waited for, the watchdog the ranks that did not arrive, the
# liveness look the rank that died
grep -Eq "rank 1\b|not arrived: ([0-9]+, )*1\b" "$dir/mpirun.log" || {
    echo "no message names rank 1"
    bad=1
}
rm -rf "$dir"
exit $bad
