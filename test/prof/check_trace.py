#!/usr/bin/env python3
"""Check trace files written by prof/trace_plugin.c: each parses as JSON (Chrome trace
format), has collective events, and on every track (pid, tid) the complete events nest
properly: any two either do not overlap or one contains the other. Transport events are
async pairs ("b"/"e", same id): each begins once, ends once, not before it began, and
lies inside a collective of its communicator's track.
Usage: check_trace.py [--transport] FILE... ; --transport: every file must have transport
events (host-backend ring collectives post items); exit 0 when every file passes."""
import json
import sys

EPS = 0.002  # us: timestamps are printed with 3 decimals


def check_async(path, events, spans):
    """(error or None, number of transport pairs)"""
    begins, ends = {}, {}
    for e in events:
        if e.get("ph") in ("b", "e"):
            key = (e["pid"], e.get("cat"), e["id"])
            table = begins if e["ph"] == "b" else ends
            if key in table:
                return f"{path}: async event {key} {e['ph']} twice", 0
            table[key] = e
    if set(begins) != set(ends):
        return f"{path}: async events without a partner: {sorted(set(begins) ^ set(ends))[:3]}", 0
    colls = {}
    for e in spans:
        if "/" not in e["name"] and e["name"].split()[0] in COLL_KINDS:
            colls.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for key, b in begins.items():
        e = ends[key]
        if e["ts"] + EPS < b["ts"]:
            return f"{path}: async event {key} ends before it begins", 0
        inside = any(s - EPS <= b["ts"] and e["ts"] <= t + EPS
                     for s, t in colls.get((b["pid"], b["tid"]), []))
        if not inside:
            return f"{path}: transport event {key} [{b['ts']}, {e['ts']}] outside every " \
                   f"collective of track {b['tid']}", 0
    return None, len(begins)


COLL_KINDS = ("allreduce", "alltoall", "bcast", "allgather", "reduce", "reduce_scatter_block")


def check(path, want_transport=False):
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
    err, pairs = check_async(path, events, spans)
    if err:
        return err
    if want_transport and not pairs:
        return f"{path}: no transport events"
    named = {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    unnamed = {tid for (_, tid) in tracks} - named
    if unnamed:
        return f"{path}: tracks without a name: {sorted(unnamed)}"
    print(f"{path}: {len(spans)} events on {len(tracks)} tracks, {len(colls)} collectives, "
          f"{pairs} transport operations: ok")
    return None


def self_test():
    """The checker must reject a trace whose events overlap without nesting."""
    import os
    import tempfile
    good = {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "t"}},
        {"ph": "X", "name": "allreduce ring", "pid": 0, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "send", "pid": 0, "tid": 1, "ts": 1, "dur": 2}]}
    good["traceEvents"] += [
        {"ph": "b", "cat": "transport", "id": 1, "name": "t", "pid": 0, "tid": 1, "ts": 2},
        {"ph": "b", "cat": "transport", "id": 2, "name": "t", "pid": 0, "tid": 1, "ts": 3},
        {"ph": "e", "cat": "transport", "id": 1, "name": "t", "pid": 0, "tid": 1, "ts": 5},
        {"ph": "e", "cat": "transport", "id": 2, "name": "t", "pid": 0, "tid": 1, "ts": 6}]
    bad = json.loads(json.dumps(good))
    bad["traceEvents"][2]["dur"] = 20  # sticks out of its parent
    unpaired = json.loads(json.dumps(good))
    del unpaired["traceEvents"][-1]  # a transport operation that never ends
    outside = json.loads(json.dumps(good))
    outside["traceEvents"][-1]["ts"] = 30  # ends after its collective
    results = []
    for doc in (good, bad, unpaired, outside):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        results.append(check(f.name))
        os.unlink(f.name)
    ok = results[0] is None and all(r is not None for r in results[1:])
    print("check_trace self-test:", "ok" if ok else f"FAILED {results}")
    return 0 if ok else 1


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    args = sys.argv[1:]
    want = bool(args) and args[0] == "--transport"
    files = args[1:] if want else args
    if not files:
        print("check_trace.py: no trace files given")
        return 1
    errors = [err for err in (check(p, want) for p in files) if err]
    for err in errors:
        print("FAIL", err)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
