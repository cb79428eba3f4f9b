"""What one pipeline call was asked to do, read from the pipeline's own ``__call__`` frame.

``pipe(prompt, negative_prompt=..., num_inference_steps=..., ...)`` is not wrapped: Python
looks ``__call__`` up on the type, so wrapping it would mean changing the pipeline's class.
Instead, when a hooked component runs, the stack is walked up to the frame running
``type(pipe).__call__`` (unwrapped from decorators such as ``@torch.no_grad()``), or the
``__call__`` of another pipeline object sharing the components, and its arguments are read
from that frame's locals, read-only. In diffusers 0.27
(``pipeline_stable_diffusion.py``, ``pipeline_stable_diffusion_xl.py``) ``__call__`` has
already filled in the default ``height``/``width`` when it encodes the prompt, and
reassigns ``num_inference_steps`` only after ``retrieve_timesteps``; the first hooked call
of a generation (a text encoder, ``scheduler.set_timesteps``) sees the values as asked.

Which encoder call encodes what: diffusers' ``encode_prompt`` calls each text encoder for the
prompt, then (classifier-free guidance, no ``negative_prompt_embeds`` given) for the negative
prompt; a prompt given as ``prompt_embeds`` is not encoded, nor, in SDXL, a negative prompt
left ``None`` (``force_zeros_for_empty_prompt``: zeros instead).
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Callable, Dict, List, Mapping, Optional

#: __call__ arguments recorded as labels, in this order (those present and not None).
SETTINGS = ("prompt", "negative_prompt", "num_inference_steps", "guidance_scale", "height",
            "width", "strength", "num_frames", "fps", "frame_rate", "true_cfg_scale",
            "guidance_scale_2", "boundary_ratio", "max_sequence_length", "stg_scale",
            "modality_scale", "audio_guidance_scale")
_MAX_DEPTH = 64


@dataclass
class Generation:
    """One pipeline call: where it runs, its settings, and the text-encoder calls seen."""

    frame_id: int
    settings: Dict[str, str] = field(default_factory=dict)
    roles: List[str] = field(default_factory=list)  # what the 1st, 2nd ... encoder call encodes
    encoder_calls: Dict[str, int] = field(default_factory=dict)
    sampled: bool = False  # its sampling step has ended: the next call is a new generation

    def role_of_next_call(self, encoder: str) -> str:
        """'prompt', 'negative', or 'call N' beyond what the pipeline is known to encode."""
        k = self.encoder_calls.get(encoder, 0)
        self.encoder_calls[encoder] = k + 1
        return self.roles[k] if k < len(self.roles) else f"call {k + 1}"


def call_code(pipe: Any) -> Optional[CodeType]:
    """The code object of type(pipe).__call__, or None for a mapping, a torch module or an
    object without a Python __call__."""
    if isinstance(pipe, Mapping) or callable(getattr(pipe, "register_forward_hook", None)):
        return None
    fn = getattr(type(pipe), "__call__", None)
    if fn is None:
        return None
    try:
        fn = inspect.unwrap(fn)
    except ValueError:  # a cycle of __wrapped__
        return None
    code = getattr(fn, "__code__", None)
    return code if isinstance(code, CodeType) else None


def find_call_frame(code: Optional[CodeType],
                    shares_components: Callable[[Any], bool]) -> Optional[Any]:
    """The innermost frame of this thread running `code` (type(pipe).__call__), or the
    ``__call__`` of another pipeline built on the same components
    (``StableDiffusionImg2ImgPipeline(**pipe.components)``): its ``self`` holds one of them
    (`shares_components`). None when neither is on the stack."""
    frame = sys._getframe(1)
    for _ in range(_MAX_DEPTH):
        if frame is None:
            return None
        if code is not None and frame.f_code is code:
            return frame
        if frame.f_code.co_name == "__call__" and shares_components(frame.f_locals.get("self")):
            return frame
        frame = frame.f_back
    return None


def _text(value: Any) -> Optional[str]:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return " | ".join(value)  # a batch of prompts
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return None


def _seed(local: Mapping[str, Any]) -> Optional[str]:
    """The generator's seed (torch.Generator.initial_seed(), one per generator of a list), or
    an integer `seed` argument; None when the pipeline draws from torch's global generator."""
    seed = local.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        return str(seed)
    generator = local.get("generator")
    generators = generator if isinstance(generator, (list, tuple)) else [generator]
    seeds = []
    for g in generators:
        initial = getattr(g, "initial_seed", None)
        if not callable(initial):
            return None
        seeds.append(str(int(initial())))
    return ",".join(seeds) if seeds else None


def _config_value(owner: Any, key: str) -> Any:
    """owner.config[key] (diffusers' FrozenDict), or None; never raises."""
    try:
        config = getattr(owner, "config", None)
        return config.get(key) if isinstance(config, Mapping) else None
    except Exception:  # a property or mapping that raises: no value
        return None


def read_generation(frame: Any) -> Generation:
    """The settings and encoder roles of the call running in `frame` (read, never written)."""
    local = frame.f_locals
    gen = Generation(frame_id=id(frame))
    for key in SETTINGS:
        if key == "strength" and local.get("image") is None:
            continue  # image-to-image only (a text-to-image call has no image to denoise)
        text = _text(local.get(key))
        if text is not None:
            gen.settings[key] = text
    if "boundary_ratio" not in gen.settings:  # Wan 2.2: the pipeline's config, not an argument
        boundary = _config_value(local.get("self"), "boundary_ratio")
        if _text(boundary) is not None:
            gen.settings["boundary_ratio"] = _text(boundary)
    seed = _seed(local)
    if seed is not None:
        gen.settings["seed"] = seed
    if local.get("prompt_embeds") is None:
        gen.roles.append("prompt")
    if local.get("negative_prompt_embeds") is None:
        gen.roles.append("negative")
    return gen
