#!/usr/bin/env bash
# The real servers from Debian, on loopback: a Prometheus scrapes `genscope demo
# --metrics-port` (GPU figures through the fake NVML; in OpenMetrics, which it asks for) and
# its HTTP API answers with the series, the final state of the finished run included (the
# endpoint lingers until it is scraped), per-kind totals equal to the run document's
# top-level steps; the demo's --pushgateway, `genscope report --pushgateway` and `genscope
# run --pushgateway` push to a real Pushgateway, which Prometheus scrapes too, and
# increase(genscope_runs_total) counts the three pushed runs. Every wait is bounded and every server is
# stopped by the trap. Exit 77 (skipped) when genscope was built without LibTorch (no demo).
set -euo pipefail
# shellcheck source=servers_lib.bash
source "$(dirname "$0")/servers_lib.bash"  # $tmp, pids, cleanup trap, fail

"$GENSCOPE" demo --help 2>&1 | grep -q -- --preset || { echo "SKIP: genscope has no demo (built without LibTorch)"; exit 77; }
for tool in prometheus prometheus-pushgateway; do
  command -v "$tool" > /dev/null || fail "$tool is not installed (scripts/setup installs it)"
done

py=/usr/bin/python3
# A port the kernel just handed out and released (the bind below retries if it was taken).
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# http_get URL [TIMEOUT]: the body on stdout; non-zero when not 2xx or unreachable.
http_get() {
  "$py" - "$1" "${2:-5}" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as r:
        sys.stdout.write(r.read().decode())
except Exception as e:
    sys.stderr.write(str(e) + "\n"); sys.exit(1)
PY
}
# wait_for SECONDS COMMAND...: retries COMMAND every 0.2 s until it succeeds or time is up.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" > /dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}
# start_server NAME READY_PATH COMMAND_WITH_{PORT}...: picks a port, starts the server, waits
# for READY_PATH; a second and third port when the first could not be bound. Sets $port.
start_server() {
  local name=$1 ready=$2; shift 2
  for attempt in 1 2 3; do
    port=$(free_port)
    local args=("${@//\{PORT\}/$port}")
    "${args[@]}" > "$tmp/$name.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    server_pid=$pid
    if wait_for 30 http_get "http://127.0.0.1:$port$ready" 1; then return 0; fi
    kill "$pid" 2>/dev/null || true
    echo "$name: not ready on port $port (attempt $attempt)" >&2
  done
  fail "$name did not start"
}

# target_known ADDRESS: Prometheus lists ADDRESS among its active targets, scraped at least once.
target_known() {
  "$py" - "http://127.0.0.1:$prom/api/v1/targets" "$1" <<'PY'
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    targets = json.load(r)["data"]["activeTargets"]
ok = [t for t in targets if t["labels"].get("instance") == sys.argv[2] and t["health"] != "unknown"]
sys.exit(0 if ok else 1)
PY
}

# The Pushgateway (no persistence file).
start_server pushgateway /-/ready prometheus-pushgateway --web.listen-address=127.0.0.1:{PORT} \
  --persistence.file= --log.level=warn
pg=$port

# Prometheus scraping the demo's endpoint (port chosen now, bound by the demo below) and the
# Pushgateway, every 300 ms (a timeout as long as the interval: a loaded machine answers late).
for attempt in 1 2 3; do
  demo_port=$(free_port)
  cat > "$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 300ms
  scrape_timeout: 300ms
scrape_configs:
  - job_name: genscope-live
    static_configs: [{targets: ['127.0.0.1:$demo_port']}]
  - job_name: pushgateway
    honor_labels: true
    static_configs: [{targets: ['127.0.0.1:$pg']}]
YAML
  if [ -z "${prom:-}" ]; then
    start_server prometheus /-/ready prometheus --config.file="$tmp/prometheus.yml" \
      --storage.tsdb.path="$tmp/data" --web.listen-address=127.0.0.1:{PORT} --log.level=warn
    prom=$port
    prom_pid=$server_pid
  else
    kill -HUP "$prom_pid"  # reload the configuration with the new target
  fi

  # Prometheus applies (re)discovered targets a few seconds after start: wait until it scrapes.
  wait_for 30 target_known "127.0.0.1:$demo_port" || fail "Prometheus never took the demo target"

  # The demo: the fake NVML gives it a GPU; long enough (300 sampling steps) to be scraped.
  cat > "$tmp/nvml.json" <<'JSON'
{"driver_version": "550.54.15",
 "devices": [{"name": "Fake H200", "uuid": "GPU-fake-0", "total": 150000000000,
              "used": [1000000000, 2000000000], "utilization": {"gpu": 97, "memory": 40},
              "temperature": 61, "power_mw": 450000, "clocks": {"sm": 1980, "mem": 3201}}]}
