"""Where the recorder is plugged into ComfyUI.

1. The message stream (public): PromptServer.instance.send_sync is wrapped; every message
   ComfyUI sends to its clients passes through the recorder first, on the sending thread.
2. Prompts without a client id (internal, guarded): ComfyUI sends most execution messages
   only when the prompt has a client id (`if server.client_id is not None`). For those
   prompts only, PromptExecutor.add_message (execution_start/cached/success/error) and
   execution.execute (one call per node: `executing`) are wrapped and feed the recorder the
   same messages ComfyUI would have sent.
3. Model management (internal, guarded): comfy.model_management.load_models_gpu,
   unload_all_models, LoadedModel.model_load and LoadedModel.model_unload become steps nested
   in the running node.

Every internal wrapper checks the wrapped function's parameters when it is installed; a
function that is missing or has other parameters is not wrapped, and every run records that
as a monitoring error. Inside a wrapper, genscope's own failures become monitoring errors;
ComfyUI's function is called exactly once with the arguments it was given, and its result or
exception passes through unchanged.
"""

import functools
import inspect
import sys

_WRAPPED = "__genscope_wrapped__"


def _params(function):
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None


def _check(owner, attr, expected, errors, what):
    """The function to wrap, or None (recorded in `errors`) when it is not what we know."""
    function = getattr(owner, attr, None)
    if function is None:
        errors.append(("comfyui.hooks", f"{what} not found: {attr} is not recorded"))
        return None
    if getattr(function, _WRAPPED, False):
        return None  # already wrapped (the package loaded twice)
    names = _params(function)
    if names is None or names[: len(expected)] != list(expected):
        errors.append(("comfyui.hooks", f"{what} has parameters {names}, expected "
                       f"{list(expected)} first: not wrapped, so it is not recorded"))
        return None
    return function


def _mark(wrapper):
    setattr(wrapper, _WRAPPED, True)
    return wrapper


# -- 1. the message stream -------------------------------------------------------------------

def hook_send_sync(server, recorder):
    """Wraps server.send_sync(event, data, sid=None) on the instance. Returns an error text or
    None."""
    original = getattr(server, "send_sync", None)
    if original is None or not callable(original):
        return "PromptServer.instance has no send_sync"
    if getattr(original, _WRAPPED, False):
        return None

    @functools.wraps(original)
    def send_sync(*args, **kwargs):
        if len(args) >= 2:
            recorder.on_message(args[0], args[1])  # never raises
        result = original(*args, **kwargs)
        recorder.after_message()
        return result

    server.send_sync = _mark(send_sync)
    return None


# -- 2. prompts without a client id -----------------------------------------------------------

def hook_no_client(execution_module, recorder, errors):
    """Feeds the recorder what ComfyUI does not send for prompts without a client id."""
    executor = getattr(execution_module, "PromptExecutor", None)
    add_message = _check(executor, "add_message", ("self", "event", "data", "broadcast"), errors,
                         "execution.PromptExecutor.add_message") if executor else None
    execute = _check(execution_module, "execute",
                     ("server", "dynprompt", "caches", "current_item", "extra_data", "executed",
                      "prompt_id"), errors, "execution.execute")
    if executor is None:
        errors.append(("comfyui.hooks", "execution.PromptExecutor not found: prompts without a "
                       "client id are not recorded"))
    if add_message is not None:
        @functools.wraps(add_message)
        def wrapped_add_message(self, event, data, broadcast, *args, **kwargs):
            try:
                if getattr(self.server, "client_id", None) is None and not broadcast:
                    recorder.on_message(event, data)
            except Exception as e:
                recorder.hook_error(f"PromptExecutor.add_message: {type(e).__name__}: {e}")
            result = add_message(self, event, data, broadcast, *args, **kwargs)
            recorder.after_message()
            return result

        executor.add_message = _mark(wrapped_add_message)

    if execute is not None:
        def announce(args, kwargs):
            try:
                server, node, prompt_id = args[0], args[3], args[6]
                if getattr(server, "client_id", None) is None and recorder.is_running(prompt_id) \
                        and str(node) not in recorder.cached_nodes:
                    recorder.on_message("executing", {"node": node, "prompt_id": prompt_id})
            except Exception as e:
                recorder.hook_error(f"execution.execute: {type(e).__name__}: {e}")

        if inspect.iscoroutinefunction(execute):  # current ComfyUI: async def execute
            @functools.wraps(execute)
            async def wrapped_execute(*args, **kwargs):
                announce(args, kwargs)
                return await execute(*args, **kwargs)
        else:
            @functools.wraps(execute)
            def wrapped_execute(*args, **kwargs):
                announce(args, kwargs)
                return execute(*args, **kwargs)

        execution_module.execute = _mark(wrapped_execute)


# -- 3. model management ----------------------------------------------------------------------

def _model_of(patcher):
    """(class name, bytes) of a ModelPatcher (its .model's class, model_size())."""
    model = getattr(patcher, "model", None)
    cls = type(model).__name__ if model is not None else type(patcher).__name__
    size = None
    if hasattr(patcher, "model_size"):
        size = patcher.model_size()
    return cls, size


