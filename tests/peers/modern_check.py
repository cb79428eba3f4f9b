"""genscope.torch.instrument on today's diffusers (issue 26), checked family by family.

Run by tests/peers/modern_diffusers.sh with the venv of tests/peers/requirements-modern.txt and
PYTHONPATH=<build>/python:

    modern_check.py [--table FILE] [--steps N] [--only NAME[,NAME...]]

The pipelines (modern_pipelines.py) are the real FluxPipeline, Flux2Pipeline, Flux2KleinPipeline,
WanPipeline, WanImageToVideoPipeline, StableDiffusion3Pipeline, QwenImagePipeline, LTXPipeline,
LTX2Pipeline and LTX2ImageToVideoPipeline (LTX-2.0 and LTX-2.3), HunyuanVideoPipeline and HunyuanVideo15Pipeline, tiny, with the real conditioning widths and
latent layouts. For each family:
- the output (images or video frames, and LTX-2's waveform; output_type="pt", a fixed
  generator) is bit-identical with and without instrument (torch.equal);
- the steps: one text_encoding step per encoder call (prompt, and negative prompt where the
  pipeline encodes one), then one sampling step, then vae_decode;
- sampling: iterations == num_inference_steps, scheduler_steps == iterations, model_calls and
  model_evaluations per step as the pipeline's guidance makes them (Flux true CFG, Wan and
  Qwen-Image: two calls of batch 1; SD3 and LTX: one call of batch 2; Flux guidance-distilled
  and HunyuanVideo: one call of batch 1);
- the conditioning the denoiser receives is analysed, and every family check (declared family)
  passes: conditioning width / tokens, pooled width, latent layout;
- instrument's hook_errors == 0 and the run has no monitoring_errors;
- the family verdict from every tensor seen (no family declared) names the family; an alias
  (family="wan2.2") is resolved by the tensors; every text step has its conditioning analysed
  (for causal / VL encoders: what the denoiser received);
- WRONG: pipelines declared another family fail the checks listed there (Flux.1-dev declared
  SD3.5: the pooled width, 768 not 2048, and the latent family);
- every family, every wrapped object (text encoders, denoisers, VAE, scheduler): copy.copy and
  copy.deepcopy inside the block give a plain object (none of genscope's wrappers) independent
  of the original: a copied scheduler steps without moving the original, a copied model or VAE
  runs its class's method bound to the copy, nothing is counted by the instrumentation;
- LTX-2 (2.0 and 2.3; image-to-video and frame conditions: a vae.encode step per image after
  the connectors): the connectors a custom step before sampling, audio_vae.decode and vocoder custom
  steps after vae.decode, their outputs analysed; 3 calls and 4 evaluations per step (batched
  CFG, spatio-temporal guidance, modality isolation); the audio scheduler (the pipeline's
  copy.deepcopy of the instrumented one) steps apart from it; both text steps get the batched
  CFG context; the audio context and latents analysed;
- Wan 2.2 A14B: both experts hooked, model_calls.transformer and model_calls.transformer_2 on
  the sampling step, adding up to model_calls.

Before the families: a decoded video's statistics in host pieces equal the whole-tensor pass,
in bounded memory (check_video_stats).

Each check prints "ok  <what>" or "FAIL <what>: <why>"; the exit status is 1 when one failed.
The table (family x steps, iterations, evaluations per step, conditioning seen, verdict) is
printed at the end, and written to FILE with --table.
"""
import argparse
import copy
import sys
import time

import torch

import genscope
import genscope.torch as gt
import modern_pipelines as pipelines
import modern_settings
from check_steps import FAILED, check



class Family:
    def __init__(self, name, build, family, call, encoders, calls_per_step, evaluations_per_step,
                 verdict, steps=None, after=None, runs=None, before=None):
        self.name = name
        self.verdict = verdict  # the family genscope's verdict must name (no family declared)
        self.steps = steps  # the steps between the text encoders and sampling (in order)
        self.after = after  # the steps after vae.decode (in order)
        self.before = before  # the steps before the text encoders (in order)
        self.build = build  # () -> pipeline
        self.family = family  # genscope family id
        self.call = call  # the pipeline's arguments (steps added)
        self.encoders = encoders  # expected text_encoding step names, in order
        self.calls_per_step = calls_per_step
        self.evaluations_per_step = evaluations_per_step
        # steps asked -> denoising steps run (image-to-image, video-to-video: fewer by strength)
        self.runs = runs or (lambda steps: steps)


