"""Unit tests of the ComfyUI node package (integrations/comfyui) against a fake ComfyUI.

Run: PYTHONPATH=build/python python3 -m unittest discover -s integrations/comfyui/tests
(ctest: python.comfyui). The real ComfyUI: tests/peers/comfyui_nodes.sh.
"""

import asyncio
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_comfy  # noqa: E402
from fake_comfy import BaseModel, Patcher, SD1ClipModel, progress  # noqa: E402

import genscope  # noqa: E402


def workflow(fake, fail_at=None, interrupt_at=None, exception=None, seed=1):
    mm = fake.mm
    clip = Patcher(SD1ClipModel(), 1000)
    unet = Patcher(BaseModel(), 5000, load_seconds=0.1)

    def loader(server):
        time.sleep(0.02)

    def encode(server):
        mm.load_models_gpu([clip])

    def sampler(server):
        mm.load_models_gpu([unet])
        for i in range(4):
            time.sleep(0.01)
            progress(server, i + 1, 4)

    def decode(server):
        time.sleep(0.005)

    def save(server):
        return {"images": [{"filename": "x.png"}]}

    prompt = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd15.safetensors"},
              "_meta": {"title": "Load Checkpoint"}, "run": loader},
        "8": {"class_type": "LoraLoader", "inputs": {"lora_name": "tiny.safetensors"},
              "run": loader},
        "2": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat"}, "run": encode},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "blurry"}, "run": encode},
        "4": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64,
                                                           "batch_size": 1}, "run": decode},
        "5": {"class_type": "KSampler", "inputs": {"seed": seed, "steps": 4}, "run": sampler},
        "6": {"class_type": "VAEDecodeTiled", "inputs": {}, "run": decode},
        "7": {"class_type": "SaveImage", "inputs": {}, "run": save},
        "9": {"class_type": "ImageInvert", "inputs": {}, "run": decode},
    }
    if fail_at:
        def fail(server):
            raise exception or ValueError("node exploded")
        prompt[fail_at]["run"] = fail
    if interrupt_at:
        def interrupt(server):
            raise fake_comfy.InterruptProcessingException()
        prompt[interrupt_at]["run"] = interrupt
    return prompt


def steps_by_node(doc):
    return {s["labels"]["comfyui.node_id"]: s for s in doc["steps"]
            if "comfyui.node_id" in s.get("labels", {})}


