#!/usr/bin/env bash
# Records what ComfyUI's own code answers for the test-data generators into
# tests/fixtures/comfy_answers/ (tests/data/record_comfy_answers.py), with the ComfyUI checkout
# GENSCOPE_COMFYUI_DIR names and the python tests/peers/comfyui_env.sh gives it (a venv prepared
# once from PyPI, or GENSCOPE_COMFYUI_PYTHON). Commit the fixtures it writes; the generators
# read them.
#
#   GENSCOPE_COMFYUI_DIR=/path/to/ComfyUI tests/data/record_comfy_answers.sh [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../peers/comfyui_env.sh"
comfyui_env
out=$(realpath -m "${1:-$here/../fixtures/comfy_answers}")
# ComfyUI imports its modules from its own folder.
cd "$COMFYUI"
# ComfyUI keeps some of its name maps in sets: a fixed hash seed gives the answers one order.
PYTHONHASHSEED=0 PYTHONPATH="$COMFYUI" "$COMFYUI_PY" "$here/record_comfy_answers.py" "$out"
