#!/usr/bin/env bash
# Real trace consumers read genscope's Chrome traces the same way: the Chrome DevTools trace
# engine (npm @paulirish/trace_engine, the Performance panel's engine) and speedscope's
# importer (npm speedscope) run under node on the golden run's trace, a `genscope demo
# --preset small` trace, a `genscope run` trace (a Python denoising loop with a tqdm bar
# and a memory spike), a `genscope run` trace of a ComfyUI-style log and of each prompt of the
# real ComfyUI's recorded output; compare_trace_consumers.py checks that each consumer
# (and a catapult-style nesting in doubles) shows every step, attempt and iteration under the
# parent the run document gives, with no warning. The packages, pinned in
# tests/trace_consumers/package-lock.json, are installed with `npm ci` into
# ${XDG_CACHE_HOME:-~/.cache}/genscope-npm (outside the repository). Exit 77 (skipped) when
# node/npm is missing or the registry cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
consumers=$here/../trace_consumers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
skip() { echo "SKIP: $*"; exit 77; }
py=/usr/bin/python3

command -v node > /dev/null && command -v npm > /dev/null || skip "node and npm are not installed"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/genscope-npm
mkdir -p "$cache"
if ! cmp -s "$consumers/package-lock.json" "$cache/package-lock.json" ||
   [ ! -d "$cache/node_modules/speedscope" ] || [ ! -d "$cache/node_modules/@paulirish/trace_engine" ]; then
  cp "$consumers/package.json" "$consumers/package-lock.json" "$cache/"
  timeout 300 npm ci --prefix "$cache" --no-audit --no-fund > "$tmp/npm.log" 2>&1 ||
    { tail -n 5 "$tmp/npm.log"; rm -f "$cache/package-lock.json"; skip "npm ci failed (registry unreachable?)"; }
fi
modules=$cache/node_modules

check() {  # check NAME TRACE RUN.json...: every consumer nests TRACE as the run documents say
  local name=$1 trace=$2; shift 2
  timeout 120 node "$consumers/trace_engine_slices.mjs" "$modules" "$trace" > "$tmp/$name.te.json"
  timeout 120 node "$consumers/speedscope_slices.mjs" "$modules" "$trace" > "$tmp/$name.ss.json"
  echo "== $name"
  "$py" "$here/compare_trace_consumers.py" "$trace" "$@" -- "$tmp/$name.te.json" "$tmp/$name.ss.json"
}

"$GENSCOPE" report "$here/golden/run.json" --trace "$tmp/golden.trace.json" > /dev/null
check golden "$tmp/golden.trace.json" "$here/golden/run.json"

# Edge cases: a 300 ns step just before the next one starts (zero long once rounded to
# microseconds: an async track, not a slice a consumer could put inside its neighbour) and a
# step inside one of its parent's iterations.
"$py" - "$here/golden/run.json" "$tmp/edges.json" <<'PY'
import copy, json, sys
run = json.load(open(sys.argv[1]))
steps = run["steps"]
sampling = next(s for s in steps if s["id"] == 3)
tiny = copy.deepcopy(next(s for s in steps if s["id"] == 6))
tiny.update(id=7, parent_id=-1, name="tiny (300 ns)", status="ok",
            start_offset_ns=sampling["start_offset_ns"] - 200, duration_ns=300)
tiny.pop("error", None)
inner = copy.deepcopy(tiny)
inner.update(id=8, parent_id=3, name="unet call",
             start_offset_ns=sampling["start_offset_ns"] + 15_000_000, duration_ns=2_000_000)
steps += [tiny, inner]
json.dump(run, open(sys.argv[2], "w"))
PY
"$GENSCOPE" report "$tmp/edges.json" --trace "$tmp/edges.trace.json" > /dev/null
"$py" "$here/check_trace.py" "$tmp/edges.trace.json" "$tmp/edges.json"
check edges "$tmp/edges.trace.json" "$tmp/edges.json"

