#!/usr/bin/env bash
# How often each thread of the running processes named wakes up (voluntary context
# switches: it slept and was woken) and is preempted (involuntary ones), over a window:
# a thread sharing the ranks' cores that wakes thousands of times a second takes the core
# from the rank's spinning thread each time.
# Usage: thread_wakeups.sh process_name seconds [windows]: waits up to 30 s for the process,
# then prints each of the windows (default 1) of the seconds given, one after another.
set -uo pipefail
name=$1 secs=$2 windows=${3:-1}
snap() {
    for p in $(pgrep -x "$name"); do
        for t in /proc/"$p"/task/*; do
            [ -r "$t/status" ] || continue
            awk -v p="$p" -v t="${t##*/}" -v cpu="$(awk '{print $39}' "$t/stat" 2>/dev/null)" \
                '/^Name:/{n=$2} /^voluntary_ctxt_switches/{v=$2} /^nonvoluntary_ctxt_switches/{w=$2}
                 END{printf "%s %s %s %s %s %s\n", p, t, n, v, w, cpu}' "$t/status"
        done
    done
}
for _ in $(seq 1 300); do pgrep -x "$name" > /dev/null && break; sleep 0.1; done
a=$(snap)
for w in $(seq 1 "$windows"); do
    sleep "$secs"
    b=$(snap)
    [ -n "$b" ] || break
    echo "# threads of $name, window $w of $secs s: pid tid name wakeups/s preempted/s last_cpu"
    join -j1 <(echo "$a" | awk '{print $1":"$2, $3, $4, $5}' | sort) \
        <(echo "$b" | awk '{print $1":"$2, $4, $5, $6}' | sort) |
        awk -v s="$secs" '{split($1, k, ":"); printf "%s %s %-16s %9.0f %9.0f %s\n", k[1], k[2], $2, ($5-$3)/s, ($6-$4)/s, $7}' |
        sort -k4,4nr | head -20
    a=$b
done
