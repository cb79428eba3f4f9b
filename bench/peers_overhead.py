#!/usr/bin/env python3
"""genscope's cost on today's diffusers next to two peers, on the same generations in one run
(issue 26 item 9).

    tests/peers/modern_diffusers.sh --script bench/peers_overhead.py [--rounds N] [--only NAME]

(the modern peer venv: torch 2.x, diffusers 0.4x, memray; tests/peers/requirements-modern.txt).
Pipelines: the tiny real FluxPipeline (Flux.1-dev) and WanPipeline (Wan 2.1) of
tests/peers/modern_pipelines.py (real widths where genscope reads them, one layer, a few
channels, random weights), made long enough to measure: Flux 768x768 (48x48 latents, 2,304
packed tokens), 28 steps, guidance 3.5; Wan 2.1 128x128, 49 frames (13x16x16 latents), 30
steps, classifier-free guidance (two transformer calls a step). CPU, torch on one thread
(--threads).

Variants, each around the whole generation (text encoders, denoising loop, VAE decode):
  plain       the pipeline alone (twice a round: A and A')
  genscope    Monitor() with its defaults (sampler at 10 ms, adaptive) + start_run +
              instrument(pipe, run) + the generation + run.finish()
  profiler    torch.profiler.profile(activities=[CPU], profile_memory=True, record_shapes=True);
              its __exit__ (collecting the events) is inside the timing, export_chrome_trace
              outside it, timed on its own
  memray      memray.Tracker(file) with its defaults (native_traces=False,
              trace_python_allocators=False): every malloc/free with its Python stack, written
              to the file as it goes
Each round runs the five in a rotating order. Top-down: the overhead of each variant is the
median over rounds of variant / mean(A, A') - 1, on wall time and on process CPU time (every
thread); the A/A spread (A' / A - 1) is the noise floor. Bottom-up (genscope only, as
python/bench/instrument.py, shared code in python/bench/genscope_cpu.py): genscope's CPU on
the pipeline thread (run start/finish, instrument enter/exit, every wrapper's work minus the
wrapped call) plus the CPU of the threads it starts (sampler, writer, analysis pool), divided
by the plain generation's process CPU. Every genscope output is checked bit-identical to the
plain one. Prints a Markdown table and the load average (2 shared cores: read ratios).
"""
import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

import torch

import genscope

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_here, "..", "python", "bench"))
sys.path.insert(0, os.path.join(_here, "..", "tests", "peers"))
from genscope_cpu import ThreadCpu, instrumented  # noqa: E402
import modern_pipelines  # noqa: E402

CASES = {
    "flux-dev": ("Flux.1-dev 768x768, 28 steps", modern_pipelines.flux, 28,
                 dict(prompt="a photo of a cat", height=768, width=768, guidance_scale=3.5)),
    "wan2.1": ("Wan 2.1 128x128x49 frames, 30 steps, CFG", modern_pipelines.wan, 30,
               dict(prompt="a cat walking", negative_prompt="blurry", height=128, width=128,
                    num_frames=49, guidance_scale=5.0)),
}
VARIANTS = ("A", "genscope", "profiler", "memray", "A2")


def pct(x):
    return f"{x * 100:+.2f} %"


def spread(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return f"{pct(statistics.median(xs))} ({pct(q[0])} .. {pct(q[2])})"


def measure(name, rounds, tmp, verbose):
    title, build, steps, call = CASES[name]
    pipe = build()

    def generate():
        out = pipe(**call, num_inference_steps=steps,
                   generator=torch.Generator().manual_seed(42), output_type="pt")
        frames = getattr(out, "frames", None)
        return frames if frames is not None else out.images

    extra = {}

    # Each variant returns (output, genscope's CPU on this thread in ns, what to do after the
    # round's clocks stop or None).
    def plain():
        return generate(), 0, None

    def with_genscope():
        return (*instrumented(monitor, pipe, generate, pipeline="diffusers", model=name), None)

    def with_profiler():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                     record_shapes=True) as prof:
            out = generate()

        def export():
            path = os.path.join(tmp, "trace.json")
            t0, c0 = time.perf_counter(), time.process_time()
            prof.export_chrome_trace(path)
            extra.setdefault("profiler export_chrome_trace, wall s", []).append(
                time.perf_counter() - t0)
            extra.setdefault("profiler export_chrome_trace, CPU s", []).append(
                time.process_time() - c0)
            extra.setdefault("profiler trace, MB", []).append(os.path.getsize(path) / 1e6)
            os.remove(path)
        return out, 0, export

    def with_memray():
        import memray
        path = os.path.join(tmp, "memray.bin")
        with memray.Tracker(path):
            out = generate()

        def remove():
            extra.setdefault("memray capture file, MB", []).append(os.path.getsize(path) / 1e6)
            os.remove(path)
        return out, 0, remove

    fns = {"A": plain, "genscope": with_genscope, "profiler": with_profiler,
           "memray": with_memray, "A2": plain}

    def timed(fn):
        w0, c0 = time.perf_counter(), time.process_time()
        threads.begin()
        out, own_ns, after = fn()
        added = threads.end() / 1e9
        w, c = time.perf_counter() - w0, time.process_time() - c0
        figures = dict(wall=w, cpu=c, own=own_ns / 1e9, added=added)
        if after is not None:
            after()
        return figures, out

    reference = plain()[0]  # warm-up: allocator, first calls, torch's threads
    gc.collect()  # the previous case's monitor and its threads
    threads = ThreadCpu()  # threads started from now on are genscope's (or a peer's)
    monitor = genscope.Monitor()
    for v in ("genscope", "profiler", "memray"):  # warm-up of each
        timed(fns[v])
    extra.clear()
    t = {v: [] for v in VARIANTS}
    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    for r in range(rounds):
        order = VARIANTS[r % 5:] + VARIANTS[:r % 5]
        for v in order:
            figures, out = timed(fns[v])
            if v == "genscope":
                assert torch.equal(out, reference), f"{name}: genscope changed the output"
            t[v].append(figures)
        if verbose:
            print(f"round {r}: " + ", ".join(
                f"{v} {t[v][-1]['wall'] * 1e3:.0f}/{t[v][-1]['cpu'] * 1e3:.0f}" for v in order)
                + " ms (wall/CPU)", flush=True)
        load.append(os.getloadavg()[0])
    elapsed = time.perf_counter() - start
    return title, t, extra, load, elapsed


