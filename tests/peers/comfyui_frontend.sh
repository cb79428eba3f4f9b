#!/usr/bin/env bash
# The node package's frontend extension (integrations/comfyui/web/genscope.js) in ComfyUI's own
# page, in real headless Chromium (Debian's /usr/bin/chromium driven by Playwright,
# tests/peers/comfyui_frontend/): a real ComfyUI (GENSCOPE_COMFYUI_DIR) with the package, a small
# SD1.5 workflow (the test's checkpoint, 64x64, 2 steps) loaded and queued from the page,
# then again (every node cached); the figures the page shows and draws on each node, the
# marks, the runs panel and the report it opens are checked against the run documents
# (comfyui_frontend_check.py). Screenshots: $GENSCOPE_FRONTEND_SHOTS/<name>-graph.png and
# -panel.png when that folder is given (docs/comfyui-graph*.png were made so).
#
#   GENSCOPE_COMFYUI_DIR=/path/to/ComfyUI tests/peers/comfyui_frontend.sh   exit 0, 1, 77 skipped
#
# The frontend: ComfyUI's own (the built-in web/ folder of v0.3.18, or the comfyui-frontend-package
# its requirements pin), or GENSCOPE_COMFYUI_FRONTEND=VERSION: that comfyui-frontend-package from
# PyPI, installed once into the peers cache (pip --target) and served with --front-end-root.
# Without node/npm, or when npm cannot install the pinned packages, it is skipped.
set -u
. "$(dirname "$0")/common.sh"
. "$root/tests/peers/comfyui_env.sh"
comfyui_env
need_module
[[ -x /usr/bin/chromium ]] || skip "Debian's chromium is not installed (/usr/bin/chromium)"
command -v node > /dev/null && command -v npm > /dev/null || skip "node and npm are not installed"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
  skip "node $(node --version) is older than 20, which Playwright needs"

# Playwright, pinned in package-lock.json, installed with npm ci outside the repository.
pinned=$root/tests/peers/comfyui_frontend
npm_cache=${XDG_CACHE_HOME:-$HOME/.cache}/genscope-npm-comfyui-frontend
mkdir -p "$npm_cache"
if ! cmp -s "$pinned/package-lock.json" "$npm_cache/package-lock.json" ||
   [[ ! -d $npm_cache/node_modules/playwright-core ]]; then
  cp "$pinned/package.json" "$pinned/package-lock.json" "$npm_cache/"
  timeout 300 npm ci --prefix "$npm_cache" --no-audit --no-fund > "$TMP/npm.log" 2>&1 ||
    { tail -n 5 "$TMP/npm.log"; rm -f "$npm_cache/package-lock.json"; skip "npm ci failed (registry unreachable?)"; }
fi

frontend_args=()
name=comfyui-$("$COMFYUI_PY" -c "import sys; sys.path.insert(0, '$COMFYUI'); import comfyui_version; print(comfyui_version.__version__)" 2>/dev/null || echo unknown)
if [[ -n ${GENSCOPE_COMFYUI_FRONTEND:-} ]]; then
  fe=$CACHE/comfyui-frontend-$GENSCOPE_COMFYUI_FRONTEND
  if [[ ! -f $fe/comfyui_frontend_package/static/index.html ]]; then
    (flock 9; [[ -f $fe/comfyui_frontend_package/static/index.html ]] ||
      "$COMFYUI_PY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$fe.tmp" \
        "comfyui-frontend-package==$GENSCOPE_COMFYUI_FRONTEND" && rm -rf "$fe" && mv "$fe.tmp" "$fe"
    ) 9> "$CACHE/comfyui-frontend.lock" ||
      { echo "FAIL: cannot install comfyui-frontend-package==$GENSCOPE_COMFYUI_FRONTEND"; exit 1; }
  fi
  frontend_args=(--front-end-root "$fe/comfyui_frontend_package/static")
  name=$name-frontend-$GENSCOPE_COMFYUI_FRONTEND
