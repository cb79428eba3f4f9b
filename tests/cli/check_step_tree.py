#!/usr/bin/python3
"""check_step_tree.py RUN.json...: the step-tree invariants (docs/run-schema.md, "The step
tree"; genscope::check_step_tree in C++) on run documents written by the CLI: children within
their parents, steps within their run, nothing left running, closed_by set, parents that name
earlier steps of the same thread. Prints each violation and exits 1 when there is one."""
import json
import sys

bad = 0
for path in sys.argv[1:]:
    run = json.load(open(path))
    steps = run["steps"]
    for i, s in enumerate(steps):
        who = f"{path}: step {i} '{s['name']}'"
        end = s["start_offset_ns"] + s["duration_ns"]
        problems = []
        if s["id"] != i:
            problems.append(f"id {s['id']}")
        if s["status"] == "running":
            problems.append("still running")
        if s["start_offset_ns"] < 0 or end > run["duration_ns"]:
            problems.append("outside its run")
        cb = s.get("closed_by", "explicit")
        if cb not in ("explicit", "run_end") and not (cb.startswith("inferred:") and len(cb) > 9):
            problems.append(f"closed_by {cb!r}")
        p = s["parent_id"]
        if p >= i or p < -1:
            problems.append(f"parent {p} is not an earlier step")
        elif p >= 0:
            ps = steps[p]
            if ps["thread"] != s["thread"]:
                problems.append("parent on another thread")
            if not (ps["start_offset_ns"] <= s["start_offset_ns"] and end <= ps["start_offset_ns"] + ps["duration_ns"]):
                problems.append(f"not within its parent '{ps['name']}'")
        for pr in problems:
            print(f"{who}: {pr}")
            bad += 1
sys.exit(1 if bad else 0)
