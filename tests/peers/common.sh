# Sourced by the peer tests (tests/peers/*.sh, run by scripts/peers): the checkout, the peers'
# cache, genscope, a scratch folder ($TMP, removed on exit), skip() (exit 77 with a SKIP line)
# and the prerequisites a test asks for itself:
#   need_genscope        skips unless the genscope CLI is built ($GENSCOPE)
#   need_module          skips unless the Python module is built ($BUILD/python)
#   need_venv NAME       sets PY to venv NAME's python (scripts/lib/peer_venvs.sh: PyPI packages
#                        pinned in tests/peers/requirements-NAME.txt), preparing it if needed;
#                        exits 1 (a failure, not a skip) when it cannot be prepared
skip() { echo "SKIP: $*"; exit 77; }
root=${GENSCOPE_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CACHE=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
GENSCOPE=${GENSCOPE:-$root/build/tools/genscope/genscope}
BUILD=${GENSCOPE_BUILD_DIR:-$root/build}
PY=/usr/bin/python3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/genscope-peer.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$CACHE"

need_genscope() { [[ -x $GENSCOPE ]] || skip "genscope not built ($GENSCOPE)"; }

need_module() {
  ls "$BUILD"/python/genscope/_genscope*.so >/dev/null 2>&1 ||
    skip "the Python module is not built ($BUILD/python/genscope/_genscope*.so absent; build the _genscope target)"
}

need_venv() {
  # shellcheck source=../../scripts/lib/peer_venvs.sh
  . "$root/scripts/lib/peer_venvs.sh"
  PY=$(GENSCOPE_PEERS_CACHE=$CACHE peer_venv "$1") || { echo "FAIL: the $1 venv could not be prepared"; exit 1; }
}
