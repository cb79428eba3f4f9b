#!/usr/bin/env bash
# ComfyUI v0.3.18 (../shared/peers/comfyui) watched by `genscope watch --pid --log` while three
# prompts run (tests/peers/comfyui_drive.py: the first loads everything, the second only
# changes the seed, the third adds a LoraLoader); genscope's runs are compared with ComfyUI's
# own record, /history and /internal/logs/raw (tests/peers/compare_comfyui.py).
set -u
. "$(dirname "$0")/common.sh"
prep=$("$PEERS/comfyui/prepare" "$CACHE/comfyui" 2>&1) || skip "peer not available: comfyui: $(tail -1 <<<"$prep")"
COMFYUI=$(sed -n 's/^COMFYUI=//p' <<<"$prep")
SITE=$(sed -n 's/^PYTHONPATH=//p' <<<"$prep")
[[ -d $COMFYUI && -d $SITE ]] || skip "peer not available: comfyui/prepare gave no COMFYUI/PYTHONPATH"
"$PY" "$root/tests/peers/make_sd15_lora.py" "$COMFYUI/models/loras/peer_lora.safetensors"
port=$((20000 + RANDOM % 20000))
url=http://127.0.0.1:$port
(cd "$COMFYUI" && exec env PYTHONPATH="$SITE" "$PY" main.py --cpu --listen 127.0.0.1 --port $port \
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
