"""genscope.torch.instrument with the settings diffusers users turn on (issue 26, item 6), on the
tiny real Flux.1-dev pipeline (modern_pipelines.flux), run by modern_check.py (--only settings,
or settings-<case>):

- model CPU offload (``enable_model_cpu_offload``; accelerate's hooks, which diffusers removes and
  adds again after every pipeline call), enabled before ``instrument`` and inside its block;
- group offloading (``enable_group_offload``, block level; diffusers' hook registry);
- VAE tiling and slicing (tiles forced small, two images per prompt);
- ``torch.compile`` of the transformer, wrapped (``OptimizedModule``) and in place
  (``module.compile()``, before the block and inside it), inductor on the CPU;
- an attention backend (``set_attention_backend("native")``);
- the whole pipeline in bfloat16 (``pipe.to(dtype=torch.bfloat16)``, as Flux and Wan are run):
  every tensor analysed as BF16;
- LoRA adapters through PEFT: ``load_lora_weights`` before the block and inside it,
  ``set_adapters`` with weights, ``fuse_lora``.

For each case: two generations inside one ``instrument`` block, against two plain generations of
a pipeline built and set up the same way: outputs bit-identical; per generation the two text
steps, one sampling step (iterations = scheduler steps = steps asked, a model call per step),
one ``vae.decode`` step; the setting's label on each sampling step and the run; the class behind
a compile wrapper as ``model_class``; no monitoring error, no hook error (in particular no
"replaced while instrumented"); after the block no genscope wrapper left in any module (forward,
accelerate's ``_old_forward``, ``_compiled_call_impl``, ``to``).

Not run here: ``enable_sequential_cpu_offload`` (on the CPU it fails without genscope too,
in accelerate's meta-device offload: ``new() received an invalid combination of arguments``),
and moves between devices (on the CPU an offload moves nothing; the move steps are checked with
the meta device in python/tests/test_torch_settings.py).
"""
import torch

import genscope
import genscope.torch as gt
import modern_pipelines as pipelines
from check_steps import check

CALL = dict(prompt="a photo of a cat", height=64, width=64, guidance_scale=3.5)
TEXT = ["text_encoder (prompt)", "text_encoder_2 (prompt)"]


def _lora_state(pipe, rank=2, seed=0):
    """A LoRA in diffusers' key layout for the tiny transformer's attention projections."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, module in pipe.transformer.named_modules():
        if name.endswith(("attn.to_q", "attn.to_k", "attn.to_v")):
            state[f"transformer.{name}.lora_A.weight"] = torch.randn(
                rank, module.in_features, generator=g) * 0.1
            state[f"transformer.{name}.lora_B.weight"] = torch.randn(
                module.out_features, rank, generator=g) * 0.1
    return state


def _setup(case, pipe):
    """Applies the case's setting before the block."""
    if case == "model-offload":
        pipe.enable_model_cpu_offload(device="cpu")
    elif case == "group-offload":
        pipe.transformer.enable_group_offload(onload_device=torch.device("cpu"),
                                              offload_device=torch.device("cpu"),
                                              offload_type="block_level", num_blocks_per_group=1)
    elif case == "vae-tiling-slicing":
        pipe.vae.enable_tiling()
        pipe.vae.enable_slicing()
        pipe.vae.tile_sample_min_size, pipe.vae.tile_latent_min_size = 32, 4  # 64x64 in tiles
    elif case == "compile":
        pipe.transformer = torch.compile(pipe.transformer)
    elif case == "compile-in-place":
        pipe.transformer.compile()
    elif case == "attention-backend":
        pipe.transformer.set_attention_backend("native")
    elif case == "lora":
        pipe.load_lora_weights(_lora_state(pipe, seed=1), adapter_name="style")
    elif case == "bfloat16":
        pipe.to(dtype=torch.bfloat16)


def _inside(case, pipe, i):
    """What the case does inside the block before generation i (0, 1)."""
    if case == "model-offload-inside" and i == 0:
        pipe.enable_model_cpu_offload(device="cpu")
    if case == "compile-in-place-inside" and i == 0:
        pipe.transformer.compile()
    if case == "lora" and i == 0:
        pipe.load_lora_weights(_lora_state(pipe, seed=2), adapter_name="detail")
        pipe.set_adapters(["style", "detail"], adapter_weights=[1.0, 0.5])
    if case == "lora" and i == 1:
        pipe.fuse_lora()


CASES = {
    # case: (labels every sampling step must have, extra steps before generation i)
    "model-offload": ({"offload": "model_cpu_offload"}, {}),
    "model-offload-inside": ({"offload": "model_cpu_offload"}, {}),
    "group-offload": ({"offload": "group_offload"}, {}),
    "vae-tiling-slicing": ({"vae_tiling": "true", "vae_slicing": "true"}, {}),
    "compile": ({"compiled": "transformer", "model_class": "FluxTransformer2DModel"}, {}),
    "compile-in-place": ({"compiled": "transformer"}, {}),
    "compile-in-place-inside": ({"compiled": "transformer"}, {}),
    "attention-backend": ({"attention_backend": "native"}, {}),
    "bfloat16": ({}, {}),
    "lora": ({"lora_adapters": "style,detail"},
             {0: ["load_lora_weights (detail)", "set_adapters (style,detail)"],
              1: ["fuse_lora"]}),
}


