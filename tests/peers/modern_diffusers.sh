#!/usr/bin/env bash
# genscope.torch.instrument on today's diffusers (issue 26): Flux.1-dev (with and without true
# CFG), Wan 2.1 (text- and image-to-video), Wan 2.2 A14B and TI2V-5B, SD3.5, Flux.1-schnell,
# Flux.2, Flux.2 Klein, Qwen-Image, LTX-Video, LTX-2.0 and LTX-2.3 (audio + video; text-,
# image-to-video and frame conditions), HunyuanVideo 1.0 and 1.5,
# tiny real pipelines built offline (tests/peers/modern_pipelines.py), checked by
# tests/peers/modern_check.py, and a decoded video's statistics in host pieces (--only
# video-stats).
#
#   tests/peers/modern_diffusers.sh [modern_check.py options, e.g. --table FILE --only wan2.1]
#   tests/peers/modern_diffusers.sh --script FILE [FILE's options]   (another script in the same
#                                   venv and environment: bench/peers_overhead.py)
#
# The venv (tests/peers/requirements-modern.txt, from PyPI) is prepared once, under a flock, in
# ${GENSCOPE_PEERS_CACHE:-~/.cache/genscope-peers}/modern-venv-<hash of the requirements>; a
# later run reuses it. Environment: GENSCOPE_BUILD_DIR (default <repo>/build: its python/
# folder holds the built module); GENSCOPE_PEERS_PREPARE=0: skip when the venv is not ready
# instead of preparing it (scripts/bench). Exit 77 (skipped) with a SKIP line when the module
# is not built or the venv cannot be had (no Python 3.11, no PyPI); 0 when every check passes,
# 1 otherwise.
set -euo pipefail
skip() { echo "SKIP: $*"; exit 77; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${GENSCOPE_BUILD_DIR:-$ROOT/build}
CACHE=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
REQ=$ROOT/tests/peers/requirements-modern.txt
SCRIPT=$ROOT/tests/peers/modern_check.py
if [ "${1:-}" = --script ]; then
  SCRIPT=$(realpath "${2:?--script FILE}")
  shift 2
fi
ls "$BUILD"/python/genscope/_genscope.cpython-311-*.so >/dev/null 2>&1 ||
  skip "the Python module is not built for CPython 3.11 ($BUILD/python/genscope; build _genscope)"
BASE=/usr/bin/python3
"$BASE" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null ||
  skip "$BASE is not a Python 3.11 with venv (the module is built for CPython 3.11)"
command -v flock >/dev/null || skip "flock (util-linux) not installed"
mkdir -p "$CACHE"
VENV=$CACHE/modern-venv-$(sha256sum "$REQ" | cut -c1-12)
prepare() {
  [ -f "$VENV/.ready" ] && return 0
  rm -rf "$VENV"
  "$BASE" -m venv "$VENV" &&
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$REQ" &&
    touch "$VENV/.ready"
}
[ "${GENSCOPE_PEERS_PREPARE:-1}" != 0 ] || [ -f "$VENV/.ready" ] ||
  skip "$VENV is not prepared (GENSCOPE_PEERS_PREPARE=0; this script without it prepares it)"
start=$(date +%s)
if ! (flock 9; prepare) 9>"$CACHE/modern-venv.lock" >"$VENV.log" 2>&1; then
  tail -n 5 "$VENV.log"
  skip "could not prepare $VENV from PyPI (log: $VENV.log)"
fi
echo "venv: $VENV ($(($(date +%s) - start)) s to prepare or find)"
export PYTHONPATH=$BUILD/python:$ROOT/tests/peers${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export TRANSFORMERS_VERBOSITY=error DIFFUSERS_VERBOSITY=error
exec "$VENV/bin/python" -W ignore "$SCRIPT" "$@"