NEG = "blurry"
NEG_PROMPT = ["text_encoder (prompt)", "text_encoder (negative)"]
LTX2_CALL = dict(prompt="a cat walking", negative_prompt=NEG, height=64, width=64, num_frames=9,
                 frame_rate=24.0, guidance_scale=3.0, stg_scale=1.0, modality_scale=3.0,
                 spatio_temporal_guidance_blocks=[0], max_sequence_length=128)
LTX2_AFTER = [("custom", "audio_vae.decode"), ("custom", "vocoder")]
CLIP_T5 = ["text_encoder (prompt)", "text_encoder_2 (prompt)"]
FAMILIES = [
    Family("flux-dev", pipelines.flux, "flux-dev",
           dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=3.5),
           CLIP_T5, 1, 1, "Flux.1-dev"),
    Family("flux-dev-true-cfg", pipelines.flux, "flux-dev",
           dict(prompt="a photo of a cat", negative_prompt=NEG, true_cfg_scale=4.0, height=64,
                width=64, guidance_scale=3.5),
           CLIP_T5 + ["text_encoder (negative)", "text_encoder_2 (negative)"], 2, 2, "Flux.1-dev"),
    Family("wan2.1", pipelines.wan, "wan2.1",
           dict(prompt="a cat walking", negative_prompt=NEG, height=32, width=32, num_frames=9,
                guidance_scale=5.0),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Wan 2.x"),
    Family("wan2.2-a14b", lambda: pipelines.wan(a14b=True), "wan-a14b",
           dict(prompt="a cat walking", negative_prompt=NEG, height=32, width=32, num_frames=9,
                guidance_scale=4.0, guidance_scale_2=3.0),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Wan 2.x"),
    Family("sd3.5", pipelines.sd35, "sd3.5",
           dict(prompt="a photo of a cat", negative_prompt=NEG, height=64, width=64,
                guidance_scale=5.0),
           ["text_encoder (prompt)", "text_encoder_2 (prompt)", "text_encoder_3 (prompt)",
            "text_encoder (negative)", "text_encoder_2 (negative)", "text_encoder_3 (negative)"],
           1, 2, "SD3"),
    Family("flux-schnell", lambda: pipelines.flux(schnell=True), "flux-schnell",
           dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=0.0,
                max_sequence_length=256),
           CLIP_T5, 1, 1, "Flux.1-schnell"),
    Family("qwen-image", pipelines.qwen_image, "qwen-image",
           dict(prompt="a photo of a cat", negative_prompt=NEG, true_cfg_scale=4.0, height=64,
                width=64),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Qwen-Image"),
    Family("qwen-image-edit", pipelines.qwen_image_edit, "qwen-image",
           dict(prompt="make the cat blue", negative_prompt=NEG, true_cfg_scale=4.0, height=64,
                width=64, image=pipelines.first_frame(64, 64)),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Qwen-Image",
           steps=[("latent_generation", "vae.encode")]),
    Family("qwen-image-edit-plus", lambda: pipelines.qwen_image_edit(plus=True), "qwen-image",
           dict(prompt="put the cat next to the dog", negative_prompt=NEG, true_cfg_scale=4.0,
                height=64, width=64,
                image=[pipelines.first_frame(64, 64), pipelines.first_frame(48, 64)]),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Qwen-Image",
           steps=[("latent_generation", "vae.encode")] * 2),
    Family("ltx-video", pipelines.ltx, "ltx",
           dict(prompt="a cat walking", negative_prompt=NEG, height=64, width=64, num_frames=9,
                guidance_scale=3.0),
           ["text_encoder (prompt)", "text_encoder (negative)"], 1, 2, "LTX-Video"),
    Family("hunyuan-video", pipelines.hunyuan_video, "hunyuanvideo",
           dict(prompt="a cat walking", height=32, width=32, num_frames=5, guidance_scale=6.0),
           ["text_encoder (prompt)", "text_encoder_2 (prompt)"], 1, 1, "HunyuanVideo"),
    Family("flux2", pipelines.flux2, "flux2",
           dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=4.0),
           ["text_encoder (prompt)"], 1, 1, "Flux.2"),
    Family("flux2-klein", pipelines.flux2_klein, "flux2-klein",
           dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=4.0),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Flux.2 Klein 4B"),
    Family("flux2-klein-9b", lambda: pipelines.flux2_klein(width=4096), "flux2-klein-9b",
           dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=4.0),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Flux.2 Klein 9B"),
    Family("wan2.2-ti2v", pipelines.wan_ti2v, "wan2.2",
           dict(prompt="a cat walking", negative_prompt=NEG, height=64, width=64, num_frames=9,
                guidance_scale=5.0),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Wan 2.2 TI2V-5B"),
    Family("wan2.2-ti2v-i2v", pipelines.wan_ti2v_i2v, "wan2.2",
           dict(prompt="a cat walking", negative_prompt=NEG, height=64, width=64, num_frames=9,
                guidance_scale=5.0, image=pipelines.first_frame(64, 64)),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Wan 2.2 TI2V-5B",
           steps=[("latent_generation", "vae.encode")]),
    # Image-to-image and video-to-video at strength 0.6: the pipelines run the last
    # steps - int(steps - steps * 0.6) (Flux) / int(steps * 0.6) (Wan) of the schedule.
    Family("flux-dev-img2img", pipelines.flux_img2img, "flux-dev",
           dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=3.5,
                strength=0.6, image=pipelines.first_frame(64, 64)),
           CLIP_T5, 1, 1, "Flux.1-dev", steps=[("latent_generation", "vae.encode")],
           runs=lambda n: n - int(max(n - n * 0.6, 0))),
    Family("wan2.1-v2v", pipelines.wan_v2v, "wan2.1",
           dict(prompt="a cat walking", negative_prompt=NEG, height=32, width=32,
                guidance_scale=5.0, strength=0.6,
                video=[pipelines.first_frame(32, 32)] * 9),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Wan 2.x",
           steps=[("latent_generation", "vae.encode")], runs=lambda n: min(int(n * 0.6), n)),
    Family("wan2.1-i2v", pipelines.wan_i2v, "wan2.1",
           dict(prompt="a cat walking", negative_prompt=NEG, height=32, width=32, num_frames=9,
                guidance_scale=5.0, image=pipelines.first_frame(32, 32)),
           ["text_encoder (prompt)", "text_encoder (negative)"], 2, 2, "Wan 2.x",
           steps=[("custom", "image_encoder"), ("latent_generation", "vae.encode")]),
    Family("hunyuan-video-1.5", pipelines.hunyuan_video15, "hunyuanvideo1.5",
           dict(prompt='a sign that says "hello"', negative_prompt=NEG, height=32, width=32,
                num_frames=5),
           ["text_encoder (prompt)", "text_encoder_2 (prompt)", "text_encoder (negative)"], 2, 2,
           "HunyuanVideo 1.5"),
    Family("hunyuan-video-1.5-i2v", lambda: pipelines.hunyuan_video15(i2v=True), "hunyuanvideo1.5",
           dict(prompt='a sign that says "hello"', negative_prompt=NEG, num_frames=5,
                image=pipelines.first_frame(32, 32)),
           ["text_encoder (prompt)", "text_encoder_2 (prompt)", "text_encoder (negative)"], 2, 2,
           "HunyuanVideo 1.5", before=[("custom", "image_encoder")],
           steps=[("latent_generation", "vae.encode")]),
    # LTX-2 (audio + video): the connectors turn Gemma 3's stacked hidden states into the video
    # and audio contexts; per step one call of batch 2 (CFG), one with spatio-temporal guidance
    # (block 0 perturbed) and one with the modalities isolated (batch 1 each): 3 calls, 4
    # evaluations. The audio latents step through a copy.deepcopy of the (instrumented)
    # scheduler; after vae.decode the audio VAE decodes the mel spectrogram and the vocoder
    # makes the waveform.
    Family("ltx2", pipelines.ltx2, "ltx2", LTX2_CALL, NEG_PROMPT, 3, 4, "LTX-2",
           steps=[("custom", "connectors")], after=LTX2_AFTER),
    # LTX2ImageToVideoPipeline: the first frame through vae.encode (after the connectors) is the
    # first latent frame, kept by a mask. image_crf=0: no H.264 re-compression of the image
    # (it needs PyAV, not in the venv).
    Family("ltx2-i2v", pipelines.ltx2_i2v, "ltx2",
           dict(LTX2_CALL, image=pipelines.first_frame(64, 64), image_crf=0), NEG_PROMPT, 3, 4, "LTX-2",
           steps=[("custom", "connectors"), ("latent_generation", "vae.encode")],
           after=LTX2_AFTER),
    # LTX2ConditionPipeline: a first and a last frame as conditions, each through vae.encode.
    Family("ltx2-condition", pipelines.ltx2_condition, "ltx2",
           dict(LTX2_CALL, conditions=pipelines.ltx2_conditions(64, 64)), NEG_PROMPT, 3, 4,
           "LTX-2", steps=[("custom", "connectors"), ("latent_generation", "vae.encode"),
                           ("latent_generation", "vae.encode")], after=LTX2_AFTER),
    # LTX-2.3: the connectors' per-modality projections give a 4096-wide video context (LTX-
    # Video's width, at its 128 tokens here) and a 2048-wide audio context, which tells them
    # apart; family="ltx2" (the series) is resolved to LTX-2.3 by the 4096-wide context.
    Family("ltx2.3", lambda: pipelines.ltx2("2.3"), "ltx2", LTX2_CALL, NEG_PROMPT, 3, 4,
           "LTX-2.3", steps=[("custom", "connectors")], after=LTX2_AFTER),
    Family("ltx2.3-i2v", lambda: pipelines.ltx2_i2v("2.3"), "ltx2",
           dict(LTX2_CALL, image=pipelines.first_frame(64, 64), image_crf=0), NEG_PROMPT, 3, 4,
           "LTX-2.3", steps=[("custom", "connectors"), ("latent_generation", "vae.encode")],
           after=LTX2_AFTER),
]


