#!/usr/bin/env bash
# The HTML report in real headless Chromium (Debian's chromium, driven by chromium_page.py):
# the page loads from file:// with no console error and asks the network for nothing, the
# charts draw (uPlot canvases with the series' colours in their pixels), the step table has
# every step, hostile step names stay text, a 100k-sample series keeps its one-sample spike,
# two runs overlay, and each memory series' peak label names the run's peak of its metric. Every browser run is bounded (60 s) and uses a fresh profile.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Waits for the charts, then reports what the test checks; clip = the memory chart's canvas.
checks='(async () => {
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)));
  const canvas = document.querySelector("#chart-memory canvas");
  const box = canvas.getBoundingClientRect();
  const plots = window.genscopePlots || [];
  const memory = plots[0];
  return {
    drawn: Number(document.documentElement.dataset.chartsDrawn),
    canvases: document.querySelectorAll(".chart canvas").length,
    tables: [...document.querySelectorAll("table.steps")].map(t => ({
      run: t.dataset.run, rows: t.querySelectorAll("tbody tr").length,
      names: [...t.querySelectorAll("tbody tr .step-name")].map(e => e.textContent)})),
    memory_series: memory ? memory.series.slice(1).map(s => s.label) : [],
    memory_max: memory ? memory.data.slice(1).map(col => Math.max(...col.filter(v => v != null))) : [],
    sections: [...document.querySelectorAll("section")].map(s => s.id),
    // The whole machine on its own chart, on an axis from 0.
    system: (() => {
      const p = plots.find(p => p.root.closest("#chart-system-memory"));
      return p ? {series: p.series.slice(1).map(s => s.label), y_min: p.scales.y.min,
                  y_max: p.scales.y.max, data_max: Math.max(...p.data.slice(1).flat().filter(v => v != null))} : null;
    })(),
    // Tables fit the page: none is wider than its box or the window (no column hidden).
    too_wide: [...document.querySelectorAll("table")].filter(t =>
      t.scrollWidth > t.parentElement.clientWidth + 1 ||
      t.getBoundingClientRect().right > document.documentElement.clientWidth + 1).map(t => t.className),
    // IEC units only: no "MB"/"GB"/"KB" after a number anywhere in the text.
    si_units: (document.body.innerText.match(/[0-9] (KB|MB|GB|TB)\b/g) || []).slice(0, 5),
    run_labels: JSON.parse(document.getElementById("genscope-data").textContent).runs.map(r => r.label),
    empty_names: [...document.querySelectorAll("#lora h3, #lora p")].filter(e =>
      /^File [;,]|^File $|^\s*in /.test(e.textContent)).map(e => e.textContent),
    // The peak labels each chart drew (series label, value, step, how its time is known).
    peak_labels: plots.map(p => ({chart: p.root.closest("[id^=chart-]").id,
      labels: JSON.parse(p.root.dataset.peakLabels || "[]").map(l =>
        Object.assign(l, {series_label: p.series[l.series].label}))})),
    scripts: document.scripts.length,
    clip: {x: box.x, y: box.y, width: box.width, height: box.height}};
})()'

page() {  # page HTML OUT.json: inspects HTML in Chromium
  timeout 90 /usr/bin/python3 "$here/chromium_page.py" "$1" --checks "$checks" --timeout 60 \
    --count-color '#1f77b4' --count-color '#d62728' > "$2" || fail "chromium on $1: $(cat "$2")"
}

