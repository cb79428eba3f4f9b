"""The figures the frontend extension shows on the graph (integrations/comfyui/graph.py): made
from run documents, served at GET /genscope/runs/{prompt_id}/nodes, sent as `genscope.run` to
the prompt's client. The page itself: tests/peers/comfyui_frontend.sh (headless Chromium).

Run: PYTHONPATH=build/python python3 -m unittest discover -s integrations/comfyui/tests
"""

import asyncio
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_comfy  # noqa: E402
from test_comfyui_package import workflow  # noqa: E402

PACKAGE_DIR = fake_comfy.PACKAGE_DIR


def graph_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("genscope_graph_under_test",
                                                  os.path.join(PACKAGE_DIR, "graph.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step(sid, node, ns, rss=None, parent=-1, status="ok", cached=False, metrics=(), **labels):
    doc_labels = {"comfyui.node_id": node, "comfyui.class_type": "X"} if node else {}
    if cached:
        doc_labels["comfyui.cached"] = "true"
    doc_labels.update(labels)
    m = [{"name": "process.rss_bytes", "peak": rss}] if rss is not None else []
    m += [{"name": n, "peak": p} for n, p in metrics]
    s = {"id": sid, "parent_id": parent, "name": f"{node} Title {node}", "status": status,
         "duration_ns": ns, "metrics": m, "labels": doc_labels}
    if status == "failed":
        s["error"] = {"type": "ValueError", "message": "boom"}
    return s


class NodeFiguresTest(unittest.TestCase):
    def setUp(self):
        self.graph = graph_module()

    def doc(self, steps):
        return {"id": "run-1", "duration_ns": 10, "labels": {"comfyui.prompt_id": "p1",
                "comfyui.status": "success", "comfyui.client_id": "c1"}, "steps": steps}

    def test_times_peaks_and_marks(self):
        figures = self.graph.node_figures(self.doc([
            step(0, "4", 5_000, rss=900, metrics=[("alloc.cuda:0.reserved_bytes", 50),
                                                  ("alloc.cuda:0.allocated_bytes", 40)]),
            step(1, None, 4_000, rss=2_000, parent=0),  # a nested model load: not a node
            step(2, "3", 9_000, rss=800, metrics=[("gpu0.process_used_bytes", 70),
                                                  ("alloc.cuda:0.reserved_bytes", 60)]),
            step(3, "5", 1, rss=5_000, cached=True),  # cached: never marked
            step(4, "6", 2_000, rss=float("nan")),
        ]))
        self.assertEqual(figures["prompt_id"], "p1")
        self.assertEqual(figures["report"], "/genscope/runs/p1/report.html")
        nodes = {n["node_id"]: n for n in figures["nodes"]}
        self.assertEqual([n["node_id"] for n in figures["nodes"]], ["4", "3", "5", "6"])
        self.assertEqual(nodes["4"]["duration_ns"], 5_000)
        self.assertEqual(nodes["4"]["peak_ram_bytes"], 900)  # its own, not the nested step's
        self.assertEqual((nodes["4"]["peak_vram_bytes"], nodes["4"]["vram_metric"]),
                         (50, "alloc.cuda:0.reserved_bytes"))
        self.assertEqual((nodes["3"]["peak_vram_bytes"], nodes["3"]["vram_metric"]),
                         (70, "gpu0.process_used_bytes"))  # NVML's per-process figure first
        self.assertIsNone(nodes["6"]["peak_ram_bytes"])  # NaN: no figure
        self.assertTrue(nodes["5"]["cached"])
        self.assertEqual(nodes["4"]["title"], "Title 4")
        self.assertEqual((figures["slowest"], figures["highest_ram"], figures["highest_vram"]),
                         ("3", "4", "3"))

    def test_a_node_run_twice_and_a_failure(self):
        figures = self.graph.node_figures(self.doc([
            step(0, "7", 1_000, rss=100),
            step(1, "8", 3_000, rss=100, status="failed"),
            step(2, "7", 2_500, rss=300),  # re-entered (lazy input): one node, times added
        ]))
        nodes = {n["node_id"]: n for n in figures["nodes"]}
        self.assertEqual(len(figures["nodes"]), 2)
        self.assertEqual((nodes["7"]["duration_ns"], nodes["7"]["peak_ram_bytes"],
                          nodes["7"]["steps"]), (3_500, 300, 2))
        self.assertEqual((nodes["8"]["status"], nodes["8"]["error"]), ("failed", "boom"))
        self.assertEqual(figures["slowest"], "7")
        self.assertIsNone(figures["highest_vram"])

    def test_everything_cached_marks_nothing(self):
        figures = self.graph.node_figures(self.doc([step(0, "1", 5, rss=9, cached=True)]))
        self.assertEqual((figures["slowest"], figures["highest_ram"]), (None, None))


class PackageGraphTest(unittest.TestCase):
    def setUp(self):
        fake_comfy.remove_modules()
        sys.modules.pop("genscope_comfyui.graph", None)
        self.tmp = tempfile.TemporaryDirectory()
        self.env = {k: os.environ.pop(k) for k in list(os.environ)
                    if k.startswith("GENSCOPE_COMFYUI")}

    def tearDown(self):
        fake_comfy.remove_modules()
        sys.modules.pop("genscope_comfyui.graph", None)
        os.environ.update(self.env)
        self.tmp.cleanup()

    def load(self):
        fake = fake_comfy.make_modules()
        fake.folder_paths.user_dir = self.tmp.name
        with self.assertLogs("genscope.comfyui", level="INFO"):
            package = fake_comfy.load_package()
        self.assertIsNotNone(package.PLUGIN)
        return fake, package

    def test_web_directory(self):
        _, package = self.load()
        self.assertEqual(package.WEB_DIRECTORY, "./web")
        self.assertTrue(os.path.isfile(os.path.join(PACKAGE_DIR, "web", "genscope.js")))

    def test_no_web_directory_when_not_monitoring(self):
        os.environ["GENSCOPE_COMFYUI_DISABLE"] = "1"
        try:
            fake = fake_comfy.make_modules()
            fake.folder_paths.user_dir = self.tmp.name
            with self.assertLogs("genscope.comfyui", level="WARNING"):
                package = fake_comfy.load_package()
        finally:
            del os.environ["GENSCOPE_COMFYUI_DISABLE"]
        self.assertIsNone(package.PLUGIN)
        self.assertIsNone(package.WEB_DIRECTORY)

    def test_message_to_the_prompts_client_and_route(self):
        import genscope
        fake, package = self.load()
        fake_comfy.prompt_worker(fake, [("g1", workflow(fake), {"client_id": "c7"}),
                                        ("g2", workflow(fake), {})])
        self.assertTrue(package.PLUGIN.flush())
        sent = [(data, sid) for event, data, sid, _ in fake.server.sent
                if event == "genscope.run"]
        self.assertEqual(len(sent), 1, "one message, for the prompt with a client id")
        figures, sid = sent[0]
        self.assertEqual((figures["prompt_id"], sid), ("g1", "c7"))
        doc = genscope.read_run(os.path.join(self.tmp.name, "genscope", "runs", "g1.json"))
        durations = {s["labels"]["comfyui.node_id"]: s["duration_ns"] for s in doc["steps"]
                     if s["parent_id"] == -1 and "comfyui.node_id" in s["labels"]}
        self.assertEqual({n["node_id"]: n["duration_ns"] for n in figures["nodes"]}, durations)
        self.assertEqual(figures["slowest"], max(durations, key=durations.get))
        self.assertTrue(all(n["peak_ram_bytes"] > 0 for n in figures["nodes"]))

        try:
            from aiohttp import web
            from aiohttp.test_utils import TestClient, TestServer
        except ImportError:
            self.skipTest("aiohttp is not installed (ComfyUI's server needs it)")

        async def scenario():
            app = web.Application()
            app.add_routes(fake.server.routes)
            async with TestClient(TestServer(app)) as client:
                found = await client.get("/genscope/runs/g1/nodes")
                missing = await client.get("/genscope/runs/nope/nodes")
                return found.status, await found.json(), missing.status, await missing.json()

        status, served, missing, error = asyncio.run(scenario())
        self.assertEqual(status, 200)
        self.assertEqual(served["nodes"], figures["nodes"])
        self.assertEqual(missing, 404)
        self.assertIn("no genscope run", error["error"])

    def test_a_failing_send_is_a_warning(self):
        graph = graph_module()

        class Broken:
            def send_sync(self, *args):
                raise RuntimeError("socket gone")

        doc = {"labels": {"comfyui.prompt_id": "p", "comfyui.client_id": "c"}, "steps": []}
        with self.assertLogs("genscope.comfyui", level="WARNING") as logs:
            graph.announce(Broken(), doc)
        self.assertIn("socket gone", logs.output[0])


if __name__ == "__main__":
    unittest.main()
