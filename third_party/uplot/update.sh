#!/usr/bin/env bash
# Re-fetches the vendored uPlot files from the npm registry and checks them.
#
#   third_party/uplot/update.sh          # fetch, verify, compare with the vendored files
#   third_party/uplot/update.sh --write  # fetch, verify, overwrite the vendored files
#
# The tarball is fetched with `npm pack` (the registry's ordinary client) and must match the
# pinned Subresource Integrity hash below before anything is extracted; the three files genscope
# inlines into HTML reports are then compared with (or copied over) the vendored copies, whose
# SHA-256 sums are listed in SHA256SUMS (checked by the test suite, offline).
# To move to another version: change VERSION and INTEGRITY (from `npm view uplot@X
# dist.integrity`), run with --write, review the diff, rebuild, run the HTML report tests.
set -euo pipefail
VERSION=1.6.32
INTEGRITY=sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw==
FILES=(dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE)

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "uplot@$VERSION" > /dev/null
tarball="uplot-$VERSION.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$actual" != "$INTEGRITY" ]; then
  echo "integrity mismatch for $tarball: got $actual, pinned $INTEGRITY" >&2
  exit 1
fi
tar xzf "$tarball"
status=0
for f in "${FILES[@]}"; do
  name=$(basename "$f")
  if [ "${1:-}" = --write ]; then
    cp "package/$f" "$here/$name"
  elif ! cmp -s "package/$f" "$here/$name"; then
    echo "vendored $name differs from uplot@$VERSION's $f" >&2
    status=1
  fi
done
if [ "${1:-}" = --write ]; then
  (cd "$here" && sha256sum LICENSE uPlot.iife.min.js uPlot.min.css > SHA256SUMS)
  echo "wrote uplot@$VERSION into $here"
elif [ $status -eq 0 ]; then
  echo "vendored uPlot matches uplot@$VERSION ($INTEGRITY)"
fi
exit $status
