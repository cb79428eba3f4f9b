#!/usr/bin/python3
"""NumPy peer for bench/tensor_bench: the same statistics and diff on the same sizes.

Stats = min, max, mean, std, isnan().sum(), isinf().sum() (what genscope's one pass gives);
diff = max|a-b|, mean|a-b|, sqrt(mean (a-b)^2), count of ~isclose(a, b).
Times are process CPU time (as tensor_bench reports); NumPy runs these on one thread.
bf16 has no NumPy dtype: it is widened from uint16 bits (x << 16).view(float32) first,
which is what a NumPy user has to do.

  GENSCOPE_BENCH_BYTES=268435456 /usr/bin/python3 bench/tensor_numpy_peer.py
"""
import os
import time

import numpy as np


def best_of(fn, reps=3, budget_s=5.0):
    """Best time of up to `reps` runs; stops early once `budget_s` is spent (slow f16)."""
    best, spent = float("inf"), 0.0
    for _ in range(reps):
        t0 = time.process_time()  # CPU time, as tensor_bench reports (shared machine)
        with np.errstate(all="ignore"):  # NumPy's f16 std overflows in f16; that is the peer
            fn()
        t = time.process_time() - t0
        best, spent = min(best, t), spent + t
        if spent > budget_s:
            break
    return best


def stats(x):
    if x.dtype == np.uint16:  # bf16 bits
        x = (x.astype(np.uint32) << 16).view(np.float32)
    return (x.min(), x.max(), x.mean(), x.std(), np.isnan(x).sum(), np.isinf(x).sum())


def diff(a, b):
    if a.dtype == np.uint16:
        a = (a.astype(np.uint32) << 16).view(np.float32)
        b = (b.astype(np.uint32) << 16).view(np.float32)
    d = np.abs(a - b)
    return (d.max(), d.mean(), np.sqrt((d * d).mean()), (~np.isclose(a, b)).sum())


def main():
    nbytes = int(os.environ.get("GENSCOPE_BENCH_BYTES", 256 << 20))
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}, {nbytes / 2**20:.0f} MiB per operand")
    print(f"{'dtype':6} {'op':6} {'cpu_s':>9} {'GB/s':>8}")
    for name in ["f32", "f16", "bf16"]:
        esize = 4 if name == "f32" else 2
        n = nbytes // esize
        base = rng.standard_normal(n, dtype=np.float32)
        other = base + np.float32(1e-3)
        if name == "f32":
            a, b = base, other
        elif name == "f16":
            a, b = base.astype(np.float16), other.astype(np.float16)
        else:
            a = (base.view(np.uint32) >> 16).astype(np.uint16)
            b = (other.view(np.uint32) >> 16).astype(np.uint16)
        del base, other
        t = best_of(lambda: stats(a))
        print(f"{name:6} {'stats':6} {t:9.3f} {nbytes / t / 1e9:8.2f}")
        t = best_of(lambda: diff(a, b))
        print(f"{name:6} {'diff':6} {t:9.3f} {2 * nbytes / t / 1e9:8.2f}")


if __name__ == "__main__":
    main()
