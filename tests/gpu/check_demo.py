"""`genscope demo --device cuda` (the LibTorch integration built against the machine's
PyTorch): the same steps as on the CPU, GPU figures present, the same output twice.

Runs the small t2i demo with 4 steps once on the CPU and twice on CUDA, same seed. The CUDA
runs must exit 0, have the CPU run's steps (kind, name, status, in order), carry the CUDA
allocator figures with exact peaks and the NVML figures in every step, and produce the same
image bytes (the save step's XXH3) both times. Whether the per-step allocator peaks repeat
across the two runs is reported as a measurement.
"""

import json
import os
import subprocess

import verdicts as v
from context import CheckFailed, CheckSkipped
from run_doc import metric, steps_of_kind

ARGS = ["--preset", "small", "--steps", "4", "--seed", "7", "--plain"]


def _run(ctx, device, name):
    out = ctx.scratch(f"demo-{name}")
    done = subprocess.run([ctx.torch_cli, "demo", "--device", device, "--out", out, *ARGS],
                          capture_output=True, text=True, timeout=300)
    doc = None
    if os.path.exists(os.path.join(out, "run.json")):
        with open(os.path.join(out, "run.json")) as f:
            doc = json.load(f)
    return done, doc


def _outputs_hash(doc):
    for step in steps_of_kind(doc, "save"):
        for a in step.get("attachments", []):
            if a.get("type") == "outputs":
                return a.get("data", {}).get("xxh3_64")
    return None


def demo_on_cuda(ctx):
    if not ctx.torch_cli:
        status = ctx.torch_status or "not built"
        if status.startswith("build failed"):
            raise CheckFailed(f"LibTorch integration: {status}")
        raise CheckSkipped(f"LibTorch integration: {status}")
    ctx.need_cuda()
    cpu, cpu_doc = _run(ctx, "cpu", "cpu")
    first, doc1 = _run(ctx, "cuda", "cuda-1")
    second, doc2 = _run(ctx, "cuda", "cuda-2")
    rows = []
    for label, done in (("cpu", cpu), ("cuda run 1", first), ("cuda run 2", second)):
        rows.append(v.equal("demo", f"{label} exit status", done.returncode, 0,
                            note=(done.stderr.strip().splitlines() or [""])[-1][:120]))
    if not (cpu_doc and doc1 and doc2):
        raise CheckFailed("a demo run wrote no run.json")

    def shape(doc):
        return [(s["kind"], s["name"], s["status"]) for s in doc["steps"]]

    rows.append(v.holds("demo", "steps as on the CPU", shape(doc1) == shape(cpu_doc),
                        f"{len(shape(doc1))} steps", f"{len(shape(cpu_doc))} steps (cpu)",
                        "kind, name, status, in order"))
    gpu = f"gpu{doc1['gpus'][0]['index']}" if doc1.get("gpus") else None
    lacking = []
    for step in doc1["steps"]:
        for name in ("alloc.cuda:0.allocated_bytes", "alloc.cuda:0.reserved_bytes") + (
                (f"{gpu}.used_bytes",) if gpu else ()):
            m = metric(step, name)
            if m is None or m.get("peak") is None or (
                    name.startswith("alloc.") and m.get("peak_source") != "exact"):
                lacking.append(f"{step['name']}: {name}")
    rows.append(v.holds("demo", "GPU figures in every step", gpu is not None and not lacking,
                        f"{len(lacking)} missing" if gpu else "no GPU in the run",
                        "alloc.cuda:0 (exact peaks) and NVML", "all present",
                        note="; ".join(lacking[:3])))
    rows.append(v.equal("demo", "image XXH3, run 1 vs run 2", _outputs_hash(doc1),
                        _outputs_hash(doc2), note="same seed, same GPU"))
    peaks = [[(metric(s, "alloc.cuda:0.allocated_bytes") or {}).get("peak") for s in d["steps"]]
             for d in (doc1, doc2)]
    differing = sum(1 for a, b in zip(*peaks) if a != b)
    rows.append(v.info("demo", "allocator peaks repeating across runs",
                       f"{len(peaks[0]) - differing} of {len(peaks[0])} steps equal"))
    return rows
