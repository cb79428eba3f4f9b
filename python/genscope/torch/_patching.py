"""observe_patching / lora_step: seed 002's LoRA application report for torch models and
ComfyUI-style patchers.

A model is either a torch module (its ``state_dict()``), or a patcher object read with
``getattr`` and defaults: ``model`` (the torch module), ``patches`` (state-dict key -> list of
``(strength_patch, patch, strength_model, offset, function)``, comfy/model_patcher.py
``ModelPatcher.add_patches``), ``patches_uuid``, ``load_device``, ``offload_device``,
``device``; a ComfyUI ``CLIP`` is read through its ``patcher``. The snapshots (identity,
placement, parameter table with the XXH3-64 of each tensor) and the report itself (identity,
weight, placement and memory changes; docs/lora.md) are the C++ ones
(``genscope::ModelSnapshot``, ``genscope::lora_application_report``). Only the reading of a
Python patch list into the report's patch-analysis layout is done here.

A patch value is one of (comfy/weight_adapter/*.py and the older tuple form of comfy/lora.py):
an adapter object with ``name`` ("lora", "loha", "lokr", "glora", "oft", "boft"), ``weights``
and ``loaded_keys``; a tuple ``("lora", (up, down, alpha, mid, dora_scale, reshape))``,
``("diff", (weight,))``, ``("set", (weight,))``, ...; a 1-tuple ``(weight,)`` (a plain diff, as
model merging adds); a list (a patch applied on a patched weight).
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

from .. import _genscope
from ._tensors import caller, cuda_memory, is_tensor

# The weights tuple of each adapter type, by position (comfy/weight_adapter/lora.py,
# loha.py, lokr.py).
_WEIGHT_NAMES = {
    "lora": ("up", "down", "alpha", "mid", "dora_scale", "reshape"),
    "loha": ("w1a", "w1b", "alpha", "w2a", "w2b", "t1", "t2", "dora_scale"),
    "lokr": ("w1", "w2", "alpha", "w1_a", "w1_b", "w2_a", "w2_b", "t2", "dora_scale"),
    "diff": ("diff",),
    "set": ("weight",),
}
_TYPE_NAMES = {"set": "set_weight"}  # genscope's LoraModuleType names (lora.hpp)


def _patcher_of(obj: Any) -> Optional[Any]:
    if obj is None:
        return None
    if hasattr(obj, "patches") and hasattr(obj, "model"):
        return obj
    inner = getattr(obj, "patcher", None)  # ComfyUI CLIP
    if inner is not None and hasattr(inner, "patches"):
        return inner
    return None


def _model_of(obj: Any) -> Any:
    patcher = _patcher_of(obj)
    model = getattr(patcher, "model", None) if patcher is not None else obj
    if not callable(getattr(model, "state_dict", None)):
        raise TypeError(f"{type(obj).__name__} is neither a torch module nor a patcher with "
                        "a torch module in .model")
    return model


def _device_of(obj: Any, model: Any) -> str:
    for candidate in (getattr(obj, "device", None), getattr(model, "device", None)):
        if candidate is not None and not callable(candidate):
            return str(candidate)
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        for p in parameters():
            return str(p.device)
    return ""


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def snapshot(obj: Any, *, hash: bool = True,
             same_weights: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, Any], List[str]]:
    """(model snapshot dict, errors) of a torch module or a patcher, as genscope's C++
    ModelSnapshot JSON (docs/lora.md); `hash` adds the XXH3-64 of every tensor's bytes.
    `same_weights`: a snapshot of the same torch module taken just now, whose parameter
    table is reused (ComfyUI clones share one module)."""
    patcher = _patcher_of(obj)
    model = _model_of(obj)
    holder = patcher if patcher is not None else obj
    patches = getattr(patcher, "patches", None) if patcher is not None else None
    identity = {
        "model_id": f"{type(obj).__name__}@{id(obj):#x}",
        "class": type(obj).__name__,
        "device": _device_of(holder, model),
        "load_device": _text(getattr(holder, "load_device", None)),
        "offload_device": _text(getattr(holder, "offload_device", None)),
        "patches_count": len(patches) if hasattr(patches, "__len__") else 0,
        "patches_uuid": _text(getattr(patcher, "patches_uuid", None)),
    }
    if same_weights is not None:
        result, errors = _genscope._model_snapshot(identity, [], False)
        for field in ("parameters", "parameter_count", "total_bytes", "total_elements"):
            result[field] = same_weights[field]
        return result, errors
    return _genscope._model_snapshot(identity, list(model.state_dict().items()), hash)


def _shape(x: Any) -> Optional[List[int]]:
    return [int(d) for d in x.shape] if is_tensor(x) else None


def _kind_and_weights(value: Any) -> Tuple[str, Any, Any]:
    """(type name, weights tuple, loaded keys) of one ComfyUI patch value."""
    name = getattr(value, "name", None)
    if isinstance(name, str) and hasattr(value, "weights"):
        return name, value.weights, getattr(value, "loaded_keys", None)
    if isinstance(value, list):
        return "nested", (), None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[0], value[1], None
    if isinstance(value, tuple) and len(value) == 1:
        return "diff", value, None
    if is_tensor(value):
        return "diff", (value,), None
    return "unknown", (), None


def _module_name(loaded_keys: Any) -> Optional[str]:
    """The LoRA module a patch came from: the common prefix of the tensor names it loaded."""
    if not loaded_keys:
        return None
    keys = sorted(str(k) for k in loaded_keys)
    prefix = os.path.commonprefix(keys)
    if len(keys) > 1 and "." in prefix:
        prefix = prefix[: prefix.rfind(".")]  # cut inside a "lora_up"/"lora_down" suffix
    return prefix.rstrip("._") or None


def _rank_and_scale(kind: str, weights: Any) -> Tuple[Optional[int], Optional[float]]:
    w = list(weights) if isinstance(weights, (tuple, list)) else []
    names = _WEIGHT_NAMES.get(kind, ())
    get = {n: (w[i] if i < len(w) else None) for i, n in enumerate(names)}
    rank_source = {"lora": "down", "loha": "w1b"}.get(kind)
    rank = None
    if rank_source and is_tensor(get.get(rank_source)):
        rank = int(get[rank_source].shape[0])
    elif kind == "lokr":
        for n in ("w1_b", "w2_b"):
            if is_tensor(get.get(n)):
                rank = int(get[n].shape[0])
    alpha = get.get("alpha")
    if rank is None:
        return None, 1.0 if kind in _WEIGHT_NAMES else None
    if alpha is None:
        return rank, 1.0
    alpha = float(alpha.item()) if is_tensor(alpha) else float(alpha)
    return rank, alpha / rank


def patch_analysis(patcher: Any, lora_file: str = "") -> Optional[Dict[str, Any]]:
    """The report's patch analysis ("unet_lora_patches") of a ComfyUI-style patcher."""
    patches = getattr(patcher, "patches", None) if patcher is not None else None
    if not isinstance(patches, dict):
        return None
    details: Dict[str, Any] = {}
    for key, entries in patches.items():
        if not entries:
            continue
        first = entries[0]
        strength_patch = float(first[0]) if len(first) > 0 else None
        strength_model = float(first[2]) if len(first) > 2 else 1.0
        kind, weights, loaded_keys = _kind_and_weights(first[1] if len(first) > 1 else None)
        names = _WEIGHT_NAMES.get(kind, ())
        shapes: Dict[str, Any] = {}
        if isinstance(weights, (tuple, list)):
            for i, w in enumerate(weights):
                if is_tensor(w) and w.dim() > 0:
                    shapes[names[i] if i < len(names) else str(i)] = _shape(w)
        rank, scale = _rank_and_scale(kind, weights)
        entry = {"strength_patch": strength_patch, "strength_model": strength_model,
                 "patch_type": _TYPE_NAMES.get(kind, kind), "module": _module_name(loaded_keys),
                 "lora_file": lora_file, "rank": rank, "scale": scale,
                 "patch_data_shape": shapes, "patch_count": len(entries)}
        if len(first) > 3 and first[3] is not None:
            entry["offset"] = [int(v) for v in first[3]]
        details[str(key)] = entry
    return {"total_patched_keys": len(details), "patch_details": details}


