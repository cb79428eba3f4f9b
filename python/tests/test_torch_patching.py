"""genscope.torch.observe_patching / lora_step: seed 002's LoRA application report.

ComfyUI cannot be installed here (not packaged for Debian), so the patcher below rebuilds the
part of comfy/model_patcher.py that the report reads: ``model``, ``patches`` (key -> list of
``(strength_patch, patch, strength_model, offset, function)``), ``patches_uuid`` renewed by
``add_patches``, ``clone()`` sharing the model and copying the lists, ``load_device`` /
``offload_device``; patches are LoRAAdapter-like objects (comfy/weight_adapter/lora.py: name,
loaded_keys, weights = (up, down, alpha, mid, dora_scale, reshape)).
"""

import unittest
import uuid

import torch
import torch.nn as nn

import genscope.torch as gt
from helpers import quiet_monitor, scratch_dir


class LoRAAdapter:
    name = "lora"

    def __init__(self, loaded_keys, weights):
        self.loaded_keys = loaded_keys
        self.weights = weights


class ModelPatcher:
    def __init__(self, model, load_device="cpu", offload_device="cpu"):
        self.model = model
        self.patches = {}
        self.patches_uuid = uuid.uuid4()
        self.load_device = load_device
        self.offload_device = offload_device

    def clone(self):
        n = ModelPatcher(self.model, self.load_device, self.offload_device)
        n.patches = {k: v[:] for k, v in self.patches.items()}
        n.patches_uuid = self.patches_uuid
        return n

    def add_patches(self, patches, strength_patch=1.0, strength_model=1.0):
        model_sd = self.model.state_dict()
        added = []
        for key, patch in patches.items():
            if key in model_sd:
                added.append(key)
                self.patches.setdefault(key, []).append(
                    (strength_patch, patch, strength_model, None, None))
        self.patches_uuid = uuid.uuid4()
        return added


class CLIP:  # comfy/sd.py: the text encoder behind a patcher
    def __init__(self, model):
        self.cond_stage_model = model
        self.patcher = ModelPatcher(model)

    def clone(self):
        n = CLIP.__new__(CLIP)
        n.cond_stage_model = self.cond_stage_model
        n.patcher = self.patcher.clone()
        return n


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 8), nn.LayerNorm(8))


def lora_for(model, rank=4, alpha=2.0):
    """A LoRA on both Linear layers (kohya names), as ComfyUI's load_lora maps it."""
    patches = {}
    for idx in ("0", "2"):
        w = model.state_dict()[f"{idx}.weight"]
        module = f"lora_unet_layer_{idx}"
        up, down = torch.randn(w.shape[0], rank), torch.randn(rank, w.shape[1])
        patches[f"{idx}.weight"] = LoRAAdapter(
            {f"{module}.lora_up.weight", f"{module}.lora_down.weight", f"{module}.alpha"},
            (up, down, alpha, None, None, None))
    patches["not.in.model"] = LoRAAdapter(set(), (torch.zeros(1, 1), torch.zeros(1, 1), 1.0,
                                                  None, None, None))
    return patches


