#!/usr/bin/env bash
# A real distributed generation (docs/distributed.md): `genscope run --out DIR` over torchrun
# (PyPI's torch 2.x, tests/peers/requirements-distributed.txt) starting two ranks with a gloo
# process group on the CPU, each running a tiny real diffusers pipeline with its own prompt,
# recorded by genscope.torch (tests/peers/distributed_rank.py); rank 1 sleeps in diffusers'
# step callback. Checked: each rank wrote its own run (rank, world size, local rank, one group
# id, its own process); genscope run merged them with its launcher run; `genscope merge` names
# rank 1 the straggler of the sampling step it slowed, aligns the clocks on the barrier step,
# and writes one trace per rank that Holistic Trace Analysis (holistictraceanalysis, PyPI)
# loads as ranks 0 and 1; both ranks' runs reach a real OpenTelemetry Collector, ranks attached.
#
#   tests/peers/distributed.sh
#
# Environment: GENSCOPE, GENSCOPE_BUILD_DIR, GENSCOPE_PEERS_CACHE. Exit 77 (skipped) when the
# CLI or the module is not built; 1 when a check fails or the venv cannot be prepared.
set -uo pipefail
. "$(dirname "$0")/common.sh"
need_genscope
need_module
need_venv distributed
export PYTHONPATH=$BUILD/python:$root/tests/peers${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_HOME=$CACHE/huggingface
export DISTRIBUTED_SLOW_RANK=1 DISTRIBUTED_SLOW_SECONDS=0.25 DISTRIBUTED_STEPS=4
cd "$TMP"
echo "== $("$PY" -c 'import torch, diffusers, hta; print(f"torch {torch.__version__}, diffusers {diffusers.__version__}, holistictraceanalysis {hta.__version__ if hasattr(hta, "__version__") else "?"}")' 2>/dev/null)"

# 1. torchrun under genscope run: the launcher's run, and one run per rank in out/ranks.
start=$(date +%s.%N)
"$GENSCOPE" run --out out --quiet --plain -- \
  "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 "$root/tests/peers/distributed_rank.py" \
  > run.out 2> run.err
rc=$?
awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "torchrun of 2 ranks under genscope run: %.1f s\n", b - a }'
cat run.out
if [[ $rc != 0 ]]; then
  echo "FAIL: genscope run -- torchrun exited $rc"; tail -40 run.err; exit 1
fi
sed -n '/^Distributed generation/,$p' run.err

# 2. genscope merge of the ranks and the launcher: spread, stragglers, traces per rank.
"$GENSCOPE" merge out/ranks/rank0.json out/ranks/rank1.json out/run.json --plain -o merged.json \
  --html merged.html --trace merged.trace.json --trace-dir traces > merge.out ||
  { echo "FAIL: genscope merge"; cat merge.out; exit 1; }
cat merge.out

# 3. The checks, and Holistic Trace Analysis over the rank traces.
"$PY" - <<'PY' || exit 1
import json, sys

fails = []
def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        fails.append(what)

ranks = [json.load(open(f"out/ranks/rank{r}.json")) for r in (0, 1)]
launcher = json.load(open("out/run.json"))
for r, doc in enumerate(ranks):
    d = doc.get("distributed") or {}
    check((d.get("role"), d.get("rank"), d.get("world_size"), d.get("local_rank")) == ("rank", r, 2, r),
          f"rank {r}'s run carries rank {r} of 2, local rank {r}: {d}")
    names = [s["name"] for s in doc["steps"]]
    check(any(s["kind"] == "sampling" for s in doc["steps"]), f"rank {r} recorded its sampling step: {names}")
    check(doc["pipeline"]["parameters"].get("prompt") and doc["host"]["hostname"], f"rank {r} has its prompt and host")
check(ranks[0]["distributed"]["group"] == ranks[1]["distributed"]["group"] == launcher["distributed"]["group"],
      "one group id for both ranks and the launcher")
check(ranks[0]["pipeline"]["parameters"]["prompt"] != ranks[1]["pipeline"]["parameters"]["prompt"],
      "each rank its own prompt")
check(launcher["distributed"]["role"] == "launcher", "genscope run marked its own run as the launcher")
tree = next((a["data"] for a in launcher["attachments"] if a["type"] == "process_tree"), {})
procs = tree.get("processes", [])
check(len(procs) >= 3, f"the launcher's process tree holds torchrun and the ranks ({len(procs)} processes)")

m = json.load(open("merged.json"))
check([x["rank"] for x in m["ranks"]] == [0, 1] and m["launcher"] is not None, "merged: ranks 0, 1 and the launcher")
for x in m["ranks"]:
    check(x["tree_processes"] >= 1 and x["peak_bytes"].get("launcher.tree_rss_bytes", 0) > 0,
          f"rank {x['rank']}'s own processes found in the launcher's tree: {x['tree_processes']}, "
          f"{x['peak_bytes'].get('launcher.tree_rss_bytes', 0) / 2**20:.0f} MiB")
