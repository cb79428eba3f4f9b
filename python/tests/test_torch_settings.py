"""genscope.torch.instrument with the settings users turn on, the fast cases on the test
pipeline (tiny_pipeline.TinyPipeline, CPU): an offload-style forward hook that is removed and
added again after every pipeline call, model moves (to the meta device: the one other device a
CPU-only machine has), diffusers-style LoRA methods, the settings labels.

The hook here follows the slot protocol accelerate documents for ``add_hook_to_module`` /
``remove_hook_from_module`` (``_hf_hook``, ``_old_forward``, ``forward``; removal also drops
``to`` from the instance): a stand-in written for this test. The real accelerate, diffusers'
``enable_model_cpu_offload``, group offloading, ``torch.compile`` and PEFT LoRAs run in
tests/peers/modern_settings.py."""

import functools
import unittest

import torch

import genscope.torch as gt
from helpers import quiet_monitor
from tiny_pipeline import TinyPipeline

STEPS = 3


class OffloadHook:
    """What an offload hook does around forward: here, counting."""

    def __init__(self):
        self.calls = 0


def add_hook(module, hook):
    if "_hf_hook" in module.__dict__ and "_old_forward" in module.__dict__:
        old = module._old_forward
    else:
        old = module.forward
        module._old_forward = old
    module._hf_hook = hook

    def new_forward(mod, *args, **kwargs):
        mod._hf_hook.calls += 1
        return mod._old_forward(*args, **kwargs)

    module.forward = functools.update_wrapper(functools.partial(new_forward, module), old)


def remove_hook(module):
    module.__dict__.pop("_hf_hook", None)
    if "_old_forward" in module.__dict__:
        module.forward = module._old_forward
        del module._old_forward
    module.__dict__.pop("to", None)


def genscope_wrappers(module):
    """Instance attributes of a module that are genscope's wrappers."""
    found = []
    for slot in ("forward", "_old_forward", "to", "__getstate__"):
        value = module.__dict__.get(slot)
        fn = getattr(value, "__func__", value)
        if "Instrumentation" in getattr(fn, "__qualname__", ""):
            found.append(slot)
    return found


