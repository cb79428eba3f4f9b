"""Reading tensors out of what diffusers / transformers / ComfyUI components return.

Output shapes handled (duck-typed, no import of those libraries):
- transformers encoders: ``BaseModelOutputWithPooling`` (``last_hidden_state``,
  ``pooler_output``), ``CLIPTextModelOutput`` (``text_embeds``, ``last_hidden_state``), or a
  tuple ``(last_hidden_state, pooled, ...)`` with ``return_dict=False``; ComfyUI's
  ``cond_stage_model`` returns ``(cond, pooled[, extra])``.
- diffusers denoisers: ``UNet2DConditionOutput`` / ``Transformer2DModelOutput`` (``sample``)
  or a tuple.
- schedulers: ``SchedulerOutput`` (``prev_sample``) or a tuple.
- VAEs: ``AutoencoderKLOutput`` (``latent_dist`` with ``mean``), ``DecoderOutput``
  (``sample``), tuples, or plain tensors (ComfyUI, whose images are channels-last).
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Tuple


_tensor_type: Optional[type] = None


def _torch_tensor_type() -> Optional[type]:
    """torch.Tensor once torch is imported (never imports it), else None."""
    global _tensor_type
    if _tensor_type is None:
        torch = sys.modules.get("torch")
        found = getattr(torch, "Tensor", None) if torch is not None else None
        if isinstance(found, type):
            _tensor_type = found
    return _tensor_type


def is_tensor(x: Any) -> bool:
    """A torch tensor (or anything shaped like one: shape, dtype, detach)."""
    tensor_type = _tensor_type or _torch_tensor_type()
    if tensor_type is not None and isinstance(x, tensor_type):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "detach")


def first_tensor(x: Any, *attrs: str) -> Optional[Any]:
    """The first tensor among `attrs` of x, or x itself, or the first tensor of a tuple/list.

    Called on every denoiser and scheduler output, between a model's layers where every
    lookup is paid with cold caches: tuples (``return_dict=False``, what the pipelines ask
    for) and tensors are recognised by type before any attribute is probed."""
    if isinstance(x, (tuple, list)):
        head = x[0] if x else None
        return head if head is not None and is_tensor(head) else None
    if is_tensor(x):
        return x
    for attr in attrs:
        value = getattr(x, attr, None)
        if value is not None and is_tensor(value):
            return value
    return None


def encoder_outputs(output: Any) -> Tuple[Optional[Any], Optional[Any]]:
    """(conditioning context (B, tokens, width), pooled (B, width)) of a text encoder output."""
    context = pooled = None
    for attr in ("last_hidden_state",):
        value = getattr(output, attr, None)
        if is_tensor(value):
            context = value
    for attr in ("text_embeds", "pooler_output"):
        value = getattr(output, attr, None)
        if is_tensor(value) and pooled is None:
            pooled = value
    if context is None and pooled is None:
        items = output if isinstance(output, (tuple, list)) else (output,)
        for item in items:
            if not is_tensor(item):
                continue
            if len(item.shape) == 3 and context is None:
                context = item
            elif len(item.shape) == 2 and pooled is None:
                pooled = item
    return context, pooled


def denoiser_conditioning(args: Tuple[Any, ...],
                          kwargs: dict) -> Tuple[Optional[Any], Optional[Any], Optional[Any]]:
    """(context, pooled, adm) a denoiser call receives.

    - context (B, tokens, width): ``encoder_hidden_states`` (diffusers' UNet and transformers),
      ``context`` (ComfyUI / ldm), else the third positional argument;
    - pooled (B, width): ``added_cond_kwargs["text_embeds"]`` (diffusers SDXL UNet),
      ``pooled_projections`` (diffusers SD3 / Flux transformers);
    - adm (B, width): ComfyUI's ``y`` (SDXL: pooled 1280 joined with 6 size embeddings).
    """
    context = kwargs.get("encoder_hidden_states", kwargs.get("context"))
    if context is None and len(args) > 2:
        context = args[2]
    pooled = kwargs.get("pooled_projections")
    added = kwargs.get("added_cond_kwargs")
    if pooled is None and isinstance(added, dict):
        pooled = added.get("text_embeds")
    adm = kwargs.get("y")
    return tuple(x if is_tensor(x) else None for x in (context, pooled, adm))  # type: ignore


def latent_of_encode(output: Any) -> Optional[Any]:
    """The latent of a VAE encode: a tensor, or the mean of diffusers' latent distribution."""
    dist = getattr(output, "latent_dist", None)
    if dist is None and isinstance(output, (tuple, list)) and output:
        dist = output[0]
    if dist is not None and is_tensor(getattr(dist, "mean", None)):
        return dist.mean
    return first_tensor(output, "latents", "sample")


def frames_and_pixels(image: Any) -> Tuple[int, int]:
    """(frames, pixels) of an image batch: (B,C,H,W), (B,C,T,H,W) or channels-last (B,H,W,C)."""
    shape = tuple(int(d) for d in image.shape)
    if len(shape) == 5:
        b, _, t, h, w = shape
        return b * t, b * t * h * w
    if len(shape) == 4:
        channels_last = shape[-1] in (1, 3, 4) and shape[1] not in (1, 3, 4)
        b, h, w = (shape[0], shape[1], shape[2]) if channels_last else (shape[0], shape[2], shape[3])
        return b, b * h * w
    if len(shape) == 3:  # a single (C,H,W) image
        return 1, shape[1] * shape[2]
    return 0, 0


def batch_of(x: Any) -> Optional[int]:
    """Leading dimension of a tensor, None otherwise."""
    if not is_tensor(x):
        return None
    shape = x.shape
    return int(shape[0]) if len(shape) > 0 else None


def cuda_memory() -> Tuple[Optional[float], Optional[float]]:
    """(allocated, reserved) bytes of torch's CUDA caching allocator, when torch with CUDA is
    loaded; (None, None) otherwise. Never imports torch."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_available():
            return None, None
        return float(torch.cuda.memory_allocated()), float(torch.cuda.memory_reserved())
    except Exception:
        return None, None


_SKIP_FILES = ("torch/nn/modules/module.py", "genscope/torch/", "contextlib.py")
# Whether a code object belongs to the machinery caller() looks past, by code object: the
# walk then costs a dictionary lookup per frame instead of string searches (bounded).
_skipped_code: dict = {}


def caller() -> str:
    """file:line of the first frame outside torch's module call machinery and genscope."""
    frame = sys._getframe(1)
    for _ in range(30):
        if frame is None:
            break
        code = frame.f_code
        skip = _skipped_code.get(code)
        if skip is None:
            name = code.co_filename.replace("\\", "/")
            skip = any(s in name for s in _SKIP_FILES)
            if len(_skipped_code) < 4096:
                _skipped_code[code] = skip
        if not skip:
            return f"{code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""
