"""A test-only ComfyUI custom node for tests/peers/comfyui_nodes.py: it notes the moment ComfyUI
sends each execution message (time.monotonic() on the sending thread, in its own wrapper of
PromptServer.instance.send_sync, independent of genscope's) and serves the list at
GET /genscope-test/messages. A websocket client sees the same messages later, after the
server's event loop has delivered them (tens of ms later on a loaded machine)."""
import threading
import time

NODE_CLASS_MAPPINGS = {}
_messages = []
_lock = threading.Lock()
_EVENTS = ("execution_start", "executing", "execution_success", "execution_error",
           "execution_interrupted")

try:
    import server
    from aiohttp import web

    instance = server.PromptServer.instance
    original = instance.send_sync

    def send_sync(event, data, sid=None):
        if event in _EVENTS and isinstance(data, dict):
            with _lock:
                _messages.append([time.monotonic(), event, data.get("node"), data.get("prompt_id")])
        return original(event, data, sid)

    instance.send_sync = send_sync

    @instance.routes.get("/genscope-test/messages")
    async def _list(request):
        with _lock:
            return web.json_response(list(_messages))
except Exception as e:  # not in ComfyUI
    print("comfyui_message_clock: inactive:", e)