check(m["alignment"].startswith("barrier: barrier"), f"clocks aligned on the barrier step: {m['alignment']}")
sampling = [s for s in m["steps"] if s["kind"] == "sampling"]
check(len(sampling) == 1, f"one sampling step matched across the ranks: {[s['path'] for s in sampling]}")
for s in sampling:
    check(s["slowest_rank"] == 1 and s["straggler"],
          f"rank 1 is the straggler of '{s['path']}' (+{100 * s['excess']:.0f} % over the median)")
slowed = {s["path"] for s in sampling}
for s in m["steps"]:
    if s["path"] not in slowed and s["straggler"]:
        print(f"note: '{s['path']}' not slowed on purpose, straggler rank {s['slowest_rank']} "
              f"+{100 * s['excess']:.0f} % (noise of a shared machine)")
pauses = 4 * 0.25e9
d0, d1 = sampling[0]["duration_ns"] if sampling else (0, 0)
check(d1 - d0 > 0.8 * pauses, f"rank 1's sampling is longer by about its pauses: {(d1 - d0) / 1e9:.2f} s vs {pauses / 1e9:.2f} s")
sys.exit(1 if fails else 0)
PY

"$PY" - <<'PY' 2> hta.err || { echo "FAIL: Holistic Trace Analysis"; tail -20 hta.err; exit 1; }
import json
from hta.trace_analysis import TraceAnalysis

analysis = TraceAnalysis(trace_dir="traces")
traces = analysis.t.traces
assert sorted(traces) == [0, 1], sorted(traces)
for rank, df in traces.items():
    ours = json.load(open(f"traces/rank{rank}.trace.json"))
    complete = [e for e in ours["traceEvents"] if e["ph"] == "X"]
    names = set(analysis.t.symbol_table.get_sym_table()[i] for i in df["name"].unique())
    assert len(df) == len(complete), (rank, len(df), len(complete))
    assert any(n.startswith("denoise") for n in names), sorted(names)
    print(f"ok: HTA loaded rank {rank}: {len(df)} events ({sorted(names)[:3]} ...)")
PY

# 4. OpenTelemetry: both ranks' runs sent to a real collector (tests/otel_collector, built from
# the Go module proxy by scripts/lib/otel_collector.sh) by `genscope report --otlp`: each rank
# its own trace, every step a span with the right parent and figures (check_export.py), and
# the rank's identity as resource attributes.
. "$root/scripts/lib/otel_collector.sh"
mkdir -p otel
if ! otel_collector_start "$PWD/otel"; then
  [[ -n ${OTEL_COLLECTOR_PID:-} ]] && kill "$OTEL_COLLECTOR_PID" 2>/dev/null
  echo "FAIL: the test collector could not be built or started"; exit 1
fi
trap 'kill $OTEL_COLLECTOR_PID 2>/dev/null; rm -rf "$TMP"' EXIT
"$GENSCOPE" report out/ranks/rank0.json out/ranks/rank1.json --otlp "$OTEL_COLLECTOR_URL" > otlp.out 2> otlp.err ||
  { echo "FAIL: genscope report --otlp of the ranks"; cat otlp.err; exit 1; }
for r in 0 1; do
  "$GENSCOPE" report out/ranks/rank$r.json --metrics - > otel/prometheus$r.txt &&
    /usr/bin/python3 "$root/tests/otel_collector/check_export.py" out/ranks/rank$r.json "$OTEL_COLLECTOR_OUT" otel/prometheus$r.txt ||
    { echo "FAIL: the collector's file does not match rank $r's run"; exit 1; }
  echo "ok: rank $r's run reached the collector, every step a span with its parent"
done
/usr/bin/python3 - "$OTEL_COLLECTOR_OUT" <<'PY' || exit 1
import json, sys
seen = {}
for line in open(sys.argv[1]):
    for rs in json.loads(line).get("resourceSpans", []):
        a = {x["key"]: x["value"] for x in rs["resource"].get("attributes", [])}
        if "genscope.rank" in a:
            seen[int(a["genscope.rank"]["intValue"])] = (int(a["genscope.world_size"]["intValue"]), a["genscope.group"]["stringValue"])
if sorted(seen) != [0, 1] or seen[0] != seen[1] or seen[0][0] != 2:
    print(f"FAIL: the collector's traces should carry ranks 0 and 1 of 2 in one group: {seen}")
    sys.exit(1)
print(f"ok: the collector's traces carry genscope.rank 0 and 1, world size 2, group {seen[0][1]}")
PY
echo "PASS"
