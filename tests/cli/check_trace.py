#!/usr/bin/python3
"""Checks a genscope Chrome trace against the Trace Event Format rules that Perfetto and
chrome://tracing apply, and against the run documents it was rendered from.

  check_trace.py TRACE.json RUN.json [RUN.json ...] [--max-bytes N]

Rules (docs/report.md, src/report/chrome_trace.cpp):
  - a JSON object whose keys are traceEvents and metadata only;
  - every event has ph and an integer pid, and no event has an array as a direct value
    (Perfetto's tokenizer gives up on the whole file at one);
  - ts and dur are numbers in microseconds with at most 3 decimals (whole nanoseconds);
  - every X event has dur >= 0, and the X events of one thread track nest strictly;
  - b/e pairs match on (pid, cat, id2.local) and nest strictly on their async track;
  - counter (C) args are numbers; metadata events are the four names both viewers know,
    and every thread that holds slices is named;
  - each run's steps appear once each, at the run document's start and duration exactly;
    each sampled metric is one counter track whose minimum and maximum are the series' ones
    (downsampling keeps spikes); metadata.runs lists the runs in order.
Prints "trace ok: ..." or the first violations, exit 1.
"""
import json
import math
import sys
from collections import defaultdict

problems = []


def fail(message):
    problems.append(message)


def ns(us):
    """Microseconds (int or float with at most 3 decimals) to integer nanoseconds."""
    value = us * 1000
    whole = round(value)
    if abs(value - whole) > 1e-3:
        fail("timestamp %r has more than 3 decimals of microseconds" % us)
    return whole


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_nesting(track, slices):
    """slices: list of (start_ns, end_ns, name); strict nesting on one track."""
    stack = []
    for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack and end > stack[-1][1]:
            fail("%s: %r [%d, %d] overlaps %r [%d, %d] without nesting" %
                 (track, name, start, end, stack[-1][2], stack[-1][0], stack[-1][1]))
        stack.append((start, end, name))


