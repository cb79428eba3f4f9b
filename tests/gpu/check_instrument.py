"""`genscope.torch.instrument()` on a real CUDA pipeline: GPU memory per step, exactly.

The pipeline is the Python tests' TinyPipeline (python/tests/tiny_pipeline.py: text encoders,
UNet, VAE, scheduler laid out as diffusers does) on CUDA at 256x256, 8 steps. It runs once
plain, then instrumented; the outputs must be bit-identical. The independent figures are
read by hooks of our own, added after genscope's: a forward hook on each text encoder (run
after genscope's hook has ended the text_encoding step, before anything else allocates) and
a wrapper around the instrumented vae.decode (read just before it: the sampling step is still
open; just after it: the vae_decode step has just ended). torch.cuda.max_memory_allocated /
max_memory_reserved there is each step's peak, since genscope resets torch's peak counters
when a step starts; they must equal the steps' alloc.cuda:<n> peaks. Every step must also
carry this process's NVML GPU memory.

Skipped, saying so, while genscope.torch.instrument is not built (branch "python").
"""

import os
import sys

import verdicts as v
from context import CheckFailed, CheckSkipped
from run_doc import metric, steps_of_kind


def instrument_on_cuda(ctx):
    ctx.need_genscope()
    try:
        import genscope.torch as gt
    except ImportError as e:
        raise CheckSkipped(f"genscope.torch not built (branch python): {e}")
    if not hasattr(gt, "instrument"):
        raise CheckSkipped("genscope.torch.instrument not built (branch python)")
    tests = os.path.join(ctx.source_dir, "python", "tests")
    if not os.path.exists(os.path.join(tests, "tiny_pipeline.py")):
        raise CheckSkipped("python/tests/tiny_pipeline.py absent (branch python)")
    device = ctx.need_cuda()
    torch, genscope = ctx.torch, ctx.need_genscope()
    index, matched = ctx.nvml_index(device)
    sys.path.insert(0, tests)
    from tiny_pipeline import TinyPipeline

    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    pipe = TinyPipeline(dual=True, device=f"cuda:{device}")
    call = dict(num_inference_steps=8, height=256, width=256, seed=1)
    plain = pipe("a lighthouse at dusk", **call)

    monitor = genscope.Monitor(sample_interval_ms=10, max_sample_interval_ms=10)
    monitor.add_torch_cuda_allocator(device=device)
    run = monitor.start_run(pipeline="gpu-check", model="tiny-pipeline")
    seen = {"text": [], "sampling": None, "decode": None}

    def peaks():
        return (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))

    with gt.instrument(pipe, run):
        handles = [m.register_forward_hook(lambda *_: seen["text"].append(peaks()))
                   for m in (pipe.text_encoder, pipe.text_encoder_2)]
        instrumented_decode = pipe.vae.decode

        def decode(*args, **kwargs):
            seen["sampling"] = peaks()
            out = instrumented_decode(*args, **kwargs)
            seen["decode"] = peaks()
            return out

        pipe.vae.decode = decode
        try:
            out = pipe("a lighthouse at dusk", **call)
        finally:
            pipe.vae.decode = instrumented_decode  # genscope restores its own wrapper
            for h in handles:
                h.remove()
    doc = run.finish()

    rows = [v.holds("instrument", "output unchanged", torch.equal(out, plain),
                    "identical" if torch.equal(out, plain) else "differs", "plain run",
                    "torch.equal")]
    text_steps = steps_of_kind(doc, "text_encoding")
    rows.append(v.equal("instrument", "text_encoding steps", len(text_steps), len(seen["text"])))
    compared = list(zip(text_steps, seen["text"]))
    for kind, reading in (("sampling", seen["sampling"]), ("vae_decode", seen["decode"])):
        steps = steps_of_kind(doc, kind)
        if len(steps) != 1 or reading is None:
            raise CheckFailed(f"expected one {kind} step and a reading, got {len(steps)} steps")
        compared.append((steps[0], reading))
    for step, (allocated, reserved) in compared:
        check = f"instrument: {step['name']}"
        for figure, expected in (("allocated_bytes", allocated), ("reserved_bytes", reserved)):
            m = metric(step, f"alloc.cuda:{device}.{figure}")
            rows.append(v.equal(check, f"{figure} peak", None if m is None else m.get("peak"),
                                expected, "B", note="torch max_* read by our hook"))
    missing = [s["name"] for s in doc["steps"]
               if (metric(s, f"gpu{index}.process_used_bytes") or {}).get("after") is None]
    rows.append(v.holds("instrument", f"gpu{index}.process_used_bytes in every step", not missing,
                        f"missing in {missing}" if missing else f"{len(doc['steps'])} steps",
                        "every step", f"NVML {index} by {matched}"))
    return rows