def _generate(case, pipe, steps, inside=None):
    outs = []
    for i in range(2):
        if inside is not None:
            inside(case, pipe, i)
        g = torch.Generator().manual_seed(7 + i)
        extra = dict(num_images_per_prompt=2) if case == "vae-tiling-slicing" else {}
        outs.append(pipe(**CALL, **extra, num_inference_steps=steps, generator=g,
                         output_type="pt").images)
    return outs


def _leftovers(pipe):
    """Module attributes that still hold a genscope wrapper after the block."""
    found = []
    for name in ("text_encoder", "text_encoder_2", "transformer", "vae"):
        module = getattr(pipe, name, None)
        for slot in ("forward", "_old_forward", "_compiled_call_impl", "to", "encode", "decode",
                     "__getstate__"):
            value = getattr(module, "__dict__", {}).get(slot)
            fn = getattr(value, "__func__", value)
            if "genscope" in (getattr(fn, "__module__", "") or "") or \
                    "Instrumentation" in getattr(fn, "__qualname__", ""):
                found.append(f"{name}.{slot}")
    for slot in ("load_lora_weights", "set_adapters", "fuse_lora", "enable_model_cpu_offload"):
        value = pipe.__dict__.get(slot)
        if value is not None and "Instrumentation" in getattr(value, "__qualname__", ""):
            found.append(f"pipe.{slot}")
    return found


def run_case(case, steps):
    labels, extra_steps = CASES[case]
    plain_pipe = pipelines.flux()
    _setup(case, plain_pipe)
    plain = _generate(case, plain_pipe, steps, _inside)
    del plain_pipe
    pipe = pipelines.flux()
    _setup(case, pipe)
    run = genscope.Monitor(nvml=False).start_run(pipeline="diffusers", model=f"flux-dev {case}")
    with gt.instrument(pipe, run) as inst:
        out = _generate(case, pipe, steps, _inside)
    doc = run.finish()
    n = f"settings {case}"
    check(all(torch.equal(a, b) for a, b in zip(plain, out)),
          f"{n}: output bit-identical with and without instrument (2 generations)",
          [float((a - b).abs().max()) for a, b in zip(plain, out)])
    seen = [(s["kind"], s["name"]) for s in doc["steps"]]
    want = []
    for i in range(2):
        want += [("lora_application", name) for name in extra_steps.get(i, [])]
        want += [("text_encoding", t) for t in TEXT]
        want += [("sampling", "denoise (transformer)"), ("vae_decode", "vae.decode")]
    check(seen == want, f"{n}: steps per generation {[s[1] for s in want[:4]]}", seen)
    sampling = [s for s in doc["steps"] if s["kind"] == "sampling"]
    for s in sampling:
        c = s["counters"]
        iterations = s["iterations"]["count"] if s.get("iterations") else 0
        check(iterations == steps and c.get("scheduler_steps") == steps and
              c.get("model_calls") == steps,
              f"{n}: {steps} iterations, scheduler steps and model calls", (iterations, c))
        missing = {k: (v, s["labels"].get(k)) for k, v in labels.items()
                   if s["labels"].get(k) != v}
        check(not missing, f"{n}: sampling labels {labels}", missing)
    run_missing = {k: v for k, v in labels.items()
                   if k != "model_class" and doc["labels"].get(k) != v}
    if case != "lora":  # the run's labels are the first generation's settings
        check(not run_missing, f"{n}: run labels {labels}", run_missing)
    if case == "bfloat16":  # what most Flux / Wan users run: analysed as such, checks pass
        dtypes = {(s["name"], a["name"]): a["data"].get("dtype") for s in doc["steps"]
                  for a in s["attachments"] if isinstance(a.get("data"), dict) and "dtype" in a["data"]}
        failed = [c for s in doc["steps"] for a in s["attachments"]
                  if isinstance(a.get("data"), dict) for c in a["data"].get("checks", [])
                  if not c.get("passed")]
        check(dtypes and set(dtypes.values()) == {"BF16"} and not failed,
              f"{n}: every tensor analysed as BF16, no check failing", (dtypes, failed))
    if case == "lora":
        lora = [s for s in doc["steps"] if s["kind"] == "lora_application"]
        check(all(s["counters"].get("lora_layers", 0) > 0 for s in lora),
              f"{n}: each LoRA step counts the transformer's LoRA layers",
              [s["counters"] for s in lora])
    check(inst.hook_errors == 0 and doc["monitoring_errors"] == [],
          f"{n}: hook_errors == 0, no monitoring errors",
          (inst.hook_errors, doc["monitoring_errors"]))
    left = _leftovers(pipe)
    check(not left, f"{n}: no genscope wrapper left after the block", left)
    return doc


def main(steps, only=None):
    for case in CASES:
        if only is not None and "settings" not in only and f"settings-{case}" not in only:
            continue
        try:
            run_case(case, steps)
        except Exception as e:  # noqa: BLE001 - a case that does not run: a failure, reported
            import traceback
            traceback.print_exc()
            check(False, f"settings {case}: the pipeline runs", f"{type(e).__name__}: {e}")
