#!/usr/bin/env python3
"""The two ways into ComfyUI agree: `genscope watch` (from the server's output) and the genscope
node package (inside the server) on the same prompts. For every prompt: the same prompt
boundaries, within 2 % of the prompt or 100 ms (watch reads `got prompt` .. `Prompt executed`
as ComfyUI prints them; the package times execution_start .. execution_success), and the same
number of sampler iterations.

    compare_watch_nodes.py WATCH_RUNS_DIR PACKAGE_RUNS_DIR
"""
import glob
import json
import os
import sys

watch_dir, package_dir = sys.argv[1:3]


def load(folder):
    docs = [json.load(open(p)) for p in glob.glob(os.path.join(folder, "*.json"))]
    return sorted(docs, key=lambda d: d["start_unix_ns"])


def iterations(doc):
    return sum(len(s.get("iterations", {}).get("durations_ns", []))
               for s in doc["steps"] if s["kind"] == "sampling")


watch = load(watch_dir)
package = [d for d in load(package_dir) if d.get("status", "ok") == "ok"]
failures = 0


def fail(message):
    global failures
    failures += 1
    print("FAIL:", message)


if len(watch) != len(package):
    fail(f"genscope watch recorded {len(watch)} prompts, the node package {len(package)}")
for i, (w, p) in enumerate(zip(watch, package), 1):
    w0, p0 = w["start_unix_ns"] / 1e9, p["start_unix_ns"] / 1e9
    w1, p1 = w0 + w["duration_ns"] / 1e9, p0 + p["duration_ns"] / 1e9
    bound = max(0.1, 0.02 * p["duration_ns"] / 1e9)
    verdict = "ok" if abs(w0 - p0) <= bound and abs(w1 - p1) <= bound else "DIFFERENT"
    print(f"  prompt {i}: start watch-package {1e3 * (w0 - p0):+.0f} ms, end {1e3 * (w1 - p1):+.0f} ms "
          f"(bound {1e3 * bound:.0f} ms), iterations watch {iterations(w)} package {iterations(p)}: "
          f"{verdict}")
    if verdict != "ok":
        fail(f"prompt {i}: boundaries differ by more than {bound:.3f} s")
    if iterations(w) != iterations(p):
        fail(f"prompt {i}: watch saw {iterations(w)} sampler iterations, the package {iterations(p)}")
print("watch and node package agree" if failures == 0 else f"{failures} check(s) failed")
sys.exit(1 if failures else 0)
