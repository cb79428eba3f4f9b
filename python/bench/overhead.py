#!/usr/bin/python3
"""Costs of the Python binding, each against a peer measured in the same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/overhead.py

- step: `with run.step(...)` (process + system probes, sampler on) vs an empty
  `with contextlib.nullcontext()`, and with the torch allocator source (a Python callback).
- mark_iteration vs a bound Python method call (list.append).
- a GIL-bound Python loop while the sampler reads the allocator through Python every 1 ms,
  vs the same loop without a monitor.
- analyze_tensor (stats, no hash) on a float32 array vs NumPy computing the same figures
  (nan/inf counts, finite min/max/mean/std) and vs one memory copy of the array (np.copyto).
"""

import contextlib
import os
import sys
import time

import numpy as np

import genscope

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_allocator import FakeCuda  # noqa: E402


def per_call_ns(fn, repeat):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        fn(repeat)
        best = min(best, (time.perf_counter_ns() - t0) / repeat)
    return best


def steps(run, n):
    for _ in range(n):
        with run.step("custom", "x"):
            pass


def null_contexts(n):
    for _ in range(n):
        with contextlib.nullcontext():
            pass


def numpy_stats(a):
    nan = np.isnan(a).sum()
    inf = np.isinf(a).sum()
    finite = a[np.isfinite(a)] if nan or inf else a
    return nan, inf, finite.min(), finite.max(), finite.mean(dtype=np.float64), finite.std(dtype=np.float64)


def main():
    rows = []
    monitor = genscope.Monitor(nvml=False)
    run = monitor.start_run()
    step_ns = per_call_ns(lambda n: steps(run, n), 2000)
    null_ns = per_call_ns(null_contexts, 2000)
    rows.append(("step open+close (process, system)", step_ns, "nullcontext", null_ns))
    with run.step("sampling", "loop") as step:
        mark_ns = per_call_ns(lambda n: [step.mark_iteration() for _ in range(n)], 20000)
        lst = []
        append_ns = per_call_ns(lambda n: [lst.append(1) for _ in range(n)], 20000)
    rows.append(("mark_iteration", mark_ns, "list.append", append_ns))
    run.finish()

    monitor = genscope.Monitor(nvml=False)
    monitor.add_torch_cuda_allocator(cuda=FakeCuda())
    run = monitor.start_run()
    alloc_ns = per_call_ns(lambda n: steps(run, n), 2000)
    rows.append(("step open+close (+ torch allocator)", alloc_ns, "nullcontext", null_ns))
    run.finish()

    # A GIL-bound pipeline while the sampler takes the GIL for the allocator every 1 ms.
    def python_work(n):
        for _ in range(n):
            sum(range(20000))

    bare_ns = per_call_ns(python_work, 200)
    monitor = genscope.Monitor(nvml=False, sample_interval_ms=1)
    monitor.add_torch_cuda_allocator(cuda=FakeCuda())
    run = monitor.start_run()
    with run.step("sampling", "busy"):
        sampled_ns = per_call_ns(python_work, 200)
    samples = run.finish()["series"]["samples_taken"]
    rows.append((f"Python loop, allocator sampled 1 ms ({samples} samples)", sampled_ns,
                 "same loop, no monitor", bare_ns))

    a = np.random.default_rng(0).standard_normal(16 << 20, dtype=np.float32)  # 64 MiB
    dst = np.empty_like(a)
    run = genscope.Monitor(nvml=False, sampler=False).start_run()
    with run.step("custom", "analyse") as step:
        ana_ns = per_call_ns(lambda n: [step.analyze_tensor("a", a, hash=False) for _ in range(n)], 3)
    run.finish()
    np_ns = per_call_ns(lambda n: [numpy_stats(a) for _ in range(n)], 3)
    copy_ns = per_call_ns(lambda n: [np.copyto(dst, a) for _ in range(n)], 3)
    gbs = lambda ns: a.nbytes / ns  # bytes per ns == GB/s
    print(f"{'measure':50} {'genscope':>12} {'peer':>28} {'ratio':>7}")
    for name, ours, peer_name, peer in rows:
        print(f"{name:50} {ours:10.0f} ns {peer_name + ' ' + format(peer, '.0f') + ' ns':>28} "
              f"{ours / peer:6.1f}x")
    print(f"{'analyze_tensor 64 MiB f32 (no hash)':50} {gbs(ana_ns):8.2f} GB/s "
          f"{'numpy stats ' + format(gbs(np_ns), '.2f') + ' GB/s':>28} {np_ns / ana_ns:6.1f}x")
    print(f"{'':50} {'':12} {'np.copyto ' + format(gbs(copy_ns), '.2f') + ' GB/s':>28} "
          f"{gbs(ana_ns) / gbs(copy_ns):6.2f} of copy")


if __name__ == "__main__":
    main()
