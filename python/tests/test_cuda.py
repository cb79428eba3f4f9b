"""The torch.cuda allocator probe attached automatically, and the CUDA checks.

On a CPU-only machine (this project's CI): the probe must be absent without any error, and
the tests that need a GPU are skipped with the reason printed. The automatic attachment
itself is also checked in a child process whose `torch` module is a stand-in reporting CUDA
as available (FakeCuda of test_allocator), because no GPU is here.
"""

import os
import subprocess
import sys
import textwrap
import unittest

import torch

import genscope
import genscope.torch as gt
from helpers import metric, quiet_monitor, step_by_name
from tiny_pipeline import TinyPipeline

HAVE_CUDA = torch.cuda.is_available()
NO_CUDA = "no CUDA device (torch.cuda.is_available() is False): GPU checks not run"
MiB = 1 << 20


class AutomaticProbeTest(unittest.TestCase):
    @unittest.skipIf(HAVE_CUDA, "CUDA present: the CPU-only behaviour is not observable")
    def test_cpu_only_torch_gets_no_probe_and_no_error(self):
        self.assertIn("torch", sys.modules)
        monitor = quiet_monitor()
        run = monitor.start_run()
        with run.step("sampling", "x"):
            torch.ones(8).sum()
        doc = run.finish()
        self.assertNotIn("allocator", doc["probes"])
        self.assertEqual(doc["monitoring_errors"], [])
        self.assertIsNone(monitor.usage_statistics()["current_memory_allocated_bytes"])

    def test_attached_when_torch_reports_cuda(self):
        here = os.path.dirname(os.path.abspath(__file__))
        script = textwrap.dedent(f"""
            import sys, types
            sys.path.insert(0, {here!r})
            from test_allocator import FakeCuda

            class Cuda(FakeCuda):
                def is_available(self): return True
                def current_device(self): return 3

            fake = types.ModuleType("torch")
            fake.cuda = Cuda()
            import genscope
            before = genscope.Monitor(nvml=False, sampler=False).start_run().finish()
            sys.modules["torch"] = fake  # the pipeline imports torch after genscope
            auto = genscope.Monitor(nvml=False, sampler=False)
            off = genscope.Monitor(nvml=False, sampler=False, cuda_allocator=False)
            chosen = genscope.Monitor(nvml=False, sampler=False, cuda_allocator=[1, 2])
            for name, m in (("auto", auto), ("off", off), ("chosen", chosen)):
                run = m.start_run()
                with run.step("sampling", "x"):
                    fake.cuda.allocate(1 << 20)
                doc = run.finish()
                names = sorted({{x["name"].split(".")[1] for x in doc["steps"][0]["metrics"]
                                 if x["name"].startswith("alloc.")}})
                print(name, "allocator" in doc["probes"], names, len(doc["monitoring_errors"]))
            print("before", "allocator" in before["probes"])
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.splitlines(), [
            "auto True ['cuda:3'] 0",
            "off False [] 0",
            "chosen True ['cuda:1', 'cuda:2'] 0",
            "before False",
        ])


@unittest.skipUnless(HAVE_CUDA, NO_CUDA)
class CudaTest(unittest.TestCase):
    def test_step_allocator_peaks_equal_torch_max_memory(self):
        monitor = genscope.Monitor(sample_interval_ms=2)
        run = monitor.start_run()
        with run.step("vae_decode", "transient"):
            x = torch.empty(256 * MiB, dtype=torch.uint8, device="cuda")
            y = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
            del x, y
            torch.cuda.synchronize()
            expected_allocated = torch.cuda.max_memory_allocated()
            expected_reserved = torch.cuda.max_memory_reserved()
        doc = run.finish()
        s = step_by_name(doc, "transient")
        device = torch.cuda.current_device()
        allocated = metric(s, f"alloc.cuda:{device}.allocated_bytes")
        reserved = metric(s, f"alloc.cuda:{device}.reserved_bytes")
        self.assertEqual(allocated["peak"], expected_allocated)
        self.assertEqual(reserved["peak"], expected_reserved)
        self.assertEqual(allocated["peak_source"], "exact")
        self.assertGreaterEqual(allocated["peak"], 320 * MiB)

    def test_nvml_process_memory_covers_the_reserved_memory(self):
        monitor = genscope.Monitor(sample_interval_ms=2)
        run = monitor.start_run()
        with run.step("sampling", "hold"):
            x = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            reserved = torch.cuda.memory_reserved()
        doc = run.finish()
        del x
        if "nvml" not in doc["probes"]:
            self.skipTest("NVML did not load: " + str(doc["monitoring_errors"]))
        s = step_by_name(doc, "hold")
        index = torch.cuda.current_device()  # assumes CUDA and NVML number devices alike
        found = [m for m in s["metrics"] if m["name"] == f"gpu{index}.process_used_bytes"]
        if not found or found[0]["peak"] is None:
            # In a container NVML lists host PIDs, so this process may not be found.
            self.skipTest("NVML reports no memory for this process: " +
                          str([e["message"] for e in doc["monitoring_errors"]][:3]))
        self.assertGreaterEqual(found[0]["peak"], reserved)

    def test_instrumented_pipeline_on_cuda_is_unchanged(self):
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        pipe = TinyPipeline(dual=True, device="cuda")
        plain = pipe("a red fox", num_inference_steps=4)
        run = genscope.Monitor().start_run()
        with gt.instrument(pipe, run):
            out = pipe("a red fox", num_inference_steps=4)
        doc = run.finish()
        self.assertTrue(torch.equal(out, plain))
        s = [x for x in doc["steps"] if x["kind"] == "sampling"][0]
        self.assertEqual(s["iterations"]["count"], 4)
        latents = [a for a in s["attachments"] if a["name"] == "latents (last iteration)"][0]
        self.assertEqual(latents["data"]["device"], f"cuda:{torch.cuda.current_device()}")
        self.assertIn("allocator", doc["probes"])


if __name__ == "__main__":
    unittest.main()