# Text steps whose encoder's output the pipeline crops (template tokens dropped) before the
# denoiser gets it: the step has both.
CROPPED = {"hunyuan-video": "text_encoder (prompt)", "hunyuan-video-1.5": "text_encoder (prompt)"}


# Pipelines run again declared as another family, and the checks that must fail then.
WRONG = {
    "flux-dev": ("sd3.5", {("pooled (denoiser input)", "conditioning_width"),
                           ("latents (first iteration)", "latent_family")}),
    "flux2": ("flux-dev", {("conditioning (denoiser input)", "conditioning_width"),
                           ("latents (first iteration)", "latent_family")}),
    "wan2.2-ti2v": ("wan2.1", {("latents (first iteration)", "latent_family")}),
    "flux2-klein": ("flux2-klein-9b", {("conditioning (denoiser input)", "conditioning_width")}),
    "hunyuan-video-1.5": ("qwen-image", {("latents (first iteration)", "latent_family")}),
    # LTX-Video and LTX-2 share the VAE and its tokens; their text widths differ (4096 / 3840).
    "ltx2": ("ltx-video", {("conditioning (denoiser input)", "conditioning_width")}),
    "ltx-video": ("ltx2", {("conditioning (denoiser input)", "conditioning_width")}),
    # LTX-2.3's video context is 4096 wide, LTX-2.0's 3840.
    "ltx2.3": ("ltx2.0", {("conditioning (denoiser input)", "conditioning_width")}),
}


