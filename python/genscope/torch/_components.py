"""Finding a pipeline's components: diffusers attribute names, ComfyUI objects, or a mapping.

diffusers pipelines hold their parts as attributes (``text_encoder``, ``text_encoder_2``,
``text_encoder_3``, ``tokenizer*``, ``unet`` or ``transformer``, ``vae``, ``scheduler``;
huggingface/diffusers ``src/diffusers/pipelines/stable_diffusion_xl/pipeline_stable_diffusion_xl.py``,
``register_modules``). ComfyUI wraps its models: a ``ModelPatcher`` holds the model in
``.model`` whose network is ``.diffusion_model`` (comfy/model_patcher.py, comfy/model_base.py),
a ``CLIP`` holds ``.cond_stage_model`` and ``.patcher`` (comfy/sd.py), a ``VAE`` has
``encode``/``decode`` methods (comfy/sd.py). Those wrappers are unwrapped to the module whose
forward really runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .._errors import make_error
from ._settings import model_of

TEXT_ENCODERS = ("text_encoder", "text_encoder_2", "text_encoder_3")
TOKENIZERS = ("tokenizer", "tokenizer_2", "tokenizer_3")
DENOISERS = ("unet", "transformer")
#: Denoisers a pipeline calls besides its first, each for part of the schedule: Wan 2.2 A14B's
#: low-noise expert ``transformer_2`` (diffusers' WanPipeline, ``boundary_ratio``).
MORE_DENOISERS = ("transformer_2",)
#: Models pipelines call outside the denoising loop, each call a ``custom`` step named after
#: the model and method: Wan 2.1 I2V's CLIP ``image_encoder`` (forward), LTX-2's text
#: ``connectors`` (forward), ``audio_vae`` (encode / decode) and ``vocoder`` (forward).
MORE_MODELS = {"image_encoder": ("forward",), "connectors": ("forward",),
               "audio_vae": ("encode", "decode"), "vocoder": ("forward",)}
#: Models some pipelines hold that instrument() does not hook (yet): listed as skipped, so the
#: components attachment says what ran unobserved (their time is inside the surrounding steps).
#: A ControlNet runs inside the denoising loop, beside the denoiser.
NOT_HOOKED = ("controlnet",)
ROLES = TEXT_ENCODERS + TOKENIZERS + DENOISERS + MORE_DENOISERS + ("vae", "scheduler")


@dataclass
class Components:
    """What instrument() hooks: role name -> object, plus what was skipped and why."""

    text_encoders: Dict[str, Any] = field(default_factory=dict)  # name -> torch module
    tokenizers: Dict[str, Any] = field(default_factory=dict)
    denoiser: Optional[Any] = None  # torch module
    denoiser_name: str = ""
    more_denoisers: Dict[str, Any] = field(default_factory=dict)  # name -> torch module
    vae: Optional[Any] = None  # object with encode/decode
    scheduler: Optional[Any] = None  # object with step()
    more_models: Dict[str, Any] = field(default_factory=dict)  # MORE_MODELS name -> object
    skipped: Dict[str, str] = field(default_factory=dict)  # name -> reason

    def describe(self) -> Dict[str, Any]:
        """JSON-friendly summary (the run attachment "torch_components")."""
        out: Dict[str, Any] = {}
        for name, module in self.text_encoders.items():
            out[name] = {"class": type(model_of(module)).__name__, "hooked": "forward"}
        for name, tok in self.tokenizers.items():
            out[name] = {"class": type(tok).__name__, "hooked": None,
                         "model_max_length": _int_or_none(getattr(tok, "model_max_length", None))}
        for name, module in self.denoisers().items():
            out[name] = {"class": type(model_of(module)).__name__, "hooked": "forward"}
        if self.vae is not None:
            out["vae"] = {"class": type(self.vae).__name__, "hooked": "encode, decode"}
        if self.scheduler is not None:
            out["scheduler"] = {"class": type(self.scheduler).__name__,
                                "hooked": "step, set_timesteps"}
        for name, model in self.more_models.items():
            out[name] = {"class": type(model).__name__, "hooked": ", ".join(MORE_MODELS[name])}
        for name, reason in self.skipped.items():
            out[name] = {"class": None, "hooked": None, "skipped": reason}
        return out

    def denoisers(self) -> Dict[str, Any]:
        """Every hooked denoiser by name, the first (whose name titles sampling) first."""
        first = {self.denoiser_name: self.denoiser} if self.denoiser is not None else {}
        return {**first, **self.more_denoisers}


def _int_or_none(value: Any) -> Optional[int]:
    try:
        return int(value) if value is not None and int(value) < 1 << 40 else None
    except (TypeError, ValueError):
        return None


def _is_module(obj: Any) -> bool:
    return callable(getattr(obj, "register_forward_hook", None)) and callable(
        getattr(obj, "register_forward_pre_hook", None))


def _text_module(obj: Any) -> Optional[Any]:
    if _is_module(obj):
        return obj
    for path in (("cond_stage_model",), ("patcher", "model")):  # ComfyUI CLIP
        inner = obj
        for attr in path:
            inner = getattr(inner, attr, None)
        if _is_module(inner):
            return inner
    return None


def _denoiser_module(obj: Any) -> Optional[Any]:
    inner = getattr(obj, "model", None) if not _is_module(obj) else obj  # ComfyUI ModelPatcher
    diffusion = getattr(inner, "diffusion_model", None)  # ComfyUI BaseModel
    if _is_module(diffusion):
        return diffusion
    return inner if _is_module(inner) else None


def _has_methods(obj: Any, *names: str) -> bool:
    return all(callable(getattr(obj, n, None)) for n in names)


def find_components(pipe: Any) -> Components:
    """Components of a pipeline object (by attribute) or of an explicit mapping.

    A mapping with an unknown key raises genscope.Error("UnknownComponent"), one whose value
    is not usable for its role genscope.Error("InvalidComponent"); attribute discovery skips
    unusable attributes and records why. No component at all: genscope.Error("NoComponents").
    """
    explicit = isinstance(pipe, Mapping)
    if explicit:
        unknown = [k for k in pipe if k not in ROLES]
        if unknown:
            raise make_error("UnknownComponent",
                             f"unknown component name(s) {sorted(map(str, unknown))}; "
                             f"known: {', '.join(ROLES)}")
        get = pipe.get
    else:
        def get(name: str) -> Any:
            try:
                return getattr(pipe, name, None)
            except Exception:  # a property that raises is simply not a component
                return None

    found = Components()
    problems: List[str] = []

    def unusable(name: str, reason: str) -> None:
        if explicit:
            problems.append(f"{name}: {reason}")
        else:
            found.skipped[name] = reason

    seen: Dict[int, str] = {}
    for name in TEXT_ENCODERS:
        obj = get(name)
        if obj is None:
            continue
        module = _text_module(obj)
        if module is None:
            unusable(name, f"{type(obj).__name__} is not a torch module")
        elif id(module) in seen:  # one module under two names is hooked once
            found.skipped[name] = f"same module as {seen[id(module)]}"
        else:
            seen[id(module)] = name
            found.text_encoders[name] = module
    for name in TOKENIZERS:
        obj = get(name)
        if obj is not None:
            found.tokenizers[name] = obj
    for name in DENOISERS + MORE_DENOISERS:
        obj = get(name)
        if obj is None:
            continue
        module = _denoiser_module(obj)
        first = name in DENOISERS
        if module is None:
            unusable(name, f"{type(obj).__name__} is not a torch module")
        elif found.denoiser is None and first:
            found.denoiser, found.denoiser_name = module, name
        elif first:
            unusable(name, f"a second denoiser ({found.denoiser_name} is hooked)")
        elif found.denoiser is None:
            unusable(name, "a second denoiser without a first (unet or transformer)")
        elif module is found.denoiser:
            found.skipped[name] = f"same module as {found.denoiser_name}"
        else:
            found.more_denoisers[name] = module
    if not explicit:
        for name, methods in MORE_MODELS.items():
            obj = get(name)
            if obj is None:
                continue
            if _has_methods(obj, *methods):
                found.more_models[name] = obj
            else:
                found.skipped[name] = f"{type(obj).__name__} has no {'/'.join(methods)}()"
        for name in NOT_HOOKED:
            obj = get(name)
            if obj is not None:
                found.skipped[name] = (f"{type(obj).__name__}: not hooked; its calls run inside "
                                       "the steps around them")
    vae = get("vae")
    if vae is not None:
        if _has_methods(vae, "encode", "decode"):
            found.vae = vae
        else:
            unusable("vae", f"{type(vae).__name__} has no encode()/decode() methods")
    scheduler = get("scheduler")
    if scheduler is not None:
        if _has_methods(scheduler, "step"):
            found.scheduler = scheduler
        else:
            unusable("scheduler", f"{type(scheduler).__name__} has no step() method")
    if problems:
        raise make_error("InvalidComponent", "; ".join(problems))
    if not (found.text_encoders or found.denoiser is not None or found.vae is not None):
        raise make_error("NoComponents",
                         f"no text encoder, unet/transformer or vae found on "
                         f"{type(pipe).__name__}; pass a mapping such as "
                         "{'unet': module, 'vae': vae}")
    return found
