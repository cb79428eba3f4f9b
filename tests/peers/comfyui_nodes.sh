#!/usr/bin/env bash
# The genscope node package (integrations/comfyui) on a real ComfyUI (GENSCOPE_COMFYUI_DIR; the
# checks were written against v0.3.18): install it in a private copy (genscope comfyui install
# when the CLI is built, else a link), run a workflow with a checkpoint, a LoRA, two text
# encodes, a sampler, a decode and a save, then the same graph (cached), a changed seed, a
# failing node and a prompt without a client id, and check the runs against ComfyUI's own
# messages and output (tests/peers/comfyui_nodes.py).
#
#   GENSCOPE_COMFYUI_DIR=/path/to/ComfyUI tests/peers/comfyui_nodes.sh [BUILD_DIR]
#                                                  exit 0 pass, 1 fail, 77 skipped
#
# Needs: build/python (targets _genscope genscope_python_files); ComfyUI's python from
# tests/peers/comfyui_env.sh (a venv prepared once from PyPI, or GENSCOPE_COMFYUI_PYTHON: a
# python3 of the same version as /usr/bin/python3, which the module is built for). Costs: ~6 GiB
# of RAM for the server, about 2-3 minutes on 2 cores (two server starts, six prompts), and once
# a 2.1 GB random-weight SD1.5 checkpoint in the peers cache (tests/peers/make_sd15_checkpoint.py).
# A private copy of ComfyUI is made under a temporary folder (the checkpoint is linked, not
# copied), so the given ComfyUI folder is never modified.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "build folder ${1:-$ROOT/build} absent"; exit 1; }
[ -f "$BUILD/python/genscope/__init__.py" ] && ls "$BUILD"/python/genscope/_genscope*.so >/dev/null 2>&1 ||
  { echo "SKIP: the genscope Python module is not built in $BUILD/python (targets _genscope genscope_python_files)"; exit 77; }
. "$ROOT/tests/peers/comfyui_env.sh"
comfyui_env
APP=$COMFYUI
CACHE=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
CKPT=$CACHE/sd15-random.safetensors
flock "$CACHE/sd15-random.lock" /usr/bin/python3 "$ROOT/tests/peers/make_sd15_checkpoint.py" "$CKPT" ||
  { echo "FAIL: cannot write the SD1.5 checkpoint $CKPT"; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/genscope-comfyui.XXXXXX")
cleanup() { [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT
# A private ComfyUI: its sources (15 MB), our models folder, the shared checkpoint linked.
mkdir -p "$WORK/ComfyUI"
tar -C "$APP" --exclude=./models --exclude=./output --exclude=./temp --exclude=./user \
    --exclude='./custom_nodes/genscope*' -cf - . | tar -C "$WORK/ComfyUI" -xf -
for d in $(cd "$APP/models" && ls); do mkdir -p "$WORK/ComfyUI/models/$d"; done
ln -s "$CKPT" "$WORK/ComfyUI/models/checkpoints/sd15-random.safetensors"
head -c 4096 /dev/urandom > "$WORK/ComfyUI/models/checkpoints/broken.safetensors"
/usr/bin/python3 "$ROOT/tests/peers/make_tiny_sd15_lora.py" \
    "$WORK/ComfyUI/models/loras/genscope-tiny.safetensors" || { echo "cannot write the LoRA"; exit 1; }

if [ -x "$BUILD/tools/genscope/genscope" ]; then
  "$BUILD/tools/genscope/genscope" comfyui install "$WORK/ComfyUI" --source "$ROOT/integrations/comfyui" ||
    { echo "genscope comfyui install failed"; exit 1; }
else
  echo "note: $BUILD/tools/genscope/genscope not built; linking the package by hand"
  ln -s "$ROOT/integrations/comfyui" "$WORK/ComfyUI/custom_nodes/genscope_comfyui"
fi

# A test-only custom node that notes when ComfyUI sends each execution message.
ln -s "$ROOT/tests/peers/comfyui_message_clock" "$WORK/ComfyUI/custom_nodes/genscope_test_message_clock"

"$COMFYUI_PY" "$ROOT/tests/peers/comfyui_nodes.py" --comfyui "$WORK/ComfyUI" \
  --genscope-python "$BUILD/python" --work "$WORK" --port "${GENSCOPE_COMFYUI_PORT:-8198}"
rc=$?
[ $rc -eq 0 ] || { echo "--- ComfyUI log (with the package), last lines:"; tail -40 "$WORK/comfyui-with.log"; }
exit $rc