def generate(pipe, fam, steps):
    """The output tensors: images or video frames, and the waveform where there is audio."""
    out = pipe(**fam.call, num_inference_steps=steps, generator=torch.Generator().manual_seed(42),
               output_type="pt")
    frames = getattr(out, "frames", None)
    audio = getattr(out, "audio", None)
    return (frames if frames is not None else out.images,) + ((audio,) if audio is not None else ())


def identical(a, b):
    """Whether two generate() results are bit-identical, and the largest difference."""
    same = len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))
    return same, max(float((x - y).abs().max()) for x, y in zip(a, b))


def checks_of(doc):
    """(step name, analysis, shape, check name, passed, reason) of every family check."""
    out = []
    for s in doc["steps"]:
        for a in s["attachments"]:
            data = a["data"] if isinstance(a["data"], dict) else {}
            for c in data.get("checks") or []:
                out.append((s["name"], a["name"], data.get("shape"), c["name"], c["passed"],
                            c.get("reason", "")))
    return out


def candidates(analysis):
    """The families genscope's classification names for an analysis (no family declared)."""
    c = (analysis or {}).get("classification") or {}
    return " / ".join(x["family"] for x in c.get("candidates") or []) or "none"


def attachment(step, name):
    return next((a["data"] for a in step["attachments"] if a["name"] == name), None)


