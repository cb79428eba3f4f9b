"""The pipeline settings users turn on, read (never changed) at each generation's sampling step.

Each is a label (docs/python.md, "Settings"):
- ``offload``: ``model_cpu_offload`` (accelerate's ``CpuOffload`` hook on a component,
  ``enable_model_cpu_offload``), ``sequential_cpu_offload`` (accelerate's ``AlignDevicesHook``
  with offloading, ``enable_sequential_cpu_offload``), ``group_offload`` (diffusers' hook registry
  with its ``group_offloading`` hook on a component or a submodule, ``enable_group_offload`` /
  ``apply_group_offloading``); absent when none;
- ``vae_tiling`` / ``vae_slicing``: ``true`` when the VAE has them on (``use_tiling``,
  ``use_slicing``); absent when off;
- ``compiled``: the components run through ``torch.compile`` (wrapped, an ``OptimizedModule``, or
  compiled in place, ``module.compile()``), comma-separated;
- ``attention_backend``: the denoiser's attention backend set with ``set_attention_backend``
  (its attention processors' ``_attention_backend``), else diffusers' active one where that
  registry was imported; absent for models without diffusers' attention dispatch;
- ``lora_adapters``: the pipeline's active LoRA adapters (``get_active_adapters()``),
  comma-separated; absent when none.

Reading a setting is best effort: an attribute that raises leaves that setting out.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Iterable, Optional

_GROUP_OFFLOAD_HOOKS = ("group_offloading", "lazy_prefetch_group_offloading")


def model_of(module: Any) -> Any:
    """The model behind a ``torch.compile`` wrapper (``OptimizedModule._orig_mod``)."""
    inner = getattr(module, "__dict__", {}).get("_modules", {}).get("_orig_mod")
    return inner if inner is not None else module


def is_compiled(module: Any) -> bool:
    d = getattr(module, "__dict__", {})
    return "_orig_mod" in d.get("_modules", {}) or d.get("_compiled_call_impl") is not None


def _offload_of(module: Any) -> Optional[str]:
    hook = getattr(module, "__dict__", {}).get("_hf_hook")
    names = {type(h).__name__ for h in getattr(hook, "hooks", (hook,))} if hook else set()
    if "CpuOffload" in names:
        return "model_cpu_offload"
    if "AlignDevicesHook" in names and getattr(hook, "offload", True):
        return "sequential_cpu_offload"
    registry = getattr(module, "__dict__", {}).get("_diffusers_hook")
    hooks = getattr(registry, "hooks", None)
    if isinstance(hooks, dict) and any(name in hooks for name in _GROUP_OFFLOAD_HOOKS):
        return "group_offload"
    return None


def _offload(models: Iterable[Any]) -> Optional[str]:
    """The first offload kind found on a model or, for sequential and group offloading, which
    hook submodules, on one of its first submodules."""
    for model in models:
        found = _offload_of(model)
        if found:
            return found
        children = getattr(model, "children", None)
        if callable(children):
            for i, child in enumerate(children()):
                if i >= 8:
                    break
                found = _offload_of(child)
                if found is None:
                    for j, grandchild in enumerate(child.children()):
                        if j >= 4:
                            break
                        found = found or _offload_of(grandchild)
                if found:
                    return found
    return None


def _attention_backend(denoiser: Any) -> Optional[str]:
    modules = getattr(denoiser, "modules", None)
    if not callable(modules):
        return None
    seen_dispatch = False
    for module in modules():  # the first attention module decides (a walk stops there)
        processor = getattr(module, "processor", None)
        if processor is None:
            continue
        if not hasattr(processor, "_attention_backend"):
            return None  # a processor without diffusers' attention dispatch
        seen_dispatch = True
        backend = processor._attention_backend
        if backend is not None:
            return str(getattr(backend, "value", backend))
        break
    dispatch = sys.modules.get("diffusers.models.attention_dispatch")
    registry = getattr(dispatch, "_AttentionBackendRegistry", None)
    active = getattr(registry, "_active_backend", None)
    if seen_dispatch and active is not None:
        return str(getattr(active, "value", active))
    return None


def _read(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a setting that cannot be read is left out
        return None


def pipeline_settings(pipe: Any, models: Dict[str, Any], vae: Any,
                      denoiser: Any) -> Dict[str, str]:
    """The settings labels of a pipeline now. `models`: name -> every hooked torch module
    (text encoders, denoisers, other models), as instrument found them."""
    settings: Dict[str, str] = {}
    offload = _read(_offload, [model_of(m) for m in models.values()] +
                    ([vae] if vae is not None else []))
    if offload:
        settings["offload"] = offload
    if vae is not None:
        for flag, label in (("use_tiling", "vae_tiling"), ("use_slicing", "vae_slicing")):
            if _read(getattr, vae, flag) is True:
                settings[label] = "true"
    compiled = [name for name, m in models.items() if _read(is_compiled, m)]
    if compiled:
        settings["compiled"] = ",".join(compiled)
    if denoiser is not None:
        backend = _read(_attention_backend, model_of(denoiser))
        if backend:
            settings["attention_backend"] = backend
    active = getattr(pipe, "get_active_adapters", None)
    adapters = _read(active) if callable(active) else None
    if adapters:
        settings["lora_adapters"] = ",".join(str(a) for a in adapters)
    return settings
