"""genscope.torch.instrument on the real diffusers pipelines, checked against diffusers.

Run by tests/peers/diffusers.sh with the python of a peer venv (diffusers 0.27.2 or the newest
pinned, PyPI's torch 2.x: tests/peers/requirements-*.txt) and PYTHONPATH=<build>/python:

    diffusers_check.py [--table FILE] [--size PIXELS] [--steps N]

Each check prints "ok  <what>" or "FAIL <what>: <why>"; the exit status is 1 when one failed.
The pipelines (diffusers_pipelines.py) are the real StableDiffusionPipeline and
StableDiffusionXLPipeline, tiny, with the real conditioning widths. Checked:
- outputs bit-identical with and without instrumentation (SD1.5, SDXL, Heun);
- steps and names: the prompt's and the negative prompt's encoder calls, sampling, VAE decode;
- family checks: every check passes on a correct pipeline (SD1.5 with family="sd1.5", SDXL with
  "sdxl"), the conditioning check fails on a wrong one (SD1.5 declared SDXL, and the reverse);
- the generation's settings as run labels and sampling-step labels;
- Heun (2nd order) asked for 5 steps: 5 iterations, 9 scheduler steps and model calls;
  iterations = the steps diffusers' progress bar counts for DDIM, PNDM, DPM-Solver++, KDPM2
  and Heun, text-to-image and image-to-image;
- a UNet error caught inside the instrumented block fails that sampling step, and the next
  generation is recorded normally;
- durations against diffusers' own record: its tqdm progress bar (each redraw timestamped as
  the bar writes it: the loop start and the end of each step as diffusers counts them) and
  time.perf_counter() around encode_prompt (less its tokenizer calls, which no genscope step
  covers) and vae.decode; within 2 % or 50 ms each.
"""
import argparse
import io
import re
import sys
import time

import diffusers
import numpy as np
import torch

import diffusers_pipelines as pipelines
import genscope
import genscope.torch as gt
from check_steps import FAILED, check


def monitor():
    return genscope.Monitor(nvml=False)


def attachment(step, name):
    return next((a["data"] for a in step["attachments"] if a["name"] == name), None)


def checks_of(doc):
    """(step name, analysis, check name, passed) of every check in the run."""
    out = []
    for s in doc["steps"]:
        for a in s["attachments"]:
            for c in (a["data"].get("checks") or []) if isinstance(a["data"], dict) else []:
                out.append((s["name"], a["name"], c["name"], c["passed"]))
    return out


def generate(pipe, steps=3, size=64, **kwargs):
    kwargs.setdefault("negative_prompt", "blurry")
    return pipe("a photo of a cat", num_inference_steps=steps, guidance_scale=7.5, height=size,
                width=size, generator=torch.Generator().manual_seed(42), output_type="np",
                **kwargs).images


def instrumented(pipe, family=None, **kwargs):
    run = monitor().start_run(pipeline="diffusers")
    with gt.instrument(pipe, run, family=family):
        images = generate(pipe, **kwargs)
    return images, run.finish()


def steps_of(doc):
    return [(s["kind"], s["name"]) for s in doc["steps"]]


def sampling_steps(doc):
    return [s for s in doc["steps"] if s["kind"] == "sampling"]