def report(name, title, t, extra, load, elapsed, rounds):
    rows = []
    base = {c: [(a[c] + b[c]) / 2 for a, b in zip(t["A"], t["A2"])] for c in ("wall", "cpu")}
    noise = {c: [b[c] / a[c] - 1 for a, b in zip(t["A"], t["A2"])] for c in ("wall", "cpu")}
    ratios = {v: {c: [x[c] / m - 1 for x, m in zip(t[v], base[c])] for c in ("wall", "cpu")}
              for v in ("genscope", "profiler", "memray")}
    print(f"\n### {title}: {rounds} rounds in {elapsed:.0f} s, load average (1 min) "
          f"{min(load):.2f}-{max(load):.2f}")
    print(f"plain generation: wall {statistics.median(base['wall']) * 1e3:.0f} ms, process CPU "
          f"{statistics.median(base['cpu']) * 1e3:.0f} ms (medians)\n")
    print("| variant | wall, median | wall overhead vs plain, median (quartiles) | "
          "CPU overhead vs plain, median (quartiles) |")
    print("|---|---|---|---|")
    print(f"| plain A′ vs A (noise floor) | {statistics.median(base['wall']) * 1e3:.0f} ms | "
          f"{spread(noise['wall'])} | {spread(noise['cpu'])} |")
    for v in ("genscope", "profiler", "memray"):
        wall = statistics.median(x["wall"] for x in t[v])
        print(f"| {v} | {wall * 1e3:.0f} ms | {spread(ratios[v]['wall'])} | "
              f"{spread(ratios[v]['cpu'])} |")
        rows.append((v, statistics.median(ratios[v]["cpu"]), statistics.median(ratios[v]["wall"])))
    own = [x["own"] for x in t["genscope"]]
    added = [x["added"] for x in t["genscope"]]
    residual = [x["added"] for x in t["A"] + t["A2"]]
    share = [(o + a) / m for o, a, m in zip(own, added, base["cpu"])]
    share_main = [o / m for o, m in zip(own, base["cpu"])]
    q = statistics.quantiles(share, n=4) if len(share) > 1 else [share[0]] * 3
    share_text = (f"{statistics.median(share) * 100:.2f} % (quartiles {q[0] * 100:.2f} .. "
                  f"{q[2] * 100:.2f} %)")
    print(f"\nbottom-up, genscope's own CPU per generation: pipeline thread "
          f"{statistics.median(own) * 1e3:.2f} ms + threads it starts "
          f"{statistics.median(added) * 1e3:.2f} ms = {share_text} of the "
          f"plain generation's process CPU (pipeline thread alone "
          f"{statistics.median(share_main) * 100:.2f} %); the same thread count in plain rounds "
          f"(should be ~0): {statistics.median(residual) * 1e3:.2f} ms")
    for k, xs in extra.items():
        print(f"{k}: median {statistics.median(xs):.2f}")
    wins = {v: sum(g["cpu"] < p["cpu"] for g, p in zip(t["genscope"], t[v]))
            for v in ("profiler", "memray")}
    print(f"rounds where genscope's process CPU < the peer's: profiler "
          f"{wins['profiler']}/{rounds}, memray {wins['memray']}/{rounds}")
    return statistics.median(share), rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--only", choices=sorted(CASES), action="append")
    # One: on 2 shared cores torch's second OpenMP thread spin-waits whenever another process
    # holds a core, and a generation then takes 2-15x its time (CPU too).
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--verbose", action="store_true", help="each round's figures")
    args = ap.parse_args()
    import diffusers
    import memray
    print(f"torch {torch.__version__} ({args.threads} thread(s)), diffusers "
          f"{diffusers.__version__}, memray {memray.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()}")
    torch.set_num_threads(args.threads)
    summary = []
    with tempfile.TemporaryDirectory(prefix="genscope-peers-overhead-") as tmp:
        for name in args.only or list(CASES):
            measured = measure(name, args.rounds, tmp, args.verbose)
            share, rows = report(name, *measured, args.rounds)
            summary.append((name, share, rows))
    print("\nsummary (medians): genscope bottom-up share / CPU overhead of genscope, "
          "profiler, memray")
    for name, share, rows in summary:
        cpu = ", ".join(f"{v} {pct(c)}" for v, c, _ in rows)
        print(f"  {name}: {share * 100:.2f} % ({'≤' if share <= 0.01 else '>'} 1 %); {cpu}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
