#!/usr/bin/python3
"""Checks a genscope Chrome trace against the Trace Event Format rules that Perfetto and
chrome://tracing apply, and against the run documents it was rendered from.

  check_trace.py TRACE.json RUN.json [RUN.json ...] [--max-bytes N]

Rules (docs/report.md, src/report/chrome_trace.cpp):
  - a JSON object whose keys are traceEvents and metadata only;
  - every event has ph and an integer pid, and no event has an array as a direct value
    (Perfetto's tokenizer gives up on the whole file at one);
  - ts and dur are whole microseconds (integers: consumers add ts + dur in doubles, where
    decimals of microseconds drift past a successor's start);
  - every X event has dur >= 0, and the X events of one thread track nest strictly;
  - b/e pairs match on (pid, cat, id2.local) and nest strictly on their async track;
  - counter (C) args are numbers; metadata events are the four names both viewers know,
    and every thread that holds slices is named;
  - each run's steps appear once each, at the run document's start and end rounded to the
    microsecond (ts = round(start), dur = round(end) - round(start)), with the exact
    nanoseconds in args; each varying sampled metric is one counter track whose minimum and
    maximum are those of the series and of the steps' exact peaks (downsampling keeps
    spikes), and each exact peak with a time is a point of its track; a constant series has
    no track but its value in metadata.runs[].series.constant; iterations a run document
    marks inferred have category "iteration,inferred" and args inferred: true, the others
    neither; metadata.runs lists the runs in order.
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
    """Whole microseconds to nanoseconds."""
    if not isinstance(us, int) or isinstance(us, bool):
        fail("timestamp %r is not a whole number of microseconds" % (us,))
        return round(us * 1000)
    return us * 1000


def round_us(ns_value):
    """As the exporter: floor((ns + 500) / 1000)."""
    return (ns_value + 500) // 1000


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def exact_peak_points(run, metric, column):
    """The steps' exact peaks of one metric at their time (ns, rounded to µs as the trace
    writes it): their own time, or the highest sample inside the step when they have none."""
    series = run["series"]
    offsets, values = series["offset_ns"], series["values"][column]
    points = []
    for step in run["steps"]:
        f = next((x for x in step.get("metrics") or [] if x.get("name") == metric), None)
        if not f or f.get("peak_source") != "exact" or f.get("peak") is None:
            continue
        start, end = step["start_offset_ns"], step["start_offset_ns"] + step["duration_ns"]
        if f.get("peak_offset_ns", -1) >= 0:
            points.append((round_us(start + f["peak_offset_ns"]) * 1000, f["peak"]))
            continue
        inside = [(v, t) for t, v in zip(offsets, values) if start <= t <= end and v is not None]
        if inside:
            best = max(inside, key=lambda p: p[0])  # first highest, as the exporter
            t = min(t for v, t in inside if v == best[0])
            points.append((round_us(t) * 1000, f["peak"]))
    return points


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
    step_slices = defaultdict(list)  # pid -> [(ts_us, dur_us, name, args)]
    iteration_slices = defaultdict(list)  # pid -> [X events of iterations]
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
            if "parent_id" in e.get("args", {}):
                step_slices[pid].append((e["ts"], e["dur"], e["name"], e["args"]))
            if e.get("cat", "").startswith("iteration"):
                iteration_slices[pid].append(e)
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
                if "parent_id" in b.get("args", {}):
                    step_slices[pid].append((b["ts"], e["ts"] - b["ts"], b["name"], b["args"]))
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
        seen = {s[3]["step_id"]: s for s in step_slices[pid]}
        if len(seen) != len(step_slices[pid]):
            fail("run %d: a step appears twice" % pid)
        steps = {s["id"]: s for s in run["steps"]}
        for step in run["steps"]:
            got = seen.get(step["id"])
            start, dur = step["start_offset_ns"], max(step["duration_ns"], 0)
            want = (round_us(start), round_us(start + dur) - round_us(start))
            if got is None:
                fail("run %d: step %r missing from the trace" % (pid, step["name"]))
            elif (got[0], got[1]) != want or (got[3].get("start_offset_ns"),
                                              got[3].get("duration_ns")) != (start, step["duration_ns"]):
                fail("run %d: step %r at %r µs (args %r), run document says %r µs (%d, %d ns)" %
                     (pid, step["name"], got[:2], got[3], want, start, step["duration_ns"]))
        for e in iteration_slices[pid]:
            step = steps.get(e["args"].get("step_id"))
            inferred = bool(step and (step.get("iterations") or {}).get("inferred"))
            marked = (e["cat"] == "iteration,inferred", e["args"].get("inferred") is True)
            if marked != (inferred, inferred):
                fail("run %d: %r of step %r marked %r, the run document says inferred=%r" %
                     (pid, e["name"], step and step["name"], marked, inferred))
        series = run["series"]
        constant = ((meta_runs[index] if index < len(meta_runs) else {}).get("series") or {}).get(
            "constant", {})
        for m, metric in enumerate(series["metrics"]):
            values = [v for v in series["values"][m] if v is not None]
            track = counters.get((pid, metric["name"], "value"), [])
            if not values:
                if track:
                    fail("run %d: counter for %s, which has no value" % (pid, metric["name"]))
                continue
            if min(values) == max(values):
                if track:
                    fail("run %d: constant series %s has a counter track" % (pid, metric["name"]))
                if constant.get(metric["name"]) != values[0]:
                    fail("run %d: constant series %s missing from metadata (%r)" %
                         (pid, metric["name"], constant))
                continue
            peaks = exact_peak_points(run, metric["name"], m)
            got = [v for _, v in track]
            want = values + [v for _, v in peaks]
            if not got or min(got) != min(want) or max(got) != max(want):
                fail("run %d: counter %s keeps [%s, %s], series and exact peaks have [%s, %s]" %
                     (pid, metric["name"], min(got, default=None), max(got, default=None),
                      min(want), max(want)))
            for t, v in peaks:
                held = [tv for tt, tv in track if tt <= t]  # a repeat is not written again
                if (t, v) not in track and (not held or held[-1] != v):
                    fail("run %d: exact peak %s = %r at %d ns is not on its track" %
                         (pid, metric["name"], v, t))
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
