#!/usr/bin/env bash
# `genscope report --metrics/--openmetrics/--pushgateway` on a fixed run document: golden
# expositions, promtool check metrics (exit 0, no lint message), the Python prometheus_client
# parsers of both formats (Debian python3-prometheus-client), and named errors for a bad or
# unreachable Pushgateway. Regenerate the goldens with GENSCOPE_UPDATE_GOLDEN=1 and review.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run="$here/golden/run.json"

"$GENSCOPE" report "$run" --metrics - > "$tmp/run.prom"
"$GENSCOPE" report "$run" --metrics - --openmetrics > "$tmp/run.om"
if [ "${GENSCOPE_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$tmp/run.prom" "$here/golden/metrics.prom"
  cp "$tmp/run.om" "$here/golden/metrics.om"
fi
diff -u "$here/golden/metrics.prom" "$tmp/run.prom"
diff -u "$here/golden/metrics.om" "$tmp/run.om"

# promtool (Debian prometheus): parses 0.0.4 and lints with client_golang's promlint.
set +e
lint=$(promtool check metrics < "$tmp/run.prom" 2>&1); rc=$?
set -e
[ $rc -eq 0 ] && [ -z "$lint" ] || fail "promtool check metrics: rc=$rc $lint"
# promtool does find problems: a counter without _total and an abbreviated unit.
printf '# HELP genscope_peak_mb x\n# TYPE genscope_peak_mb counter\ngenscope_peak_mb 1\n' > "$tmp/bad.prom"
set +e
lint=$(promtool check metrics < "$tmp/bad.prom" 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "abbreviated units" <<<"$lint" || fail "promtool let a bad name through: $lint"

# The Python client's parsers: strict OpenMetrics (rejects the whole text on any error) and 0.0.4.
/usr/bin/python3 - "$tmp/run.om" "$tmp/run.prom" <<'PY'
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text
om = {f.name: f for f in parse_om(open(sys.argv[1]).read())}
text = {f.name: f for f in parse_text(open(sys.argv[2]).read())}
assert om.keys() == text.keys(), set(om) ^ set(text)
assert om["genscope_steps"].type == "counter", om["genscope_steps"].type
assert om["genscope_step_duration_seconds"].type == "histogram"
assert om["genscope_step_duration_seconds"].unit == "seconds"
assert om["genscope_process_resident_memory_bytes"].unit == "bytes"
for name, family in om.items():
    assert name.startswith("genscope_"), name
    assert family.documentation, name
buckets = [s for s in om["genscope_step_duration_seconds"].samples if s.name.endswith("_bucket")]
assert buckets and buckets[-1].labels["le"] == "+Inf"
print(f"parsed {len(om)} families in both formats")
PY

# --metrics FILE is an export like --html: the file, one line naming it, no console report.
"$GENSCOPE" report "$run" --metrics "$tmp/out.prom" > "$tmp/report.txt"
cmp -s "$tmp/out.prom" "$tmp/run.prom" || fail "--metrics FILE differs from --metrics -"
grep -q "^metrics: $tmp/out.prom (" "$tmp/report.txt" || fail "no line naming the file: $(cat "$tmp/report.txt")"
! grep -q "GENSCOPE RUN REPORT" "$tmp/report.txt" || fail "console report printed with --metrics FILE"
set +e
out=$("$GENSCOPE" report "$run" "$run" --metrics - 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "\[InvalidOption\]" <<<"$out" || fail "two runs with --metrics: rc=$rc $out"

# A bad URL is refused before anything else; an unreachable gateway is a named error.
set +e
out=$("$GENSCOPE" report "$run" --pushgateway "localhost:9091" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[InvalidPushgatewayUrl\]" <<<"$out" || fail "bad URL: rc=$rc $out"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
out=$(timeout 60 "$GENSCOPE" report "$run" --pushgateway "http://127.0.0.1:$port" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[PushFailed\].*127.0.0.1:$port/metrics/job/genscope/instance/" <<<"$out" ||
  fail "unreachable gateway: rc=$rc $out"
set -e
echo "metrics cli: ok"
