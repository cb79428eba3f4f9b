#!/usr/bin/env bash
# The live endpoint of `genscope run --metrics-port` under slow clients and at the end of a
# run (docs/metrics.md, "Endpoint"): two clients sending one byte a second neither block a
# scrape nor keep genscope alive after CMD exits (each connection has a 5 s deadline); the
# listen backlog is the system's (SOMAXCONN), not 5; after CMD exits the endpoint stays up
# until one scrape has read the final state (run_active 0, runs_total) or --metrics-linger
# passes, whichever is first. Loopback only; every wait bounded.
set -euo pipefail
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done; exit 1; }
py=/usr/bin/python3
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# scrape PORT [TIMEOUT] [ACCEPT]: the body on stdout; non-zero when not 200 or too slow.
scrape() {
  "$py" - "http://127.0.0.1:$1/metrics" "${2:-2}" "${3:-}" <<'PY'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Accept": sys.argv[3]} if sys.argv[3] else {})
with urllib.request.urlopen(req, timeout=float(sys.argv[2])) as r:
    assert r.status == 200
    sys.stdout.write(r.headers["Content-Type"] + "\n" + r.read().decode())
PY
}
wait_up() { for _ in $(seq 100); do scrape "$1" 1 > /dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

# --- slow clients -------------------------------------------------------------------------
port=$(free_port)
start=$(date +%s.%N)
timeout 60 "$GENSCOPE" run --quiet --metrics-port "$port" --metrics-linger 1 -- sleep 4 \
  > /dev/null 2> "$tmp/slow.log" &
run_pid=$!
pids+=("$run_pid")
wait_up "$port" || fail "the endpoint did not come up"
# The listen backlog: ss shows it as Send-Q of the listening socket.
backlog=$(ss -ltnH "sport = :$port" | awk '{print $3}' | head -n1)
[ -n "$backlog" ] && [ "$backlog" -ge 128 ] || fail "listen backlog '$backlog' (want >= 128)"
for i in 1 2; do
  "$py" - "$port" <<'PY' > /dev/null 2>&1 &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for c in b"GET /metrics HTTP/1.1\r\nHost: x\r\n" * 4:  # one byte a second, never done
    s.send(bytes([c]))
    time.sleep(1)
PY
  pids+=("$!")
done
sleep 1.5
for i in 1 2 3; do
  t0=$(date +%s.%N)
  scrape "$port" 2 > "$tmp/scrape$i.txt" || fail "scrape $i failed beside two slow clients"
  "$py" -c "import sys; d=float(sys.argv[2])-float(sys.argv[1]); sys.exit(0 if d < 1 else 1)" "$t0" "$(date +%s.%N)" ||
    fail "scrape $i took over 1 s beside two slow clients"
done
grep -q "^genscope_run_active 1$" "$tmp/scrape1.txt" || fail "scrape during the run: $(head -5 "$tmp/scrape1.txt")"
wait "$run_pid" || fail "genscope run failed"
elapsed=$("$py" -c "import sys; print(float(sys.argv[2])-float(sys.argv[1]))" "$start" "$(date +%s.%N)")
# sleep 4 + at most 1 s of linger + start-up; the slow clients (30+ s of bytes) do not count.
"$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 8 else 1)" "$elapsed" ||
  fail "genscope run took $elapsed s with two slow clients (want < 8)"
echo "slow clients: run returned after ${elapsed} s, scrapes answered, backlog $backlog"

# --- the final state reaches a scraper; the linger ends at that scrape --------------------
port=$(free_port)
start=$(date +%s.%N)
timeout 60 "$GENSCOPE" run --quiet --metrics-port "$port" --metrics-linger 30 -- sleep 1 \
  > /dev/null 2> "$tmp/linger.log" &
run_pid=$!
pids+=("$run_pid")
wait_up "$port" || fail "the endpoint did not come up"
# A scraper every 0.3 s, in OpenMetrics as Prometheus asks, keeping its last answer.
for _ in $(seq 100); do
  scrape "$port" 1 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' \
    > "$tmp/last.txt.new" 2> /dev/null || break
  mv "$tmp/last.txt.new" "$tmp/last.txt"
  grep -q "^genscope_run_active 0$" "$tmp/last.txt" && break
  sleep 0.3
done
wait "$run_pid" || fail "genscope run failed"
elapsed=$("$py" -c "import sys; print(float(sys.argv[2])-float(sys.argv[1]))" "$start" "$(date +%s.%N)")
head -n1 "$tmp/last.txt" | grep -q "^application/openmetrics-text; version=1.0.0" || fail "not OpenMetrics: $(head -n1 "$tmp/last.txt")"
grep -q "^genscope_run_active 0$" "$tmp/last.txt" || fail "the final state was never scraped"
grep -q '^genscope_runs_total{status="ok"} 1$' "$tmp/last.txt" || fail "runs_total not in the final state"
tail -n1 "$tmp/last.txt" | grep -q "^# EOF$" || fail "OpenMetrics without # EOF"
"$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 10 else 1)" "$elapsed" ||
  fail "the linger did not end at the final scrape ($elapsed s, linger 30 s)"
echo "final state scraped; run returned after ${elapsed} s of a 30 s linger"

# --- nobody scrapes: the linger bounds the wait -------------------------------------------
port=$(free_port)
start=$(date +%s.%N)
timeout 60 "$GENSCOPE" run --quiet --metrics-port "$port" --metrics-linger 2 -- true > /dev/null 2>&1
elapsed=$("$py" -c "import sys; print(float(sys.argv[2])-float(sys.argv[1]))" "$start" "$(date +%s.%N)")
"$py" -c "import sys; d=float(sys.argv[1]); sys.exit(0 if 1.9 <= d < 6 else 1)" "$elapsed" ||
  fail "an unscraped run with --metrics-linger 2 returned after $elapsed s"
echo "metrics endpoint: ok"
