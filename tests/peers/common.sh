# Sourced by the peer tests (tests/peers/*.sh, run by scripts/peers): where the peers, their
# cache, genscope and a scratch folder are, and skip() (exit 77 with a SKIP line).
skip() { echo "SKIP: $*"; exit 77; }
root=${GENSCOPE_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PEERS=${GENSCOPE_PEERS:-$root/../shared/peers}
[[ -d $PEERS ]] || skip "peers not available (../shared/peers absent)"
PEERS=$(cd "$PEERS" && pwd)
CACHE=${GENSCOPE_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genscope-peers}
GENSCOPE=${GENSCOPE:-$root/build/tools/genscope/genscope}
[[ -x $GENSCOPE ]] || skip "genscope not built ($GENSCOPE)"
PY=/usr/bin/python3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/genscope-peer.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$CACHE"
