#!/usr/bin/env bash
# ComfyUI v0.3.18 (../shared/peers/comfyui) watched by `genscope watch --pid --log` while three
# prompts run (tests/peers/comfyui_drive.py: the first loads everything, the second only
# changes the seed, the third adds a LoraLoader); genscope's runs are compared with ComfyUI's
# own record, /history and /internal/logs/raw (tests/peers/compare_comfyui.py). The node package
# runs in the same server, and its runs are compared with watch's (compare_watch_nodes.py).
set -u
. "$(dirname "$0")/common.sh"
prep=$("$PEERS/comfyui/prepare" "$CACHE/comfyui" 2>&1) || skip "peer not available: comfyui: $(tail -1 <<<"$prep")"
COMFYUI=$(sed -n 's/^COMFYUI=//p' <<<"$prep")
SITE=$(sed -n 's/^PYTHONPATH=//p' <<<"$prep")
[[ -d $COMFYUI && -d $SITE ]] || skip "peer not available: comfyui/prepare gave no COMFYUI/PYTHONPATH"
"$PY" "$root/tests/peers/make_sd15_lora.py" "$COMFYUI/models/loras/peer_lora.safetensors"
port=$((20000 + RANDOM % 20000))
url=http://127.0.0.1:$port
# The genscope node package runs inside the same server (from a custom-nodes folder of this
# test's, added through ComfyUI's extra paths: the shared ComfyUI folder is not touched), so
# that the two ways in can be compared on the same prompts (compare_watch_nodes.py).
package_args=()
BUILD=${GENSCOPE_BUILD_DIR:-$root/build}
if ls "$BUILD"/python/genscope/_genscope*.so > /dev/null 2>&1; then
  mkdir -p "$TMP/nodes" "$TMP/package-runs"
  ln -s "$root/integrations/comfyui" "$TMP/nodes/genscope_comfyui"
  printf 'genscope_test:\n  custom_nodes: %s\n' "$TMP/nodes" > "$TMP/extra_paths.yaml"
  package_args=(--extra-model-paths-config "$TMP/extra_paths.yaml")
  SITE="$SITE:$BUILD/python"
else
  echo "note: the genscope Python module is not built in $BUILD/python: watch only"
fi
(cd "$COMFYUI" && exec env PYTHONPATH="$SITE" GENSCOPE_COMFYUI_RUNS_DIR="$TMP/package-runs" \
  "$PY" main.py --cpu --listen 127.0.0.1 --port $port "${package_args[@]}" \
  >"$TMP/server.log" 2>&1 </dev/null) &
server=$!
stop() {
  [[ -n ${watcher:-} ]] && kill -INT "$watcher" 2>/dev/null
  kill -INT "$server" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$server" 2>/dev/null
  rm -rf "$TMP"
}
trap stop EXIT
"$GENSCOPE" watch --pid $server --log "$TMP/server.log" --log-poll 10 --quiet --out "$TMP/runs" \
  >"$TMP/watch.out" 2>&1 &
watcher=$!
for _ in $(seq 600); do
  grep -q "To see the GUI go to" "$TMP/server.log" && break
  kill -0 $server 2>/dev/null || { echo "FAIL: the ComfyUI server exited"; tail -5 "$TMP/server.log"; exit 1; }
  sleep 0.2
done
"$PY" "$root/tests/peers/comfyui_drive.py" $url "$PEERS/comfyui/workflow.json" "$TMP/record.json" ||
  { echo "FAIL: a prompt failed"; tail -20 "$TMP/server.log"; exit 1; }
sleep 0.5  # the last lines are read (every 10 ms)
kill -INT $watcher
wait $watcher
status=$?
watcher=
[[ $status == 0 ]] || { echo "FAIL: genscope watch exited $status"; cat "$TMP/watch.out"; exit 1; }
cd "$root/tests/peers" && "$PY" compare_comfyui.py "$TMP/runs" "$TMP/record.json"
rc=$?
if ((${#package_args[@]})); then
  for _ in $(seq 50); do  # the package writes each run document on its own thread
    [[ $(ls "$TMP/package-runs"/*.json 2>/dev/null | wc -l) -ge 3 ]] && break
    sleep 0.2
  done
  echo "genscope watch and the node package, same server, same prompts:"
  "$PY" compare_watch_nodes.py "$TMP/runs" "$TMP/package-runs" || rc=1
fi
exit $rc
