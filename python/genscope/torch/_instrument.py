"""instrument(pipe, run): steps, iterations and tensor analyses of a PyTorch pipeline.

What is hooked, and how:
- text encoders and the denoiser (``unet`` / ``transformer``): ``forward`` is wrapped (an
  instance attribute shadowing the class's method, the way accelerate's offload hooks do it).
  A wrapper sees the call's keyword arguments and its exception on every torch version,
  where forward hooks see neither before torch 2.0 / 2.1 (no post-hook runs after a raising
  forward there). A text encoder call is a ``text_encoding`` step; the first denoiser call of
  a generation opens the ``sampling`` step and analyses the conditioning it receives;
- the scheduler: ``step()`` is wrapped (iterations, latents analysed at the first and the
  last one), ``set_timesteps()`` marks the start of a new generation and gives the schedule;
- the VAE: ``encode()`` / ``decode()`` are wrapped, giving ``latent_generation`` /
  ``vae_decode`` steps with ``frames`` and ``pixels`` counters;
- the pipeline's ``__call__`` is read, not wrapped (_generation.py): its arguments become the
  generation's labels and tell the prompt's encoder calls from the negative prompt's.

A wrapper never changes an input or an output (it returns what the wrapped method returned
and re-raises what it raised) and never raises into the pipeline: a failure inside genscope's
code is recorded in the run's monitoring_errors (source ``torch.instrument``). On exit every
wrapped method is restored, also when the pipeline raised.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import types
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .. import _genscope
from ._components import MORE_MODELS, Components, _is_module, find_components
from ._distributed import mark_distributed
from ._generation import Generation, call_code, find_call_frame, read_generation
from ._settings import model_of, pipeline_settings
from ._tensors import (batch_of, caller, denoiser_conditioning, encoder_outputs, first_tensor,
                       frames_and_pixels, is_tensor, latent_of_encode)

_SOURCE = "torch.instrument"


class _Sampling:
    """The sampling step of the generation in progress."""

    def __init__(self, step: Any, thread: int) -> None:
        self.step = step
        self.thread = thread
        self.calls_started = 0
        self.calls = 0  # completed denoiser calls
        self.evaluations = 0.0  # latent evaluations (CFG counts twice)
        self.iterations = 0
        self.scheduler_steps = 0  # scheduler.step() calls
        self.marked_at = 0  # scheduler_steps when the latest iteration was marked
        self.pending_batches: List[int] = []  # denoiser batches since the last scheduler step
        self.last_latents: Any = None  # output of the latest scheduler step
        self.first_input: Any = None  # without a scheduler: the first / latest model input
        self.last_input: Any = None
        self.last_timestep: Optional[float] = None
        self.calls_in_iteration = 0
        self.model_calls: Dict[str, int] = {}  # completed calls per denoiser (Wan 2.2: two)
        self.model_seconds: Dict[str, float] = {}
        # Shapes for the family verdict: what the denoiser received, what the scheduler steps.
        self.context_shape: Optional[Tuple[int, ...]] = None
        self.pooled_shape: Optional[Tuple[int, ...]] = None
        self.latent_shape: Optional[Tuple[int, ...]] = None
        # the audio stream's context (LTX-2), () when the denoiser received none
        self.audio_shape: Optional[Tuple[int, ...]] = None
        self.first_context: Any = None  # the first call's context, for text steps without one


class _Schedule:
    """What scheduler.set_timesteps() was asked and made, for diffusers' progress-bar rule."""

    def __init__(self, asked: Optional[int], timesteps: Optional[int], order: int) -> None:
        self.asked = asked  # num_inference_steps given to set_timesteps
        self.timesteps = timesteps  # len(scheduler.timesteps) it made
        self.order = order
        # diffusers: num_warmup_steps = len(timesteps) - num_inference_steps * scheduler.order
        self.warmup = max(timesteps - asked * order, 0) if asked and timesteps else 0


