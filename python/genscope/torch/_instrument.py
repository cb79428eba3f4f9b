"""instrument(pipe, run): steps, iterations and tensor analyses of a PyTorch pipeline by hooks.

What is hooked, and how:
- text encoders: a forward pre-hook opens a ``text_encoding`` step, the forward hook analyses
  the conditioning it returned and ends the step;
- the denoiser (``unet`` / ``transformer``): forward hooks count model calls and the batch
  they evaluated; the first call of a generation opens the ``sampling`` step;
- the scheduler: ``step()`` is wrapped (one iteration per call, latents analysed at the first
  and the last one), ``set_timesteps()`` marks the start of a new generation;
- the VAE: ``encode()`` / ``decode()`` are wrapped (they are methods, not ``forward``), giving
  ``latent_generation`` / ``vae_decode`` steps with ``frames`` and ``pixels`` counters.

A hook never changes an input or an output (every hook returns None; the wrappers return
what the wrapped method returned) and never raises into the pipeline: a failure inside a hook
is recorded in the run's monitoring_errors (source ``torch.instrument``). On exit every hook
handle is removed and every wrapped method restored, also when the pipeline raised.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from typing import Any, Callable, List, Optional, Tuple

from .. import _genscope
from ._components import Components, find_components
from ._tensors import (batch_of, caller, encoder_outputs, first_tensor, frames_and_pixels,
                       is_tensor, latent_of_encode)

_SOURCE = "torch.instrument"
_ORPHAN = ("the forward raised an exception that the pipeline caught; the step was ended at "
           "the next hooked call")


@functools.lru_cache(maxsize=1)
def _hook_options() -> Tuple[bool, bool]:
    """(with_kwargs, always_call) support of the installed torch (2.0 and 2.1 added them)."""
    try:
        import torch

        pre = inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters
        post = inspect.signature(torch.nn.Module.register_forward_hook).parameters
        return "with_kwargs" in pre and "with_kwargs" in post, "always_call" in post
    except Exception:
        return False, False


class _Sampling:
    """The sampling step of the generation in progress."""

    def __init__(self, step: Any, thread: int) -> None:
        self.step = step
        self.thread = thread
        self.calls_started = 0
        self.calls = 0  # completed denoiser calls
        self.evaluations = 0.0  # latent evaluations (CFG counts twice)
        self.iterations = 0
        self.pending_batches: List[int] = []  # denoiser batches since the last scheduler step
        self.last_latents: Any = None  # output of the latest scheduler step
        self.first_input: Any = None  # without a scheduler: the first / latest model input
        self.last_input: Any = None
        self.last_timestep: Optional[float] = None
        self.calls_in_iteration = 0


class Instrumentation:
    """The context manager returned by instrument(); hooks are live between enter and exit."""

    def __init__(self, pipe: Any, run: Any, *, analyze: bool = True,
                 family: Optional[str] = None) -> None:
        self.components: Components = find_components(pipe)
        if family is not None:
            _genscope._check_family(family)  # genscope.Error("UnknownFamily") now, not later
        self.run = run
        self.analyze = analyze
        self.family = family
        self.hook_errors = 0  #: Failures inside hooks (each one is also a monitoring error).
        self.active = False
        self._handles: List[Any] = []
        self._patches: List[Tuple[Any, str, bool, Any, Any]] = []
        self._text_open: List[Tuple[str, Any, int]] = []  # (name, step, thread)
        self._vae_depth = threading.local()
        self._sampling: Optional[_Sampling] = None
        self._num_steps: Optional[int] = None
        self._entered = False
        self._always_call = False

    # --- context manager ------------------------------------------------------------------
    def __enter__(self) -> "Instrumentation":
        if self._entered:
            raise RuntimeError("an Instrumentation can be entered once")
        self._entered = True
        if not self.run.active:  # disabled monitor or finished run: hook nothing
            return self
        self.run.attach("torch_components", "instrument", self.components.describe())
        try:
            self._install()
        except BaseException:
            self._uninstall()
            raise
        self.active = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if not self.active:
            return False
        self.active = False  # hooks still reachable from elsewhere now pass through
        try:
            for name, step, _ in self._text_open:
                self._guard(name, lambda s=step: self._fail_step(s, exc, _ORPHAN))
            self._text_open.clear()
            self._guard("sampling", lambda: self._end_sampling(exc))
        finally:
            self._uninstall()
        return False

    # --- installation -----------------------------------------------------------------------
    def _install(self) -> None:
        c = self.components
        with_kwargs, always_call = _hook_options()
        self._always_call = always_call
        pre_kw = {"with_kwargs": True} if with_kwargs else {}
        post_kw = dict(pre_kw, **({"always_call": True} if always_call else {}))
        for name, module in c.text_encoders.items():
            self._handles.append(module.register_forward_pre_hook(
                functools.partial(self._text_pre, name), **pre_kw))
            self._handles.append(module.register_forward_hook(
                functools.partial(self._text_post, name), **post_kw))
        if c.denoiser is not None:
            self._handles.append(c.denoiser.register_forward_pre_hook(self._denoiser_pre, **pre_kw))
            self._handles.append(c.denoiser.register_forward_hook(self._denoiser_post, **post_kw))
        if c.scheduler is not None:
            self._wrap(c.scheduler, "step", self._scheduler_step)
            if callable(getattr(c.scheduler, "set_timesteps", None)):
                self._wrap(c.scheduler, "set_timesteps", self._set_timesteps)
        if c.vae is not None:
            self._wrap(c.vae, "encode", functools.partial(self._vae_call, "latent_generation",
                                                          "vae.encode"))
            self._wrap(c.vae, "decode", functools.partial(self._vae_call, "vae_decode",
                                                          "vae.decode"))

    def _wrap(self, obj: Any, attr: str, around: Callable[..., Any]) -> None:
        """Shadows obj.attr with an instance attribute calling around(original, *args)."""
        original = getattr(obj, attr)
        had = attr in getattr(obj, "__dict__", {})
        previous = obj.__dict__[attr] if had else None

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return original(*args, **kwargs)
            return around(original, *args, **kwargs)

        setattr(obj, attr, wrapper)
        self._patches.append((obj, attr, had, previous, wrapper))

    def _uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for obj, attr, had, previous, wrapper in reversed(self._patches):
            if obj.__dict__.get(attr) is not wrapper:  # replaced meanwhile: ours stays inert
                self._record(f"{type(obj).__name__}.{attr}",
                             "replaced while instrumented; the genscope wrapper stays in the "
                             "chain and passes calls through")
                continue
            if had:
                setattr(obj, attr, previous)
            else:
                delattr(obj, attr)
        self._patches.clear()

    # --- failures -----------------------------------------------------------------------------
    def _record(self, where: str, message: str) -> None:
        try:
            self.run.record_monitoring_error(_SOURCE, f"{where}: {message}")
        except Exception:
            pass

    def _failed(self, where: str, e: Exception) -> None:
        self.hook_errors += 1
        self._record(where, f"{type(e).__name__}: {e}")

    def _guard(self, where: str, fn: Callable[[], Any]) -> Any:
        """Runs monitoring code; a failure becomes a monitoring error, never an exception."""
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - the pipeline must not see it
            self._failed(where, e)
            return None

    def _raised(self, output: Any) -> Optional[BaseException]:
        """The exception a forward raised, when torch (>= 2.1, always_call) runs the forward
        hook from its exception handler: output is None there and the exception is current."""
        return sys.exc_info()[1] if self._always_call and output is None else None

    @staticmethod
    def _fail_step(step: Any, exc: Optional[BaseException], orphan_message: str) -> None:
        if exc is not None:
            step.__exit__(type(exc), exc, exc.__traceback__)
        else:
            step.fail(orphan_message)
            step.end()

    def _analyze(self, step: Any, name: str, tensor: Any, role: str, **extra: Any) -> None:
        if self.family is not None and role in ("conditioning", "pooled", "latent"):
            extra["family"] = self.family
        step.analyze_tensor(name, tensor, role, **extra)

    # --- steps of this thread ---------------------------------------------------------------------
    def _close_orphans(self) -> None:
        """Text-encoding steps of this thread still open when another component runs: their
        forward raised (torch < 2.1 calls no forward hook then) and the pipeline went on."""
        me = threading.get_ident()
        keep = []
        for entry in self._text_open:
            if entry[2] == me:
                self._guard(entry[0], lambda s=entry[1]: self._fail_step(s, None, _ORPHAN))
            else:
                keep.append(entry)
        self._text_open = keep

    def _begin_sampling(self) -> _Sampling:
        c = self.components
        name = c.denoiser_name or "scheduler"
        step = self.run.step("sampling", f"denoise ({name})", source=caller())
        state = _Sampling(step, threading.get_ident())
        self._sampling = state
        if c.denoiser is not None:
            step.label("model_class", type(c.denoiser).__name__)
        if c.scheduler is not None:
            step.label("scheduler", type(c.scheduler).__name__)
        if self._num_steps is not None:
            step.label("num_inference_steps", self._num_steps)
        step.begin_iterations()
        return state

    def _end_sampling(self, exc: Optional[BaseException] = None) -> None:
        s = self._sampling
        if s is None:
            return
        self._sampling = None
        try:
            # Counted in Python per call, recorded once: the per-iteration path stays short.
            if s.calls:
                s.step.add_counter("model_calls", float(s.calls))
            if s.evaluations:
                s.step.add_counter("model_evaluations", s.evaluations)
            if self.components.scheduler is None and s.calls_in_iteration > 0:
                s.step.mark_iteration()  # the last iteration ends here
            if self.analyze:
                if s.last_latents is not None:
                    self._analyze(s.step, "latents (last iteration)", s.last_latents, "latent")
                elif self.components.scheduler is None and is_tensor(s.last_input):
                    self._analyze(s.step, "model input (last call)", s.last_input, "latent")
        finally:
            if exc is not None:
                s.step.__exit__(type(exc), exc, exc.__traceback__)
            else:
                s.step.end()

    # --- text encoders ----------------------------------------------------------------------------
    def _text_pre(self, name: str, module: Any, args: Tuple[Any, ...],
                  kwargs: Optional[dict] = None) -> None:
        if self.active:
            self._guard(name, lambda: self._text_begin(name, args, kwargs or {}))
        return None

    def _text_begin(self, name: str, args: Tuple[Any, ...], kwargs: dict) -> None:
        self._close_orphans()
        self._end_sampling()  # a text encoder after sampling: the next generation begins
        step = self.run.step("text_encoding", name, source=caller())
        self._text_open.append((name, step, threading.get_ident()))
        ids = args[0] if args else kwargs.get("input_ids")
        if is_tensor(ids) and not getattr(ids.dtype, "is_floating_point", True):
            step.add_counter("tokens", float(ids.numel()))
            step.add_counter("items", float(ids.shape[0]) if len(ids.shape) > 1 else 1.0)
        tokenizer = self.components.tokenizers.get(name.replace("text_encoder", "tokenizer"))
        max_length = getattr(tokenizer, "model_max_length", None) if tokenizer else None
        if isinstance(max_length, int) and max_length < 1 << 40:
            step.label("max_tokens", max_length)

    def _text_post(self, name: str, module: Any, args: Tuple[Any, ...], *rest: Any) -> None:
        if self.active:
            self._guard(name, lambda: self._text_end(name, rest[-1]))
        return None

    def _text_end(self, name: str, output: Any) -> None:
        me = threading.get_ident()
        for i in range(len(self._text_open) - 1, -1, -1):
            if self._text_open[i][0] == name and self._text_open[i][2] == me:
                step = self._text_open.pop(i)[1]
                break
        else:
            return
        exc = self._raised(output)
        if exc is not None:
            self._fail_step(step, exc, _ORPHAN)
            return
        try:
            if self.analyze:
                context, pooled = encoder_outputs(output)
                if context is not None:
                    extra = {"pooled_shape": tuple(pooled.shape)} if pooled is not None else {}
                    self._analyze(step, "conditioning", context, "conditioning", **extra)
                if pooled is not None:
                    self._analyze(step, "pooled", pooled, "pooled")
        finally:
            step.end()

    # --- denoiser ---------------------------------------------------------------------------------
    def _denoiser_pre(self, module: Any, args: Tuple[Any, ...],
                      kwargs: Optional[dict] = None) -> None:
        if not self.active:
            return None
        try:
            if (self._sampling is not None and self.components.scheduler is not None
                    and not self._text_open):
                return None  # the usual call: nothing to record before the forward
            self._denoiser_begin(args, kwargs or {})
        except Exception as e:  # noqa: BLE001 - the pipeline must not see it
            self._failed("denoiser", e)
        return None

    def _denoiser_begin(self, args: Tuple[Any, ...], kwargs: dict) -> None:
        self._close_orphans()
        s = self._sampling or self._begin_sampling()
        s.calls_started += 1
        if self.components.scheduler is not None:
            return
        # No scheduler (ComfyUI's samplers): an iteration is a run of calls at one timestep.
        x = args[0] if args else next((kwargs[k] for k in ("sample", "hidden_states", "x")
                                       if k in kwargs), None)
        t = args[1] if len(args) > 1 else next((kwargs[k] for k in ("timestep", "timesteps", "t")
                                                if k in kwargs), None)
        value = None
        if is_tensor(t) and t.numel() > 0:
            value = float(t.reshape(-1)[0])
        elif isinstance(t, (int, float)):
            value = float(t)
        if s.calls_in_iteration > 0 and (value is None or value != s.last_timestep):
            s.step.mark_iteration()
            s.iterations += 1
            s.calls_in_iteration = 0
        s.last_timestep = value
        s.calls_in_iteration += 1
        if s.first_input is None and is_tensor(x):
            s.first_input = x
            if self.analyze:
                self._analyze(s.step, "model input (first call)", x, "latent")
        s.last_input = x

    def _denoiser_post(self, module: Any, args: Tuple[Any, ...], *rest: Any) -> None:
        if not self.active:
            return None
        try:
            s = self._sampling
            output = rest[-1]
            if s is None or self._raised(output) is not None:
                return None  # the exception reaches the pipeline
            s.calls += 1
            batch = batch_of(first_tensor(output, "sample"))
            if batch is not None:
                s.pending_batches.append(batch)
        except Exception as e:  # noqa: BLE001
            self._failed("denoiser", e)
        return None

    # --- scheduler ----------------------------------------------------------------------------------
    def _set_timesteps(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._guard("scheduler.set_timesteps", self._close_generation)
        result = original(*args, **kwargs)
        self._guard("scheduler.set_timesteps", self._read_num_steps)
        return result

    def _close_generation(self) -> None:
        if self._sampling is not None and (self._sampling.iterations > 0 or
                                           self._sampling.calls_started > 0):
            self._end_sampling()

    def _read_num_steps(self) -> None:
        timesteps = getattr(self.components.scheduler, "timesteps", None)
        self._num_steps = len(timesteps) if timesteps is not None else None
        if self._sampling is not None and self._num_steps is not None:
            self._sampling.step.label("num_inference_steps", self._num_steps)

    def _scheduler_step(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        sample = args[2] if len(args) > 2 else kwargs.get("sample")
        try:
            if self._sampling is None or self._sampling.iterations == 0:
                self._scheduler_begin(sample)
        except Exception as e:  # noqa: BLE001
            self._failed("scheduler.step", e)
        result = original(*args, **kwargs)
        try:
            self._scheduler_end(sample, result)
        except Exception as e:  # noqa: BLE001
            self._failed("scheduler.step", e)
        return result

    def _scheduler_begin(self, sample: Any) -> None:
        s = self._sampling or self._begin_sampling()
        if s.iterations == 0 and self.analyze and is_tensor(sample):
            self._analyze(s.step, "latents (first iteration)", sample, "latent")

    def _scheduler_end(self, sample: Any, result: Any) -> None:
        s = self._sampling
        if s is None:
            return
        latents = first_tensor(result, "prev_sample")
        if latents is not None:
            s.last_latents = latents
        batch = batch_of(sample)
        if batch and s.pending_batches:
            # CFG evaluates the model on the conditional and unconditional batch: in one call
            # of twice the batch (diffusers) or in two calls (ComfyUI when memory is short).
            s.evaluations += sum(s.pending_batches) / batch
        s.pending_batches.clear()
        s.iterations += 1
        s.step.mark_iteration()

    # --- VAE -------------------------------------------------------------------------------------------
    def _vae_call(self, kind: str, name: str, original: Callable[..., Any], *args: Any,
                  **kwargs: Any) -> Any:
        depth = getattr(self._vae_depth, "value", 0)
        if depth > 0:  # encode/decode calling each other or themselves: one step
            return original(*args, **kwargs)
        step = self._guard(name, lambda: self._vae_begin(kind, name, args, kwargs))
        self._vae_depth.value = depth + 1
        try:
            result = original(*args, **kwargs)
        except BaseException as e:
            if step is not None:
                self._guard(name, functools.partial(self._fail_step, step, e, ""))
            raise
        finally:
            self._vae_depth.value = depth
        if step is not None:
            self._guard(name, lambda: self._vae_end(kind, step, result))
        return result

    def _vae_begin(self, kind: str, name: str, args: Tuple[Any, ...], kwargs: dict) -> Any:
        self._close_orphans()
        self._end_sampling()
        step = self.run.step(kind, name, source=caller())
        if kind == "latent_generation":
            pixels = args[0] if args else kwargs.get("x", kwargs.get("pixel_samples"))
            if is_tensor(pixels):
                frames, count = frames_and_pixels(pixels)
                step.add_counter("frames", float(frames))
                step.add_counter("pixels", float(count))
        return step

    def _vae_end(self, kind: str, step: Any, result: Any) -> None:
        try:
            if kind == "latent_generation":
                latent = latent_of_encode(result)
                if self.analyze and latent is not None:
                    self._analyze(step, "latents (encoded)", latent, "latent")
            else:
                image = first_tensor(result, "sample")
                if image is not None:
                    frames, count = frames_and_pixels(image)
                    step.add_counter("frames", float(frames))
                    step.add_counter("pixels", float(count))
                    if self.analyze:
                        self._analyze(step, "image", image, "image")
        finally:
            step.end()


def instrument(pipe: Any, run: Any, *, analyze: bool = True,
               family: Optional[str] = None) -> Instrumentation:
    """Hooks a pipeline's components for the duration of a ``with`` block.

    ``pipe``: a diffusers pipeline, any object with diffusers' attribute names, or a mapping
    ``{"text_encoder": module, "unet": module, "vae": vae, "scheduler": scheduler, ...}``.
    ``analyze``: attach tensor analyses (conditioning, first/last latents, decoded images).
    ``family``: the model family the tensors must match ("sdxl", "flux-dev", ...).
    """
    return Instrumentation(pipe, run, analyze=analyze, family=family)