def check_sd15():
    pipe = pipelines.sd15()
    plain = generate(pipe)
    images, doc = instrumented(pipe, family="sd1.5")
    check(np.array_equal(plain, images), "SD1.5: images bit-identical with and without instrument")
    want = [("text_encoding", "text_encoder (prompt)"), ("text_encoding", "text_encoder (negative)"),
            ("sampling", "denoise (unet)"), ("vae_decode", "vae.decode")]
    check(steps_of(doc) == want, "SD1.5: steps", steps_of(doc))
    s = sampling_steps(doc)[0]
    check(s["iterations"]["count"] == 3 and s["counters"].get("scheduler_steps") == 3 and
          s["counters"].get("model_calls") == 3 and s["counters"].get("model_evaluations") == 6,
          "SD1.5: 3 iterations, 3 scheduler steps, 3 UNet calls, 6 evaluations (CFG)",
          (s["iterations"]["count"], s["counters"]))
    labels = {"prompt": "a photo of a cat", "negative_prompt": "blurry", "num_inference_steps": "3",
              "guidance_scale": "7.5", "height": "64", "width": "64", "seed": "42",
              "scheduler": "EulerDiscreteScheduler"}
    check(all(doc["labels"].get(k) == v for k, v in labels.items()), "SD1.5: settings as run labels",
          doc["labels"])
    check(all(s["labels"].get(k) == v for k, v in labels.items()),
          "SD1.5: settings as sampling-step labels", s["labels"])
    checks = checks_of(doc)
    check(checks and all(c[3] for c in checks), "SD1.5 declared sd1.5: every check passes", checks)
    received = attachment(s, "conditioning (denoiser input)")
    check(received is not None and received["shape"] == [2, 77, 768],
          "SD1.5: the UNet's conditioning analysed (2 x 77 x 768)", received and received["shape"])
    check(doc["monitoring_errors"] == [], "SD1.5: no monitoring errors", doc["monitoring_errors"])
    _, wrong = instrumented(pipe, family="sdxl")
    failed = [c for c in checks_of(wrong) if not c[3]]
    check(any(c[1] == "conditioning (denoiser input)" and c[2] == "conditioning_width" for c in failed),
          "SD1.5 declared sdxl: the conditioning width check fails", failed)
    # the prompt given as prompt_embeds: encode_prompt encodes only the negative prompt
    embeds = torch.randn(1, 77, 768, generator=torch.Generator().manual_seed(3))
    run = monitor().start_run()
    with gt.instrument(pipe, run):
        pipe(prompt_embeds=embeds, negative_prompt="blurry", num_inference_steps=2, height=64, width=64,
             output_type="np")
    names = [st["name"] for st in run.finish()["steps"] if st["kind"] == "text_encoding"]
    check(names == ["text_encoder (negative)"], "SD1.5 with prompt_embeds: the one encoder call is the "
          "negative prompt's", names)
    return pipe


def check_sdxl():
    pipe = pipelines.sdxl()
    plain = generate(pipe)
    images, doc = instrumented(pipe, family="sdxl")
    check(np.array_equal(plain, images), "SDXL: images bit-identical with and without instrument")
    want = [("text_encoding", "text_encoder (prompt)"), ("text_encoding", "text_encoder_2 (prompt)"),
            ("text_encoding", "text_encoder (negative)"), ("text_encoding", "text_encoder_2 (negative)"),
            ("sampling", "denoise (unet)"), ("vae_decode", "vae.decode")]
    check(steps_of(doc) == want, "SDXL: steps", steps_of(doc))
    checks = checks_of(doc)
    check(len(checks) >= 3 and all(c[3] for c in checks),
          "SDXL declared sdxl: every check passes (context 2048, pooled 1280, latents)", checks)
    s = sampling_steps(doc)[0]
    context, pooled = attachment(s, "conditioning (denoiser input)"), attachment(s, "pooled (denoiser input)")
    check(context is not None and context["shape"] == [2, 77, 2048] and pooled is not None and
          pooled["shape"] == [2, 1280], "SDXL: the UNet's conditioning 2 x 77 x 2048 and pooled 2 x 1280",
          (context and context["shape"], pooled and pooled["shape"]))
    check(doc["monitoring_errors"] == [], "SDXL: no monitoring errors", doc["monitoring_errors"])
    _, wrong = instrumented(pipe, family="sd1.5")
    failed = [c for c in checks_of(wrong) if not c[3]]
    check(any(c[1] == "conditioning (denoiser input)" for c in failed),
          "SDXL declared sd1.5: the conditioning check fails", failed)
    # negative_prompt None: SDXL zeroes the negative conditioning, no second encoder call
    _, doc = instrumented(pipe, family="sdxl", negative_prompt=None)
    check(steps_of(doc)[:2] == want[:2] and steps_of(doc)[2:] == want[4:],
          "SDXL without negative prompt: the prompt's two encoder calls only", steps_of(doc))


def check_heun():
    pipe = pipelines.sd15("HeunDiscreteScheduler")
    plain = generate(pipe, steps=5)
    images, doc = instrumented(pipe, steps=5)
    check(np.array_equal(plain, images), "Heun: images bit-identical with and without instrument")
    s = sampling_steps(doc)[0]
    check(s["iterations"]["count"] == 5 and s["labels"].get("num_inference_steps") == "5",
          "Heun asked for 5 steps: 5 iterations, num_inference_steps=5",
          (s["iterations"]["count"], s["labels"]))
    check(s["counters"].get("scheduler_steps") == 9 and s["counters"].get("model_calls") == 9 and
          s["counters"].get("model_evaluations") == 18 and s["labels"].get("scheduler_order") == "2"
          and "iteration" in s["labels"],
          "Heun: 9 scheduler steps and UNet calls, 18 evaluations, said in the labels",
          (s["counters"], s["labels"]))


