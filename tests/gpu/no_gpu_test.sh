#!/usr/bin/env bash
# scripts/gpu-check on a machine without a GPU: says so and exits 0, building and running
# nothing. Three ways of having no GPU: no nvidia-smi and no NVML library; an nvidia-smi that
# finds no device (as the real one prints, exit 6) with an NVML that counts none; an NVML
# whose init fails (driver not loaded).
set -euo pipefail
source_dir=${GENSCOPE_SOURCE_DIR:?}
tmp=$(mktemp -d "${GENSCOPE_TEST_TMP:-/tmp}/no_gpu.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_no_gpu() {
  local label=$1
  shift
  local out rc
  set +e
  out=$(env "$@" "$source_dir/scripts/gpu-check" --build-dir "$tmp/build" --out "$tmp/out" 2>&1)
  rc=$?
  set -e
  [[ $rc -eq 0 ]] || fail "$label: exit $rc: $out"
  grep -q "^gpu-check: no NVIDIA GPU on this machine" <<<"$out" || fail "$label: message: $out"
  [[ $(wc -l <<<"$out") -eq 1 ]] || fail "$label: one line expected: $out"
  [[ ! -e $tmp/build && ! -e $tmp/out ]] || fail "$label: something was built or written"
  echo "$label: $out"
}

if ! command -v nvidia-smi >/dev/null; then  # this machine as it is (the CI has no GPU)
  expect_no_gpu "this machine" -u GENSCOPE_NVIDIA_SMI -u GENSCOPE_NVML_LIBRARY
fi
expect_no_gpu "nothing there" GENSCOPE_NVIDIA_SMI="$tmp/absent/nvidia-smi" \
  GENSCOPE_NVML_LIBRARY="$tmp/absent/libnvidia-ml.so.1"

mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/sh
echo "No devices were found"
exit 6
EOF
chmod +x "$tmp/bin/nvidia-smi"
echo '{"driver_version": "580.159.04", "devices": []}' >"$tmp/none.json"
expect_no_gpu "no device" GENSCOPE_NVIDIA_SMI="$tmp/bin/nvidia-smi" \
  GENSCOPE_NVML_LIBRARY="${GENSCOPE_FAKE_NVML:?}" GENSCOPE_FAKE_NVML_SCENARIO="$tmp/none.json"
out=$(GENSCOPE_NVIDIA_SMI="$tmp/bin/nvidia-smi" GENSCOPE_NVML_LIBRARY="$GENSCOPE_FAKE_NVML" \
  GENSCOPE_FAKE_NVML_SCENARIO="$tmp/none.json" "$source_dir/scripts/gpu-check" \
  --build-dir "$tmp/build" 2>&1)
grep -q "nvidia-smi: lists no GPU (No devices were found)" <<<"$out" || fail "reason: $out"
grep -q "sees no GPU" <<<"$out" || fail "NVML's reason: $out"

expect_no_gpu "driver not loaded" -u GENSCOPE_FAKE_NVML_SCENARIO \
  GENSCOPE_NVIDIA_SMI="$tmp/bin/nvidia-smi" GENSCOPE_NVML_LIBRARY="$GENSCOPE_FAKE_NVML"
echo "gpu-check without a GPU: ok"
