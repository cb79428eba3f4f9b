"""Sets genscope up inside a running ComfyUI: monitor, recorder, hooks, routes."""

import importlib
import json
import logging
import os
import queue
import sys
import threading

from . import graph, hooks, routes
from .recorder import PromptRecorder
from .store import RunStore, log_line

log = logging.getLogger("genscope.comfyui")


class Unavailable(Exception):
    """genscope cannot monitor this ComfyUI; the message says why (one log line)."""


class Plugin:
    def __init__(self, monitor, recorder, store, errors, writer):
        self.monitor, self.recorder, self.store, self.errors = monitor, recorder, store, errors
        self.writer = writer

    def flush(self, timeout=30):
        """Waits until every finished run is written and logged."""
        return self.writer.flush(timeout)


class Writer:
    """Finishes runs, writes their documents (atomic, with fsync: tens of ms) and the
    per-prompt log line on a thread of its own, so ComfyUI's prompt thread never waits for
    them."""

    def __init__(self):
        self.queue = queue.Queue()
        self.thread = threading.Thread(target=self._work, name="genscope-comfyui-writer",
                                       daemon=True)
        self.thread.start()

    def put(self, work):
        self.queue.put(work)

    def flush(self, timeout=30):
        if threading.current_thread() is self.thread:
            return True
        done = threading.Event()
        self.queue.put(done.set)
        return done.wait(timeout)

    def _work(self):
        while True:
            work = self.queue.get()
            try:
                work()
            except Exception as e:  # a broken document or log handler stops nothing
                log.warning("genscope: finishing or writing a run failed: %s: %s",
                            type(e).__name__, e)


def prompt_lookup(server_instance):
    """(prompt, extra_data) of a prompt ComfyUI is executing, from its queue's
    currently_running items ([number, prompt_id, prompt, extra_data, outputs, ...])."""
    def lookup(prompt_id):
        queue = server_instance.prompt_queue
        with queue.mutex:
            items = list(queue.currently_running.values())
        for item in items:
            if len(item) > 3 and item[1] == prompt_id:
                return item[2], item[3]
        return None
    return lookup


def optional_module(name):
    """The module, or None where this ComfyUI does not have it (an older version)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
    except Exception as e:  # present but broken: the message stream still works
        log.warning("genscope: %s is not usable: %s: %s", name, type(e).__name__, e)
        return None


def env_flag(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def load_settings(path):
    """Optional settings file <user>/genscope/settings.json: {"runs_dir", "record",
    "history_db", "sample_interval_ms"}; a broken file is logged and ignored."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return {}
    except Exception as e:
        log.warning("genscope: ignoring settings %s: %s", path, e)
        return {}


def settings(user_dir, environ):
    """Options from <user>/genscope/settings.json, overridden by the environment."""
    base = os.path.join(user_dir, "genscope")
    found = load_settings(os.path.join(base, "settings.json"))
    runs_dir = environ.get("GENSCOPE_COMFYUI_RUNS_DIR") or found.get("runs_dir") \
        or os.path.join(base, "runs")
    record = found.get("record", False)
    if "GENSCOPE_COMFYUI_RECORD" in environ:
        record = env_flag(environ["GENSCOPE_COMFYUI_RECORD"])
    interval = environ.get("GENSCOPE_COMFYUI_SAMPLE_MS") or found.get("sample_interval_ms") or 10
    return {
        "runs_dir": runs_dir,
        "record": bool(record),
        "history_db": environ.get("GENSCOPE_HISTORY_DB") or found.get("history_db"),
        "sample_interval_ms": float(interval),
        "disabled": env_flag(environ.get("GENSCOPE_COMFYUI_DISABLE", "")),
    }


def setup(environ=None):
    environ = os.environ if environ is None else environ
    try:
        import genscope
    except ImportError as e:
        raise Unavailable(f"the genscope Python module is not importable ({e}); install genscope "
                          "(scripts/setup, or pip install) for the interpreter running ComfyUI")
    try:
        import comfy.model_management as mm
        import execution
        import folder_paths
        import server
    except ImportError as e:
        raise Unavailable(f"this does not look like ComfyUI ({e})")
    instance = getattr(getattr(server, "PromptServer", None), "instance", None)
    if instance is None:
        raise Unavailable("ComfyUI's PromptServer.instance is not set")
    options = settings(folder_paths.get_user_directory(), environ)
    if options["disabled"]:
        raise Unavailable("GENSCOPE_COMFYUI_DISABLE is set")
    try:
        import comfyui_version
        version = str(comfyui_version.__version__)
    except Exception:
        version = ""

    monitor = genscope.Monitor(sample_interval_ms=options["sample_interval_ms"],
                               record=options["record"], history_db=options["history_db"])
    store = RunStore(options["runs_dir"], genscope.write_run, genscope.read_run)

    writer = Writer()

    def finished(doc, summary):  # on the writer thread
        path = store.write(doc, store.add(doc, summary))
        log.info(log_line(doc, summary, path))
        graph.announce(instance, doc)  # the frontend extension's figures (web/genscope.js)

    recorder = PromptRecorder(monitor, prompt_lookup(instance), finished, version,
                              oom_state=hooks.cuda_allocator_state)
    recorder.defer, recorder.wait_deferred = writer.put, writer.flush
    error = hooks.hook_send_sync(instance, recorder)
    if error:
        raise Unavailable(error)
    errors = []
    hooks.hook_no_client(execution, recorder, errors)
    hooks.hook_model_management(mm, recorder, errors)
    # ComfyUI's official hooks, where this ComfyUI has them (feature detection).
    found = []
    if hooks.hook_node_events(optional_module("comfy_execution.progress"), recorder, errors):
        found.append("node events")
    if hooks.hook_executing_context(optional_module("comfy_execution.utils"), recorder):
        found.append("executing context")
    try:
        if hooks.hook_on_prompt(instance, recorder):
            found.append("on-prompt handler")
    except Exception as e:
        errors.append(("comfyui.hooks", f"add_on_prompt_handler: {type(e).__name__}: {e}"))
    recorder.is_async = hooks.async_classes(lambda: sys.modules.get("nodes"))
    recorder.run_labels = hooks.run_labels
    recorder.setup_errors = errors
    try:
        routes.add_routes(instance.routes, store, genscope)
        graph.add_routes(instance.routes, store)
    except Exception as e:  # runs are still recorded and written
        errors.append(("comfyui.routes", f"the /genscope routes are not served: "
                       f"{type(e).__name__}: {e}"))
    line = (f"genscope {genscope.__version__}: monitoring ComfyUI {version or '?'} prompts; run "
            f"documents in {options['runs_dir']}; history {'on' if options['record'] else 'off'}"
            f"; GET /genscope/runs; hooks: {', '.join(found + ['messages'])}")
    if errors:
        line += f"; {len(errors)} hook(s) not installed (see each run's monitoring errors)"
    log.info(line)
    return Plugin(monitor, recorder, store, errors, writer)
