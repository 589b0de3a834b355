#!/usr/bin/env python3
"""Plot bench/bench_colls output as an SVG: latency (small sizes) and busbw (large sizes),
ours against NCCL, one line per collective and library. No dependencies.

    python3 tools/bench_plot.py out.svg "title" bench/results/a.txt [b.txt ...]

Each input is bench_colls' output: '# <name> ...' headers followed by rows
'bytes ours_us ours_busbw nccl_us nccl_busbw bw_ratio lat_ratio check'.
"""
import math
import sys


def parse(paths):
    series = {}
    for path in paths:
        name = None
        with open(path) as f:
            for line in f:
                if line.startswith("# "):
                    name = line[2:].split()[0]
                    continue
                cols = line.split()
                if name is None or len(cols) < 8 or not cols[0].isdigit():
                    continue
                b = int(cols[0])
                s = series.setdefault(name, {})
                s[b] = (float(cols[1]), float(cols[2]), float(cols[3]), float(cols[4]))
    return series


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def fmt_bytes(b):
    for unit, n in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if b >= n:
            return f"{b // n}{unit}"
    return f"{b}B"


def panel(out, x0, y0, w, h, title, lines, xlog_range, yrange, ylabel, ylog=False):
    (xa, xb), (ya, yb) = xlog_range, yrange

    def px(b):
        return x0 + (math.log2(b) - math.log2(xa)) / (math.log2(xb) - math.log2(xa)) * w

    def py(v):
        if ylog:
            v = max(v, ya)
            return y0 + h - (math.log10(v) - math.log10(ya)) / (math.log10(yb) - math.log10(ya)) * h
        return y0 + h - (v - ya) / (yb - ya) * h

    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 - 10}" text-anchor="middle" font-size="14">{title}</text>')
    out.append(f'<text x="{x0 - 45}" y="{y0 + h / 2}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 {x0 - 45} {y0 + h / 2})">{ylabel}</text>')
    b = xa
    while b <= xb:
        x = px(b)
        out.append(f'<line x1="{x}" y1="{y0 + h}" x2="{x}" y2="{y0 + h + 4}" stroke="#444"/>')
        out.append(f'<text x="{x}" y="{y0 + h + 16}" text-anchor="middle" font-size="10">{fmt_bytes(b)}</text>')
        b *= 4
    for i in range(6):
        v = ya + (yb - ya) * i / 5
        y = py(v)
        out.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + w}" y2="{y}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end" font-size="10">{v:.0f}</text>')
    for k, (label, pts, color, dash) in enumerate(lines):
        pts = [(b, v) for b, v in pts if xa <= b <= xb]
        if not pts:
            continue
        d = " ".join(f"{px(b):.1f},{py(v):.1f}" for b, v in pts)
        style = ' stroke-dasharray="5,4"' if dash else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{style}/>')
        ly = y0 + 14 + 15 * k
        out.append(f'<line x1="{x0 + 10}" y1="{ly - 4}" x2="{x0 + 30}" y2="{ly - 4}" stroke="{color}" '
                   f'stroke-width="2"{style}/>')
        out.append(f'<text x="{x0 + 35}" y="{ly}" font-size="11">{label}</text>')


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    dst, title, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    series = parse(paths)
    names = sorted(series)
    lat_lines, bw_lines = [], []
    lat_max, bw_max = 1.0, 1.0
    for i, name in enumerate(names):
        s = series[name]
        color = COLORS[i % len(COLORS)]
        small = sorted((b, v) for b, v in s.items() if b <= 65536)
        large = sorted((b, v) for b, v in s.items() if b >= 1 << 20)
        if small:
            lat_lines.append((f"{name} ours", [(b, v[0]) for b, v in small], color, False))
            lat_lines.append((f"{name} NCCL", [(b, v[2]) for b, v in small], color, True))
            lat_max = max(lat_max, max(max(v[0], v[2]) for _, v in small))
        if large:
            bw_lines.append((f"{name} ours", [(b, v[1]) for b, v in large], color, False))
            bw_lines.append((f"{name} NCCL", [(b, v[3]) for b, v in large], color, True))
            bw_max = max(bw_max, max(max(v[1], v[3]) for _, v in large))
    largest = max((b for s in series.values() for b in s), default=1 << 30)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="470" '
           'font-family="sans-serif">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="500" y="22" text-anchor="middle" font-size="16">{title}</text>']
    panel(out, 80, 60, 380, 360, "latency, 8 B to 64 KB (lower is better)", lat_lines,
          (8, 65536), (0, math.ceil(lat_max / 5) * 5), "microseconds per call")
    panel(out, 580, 60, 380, 360, "busbw from 1 MB (higher is better)", bw_lines,
          (1 << 20, largest), (0, math.ceil(bw_max / 50) * 50), "busbw GB/s")
    out.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
