"""A ComfyUI custom node used only by bench/comfyui_nodes.py: it times what the genscope node
package does on ComfyUI's prompt thread. At the first POST /prompt (every custom node is
loaded by then) it wraps the package's recorder entry points and genscope.Step.end with
time.perf_counter / time.thread_time accumulators; GET /genscope-bench/cost returns them."""
import threading
import time
import sys

NODE_CLASS_MAPPINGS = {}
_totals = {"wall_s": 0.0, "cpu_s": 0.0, "calls": 0}
_lock = threading.Lock()
_depth = threading.local()


_parts = {}  # what -> [wall_s, cpu_s, calls]


def _timed(function, name):
    def wrapper(*args, **kwargs):
        outer = getattr(_depth, "n", 0) == 0
        _depth.n = getattr(_depth, "n", 0) + 1
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            _depth.n -= 1
            if outer:
                wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
                what = name
                if name == "on_message" and args:
                    what = f"on_message {args[0]}"
                elif name == "after_message" and wall > 1e-3:
                    what = "after_message (finishing a run)"
                with _lock:
                    _totals["wall_s"] += wall
                    _totals["cpu_s"] += cpu
                    _totals["calls"] += 1
                    part = _parts.setdefault(what, [0.0, 0.0, 0])
                    part[0] += wall
                    part[1] += cpu
                    part[2] += 1
    return wrapper


def _install(json_data):
    if not _totals.get("installed"):
        # v0.3.18 imports a custom node package under its folder name; later versions under
        # another key (its path): the module whose file is in custom_nodes/genscope_comfyui
        package = sys.modules.get("genscope_comfyui") or next(
            (m for m in list(sys.modules.values())
             if "genscope_comfyui" in str(getattr(m, "__file__", "") or "")
             and getattr(m, "PLUGIN", None) is not None), None)
        plugin = getattr(package, "PLUGIN", None)
        if plugin is not None:
            recorder = plugin.recorder
            for name in ("on_message", "after_message", "model_step", "model_step_done",
                         "node_started", "node_progress", "node_finished"):  # node events:
                if hasattr(recorder, name):  # ComfyUI's progress registry, where it has one
                    setattr(recorder, name, _timed(getattr(recorder, name), name))
            import genscope
            genscope.Step.end = _timed(genscope.Step.end, "Step.end (model steps)")
            _totals["installed"] = True
    return json_data


try:
    import server
    from aiohttp import web
    server.PromptServer.instance.add_on_prompt_handler(_install)

    @server.PromptServer.instance.routes.get("/genscope-bench/cost")
    async def _cost(request):
        with _lock:
            result = {k: _totals[k] for k in ("wall_s", "cpu_s", "calls")}
            result["parts"] = {k: list(v) for k, v in _parts.items()}
            return web.json_response(result)
except Exception as e:  # not in ComfyUI
    print("comfyui_cost_probe: inactive:", e)