JSON
  set +e
  GENSCOPE_FAKE_NVML_SCENARIO="$tmp/nvml.json" GENSCOPE_NVML_LIBRARY="$GENSCOPE_FAKE_NVML" \
    timeout 300 "$GENSCOPE" demo --preset tiny --steps 300 --plain --out "$tmp/demo" \
    --metrics-port "$demo_port" --metrics-linger 60 --pushgateway "http://127.0.0.1:$pg" \
    > "$tmp/demo.out" 2> "$tmp/demo.log"
  rc=$?
  set -e
  [ $rc -eq 0 ] || fail "demo exited with $rc"
  grep -q "serving metrics on http://127.0.0.1:$demo_port/metrics" "$tmp/demo.log" && break
  grep -q "cannot serve metrics" "$tmp/demo.log" || fail "demo said nothing about its endpoint"
  echo "demo port $demo_port was taken (attempt $attempt)" >&2
  [ $attempt -lt 3 ] || fail "no free port for the demo"
done
grep -q "metrics pushed to http://127.0.0.1:$pg" "$tmp/demo.log" || fail "the demo did not push"

# Prometheus' HTTP API: what it scraped from the live endpoint while the demo ran. Range
# functions read past the staleness markers written when the demo exited.
query() { # query PROMQL -> the JSON result list on stdout
  "$py" - "http://127.0.0.1:$prom/api/v1/query" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
with urllib.request.urlopen(url, timeout=5) as r:
    j = json.load(r)
assert j["status"] == "success", j
print(json.dumps(j["data"]["result"]))
PY
}
check_value() { # check_value PROMQL PYTHON_CONDITION_ON_v: every result satisfies it (and one exists)
  local out
  out=$(query "$1") || return 1
  "$py" -c 'import json,sys; r=json.loads(sys.argv[1]); v=[float(x["value"][1]) for x in r]; sys.exit(0 if r and all('"$2"' for v in v) else 1)' \
    "$out" || { echo "query $1 gave $out (wanted $2)" >&2; return 1; }
}
expect_value() { check_value "$@" || fail "query $1"; }
expect_value 'max_over_time(up{job="genscope-live"}[10m])' 'v == 1'
expect_value 'max_over_time(genscope_run_active{job="genscope-live"}[10m])' 'v == 1'
expect_value 'max_over_time(genscope_current_step_elapsed_seconds{job="genscope-live",kind="sampling",step="sampling"}[10m])' 'v > 0'
expect_value 'max_over_time(genscope_current_step_iterations{job="genscope-live",kind="sampling"}[10m])' 'v >= 1'
expect_value 'max_over_time(genscope_process_resident_memory_bytes{job="genscope-live"}[10m])' 'v > 1e7'
expect_value 'max_over_time(genscope_gpu_power_watts{job="genscope-live",gpu="0"}[10m])' 'v == 450'
expect_value 'max_over_time(genscope_gpu_memory_used_bytes{job="genscope-live",gpu="0"}[10m])' 'v >= 1e9'
expect_value 'max_over_time(genscope_steps_total{job="genscope-live",kind="model_loading",status="ok"}[10m])' 'v >= 1'
# The final state of the finished run was scraped (the endpoint lingered until it was: up to
# 60 s here rather than the default 5 s; the linger ends at the first scrape of the final state
# either way). ctest runs this test alone (tests/CMakeLists.txt: RUN_SERIAL).
# (Polled for a few seconds: the scrape that ended the linger may still be being stored.)
wait_for 10 check_value 'last_over_time(genscope_run_active{job="genscope-live"}[10m])' 'v == 0' ||
  expect_value 'last_over_time(genscope_run_active{job="genscope-live"}[10m])' 'v == 0'
