"""Monitor, Run and Step from Python: run documents, exceptions, attempts, files, report."""

import os
import unittest

import genscope
from helpers import quiet_monitor, scratch_dir, step_by_name


class RunTest(unittest.TestCase):
    def setUp(self):
        self.monitor = quiet_monitor()

    def test_step_records_iterations_counters_labels(self):
        run = self.monitor.start_run(pipeline="t2i", model="sdxl-base", architecture="UNet",
                                     parameters={"steps": 3, "resolution": "1024x1024"},
                                     labels={"host_role": "test"})
        with run.step("sampling", "denoise") as step:
            self.assertTrue(step.active)
            step.begin_iterations()
            for _ in range(3):
                step.mark_iteration()
            step.add_counter("frames", 2)
            step.add_counter("frames", 3)
            step.label("sampler", "euler")
            step.label("cfg", 7.5)
        self.assertFalse(step.active)
        doc = run.finish()
        self.assertEqual(doc["schema"], "genscope.run/1")
        self.assertEqual(doc["pipeline"]["name"], "t2i")
        self.assertEqual(doc["pipeline"]["parameters"], {"steps": "3", "resolution": "1024x1024"})
        self.assertEqual(doc["labels"], {"host_role": "test"})
        s = step_by_name(doc, "denoise")
        self.assertEqual(s["kind"], "sampling")
        self.assertEqual(s["status"], "ok")
        self.assertEqual(s["iterations"]["count"], 3)
        self.assertEqual(len(s["iterations"]["durations_ns"]), 3)
        self.assertEqual(s["counters"], {"frames": 5.0})
        self.assertEqual(s["labels"], {"sampler": "euler", "cfg": "7.5"})
        self.assertTrue(s["source"].endswith("test_run.py:" + str(self._line_of("\"denoise\""))),
                        s["source"])
        names = [m["name"] for m in s["metrics"]]
        self.assertIn("process.rss_bytes", names)

    def _line_of(self, needle):
        with open(__file__, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if "run.step(" in line and needle in line:
                    return number
        raise AssertionError(needle)

    def test_step_times_noted_before(self):
        """start_ns / at_ns (time.monotonic_ns()): a step that began or ended at a moment noted
        earlier (the ComfyUI package: the message that started or ended a node)."""
        import time
        with self.monitor.start_run(pipeline="t") as run:
            began = time.monotonic_ns()
            time.sleep(0.03)
            step = run.step("custom", "noted", start_ns=began)
            ended = time.monotonic_ns()
            time.sleep(0.02)
            step.end(at_ns=ended)
            doc = run.finish()
        s = step_by_name(doc, "noted")
        run = self.monitor.start_run(pipeline="t")
        ended = time.monotonic_ns()
        time.sleep(0.03)
        self.assertLess(run.finish(at_ns=ended)["duration_ns"], 30e6)
        self.assertGreaterEqual(s["duration_ns"], 30e6)
        self.assertLess(s["duration_ns"], ended - began + 1)
        self.assertEqual(s["status"], "ok")

    def test_exception_is_recorded_and_propagates_unchanged(self):
        run = self.monitor.start_run(pipeline="t2v")
        boom = ValueError("latent shape (1, 16, 21, 60, 104) does not fit")
        with self.assertRaises(ValueError) as raised:
            with run.step("vae_decode", "decode"):
                raise boom
        self.assertIs(raised.exception, boom)
        doc = run.finish()
        s = step_by_name(doc, "decode")
        self.assertEqual(s["status"], "failed")
        self.assertEqual(s["error"]["type"], "ValueError")
        self.assertEqual(s["error"]["message"], str(boom))

    def test_exception_type_is_module_qualified_for_non_builtins(self):
        run = self.monitor.start_run()
        with self.assertRaises(unittest.SkipTest):
            with run.step("custom", "skip-me"):
                raise unittest.SkipTest("nope")
        s = step_by_name(run.finish(), "skip-me")
        self.assertEqual(s["error"]["type"], "unittest.case.SkipTest")

    def test_nested_steps_skip_and_fail(self):
        run = self.monitor.start_run()
        with run.step("model_loading", "load") as outer:
            with run.step("lora_application", "lora") as inner:
                inner.skip("no LoRA requested")
            outer_id = outer.id
        with run.step("save", "save") as s:
            s.fail("disk full", "OSError")
        doc = run.finish()
        self.assertEqual(step_by_name(doc, "lora")["parent_id"], outer_id)
        self.assertEqual(step_by_name(doc, "lora")["status"], "skipped")
        self.assertEqual(step_by_name(doc, "lora")["error"]["message"], "no LoRA requested")
        self.assertEqual(step_by_name(doc, "load")["parent_id"], -1)
        saved = step_by_name(doc, "save")
        self.assertEqual((saved["status"], saved["error"]["type"]), ("failed", "OSError"))

    def test_attempts_form_a_fallback_chain(self):
        run = self.monitor.start_run()
        with run.step("vae_decode", "decode") as step:
            with step.attempt("direct") as direct:
                raise MemoryError("CUDA out of memory")
            self.assertFalse(direct.ok)
            self.assertTrue(direct.done)
            self.assertEqual(direct.error, "MemoryError: CUDA out of memory")
            with step.attempt("tiled") as tiled:
                pass
            self.assertTrue(tiled.ok)
            self.assertTrue(bool(tiled))
        s = step_by_name(run.finish(), "decode")
        self.assertEqual(s["status"], "ok")
        self.assertEqual([(a["strategy"], a["outcome"]) for a in s["attempts"]],
                         [("direct", "failed"), ("tiled", "ok")])
        self.assertEqual(s["attempts"][0]["error"], "MemoryError: CUDA out of memory")
        self.assertGreaterEqual(s["attempts"][1]["duration_ns"], 0)

    def test_attempt_does_not_swallow_keyboard_interrupt(self):
        run = self.monitor.start_run()
        with self.assertRaises(KeyboardInterrupt):
            with run.step("sampling", "loop") as step:
                with step.attempt("direct"):
                    raise KeyboardInterrupt()
        s = step_by_name(run.finish(), "loop")
        self.assertEqual(s["attempts"][0]["outcome"], "failed")
        self.assertEqual(s["status"], "failed")
        self.assertEqual(s["error"]["type"], "KeyboardInterrupt")

    def test_user_errors_have_stable_names(self):
        run = self.monitor.start_run()
        with self.assertRaises(genscope.Error) as e:
            run.step("denoise", "x")
        self.assertEqual(e.exception.name, "UnknownStepKind")
        self.assertIn("denoise", str(e.exception))
        with self.assertRaises(genscope.Error) as e:
            self.monitor.start_run()
        self.assertEqual(e.exception.name, "RunActive")
        run.finish()
        with self.assertRaises(genscope.Error) as e:
            run.step("custom", "late")
        self.assertEqual(e.exception.name, "RunFinished")
        with self.assertRaises(genscope.Error) as e:
            genscope.Monitor(sample_interval_ms=0)
        self.assertEqual(e.exception.name, "InvalidArgument")

    def test_finish_is_idempotent_and_run_is_a_context_manager(self):
        with self.monitor.start_run(pipeline="ctx") as run:
            with run.step("custom", "a"):
                pass
        self.assertTrue(run.finished)
        first = run.finish()
        self.assertEqual(first["id"], run.finish()["id"])
        self.assertEqual(len(first["steps"]), 1)
        # The monitor accepts a new run once the previous one finished.
        self.monitor.start_run().finish()

    def test_positional_arguments_follow_the_documented_order(self):
        monitor = genscope.Monitor(5, True, False, False)
        run = monitor.start_run("t2v", "wan2.1-t2v-14b", "video DiT", {"frames": 81})
        doc = run.finish()
        self.assertEqual(doc["pipeline"]["model"], "wan2.1-t2v-14b")
        self.assertEqual(doc["pipeline"]["architecture"], "video DiT")
        self.assertEqual(doc["series"]["interval_ns"], 5_000_000)
        self.assertNotIn("system", doc["probes"])
        self.assertNotIn("nvml", doc["probes"])

    def test_disabled_monitor_records_nothing(self):
        monitor = quiet_monitor(enabled=False)
        run = monitor.start_run()
        self.assertFalse(run.active)
        with run.step("sampling", "loop") as step:
            self.assertFalse(step.active)
            step.mark_iteration()
            step.add_counter("items", 1)
        self.assertEqual(step.id, -1)
        doc = run.finish()
        self.assertEqual(doc.get("steps", []), [])

    def test_attach_json_data(self):
        run = self.monitor.start_run()
        with run.step("custom", "a") as step:
            step.attach("text", "prompt", {"characters": 42, "words": ["a", "cat"]})
            step.attach("text", "bad", {"score": float("nan")})
        doc = run.finish()
        attachments = step_by_name(doc, "a")["attachments"]
        self.assertEqual(attachments, [{"type": "text", "name": "prompt",
                                        "data": {"characters": 42, "words": ["a", "cat"]}}])
        errors = [e for e in doc["monitoring_errors"] if e["source"] == "attach"]
        self.assertEqual(len(errors), 1)
        self.assertTrue(errors[0]["message"].startswith("bad: "))

    def test_write_read_render(self):
        run = self.monitor.start_run(pipeline="t2i", model="flux-dev")
        with run.step("text_encoding", "encode prompt") as step:
            step.add_counter("tokens", 77)
        live_report = genscope.render_report(run, plain=True)
        self.assertIn("encode prompt", live_report)
        doc = run.finish()
        path = os.path.join(scratch_dir(), "run.json")
        genscope.write_run(doc, path)
        back = genscope.read_run(path)
        self.assertEqual(back["id"], doc["id"])
        self.assertEqual(back["steps"][0]["counters"], {"tokens": 77.0})
        genscope.write_run(run, path)  # the finished Run object works too
        self.assertEqual(genscope.read_run(path)["id"], doc["id"])
        report = genscope.render_report(back, plain=True)
        self.assertIn("encode prompt", report)
        self.assertIn("flux-dev", report)

    def test_render_html_and_metrics(self):
        run = self.monitor.start_run(pipeline="comfyui", model="sd15")
        with run.step("sampling", "5 KSampler") as step:
            step.begin_iterations()
            step.mark_iteration()
        with run.step("save", "7 SaveImage") as step:
            step.skip("cached")
        doc = run.finish()
        html = genscope.render_html(doc, title="prompt 42")
        self.assertTrue(html.lstrip().lower().startswith("<!doctype html"))
        self.assertIn("<title>prompt 42</title>", html)
        self.assertIn("5 KSampler", html)
        both = genscope.render_html([doc, run])
        self.assertIn("genscope report: comfyui", both)
        text = genscope.render_metrics(doc)
        self.assertIn('genscope_steps_total{kind="sampling",status="ok"} 1', text)
        self.assertIn('genscope_steps_total{kind="save",status="skipped"} 1', text)
        self.assertFalse(text.rstrip().endswith("# EOF"))
        self.assertTrue(genscope.render_metrics(doc, openmetrics=True).rstrip().endswith("# EOF"))
        for bad in ([], [1]):
            with self.assertRaises(genscope.Error) as e:
                genscope.render_html(bad)
            self.assertEqual(e.exception.name, "InvalidArgument")

    def test_read_run_errors(self):
        folder = scratch_dir()
        with self.assertRaises(genscope.Error) as e:
            genscope.read_run(os.path.join(folder, "missing.json"))
        self.assertEqual(e.exception.name, "ReadFailed")
        bad = os.path.join(folder, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write('{"schema": "genscope.run/999"}')
        with self.assertRaises(genscope.Error) as e:
            genscope.read_run(bad)
        self.assertEqual(e.exception.name, "UnsupportedSchema")
        with self.assertRaises(genscope.Error) as e:
            genscope.render_report([1, 2])
        self.assertEqual(e.exception.name, "InvalidArgument")


    def test_a_step_left_open_when_the_interpreter_exits_is_failed_not_ok(self):
        # Issue 20: a step opened without `with` (or never ended) is closed at interpreter exit.
        import subprocess, sys
        log = os.path.join(scratch_dir(), "exit.log")
        script = ("import genscope, sys\n"
                  "m = genscope.Monitor(nvml=False, log_path=sys.argv[1])\n"
                  "run = m.start_run(pipeline='exit-test')\n"
                  "s = run.step('custom', 'left open')\n")
        done = subprocess.run([sys.executable, "-c", script, log], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ))
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(log, encoding="utf-8") as f:
            ends = [line for line in f if "step end: left open" in line]
        self.assertEqual(len(ends), 1, ends)
        self.assertIn("status=failed", ends[0])
        self.assertIn("the Python interpreter exited with the step open", ends[0])


if __name__ == "__main__":
    unittest.main()