class PackageTest(unittest.TestCase):
    def setUp(self):
        fake_comfy.remove_modules()
        self.tmp = tempfile.TemporaryDirectory()
        self.env = {k: os.environ.pop(k) for k in list(os.environ)
                    if k.startswith("GENSCOPE_COMFYUI")}

    def tearDown(self):
        fake_comfy.remove_modules()
        os.environ.update(self.env)
        self.tmp.cleanup()

    def load(self, modern=False, **mm_overrides):
        fake = fake_comfy.make_modules(mm_overrides)
        if modern:
            fake_comfy.add_node_events(fake)
        fake.folder_paths.user_dir = self.tmp.name
        with self.assertLogs("genscope.comfyui", level="INFO") as logs:
            package = fake_comfy.load_package()
        self.assertIsNotNone(package.PLUGIN, logs.output)
        self.plugin = package.PLUGIN
        self.runs_dir = os.path.join(self.tmp.name, "genscope", "runs")
        return fake, package, logs.output

    def docs(self, *prompt_ids):
        self.assertTrue(self.plugin.flush())
        return [genscope.read_run(os.path.join(self.runs_dir, p + ".json")) for p in prompt_ids]

    # -- recording ------------------------------------------------------------------------

    def check_first_prompt(self, doc, client, title9="ImageInvert"):
        nodes = steps_by_node(doc)
        self.assertEqual(sorted(nodes), ["1", "2", "3", "4", "5", "6", "7", "8", "9"])
        kinds = {n: s["kind"] for n, s in nodes.items()}
        self.assertEqual(kinds, {"1": "model_loading", "8": "lora_application",
                                 "2": "text_encoding", "3": "text_encoding",
                                 "4": "latent_generation", "5": "sampling", "6": "vae_decode",
                                 "7": "save", "9": "custom"})
        self.assertEqual(nodes["1"]["name"], "1 Load Checkpoint")
        self.assertEqual(nodes["9"]["name"], "9 " + title9)
        self.assertEqual(nodes["9"]["labels"]["comfyui.class_type"], "ImageInvert")
        self.assertTrue(all(s["status"] == "ok" and s["parent_id"] == -1 for s in nodes.values()))
        self.assertEqual(nodes["5"]["iterations"]["count"], 4)
        # the sampler's iterations start after its model was loaded (0.1 s; an iteration
        # sleeps 10 ms)
        self.assertLess(nodes["5"]["iterations"]["first_ns"], 90e6)
        self.assertGreaterEqual(nodes["5"]["duration_ns"], 140e6)
        self.assertGreaterEqual(nodes["1"]["duration_ns"], 20e6)
        if client:
            self.assertEqual(nodes["7"]["counters"], {"images": 1.0})
        # model loads nested in the node that caused them, with class and bytes
        nested = [s for s in doc["steps"] if s["parent_id"] == nodes["5"]["id"]]
        self.assertEqual([s["name"] for s in nested], ["load_models_gpu"])
        self.assertEqual(nested[0]["kind"], "model_loading")
        self.assertEqual(nested[0]["labels"]["comfyui.models"], "BaseModel")
        self.assertEqual(nested[0]["counters"]["bytes"], 5000)
        inner = [s for s in doc["steps"] if s["parent_id"] == nested[0]["id"]]
        self.assertEqual([(s["name"], s["labels"]["comfyui.model_class"]) for s in inner],
                         [("model_load", "BaseModel")])
        self.assertEqual(inner[0]["labels"]["comfyui.loaded_bytes"], "5000")
        self.assertEqual(doc["labels"]["comfyui.status"], "success")
        self.assertEqual(doc["labels"]["comfyui.version"], "0.3.18")
        self.assertEqual(doc["pipeline"]["model"], "sd15.safetensors")
        self.assertEqual(doc["pipeline"]["parameters"]["seed"], "1")
        self.assertEqual(doc["pipeline"]["parameters"]["loras"], "tiny.safetensors")
        types = [a["type"] for a in doc["attachments"]]
        self.assertIn("comfyui_prompt", types)
        self.assertEqual(doc["monitoring_errors"], [])
        rss = [m for m in nodes["5"]["metrics"] if m["name"] == "process.rss_bytes"][0]
        self.assertEqual(rss["peak_source"], "exact")

    def test_prompts_with_a_client_id(self):
        fake, _, _ = self.load()
        extra = {"client_id": "abc", "extra_pnginfo": {"workflow": {"nodes": [
            {"id": 9, "title": "Invert it"}]}}}
        prompt = workflow(fake)
        finished = self.plugin.recorder.on_finished
        last_sent = []

        def on_finished(doc, summary):  # after ComfyUI's own message, off its thread
            prompt_id = summary["prompt_id"]
            last_sent.append((threading.get_ident(), any(
                e == "execution_success" and d.get("prompt_id") == prompt_id
                for e, d, *_ in fake.server.sent)))
            finished(doc, summary)
        self.plugin.recorder.on_finished = on_finished
        with self.assertLogs("genscope.comfyui", level="INFO") as logs:
            worker = fake_comfy.prompt_worker(fake, [("p1", prompt, extra),
                                                     ("p2", prompt, extra),
                                                     ("p3", workflow(fake, seed=2), extra)])
            self.plugin.flush()
        first, second, third = self.docs("p1", "p2", "p3")
        # one node ends and the next begins at the same message: nothing between them is lost
        # to genscope's own work (probes, the GIL) at the switch
        ordered = sorted(steps_by_node(first).values(), key=lambda s: s["start_offset_ns"])
        for before, after in zip(ordered, ordered[1:]):
            self.assertEqual(before["start_offset_ns"] + before["duration_ns"],
                             after["start_offset_ns"], (before["name"], after["name"]))
        # the run ends at ComfyUI's execution_success, like its last node, not when the
        # writer thread finishes it
        self.assertEqual(ordered[-1]["start_offset_ns"] + ordered[-1]["duration_ns"],
                         first["duration_ns"])
        self.assertEqual(first["labels"]["comfyui.client_id"], "abc")
        self.check_first_prompt(first, client=True, title9="Invert it")
        self.assertEqual([sent for _, sent in last_sent], [True] * 3)
        self.assertNotIn(worker, [thread for thread, _ in last_sent])
        self.assertIn("comfyui_workflow", [a["type"] for a in first["attachments"]])
        # unchanged graph: everything cached, skipped, nothing executed
        cached = steps_by_node(second)
        self.assertEqual({s["status"] for s in cached.values()}, {"skipped"})
        self.assertEqual(cached["5"]["error"]["message"], "cached")
        self.assertEqual(second["labels"]["comfyui.nodes_cached"], "9")
        self.assertEqual(second["labels"]["comfyui.nodes_executed"], "0")
        # every ComfyUI message went through on the worker thread, never elsewhere (genscope's
        # own genscope.run is sent from its writer thread: test_graph.py)
        self.assertTrue(all(t == worker for event, *_, t in fake.server.sent
                            if event != "genscope.run"))
        self.assertEqual(len([l for l in logs.output if "genscope: prompt p" in l]), 3)
        self.assertRegex(logs.output[0], r"prompt p1 success in \d+\.\d\d s, 9 nodes run, "
                                         r"0 cached, peak RSS \d+\.\d\d GiB -> .*p1\.json")
        # a changed seed: the sampler and what follows it run again, the rest is cached
        status = {n: s["status"] for n, s in steps_by_node(third).items()}
        self.assertEqual(status, {"1": "skipped", "8": "skipped", "2": "skipped", "3": "skipped",
                                  "4": "skipped", "5": "ok", "6": "ok", "7": "ok", "9": "ok"})

    def test_prompts_without_a_client_id(self):
        fake, _, _ = self.load()
        fake_comfy.prompt_worker(fake, [("q1", workflow(fake), {}),
                                        ("q2", workflow(fake), {})])
        # ComfyUI itself sent only progress to its clients
        self.assertEqual({e for e, *_ in fake.server.sent}, {"progress"})
        first, second = self.docs("q1", "q2")
        self.check_first_prompt(first, client=False)
        self.assertNotIn("comfyui.client_id", first["labels"])
        self.assertEqual({s["status"] for s in steps_by_node(second).values()}, {"skipped"})

    def test_failing_node(self):
        fake, _, _ = self.load()
        fake_comfy.prompt_worker(fake, [("f1", workflow(fake, fail_at="6"), {"client_id": "c"})])
        doc, = self.docs("f1")
        nodes = steps_by_node(doc)
        self.assertEqual(nodes["6"]["status"], "failed")
        self.assertEqual(nodes["6"]["error"], {"type": "builtins.ValueError",
                                               "message": "node exploded"})
        self.assertEqual([n for n, s in nodes.items() if s["status"] == "failed"], ["6"])
        self.assertNotIn("7", nodes)
        self.assertEqual(doc["labels"]["comfyui.status"], "error")
        self.assertIn("comfyui_traceback", [a["type"] for a in nodes["6"]["attachments"]])
        self.assertEqual(self.plugin.store.recent[-1]["failed_node"], "6")

    def test_out_of_memory_records_the_allocator_state(self):
        fake, _, _ = self.load()
        states = []
        self.plugin.recorder.oom_state = lambda: states.append(1) or {"allocated_bytes": 123}

        class OutOfMemoryError(RuntimeError):
            pass
        OutOfMemoryError.__module__ = "torch.cuda"
        OutOfMemoryError.__qualname__ = "OutOfMemoryError"
        fake_comfy.prompt_worker(fake, [("o1", workflow(fake, fail_at="5",
                                                        exception=OutOfMemoryError("CUDA out of "
                                                                                   "memory")),
                                         {"client_id": "c"})])
        doc, = self.docs("o1")
        step = steps_by_node(doc)["5"]
        self.assertEqual(step["error"]["type"], "torch.cuda.OutOfMemoryError")
        state = [a for a in step["attachments"] if a["type"] == "allocator_state"]
        self.assertEqual(state[0]["data"], {"allocated_bytes": 123})

    def test_interrupted(self):
        fake, _, _ = self.load()
        fake_comfy.prompt_worker(fake, [("i1", workflow(fake, interrupt_at="5"), {})])
        doc, = self.docs("i1")
        step = steps_by_node(doc)["5"]
        self.assertEqual(step["status"], "failed")
        self.assertEqual(step["labels"]["comfyui.interrupted"], "true")
        self.assertEqual(doc["labels"]["comfyui.status"], "interrupted")

    def test_changed_signature_is_a_monitoring_error_not_a_comfyui_error(self):
        def load_models_gpu(model_list, memory_required=0):  # renamed parameter
            return "loaded"
        fake, _, logs = self.load(load_models_gpu=load_models_gpu)
        self.assertIn("1 hook(s) not installed", logs[-1])
        self.assertIs(fake.mm.load_models_gpu, load_models_gpu)  # left alone
        fake_comfy.prompt_worker(fake, [("s1", workflow(fake), {"client_id": "c"})])
        doc, = self.docs("s1")
        self.assertEqual(doc["labels"]["comfyui.status"], "success")
        errors = [e["message"] for e in doc["monitoring_errors"]]
        self.assertEqual(len(errors), 1)
        self.assertIn("load_models_gpu has parameters ['model_list', 'memory_required']", errors[0])

    def test_hook_failure_inside_a_wrapper_leaves_comfyui_alone(self):
        fake, _, _ = self.load()

        class Broken(Patcher):
            def model_size(self):
                raise RuntimeError("model_size changed")
        result = []
        prompt = workflow(fake)
        prompt["2"]["run"] = lambda server: result.append(
            fake.mm.load_models_gpu([Broken(SD1ClipModel(), 1)]))
        fake_comfy.prompt_worker(fake, [("h1", prompt, {"client_id": "c"})])
        self.assertEqual(result, ["loaded"])
        doc, = self.docs("h1")
        self.assertEqual(doc["labels"]["comfyui.status"], "success")
        errors = [e["message"] for s in doc["steps"] for e in
                  s.get("monitoring_errors", [])] + [e["message"] for e in doc["monitoring_errors"]]
        self.assertTrue(any("model_size changed" in e for e in errors), errors)

    def test_model_exception_passes_through_unchanged(self):
        boom = KeyError("weights")

        def load_models_gpu(models, memory_required=0):
            raise boom
        fake, _, _ = self.load(load_models_gpu=load_models_gpu)
        seen = []

        def encode(server):
            try:
                fake.mm.load_models_gpu([Patcher(SD1ClipModel(), 1)])
            except KeyError as e:
                seen.append(e)
        prompt = workflow(fake)
        prompt["2"]["run"] = encode
        fake_comfy.prompt_worker(fake, [("x1", prompt, {"client_id": "c"})])
        self.assertEqual(seen, [boom])
        doc, = self.docs("x1")
        load = [s for s in doc["steps"] if s["name"] == "load_models_gpu"][0]
        self.assertEqual(load["status"], "failed")
        self.assertEqual(load["error"]["type"], "builtins.KeyError")

    def test_message_from_another_thread_is_ignored(self):
        fake, _, _ = self.load()
        recorder = self.plugin.recorder
        prompt = workflow(fake)

        def sampler(server):
            t = threading.Thread(target=lambda: server.send_sync(
                "executing", {"node": "6", "prompt_id": "t1"}, None))
            t.start()
            t.join()
        prompt["5"]["run"] = sampler
        fake_comfy.prompt_worker(fake, [("t1", prompt, {"client_id": "c"})])
        doc, = self.docs("t1")
        self.assertEqual(len(steps_by_node(doc)), 9)
        self.assertTrue(any("another thread" in e["message"] for e in doc["monitoring_errors"]))
        self.assertIsNone(recorder.run)

    def test_settings_from_the_environment(self):
        runs = os.path.join(self.tmp.name, "elsewhere")
        os.environ["GENSCOPE_COMFYUI_RUNS_DIR"] = runs
        try:
            fake, _, logs = self.load()
        finally:
            del os.environ["GENSCOPE_COMFYUI_RUNS_DIR"]
        self.assertIn(runs, logs[-1])
        fake_comfy.prompt_worker(fake, [("e1", workflow(fake), {})])
        self.plugin.flush()
        self.assertTrue(os.path.isfile(os.path.join(runs, "e1.json")))

    def test_settings_file(self):
        folder = os.path.join(self.tmp.name, "genscope")
        os.makedirs(folder)
        runs = os.path.join(self.tmp.name, "from-settings")
        with open(os.path.join(folder, "settings.json"), "w") as f:
            f.write('{"runs_dir": "%s", "sample_interval_ms": 50}' % runs)
        fake, _, logs = self.load()
        self.assertIn(runs, logs[-1])
        fake_comfy.prompt_worker(fake, [("s1", workflow(fake), {})])
        self.plugin.flush()
        doc = genscope.read_run(os.path.join(runs, "s1.json"))
        self.assertEqual(doc["series"]["interval_ns"], 50_000_000)
        with open(os.path.join(folder, "settings.json"), "w") as f:
            f.write("{broken")
        fake_comfy.remove_modules()
        fake, _, logs = self.load()  # a broken file: logged, defaults used
        self.assertTrue(any("ignoring settings" in line for line in logs), logs)
        self.assertIn(os.path.join(folder, "runs"), logs[-1])


    # -- today's ComfyUI: node events ------------------------------------------------------

    def modern_load(self):
        """The fake ComfyUI with 0.3.64's progress registry and executing context, an async
        node class and a lazy one in nodes.NODE_CLASS_MAPPINGS."""
        fake, _, logs = self.load(modern=True)
        self.assertIn("hooks: node events, executing context, messages", logs[-1])
        nodes = types.ModuleType("nodes")

        class ApiNode:
            FUNCTION = "run"

            async def run(self):
                pass

        class LazySwitch:
            FUNCTION = "run"

            def run(self):
                pass
        nodes.NODE_CLASS_MAPPINGS = {"ApiNode": ApiNode, "LazySwitch": LazySwitch}
        sys.modules["nodes"] = nodes
        return fake

    MODERN_PROMPT = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "m.safetensors"}},
        "2": {"class_type": "ApiNode", "inputs": {}, "_meta": {"title": "Remote"}},
        "3": {"class_type": "KSampler", "inputs": {"seed": 7, "steps": 2}},
        "4": {"class_type": "LazySwitch", "inputs": {}},
        "5": {"class_type": "GroupNode", "inputs": {}},
        "6": {"class_type": "SaveImage", "inputs": {}},
        "7": {"class_type": "ImageInvert", "inputs": {}},
    }

    def modern_schedule(self, fake):
        sleep = lambda s: ("call", lambda: time.sleep(s))  # noqa: E731
        return [
            ("start", "2"), sleep(0.01),  # the async node goes pending
            ("start", "1"), sleep(0.02), ("finish", "1"),
            ("start", "3"), ("context", "3"), sleep(0.01), ("progress", "3", 1, 2), sleep(0.01),
            ("progress", "3", 2, 2), ("finish", "3"),
            sleep(0.01), ("finish", "2"),  # its task done, ComfyUI resumes it
            ("start", "4"), sleep(0.005),  # lazy: asks for input 7 first
            ("start", "7"), sleep(0.02), ("finish", "7"),
            ("start", "4"), ("finish", "4"),  # re-entered
            ("start", "5"), ("expand", "5.0", {"class_type": "VAEDecode", "inputs": {}}, "5"),
            ("start", "5.0"), sleep(0.01), ("finish", "5.0"), ("finish", "5"),
            ("start", "6"), ("blocked", "6", "no image"), ("finish", "6"),
            ("success",)]

    def check_modern(self, doc):
        self.assertEqual(doc["monitoring_errors"], [])
        self.assertEqual(doc["labels"]["comfyui.node_timing"], "node_events")
        self.assertEqual(doc["labels"]["comfyui.status"], "success")
        self.assertEqual(doc["labels"]["comfyui.nodes_executed"], "8")  # 1-7 and 5.0, once each
        self.assertEqual(doc["labels"]["comfyui.nodes_blocked"], "1")
        steps = [s for s in doc["steps"] if "comfyui.node_id" in s["labels"]]
        by = {}
        for s in steps:
            by.setdefault(s["labels"]["comfyui.node_id"], []).append(s)
        self.assertEqual(sorted(by), ["1", "2", "3", "4", "5", "5.0", "6", "7"])
        self.assertEqual({n: len(v) for n, v in by.items() if len(v) > 1}, {"4": 2})
        # the async node: its own start to its own finish, on a lane, nothing nested in it
        api, = by["2"]
        self.assertEqual(api["labels"]["comfyui.async"], "true")
        self.assertEqual(api["name"], "2 Remote")
        self.assertGreaterEqual(api["duration_ns"], 60e6)
        self.assertNotEqual(api["thread"], by["1"][0]["thread"])
        self.assertEqual([s["parent_id"] for n in ("1", "3", "4", "7") for s in by[n]],
                         [-1] * 5)
        self.assertGreaterEqual(by["1"][0]["duration_ns"], 20e6)
        self.assertLess(by["1"][0]["duration_ns"], api["duration_ns"])
        self.assertEqual(by["3"][0]["iterations"]["count"], 2)
        # lazy: the first part ends when its input starts; the re-entry is not counted again
        first, again = by["4"]
        self.assertEqual(first["labels"]["comfyui.waited_for_inputs"], "true")
        self.assertEqual(again["labels"]["comfyui.reentered"], "true")
        # expanded: the inner node has its class and sits inside the node it came from
        inner, = by["5.0"]
        self.assertEqual((inner["kind"], inner["labels"]["comfyui.class_type"]),
                         ("vae_decode", "VAEDecode"))
        self.assertEqual(inner["parent_id"], by["5"][0]["id"])
        self.assertEqual(inner["labels"]["comfyui.parent_node"], "5")
        self.assertEqual(by["6"][0]["status"], "skipped")
        self.assertIn("no image", by["6"][0]["error"]["message"])

    def test_node_events_with_and_without_a_client_id(self):
        """Today's ComfyUI: nodes timed by its per-prompt progress registry, for prompts with
        and without a client id alike; async, lazily re-entered, expanded and blocked nodes."""
        fake = self.modern_load()
        for prompt_id, extra in (("m1", {"client_id": "c"}), ("m2", {})):
            fake_comfy.modern_prompt(fake, prompt_id, self.MODERN_PROMPT, extra,
                                     self.modern_schedule(fake))
            doc, = self.docs(prompt_id)
            self.check_modern(doc)

    def test_node_events_failure_ends_a_pending_async_node(self):
        fake = self.modern_load()
        fake_comfy.modern_prompt(fake, "e1", self.MODERN_PROMPT, {}, [
            ("start", "2"), ("start", "1"),
            ("error", {"node_id": "1", "node_type": "CheckpointLoaderSimple",
                       "exception_type": "builtins.ValueError", "exception_message": "bad",
                       "traceback": []})])
        doc, = self.docs("e1")
        nodes = steps_by_node(doc)
        self.assertEqual(nodes["1"]["status"], "failed")
        self.assertEqual(nodes["2"]["status"], "skipped")
        self.assertEqual(nodes["2"]["labels"]["comfyui.unfinished"], "true")
        self.assertEqual(doc["labels"]["comfyui.status"], "error")

    def test_node_events_registry_of_another_prompt_falls_back_to_messages(self):
        fake = self.modern_load()
        fake.progress.reset_progress_state = lambda prompt_id, dynprompt: None  # a changed ComfyUI
        fake_comfy.modern_prompt(fake, "x1", self.MODERN_PROMPT, {"client_id": "c"},
                                 [("start", "1"), ("finish", "1"), ("success",)])
        doc, = self.docs("x1")
        self.assertEqual(doc["labels"]["comfyui.node_timing"], "messages")
        self.assertEqual(steps_by_node(doc)["1"]["status"], "ok")
        self.assertIn("node events not available", doc["monitoring_errors"][0]["message"])

    def test_node_event_handler_never_raises_into_comfyui(self):
        fake = self.modern_load()
        fake_comfy.modern_prompt(fake, "h1", self.MODERN_PROMPT, {}, [
            ("call", lambda: [h.start_handler() for h in
                              fake.progress.get_progress_state().handlers.values()]),
            ("call", lambda: [h.update_handler(object(), None) for h in
                              fake.progress.get_progress_state().handlers.values()]),
            ("start", "1"), ("finish", "1"), ("success",)])
        doc, = self.docs("h1")
        self.assertEqual(doc["labels"]["comfyui.status"], "success")
        self.assertEqual(steps_by_node(doc)["1"]["status"], "ok")

    def test_model_loads_by_what_happened(self):
        """A load is a step only when something was loaded; unloads are complete or partial by
        the bytes left loaded; model steps name the node ComfyUI's executing context gives."""
        fake = self.modern_load()
        mm = fake.mm
        unet = Patcher(BaseModel(), 5000)
        calls = [
            ("start", "3"), ("context", "3"),
            ("call", lambda: mm.load_models_gpu([unet])),
            ("call", lambda: mm.load_models_gpu([unet])),  # already loaded: no step
            ("call", lambda: mm.current_loaded_models[0].model_unload(2000)),
            ("call", lambda: mm.current_loaded_models[0].model_unload()),
            ("finish", "3"), ("success",)]
        fake_comfy.modern_prompt(fake, "l1", self.MODERN_PROMPT, {}, calls)
        doc, = self.docs("l1")
        model_steps = [s for s in doc["steps"] if s["source"] == "comfy.model_management"]
        self.assertEqual([s["name"] for s in model_steps],
                         ["load_models_gpu", "model_load", "model_unload", "model_unload"])
        self.assertEqual({s["labels"]["comfyui.for_node"] for s in model_steps}, {"3"})
        self.assertEqual(model_steps[0]["counters"]["loaded_bytes"], 5000)
        self.assertEqual(model_steps[1]["labels"]["comfyui.model_action"], "load")
        self.assertEqual([(s["labels"]["comfyui.model_action"], s["counters"]["freed_bytes"])
                          for s in model_steps[2:]], [("partial_offload", 2000), ("unload", 3000)])
        self.assertNotIn("comfyui.dynamic_vram", doc["labels"])

    def test_dynamic_vram_simulated(self):
        """Dynamic VRAM (comfy-aimdo) as the package detects it: comfy.memory_management's
        aimdo_enabled flag and comfy.model_patcher.ModelPatcherDynamic. Simulated: not run on a
        real GPU (none here); the surface is what ComfyUI's sources are described to have."""
        fake = self.modern_load()
        memory = types.ModuleType("comfy.memory_management")
        memory.aimdo_enabled = True
        patchers = types.ModuleType("comfy.model_patcher")

        class ModelPatcherDynamic(Patcher):
            def load(self):  # only staged: a part stays resident, the rest loads on demand
                self.resident = self.size // 10
        patchers.ModelPatcherDynamic = ModelPatcherDynamic
        sys.modules.update({"comfy.memory_management": memory, "comfy.model_patcher": patchers})
        unet = ModelPatcherDynamic(BaseModel(), 5000)
        fake_comfy.modern_prompt(fake, "d1", self.MODERN_PROMPT, {}, [
            ("start", "3"), ("call", lambda: fake.mm.load_models_gpu([unet])),
            ("call", lambda: fake.mm.load_models_gpu([unet])),  # staged again: still a step
            ("finish", "3"), ("success",)])
        doc, = self.docs("d1")
        self.assertEqual(doc["labels"]["comfyui.dynamic_vram"], "true")
        self.assertEqual(doc["labels"]["comfyui.allocator_excludes_managed_weights"], "true")
        self.assertTrue(any("comfy-aimdo" in n for n in doc.get("notes", [])), doc.get("notes"))
        loads = [s for s in doc["steps"] if s["name"] == "load_models_gpu"]
        self.assertEqual(len(loads), 2)
        self.assertEqual(loads[0]["labels"]["comfyui.dynamic_vram"], "true")
        self.assertEqual((loads[0]["counters"]["staged_bytes"],
                          loads[0]["counters"]["resident_bytes"]), (5000, 500))
        inner = [s for s in doc["steps"] if s["name"] == "model_load"]
        self.assertEqual(inner[0]["labels"]["comfyui.model_action"], "stage")

    def test_messages_reentered_and_expanded_nodes(self):
        """v0.3.18's message stream: a second `executing` for a node (lazy inputs) is a
        continuation step, not counted again; an expanded node gets its class from ComfyUI's
        DynamicPrompt (noted by the execute wrapper)."""
        _, package, _ = self.load()
        recorder_mod = sys.modules[package.__name__ + ".recorder"]
        prompt = {"1": {"class_type": "LazySwitch", "inputs": {}},
                  "2": {"class_type": "ImageInvert", "inputs": {}},
                  "3": {"class_type": "GroupNode", "inputs": {}}}
        finished = []
        rec = recorder_mod.PromptRecorder(genscope.Monitor(nvml=False), lambda pid: (prompt, {}),
                                          lambda doc, summary: finished.append(doc))
        dyn = fake_comfy.DynPrompt(prompt)
        dyn.add_ephemeral_node("3.0", {"class_type": "KSampler", "inputs": {}}, "3", "3")
        rec.on_message("execution_start", {"prompt_id": "p"})
        rec.dynprompt = dyn
        for node in ("1", "2", "1", "3", "3.0"):
            rec.on_message("executing", {"node": node, "prompt_id": "p"})
        rec.on_message("execution_success", {"prompt_id": "p"})
        rec.after_message()
        doc, = finished
        self.assertEqual(doc["labels"]["comfyui.nodes_executed"], "4")
        self.assertEqual(doc["labels"]["comfyui.node_timing"], "messages")
        names = [(s["name"], s["labels"].get("comfyui.reentered")) for s in doc["steps"]]
        self.assertEqual(names, [("1 LazySwitch", None), ("2 ImageInvert", None),
                                 ("1 LazySwitch", "true"), ("3 GroupNode", None),
                                 ("3.0 KSampler", None)])
        self.assertEqual(doc["steps"][-1]["kind"], "sampling")
        self.assertEqual(doc["steps"][-1]["labels"]["comfyui.display_node"], "3")

    def test_an_older_genscope_module_without_start_ns(self):
        """A genscope module whose run.step has no start_ns (older than the package): steps
        are opened and ended when the recorder gets to them, with no error."""
        _, package, _ = self.load()
        recorder_mod = sys.modules[package.__name__ + ".recorder"]

        class OldRun:
            def __init__(self, run):
                self.run = run

            def step(self, kind, name, source=None):
                return OldStep(self.run.step(kind, name, source=source))

            def __getattr__(self, name):
                return getattr(self.run, name)

        class OldStep:
            def __init__(self, step):
                self.inner = step

            def end(self):
                self.inner.end()

            def __getattr__(self, name):
                return getattr(self.inner, name)

        class OldMonitor:
            def __init__(self):
                self.monitor = genscope.Monitor(nvml=False)

            def start_run(self, **kwargs):
                return OldRun(self.monitor.start_run(**kwargs))
        prompt = {"1": {"class_type": "EmptyImage", "inputs": {}},
                  "2": {"class_type": "SaveImage", "inputs": {}}}
        finished = []
        rec = recorder_mod.PromptRecorder(OldMonitor(), lambda pid: (prompt, {}),
                                          lambda doc, summary: finished.append(doc))
        for event, data in (("execution_start", {"prompt_id": "p"}),
                            ("executing", {"node": "1", "prompt_id": "p"}),
                            ("executing", {"node": "2", "prompt_id": "p"}),
                            ("execution_success", {"prompt_id": "p"})):
            rec.on_message(event, data)
            rec.after_message()
        doc, = finished
        self.assertFalse(rec.timestamps)
        self.assertEqual([(s["name"], s["status"]) for s in doc["steps"]],
                         [("1 EmptyImage", "ok"), ("2 SaveImage", "ok")])
        self.assertEqual(doc["monitoring_errors"], [])

    def test_gpu_figures_in_the_summary(self):
        _, package, _ = self.load()
        store = sys.modules[package.__name__ + ".store"]
        doc = {"labels": {"comfyui.allocator_excludes_managed_weights": "true"}, "steps": [
            {"metrics": [{"name": "gpu0.process_used_bytes", "peak": 6 * 2**30},
                         {"name": "gpu0.used_bytes", "peak": 9 * 2**30},
                         {"name": "alloc.cuda:0.allocated_bytes", "peak": 2**30},
                         {"name": "alloc.cuda:0.reserved_bytes", "peak": 3 * 2**30}]}],
               "duration_ns": 10**9}
        summary = {"prompt_id": "p", "status": "success", "nodes_executed": 1, "nodes_cached": 0}
        entry = store.summarize(doc, summary, "x.json")
        self.assertEqual(entry["peak_gpu_process_bytes"], 6 * 2**30)
        self.assertTrue(entry["cuda_allocated_excludes_managed_weights"])
        self.assertIn("peak GPU (process, NVML) 6.00 GiB, peak CUDA allocated 1.00 GiB (without "
                      "the weights dynamic VRAM manages)", store.log_line(doc, summary, "x.json"))

    def test_subgraph_titles(self):
        _, package, _ = self.load()
        recorder_mod = sys.modules[package.__name__ + ".recorder"]
        extra = {"extra_pnginfo": {"workflow": {
            "nodes": [{"id": 4, "title": "Top"}, {"id": 9, "type": "sg-1"}],
            "definitions": {"subgraphs": [
                {"id": "sg-1", "nodes": [{"id": 2, "title": "Inner"},
                                         {"id": 3, "type": "sg-2"}]},
                {"id": "sg-2", "nodes": [{"id": 1, "title": "Deep"}]}]}}}}
        self.assertEqual(recorder_mod._workflow_titles(extra),
                         {"4": "Top", "9:2": "Inner", "9:3:1": "Deep"})

    # -- routes ---------------------------------------------------------------------------

    def test_header_from_modern_workflows(self):
        """The run header from today's workflows (API format, as ComfyUI's own Flux and Wan
        templates lay them out): the model from UNETLoader, seed/steps/sampler from
        SamplerCustomAdvanced's parts, resolution and frames from the SD3/video latents."""
        _, package, _ = self.load()
        recorder = sys.modules[package.__name__ + ".recorder"]
        flux = {
            "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a fox", "clip": ["11", 0]}},
            "8": {"class_type": "VAEDecode", "inputs": {"samples": ["13", 0], "vae": ["10", 0]}},
            "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0]}},
            "10": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
            "11": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "t5xxl_fp16.safetensors",
                                                               "clip_name2": "clip_l.safetensors",
                                                               "type": "flux"}},
            "12": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-dev.safetensors",
                                                           "weight_dtype": "default"}},
            "13": {"class_type": "SamplerCustomAdvanced",
                   "inputs": {"noise": ["25", 0], "guider": ["22", 0], "sampler": ["16", 0],
                              "sigmas": ["17", 0], "latent_image": ["27", 0]}},
            "16": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
            "17": {"class_type": "BasicScheduler", "inputs": {"scheduler": "simple", "steps": 20,
                                                               "denoise": 1.0, "model": ["12", 0]}},
            "22": {"class_type": "BasicGuider", "inputs": {"model": ["12", 0],
                                                            "conditioning": ["26", 0]}},
            "25": {"class_type": "RandomNoise", "inputs": {"noise_seed": 219670278747233}},
            "26": {"class_type": "FluxGuidance", "inputs": {"guidance": 3.5,
                                                             "conditioning": ["6", 0]}},
            "27": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 1024, "height": 768,
                                                                   "batch_size": 1}},
        }
        model, params = recorder._pipeline_parameters(flux)
        self.assertEqual(model, "flux1-dev.safetensors")
        self.assertEqual(params, {"seed": "219670278747233", "steps": "20", "scheduler": "simple",
                                  "denoise": "1.0", "sampler": "euler", "guidance": "3.5",
                                  "batch": "1", "resolution": "1024x768"})
        wan = {
            "37": {"class_type": "UNETLoader", "inputs": {"unet_name": "wan2.1_t2v_1.3B_fp16.safetensors",
                                                           "weight_dtype": "default"}},
            "38": {"class_type": "CLIPLoader", "inputs": {"clip_name": "umt5_xxl_fp8.safetensors",
                                                           "type": "wan"}},
            "40": {"class_type": "EmptyHunyuanLatentVideo",
                   "inputs": {"width": 832, "height": 480, "length": 33, "batch_size": 1}},
            "3": {"class_type": "KSampler", "inputs": {"seed": 82628696717253, "steps": 30,
                                                        "cfg": 6, "sampler_name": "uni_pc",
                                                        "scheduler": "simple", "denoise": 1,
                                                        "model": ["48", 0]}},
            "48": {"class_type": "ModelSamplingSD3", "inputs": {"shift": 8, "model": ["37", 0]}},
        }
        model, params = recorder._pipeline_parameters(wan)
        self.assertEqual(model, "wan2.1_t2v_1.3B_fp16.safetensors")
        self.assertEqual(params["resolution"], "832x480")
        self.assertEqual(params["frames"], "33")
        self.assertEqual((params["seed"], params["steps"], params["cfg"], params["sampler"]),
                         ("82628696717253", "30", "6", "uni_pc"))

    def test_a_blocked_output_is_not_fatal(self):
        """ComfyUI reports an output blocked by an ExecutionBlocker with a message as an
        execution_error (exception_type ExecutionBlocked) and goes on with the prompt: the
        node is skipped with the message, the later nodes are recorded, the run succeeds."""
        _, package, _ = self.load()
        recorder_mod = sys.modules[package.__name__ + ".recorder"]
        prompt = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {}},
                  "2": {"class_type": "SaveImage", "inputs": {}},
                  "3": {"class_type": "PreviewImage", "inputs": {}}}
        finished = []
        rec = recorder_mod.PromptRecorder(genscope.Monitor(nvml=False), lambda pid: (prompt, {}),
                                          lambda doc, summary: finished.append((doc, summary)))
        for event, data in (
                ("execution_start", {"prompt_id": "p"}),
                ("executing", {"node": "1", "prompt_id": "p"}),
                ("executing", {"node": "2", "prompt_id": "p"}),
                ("execution_error", {"prompt_id": "p", "node_id": "2", "node_type": "SaveImage",
                                     "exception_type": "ExecutionBlocked",
                                     "exception_message": "Execution Blocked: no image",
                                     "traceback": []}),
                ("executing", {"node": "3", "prompt_id": "p"}),
                ("execution_success", {"prompt_id": "p"})):
            rec.on_message(event, data)
            rec.after_message()
        self.assertEqual(len(finished), 1)
        doc, summary = finished[0]
        nodes = steps_by_node(doc)
        self.assertEqual(sorted(nodes), ["1", "2", "3"])
        self.assertEqual(nodes["2"]["status"], "skipped")
        self.assertIn("Execution Blocked: no image", nodes["2"]["error"]["message"])
        self.assertEqual(nodes["3"]["status"], "ok")
        self.assertEqual(doc["labels"]["comfyui.status"], "success")
        self.assertEqual(doc["labels"]["comfyui.nodes_blocked"], "1")
        self.assertEqual(summary["nodes_blocked"], 1)

    def test_routes(self):
        try:
            from aiohttp import web
            from aiohttp.test_utils import TestClient, TestServer
        except ImportError:
            self.skipTest("aiohttp is not installed (ComfyUI's server needs it)")
        fake, _, _ = self.load()
        fake_comfy.prompt_worker(fake, [("r1", workflow(fake), {"client_id": "c"}),
                                        ("r2", workflow(fake, fail_at="6", seed=5), {"client_id": "c"})])
        self.plugin.flush()

        async def scenario():
            app = web.Application()
            app.add_routes(fake.server.routes)
            async with TestClient(TestServer(app)) as client:
                runs = await (await client.get("/genscope/runs")).json()
                doc = await (await client.get("/genscope/runs/r1")).json()
                html = await client.get("/genscope/runs/r1/report.html")
                missing = await client.get("/genscope/runs/nope")
                bad = await client.get("/genscope/runs/..%2Fx")
                metrics = await client.get("/genscope/metrics")
                return (runs, doc, html.status, html.content_type, await html.text(),
                        missing.status, bad.status, metrics.headers["Content-Type"],
                        await metrics.text())

        runs, doc, status, ctype, html, missing, bad, mtype, metrics = asyncio.run(scenario())
        self.assertEqual([r["prompt_id"] for r in runs], ["r2", "r1"])
        self.assertEqual(runs[0]["status"], "error")
        self.assertEqual(runs[0]["failed_node"], "6")
        self.assertEqual(runs[1]["nodes_executed"], 9)
        self.assertGreater(runs[1]["peak_rss_bytes"], 0)
        self.assertEqual(doc["labels"]["comfyui.prompt_id"], "r1")
        self.assertEqual((status, ctype), (200, "text/html"))
        self.assertIn("5 KSampler", html)
        self.assertEqual((missing, bad), (404, 404))
        self.assertEqual(mtype, "text/plain; version=0.0.4; charset=utf-8")
        self.assertIn('genscope_comfyui_prompts_total{status="success"} 1', metrics)
        self.assertIn('genscope_comfyui_prompts_total{status="error"} 1', metrics)
        self.assertIn('genscope_comfyui_nodes_total{class_type="VAEDecodeTiled",status="failed"} 1',
                      metrics)
        self.assertIn('genscope_steps_total{kind="vae_decode",status="failed"} 1', metrics)


