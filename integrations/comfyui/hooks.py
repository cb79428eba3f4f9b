"""Where the recorder is plugged into ComfyUI. Each hook is chosen by what the running ComfyUI
has (feature detection, never its version number):

0. Node events (public, where present: comfy_execution/progress.py): a progress handler
   registered in each prompt's progress registry gets start / update / finish for every node
   id, for every prompt with or without a client id; ComfyUI's executing context
   (comfy_execution/utils.get_executing_context) names the node a model load runs for;
   PromptServer.add_on_prompt_handler notes when a prompt was queued.
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
import threading
import time

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
                if not recorder.is_running(prompt_id):
                    return
                if recorder.dynprompt is None:
                    recorder.dynprompt = args[1]  # the classes of expanded nodes
                # ComfyUI calls execute again to resume an expanded node (its subgraph's
                # results: pending_subgraph_results) or an async one (pending_async_nodes);
                # it says `executing` only when it starts a node.
                if any(len(args) > i and isinstance(args[i], dict) and node in args[i]
                       for i in (8, 9)):
                    return
                if getattr(server, "client_id", None) is None \
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


# -- 0. node events, executing context, queue time ----------------------------------------------

def _arg(args, kwargs, index, name):
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def hook_node_events(progress_module, recorder, errors):
    """Subscribes the recorder to every prompt's node events where ComfyUI has a progress
    registry (comfy_execution.progress: add_progress_handler, get_progress_state). ComfyUI makes
    a new registry per prompt after execution_start; the recorder registers its handler at
    execution_cached (recorder.register_events). Returns True when installed."""
    if progress_module is None:
        return False  # an older ComfyUI: the message stream gives the node steps
    add = getattr(progress_module, "add_progress_handler", None)
    get_state = getattr(progress_module, "get_progress_state", None)
    if not callable(add) or not callable(get_state):
        errors.append(("comfyui.hooks", "comfy_execution.progress has no add_progress_handler / "
                       "get_progress_state: nodes are timed by ComfyUI's executing messages"))
        return False
    base = getattr(progress_module, "ProgressHandler", object)
    if not isinstance(base, type):
        base = object

    class GenscopeHandler(base):
        """ComfyUI calls these on its prompt thread; they never raise into ComfyUI, whatever
        arguments a changed ComfyUI passes."""

        def __init__(self):
            self.name = "genscope"
            self.enabled = True
            self.registry = None

        def set_registry(self, registry, *args, **kwargs):
            self.registry = registry

        def start_handler(self, *args, **kwargs):
            try:
                recorder.node_started(_arg(args, kwargs, 2, "prompt_id"),
                                      _arg(args, kwargs, 0, "node_id"))
            except Exception as e:
                recorder.hook_error(f"progress start_handler: {type(e).__name__}: {e}")

        def update_handler(self, *args, **kwargs):
            try:
                recorder.node_progress(_arg(args, kwargs, 4, "prompt_id"),
                                       _arg(args, kwargs, 0, "node_id"),
                                       _arg(args, kwargs, 1, "value"),
                                       _arg(args, kwargs, 2, "max_value"))
            except Exception as e:
                recorder.hook_error(f"progress update_handler: {type(e).__name__}: {e}")

        def finish_handler(self, *args, **kwargs):
            try:
                recorder.node_finished(_arg(args, kwargs, 2, "prompt_id"),
                                       _arg(args, kwargs, 0, "node_id"))
            except Exception as e:
                recorder.hook_error(f"progress finish_handler: {type(e).__name__}: {e}")

        def reset(self, *args, **kwargs):
            pass

        def enable(self, *args, **kwargs):
            self.enabled = True

        def disable(self, *args, **kwargs):
            self.enabled = False

    def register(rec, prompt_id):
        registry = get_state()
        owner = getattr(registry, "prompt_id", None)
        if owner != prompt_id:
            return f"the progress registry belongs to prompt {owner!r}"
        handler = GenscopeHandler()
        add(handler)
        handlers = getattr(registry, "handlers", None)
        if isinstance(handlers, dict) and handlers.get("genscope") is not handler:
            return "the handler did not reach the prompt's registry"
        if isinstance(handlers, dict) and next(iter(handlers)) != "genscope":
            # First in line: ComfyUI's own handler sends a progress_state message, which wakes
            # its server thread (tens of ms on a loaded machine before the prompt thread goes
            # on); called before it at both start and finish, a node's step neither begins
            # after that delay nor ends before it.
            others = [(k, v) for k, v in handlers.items() if k != "genscope"]
            handlers.clear()
            handlers["genscope"] = handler
            handlers.update(others)
        rec.dynprompt = getattr(registry, "dynprompt", None)
        return None

    recorder.register_events = register
    return True


def hook_executing_context(utils_module, recorder):
    """recorder.executing_node() from comfy_execution.utils.get_executing_context(), where it
    exists: which prompt and node is running, right across async interleaving."""
    get = getattr(utils_module, "get_executing_context", None) if utils_module else None
    if not callable(get):
        return False

    def executing_node():
        context = get()
        if context is None:
            return None
        return getattr(context, "prompt_id", None), getattr(context, "node_id", None)
    recorder.executing_node = executing_node
    return True


def async_classes(nodes_module):
    """is_async(class_type): whether a node class's function is a coroutine function (ComfyUI
    runs it as a task that may go pending), from nodes.NODE_CLASS_MAPPINGS."""
    def is_async(class_type):
        mappings = getattr(nodes_module() if callable(nodes_module) else nodes_module,
                           "NODE_CLASS_MAPPINGS", None) or {}
        class_def = mappings.get(class_type)
        if class_def is None:
            return False
        name = getattr(class_def, "FUNCTION", None)
        function = getattr(class_def, name, None) if isinstance(name, str) else None
        return inspect.iscoroutinefunction(function)
    return is_async


def hook_on_prompt(server, recorder, limit=256):
    """PromptServer.add_on_prompt_handler (public): notes when each prompt was posted, for the
    run label comfyui.queue_wait_ms. The handler returns ComfyUI's data unchanged."""
    add = getattr(server, "add_on_prompt_handler", None)
    if not callable(add):
        return False
    queued = {}
    lock = threading.Lock()

    def on_prompt(json_data):
        try:
            prompt_id = json_data.get("prompt_id") if isinstance(json_data, dict) else None
            if prompt_id is not None:
                with lock:
                    queued[str(prompt_id)] = time.time()
                    while len(queued) > limit:
                        queued.pop(next(iter(queued)))
        except Exception:
            pass
        return json_data

    def queued_at(prompt_id):
        with lock:
            return queued.pop(str(prompt_id), None)
    add(on_prompt)
    recorder.queued_at = queued_at
    return True


