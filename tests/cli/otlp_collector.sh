#!/usr/bin/env bash
# The OpenTelemetry export against a real OpenTelemetry Collector (tests/otel_collector, built
# from the collector's Go modules by scripts/lib/otel_collector.sh; scripts/test builds it
# first): `genscope run --otlp` of a real program and `genscope report --otlp` of a recorded
# run document (and `genscope demo --otlp` when genscope has the demo) reach the collector's
# file as one span per step with the right parents, figures and iterations, and metrics equal
# to the Prometheus export of the same run (check_export.py). Then a dead collector (a closed
# port) and a hanging one (accepts, never answers): the command finishes within a bound and the
# run document records the failed export as a monitoring error (source "otlp").
set -euo pipefail
# shellcheck source=servers_lib.bash
source "$(dirname "$0")/servers_lib.bash"  # $tmp, pids, cleanup trap, fail
src=${GENSCOPE_SOURCE_DIR:?}
py=/usr/bin/python3
source "$src/scripts/lib/otel_collector.sh"
otel_collector_start "$tmp" || { pids+=(${OTEL_COLLECTOR_PID:-}); fail "the test collector could not be built or started (see above)"; }
pids+=("$OTEL_COLLECTOR_PID")
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
url=$OTEL_COLLECTOR_URL
out=$OTEL_COLLECTOR_OUT

# check RUN.json: waits (bounded) until the collector's file holds the run, then compares.
check() {
  local run=$1
  "$GENSCOPE" report "$run" --metrics - > "$tmp/prometheus.txt" || fail "report --metrics $run"
  "$py" "$src/tests/otel_collector/check_export.py" "$run" "$out" "$tmp/prometheus.txt" ||
    fail "the collector's file does not match $run"
}

# 1. genscope run of a real program (nested steps from its event lines, iterations).
timeout 120 "$GENSCOPE" run --out "$tmp/run" --label team=imaging --otlp "$url" -- \
  "$GENSCOPE_TEST_CHILD" events > "$tmp/run.log" 2>&1 || fail "genscope run --otlp"
grep -q "run exported to $url/v1/traces" "$tmp/run.log" || fail "genscope run did not say it exported"
check "$tmp/run/run.json"

# 2. genscope report --otlp of a recorded run document (steps, tensors, attempts, iterations).
fixture="$src/tests/fixtures/run_json/demo_attachments.rundoc"
"$GENSCOPE" report "$fixture" --otlp "$url" > "$tmp/report.log" 2>&1 || fail "report --otlp"
check "$fixture"
# OTEL_EXPORTER_OTLP_ENDPOINT with --otlp env.
cp "$src/tests/fixtures/run_json/small_run.rundoc" "$tmp/small.json"
OTEL_EXPORTER_OTLP_ENDPOINT="$url" "$GENSCOPE" report "$tmp/small.json" --otlp env > "$tmp/env.log" 2>&1 ||
  fail "report --otlp env"
check "$tmp/small.json"

# 3. The demo, when genscope has it.
if "$GENSCOPE" demo --help 2>&1 | grep -q -- --preset; then
  timeout 300 "$GENSCOPE" demo --out "$tmp/demo" --otlp "$url" > "$tmp/demo.log" 2>&1 || fail "demo --otlp"
  check "$tmp/demo/run.json"
fi

# 4. A dead collector (nothing listens) and a hanging one (accepts, never answers): the run
# ends within the export's bounded waits (3 s for the run, 3 s at exit) and its document names
# the failure.
dead=$(free_port)
"$py" - "$tmp/hang.port" > "$tmp/hang.log" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held = []
while True:
    c, _ = s.accept()
    held.append(c)  # read nothing, answer nothing
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/hang.port" ] && break; sleep 0.1; done
hang=$(cat "$tmp/hang.port")
for target in "dead:$dead" "hanging:$hang"; do
  name=${target%%:*}
  start=$(date +%s.%N)
  timeout 60 "$GENSCOPE" run --out "$tmp/$name" --otlp "http://127.0.0.1:${target#*:}" -- \
    "$GENSCOPE_TEST_CHILD" events > "$tmp/$name.log" 2>&1 || fail "genscope run with a $name collector failed"
  took=$("$py" -c "import time; print(round(time.time() - $start, 1))")
  "$py" -c "import sys; sys.exit(0 if $took < 15 else 1)" || fail "$name collector: the run took $took s (bound: 15 s)"
  "$py" - "$tmp/$name/run.json" <<'PY' || fail "$name collector: no otlp monitoring error in the run document"
import json, sys
errors = [e for e in json.load(open(sys.argv[1]))["monitoring_errors"] if e["source"] == "otlp"]
assert errors and ("not confirmed" in errors[0]["message"] or "not exported" in errors[0]["message"]), errors
PY
  grep -q "warning: OpenTelemetry export" "$tmp/$name.log" || fail "$name collector: no warning on the console"
  echo "ok: $name collector: run finished in $took s with the failure recorded"
done
# report --otlp to a dead collector fails with a named error (exit 2) after its retries, within
# the 15 s retry deadline.
start=$(date +%s)
rc=0
OTEL_EXPORTER_OTLP_TIMEOUT=1000 timeout 60 "$GENSCOPE" report "$tmp/small.json" --otlp "http://127.0.0.1:$dead" \
  > "$tmp/report-dead.log" 2>&1 || rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" = 2 ] || fail "report --otlp to a dead collector: exit $rc, expected 2"
grep -q "OtlpExportFailed" "$tmp/report-dead.log" || fail "report --otlp: no OtlpExportFailed"
[ "$took" -le 25 ] || fail "report --otlp to a dead collector took $took s (bound: 25 s)"
echo "ok: report --otlp to a dead collector: OtlpExportFailed after $took s"
echo "1 passed, 0 failed"
