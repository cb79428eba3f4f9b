#!/usr/bin/python3
"""genscope's ComfyUI loader profile against ComfyUI's own LoRA code (the ComfyUI checkout of
GENSCOPE_COMFYUI_DIR: tests/peers/lora_comfyui.sh), case by case.

usage: lora_comfyui.py MODELS_DIR GENSCOPE SD15_CHECKPOINT ANSWERS_DIR
       (run from ComfyUI's directory with ComfyUI's python, its folder on PYTHONPATH)

ANSWERS_DIR holds what this ComfyUI answered to the test-data generators' questions
(tests/data/record_comfy_answers.py: comfy.sd.load_lora_for_models on a stand-in model with
the keys ComfyUI builds from each base, the model_base class whose isinstance branches apply;
tests/data/comfy_live.py), and MODELS_DIR the output of tests/data/make_models.py made with
those answers: comfy_cases.json per (base, LoRA) pair in the base file's terms. Each pair is
compared with `genscope lora inspect LORA --base BASE --json`: the "lora key not loaded" keys,
the NOT LOADED keys, a KeyError, and per module the weights it patches: file tensors, weights
the file lacks (a pruned file: missing_from_file) and the loader's built-in identity
text_projection (builtin_patched).

Then the LoRAs of the SD1.x / SDXL pairs once more on ComfyUI's own model of SD15_CHECKPOINT
(random weights, the real SD1.5 layout: tests/peers/make_sd15_checkpoint.py):
model_detection's config, get_model and the clip target built on the meta device from the
file's header.

Last, ANSWERS_DIR against the committed fixtures (tests/fixtures/comfy_answers/): when they
were recorded with this ComfyUI version they must be equal; otherwise the differing answers
are listed.

Cases whose rules ComfyUI added after the version run are listed in NEWER_RULES and are not
compared (genscope follows the newer revision, docs/lora.md). Exit 0 when every compared case
agrees, 1 otherwise; prints "agreement: N of M cases ..." lines.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data"))
import comfy_answers  # noqa: E402
import comfy_live  # noqa: E402

comfy_live.start()
comfy, torch = comfy_live.comfy, comfy_live.torch

# (LoRA, base) -> (the last ComfyUI version without the rule, what the rule is; comfy/lora.py).
NEWER_RULES = {
    ("flux_twice.safetensors", "flux.safetensors"):
        ((0, 3, 56), "'<single block>.linear1_qkv' names are mapped since after v0.3.56"),
    ("qwen_peft.safetensors", "qwen_image.safetensors"):
        ((0, 3, 49), "the Qwen-Image branch ('transformer.' names) and '.lora_B.default.weight' names "
                     "came after v0.3.49"),
}


def version_tuple(v):
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return (0,)


def view(case):
    """What is compared of a case (comfy_cases.json's form)."""
    if case["error"]:
        return {"error": case["error"]}
    return {"error": None, "lora_key_not_loaded": sorted(case["lora_key_not_loaded"]),
            "not_loaded": sorted(case["not_loaded"]), "missing_from_file": sorted(case["missing_from_file"]),
            "applied": {m: set(v) for m, v in case["applied"].items()},
            "builtin": {m: set(v) for m, v in case["builtin"].items()}}


def real_checkpoint(path):
    """ComfyUI's own model of a checkpoint, built as CheckpointLoaderSimple builds it
    (comfy/sd.py load_state_dict_guess_config: model_detection, get_model, the clip target)
    on the meta device from the file's header, and where each of its keys lives in the file."""
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
    identity = {k for k in absent if k.endswith(".transformer.text_projection.weight")}
    return (unet, clip), file_of, {k for k in absent if k not in identity}, identity


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


def fixtures_check(answers_dir, version):
    """The committed fixtures against this ComfyUI's answers: (equal, compared) or None when the
    fixtures were recorded with another version (the differences are printed either way)."""
    same = compared = 0
    recorded_with = None
    for file in comfy_answers.FILES.values():
        with open(os.path.join(comfy_answers.FIXTURES, file)) as f:
            fixed = json.load(f)
        with open(os.path.join(answers_dir, file)) as f:
            live = json.load(f)
        recorded_with = fixed["comfyui"]
        for name in sorted(set(fixed["answers"]) | set(live["answers"])):
            compared += 1
            if fixed["answers"].get(name) == live["answers"].get(name):
                same += 1
            else:
                print(f"fixture differs from ComfyUI {version}: {file} {name}")
    # The merge results (float32): equal up to float32 rounding (another torch or BLAS may
    # round a product differently), and a weight ComfyUI left unpatched is left unpatched.
    for file in comfy_answers.TENSOR_FILES.values():
        fixed = comfy_answers.read_tensor_answers(os.path.join(comfy_answers.FIXTURES, file))
        live = comfy_answers.read_tensor_answers(os.path.join(answers_dir, file))
        for name in sorted(set(fixed) | set(live)):
            compared += 1
            a, b = fixed.get(name), live.get(name)
            if a is not None and b is not None and a["inputs"] == b["inputs"] and a["answer"].keys() == b["answer"].keys() \
                    and all(np.allclose(a["answer"][k], b["answer"][k], rtol=1e-6, atol=1e-7) for k in a["answer"]):
                same += 1
            else:
                print(f"fixture differs from ComfyUI {version}: {file} {name}")
    print(f"fixtures (recorded with ComfyUI {recorded_with}): {same} of {compared} answers equal to ComfyUI {version}'s")
    return (same, compared) if recorded_with == version else None


def main(models_dir, genscope, checkpoint, answers_dir):
    version = comfy_live.version()
    with open(os.path.join(models_dir, "comfy_cases.json")) as f:
        cases = json.load(f)
    compared = agree = 0
    for case in cases:
        name = "{} on {}".format(case["lora"], case["base"])
        rule = NEWER_RULES.get((case["lora"], case["base"]))
        if rule and version_tuple(version) <= rule[0]:
            print(f"not compared: {name}: {rule[1]}")
            continue
        compared += 1
        lora = os.path.join(models_dir, case["lora"])
        agree += compare(name, view(case), genscope_answer(genscope, lora, os.path.join(models_dir, case["base"])))
    print(f"agreement: {agree} of {compared} cases equal to ComfyUI {version} (stand-in models of the generated bases)")
    total = (agree, compared)
    # The LoRAs of the SD1.x / SDXL cases on the real SD1.5 layout, with ComfyUI's own model of it.
    models, file_of, missing, identity = real_checkpoint(checkpoint)
    compared = agree = 0
    for lora_name in sorted({c["lora"] for c in cases if c["base"].startswith(("sd15", "sdxl"))}):
        compared += 1
        lora = os.path.join(models_dir, lora_name)
        answer = comfy_live.lora_loader(models, comfy.utils.load_torch_file(lora))
        want = view(comfy_answers.in_file_terms(answer, file_of, missing, identity))
        agree += compare(f"{lora_name} on {os.path.basename(checkpoint)}", want,
                         genscope_answer(genscope, lora, checkpoint))
    print(f"agreement: {agree} of {compared} cases equal to ComfyUI {version} (its model of {os.path.basename(checkpoint)})")
    total = (total[0] + agree, total[1] + compared)
    fixtures = fixtures_check(answers_dir, version)
    if fixtures is not None:
        total = (total[0] + fixtures[0], total[1] + fixtures[1])
    print(f"agreement: {total[0]} of {total[1]} cases in all")
    return 0 if total[0] == total[1] and total[1] > 0 else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 4:
        raise SystemExit("usage: lora_comfyui.py MODELS_DIR GENSCOPE SD15_CHECKPOINT ANSWERS_DIR")
    sys.exit(main(*args))