class ObservePatchingTest(unittest.TestCase):
    def test_comfyui_lora_loader(self):
        unet = ModelPatcher(net(), load_device="cuda:0", offload_device="cpu")
        clip = CLIP(nn.Linear(8, 8))
        lora_path = scratch_dir() + "/style.safetensors"
        with open(lora_path, "wb") as f:
            f.write(b"\0" * 3000)
        # LoraLoader.load_lora: clone both, add_patches, return the clones.
        unet2, clip2 = unet.clone(), clip.clone()
        keys = unet2.add_patches(lora_for(unet.model), 0.8)
        clip2.patcher.add_patches({"weight": ("diff", (torch.ones(8, 8),))}, 0.5)
        old_tuple = ("lora", (torch.randn(8, 2), torch.randn(2, 8), None, None, None, None))
        clip2.patcher.add_patches({"bias": (torch.ones(8),), "weight": old_tuple}, 0.5)
        run = quiet_monitor().start_run()
        report = gt.observe_patching(run, unet, unet2, clip_before=clip, clip_after=clip2,
                                     lora_path=lora_path)
        doc = run.finish()
        step = doc["steps"][0]
        self.assertEqual((step["kind"], step["name"]), ("lora_application", "observe patching"))
        self.assertEqual(step["attachments"][0]["type"], "lora_application")
        self.assertEqual(step["attachments"][0]["name"], "style.safetensors")
        self.assertEqual(step["attachments"][0]["data"], report)
        self.assertEqual(report["schema"], "genscope.lora_application/1")
        self.assertTrue(report["lora_application_success"])
        self.assertEqual(report["models_returned"], 2)
        self.assertEqual(report["baseline"]["lora_file"]["file_size_bytes"], 3000)
        self.assertEqual(report["baseline"]["unet"]["class"], "ModelPatcher")
        changes = report["unet_changes"]
        self.assertTrue(changes["model_cloned"])
        self.assertFalse(changes["class_changed"])
        self.assertTrue(changes["uuid_changed"])
        self.assertEqual((changes["original_patch_count"], changes["modified_patch_count"],
                          changes["patches_added"]), (0, 2, 2))
        weights = report["unet_weight_changes"]
        self.assertEqual(weights["values_changed"], 0)  # ComfyUI merges at load, not here
        self.assertEqual(weights["total_keys_original"], 6)
        patches = report["unet_lora_patches"]
        self.assertEqual(patches["total_patched_keys"], 2)
        self.assertEqual(sorted(keys), sorted(patches["patch_details"]))
        d = patches["patch_details"]["0.weight"]
        self.assertEqual(d["patch_type"], "lora")
        self.assertEqual((d["rank"], d["scale"], d["strength_patch"]), (4, 0.5, 0.8))
        self.assertEqual(d["patch_data_shape"], {"up": [32, 4], "down": [4, 16]})
        self.assertEqual(d["module"], "lora_unet_layer_0")
        self.assertEqual(d["lora_file"], "style.safetensors")
        clip_patches = report["clip_lora_patches"]["patch_details"]
        self.assertEqual(clip_patches["bias"]["patch_type"], "diff")
        self.assertEqual(clip_patches["weight"]["patch_type"], "diff")
        self.assertEqual(clip_patches["weight"]["patch_count"], 2)
        self.assertEqual(report["clip_changes"]["patches_added"], 2)
        placement = report["placement_changes"]
        self.assertEqual(placement["unet"]["original_load_device"], "cuda:0")
        self.assertFalse(placement["unet"]["load_device_changed"])
        self.assertEqual(placement["clip"]["clip_patcher_offload_device"], "cpu")
        self.assertIsNone(report["memory_impact"]["unet_memory_change"]["allocated_change_mb"])
        self.assertEqual(report["errors"], [])
        self.assertEqual(step["counters"]["patched_keys"], 2)

    def test_in_place_merge_with_lora_step(self):
        model = net()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        run = quiet_monitor().start_run()
        with gt.lora_step(run, model, lora_path="/nonexistent/x.safetensors") as applying:
            with torch.no_grad():  # diffusers fuse_lora: W += scale * up @ down
                for idx in ("0", "2"):
                    layer = model[int(idx)]
                    layer.weight += 0.1 * torch.randn(layer.weight.shape[0], 2) @ \
                        torch.randn(2, layer.weight.shape[1])
        report = applying.report
        step = run.finish()["steps"][0]
        self.assertEqual(step["name"], "apply x.safetensors")
        self.assertEqual(step["attachments"][0]["data"], report)
        w = report["unet_weight_changes"]
        self.assertEqual(w["values_changed"], 2)
        self.assertEqual(sorted(w["changes"]), ["0.weight", "2.weight"])
        self.assertTrue(w["changes"]["0.weight"]["value_changed"])
        self.assertFalse(report["unet_changes"]["model_cloned"])
        self.assertFalse(report["baseline"]["lora_file"]["file_exists"])
        self.assertIsNone(report["unet_lora_patches"]["total_patched_keys"])  # no patcher
        self.assertEqual(step["counters"]["changed_weights"], 2)
        for k, v in model.state_dict().items():
            if k not in ("0.weight", "2.weight"):
                self.assertTrue(torch.equal(v, before[k]))

    def test_failed_application_is_reported_and_raised(self):
        model = net()
        run = quiet_monitor().start_run()
        with self.assertRaises(ValueError):
            with gt.lora_step(run, model):
                raise ValueError("lora for another architecture")
        step = run.finish()["steps"][0]
        report = step["attachments"][0]["data"]
        self.assertEqual(step["status"], "failed")
        self.assertFalse(report["lora_application_success"])
        self.assertEqual(report["errors"], ["ValueError: lora for another architecture"])

    def test_without_hashes_and_into_a_given_step(self):
        a, b = net(), net()
        with torch.no_grad():
            b[0].weight.add_(1.0)
        run = quiet_monitor().start_run()
        with run.step("lora_application", "mine") as step:
            report = gt.observe_patching(run, a, b, hash=False, step=step)
        doc = run.finish()
        self.assertEqual(len(doc["steps"]), 1)
        self.assertEqual(report["unet_weight_changes"]["values_changed"], 0)  # unknown
        self.assertTrue(report["unet_changes"]["model_cloned"])
        snap, errors = gt.snapshot(b)
        self.assertEqual(errors, [])
        self.assertEqual(snap["parameters"]["0.weight"]["dtype"], "F32")
        self.assertEqual(snap["parameters"]["0.weight"]["shape"], [32, 16])

    def test_not_a_model(self):
        run = quiet_monitor().start_run()
        with self.assertRaises(TypeError):
            gt.observe_patching(run, object(), object())
        run.finish()


if __name__ == "__main__":
    unittest.main()
