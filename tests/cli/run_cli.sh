#!/usr/bin/env bash
# `genscope run -- CMD` on real programs: exit statuses, output passed through byte for byte,
# signals, the event channel, the process tree's exact peaks (a grandchild's 64 MiB spike of a
# few ms in the right step), a Python/torch denoising loop with a tqdm bar, --no-peak-reset and
# getrusage, --pty, the outputs (--out, --report, --quiet, --record, --targets, --html/--trace/
# --csv per run, --metrics-port, --pushgateway) and bad input.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
child="$GENSCOPE_TEST_CHILD"
src="$GENSCOPE_SOURCE_DIR"
py=/usr/bin/python3
run() { timeout 120 "$GENSCOPE" run "$@"; }

# --- exit statuses ------------------------------------------------------------------------
set +e
run --quiet -- "$child" exit 3 2>/dev/null; rc=$?
[ $rc -eq 3 ] || fail "exit 3 -> $rc"
run --quiet -- sh -c 'kill -KILL $$' 2>/dev/null; rc=$?
[ $rc -eq 137 ] || fail "SIGKILL -> $rc (want 128+9)"
out=$(run -- genscope-no-such-program 2>&1); rc=$?
[ $rc -eq 127 ] && grep -q "\[CommandNotFound\]" <<<"$out" || fail "missing CMD: rc=$rc $out"
printf 'echo hi\n' > "$tmp/plain.sh"; chmod 644 "$tmp/plain.sh"
out=$(run -- "$tmp/plain.sh" 2>&1); rc=$?
[ $rc -eq 127 ] && grep -q "\[CommandNotExecutable\]" <<<"$out" || fail "not executable: rc=$rc $out"
out=$(run 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[MissingCommand\]" <<<"$out" || fail "no CMD: rc=$rc $out"
set -e
# Without "--", CMD starts at the first non-option and keeps its own options.
out=$(run --quiet sh -c 'echo "$0 $1"' a1 b2 2>/dev/null)
[ "$out" = "a1 b2" ] || fail "CMD's own options: $out"

# --- output passed through byte for byte ----------------------------------------------------
"$child" bytes 3000000 7 > "$tmp/alone.bin"
run --quiet -- "$child" bytes 3000000 7 > "$tmp/run.bin" 2>/dev/null
cmp -s "$tmp/alone.bin" "$tmp/run.bin" || fail "binary stdout differs"
"$child" long-lines 3 1048576 > "$tmp/alone.txt"
run --quiet -- "$child" long-lines 3 1048576 > "$tmp/run.txt" 2>/dev/null
cmp -s "$tmp/alone.txt" "$tmp/run.txt" || fail "1 MB lines differ"
script='printf "a\rb\r\n"; printf "e1\n" >&2; printf "\033[2K\r 50%%|#  | 1/2\r"; printf "e2" >&2'
sh -c "$script" > "$tmp/alone.out" 2> "$tmp/alone.err"
run --quiet --report "$tmp/report.txt" -- sh -c "$script" > "$tmp/run.out" 2> "$tmp/run.err"
cmp -s "$tmp/alone.out" "$tmp/run.out" || fail "stdout with \\r differs"
cmp -s "$tmp/alone.err" "$tmp/run.err" || fail "stderr differs"
grep -q "^genscope: run 1 'sh'" "$tmp/report.txt" || fail "--quiet line in --report FILE"
# stdin is CMD's own.
out=$(printf 'to cmd\n' | run --quiet -- cat 2>/dev/null)
[ "$out" = "to cmd" ] || fail "stdin: $out"

# --- --pty: terminals for CMD, bytes still unchanged -----------------------------------------
out=$(run --quiet --pty -- sh -c 'test -t 1 && test -t 2 && printf "tty\n"' 2>/dev/null)
[ "$out" = "tty" ] || fail "--pty: '$out'"
out=$(run --quiet -- sh -c 'test -t 1 || printf "pipe\n"' 2>/dev/null)
[ "$out" = "pipe" ] || fail "without --pty: '$out'"

# --- signals ------------------------------------------------------------------------------
# SIGTERM to genscope reaches CMD; its death is genscope's exit status.
run --quiet -- sh -c 'echo started; exec sleep 30' > "$tmp/term.out" 2>/dev/null &
g=$!
for _ in $(seq 100); do grep -q started "$tmp/term.out" && break; sleep 0.05; done
kill -TERM $g
set +e; wait $g; rc=$?; set -e
[ $rc -eq 143 ] || fail "SIGTERM -> $rc (want 128+15)"
# A CMD that ignores SIGINT keeps going; genscope waits and returns CMD's own status.
run --quiet -- "$child" ignore-sigint 800 > "$tmp/int.out" 2>/dev/null &
g=$!
for _ in $(seq 100); do grep -q ready "$tmp/int.out" && break; sleep 0.05; done
kill -INT $g
set +e; wait $g; rc=$?; set -e
[ $rc -eq 0 ] && [ "$(cat "$tmp/int.out")" = "$(printf 'ready\nfinished')" ] || fail "SIGINT ignored: rc=$rc"

# --- event channel: steps from a shell child; malformed lines counted, never fatal --------
cat > "$tmp/events.sh" <<'SH'
#!/bin/sh
e() { printf '%s\n' "$1" >&"$GENSCOPE_EVENTS_FD"; }
e '{"event":"begin","kind":"sampling","name":"denoise"}'
for i in 1 2 3 4; do sleep 0.01; e '{"event":"iteration"}'; done
e 'this is not json'
e '{"event":"end"}'
echo "fd $GENSCOPE_EVENTS_FD"
SH
chmod +x "$tmp/events.sh"
run --quiet --out "$tmp/ev" -- "$tmp/events.sh" > "$tmp/ev.out" 2>/dev/null
grep -Eq '^fd [3-9]$' "$tmp/ev.out" || fail "GENSCOPE_EVENTS_FD not set to a single digit (dash): $(cat "$tmp/ev.out")"
$py - "$tmp/ev/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = [s for s in r["steps"] if s["name"] == "denoise"]
assert s and s[0]["kind"] == "sampling", r["steps"]
assert s[0]["iterations"]["count"] == 4, s[0]["iterations"]
errors = [e for e in r["monitoring_errors"] if e["source"] == "events"]
assert errors and "malformed" in errors[0]["message"], r["monitoring_errors"]
PY

# --- process tree: a grandchild's 64 MiB spike of a few ms, in the right step -------------
run --quiet --out "$tmp/tree" -- "$child" tree-events 64 2>/dev/null
$py - "$tmp/tree/run.json" <<'PY'
import json, sys
MiB = 1024 * 1024
r = json.load(open(sys.argv[1]))
steps = {s["name"]: s for s in r["steps"]}
root = [a for a in r["attachments"] if a["type"] == "process_tree"][0]["data"]["root_pid"]
def parts(step):
    return [p for a in steps[step]["attachments"] if a["type"] == "figure_parts"
            and a["name"] == "tree.rss_bytes" for p in a["data"]["parts"]]
spike = [p for p in parts("spike") if p["pid"] != root and p["peak"] >= 64 * MiB]
assert len(spike) == 1 and spike[0]["peak_source"] == "exact", parts("spike")
for other in ("before", "after"):
    assert all(p["peak"] < 32 * MiB for p in parts(other)), (other, parts(other))
cg = {m["name"]: m for m in steps["spike"]["metrics"]}.get("cgroup.usage_bytes")
if cg is not None:  # where the machine gives genscope a memory cgroup
    # (the cgroup also counts page cache, which may shrink during the step: the peak itself)
    assert cg["peak_source"] == "exact" and cg["peak"] >= 64 * MiB, cg
    before = {m["name"]: m for m in steps["before"]["metrics"]}["cgroup.usage_bytes"]
    assert before["peak"] - before["before"] < 16 * MiB, before
PY

# --- Python + torch + tqdm: the bar is the step, its total the iteration count ------------
run --out "$tmp/py" --plain --report "$tmp/py.txt" -- \
  $py "$src/tests/children/denoise_tqdm.py" 20 96 10 0.02 5 > "$tmp/py.out" 2> "$tmp/py.err"
grep -aq "denoise: 100%" "$tmp/py.err" || fail "the tqdm bar was not passed through"
grep -q "PROCESS TREE" "$tmp/py.txt" || fail "--report FILE holds the report"
$py - "$tmp/py/run.json" "$tmp/py.out" <<'PY'
import json, sys
MiB = 1024 * 1024
r = json.load(open(sys.argv[1]))
steps = {s["name"]: s for s in r["steps"]}
d = steps["denoise"]
assert d["kind"] == "sampling" and d["iterations"]["count"] == 20, d["iterations"]
m = {x["name"]: x for x in d["metrics"]}["tree.rss_bytes"]
# One process: the tree's peak is the kernel's exact high-water mark, spike included.
assert m["peak_source"] == "exact" and m["peak"] - m["before"] >= 96 * MiB, m
assert steps["decode"]["iterations"]["count"] == 5
tree = [a for a in r["attachments"] if a["type"] == "process_tree"][0]["data"]
p = tree["processes"][0]
assert p["lifetime_peak_source"] == "exact" and p["lifetime_peak_bytes"] >= m["peak"], p
# The reset at "decode" lowered what the program's own getrusage() says...
maxrss = int(open(sys.argv[2]).read().split("maxrss_kib ")[1].split()[0]) * 1024
assert maxrss < m["peak"] - 64 * MiB, (maxrss, m["peak"])
# ... while genscope's lifetime peak kept it.
open(sys.argv[1] + ".maxrss", "w").write(str(maxrss))
PY
run --quiet --no-peak-reset --out "$tmp/py2" -- \
  $py "$src/tests/children/denoise_tqdm.py" 20 96 10 0.02 5 > "$tmp/py2.out" 2>/dev/null
$py - "$tmp/py2/run.json" "$tmp/py2.out" <<'PY'
import json, sys
MiB = 1024 * 1024
r = json.load(open(sys.argv[1]))
d = {s["name"]: s for s in r["steps"]}["denoise"]
m = {x["name"]: x for x in d["metrics"]}["tree.rss_bytes"]
assert m["peak_source"] != "exact", m  # sampled: VmHWM left alone
maxrss = int(open(sys.argv[2]).read().split("maxrss_kib ")[1].split()[0]) * 1024
assert maxrss >= m["before"] + 96 * MiB, (maxrss, m)  # getrusage() sees the spike
assert any("--no-peak-reset" in n for n in r["notes"]), r["notes"]
PY

# --- GPU through the fake NVML: the tree's pids, next to device-wide figures ----------------
cat > "$tmp/nvml.json" <<JSON
{"driver_version": "550.54.15",
 "devices": [{"name": "Fake H100", "uuid": "GPU-fake-0", "total": 85899345920,
              "used": [40000000000], "processes": [{"pid_file": "$tmp/gpu.pid", "used": 1500000000},
                                                  {"pid": 1, "used": 7000000000}]}]}
JSON
cat > "$tmp/gpu.sh" <<SH
#!/bin/sh
echo \$\$ > "$tmp/gpu.pid"
printf '%s\n' '{"event":"begin","kind":"sampling","name":"on gpu"}' >&"\$GENSCOPE_EVENTS_FD"
sleep 0.3
printf '%s\n' '{"event":"end"}' >&"\$GENSCOPE_EVENTS_FD"
SH
chmod +x "$tmp/gpu.sh"
GENSCOPE_FAKE_NVML_SCENARIO="$tmp/nvml.json" GENSCOPE_NVML_LIBRARY="$GENSCOPE_FAKE_NVML" \
  run --plain --out "$tmp/gpu" --report "$tmp/gpu.txt" -- "$tmp/gpu.sh"
grep -q "GPU 0 memory used (whole device)" "$tmp/gpu.txt" || fail "device-wide GPU label"
grep -q "GPU 0 memory used by the process tree" "$tmp/gpu.txt" || fail "tree GPU label"
$py - "$tmp/gpu/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = [s for s in r["steps"] if s["name"] == "on gpu"][0]
m = {x["name"]: x for x in s["metrics"]}
assert m["gpu0.tree_used_bytes"]["peak"] == 1.5e9, m["gpu0.tree_used_bytes"]  # pid 1 is not ours
assert m["gpu0.used_bytes"]["peak"] == 4e10, m["gpu0.used_bytes"]  # the whole device
parts = [a for a in s["attachments"] if a["type"] == "figure_parts" and a["name"] == "gpu0.tree_used_bytes"]
assert parts and parts[0]["data"]["parts"][0]["peak"] == 1.5e9, parts
PY

# --- outputs: --quiet, --record/--db, --targets ---------------------------------------------
run --quiet --record --db "$tmp/h.db" --pipeline pt --targets "$src/tests/fixtures/targets/good_wildcard.json" \
  --out "$tmp/rec" -- "$tmp/events.sh" > /dev/null 2> "$tmp/quiet.err" || true
[ "$(grep -c '' "$tmp/quiet.err")" -eq 1 ] && grep -q "^genscope: run 1 'pt'" "$tmp/quiet.err" ||
  fail "--quiet prints one line: $(cat "$tmp/quiet.err")"
"$GENSCOPE" history list --db "$tmp/h.db" | grep -q "pt" || fail "--record stored the run"
$py -c "import json,sys; r=json.load(open('$tmp/rec/run.json')); assert any(a['type']=='performance' for a in r['attachments'])"

# --- exports and metrics of each run: two ComfyUI prompts, two sets of files -----------------
cat > "$tmp/comfy.sh" <<'SH'
#!/bin/sh
for p in 1 2; do
  echo "got prompt"
  echo "Requested to load SDXL"
  echo "loaded completely; 20512.45 MB usable, 4897.05 MB loaded, full load: True"
  printf '\r  0%%|          | 0/2 [00:00<?, ?it/s]' >&2
  sleep 0.05
  printf '\r 50%%|#####     | 1/2 [00:00<00:00,  9.85it/s]' >&2
  sleep 0.05
  printf '\r100%%|##########| 2/2 [00:00<00:00,  9.85it/s]\n' >&2
  echo "Prompt executed in 0.12 seconds"
done
SH
chmod +x "$tmp/comfy.sh"
run --out "$tmp/ex" --html "$tmp/ex/report.html" --trace "$tmp/ex/trace.json" --csv "$tmp/ex/csv" \
  --runs announced --metrics-port 0 --report "$tmp/ex.report" -- "$tmp/comfy.sh" > /dev/null 2> "$tmp/ex.err" ||
  fail "run with exports: $(cat "$tmp/ex.err")"
grep -q "serving metrics on http://127.0.0.1:[0-9]*/metrics" "$tmp/ex.err" || fail "metrics URL: $(cat "$tmp/ex.err")"
for f in run.json run-2.json report.html report-2.html trace.json trace-2.json csv/steps.csv \
         csv/series.csv csv-2/steps.csv csv-2/series.csv; do
  [ -s "$tmp/ex/$f" ] || fail "--out/--html/--trace/--csv: $f missing ($(ls -R "$tmp/ex"))"
done
grep -q "html report: $tmp/ex/report-2.html" "$tmp/ex.report" || fail "export lines: $(cat "$tmp/ex.report")"
$py - "$tmp/ex" <<'PY'
import csv, json, sys
d = sys.argv[1]
runs = [json.load(open(f"{d}/{n}")) for n in ("run.json", "run-2.json")]
assert runs[0]["id"] != runs[1]["id"]
for r, suffix in zip(runs, ("", "-2")):
    trace = json.load(open(f"{d}/trace{suffix}.json"))
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {s["name"] for s in r["steps"]} <= names, (names, r["steps"])
    rows = list(csv.DictReader(open(f"{d}/csv{suffix}/steps.csv")))
    assert {row["run_id"] for row in rows} == {r["id"]}, rows[:2]
    assert r["id"] in open(f"{d}/report{suffix}.html").read()
PY
set +e
out=$(run --pushgateway "ftp://nowhere" -- touch "$tmp/started" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\[InvalidPushgatewayUrl\]" <<<"$out" && [ ! -e "$tmp/started" ] ||
  fail "bad --pushgateway: rc=$rc $out"

# --- bad input before CMD starts: nothing runs ---------------------------------------------
printf '{"rules": [{"name": "bad", "regex": "(unclosed", "action": "begin"}]}' > "$tmp/bad_rules.json"
set +e
out=$(run --rules "$tmp/bad_rules.json" -- touch "$tmp/started" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\[InvalidRules\]" <<<"$out" || fail "invalid regex: rc=$rc $out"
[ ! -e "$tmp/started" ] || fail "CMD ran despite a bad rule file"
set +e
out=$(run --targets "$tmp/missing_targets.json" -- touch "$tmp/started" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && [ ! -e "$tmp/started" ] || fail "missing targets: rc=$rc $out"
# Every run document this test wrote keeps the step tree's invariants.
find "$tmp" -name 'run*.json' -print0 | xargs -0 -r /usr/bin/python3 "$(dirname "$0")/check_step_tree.py" ||
  { echo "FAIL: a run document breaks the step tree's invariants" >&2; exit 1; }
echo "run_cli: ok"