# 1. The golden run: every step in the table, the charts drawn, nothing loaded from outside.
"$GENSCOPE" report "$here/golden/run.json" --html "$tmp/golden.html" > "$tmp/out.txt"
grep -q "html report: $tmp/golden.html" "$tmp/out.txt" || fail "report names the file"
page "$tmp/golden.html" "$tmp/golden.result.json"
/usr/bin/python3 - "$tmp/golden.result.json" "$here/golden/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); run = json.load(open(sys.argv[2]))
assert r["console_errors"] == [], r["console_errors"]
assert all(u.startswith("file://") for u in r["requests"]) and len(r["requests"]) == 1, r["requests"]
c = r["checks"]
assert c["drawn"] == c["canvases"] >= 3, c  # memory, system memory and percent charts
assert [t["rows"] for t in c["tables"]] == [len(run["steps"])], c["tables"]
assert c["tables"][0]["names"] == [s["name"] for s in run["steps"]], c["tables"][0]["names"]
# The process is the memory chart's subject; the machine has its own chart, from 0.
assert c["memory_series"] == ["RAM (process RSS)"], c["memory_series"]
assert c["system"] and c["system"]["series"] == ["RAM (system used)"], c["system"]
assert c["system"]["y_min"] == 0 and c["system"]["y_max"] >= c["system"]["data_max"], c["system"]
assert c["too_wide"] == [], c["too_wide"]
assert c["si_units"] == [], c["si_units"]
# One run: no run letter.
assert c["run_labels"] == ["minimal " + run["id"][:8]], c["run_labels"]
shot = r["screenshot"]
# The RSS line (#1f77b4) is drawn in the memory canvas.
assert shot["color_pixels"]["#1f77b4"] > 100, shot
assert shot["distinct_colors"] > 20, shot
PY

# 2. Hostile names, 100k samples with a one-sample spike, two runs overlaid.
/usr/bin/python3 "$here/make_export_run.py" "$tmp/a.json"
/usr/bin/python3 "$here/make_export_run.py" "$tmp/b.json" --samples 3000 \
  --id 00000000000000000000000000000def --shift 50000000
"$GENSCOPE" report "$tmp/a.json" "$tmp/b.json" --html "$tmp/two.html" > /dev/null
page "$tmp/two.html" "$tmp/two.result.json"
/usr/bin/python3 - "$tmp/two.result.json" "$tmp/a.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2]))
assert r["console_errors"] == [], r["console_errors"]  # an injected alert() would show here
assert len(r["requests"]) == 1, r["requests"]
c = r["checks"]
assert c["scripts"] == 3, c["scripts"]  # data, uPlot, the report's script: nothing injected
assert [t["rows"] for t in c["tables"]] == [10, 10], c["tables"]
assert c["tables"][0]["names"] == [s["name"] for s in a["steps"]], c["tables"][0]["names"]
assert c["drawn"] == 5 and c["canvases"] == 5, c  # memory, system memory, percent, temperature, iterations
assert c["too_wide"] == [], c["too_wide"]
assert c["si_units"] == [], c["si_units"]
assert c["empty_names"] == [], c["empty_names"]
assert [l[:3] for l in c["run_labels"]] == ["A: ", "B: "], c["run_labels"]
labels = c["memory_series"]
assert "RAM (process RSS) · A" in labels and "RAM (process RSS) · B" in labels, labels
# The one-sample spike of run A survives the min/max downsampling (100k samples -> 3k points).
assert c["memory_max"][labels.index("RAM (process RSS) · A")] == 9e8, c["memory_max"]
for section in ("timeline", "steps", "iterations", "tensors", "lora", "validation", "run",
                "attachments"):
    assert section in c["sections"], (section, c["sections"])
assert r["screenshot"]["color_pixels"]["#1f77b4"] > 100, r["screenshot"]
PY
# Every output names the same run peak: each memory series' label gives the highest step peak
# of its metric in the document and the first step that reached it (as the console's "Peak"
# lines do), even when that peak has no recorded time (a.json's GPU peaks: "time sampled").
peaks_named() {  # peaks_named RESULT.json RUN.json... : the memory chart's labels vs the documents
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); docs = [json.load(open(f)) for f in sys.argv[2:]]
memory = [c for c in r["checks"]["peak_labels"] if c["chart"] == "chart-memory"][0]["labels"]
expected = []
for i, d in enumerate(docs):
    for metric in ("process.rss_bytes", "gpu0.used_bytes"):
        best = None
        for s in d["steps"]:
            m = [m for m in s["metrics"] if m["name"] == metric]
            if m and m[0]["peak"] is not None and (best is None or m[0]["peak"] > best[0]):
                best = (m[0]["peak"], s["name"])
        if best:
            expected.append((i, metric, best))
