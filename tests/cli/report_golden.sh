#!/usr/bin/env bash
# Golden test: `genscope report` of a fixed run document must match the stored output
# byte for byte (plain and emoji). Regenerate with GENSCOPE_UPDATE_GOLDEN=1 after an
# intended change, and review the diff.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for style in plain emoji; do
  flag=""
  [ "$style" = plain ] && flag="--plain"
  actual=$("$GENSCOPE" report $flag "$here/golden/run.json")
  if [ "${GENSCOPE_UPDATE_GOLDEN:-0}" = 1 ]; then
    printf '%s\n' "$actual" > "$here/golden/report_$style.txt"
  fi
  diff -u "$here/golden/report_$style.txt" <(printf '%s\n' "$actual")
done
# The plain report is pure ASCII.
if LC_ALL=C grep -nP '[^\x00-\x7F]' "$here/golden/report_plain.txt"; then
  echo "non-ASCII character in --plain output" >&2
  exit 1
fi
echo "report golden: ok"