# -- 3. model management ----------------------------------------------------------------------

def _model_of(patcher):
    """(class name, bytes) of a ModelPatcher (its .model's class, model_size())."""
    model = getattr(patcher, "model", None)
    cls = type(model).__name__ if model is not None else type(patcher).__name__
    size = None
    if hasattr(patcher, "model_size"):
        size = patcher.model_size()
    return cls, size


def _loaded_size(patcher):
    """Bytes of the model's weights on its load device now (ModelPatcher.loaded_size()), or None."""
    function = getattr(patcher, "loaded_size", None)
    return function() if callable(function) else None


def dynamic_vram_enabled():
    """True / False where ComfyUI says whether comfy-aimdo's dynamic VRAM is on
    (comfy.memory_management.aimdo_enabled), None where this ComfyUI has no such flag."""
    module = sys.modules.get("comfy.memory_management")
    if module is None or not hasattr(module, "aimdo_enabled"):
        return None
    return getattr(module, "aimdo_enabled") is True


def _is_dynamic(patcher):
    """Whether a ModelPatcher is comfy.model_patcher.ModelPatcherDynamic (dynamic VRAM: the
    load only stages the model; weights move to the GPU on demand inside the nodes)."""
    module = sys.modules.get("comfy.model_patcher")
    dynamic = getattr(module, "ModelPatcherDynamic", None) if module is not None else None
    return isinstance(dynamic, type) and isinstance(patcher, dynamic)


def run_labels():
    """Run labels about ComfyUI's model management: comfyui.dynamic_vram, and
    comfyui.allocator_excludes_managed_weights when comfy-aimdo manages the weights (torch's
    allocator does not see them)."""
    enabled = dynamic_vram_enabled()
    if enabled is None:
        return {}
    labels = {"comfyui.dynamic_vram": "true" if enabled else "false"}
    if enabled:
        labels["comfyui.allocator_excludes_managed_weights"] = "true"
    return labels


