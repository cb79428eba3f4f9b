"""The sampler's NVML series on a real GPU, and what one GPU sample costs.

Plateau: a step allocates and writes 2 GiB, holds it 1.5 s, frees it (empty_cache) and waits
0.3 s, under a Monitor sampling every 10 ms. The series gpu<i>.used_bytes must show a run of
samples at least baseline + 2 GiB lasting at least 1.2 s (the hold minus the sampler's
start-up and two intervals of slack), holding about one sample per 10 ms, at the level
nvidia-smi reports during the hold, and falling back after the release.

Cost: bench/probes_bench's BM_NvmlSample (genscope's sample(): every figure of every GPU)
next to BM_NvmlBareCalls (the same NVML calls made directly), on whatever NVML library the
bench loads; the rows are measurements (INFO), their ratio is genscope's overhead.
"""

import json
import statistics
import subprocess
import time

import verdicts as v
from context import MIB, CheckFailed, CheckSkipped
from run_doc import need_metric, series_column, step_named

HOLD_S = 1.5
INTERVAL_MS = 10
ALLOC_BYTES = 2048 * MIB


def sampler_plateau(ctx):
    device = ctx.need_cuda()
    torch, genscope = ctx.torch, ctx.need_genscope()
    index, matched = ctx.nvml_index(device)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    monitor = genscope.Monitor(sample_interval_ms=INTERVAL_MS, max_sample_interval_ms=INTERVAL_MS)
    run = monitor.start_run(pipeline="gpu-check", model="plateau")
    mid = None
    with run.step("custom", "plateau"):
        x = torch.empty(ALLOC_BYTES, dtype=torch.uint8, device=f"cuda:{device}")
        x.fill_(3)
        torch.cuda.synchronize(device)
        held_from = time.monotonic()
        time.sleep(HOLD_S / 3)
        mid, _ = ctx.smi_gpus(["uuid", "memory.used"])
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - held_from)))
        del x
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        time.sleep(0.3)
    doc = run.finish()
    smi = [r["memory.used"].value for r in mid if r["uuid"].value == _uuid(ctx, index)]
    return plateau_rows(doc, "plateau", index, ALLOC_BYTES, HOLD_S, INTERVAL_MS, smi[:1] or [None],
                        f"nvidia-smi read a third into the hold; NVML {index} by {matched}")


def plateau_rows(doc, step_name, index, alloc_bytes, hold_s, interval_ms, smi_mib, note):
    """The plateau rows of a finished run: `alloc_bytes` held `hold_s` inside step
    `step_name`, sampled every `interval_ms`; `smi_mib`: nvidia-smi's memory.used during it."""
    step = step_named(doc, step_name)
    used = need_metric(step, f"gpu{index}.used_bytes")
    baseline = used.get("before")
    offsets, values = series_column(doc, f"gpu{index}.used_bytes")
    start = step["start_offset_ns"]
    end = start + step["duration_ns"]
    inside = [(t, x) for t, x in zip(offsets, values) if start <= t <= end and x is not None]
    if baseline is None or not inside:
        raise CheckFailed(f"no NVML samples inside the step (baseline {baseline}, "
                          f"{len(inside)} samples, errors {doc.get('monitoring_errors', [])[:2]})")
    threshold = baseline + alloc_bytes
    best, current = [], []
    for t, x in inside:
        if x >= threshold:
            current.append((t, x))
            if len(current) > len(best):
                best = list(current)
        else:
            current = []
    check = f"sampler gpu{index}"
    rows = []
    length_s = (best[-1][0] - best[0][0]) / 1e9 if len(best) > 1 else 0.0
    rows.append(v.at_least(check, "plateau length", round(length_s, 3), round(hold_s - 0.3, 3),
                           "s", note=f"{len(best)} samples >= baseline + "
                                     f"{alloc_bytes / MIB:.0f} MiB; held {hold_s} s"))
    rows.append(v.at_least(check, "samples on the plateau", len(best),
                           int(0.5 * (hold_s - 0.3) * 1000 / interval_ms),
                           note=f"one per {interval_ms} ms expected, half required"))
    level = statistics.median(x for _, x in best) if best else None
    rows.append(v.mib(check, "plateau level (median)", level, smi_mib, note=note))
    after_plateau = [x for t, x in inside if best and t > best[-1][0]]
    rows.append(v.holds(check, "release seen", bool(after_plateau) and
                        min(after_plateau) < threshold,
                        f"min after {min(after_plateau) / MIB:.0f} MiB" if after_plateau
                        else "no sample after", f"< {threshold / MIB:.0f} MiB",
                        "a sample below the plateau"))
    return rows


def _uuid(ctx, index):
    for g in ctx.probe().get("probes", {}).get("nvml", {}).get("gpus", []):
        if g.get("index") == index:
            return g.get("uuid")
    return None


def sample_cost(ctx):
    if not ctx.bench:
        raise CheckSkipped("probes_bench not built (Google Benchmark missing)")
    done = subprocess.run([ctx.bench, "--benchmark_filter=Nvml", "--benchmark_format=json",
                           "--benchmark_min_time=0.5"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise CheckFailed(f"probes_bench exit {done.returncode}: {done.stderr.strip()[:300]}")
    results = {b["name"]: b for b in json.loads(done.stdout).get("benchmarks", [])}
    needed = ["BM_NvmlSample", "BM_NvmlBareCalls"]
    for name in needed:
        b = results.get(name)
        if b is None:
            raise CheckFailed(f"probes_bench gave no {name} (has {sorted(results)})")
        if b.get("error_occurred"):
            raise CheckFailed(f"{name}: {b.get('error_message')}")
    sample, bare = results["BM_NvmlSample"], results["BM_NvmlBareCalls"]

    def us(b, key):
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
        return b[key] * scale

    label = "fake NVML (plumbing)" if ctx.plumbing else "real driver"
    gpus = int(sample.get("gpus", 0)) or "?"
    rows = []
    for key, what in (("real_time", "wall"), ("cpu_time", "CPU")):
        ratio = us(sample, key) / us(bare, key) if us(bare, key) > 0 else float("nan")
        rows.append(v.info("sampler cost", f"nvml sample() {what} per sample",
                           f"{us(sample, key):.2f} us",
                           f"bare NVML calls {us(bare, key):.2f} us",
                           f"x{ratio:.2f} of the bare calls; {gpus} GPU(s); {label}"))
    return rows
