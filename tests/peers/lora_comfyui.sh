#!/usr/bin/env bash
# genscope's ComfyUI LoRA profile against a real ComfyUI's own loading code (the checkout of
# GENSCOPE_COMFYUI_DIR, e.g. v0.3.18; its python from tests/peers/comfyui_env.sh): ComfyUI answers
# the test-data generators' questions (tests/data/record_comfy_answers.py), tests/data/make_models.py
# writes every (base, LoRA) pair with those answers, and tests/peers/lora_comfyui.py compares each
# with `genscope lora inspect --json`; then the SD1.x/SDXL LoRAs on ComfyUI's own model of a
# random-weight SD1.5 checkpoint of the real layout (built on the meta device: nothing is
# loaded), and the committed answers (tests/fixtures/comfy_answers/) with this ComfyUI's.
# Exits 77 (SKIP) without GENSCOPE_COMFYUI_DIR.
set -euo pipefail
src=${GENSCOPE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/peers/comfyui_env.sh"
comfyui_env
G=${GENSCOPE:?GENSCOPE must name the genscope binary}
G=$(realpath "$G")
cache=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
checkpoint=$cache/sd15-random.safetensors
flock "$cache/sd15-random.lock" /usr/bin/python3 "$src/tests/peers/make_sd15_checkpoint.py" "$checkpoint" ||
  { echo "FAIL: cannot write the SD1.5 checkpoint $checkpoint" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# ComfyUI imports its modules from its own directory.
(cd "$COMFYUI" && PYTHONHASHSEED=0 PYTHONPATH="$COMFYUI" "$COMFYUI_PY" "$src/tests/data/record_comfy_answers.py" "$tmp/answers") \
  > "$tmp/record.out" 2> "$tmp/comfyui.err" || { echo "FAIL: record_comfy_answers.py" >&2; tail -5 "$tmp/comfyui.err" >&2; exit 1; }
GENSCOPE_COMFY_ANSWERS=$tmp/answers /usr/bin/python3 "$src/tests/data/make_models.py" "$tmp/models" > /dev/null
(cd "$COMFYUI" && PYTHONPATH="$COMFYUI" "$COMFYUI_PY" "$src/tests/peers/lora_comfyui.py" \
  "$tmp/models" "$G" "$checkpoint" "$tmp/answers") 2> "$tmp/comfyui.err" | tee "$tmp/result.txt" || {
  tail -5 "$tmp/comfyui.err" >&2
  exit 1
}
grep -q "^agreement: " "$tmp/result.txt" || { echo "FAIL: no agreement line" >&2; tail -5 "$tmp/comfyui.err" >&2; exit 1; }
