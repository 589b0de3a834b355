#!/usr/bin/env python3
"""Where Python's microseconds go: a C run and a Python run of the same collectives, each
under bench/pmpi_probe.so, set side by side per collective and size.

    probe_split.py C_OUT C_PROBE PY_OUT PY_PROBE [--lib cupy]

C_OUT: bench_colls' output; PY_OUT: bench_python.py --colls' output; C_PROBE, PY_PROBE: the
CGPU_PROBE_OUT prefixes of the two runs (files PREFIX.<rank>). Both programs let the probe
count their timed loops alone (MPI_Pcontrol), bench_python its `<lib>_buf_us` loops.

Columns, us a call: c_us (bench_colls' ours_us), c_in (inside MPI, the slowest rank's mean),
py_us (`<lib>_buf_us`), py_in, around (py_us - py_in: mpi4py and the interpreter), gap
(py_us - c_us: what the issue's bound is on) and gap_in (py_in - c_in: the calls themselves
running slower when a Python process makes them). Where bench_python ran with --c-loop, also
cloop (`<lib>_cloop_us`: the loop in C inside the Python process) and gap_proc (cloop - c_us:
what being a Python process costs, with no interpreter work between the calls). Then the
median of each over the cells.
Exit status 1 when a file is missing or no cell is in all four.
"""
import argparse
import glob
import statistics
import sys


def bucket(nbytes):
    """The probe's size class: the largest power of two not above nbytes."""
    return 1 << (int(nbytes).bit_length() - 1)


def c_figures(path):
    """{(coll, bytes): ours_us} from bench_colls' output."""
    out, coll = {}, None
    for line in open(path):
        f = line.split()
        if len(f) > 1 and f[0] == "#" and f[1][0].isalpha() and not f[1].startswith("MPI_"):
            coll = f[1]
        elif coll and len(f) > 2 and f[0].replace(".", "").isdigit():
            out[(coll, bucket(float(f[0])))] = float(f[1])
    return out


def py_figures(path, lib, kind):
    """{(coll, bytes): <lib>_<kind>} from bench_python.py --colls' output."""
    out, col = {}, None
    for line in open(path):
        f = line.split()
        if f[:2] == ["coll", "bytes"]:
            col = f.index(f"{lib}_{kind}") if f"{lib}_{kind}" in f else None
        elif col is not None and len(f) > col and f[1].isdigit():
            out[(f[0], bucket(int(f[1])))] = float(f[col])
    return out


def probe(prefix):
    """{(coll, bytes): the largest inside-MPI mean over ranks}."""
    files = sorted(glob.glob(glob.escape(prefix) + ".[0-9]*"))
    if not files:
        sys.exit(f"probe_split: no probe files {prefix}.<rank>")
    out = {}
    for path in files:
        for line in open(path):
            f = line.split()
            if len(f) == 4 and not line.startswith("#"):
                key = (f[0], int(f[1]))
                out[key] = max(out.get(key, 0.0), float(f[3]))
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("c_out", "c_probe", "py_out", "py_probe"):
        ap.add_argument(a)
    ap.add_argument("--lib", default="cupy")
    a = ap.parse_args()
    c, py = c_figures(a.c_out), py_figures(a.py_out, a.lib, "buf_us")
    cloop = py_figures(a.py_out, a.lib, "cloop_us")
    cin, pin = probe(a.c_probe), probe(a.py_probe)
    cols = ("c_us", "c_in", "py_us", "py_in", "around", "gap", "gap_in")
    cols += ("cloop", "gap_proc") if cloop else ()
    print(f"{'coll':>14} {'bytes':>8} " + " ".join(f"{k:>8}" for k in cols))
    rows = []
    keys = set(c) & set(py) & set(cin) & set(pin)
    if cloop:
        keys &= set(cloop)
    for key in sorted(keys):
        v = (c[key], cin[key], py[key], pin[key])
        row = v + (v[2] - v[3], v[2] - v[0], v[3] - v[1])
        row += (cloop[key], cloop[key] - v[0]) if cloop else ()
        rows.append(row)
        print(f"{key[0]:>14} {key[1]:>8} " + " ".join(f"{x:>8.2f}" for x in row))
    if not rows:
        sys.exit("probe_split: no collective and size is in all four inputs")
    med = [statistics.median(r[i] for r in rows) for i in range(len(cols))]
    print(f"{'median':>14} {len(rows):>8} " + " ".join(f"{x:>8.2f}" for x in med))
    return 0


if __name__ == "__main__":
    sys.exit(main())
