"""Shared checks of the peer tests: a run document's step tree (the invariants of
include/genscope/step_tree.hpp, checked here independently of genscope's own checker) and
durations against a program's own record (issue 17: within 2 % or 50 ms)."""
import json
import sys

FAILURES = []


FAILED = []  # what check() found failing (diffusers_check.py, modern_check.py)


def check(ok, what, why=""):
    """One "ok"/"FAIL" line for a check; a failure is recorded in FAILED. Returns ok."""
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {why}"), flush=True)
    if not ok:
        FAILED.append(what)
    return ok


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def load(path):
    with open(path) as f:
        return json.load(f)


def end(s):
    return s["start_offset_ns"] + s["duration_ns"]


def check_tree(run, where):
    steps = run["steps"]
    for i, s in enumerate(steps):
        who = f"{where}: step {i} '{s['name']}'"
        if s.get("closed_by") not in ("explicit", "run_end") and not str(s.get("closed_by", "")).startswith("inferred:"):
            fail(f"{who}: closed_by {s.get('closed_by')!r}")
        if s["status"] == "running":
            fail(f"{who}: still running")
        if s["start_offset_ns"] < 0 or end(s) > run["duration_ns"]:
            fail(f"{who}: outside its run")
        p = s["parent_id"]
        if p >= 0:
            ps = steps[p]
            if not (ps["start_offset_ns"] <= s["start_offset_ns"] and end(s) <= end(ps)):
                fail(f"{who}: not within its parent '{ps['name']}'")


def close(got_s, want_s, what):
    tol = max(0.02 * want_s, 0.05)
    ok = abs(got_s - want_s) <= tol
    print(f"  {what:44s} genscope {got_s:8.3f} s   program {want_s:8.3f} s   {'ok' if ok else 'OFF'}")
    if not ok:
        fail(f"{what}: genscope {got_s:.3f} s, the program {want_s:.3f} s (allowed {tol:.3f} s)")


def parent_name(run, s):
    return run["steps"][s["parent_id"]]["name"] if s["parent_id"] >= 0 else None


def done():
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
