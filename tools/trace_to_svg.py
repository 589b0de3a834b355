#!/usr/bin/env python3
"""Render coll/gpu trace files (prof/trace_plugin.c output) as one SVG timeline: a row per
(process, track), a box per event (collectives on the communicator's row, steps on the
channel rows), coloured by kind. For the README picture and for a quick look without a
trace viewer.  Usage: trace_to_svg.py OUT.svg TRACE.json... [--window-us N]"""
import json
import sys
from html import escape

COLORS = {"allreduce": "#4e79a7", "alltoall": "#59a14f", "send": "#f28e2b",
          "recv": "#e15759", "recv_reduce_send": "#b07aa1", "recv_reduce_copy_send": "#9c755f",
          "recv_copy_send": "#edc948", "comm": "#bab0ac", "kernel": "#76b7b2"}


def color(name):
    for k in sorted(COLORS, key=len, reverse=True):  # longest prefix wins
        if name.startswith(k):
            return COLORS[k]
    return "#999999"


def main(argv):
    window = None
    if "--window-us" in argv:
        i = argv.index("--window-us")
        window = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    out, files = argv[1], argv[2:]
    rows, names, spans = [], {}, []
    for f in files:
        doc = json.load(open(f))
        for e in doc["traceEvents"]:
            if e.get("ph") == "M" and e["name"] == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e.get("ph") == "X":
                spans.append(e)
    if not spans:
        print("no events")
        return 1
    t0 = min(e["ts"] for e in spans)
    if window:
        spans = [e for e in spans if e["ts"] - t0 <= window]
    t1 = max(e["ts"] + e["dur"] for e in spans)
    for key in sorted({(e["pid"], e["tid"]) for e in spans}):
        rows.append(key)
    width, left, rowh = 1100, 260, 22
    scale = (width - left - 10) / max(t1 - t0, 1e-9)
    h = 40 + rowh * len(rows) + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{h}" fill="white"/>',
           f'<text x="10" y="20" font-size="13">coll/gpu trace: {len(spans)} events, '
           f'{t1 - t0:.0f} us</text>']
    for i, key in enumerate(rows):
        y = 35 + i * rowh
        label = f"rank {key[0]}: " + names.get(key, f"track {key[1]}")
        svg.append(f'<text x="5" y="{y + 14}">{escape(label[:42])}</text>')
        svg.append(f'<line x1="{left}" y1="{y + rowh - 2}" x2="{width - 10}" y2="{y + rowh - 2}" '
                   f'stroke="#eee"/>')
    for e in spans:
        y = 35 + rows.index((e["pid"], e["tid"])) * rowh
        x = left + (e["ts"] - t0) * scale
        w = max(e["dur"] * scale, 0.8)
        svg.append(f'<rect x="{x:.2f}" y="{y + 2}" width="{w:.2f}" height="{rowh - 6}" '
                   f'fill="{color(e["name"])}"><title>{escape(e["name"])} '
                   f'{e["dur"]:.1f} us {escape(json.dumps(e.get("args", {})))}</title></rect>')
    lx = left
    for k, v in COLORS.items():
        svg.append(f'<rect x="{lx}" y="{h - 22}" width="10" height="10" fill="{v}"/>'
                   f'<text x="{lx + 13}" y="{h - 13}">{k}</text>')
        lx += 13 + 7 * len(k) + 12
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg))
    print(f"wrote {out}: {len(rows)} rows, {len(spans)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