def _wrap_model_call(owner, attr, expected, what, kind, describe, recorder, errors,
                     after=None, before=None, needed=None):
    """Wraps a model-management function into a nested step. before(args, kwargs) -> state;
    needed(args, kwargs, state) -> False: no step (nothing to record: e.g. a load of a model
    already loaded); describe(step, args, kwargs); after(step, args, kwargs, result, state)."""
    function = _check(owner, attr, expected, errors, what)
    if function is None:
        return

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if recorder.run is None:  # between prompts: nothing to nest in
            return function(*args, **kwargs)
        step = state = None
        try:
            if before is not None:
                state = before(args, kwargs)
            if needed is None or needed(args, kwargs, state):
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
                after(step, args, kwargs, result, state)
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
    """Nested steps for ComfyUI's model loads, unloads and offloads, recorded by what happened:
    a load only when something was loaded (or, with dynamic VRAM, staged), an unload named
    complete or partial by the bytes still loaded after it."""
    def label_models(step, models):
        classes, total = [], 0
        for patcher in models:
            cls, size = _model_of(patcher)
            classes.append(cls)
            total += size or 0
        step.label("comfyui.models", ",".join(classes))
        step.add_counter("models", len(classes))
        step.add_counter("bytes", total)

    def requested(args, kwargs):
        return list(args[0] if args else kwargs.get("models", []))

    def fully_loaded(patcher):
        """Loaded with every weight, and not a dynamic-VRAM model (which a load stages)."""
        if _is_dynamic(patcher):
            return False
        loaded, size = _loaded_size(patcher), _model_of(patcher)[1]
        return loaded is not None and size is not None and loaded >= size

    def before_load_models(args, kwargs):
        models = requested(args, kwargs)
        in_memory = {id(m.model) for m in list(getattr(mm, "current_loaded_models", []) or [])
                     if getattr(m, "model", None) is not None}
        return models, {id(p): _loaded_size(p) for p in models}, \
            all(id(p) in in_memory and fully_loaded(p) for p in models)

    def load_models_needed(args, kwargs, state):
        return not state[2]  # every model already loaded: nothing to record

    def describe_load_models(step, args, kwargs):
        label_models(step, requested(args, kwargs))

    def after_load(step, models, sizes_before):
        """Counters loaded_bytes (growth of loaded_size()), and with dynamic VRAM staged_bytes
        (model_size() of the staged models) and resident_bytes (loaded_size() after)."""
        grown, dynamic, staged, resident = 0, False, 0, 0
        for patcher in models:
            after, before = _loaded_size(patcher), sizes_before.get(id(patcher))
            if after is not None and before is not None and after > before:
                grown += after - before
            if _is_dynamic(patcher):
                dynamic = True
                staged += _model_of(patcher)[1] or 0
                resident += after or 0
        step.add_counter("loaded_bytes", grown)
        if dynamic:
            step.label("comfyui.dynamic_vram", "true")
            step.add_counter("staged_bytes", staged)
            step.add_counter("resident_bytes", resident)
        return grown, dynamic

    def after_load_models(step, args, kwargs, result, state):
        after_load(step, state[0], state[1])

    def describe_loaded(step, args, kwargs):
        loaded = args[0]
        cls, size = _model_of(loaded.model)
        step.label("comfyui.model_class", cls)
        step.label("comfyui.device", str(getattr(loaded, "device", "")))
        if size is not None:
            step.add_counter("bytes", size)

    def before_loaded(args, kwargs):
        return _loaded_size(args[0].model)

    def model_load_needed(args, kwargs, before):
        return not fully_loaded(args[0].model)

    def after_model_load(step, args, kwargs, result, before):
        patcher = args[0].model
        grown, dynamic = after_load(step, [patcher], {id(patcher): before})
        step.label("comfyui.model_action", "stage" if dynamic else "load" if grown else "none")
        loaded = _loaded_size(patcher)
        if loaded is not None:
            step.label("comfyui.loaded_bytes", str(loaded))

    def after_model_unload(step, args, kwargs, result, before):
        """`unload` when no weight is left loaded, `partial_offload` when some are, `none` when
        nothing moved; counter freed_bytes."""
        after = _loaded_size(args[0].model)
        if after is None or before is None:
            memory_to_free = args[1] if len(args) > 1 else kwargs.get("memory_to_free")
            action = "unload" if memory_to_free is None else "partial_offload"
            step.record_monitoring_error("comfyui.hooks", "loaded_size() not available: the "
                                         "unload is named by its memory_to_free argument")
        else:
            action = "unload" if after == 0 else "partial_offload" if after < before else "none"
            step.add_counter("freed_bytes", max(0, before - after))
            step.label("comfyui.loaded_bytes", str(after))
        step.label("comfyui.model_action", action)

    def describe_unload_all(step, args, kwargs):
        loaded = list(getattr(mm, "current_loaded_models", []) or [])
        label_models(step, [m.model for m in loaded if getattr(m, "model", None) is not None])

    _wrap_model_call(mm, "load_models_gpu", ("models",),
                     "comfy.model_management.load_models_gpu", "model_loading",
                     describe_load_models, recorder, errors, after=after_load_models,
                     before=before_load_models, needed=load_models_needed)
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
                     describe_loaded, recorder, errors, after=after_model_load,
                     before=before_loaded, needed=model_load_needed)
    _wrap_model_call(loaded_model, "model_unload", ("self", "memory_to_free"),
                     "comfy.model_management.LoadedModel.model_unload", "custom",
                     describe_loaded, recorder, errors, after=after_model_unload,
                     before=before_loaded)


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