class Instrumentation:
    """The context manager returned by instrument(); wrappers are live between enter and exit."""

    def __init__(self, pipe: Any, run: Any, *, analyze: bool = True,
                 family: Optional[str] = None) -> None:
        self.components: Components = find_components(pipe)
        self._pipe = pipe
        if family is not None:
            _genscope._check_family(family)  # genscope.Error("UnknownFamily") now, not later
        self.run = run
        self.analyze = analyze
        self.family = family
        # The family the analyses are checked against: `family`, an alias ("wan2.2") resolved
        # at the denoiser's first call by what it receives (_genscope._resolve_family).
        self._family = family
        # Text steps given the conditioning the denoiser receives once it is called: (step id,
        # role, shape of the encoder's own 3-D output or None). Those whose encoder returned no
        # last_hidden_state (causal / vision-language models: the pipeline takes
        # hidden_states[k]), and those whose output the pipeline crops (template tokens dropped:
        # HunyuanVideo's Llama, HunyuanVideo 1.5's Qwen2.5-VL): same width, more tokens.
        self._text_pending: List[Tuple[int, str, Optional[Tuple[int, ...]]]] = []
        self.hook_errors = 0  #: Failures inside genscope's code (each a monitoring error).
        self.active = False
        self._patches: List[Tuple[Any, str, bool, Any, Any]] = []
        self._forwards: Dict[int, Tuple[Any, Any, Any]] = {}  # module id -> (module, around, wrapper)
        self._vae_depth = threading.local()
        self._sampling: Optional[_Sampling] = None
        self._schedule: Optional[_Schedule] = None
        self._call_code = call_code(pipe)
        self._generation: Optional[Generation] = None
        self._run_labelled = False
        self._settings_labelled = False
        self._entered = False

    # --- context manager ------------------------------------------------------------------
    def __enter__(self) -> "Instrumentation":
        if self._entered:
            raise RuntimeError("an Instrumentation can be entered once")
        self._entered = True
        if not self.run.active:  # disabled monitor or finished run: hook nothing
            return self
        self.run.attach("torch_components", "instrument", self.components.describe())
        mark_distributed(self.run)  # an initialised process group's rank (docs/distributed.md)
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
        self.active = False  # wrappers still reachable from elsewhere now pass through
        try:
            self._guard("sampling", lambda: self._end_sampling(exc))
        finally:
            self._uninstall()
        return False

    # --- installation -----------------------------------------------------------------------
    def _install(self) -> None:
        c = self.components
        for name, module in c.text_encoders.items():
            self._wrap_forward(module, functools.partial(self._text_forward, name))
        for name, module in c.denoisers().items():
            self._wrap_forward(module, functools.partial(self._denoiser_forward, name))
        if c.scheduler is not None:
            self._wrap(c.scheduler, "step", self._scheduler_step)
            if callable(getattr(c.scheduler, "set_timesteps", None)):
                self._wrap(c.scheduler, "set_timesteps", self._set_timesteps)
        for name, model in c.more_models.items():
            for method in MORE_MODELS[name]:
                where = f"{name}.{method}" if method != "forward" else name
                around = functools.partial(self._model_call, where)
                if method == "forward" and _is_module(model):
                    self._wrap_forward(model, around)
                else:
                    self._wrap(model, method, around)
        if c.vae is not None:
            self._wrap(c.vae, "encode", functools.partial(self._vae_call, "latent_generation",
                                                          "vae.encode"))
            self._wrap(c.vae, "decode", functools.partial(self._vae_call, "vae_decode",
                                                          "vae.decode"))
        self._wrap_moves()
        if not isinstance(self._pipe, Mapping):  # a mapping of components has no methods of ours
            for method in _LORA_METHODS:
                if callable(getattr(self._pipe, method, None)):
                    self._wrap(self._pipe, method, functools.partial(self._lora_call, method))
            if callable(getattr(self._pipe, "enable_model_cpu_offload", None)):
                self._wrap(self._pipe, "enable_model_cpu_offload", self._offload_enabled)

    def _wrap_moves(self) -> None:
        """Wraps ``to`` of every hooked module that does not have genscope's wrapper there (now):
        accelerate's hook removal pops ``to`` from a module's __dict__ (its own warning
        wrapper's slot), which diffusers does after every pipeline call with model offload."""
        for name, module in self._modules().items():
            if not callable(getattr(module, "to", None)):
                continue
            ours = [p for p in self._patches if p[0] is module and p[1] == "to"]
            if ours and module.__dict__.get("to") is ours[-1][4]:
                continue
            self._patches[:] = [p for p in self._patches if p not in ours]  # popped: nothing to undo
            self._wrap(module, "to", functools.partial(self._model_to, name, module))

    def _offload_enabled(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``pipe.enable_model_cpu_offload()`` (also diffusers' own call after every pipeline call,
        ``maybe_free_model_hooks``): its hook removal dropped the ``to`` wrappers; put back."""
        result = original(*args, **kwargs)
        self._guard("enable_model_cpu_offload", self._wrap_moves)
        return result

    def _modules(self) -> Dict[str, Any]:
        """Every hooked torch module by name: text encoders, denoisers, other models, VAE."""
        c = self.components
        found = {**c.text_encoders, **c.denoisers(),
                 **{n: m for n, m in c.more_models.items() if _is_module(m)}}
        if c.vae is not None and _is_module(c.vae):
            found["vae"] = c.vae
        return found

    def _wrap(self, obj: Any, attr: str, around: Callable[..., Any]) -> None:
        """Shadows obj.attr with an instance attribute calling around(original, *args)."""
        self._copy_without_wrappers(obj)
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

    def _wrap_forward(self, module: Any, around: Callable[..., Any]) -> None:
        """Shadows module.forward with a method bound to the module, calling
        around(original, *args). Bound, not a closure over the module: ``copy.deepcopy``
        rebinds it to the copy (which then runs its own weights), and pickling stores it as
        ``getattr(module, "forward")``, i.e. the class's forward when loaded.

        A module with accelerate's hook (``enable_model_cpu_offload``, device maps) gets the
        wrapper in the hook's ``_old_forward`` slot, under the hook: diffusers removes and adds
        its offload hooks again after every pipeline call (``maybe_free_model_hooks``), which
        puts ``_old_forward`` back in ``forward`` and hooks that again, so the wrapper stays in
        the chain, where a wrapper over the hook would be dropped with it.

        A module compiled in place (``module.compile()``: ``__call__`` runs the compiled
        ``_compiled_call_impl``, which calls ``forward`` inside the compiled code) gets the
        wrapper around ``_compiled_call_impl``: inside, dynamo would trace the wrapper, making
        its counting part of the graph and breaking the graph at each call into genscope."""
        self._copy_without_wrappers(module)
        if module.__dict__.get("_compiled_call_impl") is not None:
            slot = "_compiled_call_impl"
        elif _accelerate_hooked(module):
            slot = "_old_forward"
        else:
            slot = "forward"
        had = slot in module.__dict__
        previous = module.__dict__[slot] if had else None  # accelerate's, for one
        cls_forward = type(module).forward

        def forward(mod: Any, *args: Any, **kwargs: Any) -> Any:
            original = previous if had else functools.partial(cls_forward, mod)
            if not self.active:
                return original(*args, **kwargs)
            return around(original, *args, **kwargs)

        functools.update_wrapper(forward, cls_forward)  # name "forward", signature
        bound = types.MethodType(forward, module)
        setattr(module, slot, bound)
        self._patches.append((module, slot, had, previous, bound))
        self._forwards[id(module)] = (module, around, bound)

    def _follow_compile(self) -> None:
        """A model compiled in place inside the block (``module.compile()`` after instrument):
        its wrapper moves from ``forward`` to around ``_compiled_call_impl`` before the model's
        next call (called as a generation begins: a text encoder's call, set_timesteps), so the
        compiled code does not trace it."""
        for module, around, bound in list(self._forwards.values()):
            d = module.__dict__
            if d.get("_compiled_call_impl") is None or d.get("forward") is not bound:
                continue
            entry = next(p for p in self._patches if p[4] is bound)
            self._patches.remove(entry)
            _put_back(d, "forward", "forward", entry[2], entry[3], module)
            self._wrap_forward(module, around)

    def _copy_without_wrappers(self, obj: Any) -> None:
        """Makes every copy of obj (``copy.copy``, ``copy.deepcopy``, pickle) a copy of the object
        as it was, without genscope's wrappers: an instance attribute ``__getstate__`` (which
        copy and pickle look up on the instance) returns obj's state with each wrapper replaced
        by what it shadowed. A copy is then independent of the original — a pipeline that
        deep-copies its scheduler (LTX-2's audio scheduler) advances the copy, not the
        instrumented original through a wrapper bound to it — and is not instrumented itself."""
        if "__getstate__" in obj.__dict__ and any(
                o is obj and a == "__getstate__" for o, a, *_ in self._patches):
            return
        had = "__getstate__" in obj.__dict__
        previous = obj.__dict__["__getstate__"] if had else None
        own = getattr(type(obj), "__getstate__", None)  # object's since Python 3.11
        patches = self._patches

        def __getstate__() -> Any:
            if had:
                state = previous()
            elif own is not None:
                state = own(obj)
            else:
                state = obj.__dict__
            if not isinstance(state, dict):
                return state
            state = dict(state)
            for o, attr, was_there, before, wrapper in patches:
                where = _slot_holding(state, attr, wrapper) if o is obj else None
                if where is not None:
                    _put_back(state, where, attr, was_there, before, obj)
            return state

        obj.__dict__["__getstate__"] = __getstate__
        self._patches.append((obj, "__getstate__", had, previous, __getstate__))

    def _uninstall(self) -> None:
        for obj, attr, had, previous, wrapper in reversed(self._patches):
            where = _slot_holding(obj.__dict__, attr, wrapper)
            if where is None and attr not in obj.__dict__:
                continue  # dropped meanwhile (accelerate's hook removal pops `to`): nothing left
            if where is None:  # replaced meanwhile: ours stays inert
                self._record(f"{type(obj).__name__}.{attr}",
                             "replaced while instrumented; the genscope wrapper stays in the "
                             "chain and passes calls through")
                continue
            _put_back(obj.__dict__, where, attr, had, previous, obj)
        self._patches.clear()
        self._forwards.clear()

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

    @staticmethod
    def _fail_step(step: Any, exc: BaseException) -> None:
        step.__exit__(type(exc), exc, exc.__traceback__)

    def _in_step(self, where: str, begin: Callable[[], Any], end: Callable[[Any, Any], None],
                 original: Callable[..., Any], args: Tuple[Any, ...], kwargs: dict) -> Any:
        """original(*args, **kwargs) inside the step begin() opens (None: no step), closed by
        end(step, result); when original raises, the step fails and the exception goes on.
        begin's and end's own failures are monitoring errors."""
        step = self._guard(where, begin)
        try:
            result = original(*args, **kwargs)
        except BaseException as e:
            if step is not None:
                self._guard(where, functools.partial(self._fail_step, step, e))
            raise
        if step is not None:
            self._guard(where, lambda: end(step, result))
        return result

    def _in_outer_step(self, where: str, begin: Callable[[], Any],
                       end: Callable[[Any, Any], None], original: Callable[..., Any],
                       args: Tuple[Any, ...], kwargs: dict) -> Any:
        """_in_step for the outermost of nested calls on this thread (a VAE's encode inside
        decode, a model calling itself): the inner ones are part of its step."""
        depth = getattr(self._vae_depth, "value", 0)
        if depth > 0:
            return original(*args, **kwargs)

        def counted(*a: Any, **k: Any) -> Any:
            self._vae_depth.value = depth + 1
            try:
                return original(*a, **k)
            finally:
                self._vae_depth.value = depth

        return self._in_step(where, begin, end, counted, args, kwargs)

    def _analyze(self, step: Any, name: str, tensor: Any, role: str, *,
                 family: bool = True, **extra: Any) -> None:
        if family and self._family is not None and role in ("conditioning", "pooled", "latent"):
            extra["family"] = self._family
        step.analyze_tensor(name, tensor, role, **extra)

    def _check_encoder_family(self) -> bool:
        """Family checks on a text encoder's own output only where it is what the model gets:
        no denoiser hooked (where the joined conditioning is checked) and one encoder (SDXL's
        CLIP-L 768 and OpenCLIP-G 1280 are parts of its 2048, not conditionings)."""
        return self.components.denoiser is None and len(self.components.text_encoders) == 1

    # --- generations ----------------------------------------------------------------------------
    def _enter_generation(self) -> Optional[Generation]:
        """The generation of the pipeline call running now (None outside a pipeline call); a
        new one when the call is not the one seen last or that one has been sampled."""
        frame = find_call_frame(self._call_code, self._shares_components)
        if frame is None:
            return None
        try:
            gen = self._generation
            if gen is None or gen.sampled or gen.frame_id != id(frame):
                gen = read_generation(frame)
                self._generation = gen
                self._label_run(gen)
            return gen
        finally:
            del frame  # no reference to the pipeline's frame outlives this call

    def _shares_components(self, owner: Any) -> bool:
        """Whether `owner` (the self of a __call__ on the stack) is a pipeline holding the
        instrumented denoiser, VAE or scheduler under diffusers' names."""
        if owner is None:
            return False
        c = self.components
        try:
            return any(mine is not None and getattr(owner, attr, None) is mine
                       for attr, mine in ((c.denoiser_name or "unet", c.denoiser),
                                          *c.more_denoisers.items(),
                                          ("vae", c.vae), ("scheduler", c.scheduler)))
        except Exception:  # a property that raises: not a pipeline of ours
            return False

    def _label_run(self, gen: Generation) -> None:
        if self._run_labelled:
            return  # the run's labels are its first generation's; each sampling step has its own
        self._run_labelled = True
        for key, value in gen.settings.items():
            self.run.label(key, value)
        if self.components.scheduler is not None:
            self.run.label("scheduler", type(self.components.scheduler).__name__)

    def _begin_sampling(self) -> _Sampling:
        c = self.components
        name = ", ".join(c.denoisers()) or "scheduler"
        step = self.run.step("sampling", f"denoise ({name})", source=caller())
        state = _Sampling(step, threading.get_ident())
        self._sampling = state
        if c.denoiser is not None:
            step.label("model_class", type(model_of(c.denoiser)).__name__)
        settings = self._guard("settings", lambda: pipeline_settings(
            self._pipe, self._modules(), c.vae, c.denoiser)) or {}
        for key, value in settings.items():
            step.label(key, value)
            if not self._settings_labelled:
                self.run.label(key, value)
        self._settings_labelled = True
        if c.scheduler is not None:
            step.label("scheduler", type(c.scheduler).__name__)
            step.label("scheduler_order", self._order())
        gen = self._generation
        if gen is not None and not gen.sampled:
            for key, value in gen.settings.items():
                step.label(key, value)
        if self._schedule is not None and self._schedule.asked is not None and (
                gen is None or "num_inference_steps" not in gen.settings):
            step.label("num_inference_steps", self._schedule.asked)
        step.begin_iterations()
        return state

    def _order(self) -> int:
        if self._schedule is not None:
            return self._schedule.order
        order = getattr(self.components.scheduler, "order", 1)
        return order if isinstance(order, int) and order >= 1 else 1

    def _end_sampling(self, exc: Optional[BaseException] = None) -> None:
        s = self._sampling
        if s is None:
            return
        self._sampling = None
        self._text_pending = []  # a generation's text steps get its own denoiser's input
        if self._generation is not None:
            self._generation.sampled = True
        try:
            # Counted in Python per call, recorded once: the per-iteration path stays short.
            if s.calls:
                s.step.add_counter("model_calls", float(s.calls))
            if len(self.components.denoisers()) > 1:  # which expert ran how often, how long
                for model in self.components.denoisers():
                    s.step.label(f"model_calls.{model}", s.model_calls.get(model, 0))
                    s.step.label(f"model_seconds.{model}", f"{s.model_seconds.get(model, 0.0):.6f}")
            if s.evaluations:
                s.step.add_counter("model_evaluations", s.evaluations)
            if s.scheduler_steps:
                s.step.add_counter("scheduler_steps", float(s.scheduler_steps))
                if exc is None and s.scheduler_steps > s.marked_at:
                    s.step.mark_iteration()  # the last step of a schedule that ends mid-order
                    s.iterations += 1
                if s.iterations != s.scheduler_steps:
                    s.step.label("iteration", "a denoising step as asked (num_inference_steps); "
                                 "scheduler_steps counts scheduler.step() calls, model_calls "
                                 "the denoiser's forward calls, model_evaluations the latents "
                                 "it evaluated (classifier-free guidance counts 2)")
            if self.components.scheduler is None and s.calls_in_iteration > 0:
                s.step.mark_iteration()  # the last iteration ends here
            if self.analyze:
                if s.context_shape is not None or s.latent_shape is not None:
                    s.step.attach("family", "family verdict", _genscope._family_verdict(
                        s.context_shape, s.pooled_shape, s.latent_shape, audio=s.audio_shape))
                if s.last_latents is not None:
                    self._analyze(s.step, "latents (last iteration)", s.last_latents, "latent")
                elif self.components.scheduler is None and is_tensor(s.last_input):
                    self._analyze(s.step, "model input (last call)", s.last_input, "latent")
        finally:
            if exc is not None:
                self._fail_step(s.step, exc)
            else:
                s.step.end()

    # --- text encoders ----------------------------------------------------------------------------
    def _text_forward(self, name: str, original: Callable[..., Any], *args: Any,
                      **kwargs: Any) -> Any:
        return self._in_step(name, lambda: self._text_begin(name, args, kwargs), self._text_end,
                             original, args, kwargs)

    def _text_begin(self, name: str, args: Tuple[Any, ...], kwargs: dict) -> Any:
        self._follow_compile()
        self._end_sampling()  # a text encoder after sampling: the next generation begins
        gen = self._enter_generation()
        role = gen.role_of_next_call(name) if gen is not None else "prompt"
        title = f"{name} ({role})" if gen is not None else name
        step = self.run.step("text_encoding", title, source=caller())
        self._text_role = role
        ids = args[0] if args else kwargs.get("input_ids")
        if is_tensor(ids) and not getattr(ids.dtype, "is_floating_point", True):
            step.add_counter("tokens", float(ids.numel()))
            step.add_counter("items", float(ids.shape[0]) if len(ids.shape) > 1 else 1.0)
        tokenizer = self.components.tokenizers.get(name.replace("text_encoder", "tokenizer"))
        max_length = getattr(tokenizer, "model_max_length", None) if tokenizer else None
        if isinstance(max_length, int) and max_length < 1 << 40:
            step.label("max_tokens", max_length)
        return step

    def _text_end(self, step: Any, output: Any) -> None:
        try:
            if self.analyze:
                family = self._check_encoder_family()
                context, pooled = encoder_outputs(output)
                if context is not None:
                    extra = {"pooled_shape": tuple(pooled.shape)} if pooled is not None else {}
                    self._analyze(step, "conditioning", context, "conditioning", family=family,
                                  **extra)
                if pooled is not None:  # not checked: SD1.x's has no width in the table
                    self._analyze(step, "pooled", pooled, "pooled", family=False)
                if self.components.denoiser is not None and (
                        pooled is None or context is not None):
                    own = tuple(int(d) for d in context.shape) if context is not None else None
                    self._text_pending.append((step.id, getattr(self, "_text_role", "prompt"),
                                               own))
        finally:
            step.end()

    # --- denoiser ---------------------------------------------------------------------------------
    def _denoiser_forward(self, name: str, original: Callable[..., Any], *args: Any,
                          **kwargs: Any) -> Any:
        if self._sampling is None or self.components.scheduler is None:
            self._guard("denoiser", lambda: self._denoiser_begin(args, kwargs))
        if self._text_pending:
            self._guard("denoiser", lambda: self._conditioning_for_text(args, kwargs))
        started = time.perf_counter()
        try:
            output = original(*args, **kwargs)
        except BaseException as e:
            # The call failed, so the generation did; whether the pipeline catches it or not.
            self._guard("denoiser", functools.partial(self._denoiser_failed, e))
            raise
        try:
            self._denoiser_end(name, time.perf_counter() - started, output)
        except Exception as e:  # noqa: BLE001 - the pipeline must not see it
            self._failed("denoiser", e)
        return output

    def _denoiser_begin(self, args: Tuple[Any, ...], kwargs: dict) -> None:
        s = self._sampling
        if s is None:
            self._enter_generation()
            s = self._begin_sampling()
            self._guard("denoiser", lambda: self._read_received(s, args, kwargs))
            if self.analyze:
                self._analyze_received_conditioning(s.step, args, kwargs)
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
            s.latent_shape = tuple(int(d) for d in x.shape)  # for the family verdict
            if self.analyze:
                self._analyze(s.step, "model input (first call)", x, "latent")
        s.last_input = x

    def _read_received(self, s: _Sampling, args: Tuple[Any, ...], kwargs: dict) -> None:
        """The shapes of the first call (for the family verdict), and the declared family
        resolved by them: an alias naming several families ("wan2.2": A14B's 16 channels or
        TI2V-5B's 48) means the one these tensors fit."""
        context, pooled, _ = denoiser_conditioning(args, kwargs)
        if context is not None and len(context.shape) == 3:
            s.context_shape = tuple(int(d) for d in context.shape)
            s.first_context = context
        if pooled is not None:
            s.pooled_shape = tuple(int(d) for d in pooled.shape)
        # LTX-2's audio context; a diffusers transformer called without one: none (), the
        # audio families are out; another calling convention (ComfyUI's context=): not known.
        audio = kwargs.get("audio_encoder_hidden_states")
        s.audio_shape = tuple(int(d) for d in audio.shape) if is_tensor(audio) else \
            (() if "encoder_hidden_states" in kwargs else None)
        if self.family is not None:
            x = args[0] if args else next((kwargs[k] for k in ("hidden_states", "sample", "x")
                                           if k in kwargs), None)
            latent = tuple(int(d) for d in x.shape) if is_tensor(x) else None
            self._family = _genscope._resolve_family(self.family, s.context_shape,
                                                     s.pooled_shape, latent, s.audio_shape)
            s.step.label("family", self._family)
            if self._family.lower() != self.family.lower():
                s.step.label("family_declared", self.family)

    def _conditioning_for_text(self, args: Tuple[Any, ...], kwargs: dict) -> None:
        """Gives text steps whose encoder output had no last_hidden_state the conditioning
        as the denoiser receives it: the prompt's steps the first call's, the negative
        prompt's the second call's (true CFG: a call per prompt) or, when the first
        iteration ends with one call (batched CFG), the first call's batch."""
        s = self._sampling
        if s is None:
            return
        first = s.calls == 0 and s.scheduler_steps == 0
        second = s.calls == 1 and s.scheduler_steps == 0
        if not (first or second):
            return
        context = denoiser_conditioning(args, kwargs)[0]
        if context is None or len(context.shape) != 3:
            return
        if second and s.first_context is not None and \
                int(context.shape[0]) != int(s.first_context.shape[0]):
            # Not a call per prompt (true CFG's calls have one batch size): LTX-2's guidance
            # calls after its batched CFG call (the prompt's context only). The negative
            # prompt's step gets the batched context at the first scheduler step.
            return
        want = (lambda r: r != "negative") if first else (lambda r: r == "negative")
        self._give_text_steps(context, want)

    def _give_text_steps(self, context: Any, want: Callable[[str], bool]) -> None:
        keep = []
        for step_id, role, own in self._text_pending:
            if not want(role):
                keep.append((step_id, role, own))
            elif self.analyze and (own is None or _cropped(own, tuple(context.shape))):
                extra = {"family": self._family} if self._family is not None else {}
                self.run.analyze_tensor_into(step_id, "conditioning (denoiser input)", context,
                                             "conditioning", **extra)
        self._text_pending = keep

    def _analyze_received_conditioning(self, step: Any, args: Tuple[Any, ...],
                                       kwargs: dict) -> None:
        """The conditioning as the denoiser receives it (first call of a generation): SDXL's
        2048-wide context (CLIP-L and OpenCLIP-G penultimate states joined) and pooled 1280,
        checked against the family; ComfyUI's ADM vector ``y`` is classified, not checked
        (it is the pooled vector joined with size embeddings)."""
        context, pooled, adm = denoiser_conditioning(args, kwargs)
        if context is not None and len(context.shape) == 3:
            extra = {"pooled_shape": tuple(pooled.shape)} if pooled is not None else {}
            self._analyze(step, "conditioning (denoiser input)", context, "conditioning", **extra)
        if pooled is not None:
            self._analyze(step, "pooled (denoiser input)", pooled, "pooled")
        if adm is not None:
            self._analyze(step, "adm vector (denoiser input)", adm, "pooled", family=False)
        image = kwargs.get("encoder_hidden_states_image")  # Wan I2V: CLIP image states
        if is_tensor(image):
            self._analyze(step, "image conditioning (denoiser input)", image, "other")
        audio = kwargs.get("audio_encoder_hidden_states")  # LTX-2: the audio stream's context
        if is_tensor(audio):
            self._analyze(step, "audio conditioning (denoiser input)", audio, "other")
        audio_latents = kwargs.get("audio_hidden_states")  # LTX-2: packed audio latents
        if is_tensor(audio_latents):
            self._analyze(step, "audio latents (first call)", audio_latents, "other")

    def _denoiser_failed(self, exc: BaseException) -> None:
        s = self._sampling
        if s is not None and s.thread == threading.get_ident():
            self._end_sampling(exc)

    def _denoiser_end(self, name: str, seconds: float, output: Any) -> None:
        s = self._sampling
        if s is None:
            return
        s.calls += 1
        s.model_calls[name] = s.model_calls.get(name, 0) + 1
        s.model_seconds[name] = s.model_seconds.get(name, 0.0) + seconds
        out = first_tensor(output, "sample")
        if out is not None and len(out.shape) > 0:
            s.pending_batches.append(int(out.shape[0]))

    # --- scheduler ----------------------------------------------------------------------------------
    def _set_timesteps(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._guard("scheduler.set_timesteps", self._close_generation)
        result = original(*args, **kwargs)
        self._guard("scheduler.set_timesteps", lambda: self._read_schedule(args, kwargs))
        return result

    def _close_generation(self) -> None:
        self._follow_compile()
        if self._sampling is not None and (self._sampling.iterations > 0 or
                                           self._sampling.calls_started > 0):
            self._end_sampling()
        self._enter_generation()

    def _read_schedule(self, args: Tuple[Any, ...], kwargs: dict) -> None:
        scheduler = self.components.scheduler
        asked = args[0] if args else kwargs.get("num_inference_steps")
        asked = asked if isinstance(asked, int) and not isinstance(asked, bool) else None
        timesteps = getattr(scheduler, "timesteps", None)
        try:
            count = len(timesteps) if timesteps is not None else None
        except TypeError:
            count = None
        order = getattr(scheduler, "order", 1)
        order = order if isinstance(order, int) and order >= 1 else 1
        self._schedule = _Schedule(asked if asked is not None else count, count, order)
        if self._sampling is not None and self._schedule.asked is not None:
            self._sampling.step.label("num_inference_steps", self._schedule.asked)

    def _scheduler_step(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        sample = args[2] if len(args) > 2 else kwargs.get("sample")
        try:
            if self._sampling is None or self._sampling.scheduler_steps == 0:
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
        if s.scheduler_steps == 0 and self._text_pending and s.first_context is not None:
            self._give_text_steps(s.first_context, lambda r: True)  # batched CFG
        s.first_context = None
        if s.scheduler_steps == 0 and is_tensor(sample):
            s.latent_shape = tuple(int(d) for d in sample.shape)
        if s.scheduler_steps == 0 and self.analyze and is_tensor(sample):
            self._analyze(s.step, "latents (first iteration)", sample, "latent")

    def _scheduler_end(self, sample: Any, result: Any) -> None:
        s = self._sampling
        if s is None:
            return
        latents = first_tensor(result, "prev_sample")
        if latents is not None:
            s.last_latents = latents
        pending = s.pending_batches
        if pending:
            batch = batch_of(sample)
            if batch:
                # CFG evaluates the model on the conditional and unconditional batch: in one
                # call of twice the batch (diffusers) or in two calls (ComfyUI when memory is
                # short).
                s.evaluations += sum(pending) / batch
            pending.clear()
        s.scheduler_steps += 1
        i = s.scheduler_steps
        schedule = self._schedule
        # Inline on the common path (runs between two model calls, with cold caches): a
        # first-order schedule past its warm-up completes an iteration at every call.
        if (schedule is not None and i > schedule.warmup and i % schedule.order == 0) or \
                self._completes_iteration(i):
            s.marked_at = i
            s.iterations += 1
            s.step.mark_iteration()

    def _completes_iteration(self, i: int) -> bool:
        """Whether the i-th scheduler.step() call (from 1) ends a denoising step as the user
        counts them: diffusers' progress-bar rule (the pipelines' denoising loops), update
        when ``i > num_warmup_steps and i % scheduler.order == 0`` or at the schedule's last
        timestep (2nd-order schedulers such as Heun end with a single 1st-order step)."""
        warmup = self._schedule.warmup if self._schedule is not None else 0
        if i > warmup and i % self._order() == 0:
            return True
        scheduler = self.components.scheduler
        index = getattr(scheduler, "step_index", None)
        timesteps = getattr(scheduler, "timesteps", None)
        return (isinstance(index, int) and timesteps is not None and
                index >= len(timesteps))

    # --- other models (image encoder, connectors, audio VAE, vocoder) -----------------------------
    def _model_call(self, where: str, original: Callable[..., Any], *args: Any,
                    **kwargs: Any) -> Any:
        """A call of a model the pipeline runs outside the denoising loop: a ``custom`` step
        (the sampling step before it ends, as at the VAE). Nested calls (a model calling
        itself, encode inside decode) are one step."""
        return self._in_outer_step(where, lambda: self._model_begin(where), self._model_end,
                                   original, args, kwargs)

    def _model_end(self, step: Any, result: Any) -> None:
        """Analyses the model's output tensors ("other": no family check): LTX-2's connectors
        give the video and the audio context, its audio VAE the mel spectrogram, its vocoder
        the waveform."""
        try:
            if self.analyze:
                items = result if isinstance(result, (tuple, list)) else (result,)
                tensors = [x for x in items if is_tensor(x)][:2]
                if not tensors:
                    tensors = [t for t in (first_tensor(result, "sample"),) if t is not None]
                for i, tensor in enumerate(tensors):
                    self._analyze(step, f"output {i}" if len(tensors) > 1 else "output", tensor,
                                  "other")
        finally:
            step.end()

    def _model_begin(self, where: str) -> Any:
        self._end_sampling()
        self._enter_generation()
        step = self.run.step("custom", where, source=caller())
        step.label("model", where.split(".")[0])
        return step

    # --- model moves (offloading, pipe.to) ---------------------------------------------------------
    def _model_to(self, name: str, module: Any, original: Callable[..., Any], *args: Any,
                  **kwargs: Any) -> Any:
        """``module.to(...)``: a step when it moves the module to another device — a
        ``model_loading`` step "load NAME (DEVICE)" onto an accelerator, a ``custom`` step
        "offload NAME (cpu)" back to the CPU — with counter ``bytes`` (parameters and buffers
        moved); a dtype change or a move to where the module already is records nothing."""
        return self._in_step(f"{name}.to", lambda: self._move_begin(name, module, args, kwargs),
                             lambda step, result: step.end(), original, args, kwargs)

    def _move_begin(self, name: str, module: Any, args: Tuple[Any, ...], kwargs: dict) -> Any:
        torch = sys.modules.get("torch")
        parse = getattr(getattr(getattr(torch, "_C", None), "_nn", None), "_parse_to", None)
        if parse is None:
            return None
        target = parse(*args, **kwargs)[0]
        if target is None:
            return None
        first = next(iter(module.parameters()), None)
        if first is None or _same_device(first.device, target):
            return None  # the common case (offload hooks call .to before every forward)
        current = first.device
        moved = sum(t.numel() * t.element_size()
                    for t in (*module.parameters(), *module.buffers())
                    if not _same_device(t.device, target))
        onto = target.type != "cpu"
        step = self.run.step("model_loading" if onto else "custom",
                             f"{'load' if onto else 'offload'} {name} ({target})",
                             source=caller())
        step.label("model", name)
        step.label("model_action", "load" if onto else "offload")
        step.label("device_from", str(current))
        step.label("device_to", str(target))
        step.add_counter("bytes", float(moved))
        return step

    # --- LoRA adapters (diffusers' load_lora_weights, set_adapters, fuse_lora, ...) ----------------
    def _lora_call(self, method: str, original: Callable[..., Any], *args: Any,
                   **kwargs: Any) -> Any:
        """A ``lora_application`` step per call of the pipeline's LoRA methods, with the adapter
        named, and after it the active adapters and the LoRA layers in the denoisers."""
        return self._in_step(method, lambda: self._lora_begin(method, args, kwargs),
                             lambda step, result: self._lora_end(step), original, args, kwargs)

    def _lora_begin(self, method: str, args: Tuple[Any, ...], kwargs: dict) -> Any:
        self._end_sampling()
        adapter = kwargs.get("adapter_name", kwargs.get("adapter_names"))
        if adapter is None and method in ("set_adapters", "delete_adapters") and args:
            adapter = args[0]
        title = method if adapter is None else f"{method} ({_names(adapter)})"
        step = self.run.step("lora_application", title, source=caller())
        step.label("lora.method", method)
        if adapter is not None:
            step.label("lora.adapter", _names(adapter))
        weights = kwargs.get("adapter_weights", args[1] if method == "set_adapters" and
                             len(args) > 1 else None)
        if weights is not None:
            step.label("lora.adapter_weights", _names(weights))
        scale = kwargs.get("lora_scale")
        if isinstance(scale, (int, float)):
            step.label("lora.scale", float(scale))
        return step

    def _lora_end(self, step: Any) -> None:
        try:
            active = getattr(self._pipe, "get_active_adapters", None)
            adapters = active() if callable(active) else None
            step.label("lora_adapters", _names(adapters or []))
            layers = sum(1 for m in self.components.denoisers().values()
                         for sub in model_of(m).modules() if hasattr(sub, "lora_A"))
            step.add_counter("lora_layers", float(layers))
        finally:
            step.end()

    # --- VAE -------------------------------------------------------------------------------------------
    def _vae_call(self, kind: str, name: str, original: Callable[..., Any], *args: Any,
                  **kwargs: Any) -> Any:
        return self._in_outer_step(name, lambda: self._vae_begin(kind, name, args, kwargs),
                                   functools.partial(self._vae_end, kind), original, args, kwargs)

    def _vae_begin(self, kind: str, name: str, args: Tuple[Any, ...], kwargs: dict) -> Any:
        self._end_sampling()
        step = self.run.step(kind, name, source=caller())
        if kind == "latent_generation":
            self._enter_generation()
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
                if self.family is not None and is_tensor(latent) and self._sampling is None:
                    # Before the denoiser's first call (image-to-video's first frame): an alias
                    # ("wan2.2") means the family these latents fit (48 channels: TI2V-5B).
                    self._family = _genscope._resolve_family(
                        self.family, None, None, tuple(int(d) for d in latent.shape))
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


# The pipeline's LoRA methods (diffusers' LoRA loader mixins), each a lora_application step.
_LORA_METHODS = ("load_lora_weights", "set_adapters", "fuse_lora", "unfuse_lora",
                 "delete_adapters", "unload_lora_weights")


def _cropped(own: Tuple[int, ...], received: Tuple[int, ...]) -> bool:
    """Whether the denoiser received an encoder's output with tokens dropped: same width,
    fewer tokens (a context joined from several encoders has more, or another width)."""
    return len(own) == 3 and len(received) == 3 and own[2] == received[2] and own[1] > received[1]


def _names(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _same_device(a: Any, b: Any) -> bool:
    """cuda and cuda:0 are one device when the current device is 0 (torch's rule for .to)."""
    if a.type != b.type:
        return False
    if a.index is None or b.index is None:
        return (a.index or 0) == (b.index or 0) if a.type != "cpu" else True
    return a.index == b.index


# A module's forward lives in one of these slots while accelerate's hook is on it: the hook in
# ``forward``, what it calls in ``_old_forward``; removing the hook moves ``_old_forward`` back
# into ``forward``, adding one moves ``forward`` into ``_old_forward``.
_FORWARD_SLOTS = ("forward", "_old_forward")


def _accelerate_hooked(module: Any) -> bool:
    d = getattr(module, "__dict__", {})
    return "_hf_hook" in d and "_old_forward" in d and "forward" in d


def _slot_holding(state: Dict[str, Any], attr: str, wrapper: Any) -> Optional[str]:
    """Where `wrapper`, installed as `attr`, is now: `attr`, or for a forward the other slot
    accelerate moved it to; None when it is in neither (replaced)."""
    if state.get(attr) is wrapper:
        return attr
    if attr in _FORWARD_SLOTS:
        other = _FORWARD_SLOTS[1 - _FORWARD_SLOTS.index(attr)]
        if state.get(other) is wrapper:
            return other
    return None


def _put_back(state: Dict[str, Any], where: str, attr: str, had: bool, previous: Any,
              obj: Any) -> None:
    """Puts what a wrapper shadowed back in the slot it is in now (`state`: obj's __dict__ or a
    copy of it). In its own slot: the previous value, or nothing; moved to the other forward
    slot: the previous value, or the class's forward bound to obj (what the slot would hold had
    genscope not been there)."""
    if where == attr and not had:
        del state[where]
    elif had:
        state[where] = previous
    else:
        state[where] = types.MethodType(type(obj).forward, obj)


def instrument(pipe: Any, run: Any, *, analyze: bool = True,
               family: Optional[str] = None) -> Instrumentation:
    """Hooks a pipeline's components for the duration of a ``with`` block.

    ``pipe``: a diffusers pipeline, any object with diffusers' attribute names, or a mapping
    ``{"text_encoder": module, "unet": module, "vae": vae, "scheduler": scheduler, ...}``.
    ``analyze``: attach tensor analyses (conditioning, first/last latents, decoded images).
    ``family``: the model family the tensors must match ("sdxl", "flux-dev", ...): checked
    on what the denoiser receives, and on the latents.
    """
    return Instrumentation(pipe, run, analyze=analyze, family=family)
