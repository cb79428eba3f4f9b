#!/usr/bin/env bash
# Nothing is lost: when `genscope demo` cannot write run.json, the report is still printed, the
# error is named, and the document lands in the fallback chain ($XDG_STATE_HOME, then $TMPDIR,
# then stderr with --json-fallback). Every failure used here also stops root: a folder in the
# way of the rename, paths under a regular file, and (where this machine lets a test mount) a
# really full tmpfs.
set -euo pipefail
if ! "$GENSCOPE" demo --help > /dev/null 2>&1; then
  echo "run document fallback: skipped (genscope built without LibTorch: no demo command)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
demo() { "$GENSCOPE" demo --preset tiny --plain "$@"; }
echo x > "$tmp/a-file"

# 1. run.json cannot be written (a folder is in the way): saved to $XDG_STATE_HOME instead.
mkdir -p "$tmp/out1/run.json"
rc=0
XDG_STATE_HOME=$tmp/state TMPDIR=$tmp/tmp demo --out "$tmp/out1" > "$tmp/1.out" 2> "$tmp/1.err" || rc=$?
[ "$rc" = 2 ] || fail "exit $rc, expected 2 when run.json is not where asked"
grep -q "^SUMMARY$" "$tmp/1.out" || fail "the report was not printed"
grep -q "genscope: error \[WriteFailed\]: the run document could not be written: .*Is a directory" \
  "$tmp/1.err" || fail "the error is not named: $(cat "$tmp/1.err")"
saved=$(sed -n 's/^genscope: the run document was saved to \(.*\) instead$/\1/p' "$tmp/1.err")
case "$saved" in "$tmp"/state/genscope/runs/*.json) ;; *) fail "fallback location: '$saved'" ;; esac
grep -qF "run document: $saved (fallback)" "$tmp/1.out" || fail "stdout does not name the fallback"
"$GENSCOPE" report --plain "$saved" | grep -q "^SUMMARY$" || fail "the fallback document does not read"

# 2. No file anywhere (state and temporary folders under a regular file): --json-fallback
#    puts the document on stderr, after the report.
rc=0
XDG_STATE_HOME=$tmp/a-file/state TMPDIR=$tmp/a-file/tmp demo --out "$tmp/out1" --json-fallback \
  > "$tmp/2.out" 2> "$tmp/2.err" || rc=$?
[ "$rc" = 2 ] || fail "exit $rc with --json-fallback"
grep -q "^SUMMARY$" "$tmp/2.out" || fail "the report was not printed (2)"
grep -q "no file could be written; the run document follows on stderr as JSON" "$tmp/2.err" ||
  fail "stderr does not announce the JSON: $(head -5 "$tmp/2.err")"
sed -n '/^{$/,/^}$/p' "$tmp/2.err" > "$tmp/2.json"
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']=='genscope.run/1' and d['steps']" \
  "$tmp/2.json" || fail "stderr JSON is not the run document"
"$GENSCOPE" report --plain "$tmp/2.json" | grep -q "^SUMMARY$" || fail "stderr JSON does not render"

# 3. The same without --json-fallback: the loss is said plainly, the report is still there.
rc=0
XDG_STATE_HOME=$tmp/a-file/state TMPDIR=$tmp/a-file/tmp demo --out "$tmp/out1" \
  > "$tmp/3.out" 2> "$tmp/3.err" || rc=$?
[ "$rc" = 2 ] || fail "exit $rc without a fallback"
grep -q "^SUMMARY$" "$tmp/3.out" || fail "the report was not printed (3)"
grep -q "the run document was NOT saved" "$tmp/3.err" || fail "the loss is not reported"
[ "$(grep -c "WriteFailed" "$tmp/3.err")" = 3 ] || fail "every failed location is named"

# 4. A really full disk: --out on a tmpfs that holds the images and dumps but not run.json.
demo --out "$tmp/ref" > /dev/null
outputs=0
while IFS= read -r f; do
  outputs=$((outputs + ($(stat -c %s "$f") + 4095) / 4096 * 4096))
done < <(find "$tmp/ref" -type f ! -name run.json)
doc=$(stat -c %s "$tmp/ref/run.json")
size=$((outputs + 8192))
if [ "$doc" -le 8192 ]; then
  fail "run.json ($doc bytes) would fit in the slack; the test needs a larger document"
fi
mkdir -p "$tmp/full"
rc=0
if unshare --mount --propagation private true 2> /dev/null; then
  XDG_STATE_HOME=$tmp/state4 TMPDIR=$tmp/tmp unshare --mount --propagation private bash -c \
    'mount -t tmpfs -o size='"$size"' tmpfs "$1" || exit 77
     shift; "$@"' _ "$tmp/full" "$GENSCOPE" demo --preset tiny --plain --out "$tmp/full" \
    > "$tmp/4.out" 2> "$tmp/4.err" || rc=$?
else
  rc=77
fi
if [ "$rc" = 77 ]; then
  echo "run document fallback: full-disk case skipped (no tmpfs mount allowed here)"
else
  [ "$rc" = 2 ] || fail "exit $rc on a full disk: $(cat "$tmp/4.err")"
  grep -q "^SUMMARY$" "$tmp/4.out" || fail "the report was not printed (4)"
  grep -q "No space left on device" "$tmp/4.err" || fail "ENOSPC not named: $(cat "$tmp/4.err")"
  grep -q "saved to $tmp/state4/genscope/runs/" "$tmp/4.err" || fail "no fallback on a full disk"
fi
echo "run document fallback: ok"
