#!/usr/bin/env bash
# genscope.torch.instrument on the real diffusers 0.27.2 StableDiffusionPipeline and
# StableDiffusionXLPipeline (../shared/peers/diffusers): steps, labels, family checks,
# iterations and durations against diffusers' own record (tests/peers/diffusers_check.py).
#
#   tests/peers/diffusers.sh [diffusers_check.py options, e.g. --table FILE]
#
# Environment: GENSCOPE_BUILD_DIR (default <repo>/build: its python/ folder holds the built
# module), GENSCOPE_PEERS_CACHE (default ~/.cache/genscope-peers: where the peer's venv is
# prepared). Exit 77 (skipped) with a message when ../shared/peers or the built module is
# absent; 0 when every check passes, 1 otherwise.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEER=$ROOT/../shared/peers/diffusers
BUILD=${GENSCOPE_BUILD_DIR:-$ROOT/build}
CACHE=${GENSCOPE_PEERS_CACHE:-$HOME/.cache/genscope-peers}
if [ ! -x "$PEER/prepare" ]; then
  echo "skipped: peers not available ($PEER absent)"
  exit 77
fi
if ! ls "$BUILD"/python/genscope/_genscope*.so >/dev/null 2>&1; then
  echo "skipped: the Python module is not built ($BUILD/python/genscope/_genscope*.so absent;" \
       "build the _genscope target)"
  exit 77
fi
prepared=$("$PEER/prepare" "$CACHE/diffusers") || { echo "FAIL: $PEER/prepare: $prepared"; exit 1; }
PY=$(printf '%s\n' "$prepared" | sed -n 's/^PYTHON=//p' | tail -n1)
[ -x "$PY" ] || { echo "FAIL: $PEER/prepare printed no PYTHON= line: $prepared"; exit 1; }
export PYTHONPATH=$BUILD/python:$ROOT/tests/peers${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # steadier timings on a shared machine
exec "$PY" -W ignore "$ROOT/tests/peers/diffusers_check.py" "$@"
