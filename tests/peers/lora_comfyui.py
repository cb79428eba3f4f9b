#!/usr/bin/python3
"""genscope's ComfyUI loader profile against ComfyUI's own LoRA code (v0.3.18, the peer in
../shared/peers/comfyui), case by case.

usage: lora_comfyui.py MODELS_DIR GENSCOPE [SD15_CHECKPOINT]
       (run from ComfyUI's directory with its sources on PYTHONPATH: tests/peers/lora_comfyui.sh)

MODELS_DIR is the output of tests/data/make_models.py: the (base, LoRA) pairs of
comfy_cases.json and, in comfy_models.json, the model ComfyUI builds from each base (its
state-dict keys, the unet config the generator gives it, where each key lives in the file).
For every pair this script runs ComfyUI's real code — comfy.lora.model_lora_keys_unet and
model_lora_keys_clip on a stand-in model exposing those keys (and the model_base class whose
isinstance branches apply), comfy.lora_convert.convert_lora and comfy.lora.load_lora on the
LoRA file's real tensors — then ModelPatcher.add_patches' rule (a patch key the model's state
dict lacks is "NOT LOADED"), and compares with `genscope lora inspect LORA --base BASE --json`:
the "lora key not loaded" keys, the NOT LOADED keys, a KeyError, and per module the weights it
patches: file tensors, weights the file lacks (a pruned file: missing_from_file) and the
loader's built-in identity text_projection (builtin_patched).

With SD15_CHECKPOINT (the peers' random-weight SD1.5, real layout), the LoRAs of the SD1.x /
SDXL pairs are compared once more on ComfyUI's own model of that file: model_detection's
config, get_model and the clip target built on the meta device from the file's header.

Cases whose rules changed after v0.3.18 are listed in NEWER_RULES with the reason and are
not compared (genscope follows the newer revision cited in docs/lora.md). Exit 0 when every
compared case agrees, 1 otherwise; prints "agreement: N of M cases ..." lines.
"""
import json
import logging
import os
import struct
import subprocess
import sys
import types

ARGS = sys.argv[1:]
sys.argv = [sys.argv[0], "--cpu"]  # what ComfyUI's argument parser reads
import comfy.options  # noqa: E402

comfy.options.enable_args_parsing()  # --cpu: this torch has no CUDA
import comfy.lora  # noqa: E402
import comfy.lora_convert  # noqa: E402
import comfy.model_base  # noqa: E402
import comfy.model_detection  # noqa: E402
import comfy.utils  # noqa: E402
import torch  # noqa: E402

# (LoRA, base) -> why ComfyUI v0.3.18 is not the reference (read in its comfy/lora.py).
NEWER_RULES = {
    ("flux_twice.safetensors", "flux.safetensors"):
        "'<single block>.linear1_qkv' names are mapped since after v0.3.18",
    ("qwen_peft.safetensors", "qwen_image.safetensors"):
        "v0.3.18 has no Qwen-Image branch ('transformer.' names) nor '.lora_B.default.weight' names",
}

# Suffixes of the tensor a patch tuple starts with -> the module (load_lora's x) it came from.
FIRST_TENSOR = [".lora_up.weight", "_lora.up.weight", ".lora_B.weight", ".lora.up.weight",
                ".lora_linear_layer.up.weight", ".lora_B", ".hada_w1_a", ".lokr_w1_a", ".lokr_w1",
                ".lokr_w2_a", ".lokr_w2", ".a1.weight", ".w_norm", ".b_norm", ".diff_b", ".diff",
                ".set_weight"]


class StandIn(torch.nn.Module):
    """What model_lora_keys_unet / _clip read of a model: state_dict() keys, model_config."""
    def __init__(self, keys, config):
        torch.nn.Module.__init__(self)  # not the model class's __init__: nothing is built
        self._keys = list(keys)
        self.model_config = types.SimpleNamespace(unet_config=config)

    def state_dict(self, *args, **kwargs):
        return dict.fromkeys(self._keys)


def model_class(family):
    return {"sd3": comfy.model_base.SD3, "flux": comfy.model_base.Flux}.get(family, comfy.model_base.BaseModel)


class NotLoadedLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.keys = []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("lora key not loaded: "):
            self.keys.append(msg[len("lora key not loaded: "):])


def patch_module(patch, names_by_id):
    """The LoRA module whose tensors a load_lora patch holds."""
    kind, data = patch
    first = next(t for t in data if isinstance(t, torch.Tensor))
    key = names_by_id[id(first)]
    for s in FIRST_TENSOR:
        if key.endswith(s):
            return key[:-len(s)]
    raise AssertionError(f"unknown patch tensor {key}")


def key_text(k):
    """How ComfyUI prints a patch_dict key (and genscope writes it)."""
    if isinstance(k, tuple):
        if len(k) > 2:
            return "('{}', None, {})".format(k[0], k[2])
        return repr(k)
    return k


def stand_in(model):
    """The diffusion model and text encoder ComfyUI's key maps read, from a model description."""
    cls = model_class(model["family"])
    unet = type("StandIn" + cls.__name__, (StandIn, cls), {})(model["model_sdk"], model["config"])
    return unet, StandIn(model["clip_sdk"], {}) if model["clip_sdk"] else None


def real_checkpoint(path):
    """ComfyUI's own model of a checkpoint, built as CheckpointLoaderSimple builds it
    (comfy/sd.py load_state_dict_guess_config: model_detection, get_model, the clip target)
    on the meta device from the file's header, and a description of where each key lives."""
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    header.pop("__metadata__", None)
    dtypes = {"F16": torch.float16, "F32": torch.float32, "BF16": torch.bfloat16, "I64": torch.int64}
    sd = {k: torch.empty(v["shape"], dtype=dtypes[v["dtype"]], device="meta") for k, v in header.items()}
    prefix = comfy.model_detection.unet_prefix_from_state_dict(sd)
    config = comfy.model_detection.model_config_from_unet(sd, prefix)
    unet = config.get_model(sd, prefix, device="meta")
    clip = config.clip_target(state_dict=sd).clip(device="meta", dtype=torch.float32)
    # Where each model key comes from: BaseModel.load_model_weights strips the UNet prefix;
    # process_clip_state_dict renames the text encoder's keys (same tensor objects).
    file_of = {"diffusion_model." + k[len(prefix):]: k for k in header if k.startswith(prefix)}
    name_of = {id(t): k for k, t in sd.items()}
    for k, t in config.process_clip_state_dict(dict(sd)).items():
        if id(t) in name_of:
            file_of[k] = name_of[id(t)]
    model_sdk = [k for k in unet.state_dict() if k.startswith("diffusion_model.")]
    clip_sdk = list(clip.state_dict())
    absent = [k for k in model_sdk + clip_sdk if k not in file_of]
    # comfy/clip_model.py: CLIPTextModel's text_projection is identity-initialised.
    identity = [k for k in absent if k.endswith(".transformer.text_projection.weight")]
    description = {"model_sdk": model_sdk, "clip_sdk": clip_sdk, "file_of": file_of, "identity": identity,
                   "missing": [k for k in absent if k not in identity]}
    return (unet, clip), description


def comfyui(lora_path, models, model):
    """What ComfyUI v0.3.18 does with a LoRA on `models` (diffusion model, text encoder),
    in genscope's terms; `model` describes where their keys live in the base file."""
    unet, clip = models
    key_map = {}
    comfy.lora.model_lora_keys_unet(unet, key_map)
    if clip is not None:
        comfy.lora.model_lora_keys_clip(clip, key_map)
    lora = comfy.utils.load_torch_file(lora_path)
    lora = comfy.lora_convert.convert_lora(lora)
    names_by_id = {id(v): k for k, v in lora.items()}
    log = NotLoadedLog()
    logging.getLogger().addHandler(log)
    try:
        patches = comfy.lora.load_lora(lora, key_map)
    except KeyError as e:
        return {"error": "KeyError: {}".format(e.args[0])}
    finally:
        logging.getLogger().removeHandler(log)
    sdk = set(model["model_sdk"]) | set(model["clip_sdk"])
    missing, identity = set(model["missing"]), set(model["identity"])
    out = {"error": None, "lora_key_not_loaded": sorted(log.keys), "not_loaded": [], "missing_from_file": [],
           "applied": {}, "builtin": {}}
    for k, patch in patches.items():
        key = k if isinstance(k, str) else k[0]
        if key not in sdk:  # ModelPatcher.add_patches: `if key in model_sd`
            out["not_loaded"].append(key_text(k))
            continue
        module = patch_module(patch, names_by_id)
        if key in missing:
            out["missing_from_file"].append(key_text(k))
        elif key in identity:
            out["builtin"].setdefault(module, set()).add(key)
        else:
            f = model["file_of"][key]
            out["applied"].setdefault(module, set()).add(f if isinstance(f, str) else f[0])
    out["not_loaded"].sort()
    out["missing_from_file"].sort()
    return out