def check_schedulers(sd15):
    """Iterations = the steps diffusers' own bar counts, for schedulers of order 1 and 2 and
    with PNDM's Runge-Kutta warm-up, text-to-image and image-to-image (strength 0.75)."""

    img2img = diffusers.StableDiffusionImg2ImgPipeline(**sd15.components)
    image = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    config = sd15.scheduler.config
    seen = []
    try:
        for name in ("DDIMScheduler", "PNDMScheduler", "DPMSolverMultistepScheduler",
                     "KDPM2DiscreteScheduler", "HeunDiscreteScheduler"):
            for pipe, extra in ((sd15, {}), (img2img, {"image": image, "strength": 0.75})):
                pipe.scheduler = getattr(diffusers, name).from_config(config)
                bar = BarClock()
                pipe.set_progress_bar_config(file=bar, mininterval=0, miniters=1, disable=False)
                run = monitor().start_run()
                with gt.instrument(pipe, run):
                    pipe("a cat", num_inference_steps=4, output_type="np", **extra)
                s = sampling_steps(run.finish())[0]
                seen.append((name, "image" in extra, s["iterations"]["count"], max(bar.at),
                             s["counters"].get("scheduler_steps"), s["labels"].get("num_inference_steps")))
        # instrument(sd15) while the image-to-image pipeline built on its components runs
        run = monitor().start_run()
        with gt.instrument(sd15, run):
            img2img("a cat", image=image, strength=0.75, num_inference_steps=4, output_type="np")
        doc = run.finish()
        check(doc["labels"].get("strength") == "0.75" and
              [st["name"] for st in doc["steps"]][:2] == ["text_encoder (prompt)", "text_encoder (negative)"],
              "a pipeline sharing the instrumented components: its call's settings and prompt roles",
              (doc["labels"], [st["name"] for st in doc["steps"]]))
    finally:
        sd15.scheduler = diffusers.EulerDiscreteScheduler.from_config(config)
        sd15.set_progress_bar_config(disable=True)
    check(all(it == steps and label == "4" for _, _, it, steps, _, label in seen) and
          any(calls != it for _, _, it, _, calls, _ in seen),
          "iterations = the steps diffusers' bar counts, for DDIM, PNDM, DPM-Solver++, KDPM2, Heun, "
          "text-to-image and image-to-image; num_inference_steps=4 as asked",
          [f"{n}{' img2img' if i2i else ''}: {it} iterations, bar {steps}, {calls:g} scheduler steps, "
           f"label {label}" for n, i2i, it, steps, calls, label in seen])


def check_caught_unet_error(pipe):
    run = monitor().start_run()
    with gt.instrument(pipe, run):
        try:  # 3 latent channels where the UNet takes 4: conv_in raises inside unet.forward
            generate(pipe, latents=torch.randn(1, 3, 32, 32))
        except RuntimeError:
            pass  # the program catches it and goes on
        generate(pipe)
    doc = run.finish()
    sampling = sampling_steps(doc)
    check(len(sampling) == 2 and sampling[0]["status"] == "failed" and
          sampling[0]["error"]["type"] == "RuntimeError" and sampling[1]["status"] == "ok",
          f"UNet error caught inside the block fails its sampling step (torch {torch.__version__})",
          [(s["status"], s.get("error")) for s in sampling])
    check(all(s["parent_id"] == -1 for s in doc["steps"]), "caught UNet error: no step left open",
          [(s["name"], s["parent_id"]) for s in doc["steps"]])


class BarClock(io.StringIO):
    """A file for diffusers' tqdm bar: the perf_counter() of the first redraw showing n/total."""

    def __init__(self):
        super().__init__()
        self.at = {}

    def write(self, text):
        now = time.perf_counter()
        for n in re.findall(r"(\d+)/\d+", text)[-1:]:
            self.at.setdefault(int(n), now)
        return super().write(text)


