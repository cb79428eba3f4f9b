#!/usr/bin/env bash
# stable-diffusion.cpp (sd-cli, ../shared/peers/sdcpp) under `genscope run`, compared with what
# sd-cli prints about itself (tests/peers/compare_sdcpp.py): txt2img 64x64 4 steps, the same
# with a prompt LoRA (<lora:peer_lora:1>, --lora-model-dir), and a fast failure (a model file
# that does not exist: exit status 1 passed through, the root-cause error, a memory peak).
set -u
. "$(dirname "$0")/common.sh"
SDCLI=$("$PEERS/sdcpp/build" "$CACHE/sdcpp" 2>&1 | tail -1)
[[ -x $SDCLI ]] || skip "peer not available: sd-cli: $SDCLI"
"$PY" "$PEERS/models/make-sd15" "$CACHE/sd15-random.safetensors" >/dev/null ||
  skip "peer not available: the SD1.5 checkpoint could not be written"
mkdir -p "$CACHE/loras"
"$PY" "$root/tests/peers/make_sd15_lora.py" "$CACHE/loras/peer_lora.safetensors"
common=(-m "$CACHE/sd15-random.safetensors" -W 64 -H 64 --steps 4 -s 42 -t 2 --sampling-method euler)
rc=0
cd "$root/tests/peers" || exit 2
for case in plain lora; do
  prompt="a photo of a cat"
  extra=()
  [[ $case == lora ]] && { prompt="$prompt <lora:peer_lora:1>"; extra=(--lora-model-dir "$CACHE/loras"); }
  echo "sd-cli $case:"
  "$GENSCOPE" run --quiet --out "$TMP/$case" -- "$SDCLI" "${common[@]}" -p "$prompt" "${extra[@]}" \
    -o "$TMP/$case.png" >"$TMP/$case.out" 2>"$TMP/$case.err" || { echo "FAIL: sd-cli $case failed"; cat "$TMP/$case.err"; rc=1; continue; }
  "$PY" compare_sdcpp.py "$TMP/$case/run.json" "$TMP/$case.out" || rc=1
done
echo "sd-cli fast failure:"
"$GENSCOPE" run --quiet --out "$TMP/fail" -- "$SDCLI" -m "$TMP/absent.safetensors" -p x -W 64 -H 64 \
  >"$TMP/fail.out" 2>"$TMP/fail.err"
status=$?
[[ $status == 1 ]] || { echo "FAIL: exit status $status, sd-cli's is 1"; rc=1; }
"$PY" - "$TMP/fail/run.json" "$TMP/fail.err" <<'PY' || rc=1
import sys
from check_steps import check_tree, done, fail, load
run = load(sys.argv[1])
check_tree(run, "fast failure")
first = next(l for l in open(sys.argv[2]) if "[ERROR]" in l).split(" - ", 1)[1].strip()
failed = [s for s in run["steps"] if s["status"] == "failed"]
if not failed or failed[0]["error"]["message"] != first:
    fail(f"the failed step should carry the first error line {first!r}: {[s.get('error') for s in failed]}")
tree = next((a["data"] for a in run["attachments"] if a["type"] == "process_tree"), {})
# The process's own peak: wait4's ru_maxrss when it says something about CMD (it also counts
# the genscope image CMD was forked from, so for a program smaller than genscope it does not),
# else what the sampler saw; the memory cgroup's exact peak counts CMD's own pages either way.
peaks = [p.get("lifetime_peak_bytes") for p in tree.get("processes", [])]
peaks.append(tree.get("cgroup", {}).get("lifetime_peak_bytes"))
step_peaks = [(m["name"], m["peak"]) for s in run["steps"] for m in s["metrics"]
              if m["name"] in ("tree.rss_bytes", "cgroup.usage_bytes") and m["peak"]]
print(f"  failed step: {failed[0]['name'] if failed else None}: {first}")
print(f"  peaks: process and cgroup lifetime {peaks}, steps {step_peaks}")
if not any(peaks) or not step_peaks:
    fail("the fast failure lost its memory peak")
done()
PY
exit $rc
