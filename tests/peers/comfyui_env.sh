# Sourced by the ComfyUI peer tests (comfyui_nodes.sh, comfyui_watch.sh, lora_comfyui.sh): the
# ComfyUI they run and the Python that runs it. The project never fetches, builds or lays out
# ComfyUI: the user names a checkout of it (the tests were written against v0.3.18).
#
#   GENSCOPE_COMFYUI_DIR     a ComfyUI folder (main.py, comfy/, requirements.txt); without it
#                            the tests exit 77 with a SKIP line
#   GENSCOPE_COMFYUI_PYTHON  the python3 to run it with (its packages installed); without it a
#                            venv is prepared once from PyPI in
#                            ${GENSCOPE_PEERS_CACHE:-~/.cache/genscope-peers}/comfyui-venv-<hash
#                            of requirements.txt>: `pip install "torch>=2,<3" -r requirements.txt`
#                            (PyPI's torch, CUDA build, run on the CPU here; about 6 GiB once),
#                            under a flock so that two tests never prepare it at once
#
# After comfyui_env: COMFYUI (the folder, absolute) and COMFYUI_PY (its python3).
comfyui_env() {
  local dir=${GENSCOPE_COMFYUI_DIR:-}
  if [[ -z $dir ]]; then
    echo "SKIP: ComfyUI not given (set GENSCOPE_COMFYUI_DIR to a ComfyUI checkout, e.g. v0.3.18)"
    exit 77
  fi
  COMFYUI=$(cd "$dir" 2>/dev/null && pwd) || { echo "FAIL: GENSCOPE_COMFYUI_DIR=$dir: no such folder"; exit 1; }
  [[ -f $COMFYUI/main.py && -d $COMFYUI/comfy && -f $COMFYUI/requirements.txt ]] ||
    { echo "FAIL: GENSCOPE_COMFYUI_DIR=$dir is not a ComfyUI folder (main.py, comfy/, requirements.txt)"; exit 1; }
  if [[ -n ${GENSCOPE_COMFYUI_PYTHON:-} ]]; then
    COMFYUI_PY=$GENSCOPE_COMFYUI_PYTHON
    [[ -x $COMFYUI_PY ]] || { echo "FAIL: GENSCOPE_COMFYUI_PYTHON=$COMFYUI_PY is not a program"; exit 1; }
    return 0
  fi
  local cache=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
  local key venv
  key=$(sha256sum < "$COMFYUI/requirements.txt" | cut -c1-12)
  venv=$cache/comfyui-venv-$key
  COMFYUI_PY=$venv/bin/python3
  [[ -f $venv/.genscope-ready ]] && return 0
  mkdir -p "$cache" || { echo "FAIL: cannot create $cache"; exit 1; }
  echo "preparing the ComfyUI venv $venv from PyPI (once; torch is large)"
  (
    flock 9
    [[ -f $venv/.genscope-ready ]] && exit 0
    exec > "$cache/comfyui-venv-$key.log" 2>&1
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv" &&
      "$venv/bin/pip" install --quiet --disable-pip-version-check "torch>=2,<3" \
        -r "$COMFYUI/requirements.txt" &&
      "$venv/bin/python3" -c "import torch, torchsde, safetensors, aiohttp, PIL, yaml" &&
      "$venv/bin/pip" freeze > "$venv/.genscope-ready"
  ) 9> "$cache/comfyui-venv.lock" || {
    echo "FAIL: could not prepare the ComfyUI venv $venv (log: $cache/comfyui-venv-$key.log):"
    tail -5 "$cache/comfyui-venv-$key.log"
    exit 1
  }
}
