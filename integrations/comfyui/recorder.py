"""From ComfyUI's execution messages to genscope runs: one run per prompt, one step per node.

The recorder is fed the messages ComfyUI sends to its clients (`on_message(event, data)`:
execution_start, execution_cached, executing, progress, executed, execution_success,
execution_error, execution_interrupted) and knows nothing of how they were caught (hooks.py).
ComfyUI sends them from the thread that executes the prompt (main.py's prompt_worker), and
genscope steps belong to the thread that opened them, so every step is opened and ended on the
thread that sent `execution_start`; a message about the prompt from another thread is a
monitoring error of the run, never a step change.

Timing, two sources chosen per prompt by what the ComfyUI offers (hooks.py):
- node events (ComfyUI's per-prompt progress registry, comfy_execution/progress.py, where it
  exists): `node_started` / `node_progress` / `node_finished` for each node id, for every
  prompt with or without a client id. A node's step runs from its own start to its own finish:
  an async node that goes pending keeps its step open on a lane of its own (a genscope thread
  of its own, since it runs interleaved with other nodes on the prompt thread); a node that
  waits for lazy inputs or expands into a subgraph is re-entered, not counted again.
- the message stream (v0.3.18 and any ComfyUI without the registry): a node's step begins when
  ComfyUI says `executing` for it and ends at the next `executing` (the next node, or `None`
  at the end of a prompt) or at the prompt's success/error/interrupt message: the time
  between ComfyUI's own messages. A second `executing` for a node (lazy inputs) opens a
  continuation step labelled `comfyui.reentered`, not counted again.
"""

import logging
import queue
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
    """Node titles the user gave in the UI (extra_pnginfo.workflow.nodes[].title), including the
    nodes inside subgraphs: ComfyUI's frontend flattens a subgraph instance `a` with inner node
    `b` to the prompt node id `a:b` (nested: `a:b:c`); the inner titles are in
    workflow.definitions.subgraphs[] (by the subgraph's id, which is the instance's `type`)."""
    titles = {}
    try:
        workflow = extra_data["extra_pnginfo"]["workflow"]
        nodes = workflow["nodes"]
    except (KeyError, TypeError):
        return titles
    subgraphs = {}
    try:
        for graph in (workflow.get("definitions") or {}).get("subgraphs") or []:
            if isinstance(graph, dict) and graph.get("id") is not None:
                subgraphs[str(graph["id"])] = graph.get("nodes") or []
    except (AttributeError, TypeError):
        pass

    def walk(nodes, prefix, depth):
        for node in nodes if isinstance(nodes, list) else []:
            if not isinstance(node, dict) or node.get("id") is None:
                continue
            node_id = prefix + str(node["id"])
            if node.get("title"):
                titles[node_id] = str(node["title"])
            inner = subgraphs.get(str(node.get("type")))
            if inner is not None and depth < 16:  # a subgraph instance
                walk(inner, node_id + ":", depth + 1)
    walk(nodes, "", 0)
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


class _Lane:
    """A thread of its own for the step of one async node: ComfyUI runs async nodes interleaved
    with the other nodes on its prompt thread, and genscope nests the steps one thread opens,
    so the async node's step is opened and ended here (its own `thread` in the run document)
    and the nodes that run meanwhile are not nested in it."""

    def __init__(self):
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self._work, name="genscope-comfyui-async",
                                       daemon=True)
        self.thread.start()

    def call(self, function):
        done, box = threading.Event(), []

        def job():
            try:
                box.append((True, function()))
            except BaseException as e:  # handed back to the caller
                box.append((False, e))
            finally:
                done.set()
        self.jobs.put(job)
        if not done.wait(10):
            raise TimeoutError("the async node's lane thread did not answer in 10 s")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def close(self):
        self.jobs.put(None)

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job()


class _NodeStep:
    """An open node step: its genscope step, kind, iterations so far, lane (async nodes)."""
    __slots__ = ("node_id", "step", "kind", "iterations", "lane", "blocked")

    def __init__(self, node_id, step, kind, lane):
        self.node_id, self.step, self.kind, self.lane = node_id, step, kind, lane
        self.iterations = 0
        self.blocked = False


