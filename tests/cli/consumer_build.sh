#!/usr/bin/env bash
# Installs genscope into a temporary prefix and builds tests/consumer against it with
# find_package(genscope), then runs the consumer and reads its run document back.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$GENSCOPE_BUILD_DIR" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/lib/cmake/genscope/genscope-config-version.cmake"
cmake -S "$GENSCOPE_SOURCE_DIR/tests/consumer" -B "$tmp/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release > "$tmp/configure.log"
cmake --build "$tmp/build" > "$tmp/build.log"
"$tmp/build/consumer" "$tmp/run.json"
"$GENSCOPE" report --plain "$tmp/run.json" | grep -q "consumer step"
echo "consumer build: ok"
