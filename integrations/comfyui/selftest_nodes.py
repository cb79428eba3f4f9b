"""The selftest's own custom node package (`genscope comfyui selftest`, selftest.py installs
this file as custom_nodes/genscope_selftest_nodes/__init__.py in its scratch folder; ComfyUI
never loads it otherwise). It adds:

- a message clock: the moment ComfyUI sends each execution message (time.monotonic() on the
  sending thread, in a wrapper of PromptServer.instance.send_sync of its own, installed before
  genscope's), served at GET /genscope-selftest/messages;
- GenscopeSelftestSleep (sleeps `seconds`, interruptible), GenscopeSelftestFail (raises), and,
  where this ComfyUI runs async nodes (its execution.execute is a coroutine function),
  GenscopeSelftestAsyncSleep (awaits asyncio.sleep(seconds)).
"""
import asyncio
import inspect
import threading
import time

NODE_CLASS_MAPPINGS = {}
_messages = []
_lock = threading.Lock()
_EVENTS = ("execution_start", "execution_cached", "executing", "executed", "progress",
           "progress_state", "execution_success", "execution_error", "execution_interrupted")


class GenscopeSelftestSleep:
    CATEGORY = "genscope/selftest"
    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",),
                             "seconds": ("FLOAT", {"default": 0.3, "min": 0, "max": 60})}}

    def run(self, image, seconds):
        import comfy.model_management as mm
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            mm.throw_exception_if_processing_interrupted()
            time.sleep(min(0.01, max(0.0, end - time.monotonic())))
        return (image,)


class GenscopeSelftestFail:
    CATEGORY = "genscope/selftest"
    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    def run(self, image):
        raise ValueError("genscope selftest: this node fails on purpose")


class GenscopeSelftestAsyncSleep:
    CATEGORY = "genscope/selftest"
    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",),
                             "seconds": ("FLOAT", {"default": 0.5, "min": 0, "max": 60})}}

    async def run(self, image, seconds):
        await asyncio.sleep(seconds)
        return (image,)


NODE_CLASS_MAPPINGS["GenscopeSelftestSleep"] = GenscopeSelftestSleep
NODE_CLASS_MAPPINGS["GenscopeSelftestFail"] = GenscopeSelftestFail

try:
    import execution
    if inspect.iscoroutinefunction(getattr(execution, "execute", None)):
        NODE_CLASS_MAPPINGS["GenscopeSelftestAsyncSleep"] = GenscopeSelftestAsyncSleep
except Exception as e:
    print("genscope selftest nodes: no async node:", e)

try:
    import server
    from aiohttp import web

    instance = server.PromptServer.instance
    original = instance.send_sync

    def send_sync(event, data, sid=None):
        if event in _EVENTS and isinstance(data, dict):
            with _lock:
                _messages.append([time.monotonic(), event, data])
        return original(event, data, sid)

    instance.send_sync = send_sync

    @instance.routes.get("/genscope-selftest/messages")
    async def _list(request):
        with _lock:
            return web.json_response(list(_messages), dumps=lambda o: __import__("json").dumps(
                o, default=str))
except Exception as e:  # not in ComfyUI
    print("genscope selftest nodes: no message clock:", e)
