"""python/examples/monitor_loop.py runs and writes a run document that reads back."""

import os
import subprocess
import sys
import unittest

import genscope
from helpers import scratch_dir

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "monitor_loop.py")


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


if __name__ == "__main__":
    unittest.main()
