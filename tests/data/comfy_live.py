"""Calls ComfyUI's own LoRA code (imported from a ComfyUI checkout: comfy.sd.load_lora_for_models,
comfy.lora, comfy.utils) on stand-in models, for tests/data/record_comfy_answers.py (which
records the answers as fixtures) and tests/peers/lora_comfyui.py (which compares them with
genscope). Nothing of ComfyUI is copied here: every answer is what its functions return or log.

Import it with ComfyUI's folder on sys.path and its python (torch and ComfyUI's requirements);
`start()` sets ComfyUI's arguments (--cpu) before comfy.* is imported.

A model is described as tests/data/make_models.py describes it (comfy_models.json): family
("unet", "sd3", "flux", "qwen", "wan"), the unet config, the diffusion model's and the text
encoders' state-dict keys, their shapes where known.
"""
import logging
import sys
import types

comfy = None
torch = None


def start():
    """Imports torch and ComfyUI's modules (as ComfyUI does, with --cpu)."""
    global comfy, torch
    if comfy is not None:
        return
    argv, sys.argv = sys.argv, [sys.argv[0], "--cpu"]  # what ComfyUI's argument parser reads
    try:
        import comfy.options
        comfy.options.enable_args_parsing()
        import comfy.lora  # noqa: F401
        import comfy.lora_convert  # noqa: F401
        import comfy.model_base  # noqa: F401
        import comfy.model_detection  # noqa: F401
        import comfy.model_patcher  # noqa: F401
        import comfy.sd  # noqa: F401
        import comfy.utils  # noqa: F401
        import torch as torch_
    finally:
        sys.argv = argv
    torch = torch_


def version():
    try:
        import comfyui_version
        return comfyui_version.__version__
    except ImportError:
        return "unknown"


class _StandIn:
    """What ComfyUI's key maps and ModelPatcher.add_patches read of a model: state_dict()
    (meta tensors where the shape is known) and model_config.unet_config."""

    def _stand_in(self, keys, shapes, config):
        torch.nn.Module.__init__(self)  # not the model class's __init__: nothing is built
        self._keys = list(keys)
        self._shapes = shapes or {}
        self.model_config = types.SimpleNamespace(unet_config=config)

    def state_dict(self, *args, **kwargs):
        return {k: torch.empty(self._shapes[k], device="meta") if self._shapes.get(k) else None
                for k in self._keys}


def model_class(family):
    """The comfy.model_base class whose isinstance branches model_lora_keys_unet takes."""
    names = {"sd3": "SD3", "flux": "Flux", "qwen": "QwenImage", "wan": "WAN21"}
    return getattr(comfy.model_base, names.get(family, "BaseModel"), comfy.model_base.BaseModel)


def stand_in_models(desc):
    """(diffusion model, text encoder) stand-ins for a model description."""
    start()
    cls = model_class(desc["family"])
    unet_cls = type("StandIn" + cls.__name__, (_StandIn, cls), {"__init__": _StandIn._stand_in})
    clip_cls = type("StandInClip", (_StandIn, torch.nn.Module), {"__init__": _StandIn._stand_in})
    shapes = {k: tuple(s) for k, s in desc.get("shapes", {}).items() if s}
    unet = unet_cls(desc["model_sdk"], shapes, desc["config"])
    clip = clip_cls(desc["clip_sdk"], shapes, {}) if desc["clip_sdk"] else None
    return unet, clip


def _patcher(model):
    return comfy.model_patcher.ModelPatcher(model, load_device=torch.device("cpu"),
                                            offload_device=torch.device("cpu"), size=1)


def _clip(model):
    """A comfy.sd.CLIP around a stand-in text encoder (its clone() copies these)."""
    c = comfy.sd.CLIP(no_init=True)
    c.patcher, c.cond_stage_model = _patcher(model), model
    for name, value in (("tokenizer", None), ("layer_idx", None), ("use_clip_schedule", False),
                        ("apply_hooks_to_conds", None), ("tokenizer_options", {})):
        if not hasattr(c, name):
            setattr(c, name, value)
    return c


