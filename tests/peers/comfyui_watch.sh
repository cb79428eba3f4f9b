#!/usr/bin/env bash
# A real ComfyUI (GENSCOPE_COMFYUI_DIR; written against v0.3.18) watched by `genscope watch --pid
# --log` while three prompts run (tests/peers/comfyui_drive.py on comfyui_watch_workflow.json:
# the first loads everything, the second only changes the seed, the third adds a LoraLoader);
# genscope's runs are compared with ComfyUI's own record, /history and /internal/logs/raw
# (tests/peers/compare_comfyui.py). The node package runs in the same server, and its runs are
# compared with watch's (compare_watch_nodes.py). ComfyUI's python: tests/peers/comfyui_env.sh.
# Its models, custom nodes, output and user folders are this test's (--base-directory): the
# given ComfyUI folder is not written to.
set -u
. "$(dirname "$0")/common.sh"
. "$root/tests/peers/comfyui_env.sh"
comfyui_env
BASE=$TMP/base
mkdir -p "$BASE/models/checkpoints" "$BASE/models/loras" "$BASE/custom_nodes" "$BASE/output" "$BASE/input" \
  "$BASE/temp" "$BASE/user"
flock "$CACHE/sd15-random.lock" "$PY" "$root/tests/peers/make_sd15_checkpoint.py" "$CACHE/sd15-random.safetensors" ||
  { echo "FAIL: cannot write the SD1.5 checkpoint $CACHE/sd15-random.safetensors"; exit 1; }
ln -s "$CACHE/sd15-random.safetensors" "$BASE/models/checkpoints/sd15-random.safetensors"
"$PY" "$root/tests/peers/make_sd15_lora.py" "$BASE/models/loras/peer_lora.safetensors"
port=$((20000 + RANDOM % 20000))
url=http://127.0.0.1:$port
# The genscope node package runs inside the same server (from this test's custom-nodes folder),
# so that the two ways in can be compared on the same prompts (compare_watch_nodes.py).
package=
SITE=
BUILD=${GENSCOPE_BUILD_DIR:-$root/build}
if ls "$BUILD"/python/genscope/_genscope*.so > /dev/null 2>&1; then
  mkdir -p "$TMP/package-runs"
  ln -s "$root/integrations/comfyui" "$BASE/custom_nodes/genscope_comfyui"
  package=yes
  SITE=$BUILD/python
else
  echo "note: the genscope Python module is not built in $BUILD/python: watch only"
fi
(cd "$COMFYUI" && exec env ${SITE:+PYTHONPATH="$SITE"} GENSCOPE_COMFYUI_RUNS_DIR="$TMP/package-runs" \
  "$COMFYUI_PY" main.py --cpu --listen 127.0.0.1 --port $port --base-directory "$BASE" \
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
"$PY" "$root/tests/peers/comfyui_drive.py" $url "$root/tests/peers/comfyui_watch_workflow.json" "$TMP/record.json" ||
  { echo "FAIL: a prompt failed"; tail -20 "$TMP/server.log"; exit 1; }
sleep 0.5  # the last lines are read (every 10 ms)
kill -INT $watcher
wait $watcher
status=$?
watcher=
[[ $status == 0 ]] || { echo "FAIL: genscope watch exited $status"; cat "$TMP/watch.out"; exit 1; }
cd "$root/tests/peers" && "$PY" compare_comfyui.py "$TMP/runs" "$TMP/record.json"
rc=$?
if [[ -n $package ]]; then
  for _ in $(seq 50); do  # the package writes each run document on its own thread
    [[ $(ls "$TMP/package-runs"/*.json 2>/dev/null | wc -l) -ge 3 ]] && break
    sleep 0.2
  done
  echo "genscope watch and the node package, same server, same prompts:"
  "$PY" compare_watch_nodes.py "$TMP/runs" "$TMP/package-runs" || rc=1
fi
exit $rc
