"""Shared helpers of the genscope Python tests."""

import os
import tempfile

import genscope


def quiet_monitor(**kwargs):
    """A monitor without NVML (no GPU here) and a short sampling interval."""
    kwargs.setdefault("nvml", False)
    kwargs.setdefault("sample_interval_ms", 2)
    return genscope.Monitor(**kwargs)


def scratch_dir():
    """A fresh folder under GENSCOPE_TEST_TMP (or the system temp folder)."""
    base = os.environ.get("GENSCOPE_TEST_TMP")
    if base:
        os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix="genscope-py-", dir=base or None)


def step_by_name(doc, name):
    """The step record called `name` in a run document."""
    matches = [s for s in doc["steps"] if s["name"] == name]
    if len(matches) != 1:
        raise AssertionError(f"expected one step {name!r}, got {len(matches)}")
    return matches[0]


def metric(step, name):
    """The metric figures called `name` in a step record."""
    for m in step["metrics"]:
        if m["name"] == name:
            return m
    raise AssertionError(f"no metric {name!r} in {[m['name'] for m in step['metrics']]}")