class TimedTokenizer:
    """A tokenizer whose calls and method calls are timed (encode_prompt tokenizes before each
    encoder call, and the text_encoding steps are the encoder calls); all else is the
    tokenizer's own."""

    def __init__(self, inner, own):
        self._inner, self._own = inner, own

    def _timed(self, fn, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._own["tokenize"] += time.perf_counter() - t0

    def __call__(self, *args, **kwargs):
        return self._timed(self._inner, *args, **kwargs)

    def __getattr__(self, name):  # tokenize() (textual-inversion check), batch_decode() ...
        value = getattr(self._inner, name)
        if callable(value):
            return lambda *args, **kwargs: self._timed(value, *args, **kwargs)
        return value


def timed(pipe, steps, size):
    """One instrumented generation, with diffusers' own record of it beside genscope's."""
    own = {"encode_prompt": 0.0, "vae.decode": 0.0, "tokenize": 0.0}
    tokenizers = [n for n in ("tokenizer", "tokenizer_2") if getattr(pipe, n, None) is not None]

    def clocked(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                own[name] += time.perf_counter() - t0
        return wrapper

    bar = BarClock()
    pipe.set_progress_bar_config(file=bar, mininterval=0, miniters=1, ascii=True, disable=False)
    pipe.encode_prompt = clocked("encode_prompt", pipe.encode_prompt)
    pipe.vae.decode = clocked("vae.decode", pipe.vae.decode)
    originals = {n: pipe.__dict__[n] for n in tokenizers}
    for n in tokenizers:  # around the pipeline's config bookkeeping (DiffusionPipeline.__setattr__)
        pipe.__dict__[n] = TimedTokenizer(originals[n], own)
    try:
        run = monitor().start_run(pipeline="diffusers")
        with gt.instrument(pipe, run):
            generate(pipe, steps=steps, size=size)
        doc = run.finish()
    finally:
        del pipe.encode_prompt, pipe.vae.decode
        pipe.__dict__.update(originals)
        pipe.set_progress_bar_config(disable=True)
    return doc, own, [bar.at[n] for n in range(steps + 1)]


def check_timings(name, pipe, steps, size, table):
    doc, own, bar = timed(pipe, steps, size)
    s = sampling_steps(doc)[0]
    rows = []

    def row(what, genscope_s, own_s, own_what):
        delta = genscope_s - own_s
        ok = abs(delta) <= max(0.02 * own_s, 0.050)
        rows.append((what, genscope_s, own_s, own_what, delta))
        return ok

    encoding = sum(st["duration_ns"] for st in doc["steps"] if st["kind"] == "text_encoding") / 1e9
    ok = row("text_encoding (all calls)", encoding, own["encode_prompt"] - own["tokenize"],
             "encode_prompt less its tokenizer calls, perf_counter")
    ok &= row("sampling", s["duration_ns"] / 1e9, bar[-1] - bar[0], f"tqdm 0/{steps} to {steps}/{steps}")
    for i, d in enumerate(s["iterations"]["durations_ns"]):
        ok &= row(f"  iteration {i + 1}", d / 1e9, bar[i + 1] - bar[i], f"tqdm {i}/{steps} to {i + 1}/{steps}")
    decode = next(st for st in doc["steps"] if st["kind"] == "vae_decode")
    ok &= row("vae_decode", decode["duration_ns"] / 1e9, own["vae.decode"], "vae.decode, perf_counter")
    worst = max(abs(r[4]) for r in rows)
    check(ok and len(s["iterations"]["durations_ns"]) == steps,
          f"{name} {size}x{size}, {steps} steps: durations within 2 % or 50 ms of diffusers' own record "
          f"(largest difference {worst * 1e3:.2f} ms)", rows)
    table.append(f"\n{name}, {size}x{size}, {steps} steps, {pipe.scheduler.__class__.__name__}, "
                 f"diffusers {diffusers.__version__}, torch {torch.__version__} CPU:\n")
    table.append("| genscope step | genscope | diffusers' own record | from | difference |")
    table.append("|---|---|---|---|---|")
    for what, g, o, source, delta in rows:
        table.append(f"| {what} | {g * 1e3:.1f} ms | {o * 1e3:.1f} ms | {source} | {delta * 1e3:+.2f} ms |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", help="write the timing tables (Markdown) here")
    ap.add_argument("--size", type=int, default=128, help="image size of the timed runs")
    ap.add_argument("--steps", type=int, default=4, help="steps of the timed runs")
    a = ap.parse_args()
    sd15 = check_sd15()
    check_sdxl()
    check_heun()
    check_schedulers(sd15)
    check_caught_unet_error(sd15)
    table = []
    check_timings("StableDiffusionPipeline", sd15, a.steps, a.size, table)
    check_timings("StableDiffusionXLPipeline", pipelines.sdxl(), a.steps, a.size, table)
    check_timings("StableDiffusionPipeline", pipelines.sd15("HeunDiscreteScheduler"), a.steps, a.size,
                  table)
    print("\n".join(table))
    if a.table:
        with open(a.table, "w", encoding="utf-8") as f:
            f.write("\n".join(table) + "\n")
    print(f"{len(FAILED)} check(s) failed" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
