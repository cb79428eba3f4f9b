"""genscope.torch.instrument on a real PyTorch pipeline (tiny_pipeline.TinyPipeline, CPU)."""

import copy
import io
import pickle
import threading
import unittest

import torch
import torch.nn as nn

import genscope
import genscope.torch as gt
from helpers import quiet_monitor
from tiny_pipeline import (HeunScheduler, ModelOutput, TinyPipeline, TinyUNet,
                           TwoExpertPipeline, manual_generation)

STEPS = 4


def kinds(doc):
    return [s["kind"] for s in doc["steps"]]


def sampling(doc):
    steps = [s for s in doc["steps"] if s["kind"] == "sampling"]
    assert len(steps) == 1, [s["name"] for s in doc["steps"]]
    return steps[0]


def attachment(step, name):
    for a in step["attachments"]:
        if a["name"] == name:
            return a["data"]
    raise AssertionError(f"no attachment {name!r} in {[a['name'] for a in step['attachments']]}")


def hook_state(pipe):
    """Every place instrument() touches: instance attributes (and no torch hooks)."""
    state = {}
    for name in ("text_encoder", "text_encoder_2", "unet"):
        module = getattr(pipe, name, None)
        if module is not None:
            state[name] = ("forward" in module.__dict__, dict(module._forward_hooks),
                           dict(module._forward_pre_hooks))
    state["vae"] = sorted(k for k in pipe.vae.__dict__ if k in ("encode", "decode"))
    state["scheduler"] = sorted(k for k in pipe.scheduler.__dict__ if k in ("step", "set_timesteps"))
    return state


class InstrumentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pipe = TinyPipeline(dual=True)
        cls.plain = cls.pipe("a red fox", "blurry", num_inference_steps=STEPS)
        cls.clean = hook_state(cls.pipe)

    def instrumented(self, **kwargs):
        run = quiet_monitor().start_run(pipeline="t2i")
        with gt.instrument(self.pipe, run):
            out = self.pipe("a red fox", "blurry", num_inference_steps=STEPS, **kwargs)
        return out, run.finish()

    def test_one_call_gives_the_steps_placed_by_hand_and_identical_outputs(self):
        out, doc = self.instrumented()
        run = quiet_monitor().start_run()
        by_hand = manual_generation(self.pipe, run, "a red fox", "blurry", num_inference_steps=STEPS)
        manual = run.finish()
        self.assertTrue(torch.equal(out, self.plain), "instrumentation changed the output")
        self.assertTrue(torch.equal(by_hand, self.plain))
        self.assertEqual(kinds(doc), kinds(manual))
        self.assertEqual(kinds(doc), ["text_encoding"] * 4 + ["sampling", "vae_decode"])
        self.assertEqual([s["name"] for s in doc["steps"][:4]],  # the prompt, then the negative
                         ["text_encoder (prompt)", "text_encoder_2 (prompt)",
                          "text_encoder (negative)", "text_encoder_2 (negative)"])
        s = sampling(doc)
        self.assertEqual(s["iterations"]["count"], STEPS)
        self.assertEqual(s["iterations"]["count"], sampling(manual)["iterations"]["count"])
        self.assertEqual(s["counters"]["model_evaluations"], 2 * STEPS)  # CFG: cond + uncond
        self.assertEqual(s["counters"]["model_calls"], STEPS)  # batched in one call
        self.assertEqual(s["counters"]["scheduler_steps"], STEPS)
        self.assertEqual(s["labels"]["num_inference_steps"], str(STEPS))
        self.assertEqual(s["labels"]["scheduler"], "DDIMScheduler")
        self.assertEqual(s["labels"]["scheduler_order"], "1")
        self.assertNotIn("iteration", s["labels"])  # said only where steps and calls differ
        self.assertTrue(s["source"].endswith(".py:%s" % s["source"].rsplit(":", 1)[1]))
        self.assertIn("tiny_pipeline.py", s["source"])  # the pipeline's line, not genscope's
        self.assertEqual(doc["monitoring_errors"], [])
        self.assertTrue(all(st["parent_id"] == -1 for st in doc["steps"]))

    def test_tensors_are_analysed_and_classified(self):
        _, doc = self.instrumented()
        te1, te2 = doc["steps"][0], doc["steps"][1]
        self.assertEqual(te1["counters"]["tokens"], 77)
        self.assertEqual(te1["labels"]["max_tokens"], "77")
        c1 = attachment(te1, "conditioning")
        self.assertEqual(c1["shape"], [1, 77, 768])
        self.assertEqual(c1["classification"]["family"], "SD1.x")
        self.assertEqual(attachment(te2, "pooled")["classification"]["role"], "pooled")
        self.assertEqual(attachment(te2, "pooled")["shape"], [1, 1280])
        s = sampling(doc)
        first = attachment(s, "latents (first iteration)")
        last = attachment(s, "latents (last iteration)")
        self.assertEqual(first["classification"]["kind"], "latent")
        self.assertEqual(first["classification"]["channels"], 4)
        self.assertIn("SDXL", [c["family"] for c in first["classification"]["candidates"]])
        self.assertNotEqual(first["stats"]["hash"], last["stats"]["hash"])
        decode = doc["steps"][5]
        self.assertEqual(decode["counters"], {"frames": 1.0, "pixels": 64.0 * 64.0})
        image = attachment(decode, "image")
        self.assertEqual(image["shape"], [1, 3, 64, 64])
        self.assertEqual(image["stats"]["nan_count"], 0)

    def test_two_model_calls_per_step_count_the_same_evaluations(self):
        out, doc = self.instrumented(cfg_batched=False)
        s = sampling(doc)
        self.assertEqual(s["iterations"]["count"], STEPS)
        self.assertEqual(s["counters"]["model_calls"], 2 * STEPS)
        self.assertEqual(s["counters"]["model_evaluations"], 2 * STEPS)

    def test_image_to_image_records_the_vae_encode(self):
        image = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(3)) * 2 - 1
        out, doc = self.instrumented(image=image, strength=0.75)
        self.assertTrue(torch.equal(out, self.pipe("a red fox", "blurry", num_inference_steps=STEPS,
                                                   image=image, strength=0.75)))
        self.assertEqual(kinds(doc), ["text_encoding"] * 4 +
                         ["latent_generation", "sampling", "vae_decode"])
        encode = doc["steps"][4]
        self.assertEqual(encode["name"], "vae.encode")
        self.assertEqual(encode["counters"], {"frames": 1.0, "pixels": 4096.0})
        self.assertEqual(attachment(encode, "latents (encoded)")["shape"], [1, 4, 8, 8])
        self.assertEqual(sampling(doc)["iterations"]["count"], 3)  # strength 0.75 of 4 steps

    def test_two_generations_in_one_block_are_two_sampling_steps(self):
        run = quiet_monitor().start_run()
        with gt.instrument(self.pipe, run):
            self.pipe("a", num_inference_steps=2)
            self.pipe("b", num_inference_steps=3)
        doc = run.finish()
        counts = [s["iterations"]["count"] for s in doc["steps"] if s["kind"] == "sampling"]
        self.assertEqual(counts, [2, 3])

    def test_a_module_copied_or_pickled_inside_the_block_stays_itself(self):
        x, t = torch.randn(1, 4, 8, 8), torch.tensor([500])
        context = torch.randn(1, 77, 2048)
        pooled = {"text_embeds": torch.randn(1, 1280)}
        run = quiet_monitor().start_run()
        with gt.instrument(self.pipe, run), torch.no_grad():
            copy_ = copy.deepcopy(self.pipe.unet)
            copy_.conv_out.weight.zero_()
            copy_.conv_out.bias.zero_()
            saved = io.BytesIO()
            torch.save(self.pipe.unet, saved)  # the whole module, wrapper included
            copied = copy_(x, t, context, added_cond_kwargs=pooled).sample
            original = self.pipe.unet(x, t, context, added_cond_kwargs=pooled).sample
        run.finish()
        self.assertTrue(torch.equal(copied, torch.zeros_like(copied)), "the copy ran the original")
        self.assertFalse(torch.equal(original, torch.zeros_like(original)))
        saved.seek(0)
        loaded = torch.load(saved, weights_only=False)  # a whole module (torch >= 2.6: True by default)
        with torch.no_grad():
            self.assertTrue(torch.equal(loaded(x, t, context, added_cond_kwargs=pooled).sample,
                                        original))
        self.assertEqual(hook_state(self.pipe), self.clean)

    def test_copies_of_wrapped_objects_are_plain_and_independent(self):
        """copy.copy, copy.deepcopy and pickle of every wrapped object inside the block give the
        object as it was: no genscope wrapper in the copy, running the copy leaves the original
        as it was and records nothing (LTX-2 deep-copies its scheduler and steps both)."""
        wrapped_names = {"forward", "step", "set_timesteps", "encode", "decode", "__getstate__"}
        pipe = TinyPipeline(dual=True)
        pipe.scheduler = HeunScheduler()  # state that advances on every step()
        copiers = {"copy": copy.copy, "deepcopy": copy.deepcopy,
                   "pickle": lambda o: pickle.loads(pickle.dumps(o))}
        run = quiet_monitor().start_run()
        with gt.instrument(pipe, run), torch.no_grad():
            for name in ("scheduler", "vae", "unet", "text_encoder", "text_encoder_2"):
                obj = getattr(pipe, name)
                self.assertTrue(wrapped_names & set(vars(obj)), f"{name} is not wrapped")
                for how, copier in copiers.items():
                    dup = copier(obj)
                    self.assertIs(type(dup), type(obj))
                    self.assertEqual(wrapped_names & set(vars(dup)), set(),
                                     f"{how} of {name} kept genscope's wrappers")
            scheduler = pipe.scheduler
            scheduler.set_timesteps(4)
            timesteps, index = scheduler.timesteps.clone(), scheduler.step_index
            sample = torch.randn(1, 4, 8, 8)
            for how in ("copy", "deepcopy"):
                dup = copiers[how](scheduler)
                dup.set_timesteps(6)
                dup.step(torch.randn(1, 4, 8, 8), dup.timesteps[0], sample)
                dup.step(torch.randn(1, 4, 8, 8), dup.timesteps[1], sample)
                self.assertEqual(dup.step_index, 2, how)
                self.assertEqual(scheduler.step_index, index, f"the {how} advanced the original")
                self.assertTrue(torch.equal(scheduler.timesteps, timesteps), how)
            vae = copy.deepcopy(pipe.vae)
            vae.decode(torch.randn(1, 4, 8, 8))
        doc = run.finish()
        self.assertEqual([s["name"] for s in doc["steps"]], [], "a copy's calls were recorded")
        self.assertEqual(hook_state(pipe), hook_state(TinyPipeline(dual=True)))
        self.assertNotIn("__getstate__", vars(pipe.scheduler))

    def test_two_experts_are_both_hooked_with_their_calls_and_time(self):
        """Wan 2.2 A14B: transformer for the high-noise steps, transformer_2 for the rest; both
        in the sampling step, their calls counted apart, the output unchanged."""
        pipe = TwoExpertPipeline(boundary_ratio=0.5)
        pipe.image_encoder = nn.Linear(2, 2)  # hooked, never called here: no step
        pipe.controlnet = nn.Linear(2, 2)  # not hooked: listed as skipped
        plain = pipe("a red fox", "blurry", num_inference_steps=STEPS, cfg_batched=False)
        run = quiet_monitor().start_run()
        with gt.instrument(pipe, run) as inst:
            out = pipe("a red fox", "blurry", num_inference_steps=STEPS, cfg_batched=False)
        doc = run.finish()
        self.assertTrue(torch.equal(out, plain))
        self.assertEqual(inst.hook_errors, 0)
        step = sampling(doc)
        self.assertEqual(step["name"], "denoise (transformer, transformer_2)")
        self.assertEqual(step["iterations"]["count"], STEPS)
        labels = step["labels"]
        # DDIM over 1000 timesteps, 4 steps: 751, 501 (>= 500: transformer), 251, 1; 2 calls each
        self.assertEqual(labels["model_calls.transformer"], "4")
        self.assertEqual(labels["model_calls.transformer_2"], "4")
        self.assertGreater(float(labels["model_seconds.transformer_2"]), 0.0)
        self.assertEqual(doc["labels"]["boundary_ratio"], "0.5")
        components = attachment(doc, "instrument")  # kind torch_components
        self.assertEqual(components["transformer_2"]["hooked"], "forward")
        self.assertEqual(components["transformer"]["hooked"], "forward")
        self.assertEqual(components["image_encoder"]["hooked"], "forward")
        self.assertTrue(components["controlnet"]["skipped"].startswith("Linear: not hooked"))
        self.assertNotIn("forward", vars(pipe.image_encoder))
        self.assertNotIn("forward", vars(pipe.transformer_2))

    def test_hooks_are_removed_on_exit(self):
        self.instrumented()
        self.assertEqual(hook_state(self.pipe), self.clean)

    def test_pipeline_exception_propagates_unchanged_and_hooks_are_removed(self):
        boom = RuntimeError("callback failed")

        def callback(pipe, i, t, kwargs):
            if i == 2:
                raise boom
            return kwargs

        run = quiet_monitor().start_run()
        with self.assertRaises(RuntimeError) as caught:
            with gt.instrument(self.pipe, run):
                self.pipe("x", num_inference_steps=STEPS, callback_on_step_end=callback)
        self.assertIs(caught.exception, boom)
        self.assertEqual(hook_state(self.pipe), self.clean)
        s = sampling(run.finish())
        self.assertEqual(s["status"], "failed")
        self.assertEqual(s["error"]["type"], "RuntimeError")
        self.assertEqual(s["iterations"]["count"], 3)

    def test_vae_exception_fails_its_step_and_propagates(self):
        run = quiet_monitor().start_run()
        bad = torch.zeros(1, 3, 8, 8)  # 3 channels where the decoder wants 4 latent channels
        with self.assertRaises(RuntimeError):
            with gt.instrument({"vae": self.pipe.vae}, run):
                self.pipe.vae.decode(bad)
        self.assertEqual(hook_state(self.pipe), self.clean)
        step = run.finish()["steps"][0]
        self.assertEqual((step["kind"], step["status"]), ("vae_decode", "failed"))
        self.assertEqual(step["error"]["type"], "RuntimeError")

    def test_text_encoder_exception_caught_by_the_pipeline(self):
        pipe = self.pipe
        run = quiet_monitor().start_run()
        with gt.instrument(pipe, run):
            try:
                pipe.text_encoder(torch.full((1, 77), 10_000))  # id beyond the vocabulary
            except IndexError:
                pass  # the pipeline falls back and goes on
            pipe("ok", num_inference_steps=2)
        doc = run.finish()
        first = doc["steps"][0]
        self.assertEqual((first["name"], first["status"]), ("text_encoder", "failed"))
        self.assertEqual(first["error"]["type"], "IndexError")  # the forward's own exception
        self.assertTrue(all(s["parent_id"] == -1 for s in doc["steps"]),
                        "a failed forward left a step open that swallowed the next ones")
        self.assertEqual(kinds(doc)[1:], ["text_encoding"] * 4 + ["sampling", "vae_decode"])

    def test_unet_exception_caught_inside_the_block_fails_sampling(self):
        """Whatever the torch version (1.13 runs no forward hook after a raising forward):
        the denoiser's forward is wrapped, so its exception is seen."""
        calls = []

        def third_call_fails(module, args):
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("out of memory (simulated)")

        handle = self.pipe.unet.conv_out.register_forward_pre_hook(third_call_fails)
        run = quiet_monitor().start_run()
        try:
            with gt.instrument(self.pipe, run):
                try:
                    self.pipe("a red fox", "blurry", num_inference_steps=STEPS)
                except RuntimeError:
                    pass  # the program catches it and goes on
                handle.remove()
                out = self.pipe("a red fox", "blurry", num_inference_steps=STEPS)
        finally:
            handle.remove()
        self.assertTrue(torch.equal(out, self.plain))
        self.assertEqual(hook_state(self.pipe), self.clean)
        doc = run.finish()
        failed, ok = [s for s in doc["steps"] if s["kind"] == "sampling"]
        self.assertEqual(failed["status"], "failed")
        self.assertEqual(failed["error"]["type"], "RuntimeError")
        self.assertIn("out of memory", failed["error"]["message"])
        self.assertEqual(failed["iterations"]["count"], 2)  # the third step's UNet call raised
        self.assertEqual(ok["status"], "ok")
        self.assertEqual(ok["iterations"]["count"], STEPS)
        self.assertEqual(kinds(doc), ["text_encoding"] * 4 + ["sampling"] +
                         ["text_encoding"] * 4 + ["sampling", "vae_decode"])
        self.assertTrue(all(s["parent_id"] == -1 for s in doc["steps"]))

    def test_second_order_scheduler_iterations_are_the_steps_asked(self):
        pipe = TinyPipeline(dual=True)
        pipe.scheduler = HeunScheduler()
        plain = pipe("a red fox", "blurry", num_inference_steps=5)
        run = quiet_monitor().start_run()
        with gt.instrument(pipe, run):
            out = pipe("a red fox", "blurry", num_inference_steps=5)
        self.assertTrue(torch.equal(out, plain))
        s = sampling(run.finish())
        self.assertEqual(s["iterations"]["count"], 5)  # not the 9 scheduler steps
        self.assertEqual(len(s["iterations"]["durations_ns"]), 5)
        self.assertEqual(s["labels"]["num_inference_steps"], "5")
        self.assertEqual(s["labels"]["scheduler_order"], "2")
        self.assertEqual(s["counters"]["scheduler_steps"], 9)
        self.assertEqual(s["counters"]["model_calls"], 9)
        self.assertEqual(s["counters"]["model_evaluations"], 18)
        self.assertIn("scheduler_steps counts scheduler.step() calls", s["labels"]["iteration"])

    def test_generation_settings_are_labels(self):
        run = quiet_monitor().start_run()
        with gt.instrument(self.pipe, run):
            self.pipe("a red fox", "blurry", num_inference_steps=3, guidance_scale=6.5, seed=7,
                      height=64, width=32)
            self.pipe("a blue fox", num_inference_steps=2)
        doc = run.finish()
        want = {"prompt": "a red fox", "negative_prompt": "blurry", "num_inference_steps": "3",
                "guidance_scale": "6.5", "height": "64", "width": "32", "seed": "7"}
        self.assertEqual({k: doc["labels"][k] for k in want}, want)  # the first generation's
        self.assertEqual(doc["labels"]["scheduler"], "DDIMScheduler")
        self.assertNotIn("strength", doc["labels"])  # text-to-image: no image to denoise
        first, second = [s for s in doc["steps"] if s["kind"] == "sampling"]
        self.assertEqual({k: first["labels"][k] for k in want}, want)
        self.assertEqual((second["labels"]["prompt"], second["labels"]["negative_prompt"],
                          second["labels"]["num_inference_steps"], second["labels"]["seed"]),
                         ("a blue fox", "", "2", "0"))
        names = [s["name"] for s in doc["steps"] if s["kind"] == "text_encoding"]
        self.assertEqual(names, ["text_encoder (prompt)", "text_encoder_2 (prompt)",
                                 "text_encoder (negative)", "text_encoder_2 (negative)"] * 2)

    def test_a_pipeline_sharing_the_components_is_read_too(self):
        """instrument() given a mapping (or another pipeline built on the same components):
        the __call__ on the stack whose self holds the instrumented unet/vae/scheduler."""
        parts = {k: getattr(self.pipe, k) for k in ("text_encoder", "text_encoder_2", "unet",
                                                     "vae", "scheduler")}
        run = quiet_monitor().start_run()
        with gt.instrument(parts, run):
            self.pipe("a red fox", "blurry", num_inference_steps=2, seed=5)
        doc = run.finish()
        self.assertEqual(doc["steps"][2]["name"], "text_encoder (negative)")
        self.assertEqual((doc["labels"]["prompt"], doc["labels"]["seed"]), ("a red fox", "5"))

    def test_encoders_called_outside_a_pipeline_call_keep_their_names(self):
        run = quiet_monitor().start_run()
        with gt.instrument(self.pipe, run):
            self.pipe.text_encoder(torch.zeros(1, 77, dtype=torch.long))
        doc = run.finish()
        self.assertEqual([s["name"] for s in doc["steps"]], ["text_encoder"])
        self.assertNotIn("prompt", doc["labels"])

    def test_a_failing_hook_is_a_monitoring_error_and_the_forward_result_is_kept(self):
        class LazyOutput:
            @property
            def last_hidden_state(self):
                raise RuntimeError("lazy field broke")

        class Encoder(nn.Module):
            def forward(self, ids):
                return LazyOutput()

        encoder = Encoder()
        run = quiet_monitor().start_run()
        with gt.instrument({"text_encoder": encoder}, run):
            result = encoder(torch.zeros(1, 77, dtype=torch.long))
        self.assertIsInstance(result, LazyOutput)
        doc = run.finish()
        errors = [e for e in doc["monitoring_errors"] if e["source"] == "torch.instrument"]
        self.assertEqual(len(errors), 1, doc["monitoring_errors"])
        self.assertIn("lazy field broke", errors[0]["message"])
        self.assertEqual(doc["steps"][0]["status"], "ok")  # the step still ended

    def test_explicit_mapping_and_named_errors(self):
        run = quiet_monitor().start_run()
        with gt.instrument({"unet": self.pipe.unet, "scheduler": self.pipe.scheduler,
                            "vae": None}, run) as inst:
            self.assertEqual(set(inst.components.describe()), {"unet", "scheduler"})
        for mapping, name in (({"unett": self.pipe.unet}, "UnknownComponent"),
                              ({"unet": object()}, "InvalidComponent"),
                              ({"scheduler": self.pipe.scheduler}, "NoComponents")):
            with self.assertRaises(genscope.Error) as caught:
                gt.instrument(mapping, run)
            self.assertEqual(caught.exception.name, name)
        with self.assertRaises(genscope.Error) as caught:
            gt.instrument(self.pipe, run, family="sd9")
        self.assertEqual(caught.exception.name, "UnknownFamily")
        with self.assertRaises(genscope.Error) as caught:
            gt.instrument(object(), run)
        self.assertEqual(caught.exception.name, "NoComponents")
        run.finish()

    def test_family_checks_the_conditioning_the_unet_receives(self):
        """SDXL: CLIP-L 768 and OpenCLIP-G 1280 are parts of the 2048 the UNet gets; checking
        each encoder alone against SDXL would fail a correct pipeline."""
        run = quiet_monitor().start_run()
        with gt.instrument(self.pipe, run, family="sdxl"):
            self.pipe("a", num_inference_steps=2)
        doc = run.finish()
        every = [(s["name"], a["name"], c["name"], c["passed"]) for s in doc["steps"]
                 for a in s["attachments"] for c in a["data"].get("checks", [])]
        self.assertTrue(every and all(c[3] for c in every), every)
        s = sampling(doc)
        context = attachment(s, "conditioning (denoiser input)")
        self.assertEqual(context["shape"], [2, 77, 2048])
        self.assertEqual(context["classification"]["family"], "SDXL")
        self.assertEqual([c["name"] for c in context["checks"]], ["conditioning_width"])
        self.assertEqual(attachment(s, "pooled (denoiser input)")["shape"], [2, 1280])
        self.assertTrue(any(c[1] == "pooled (denoiser input)" for c in every))
        encoder = attachment(doc["steps"][0], "conditioning")
        self.assertEqual(encoder["shape"], [1, 77, 768])  # analysed, classified, not checked
        self.assertEqual(encoder["checks"], [])

    def test_text_steps_of_a_causal_encoder_get_the_context_the_denoiser_receives(self):
        """An encoder without last_hidden_state (Gemma, Qwen: the pipeline takes its hidden
        states) gets the denoiser's context. True CFG (a call per prompt): the prompt's step the
        first call's, the negative's the second call's. Batched CFG followed by a guidance call
        with the prompt's context only (LTX-2's spatio-temporal and modality guidance): both
        steps the batched context, not the guidance call's."""

        class HiddenStatesOnly(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder

            def forward(self, input_ids):
                return ModelOutput(hidden_states=(self.encoder(input_ids).last_hidden_state,))

        class Guided(TinyPipeline):
            def encode_prompt(self, prompt):
                ids = self.tokenizer([prompt]).input_ids.to(self.device)
                return self.text_encoder(ids).hidden_states[-1], None

            def denoise_once(self, latents, t, cond, uncond, guidance_scale, cfg_batched):
                eps = super().denoise_once(latents, t, cond, uncond, guidance_scale, cfg_batched)
                if cfg_batched:  # a guidance pass with the prompt's context only
                    eps = eps + 0.5 * self.unet(latents, t, encoder_hidden_states=cond[0]).sample
                return eps

        for batched, want in ((False, [1, 1]), (True, [2, 2])):
            pipe = Guided()
            pipe.text_encoder = HiddenStatesOnly(pipe.text_encoder)
            plain = pipe("a red fox", "blurry", num_inference_steps=2, cfg_batched=batched)
            run = quiet_monitor().start_run()
            with gt.instrument(pipe, run) as inst:
                out = pipe("a red fox", "blurry", num_inference_steps=2, cfg_batched=batched)
            doc = run.finish()
            self.assertTrue(torch.equal(out, plain))
            self.assertEqual(inst.hook_errors, 0)
            texts = [s for s in doc["steps"] if s["kind"] == "text_encoding"]
            self.assertEqual([s["name"] for s in texts],
                             ["text_encoder (prompt)", "text_encoder (negative)"])
            shapes = [attachment(s, "conditioning (denoiser input)")["shape"] for s in texts]
            self.assertEqual([shape[0] for shape in shapes], want, (batched, shapes))

    def test_family_checks_still_fail_a_wrong_pipeline(self):
        single = TinyPipeline(dual=False)  # SD1.x conditioning (768) declared SDXL
        run = quiet_monitor().start_run()
        with gt.instrument(single, run, family="sdxl"):
            single("a", num_inference_steps=2)
        context = attachment(sampling(run.finish()), "conditioning (denoiser input)")
        self.assertEqual([(c["name"], c["passed"]) for c in context["checks"]],
                         [("conditioning_width", False)])
        run = quiet_monitor().start_run()
        with gt.instrument(self.pipe, run, family="sd1.5"):  # SDXL declared SD1.5
            self.pipe("a", num_inference_steps=2)
        context = attachment(sampling(run.finish()), "conditioning (denoiser input)")
        self.assertFalse(context["checks"][0]["passed"])

    def test_a_lone_text_encoder_is_checked_as_the_conditioning(self):
        run = quiet_monitor().start_run()
        with gt.instrument({"text_encoder": self.pipe.text_encoder}, run, family="sdxl"):
            self.pipe.text_encoder(torch.zeros(1, 77, dtype=torch.long))
        checks = attachment(run.finish()["steps"][0], "conditioning")["checks"]
        self.assertEqual([(c["name"], c["passed"]) for c in checks], [("conditioning_width", False)])

    def test_disabled_monitor_hooks_nothing(self):
        run = quiet_monitor(enabled=False).start_run()
        with gt.instrument(self.pipe, run) as inst:
            self.assertEqual(hook_state(self.pipe), self.clean)
            out = self.pipe("a red fox", "blurry", num_inference_steps=STEPS)
        self.assertFalse(inst.active)
        self.assertTrue(torch.equal(out, self.plain))

    def test_other_threads_calls_do_not_break_the_run(self):
        run = quiet_monitor().start_run()
        errors = []

        def other():
            try:
                self.pipe.text_encoder(torch.zeros(1, 77, dtype=torch.long))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        with gt.instrument(self.pipe, run):
            t = threading.Thread(target=other)
            t.start()
            t.join()
            self.pipe("a", num_inference_steps=2)
        doc = run.finish()
        self.assertEqual(errors, [])
        threads = {s["thread"] for s in doc["steps"]}
        self.assertEqual(len(threads), 2)


class ComfyStyleTest(unittest.TestCase):
    """A ComfyUI MODEL (ModelPatcher -> BaseModel -> diffusion_model) sampled by a k-diffusion
    style loop without a scheduler object (comfy/samplers.py): iterations come from timesteps."""

    def test_patcher_unwrapped_and_iterations_from_timesteps(self):
        class BaseModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.diffusion_model = TinyUNet(16, 768)

        class ModelPatcher:
            def __init__(self, model):
                self.model = model

        patcher = ModelPatcher(BaseModel())
        net = patcher.model.diffusion_model
        context = torch.randn(1, 77, 768)
        x = torch.randn(1, 4, 8, 8)
        run = quiet_monitor().start_run()
        with gt.instrument({"unet": patcher}, run), torch.no_grad():
            for sigma in (14.6, 7.0, 2.1, 0.5, 0.03):
                t = torch.tensor([sigma])
                uncond = net(x, t, context)[0]  # CFG in two calls at one timestep
                cond = net(x, t, context)[0]
                x = x - 0.1 * (uncond + 2.0 * (cond - uncond))
        doc = run.finish()
        s = sampling(doc)
        self.assertEqual(s["iterations"]["count"], 5)
        self.assertEqual(s["counters"]["model_calls"], 10)
        self.assertNotIn("model_evaluations", s["counters"])  # needs the latent batch
        attachment(s, "model input (first call)")
        attachment(s, "model input (last call)")
        self.assertNotIn("forward", net.__dict__)


if __name__ == "__main__":
    unittest.main()
