#!/usr/bin/env bash
# The CLI's basic contract: --help, --version, exit codes and named errors, `probe`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$GENSCOPE" --help | grep -q "report" || fail "--help lists report"
"$GENSCOPE" --version | grep -Eq '^genscope [0-9]+\.[0-9]+\.[0-9]+$' || fail "--version"

# Bad input: exit 2 with a named error, never a crash.
set +e
out=$("$GENSCOPE" report "$tmp/missing.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[ReadFailed\]" <<<"$out" || fail "missing file: rc=$rc $out"
echo '{"schema": "genscope.run/1", "steps": [{"kind": "denoise"}]}' > "$tmp/bad.json"
out=$("$GENSCOPE" report "$tmp/bad.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[InvalidRunDocument\].*steps\[0\].kind" <<<"$out" || fail "bad kind: $out"
echo '{"schema": ' > "$tmp/trunc.json"
out=$("$GENSCOPE" report "$tmp/trunc.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "\[InvalidJson\]" <<<"$out" || fail "truncated: $out"
"$GENSCOPE" nosuchcommand >/dev/null 2>&1; rc=$?
[ $rc -ne 0 ] || fail "unknown subcommand must fail"
set -e

# probe: RAM always, a clear line when NVML is absent, GPUs through the fake NVML.
GENSCOPE_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$GENSCOPE" probe > "$tmp/probe.txt"
grep -q "system.total_bytes" "$tmp/probe.txt" || fail "probe shows RAM"
grep -q "GPU: NVML not available" "$tmp/probe.txt" || fail "probe says NVML is absent"
cat > "$tmp/scenario.json" <<'JSON'
{"driver_version": "550.54.15",
 "devices": [{"name": "Fake H200", "uuid": "GPU-fake-0", "total": 150000000000,
              "used": [1000000000], "utilization": {"gpu": 50, "memory": 10},
              "temperature": 60, "power_mw": 300000, "clocks": {"sm": 1980, "mem": 3201}}]}
JSON
GENSCOPE_FAKE_NVML_SCENARIO="$tmp/scenario.json" GENSCOPE_NVML_LIBRARY="$GENSCOPE_FAKE_NVML" \
  "$GENSCOPE" probe --json > "$tmp/probe.json"
/usr/bin/python3 - "$tmp/probe.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["probes"]["system"]["metrics"]["system.total_bytes"]["value"] > 0
assert j["probes"]["process"]["metrics"]["process.rss_bytes"]["value"] > 0
gpu = j["probes"]["nvml"]
assert gpu["gpus"][0]["name"] == "Fake H200", gpu
assert gpu["metrics"]["gpu0.used_bytes"]["value"] == 1e9, gpu
PY
echo "cli basics: ok"
