#!/usr/bin/env bash
# The Python binding's whole test suite (python/tests: genscope.torch.instrument, steps,
# patching, allocator, tensors, runs) on today's PyPI torch and NumPy (the modern venv of
# tests/peers/requirements-modern.txt: torch 2.15, NumPy 2), where scripts/test runs it on
# Debian's torch 1.13 and NumPy 1.24. Skips (77) as modern_diffusers.sh does.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export GENSCOPE_SOURCE_DIR=$ROOT
export GENSCOPE_BUILD_DIR=${GENSCOPE_BUILD_DIR:-$ROOT/build}
export GENSCOPE_FAKE_NVML=$GENSCOPE_BUILD_DIR/tests/fake_nvml/libfake_nvml.so
export GENSCOPE_TEST_TMP=${TMPDIR:-/tmp}/genscope-python-modern-$$
trap 'rm -rf "$GENSCOPE_TEST_TMP"' EXIT
exec "$ROOT/tests/peers/modern_diffusers.sh" --script "$ROOT/tests/peers/python_suite.py" "$ROOT/python/tests"
