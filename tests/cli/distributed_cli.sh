#!/usr/bin/env bash
# Distributed runs through the CLI (docs/distributed.md): `genscope run --out DIR` over a
# launcher that starts two ranks of the C++ example program (RANK/WORLD_SIZE/LOCAL_RANK set as
# torchrun sets them) gets each rank's own run in DIR/ranks, marks its own run as the
# launcher's and merges them into DIR/merged.json; `genscope merge` and `genscope report` of
# the rank runs give the per-step spread, the stragglers of a rank made slower, the merged
# HTML/trace and one trace per rank; runs of different groups, two runs of one rank, a run
# without a rank, a malformed merged document and a bad margin are refused by name.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -x "${GENSCOPE_MINIMAL:-}" ] || { echo "SKIP: genscope_minimal not built"; exit 0; }
cd "$tmp"

# 1. genscope run over a launcher of two ranks.
"$GENSCOPE" run --out out --quiet --plain -- bash -c \
  "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 '$GENSCOPE_MINIMAL' r0.json 5 > /dev/null &
   RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 '$GENSCOPE_MINIMAL' r1.json 5 > /dev/null; wait" \
  > run.out 2> run.err || fail "genscope run: $(cat run.err)"
[ -f out/ranks/rank0.json ] && [ -f out/ranks/rank1.json ] || fail "no rank runs in out/ranks: $(ls -R out)"
[ -f out/merged.json ] || fail "no out/merged.json: $(cat run.err)"
grep -q "Distributed generation: 2 of 2 ranks, group genscope:" run.err || fail "no merged summary: $(cat run.err)"
/usr/bin/python3 - <<'PY'
import json
r0, r1 = (json.load(open(f"out/ranks/rank{r}.json")) for r in (0, 1))
launcher = json.load(open("out/run.json"))
merged = json.load(open("out/merged.json"))
for r, doc in ((0, r0), (1, r1)):
    d = doc["distributed"]
    assert (d["role"], d["rank"], d["world_size"], d["local_rank"]) == ("rank", r, 2, r), d
    # genscope run's group wins over MASTER_ADDR:MASTER_PORT: it names this launch
    assert d["group_source"] == "genscope" and d["group"].startswith("genscope:"), d
    assert len(doc["steps"]) == 7, [s["name"] for s in doc["steps"]]
assert r0["distributed"]["group"] == r1["distributed"]["group"]
assert launcher["distributed"]["role"] == "launcher", launcher.get("distributed")
assert launcher["distributed"]["group"] == r0["distributed"]["group"]
# the ranks' steps stay in their own runs, not forwarded into the launcher's
assert launcher["steps"] == [], [s["name"] for s in launcher["steps"]]
assert merged["schema"] == "genscope.merged/1"
assert [r["rank"] for r in merged["ranks"]] == [0, 1]
assert merged["launcher"]["id"] == launcher["id"]
assert [s["path"] for s in merged["steps"]][:2] == ["load weights (64 MiB kept)", "spike (16 MiB, freed at once)"]
assert merged["ranks"][0]["peak_bytes"]["process.rss_bytes"] > 64 << 20, merged["ranks"][0]
# each rank's own process, picked out of the launcher's process tree by its pid
for r in merged["ranks"]:
    assert r["tree_processes"] == 1, r
    assert r["peak_bytes"]["launcher.tree_rss_bytes"] > 64 << 20, r
PY

# 2. Rank 1 made slower in its sampling step (its iterations twice as long), then merged.
/usr/bin/python3 - <<'PY'
import json
doc = json.load(open("out/ranks/rank1.json"))
slow = next(s for s in doc["steps"] if s["name"].startswith("sampling"))
fast = json.load(open("out/ranks/rank0.json"))
ref = next(s for s in fast["steps"] if s["name"].startswith("sampling"))
slow["duration_ns"] = 3 * ref["duration_ns"]
json.dump(doc, open("slow1.json", "w"))
PY
"$GENSCOPE" merge out/ranks/rank0.json slow1.json --plain -o merged.json --html merged.html \
  --trace merged.trace.json --trace-dir traces > merge.out || fail "merge: $(cat merge.out)"
