#!/usr/bin/env python3
"""Where the stalled calls of a bench_colls run came from.

Reads bench_colls' stall logs (CGPU_BENCH_STALL_LOG=prefix, one file a rank:
"side coll bytes start_ns length_ns cpu involuntary_switches") and noise_probe's gap log
("cpu start_ns length_ns", threads pinned on CPUs the ranks do not use), both in
CLOCK_MONOTONIC. For each side (ours, nccl), counts the calls over 50 us that
  - overlap a gap of 20 us or more on one of the probe's CPUs (the whole machine paused:
    the hypervisor or the host held several virtual CPUs at once),
  - else had an involuntary switch of the calling thread (its own CPU was taken),
  - else neither (the wait was elsewhere: the GPU, the peer, the bus).
A call stalls on both ranks when one rank stalls (the other waits for it), so each stall
is counted per rank; "paired" counts those that overlap a stall of another rank's (one
rank held the other), the rest were held on their own rank alone. Usage: stall_corr.py probe_log stall_log [stall_log ...]
"""
import bisect
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    gaps = []
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                gaps.append((int(p[1]), int(p[1]) + int(p[2]), int(p[0])))
    gaps.sort()
    starts = [g[0] for g in gaps]
    longest = max((g[1] - g[0] for g in gaps), default=0)
    stalls = []
    for rank, path in enumerate(sys.argv[2:]):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) == 7:
                    stalls.append((rank, p[0], p[1], int(p[2]), int(p[3]), int(float(p[4])),
                                   int(p[6])))
    rows = {}
    for rank, side, coll, nbytes, s, ln, sw in stalls:
        e = s + ln
        paired = any(o[0] != rank and o[1] == side and o[4] < e and o[4] + o[5] > s
                     for o in stalls)
        # a gap overlaps [s, e] when it starts before e and ends after s
        i = bisect.bisect_left(starts, s - longest)
        hit = False
        while i < len(gaps) and gaps[i][0] < e:
            if gaps[i][1] > s:
                hit = True
                break
            i += 1
        r = rows.setdefault(side, {"calls": 0, "machine": 0, "switched": 0,
                                   "neither": 0, "paired": 0, "us": 0.0,
                                   "examples": []})
        r["calls"] += 1
        r["paired"] += paired
        r["us"] += ln / 1e3
        kind = "machine" if hit else "switched" if sw > 0 else "neither"
        r[kind] += 1
        if kind == "neither" and len(r["examples"]) < 5:
            r["examples"].append("%s %d B %.0f us" % (coll, nbytes, ln / 1e3))
    print("probe gaps of 20 us or more: %d (longest %.0f us)" % (len(gaps), longest / 1e3))
    print("%-5s %7s %9s %7s %9s %9s %9s  %s" % ("side", "stalls", "total_us", "paired",
                                                "machine", "switched", "neither",
                                                "neither: examples"))
    for side in sorted(rows):
        r = rows[side]
        print("%-5s %7d %9.0f %7d %9d %9d %9d  %s" % (side, r["calls"], r["us"], r["paired"],
                                                     r["machine"], r["switched"], r["neither"],
                                                     "; ".join(r["examples"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
