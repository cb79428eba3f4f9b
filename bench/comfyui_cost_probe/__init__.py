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


def _timed(function):
    def wrapper(*args, **kwargs):
        outer = getattr(_depth, "n", 0) == 0
        _depth.n = getattr(_depth, "n", 0) + 1
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            _depth.n -= 1
            if outer:
                with _lock:
                    _totals["wall_s"] += time.perf_counter() - w0
                    _totals["cpu_s"] += time.thread_time() - c0
                    _totals["calls"] += 1
    return wrapper


def _install(json_data):
    if not _totals.get("installed"):
        package = sys.modules.get("genscope_comfyui")
        plugin = getattr(package, "PLUGIN", None)
        if plugin is not None:
            recorder = plugin.recorder
            for name in ("on_message", "after_message", "model_step", "model_step_done"):
                setattr(recorder, name, _timed(getattr(recorder, name)))
            import genscope
            genscope.Step.end = _timed(genscope.Step.end)
            _totals["installed"] = True
    return json_data


try:
    import server
    from aiohttp import web
    server.PromptServer.instance.add_on_prompt_handler(_install)

    @server.PromptServer.instance.routes.get("/genscope-bench/cost")
    async def _cost(request):
        with _lock:
            return web.json_response(dict(_totals))
except Exception as e:  # not in ComfyUI
    print("comfyui_cost_probe: inactive:", e)
