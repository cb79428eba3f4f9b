#!/usr/bin/python3
"""Cost of genscope.torch.instrument, each figure against a peer measured in the same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/instrument.py [--rounds 12]

1. A whole generation of the test pipeline (python/tests/tiny_pipeline.py: two text encoders,
   UNet with cross-attention, DDIM, VAE; 256x256, 20 steps, classifier-free guidance, CPU),
   plain vs instrumented (a run started, the pipeline instrumented with one call, the run
   finished: 6 steps, 20 iterations, 7 tensor analyses, sampler at 10 ms). Each round runs
   plain A, instrumented B and plain A' in a rotating order; the overhead is the median over
   rounds of B / mean(A, A') - 1, and the A/A spread (A' / A - 1) shows the noise floor. Both
   wall time and process CPU time (all threads: the sampler's work counts) are reported; the
   CPU figure is less disturbed by other processes on a shared machine.
2. Per-call cost of each hook, as the difference between a hooked and the same unhooked call,
   next to the cost of a bare Python function call.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

import genscope
import genscope.torch as gt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from tiny_pipeline import TinyPipeline  # noqa: E402


def generation_overhead(rounds, steps, size):
    pipe = TinyPipeline(dual=True, channels=64)
    monitor = genscope.Monitor()

    def plain():
        return pipe("a red fox in the snow", "blurry", num_inference_steps=steps,
                    height=size, width=size)

    def instrumented():
        run = monitor.start_run(pipeline="t2i")
        with gt.instrument(pipe, run):
            out = plain()
        run.finish()
        return out

    def timed(fn):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - w0, time.process_time() - c0

    plain(), instrumented()  # warm-up (allocator, first-call costs)
    results = {"wall": ([], [], []), "cpu": ([], [], [])}
    order = [("A", plain), ("B", instrumented), ("A2", plain)]
    for r in range(rounds):
        rotated = order[r % 3:] + order[: r % 3]
        t = {name: timed(fn) for name, fn in rotated}
        for i, clock in enumerate(("wall", "cpu")):
            a, b, a2 = t["A"][i], t["B"][i], t["A2"][i]
            ratios, noise, base = results[clock]
            ratios.append(b / ((a + a2) / 2) - 1)
            noise.append(a2 / a - 1)
            base.append((a + a2) / 2)
    return results


def per_call_ns(fn, n, repeat=7):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


class Identity(nn.Module):
    def forward(self, x, t=None):
        return x


class Scheduler:
    def step(self, model_output, timestep, sample):
        return (sample,)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = torch.randn(1, 77, 768)

    def forward(self, ids):
        return (self.out,)


def hook_costs():
    x = torch.zeros(1, 4, 8, 8)
    t = torch.tensor([999])

    def bare(v):
        return v

    def loop_bare(n):
        for _ in range(n):
            bare(x)

    unet, sched, enc = Identity(), Scheduler(), Encoder()
    ids = torch.zeros(1, 77, dtype=torch.long)

    def loop_unet(n):
        for _ in range(n):
            unet(x, t)

    def loop_sched(n):
        for _ in range(n):
            sched.step(x, t, x)

    def loop_enc(n):
        for _ in range(n):
            enc(ids)

    rows = []
    bare_ns = per_call_ns(loop_bare, 20000)
    monitor = genscope.Monitor(nvml=False)
    for name, loop, n, mapping in (
            ("denoiser forward hooks (pre + post)", loop_unet, 20000,
             {"unet": unet, "scheduler": sched}),
            ("scheduler.step wrapper (iteration mark)", loop_sched, 20000,
             {"unet": unet, "scheduler": sched}),
            ("text encoder hooks: step, no analysis", loop_enc, 2000, {"text_encoder": enc}),
            ("text encoder hooks: step + (1,77,768) analysis", loop_enc, 2000,
             {"text_encoder": enc})):
        plain_ns = per_call_ns(loop, n)
        run = monitor.start_run()
        analyze = "analysis" in name and "no analysis" not in name
        with gt.instrument(mapping, run, analyze=analyze):
            unet(x, t)  # opens the sampling step
            hooked_ns = per_call_ns(loop, n)
        run.finish()
        rows.append((name, hooked_ns - plain_ns, plain_ns))
    return bare_ns, rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}, torch threads {torch.get_num_threads()}")
    results = generation_overhead(args.rounds, args.steps, args.size)
    q = statistics.quantiles
    for clock, (ratios, noise, base) in results.items():
        print(f"generation {args.size}x{args.size}, {args.steps} steps, CFG, {clock} time: plain "
              f"median {statistics.median(base) * 1e3:.0f} ms over {args.rounds} rounds")
        print(f"  instrumented / plain - 1: median {statistics.median(ratios) * 100:+.2f} % "
              f"(quartiles {q(ratios, n=4)[0] * 100:+.2f} .. {q(ratios, n=4)[2] * 100:+.2f} %)")
        print(f"  plain / plain - 1 (noise): median {statistics.median(noise) * 100:+.2f} % "
              f"(quartiles {q(noise, n=4)[0] * 100:+.2f} .. {q(noise, n=4)[2] * 100:+.2f} %)")
    bare_ns, rows = hook_costs()
    print(f"bare Python function call: {bare_ns / 1e3:.3f} us")
    for name, extra_ns, plain_ns in rows:
        print(f"  {name:48} +{extra_ns / 1e3:7.2f} us per call (unhooked call {plain_ns / 1e3:.2f} us,"
              f" {extra_ns / bare_ns:.0f}x a bare call)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
