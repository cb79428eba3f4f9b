#!/usr/bin/env bash
# The CSV export: the golden run's steps.csv and series.csv match the stored ones
# (GENSCOPE_UPDATE_GOLDEN=1 rewrites them), and Python's csv module reads back every field of
# a run with hostile names (comma, quotes, newline) exactly: one row per step, one row per
# sample and metric, empty fields for missing values, CRLF record ends (RFC 4180).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$GENSCOPE" report "$here/golden/run.json" --csv "$tmp/golden" > /dev/null
for f in steps series; do
  if [ "${GENSCOPE_UPDATE_GOLDEN:-0}" = 1 ]; then cp "$tmp/golden/$f.csv" "$here/golden/$f.csv"; fi
  cmp "$here/golden/$f.csv" "$tmp/golden/$f.csv" || { diff -u "$here/golden/$f.csv" "$tmp/golden/$f.csv"; exit 1; }
done

/usr/bin/python3 "$here/make_export_run.py" "$tmp/a.json" --samples 20000
/usr/bin/python3 "$here/make_export_run.py" "$tmp/b.json" --samples 300 \
  --id 00000000000000000000000000000def --shift 7
for case in golden:"$here/golden/run.json" two:"$tmp/a.json $tmp/b.json"; do
  name=${case%%:*}; runs=${case#*:}
  # shellcheck disable=SC2086
  "$GENSCOPE" report $runs --csv "$tmp/$name" > /dev/null
  # shellcheck disable=SC2086
  /usr/bin/python3 - "$tmp/$name" $runs <<'PY'
import csv, io, json, sys
folder, runs = sys.argv[1], [json.load(open(p)) for p in sys.argv[2:]]
for f in ("steps.csv", "series.csv"):
    # RFC 4180 exactly: Python's csv writer (minimal quoting, CRLF) gives back the same bytes.
    raw = open(folder + "/" + f, "rb").read()
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n").writerows(
        csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))
    assert out.getvalue().encode("utf-8") == raw, f + " is not RFC 4180 with CRLF records"
steps = list(csv.DictReader(open(folder + "/steps.csv", newline="", encoding="utf-8")))
want = [(r, s) for r in runs for s in r["steps"]]
assert len(steps) == len(want), (len(steps), len(want))
for row, (run, s) in zip(steps, want):
    assert row["run_id"] == run["id"] and int(row["step_id"]) == s["id"], row
    assert row["name"] == s["name"], (row["name"], s["name"])
    assert row["kind"] == s["kind"] and row["status"] == s["status"], row
    assert int(row["start_offset_ns"]) == s["start_offset_ns"], row
    assert int(row["duration_ns"]) == s["duration_ns"], row
    assert row["error_message"] == s.get("error", {}).get("message", ""), row
    assert int(row["attempts"]) == len(s["attempts"]), row
    n = len(s.get("iterations", {}).get("durations_ns", []))
    assert int(row["iterations"]) == n, row
    want_inferred = "" if n == 0 else ("true" if s.get("iterations", {}).get("inferred") else "false")
    assert row["iterations_inferred"] == want_inferred, row
    assert row["inferred"] in ("true", "false"), row
    depth, parent = 0, s["parent_id"]
    by_id = {x["id"]: x for x in run["steps"]}
    while parent in by_id and depth < 64:
        depth, parent = depth + 1, by_id[parent]["parent_id"]
    assert int(row["depth"]) == depth, (row["depth"], depth)
    for m in s["metrics"]:
        for part in ("before", "peak", "after"):
            cell = row[m["name"] + "." + part]
            assert (cell == "" and m[part] is None) or float(cell) == m[part], (m["name"], part, cell)
series = list(csv.reader(open(folder + "/series.csv", newline="")))
assert series[0] == ["run_id", "offset_ns", "metric", "unit", "value"], series[0]
rows = iter(series[1:])
for run in runs:
    t = run["series"]
    for i, offset in enumerate(t["offset_ns"]):
        for m, metric in enumerate(t["metrics"]):
            row = next(rows)
            v = t["values"][m][i]
            assert row[:4] == [run["id"], str(offset), metric["name"], metric["unit"]], row
            assert (row[4] == "" and v is None) or float(row[4]) == v, (row, v)
assert next(rows, None) is None, "extra series rows"
# Shares add up per level: the top-level steps of one thread of a run share at most 100 %,
# and the children of a step at most their parent's share (nested rows are not counted
# twice when a reader sums by depth or by parent).
from collections import defaultdict
top, children = defaultdict(float), defaultdict(float)
share = {(r["run_id"], r["step_id"]): float(r["share_of_run_percent"]) for r in steps}
for r in steps:
    if r["depth"] == "0":
        top[(r["run_id"], r["thread"])] += float(r["share_of_run_percent"])
    else:
        children[(r["run_id"], r["parent_id"])] += float(r["share_of_run_percent"])
if folder.endswith("golden"):
    assert all(v <= 100 + 1e-9 for v in top.values()), dict(top)
    for key, v in children.items():
        assert v <= share[key] + 1e-9, (key, v, share[key])
print("csv ok:", folder, len(steps), "steps,", len(series) - 1, "samples")
PY
done
echo "csv export: ok"