def wrapped_objects(inst):
    """(name, object) of everything instrument() wrapped: text encoders, denoisers, VAE,
    scheduler."""
    c = inst.components
    out = list(c.text_encoders.items()) + list(c.denoisers().items())
    out += list(c.more_models.items())
    out += [(n, o) for n, o in (("vae", c.vae), ("scheduler", c.scheduler)) if o is not None]
    return out


def counters(inst):
    s = inst._sampling
    return (inst.hook_errors, s.calls_started if s else None, s.scheduler_steps if s else None)


def check_copy(fam, pipe, inst):
    """copy.copy and copy.deepcopy of every wrapped object inside the block: a plain object
    (none of genscope's wrappers in its __dict__), independent of the original: a copied
    scheduler steps without moving the original's step index, a copied model or VAE runs
    its own class method, and nothing reaches the instrumentation (no call counted)."""
    for name, obj in wrapped_objects(inst):
        # what instrument() added to the object's __dict__ (it had none of them before)
        ours = sorted(a for o, a, had, _, _ in inst._patches if o is obj and not had)
        for how, copier in (("copy.copy", copy.copy), ("copy.deepcopy", copy.deepcopy)):
            before = counters(inst)
            dup = copier(obj)
            left = sorted(a for a in ours if a in vars(dup))
            check(ours and not left,
                  f"{fam.name}: {how} of the instrumented {name} carries no wrapper ({', '.join(ours)})",
                  left)
            if name == "scheduler":
                sched = obj
                state = (sched.step_index, len(getattr(sched, "timesteps", [])))
                dynamic = getattr(dup.config, "use_dynamic_shifting", False)
                dup.set_timesteps(2, **({"mu": 1.0} if dynamic else {}))
                sample = torch.zeros(1, 4, 4)
                dup.step(torch.ones_like(sample), dup.timesteps[0], sample)
                ok = (sched.step_index, len(getattr(sched, "timesteps", []))) == state and \
                    dup.step_index == 1
                why = (state, sched.step_index, dup.step_index)
            else:
                method = "decode" if name in ("vae", "audio_vae") else "forward"
                bound = getattr(dup, method)
                ok = getattr(bound, "__self__", None) is dup and \
                    getattr(bound, "__func__", None) is getattr(type(dup), method)
                why = bound
            check(ok and counters(inst) == before,
                  f"{fam.name}: {how} of the {name} is independent of the original "
                  "(its own state and method, nothing counted)", (why, before, counters(inst)))
            del dup
        check(all(a in vars(obj) for a in ours),
              f"{fam.name}: the original {name} stays instrumented", ours)


