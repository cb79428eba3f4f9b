#!/usr/bin/env bash
# The Chrome trace export: the golden run's trace matches the stored one byte for byte
# (GENSCOPE_UPDATE_GOLDEN=1 rewrites it: review the diff), and every trace obeys the format's
# rules and its run documents (check_trace.py): X events with dur, strict nesting per track,
# overlapping steps on async tracks, numeric counters keeping each series' min and max,
# microsecond timestamps, named threads, metadata. A 100k-sample run stays far below 100 MB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$GENSCOPE" report "$here/golden/run.json" --trace "$tmp/golden.json" > /dev/null
if [ "${GENSCOPE_UPDATE_GOLDEN:-0}" = 1 ]; then cp "$tmp/golden.json" "$here/golden/trace.json"; fi
diff -u "$here/golden/trace.json" "$tmp/golden.json"
/usr/bin/python3 "$here/check_trace.py" "$tmp/golden.json" "$here/golden/run.json"

# Overlapping steps, two threads, 20k iterations, 100k samples with a spike and a gap.
/usr/bin/python3 "$here/make_export_run.py" "$tmp/a.json"
"$GENSCOPE" report "$tmp/a.json" --trace "$tmp/a.trace.json" > /dev/null
/usr/bin/python3 "$here/check_trace.py" "$tmp/a.trace.json" "$tmp/a.json" --max-bytes 20000000
/usr/bin/python3 - "$tmp/a.trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
begins = [e for e in events if e["ph"] == "b"]
# "prefetch vae" starts inside "load models" and ends after it: an async track, not dropped;
# "marker" lasts 0 ns: zero long on a thread track its place would be ambiguous, async too.
assert [e["name"] for e in begins] == ["prefetch vae", "marker"], begins
# 20,000 iterations become 10,000 slices of 2 (count, mean, min, max in args).
its = [e for e in events if e.get("cat") == "iteration"]
assert len(its) == 10000 and its[0]["name"] == "iterations 1-2" and its[0]["args"]["count"] == 2, its[:2]
assert its[0]["args"]["max_ns"] == 340000, its[0]
attempts = [e["name"] for e in events if e.get("cat") == "attempt"]
assert attempts == ["attempt 1: direct", "attempt 2: tiled", "attempt 3: cpu"], attempts
assert {e["tid"] for e in events if e["ph"] == "X"} == {1, 2}, "two threads"
PY

# Two runs: one process each.
/usr/bin/python3 "$here/make_export_run.py" "$tmp/b.json" --samples 2000 \
  --id 00000000000000000000000000000def --shift 1000000
"$GENSCOPE" report "$tmp/a.json" "$tmp/b.json" --trace "$tmp/two.json" > /dev/null
/usr/bin/python3 "$here/check_trace.py" "$tmp/two.json" "$tmp/a.json" "$tmp/b.json"

# The checker itself catches each broken rule.
/usr/bin/python3 - "$here/check_trace.py" "$tmp/golden.json" "$here/golden/run.json" "$tmp" <<'PY'
import copy, json, subprocess, sys
checker, trace_path, run_path, tmp = sys.argv[1:]
good = json.load(open(trace_path))
def breaks(name, mutate):
    t = copy.deepcopy(good)
    mutate(t)
    path = tmp + "/broken.json"
    json.dump(t, open(path, "w"))
    r = subprocess.run(["/usr/bin/python3", checker, path, run_path], capture_output=True, text=True)
    assert r.returncode == 1, (name, r.stdout)
xs = lambda t: [e for e in t["traceEvents"] if e["ph"] == "X"]
breaks("missing dur", lambda t: xs(t)[0].pop("dur"))
breaks("overlap", lambda t: xs(t)[1].update(dur=xs(t)[0]["dur"] * 10))
breaks("sub-ns ts", lambda t: xs(t)[0].update(ts=xs(t)[0]["ts"] + 0.0001))
breaks("array value", lambda t: xs(t)[0].update(stack=[1, 2]))
breaks("string counter", lambda t: next(e for e in t["traceEvents"] if e["ph"] == "C")["args"].update(value="x"))
breaks("unknown key", lambda t: t.update(extra={}))
breaks("moved step", lambda t: xs(t)[0].update(ts=xs(t)[0]["ts"] + 1))
breaks("lost spike", lambda t: t["traceEvents"].remove(max((e for e in t["traceEvents"] if e["ph"] == "C" and e["name"] == "process.rss_bytes"), key=lambda e: e["args"]["value"])))
PY
echo "trace export: ok"