def main():
    args = sys.argv[1:]
    max_bytes = None
    if "--max-bytes" in args:
        i = args.index("--max-bytes")
        max_bytes = int(args[i + 1])
        del args[i:i + 2]
    trace_path, run_paths = args[0], args[1:]
    raw = open(trace_path, "rb").read()
    if max_bytes is not None and len(raw) > max_bytes:
        fail("trace is %d bytes, more than %d" % (len(raw), max_bytes))
    trace = json.loads(raw)
    runs = [json.load(open(p)) for p in run_paths]

    if not isinstance(trace, dict) or set(trace) != {"traceEvents", "metadata"}:
        fail("top level must be an object with traceEvents and metadata only: %s" %
             (sorted(trace) if isinstance(trace, dict) else type(trace)))
    events = trace.get("traceEvents", [])
    x_tracks = defaultdict(list)
    async_open = {}
    async_tracks = defaultdict(list)
    named_threads, used_threads, process_names = set(), set(), {}
    counters = defaultdict(list)
    step_slices = defaultdict(list)  # pid -> [(start_ns, dur_ns, name, step_id)]
    for e in events:
        if not isinstance(e, dict) or "ph" not in e or not isinstance(e.get("pid"), int):
            fail("event without ph or integer pid: %r" % (e,))
            continue
        for key, value in e.items():
            if isinstance(value, list):
                fail("event has an array as a direct value (%s): %r" % (key, e))
        ph, pid = e["ph"], e["pid"]
        if ph == "M":
            if e.get("name") not in ("process_name", "process_sort_index", "thread_name",
                                     "thread_sort_index"):
                fail("unknown metadata event %r" % e.get("name"))
            if e.get("name") == "thread_name":
                named_threads.add((pid, e.get("tid")))
            if e.get("name") == "process_name":
                process_names[pid] = e["args"]["name"]
            continue
        if not is_number(e.get("ts")):
            fail("event without a numeric ts: %r" % e)
            continue
        start = ns(e["ts"])
        if ph == "X":
            if not is_number(e.get("dur")) or e["dur"] < 0:
                fail("X event without a non-negative dur: %r" % e)
                continue
            if not isinstance(e.get("tid"), int):
                fail("X event without an integer tid: %r" % e)
            used_threads.add((pid, e.get("tid")))
            x_tracks[(pid, e.get("tid"))].append((start, start + ns(e["dur"]), e["name"]))
            if "step_id" in e.get("args", {}):
                step_slices[pid].append((start, ns(e["dur"]), e["name"], e["args"]["step_id"]))
        elif ph in ("b", "e"):
            local = (e.get("id2") or {}).get("local")
            if not isinstance(local, str) or "cat" not in e:
                fail("async event without cat and id2.local: %r" % e)
                continue
            used_threads.add((pid, e.get("tid")))
            key = (pid, e["cat"], local)
            if ph == "b":
                async_open.setdefault(key, []).append((start, e))
            else:
                if not async_open.get(key):
                    fail("e without b: %r" % e)
                    continue
                begin, b = async_open[key].pop()
                if b["name"] != e["name"] or start < begin:
                    fail("b/e mismatch: %r / %r" % (b, e))
                async_tracks[key].append((begin, start, b["name"]))
                if "step_id" in b.get("args", {}):
                    step_slices[pid].append((begin, start - begin, b["name"],
                                             b["args"]["step_id"]))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(is_number(v) for v in args.values()):
                fail("counter args must be numbers: %r" % e)
                continue
            for key, value in args.items():
                counters[(pid, e["name"], key)].append((start, value))
        elif ph == "i":
            if e.get("s") not in ("g", "p", "t"):
                fail("instant without a scope: %r" % e)
        else:
            fail("unexpected phase %r" % ph)
    for key, opened in async_open.items():
        if opened:
            fail("b without e on %r" % (key,))
    for track, slices in x_tracks.items():
        check_nesting("thread track %r" % (track,), slices)
    for track, slices in async_tracks.items():
        check_nesting("async track %r" % (track,), slices)
    for thread in used_threads - named_threads:
        fail("thread %r holds slices but has no thread_name" % (thread,))

    meta_runs = trace.get("metadata", {}).get("runs", [])
    if [r.get("id") for r in meta_runs] != [r["id"] for r in runs]:
        fail("metadata.runs does not list the runs in order")
    for index, run in enumerate(runs):
        pid = index + 1
        if pid not in process_names:
            fail("run %d has no process_name" % pid)
        seen = {s[3]: s for s in step_slices[pid]}
        if len(seen) != len(step_slices[pid]):
            fail("run %d: a step appears twice" % pid)
        for step in run["steps"]:
            got = seen.get(step["id"])
            if got is None:
                fail("run %d: step %r missing from the trace" % (pid, step["name"]))
            elif (got[0], got[1]) != (step["start_offset_ns"], max(step["duration_ns"], 0)):
                fail("run %d: step %r at %r, run document says (%d, %d)" %
                     (pid, step["name"], got[:2], step["start_offset_ns"], step["duration_ns"]))
        series = run["series"]
        for m, metric in enumerate(series["metrics"]):
            values = [v for v in series["values"][m] if v is not None]
            track = counters.get((pid, metric["name"], "value"), [])
            if not values:
                if track:
                    fail("run %d: counter for %s, which has no value" % (pid, metric["name"]))
                continue
            got = [v for _, v in track]
            if not got or min(got) != min(values) or max(got) != max(values):
                fail("run %d: counter %s keeps [%s, %s], series has [%s, %s]" %
                     (pid, metric["name"], min(got, default=None), max(got, default=None),
                      min(values), max(values)))
            times = [t for t, _ in track]
            if times != sorted(times):
                fail("run %d: counter %s goes back in time" % (pid, metric["name"]))
    if problems:
        for p in problems[:20]:
            print("FAIL:", p)
        print("%d problem(s)" % len(problems))
        return 1
    print("trace ok: %d events, %d thread tracks, %d async tracks, %d counter tracks, %d bytes" %
          (len(events), len(x_tracks), len(async_tracks), len(counters), len(raw)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