def run_family(fam, steps):
    started = time.perf_counter()
    pipe = fam.build()
    plain = generate(pipe, fam, steps)
    run = genscope.Monitor(nvml=False).start_run(pipeline="diffusers", model=fam.name)
    with gt.instrument(pipe, run, family=fam.family) as inst:
        out = generate(pipe, fam, steps)
        check_copy(fam, pipe, inst)
    doc = run.finish()
    n = fam.name
    same, diff = identical(plain, out)
    what = "video frames and audio" if len(out) > 1 else "output"
    check(same, f"{n}: {what} bit-identical with and without instrument", f"max |diff| {diff}")
    if getattr(pipe, "audio_vae", None) is not None:
        # LTX-2 steps its audio latents with copy.deepcopy(self.scheduler): the copy must step
        # on its own; had it kept a wrapper bound to the instrumented scheduler, the original's
        # step index would move twice a step (and run past its timesteps: IndexError).
        check(pipe.scheduler.step_index == steps,
              f"{n}: the deep-copied audio scheduler stepped apart from the instrumented one "
              f"(its step_index {steps} after {steps} steps)", pipe.scheduler.step_index)
    steps_seen = [(s["kind"], s["name"]) for s in doc["steps"]]
    denoisers = ", ".join(d for d in ("transformer", "transformer_2") if getattr(pipe, d, None) is not None)
    want = (fam.before or []) + [("text_encoding", e) for e in fam.encoders] + (fam.steps or []) + [
        ("sampling", f"denoise ({denoisers})"), ("vae_decode", "vae.decode")] + (fam.after or [])
    check(steps_seen == want, f"{n}: steps {[s[1] for s in want]}", steps_seen)
    sampling = [s for s in doc["steps"] if s["kind"] == "sampling"]
    row = {"family": n, "steps": ", ".join(f"{k}:{name}" for k, name in steps_seen),
           "text_encoding": sum(k == "text_encoding" for k, _ in steps_seen),
           "more_steps": ", ".join(name for _, name in fam.steps or []),
           "after_steps": ", ".join(name for _, name in fam.after or []),
           "before_steps": ", ".join(name for _, name in fam.before or [])}
    if sampling:
        s = sampling[0]
        c = s["counters"]
        iterations = s["iterations"]["count"] if s.get("iterations") else 0
        row.update(iterations=iterations, model_calls=c.get("model_calls"),
                   evaluations_per_step=(c.get("model_evaluations") or 0) / max(iterations, 1))
        ran = fam.runs(steps)
        check(iterations == ran and c.get("scheduler_steps") == ran,
              f"{n}: {ran} iterations, {ran} scheduler steps ({steps} asked)", (iterations, c))
        check(c.get("model_calls") == ran * fam.calls_per_step and
              c.get("model_evaluations") == ran * fam.evaluations_per_step,
              f"{n}: {fam.calls_per_step} model call(s) and {fam.evaluations_per_step} "
              f"evaluation(s) per step", c)
        received = attachment(s, "conditioning (denoiser input)")
        pooled = attachment(s, "pooled (denoiser input)")
        row["conditioning"] = (("x".join(map(str, received["shape"])) if received else "none") +
                               (" + pooled " + "x".join(map(str, pooled["shape"])) if pooled else ""))
        check(received is not None, f"{n}: the denoiser's conditioning analysed", s["attachments"])
        latent = attachment(s, "latents (first iteration)")
        row["classified"] = "context: {}; latents {}: {}".format(
            candidates(received), "x".join(map(str, latent["shape"])) if latent else "none",
            candidates(latent))
        if n == "wan2.2-a14b":
            labels = s["labels"]
            a, b = int(labels.get("model_calls.transformer", -1)), int(labels.get("model_calls.transformer_2", -1))
            row["experts"] = f"transformer {a}, transformer_2 {b}"
            check(a > 0 and b > 0 and a + b == c.get("model_calls"),
                  f"{n}: both experts hooked (model_calls.transformer + model_calls.transformer_2 "
                  "= model_calls)", labels)
        verdict = attachment(s, "family verdict") or {}
        row["family_verdict"] = verdict.get("family") or " / ".join(
            c["family"] for c in verdict.get("candidates") or []) or "none"
        check(verdict.get("family") == fam.verdict,
              f"{n}: the family verdict from every tensor seen is {fam.verdict}", verdict)
        if fam.family != fam.verdict:  # an alias: the family it was resolved to
            check(s["labels"].get("family") == fam.verdict,
                  f"{n}: family={fam.family!r} resolved to {fam.verdict} by the tensors",
                  s["labels"].get("family"))
    texts = [s for s in doc["steps"] if s["kind"] == "text_encoding"]
    bare = [s["name"] for s in texts if not any(
        a["name"] in ("conditioning", "conditioning (denoiser input)", "pooled")
        for a in s["attachments"])]
    check(texts and not bare, f"{n}: every text step has its conditioning analysed (the "
          "encoder's output, or for causal / VL encoders what the denoiser received)", bare)
    if n in CROPPED and sampling:  # the encoder's output cropped by the pipeline
        received = attachment(sampling[0], "conditioning (denoiser input)") or {}
        step = next((s for s in texts if s["name"] == CROPPED[n]), {"attachments": []})
        own = attachment(step, "conditioning") or {}
        given = attachment(step, "conditioning (denoiser input)") or {}
        check(own.get("shape", [0, 0])[1] > received.get("shape", [0, 0])[1] and
              given.get("shape") == received.get("shape"),
              f"{n}: {CROPPED[n]} has its own output ({own.get('shape')}) and the cropped "
              f"conditioning the denoiser received ({received.get('shape')})",
              (own.get("shape"), given.get("shape"), received.get("shape")))
    if fam.after:  # LTX-2
        # Batched CFG, then guidance calls with the prompt's context only: both text steps get
        # the batched context of the first call, not a later call's.
        batches = [(attachment(s, "conditioning (denoiser input)") or {}).get("shape", [0])[0]
                   for s in texts]
        check(batches == [2] * len(texts), f"{n}: the prompt's and the negative prompt's text "
              "steps get the batched CFG context (batch 2), not a guidance call's", batches)
        custom = {s["name"]: [a["name"] for a in s["attachments"]] for s in doc["steps"]
                  if s["kind"] == "custom"}
        want_out = {"connectors": ["output 0", "output 1"], "audio_vae.decode": ["output"],
                    "vocoder": ["output"]}
        check(custom == want_out, f"{n}: the connectors' video and audio contexts, the mel "
              "spectrogram and the waveform analysed", custom)
        audio = [a for a in ("audio conditioning (denoiser input)", "audio latents (first call)")
                 if sampling and attachment(sampling[0], a) is not None]
        check(len(audio) == 2, f"{n}: the denoiser's audio context and audio latents analysed",
              audio)
        labels = sampling[0]["labels"] if sampling else {}
        check(all(labels.get(k) == str(float(fam.call[k])) for k in ("stg_scale", "modality_scale")),
              f"{n}: the guidance settings stg_scale and modality_scale are labels", labels)
    checks = checks_of(doc)
    failed = [f"{c[1]} {c[2]}: {c[3]} ({c[5]})" for c in checks if not c[4]]
    row["checks"] = f"{sum(c[4] for c in checks)}/{len(checks)} passed"
    row["verdict"] = "all pass" if checks and not failed else ("; ".join(failed) or "no checks")
    check(checks and not failed, f"{n} declared {fam.family}: every family check passes", failed)
    check(inst.hook_errors == 0 and doc["monitoring_errors"] == [],
          f"{n}: hook_errors == 0, no monitoring errors", (inst.hook_errors, doc["monitoring_errors"]))
    if n in WRONG:  # the checks can fail: the same pipeline declared another family
        declared, want_failed = WRONG[n]
        wrong = genscope.Monitor(nvml=False).start_run(pipeline="diffusers", model=n)
        with gt.instrument(pipe, wrong, family=declared):
            generate(pipe, fam, 1)
        failed_wrong = {(c[1], c[3]) for c in checks_of(wrong.finish()) if not c[4]}
        check(want_failed <= failed_wrong,
              f"{n} declared {declared}: the checks {sorted(want_failed)} fail",
              sorted(failed_wrong))
    row["seconds"] = time.perf_counter() - started
    return row


