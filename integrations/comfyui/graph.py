"""What the package's frontend extension (web/genscope.js) shows on the graph: each node's
figures of a run, served at GET /genscope/runs/{prompt_id}/nodes and sent to the prompt's
client as the websocket message `genscope.run` once the run is finished (docs/comfyui.md,
"On the graph").

Per node (the top-level steps labelled comfyui.node_id; a node that ran more than once in a
prompt has its times added and its peaks maximised): time, status, cached, the exact RSS peak,
and the GPU peak: NVML's per-process figure (gpu<i>.process_used_bytes) where a GPU answered,
else torch.cuda's reserved bytes (alloc.<device>.reserved_bytes), else none. Marks: the slowest
executed node and the executed nodes with the highest RAM and GPU peaks.
"""

import logging

MESSAGE = "genscope.run"

log = logging.getLogger("genscope.comfyui")


def _metric_peak(step, accept):
    """The highest peak of the step's metrics whose name `accept` takes: (bytes, name)."""
    best = (None, None)
    for metric in step.get("metrics") or []:
        name, peak = metric.get("name", ""), metric.get("peak")
        if accept(name) and isinstance(peak, (int, float)) and peak == peak:  # not NaN
            if best[0] is None or peak > best[0]:
                best = (peak, name)
    return best


def _vram_peak(step):
    """The step's GPU memory peak: NVML's per-process figure first, else the allocator's
    reserved bytes (what torch holds; NVML adds the CUDA context and other allocators)."""
    peak = _metric_peak(step, lambda n: n.startswith("gpu") and n.endswith(".process_used_bytes"))
    if peak[0] is None:
        peak = _metric_peak(step, lambda n: n.startswith("alloc.") and
                            n.endswith(".reserved_bytes"))
    return peak


def _title(step, node_id):
    name = str(step.get("name") or "")
    prefix = f"{node_id} "
    return name[len(prefix):] if name.startswith(prefix) else name


def node_figures(doc):
    """The graph's figures of one run document (dict): see the module's docstring."""
    labels = doc.get("labels") or {}
    nodes, order = {}, []
    for step in doc.get("steps") or []:
        step_labels = step.get("labels") or {}
        node_id = step_labels.get("comfyui.node_id")
        if node_id is None or step.get("parent_id", -1) != -1:
            continue
        cached = step_labels.get("comfyui.cached") == "true"
        ram = _metric_peak(step, lambda n: n == "process.rss_bytes")[0]
        vram, vram_metric = _vram_peak(step)
        iterations = (step.get("iterations") or {}).get("count")
        node = nodes.get(node_id)
        if node is None:
            node = nodes[node_id] = {
                "node_id": node_id,
                "title": _title(step, node_id),
                "class_type": step_labels.get("comfyui.class_type"),
                "display_node": step_labels.get("comfyui.display_node"),
                "status": step.get("status"),
                "cached": cached,
                "blocked": step_labels.get("comfyui.blocked") == "true",
                "error": (step.get("error") or {}).get("message") if step.get("status") == "failed" else None,
                "duration_ns": 0,
                "peak_ram_bytes": None,
                "peak_vram_bytes": None,
                "vram_metric": None,
                "iterations": None,
                "steps": 0,
            }
            order.append(node_id)
        else:  # run again within the prompt (lazy inputs, an async node resumed)
            node["cached"] = node["cached"] and cached
            if step.get("status") == "failed":
                node["status"] = "failed"
                node["error"] = (step.get("error") or {}).get("message")
            elif node["status"] == "skipped" and step.get("status") == "ok":
                node["status"] = "ok"
        node["steps"] += 1
        node["duration_ns"] += int(step.get("duration_ns") or 0)
        if ram is not None and (node["peak_ram_bytes"] is None or ram > node["peak_ram_bytes"]):
            node["peak_ram_bytes"] = ram
        if vram is not None and (node["peak_vram_bytes"] is None or vram > node["peak_vram_bytes"]):
            node["peak_vram_bytes"], node["vram_metric"] = vram, vram_metric
        if isinstance(iterations, int):
            node["iterations"] = (node["iterations"] or 0) + iterations

    ran = [nodes[i] for i in order if not nodes[i]["cached"]]

    def top(key):
        best = None
        for node in ran:
            value = node[key]
            if value is not None and (best is None or value > best[key]):
                best = node
        return None if best is None else best["node_id"]

    prompt_id = labels.get("comfyui.prompt_id")
    return {
        "prompt_id": prompt_id,
        "run_id": doc.get("id"),
        "status": labels.get("comfyui.status"),
        "client_id": labels.get("comfyui.client_id"),
        "duration_ns": doc.get("duration_ns"),
        "report": f"/genscope/runs/{prompt_id}/report.html",
        "slowest": top("duration_ns"),
        "highest_ram": top("peak_ram_bytes"),
        "highest_vram": top("peak_vram_bytes"),
        "nodes": [nodes[i] for i in order],
    }


def add_routes(routes, store):
    """GET /genscope/runs/{prompt_id}/nodes: node_figures() of a stored run."""
    import asyncio

    from aiohttp import web

    @routes.get("/genscope/runs/{prompt_id}/nodes")
    async def run_nodes(request):
        prompt_id = request.match_info["prompt_id"]

        def figures():
            doc = store.document(prompt_id)
            return None if doc is None else node_figures(doc)

        found = await asyncio.get_running_loop().run_in_executor(None, figures)
        if found is None:
            return web.json_response({"error": f"no genscope run for prompt {prompt_id!r}"},
                                     status=404)
        return web.json_response(found)


def announce(server, doc):
    """Sends `genscope.run` (node_figures(doc)) to the client that queued the prompt; a
    prompt queued without a client id has no graph to show it on. Never raises."""
    try:
        figures = node_figures(doc)
        client = figures.get("client_id")
        if client:
            server.send_sync(MESSAGE, figures, client)
    except Exception as e:
        log.warning("genscope: could not send %s: %s: %s", MESSAGE, type(e).__name__, e)
