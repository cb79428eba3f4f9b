# The peer tests' Python environments, from PyPI (sourced by tests/peers/common.sh and
# scripts/peers, not run).
#
#   peer_venv NAME    prints the python of venv NAME, prepared if needed; progress and each
#                     phase's time go to stderr; returns non-zero when it cannot be prepared
#
# NAME is one of tests/peers/requirements-NAME.txt (diffusers, diffusers-0.27, sdcpp): the
# pinned versions, the one place they are written. Every venv uses /usr/bin/python3 (the
# interpreter the genscope module is built for) and one shared torch (requirements-torch.txt,
# itself a venv) through a .pth file, so torch and its nvidia-* wheels are downloaded and
# installed once. The sdcpp venv has no torch.
#
# The venvs live in $GENSCOPE_PEERS_CACHE (default ~/.cache/genscope-peers), in folders named
# after a hash of their requirements (and torch's), so a changed pin prepares a new one. A venv
# is used only when it holds the ".ready" mark written after its last install succeeded; one
# without it (an interrupted run) is removed and prepared again. flock on NAME.lock keeps
# concurrent runs (two tests, two checkouts) from preparing the same venv twice.

peer_cache=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
peer_requirements=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tests/peers" && pwd)
peer_python=${GENSCOPE_PEERS_PYTHON:-/usr/bin/python3}

# "[peers] NAME: what: 12.3 s" on stderr after running CMD (its output to stderr too).
peer_phase() {
  local what=$1 start rc
  shift
  start=$(date +%s.%N)
  "$@" >&2
  rc=$?
  awk -v w="$what" -v a="$start" -v b="$(date +%s.%N)" -v rc=$rc \
    'BEGIN { printf "[peers] %s: %.1f s%s\n", w, b - a, rc ? " (failed)" : "" }' >&2
  return $rc
}

peer_hash() { cat "$@" <("$peer_python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12; }

# _peer_prepare NAME DIR REQ [TORCH_SITE]: DIR ready (under NAME's lock).
_peer_prepare() {
  local name=$1 dir=$2 req=$3 torch_site=${4:-}
  mkdir -p "$peer_cache"
  exec {lock}>"$peer_cache/$name.lock"
  flock "$lock"
  if [[ ! -f $dir/.ready ]]; then
    rm -rf "$dir"
    peer_phase "$name: venv" "$peer_python" -m venv "$dir" &&
      if [[ -n $torch_site ]]; then
        local site
        site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))') &&
          echo "$torch_site" > "$site/genscope-peers-torch.pth"
      fi &&
      peer_phase "$name: pip install (download and build)" \
        "$dir/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req" &&
      touch "$dir/.ready"
  fi
  local rc=$?
  exec {lock}>&-
  return $rc
}

peer_venv() {
  local name=$1 req=$peer_requirements/requirements-$1.txt
  [[ -f $req ]] || { echo "peer_venv: no $req" >&2; return 2; }
  if [[ $name == sdcpp ]]; then
    local dir=$peer_cache/venv-sdcpp-$(peer_hash "$req")
    # the sdist's cmake build: both cores
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} _peer_prepare sdcpp "$dir" "$req" || return 1
  else
    local treq=$peer_requirements/requirements-torch.txt
    local tdir=$peer_cache/venv-torch-$(peer_hash "$treq")
    _peer_prepare torch "$tdir" "$treq" || return 1
    local tsite
    tsite=$("$tdir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))') || return 1
    local dir=$peer_cache/venv-$name-$(peer_hash "$req" "$treq")
    _peer_prepare "$name" "$dir" "$req" "$tsite" || return 1
  fi
  echo "$dir/bin/python"
}
