"""step_callback(step): iterations of a sampling loop the user drives, through the loop's own
per-step callback.

Accepted call forms (told apart by their arguments):
- diffusers ``callback_on_step_end(pipe, i, t, callback_kwargs) -> callback_kwargs``
  (huggingface/diffusers ``pipeline_stable_diffusion.py``: the pipeline continues with
  ``callback_outputs.pop("latents", latents)``, so the dict is returned unchanged);
- diffusers' legacy ``callback(i, t, latents)`` (``callback_steps``), returns None;
- ComfyUI's sampler callback ``callback(step, x0, x, total_steps)``
  (comfy/samplers.py ``KSampler.sample`` / latent_preview.py ``prepare_callback``).
"""

from __future__ import annotations

from typing import Any, Optional

from ._tensors import is_tensor

_SOURCE = "torch.step_callback"


class StepCallback:
    """Marks one iteration per call on `step`; analyses the latents after the first and the
    last iteration when the loop passes them (and tells how many iterations there are)."""

    def __init__(self, step: Any, *, analyze: bool = True, family: Optional[str] = None) -> None:
        self.step = step
        self.analyze = analyze
        self.family = family
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        returned: Any = None
        latents: Any = None
        index = total = None
        if len(args) == 4 and isinstance(args[3], dict):  # diffusers callback_on_step_end
            pipe, index, _, returned = args
            latents = returned.get("latents")
            total = getattr(pipe, "num_timesteps", None)
        elif len(args) == 4:  # ComfyUI: (step, x0, x, total_steps)
            index, _, latents, total = args
        elif len(args) == 3:  # diffusers legacy callback(i, t, latents)
            index, _, latents = args
        try:
            self._record(index, total, latents)
        except Exception as e:  # noqa: BLE001 - never into the pipeline
            try:
                self.step.record_monitoring_error(_SOURCE, f"{type(e).__name__}: {e}")
            except Exception:
                pass
        return returned

    def _record(self, index: Any, total: Any, latents: Any) -> None:
        self.calls += 1
        self.step.mark_iteration()
        if not (self.analyze and is_tensor(latents)):
            return
        extra = {"family": self.family} if self.family is not None else {}
        if self.calls == 1:
            self.step.analyze_tensor("latents (first iteration)", latents, "latent", **extra)
        elif isinstance(total, int) and isinstance(index, int) and index == total - 1:
            self.step.analyze_tensor("latents (last iteration)", latents, "latent", **extra)


def step_callback(step: Any, *, analyze: bool = True,
                  family: Optional[str] = None) -> StepCallback:
    """A per-iteration callback for `step` (see StepCallback)."""
    return StepCallback(step, analyze=analyze, family=family)