def tensor_ids(x):
    """The ids of the tensors a load_lora patch holds (a tuple in older ComfyUI, a weight
    adapter with .weights in newer)."""
    if isinstance(x, torch.Tensor):
        return {id(x)}
    if isinstance(x, (tuple, list)):
        return set().union(*(tensor_ids(y) for y in x)) if x else set()
    if hasattr(x, "weights"):
        return tensor_ids(x.weights)
    return set()


def key_text(k):
    """A patch_dict key as genscope writes it (ComfyUI's own print shows the function object)."""
    if isinstance(k, tuple):
        if len(k) > 2:
            return "('{}', None, {})".format(k[0], getattr(k[2], "__name__", k[2]))
        return repr(k)
    return k


class _Log(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def lora_loader(models, lora):
    """What ComfyUI's LoraLoader does (comfy.sd.load_lora_for_models) with `lora` (name ->
    torch tensor) on `models` (diffusion model, text encoder): its "lora key not loaded" and
    "NOT LOADED" lines, the patches load_lora returns (in its order) with the LoRA module each
    came from, the modules an earlier key-map name wrote and a later one overwrote, or the
    exception it raised."""
    start()
    unet, clip = models
    calls = []
    real_load_lora = comfy.lora.load_lora

    def load_lora(lora_, to_load, *args, **kwargs):  # the real one; its arguments and answer noted
        out = real_load_lora(lora_, to_load, *args, **kwargs)
        calls.append((lora_, to_load, out))
        return out

    log = _Log()
    logging.getLogger().addHandler(log)
    comfy.lora.load_lora = load_lora
    try:
        comfy.sd.load_lora_for_models(_patcher(unet), _clip(clip) if clip is not None else None, lora, 1.0, 1.0)
    except KeyError as e:
        return {"error": "KeyError: {}".format(e.args[0]), "lora_key_not_loaded": [], "not_loaded": [],
                "patches": [], "shadowed": []}
    finally:
        comfy.lora.load_lora = real_load_lora
        logging.getLogger().removeHandler(log)
    (converted, key_map, patches), = calls
    not_loaded_lines = {line for line in log.lines if line.startswith("NOT LOADED ")}
    # Which key-map names write each patch: load_lora on each name alone (only names some LoRA
    # key starts with can match), in the key map's order; the patch it returned is the last.
    # (A name's patches can land on another key than its own target: a bias delta.)
    prefixes = {k[:i] for k in converted for i in range(1, len(k))}
    writers = {}  # patch key -> [(name, ids of the tensors its patch holds)]
    logging.disable(logging.WARNING)
    try:
        for x, target in key_map.items():
            if x in prefixes:
                for key, patch in real_load_lora(converted, {x: target}).items():
                    writers.setdefault(key, []).append((x, tensor_ids(patch)))
    finally:
        logging.disable(logging.NOTSET)
    out = {"error": None, "patches": [], "not_loaded": [], "shadowed": [],
           "lora_key_not_loaded": sorted(line[len("lora key not loaded: "):] for line in log.lines
                                         if line.startswith("lora key not loaded: "))}
    for target, patch in patches.items():
        ids = tensor_ids(patch)
        ws = [x for x, _ in writers.get(target, [])]
        module = [x for x, x_ids in writers.get(target, []) if x_ids == ids]
        if len(module) != 1 or module[0] != ws[-1]:
            raise AssertionError(f"cannot tell which LoRA module wrote {target}: {ws} {module}")
        out["shadowed"] += [[w, module[0], key_text(target)] for w in ws[:-1] if w != module[0]]
        text = key_text(target)
        if "NOT LOADED {}".format(target) in not_loaded_lines:
            out["not_loaded"].append(text)
        else:
            out["patches"].append([text, module[0]])
    return out


def flux_to_diffusers(config):
    """comfy.utils.flux_to_diffusers(config) as a list of [diffusers name, target] sorted by
    name (ComfyUI adds part of the map from a set of tuples holding a function, whose order
    changes from run to run even with a fixed hash seed); a target is a key,
    [key, [dim, start, rows]] or [key, null, function name]."""
    start()
    out = []
    for name, target in sorted(comfy.utils.flux_to_diffusers(config, output_prefix="").items()):
        if isinstance(target, tuple):
            extra = [getattr(target[2], "__name__", str(target[2]))] if len(target) > 2 else []
            target = [target[0], list(target[1]) if target[1] is not None else None] + extra
        out.append([name, target])
    return out


def _model(keys):
    """A stand-in model whose state_dict() holds `keys` (what ModelPatcher.add_patches checks)."""
    cls = type("StandInModel", (_StandIn, torch.nn.Module), {"__init__": _StandIn._stand_in})
    return cls(keys, {}, {})


def calculate_weight(base, lora, calls):
    """What ComfyUI computes for the weights a LoRA patches: per call (strength, strength_model,
    targets), each target's module through comfy.lora.load_lora onto its target and
    ModelPatcher.add_patches (so a key's patches apply in the targets' order), then per patched
    key comfy.lora.calculate_weight on the weight as ModelPatcher.patch_weight_to_device gives
    it (a float32 copy; its default float32 intermediate dtype).

    base: key -> torch tensor (as the model holds it); lora: name -> torch tensor (as the file
    holds it). A target {module, key} may also have chunk / chunks (a row chunk: ComfyUI holds
    it as a tensor of its own), row_offset / rows (an offset window of the key), bias_key (the
    bias load_lora patches is "<weight key without .weight>.bias"), transpose (the model holds
    the file's tensor transposed), identity: n (the model's weight, absent from the file, starts
    as the n x n identity), delta_row_offset / delta_shape (the file holds rows of a fused weight
    of that shape the model holds whole: the targets of one module are its pieces).
    Returns key -> the patched float32 tensor, in the file's layout."""
    start()
    targets = [t for _, _, ts in calls for t in ts]
    transposed = {t["key"] for t in targets if t.get("transpose")}
    identity = {t["key"]: t["identity"] for t in targets if t.get("identity") and t["key"] not in base}
    fused = {}  # fused key -> (shape, [(file key, first row, rows)])
    for t in targets:
        if "delta_row_offset" in t:
            shape, pieces = fused.setdefault("fused:" + t["module"], (t["delta_shape"], []))
            if (t["key"], t["delta_row_offset"], t["rows"]) not in pieces:
                pieces.append((t["key"], t["delta_row_offset"], t["rows"]))
    patcher = _patcher(_model(list(base) + list(identity) + list(fused)))
    for strength, strength_model, ts in calls:
        loaded = set()
        for t in ts:
            if "delta_row_offset" in t:
                target = "fused:" + t["module"]
                if target in loaded:
                    continue  # one patch of the fused weight for all its pieces
                loaded.add(target)
            elif t.get("rows"):
                target = (t["key"], (0, t["row_offset"], t["rows"]))
            elif t.get("chunks", 1) > 1:
                rows = base[t["key"]].shape[0] // t["chunks"]
                target = (t["key"], (0, t["chunk"] * rows, rows))
            elif t.get("bias_key") and t["key"] == t["bias_key"]:  # a bias patch alone
                target = t["bias_key"][:-len(".bias")] + ".weight"
            else:
                target = t["key"]
            patches = comfy.lora.load_lora(lora, {t["module"]: target}, log_missing=False)
            patcher.add_patches(patches, strength, strength_model)
    out = {}
    for key, patches in patcher.patches.items():
        if key in fused:
            shape, pieces = fused[key]
            weight = torch.zeros(shape, dtype=torch.float32)
            for piece, first, rows in pieces:
                weight[first:first + rows] = base[piece].to(torch.float32).reshape(rows, *shape[1:])
        elif key in identity:
            weight = torch.eye(identity[key], dtype=torch.float32)
        else:
            weight = base[key].to(torch.float32, copy=True)
            if key in transposed:
                weight = weight.t().contiguous()
        weight = comfy.lora.calculate_weight(patches, weight, key)
        if key in fused:
            for piece, first, rows in pieces:
                out[piece] = weight[first:first + rows].reshape(base[piece].shape).clone()
        else:
            out[key] = weight.t().contiguous() if key in transposed else weight
    return out
