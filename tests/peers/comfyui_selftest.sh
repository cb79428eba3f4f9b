#!/usr/bin/env bash
# `genscope comfyui selftest` on a real ComfyUI (GENSCOPE_COMFYUI_DIR; v0.3.18 and 0.3.64 run
# here): the command starts that ComfyUI with the package in a scratch folder, queues its
# prompts (fresh, cached, no client id, a failing node, an interrupt, an async node where the
# ComfyUI runs them, and the random-weight SD1.5 checkpoint workflow) and prints one verdict
# line per check (integrations/comfyui/selftest.py; docs/comfyui.md, "Selftest").
#
#   GENSCOPE_COMFYUI_DIR=/path/to/ComfyUI tests/peers/comfyui_selftest.sh [BUILD_DIR]
#                                               exit 0 pass, 1 fail, 77 skipped
# GENSCOPE_SELFTEST_RECORD=FILE keeps ComfyUI's messages of every prompt (the fixtures
# tests/fixtures/comfyui_messages/*.json were written so).
# Needs: the genscope CLI and the Python module built in BUILD_DIR; ComfyUI's python from
# tests/peers/comfyui_env.sh. Costs: ~4 GiB, 3-6 minutes on 2 loaded cores.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-${GENSCOPE_BUILD_DIR:-$ROOT/build}}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "build folder ${1:-$ROOT/build} absent"; exit 1; }
GENSCOPE=${GENSCOPE:-$BUILD/tools/genscope/genscope}
[ -x "$GENSCOPE" ] || { echo "SKIP: $GENSCOPE is not built (target genscope_cli)"; exit 77; }
ls "$BUILD"/python/genscope/_genscope*.so >/dev/null 2>&1 ||
  { echo "SKIP: the genscope Python module is not built in $BUILD/python"; exit 77; }
. "$ROOT/tests/peers/comfyui_env.sh"
comfyui_env
CACHE=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
CKPT=$CACHE/sd15-random.safetensors
flock "$CACHE/sd15-random.lock" /usr/bin/python3 "$ROOT/tests/peers/make_sd15_checkpoint.py" "$CKPT" ||
  { echo "FAIL: cannot write the SD1.5 checkpoint $CKPT"; exit 1; }
record=()
[ -n "${GENSCOPE_SELFTEST_RECORD:-}" ] && record=(--record "$GENSCOPE_SELFTEST_RECORD")
"$GENSCOPE" comfyui selftest "$COMFYUI" --python "$COMFYUI_PY" --pythonpath "$BUILD/python" \
  --source "$ROOT/integrations/comfyui" --checkpoint "$CKPT" "${record[@]}"
