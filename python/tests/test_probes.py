"""Monitor options reaching the C++ probes: NVML through a fake library, the step log."""

import json
import os
import unittest

import genscope
from helpers import metric, quiet_monitor, scratch_dir, step_by_name

FAKE_NVML = os.environ.get("GENSCOPE_FAKE_NVML", "")
GiB = 1 << 30


@unittest.skipUnless(os.path.exists(FAKE_NVML), "GENSCOPE_FAKE_NVML (the fake NVML) not built")
class NvmlTest(unittest.TestCase):
    def setUp(self):
        scenario = {"driver_version": "550.54", "devices": [{
            "name": "Fake H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "total": 141 * GiB, "used": [10 * GiB, 30 * GiB, 12 * GiB]}]}
        self.path = os.path.join(scratch_dir(), "scenario.json")
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(scenario, f)
        self.saved = os.environ.get("GENSCOPE_FAKE_NVML_SCENARIO")
        os.environ["GENSCOPE_FAKE_NVML_SCENARIO"] = self.path

    def tearDown(self):
        if self.saved is None:
            os.environ.pop("GENSCOPE_FAKE_NVML_SCENARIO", None)
        else:
            os.environ["GENSCOPE_FAKE_NVML_SCENARIO"] = self.saved

    def test_nvml_library_option_loads_the_given_library(self):
        monitor = genscope.Monitor(nvml=True, nvml_library=FAKE_NVML, sampler=False)
        run = monitor.start_run()
        with run.step("vae_decode", "decode"):
            pass
        doc = run.finish()
        self.assertIn("nvml", doc["probes"])
        self.assertEqual(doc["gpus"][0]["name"], "Fake H200")
        self.assertEqual(doc["gpus"][0]["total_bytes"], 141 * GiB)
        used = metric(step_by_name(doc, "decode"), "gpu0.used_bytes")
        self.assertIn(used["before"], (10 * GiB, 30 * GiB, 12 * GiB))

    def test_missing_library_is_a_monitoring_error_not_an_exception(self):
        monitor = genscope.Monitor(nvml=True, nvml_library="/nonexistent/libnvidia-ml.so.1",
                                   sampler=False)
        run = monitor.start_run()
        with run.step("custom", "x"):
            pass
        doc = run.finish()
        self.assertNotIn("nvml", doc["probes"])
        self.assertTrue([e for e in doc["monitoring_errors"] if e["source"] == "nvml"],
                        doc["monitoring_errors"])


class LogTest(unittest.TestCase):
    def test_log_path_receives_step_lines(self):
        path = os.path.join(scratch_dir(), "steps.log")
        monitor = quiet_monitor(log_path=path, sampler=False)
        run = monitor.start_run(pipeline="t2i")
        with run.step("text_encoding", "encode prompt"):
            pass
        run.finish()
        del run, monitor
        with open(path, encoding="utf-8") as f:
            self.assertIn("encode prompt", f.read())


if __name__ == "__main__":
    unittest.main()
