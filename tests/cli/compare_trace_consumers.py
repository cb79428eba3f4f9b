#!/usr/bin/python3
"""Compares how trace consumers nest a genscope Chrome trace with the run document's step tree.

  compare_trace_consumers.py TRACE.json RUN.json [RUN.json ...] -- CONSUMER.json [...]

CONSUMER.json is the output of tests/trace_consumers/*_slices.mjs: the slices one consumer
built (name, args, depth, parent index) and its warnings. The expected tree comes from the
run documents (a step inside its parent step, attempts and iterations inside their step),
for every slice the trace puts on a thread track ("X" events, identified by pid, args.step_id
and name). A third consumer is built in here: catapult's importer (chrome://tracing) nests
complete events by sorting on start and keeping a slice inside the open one while
ts + dur <= the open slice's ts + dur, added as doubles (Python floats are doubles), which is
where back-to-back decimal microseconds used to overlap.
Each consumer must show every slice, under the expected parent (a step may sit inside one of
its parent's iterations or attempts), with no warning. Steps the trace puts on async tracks
(overlapping, or under half a microsecond) are not on the thread trees and not compared.
Prints one line per consumer; exit 1 on any difference.
"""
import json
import sys


def identity(pid, name, args):
    return (pid, args.get("step_id"), name)


def catapult_tree(events):
    slices = []
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for (pid, tid), xs in tracks.items():
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in xs:
            end = e["ts"] + e["dur"]
            while stack and not (e["ts"] >= stack[-1][1]["ts"] and end <= stack[-1][0]):
                stack.pop()
            parent = stack[-1][2] if stack else -1
            slices.append({"pid": pid, "tid": tid, "name": e["name"], "args": e.get("args", {}),
                           "parent": parent})
            stack.append((end, e, len(slices) - 1))
    return {"consumer": "catapult-style", "warnings": [], "slices": slices}


def main():
    args = sys.argv[1:]
    split = args.index("--")
    trace_path, run_paths, consumer_paths = args[0], args[1:split], args[split + 1:]
    trace = json.load(open(trace_path))
    runs = [json.load(open(p)) for p in run_paths]
    expected = {}
    for e in trace["traceEvents"]:
        if e["ph"] != "X":
            continue
        pid, a = e["pid"], e.get("args", {})
        steps = {s["id"]: s for s in runs[pid - 1]["steps"]}
        key = identity(pid, e["name"], a)
        if key in expected:
            raise SystemExit("FAIL: two X slices share %r" % (key,))
        if "parent_id" in a:  # a step: inside its parent step, if that one is on the track
            parent = steps.get(a["parent_id"])
            expected[key] = None if parent is None else (pid, parent["id"], parent["name"])
        else:  # an attempt or an iteration: inside its step
            expected[key] = (pid, a["step_id"], steps[a["step_id"]]["name"])
    step_keys = {identity(e["pid"], e["name"], e.get("args", {})) for e in trace["traceEvents"]
                 if e["ph"] == "X" and "parent_id" in e.get("args", {})}
    on_track = set(expected)
    for key, parent in expected.items():
        if parent is not None and parent not in on_track:
            raise SystemExit("FAIL: %r nests in %r, which is not on a thread track" % (key, parent))
    consumers = [catapult_tree(trace["traceEvents"])]
    for path in consumer_paths:
        consumers.append(json.load(open(path)))
    failed = False
    for c in consumers:
        got = {}
        for s in c["slices"]:
            parent = c["slices"][s["parent"]] if s["parent"] >= 0 else None
            got[identity(s["pid"], s["name"], s["args"])] = (
                None if parent is None else identity(parent["pid"], parent["name"], parent["args"]))
        problems = ["warning: %s" % w for w in c["warnings"]]
        problems += ["missing: %r" % (k,) for k in expected if k not in got]
        problems += ["extra: %r" % (k,) for k in got if k not in expected]
        # A step inside one of its parent's iterations (or attempts) is inside its parent: the
        # run document has no node for an iteration, a viewer shows where it happened.
        problems += ["%r under %r, the run document says %r" % (k, got[k], v)
                     for k, v in expected.items()
                     if k in got and got[k] != v and not (
                         k in step_keys and got[k] is not None and v is not None and
                         got[k][:2] == v[:2])]
        if problems:
            failed = True
            print("FAIL %s: %d problem(s)" % (c["consumer"], len(problems)))
            for p in problems[:10]:
                print("  " + p[:300])
        else:
            print("%s: %d slices nested as the run document says, no warning" %
                  (c["consumer"], len(expected)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
