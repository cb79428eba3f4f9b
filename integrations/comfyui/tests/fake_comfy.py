"""A stand-in for the parts of ComfyUI v0.3.18 the package touches, for the unit tests.

It reproduces what execution.py / main.py / server.py do with messages (which ones are sent
only with a client id, from which thread, in which order) and the parameters of the
model-management functions, not ComfyUI's graph logic: a prompt is executed node by node
in the order given. The end-to-end test (tests/peers/comfyui_nodes.sh) runs the real ComfyUI.
"""

import importlib.util
import os
import sys
import threading
import time
import types

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InterruptProcessingException(Exception):
    pass


class FakeServer:
    instance = None

    def __init__(self):
        self.client_id = None
        self.last_node_id = None
        self.last_prompt_id = None
        self.sent = []  # (event, data, sid, thread ident)
        self.prompt_queue = FakeQueue()
        try:
            from aiohttp import web
            self.routes = web.RouteTableDef()
        except ImportError:
            self.routes = None

    def send_sync(self, event, data, sid=None):
        self.sent.append((event, data, sid, threading.get_ident()))


class FakeQueue:
    def __init__(self):
        self.mutex = threading.RLock()
        self.currently_running = {}


def make_modules(model_management_overrides=None):
    """Fresh fake modules `server`, `execution`, `folder_paths`, `comfy.model_management`,
    `comfyui_version`, installed in sys.modules (returns them as a namespace)."""
    server_mod = types.ModuleType("server")
    server_mod.PromptServer = FakeServer
    FakeServer.instance = FakeServer()

    mm = types.ModuleType("comfy.model_management")
    mm.InterruptProcessingException = InterruptProcessingException
    mm.current_loaded_models = []
    mm.calls = []

    class LoadedModel:
        def __init__(self, model):
            self.model = model
            self.device = "cpu"

        def model_load(self, lowvram_model_memory=0, force_patch_weights=False):
            mm.calls.append(("model_load", type(self.model.model).__name__))
            self.model.load()
            return self.model.model

        def model_unload(self, memory_to_free=None, unpatch_weights=True):
            mm.calls.append(("model_unload", type(self.model.model).__name__))
            if memory_to_free is not None and memory_to_free < self.model.resident:
                self.model.resident -= memory_to_free  # a partial offload
                return False
            self.model.resident = 0
            return True

    def load_models_gpu(models, memory_required=0, force_patch_weights=False,
                        minimum_memory_required=None, force_full_load=False):
        for m in models:
            if any(lm.model is m for lm in mm.current_loaded_models) \
                    and m.resident >= m.size:
                continue  # already loaded: ComfyUI loads nothing
            loaded = LoadedModel(m)
            loaded.model_load()
            mm.current_loaded_models.append(loaded)
        return "loaded"

    def unload_all_models():
        while mm.current_loaded_models:
            mm.current_loaded_models.pop().model_unload()

    mm.LoadedModel = LoadedModel
    mm.load_models_gpu = load_models_gpu
    mm.unload_all_models = unload_all_models
    for name, value in (model_management_overrides or {}).items():
        setattr(mm, name, value)
    comfy = types.ModuleType("comfy")
    comfy.model_management = mm

    execution = types.ModuleType("execution")

    def execute(server, dynprompt, caches, current_item, extra_data, executed, prompt_id,
                execution_list, pending_subgraph_results):
        node = dynprompt[current_item]
        if current_item in caches:
            return ("SUCCESS", None, None)
        if server.client_id is not None:
            server.last_node_id = current_item
            server.send_sync("executing", {"node": current_item, "display_node": current_item,
                                           "prompt_id": prompt_id}, server.client_id)
        try:
            output = node["run"](server)
        except InterruptProcessingException as e:
            return ("FAILURE", {"node_id": current_item}, e)
        except Exception as e:
            return ("FAILURE", {"node_id": current_item, "exception_message": str(e),
                                "exception_type": f"{type(e).__module__}.{type(e).__qualname__}",
                                "traceback": ["  File x, line 1\n"], "current_inputs": []}, e)
        caches.add(current_item)
        if output and server.client_id is not None:
            server.send_sync("executed", {"node": current_item, "output": output,
                                          "prompt_id": prompt_id}, server.client_id)
        return ("SUCCESS", None, None)

    class PromptExecutor:
        def __init__(self, server):
            self.server = server
            self.caches = set()
            self.inputs = {}
            self.status_messages = []

        def add_message(self, event, data, broadcast):
            data = {**data, "timestamp": int(time.time() * 1000)}
            self.status_messages.append((event, data))
            if self.server.client_id is not None or broadcast:
                self.server.send_sync(event, data, self.server.client_id)

        def execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
            self.server.client_id = extra_data.get("client_id")
            self.add_message("execution_start", {"prompt_id": prompt_id}, broadcast=False)
            # a changed input invalidates that node and every later one (the prompts of the
            # tests are chains in dict order)
            order = list(prompt)
            changed = [i for i, n in enumerate(order)
                       if self.inputs.get(n) != prompt[n].get("inputs")]
            if changed:
                for n in order[changed[0]:]:
                    self.caches.discard(n)
            self.inputs = {n: prompt[n].get("inputs") for n in order}
            cached = [n for n in prompt if n in self.caches]
            self.add_message("execution_cached", {"nodes": cached, "prompt_id": prompt_id},
                             broadcast=False)
            executed = set()
            for node_id in prompt:
                # the module attribute is looked up at call time, as in execution.py
                result, error, ex = sys.modules["execution"].execute(
                    self.server, prompt, self.caches, node_id, extra_data, executed, prompt_id,
                    None, {})
                if result == "FAILURE":
                    self.caches.discard(node_id)
                    if isinstance(ex, InterruptProcessingException):
                        self.add_message("execution_interrupted",
                                         {"prompt_id": prompt_id, "node_id": node_id,
                                          "node_type": prompt[node_id]["class_type"],
                                          "executed": list(executed)}, broadcast=True)
                    else:
                        self.add_message("execution_error",
                                         {"prompt_id": prompt_id, "node_id": node_id,
                                          "node_type": prompt[node_id]["class_type"],
                                          "executed": list(executed), **error}, broadcast=False)
                    break
                executed.add(node_id)
            else:
                self.add_message("execution_success", {"prompt_id": prompt_id}, broadcast=False)
            self.server.last_node_id = None

    execution.execute = execute
    execution.PromptExecutor = PromptExecutor

    folder_paths = types.ModuleType("folder_paths")
    folder_paths.user_dir = None
    folder_paths.get_user_directory = lambda: folder_paths.user_dir

    version = types.ModuleType("comfyui_version")
    version.__version__ = "0.3.18"

    modules = {"server": server_mod, "execution": execution, "folder_paths": folder_paths,
               "comfy": comfy, "comfy.model_management": mm, "comfyui_version": version}
    sys.modules.update(modules)
    return types.SimpleNamespace(server=FakeServer.instance, execution=execution, mm=mm,
                                 folder_paths=folder_paths)


