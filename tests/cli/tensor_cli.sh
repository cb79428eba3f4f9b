#!/usr/bin/env bash
# `genscope tensor info|diff` on files NumPy writes: exit codes 0 (match) / 1 (differ) /
# 2 (error), named errors, folders matched by name.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 - "$tmp" <<'PY'
import numpy as np, os, sys
d = sys.argv[1]
rng = np.random.default_rng(0)
a = rng.standard_normal((1, 77, 768)).astype(np.float32)
np.save(f"{d}/a.npy", a)
np.save(f"{d}/same.npy", a.copy())
b = a.copy(); b[0, 3, 5] += 0.5
np.save(f"{d}/b.npy", b)
np.save(f"{d}/small.npy", a[:, :10])
for side in ("run1", "run2"):
    os.makedirs(f"{d}/{side}/text_encoding")
    np.save(f"{d}/{side}/text_encoding/positive.npy", a)
np.save(f"{d}/run1/only_here.npy", a)
np.save(f"{d}/run2/text_encoding/negative.npy", a)
PY
G="$GENSCOPE"
"$G" tensor info "$tmp/a.npy" --role conditioning --plain | grep -q "Model family: SD1.x" || fail "info family"
"$G" tensor info "$tmp/a.npy" --json | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)[0]
assert j["shape"] == [1, 77, 768] and j["stats"]["numel"] == 59136, j'
"$G" tensor diff "$tmp/a.npy" "$tmp/same.npy" > /dev/null || fail "identical must match (exit 0)"
set +e
"$G" tensor diff "$tmp/a.npy" "$tmp/b.npy" > "$tmp/out.txt"; rc=$?
[ $rc -eq 1 ] || fail "difference must exit 1, got $rc"
grep -q "worst at \[0, 3, 5\]" "$tmp/out.txt" || fail "worst index"
"$G" tensor diff "$tmp/a.npy" "$tmp/b.npy" --atol 0.6 > /dev/null; rc=$?
[ $rc -eq 0 ] || fail "within --atol must match, got $rc"
"$G" tensor diff "$tmp/a.npy" "$tmp/small.npy" > "$tmp/out.txt"; rc=$?
[ $rc -eq 1 ] && grep -q "shapes differ" "$tmp/out.txt" || fail "shape mismatch is a difference ($rc)"
printf 'garbage' > "$tmp/bad.npy"
"$G" tensor diff "$tmp/a.npy" "$tmp/bad.npy" 2> "$tmp/err.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "\[NpyBadMagic\]" "$tmp/err.txt" || fail "bad file: rc=$rc $(cat "$tmp/err.txt")"
"$G" tensor info "$tmp/nothing.npy" 2> "$tmp/err.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "\[NotFound\]" "$tmp/err.txt" || fail "missing file"
"$G" tensor diff "$tmp/run1" "$tmp/run2" --json > "$tmp/out.json"; rc=$?
[ $rc -eq 1 ] || fail "folders with names on one side differ ($rc)"
set -e
/usr/bin/python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["matched"] == 1 and j["only_a"] == 1 and j["only_b"] == 1, j
names = {t["name"]: t for t in j["tensors"]}
assert names["text_encoding/positive"]["comparison"]["allclose"] is True
assert names["only_here"]["in_b"] is False
PY
echo "tensor cli: ok"