def vm_hwm():
    """The process's peak resident memory (bytes), from /proc/self/status."""
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))


def check_video_stats():
    """A decoded video's statistics in bounded host memory: a (1, 81, 3, 240, 416) float32
    video (97 MB, the (B, F, C, H, W) permuted view diffusers returns, not contiguous)
    analysed in host pieces of at most 8 MiB (what a GPU tensor gets by default;
    host_piece_bytes forces it on the CPU, where each piece is made contiguous) has the
    statistics of the whole-tensor pass, and the process's peak memory grows by at most 24 MiB
    meanwhile (one 8 MiB host buffer, refilled piece by piece; a whole contiguous copy would
    add 97 MB)."""
    x = torch.randn(1, 3, 81, 240, 416, generator=torch.Generator().manual_seed(3))
    video = x.permute(0, 2, 1, 3, 4)
    run = genscope.Monitor(nvml=False).start_run(pipeline="video", model="stats")
    with run.step("vae_decode", "in pieces") as step:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current resident size
        except OSError as e:
            check(False, "video statistics: /proc/self/clear_refs resets the peak memory", e)
        before = vm_hwm()
        step.analyze_tensor("video", video, "image", host_piece_bytes=8 << 20, threads=1)
        grown = vm_hwm() - before
    with run.step("vae_decode", "whole") as step:
        step.analyze_tensor("video", video, "image", threads=1)
    doc = run.finish()
    pieces, whole = (attachment(s, "video") for s in doc["steps"])
    a, b = pieces["stats"], whole["stats"]
    exact = ("numel", "bytes", "finite_count", "nan_count", "zero_count", "min", "max",
             "abs_max", "hash")
    check(all(a[k] == b[k] for k in exact) and
          all(abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(b[k])) for k in ("mean", "std", "l2_norm")),
          "video statistics in host pieces equal the whole-tensor pass (counts, range, hash "
          "exact; mean, std, norm to 1e-9)", (a, b))
    origin = pieces["origin"]
    check(origin.get("pieces", 0) > 1 and origin.get("piece_bytes", 1 << 40) <= 8 << 20 and
          pieces["shape"] == list(video.shape),
          f"video statistics: {origin.get('pieces')} host pieces of at most 8 MiB", origin)
    check(grown <= 24 << 20,
          f"video statistics in pieces: peak memory grew {grown / 2**20:.1f} MiB (<= 24 MiB) for "
          f"a {video.numel() * 4 / 2**20:.0f} MiB video", grown)
    return grown