expect_value 'max_over_time(genscope_runs_total{job="genscope-live",status="ok"}[10m])' 'v == 1'
expect_value 'max_over_time(genscope_steps_total{job="genscope-live",kind="save",status="ok"}[10m])' 'v >= 1'
expect_value 'max_over_time(genscope_steps_total{job="genscope-live",kind="vae_decode",status="ok"}[10m])' 'v >= 1'
# Per-kind totals count each moment once: they equal the sums over the run document's
# top-level steps of that kind.
"$py" - "$tmp/demo/run.json" > "$tmp/totals.txt" <<'PY'
import json, sys
from collections import defaultdict
run = json.load(open(sys.argv[1]))
seconds, work = defaultdict(float), defaultdict(float)
for s in run["steps"]:
    if s["parent_id"] != -1:
        continue
    seconds[s["kind"]] += s["duration_ns"] / 1e9
    for name, value in (s.get("counters") or {}).items():
        work[(s["kind"], name)] += value
for kind, v in seconds.items():
    print('genscope_step_duration_seconds_sum{job="genscope-live",kind="%s"} %r' % (kind, v))
for (kind, name), v in work.items():
    family = "genscope_work_bytes_total" if name == "bytes" or name.endswith("_bytes") else "genscope_work_total"
    print('%s{job="genscope-live",kind="%s",counter="%s"} %r' % (family, kind, name, v))
PY
grep -q 'kind="model_loading",counter="bytes"' "$tmp/totals.txt" || fail "the demo loaded no bytes? $(cat "$tmp/totals.txt")"
while read -r selector want; do
  expect_value "max_over_time(${selector}[10m])" "abs(v - $want) <= 1e-9 * max(1, $want)"
done < "$tmp/totals.txt"
# Prometheus scraped OpenMetrics: the UNIT it keeps as metadata exists only in that format.
"$py" - "http://127.0.0.1:$prom/api/v1/targets/metadata" <<'PY' || fail "no OpenMetrics unit in Prometheus' metadata"
import json, sys, urllib.parse, urllib.request
q = urllib.parse.urlencode({"match_target": '{job="genscope-live"}', "metric": "genscope_run_duration_seconds"})
with urllib.request.urlopen(sys.argv[1] + "?" + q, timeout=5) as r:
    j = json.load(r)
assert j["data"] and j["data"][0]["unit"] == "seconds", j
PY
# The series API lists the histogram's buckets.
"$py" - "http://127.0.0.1:$prom/api/v1/series" <<'PY' || fail "series API"
import json, sys, time, urllib.parse, urllib.request
q = urllib.parse.urlencode({"match[]": 'genscope_step_duration_seconds_bucket{job="genscope-live"}',
                            "start": time.time() - 600, "end": time.time()})
with urllib.request.urlopen(sys.argv[1] + "?" + q, timeout=5) as r:
    j = json.load(r)
les = {s["le"] for s in j["data"] if s.get("kind") == "model_loading"}
assert "+Inf" in les and len(les) == 21, les
PY

# The Pushgateway holds the demo's final figures under job/instance of its grouping key.
host=$(hostname)
http_get "http://127.0.0.1:$pg/api/v1/metrics" > "$tmp/pushed.json" || fail "pushgateway API"
"$py" - "$tmp/pushed.json" "$host" <<'PY' || fail "pushed group"
import json, sys
groups = json.load(open(sys.argv[1]))["data"]
g = [g for g in groups if g["labels"].get("job") == "genscope" and g["labels"].get("instance") == sys.argv[2]]
assert len(g) == 1, [x["labels"] for x in groups]
g = g[0]
assert g["last_push_successful"] is True
for name in ("genscope_runs_total", "genscope_step_duration_seconds", "genscope_process_resident_memory_peak_bytes",
             "genscope_gpu_power_watts", "genscope_samples_total"):
    assert name in g, (name, sorted(g))
assert g["genscope_step_duration_seconds"]["type"] == "HISTOGRAM"
assert g["genscope_runs_total"]["metrics"][0]["labels"]["status"] == "ok"
PY
# ... and Prometheus scrapes it from there (honor_labels keeps job/instance).
wait_for 20 check_value "genscope_samples_total{job=\"genscope\",instance=\"$host\"}" 'v > 0' ||
  fail "Prometheus never scraped the pushed figures"

# `genscope report --pushgateway` replaces the group with a saved run's figures; its counters
# carry on from the group's (a second run pushed: runs_total 2).
"$GENSCOPE" report "$tmp/demo/run.json" --pushgateway "http://127.0.0.1:$pg" > /dev/null 2> "$tmp/report.log" ||
  fail "report --pushgateway"
