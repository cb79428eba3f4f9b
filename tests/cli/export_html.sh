#!/usr/bin/env bash
# The HTML report in real headless Chromium (Debian's chromium, driven by chromium_page.py):
# the page loads from file:// with no console error and asks the network for nothing, the
# charts draw (uPlot canvases with the series' colours in their pixels), the step table has
# every step, hostile step names stay text, a 100k-sample series keeps its one-sample spike,
# and two runs overlay. Every browser run is bounded (60 s) and uses a fresh profile.
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
