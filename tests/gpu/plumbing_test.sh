#!/usr/bin/env bash
# The whole GPU check driver against the fake NVML and a fake nvidia-smi (both answering from
# one scenario): a test of scripts/gpu-check's plumbing, never a GPU result; every run says
# so. Checks that the NVML comparison agrees where the two fakes agree and fails where they
# do not, that a field an older nvidia-smi lacks is skipped by name, that the checks needing
# CUDA skip with the reason, that the unsupported-call path runs through the NVML shim, and
# that .gpudeps' fallback libraries are supplied only where the machine lacks them.
set -euo pipefail
source_dir=${GENSCOPE_SOURCE_DIR:?}
build_dir=${GENSCOPE_BUILD_DIR:?}
tmp=$(mktemp -d "${GENSCOPE_TEST_TMP:-/tmp}/plumbing.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
banner="PLUMBING TEST: fake NVML and a fake nvidia-smi, no GPU. Nothing below is a GPU result."

cat >"$tmp/scenario.json" <<'JSON'
{"driver_version": "580.159.04",
 "devices": [{"name": "Fake H100 80GB HBM3", "uuid": "GPU-00000000-fake-4000-8000-000000000001",
   "total": 85520809984, "reserved": 554696704, "used": [1048576],
   "utilization": {"gpu": 0, "memory": 0}, "temperature": 31, "power_mw": 69530,
   "clocks": {"sm": 345, "mem": 2619},
   "processes": [{"pid": "self", "used": 1587544064}, {"pid": 4242, "used": 524288000}]}]}
JSON
export GENSCOPE_FAKE_NVML_SCENARIO=$tmp/scenario.json
export GENSCOPE_NVML_LIBRARY=${GENSCOPE_FAKE_NVML:?}
export GENSCOPE_NVIDIA_SMI=$source_dir/tests/gpu/fake_nvidia_smi.py
export GENSCOPE_GPU_PYTHON=/usr/bin/python3
export GENSCOPE_DEPS_PREFIX=$tmp/no-deps

check() {  # check OUT ARGS...: runs gpu-check, leaves its output in $tmp/OUT.txt, returns rc
  local name=$1
  shift
  set +e
  "$source_dir/scripts/gpu-check" --plumbing --no-build --no-libtorch --build-dir "$build_dir" \
    --out "$tmp/$name" --work "$tmp/$name-work" "$@" >"$tmp/$name.txt" 2>&1
  local rc=$?
  set -e
  return $rc
}
verdicts() {  # verdicts OUT: "check|figure|verdict|note" per row
  /usr/bin/python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print("|".join((r["check"], r["figure"], r["verdict"], r["note"])))' "$tmp/$1/results.json"
}

# 1. Everything the fakes can drive agrees; the CUDA checks skip, saying why.
check all || fail "plumbing run: exit $?: $(tail -20 "$tmp/all.txt")"
[[ $(head -1 "$tmp/all.txt") == "$banner" && $(tail -1 "$tmp/all.txt") == "$banner" ]] ||
  fail "the banner opens and closes the output"
[[ $(head -1 "$tmp/all/table.txt") == "$banner" ]] || fail "table.txt starts with the banner"
rows=$(verdicts all)
[[ $(grep -c '^nvml gpu0|.*|PASS|' <<<"$rows") -eq 15 ]] || fail "15 NVML rows pass: $rows"
grep -q '^allocator exactness|-|SKIP|.*plumbing run: no GPU here' <<<"$rows" ||
  fail "CUDA checks skip with the reason: $rows"
grep -q '^demo --device cuda|-|SKIP|LibTorch integration: not built (--no-libtorch)' <<<"$rows" ||
  fail "demo skip: $rows"
grep -q '^nvml unsupported|errors naming nvmlDeviceGetPowerUsage|PASS|provoked' <<<"$rows" ||
  fail "unsupported call through the shim: $rows"
# The sampler's cost needs bench/probes_bench, which scripts/bench builds (scripts/test does not):
# measured over the fake and labelled when it is there, else skipped with the reason.
if [[ -x $build_dir/bench/probes_bench ]]; then
  grep -q '^sampler cost|nvml sample() wall per sample|INFO|.*fake NVML (plumbing)' <<<"$rows" ||
    fail "sampler cost over the fake, labelled: $rows"
else
  grep -q '^sampler cost|-|SKIP|probes_bench not built' <<<"$rows" ||
    fail "sampler cost skipped without probes_bench: $rows"
fi
! grep -q '|FAIL|' <<<"$rows" || fail "no failure: $rows"

# 2. A disagreement fails the run, on that figure only.
if GENSCOPE_FAKE_SMI_SKEW="temperature.gpu=+5" check skew --only "nvml vs"; then
  fail "a 5 C disagreement must fail the run"
fi
rows=$(verdicts skew)
[[ $(grep -c '|FAIL|' <<<"$rows") -eq 1 ]] && grep -q '^nvml gpu0|temperature_celsius|FAIL|' <<<"$rows" ||
  fail "only the temperature fails: $rows"
grep -q "1 failed" "$tmp/skew/table.txt" || fail "summary counts the failure"

# 3. A field this nvidia-smi does not know is skipped by name, the rest compared.
GENSCOPE_FAKE_SMI_UNKNOWN=memory.reserved check old-smi --only "nvml vs" ||
  fail "unknown field: $(tail -5 "$tmp/old-smi.txt")"
grep -q '^nvml gpu0 memory.reserved|-|SKIP|this nvidia-smi does not know the field' <<<"$(verdicts old-smi)" ||
  fail "reserved skipped: $(verdicts old-smi)"

# 4. .gpudeps' fallback libraries: only those missing here are supplied.
deps=$tmp/deps
mkdir -p "$deps/usr/lib/x86_64-linux-gnu/genscope-fallback"
printf 'multiarch x86_64-linux-gnu\nsource test\n' >"$deps/MANIFEST"
printf 'libz.so.1\nlibgenscope_absent_test.so.7\n' >"$deps/usr/lib/x86_64-linux-gnu/genscope-fallback/SONAMES"
touch "$deps/usr/lib/x86_64-linux-gnu/genscope-fallback/libgenscope_absent_test.so.7"
GENSCOPE_DEPS_PREFIX=$deps check deps --only "nvml vs" || fail "deps run: $(tail -5 "$tmp/deps.txt")"
grep -q '^gpu-check: supplied from .gpudeps (missing here): libgenscope_absent_test.so.7$' "$tmp/deps.txt" ||
  fail "fallback: $(grep gpudeps "$tmp/deps.txt")"
[[ $(ls "$tmp/deps-work/gpudeps-fallback") == libgenscope_absent_test.so.7 ]] ||
  fail "only the missing library is linked"
echo "gpu-check plumbing (fake NVML, fake nvidia-smi; no GPU result): ok"
