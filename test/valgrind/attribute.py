#!/usr/bin/env python3
"""Sort the reports of a valgrind memcheck log into ours and Open MPI's own.

A report is ours when any frame of its stack lies in mca_coll_gpu.so, names a function
of ours (cgpu_*, mca_coll_gpu_*) or one of our source files (coll_gpu_*.c, cgpu_*.c); valgrind runs with --keep-debuginfo=yes so frames of the
plugin keep their names after Open MPI unloads it at finalize. Every other report comes
from Open MPI's own libraries and components, PMIx, hwloc or libevent (MPI_Init and
MPI_Finalize leave dozens, uninitialised bytes written by PMIx among them), beyond what
Open MPI's shipped suppression file (openmpi-valgrind.supp) already removes; they are
counted and listed by library, not judged. Prints a summary; exits 1 when any report is
ours (the report is printed), 0 otherwise.
"""
import collections
import re
import sys

# also a frame in one of the plugin's source files (coll_gpu_*.c, cgpu_*.c/.h): a static
# function such as gpu_open shows only its name and "(coll_gpu_component.c:469)"
OURS = re.compile(r"mca_coll_gpu\.so|\bcgpu_\w+ \(|\bmca_coll_gpu_\w+ \(|"
                  r"\((coll_gpu_|cgpu_)\w*\.(c|h|cu):\d+\)")
KIND = re.compile(r"(Invalid|uninitialised|definitely lost|Mismatched|overlap|"
                  r"Source and destination|Use of|Conditional jump)")


def records(path):
    cur = []
    for line in open(path, errors="replace"):
        m = re.match(r"==(\d+)== (.*)", line.rstrip("\n"))
        if not m:
            continue
        body = m.group(2)
        if not body.strip():
            if cur:
                yield cur
            cur = []
            continue
        cur.append(body)
    if cur:
        yield cur


def origin(rec):
    """The first library in the stack that is not libc or valgrind's own."""
    for frame in rec[1:]:
        m = re.search(r"\(in ([^)]+)\)", frame)
        if m and "vgpreload" not in m.group(1) and "libc.so" not in m.group(1):
            return m.group(1).rsplit("/", 1)[-1]
    return "unknown"


def main():
    ours, theirs = [], collections.Counter()
    for path in sys.argv[1:]:
        for rec in records(path):
            if not KIND.search(rec[0]):
                continue
            if any(OURS.search(f) for f in rec):
                ours.append(rec)
            else:
                theirs[origin(rec)] += 1
    print("valgrind: %d reports in coll/gpu code; %d in Open MPI's own stack (%s)" % (
        len(ours), sum(theirs.values()),
        ", ".join("%s: %d" % kv for kv in theirs.most_common(6)) or "none"))
    for rec in ours[:10]:
        print("\n".join(rec[:40]))
        print("----")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