def remove_modules():
    for name in ("server", "execution", "folder_paths", "comfy", "comfy.model_management",
                 "comfy_execution", "comfy_execution.progress", "comfy_execution.utils",
                 "comfy.memory_management", "comfy.model_patcher", "nodes",
                 "comfyui_version", "genscope_comfyui", "genscope_comfyui.plugin",
                 "genscope_comfyui.recorder", "genscope_comfyui.hooks", "genscope_comfyui.store",
                 "genscope_comfyui.routes", "genscope_comfyui.kinds"):
        sys.modules.pop(name, None)


def load_package():
    """Imports integrations/comfyui the way ComfyUI's nodes.load_custom_node does."""
    spec = importlib.util.spec_from_file_location(
        "genscope_comfyui", os.path.join(PACKAGE_DIR, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["genscope_comfyui"] = module
    spec.loader.exec_module(module)
    return module


def prompt_worker(fake, items):
    """main.py's prompt_worker for the given (prompt_id, prompt, extra_data) items, on a thread
    of its own (as ComfyUI runs it). Returns the thread ident."""
    executor = fake.execution.PromptExecutor(fake.server)
    idents = []

    def work():
        idents.append(threading.get_ident())
        for number, (prompt_id, prompt, extra) in enumerate(items):
            fake.server.last_prompt_id = prompt_id
            with fake.server.prompt_queue.mutex:
                fake.server.prompt_queue.currently_running[number] = \
                    [number, prompt_id, prompt, extra, []]
            executor.execute(prompt, prompt_id, extra, [])
            with fake.server.prompt_queue.mutex:
                del fake.server.prompt_queue.currently_running[number]
            if fake.server.client_id is not None:
                fake.server.send_sync("executing", {"node": None, "prompt_id": prompt_id},
                                      fake.server.client_id)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    return idents[0]


class Patcher:
    """A ModelPatcher: .model (the torch module's class is what is reported), model_size()."""

    def __init__(self, model, size, load_seconds=0.0):
        self.model, self.size, self.resident = model, size, 0
        self.load_seconds = load_seconds  # how long loading its weights takes

    def load(self):
        time.sleep(self.load_seconds)
        self.resident = self.size

    def model_size(self):
        return self.size

    def loaded_size(self):
        return self.resident


class BaseModel:
    pass


class SD1ClipModel:
    pass


def progress(server, value, total):
    """main.py's hijack_progress hook: always sent, to the prompt's client or to everyone."""
    server.send_sync("progress", {"value": value, "max": total, "prompt_id": server.last_prompt_id,
                                  "node": server.last_node_id}, server.client_id)


# -- today's ComfyUI (0.3.64 read): the per-prompt progress registry and executing context ----

def add_node_events(fake, with_context=True):
    """Adds fake `comfy_execution.progress` / `comfy_execution.utils` modules with the surface
    ComfyUI 0.3.64 has (read from its comfy_execution/progress.py and utils.py, not copied): a
    registry per prompt (reset_progress_state(prompt_id, dynprompt): .prompt_id, .dynprompt,
    .handlers by name), add_progress_handler(handler) (set_registry, then registered under
    handler.name), get_progress_state(); the registry calls each enabled handler's
    start_handler(node_id, state, prompt_id), update_handler(node_id, value, max_value, state,
    prompt_id, image) and finish_handler(node_id, state, prompt_id)."""
    progress_mod = types.ModuleType("comfy_execution.progress")

    class Registry:
        def __init__(self, prompt_id, dynprompt):
            self.prompt_id, self.dynprompt, self.handlers = prompt_id, dynprompt, {}

        def register_handler(self, handler):
            self.handlers[handler.name] = handler

        def _each(self):
            return [h for h in self.handlers.values() if h.enabled]

        def start_progress(self, node_id):
            for h in self._each():
                h.start_handler(node_id, {"state": "running"}, self.prompt_id)

        def update_progress(self, node_id, value, max_value, image=None):
            for h in self._each():
                h.update_handler(node_id, value, max_value, {"state": "running"}, self.prompt_id,
                                 image)

        def finish_progress(self, node_id):
            for h in self._each():
                h.finish_handler(node_id, {"state": "finished"}, self.prompt_id)

    class ProgressHandler:
        def __init__(self, name):
            self.name, self.enabled = name, True

    state = {"registry": Registry("", None)}

    def reset_progress_state(prompt_id, dynprompt):
        state["registry"] = Registry(prompt_id, dynprompt)

    def add_progress_handler(handler):
        registry = state["registry"]
        handler.set_registry(registry)
        registry.register_handler(handler)

    progress_mod.ProgressHandler = ProgressHandler
    progress_mod.reset_progress_state = reset_progress_state
    progress_mod.add_progress_handler = add_progress_handler
    progress_mod.get_progress_state = lambda: state["registry"]
    utils_mod = types.ModuleType("comfy_execution.utils")
    utils_mod.context = None
    utils_mod.get_executing_context = lambda: utils_mod.context
    package = types.ModuleType("comfy_execution")
    package.progress = progress_mod
    modules = {"comfy_execution": package, "comfy_execution.progress": progress_mod}
    if with_context:
        package.utils = utils_mod
        modules["comfy_execution.utils"] = utils_mod
    sys.modules.update(modules)
    fake.progress, fake.utils = progress_mod, utils_mod
    return fake


class DynPrompt:
    """ComfyUI's DynamicPrompt as far as the package reads it: get_node, and for nodes a node
    expanded into (ephemeral): get_parent_node_id / get_display_node_id / get_real_node_id."""

    def __init__(self, prompt):
        self.prompt, self.ephemeral = prompt, {}

    def add_ephemeral_node(self, node_id, node, parent, display):
        self.ephemeral[node_id] = (node, parent, display)

    def get_node(self, node_id):
        if node_id in self.prompt:
            return self.prompt[node_id]
        if node_id in self.ephemeral:
            return self.ephemeral[node_id][0]
        raise KeyError(node_id)

    def get_parent_node_id(self, node_id):
        return self.ephemeral[node_id][1] if node_id in self.ephemeral else None

    def get_display_node_id(self, node_id):
        return self.ephemeral[node_id][2] if node_id in self.ephemeral else node_id

    def get_real_node_id(self, node_id):
        while node_id in self.ephemeral:
            node_id = self.ephemeral[node_id][1]
        return node_id


def modern_prompt(fake, prompt_id, prompt, extra, schedule):
    """Runs one prompt the way ComfyUI 0.3.64's PromptExecutor.execute_async orders its calls,
    on a thread of its own: execution_start, a new progress registry, execution_cached, then
    the `schedule` — ("start", node) = registry.start_progress + `executing` (with a client id),
    ("progress", node, value, max), ("finish", node) = finish_progress, ("context", node) =
    the executing context, ("call", fn), ("error", data) / ("blocked", node, message) /
    ("interrupt", node), ("success",) — then `executing None`. Returns the thread ident."""
    server, executor = fake.server, fake.execution.PromptExecutor(fake.server)
    dynprompt = DynPrompt(prompt)
    idents = []

    def work():
        idents.append(threading.get_ident())
        server.last_prompt_id = prompt_id
        with server.prompt_queue.mutex:
            server.prompt_queue.currently_running[0] = [0, prompt_id, prompt, extra, [], {}]
        server.client_id = extra.get("client_id")
        executor.add_message("execution_start", {"prompt_id": prompt_id}, broadcast=False)
        fake.progress.reset_progress_state(prompt_id, dynprompt)
        executor.add_message("execution_cached", {"nodes": [], "prompt_id": prompt_id},
                             broadcast=False)
        registry = fake.progress.get_progress_state()
        for action, *rest in schedule:
            if action == "start":
                registry.start_progress(rest[0])
                if server.client_id is not None:
                    server.send_sync("executing", {"node": rest[0], "display_node": rest[0],
                                                   "prompt_id": prompt_id}, server.client_id)
            elif action == "progress":
                registry.update_progress(rest[0], rest[1], rest[2])
                server.send_sync("progress", {"value": rest[1], "max": rest[2],
                                              "prompt_id": prompt_id, "node": rest[0]},
                                 server.client_id)
            elif action == "finish":
                registry.finish_progress(rest[0])
            elif action == "context":
                fake.utils.context = types.SimpleNamespace(prompt_id=prompt_id, node_id=rest[0],
                                                           list_index=None)
            elif action == "expand":
                dynprompt.add_ephemeral_node(rest[0], rest[1], rest[2], rest[2])
            elif action == "call":
                rest[0]()
            elif action == "blocked":
                server.send_sync("execution_error", {
                    "prompt_id": prompt_id, "node_id": rest[0], "node_type": "x",
                    "exception_message": f"Execution Blocked: {rest[1]}",
                    "exception_type": "ExecutionBlocked", "traceback": []}, server.client_id)
            elif action == "error":
                executor.add_message("execution_error", {"prompt_id": prompt_id, **rest[0]},
                                     broadcast=False)
            elif action == "interrupt":
                executor.add_message("execution_interrupted",
                                     {"prompt_id": prompt_id, "node_id": rest[0]}, broadcast=True)
            elif action == "success":
                executor.add_message("execution_success", {"prompt_id": prompt_id},
                                     broadcast=False)
        fake.utils.context = None
        with server.prompt_queue.mutex:
            del server.prompt_queue.currently_running[0]
        if server.client_id is not None:
            server.send_sync("executing", {"node": None, "prompt_id": prompt_id},
                             server.client_id)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    return idents[0]
