"""What ComfyUI's own code answered for the test-data generators (tests/data/make_models.py,
make_merge_cases.py), read from the fixtures in tests/fixtures/comfy_answers/ that
tests/data/record_comfy_answers.py records by running a ComfyUI checkout's real functions on
the same inputs:

  lora_loader.json        per (LoRA, base) pair, comfy.sd.load_lora_for_models on the model
                          ComfyUI builds from the base: the "lora key not loaded" and "NOT
                          LOADED" lines, the patches with the LoRA module each came from, the
                          modules a later name overwrote, or the KeyError
  flux_to_diffusers.json  comfy.utils.flux_to_diffusers per Flux config
  calculate_weight.safetensors
                          per merge case of make_merge_cases.py, the weights ComfyUI's
                          comfy.lora.calculate_weight gives (float32, as its ModelPatcher
                          computes them) with the patches comfy.lora.load_lora builds, added as
                          ModelPatcher.add_patches adds them: "<case>/<key>" per patched key, the
                          fingerprints in the file's metadata

Each answer carries a fingerprint of its inputs (the model's keys, shapes, family and config;
the LoRA's tensor names and shapes): a generator whose inputs changed gets a named error
saying to record the answers again, never a stale answer. A calculate_weight answer's
fingerprint also covers the tensors' values and the targets.
"""
import hashlib
import json
import os
import struct

import numpy as np

FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "comfy_answers"))
# Another set of answers (tests/peers/lora_comfyui.sh: those of the ComfyUI it runs).
DIR = os.environ.get("GENSCOPE_COMFY_ANSWERS") or FIXTURES
FILES = {"lora_loader": "lora_loader.json", "flux_to_diffusers": "flux_to_diffusers.json"}
TENSOR_FILES = {"calculate_weight": "calculate_weight.safetensors"}  # answers of tensors

live = None      # record_comfy_answers.py: an object with lora_loader(), flux_to_diffusers()
                 # and calculate_weight()
recorded = {kind: {} for kind in {**FILES, **TENSOR_FILES}}  # what `live` answered in this process
_fixtures = {}


class NoRecordedAnswer(Exception):
    """The fixtures have no ComfyUI answer for these inputs."""


def fingerprint(inputs):
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _answer(kind, name, inputs, ask):
    fp = fingerprint(inputs)
    if live is not None:
        answer = ask()
        recorded[kind][name] = {"inputs": fp, "answer": answer}
        return answer
    if kind not in _fixtures:
        if kind in TENSOR_FILES:
            _fixtures[kind] = read_tensor_answers(os.path.join(DIR, TENSOR_FILES[kind]))
        else:
            with open(os.path.join(DIR, FILES[kind])) as f:
                _fixtures[kind] = json.load(f)["answers"]
    got = _fixtures[kind].get(name)
    if got is None or got["inputs"] != fp:
        why = "none is recorded" if got is None else "the one recorded was for other inputs"
        raise NoRecordedAnswer(f"no ComfyUI answer for {kind} {name} ({why}): run "
                               "tests/data/record_comfy_answers.sh with GENSCOPE_COMFYUI_DIR set")
    return got["answer"]


def lora_loader(name, model, lora, shapes):
    """ComfyUI's LoraLoader with the LoRA `lora` (tensor name -> tensor; `shapes`: name ->
    shape) on `model` ({family, config, model_sdk, clip_sdk, shapes}); `name` names the pair."""
    inputs = {"model": {k: model[k] for k in ("family", "config", "model_sdk", "clip_sdk", "shapes")},
              "lora": sorted([k, list(s)] for k, s in shapes.items())}
    return _answer("lora_loader", name, inputs, lambda: live.lora_loader(model, lora))


