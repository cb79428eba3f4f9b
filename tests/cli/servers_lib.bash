# Sourced by the CLI tests that start servers (metrics_servers.sh, otlp_collector.sh; not a
# test itself: tests/CMakeLists.txt runs tests/cli/*.sh), after `set -euo pipefail`: a scratch
# folder $tmp, the server pids in pids (each stopped, then killed after 5 s, by the EXIT trap,
# which also removes $tmp), and fail MESSAGE (prints it and the tail of every $tmp/*.log,
# exits 1).
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}
