#!/usr/bin/env python3
"""Sort AddressSanitizer / LeakSanitizer reports of MPI runs into ours and Open MPI's.

Any ASan error (overflow, use after free, ...) fails, wherever it is. A leak is ours when
the first frame above the allocator (past libasan's interceptors and libc's allocating
helpers such as strdup or vasprintf) is in our plugin: a function cgpu_* or mca_coll_gpu_*,
or the module mca_coll_gpu.so. Every other leak was allocated by Open MPI itself, its
runtime or its components (MPI_Init keeps such memory until exit) and is only counted,
by the module that allocated it. Runs use full unwinding and preload the plugin
(so Open MPI's dlclose at finalize does not unmap it), so frames keep their names.
Exits 1 when any report is ours or any non-leak error appears.
"""
import collections
import re
import sys

OURS = re.compile(r"\bcgpu_\w+|\bmca_coll_gpu_\w+|mca_coll_gpu\.so")
SKIP = re.compile(r"libasan|asan_|__interceptor|libc\.so|libio/|strdup|vasprintf|asprintf|"
                  r"/string/|malloc|calloc|realloc")


def reports(text):
    """(headline, frames) for each report in an ASan log."""
    cur = None
    for line in text.splitlines():
        if re.match(r"(Direct|Indirect) leak of", line) or "ERROR: AddressSanitizer" in line:
            if cur:
                yield cur
            cur = (line.strip(), [])
        elif cur and re.match(r"\s+#\d+ ", line):
            cur[1].append(line.strip())
        elif cur and not line.strip() and cur[1]:
            yield cur
            cur = None
    if cur:
        yield cur


def first_caller(frames):
    for f in frames:
        if not SKIP.search(f):
            return f
    return frames[-1] if frames else ""


def module(frame):
    m = re.search(r"\(([^()+]+)\+0x", frame) or re.search(r" (/\S+):\d+", frame)
    return m.group(1).rsplit("/", 1)[-1] if m else "unknown"


def main():
    ours, errors, theirs = [], [], collections.Counter()
    for path in sys.argv[1:]:
        for head, frames in reports(open(path, errors="replace").read()):
            if "ERROR: AddressSanitizer" in head:
                errors.append((head, frames))
                continue
            caller = first_caller(frames)
            if OURS.search(caller):
                ours.append((head, frames))
            else:
                theirs[module(caller)] += 1
    print("asan: %d errors, %d leaks allocated by coll/gpu, %d by Open MPI's own stack (%s)" % (
        len(errors), len(ours), sum(theirs.values()),
        ", ".join("%s: %d" % kv for kv in theirs.most_common(5)) or "none"))
    for head, frames in (errors + ours)[:8]:
        print(head)
        print("\n".join("    " + f for f in frames[:20]))
    return 1 if ours or errors else 0


if __name__ == "__main__":
    sys.exit(main())
