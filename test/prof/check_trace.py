#!/usr/bin/env python3
"""Check trace files written by prof/trace_plugin.c: each parses as JSON (Chrome trace
format), has collective events, and on every track (pid, tid) the complete events nest
properly: any two either do not overlap or one contains the other.
Usage: check_trace.py FILE... ; exit 0 when every file passes."""
import json
import sys

EPS = 0.002  # us: timestamps are printed with 3 decimals


def check(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    colls = [e for e in spans if e["name"].startswith(("allreduce", "alltoall"))]
    if not colls:
        return f"{path}: no collective events"
    tracks = {}
    for e in spans:
        if e["dur"] < 0:
            return f"{path}: negative duration in {e}"
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for key, evs in tracks.items():
        evs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, t, name in evs:
            while stack and stack[-1][1] <= s + EPS:
                stack.pop()
            if stack and t > stack[-1][1] + EPS:
                return f"{path}: track {key}: '{name}' [{s}, {t}] overlaps '{stack[-1][2]}' " \
                       f"[{stack[-1][0]}, {stack[-1][1]}] without nesting"
            stack.append((s, t, name))
    named = {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    unnamed = {tid for (_, tid) in tracks} - named
    if unnamed:
        return f"{path}: tracks without a name: {sorted(unnamed)}"
    print(f"{path}: {len(spans)} events on {len(tracks)} tracks, {len(colls)} collectives: ok")
    return None


def self_test():
    """The checker must reject a trace whose events overlap without nesting."""
    import os
    import tempfile
    good = {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "t"}},
        {"ph": "X", "name": "allreduce ring", "pid": 0, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "send", "pid": 0, "tid": 1, "ts": 1, "dur": 2}]}
    bad = json.loads(json.dumps(good))
    bad["traceEvents"][2]["dur"] = 20  # sticks out of its parent
    results = []
    for doc in (good, bad):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        results.append(check(f.name))
        os.unlink(f.name)
    ok = results[0] is None and results[1] is not None
    print("check_trace self-test:", "ok" if ok else f"FAILED {results}")
    return 0 if ok else 1


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) < 2:
        print("check_trace.py: no trace files given")
        return 1
    errors = [err for err in (check(p) for p in sys.argv[1:]) if err]
    for err in errors:
        print("FAIL", err)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
