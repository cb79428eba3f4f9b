#!/usr/bin/env bash
# genscope.torch.instrument on the real diffusers StableDiffusionPipeline and
# StableDiffusionXLPipeline, on the oldest supported diffusers (0.27.2) and the newest pinned
# one, each with PyPI's torch 2.x (tests/peers/requirements-*.txt; the venvs are prepared by
# scripts/lib/peer_venvs.sh): steps, labels, family checks, iterations and durations against
# diffusers' own record (tests/peers/diffusers_check.py).
#
#   tests/peers/diffusers.sh [--table FILE] [other diffusers_check.py options]
#
# --table FILE gets the timing tables of both versions. Environment: GENSCOPE_BUILD_DIR
# (default <repo>/build: its python/ folder holds the built module), GENSCOPE_PEERS_CACHE.
# Exit 77 (skipped) when the module is not built; 1 when a check fails or a venv cannot be
# prepared; 0 otherwise.
set -uo pipefail
. "$(dirname "$0")/common.sh"
need_module
table=
args=()
while (($#)); do
  case $1 in
    --table) table=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
export PYTHONPATH=$BUILD/python:$root/tests/peers${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # steadier timings on a shared machine
# offline: the pipelines are built here; nothing is fetched from a hub
export HF_HUB_OFFLINE=1 HF_HOME=$CACHE/huggingface
rc=0
for venv in diffusers-0.27 diffusers; do
  need_venv "$venv"
  echo "== $venv: $("$PY" -c 'import diffusers, transformers, torch; print(f"diffusers {diffusers.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")')"
  "$PY" -W ignore "$root/tests/peers/diffusers_check.py" --table "$TMP/$venv.md" "${args[@]}" || rc=1
  [[ -n $table && -f $TMP/$venv.md ]] && cat "$TMP/$venv.md" >> "$TMP/table.md"
done
[[ -n $table && -f $TMP/table.md ]] && cp "$TMP/table.md" "$table"
exit $rc
