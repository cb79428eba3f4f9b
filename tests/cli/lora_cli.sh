#!/usr/bin/env bash
# `genscope lora inspect|apply` and `genscope model diff` on generated SD1.5/SDXL-layout
# checkpoints (tests/data/make_models.py): fit verdicts, a merge checked against the NumPy
# reference with `genscope tensor diff`, bad LoRAs refused with nothing written.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 "$GENSCOPE_SOURCE_DIR/tests/data/make_models.py" "$tmp" > /dev/null
G="$GENSCOPE"

"$G" lora inspect "$tmp/sd15_kohya.safetensors" --base "$tmp/sd15.safetensors" > "$tmp/fit.txt" \
  || fail "inspect against its own base must exit 0"
grep -q "matched 265 modules" "$tmp/fit.txt" || fail "matched count: $(cat "$tmp/fit.txt")"
"$G" lora inspect "$tmp/sd15_kohya.safetensors" --base "$tmp/sdxl.safetensors" --json > "$tmp/fit.json" || true
/usr/bin/python3 - "$tmp/fit.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
fit = j["fit"]
assert fit["architecture_mismatch"] is True, fit
assert "trained for SD1.x; the base is SDXL" in fit["verdict"], fit["verdict"]
PY

# Loader profiles: ComfyUI maps diffusers attention only through ".processor." names, so the
# PEFT attention modules are "lora key not loaded" (one line per tensor); diffusers would load
# these tensors but fails on the file's extra_state key.
"$G" lora inspect "$tmp/sd15_peft.safetensors" --base "$tmp/sd15.safetensors" > "$tmp/peft.txt" || true
grep -q "loader comfyui" "$tmp/peft.txt" || fail "loader line: $(cat "$tmp/peft.txt")"
grep -q "lora key not loaded: 49" "$tmp/peft.txt" || fail "peft not loaded: $(grep 'lora key' "$tmp/peft.txt")"
grep -q "verdict: comfyui: partial fit: 3 of 27 modules" "$tmp/peft.txt" || fail "peft verdict: $(grep verdict "$tmp/peft.txt")"
grep -q "other loader: diffusers would fail to load this LoRA: .*Invalid LoRA checkpoint" "$tmp/peft.txt" \
  || fail "other loader: $(grep 'other loader' "$tmp/peft.txt")"
"$G" lora inspect "$tmp/wan_peft.safetensors" --base "$tmp/wan.safetensors" --loader diffusers --json > "$tmp/wan.json" || true
/usr/bin/python3 - "$tmp/wan.json" <<'PY'
import json, sys
fit = json.load(open(sys.argv[1]))["fit"]
assert fit["loader"] == "diffusers", fit["loader"]
assert fit["verdict"] == "diffusers: all 8 modules load onto this Wan base", fit["verdict"]
assert fit["other_loader"]["summary"] == "comfyui would not load 16 of the tensors diffusers loads", fit["other_loader"]
PY
# A pruned checkpoint: the weights ComfyUI still patches are "missing from this file".
"$G" lora inspect "$tmp/sd15_kohya.safetensors" --base "$tmp/sd15_pruned.safetensors" > "$tmp/pruned.txt" || true
grep -q "NOT LOADED: 0, missing from this file: 2" "$tmp/pruned.txt" || fail "pruned: $(grep 'NOT LOADED' "$tmp/pruned.txt")"
# One weight named twice: the shadowed module is a warning, never applied.
"$G" lora inspect "$tmp/sd15_twice.safetensors" --base "$tmp/sd15.safetensors" > "$tmp/twice.txt" || true
grep -q "lora_unet_input_blocks_1_1_proj_in (shadowed by lora_unet_down_blocks_0_attentions_0_proj_in" "$tmp/twice.txt" \
  || fail "shadowed: $(cat "$tmp/twice.txt")"
# CLIP-L's text_projection on SD1.5: ComfyUI patches its own identity-initialised projection,
# which is not a tensor of the file: said as such, not counted as a patched base weight.
"$G" lora inspect "$tmp/sd15_text_projection.safetensors" --base "$tmp/sd15.safetensors" > "$tmp/tp.txt" \
  || fail "text projection inspect: $(cat "$tmp/tp.txt")"
grep -q "matched 2 modules -> 1 base weights patched" "$tmp/tp.txt" || fail "text projection count: $(cat "$tmp/tp.txt")"
grep -qF "lora_te1_text_projection patches the clip_l text encoder's built-in text_projection (identity-initialised; not in the file)" \
  "$tmp/tp.txt" || fail "text projection line: $(cat "$tmp/tp.txt")"
grep -q "missing from this file: 0" "$tmp/tp.txt" || fail "text projection missing: $(cat "$tmp/tp.txt")"
# Generic SDXL names with bias patches (diff_b, b_norm, a diff on a bias's own name).
"$G" lora inspect "$tmp/sdxl_generic.safetensors" --base "$tmp/sdxl.safetensors" > "$tmp/generic.txt" \
  || fail "generic inspect: $(cat "$tmp/generic.txt")"
grep -q "matched 5 modules -> 8 base weights patched, 5 of them biases" "$tmp/generic.txt" \
  || fail "generic biases: $(cat "$tmp/generic.txt")"
set +e
"$G" lora inspect "$tmp/sd15_kohya.safetensors" --loader automatic > /dev/null 2> "$tmp/err.txt"
rc=$?
set -e
[ $rc -ne 0 ] || fail "--loader automatic accepted"

# Merge at 0.8 and compare with NumPy's merge of the same factors. The UNet weights are F16:
# the two float32 sums differ in order, so results may differ by one F16 ulp (2^-10 relative).
"$G" lora apply "$tmp/sd15.safetensors" "$tmp/sd15_kohya.safetensors" --strength 0.8 \
  -o "$tmp/merged.safetensors" > "$tmp/apply.txt" || fail "apply"
"$G" tensor diff "$tmp/merged.safetensors" "$tmp/expected_sd15_kohya.safetensors" \
  --rtol 2e-3 --atol 1e-6 > "$tmp/diff.txt" || fail "merge differs from NumPy: $(tail -3 "$tmp/diff.txt")"
"$G" model diff "$tmp/sd15.safetensors" "$tmp/merged.safetensors" > "$tmp/model.txt"
# 265 modules, of which the 48 with alpha 0 change nothing (ComfyUI scales by alpha / rank = 0).
grep -q "values changed 217" "$tmp/model.txt" || fail "model diff: $(head -5 "$tmp/model.txt")"

# Bad LoRAs: a named error, exit 2, and no output file left behind (bad_missing_half has an
# up without its down: ComfyUI's load_lora raises KeyError).
for bad in bad_missing_half:LoraMissingHalf bad_rank_mismatch:LoraRankMismatch bad_nan:LoraNaN; do
  file=${bad%%:*}; name=${bad##*:}
  set +e
  "$G" lora apply "$tmp/sd15.safetensors" "$tmp/$file.safetensors" --strength 1 \
    -o "$tmp/out_$file.safetensors" 2> "$tmp/err.txt"
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$file: exit $rc"
  grep -q "\[$name\]" "$tmp/err.txt" || fail "$file: $(cat "$tmp/err.txt")"
  [ ! -e "$tmp/out_$file.safetensors" ] || fail "$file: output file left behind"
done
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary file left behind"
echo "lora cli: ok"
