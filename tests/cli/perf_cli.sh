#!/usr/bin/env bash
# The perf CLI contract: history add/list/show/export/prune/regressions (exit 1 on a
# regression), validate (exit 1 on a missed target), compare (files and label selectors),
# named errors for foreign databases.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! "$GENSCOPE" --help | grep -q "history"; then
  echo "SKIP: history/compare/validate are not registered in main.cpp yet"
  exit 0
fi

# 25 runs of one pipeline, 2% jitter; the last one's sampling is 30% slower.
/usr/bin/python3 - "$tmp" <<'PY'
import json, random, sys
random.seed(7)
out = sys.argv[1]
for i in range(25):
    steps, t = [], 0
    for s, (name, kind, base) in enumerate([("load", "model_loading", 1e9),
                                             ("sampling", "sampling", 4e9),
                                             ("decode", "vae_decode", 1e9)]):
        d = int(base * (1.3 if (i == 24 and name == "sampling") else 1.0) * random.gauss(1, 0.02))
        steps.append({"id": s, "parent_id": -1, "name": name, "kind": kind, "status": "ok",
                      "thread": 0, "start_offset_ns": t, "duration_ns": d, "attempts": [],
                      "attachments": [], "counters": {}, "labels": {},
                      "iterations": {"durations_ns": [d // 20] * 20} if name == "sampling" else None,
                      "metrics": [{"name": "gpu0.used_bytes", "unit": "bytes", "before": 5e9,
                                   "after": 6e9, "peak": 20e9, "peak_offset_ns": -1,
                                   "peak_source": "sampled"}]})
        if steps[-1]["iterations"] is None: del steps[-1]["iterations"]
        t += d
    doc = {"schema": "genscope.run/1", "id": "run%02d" % i, "start_utc": "2023-11-14T22:13:20Z",
           "start_unix_ns": (1700000000 + 60 * i) * 10**9, "duration_ns": t,
           "genscope_version": "", "host": {"hostname": "h", "cpu_model": "", "cpu_cores": 0,
           "ram_bytes": 0, "os": ""}, "gpus": [], "labels": {"branch": "main" if i < 12 else "perf"},
           "pipeline": {"name": "sdxl", "model": "m", "architecture": "UNet", "parameters": {}},
           "probes": [], "notes": [], "monitoring_errors": [], "attachments": [], "steps": steps,
           "series": {"metrics": [], "offset_ns": [], "values": [], "interval_ns": 0,
                      "samples_taken": 0, "capacity": 0}}
    json.dump(doc, open("%s/run%02d.json" % (out, i), "w"))
PY

db="$tmp/h.db"
[ "$("$GENSCOPE" history --db "$db" add "$tmp"/run*.json | wc -l)" -eq 25 ] || fail "add"
[ "$("$GENSCOPE" history --db "$db" list --limit 3 | wc -l)" -eq 4 ] || fail "list --limit"
# (outputs are captured first: grep -q closing the pipe early would fail under pipefail)
out=$("$GENSCOPE" history --db "$db" list --label branch=perf --json)
grep -q '"run_id": "run24"' <<<"$out" || fail "list --label"
out=$("$GENSCOPE" history --db "$db" show run24 --json)
grep -q '"schema": "genscope.run/1"' <<<"$out" || fail "show"

set +e
out=$("$GENSCOPE" history --db "$db" regressions); rc=$?
[ $rc -eq 1 ] && grep -q "REGRESSION sdxl / sampling" <<<"$out" || fail "regressions: rc=$rc $out"
grep -q "REGRESSION sdxl / load" <<<"$out" && fail "load did not regress: $out"
"$GENSCOPE" history --db "$db" regressions --pipeline other >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "no series, no regression: rc=$rc"

out=$("$GENSCOPE" validate "$tmp/run03.json"); rc=$?
[ $rc -eq 1 ] && grep -q "dominant_step \[sampling\]" <<<"$out" || fail "validate miss: $rc $out"
"$GENSCOPE" validate "$tmp/run03.json" --target run.max=10s --target sampling.min_it_per_s=4 \
  --record --db "$db" >/dev/null; rc=$?
[ $rc -eq 0 ] || fail "validate met: rc=$rc"
out=$("$GENSCOPE" history --db "$db" list --json)
grep -q '"score": 100.0' <<<"$out" || fail "recorded score"

out=$("$GENSCOPE" history --db /etc/hostname list 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[NotAHistoryDatabase\]" <<<"$out" || fail "foreign db: $out"
out=$("$GENSCOPE" compare "$tmp/run00.json" "$tmp/nope.json" --db "$db" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[RunNotFound\]" <<<"$out" || fail "missing run: $out"
set -e

"$GENSCOPE" compare "$tmp/run00.json" "$tmp/run24.json" --json | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
s = {x["step"]: x for x in c["steps"]}
assert s["sampling"]["verdict"] == "slower", s["sampling"]
assert s["load"]["verdict"] == "unchanged", s["load"]
' || fail "compare files"
"$GENSCOPE" compare --db "$db" label:branch=main label:branch=perf --json | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
assert len(c["before"]) == 12 and len(c["after"]) == 13, c
assert all(x["verdict"] == "unchanged" for x in c["steps"]), c["steps"]
' || fail "compare label groups"

[ "$("$GENSCOPE" history --db "$db" export --csv | wc -l)" -eq 26 ] || fail "export --csv"
out=$("$GENSCOPE" history --db "$db" prune --older-than 1d)
grep -q "pruned 25 runs" <<<"$out" || fail "prune"
echo "perf CLI ok"
