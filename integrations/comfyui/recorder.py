"""From ComfyUI's execution messages to genscope runs: one run per prompt, one step per node.

The recorder is fed the messages ComfyUI sends to its clients (`on_message(event, data)`:
execution_start, execution_cached, executing, progress, executed, execution_success,
execution_error, execution_interrupted) and knows nothing of how they were caught (hooks.py).
ComfyUI sends them from the thread that executes the prompt (main.py's prompt_worker), and
genscope steps belong to the thread that opened them, so every step is opened and ended on the
thread that sent `execution_start`; a message about the prompt from another thread is a
monitoring error of the run, never a step change.

Timing: a node's step begins when ComfyUI says `executing` for it and ends at the next
`executing` (the next node, or `None` at the end of a prompt) or at the prompt's
success/error/interrupt message: the time between ComfyUI's own messages.
"""

import logging
import threading
import time
from fnmatch import fnmatchcase

from .kinds import step_kind


def _node_title(node_id, node, workflow_titles):
    meta = node.get("_meta") if isinstance(node, dict) else None
    if isinstance(meta, dict) and meta.get("title"):
        return str(meta["title"])
    if node_id in workflow_titles:
        return workflow_titles[node_id]
    return str(node.get("class_type", "?")) if isinstance(node, dict) else "?"


def _workflow_titles(extra_data):
    """Node titles the user gave in the UI (extra_pnginfo.workflow.nodes[].title)."""
    titles = {}
    try:
        nodes = extra_data["extra_pnginfo"]["workflow"]["nodes"]
        for node in nodes:
            if node.get("title"):
                titles[str(node["id"])] = str(node["title"])
    except (KeyError, TypeError, AttributeError):
        pass
    return titles


# Inputs of stock nodes that make a run's header, by class pattern: (input, header key).
# Literal inputs only (a linked input is [node id, output index], not a value).
_HEADER_INPUTS = (
    ("KSampler*", (("seed", "seed"), ("noise_seed", "seed"), ("steps", "steps"), ("cfg", "cfg"),
                   ("sampler_name", "sampler"), ("scheduler", "scheduler"),
                   ("denoise", "denoise"))),
    ("SamplerCustom", (("noise_seed", "seed"), ("cfg", "cfg"))),
    ("RandomNoise", (("noise_seed", "seed"),)),  # SamplerCustomAdvanced's parts
    ("BasicScheduler", (("steps", "steps"), ("scheduler", "scheduler"), ("denoise", "denoise"))),
    ("KSamplerSelect", (("sampler_name", "sampler"),)),
    ("*CFGGuider", (("cfg", "cfg"),)),
    ("FluxGuidance", (("guidance", "guidance"),)),
    ("*Empty*Latent*", (("batch_size", "batch"), ("length", "frames"))),
    ("*ToVideo*", (("batch_size", "batch"), ("length", "frames"))),
)
# Where the model's name is: the first loader of a diffusion model in the prompt.
_MODEL_INPUTS = (("CheckpointLoader*", "ckpt_name"), ("ImageOnlyCheckpointLoader", "ckpt_name"),
                 ("UNETLoader", "unet_name"), ("DiffusersLoader", "model_path"))


def _pipeline_parameters(prompt):
    """What a run's header shows: model, seed, steps, sampler, cfg, resolution, frames, LoRAs —
    from the classic nodes (CheckpointLoaderSimple, KSampler, EmptyLatentImage) and the modern
    ones (UNETLoader, SamplerCustomAdvanced's RandomNoise/BasicScheduler/KSamplerSelect,
    EmptySD3LatentImage, EmptyHunyuanLatentVideo, WanImageToVideo, ...)."""
    model, params, loras = "", {}, []
    nodes = sorted(((k, v) for k, v in prompt.items() if isinstance(v, dict)),
                   key=lambda kv: (len(str(kv[0])), str(kv[0])))  # node id order: stable
    for _, node in nodes:
        cls, inputs = str(node.get("class_type", "")), node.get("inputs") or {}
        if not isinstance(inputs, dict):
            continue
        for pattern, key in _MODEL_INPUTS:
            if not model and fnmatchcase(cls, pattern) and isinstance(inputs.get(key), str):
                model = inputs[key]
        if fnmatchcase(cls, "LoraLoader*") and isinstance(inputs.get("lora_name"), str):
            loras.append(inputs["lora_name"])
        for pattern, keys in _HEADER_INPUTS:
            if not fnmatchcase(cls, pattern):
                continue
            for key, name in keys:
                value = inputs.get(key)
                if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                    params.setdefault(name, str(value))
        if fnmatchcase(cls, "*Empty*Latent*") or fnmatchcase(cls, "*ToVideo*"):
            w, h = inputs.get("width"), inputs.get("height")
            if isinstance(w, int) and isinstance(h, int) and not isinstance(w, bool):
                params.setdefault("resolution", f"{w}x{h}")
    if loras:
        params["loras"] = ",".join(loras)
    return model, params