grep -q "metrics pushed" "$tmp/report.log" || fail "report did not say it pushed"
http_get "http://127.0.0.1:$pg/metrics" > "$tmp/gateway.prom" || fail "pushgateway /metrics"
grep -q "^genscope_runs_total{instance=\"$host\",job=\"genscope\",status=\"ok\"} 2$" "$tmp/gateway.prom" ||
  fail "pushgateway /metrics: runs_total is not 2 after two pushes: $(grep runs_total "$tmp/gateway.prom")"
wait_for 20 check_value "genscope_runs_total{job=\"genscope\",instance=\"$host\",status=\"ok\"}" 'v == 2' ||
  fail "Prometheus never scraped runs_total 2"

# `genscope run --pushgateway`: each run of a watched program is pushed as it finishes.
"$GENSCOPE" run --runs announced --quiet --pipeline watched-comfy --pushgateway "http://127.0.0.1:$pg" -- \
  sh -c 'echo "got prompt"; echo "Requested to load SDXL"; echo "Prompt executed in 0.01 seconds"' \
  > /dev/null 2> "$tmp/run.log" || fail "run --pushgateway: $(cat "$tmp/run.log")"
grep -q "genscope run: metrics pushed to http://127.0.0.1:$pg" "$tmp/run.log" || fail "run did not push: $(cat "$tmp/run.log")"
http_get "http://127.0.0.1:$pg/metrics" > "$tmp/gateway-run.prom" || fail "pushgateway /metrics after run"
grep -q 'pipeline="watched-comfy"' "$tmp/gateway-run.prom" || fail "the watched run's figures are not at the gateway"
grep -q "^genscope_runs_total{instance=\"$host\",job=\"genscope\",status=\"ok\"} 3$" "$tmp/gateway-run.prom" ||
  fail "runs_total is not 3 after three pushes: $(grep runs_total "$tmp/gateway-run.prom")"
# increase() over the pushes counts the runs (1 -> 3 seen by Prometheus: 2 more runs).
wait_for 20 check_value "genscope_runs_total{job=\"genscope\",instance=\"$host\",status=\"ok\"}" 'v == 3' ||
  fail "Prometheus never scraped runs_total 3"
expect_value "increase(genscope_runs_total{job=\"genscope\",instance=\"$host\",status=\"ok\"}[10m])" 'v >= 1.9'
expect_value "resets(genscope_runs_total{job=\"genscope\",instance=\"$host\",status=\"ok\"}[10m])" 'v == 0'
# Ranks: the runs of two ranks of one job on this host, pushed, are two groups
# (job/genscope/instance/<host>/rank/<R>), neither replacing the other nor the host's own group.
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 GENSCOPE_DISTRIBUTED_GROUP=metrics-servers-test "$GENSCOPE" demo \
    --out "$tmp/rank$r" > "$tmp/rank$r.log" 2>&1 || fail "demo as rank $r: $(tail -3 "$tmp/rank$r.log")"
  "$GENSCOPE" report "$tmp/rank$r/run.json" --pushgateway "http://127.0.0.1:$pg" > /dev/null \
    2> "$tmp/rank-push$r.log" || fail "report --pushgateway of rank $r: $(cat "$tmp/rank-push$r.log")"
done
http_get "http://127.0.0.1:$pg/api/v1/metrics" > "$tmp/pushed-ranks.json" || fail "pushgateway API (ranks)"
"$py" - "$tmp/pushed-ranks.json" "$host" <<'PY' || fail "rank groups"
import json, sys
groups = json.load(open(sys.argv[1]))["data"]
mine = {g["labels"].get("rank"): g for g in groups
        if g["labels"].get("job") == "genscope" and g["labels"].get("instance") == sys.argv[2]}
assert set(mine) == {None, "0", "1"}, sorted(map(str, mine))  # the host's group and one per rank
for rank in ("0", "1"):
    g = mine[rank]
    assert g["last_push_successful"] is True, g
    info = g["genscope_run_info"]["metrics"][0]["labels"]
    assert info["rank"] == rank and info["world_size"] == "2", info
    assert info["group"] == "metrics-servers-test", info
    total = g["genscope_runs_total"]["metrics"][0]
    assert float(total["value"]) == 1.0, total  # each rank's own count, not the host's
PY
echo "metrics servers: ok (prometheus :$prom, pushgateway :$pg, demo :$demo_port)"
