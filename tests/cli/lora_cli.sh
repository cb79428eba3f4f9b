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

# Merge at 0.8 and compare with NumPy's merge of the same factors. The UNet weights are F16:
# the two float32 sums differ in order, so results may differ by one F16 ulp (2^-10 relative).
"$G" lora apply "$tmp/sd15.safetensors" "$tmp/sd15_kohya.safetensors" --strength 0.8 \
  -o "$tmp/merged.safetensors" > "$tmp/apply.txt" || fail "apply"
"$G" tensor diff "$tmp/merged.safetensors" "$tmp/expected_sd15_kohya.safetensors" \
  --rtol 2e-3 --atol 1e-6 > "$tmp/diff.txt" || fail "merge differs from NumPy: $(tail -3 "$tmp/diff.txt")"
"$G" model diff "$tmp/sd15.safetensors" "$tmp/merged.safetensors" > "$tmp/model.txt"
grep -q "values changed 265" "$tmp/model.txt" || fail "model diff: $(head -5 "$tmp/model.txt")"

# Bad LoRAs: a named error, exit 2, and no output file left behind.
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