class PromptRecorder:
    """Turns the message stream (and, where ComfyUI has them, its per-node events) into genscope
    runs.

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
        # Set by the hooks where ComfyUI has them (hooks.py):
        # register_events(recorder, prompt_id) -> None or an error text: subscribes to the
        # prompt's node events (called at execution_cached, once ComfyUI has made the prompt's
        # progress registry); executing_node() -> (prompt_id, node_id) or None: ComfyUI's
        # executing context; is_async(class_type) -> bool; run_labels() -> dict of labels
        # (dynamic VRAM, ...) and queued_at(prompt_id) -> seconds since the epoch or None.
        self.register_events = None
        self.executing_node = None
        self.is_async = None
        self.run_labels = None
        self.queued_at = None
        # The moment (time.monotonic_ns()) the message or event being handled arrived: node
        # steps begin and end there, so that the time genscope spends between ending one step
        # and opening the next (its probes, waiting for the GIL on a loaded machine) is not
        # taken from the node. None: the genscope module has no start_ns / at_ns (older).
        self.moment = None
        self.timestamps = True
        self._reset()

    def _reset(self):
        self.run = None
        self.prompt_id = None
        self.thread = None
        self.prompt = {}
        self.titles = {}
        self.open = {}  # node id -> _NodeStep, in the order opened
        self.begun = set()  # node ids counted as executed in this prompt
        self.events = False  # this prompt's node steps come from ComfyUI's node events
        self.dynprompt = None  # ComfyUI's DynamicPrompt of the prompt (expanded nodes)
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
        moment = time.monotonic_ns()
        with self.lock:
            self.moment = moment
            try:
                self._dispatch(event, data)
            except Exception as e:  # the monitor must never break ComfyUI
                self._monitoring_error("comfyui", f"{event}: {type(e).__name__}: {e}")

    def _ours(self, prompt_id, what):
        """True when a message or event about `prompt_id` belongs to the running prompt and
        came from its thread (else a monitoring error, for the other thread)."""
        if self.run is None or self.finish_pending is not None:
            return False
        if prompt_id is not None and prompt_id != self.prompt_id:
            return False  # another prompt's message (a stale `executing None`, ...)
        if threading.get_ident() != self.thread:
            self._monitoring_error(
                "comfyui", f"{what} came from another thread than execution_start; ignored")
            return False
        return True

    def _dispatch(self, event, data):
        if event == "execution_start":
            self._start(data.get("prompt_id"))
            return
        if not self._ours(data.get("prompt_id"), event):
            return
        if event == "execution_cached":
            self._cached(data.get("nodes") or [])
            self._subscribe()
        elif event == "executing":
            if self.events:
                return  # the node events give the steps; `executing None` follows success
            node = data.get("node")
            self._close_all()
            if node is None:
                self.finish_pending = "success"
            else:
                self._begin_stream_node(str(node), data.get("display_node"))
        elif event == "progress":
            if not self.events:
                node = data.get("node")
                open_nodes = list(self.open.values())
                if open_nodes and (node is None or str(node) == open_nodes[-1].node_id):
                    self._iteration(open_nodes[-1], data.get("max"))
        elif event == "executed":
            self._executed(data)
        elif event == "execution_success":
            self._close_all()
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
            self._close_all("the next prompt started before this node finished")
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
        extra_errors = []
        for name, getter in (("run_labels", self.run_labels), ("queued_at", self.queued_at)):
            if getter is None:
                continue
            try:
                if name == "run_labels":
                    labels.update(getter() or {})
                else:
                    queued = getter(prompt_id)
                    if queued is not None:
                        labels["comfyui.queue_wait_ms"] = \
                            f"{max(0.0, time.time() - queued) * 1000:.0f}"
            except Exception as e:
                extra_errors.append(f"{name}: {type(e).__name__}: {e}")
        self.run = self.monitor.start_run(pipeline="comfyui", model=model, parameters=params,
                                          labels=labels)
        self.prompt_id = prompt_id
        self.thread = threading.get_ident()
        self.prompt = prompt
        self.titles = _workflow_titles(extra)
        self.started = time.monotonic()
        for source, message in self.setup_errors:
            self.run.record_monitoring_error(source, message)
        for message in extra_errors:
            self.run.record_monitoring_error("comfyui.hooks", message)
        if labels.get("comfyui.allocator_excludes_managed_weights") == "true":
            self.run.add_note("ComfyUI manages the model weights with dynamic VRAM (comfy-aimdo): "
                              "the torch.cuda allocator figures exclude them; the GPU's own "
                              "figures (NVML) include them")
        if lookup_error:
            self.run.record_monitoring_error("comfyui", lookup_error)
        if prompt:
            self.run.attach("comfyui_prompt", "prompt", prompt)
        workflow = (extra.get("extra_pnginfo") or {}).get("workflow") \
            if isinstance(extra.get("extra_pnginfo"), dict) else None
        if workflow is not None:
            self.run.attach("comfyui_workflow", "workflow", workflow)

    def _subscribe(self):
        """At execution_cached ComfyUI has made the prompt's progress registry: subscribe to
        its node events where there is one (else the message stream gives the steps)."""
        if self.register_events is None:
            return
        try:
            error = self.register_events(self, self.prompt_id)
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        if error:
            self.run.record_monitoring_error(
                "comfyui.hooks", f"node events not available ({error}): timing nodes by "
                "ComfyUI's executing messages")
        else:
            self.events = True
            self.run.label("comfyui.node_timing", "node_events")

    def _finish(self, status):
        self._close_all("the prompt ended before this node finished")
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
            if not self.events:
                run.label("comfyui.node_timing", "messages")
            if self.nodes_blocked:
                run.label("comfyui.nodes_blocked", str(self.nodes_blocked))
        finally:
            self._reset()

        # The run ends at the moment of ComfyUI's last message, not when the writer thread
        # gets to it (after ComfyUI's gc.collect() between prompts, which holds the GIL for
        # hundreds of ms after a large prompt).
        end = self.moment if self.timestamps else None

        def complete():  # every step is ended: any thread may finish the run
            doc = None
            if end is not None:
                try:
                    doc = run.finish(at_ns=end)
                except TypeError:  # an older genscope module: no at_ns
                    doc = None
            self.on_finished(doc if doc is not None else run.finish(), summary)
        if self.defer is None:
            complete()
        else:
            self.defer(complete)

    # -- nodes -----------------------------------------------------------------------------

    def _graph_node(self, node_id):
        """(node dict or None, expanded): the prompt's node, else ComfyUI's expanded one."""
        node = self.prompt.get(node_id)
        if isinstance(node, dict):
            return node, False
        dynprompt = self.dynprompt
        if dynprompt is not None:
            try:
                node = dynprompt.get_node(node_id)
            except Exception:
                node = None
            if isinstance(node, dict):
                return node, True
        return None, False

    def _relation(self, node_id, how):
        """dynprompt.get_display_node_id / get_parent_node_id / get_real_node_id, or None."""
        try:
            value = getattr(self.dynprompt, how)(node_id)
        except Exception:
            return None
        return None if value is None else str(value)

    def _node_info(self, node_id):
        node, expanded = self._graph_node(node_id)
        if node is None:
            return "?", node_id, False
        cls = str(node.get("class_type", "?"))
        return cls, f"{node_id} {_node_title(node_id, node, self.titles)}", expanded

    def _open_node_step(self, node_id, display_node=None, lane=None):
        cls, name, expanded = self._node_info(node_id)
        kind = step_kind(cls)
        if lane is not None:
            step = lane.call(lambda: self._step(kind, name))
        else:
            step = self._step(kind, name)
        step.label("comfyui.node_id", node_id)
        step.label("comfyui.class_type", cls)
        if display_node is None and expanded:
            display_node = self._relation(node_id, "get_display_node_id")
        if display_node is not None and str(display_node) != node_id:
            step.label("comfyui.display_node", str(display_node))
        if expanded:
            parent = self._relation(node_id, "get_parent_node_id")
            if parent is not None:
                step.label("comfyui.parent_node", parent)
        if cls == "?":
            step.record_monitoring_error(
                "comfyui", f"node {node_id} is not in the prompt's graph; its class is unknown")
        return _NodeStep(node_id, step, kind, lane)

    def _step(self, kind, name):
        """A node step that began at the moment of the message or event, where the genscope
        module takes one (start_ns)."""
        if self.timestamps and self.moment is not None:
            try:
                return self.run.step(kind, name, source="comfyui", start_ns=self.moment)
            except TypeError:  # an older genscope module: no start_ns
                self.timestamps = False
        return self.run.step(kind, name, source="comfyui")

    def _end(self, step):
        if self.timestamps and self.moment is not None:
            try:
                return step.end(at_ns=self.moment)
            except TypeError:
                self.timestamps = False
        return step.end()

    def _close(self, node_id, skip=None):
        ns = self.open.pop(node_id, None)
        if ns is None:
            return
        if skip is not None and not ns.blocked:
            ns.step.label("comfyui.unfinished", "true")
            ns.step.skip(skip)
        if ns.lane is not None:
            try:
                ns.lane.call(lambda: self._end(ns.step))
            finally:
                ns.lane.close()
        else:
            self._end(ns.step)

    def _close_all(self, skip=None):
        for node_id in reversed(list(self.open)):
            self._close(node_id, skip)

    def _count(self, node_id, ns):
        """A node's first step of the prompt counts it; a later one is a continuation."""
        if node_id in self.begun:
            ns.step.label("comfyui.reentered", "true")
            return
        self.begun.add(node_id)
        self.nodes_executed += 1

    def _cached(self, nodes):
        for node in nodes:
            node_id = str(node)
            if node_id not in self.prompt and self.prompt:
                continue  # a cached output of a node this prompt does not have
            ns = self._open_node_step(node_id)
            ns.step.label("comfyui.cached", "true")
            ns.step.skip("cached")
            ns.step.end()
            self.cached_nodes.add(node_id)
            self.nodes_cached += 1

    def _begin_stream_node(self, node_id, display_node):
        ns = self._open_node_step(node_id, display_node)
        self.open[node_id] = ns
        self._count(node_id, ns)
        if ns.kind == "sampling":
            ns.step.begin_iterations()

    def _iteration(self, ns, max_value):
        if ns.iterations == 0 and isinstance(max_value, (int, float)):
            ns.step.label("comfyui.progress_max", str(max_value))
        ns.iterations += 1
        ns.step.mark_iteration()

    def _executed(self, data):
        ns = self.open.get(str(data.get("node")))
        if ns is None:
            return
        output = data.get("output")
        if isinstance(output, dict):
            images = output.get("images")
            if isinstance(images, list):
                ns.step.add_counter("images", len(images))

    # -- node events (ComfyUI's progress registry, hooks.py) --------------------------------

    def _event(self, what, prompt_id, function):
        moment = time.monotonic_ns()
        with self.lock:
            self.moment = moment
            try:
                if self.events and self._ours(prompt_id, what):
                    function()
            except Exception as e:  # the monitor must never break ComfyUI
                self._monitoring_error("comfyui", f"{what}: {type(e).__name__}: {e}")

    def _is_ancestor(self, maybe_parent, node_id):
        seen = 0
        parent = self._relation(node_id, "get_parent_node_id")
        while parent is not None and seen < 64:
            if parent == maybe_parent:
                return True
            parent = self._relation(parent, "get_parent_node_id")
            seen += 1
        return False

    def node_started(self, prompt_id, node_id):
        """ComfyUI starts (or re-enters) a node."""
        def started():
            nid = str(node_id)
            if nid in self.open:
                self.open[nid].step.label("comfyui.reentered", "true")
                return
            # A node open on the prompt thread that is neither this node's expansion parent
            # nor async went pending for lazy inputs: its first part ends here.
            for other, ns in list(self.open.items()):
                if ns.lane is None and not self._is_ancestor(other, nid):
                    ns.step.label("comfyui.waited_for_inputs", "true")
                    self._close(other)
            lane = None
            if nid not in self.begun and self.is_async is not None:
                node, _ = self._graph_node(nid)
                if node is not None and self.is_async(str(node.get("class_type", ""))):
                    lane = _Lane()
            ns = self._open_node_step(nid, lane=lane)
            if lane is not None:
                ns.step.label("comfyui.async", "true")
            self.open[nid] = ns
            self._count(nid, ns)
            if ns.kind == "sampling" and lane is None:
                ns.step.begin_iterations()
        self._event("node start", prompt_id, started)

    def node_progress(self, prompt_id, node_id, value, max_value):
        def progressed():
            ns = self.open.get(str(node_id))
            if ns is not None:
                self._iteration(ns, max_value)
        self._event("node progress", prompt_id, progressed)

    def node_finished(self, prompt_id, node_id):
        """ComfyUI finished a node (its outputs are set): the step ends. A node ComfyUI served
        from its cache finishes without a start: nothing to end."""
        self._event("node finish", prompt_id, lambda: self._close(str(node_id)))

    # -- failures --------------------------------------------------------------------------

    def _failed_node_step(self, data):
        """The open step of the failing node (or of the innermost node expanded from it: ComfyUI
        reports an expanded node's failure under its real node id), or a new one for it (a
        node that failed before it started, e.g. while its inputs were prepared)."""
        node_id = str(data.get("node_id")) if data.get("node_id") is not None else None
        for ns in reversed(list(self.open.values())):
            if node_id is None or ns.node_id == node_id \
                    or self._relation(ns.node_id, "get_real_node_id") == node_id:
                return ns
        if node_id is None:
            return None
        ns = self._open_node_step(node_id)
        self.open[node_id] = ns
        return ns

    def _error(self, data):
        exc_type = str(data.get("exception_type") or "")
        message = str(data.get("exception_message") or "")
        if exc_type == "ExecutionBlocked":
            self._blocked(data, message)
            return
        ns = self._failed_node_step(data)
        if ns is not None:
            self.failed_node = ns.node_id
            ns.step.fail(message, exc_type)
            tb = data.get("traceback")
            if isinstance(tb, list) and tb:
                ns.step.attach("comfyui_traceback", "traceback", [str(x) for x in tb])
            if "OutOfMemory" in exc_type or "out of memory" in message.lower():
                self._record_oom(ns.step)
            self._close(ns.node_id)
        self._close_all("the prompt failed before this node finished")
        self.finish_pending = "error"

    def _blocked(self, data, message):
        """An output blocked by an ExecutionBlocker with a message: ComfyUI reports it as an
        `execution_error` (exception_type "ExecutionBlocked") and goes on with the prompt. Not
        a failure: the node's step is skipped with the message, the run continues (with node
        events the node still finishes, which ends its step)."""
        ns = self._failed_node_step(data)
        if ns is not None:
            ns.step.label("comfyui.blocked", "true")
            ns.step.skip(message or "execution blocked")
            ns.blocked = True
            if not self.events:
                self._close(ns.node_id)
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
        ns = self._failed_node_step(data)
        if ns is not None:
            self.failed_node = ns.node_id
            ns.step.fail("interrupted", "comfy.model_management.InterruptProcessingException")
            ns.step.label("comfyui.interrupted", "true")
            self._close(ns.node_id)
        self._close_all("the prompt was interrupted before this node finished")
        self.finish_pending = "interrupted"

    # -- model management (hooks.py) -------------------------------------------------------

    def _context_node(self):
        """The node ComfyUI's executing context names (where it has one), else None."""
        if self.executing_node is None:
            return None
        try:
            found = self.executing_node()
        except Exception:
            return None
        if not found or found[0] != self.prompt_id:
            return None
        return str(found[1])

    def model_step(self, kind, name):
        """A step nested in the current node for a model-management call, or None when no
        prompt of this thread is running (ComfyUI unloads models between prompts too). Labelled
        `comfyui.for_node` with the node ComfyUI's executing context names."""
        with self.lock:
            if self.run is None or threading.get_ident() != self.thread:
                return None
            step = self.run.step(kind, name, source="comfy.model_management")
            node = self._context_node()
            if node is not None:
                step.label("comfyui.for_node", node)
            return step

    def model_step_done(self):
        """After a nested model step: a sampler's first iteration starts now, not before the
        models it needed were loaded."""
        with self.lock:
            if not self.open or threading.get_ident() != self.thread:
                return
            ns = self.open.get(self._context_node() or "") or list(self.open.values())[-1]
            if ns.kind == "sampling" and ns.iterations == 0 and ns.lane is None:
                ns.step.begin_iterations()

    def is_running(self, prompt_id):
        return self.run is not None and prompt_id == self.prompt_id

    def hook_error(self, message):
        self._monitoring_error("comfyui.hooks", message)

    def capture_allocator_state(self):
        """Called when ComfyUI unloads every model inside a node, which it does right after an
        out-of-memory error (execution.py): the allocator's state before the unload."""
        if not self.open or self.oom_state is None or threading.get_ident() != self.thread:
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
