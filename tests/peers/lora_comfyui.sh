#!/usr/bin/env bash
# genscope's ComfyUI LoRA profile against ComfyUI v0.3.18's own loading code
# (comfy.lora.model_lora_keys_unet / model_lora_keys_clip / load_lora), on every (base, LoRA)
# pair of tests/data/make_models.py: tests/peers/lora_comfyui.py runs ComfyUI's code on a
# stand-in model with the keys ComfyUI builds and compares with `genscope lora inspect --json`;
# then the SD1.5 cases' LoRAs on the peers' random-weight SD1.5 checkpoint (the real layout),
# with ComfyUI's own model of it (built on the meta device: nothing is loaded).
# Needs the peers beside the checkout (../shared/peers); exits 77 (SKIP) without them.
set -euo pipefail
src=${GENSCOPE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
peer="$src/../shared/peers/comfyui"
if [ ! -x "$peer/prepare" ]; then
  echo "SKIP: peer not available ($peer absent)"
  exit 77
fi
G=${GENSCOPE:?GENSCOPE must name the genscope binary}
cache=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$peer/prepare" "$cache/comfyui" > "$tmp/prepare.txt" || { echo "FAIL: comfyui/prepare: $(tail -3 "$tmp/prepare.txt")" >&2; exit 1; }
pythonpath=$(sed -n 's/^PYTHONPATH=//p' "$tmp/prepare.txt")
comfyui=$(sed -n 's/^COMFYUI=//p' "$tmp/prepare.txt")
checkpoint=$(sed -n 's/^CHECKPOINT=//p' "$tmp/prepare.txt")  # the random-weight SD1.5 (real layout)
[ -n "$pythonpath" ] && [ -d "$comfyui/comfy" ] && [ -f "$checkpoint" ] \
  || { echo "FAIL: no PYTHONPATH/COMFYUI/CHECKPOINT from prepare" >&2; exit 1; }
/usr/bin/python3 "$src/tests/data/make_models.py" "$tmp/models" > /dev/null
# ComfyUI imports its modules from its own directory.
(cd "$comfyui" && PYTHONPATH="$pythonpath:$comfyui" /usr/bin/python3 "$src/tests/peers/lora_comfyui.py" \
  "$tmp/models" "$G" "$checkpoint") 2> "$tmp/comfyui.err" | tee "$tmp/result.txt" || {
  tail -5 "$tmp/comfyui.err" >&2
  exit 1
}
grep -q "^agreement: " "$tmp/result.txt" || { echo "FAIL: no agreement line" >&2; tail -5 "$tmp/comfyui.err" >&2; exit 1; }
