"""genscope.torch.step_callback and genscope.torch.load_step on real torch modules."""

import os
import threading
import unittest

import torch
import torch.nn as nn

import genscope.torch as gt
from helpers import quiet_monitor, scratch_dir
from tiny_pipeline import TinyPipeline, TinyUNet, TinyVAE


def attachment(step, type_):
    found = [a for a in step["attachments"] if a["type"] == type_]
    assert len(found) == 1, step["attachments"]
    return found[0]["data"]


class StepCallbackTest(unittest.TestCase):
    def test_diffusers_callback_on_step_end(self):
        pipe = TinyPipeline()
        plain = pipe("a", num_inference_steps=5)
        run = quiet_monitor().start_run()
        seen = []

        def check(pipe_, i, t, kwargs):  # what the pipeline gets back is what it passed
            out = callback(pipe_, i, t, kwargs)
            seen.append(out is kwargs)
            return out

        with run.step("sampling", "denoise") as step:
            callback = gt.step_callback(step)
            out = pipe("a", num_inference_steps=5, callback_on_step_end=check)
        doc = run.finish()
        self.assertTrue(torch.equal(out, plain))
        self.assertEqual(seen, [True] * 5)
        s = doc["steps"][0]
        self.assertEqual(s["iterations"]["count"], 5)
        names = [a["name"] for a in s["attachments"]]
        self.assertEqual(names, ["latents (first iteration)", "latents (last iteration)"])

    def test_legacy_and_comfyui_call_forms(self):
        run = quiet_monitor().start_run()
        latents = torch.randn(1, 4, 8, 8)
        with run.step("sampling", "legacy") as step:
            callback = gt.step_callback(step)
            for i in range(3):  # diffusers callback(i, t, latents)
                self.assertIsNone(callback(i, 999 - i, latents))
        with run.step("sampling", "comfy") as step:
            callback = gt.step_callback(step)
            for i in range(4):  # ComfyUI callback(step, x0, x, total_steps)
                self.assertIsNone(callback(i, latents, latents + i, 4))
        doc = run.finish()
        legacy, comfy = doc["steps"]
        self.assertEqual(legacy["iterations"]["count"], 3)
        self.assertEqual(comfy["iterations"]["count"], 4)
        self.assertEqual([a["name"] for a in comfy["attachments"]],
                         ["latents (first iteration)", "latents (last iteration)"])
        last = comfy["attachments"][1]["data"]["stats"]
        self.assertAlmostEqual(last["mean"], float((latents + 3).mean()), places=5)

    def test_a_bad_latent_is_a_monitoring_error(self):
        run = quiet_monitor().start_run()
        with run.step("sampling", "x") as step:
            callback = gt.step_callback(step, family="sd9")  # rejected when analysing
            kwargs = {"latents": torch.zeros(1, 4, 8, 8)}
            self.assertIs(callback(None, 0, 0, kwargs), kwargs)
        doc = run.finish()
        self.assertEqual(doc["steps"][0]["iterations"]["count"], 1)
        self.assertEqual([e["source"] for e in doc["monitoring_errors"]], ["torch.step_callback"])
        self.assertIn("UnknownFamily", doc["monitoring_errors"][0]["message"])


class LoadStepTest(unittest.TestCase):
    def test_counts_the_modules_created_inside(self):
        folder = scratch_dir()
        path = os.path.join(folder, "unet.pt")
        torch.save(TinyUNet(16, 768).state_dict(), path)
        existing = nn.Linear(100, 100)  # created before: not counted
        init_before = nn.Module.__init__
        run = quiet_monitor().start_run()
        with gt.load_step(run, "unet", path=path) as loading:
            unet = TinyUNet(16, 768)
            unet.load_state_dict(torch.load(path))
            extra = nn.Linear(3, 3)  # created inside and alive: counted
        self.assertIs(nn.Module.__init__, init_before)
        doc = run.finish()
        step = doc["steps"][0]
        self.assertEqual(step["kind"], "model_loading")
        self.assertEqual(step["name"], "load unet")
        expected_params = sum(p.numel() for p in unet.parameters()) + 3 * 3 + 3
        tensors = len(list(unet.parameters())) + len(list(unet.buffers())) + 2
        self.assertEqual(step["counters"]["parameters"], expected_params)
        self.assertEqual(step["counters"]["tensors"], tensors)
        self.assertEqual(step["counters"]["bytes"], os.path.getsize(path))
        data = attachment(step, "model_component")
        self.assertEqual(data["file_size_bytes"], os.path.getsize(path))
        self.assertEqual(data["tensor_bytes"], 4 * expected_params)
        self.assertEqual(data["dtypes"], {"float32": tensors})
        self.assertEqual(sorted(data["modules"]), ["Linear", "TinyUNet"])
        self.assertEqual(loading.figures["parameters"], expected_params)
        self.assertEqual(step["labels"]["file"], path)
        del existing, extra

    def test_pickled_module_and_tracked_module(self):
        folder = scratch_dir()
        path = os.path.join(folder, "vae.pt")
        torch.save(TinyVAE(8), path)  # the whole module, unpickled without __init__
        made_before = nn.Linear(4, 4)
        run = quiet_monitor().start_run()
        with gt.load_step(run, "vae") as loading:
            vae = torch.load(path, weights_only=False)  # a pickled module, as users load them
            loading.track(made_before)
        step = run.finish()["steps"][0]
        expected = sum(p.numel() for p in vae.parameters()) + 4 * 4 + 4
        self.assertEqual(step["counters"]["parameters"], expected)
        self.assertEqual(step["counters"]["bytes"], 4 * expected)  # no path: tensor bytes

    def test_failed_load_and_other_threads(self):
        init_before = nn.Module.__init__
        run = quiet_monitor().start_run()
        other = []
        with self.assertRaises(FileNotFoundError):
            with gt.load_step(run, "missing", path="/nonexistent/model.pt"):
                t = threading.Thread(target=lambda: other.append(nn.Linear(50, 50)))
                t.start()
                t.join()
                torch.load("/nonexistent/model.pt")
        self.assertIs(nn.Module.__init__, init_before)
        step = run.finish()["steps"][0]
        self.assertEqual(step["status"], "failed")
        self.assertEqual(step["error"]["type"], "FileNotFoundError")
        self.assertEqual(step["counters"], {})

    def test_nested_steps_restore_in_any_order(self):
        init_before = nn.Module.__init__
        run = quiet_monitor().start_run()
        outer = gt.load_step(run, "outer").__enter__()
        inner = gt.load_step(run, "inner").__enter__()
        nn.Linear(2, 2)
        keep = nn.Linear(2, 2)
        inner.__exit__(None, None, None)
        outer.__exit__(None, None, None)
        self.assertIs(nn.Module.__init__, init_before)
        doc = run.finish()
        self.assertEqual([s["counters"]["parameters"] for s in doc["steps"]], [6, 6])
        del keep

    def test_a_wrapper_added_meanwhile_is_kept(self):
        original = nn.Module.__init__
        run = quiet_monitor().start_run()
        loading = gt.load_step(run, "x").__enter__()
        ours = nn.Module.__init__

        def theirs(self, *args, **kwargs):  # e.g. another tool patching module creation
            ours(self, *args, **kwargs)

        nn.Module.__init__ = theirs
        try:
            loading.__exit__(None, None, None)
            self.assertIs(nn.Module.__init__, theirs)
            nn.Linear(2, 2)  # our wrapper, now inert, still passes the call on
        finally:
            nn.Module.__init__ = original
        run.finish()


if __name__ == "__main__":
    unittest.main()
