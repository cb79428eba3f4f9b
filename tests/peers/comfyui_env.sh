# Sourced by the ComfyUI peer tests (comfyui_nodes.sh, comfyui_watch.sh, lora_comfyui.sh): the
# ComfyUI they run and the Python that runs it. The project never fetches, builds or lays out
# ComfyUI: the user names a checkout of it (the tests were written against v0.3.18).
#
#   GENSCOPE_COMFYUI_DIR     a ComfyUI folder (main.py, comfy/, requirements.txt); without it
#                            the tests exit 77 with a SKIP line
#   GENSCOPE_COMFYUI_PYTHON  the python3 to run it with (its packages installed); without it a
#                            venv is prepared once from PyPI in
#                            ${GENSCOPE_PEERS_CACHE:-~/.cache/genscope-peers}/comfyui-venv-<hash
#                            of requirements.txt and the extras>: `pip install "torch>=2,<3"
#                            requests -r requirements.txt` (PyPI's torch, CUDA build, run on the
#                            CPU here; about 6 GiB once; `requests`: ComfyUI's server imports it
#                            (app/frontend_management.py, v0.3.18) without listing it, and
#                            transformers 5 no longer brings it), under a flock so that two tests
#                            never prepare it at once
#
# After comfyui_env: COMFYUI (the folder, absolute) and COMFYUI_PY (its python3), and
# OMP_NUM_THREADS exported (default 1): PyPI's torch runs one OpenMP thread per core, and on a
# shared, loaded machine its threads spin-wait for each other (measured here at load 17 on 2
# cores: a 320-channel 3x3 convolution on 8x8 took 7.5x as long with 2 threads as with 1, and
# a sampler step of the SD1.5 test prompt 74 s).
comfyui_env() {
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
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
  local extras=("torch>=2,<3" requests) key venv
  key=$( (cat "$COMFYUI/requirements.txt"; echo "${extras[*]}") | sha256sum | cut -c1-12)
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
      "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "${extras[@]}" \
        -r "$COMFYUI/requirements.txt" &&
      "$venv/bin/python3" -c "import torch, torchsde, safetensors, aiohttp, PIL, yaml, requests" &&
      "$venv/bin/python3" -m pip freeze > "$venv/.genscope-ready"
  ) 9> "$cache/comfyui-venv.lock" || {
    echo "FAIL: could not prepare the ComfyUI venv $venv (log: $cache/comfyui-venv-$key.log):"
    tail -5 "$cache/comfyui-venv-$key.log"
    exit 1
  }
}

# Run on its own (scripts/peers runs every tests/peers/*.sh): not a test.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  echo "SKIP: comfyui_env.sh is sourced by the ComfyUI peer tests, not a test itself"
  exit 77
fi
