#!/usr/bin/env python3
"""Interrupts and soft interrupts taken between two snapshots of /proc/interrupts and
/proc/softirqs (each snapshot: the two files concatenated), per CPU named and in all.

Usage: irq_diff.py before after [cpu,cpu,...]   (default CPUs 0,1: where Open MPI binds
two ranks). Prints each source that fired, largest first: its count on each CPU named and
on all CPUs, and its name.
"""
import sys


def parse(path):
    counts, names, ncpu = {}, {}, 0
    section = "irq"
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0].startswith("CPU"):  # a header: the CPUs of the lines below
                ncpu = len(p)
                section = "softirq" if section == "irq" and counts else section
                continue
            if not p[0].endswith(":"):
                continue
            vals = []
            for tok in p[1:1 + ncpu]:
                if not tok.isdigit():
                    break
                vals.append(int(tok))
            if not vals:
                continue
            key = section + " " + p[0].rstrip(":")
            counts[key] = vals
            names[key] = " ".join(p[1 + len(vals):])
    return counts, names


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cpus = [int(c) for c in (sys.argv[3] if len(sys.argv) > 3 else "0,1").split(",")]
    before, _ = parse(sys.argv[1])
    after, names = parse(sys.argv[2])
    rows = []
    for key, vals in after.items():
        old = before.get(key, [0] * len(vals))
        d = [v - (old[i] if i < len(old) else 0) for i, v in enumerate(vals)]
        if sum(d) > 0:
            rows.append((sum(d), key, [d[c] if c < len(d) else 0 for c in cpus]))
    rows.sort(reverse=True)
    print("%-22s %s %10s  %s" % ("source", " ".join("%9s" % ("cpu%d" % c) for c in cpus),
                                 "all", "name"))
    for total, key, per in rows[:25]:
        print("%-22s %s %10d  %s" % (key, " ".join("%9d" % v for v in per), total,
                                     names.get(key, "")[:60]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
