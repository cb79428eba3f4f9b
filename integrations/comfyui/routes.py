"""The routes genscope adds to ComfyUI's own aiohttp server (PromptServer.instance.routes).

GET /genscope/runs                          recent runs, newest first (JSON)
GET /genscope/runs/{prompt_id}              the run document of a prompt (JSON)
GET /genscope/runs/{prompt_id}/report.html  its HTML report
GET /genscope/metrics                       Prometheus text 0.0.4: counters over the prompts
                                            of this server, then the latest run's figures
"""

import asyncio

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def add_routes(routes, store, genscope):
    from aiohttp import web

    def not_found(prompt_id):
        return web.json_response({"error": f"no genscope run for prompt {prompt_id!r}"},
                                 status=404)

    async def in_thread(function, *args):
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)

    @routes.get("/genscope/runs")
    async def runs(request):
        return web.json_response(await in_thread(store.list))

    @routes.get("/genscope/runs/{prompt_id}")
    async def run_document(request):
        prompt_id = request.match_info["prompt_id"]
        doc = await in_thread(store.document, prompt_id)
        return not_found(prompt_id) if doc is None else web.json_response(doc)

    @routes.get("/genscope/runs/{prompt_id}/report.html")
    async def run_report(request):
        prompt_id = request.match_info["prompt_id"]

        def render():
            doc = store.document(prompt_id)
            return None if doc is None else genscope.render_html(
                doc, title=f"genscope: ComfyUI prompt {prompt_id}")

        html = await in_thread(render)
        if html is None:
            return not_found(prompt_id)
        return web.Response(text=html, content_type="text/html")

    @routes.get("/genscope/metrics")
    async def metrics(request):
        def render():
            text = store.comfyui_metrics()
            if store.last_doc is not None:
                text += genscope.render_metrics(store.last_doc)
            return text

        body = await in_thread(render)
        return web.Response(body=body.encode("utf-8"),
                            headers={"Content-Type": PROMETHEUS_TEXT})