grep -E "^  sampling \(10 iterations\) .*\(rank 1, \+[0-9.]+ %\)  STRAGGLER rank 1$" merge.out ||
  fail "rank 1 not the straggler of sampling: $(cat merge.out)"
grep -q "merged document: merged.json" merge.out || fail "$(cat merge.out)"
[ -f traces/rank0.trace.json ] && [ -f traces/rank1.trace.json ] || fail "no rank traces"
/usr/bin/python3 - <<'PY'
import json, re
for r in (0, 1):
    text = open(f"traces/rank{r}.trace.json").read()
    # Holistic Trace Analysis takes the first "rank":<space>N of the file as its rank
    assert int(re.search(r'"rank":\s+(\d+)', text).group(1)) == r
    t = json.loads(text)
    assert t["distributedInfo"]["rank"] == r and t["distributedInfo"]["world_size"] == 2
merged = json.load(open("merged.trace.json"))
names = sorted(e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name")
assert names[0].startswith("rank 0: ") and names[1].startswith("rank 1: "), names
html = open("merged.html").read()
assert '<section id="ranks"><h2>Ranks</h2>' in html and "straggler" in html
PY
# A larger margin: no straggler; the margin accepts "250", "250%" and "250 %".
"$GENSCOPE" merge out/ranks/rank0.json slow1.json --plain --straggler-margin 250% > wide.out
grep -q "STRAGGLER" wide.out && fail "a 250 % margin still flags: $(cat wide.out)"
# genscope report of the rank runs merges them too, and re-reads the merged document.
"$GENSCOPE" report out/ranks/rank0.json slow1.json --plain > report.out
grep -q "STRAGGLER rank 1" report.out || fail "report of rank runs: $(cat report.out)"
"$GENSCOPE" report merged.json --plain > report2.out
diff <(grep -v "^Clocks" report.out) <(grep -v "^Clocks" report2.out) || fail "merged document re-read differs"

# 3. Refusals, each by name.
expect_error() {  # NAME CMD...: exits 2 (genscope's own error) naming NAME
  local name=$1 rc=0
  shift
  "$@" > err.out 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$* exited $rc, not 2: $(cat err.out)"
  grep -q "\[$name\]" err.out || fail "$* did not name [$name]: $(cat err.out)"
}
/usr/bin/python3 - <<'PY'
import json
doc = json.load(open("out/ranks/rank1.json"))
doc["distributed"]["group"] = "another-launch"
json.dump(doc, open("other_group.json", "w"))
doc = json.load(open("out/ranks/rank1.json"))
del doc["distributed"]
json.dump(doc, open("no_rank.json", "w"))
m = json.load(open("merged.json"))
m["steps"][0]["duration_ns"] = [1]
json.dump(m, open("bad_merged.json", "w"))
PY
expect_error RunsNotOneGeneration "$GENSCOPE" merge out/ranks/rank0.json other_group.json
expect_error RunsNotOneGeneration "$GENSCOPE" merge out/ranks/rank0.json out/ranks/rank0.json
expect_error RunsNotOneGeneration "$GENSCOPE" merge out/ranks/rank0.json no_rank.json
expect_error RunsNotOneGeneration "$GENSCOPE" report out/ranks/rank0.json other_group.json
expect_error InvalidMergedDocument "$GENSCOPE" report bad_merged.json
expect_error InvalidOption "$GENSCOPE" merge out/ranks/rank0.json --straggler-margin -5
expect_error InvalidOption "$GENSCOPE" merge out/ranks/rank0.json --straggler-margin ten
echo '{"schema": "genscope.run/1", "distributed": {"rank": 5, "world_size": 2}}' > bad_rank.json
expect_error InvalidRunDocument "$GENSCOPE" merge out/ranks/rank0.json bad_rank.json
echo "OK"