elif [[ -f $COMFYUI/web/index.html ]]; then
  # The built-in frontend: every script its page loads must be there.
  for script in $(grep -o 'src="[^"]*"' "$COMFYUI/web/index.html" | sed 's/src="\.\{0,1\}\/\{0,1\}//; s/"$//'); do
    [[ -f $COMFYUI/web/$script ]] || {
      echo "FAIL: $COMFYUI/web/index.html loads $script, which is not there (an incomplete copy of ComfyUI?);" \
           "set GENSCOPE_COMFYUI_FRONTEND to a comfyui-frontend-package version to serve that one instead"
      exit 1
    }
  done
fi

BASE=$TMP/base
mkdir -p "$BASE/models/checkpoints" "$BASE/custom_nodes" "$BASE/output" "$BASE/input" "$BASE/temp" \
  "$BASE/user/default" "$TMP/runs" "$TMP/out"
flock "$CACHE/sd15-random.lock" "$PY" "$root/tests/peers/make_sd15_checkpoint.py" "$CACHE/sd15-random.safetensors" ||
  { echo "FAIL: cannot write the SD1.5 checkpoint $CACHE/sd15-random.safetensors"; exit 1; }
ln -s "$CACHE/sd15-random.safetensors" "$BASE/models/checkpoints/sd15-random.safetensors"
ln -s "$root/integrations/comfyui" "$BASE/custom_nodes/genscope_comfyui"
# A scratch user: no first-start template dialog over the graph.
echo '{"Comfy.TutorialCompleted": true}' > "$BASE/user/default/comfy.settings.json"
port=$((20000 + RANDOM % 20000))
(cd "$COMFYUI" && exec env PYTHONPATH="$BUILD/python" GENSCOPE_COMFYUI_RUNS_DIR="$TMP/runs" \
  "$COMFYUI_PY" main.py --cpu --listen 127.0.0.1 --port $port --base-directory "$BASE" \
  --disable-auto-launch "${frontend_args[@]}" > "$TMP/server.log" 2>&1 < /dev/null) &
server=$!
stop() {
  kill -INT "$server" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$server" 2>/dev/null
  rm -rf "$TMP"
}
trap stop EXIT
for _ in $(seq 900); do
  grep -q "To see the GUI go to" "$TMP/server.log" && break
  kill -0 $server 2>/dev/null || { echo "FAIL: the ComfyUI server exited"; tail -5 "$TMP/server.log"; exit 1; }
  sleep 0.2
done
grep -q "genscope .*: monitoring ComfyUI" "$TMP/server.log" ||
  { echo "FAIL: the package is not monitoring"; grep -i genscope "$TMP/server.log"; exit 1; }

echo "== $name: ComfyUI's page in headless Chromium"
timeout 1200 node "$pinned/drive.mjs" "$npm_cache/node_modules" "http://127.0.0.1:$port/" \
  sd15-random.safetensors "$TMP/out"
drive=$?
if [[ -n ${GENSCOPE_FRONTEND_SHOTS:-} ]]; then
  mkdir -p "$GENSCOPE_FRONTEND_SHOTS"
  for shot in graph panel failure; do
    [[ -f $TMP/out/$shot.png ]] && cp "$TMP/out/$shot.png" "$GENSCOPE_FRONTEND_SHOTS/$name-$shot.png"
  done
fi
[[ -f $TMP/out/result.json ]] || { echo "FAIL: the page driver wrote no result (exit $drive)"; tail -20 "$TMP/server.log"; exit 1; }
"$PY" "$root/tests/peers/comfyui_frontend_check.py" "$TMP/out/result.json" "$TMP/runs"
rc=$?
[[ $drive == 0 ]] || rc=1
[[ $rc == 0 ]] || { echo "--- ComfyUI log, last lines:"; tail -20 "$TMP/server.log"; }
exit $rc