class LoadingTest(unittest.TestCase):
    """ComfyUI must start whatever happens: one line, valid NODE_CLASS_MAPPINGS."""

    def load_in_child(self, code_before, pythonpath):
        here = os.path.dirname(os.path.abspath(__file__))
        code = (code_before + "\nimport logging, sys\nlogging.basicConfig(level=logging.INFO, "
                "format='%(name)s %(message)s')\n" + f"sys.path.insert(0, {here!r})\n"
                "import fake_comfy\nm = fake_comfy.load_package()\n"
                "print('MAPPINGS', m.NODE_CLASS_MAPPINGS, m.PLUGIN)\n")
        env = dict(os.environ, PYTHONPATH=pythonpath)
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60)

    def test_without_the_genscope_module(self):
        out = self.load_in_child("import sys; sys.modules['genscope'] = None", "")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("MAPPINGS {} None", out.stdout)
        lines = [l for l in out.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertIn("genscope: not monitoring: the genscope Python module is not importable",
                      lines[0])

    def test_outside_comfyui(self):
        out = self.load_in_child("", os.environ.get("PYTHONPATH", ""))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("MAPPINGS {} None", out.stdout)
        lines = [l for l in out.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, out.stderr)
        self.assertIn("this does not look like ComfyUI", lines[0])

    def test_comfyui_without_a_server_instance(self):
        out = self.load_in_child(
            f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            "import fake_comfy as f; f.make_modules(); f.FakeServer.instance = None",
            os.environ.get("PYTHONPATH", ""))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("PromptServer.instance is not set", out.stderr)


class KindsTest(unittest.TestCase):
    def test_kinds(self):
        sys.path.insert(0, os.path.dirname(fake_comfy.PACKAGE_DIR))
        from importlib import util
        spec = util.spec_from_file_location("gs_kinds",
                                            os.path.join(fake_comfy.PACKAGE_DIR, "kinds.py"))
        kinds = util.module_from_spec(spec)
        spec.loader.exec_module(kinds)
        cases = {"CheckpointLoaderSimple": "model_loading", "CheckpointLoader": "model_loading",
                 "LoraLoader": "lora_application", "LoraLoaderModelOnly": "lora_application",
                 "CLIPTextEncode": "text_encoding", "CLIPTextEncodeSDXL": "text_encoding",
                 "EmptyLatentImage": "latent_generation", "VAEEncode": "latent_generation",
                 "VAEEncodeTiled": "latent_generation", "KSampler": "sampling",
                 "KSamplerAdvanced": "sampling", "VAEDecode": "vae_decode",
                 "VAEDecodeTiled": "vae_decode", "SaveImage": "save", "PreviewImage": "save",
                 "SaveAnimatedWEBP": "save", "ImageScale": "custom", "": "custom", None: "custom",
                 # Stock nodes of today's image and video workflows (ComfyUI 0.3.64's nodes.py
                 # and comfy_extras: Flux, SD3, Wan 2.1/2.2, Qwen-Image, HunyuanVideo, LTX).
                 "UNETLoader": "model_loading", "CLIPLoader": "model_loading",
                 "DualCLIPLoader": "model_loading", "TripleCLIPLoader": "model_loading",
                 "QuadrupleCLIPLoader": "model_loading", "VAELoader": "model_loading",
                 "CLIPVisionLoader": "model_loading", "ControlNetLoader": "model_loading",
                 "ImageOnlyCheckpointLoader": "model_loading", "ModelPatchLoader": "model_loading",
                 "LoraModelLoader": "lora_application",
                 "CLIPTextEncodeFlux": "text_encoding", "CLIPTextEncodeSD3": "text_encoding",
                 "TextEncodeQwenImageEdit": "text_encoding",
                 "TextEncodeQwenImageEditPlus": "text_encoding",
                 "TextEncodeHunyuanVideo_ImageToVideo": "text_encoding",
                 "EmptySD3LatentImage": "latent_generation",
                 "EmptyHunyuanLatentVideo": "latent_generation",
                 "EmptyLTXVLatentVideo": "latent_generation",
                 "EmptyMochiLatentVideo": "latent_generation",
                 "EmptyCosmosLatentVideo": "latent_generation",
                 "EmptyHunyuanImageLatent": "latent_generation",
                 "StableCascade_EmptyLatentImage": "latent_generation",
                 "WanImageToVideo": "latent_generation",
                 "WanFirstLastFrameToVideo": "latent_generation",
                 "Wan22ImageToVideoLatent": "latent_generation",
                 "WanSoundImageToVideoExtend": "latent_generation",
                 "HunyuanImageToVideo": "latent_generation", "LTXVImgToVideo": "latent_generation",
                 "SamplerCustom": "sampling", "SamplerCustomAdvanced": "sampling",
                 "KSamplerSelect": "custom", "SamplerEulerAncestral": "custom",
                 "BasicScheduler": "custom", "CFGGuider": "custom", "RandomNoise": "custom",
                 "FluxGuidance": "custom", "ModelSamplingSD3": "custom",
                 "VAEDecodeHunyuan3D": "vae_decode", "SaveVideo": "save", "SaveWEBM": "save",
                 "CheckpointSave": "save", "MaskPreview": "save", "PreviewAny": "save",
                 "ModelMergeMochiPreview": "custom", "CreateVideo": "custom",
                 "LoadVideo": "custom", "LoadImage": "custom"}
        for cls, kind in cases.items():
            self.assertEqual(kinds.step_kind(cls), kind, cls)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    unittest.main()