class Baseline:
    """What a model (and its CLIP) looked like before a LoRA was applied (seed 002 §1)."""

    def __init__(self, model: Any, clip: Any = None, *, hash: bool = True) -> None:
        self.source, self.clip_source = model, clip
        self.timestamp = time.time()
        self.allocated, self.reserved = cuda_memory()
        self.errors: List[str] = []
        self.model, errors = snapshot(model, hash=hash)
        self.errors += errors
        self.clip = None
        if clip is not None:
            self.clip, errors = snapshot(clip, hash=hash)
            self.errors += errors


def _report(baseline: Baseline, after: Any, clip_after: Any, *, lora_path: Optional[str],
            models_returned: Optional[int], hash: bool, errors: List[str],
            success: bool, now: bool = False) -> Dict[str, Any]:
    """`now`: the baseline was taken a moment ago, so a module shared with it (a clone)
    reuses its parameter table instead of being hashed again."""
    allocated, reserved = cuda_memory()
    errors = list(baseline.errors) + errors
    if after is None:  # the application returned nothing: the model as it is now
        after = baseline.source

    def shared(obj: Any, base: Any, table: Any) -> Optional[Dict[str, Any]]:
        return table if now and table is not None and _model_of(obj) is _model_of(base) else None

    unet_after, more = snapshot(after, hash=hash,
                                same_weights=shared(after, baseline.source, baseline.model))
    errors += more
    clip_snapshot = None
    if baseline.clip is not None and clip_after is not None:
        clip_snapshot, more = snapshot(clip_after, hash=hash, same_weights=shared(
            clip_after, baseline.clip_source, baseline.clip))
        errors += more
    lora_file = os.path.basename(os.fspath(lora_path)) if lora_path else ""
    if models_returned is None:
        models_returned = sum(m is not None for m in (after, clip_after))
    observation = {
        "lora_path": os.fspath(lora_path) if lora_path else None,
        "baseline_unix_seconds": baseline.timestamp,
        "unet_before": baseline.model, "unet_after": unet_after,
        "clip_before": baseline.clip, "clip_after": clip_snapshot,
        "memory_allocated_before_bytes": baseline.allocated,
        "memory_reserved_before_bytes": baseline.reserved,
        "memory_allocated_after_bytes": allocated, "memory_reserved_after_bytes": reserved,
        "success": success, "models_returned": models_returned, "errors": errors,
        "unet_lora_patches": patch_analysis(_patcher_of(after), lora_file),
        "clip_lora_patches": patch_analysis(_patcher_of(clip_after), lora_file),
    }
    return _genscope._lora_application_report(observation)


