#!/usr/bin/env bash
# Reliability of `genscope run` / `watch` / `report` / `history` under faults (issue 20,
# docs/reliability.md): CMD's own "--", closed stdio, non-UTF-8 text, exports written
# independently, a read-only history, the event channel's identity, its line limit and
# floods, pathological rule files, huge run documents, stale cgroups, a FIFO log. Every
# command is bounded by `timeout`; everything is local (no network).
set -euo pipefail
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
g="$GENSCOPE"
py=/usr/bin/python3
cd "$tmp"
# Elapsed seconds of a command (its status in $rc).
elapsed() {
  local t0 t1
  t0=$(date +%s%N)
  set +e
  "$@"
  rc=$?
  set -e
  t1=$(date +%s%N)
  secs=$(( (t1 - t0) / 1000000000 ))
}

# --- 1. everything after CMD's first word is CMD's, "--" included ---------------------------
out=$(timeout 60 "$g" run --quiet echo would-run -- touch X 2>/dev/null)
[ "$out" = "would-run -- touch X" ] || fail "echo would-run -- touch X printed '$out'"
[ ! -e X ] || fail "'-- touch X' inside CMD's arguments ran touch"
out=$(timeout 60 "$g" run --quiet echo hello -- world 2>/dev/null)
[ "$out" = "hello -- world" ] || fail "echo hello -- world printed '$out'"
out=$(timeout 60 "$g" run --quiet -- echo a -- b 2>/dev/null)
[ "$out" = "a -- b" ] || fail "-- echo a -- b printed '$out'"
# Options with values before CMD; CMD's own options that are also genscope's stay CMD's.
out=$(timeout 60 "$g" run --quiet --label k=v --interval 5 --pipeline=p echo --label z --quiet 2>/dev/null)
[ "$out" = "--label z --quiet" ] || fail "CMD's own --label: '$out'"
set +e
out=$(timeout 60 "$g" run --no-such-option echo x 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\[UnknownOption\]" <<<"$out" || fail "unknown option before CMD: rc=$rc $out"

# --- 7. started with stdout or stderr closed: ends, warns once, still analyses --------------
elapsed timeout 60 "$g" run --quiet --out closed -- seq 200000 >&- 2>closed.err
[ $rc -eq 0 ] || fail "stdout closed: rc=$rc (124: it hung) $(head -c 500 closed.err)"
[ "$(grep -c "stdout cannot be written" closed.err)" -eq 1 ] || fail "stdout closed: no single warning: $(cat closed.err)"
[ -s closed/run.json ] || fail "stdout closed: no run document"
elapsed timeout 60 "$g" run --quiet --report closed-report.txt -- sh -c 'seq 200000 >&2' 2>&-
[ $rc -eq 0 ] || fail "stderr closed: rc=$rc"
grep -q "^genscope: run 1 'sh'" closed-report.txt || fail "stderr closed: no --report line"
# A reader that goes away (EPIPE): CMD learns it as without genscope (SIGPIPE), no loop.
set +e
timeout 60 "$g" run --quiet -- seq 100000000 2>/dev/null | head -1 >/dev/null
rcs=("${PIPESTATUS[@]}")
set -e
[ "${rcs[0]}" -eq 141 ] || fail "reader gone: genscope's status ${rcs[0]} (want 141, seq's SIGPIPE)"

# --- 3. text that is not UTF-8: escaped, never a lost run ------------------------------------
bad=$(printf 'ec\377ho')
cp /bin/echo "./$bad"
set +e
timeout 60 "$g" run --quiet --out u8 --record --db u8.db --html u8.html --label "$(printf 'k=v\376')" \
  -- "./$bad" "$(printf 'out \377put')" > u8.out 2> u8.err
rc=$?
set -e
[ $rc -eq 0 ] || fail "non-UTF-8: rc=$rc $(cat u8.err)"
grep -q "json.exception" u8.err && fail "non-UTF-8: $(cat u8.err)"
$py -c 'import json,sys; d=json.load(open("u8/run.json")); assert d["labels"]["k"].startswith("v"), d["labels"]' \
  || fail "non-UTF-8: run.json unreadable"
[ -s u8.html ] || fail "non-UTF-8: no html report"
timeout 60 "$g" history --db u8.db list > u8.list 2>&1 || fail "non-UTF-8: history list: $(cat u8.list)"
[ "$(grep -c . u8.list)" -ge 2 ] || fail "non-UTF-8: run not recorded: $(cat u8.list)"

# --- 13. each export on its own: one failure named, the others written -----------------------
set +e
timeout 60 "$g" run --quiet --html /nonexistent-dir/r.html --trace ex.trace.json --csv excsv \
  --out ex --record --db ex.db -- true 2> ex.err
rc=$?
set -e
[ $rc -eq 0 ] || fail "exports: rc=$rc"
grep -q "WriteFailed.*html report /nonexistent-dir/r.html" ex.err || fail "exports: html failure not named: $(cat ex.err)"
[ -s ex.trace.json ] || fail "exports: --trace not written after --html failed"
[ -s excsv/steps.csv ] || fail "exports: --csv not written after --html failed"
[ -s ex/run.json ] || fail "exports: --out not written"
timeout 60 "$g" history --db ex.db list | grep -q true || fail "exports: not recorded"

# --- 11. a read-only history can be read ----------------------------------------------------
mkdir -p ro
cp ex.db ro/history.db
chmod 755 "$tmp" ro; chmod 644 ro/history.db
if command -v setpriv > /dev/null && [ "$(id -u)" -eq 0 ]; then
  # Another user's database (and folder): read-only for them.
  out=$(timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups "$g" history --db "$tmp/ro/history.db" list 2>&1) \
    || fail "history list as another user: $out"
  grep -q true <<<"$out" || fail "history list as another user: $out"
  set +e
  out=$(timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups "$g" history --db "$tmp/ro/history.db" prune --older-than 0s 2>&1); rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q "HistoryReadOnly" <<<"$out" || fail "prune of a read-only history: rc=$rc $out"
else
  echo "note: not root or no setpriv: another user's history not tested"
fi
if unshare -m true 2>/dev/null; then
  out=$(timeout 60 unshare -m sh -c "mount --bind -o ro '$tmp/ro' '$tmp/ro' && '$g' history --db '$tmp/ro/history.db' list" 2>&1) \
    || fail "history list on a read-only mount: $out"
  grep -q true <<<"$out" || fail "history list on a read-only mount: $out"
else
  echo "note: no mount namespace: the read-only mount not tested"
fi

# --- 2. the event channel's identity ---------------------------------------------------------
out=$(timeout 60 "$g" run --quiet -- sh -c 'echo "$GENSCOPE_EVENTS_ID"' 2>/dev/null)
grep -Eq '^[0-9]+:[0-9]+$' <<<"$out" || fail "GENSCOPE_EVENTS_ID not set: '$out'"
if [ -x "${GENSCOPE_MINIMAL:-}" ]; then
  # A stale variable naming stdout: not a word of JSON lands in the program's output.
  GENSCOPE_EVENTS_FD=1 GENSCOPE_EVENTS_ID=1:1 timeout 60 "$GENSCOPE_MINIMAL" stale.json 3 > stale.out 2>/dev/null
  grep -q '"event"' stale.out && fail "a stale GENSCOPE_EVENTS_FD=1 wrote events into stdout"
  grep -q "not a pipe\|not genscope's event channel" stale.json || fail "stale variable: no monitoring error"
fi

# --- 5. the documented line limit (16 MiB) is the real one -----------------------------------
cat > limit.py <<'EOF'
import os
f = os.fdopen(int(os.environ["GENSCOPE_EVENTS_FD"]), "wb")
L = 16 * 1024 * 1024
def line(n, name):
    head = '{"event":"begin","kind":"custom","name":"%s","pad":"' % name
    tail = '"}'
    return (head + "x" * (n - len(head) - len(tail)) + tail + "\n").encode()
f.write(line(L, "at-limit")); f.write(b'{"event":"end"}\n')
f.write(line(L + 1, "over-limit")); f.write(b'{"event":"end","name":"over-limit"}\n')
f.write(b'{"event":"begin","name":"after"}\n{"event":"end"}\n')
f.close()
EOF
timeout 120 "$g" run --quiet --out limit -- $py limit.py 2>/dev/null || fail "line limit: genscope failed"
$py - <<'EOF' || fail "line limit"
import json
d = json.load(open("limit/run.json"))
names = [s["name"] for s in d["steps"]]
assert "at-limit" in names, names
assert "over-limit" not in names, names
assert "after" in names, names
assert any("longer than the limit of 16777216" in e["message"] for e in d["monitoring_errors"]), d["monitoring_errors"]
EOF

# --- 4. floods: valid events never dropped, invalid ones bounded -----------------------------
cat > flood.py <<'EOF'
import os, sys
f = os.fdopen(int(os.environ["GENSCOPE_EVENTS_FD"]), "wb", buffering=1 << 20)
f.write(b'{"event":"begin","name":"flood"}\n')
pad = "p" * 1000
valid = ('{"event":"counter","name":"c","value":1,"pad":"%s"}\n' % pad).encode()
for i in range(int(sys.argv[1])):
    f.write(valid)
for i in range(int(sys.argv[2])):
    f.write(b'{"event":"no-such-event-%d"}\n' % i)
f.write(b'{"event":"end"}\n')
f.close()
EOF
/usr/bin/time -f "%M" -o flood.rss timeout 300 "$g" run --quiet --out flood -- $py flood.py 200000 200000 2>/dev/null \
  || fail "flood: genscope failed"
$py - <<'EOF' || fail "flood"
import json, os, re
d = json.load(open("flood/run.json"))
step = [s for s in d["steps"] if s["name"] == "flood"][0]
errors = [e for e in d["monitoring_errors"] if e["source"] == "events"]
assert len(errors) <= 21, len(errors)
# Every line is either analysed or reported lost: before CMD's end back-pressure keeps them
# all; after it the 10 s catch-up budget may cut the tail on a loaded machine, and says how
# many lines it cut (a note of the run).
notes = " ".join(d.get("notes", []))
m = re.search(r"(\d+) event-channel lines were not analysed", notes)
lost = int(m.group(1)) if m else 0
valid = step["counters"].get("c", 0)
m = re.search(r"counted here, not kept \(repeated (\d+) times\)", " ".join(e["message"] for e in errors))
invalid = 20 + int(m.group(1)) if m else len(errors)
assert valid + invalid + lost in (400000, 400001), (valid, invalid, lost, notes)  # (+ the end line)
if lost == 0:
    assert valid == 200000 and invalid == 200000, (valid, invalid)  # 200 MB of valid events
assert os.path.getsize("flood/run.json") < 2 << 20, os.path.getsize("flood/run.json")
print(f"flood: {valid} valid + {invalid} invalid lines analysed, {lost} reported not analysed")
EOF
echo "flood: 200 MB of valid events + 200k distinct invalid lines: genscope max RSS $(cat flood.rss) KiB"

# --- 8. a pathological rule file: genscope returns soon after CMD ----------------------------
cat > blowup.rules.json <<'EOF'
{"rules": [
  {"name": "r1", "regex": "(a|b){1000}x", "action": "label", "labels": {"k": "v"}},
  {"name": "r2", "regex": "(a|b){999}y", "action": "label", "labels": {"k": "v"}},
  {"name": "r3", "regex": "(a|b)*a(a|b){30}", "action": "label", "labels": {"k": "v"}},
  {"name": "r4", "regex": "(a|b)*b(a|b){29}c", "action": "label", "labels": {"k": "v"}}
]}
EOF
$py -c '
import random
random.seed(1)
for i in range(300): print("".join(random.choice("ab") for _ in range(16000)))' > ab.txt
elapsed timeout 300 "$g" run --quiet --out rules --rules blowup.rules.json -- cat ab.txt > /dev/null 2>&1
[ $rc -eq 0 ] || fail "pathological rules: rc=$rc"
[ $secs -lt 30 ] || fail "pathological rules: genscope took ${secs} s (the lines alone take 200 s)"
grep -q "RulesDisabled" rules/run.json || fail "pathological rules: no RulesDisabled"
echo "pathological rules: 4.8 MB of a/b lines watched in ${secs} s"

# --- 9. 100k progress bars: a bounded run document, the count kept -------------------------
cat > bars.py <<'EOF'
import sys
w = sys.stderr.write
for i in range(int(sys.argv[1])):
    w("\rbar%d:   0%%|          | 0/4 [00:00<?, ?it/s]" % i)
    for k in range(1, 5):
        w("\rbar%d:  %d%%|#####     | %d/4 [00:00<00:00, 100.00it/s]" % (i, k * 25, k))
    w("\n")
EOF
elapsed /usr/bin/time -f "%M" -o bars.rss timeout 300 "$g" run --quiet --out bars -- $py bars.py 100000 2>/dev/null
[ $rc -eq 0 ] || fail "100k bars: rc=$rc"
$py - <<'EOF' || fail "100k bars"
import json, os
d = json.load(open("bars/run.json"))
assert len(d["steps"]) == 1000, len(d["steps"])
assert any("not recorded as steps (repeated 99000 times)" in e["message"] for e in d["monitoring_errors"]), d["monitoring_errors"]
assert os.path.getsize("bars/run.json") < 8 << 20, os.path.getsize("bars/run.json")
EOF
[ "$(cat bars.rss)" -lt 300000 ] || fail "100k bars: genscope max RSS $(cat bars.rss) KiB"
echo "100k bars: ${secs} s, genscope max RSS $(cat bars.rss) KiB, run.json $(stat -c %s bars/run.json) bytes"

# --- 10. a huge run document: a named refusal, never an abort --------------------------------
truncate -s 300M huge.json
set +e
out=$(timeout 60 "$g" report huge.json 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\[RunDocumentTooLarge\]" <<<"$out" || fail "huge run.json: rc=$rc $out"

# --- 14. stale cgroups of a killed genscope are removed; a FIFO log does not hang ------------
own=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
root=$(awk '$9 == "cgroup" && $NF ~ /memory/ {print $5; exit}' /proc/self/mountinfo)
if [ -n "$own" ] && [ -n "$root" ] && [ -w "$root$own" ]; then
  sh -c 'exit 0' & dead=$!
  wait $dead
  stale="$root$own/genscope-$dead-0"
  if mkdir "$stale" 2>/dev/null; then
    timeout 60 "$g" run --quiet --out cg -- true 2>/dev/null || fail "cgroup: genscope failed"
    [ ! -d "$stale" ] || { rmdir "$stale"; fail "the stale cgroup $stale is still there"; }
    grep -q "left by genscope processes that were killed" cg/run.json || fail "cgroup: no note"
  fi
else
  echo "note: no writable memory cgroup: stale cgroups not tested"
fi
# kill -9 of genscope: CMD runs to its end (the guardian passes its output on), no SIGPIPE.
"$g" run --quiet -- sh -c 'sleep 1; for i in 1 2 3 4 5; do echo line $i; sleep 0.1; done; echo done > killed.marker' \
  > killed.out 2>/dev/null & gpid=$!
sleep 0.5
kill -9 $gpid
for i in $(seq 100); do [ -e killed.marker ] && break; sleep 0.1; done
[ -e killed.marker ] || fail "kill -9 of genscope: CMD did not reach its end (SIGPIPE?)"
[ "$(grep -c '^line' killed.out)" -eq 5 ] || fail "kill -9 of genscope: CMD's output lost: $(cat killed.out)"
# kill -9 of genscope mid-run: the journal (--out DIR/run.journal.json) keeps the run up to its
# last step end; a run that finishes leaves no journal behind.
cat > journal.sh <<'EOF'
ev() { echo "$1" >&"$GENSCOPE_EVENTS_FD"; }
ev '{"event":"begin","name":"first"}'; sleep 0.2; ev '{"event":"end"}'
ev '{"event":"begin","name":"second"}'; sleep 0.2; ev '{"event":"end"}'
ev '{"event":"begin","name":"never ends"}'; sleep 60
EOF
"$g" run --quiet --out journal -- sh journal.sh > /dev/null 2>&1 & gpid=$!
for i in $(seq 600); do  # until the second step's end is on disk (bounded: 60 s, for loaded CI)
  grep -q '"second"' journal/run.journal.json 2>/dev/null && break
  sleep 0.1
done
grep -q '"second"' journal/run.journal.json 2>/dev/null ||
  fail "journal: the second step's end never reached journal/run.journal.json"
kill -9 $gpid || fail "journal: genscope ended before it was killed"
wait $gpid 2>/dev/null || true
pkill -f 'sh journal.sh' 2>/dev/null || true  # CMD outlives a killed genscope: end it here
"$g" report --plain journal/run.journal.json > journal.txt || fail "journal: genscope report cannot read it"
grep -q '\[ok\] custom - first' journal.txt && grep -q '\[ok\] custom - second' journal.txt ||
  fail "journal: the ended steps are not in it: $(cat journal.txt)"
grep -q 'genscope.journal=partial' journal.txt || fail "journal: not labelled partial"
"$g" run --quiet --out journal-done -- sh -c 'true' > /dev/null 2>&1 || fail "journal: run failed"
[ -e journal-done/run.json ] && [ ! -e journal-done/run.journal.json ] ||
  fail "journal: a finished run left its journal behind: $(ls journal-done)"
mkfifo log.fifo
sleep 30 & victim=$!
timeout 20 "$g" watch --pid $victim --log log.fifo --quiet 2> fifo.err & w=$!
sleep 1
timeout 5 sh -c "printf 'hello from the fifo\n' > log.fifo" &
sleep 1
kill $victim
set +e
wait $w; rc=$?
set -e
[ $rc -eq 0 ] || fail "watch --log FIFO: rc=$rc (124: it hung) $(cat fifo.err)"

echo "reliability: all passed"
