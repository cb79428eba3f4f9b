"""The examples in python/examples run and write run documents that read back."""

import os
import subprocess
import sys
import unittest

import genscope
from helpers import scratch_dir

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
EXAMPLE = os.path.join(EXAMPLES, "monitor_loop.py")


class ExampleTest(unittest.TestCase):
    def test_monitor_loop_example(self):
        path = os.path.join(scratch_dir(), "example.json")
        done = subprocess.run([sys.executable, EXAMPLE, path], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, GENSCOPE_NVML_LIBRARY="/nonexistent"))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("denoise", done.stdout)
        doc = genscope.read_run(path)
        self.assertEqual([s["name"] for s in doc["steps"]],
                         ["load unet", "encode prompt", "initial noise", "denoise", "decode"])
        denoise = doc["steps"][3]
        self.assertEqual(denoise["iterations"]["count"], 20)
        decode = doc["steps"][4]
        self.assertEqual([a["outcome"] for a in decode["attempts"]], ["failed", "ok"])
        self.assertEqual(decode["status"], "ok")

    def test_instrument_pipeline_example(self):
        path = os.path.join(scratch_dir(), "instrumented.json")
        done = subprocess.run([sys.executable, os.path.join(EXAMPLES, "instrument_pipeline.py"),
                               path], capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, GENSCOPE_NVML_LIBRARY="/nonexistent"))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("denoise (unet)", done.stdout)
        doc = genscope.read_run(path)
        self.assertEqual([s["kind"] for s in doc["steps"]],
                         ["model_loading"] + ["text_encoding"] * 4 + ["sampling", "vae_decode"])
        self.assertEqual(doc["steps"][5]["iterations"]["count"], 10)
        self.assertGreater(doc["steps"][0]["counters"]["parameters"], 1e6)


if __name__ == "__main__":
    unittest.main()