def _wrap_model_call(owner, attr, expected, what, kind, describe, recorder, errors,
                     after=None, before=None):
    function = _check(owner, attr, expected, errors, what)
    if function is None:
        return

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if recorder.run is None:  # between prompts: nothing to nest in
            return function(*args, **kwargs)
        step = None
        try:
            if before is not None:
                before(args, kwargs)
            step = recorder.model_step(kind, what.rsplit(".", 1)[-1])
            if step is not None:
                describe(step, args, kwargs)
        except Exception as e:
            if step is not None:
                step.record_monitoring_error("comfyui.hooks", f"{what}: {type(e).__name__}: {e}")
            else:
                recorder.hook_error(f"{what}: {type(e).__name__}: {e}")
        if step is None:
            return function(*args, **kwargs)
        try:
            result = function(*args, **kwargs)
        except BaseException as e:
            try:
                step.fail(str(e), f"{type(e).__module__}.{type(e).__qualname__}")
                step.end()
            except Exception:
                pass
            raise
        try:
            if after is not None:
                after(step, args, kwargs, result)
        except Exception as e:
            step.record_monitoring_error("comfyui.hooks", f"{what}: {type(e).__name__}: {e}")
        try:
            step.end()
            recorder.model_step_done()
        except Exception as e:
            recorder.hook_error(f"{what}: {type(e).__name__}: {e}")
        return result

    setattr(owner, attr, _mark(wrapper))


def hook_model_management(mm, recorder, errors):
    """Nested steps for ComfyUI's model loads, unloads and offloads."""
    def label_models(step, models):
        classes, total = [], 0
        for patcher in models:
            cls, size = _model_of(patcher)
            classes.append(cls)
            total += size or 0
        step.label("comfyui.models", ",".join(classes))
        step.add_counter("models", len(classes))
        step.add_counter("bytes", total)

    def describe_load_models(step, args, kwargs):
        models = args[0] if args else kwargs.get("models", [])
        label_models(step, list(models))

    def describe_loaded(action):
        def describe(step, args, kwargs):
            loaded = args[0]
            cls, size = _model_of(loaded.model)
            step.label("comfyui.model_class", cls)
            step.label("comfyui.model_action", action(args, kwargs))
            step.label("comfyui.device", str(getattr(loaded, "device", "")))
            if size is not None:
                step.add_counter("bytes", size)
        return describe

    def loaded_after(step, args, kwargs, result):
        patcher = args[0].model
        if hasattr(patcher, "loaded_size"):
            step.label("comfyui.loaded_bytes", str(patcher.loaded_size()))

    def unload_action(args, kwargs):
        memory_to_free = args[1] if len(args) > 1 else kwargs.get("memory_to_free")
        return "unload" if memory_to_free is None else "partial_offload"

    def describe_unload_all(step, args, kwargs):
        loaded = list(getattr(mm, "current_loaded_models", []) or [])
        label_models(step, [m.model for m in loaded if getattr(m, "model", None) is not None])

    _wrap_model_call(mm, "load_models_gpu", ("models",),
                     "comfy.model_management.load_models_gpu", "model_loading",
                     describe_load_models, recorder, errors)
    _wrap_model_call(mm, "unload_all_models", (), "comfy.model_management.unload_all_models",
                     "custom", describe_unload_all, recorder, errors,
                     before=lambda args, kwargs: recorder.capture_allocator_state())
    loaded_model = getattr(mm, "LoadedModel", None)
    if loaded_model is None:
        errors.append(("comfyui.hooks", "comfy.model_management.LoadedModel not found: "
                       "individual model loads and unloads are not recorded"))
        return
    _wrap_model_call(loaded_model, "model_load", ("self", "lowvram_model_memory"),
                     "comfy.model_management.LoadedModel.model_load", "model_loading",
                     describe_loaded(lambda a, k: "load"), recorder, errors, after=loaded_after)
    _wrap_model_call(loaded_model, "model_unload", ("self", "memory_to_free"),
                     "comfy.model_management.LoadedModel.model_unload", "custom",
                     describe_loaded(unload_action), recorder, errors)


def cuda_allocator_state():
    """torch.cuda's allocator figures now (for an out-of-memory error), or None without CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    device = torch.cuda.current_device()
    stats = torch.cuda.memory_stats(device)
    state = {"device": f"cuda:{device}"}
    for key, name in (("allocated_bytes.all.current", "allocated_bytes"),
                      ("allocated_bytes.all.peak", "allocated_peak_bytes"),
                      ("reserved_bytes.all.current", "reserved_bytes"),
                      ("reserved_bytes.all.peak", "reserved_peak_bytes"),
                      ("inactive_split_bytes.all.current", "inactive_split_bytes"),
                      ("num_alloc_retries", "alloc_retries"), ("num_ooms", "ooms")):
        state[name] = stats.get(key)
    try:
        free, total = torch.cuda.mem_get_info(device)
        state["free_bytes"], state["total_bytes"] = free, total
    except Exception:
        pass
    state["summary"] = torch.cuda.memory_summary(device, abbreviated=True)
    return state
