#!/usr/bin/env bash
# stable-diffusion.cpp under `genscope run`, through its Python binding (stable-diffusion-cpp-
# python from PyPI, built from its sdist by scripts/lib/peer_venvs.sh; driven by
# tests/peers/sdcpp_drive.py, which prints the library's log as sd-cli does), compared with
# what the library reports about itself (tests/peers/compare_sdcpp.py): txt2img 64x64 4 steps
# on a random-weight SD1.5 checkpoint of the real layout (make-sd15 of the shared models
# folder, ${GENSCOPE_SHARED_DIR:-<repo>/../shared}/models), the same with a prompt LoRA
# (<lora:peer_lora:1>, --lora-model-dir), and a fast failure (a model file that is not a model:
# exit status 1 passed through, the library's first error as the failed step's, a memory peak).
set -u
. "$(dirname "$0")/common.sh"
need_genscope
shared=${GENSCOPE_SHARED_DIR:-$root/../shared}
[[ -f $shared/models/make-sd15 ]] || skip "no $shared/models/make-sd15 (the SD1.5 checkpoint writer)"
need_venv sdcpp
model=$CACHE/sdcpp/sd15-random.safetensors loras=$CACHE/sdcpp/loras
mkdir -p "$loras"
# written once (make-sd15 skips a complete file), under a lock against a concurrent run
flock "$CACHE/sdcpp/files.lock" sh -c '/usr/bin/python3 "$1" "$2" >/dev/null && /usr/bin/python3 "$3" "$4"' \
  - "$shared/models/make-sd15" "$model" "$root/tests/peers/make_sd15_lora.py" "$loras/peer_lora.safetensors" ||
  { echo "FAIL: the SD1.5 checkpoint or its LoRA could not be written"; exit 1; }
drive=(env PYTHONUNBUFFERED=1 "$PY" "$root/tests/peers/sdcpp_drive.py")
common=(-m "$model" -W 64 -H 64 --steps 4 -s 42 -t 2 --sampling-method euler)
rc=0
cd "$root/tests/peers" || exit 2
for case in plain lora; do
  prompt="a photo of a cat"
  extra=()
  [[ $case == lora ]] && { prompt="$prompt <lora:peer_lora:1>"; extra=(--lora-model-dir "$loras"); }
  echo "sd.cpp (Python binding) $case:"
  "$GENSCOPE" run --quiet --out "$TMP/$case" -- "${drive[@]}" "${common[@]}" -p "$prompt" "${extra[@]}" \
    -o "$TMP/$case.png" >"$TMP/$case.out" 2>"$TMP/$case.err" || { echo "FAIL: $case failed"; cat "$TMP/$case.err"; rc=1; continue; }
  /usr/bin/python3 compare_sdcpp.py "$TMP/$case/run.json" "$TMP/$case.out" || rc=1
  [[ -n ${GENSCOPE_PEERS_KEEP:-} ]] && mkdir -p "$GENSCOPE_PEERS_KEEP" &&
    cp "$TMP/$case.out" "$TMP/$case.err" "$TMP/$case/run.json" "$GENSCOPE_PEERS_KEEP/" &&
    mv "$GENSCOPE_PEERS_KEEP/run.json" "$GENSCOPE_PEERS_KEEP/$case.run.json"
done
echo "sd.cpp (Python binding) fast failure:"
head -c 4096 /dev/zero > "$TMP/not-a-model.safetensors"
"$GENSCOPE" run --quiet --out "$TMP/fail" -- "${drive[@]}" -m "$TMP/not-a-model.safetensors" -p x \
  -W 64 -H 64 -o "$TMP/fail.png" >"$TMP/fail.out" 2>"$TMP/fail.err"
status=$?
[[ $status == 1 ]] || { echo "FAIL: exit status $status, the driver's is 1"; cat "$TMP/fail.err"; rc=1; }
/usr/bin/python3 - "$TMP/fail/run.json" "$TMP/fail.err" <<'PY' || rc=1
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
