#!/usr/bin/env bash
# Golden test: `genscope report` of fixed run documents must match the stored output byte for
# byte. run.json is a document written before absent_probes existed (old documents stay
# readable); demo_run.json is a real `genscope demo --preset tiny` document (host and paths
# normalised) carrying every attachment type the reference pipeline produces. Regenerate with
# GENSCOPE_UPDATE_GOLDEN=1 after an intended change, and review the diff.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/golden
check() {  # check NAME ARGS...: compare `genscope report ARGS` with golden/NAME.txt
  local name=$1
  shift
  local actual
  actual=$("$GENSCOPE" report "$@")
  if [ "${GENSCOPE_UPDATE_GOLDEN:-0}" = 1 ]; then
    printf '%s\n' "$actual" > "$golden/$name.txt"
  fi
  diff -u "$golden/$name.txt" <(printf '%s\n' "$actual")
}
check report_plain --plain "$golden/run.json"
check report_emoji "$golden/run.json"
check demo_plain --plain "$golden/demo_run.json"
check demo_emoji "$golden/demo_run.json"
check demo_verbose_plain --plain --verbose "$golden/demo_run.json"
# --plain output is pure ASCII.
for f in report_plain demo_plain demo_verbose_plain; do
  if LC_ALL=C grep -nP '[^\x00-\x7F]' "$golden/$f.txt"; then
    echo "non-ASCII character in --plain output ($f)" >&2
    exit 1
  fi
done
# Human units only: no float in exponent notation, no "time unknown" where samples exist.
for f in "$golden"/report_*.txt "$golden"/demo_*.txt; do
  if grep -nP '(?<![0-9A-Za-z])[0-9]+(\.[0-9]+)?[eE][+-][0-9]+' "$f"; then
    echo "exponent notation in $f" >&2
    exit 1
  fi
  if grep -n "time unknown" "$f"; then
    echo "'time unknown' in $f" >&2
    exit 1
  fi
done
echo "report golden: ok"