assert len(memory) == len(expected), (memory, expected)
for l in memory:
    label = l["series_label"]
    run = 0 if len(docs) == 1 else "AB".index(label[-1])
    metric = "process.rss_bytes" if label.startswith("RAM (process RSS)") else "gpu0.used_bytes"
    value, step = [b for i, m, b in expected if i == run and m == metric][0]
    assert l["value"] == value and l["step"] == step, (l, value, step)
    assert l["text"].startswith("peak ") and "(" + step in l["text"], l
    print("peak label:", label, "|", l["text"].replace("\n", " "), "| time", l["time"])
PY
}
peaks_named "$tmp/two.result.json" "$tmp/a.json" "$tmp/b.json" || fail "peak labels (two runs)"
grep -q "time sampled" <<<"$(peaks_named "$tmp/two.result.json" "$tmp/a.json" "$tmp/b.json")" ||
  fail "no label of a peak whose time is sampled"
# The run's highest RSS peak without any time (no recorded time, no sample inside its step):
# the label still names it (drawn across its step), not a lower peak that has a time.
/usr/bin/python3 - "$tmp/a.json" "$tmp/untimed.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
step = d["steps"][6]  # vae_decode, 1350..1470 ms
rss = [m for m in step["metrics"] if m["name"] == "process.rss_bytes"][0]
rss["peak"], rss["peak_offset_ns"] = 9.5e8, -1
start, end = step["start_offset_ns"], step["start_offset_ns"] + step["duration_ns"]
s = d["series"]
keep = [k for k, t in enumerate(s["offset_ns"]) if not start <= t <= end]
s["offset_ns"] = [s["offset_ns"][k] for k in keep]
s["values"] = [[col[k] for k in keep] for col in s["values"]]
s["samples_taken"] = s["capacity"] = len(keep)
json.dump(d, open(sys.argv[2], "w"))
PY
"$GENSCOPE" report "$tmp/untimed.json" --html "$tmp/untimed.html" > /dev/null
"$GENSCOPE" report "$tmp/untimed.json" --plain | grep -q "Peak RAM (process RSS): 906 MiB in decode" ||
  fail "console: $("$GENSCOPE" report "$tmp/untimed.json" --plain | grep "Peak RAM")"
page "$tmp/untimed.html" "$tmp/untimed.result.json"
untimed=$(peaks_named "$tmp/untimed.result.json" "$tmp/untimed.json") || fail "peak labels (untimed)"
grep -q "RAM (process RSS) | peak 906 MiB (decode, .*time unknown) | time span" <<<"$untimed" ||
  fail "untimed peak label: $untimed"
echo "$untimed"
grep -q "264 of 266" "$tmp/two.html" || fail "LoRA coverage"
grep -q "71.5 / 100" "$tmp/two.html" || fail "validation score"
grep -q "custom_thing" "$tmp/two.html" || fail "other attachments are listed"
if grep -q "<script><script>alert" "$tmp/two.html"; then fail "a step name reached the page unescaped"; fi

# 3. A file that cannot be written is a named error (exit 2), and nothing is left behind.
set +e
out=$("$GENSCOPE" report "$here/golden/run.json" --html "$tmp/missing/dir/r.html" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\[WriteFailed\]" <<<"$out" || fail "unwritable --html: rc=$rc $out"
[ ! -e "$tmp/missing" ] || fail "unwritable --html left files"

# 4. Size: downsampling bounds the page whatever the number of samples.
size=$(stat -c %s "$tmp/two.html")
[ "$size" -lt 2000000 ] || fail "two-run report is $size bytes"
echo "html export: ok"
