#!/usr/bin/env python3
"""Sort AddressSanitizer / LeakSanitizer reports of MPI runs into ours and Open MPI's.

Any ASan error (overflow, use after free, ...) fails, wherever it is. A leak is ours when
the first frame above the allocator (past libasan's interceptors and libc's allocating
helpers such as strdup or vasprintf) is in our plugin: a function cgpu_* or mca_coll_gpu_*,
or the module mca_coll_gpu.so. Every other leak was allocated by Open MPI itself, its
runtime or its components (MPI_Init keeps such memory until exit) and is only counted,
by the module that allocated it. Runs use full unwinding and preload the plugin
(so Open MPI's dlclose at finalize does not unmap it), so frames keep their names.

LeakSanitizer symbolizes at exit, after Open MPI has unloaded the components it allocated
from, and names such a frame after the loaded module nearest below its address (it does not
check the module's end): a frame "mca_coll_gpu.so+OFFSET" whose offset lies past the end of
the plugin's loaded image belongs to an unloaded component, and is counted as unknown.
Exits 1 when any report is ours or any non-leak error appears.
"""
import collections
import re
import struct
import sys

_SPANS = {}


def image_end(path):
    """End of the loaded image (highest PT_LOAD vaddr + memsz) of an ELF64 file, or None."""
    if path not in _SPANS:
        end = None
        try:
            with open(path, "rb") as f:
                data = f.read()
            if data[:4] == b"\x7fELF" and data[4] == 2:
                phoff, = struct.unpack_from("<Q", data, 0x20)
                phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
                for i in range(phnum):
                    o = phoff + i * phentsize
                    ptype, = struct.unpack_from("<I", data, o)
                    if ptype == 1:  # PT_LOAD
                        vaddr, = struct.unpack_from("<Q", data, o + 0x10)
                        memsz, = struct.unpack_from("<Q", data, o + 0x28)
                        end = max(end or 0, vaddr + memsz)
        except OSError:
            end = None
        _SPANS[path] = end
    return _SPANS[path]


def outside_image(frame):
    """True for a frame named after our plugin whose offset is past the plugin's image."""
    m = re.search(r"\((/[^()+]*mca_coll_gpu\.so)\+(0x[0-9a-f]+)\)", frame)
    if not m:
        return False
    end = image_end(m.group(1))
    return end is not None and int(m.group(2), 16) >= end

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
