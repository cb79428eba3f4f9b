# The test OpenTelemetry Collector (tests/otel_collector: the project's own main.go on the
# collector's Go modules, an otlp receiver and a file exporter), built from the Go module proxy
# and cached (sourced by scripts/test and tests/cli/otlp_collector.sh, not run).
#
#   otel_collector_binary   prints the collector's path, building it first if needed; the
#                           build's progress and time go to stderr; non-zero when it cannot
#   otel_collector_start DIR  starts it (built if needed) on a free loopback port writing to
#                           DIR/collector.json, log DIR/collector.log; sets OTEL_COLLECTOR_PID,
#                           OTEL_COLLECTOR_URL and OTEL_COLLECTOR_OUT; non-zero when it does not
#                           listen within 10 s (the caller stops it: kill $OTEL_COLLECTOR_PID)
#
# The binary, GOMODCACHE and GOCACHE live in $GENSCOPE_PEERS_CACHE/otelcol (default
# ~/.cache/genscope-peers/otelcol), the binary named after a hash of go.mod, go.sum and main.go,
# so a changed pin builds a new one. flock keeps two runs from building it at once. The first
# build on a fresh machine downloads the modules (about 10 s) and compiles them (about 2 min of
# CPU on 2 cores; docs/opentelemetry.md, "Tests").

otel_collector_cache=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}/otelcol
otel_collector_source=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tests/otel_collector" && pwd)

otel_collector_binary() {
  local go=${GENSCOPE_GO:-}
  [[ -n $go ]] || go=$(command -v go || echo /usr/local/go/bin/go)
  if [[ ! -x $go ]]; then
    echo "otel_collector_binary: no go command (the machine's Go, /usr/local/go/bin/go)" >&2
    return 1
  fi
  local hash bin lock rc=0 start
  hash=$(cat "$otel_collector_source"/go.mod "$otel_collector_source"/go.sum \
    "$otel_collector_source"/main.go | sha256sum | cut -c1-12)
  bin=$otel_collector_cache/genscope-otelcol-$hash
  if [[ ! -x $bin ]]; then
    mkdir -p "$otel_collector_cache"
    exec {lock}>"$otel_collector_cache/build.lock"
    flock "$lock"
    if [[ ! -x $bin ]]; then
      start=$(date +%s.%N)
      (cd "$otel_collector_source" &&
        GOMODCACHE=$otel_collector_cache/gomod GOCACHE=$otel_collector_cache/gocache \
          GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
          "$go" build -trimpath -o "$bin.tmp" .) >&2 && mv "$bin.tmp" "$bin" || rc=$?
      awk -v a="$start" -v b="$(date +%s.%N)" -v rc=$rc \
        'BEGIN { printf "[otelcol] build: %.1f s%s\n", b - a, rc ? " (failed)" : "" }' >&2
    fi
    exec {lock}>&-
  fi
  [[ $rc -eq 0 ]] && echo "$bin"
  return $rc
}

otel_collector_start() {
  local dir=$1 bin port
  bin=$(otel_collector_binary) || return 1
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
  OTEL_COLLECTOR_OUT=$dir/collector.json
  OTEL_COLLECTOR_URL=http://127.0.0.1:$port
  sed -e "s/@PORT@/$port/" -e "s#@OUT@#$OTEL_COLLECTOR_OUT#" "$otel_collector_source/config.yaml.in" > "$dir/collector.yaml"
  "$bin" --config "$dir/collector.yaml" > "$dir/collector.log" 2>&1 &
  OTEL_COLLECTOR_PID=$!
  local _
  for _ in $(seq 100); do
    /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "otel_collector_start: the collector does not listen on $port (see $dir/collector.log)" >&2
  return 1
}