class PromptRecorder:
    """Turns the message stream into genscope runs.

    monitor: a genscope.Monitor. prompt_lookup(prompt_id) -> (prompt, extra_data) or None:
    the queued prompt (its graph gives the class of each node). on_finished(doc, summary):
    called with each finished run document. comfyui_version: a label of every run.
    """

    TERMINAL = ("execution_success", "execution_error", "execution_interrupted")
    EVENTS = frozenset(("execution_start", "execution_cached", "executing", "progress",
                        "executed") + TERMINAL)

    def __init__(self, monitor, prompt_lookup, on_finished, comfyui_version="",
                 oom_state=None):
        self.monitor = monitor
        self.prompt_lookup = prompt_lookup
        self.on_finished = on_finished
        self.comfyui_version = comfyui_version
        self.oom_state = oom_state  # () -> dict of the allocator's state, or None
        self.lock = threading.RLock()
        self.setup_errors = []  # (source, message) recorded into every run
        # defer(callable): where a run's finish() and on_finished() run (the plugin's writer
        # thread, off ComfyUI's prompt thread); wait_deferred(): waits for them, so that the
        # monitor's previous run is finished before the next starts. None: inline.
        self.defer = None
        self.wait_deferred = None
        self._reset()

    def _reset(self):
        self.run = None
        self.prompt_id = None
        self.thread = None
        self.prompt = {}
        self.titles = {}
        self.node_step = None
        self.node_id = None
        self.node_iterations = 0
        self.node_started = 0.0
        self.nodes_executed = 0
        self.nodes_cached = 0
        self.nodes_blocked = 0
        self.started = 0.0
        self.failed_node = None
        self.cached_nodes = set()
        self.allocator_state = None
        self.finish_pending = None

    # -- the message stream -----------------------------------------------------------------

    def after_message(self):
        """Called once ComfyUI has passed the message on: a prompt whose last message this was
        is finished now, so that finishing it never delays ComfyUI's own message."""
        if self.finish_pending is None:
            return
        with self.lock:
            if self.finish_pending is not None and threading.get_ident() == self.thread:
                try:
                    self._finish(self.finish_pending)
                except Exception as e:
                    self._reset()
                    logging.getLogger("genscope.comfyui").warning(
                        "genscope: finishing a run failed: %s: %s", type(e).__name__, e)

    def on_message(self, event, data):
        """One ComfyUI message. Never raises: a failure is a monitoring error of the run.
        A prompt's last message ends its node step at once; the run is finished by
        after_message()."""
        if event not in self.EVENTS or not isinstance(data, dict):
            return
        with self.lock:
            try:
                self._dispatch(event, data)
            except Exception as e:  # the monitor must never break ComfyUI
                self._monitoring_error("comfyui", f"{event}: {type(e).__name__}: {e}")

    def _dispatch(self, event, data):
        if event == "execution_start":
            self._start(data.get("prompt_id"))
            return
        if self.run is None or self.finish_pending is not None:
            return
        prompt_id = data.get("prompt_id")
        if prompt_id is not None and prompt_id != self.prompt_id:
            return  # another prompt's message (a stale `executing None`, ...)
        if threading.get_ident() != self.thread:
            self._monitoring_error(
                "comfyui", f"{event} came from another thread than execution_start; ignored")
            return
        if event == "execution_cached":
            self._cached(data.get("nodes") or [])
        elif event == "executing":
            node = data.get("node")
            self._end_node()
            if node is None:
                self.finish_pending = "success"
            else:
                self._begin_node(str(node), data.get("display_node"))
        elif event == "progress":
            self._progress(data)
        elif event == "executed":
            self._executed(data)
        elif event == "execution_success":
            self._end_node()
            self.finish_pending = "success"
        elif event == "execution_error":
            self._error(data)
        elif event == "execution_interrupted":
            self._interrupted(data)

    # -- prompts ---------------------------------------------------------------------------

    def _start(self, prompt_id):
        if self.finish_pending is not None and self.run is not None:
            self._finish(self.finish_pending)
        if self.run is not None:
            self._end_node()
            self.run.record_monitoring_error(
                "comfyui", f"the next prompt {prompt_id} started before this one ended")
            self._finish("unfinished")
        if self.wait_deferred is not None:
            self.wait_deferred()
        found = None
        try:
            found = self.prompt_lookup(prompt_id)
        except Exception as e:
            lookup_error = f"prompt lookup failed: {type(e).__name__}: {e}"
        else:
            lookup_error = None if found else "the prompt was not found in ComfyUI's queue"
        prompt, extra = found if found else ({}, {})
        prompt = prompt if isinstance(prompt, dict) else {}
        extra = extra if isinstance(extra, dict) else {}
        model, params = _pipeline_parameters(prompt)
        labels = {"comfyui.prompt_id": str(prompt_id)}
        if self.comfyui_version:
            labels["comfyui.version"] = self.comfyui_version
        if extra.get("client_id"):
            labels["comfyui.client_id"] = str(extra["client_id"])
        self.run = self.monitor.start_run(pipeline="comfyui", model=model, parameters=params,
                                          labels=labels)
        self.prompt_id = prompt_id
        self.thread = threading.get_ident()
        self.prompt = prompt
        self.titles = _workflow_titles(extra)
        self.started = time.monotonic()
        for source, message in self.setup_errors:
            self.run.record_monitoring_error(source, message)
        if lookup_error:
            self.run.record_monitoring_error("comfyui", lookup_error)
        if prompt:
            self.run.attach("comfyui_prompt", "prompt", prompt)
        workflow = (extra.get("extra_pnginfo") or {}).get("workflow") \
            if isinstance(extra.get("extra_pnginfo"), dict) else None
        if workflow is not None:
            self.run.attach("comfyui_workflow", "workflow", workflow)

    def _finish(self, status):
        run, self.run = self.run, None
        if run is None:
            return
        summary = {
            "prompt_id": self.prompt_id,
            "status": status,
            "nodes_executed": self.nodes_executed,
            "nodes_cached": self.nodes_cached,
            "nodes_blocked": self.nodes_blocked,
            "failed_node": self.failed_node,
            "seconds": time.monotonic() - self.started,
        }
        try:
            run.label("comfyui.status", status)
            run.label("comfyui.nodes_executed", str(self.nodes_executed))
            run.label("comfyui.nodes_cached", str(self.nodes_cached))
            if self.nodes_blocked:
                run.label("comfyui.nodes_blocked", str(self.nodes_blocked))
        finally:
            self._reset()

        def complete():  # every step is ended: any thread may finish the run
            self.on_finished(run.finish(), summary)
        if self.defer is None:
            complete()
        else:
            self.defer(complete)

    # -- nodes -----------------------------------------------------------------------------

    def _node_info(self, node_id):
        node = self.prompt.get(node_id)
        if not isinstance(node, dict):
            return "?", node_id
        cls = str(node.get("class_type", "?"))
        return cls, f"{node_id} {_node_title(node_id, node, self.titles)}"

    def _open_node_step(self, node_id, display_node=None):
        cls, name = self._node_info(node_id)
        kind = step_kind(cls)
        step = self.run.step(kind, name, source="comfyui")
        step.label("comfyui.node_id", node_id)
        step.label("comfyui.class_type", cls)
        if display_node is not None and str(display_node) != node_id:
            step.label("comfyui.display_node", str(display_node))
        if cls == "?":
            step.record_monitoring_error(
                "comfyui", f"node {node_id} is not in the prompt's graph; its class is unknown")
        return step, kind

    def _cached(self, nodes):
        for node in nodes:
            node_id = str(node)
            if node_id not in self.prompt and self.prompt:
                continue  # a cached output of a node this prompt does not have
            step, _ = self._open_node_step(node_id)
            step.label("comfyui.cached", "true")
            step.skip("cached")
            step.end()
            self.cached_nodes.add(node_id)
            self.nodes_cached += 1

    def _begin_node(self, node_id, display_node):
        step, kind = self._open_node_step(node_id, display_node)
        self.node_step, self.node_id = step, node_id
        self.node_iterations = 0
        self.nodes_executed += 1
        if kind == "sampling":
            step.begin_iterations()

    def _end_node(self):
        step, self.node_step, self.node_id = self.node_step, None, None
        if step is not None:
            step.end()

    def _progress(self, data):
        step = self.node_step
        node = data.get("node")
        if step is None or (node is not None and str(node) != self.node_id):
            return
        if self.node_iterations == 0:
            max_value = data.get("max")
            if isinstance(max_value, (int, float)):
                step.label("comfyui.progress_max", str(max_value))
        self.node_iterations += 1
        step.mark_iteration()

    def _executed(self, data):
        if self.node_step is None or str(data.get("node")) != self.node_id:
            return
        output = data.get("output")
        if isinstance(output, dict):
            images = output.get("images")
            if isinstance(images, list):
                self.node_step.add_counter("images", len(images))

    def _failed_step(self, data):
        """The open step of the failing node, or a new one for it (a node that failed before
        ComfyUI said `executing`, e.g. while its inputs were prepared)."""
        node_id = str(data.get("node_id")) if data.get("node_id") is not None else None
        if self.node_step is not None and (node_id is None or node_id == self.node_id):
            return self.node_step
        self._end_node()
        if node_id is None:
            return None
        step, _ = self._open_node_step(node_id)
        self.node_step, self.node_id = step, node_id
        return step

    def _error(self, data):
        exc_type = str(data.get("exception_type") or "")
        message = str(data.get("exception_message") or "")
        if exc_type == "ExecutionBlocked":
            self._blocked(data, message)
            return
        step = self._failed_step(data)
        self.failed_node = self.node_id
        if step is not None:
            step.fail(message, exc_type)
            tb = data.get("traceback")
            if isinstance(tb, list) and tb:
                step.attach("comfyui_traceback", "traceback", [str(x) for x in tb])
            if "OutOfMemory" in exc_type or "out of memory" in message.lower():
                self._record_oom(step)
        self._end_node()
        self.finish_pending = "error"

    def _blocked(self, data, message):
        """An output blocked by an ExecutionBlocker with a message: ComfyUI reports it as an
        `execution_error` (exception_type "ExecutionBlocked") and goes on with the prompt. Not
        a failure: the node's step is skipped with the message, the run continues."""
        step = self._failed_step(data)
        if step is not None:
            step.label("comfyui.blocked", "true")
            step.skip(message or "execution blocked")
        self._end_node()
        self.nodes_blocked += 1

    def _record_oom(self, step):
        state = self.allocator_state  # taken when ComfyUI began unloading after the error
        if state is None and self.oom_state is not None:
            try:
                state = self.oom_state()
            except Exception as e:
                step.record_monitoring_error("comfyui", f"allocator state: {type(e).__name__}: {e}")
        step.attach("allocator_state", "at out of memory",
                    state if state is not None else {"available": False})

    def _interrupted(self, data):
        step = self._failed_step(data)
        self.failed_node = self.node_id
        if step is not None:
            step.fail("interrupted", "comfy.model_management.InterruptProcessingException")
            step.label("comfyui.interrupted", "true")
        self._end_node()
        self.finish_pending = "interrupted"

    # -- model management (hooks.py) -------------------------------------------------------

    def model_step(self, kind, name):
        """A step nested in the current node for a model-management call, or None when no
        prompt of this thread is running (ComfyUI unloads models between prompts too)."""
        with self.lock:
            if self.run is None or threading.get_ident() != self.thread:
                return None
            return self.run.step(kind, name, source="comfy.model_management")

    def model_step_done(self):
        """After a nested model step: a sampler's first iteration starts now, not before the
        models it needed were loaded."""
        with self.lock:
            if (self.node_step is not None and self.node_iterations == 0
                    and threading.get_ident() == self.thread):
                self.node_step.begin_iterations()

    def is_running(self, prompt_id):
        return self.run is not None and prompt_id == self.prompt_id

    def hook_error(self, message):
        self._monitoring_error("comfyui.hooks", message)

    def capture_allocator_state(self):
        """Called when ComfyUI unloads every model inside a node, which it does right after an
        out-of-memory error (execution.py): the allocator's state before the unload."""
        if self.node_step is None or self.oom_state is None \
                or threading.get_ident() != self.thread:
            return
        try:
            self.allocator_state = self.oom_state()
        except Exception as e:
            self._monitoring_error("comfyui", f"allocator state: {type(e).__name__}: {e}")

    def _monitoring_error(self, source, message):
        run = self.run
        if run is not None:
            try:
                run.record_monitoring_error(source, message)
            except Exception:
                pass