def genscope_answer(genscope, lora_path, base_path):
    r = subprocess.run([genscope, "lora", "inspect", lora_path, "--base", base_path, "--json"],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"genscope lora inspect failed ({r.returncode}): {r.stderr}")
    fit = json.loads(r.stdout)["fit"]
    if fit["loader_failures"]:
        msg = fit["loader_failures"][0]["message"]
        key = msg.split("KeyError: '")[1].split("'")[0] if "KeyError: '" in msg else msg
        return {"error": "KeyError: {}".format(key)}
    out = {"error": None, "lora_key_not_loaded": sorted(fit["lora_key_not_loaded"]),
           "not_loaded": sorted(fit["not_loaded"]), "missing_from_file": sorted(fit["missing_from_file"]),
           "applied": {}, "builtin": {}}
    for t in fit["patched"]:  # weights and biases, each on its own as in ComfyUI's patch dict
        out["applied"].setdefault(t["module"], set()).add(t["key"])
    for b in fit["builtin_patched"]:
        out["builtin"].setdefault(b["module"], set()).add(b["weight"])
    return out


def compare(name, want, got):
    if want == got:
        print(f"equal: {name}")
        return True
    print(f"DIFFERENT: {name}")
    for field in want:
        if want[field] != got.get(field):
            print(f"  {field}:\n    comfyui:  {want[field]}\n    genscope: {got.get(field)}")
    return False


def main(models_dir, genscope, checkpoint):
    with open(os.path.join(models_dir, "comfy_cases.json")) as f:
        cases = json.load(f)
    with open(os.path.join(models_dir, "comfy_models.json")) as f:
        models = json.load(f)
    compared = agree = 0
    for case in cases:
        name = "{} on {}".format(case["lora"], case["base"])
        why = NEWER_RULES.get((case["lora"], case["base"]))
        if why:
            print(f"not compared: {name}: {why}")
            continue
        compared += 1
        lora = os.path.join(models_dir, case["lora"])
        model = models[case["base"]]
        agree += compare(name, comfyui(lora, stand_in(model), model),
                         genscope_answer(genscope, lora, os.path.join(models_dir, case["base"])))
    print(f"agreement: {agree} of {compared} cases equal to ComfyUI v0.3.18 (stand-in models of the generated bases)")
    total = (agree, compared)
    if checkpoint:
        # The LoRAs of the SD1.x / SDXL cases on the real SD1.5 layout, with ComfyUI's own model of it.
        real, model = real_checkpoint(checkpoint)
        compared = agree = 0
        for lora_name in sorted({c["lora"] for c in cases if c["base"].startswith(("sd15", "sdxl"))}):
            compared += 1
            lora = os.path.join(models_dir, lora_name)
            agree += compare(f"{lora_name} on {os.path.basename(checkpoint)}", comfyui(lora, real, model),
                             genscope_answer(genscope, lora, checkpoint))
        print(f"agreement: {agree} of {compared} cases equal to ComfyUI v0.3.18 (its model of {os.path.basename(checkpoint)})")
        total = (total[0] + agree, total[1] + compared)
    print(f"agreement: {total[0]} of {total[1]} cases in all")
    return 0 if total[0] == total[1] and total[1] > 0 else 1


if __name__ == "__main__":
    if len(ARGS) not in (2, 3):
        raise SystemExit("usage: lora_comfyui.py MODELS_DIR GENSCOPE [SD15_CHECKPOINT]")
    sys.exit(main(ARGS[0], ARGS[1], ARGS[2] if len(ARGS) == 3 else None))