def table(rows, steps):
    head = ("| family | steps recorded | iterations | model calls | evaluations / step | "
            "conditioning seen (denoiser input) | classified as (undeclared) | family verdict "
            "(all tensors, undeclared) | family checks | verdict (family declared) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['family']} | — | — | — | — | — | — | — | — | ERROR: {r['error']} |")
            continue
        lines.append(
            f"| {r['family']} | {r['before_steps'] + ', ' if r.get('before_steps') else ''}"
            f"{r['text_encoding']} text_encoding, "
            f"{r['more_steps'] + ', ' if r.get('more_steps') else ''}sampling, vae_decode"
            f"{', ' + r['after_steps'] if r.get('after_steps') else ''} | "
            f"{r.get('iterations')} of {steps} | {r.get('model_calls') or 0:g}"
            f"{' (' + r['experts'] + ')' if 'experts' in r else ''} | "
            f"{r.get('evaluations_per_step') or 0:g} | {r.get('conditioning')} | {r.get('classified')} | "
            f"{r.get('family_verdict')} | "
            f"{r['checks']} | "
            f"{r['verdict']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", help="write the markdown table here")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", help="comma-separated family names")
    args = ap.parse_args()
    import diffusers
    import transformers
    versions = (f"diffusers {diffusers.__version__}, transformers {transformers.__version__}, "
                f"torch {torch.__version__}, CPU")
    print(f"# {versions}", flush=True)
    only = set(args.only.split(",")) if args.only else None
    if not only or "video-stats" in only:
        check_video_stats()
    rows = []
    for fam in FAMILIES:
        if only and fam.name not in only:
            continue
        try:
            rows.append(run_family(fam, args.steps))
        except Exception as e:  # a pipeline that does not build or run: a failure, reported
            import traceback
            traceback.print_exc()
            check(False, f"{fam.name}: the pipeline runs", f"{type(e).__name__}: {e}")
            rows.append({"family": fam.name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
        print(f"# {fam.name}: {rows[-1].get('seconds', 0):.1f} s", flush=True)
    if not only or any(name.startswith("settings") for name in only):
        modern_settings.main(args.steps, only)
    text = f"Measured on {versions}, {args.steps} steps:\n\n" + table(rows, args.steps)
    print(text)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(f"{len(FAILED)} check(s) failed" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
