#!/usr/bin/python3
"""Cost of genscope.torch.instrument, each figure against a peer measured in the same run.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/instrument.py [--rounds 12]
        [--sample-interval-ms 10]

1. A whole generation of the test pipeline (python/tests/tiny_pipeline.py: two text encoders,
   UNet with cross-attention, DDIM, VAE; 512x512 (SD1.x's 64x64 latents), 20 steps,
   classifier-free guidance, CPU),
   plain vs instrumented (a run started, the pipeline instrumented with one call, the run
   finished: 6 steps, 20 iterations, 7 tensor analyses, sampler at 10 ms). Each round runs
   plain A, instrumented B and plain A' in a rotating order; the overhead is the median over
   rounds of B / mean(A, A') - 1, and the A/A spread (A' / A - 1) shows the noise floor. Both
   wall time and process CPU time (all threads: the sampler's work counts) are reported; the
   CPU figure is less disturbed by other processes on a shared machine.
   Bottom-up, in the same rounds: the CPU time genscope itself spends on the pipeline's thread
   (run start and finish, instrument enter/exit, and every wrapper's work minus the wrapped
   original) plus the CPU of the threads genscope starts (the sampler, the analysis pool),
   divided by the plain generation's CPU time: the same ratio without the noise of two whole
   generations (python/bench/genscope_cpu.py, shared with bench/peers_overhead.py).
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
from genscope_cpu import ThreadCpu, instrumented as instrumented_run  # noqa: E402


def generation_overhead(rounds, steps, size, sample_interval_ms):
    """Top-down (interleaved A/B/A') and bottom-up (genscope's own CPU) overhead."""
    pipe = TinyPipeline(dual=True, channels=64)
    monitor = genscope.Monitor(sample_interval_ms=sample_interval_ms)

    def plain():
        return pipe("a red fox in the snow", "blurry", num_inference_steps=steps,
                    height=size, width=size)

    def instrumented():
        return instrumented_run(monitor, pipe, plain, pipeline="t2i")[1]  # genscope, this thread

    def timed(fn):
        w0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        threads.begin()
        own_ns = fn()
        added = threads.end() / 1e9
        w, c, m = time.perf_counter() - w0, time.process_time() - c0, time.thread_time() - m0
        # wall, process CPU, main-thread CPU, genscope on this thread, threads started since
        # the warm-up of the plain generation (the sampler's)
        return w, c, m, own_ns, added

    plain()  # warm-up (allocator, first-call costs, torch's threads)
    threads = ThreadCpu()
    instrumented()
    results = {"wall": ([], [], [], []), "cpu": ([], [], [], [])}
    bottom_up, main_plain = [], []
    order = [("A", plain), ("B", instrumented), ("A2", plain)]
    for r in range(rounds):
        rotated = order[r % 3:] + order[: r % 3]
        t = {name: timed(fn) for name, fn in rotated}
        for i, clock in enumerate(("wall", "cpu")):
            a, b, a2 = t["A"][i], t["B"][i], t["A2"][i]
            ratios, noise, base, instr = results[clock]
            ratios.append(b / ((a + a2) / 2) - 1)
            noise.append(a2 / a - 1)
            base.append((a + a2) / 2)
            instr.append(b)
        plain_main = (t["A"][2] + t["A2"][2]) / 2
        other_threads = t["B"][4]  # the sampler thread, and any other genscope starts
        bottom_up.append((t["B"][3] / 1e9, other_threads, plain_main, t["B"][0]))
        main_plain.append(plain_main)
    return results, bottom_up


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
            ("denoiser forward wrapper", loop_unet, 20000,
             {"unet": unet, "scheduler": sched}),
            ("scheduler.step wrapper (iteration mark)", loop_sched, 20000,
             {"unet": unet, "scheduler": sched}),
            ("text encoder wrapper: step, no analysis", loop_enc, 2000, {"text_encoder": enc}),
            ("text encoder wrapper: step + (1,77,768) analysis", loop_enc, 2000,
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
    parser.add_argument("--size", type=int, default=512)  # SD1.x: 64x64 latents
    parser.add_argument("--sample-interval-ms", type=float, default=10.0)  # Monitor's default
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}, torch threads {torch.get_num_threads()}, "
          f"sampler every {args.sample_interval_ms:g} ms")
    results, bottom_up = generation_overhead(args.rounds, args.steps, args.size,
                                             args.sample_interval_ms)
    q = statistics.quantiles
    for clock, (ratios, noise, base, instr) in results.items():
        print(f"generation {args.size}x{args.size}, {args.steps} steps, CFG, {clock} time: plain "
              f"median {statistics.median(base) * 1e3:.0f} ms, instrumented "
              f"{statistics.median(instr) * 1e3:.0f} ms over {args.rounds} rounds")
        print(f"  instrumented / plain - 1: median {statistics.median(ratios) * 100:+.2f} % "
              f"(quartiles {q(ratios, n=4)[0] * 100:+.2f} .. {q(ratios, n=4)[2] * 100:+.2f} %)")
        print(f"  plain / plain - 1 (noise): median {statistics.median(noise) * 100:+.2f} % "
              f"(quartiles {q(noise, n=4)[0] * 100:+.2f} .. {q(noise, n=4)[2] * 100:+.2f} %)")
    own = [b[0] for b in bottom_up]
    others = [b[1] for b in bottom_up]
    share = [(b[0] + max(b[1], 0.0)) / b[2] for b in bottom_up]
    print(f"bottom-up, CPU: genscope on the pipeline thread (run start/finish, hooks, analyses) "
          f"median {statistics.median(own) * 1e3:.2f} ms per generation; other threads "
          f"(sampler) {statistics.median(others) * 1e3:+.2f} ms; plain generation "
          f"{statistics.median([b[2] for b in bottom_up]) * 1e3:.0f} ms on the pipeline thread")
    print(f"  genscope / plain generation: median {statistics.median(share) * 100:.2f} % "
          f"(quartiles {q(share, n=4)[0] * 100:.2f} .. {q(share, n=4)[2] * 100:.2f} %)")
    main_share = [b[0] / b[2] for b in bottom_up]
    other_share = [max(b[1], 0.0) / b[2] for b in bottom_up]
    per_sample = [b[1] / (b[3] * 1e3 / args.sample_interval_ms) for b in bottom_up]
    print(f"  of which the pipeline thread {statistics.median(main_share) * 100:.2f} %, other "
          f"threads (sampler) {statistics.median(other_share) * 100:.2f} %, i.e. "
          f"{statistics.median(per_sample) * 1e6:.1f} us per sampler tick (wall / interval)")
    bare_ns, rows = hook_costs()
    print(f"bare Python function call: {bare_ns / 1e3:.3f} us")
    for name, extra_ns, plain_ns in rows:
        print(f"  {name:48} +{extra_ns / 1e3:7.2f} us per call (unhooked call {plain_ns / 1e3:.2f} us,"
              f" {extra_ns / bare_ns:.0f}x a bare call)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