# genscope run: steps and iterations read from a tqdm bar, a grandchild's spike.
timeout 120 "$GENSCOPE" run --quiet --out "$tmp/run" --trace "$tmp/run.trace.json" -- \
  "$py" "$GENSCOPE_SOURCE_DIR/tests/children/denoise_tqdm.py" 20 96 10 0.02 5 > /dev/null 2>&1
"$py" "$here/check_trace.py" "$tmp/run.trace.json" "$tmp/run/run.json"
check run "$tmp/run.trace.json" "$tmp/run/run.json"

# genscope run watching a ComfyUI-style log (the recogniser's prompt, model load and a tqdm
# bar of 8 steps drawn in fewer redraws: inferred iterations).
cat > "$tmp/comfy.sh" <<'SH'
#!/bin/sh
echo "got prompt"
echo "Requested to load SDXL"
echo "loaded completely; 20512.45 MB usable, 4897.05 MB loaded, full load: True"
printf '\r  0%%|          | 0/8 [00:00<?, ?it/s]' >&2
sleep 0.05
printf '\r 50%%|#####     | 4/8 [00:00<00:00,  9.85it/s]' >&2
sleep 0.05
printf '\r100%%|##########| 8/8 [00:00<00:00,  9.85it/s]\n' >&2
echo "Prompt executed in 0.12 seconds"
SH
chmod +x "$tmp/comfy.sh"
timeout 120 "$GENSCOPE" run --quiet --runs announced --out "$tmp/comfy" --trace "$tmp/comfy.trace.json" -- \
  "$tmp/comfy.sh" > /dev/null 2>&1
"$py" "$here/check_trace.py" "$tmp/comfy.trace.json" "$tmp/comfy/run.json"
check comfyui-log "$tmp/comfy.trace.json" "$tmp/comfy/run.json"

# genscope run watching the real ComfyUI v0.3.18's output (tests/fixtures/transcripts/
# comfyui_real.jsonl: three prompts recorded from the real ComfyUI v0.3.18; replayed byte for
# byte on its own clock, 20 times faster): every prompt's trace.
cat > "$tmp/replay.py" <<'PY'
import json, os, sys, time
start = time.monotonic()
for line in open(sys.argv[1]):
    e = json.loads(line)
    delay = start + e["t"] / 20 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    os.write(e["fd"], e["data"].encode())
PY
timeout 120 "$GENSCOPE" run --quiet --runs announced --out "$tmp/comfy-real" \
  --trace "$tmp/comfy-real.trace.json" -- "$py" "$tmp/replay.py" \
  "$GENSCOPE_SOURCE_DIR/tests/fixtures/transcripts/comfyui_real.jsonl" > /dev/null 2>&1
n=0
for doc in "$tmp"/comfy-real/run*.json; do
  n=$((n + 1))
  suffix=${doc##*/run}; suffix=${suffix%.json}   # "" for the first run, "-2", "-3"...
  trace="$tmp/comfy-real.trace$suffix.json"
  [ -f "$trace" ] || trace="$tmp/comfy-real$suffix.trace.json"
  "$py" "$here/check_trace.py" "$trace" "$doc"
  check "comfyui-real-prompt$suffix" "$trace" "$doc"
done
[ $n -eq 3 ] || { echo "the real ComfyUI transcript gave $n runs, not its 3 prompts" >&2; exit 1; }

if "$GENSCOPE" demo --help 2>&1 | grep -q -- --preset; then
  timeout 300 "$GENSCOPE" demo --preset small --out "$tmp/demo" --trace "$tmp/demo.trace.json" > /dev/null
  "$py" "$here/check_trace.py" "$tmp/demo.trace.json" "$tmp/demo/run.json"
  check demo "$tmp/demo.trace.json" "$tmp/demo/run.json"
else
  echo "(no demo trace: genscope was built without LibTorch)"
fi
echo "trace consumers: ok"