class SettingsTest(unittest.TestCase):
    def setUp(self):
        self.pipe = TinyPipeline()
        self.plain = [self.pipe("a red fox", "blurry", num_inference_steps=STEPS)
                      for _ in range(2)]

    def generate_twice(self, between=None):
        outs = []
        for i in range(2):
            outs.append(self.pipe("a red fox", "blurry", num_inference_steps=STEPS))
            if between is not None:
                between(i)
        return outs

    def check_generations(self, doc, outs):
        for a, b in zip(self.plain, outs):
            self.assertTrue(torch.equal(a, b))
        sampling = [s for s in doc["steps"] if s["kind"] == "sampling"]
        self.assertEqual(len(sampling), 2, [s["name"] for s in doc["steps"]])
        for s in sampling:
            self.assertEqual(s["iterations"]["count"], STEPS)
            self.assertEqual(s["counters"]["model_calls"], STEPS)
        text = [s for s in doc["steps"] if s["kind"] == "text_encoding"]
        self.assertEqual(len(text), 4)  # prompt and negative, twice
        self.assertEqual(doc["monitoring_errors"], [])

    def test_hook_removed_and_added_after_every_call(self):
        """Hooks on before instrument, removed and added again after each generation (what
        diffusers does with model offload): both generations fully recorded, no error, and
        after the block the hook calls the class's forward again."""
        modules = {"text_encoder": self.pipe.text_encoder, "unet": self.pipe.unet}
        hooks = {name: OffloadHook() for name in modules}
        for name, module in modules.items():
            add_hook(module, hooks[name])

        def rehook(i):
            for name, module in modules.items():
                remove_hook(module)
                add_hook(module, hooks[name])

        run = quiet_monitor().start_run(pipeline="t2i")
        with gt.instrument(self.pipe, run) as inst:
            outs = self.generate_twice(rehook)
        doc = run.finish()
        self.check_generations(doc, outs)
        self.assertEqual(inst.hook_errors, 0)
        self.assertEqual(hooks["unet"].calls, 2 * STEPS)  # batched CFG: a call per step
        for module in modules.values():
            self.assertEqual(genscope_wrappers(module), [])
            self.assertEqual(module._old_forward.__func__, type(module).forward)

    def test_hook_added_inside_the_block(self):
        """Hooks added after instrument (offload enabled inside the block) and re-added after
        each call: recorded, no "replaced while instrumented", nothing of genscope left."""
        hook = OffloadHook()
        run = quiet_monitor().start_run(pipeline="t2i")
        with gt.instrument(self.pipe, run):
            add_hook(self.pipe.unet, hook)
            outs = self.generate_twice(
                lambda i: (remove_hook(self.pipe.unet), add_hook(self.pipe.unet, hook)))
        doc = run.finish()
        self.check_generations(doc, outs)
        self.assertEqual(genscope_wrappers(self.pipe.unet), [])
        self.assertEqual(self.pipe.unet._old_forward.__func__, type(self.pipe.unet).forward)
        remove_hook(self.pipe.unet)
        self.assertTrue(torch.equal(self.pipe("a red fox", "blurry", num_inference_steps=STEPS),
                                    self.plain[0]))

    def test_moves_are_steps(self):
        """module.to(another device): a step with the bytes moved; a dtype change or a move to
        where the module is: none. After a hook removal dropped ``to``, it is wrapped again
        when the pipeline's enable_model_cpu_offload runs."""
        pipe = self.pipe
        calls = []

        def enable_model_cpu_offload(device="cpu"):
            calls.append(device)
            remove_hook(pipe.text_encoder)  # drops the instance's `to`, as accelerate does

        pipe.enable_model_cpu_offload = enable_model_cpu_offload
        weight_bytes = sum(p.numel() * p.element_size() for p in pipe.text_encoder.parameters())
        weight_bytes += sum(b.numel() * b.element_size() for b in pipe.text_encoder.buffers())
        run = quiet_monitor().start_run(pipeline="t2i")
        with gt.instrument(pipe, run) as inst:
            pipe.unet.to("cpu")  # already there
            pipe.unet.to(torch.float32)  # dtype only
            pipe.enable_model_cpu_offload()
            self.assertIn("to", pipe.text_encoder.__dict__)  # wrapped again
            pipe.text_encoder.to("meta")
        doc = run.finish()
        del pipe.enable_model_cpu_offload
        moves = [s for s in doc["steps"] if s["kind"] == "model_loading"]
        self.assertEqual([s["name"] for s in moves], ["load text_encoder (meta)"])
        self.assertEqual(moves[0]["counters"]["bytes"], weight_bytes)
        self.assertEqual(moves[0]["labels"]["device_from"], "cpu")
        self.assertEqual(moves[0]["labels"]["model_action"], "load")
        self.assertEqual(calls, ["cpu"])
        self.assertEqual(inst.hook_errors, 0)
        self.assertEqual(doc["monitoring_errors"], [])
        self.assertEqual(genscope_wrappers(pipe.text_encoder), [])

    def test_lora_methods_and_settings_labels(self):
        """The pipeline's LoRA methods are lora_application steps; the active adapters, VAE
        tiling and slicing are labels of every sampling step (and of the run, the first)."""
        pipe = self.pipe
        active = []

        def load_lora_weights(state, adapter_name=None):
            active.append(adapter_name)

        def set_adapters(names, adapter_weights=None):
            active[:] = list(names)

        pipe.load_lora_weights = load_lora_weights
        pipe.set_adapters = set_adapters
        pipe.get_active_adapters = lambda: list(active)
        pipe.vae.use_tiling = True
        pipe.vae.use_slicing = False
        run = quiet_monitor().start_run(pipeline="t2i")
        with gt.instrument(pipe, run):
            pipe.load_lora_weights({}, adapter_name="style")
            pipe.set_adapters(["style"], adapter_weights=[0.8])
            pipe("a red fox", "blurry", num_inference_steps=STEPS)
        doc = run.finish()
        lora = [s for s in doc["steps"] if s["kind"] == "lora_application"]
        self.assertEqual([s["name"] for s in lora],
                         ["load_lora_weights (style)", "set_adapters (style)"])
        self.assertEqual(lora[1]["labels"]["lora.adapter_weights"], "0.8")
        self.assertEqual(lora[1]["labels"]["lora_adapters"], "style")
        self.assertEqual(lora[0]["counters"]["lora_layers"], 0)
        s = [s for s in doc["steps"] if s["kind"] == "sampling"][0]
        self.assertEqual(s["labels"]["lora_adapters"], "style")
        self.assertEqual(s["labels"]["vae_tiling"], "true")
        self.assertNotIn("vae_slicing", s["labels"])
        self.assertNotIn("offload", s["labels"])
        self.assertEqual(doc["labels"]["vae_tiling"], "true")
        self.assertEqual(doc["monitoring_errors"], [])
        for name in ("load_lora_weights", "set_adapters"):
            self.assertNotIn("Instrumentation", getattr(pipe.__dict__[name], "__qualname__", ""))


if __name__ == "__main__":
    unittest.main()