def _attach(step: Any, lora_path: Optional[str], report: Dict[str, Any]) -> None:
    name = os.path.basename(os.fspath(lora_path)) if lora_path else "lora"
    step.attach("lora_application", name, report)
    weights = report.get("unet_weight_changes") or {}
    patches = report.get("unet_lora_patches") or {}
    step.add_counter("patched_keys", float(patches.get("total_patched_keys") or 0))
    step.add_counter("changed_weights", float(weights.get("values_changed") or 0))


def observe_patching(run: Any, before: Any, after: Any, *, clip_before: Any = None,
                     clip_after: Any = None, lora_path: Optional[str] = None,
                     models_returned: Optional[int] = None, hash: bool = True,
                     step: Any = None) -> Dict[str, Any]:
    """Compares `before` and `after` now and attaches seed 002's report.

    For patchers that clone (ComfyUI's LoraLoader returns new patchers and leaves the input
    untouched). A model patched in place has no "before" any more: use lora_step() around
    the application instead. The report goes to `step` when given, else to a new
    ``lora_application`` step "observe patching"; it is also returned. Memory figures are
    torch.cuda's current allocated/reserved bytes (null without CUDA).
    """
    baseline = Baseline(before, clip_before, hash=hash)
    baseline.allocated = baseline.reserved = None  # not observed before the application

    def build(target: Any) -> Dict[str, Any]:
        report = _report(baseline, after, clip_after, lora_path=lora_path,
                         models_returned=models_returned, hash=hash, errors=[],
                         success=after is not None, now=True)
        _attach(target, lora_path, report)
        return report

    if step is not None:
        return build(step)
    with run.step("lora_application", "observe patching", source=caller()) as own:
        return build(own)


class LoraStep:
    """The context manager of lora_step(); call result() with what the application returned."""

    def __init__(self, run: Any, model: Any, *, clip: Any = None, lora_path: Optional[str] = None,
                 name: Optional[str] = None, hash: bool = True) -> None:
        self.run = run
        self.model = model
        self.clip = clip
        self.lora_path = lora_path
        self.name = name or (f"apply {os.path.basename(os.fspath(lora_path))}" if lora_path
                             else "apply lora")
        self.hash = hash
        self.report: Optional[Dict[str, Any]] = None  #: The report, after exit.
        self.step: Any = None
        self._after: Any = None
        self._clip_after: Any = None
        self._returned: Optional[int] = None
        self._baseline: Optional[Baseline] = None

    def result(self, model: Any, clip: Any = None, models_returned: Optional[int] = None) -> None:
        """The models the application returned (patchers that clone); default: the same
        objects as before (patched in place)."""
        self._after, self._clip_after, self._returned = model, clip, models_returned

    def __enter__(self) -> "LoraStep":
        self.step = self.run.step("lora_application", self.name, source=caller())
        self.step.__enter__()
        if self.step.active:
            try:
                self._baseline = Baseline(self.model, self.clip, hash=self.hash)
            except Exception as e:  # noqa: BLE001 - the application must still run
                self.step.record_monitoring_error("torch.lora_step", f"{type(e).__name__}: {e}")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            if self._baseline is not None:
                after = self._after if self._after is not None else self.model
                clip_after = self._clip_after if self._clip_after is not None else self.clip
                errors = [f"{exc_type.__name__}: {exc}"] if exc_type is not None else []
                try:
                    self.report = _report(self._baseline, after, clip_after,
                                          lora_path=self.lora_path,
                                          models_returned=self._returned, hash=self.hash,
                                          errors=errors, success=exc_type is None)
                    _attach(self.step, self.lora_path, self.report)
                except Exception as e:  # noqa: BLE001
                    self.step.record_monitoring_error("torch.lora_step",
                                                      f"{type(e).__name__}: {e}")
        finally:
            self.step.__exit__(exc_type, exc, tb)
        return False


def lora_step(run: Any, model: Any, *, clip: Any = None, lora_path: Optional[str] = None,
              name: Optional[str] = None, hash: bool = True) -> LoraStep:
    """A ``lora_application`` step around a LoRA application: baseline (snapshots, CUDA
    memory, time) on entry, seed 002's report attached on exit."""
    return LoraStep(run, model, clip=clip, lora_path=lora_path, name=name, hash=hash)