def flux_to_diffusers(config):
    """comfy.utils.flux_to_diffusers(config): {diffusers name: key | (key, (dim, start, rows)) |
    (key, None, function name)}, by name."""
    name = json.dumps(config, sort_keys=True)
    pairs = _answer("flux_to_diffusers", name, config, lambda: live.flux_to_diffusers(config))
    out = {}
    for d, target in pairs:
        if isinstance(target, list):
            target = (target[0], tuple(target[1]) if target[1] is not None else None) + tuple(target[2:])
        out[d] = target
    return out


def _tensor_print(tensors):
    """name -> [dtype, shape, hash of the float64 values] of {name: (dtype, float64 array)}."""
    return {n: [d, list(v.shape), hashlib.sha256(np.ascontiguousarray(v, dtype=np.float64).tobytes()).hexdigest()[:16]]
            for n, (d, v) in tensors.items()}


def calculate_weight(name, base, lora, calls):
    """The weights ComfyUI's calculate_weight gives when the LoRA `lora` is applied to `base`
    (both name -> (stored dtype, float64 array of the stored values)) in `calls`
    ([(strength, strength_model, [target dicts])], comfy_live.calculate_weight describes the
    targets): patched key -> float64 array (ComfyUI's float32 result), in the file's layout;
    `name` names the merge case."""
    inputs = {"base": _tensor_print(base), "lora": _tensor_print(lora), "calls": calls}
    return _answer("calculate_weight", name, inputs, lambda: live.calculate_weight(base, lora, calls))


def write_tensor_answers(path, answers, metadata):
    """answers: name -> {"inputs": fingerprint, "answer": {key: float32 array}} as a
    safetensors file ("<name>/<key>" F32 tensors; the fingerprints in its metadata)."""
    header, blobs, off = {"__metadata__": {**metadata, "inputs": json.dumps(
        {n: a["inputs"] for n, a in sorted(answers.items())}, sort_keys=True)}}, [], 0
    for n, a in sorted(answers.items()):
        for key, v in sorted(a["answer"].items()):
            data = np.ascontiguousarray(v, dtype="<f4").tobytes()
            header[f"{n}/{key}"] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(data)]}
            blobs.append(data)
            off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def read_tensor_answers(path):
    """The answers write_tensor_answers wrote, the tensors as float64 arrays."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    answers = {name: {"inputs": fp, "answer": {}} for name, fp in json.loads(header.pop("__metadata__")["inputs"]).items()}
    for full, e in header.items():
        if e["dtype"] != "F32":
            raise ValueError(f"{path}: {full} is {e['dtype']}, not F32")
        name, key = full.split("/", 1)
        a, b = e["data_offsets"]
        answers[name]["answer"][key] = np.frombuffer(data[a:b], dtype="<f4").reshape(e["shape"]).astype(np.float64)
    return answers


def in_file_terms(answer, file_of, missing, identity):
    """A lora_loader answer in terms of the base file: per LoRA module the file tensors it
    patches (`applied`), the model keys the file lacks (`missing_from_file`: a pruned file) and
    the loader's built-in weights it patches (`builtin`: an identity text_projection).
    file_of: model key -> file key (or (file key, chunk)); missing, identity: model keys."""
    by_module = {}  # the patches on the model, by the LoRA module each came from
    for text, module in answer["patches"]:
        by_module.setdefault(module, []).append(text)
    applied, missing_from_file, builtin = {}, [], {}
    for module, targets in by_module.items():
        for text in targets:
            key = text.split("'")[1] if text.startswith("(") else text
            if key in missing:
                missing_from_file.append(text)
            elif key in identity:  # patched in the model; no file tensor
                builtin.setdefault(module, []).append(key)
            else:
                f = file_of[key]
                applied.setdefault(module, []).append(f if isinstance(f, str) else f[0])
    return {"lora_key_not_loaded": answer["lora_key_not_loaded"], "not_loaded": answer["not_loaded"],
            "missing_from_file": missing_from_file, "applied": {m: sorted(set(v)) for m, v in applied.items()},
            "builtin": {m: sorted(set(v)) for m, v in builtin.items()},
            "shadowed": answer["shadowed"], "error": answer["error"]}
