#!/usr/bin/env python3
"""Sort AddressSanitizer / LeakSanitizer reports of MPI runs into ours and Open MPI's.

Any ASan error (overflow, use after free, ...) fails, wherever it is. A leak is ours when
the first frame above the allocator (past libasan's interceptors and libc's allocating
helpers such as strdup or vasprintf) is in our plugin: a function cgpu_* or mca_coll_gpu_*,
a source file of the plugin in this repository, or the module mca_coll_gpu.so. Every other leak was allocated by Open MPI itself, its
runtime or its components (MPI_Init keeps such memory until exit) and is only counted,
by the module that allocated it. Runs use full unwinding and preload the plugin
(so Open MPI's dlclose at finalize does not unmap it), so frames keep their names.

LeakSanitizer symbolizes at exit, after Open MPI has unloaded the components it allocated
from, and may name such a frame after our plugin: a frame "mca_coll_gpu.so+OFFSET" whose
offset is not in one of the plugin's executable segments (past its image, or in its data or
bss, where no return address can be) belongs to an unloaded component, and is counted as
such.
Exits 1 when any report is ours or any non-leak error appears.
"""
import collections
import os
import re
import struct
import sys

_SPANS = {}


def code_spans(path):
    """[(start, end)] of the executable PT_LOAD segments of an ELF64 file, or None."""
    if path not in _SPANS:
        spans = None
        try:
            with open(path, "rb") as f:
                data = f.read()
            if data[:4] == b"\x7fELF" and data[4] == 2:
                spans = []
                phoff, = struct.unpack_from("<Q", data, 0x20)
                phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
                for i in range(phnum):
                    o = phoff + i * phentsize
                    ptype, pflags = struct.unpack_from("<II", data, o)
                    if ptype == 1 and pflags & 1:  # PT_LOAD with PF_X
                        vaddr, = struct.unpack_from("<Q", data, o + 0x10)
                        memsz, = struct.unpack_from("<Q", data, o + 0x28)
                        spans.append((vaddr, vaddr + memsz))
        except OSError:
            spans = None
        _SPANS[path] = spans
    return _SPANS[path]


def outside_image(frame):
    """True for a frame named after our plugin that is not our code: one without a function
    name (the plugin keeps its symbols, so ASan names every frame of ours), or one whose
    offset is not in an executable segment (past the image, or in its data or bss, where no
    return address can be): another module's, an unloaded component's, named after us."""
    m = re.search(r"\((/[^()+]*mca_coll_gpu\.so)\+(0x[0-9a-f]+)\)", frame)
    if not m:
        return False
    if not re.match(r"#\d+ 0x[0-9a-f]+ in \S", frame):
        return True  # our plugin keeps its symbols: a frame of ours always has a name
    spans = code_spans(m.group(1))
    off = int(m.group(2), 16)
    return spans is not None and not any(a <= off < b for a, b in spans)

# the plugin's sources, where a frame symbolized with file:line names them (static functions
# such as gpu_open carry no cgpu_ / mca_coll_gpu_ prefix)
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OURS = re.compile(r"\bcgpu_\w+|\bmca_coll_gpu_\w+|mca_coll_gpu\.so|" +
                  re.escape(_REPO) + r"/(coll_gpu|ras|btl_glue|kernels|prof)/\S+:\d+")
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
    if outside_image(frame):
        return "unloaded component"
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
            if OURS.search(caller) and not outside_image(caller):
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
